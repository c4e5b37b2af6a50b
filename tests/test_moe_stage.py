"""Past ServerArgs for an MoE model (kb.explain.moe), on synthetic modules shaped like
SGLang's: the scheduler's init_moe_gemm_config calls initialize_moe_config (module globals,
a raise for SBO on SM90), get_moe_impl_class selects the layer class from those globals and
the quantization method's config class, the class is built with its own constructor (not
FusedMoE's), and its run_moe_core reaches an assert for the dispatch output of each mode
DeepEP runs."""

from __future__ import annotations

import ast
from typing import Any

from kb.explain import derived, moe
from kb.explain.frames import Ctx, Frame
from kb.explain.predicates import Profile, Unknown
from kb.explain.simulate import Check, Simulator
from kb.explain.source_modules import Module
from tests import sim_repos

ARGS = "python/sglang/srt/server_args.py"

SERVER_ARGS = """
from dataclasses import dataclass


@dataclass
class ServerArgs:
    model_path: str
    quantization: str = None
    moe_a2a_backend: str = "none"
    moe_runner_backend: str = "auto"
    deepep_mode: str = "auto"
    enable_single_batch_overlap: bool = False

    def __post_init__(self):
        pass
"""

SCHEDULER = """
from sglang.srt.layers.moe import initialize_moe_config


class Scheduler:
    def __init__(self, server_args):
        raise RuntimeError("the constructor must not run")

    def init_moe_gemm_config(self):
        if hasattr(self.model_config.hf_config, "num_experts_per_tok"):
            initialize_moe_config(self.server_args)
"""

MOE_INIT = """
from sglang.srt.layers.moe.utils import (
    get_deepep_mode,
    get_moe_a2a_backend,
    get_moe_runner_backend,
    initialize_moe_config,
)
"""

MOE_UTILS = """
from enum import Enum

import torch

from sglang.srt.utils import is_cuda


class MoeA2ABackend(Enum):
    NONE = "none"
    DEEPEP = "deepep"
    ASCEND_FUSEEP = "ascend_fuseep"

    def is_deepep(self):
        return self == MoeA2ABackend.DEEPEP

    def is_ascend_fuseep(self):
        return self == MoeA2ABackend.ASCEND_FUSEEP


class MoeRunnerBackend(Enum):
    AUTO = "auto"
    FLASHINFER_CUTEDSL = "flashinfer_cutedsl"

    def is_flashinfer_cutedsl(self):
        return self == MoeRunnerBackend.FLASHINFER_CUTEDSL


class DeepEPMode(Enum):
    NORMAL = "normal"
    LOW_LATENCY = "low_latency"
    AUTO = "auto"


MOE_A2A_BACKEND = None
MOE_RUNNER_BACKEND = None
DEEPEP_MODE = None


def initialize_moe_config(server_args):
    global MOE_A2A_BACKEND
    global MOE_RUNNER_BACKEND
    global DEEPEP_MODE
    MOE_A2A_BACKEND = MoeA2ABackend(server_args.moe_a2a_backend)
    MOE_RUNNER_BACKEND = MoeRunnerBackend(server_args.moe_runner_backend)
    DEEPEP_MODE = DeepEPMode(server_args.deepep_mode)
    if server_args.enable_single_batch_overlap and is_cuda():
        if torch.cuda.get_device_capability()[0] == 9:
            raise ValueError("SBO (single batch overlap) is not supported on SM90 GPUs")


def get_moe_a2a_backend():
    global MOE_A2A_BACKEND
    if MOE_A2A_BACKEND is None:
        MOE_A2A_BACKEND = MoeA2ABackend.NONE
    return MOE_A2A_BACKEND


def get_moe_runner_backend():
    return MOE_RUNNER_BACKEND


def get_deepep_mode():
    return DEEPEP_MODE
"""

QUANT_INIT = """
from sglang.srt.layers.quantization.fp8 import Fp8Config
from sglang.srt.layers.quantization.modelopt_quant import ModelOptFp4Config

BASE_QUANTIZATION_METHODS = {
    "fp8": Fp8Config,
    "modelopt_fp4": ModelOptFp4Config,
}
"""

QUANT_BASE = """
from abc import ABC


class QuantizationConfig(ABC):
    pass
"""

