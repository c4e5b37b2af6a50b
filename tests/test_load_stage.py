"""Past ServerArgs: the main model's ModelRunner building its attention backend from the
version's registry (`ATTENTION_BACKENDS[name](runner)`, filled by a decorator), followed by
the same interpreter on synthetic modules. A check there is a finding of the `load` stage;
module state set at run time (`global _server_args`) and values computed at import
(`_is_musa = is_musa()`) are not taken for their literal defaults."""

from __future__ import annotations

import textwrap
from typing import Any

from kb.explain import derived
from kb.explain.predicates import Profile
from kb.explain.simulate import Check, Simulator
from kb.explain.source_modules import Module, parse_module
from tests import sim_repos
from tests.sim_repos import REGISTER_ATTENTION_BACKEND

ARGS = "python/sglang/srt/server_args.py"
RUNNER = "python/sglang/srt/model_executor/model_runner.py"
REGISTRY = "python/sglang/srt/layers/attention/attention_registry.py"

SERVER_ARGS = """
from dataclasses import dataclass

from sglang.srt.utils import is_sm90_supported


@dataclass
class ServerArgs:
    model_path: str
    attention_backend: str = None
    prefill_attention_backend: str = None
    decode_attention_backend: str = None
    speculative_algorithm: str = None
    speculative_draft_attention_backend: str = None

    def __post_init__(self):
        if self.attention_backend is None:
            self.attention_backend = "fa3" if is_sm90_supported() else "flashinfer"

    def get_attention_backends(self):
        prefill = self.prefill_attention_backend or self.attention_backend
        decode = self.decode_attention_backend or self.attention_backend
        return prefill, decode

_global_server_args = None


def get_global_server_args():
    if _global_server_args is None:
        raise ValueError("Global server args is not set yet!")
    return _global_server_args


def set_global_server_args(server_args):
    global _global_server_args
    _global_server_args = server_args
"""

MODEL_RUNNER = """
from sglang.srt.configs.model_config import AttentionArch
from sglang.srt.layers.attention.attention_registry import ATTENTION_BACKENDS
from sglang.srt.server_args import get_global_server_args


class ModelRunner:
    def __init__(self, model_config, gpu_id, server_args):
        self.model_config = model_config
        self.server_args = server_args
        self.use_mla_backend = self.model_config.attention_arch == AttentionArch.MLA

    def _get_attention_backend(self):
        if get_global_server_args().attention_backend == "none":
            return None
        draft_backend = self.server_args.speculative_draft_attention_backend
        if self.is_draft_worker and draft_backend:
            return self._from_str(draft_backend)
        self.prefill_str, self.decode_str = self.server_args.get_attention_backends()
        if self.decode_str != self.prefill_str:
            return (self._from_str(self.prefill_str), self._from_str(self.decode_str))
        return self._from_str(self.server_args.attention_backend)

    def _from_str(self, backend_str):
        if backend_str not in ATTENTION_BACKENDS:
            raise ValueError(f"Invalid attention backend: {backend_str}")
        return ATTENTION_BACKENDS[backend_str](self)
"""

ATTENTION_REGISTRY = (
    """
from typing import Optional

from sglang.srt.utils import get_device_capability, is_musa

ATTENTION_BACKENDS = {}
_is_musa = is_musa()


"""
    + REGISTER_ATTENTION_BACKEND
    + """

@register_attention_backend("flashinfer")
def create_flashinfer_backend(runner):
    return "FlashInferAttnBackend"


@register_attention_backend("fa3")
def create_flashattention_v3_backend(runner):
    major, minor = get_device_capability()
    if not _is_musa:
        assert (major == 8 and not runner.use_mla_backend) or major == 9, (
            "FlashAttention v3 Backend requires SM>=80 and SM<=90."
        )
        return "FlashAttentionBackend"
    else:
        assert major == 3 and minor >= 1, "FlashAttention v3 Backend requires MP>=31."
        return "MusaFlashAttentionBackend"


# a global filled on first use (FlashInfer's GDN kernels' availability)
_kernels_available: Optional[bool] = None  # (annotated, as FlashInfer GDN's is)


def _kernels():
    global _kernels_available
    if _kernels_available is None:
        _kernels_available = get_device_capability()[0] >= 9
    return _kernels_available


@register_attention_backend("lazy")
def create_lazy_kernel_backend(runner):
    if not _kernels():
        raise RuntimeError("the kernels need SM90 or newer")
    return "LazyKernelBackend"


@register_attention_backend("trtllm_mla")
def create_trtllm_mla_backend(runner):
    if not runner.use_mla_backend:
        raise ValueError("trtllm_mla backend can only be used with MLA models.")
    return "TRTLLMMLABackend"
"""
)

UTILS = """
import torch


def is_musa():
    return False


def is_sm90_supported():
    return False


def get_device_capability(device_id=0):
    return torch.cuda.get_device_capability(device_id)
"""


