"""Past ServerArgs, with a draft model: the speculative worker the version's
`SpeculativeAlgorithm.create_worker` picks builds its draft attention backends through a
factory whose maps may lack a backend ServerArgs accepted (kb.explain.draft_stage), on
synthetic modules shaped like SGLang's (none of its code). A raise there is a `load`
finding; what is not decided stays unknown; a fix is verified through this step too."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from sqlmodel import Session

from kb.explain import derived, draft_stage, explain
from kb.explain.predicates import Profile, unknown
from kb.explain.simulate import Check, Simulator
from kb.explain.source_modules import Module, parse_module
from tests import sim_repos, test_load_stage
from tests.conftest import ingested_session
from tests.fixture_repos import SERVER_ARGS, commit, git, write
from tests.sim_repos import REGISTER_ATTENTION_BACKEND

SPEC = "python/sglang/srt/speculative/"
FACTORY_PATH = SPEC + "draft_utils.py"

ARGS = """
import argparse
from dataclasses import dataclass


@dataclass
class ServerArgs:
    model_path: str
    attention_backend: str = "flashinfer"
    prefill_attention_backend: str = None
    decode_attention_backend: str = None
    speculative_algorithm: str = None
    speculative_draft_attention_backend: str = None
    speculative_draft_model_path: str = None
    speculative_num_steps: int = 3
    speculative_eagle_topk: int = 1
    speculative_num_draft_tokens: int = 4
    disable_overlap_schedule: bool = False

    def __post_init__(self):
        pass

    def check_server_args(self):
        if self.speculative_algorithm == "EAGLE" and self.attention_backend == "flashinfer":
            raise ValueError("EAGLE here needs an MLA attention backend.")

    def use_mla_backend(self):
        return False

    def get_attention_backends(self):
        prefill = self.prefill_attention_backend or self.attention_backend
        decode = self.decode_attention_backend or self.attention_backend
        return prefill, decode

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", type=str, required=True, help="Model weights.")
        parser.add_argument(
            "--attention-backend", type=str, default="flashinfer",
            choices=["flashinfer", "cutlass_mla", "trtllm_mla", "dual_chunk", "flex"],
            help="Attention backend.",
        )
        parser.add_argument("--speculative-algorithm", type=str, help="Speculative algorithm.")
        parser.add_argument(
            "--speculative-draft-attention-backend", type=str, help="Draft attention backend."
        )
        parser.add_argument("--speculative-draft-model-path", type=str, help="Draft model.")
        parser.add_argument("--speculative-num-steps", type=int, default=3, help="Draft steps.")
        parser.add_argument(
            "--disable-overlap-schedule", action="store_true", help="No overlap scheduling."
        )


def get_global_server_args():
    return None
"""

REGISTRY = (
    """
ATTENTION_BACKENDS = {}


"""
    + REGISTER_ATTENTION_BACKEND
    + """

@register_attention_backend("flashinfer")
def create_flashinfer_backend(runner):
    return "FlashInferAttnBackend"


@register_attention_backend("cutlass_mla")
def create_cutlass_mla_backend(runner):
    return "CutlassMLABackend"


@register_attention_backend("trtllm_mla")
def create_trtllm_mla_backend(runner):
    return "TRTLLMMLABackend"


@register_attention_backend("flex")
def create_flex_backend(runner):
    from sglang.srt.layers.attention.flex_backend import FlexBackend

    return FlexBackend(runner)


@register_attention_backend("dual_chunk")
def create_dual_chunk_backend(runner):
    from sglang.srt.layers.attention.dual_chunk_backend import DualChunkBackend

    return DualChunkBackend(runner)
"""
)

# a backend whose constructor checks the model (built by the registry's function)
DUAL_CHUNK = """
class DualChunkBackend:
    def __init__(self, model_runner):
        config = getattr(model_runner.model_config.hf_config, "dual_chunk_attention_config", None)
        assert config is not None
        self.chunk_size = config.get("chunk_size", 8192)
"""
DUAL_CHUNK_PATH = "python/sglang/srt/layers/attention/dual_chunk_backend.py"

# an encoder-only model's attention reaches the backend's forward_extend at its first
# prefill, which a causal-only backend rejects
RADIX = """
from enum import Enum


