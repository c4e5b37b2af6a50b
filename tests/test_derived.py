"""What ServerArgs reads of SGLang's ModelConfig is derived by interpreting the version's own
model_config.py over the profile's config.json (kb/explain/derived.py); synthetic code only."""

from __future__ import annotations

import textwrap
from typing import Any

from kb.explain import derived
from kb.explain.predicates import Profile, Unknown
from kb.explain.simulate import Simulator
from kb.explain.source_modules import Module, parse_module

ARGS = "python/sglang/srt/server_args.py"
MODEL_CONFIG = "python/sglang/srt/configs/model_config.py"

MODEL_CONFIG_TEXT = """
from sglang.srt.utils.hf_transformers_utils import get_config

VISION_ARCHS = ("FixtureVLForConditionalGeneration",)
multimodal_model_archs = [*VISION_ARCHS, "OtherVLModel"]


class ModelConfig:
    def __init__(self, model_path, enable_multimodal=None, context_length=None):
        self.model_path = model_path
        self.hf_config = get_config(model_path)
        self.hf_text_config = self.hf_config
        if enable_multimodal is None:
            disabled = ["FixtureTextOnlyVL"]
            if self.hf_config.architectures[0] in disabled:
                enable_multimodal = False
            else:
                enable_multimodal = True
        self.is_multimodal = enable_multimodal and is_multimodal_model(
            self.hf_config.architectures
        )
        self._derive_sinks()
        self._derive_context_length(context_length)

    @staticmethod
    def from_server_args(server_args, model_path=None, **kwargs):
        return ModelConfig(
            model_path=model_path or server_args.model_path,
            enable_multimodal=server_args.enable_multimodal,
            context_length=server_args.context_length,
            **kwargs,
        )

    def _derive_sinks(self):
        self.has_sinks = self._detect_sinks()

    def _detect_sinks(self):
        archs = self.hf_config.architectures or []
        return any(a in archs for a in ("SinkForCausalLM",))

    def _derive_context_length(self, context_length):
        derived_context_len = read_context_length(self.hf_config)
        if context_length is not None:
            self.context_len = context_length
        else:
            self.context_len = derived_context_len
        self.hf_config.context_len = self.context_len

    def get_total_num_kv_heads(self):
        for attr in ["num_kv_heads", "num_key_value_heads"]:
            value = getattr(self.hf_text_config, attr, None)
            if value is not None:
                return value
        return self.hf_text_config.num_attention_heads

    def get_num_kv_heads(self, tensor_parallel_size):
        return max(1, self.get_total_num_kv_heads() // tensor_parallel_size)


def is_multimodal_model(model_architectures):
    return any(arch in model_architectures for arch in multimodal_model_archs)
"""
HF_UTILS = "python/sglang/srt/utils/hf_transformers_utils.py"
HF_UTILS_TEXT = """
from transformers import AutoConfig


def get_config(model):
    config = AutoConfig.from_pretrained(model)
    return config
"""
ARGS_TEXT = """
from dataclasses import dataclass
from typing import Optional


@dataclass
class ServerArgs:
    model_path: str = "m"
    tp_size: int = 1
    enable_multimodal: Optional[bool] = None
    context_length: Optional[int] = None
    mem_fraction_static: Optional[float] = None
    attention_backend: Optional[str] = None
    chunked_prefill_size: Optional[int] = None
    cuda_graph_max_bs: Optional[int] = None

    def __post_init__(self):
        from sglang.srt.configs.model_config import ModelConfig

        # some versions build their own ModelConfig from the server args, not through
        # get_model_config(): the same derivation
        if ModelConfig.from_server_args(self).is_multimodal:
            self.cuda_graph_max_bs = 8
        else:
            self.cuda_graph_max_bs = 16
        model_config = self.get_model_config()
        if model_config.is_multimodal:
            self.mem_fraction_static = 0.7
        else:
            self.mem_fraction_static = 0.8
        if model_config.has_sinks:
            self.attention_backend = "triton"
        elif model_config.get_num_kv_heads(self.tp_size) >= 4:
            self.attention_backend = "flashinfer"
        else:
            self.attention_backend = "fa3"
        if model_config.context_len > 8192:
            self.chunked_prefill_size = 4096

    def get_model_config(self):
        from sglang.srt.configs.model_config import ModelConfig

        if hasattr(self, "model_config"):
            return self.model_config
        self.model_config = ModelConfig.from_server_args(self)
        return self.model_config
"""


