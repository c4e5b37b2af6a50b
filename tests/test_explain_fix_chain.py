"""A change that clears an error but breaks something else is repaired a change at a time,
each step verified, and offered when the whole chain passes: the seed's TBO error, fixed by
deepep, whose normal mode asserts, fixed by its low-latency mode, which asserts unless the
MoE runner is the one its test names. Modelled on a synthetic repository (no SGLang code):
the runner's choices put the one the test names last, so only ranking by the tests around
the error finds it within the few changes tried."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlmodel import Session

from kb.explain import explain
from kb.explain.predicates import Profile
from tests.conftest import one_release_session
from tests.fixture_repos import SERVER_ARGS
from tests.sim_repos import UTILS, UTILS_TEXT

ARGS = """
import argparse
import dataclasses


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    enable_overlap: bool = False
    a2a_backend: str = "none"
    deep_mode: str = "normal"
    runner: str = "auto"

    def __post_init__(self):
        pass

    def check_server_args(self):
        if self.enable_overlap and self.a2a_backend == "none":
            raise ValueError("Overlap needs an all-to-all backend.")
        if self.a2a_backend == "deep":
            if self.deep_mode == "normal":
                assert False, "normal mode is deprecated"
            elif self.runner == "cute":
                pass
            else:
                assert False, "masked mode is deprecated"

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", type=str, required=True, help="Model weights.")
        parser.add_argument("--enable-overlap", action="store_true", help="Overlap.")
        parser.add_argument(
            "--a2a-backend", type=str, choices=["none", "deep"], default="none", help="A2A."
        )
        parser.add_argument(
            "--deep-mode", type=str, choices=["normal", "low_latency"], default="normal",
            help="Mode.",
        )
        parser.add_argument(
            "--runner", type=str, choices=["auto", "alpha", "beta", "gamma", "cute"],
            default="auto", help="Runner.",
        )
"""


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    yield from one_release_session(
        tmp_path_factory, "fixchain", {UTILS: UTILS_TEXT, SERVER_ARGS: ARGS}
    )


def overlap_error(session: Session) -> dict[str, Any]:
    result = explain(
        session, "v0.1.0", "--model-path m --enable-overlap", profile=Profile.parse({"sm": 90})
    )
    (error,) = [f for f in result["findings"] if f["severity"] == "error"]
    return error


def test_a_change_that_breaks_something_is_repaired_a_change_at_a_time(session: Session) -> None:
    error = overlap_error(session)
    assert error["fix"]["remove"] == ["--enable-overlap"]
    chained = [a for a in error.get("alternatives", []) if len(a.get("add", [])) == 3]
    assert [a["add"] for a in chained] == [
        ["--a2a-backend deep", "--deep-mode low_latency", "--runner cute"]
    ]
    assert chained[0]["verified"] is True
    assert chained[0]["command"].endswith(
        "--a2a-backend deep --deep-mode low_latency --runner cute"
    )


def test_the_chain_s_command_passes_when_explained_again(session: Session) -> None:
    (chained,) = [a for a in overlap_error(session)["alternatives"] if len(a["add"]) == 3]
    again = explain(session, "v0.1.0", chained["command"], profile=Profile.parse({"sm": 90}))
    assert [f for f in again["findings"] if f["severity"] == "error"] == []