class AttentionType(Enum):
    DECODER = "decoder"
    ENCODER_ONLY = "encoder_only"


class RadixAttention:
    def __init__(self, num_heads, head_dim, layer_id=0, attn_type=AttentionType.DECODER):
        self.attn_type = attn_type
"""
FLEX = """
from sglang.srt.layers.radix_attention import AttentionType


class FlexBackend:
    def __init__(self, model_runner):
        self.device = model_runner.device

    def forward_extend(self, q, k, v, layer, forward_batch, save_kv_cache=True):
        o = q.new_empty(q.shape)
        if layer.is_cross_attention or layer.attn_type == AttentionType.ENCODER_ONLY:
            raise NotImplementedError("non-causal attention is not supported")
        return o
"""
FLEX_PATH = "python/sglang/srt/layers/attention/flex_backend.py"
# the scheduler initializes the GEMM configuration for every model (not only MoE ones)
SCHEDULER = """
from sglang.srt.layers.quantization.gemm import initialize_gemm_config


class Scheduler:
    def init_moe_gemm_config(self):
        initialize_gemm_config(self.server_args)
"""
GEMM = """
def initialize_gemm_config(server_args):
    if server_args.attention_backend == "trtllm_mla":
        raise ValueError("this GEMM configuration refuses trtllm_mla")
"""
GEMM_PATH = "python/sglang/srt/layers/quantization/gemm.py"
ENCODER = """
from sglang.srt.layers.radix_attention import AttentionType, RadixAttention


class ToyEncoderModel:
    def __init__(self, config, quant_config=None, prefix=""):
        self.attn = RadixAttention(16, 64, attn_type=AttentionType.ENCODER_ONLY)


EntryClass = [ToyEncoderModel]
"""

SPEC_INFO = """
from enum import Enum, auto


class SpeculativeAlgorithm(Enum):
    EAGLE = auto()
    NGRAM = auto()
    NONE = auto()

    @classmethod
    def from_string(cls, name):
        if name is None:
            return cls.NONE
        return cls[name.upper()]

    def create_worker(self, server_args):
        if self == SpeculativeAlgorithm.EAGLE:
            if server_args.disable_overlap_schedule:
                from sglang.srt.speculative.eagle_worker import EagleWorker

                return EagleWorker
            from sglang.srt.speculative.eagle_worker_v2 import EagleWorkerV2

            return EagleWorkerV2
        raise ValueError("no worker for this algorithm")
"""

# The factory's decode map lacks cutlass_mla (only with more than one step is it built);
# its extend map has it.
FACTORY = """
from sglang.srt.server_args import get_global_server_args


class DraftBackendFactory:
    def __init__(self, server_args, runner, topk, num_steps):
        self.server_args = server_args
        self.runner = runner
        self.num_steps = num_steps
        self.override = server_args.speculative_draft_attention_backend

    def _pick(self, field, table, template):
        name = self.override or getattr(self.server_args, field)
        if name is None:
            name = self.server_args.attention_backend
        if name not in table:
            raise ValueError(template.format(name=name))
        return table[name]()

    def decode_backend(self):
        if self.num_steps == 1:
            return None
        table = {"flashinfer": self._flashinfer, "trtllm_mla": self._trtllm_mla}
        return self._pick("decode_attention_backend", table, "no draft decode backend {name}")

    def extend_backend(self):
        table = {
            "flashinfer": self._flashinfer,
            "trtllm_mla": self._trtllm_mla,
            "cutlass_mla": self._trtllm_mla,
        }
        return self._pick("prefill_attention_backend", table, "no draft extend backend {name}")

    def _flashinfer(self):
        if get_global_server_args().use_mla_backend:
            raise ValueError("the MLA draft backend takes one branch only")
        return "FlashInferMultiStep"

    def _trtllm_mla(self):
        return "TrtllmMlaMultiStep"
"""

# without overlap: the worker is a model worker of the draft model and builds them itself
WORKER = """
from sglang.srt.speculative.draft_utils import DraftBackendFactory


