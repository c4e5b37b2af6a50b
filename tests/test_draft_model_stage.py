"""Past ServerArgs, a speculative draft that is a checkpoint of its own
(`--speculative-draft-model-path org/draft`) is loaded from its own config.json, the
profile's `draft_config` (kb/explain/model_weights.py): its ModelConfig is
`ModelConfig.from_server_args(..., model_path=<the draft>, is_draft_model=True)`, whose
quantization is `speculative_draft_model_quantization`, and SGLang's loader builds its
quantization config as the model's (kb/explain/model_loading.py). Followed in the version's
own code on a synthetic repository shaped like SGLang's (none of its code):

- ServerArgs gives the draft the target's `--quantization` when it names none;
- `get_quant_config`, with no quantization_config in config.json, looks for the method's
  config file among the checkpoint's *.json (a Hub snapshot): a repository is described by
  its config.json alone, so a method that needs one raises;
- the draft's class is built from its own config (its heads split across ranks), and its
  load_weights checks it (tied embeddings split across ranks).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from sqlmodel import Session

from kb.explain import explain
from kb.explain.predicates import Profile
from tests import test_loader_stage as quantization
from tests import test_weight_loader_stage as loading
from tests.conftest import one_release_session
from tests.fixture_repos import SERVER_ARGS
from tests.sim_repos import UTILS, UTILS_TEXT

SRT = "python/sglang/srt/"

ARGS = """
import argparse
import dataclasses


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    load_format: str = "auto"
    model_loader_extra_config: str = "{}"
    tp_size: int = 1
    dtype: str = "auto"
    quantization: str = None
    attention_backend: str = "fa3"
    speculative_algorithm: str = None
    speculative_draft_model_path: str = None
    speculative_draft_model_quantization: str = None

    def __post_init__(self):
        if self.speculative_draft_model_quantization is None:
            self.speculative_draft_model_quantization = self.quantization
        if self.speculative_draft_model_quantization == "unquant":
            self.speculative_draft_model_quantization = None

    def check_server_args(self):
        pass

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", type=str, required=True, help="Model weights.")
        parser.add_argument(
            "--load-format", type=str, choices=["auto", "dummy"],
            default=ServerArgs.load_format, help="The format of the weights.",
        )
        parser.add_argument(
            "--model-loader-extra-config", type=str,
            default=ServerArgs.model_loader_extra_config, help="Extra config (JSON).",
        )
        parser.add_argument("--tp-size", type=int, default=1, help="Tensor parallel size.")
        parser.add_argument("--dtype", type=str, default="auto", help="Data type.")
        parser.add_argument(
            "--quantization", type=str, choices=["fp8", "fp8_marlin"], help="Quantization."
        )
        parser.add_argument(
            "--attention-backend", type=str, default="fa3", help="Attention backend."
        )
        parser.add_argument("--speculative-algorithm", type=str, help="Speculative algorithm.")
        parser.add_argument("--speculative-draft-model-path", type=str, help="Draft model.")
        parser.add_argument(
            "--speculative-draft-model-quantization", type=str, help="Draft quantization."
        )
"""

MODEL_CONFIG = """
import torch


class ModelConfig:
    def __init__(self, model_path, quantization=None, is_draft_model=False):
        self.model_path = model_path
        self.quantization = quantization
        self.is_draft_model = is_draft_model
        self.hf_config = None
        self.dtype = torch.bfloat16

    @staticmethod
    def from_server_args(server_args, model_path=None, is_draft_model=False, **kwargs):
        quantization = (
            server_args.speculative_draft_model_quantization
            if is_draft_model
            else server_args.quantization
        )
        return ModelConfig(
            model_path=model_path or server_args.model_path,
            quantization=quantization,
            is_draft_model=is_draft_model,
        )
"""

# fp8_marlin: a method that reads its own config file, as AWQ/GPTQ Marlin's do
MARLIN = """
import torch
from sglang.srt.layers.quantization.base_config import QuantizationConfig


class Fp8MarlinConfig(QuantizationConfig):
    @classmethod
    def get_config_filenames(cls):
        return ["quantize_config.json"]

    def get_min_capability(self):
        return 80

    def get_supported_act_dtypes(self):
        return [torch.bfloat16, torch.half]

    @classmethod
    def from_config(cls, config):
        return cls()
"""

QUANT_INIT = """
from sglang.srt.layers.quantization.fp8 import Fp8Config
from sglang.srt.layers.quantization.fp8_marlin import Fp8MarlinConfig

QUANTIZATION_METHODS = {"fp8": Fp8Config, "fp8_marlin": Fp8MarlinConfig}


def get_quantization_config(quantization):
    return QUANTIZATION_METHODS[quantization]
"""

WEIGHT_UTILS = """
import glob
import os

from huggingface_hub import snapshot_download

from sglang.srt.layers.quantization import get_quantization_config


def get_quant_config(model_config, load_config, packed_modules_mapping):
    quant_cls = get_quantization_config(model_config.quantization)
    hf_quant_config = getattr(model_config.hf_config, "quantization_config", None)
    if hf_quant_config is not None:
        return quant_cls.from_config(hf_quant_config)
    model_name_or_path = model_config.model_path
    is_local = os.path.isdir(model_name_or_path)
    if not is_local:
        hf_folder = snapshot_download(model_name_or_path, allow_patterns="*.json")
    else:
        hf_folder = model_name_or_path
    possible_config_filenames = quant_cls.get_config_filenames()
    if not possible_config_filenames:
        return quant_cls()
    config_files = glob.glob(os.path.join(hf_folder, "*.json"))
    quant_config_files = [
        f for f in config_files if any(f.endswith(x) for x in possible_config_filenames)
    ]
    if len(quant_config_files) == 0:
        raise ValueError(f"Cannot find the config file for {model_config.quantization}")
    return quant_cls()