MODELOPT = """
from sglang.srt.layers.quantization.base_config import QuantizationConfig


class ModelOptFp4Config(QuantizationConfig):
    def __init__(self, group_size):
        self.group_size = group_size

    @classmethod
    def get_name(cls):
        return "modelopt_fp4"
"""

FP8 = """
from sglang.srt.layers.quantization.base_config import QuantizationConfig


class Fp8Config(QuantizationConfig):
    @classmethod
    def get_name(cls):
        return "fp8"
"""

FUSED = """
import torch


class FusedMoE(torch.nn.Module):
    def __init__(self, num_experts, quant_config=None):
        assert num_experts > 10 ** 9, "FusedMoE's constructor must not be interpreted"
        self.quant_config = quant_config
"""

EP_LAYER = """
from sglang.srt.layers.moe import get_deepep_mode, get_moe_a2a_backend, get_moe_runner_backend
from sglang.srt.layers.moe.fused_moe_triton.layer import FusedMoE
from sglang.srt.layers.quantization.fp8 import Fp8Config


class DeepEPMoE(FusedMoE):
    def __init__(self, num_experts, quant_config=None):
        super().__init__(num_experts=num_experts, quant_config=quant_config)
        if isinstance(quant_config, Fp8Config):
            self.use_w4afp8 = False
        else:
            self.use_w4afp8 = False
        self.deepep_mode = get_deepep_mode()

    def run_moe_core(self, dispatch_output):
        from sglang.srt.layers.moe.token_dispatcher import DispatchOutputChecker

        if DispatchOutputChecker.format_is_deepep_normal(dispatch_output):
            if self.use_w4afp8:
                output = dispatch_output
            else:
                assert False, "forward_deepgemm_contiguous is deprecated"
        elif DispatchOutputChecker.format_is_deepep_ll(dispatch_output):
            if (
                get_moe_runner_backend().is_flashinfer_cutedsl()
                and self.quant_config.get_name() == "modelopt_fp4"
            ):
                output = dispatch_output
            else:
                assert False, "forward_deepgemm_masked is deprecated"
        return output


class NpuFuseEPMoE(DeepEPMoE):
    pass


def get_moe_impl_class(quant_config):
    if get_moe_a2a_backend().is_ascend_fuseep():
        return NpuFuseEPMoE
    if get_moe_a2a_backend().is_deepep():
        return DeepEPMoE
    if quant_config is not None and quant_config.get_name() == "modelopt_fp4":
        return FusedMoE
    return FusedMoE
"""

DISPATCH_INIT = """
from sglang.srt.layers.moe.token_dispatcher.base import DispatchOutputChecker
from sglang.srt.layers.moe.token_dispatcher.deepep import (
    DeepEPLLDispatchOutput,
    DeepEPNormalDispatchOutput,
)
"""

DISPATCH_BASE = """
from enum import Enum


class DispatchOutputChecker:
    @staticmethod
    def format_is_deepep_normal(dispatch_output):
        return dispatch_output.format.is_deepep_normal()

    @staticmethod
    def format_is_deepep_ll(dispatch_output):
        return dispatch_output.format.is_deepep_ll()


class DispatchOutputFormat(Enum):
    DEEPEP_NORMAL = "deepep_normal"
    DEEPEP_LL = "deepep_ll"

    def is_deepep_normal(self):
        return self == DispatchOutputFormat.DEEPEP_NORMAL

    def is_deepep_ll(self):
        return self == DispatchOutputFormat.DEEPEP_LL
"""

DISPATCH_DEEPEP = """
from typing import NamedTuple

from sglang.srt.layers.moe.token_dispatcher.base import DispatchOutputFormat


class DeepEPNormalDispatchOutput(NamedTuple):
    hidden_states: int

    @property
    def format(self):
        return DispatchOutputFormat.DEEPEP_NORMAL


class DeepEPLLDispatchOutput(NamedTuple):
    hidden_states: int

    @property
    def format(self):
        return DispatchOutputFormat.DEEPEP_LL
"""

UTILS = """
def is_cuda():
    return True
"""

