"""A fix is verified only when the fixed command has no error left: with two independent
errors, removing one switch clears its own error but leaves the other, so it is no verified
fix; the two changes together are (on a synthetic repository; no SGLang code)."""

from __future__ import annotations

from collections.abc import Iterator

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
    enable_alpha: bool = False
    enable_beta: bool = False

    def __post_init__(self):
        pass

    def check_server_args(self):
        if self.enable_alpha:
            raise ValueError("Alpha is broken.")
        if self.enable_beta:
            raise ValueError("Beta is broken.")

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", type=str, required=True, help="Model weights.")
        parser.add_argument("--enable-alpha", action="store_true", help="Alpha.")
        parser.add_argument("--enable-beta", action="store_true", help="Beta.")
"""


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    yield from one_release_session(
        tmp_path_factory, "fixpairs", {UTILS: UTILS_TEXT, SERVER_ARGS: ARGS}
    )


def errors(session: Session, command: str) -> list[dict]:
    result = explain(session, "v0.1.0", command, profile=Profile.parse({"sm": 90}))
    return [f for f in result["findings"] if f["severity"] == "error"]


def test_a_change_leaving_another_error_is_no_verified_fix(session: Session) -> None:
    alpha, beta = errors(session, "--model-path m --enable-alpha --enable-beta")
    for error in (alpha, beta):
        fixes = [error["fix"], *error.get("alternatives", [])]
        assert [sorted(f["remove"]) for f in fixes] == [["--enable-alpha", "--enable-beta"]]
        # the fixed command passes when explained again
        assert errors(session, fixes[0]["command"]) == []
    # one error alone: removing its switch is the fix
    (only,) = errors(session, "--model-path m --enable-alpha")
    assert only["fix"]["remove"] == ["--enable-alpha"]