class EagleWorker:
    def __init__(self, server_args, gpu_id, target_worker):
        self.server_args = server_args
        self.topk = server_args.speculative_eagle_topk
        self.num_steps = server_args.speculative_num_steps
        self.build_draft_backends()

    @property
    def draft_runner(self):
        return self.model_runner

    def build_draft_backends(self):
        runner, steps = self.draft_runner, self.num_steps
        factory = DraftBackendFactory(self.server_args, runner, self.topk, steps)
        self.decode_backend = factory.decode_backend()
        self.extend_backend = factory.extend_backend()
"""

# with overlap: the worker builds a draft worker, which builds them
WORKER_V2 = """
from sglang.srt.speculative.draft_utils import DraftBackendFactory


class DraftWorker:
    def __init__(self, server_args, target_worker):
        self.server_args = server_args
        self.topk = server_args.speculative_eagle_topk
        self.num_steps = server_args.speculative_num_steps
        self.num_draft_tokens = server_args.speculative_num_draft_tokens
        if self.topk == 1:
            assert self.num_draft_tokens == self.num_steps + 1, "a chain drafts a token a step"
        self.inner = target_worker.spawn(server_args)
        self.runner = self.inner.model_runner

    def build_draft_backends(self):
        factory = DraftBackendFactory(self.server_args, self.runner, self.topk, self.num_steps)
        self.decode_backend = factory.decode_backend()
        self.extend_backend = factory.extend_backend()


class EagleWorkerV2:
    def __init__(self, server_args, target_worker):
        self.server_args = server_args
        self.drafter = DraftWorker(server_args, target_worker)
"""

# the ModelRunner copies its use_mla_backend onto the global server args, shadowing
# ServerArgs' method of that name for the code run after it
MODEL_RUNNER = test_load_stage.MODEL_RUNNER.replace(
    "        self.use_mla_backend = self.model_config.attention_arch == AttentionArch.MLA\n",
    "        self.use_mla_backend = self.model_config.attention_arch == AttentionArch.MLA\n"
    "        global_server_args = get_global_server_args()\n"
    "        global_server_args.use_mla_backend = self.use_mla_backend\n",
)
assert MODEL_RUNNER != test_load_stage.MODEL_RUNNER

FILES = {
    SERVER_ARGS: ARGS,
    test_load_stage.RUNNER: MODEL_RUNNER,
    test_load_stage.REGISTRY: REGISTRY,
    SPEC + "spec_info.py": SPEC_INFO,
    FACTORY_PATH: FACTORY,
    SPEC + "eagle_worker.py": WORKER,
    SPEC + "eagle_worker_v2.py": WORKER_V2,
    sim_repos.UTILS: test_load_stage.UTILS,
    sim_repos.MODEL_CONFIG: sim_repos.MODEL_CONFIG_TEXT,
    DUAL_CHUNK_PATH: DUAL_CHUNK,
    "python/sglang/srt/layers/radix_attention.py": RADIX,
    FLEX_PATH: FLEX,
    "python/sglang/srt/managers/scheduler.py": SCHEDULER,
    GEMM_PATH: GEMM,
    "python/sglang/srt/models/toy_encoder.py": ENCODER,
}


def _text(source: str) -> str:
    """A module's text as the test's repository holds it (from its first line)."""
    return textwrap.dedent(source).lstrip("\n")


MLA = {"arch": "DeepNetV3ForCausalLM", "sm": 100}
RAISE_LINE = next(n for n, line in enumerate(_text(FACTORY).splitlines(), 1) if "raise" in line)


def modules() -> dict[str, Module]:
    out = {}
    for path, text in FILES.items():
        mod = parse_module(path, _text(text))
        assert mod is not None
        out[path] = mod
    return out


def draft_checks(
    fields: dict[str, Any], profile: dict[str, Any] = MLA, path: str = FACTORY_PATH
) -> list[Check]:
    """The checks of the draft worker's step in `path`, after the run of ServerArgs."""
    mods = modules()
    given = {"model_path": "m", "speculative_algorithm": "EAGLE", **fields}
    sim = Simulator(
        mods.get, mods[SERVER_ARGS], given, Profile.parse(profile), given=given, derive=derived
    )
    result = sim.run()
    start = len(result.checks)
    # the worker's constructor, then (unless it raised) its draft backends, as explain runs
    # them
    constructor = draft_stage.constructor_step(sim, lambda: None)
    assert constructor is not None
    assert sim.run_after(constructor)
    if not any(c.outcome == "fired" for c in result.checks[start:]):
        step = draft_stage.step(sim)
        assert step is not None
        assert sim.run_after(step)
    return [c for c in result.checks[start:] if c.path == path]