def modules() -> dict[str, Module]:
    files = {
        ARGS: SERVER_ARGS,
        RUNNER: MODEL_RUNNER,
        REGISTRY: ATTENTION_REGISTRY,
        sim_repos.UTILS: UTILS,
        sim_repos.MODEL_CONFIG: sim_repos.MODEL_CONFIG_TEXT,
    }
    out = {}
    for path, text in files.items():
        mod = parse_module(path, textwrap.dedent(text))
        assert mod is not None
        out[path] = mod
    return out


def load_checks(
    fields: dict[str, Any], profile: dict[str, Any] | None, draft: bool = False
) -> list[Check]:
    """The checks of the load stage (the run of ServerArgs, then the backend's building, by
    the main model's runner or the draft model's)."""
    mods = modules()
    sim = Simulator(
        mods.get,
        mods[ARGS],
        {"model_path": "m", **fields},
        Profile.parse(profile),
        given={"model_path", *fields},
        derive=derived,
    )
    result = sim.run()
    start = len(result.checks)
    build = derived.runner_method(sim, "_get_attention_backend", draft)
    assert build is not None
    assert sim.run_after(build)
    return result.checks[start:]


def raised(checks: list[Check]) -> list[tuple[str, str]]:
    return [(c.outcome, c.message) for c in checks if c.kind != "warning" and c.outcome != "passed"]


def test_the_registered_backend_checks_the_gpu() -> None:
    fa3 = {"attention_backend": "fa3"}
    blackwell = load_checks(fa3, {"arch": "LlamaForCausalLM", "sm": 100})
    assert raised(blackwell) == [("fired", "FlashAttention v3 Backend requires SM>=80 and SM<=90.")]
    (check,) = [c for c in blackwell if c.outcome == "fired"]
    assert check.path == REGISTRY
    assert "attention_backend" in check.reads  # what chose the backend: what a fix changes
    # Hopper passes; the module's `_is_musa = is_musa()` is computed, not taken as true
    assert raised(load_checks(fa3, {"arch": "LlamaForCausalLM", "sm": 90})) == []
    # without the GPU the check is undecided, never an error
    unsure = raised(load_checks(fa3, None))
    assert unsure and {outcome for outcome, _ in unsure} == {"unknown"}


def test_the_runner_derives_its_fields_from_the_model() -> None:
    """use_mla_backend is set once in ModelRunner.__init__ from the model config."""
    trtllm = {"attention_backend": "trtllm_mla"}
    llama = load_checks(trtllm, {"arch": "LlamaForCausalLM", "sm": 100})
    assert raised(llama) == [
        ("fired", "ValueError: trtllm_mla backend can only be used with MLA models.")
    ]
    deepseek = load_checks(trtllm, {"arch": "DeepNetV3ForCausalLM", "sm": 100})
    assert raised(deepseek) == []


def test_a_global_set_at_run_time_is_not_its_literal_default() -> None:
    """`_global_server_args = None` is rebound by set_global_server_args(): read before
    the run sets it, it is unknown (here: past ServerArgs, the server args themselves), so
    get_global_server_args() raises nothing."""
    checks = load_checks({"attention_backend": "flashinfer"}, {"arch": "LlamaForCausalLM"})
    assert raised(checks) == []


def test_hybrid_backends_build_both_and_the_auto_choice_is_checked() -> None:
    both = {"prefill_attention_backend": "fa3", "decode_attention_backend": "flashinfer"}
    checks = load_checks(both, {"arch": "LlamaForCausalLM", "sm": 100})
    assert [m for _, m in raised(checks)] == [
        "FlashAttention v3 Backend requires SM>=80 and SM<=90."
    ]
    # the backend ServerArgs picked (no flag given) is built and checked the same way
    auto = load_checks({}, {"arch": "LlamaForCausalLM", "sm": 100})
    assert raised(auto) == []


def test_the_first_backend_that_raises_ends_the_start() -> None:
    # prefill's backend raises: SGLang never builds decode's (which would raise too)
    both = {"prefill_attention_backend": "trtllm_mla", "decode_attention_backend": "fa3"}
    checks = load_checks(both, {"arch": "LlamaForCausalLM", "sm": 100})
    assert raised(checks) == [
        ("fired", "ValueError: trtllm_mla backend can only be used with MLA models.")
    ]


def test_the_draft_model_builds_its_own_backend() -> None:
    """The draft model's runner takes --speculative-draft-attention-backend; its model's
    config is not known here, so what depends on it stays undecided."""
    draft = {"speculative_algorithm": "EAGLE", "speculative_draft_attention_backend": "fa3"}
    hopper, blackwell = (
        {"arch": "LlamaForCausalLM", "sm": 90},
        {"arch": "LlamaForCausalLM", "sm": 100},
    )
    assert [m for _, m in raised(load_checks(draft, blackwell, draft=True))] == [
        "FlashAttention v3 Backend requires SM>=80 and SM<=90."
    ]
    assert raised(load_checks(draft, blackwell)) == []  # the main model builds flashinfer
    # on Hopper fa3 passes whatever the draft model (its MLA is not known: sm 9 suffices)
    assert raised(load_checks(draft, hopper, draft=True)) == []
    trtllm = {**draft, "speculative_draft_attention_backend": "trtllm_mla"}
    (unsure,) = raised(load_checks(trtllm, blackwell, draft=True))
    assert unsure[0] == "unknown"  # whether the draft model is MLA is not known