"""

RUNNER = (
    loading.RUNNER
    + """
    def _get_attention_backend(self):
        return None
"""
)

MODEL = """
from torch import nn

from sglang.srt.distributed import get_tensor_model_parallel_world_size


class ToyForCausalLM(nn.Module):
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__()
        self.config = config
        assert config.num_attention_heads % get_tensor_model_parallel_world_size() == 0

    def load_weights(self, weights):
        if self.config.tie_word_embeddings and get_tensor_model_parallel_world_size() > 1:
            raise ValueError("tied embeddings are not split across ranks")
        for name, loaded_weight in weights:
            pass


EntryClass = ToyForCausalLM
"""

FILES = {
    **loading.FILES,
    **quantization.FILES,
    SERVER_ARGS: ARGS,
    UTILS: UTILS_TEXT + quantization.EXTRA_UTILS,
    SRT + "configs/model_config.py": MODEL_CONFIG,
    SRT + "model_executor/model_runner.py": RUNNER,
    SRT + "model_loader/loader.py": loading.LOADER + quantization.LOADER_TEXT,
    SRT + "model_loader/weight_utils.py": WEIGHT_UTILS,
    SRT + "layers/quantization/__init__.py": QUANT_INIT,
    SRT + "layers/quantization/fp8_marlin.py": MARLIN,
    SRT + "models/toy.py": MODEL,
}
TARGET = {
    "architectures": ["ToyForCausalLM"],
    "torch_dtype": "bfloat16",
    "num_attention_heads": 32,
    "tie_word_embeddings": False,
    "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"},
}
DRAFT = {
    "architectures": ["ToyForCausalLM"],
    "torch_dtype": "bfloat16",
    "num_attention_heads": 8,
    "tie_word_embeddings": False,
}
SPECULATIVE = "--speculative-algorithm STANDALONE --speculative-draft-model-path org/draft"


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    yield from one_release_session(
        tmp_path_factory, "draftmodel", {p: textwrap.dedent(t) for p, t in FILES.items()}
    )


def answer(session: Session, flags: str, draft: dict[str, Any] | None) -> dict[str, Any]:
    data: dict[str, Any] = {"sm": 90, "platform": "cuda", "gpus": 2, "config": TARGET}
    if draft is not None:
        data["draft_config"] = draft
    profile = Profile.parse(data)
    return explain(session, "v0.1.0", f"--model-path org/target {flags}", profile=profile)


def load_errors(session: Session, flags: str, draft: dict[str, Any] | None) -> list[str]:
    return [
        f["message"]
        for f in answer(session, flags, draft)["findings"]
        if f["severity"] == "error" and f.get("stage") == "load"
    ]


def test_the_draft_inherits_a_quantization_its_checkpoint_has_no_config_file_for(
    session: Session,
) -> None:
    """`--quantization fp8_marlin` reaches the draft (ServerArgs copies it): the draft's
    config.json has no quantization_config, and its repository no quantize_config.json."""
    (error,) = load_errors(session, f"--quantization fp8_marlin {SPECULATIVE}", DRAFT)
    assert error.endswith("ValueError: Cannot find the config file for fp8_marlin")
    result = answer(session, f"--quantization fp8_marlin {SPECULATIVE}", DRAFT)
    assert any("org/draft has no file matching *.json" in a for a in result["assumptions"])
    # the draft unquantized, or a method that needs no file: it loads
    unquant = (
        f"--quantization fp8_marlin {SPECULATIVE} --speculative-draft-model-quantization unquant"
    )
    assert load_errors(session, unquant, DRAFT) == []
    assert load_errors(session, f"--quantization fp8 {SPECULATIVE}", DRAFT) == []
    # a draft whose config.json carries its quantization builds it from there
    quantized = {**DRAFT, "quantization_config": {"quant_method": "fp8_marlin"}}
    assert load_errors(session, f"--quantization fp8_marlin {SPECULATIVE}", quantized) == []
    # without the draft's config.json, what it decides is not known
    assert load_errors(session, f"--quantization fp8_marlin {SPECULATIVE}", None) == []


def test_the_draft_s_load_weights_reads_its_own_config(session: Session) -> None:
    """The target's embeddings are untied; the draft's, tied, cannot be split over 2 ranks."""
    tied = {**DRAFT, "tie_word_embeddings": True}
    (error,) = load_errors(session, f"--tp-size 2 {SPECULATIVE}", tied)
    assert "tied embeddings are not split across ranks" in error
    assert load_errors(session, f"--tp-size 2 {SPECULATIVE}", DRAFT) == []
    assert load_errors(session, f"--tp-size 2 {SPECULATIVE}", None) == []
    assert load_errors(session, "--tp-size 2", tied) == []  # no draft: not loaded


def test_the_draft_s_class_is_built_from_its_own_config(session: Session) -> None:
    """32 heads split over 16 ranks, the draft's 8 not (the target's constructor passes)."""
    (error,) = load_errors(session, f"--tp-size 16 {SPECULATIVE}", DRAFT)
    assert error.startswith("assertion fails at toy.py:")
    assert (
        load_errors(session, f"--tp-size 16 {SPECULATIVE}", {**DRAFT, "num_attention_heads": 16})
        == []
    )
    assert load_errors(session, f"--tp-size 16 {SPECULATIVE}", None) == []