def raised(checks: list[Check]) -> list[tuple[str, str]]:
    return [(c.outcome, c.message) for c in checks if c.outcome != "passed"]


@pytest.mark.parametrize("no_overlap", [True, False])
def test_a_backend_missing_from_the_draft_map_raises_at_load(no_overlap: bool) -> None:
    """Either worker (the draft worker built by the V2 one too) reaches the raise."""
    checks = draft_checks(
        {"attention_backend": "cutlass_mla", "disable_overlap_schedule": no_overlap}
    )
    assert raised(checks) == [("fired", "ValueError: no draft decode backend cutlass_mla")]
    (check,) = [c for c in checks if c.outcome == "fired"]
    assert check.line == RAISE_LINE
    assert {"attention_backend", "decode_attention_backend"} <= check.reads  # what a fix changes


def test_a_backend_in_both_maps_passes() -> None:
    assert raised(draft_checks({"attention_backend": "trtllm_mla"})) == []
    # one step builds no decode backend: the extend map has cutlass_mla
    one_step = {"attention_backend": "cutlass_mla", "speculative_num_steps": 1}
    assert raised(draft_checks(one_step)) == []


def test_undecided_inputs_leave_the_raise_unknown() -> None:
    steps = {"attention_backend": "cutlass_mla", "speculative_num_steps": unknown("the steps")}
    (check,) = [c for c in draft_checks(steps) if c.outcome != "passed"]
    assert check.outcome == "unknown" and "the steps" in check.needs
    # which worker is built not decided: both raise, so it raises whichever
    either = {"attention_backend": "cutlass_mla", "disable_overlap_schedule": unknown("overlap")}
    assert {o for o, _ in raised(draft_checks(either))} == {"fired"}


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    root = tmp_path_factory.mktemp("draftstage")
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for path, text in FILES.items():
        write(repo, path, _text(text))
    commit(repo, "draft workers", "2025-01-01T12:00:00Z", "v0.1.0")
    yield from ingested_session(repo, root / "kb.db")


def test_the_finding_is_of_the_load_stage_and_a_fix_passes_it(session: Session) -> None:
    """ServerArgs' own error here has two candidate fixes; cutlass_mla passes ServerArgs
    and the main model's backend but not the draft worker's: never called verified."""
    profile = Profile.parse(MLA)
    command = "--model-path m --speculative-algorithm EAGLE"
    result = explain(session, "v0.1.0", command, profile=profile)
    (error,) = [f for f in result["findings"] if f["severity"] == "error"]
    assert error["stage"] == "server_args"
    fixes = [error["fix"], *error.get("alternatives", [])]
    assert [fix.get("add") for fix in fixes] == [["--attention-backend trtllm_mla"]]
    assert draft_stage.PART in error["fix"]["also_checked"]

    crash = explain(
        session, "v0.1.0", command + " --attention-backend cutlass_mla", profile=profile
    )
    (load,) = [f for f in crash["findings"] if f["severity"] == "error"]
    assert load["stage"] == "load"
    assert load["source"]["path"] == FACTORY_PATH and load["source"]["line"] == RAISE_LINE
    assert "no draft decode backend cutlass_mla" in load["message"]


def load_errors(session: Session, arch: str, backend: str, **config: Any) -> list[dict]:
    """The errors explain finds for the backend on an SM90 profile of `arch`."""
    profile = {"arch": arch, "sm": 90, "config": {"architectures": [arch], **config}}
    command = f"--model-path m --attention-backend {backend}"
    result = explain(session, "v0.1.0", command, profile=Profile.parse(profile))
    return [f for f in result["findings"] if f["severity"] == "error"]


def test_the_backend_the_registry_builds_checks_the_model(session: Session) -> None:
    (error,) = load_errors(session, "LlamaForCausalLM", "dual_chunk")
    assert error["stage"] == "load" and error["source"]["path"] == DUAL_CHUNK_PATH
    chunked = {"dual_chunk_attention_config": {}}
    assert load_errors(session, "LlamaForCausalLM", "dual_chunk", **chunked) == []


