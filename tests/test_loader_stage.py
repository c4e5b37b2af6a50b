"""Past ServerArgs, the model loader builds the checkpoint's quantization config and checks
the GPU and the dtype against it (kb/explain/model_loading.py), followed in the version's
own code on a synthetic repository modelled on SGLang's shapes (no SGLang code):

- the method table is a dict literal its module extends under `if is_cuda():`;
- ModelConfig sets `self.quantization` from the flag, then `_verify_quantization()` rewrites
  it from config.json (and looks for a ModelSlim file beside a Hub model: absent);
- `get_quant_config` builds the class from config.json through `from_config`, whose optional
  keys come from `get_from_keys_or` (a ValueError it catches itself), or, with no
  quantization in config.json, `Fp8Config(use_mxfp8=True)` for online MXFP8;
- the loader raises with an f-string when the capability is below the class's minimum.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from sqlmodel import Session

from kb.explain import explain
from kb.explain.predicates import Profile
from tests.conftest import one_release_session
from tests.fixture_repos import SERVER_ARGS
from tests.sim_repos import UTILS, UTILS_TEXT

SRT = "python/sglang/srt/"
LOADER = SRT + "model_loader/loader.py"

ARGS = """
import argparse
import dataclasses


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    quantization: str = None
    dtype: str = "auto"

    def __post_init__(self):
        pass

    def check_server_args(self):
        pass

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", type=str, required=True, help="Model weights.")
        parser.add_argument(
            "--quantization", type=str, choices=["fp8", "mxfp8", "fp4", "mxfp4"],
            default=ServerArgs.quantization, help="Quantization.",
        )
        parser.add_argument("--dtype", type=str, default="auto", help="Data type.")
"""

MODEL_CONFIG = """
from pathlib import Path

import torch
from sglang.srt.layers.quantization import QUANTIZATION_METHODS
from sglang.srt.utils.common import get_config


class ModelConfig:
    def __init__(self, model_path, quantization=None, dtype="auto"):
        self.model_path = model_path
        self.quantization = quantization
        self.hf_config = get_config(model_path)
        self.dtype = torch.bfloat16
        self._verify_quantization()

    @staticmethod
    def from_server_args(server_args, **kwargs):
        return ModelConfig(
            model_path=server_args.model_path,
            quantization=server_args.quantization,
            dtype=server_args.dtype,
        )

    def _find_slim_config(self):
        if Path(self.model_path, "quant_model_description.json").is_file():
            return {"quant_method": "modelslim"}
        return None

    def _verify_quantization(self):
        quant_cfg = self._find_slim_config() or getattr(
            self.hf_config, "quantization_config", None
        )
        if quant_cfg is not None:
            quant_method = quant_cfg.get("quant_method", "")
            for _, method in QUANTIZATION_METHODS.items():
                override = method.override_quantization_method(quant_cfg, self.quantization)
                if override:
                    quant_method = override
                    break
            if self.quantization is None:
                self.quantization = quant_method
"""

QUANT_INIT = """
from sglang.srt.layers.quantization.fp4 import Fp4Config, Mxfp4Config
from sglang.srt.layers.quantization.fp8 import Fp8Config
from sglang.srt.utils.common import is_cuda

BASE_METHODS = {"fp8": Fp8Config, "mxfp8": Fp8Config, "fp4": Fp4Config}
if is_cuda():
    BASE_METHODS.update({"mxfp4": Mxfp4Config})
QUANTIZATION_METHODS = {**BASE_METHODS}


def get_quantization_config(quantization):
    if quantization not in QUANTIZATION_METHODS:
        raise ValueError(f"Invalid quantization method: {quantization}")
    return QUANTIZATION_METHODS[quantization]
"""

QUANT_BASE = """
class QuantizationConfig:
    @classmethod
    def override_quantization_method(cls, hf_quant_cfg, user_quant):
        return None

    @staticmethod
    def get_from_keys(config, keys):
        for key in keys:
            if key in config:
                return config[key]
        raise ValueError(f"Cannot find any of {keys} in the model's quantization config.")

    @staticmethod
    def get_from_keys_or(config, keys, default):
        try:
            return QuantizationConfig.get_from_keys(config, keys)
        except ValueError:
            return default

    @classmethod
    def get_config_filenames(cls):
        return []
"""

FP8 = """
import torch
from sglang.srt.layers.quantization.base_config import QuantizationConfig


class Fp8Config(QuantizationConfig):
    def __init__(self, use_mxfp8=False, weight_block_size=None):
        self.use_mxfp8 = use_mxfp8
        self.weight_block_size = weight_block_size

    def get_min_capability(self):
        return 100 if self.use_mxfp8 else 80

    def get_supported_act_dtypes(self):
        return [torch.bfloat16, torch.half]

    @classmethod
    def from_config(cls, config):
        method = cls.get_from_keys(config, ["quant_method"])
        cls.get_from_keys(config, ["activation_scheme"])
        block = cls.get_from_keys_or(config, ["weight_block_size"], None)
        return cls(use_mxfp8="mxfp8" in method, weight_block_size=block)
"""

FP4 = """
import torch
from sglang.srt.layers.quantization.base_config import QuantizationConfig


class Fp4Config(QuantizationConfig):
    @classmethod
    def get_min_capability(cls):
        return 100

    @classmethod
    def get_supported_act_dtypes(cls):
        return [torch.bfloat16, torch.half]

    @classmethod
    def override_quantization_method(cls, hf_quant_cfg, user_quant):
        if hf_quant_cfg.get("quant_algo") == "FP4":
            return "fp4"
        return None

    @classmethod
    def from_config(cls, config):
        return cls()


class Mxfp4Config(Fp4Config):
    @classmethod
    def get_min_capability(cls):
        return 90