SRT = "python/sglang/srt/"
FILES = {
    ARGS: SERVER_ARGS,
    SRT + "managers/scheduler.py": SCHEDULER,
    SRT + "layers/moe/__init__.py": MOE_INIT,
    SRT + "layers/moe/utils.py": MOE_UTILS,
    SRT + "layers/quantization/__init__.py": QUANT_INIT,
    SRT + "layers/quantization/base_config.py": QUANT_BASE,
    SRT + "layers/quantization/modelopt_quant.py": MODELOPT,
    SRT + "layers/quantization/fp8.py": FP8,
    SRT + "layers/moe/fused_moe_triton/layer.py": FUSED,
    SRT + "layers/moe/ep_moe/layer.py": EP_LAYER,
    SRT + "layers/moe/token_dispatcher/__init__.py": DISPATCH_INIT,
    SRT + "layers/moe/token_dispatcher/base.py": DISPATCH_BASE,
    SRT + "layers/moe/token_dispatcher/deepep.py": DISPATCH_DEEPEP,
    sim_repos.UTILS: UTILS,
    sim_repos.MODEL_CONFIG: sim_repos.MODEL_CONFIG_TEXT,
}
MOE_CONFIG = {"architectures": ["Glm4MoeForCausalLM"], "num_experts_per_tok": 8}
FP4 = {**MOE_CONFIG, "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}}


def modules() -> dict[str, Module]:
    return sim_repos.parsed_modules(FILES)


def stages(
    fields: dict[str, Any], profile: dict[str, Any]
) -> tuple[list[Check], list[Check], list[Check], moe.MoeLayer]:
    """The checks of the MoE configuration, of the layer's building and of its first
    forward, in the order deploy.simulate runs them."""
    mods = modules()
    prof = Profile.parse(profile)
    sim = Simulator(
        mods.get,
        mods[ARGS],
        {"model_path": "m", **fields},
        prof,
        given={"model_path", *fields},
        derive=derived,
    )
    result = sim.run()
    assert moe.is_moe(prof)
    starts = [len(result.checks)]
    configure = moe.moe_config(sim)
    assert configure is not None and sim.run_after(configure)
    starts.append(len(result.checks))
    built = moe.MoeLayer()
    # the quantization the loader builds the config of (derived from ModelConfig in a run;
    # these fixtures have no model loader: their checkpoints name it)
    name = fields["quantization"] if "quantization" in fields else checkpoint_method(profile)
    qc = moe.quant_config(sim, name)
    assert sim.run_after(lambda: built.__dict__.update(moe.build_layer(sim, qc).__dict__))
    starts.append(len(result.checks))
    assert sim.run_after(lambda: moe.first_forward(sim, result.fields, built))
    starts.append(len(result.checks))
    parts = [result.checks[a:b] for a, b in zip(starts, starts[1:], strict=False)]
    return parts[0], parts[1], parts[2], built


def checkpoint_method(profile: dict[str, Any]) -> str | None:
    quant = profile["config"].get("quantization_config")
    if not quant:
        return None
    return "modelopt_fp4" if quant.get("quant_algo") == "NVFP4" else str(quant["quant_method"])


def raised(checks: list[Check]) -> list[tuple[str, str]]:
    return [(c.outcome, c.message) for c in checks if c.kind != "warning" and c.outcome != "passed"]


def test_initialize_moe_config_raises_for_sbo_on_sm90() -> None:
    sbo = {"enable_single_batch_overlap": True, "moe_a2a_backend": "deepep"}
    hopper, _, _, _ = stages(sbo, {"sm": 90, "config": MOE_CONFIG})
    assert raised(hopper) == [
        ("fired", "ValueError: SBO (single batch overlap) is not supported on SM90 GPUs")
    ]
    (check,) = [c for c in hopper if c.outcome == "fired"]
    assert check.path == SRT + "layers/moe/utils.py"
    blackwell, _, _, _ = stages(sbo, {"sm": 100, "config": MOE_CONFIG})
    assert raised(blackwell) == []
    # without the GPU it is undecided, never an error
    unsure, _, _, _ = stages(sbo, {"config": MOE_CONFIG})
    assert {outcome for outcome, _ in raised(unsure)} == {"unknown"}


def test_the_globals_it_sets_select_the_layer_class() -> None:
    _, _, _, deepep = stages({"moe_a2a_backend": "deepep"}, {"sm": 100, "config": FP4})
    assert deepep.layer is not None and deepep.layer.cls.name == "DeepEPMoE"
    # its own constructor ran (FusedMoE's did not: its assert would be a check)
    assert deepep.layer.fields["use_w4afp8"] is False
    _, built, _, plain = stages({}, {"sm": 100, "config": FP4})
    assert plain.layer is not None and plain.layer.cls.name == "FusedMoE"
    assert raised(built) == []


def test_deepep_normal_mode_reaches_the_deprecated_assert() -> None:
    normal = {"moe_a2a_backend": "deepep", "deepep_mode": "normal"}
    _, _, forward, _ = stages(normal, {"sm": 100, "config": FP4})
    assert raised(forward) == [("fired", "forward_deepgemm_contiguous is deprecated")]
    (check,) = [c for c in forward if c.outcome == "fired"]
    assert check.path == SRT + "layers/moe/ep_moe/layer.py"
    assert "moe_a2a_backend" in check.reads  # what a fix changes
    # auto runs normal mode for prefill and low latency for decode: both asserts
    _, _, auto, _ = stages({"moe_a2a_backend": "deepep"}, {"sm": 100, "config": FP4})
    assert [m for _, m in raised(auto)] == [
        "forward_deepgemm_contiguous is deprecated",
        "forward_deepgemm_masked is deprecated",
    ]


def test_low_latency_with_cutedsl_and_fp4_passes() -> None:
    ll = {
        "moe_a2a_backend": "deepep",
        "deepep_mode": "low_latency",
        "moe_runner_backend": "flashinfer_cutedsl",
    }
    _, _, forward, _ = stages(ll, {"sm": 100, "config": FP4})
    assert raised(forward) == []
    # fp8 checkpoints do not take that path
    fp8 = {**MOE_CONFIG, "quantization_config": {"quant_method": "fp8"}}
    _, _, forward, _ = stages(ll, {"sm": 100, "config": fp8})
    assert raised(forward) == [("fired", "forward_deepgemm_masked is deprecated")]


def test_what_is_not_decided_is_no_error() -> None:
    """A quantization not known makes the quant config unknown: its get_name() decides
    nothing, so the low-latency path's assert is undecided, not an error."""
    ll = {
        "moe_a2a_backend": "deepep",
        "deepep_mode": "low_latency",
        "moe_runner_backend": "flashinfer_cutedsl",
        "quantization": Unknown(("the quantization",)),
    }
    _, _, forward, _ = stages(ll, {"sm": 100, "config": MOE_CONFIG})
    assert {outcome for outcome, _ in raised(forward)} == {"unknown"}


def test_a_layer_named_for_another_platform_rests_on_an_assumption() -> None:
    """NpuFuseEPMoE on a CUDA GPU: SGLang checks no platform before its kernels fail, so
    the failure is said as resting on that (no fix verifies through it), not claimed."""
    fuseep = {"moe_a2a_backend": "ascend_fuseep"}
    _, cuda, _, layer = stages(fuseep, {"platform": "cuda", "sm": 100, "config": FP4})
    assert layer.layer is not None and layer.layer.cls.name == "NpuFuseEPMoE"
    assert raised(cuda) == [("assumed", "NpuFuseEPMoE is a layer for the npu platform")]
    _, npu, _, _ = stages(fuseep, {"platform": "npu", "config": FP4})
    assert raised(npu) == []


def test_a_global_set_from_a_flag_carries_the_flag_to_what_reads_it() -> None:
    # initialize_moe_config sets MOE_A2A_BACKEND from --moe-a2a-backend: a later stage's
    # test of get_moe_a2a_backend() rests on that flag (what a fix would change)
    mods = modules()
    sim = Simulator(
        mods.get,
        mods[ARGS],
        {"model_path": "m", "moe_a2a_backend": "deepep"},
        Profile.parse({"sm": 100, "config": MOE_CONFIG}),
        given={"model_path", "moe_a2a_backend"},
        derive=derived,
    )
    sim.run()
    configure = moe.moe_config(sim)
    assert configure is not None and sim.run_after(configure)
    sim.reads = set()
    frame = Frame(mods[SRT + "layers/moe/utils.py"], "<test>", {})
    test = ast.parse("get_moe_a2a_backend().is_deepep()", mode="eval").body
    assert sim.eval(test, frame, Ctx()) is True
    assert "moe_a2a_backend" in sim.reads