def test_an_encoder_only_model_s_first_prefill_reaches_the_backend_s_forward(
    session: Session,
) -> None:
    (error,) = load_errors(session, "ToyEncoderModel", "flex")
    assert error["stage"] == "first_forward" and error["source"]["path"] == FLEX_PATH
    assert "non-causal attention" in error["message"]
    # a decoder's layers are not followed into the forward: nothing there
    assert load_errors(session, "LlamaForCausalLM", "flex") == []


def test_the_scheduler_s_gemm_configuration_is_run_for_a_dense_model(session: Session) -> None:
    (first, *_rest) = load_errors(session, "LlamaForCausalLM", "trtllm_mla")
    assert first["stage"] == "load" and first["source"]["path"] == GEMM_PATH


def test_what_the_runner_copies_onto_the_global_server_args_is_the_runner_s(
    session: Session,
) -> None:
    """The draft backend reads `get_global_server_args().use_mla_backend`: the draft model's
    runner set it from its own (its model, a draft checkpoint, is not known here), not
    ServerArgs' method of that name, which as a bound method reads true: no error."""
    profile = Profile.parse({"arch": "LlamaForCausalLM", "sm": 90})
    command = (
        "--model-path m --speculative-algorithm EAGLE --attention-backend trtllm_mla "
        "--speculative-draft-attention-backend flashinfer"
    )
    result = explain(session, "v0.1.0", command, profile=profile)
    assert not [f for f in result["findings"] if f["severity"] == "error"]
    (undecided,) = [f for f in result["findings"] if "one branch only" in f["message"]]
    assert undecided["severity"] == "info"


def test_the_draft_model_s_backend_is_built_on_its_own_config(session: Session) -> None:
    """A draft checkpoint of its own (the profile's draft_config): the backend the registry
    builds for the draft model's runner reads the draft's config, not the target's."""
    chunked = {"architectures": ["LlamaForCausalLM"], "dual_chunk_attention_config": {}}
    command = (
        "--model-path m --attention-backend dual_chunk --speculative-algorithm EAGLE "
        "--speculative-draft-model-path org/draft --speculative-draft-attention-backend "
        "dual_chunk"
    )

    def errors(draft: dict[str, Any] | None) -> list[str]:
        profile = {"arch": "LlamaForCausalLM", "sm": 90, "config": chunked}
        if draft is not None:
            profile["draft_config"] = draft
        result = explain(session, "v0.1.0", command, profile=Profile.parse(profile))
        return [f["source"]["path"] for f in result["findings"] if f["severity"] == "error"]

    # (the draft's runner builds the draft backend; the draft worker's factory, after it,
    # has no map entry for it: its raise is the next step's)
    assert errors({"architectures": ["LlamaForCausalLM"]}) == [DUAL_CHUNK_PATH]
    assert errors(chunked) == [FACTORY_PATH]
    assert errors(None) == [FACTORY_PATH]  # (the draft's config not known: its check neither)


def test_the_draft_worker_s_constructor_checks_the_server_args() -> None:
    """The worker's constructor, and the draft worker's it builds into a field, run up to
    where the draft model loads: their asserts on the server args are decided."""
    path = SPEC + "eagle_worker_v2.py"
    line = next(n for n, t in enumerate(_text(WORKER_V2).splitlines(), 1) if "assert" in t)

    def worker_checks(fields: dict[str, Any]) -> list[tuple[str, int]]:
        return [(c.outcome, c.line) for c in draft_checks(fields, MLA, path)]

    chain = {"attention_backend": "trtllm_mla", "speculative_num_steps": 3}
    assert worker_checks({**chain, "speculative_num_draft_tokens": 6}) == [("fired", line)]
    assert worker_checks({**chain, "speculative_num_draft_tokens": 4}) == [("passed", line)]
    # a tree (topk > 1) is not checked; the worker without overlap has no such check
    assert (
        worker_checks({**chain, "speculative_num_draft_tokens": 6, "speculative_eagle_topk": 2})
        == []
    )