"""

WEIGHT_UTILS = """
import os

from sglang.srt.layers.quantization import get_quantization_config
from sglang.srt.layers.quantization.fp8 import Fp8Config


def get_quant_config(model_config, load_config, packed_modules_mapping):
    quant_cls = get_quantization_config(model_config.quantization)
    hf_quant_config = getattr(model_config.hf_config, "quantization_config", None)
    if hf_quant_config is not None:
        hf_quant_config["packed_modules_mapping"] = packed_modules_mapping
        return quant_cls.from_config(hf_quant_config)
    if not os.path.isdir(model_config.model_path):
        hf_folder = snapshot_download(model_config.model_path)
    if not quant_cls.get_config_filenames():
        if model_config.quantization == "mxfp8":
            return Fp8Config(use_mxfp8=True)
        return quant_cls()
    raise ValueError(f"Cannot find the config file for {model_config.quantization}")
"""

LOADER_TEXT = """
from sglang.srt.model_loader.weight_utils import get_quant_config
from sglang.srt.utils.common import get_device_capability


def _get_quantization_config(model_config, load_config, packed_modules_mapping):
    if model_config.quantization is not None:
        quant_config = get_quant_config(model_config, load_config, packed_modules_mapping)
        major, minor = get_device_capability()
        capability = major * 10 + minor
        if capability < quant_config.get_min_capability():
            raise ValueError(
                f"The quantization method {model_config.quantization} is not supported for "
                f"the current GPU. Minimum capability: {quant_config.get_min_capability()}. "
                f"Current capability: {capability}."
            )
        supported_dtypes = quant_config.get_supported_act_dtypes()
        if model_config.dtype not in supported_dtypes:
            raise ValueError(f"{model_config.dtype} is not supported")
        return quant_config
    return None
"""

EXTRA_UTILS = """

def is_cuda():
    return torch.cuda.is_available()


def get_device_capability(device_id=0):
    return torch.cuda.get_device_capability(device_id)


def get_config(model):
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(model)
"""

FILES = {
    SERVER_ARGS: ARGS,
    UTILS: UTILS_TEXT + EXTRA_UTILS,
    SRT + "configs/model_config.py": MODEL_CONFIG,
    SRT + "layers/quantization/__init__.py": QUANT_INIT,
    SRT + "layers/quantization/base_config.py": QUANT_BASE,
    SRT + "layers/quantization/fp8.py": FP8,
    SRT + "layers/quantization/fp4.py": FP4,
    SRT + "model_loader/weight_utils.py": WEIGHT_UTILS,
    LOADER: LOADER_TEXT,
}
LLAMA = {"architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16"}
FP8_CFG = {"quant_method": "fp8", "activation_scheme": "dynamic"}
BLOCK_FP8 = {**LLAMA, "quantization_config": {**FP8_CFG, "weight_block_size": [1]}}
FP4_CKPT = {**LLAMA, "quantization_config": {"quant_method": "modelopt", "quant_algo": "FP4"}}


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    yield from one_release_session(
        tmp_path_factory, "loaderstage", {p: textwrap.dedent(t) for p, t in FILES.items()}
    )


def loader_errors(session: Session, flags: str, config: dict[str, Any], sm: int) -> list[str]:
    profile = Profile.parse({"sm": sm, "platform": "cuda", "config": config})
    result = explain(session, "v0.1.0", f"--model-path org/model {flags}", profile=profile)
    return [
        f["message"]
        for f in result["findings"]
        if f["severity"] == "error" and f.get("stage") == "load"
    ]


def test_online_mxfp8_needs_sm100_at_the_loader(session: Session) -> None:
    (hopper,) = loader_errors(session, "--quantization mxfp8", LLAMA, 90)
    # the f-string with the values the run knows
    assert hopper == (
        "raises at loader.py:11: ValueError: The quantization method mxfp8 is not supported"
        " for the current GPU. Minimum capability: 100. Current capability: 90."
    )
    assert loader_errors(session, "--quantization mxfp8", LLAMA, 100) == []
    # no quantization at all: no quantization config, no check
    assert loader_errors(session, "", LLAMA, 80) == []


def test_a_checkpoint_s_own_quantization_is_read_from_config_json(session: Session) -> None:
    """fp8 from config.json: its optional block size comes through get_from_keys_or, whose
    caught ValueError is no error; an FP4 checkpoint is found by the class's override."""
    assert loader_errors(session, "", BLOCK_FP8, 80) == []
    assert loader_errors(session, "", {**BLOCK_FP8, "quantization_config": FP8_CFG}, 80) == []
    (fp4,) = loader_errors(session, "", FP4_CKPT, 90)
    assert "The quantization method fp4 is not supported" in fp4


def test_a_method_the_module_adds_under_a_platform_test(session: Session) -> None:
    """mxfp4 is in the table only on CUDA (`if is_cuda(): ....update(...)`): known there."""
    assert loader_errors(session, "--quantization mxfp4", LLAMA, 90) == []
    (old,) = loader_errors(session, "--quantization mxfp4", LLAMA, 80)
    assert "Minimum capability: 90. Current capability: 80." in old


def test_a_profile_naming_only_the_method_leaves_the_loader_undecided(session: Session) -> None:
    """Without config.json the profile says the quantization method, not its config: the
    loader's reading of the config's other keys is not run (a missing `activation_scheme`
    is no error of the checkpoint's)."""
    profile = Profile.parse({"sm": 90, "platform": "cuda", "arch": "Llama", "quant": "fp8"})
    result = explain(session, "v0.1.0", "--model-path org/model", profile=profile)
    assert [f["message"] for f in result["findings"] if f["severity"] == "error"] == []