def probe_backend(
    replaced: dict[str, str], backend: str, model_type: str | None
) -> list[tuple[str, str]]:
    """The load-stage raises of building `backend` for a Llama whose config.json has
    `model_type`, on the modules with `replaced` texts (path -> text)."""
    mods = modules()
    for path, text in replaced.items():
        mod = parse_module(path, textwrap.dedent(text))
        assert mod is not None
        mods[path] = mod
    config: dict[str, Any] = {"architectures": ["LlamaForCausalLM"]}
    if model_type is not None:
        config["model_type"] = model_type
    sim = Simulator(
        mods.get,
        mods[ARGS],
        {"model_path": "m", "attention_backend": backend},
        Profile.parse({"arch": "LlamaForCausalLM", "sm": 90, "config": config}),
        given={"model_path", "attention_backend"},
        derive=derived,
    )
    result = sim.run()
    start = len(result.checks)
    build = derived.runner_method(sim, "_get_attention_backend")
    assert build is not None and sim.run_after(build)
    return raised(result.checks[start:])


HYBRID_CONFIGS = """
class HybridConfig:
    model_type = "hybrid_gdn"


class OtherHybridConfig:
    model_type = "other_hybrid"
"""

HYBRID_PROBE = """

@register_attention_backend("hybrid_probe")
def create_hybrid_probe_backend(runner):
    from sglang.srt.configs.hybrid import HybridConfig, OtherHybridConfig

    if isinstance(runner.model_config.hf_config, HybridConfig | OtherHybridConfig):
        raise ValueError("hybrid models need the triton backend")
    return "ProbeBackend"
"""


def test_the_model_config_class_is_the_one_of_config_json_s_model_type() -> None:
    """SGLang builds hf_config with the config class registered for config.json's
    model_type: `isinstance(hf_config, A | B)` is decided by the classes' model_type."""
    replaced = {
        "python/sglang/srt/configs/hybrid.py": HYBRID_CONFIGS,
        REGISTRY: ATTENTION_REGISTRY + HYBRID_PROBE,
    }

    def probe(model_type: str | None) -> list[tuple[str, str]]:
        return probe_backend(replaced, "hybrid_probe", model_type)

    hybrid = [("fired", "ValueError: hybrid models need the triton backend")]
    assert probe("other_hybrid") == hybrid
    assert probe("hybrid_gdn") == hybrid
    assert probe("llama") == []


MEMO_PROBE = """

@register_attention_backend("memo_probe")
def create_memo_probe_backend(runner):
    if runner.linear_kind() == "hybrid":
        raise ValueError("hybrid models need the triton backend")
    return "ProbeBackend"
"""


def test_a_cache_filled_on_first_use_starts_from_the_constructor_s_value() -> None:
    """`self._cache = _UNSET` in the constructor, filled under `if self._cache is _UNSET:`:
    the method reading it computes it (it was unknown: two assignments of the field)."""
    runner = (
        MODEL_RUNNER.replace(
            "class ModelRunner:",
            "_UNSET = object()\n\n\nclass ModelRunner:",
        ).replace(
            "        self.use_mla_backend = ",
            "        self._kind_cache = _UNSET\n        self.use_mla_backend = ",
        )
        + """
    def linear_kind(self):
        if self._kind_cache is _UNSET:
            model_type = self.model_config.hf_config.model_type
            self._kind_cache = "hybrid" if model_type == "hybrid_gdn" else "plain"
        return self._kind_cache
"""
    )
    replaced = {RUNNER: runner, REGISTRY: ATTENTION_REGISTRY + MEMO_PROBE}

    def probe(model_type: str) -> list[tuple[str, str]]:
        return probe_backend(replaced, "memo_probe", model_type)

    assert probe("hybrid_gdn") == [("fired", "ValueError: hybrid models need the triton backend")]
    assert probe("llama") == []


def test_a_global_filled_on_first_use_starts_from_its_module_value() -> None:
    # `X = None`, filled only under `if X is None:`: the first reader finds None and fills it
    lazy = {"attention_backend": "lazy"}
    ampere = load_checks(lazy, {"arch": "LlamaForCausalLM", "sm": 80})
    assert raised(ampere) == [("fired", "RuntimeError: the kernels need SM90 or newer")]
    assert raised(load_checks(lazy, {"arch": "LlamaForCausalLM", "sm": 90})) == []
