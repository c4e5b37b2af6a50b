"""A synthetic SGLang-shaped repository for the checks past ServerArgs (kb/layer_sites.py):
a quantization config whose get_quant_method returns a method class per layer type (through
a helper taking the classes as keyword arguments, as ModelOpt's configs do), method classes
with guarded raises and asserts at load and at the first forward pass, and a
get_moe_impl_class choosing the MoE layer class from two MoE flags. Made-up code, modelled
on SGLang's shapes."""

from __future__ import annotations

from pathlib import Path

from tests.fixture_repos import SERVER_ARGS, commit, git, write

SRT = "python/sglang/srt/"
QUANT_PACKAGE = SRT + "layers/quantization/__init__.py"
FP4 = SRT + "layers/quantization/fp4.py"
MOE_PACKAGE = SRT + "layers/moe/__init__.py"
MOE_LAYER = SRT + "layers/moe/ep_moe/layer.py"

ARGS = """
import argparse
import dataclasses
from typing import Optional


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    quantization: Optional[str] = None
    moe_a2a_backend: str = "none"
    moe_runner_backend: str = "auto"

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", type=str, required=True, help="Weights.")
        parser.add_argument(
            "--quantization", type=str, choices=["fp4", "plain"], help="Weights."
        )
        parser.add_argument(
            "--moe-a2a-backend", type=str, choices=["none", "deep"], default="none", help="A2A."
        )
        parser.add_argument(
            "--moe-runner-backend",
            type=str,
            choices=["auto", "fast_cutlass", "fast_trt"],
            default="auto",
            help="Runner.",
        )
"""

QUANT_PACKAGE_TEXT = """
from sglang.srt.layers.quantization.fp4 import Fp4Config, PlainConfig

QUANTIZATION_METHODS = {"fp4": Fp4Config, "plain": PlainConfig}
"""

FP4_TEXT = """
from sglang.srt.layers.moe import get_moe_runner_backend
from sglang.srt.server_args import get_global_server_args


class QuantConfig:
    def _pick(self, layer, prefix, *, Linear, Moe):
        if isinstance(layer, LinearBase):
            if self.is_skipped(prefix):
                return UnquantizedLinearMethod()
            return Linear(self)
        elif isinstance(layer, FusedMoE):
            return Moe(self)
        return None


class Fp4Config(QuantConfig):
    def get_quant_method(self, layer, prefix):
        return self._pick(layer, prefix, Linear=Fp4LinearMethod, Moe=Fp4MoEMethod)


class PlainConfig(QuantConfig):
    def get_quant_method(self, layer, prefix):
        return None


class UnquantizedLinearMethod:
    def apply(self, layer, x):
        return x


class Fp4LinearMethod:
    def __init__(self, config):
        self.config = config

    def create_weights(self, layer, size):
        if size % 16 != 0:
            raise ValueError("fp4 weights need a multiple of 16")

    def apply(self, layer, x):
        return x


class MethodBase:
    def apply(self, layer, x):
        raise NotImplementedError


class Fp4MoEMethod(MethodBase):
    def __init__(self, config):
        if not is_sm100_supported():
            raise ValueError("fp4 MoE needs an SM100 GPU")
        self.use_trt = get_moe_runner_backend().is_fast_trt()

    @property
    def use_cutlass(self):
        return get_moe_runner_backend().is_fast_cutlass()

    def process_weights_after_loading(self, layer):
        if self.use_trt:
            assert layer.padded, "fast_trt needs padded weights"

    def apply(self, layer, x):
        if get_global_server_args().moe_a2a_backend == "deep":
            return self._deep(layer, x)
        return x

    def _deep(self, layer, x):
        if self.use_cutlass:
            raise NotImplementedError("deep all-to-all with fast_cutlass")
        return x
"""

MOE_PACKAGE_TEXT = """
def get_moe_a2a_backend():
    return MOE_A2A_BACKEND


def get_moe_runner_backend():
    return MOE_RUNNER_BACKEND
"""

MOE_LAYER_TEXT = """
from typing import TYPE_CHECKING

from sglang.srt.layers.moe import get_moe_a2a_backend, get_moe_runner_backend

_is_npu = is_npu()


class FusedMoE:
    def __init__(self, quant_config):
        self.quant_config = quant_config

    def forward(self, x):
        return self.run_moe_core(x)

    def run_moe_core(self, x):
        return x


class DeepMoE(FusedMoE):
    def __init__(self, quant_config):
        super().__init__(quant_config)
        if _is_npu:
            self.deprecated = False
        else:
            self.deprecated = True

    def run_moe_core(self, x):
        if self.deprecated:
            return super().run_moe_core(x)
        if x.normal:
            if self.use_w4:
                return self.w4(x)
            else:
                assert False, "contiguous is deprecated"
        if TYPE_CHECKING:
            assert isinstance(x, int)
        if get_moe_a2a_backend().is_none():
            raise ValueError("DeepMoE without an all-to-all backend")
        return x

    def w4(self, x):
        assert x.silu, "w4 runs silu only"
        return x


class TrtMoE(FusedMoE):
    def __init__(self, quant_config):
        super().__init__(quant_config)
        assert quant_config is not None, "fast_trt MoE needs a quantized model"


def get_moe_impl_class(quant_config):
    if get_moe_a2a_backend().is_deep():
        return DeepMoE
    if get_moe_runner_backend().is_fast_trt():
        if quant_config is not None and quant_config.get_name() == "fp4":
            from sglang.srt.layers.moe.ep_moe.layer import TrtMoE

            return TrtMoE
    return FusedMoE
"""


def build_layer_sites_repo(root: Path) -> Path:
    repo = root / "layer-sites"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    write(repo, SERVER_ARGS, ARGS)
    write(repo, QUANT_PACKAGE, QUANT_PACKAGE_TEXT)
    write(repo, FP4, FP4_TEXT)
    write(repo, MOE_PACKAGE, MOE_PACKAGE_TEXT)
    write(repo, MOE_LAYER, MOE_LAYER_TEXT)
    commit(repo, "layer sites", "2026-01-15T12:00:00Z", "v1.0.0")
    return repo