def run(
    arch: str, fields: dict[str, Any], files: dict[str, str] | None = None, **config: Any
) -> dict[str, Any]:
    mods: dict[str, Module] = {}
    for path, text in {
        ARGS: ARGS_TEXT,
        MODEL_CONFIG: MODEL_CONFIG_TEXT,
        HF_UTILS: HF_UTILS_TEXT,
        **(files or {}),
    }.items():
        mod = parse_module(path, textwrap.dedent(text))
        assert mod is not None
        mods[path] = mod
    profile = Profile.parse({"sm": 90, "config": {"architectures": [arch], **config}})
    start = {"model_path": "m", "tp_size": 1, "enable_multimodal": None, "context_length": None}
    start.update(fields)
    sim = Simulator(mods.get, mods[ARGS], start, profile, given=set(fields), derive=derived)
    result = sim.run()
    assert not result.errors
    return result.fields


def test_a_derived_bool_comes_from_the_architecture_list() -> None:
    config = {"num_attention_heads": 8}
    assert run("FixtureVLForConditionalGeneration", {}, **config)["mem_fraction_static"] == 0.7
    assert run("LlamaForCausalLM", {}, **config)["mem_fraction_static"] == 0.8
    # the constructor's own default: a listed text-only variant is not multimodal
    assert run("FixtureTextOnlyVL", {}, **config)["mem_fraction_static"] == 0.8
    # ... and what ServerArgs passes to it counts: --enable-multimodal false
    fields = {"enable_multimodal": False}
    assert run("OtherVLModel", fields, **config)["mem_fraction_static"] == 0.8


def test_a_model_config_built_by_the_server_args_own_call_is_derived_too() -> None:
    config = {"num_attention_heads": 8}
    assert run("FixtureVLForConditionalGeneration", {}, **config)["cuda_graph_max_bs"] == 8
    assert run("LlamaForCausalLM", {}, **config)["cuda_graph_max_bs"] == 16


def test_a_derived_bool_from_a_helper_the_constructor_calls() -> None:
    assert run("SinkForCausalLM", {}, num_attention_heads=8)["attention_backend"] == "triton"


def test_a_derived_count_is_kv_heads_per_tensor_parallel_rank() -> None:
    config = {"num_attention_heads": 32, "num_key_value_heads": 8}
    assert run("LlamaForCausalLM", {"tp_size": 1}, **config)["attention_backend"] == "flashinfer"
    assert run("LlamaForCausalLM", {"tp_size": 2}, **config)["attention_backend"] == "flashinfer"
    assert run("LlamaForCausalLM", {"tp_size": 4}, **config)["attention_backend"] == "fa3"
    # no kv-head count in config.json: the attention heads
    assert run("LlamaForCausalLM", {"tp_size": 8}, num_attention_heads=64)["attention_backend"] == (
        "flashinfer"
    )


def test_what_the_interpreter_cannot_decide_stays_unknown_and_says_what() -> None:
    # context_len is set by a helper that takes an argument, from a function not held
    value = run("LlamaForCausalLM", {}, num_attention_heads=8)["chunked_prefill_size"]
    assert isinstance(value, Unknown)
    assert any("context_len" in need for need in value.needs)


def test_a_field_a_helper_sets_on_either_branch_is_that_helper_run_on_its_arguments() -> None:
    # `self._derive_context_length(context_length)`: --context-length decides it
    fields = {"context_length": 16384}
    assert run("LlamaForCausalLM", fields, num_attention_heads=8)["chunked_prefill_size"] == 4096
    fields = {"context_length": 4096}
    assert run("LlamaForCausalLM", fields, num_attention_heads=8)["chunked_prefill_size"] is None


