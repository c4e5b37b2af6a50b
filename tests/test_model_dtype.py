"""The model's dtype as SGLang's ModelConfig derives it: transformers reads config.json's
`torch_dtype` (or `dtype`) into a torch dtype under both names, and torch's aliases are one
dtype (`torch.half is torch.float16`). Synthetic modules modelled on SGLang's
`_get_and_verify_dtype`."""

from __future__ import annotations

from typing import Any

import pytest

from kb.explain.abstract_values import Symbol
from tests.test_derived import ARGS, MODEL_CONFIG, run

MODEL_CONFIG_TEXT = """
import torch
from sglang.srt.utils.hf_transformers_utils import get_config

_STR_DTYPE_TO_TORCH_DTYPE = {
    "half": torch.float16,
    "float16": torch.float16,
    "float": torch.float32,
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
}


class ModelConfig:
    def __init__(self, model_path, dtype="auto"):
        self.hf_config = get_config(model_path)
        self.hf_text_config = self.hf_config
        self.dtype = _get_and_verify_dtype(self.hf_text_config, dtype)

    @staticmethod
    def from_server_args(server_args, **kwargs):
        return ModelConfig(model_path=server_args.model_path, dtype=server_args.dtype, **kwargs)


def _get_and_verify_dtype(config, dtype):
    config_dtype = getattr(config, "READ_AS", None)
    if isinstance(config_dtype, str):
        config_dtype = _STR_DTYPE_TO_TORCH_DTYPE.get(config_dtype, None)
    if config_dtype is None:
        config_dtype = torch.float32
    dtype = dtype.lower()
    if dtype == "auto":
        if config_dtype == torch.float32:
            torch_dtype = torch.float16
        else:
            torch_dtype = config_dtype
    else:
        torch_dtype = _STR_DTYPE_TO_TORCH_DTYPE[dtype]
    return torch_dtype
"""

ARGS_TEXT = """
from dataclasses import dataclass
import torch


@dataclass
class ServerArgs:
    model_path: str = "m"
    dtype: str = "auto"
    loaded_as: str = None
    quantizable: bool = None

    def __post_init__(self):
        model_config = self.get_model_config()
        if model_config.dtype == torch.bfloat16:
            self.loaded_as = "bf16"
        elif model_config.dtype == torch.float16:
            self.loaded_as = "fp16"
        else:
            self.loaded_as = "other"
        self.quantizable = model_config.dtype in [torch.bfloat16, torch.half]

    def get_model_config(self):
        from sglang.srt.configs.model_config import ModelConfig

        return ModelConfig.from_server_args(self)
"""


def loaded(read_as: str, dtype: str = "auto", **config: Any) -> tuple[Any, Any]:
    files = {ARGS: ARGS_TEXT, MODEL_CONFIG: MODEL_CONFIG_TEXT.replace("READ_AS", read_as)}
    given = {"dtype": dtype} if dtype != "auto" else {}
    fields = run("FixtureForCausalLM", given, files, **config)
    return fields["loaded_as"], fields["quantizable"]


@pytest.mark.parametrize("read_as", ["dtype", "torch_dtype"])
def test_config_json_s_torch_dtype_is_the_model_s_dtype_under_either_name(read_as: str) -> None:
    assert loaded(read_as, torch_dtype="bfloat16") == ("bf16", True)
    assert loaded(read_as, dtype="bfloat16") == ("bf16", True)


def test_a_float32_checkpoint_loads_as_float16_and_half_is_float16() -> None:
    assert loaded("dtype", torch_dtype="float32") == ("fp16", True)
    assert loaded("dtype", dtype="half", torch_dtype="bfloat16") == ("fp16", True)


def test_torch_s_dtype_aliases_are_one_symbol() -> None:
    assert Symbol("torch.half") == Symbol("torch.float16")
    assert Symbol("torch.float") == Symbol("torch.float32")
    assert Symbol("torch.bfloat16") != Symbol("torch.float16")
