"""Explain's parse against argparse, class by class, on a tiny synthetic repository whose
code (ours, never SGLang's) may be run to get argparse's own answer: a type function with
case-sensitive unit suffixes, a `--config` file explain cannot read, an action class that
raises when used, and `-h` with text glued to it."""

from __future__ import annotations

import argparse
import ast
import shlex
import textwrap
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session

from kb.explain import explain
from kb.explain.load import load_facts
from kb.explain.type_functions import suffixed_int
from kb.queries import get_version
from kb.schema import make_engine
from tests.conftest import ingest_into
from tests.fixture_repos import SERVER_ARGS, commit, git, write

SERVE = "python -m sglang.launch_server"

# utils/common.py: the type function, imported by server_args.py
COUNTS = '''
import argparse
import re
from decimal import Decimal


def parse_count(value: str) -> int:
    """A count with a unit: 3k, 2M (decimal), 4Ki, 1Mi (binary). Units are case-sensitive."""
    value = value.strip()
    decimal_units = {"k": 10**3, "M": 10**6}
    binary_units = {"Ki": 2**10, "Mi": 2**20}
    match = re.fullmatch(r"(\\d+(?:\\.\\d+)?)(Ki|Mi|k|M)", value)
    if match:
        number, unit = match.groups()
        if unit in binary_units:
            if "." in number:
                raise argparse.ArgumentTypeError(f"{unit} takes a whole number")
            return int(number) * binary_units[unit]
        return int(Decimal(number) * decimal_units[unit])
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a count: {value!r}")
'''

ARGS_TEXT = """
import argparse
import dataclasses

from sglang.srt.utils.common import parse_count


class GoneAction(argparse.Action):
    def __init__(self, option_strings, dest, nargs=0, **kwargs):
        super().__init__(option_strings, dest, nargs=nargs, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        raise ValueError(self.help)


@dataclasses.dataclass
class ServerArgs:
    weights: str = None
    batch_budget: int = None
    cache_ratio: float = 0.5

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--weights", type=str, required=True, help="Weights.")
        parser.add_argument("--batch-budget", type=parse_count, default=None, help="Budget.")
        parser.add_argument("--cache-ratio", type=float, default=0.5, help="Cache share.")
        parser.add_argument("--config", type=str, default=None, help="A YAML file of flags.")
        parser.add_argument(
            "--old-cache", action=GoneAction, help="'--old-cache' is gone. Use --cache-ratio."
        )
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("parse-classes") / "sglang"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write(root, SERVER_ARGS, ARGS_TEXT)
    write(root, "python/sglang/srt/utils/common.py", COUNTS)
    commit(root, "one version", "2025-01-01T12:00:00Z", "v1.0.0")
    return root


@pytest.fixture(scope="module")
def session(repo: Path, tmp_path_factory: pytest.TempPathFactory):
    db = tmp_path_factory.mktemp("parse-classes-kb") / "kb.db"
    ingest_into(repo, db, tags="*", jobs=1)
    engine = make_engine(f"sqlite:///{db}", readonly=True)
    with Session(engine) as s:
        yield s
    engine.dispose()


def parse_count(repo: Path) -> Any:
    """The fixture's own function, run: argparse's answer for each value."""
    scope: dict[str, Any] = {}
    exec(textwrap.dedent(COUNTS), scope)  # our synthetic code, not SGLang's
    return scope["parse_count"]


def errors(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in result["findings"] if f["severity"] == "error"]


VALUES = ["4k", "4K", "2.5k", "1Ki", "1.5Ki", "3M", "2Mi", "1mi", "77", "-3", "k", "4 k", "9G"]


@pytest.mark.parametrize("value", VALUES)
def test_a_suffixed_count_is_read_as_argparse_reads_it(
    session: Session, repo: Path, value: str
) -> None:
    try:
        expected: int | None = parse_count(repo)(value)
    except argparse.ArgumentTypeError:
        expected = None
    result = explain(session, "v1.0.0", f"{SERVE} --weights w --batch-budget={shlex.quote(value)}")
    wrong = [f for f in errors(result) if f["kind"] == "wrong_type"]
    assert bool(wrong) == (expected is None), (value, wrong)
    if expected is not None:
        facts = load_facts(session, get_version(session, "v1.0.0"))
        (flag,) = [f for f in facts.flags if f.name == "--batch-budget"]
        assert flag.converter is not None and flag.converter(value) == expected
    assert not [f for f in result["findings"] if f["kind"] == "unchecked_value"]


def test_a_function_of_another_shape_is_not_recognised() -> None:
    (fn,) = ast.parse("def f(value):\n    return int(value) * 2\n").body
    assert isinstance(fn, ast.FunctionDef) and suffixed_int(fn) is None


def test_required_flags_may_come_from_the_config_file(session: Session) -> None:
    result = explain(session, "v1.0.0", f"{SERVE} --config flags.yaml --cache-ratio 0.3")
    assert errors(result) == []
    note = next(f for f in result["findings"] if f["kind"] == "missing_required")
    assert note["severity"] == "warning" and "--config" in note["message"]
    # given or not, the flags the file sets are unseen: said once, as a note
    full = explain(session, "v1.0.0", f"{SERVE} --weights w --config flags.yaml")
    (said,) = [f for f in full["findings"] if f["kind"] == "config_file"]
    assert said["severity"] == "info" and "cannot read the file" in said["message"]


def test_an_action_that_raises_is_a_parse_error_with_its_message(session: Session) -> None:
    result = explain(session, "v1.0.0", f"{SERVE} --weights w --old-cache")
    (error,) = errors(result)
    assert error["kind"] == "action_raises" and "'--old-cache' is gone" in error["message"]


def test_a_single_dash_prefix_of_h_is_help_with_glued_text(session: Session) -> None:
    result = explain(session, "v1.0.0", f"{SERVE} --weights w -hcache-ratio 0.3")
    assert [f["kind"] for f in errors(result)] == ["attached_text"]


def test_the_compatibility_range_judges_the_value_as_explain_does(session: Session) -> None:
    refused = explain(session, "v1.0.0", f"{SERVE} --weights w --batch-budget 4K")
    accepted = explain(session, "v1.0.0", f"{SERVE} --weights w --batch-budget 4k")
    assert refused["valid_in"] == []
    assert [r["from"] for r in accepted["valid_in"]] == ["v1.0.0"]


def test_help_prints_the_usage_before_required_flags_are_checked(session: Session) -> None:
    """argparse runs the help action as it meets it and exits: a command with --help lacks
    no required flag (SGLang's docs show `launch_server --help`)."""
    for command in (f"{SERVE} --help", f"{SERVE} -h"):
        result = explain(session, "v1.0.0", command)
        assert errors(result) == []
        assert not [f for f in result["findings"] if f["kind"] == "missing_required"]
        (said,) = [f for f in result["findings"] if f["kind"] == "prints_help"]
        assert said["severity"] == "info" and "exits" in said["message"]