# (snapshot-2026-05-01: hf_transformers_utils became a shim star-importing a package that
# imports its functions relatively)
SHIM_FILES = {
    MODEL_CONFIG: MODEL_CONFIG_TEXT.replace(
        "import get_config\n", "import get_config, read_context_length\n"
    ),
    HF_UTILS: "from sglang.srt.utils.hf_package import *  # noqa\n",
    "python/sglang/srt/utils/hf_package/__init__.py": (
        "from .common import read_context_length\nfrom ..hf_utils_more import get_config\n"
    ),
    "python/sglang/srt/utils/hf_package/common.py": (
        "def read_context_length(config):\n    return config.max_position_embeddings\n"
    ),
    "python/sglang/srt/utils/hf_utils_more.py": HF_UTILS_TEXT,
}


def test_a_function_re_exported_by_star_and_relative_imports_is_followed() -> None:
    config = {"num_attention_heads": 8}
    fields: dict[str, Any] = {}
    long = run("LlamaForCausalLM", fields, SHIM_FILES, max_position_embeddings=16384, **config)
    assert long["chunked_prefill_size"] == 4096
    short = run("LlamaForCausalLM", fields, SHIM_FILES, max_position_embeddings=4096, **config)
    assert short["chunked_prefill_size"] is None


GUARDED = MODEL_CONFIG_TEXT.replace(
    "        self._derive_sinks()\n",
    """        self._derive_sinks()
        self.hybrid_meta = None
        quant_cfg = getattr(self.hf_config, "quantization_config", None)
        if quant_cfg is not None and quant_cfg.get("quant_algo", "") == "MIXED":
            self.hybrid_meta = {"group_size": int(quant_cfg["group_size"])}
""",
)


def hybrid_meta(**config: Any) -> Any:
    mods: dict[str, Module] = {}
    for path, text in {ARGS: ARGS_TEXT, MODEL_CONFIG: GUARDED, HF_UTILS: HF_UTILS_TEXT}.items():
        mod = parse_module(path, textwrap.dedent(text))
        assert mod is not None
        mods[path] = mod
    arch = {"architectures": ["LlamaForCausalLM"], "num_attention_heads": 8}
    profile = Profile.parse({"sm": 90, "config": {**arch, **config}})
    start = {"model_path": "m", "tp_size": 1, "enable_multimodal": None, "context_length": None}
    sim = Simulator(mods.get, mods[ARGS], start, profile, derive=derived)
    sim.run()
    return derived.model_config_attr(sim, "hybrid_meta")


def test_a_field_set_then_set_again_under_a_top_level_if_is_decided_by_the_if() -> None:
    assert hybrid_meta() is None
    assert hybrid_meta(quantization_config={"quant_algo": "FP8"}) is None
    mixed = {"quant_algo": "MIXED", "group_size": 16}
    assert hybrid_meta(quantization_config=mixed) == {"group_size": 16}


def test_a_multimodal_model_s_text_config_is_its_language_model_s() -> None:
    # ModelConfig.hf_text_config is the sub-config get_hf_text_config picks: the kv heads
    # per rank come from config.json's text_config (8 // 4 = 2 -> fa3 here)
    text = {"num_attention_heads": 32, "num_key_value_heads": 8}
    fields = {"tp_size": 4}
    assert run("Llama4ForConditionalGeneration", fields, text_config=text)["attention_backend"] == (
        "fa3"
    )
    # a Llava*ForCausalLM keeps its top-level config (SGLang's own Llava classes)
    llava = run(
        "LlavaLlamaForCausalLM",
        fields,
        text_config=text,
        num_attention_heads=64,
        num_key_value_heads=64,
    )
    assert llava["attention_backend"] == "flashinfer"
    # ... where a key only its text_config has is not known (whether the config class
    # answers it from its text config is transformers' version's)
    unsure = run("LlavaLlamaForCausalLM", fields, text_config=text, num_attention_heads=64)
    assert isinstance(unsure["attention_backend"], Unknown)
    # two sub-configs: which one SGLang reads depends on the version's order, not decided
    both = run("OmniForConditionalGeneration", fields, text_config=text, llm_config=text)
    assert isinstance(both["attention_backend"], Unknown)
