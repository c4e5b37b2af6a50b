"""ModelConfig's constructor checks past ServerArgs (kb.explain.model_config_checks), on
synthetic modules shaped like SGLang's (none of its code): the model's ModelConfig refuses
a context length above what its config.json allows; the draft model's, built after the
speculative worker set the server args' context length to the target's, refuses a draft
whose config.json allows less than the target's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlmodel import Session

from kb.explain import explain
from kb.explain.predicates import Profile
from tests import sim_repos, test_draft_stage
from tests.conftest import ingested_session
from tests.fixture_repos import SERVER_ARGS, commit, git, write

SPEC = test_draft_stage.SPEC

ARGS = test_draft_stage.ARGS.replace(
    "    disable_overlap_schedule: bool = False\n",
    "    disable_overlap_schedule: bool = False\n    context_length: int = None\n",
).replace(
    '        parser.add_argument("--speculative-algorithm"',
    '        parser.add_argument("--context-length", type=int, help="Context length.")\n'
    '        parser.add_argument("--speculative-num-draft-tokens", type=int, default=4,'
    ' help="Draft tokens.")\n'
    '        parser.add_argument("--speculative-algorithm"',
)

MODEL_CONFIG = """
class AttentionArch:
    MLA = "mla"
    MHA = "mha"


class ModelConfig:
    def __init__(self, hf_config, context_length=None, is_draft_model=False):
        self.is_draft_model = is_draft_model
        if "DeepNetV3ForCausalLM" in hf_config.architectures:
            self.attention_arch = AttentionArch.MLA
        else:
            self.attention_arch = AttentionArch.MHA
        self._derive_context_length(context_length)
        self.quantization = None
        self._verify_quantization()

    def _verify_quantization(self):
        # (reads what the constructor set, sets it, reads it again: the run sees each)
        quant_method = "fp8"
        if self.quantization is None:
            self.quantization = quant_method
        if self.quantization != quant_method:
            raise ValueError("the quantization argument does not match the checkpoint's")
        self.quantization = "fp8 (checked)"

    def _derive_context_length(self, context_length):
        derived = self.hf_config.max_position_embeddings
        if context_length is not None:
            if context_length > derived:
                reason = "Target model's" if self.is_draft_model else "User-specified"
                raise ValueError(
                    f"{reason} context_length ({context_length}) is greater than {derived}"
                )
            self.context_len = context_length
        else:
            self.context_len = derived

    @staticmethod
    def from_server_args(server_args, model_path=None, is_draft_model=False):
        return ModelConfig(
            hf_config=None,
            context_length=server_args.context_length,
            is_draft_model=is_draft_model,
        )
"""

# the worker (with overlap) gives the draft the target's context length, as SGLang's do
WORKER_V2 = (
    "from sglang.srt.managers.tp_worker import TpModelWorker\n" + test_draft_stage.WORKER_V2
).replace(
    "        self.drafter = DraftWorker(server_args, target_worker)\n",
    "        server_args.context_length = target_worker.model_runner.model_config.context_len\n"
    "        self.drafter = DraftWorker(server_args, target_worker)\n",
)

TP_WORKER = """
class TpModelWorker:
    def __init__(self, server_args):
        self.server_args = server_args
"""

FILES = {
    **test_draft_stage.FILES,
    SERVER_ARGS: ARGS,
    sim_repos.MODEL_CONFIG: MODEL_CONFIG,
    SPEC + "eagle_worker_v2.py": WORKER_V2,
    "python/sglang/srt/managers/tp_worker.py": TP_WORKER,
}
assert ARGS != test_draft_stage.ARGS and WORKER_V2 != test_draft_stage.WORKER_V2
RAISE_LINE = next(
    n
    for n, line in enumerate(test_draft_stage._text(MODEL_CONFIG).splitlines(), 1)
    if line.endswith("raise ValueError(")  # (the context length's)
)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    root = tmp_path_factory.mktemp("modelconfig")
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for path, text in FILES.items():
        write(repo, path, test_draft_stage._text(text))
    commit(repo, "model configs", "2025-01-01T12:00:00Z", "v0.1.0")
    yield from ingested_session(repo, root / "kb.db")


LLAMA = {"architectures": ["LlamaForCausalLM"], "max_position_embeddings": 131072}


def errors(session: Session, command: str, draft: dict[str, Any] | None = None) -> list[dict]:
    profile: dict[str, Any] = {"arch": "LlamaForCausalLM", "sm": 90, "config": LLAMA}
    if draft is not None:
        profile["draft_config"] = draft
    result = explain(session, "v0.1.0", "--model-path m " + command, profile=Profile.parse(profile))
    return [f for f in result["findings"] if f["severity"] == "error"]


def test_a_context_length_above_the_model_s_is_refused_at_load(session: Session) -> None:
    (error,) = errors(session, "--context-length 200000")
    assert error["stage"] == "load"
    assert error["source"]["path"] == sim_repos.MODEL_CONFIG
    assert error["source"]["line"] == RAISE_LINE
    assert "User-specified context_length (200000) is greater than 131072" in error["message"]
    assert errors(session, "--context-length 131072") == []
    assert errors(session, "") == []


# (a backend every other step of the fixture passes: one draft step builds no decode
# backend; a chain of one step drafts two tokens)
DRAFT_COMMAND = (
    "--attention-backend cutlass_mla --speculative-algorithm EAGLE "
    "--speculative-draft-model-path org/draft --speculative-num-steps 1 "
    "--speculative-num-draft-tokens 2"
)


def test_the_draft_s_model_config_is_built_with_the_target_s_context_length(
    session: Session,
) -> None:
    """The worker sets the draft's context length to the target model's (131072): a draft
    whose config.json allows 2048 is refused; one allowing the target's loads."""
    short = {"architectures": ["LlamaForCausalLM"], "max_position_embeddings": 2048}
    (error,) = errors(session, DRAFT_COMMAND, short)
    assert error["stage"] == "load" and error["source"]["line"] == RAISE_LINE
    assert "Target model's context_length (131072) is greater than 2048" in error["message"]
    long = {**short, "max_position_embeddings": 131072}
    assert errors(session, DRAFT_COMMAND, long) == []
    # the target's own context length, given, is what the draft is built with
    assert errors(session, DRAFT_COMMAND + " --context-length 2048", short) == []
