"""A fix is verified only if the fixed command's run leaves nothing that may still raise:
the error's own check neither fails nor is left to raise on an assumption, and no new error
nor assumed raise appears (on a synthetic repository; no SGLang code)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlmodel import Session

from kb.explain import explain
from kb.explain.predicates import Profile
from tests.conftest import ingested_session
from tests.fixture_repos import SERVER_ARGS, commit, git, write
from tests.sim_repos import UTILS, UTILS_TEXT

# A value of --moe-a2a-backend passes the overlap check only if a package is not installed
# (the profile says the packages are: the check fires, given the profile); another value
# sets off a raise that rests on a package too; the last one is clean.
ARGS = """
import argparse
import dataclasses

from sglang.srt.utils.common import check_pkg_version_at_least

A2A_CHOICES = {choices}


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    enable_two_batch_overlap: bool = False
    moe_a2a_backend: str = "none"

    def __post_init__(self):
        pass

    def check_server_args(self):
        if self.enable_two_batch_overlap and self.moe_a2a_backend != "nixl":
            if self.moe_a2a_backend == "none" or check_pkg_version_at_least("deep-ep", "9.9"):
                raise ValueError("Two batch overlap needs an all-to-all backend.")
        if self.moe_a2a_backend == "mooncake" and check_pkg_version_at_least("mooncake", "0.3"):
            raise ValueError("mooncake 0.3 breaks the all-to-all.")

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", type=str, required=True, help="Model weights.")
        parser.add_argument(
            "--enable-two-batch-overlap", action="store_true", help="Two batch overlap."
        )
        parser.add_argument(
            "--moe-a2a-backend", type=str, choices=A2A_CHOICES,
            default=ServerArgs.moe_a2a_backend, help="MoE all-to-all backend.",
        )
"""


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    root = tmp_path_factory.mktemp("fixverify")
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write(repo, UTILS, UTILS_TEXT)
    # v0.1.0: deepep (the check left to an assumption) comes before the clean nixl
    write(repo, SERVER_ARGS, ARGS.format(choices='["none", "deepep", "nixl"]'))
    commit(repo, "deepep first", "2025-01-01T12:00:00Z", "v0.1.0")
    # v0.2.0: mooncake (a new raise on an assumption) comes before the clean nixl
    write(repo, SERVER_ARGS, ARGS.format(choices='["none", "mooncake", "nixl"]'))
    commit(repo, "mooncake first", "2025-02-01T12:00:00Z", "v0.2.0")
    yield from ingested_session(repo, root / "kb.db")


COMMAND = "--model-path m --enable-two-batch-overlap"
PROFILE = Profile.parse({"arch": "LlamaForCausalLM", "gpu": "H100"})


@pytest.mark.parametrize("version", ["v0.1.0", "v0.2.0"])
def test_a_fix_that_may_still_raise_is_not_verified(session: Session, version: str) -> None:
    result = explain(session, version, COMMAND, profile=PROFILE)
    (error,) = [f for f in result["findings"] if f["severity"] == "error"]
    assert "Two batch overlap" in error["message"]
    fixes = [error["fix"], *error.get("alternatives", [])]
    assert [fix.get("add") for fix in fixes if "add" in fix] == [["--moe-a2a-backend nixl"]]
    # what the rejected value would have left: a raise given the profile's packages
    rejected = "deepep" if version == "v0.1.0" else "mooncake"
    other = explain(session, version, f"{COMMAND} --moe-a2a-backend {rejected}", profile=PROFILE)
    raised = sorted(f["message"] for f in other["findings"] if f["severity"] == "error")
    overlap = "Two batch overlap needs an all-to-all backend., given the profile: deep-ep >= 9.9"
    expected = [overlap] if version == "v0.1.0" else ["mooncake 0.3 breaks", overlap]
    assert len(raised) == len(expected)
    assert all(want in got for want, got in zip(sorted(expected), raised, strict=True))


def test_a_fix_whose_run_spends_the_last_of_the_budget_is_not_verified(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The budget running out inside a fix's run may cut a stage past ServerArgs short
    (its checks dropped, the stages after it not run): such a run verifies nothing."""
    from kb.explain import orchestrate
    from kb.explain.simulate import Budget

    fixed = "python -m sglang.launch_server --model-path m"  # the first fix tried
    budget = Budget(10**6)
    version = orchestrate.resolve_version(session, "v0.1.0")
    facts = orchestrate.load_facts(session, version, orchestrate.session_stamp(session))
    _, fixed_sim = orchestrate.run(session, version, facts, fixed, PROFILE, budget)
    assert fixed_sim is not None and not fixed_sim.result.truncated
    monkeypatch.setattr(orchestrate, "FIX_STEPS", 10**6 - budget.left)  # all of it, no more
    result = explain(session, "v0.1.0", COMMAND, profile=PROFILE)
    (error,) = [f for f in result["findings"] if f["severity"] == "error"]
    assert "fix" not in error
    monkeypatch.setattr(orchestrate, "FIX_STEPS", 10**6)
    result = explain(session, "v0.1.0", COMMAND, profile=PROFILE)
    (error,) = [f for f in result["findings"] if f["severity"] == "error"]
    assert error["fix"]["remove"] == ["--enable-two-batch-overlap"]
