"""The deprecation warning an argparse action class gives in its `__call__` (SGLang's
DeprecatedAction, DeprecatedStoreTrueAction, ... print_deprecated_warning(...)) is a
warning site of each flag using the action, with the flag's name and `new_flag=` in its
text. Synthetic server_args.py / arg_groups files in SGLang's shapes."""

from __future__ import annotations

from typing import Any

from ingest.analyze import HOOK_DIR, SERVER_ARGS_PATH, analyze, facts_key, kind_of
from ingest.assemble import assemble

ACTIONS = """\
import argparse
import logging

logger = logging.getLogger(__name__)


def print_deprecated_warning(message: str):
    logger.warning(f"\\033[1;33m{message}\\033[0m")


class DeprecatedAction(argparse.Action):
    def __init__(self, option_strings, dest, nargs=0, **kwargs):
        super().__init__(option_strings, dest, nargs=nargs, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print_deprecated_warning(
            f"The command line argument '{option_string}' is deprecated and will be removed."
        )


class DeprecatedStoreTrueAction(argparse.Action):
    def __init__(self, option_strings, dest, new_flag=None, nargs=0, **kwargs):
        self.new_flag = new_flag
        super().__init__(option_strings, dest, nargs=nargs, const=True, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        replacement = f" Use '{self.new_flag}' instead." if self.new_flag else ""
        print_deprecated_warning(
            f"'{option_string}' is deprecated and will be removed.{replacement}"
        )
        setattr(namespace, self.dest, True)
"""

FLAGS = """

class ServerArgs:
    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--stream-widgets", action="store_true")
        parser.add_argument(
            "--stream-widget",
            action=DeprecatedStoreTrueAction,
            dest="stream_widgets",
            new_flag="--stream-widgets",
            help="[Deprecated] Use --stream-widgets instead.",
        )
        parser.add_argument(
            "--old-widget-stats",
            action=DeprecatedStoreTrueAction,
            help="[Deprecated] Stats are always collected.",
        )
        parser.add_argument(
            "--widget-balance",
            action=DeprecatedAction,
            help="Note: --widget-balance is deprecated now.",
        )
"""

IMPORTED = """\
import argparse

from sglang.srt.arg_groups.argparse_actions import (
    DeprecatedAction,
    DeprecatedStoreTrueAction,
)
"""

ACTIONS_PATH = HOOK_DIR + "argparse_actions.py"


def _version(files: dict[str, str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    shas = {path: f"sha-{i}" for i, path in enumerate(files)}
    facts = {
        facts_key(shas[p], kind_of(p)): analyze(text.encode(), kind_of(p), p)
        for p, text in files.items()
    }
    texts = {shas[p]: text for p, text in files.items()}
    rows = assemble(shas, facts, lambda sha: texts[sha])
    return {f["name"]: f for f in rows.flags}, rows.constraints


def _warnings(sites: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {}
    for s in sites:
        if s["kind"] == "warning":
            (flag,) = s["flags"]
            out[flag] = s
    return out


def _check(sites: list[dict[str, Any]], path: str, source: str) -> None:
    found = _warnings(sites)
    assert set(found) == {"--stream-widget", "--old-widget-stats", "--widget-balance"}
    stream = found["--stream-widget"]
    # Its text as the flag makes it: the option, and the new_flag= it passes.
    assert stream["message"] == (
        "'--stream-widget' is deprecated and will be removed. Use '--stream-widgets' instead."
    )
    assert stream["affects"] == ["--stream-widgets"]
    assert stream["function"] == "DeprecatedStoreTrueAction.__call__"
    # Cited at the warning call in the action class.
    assert stream["path"] == path
    assert source.split("\n")[stream["line"] - 1].strip() == "print_deprecated_warning("
    # Without new_flag= the replacement sentence is left out.
    stats = found["--old-widget-stats"]["message"]
    assert stats == "'--old-widget-stats' is deprecated and will be removed."
    assert found["--widget-balance"]["message"] == (
        "The command line argument '--widget-balance' is deprecated and will be removed."
    )
    assert len({s["key"] for s in found.values()}) == 3


def test_action_classes_in_server_args_warn_per_flag() -> None:
    text = ACTIONS + FLAGS
    flags, sites = _version({SERVER_ARGS_PATH: text})
    assert flags["--stream-widget"]["replacement"] == "--stream-widgets"
    assert flags["--stream-widget"]["deprecated_kind"] == "warns"
    _check(sites, SERVER_ARGS_PATH, text)


def test_action_classes_imported_from_arg_groups_warn_per_flag() -> None:
    _flags, sites = _version({SERVER_ARGS_PATH: IMPORTED + FLAGS, ACTIONS_PATH: ACTIONS})
    _check(sites, ACTIONS_PATH, ACTIONS)


def test_an_action_no_flag_uses_makes_no_site() -> None:
    unused = FLAGS.split('        parser.add_argument(\n            "--stream-widget"')[0]
    _flags, sites = _version({SERVER_ARGS_PATH: ACTIONS + unused})
    assert not [s for s in sites if s["kind"] == "warning"]


BRACED = """

class ServerArgs:
    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--widget-backend-decode", default="auto")
        parser.add_argument("--widget-backend-prefill", default="auto")
        parser.add_argument(
            "--disable-widget",
            action=DeprecatedStoreTrueAction,
            new_flag="--widget-backend-{decode,prefill}=disabled",
            help="[Deprecated] Use --widget-backend-{decode,prefill}=disabled instead.",
        )
        parser.add_argument(
            "--widget-half",
            action=DeprecatedStoreTrueAction,
            new_flag="--widget-backend-{decode,verify}=off",
        )

    def __post_init__(self):
        if self.widget_half:
            logger.warning("Set --widget-backend-{decode,prefill} for both phases.")
        for label in ("decode", "prefill"):
            if self.widget_half:
                raise ValueError(f"--widget-backend-{label} is unset")
"""


def test_a_brace_pair_in_a_message_names_both_flags() -> None:
    _flags, sites = _version({SERVER_ARGS_PATH: ACTIONS + BRACED})
    found = _warnings([s for s in sites if s["function"].endswith(".__call__")])
    assert found["--disable-widget"]["affects"] == [
        "--widget-backend-decode",
        "--widget-backend-prefill",
    ]
    # A pair half of which is no flag names none.
    assert found["--widget-half"]["affects"] == []
    # Other sites too; an f-string's `{label}` is no pair.
    (logged,) = [s for s in sites if s["kind"] == "warning" and "both phases" in s["message"]]
    assert logged["affects"] == ["--widget-backend-decode", "--widget-backend-prefill"]
    (raised,) = [s for s in sites if s["kind"] == "raise"]
    assert raised["affects"] == []


UNBOUND = """\
import argparse
import logging

logger = logging.getLogger(__name__)


def print_deprecated_warning(message: str):
    logger.warning(message)


class DeprecatedAliasAction(argparse.Action):
    def __init__(self, option_strings, dest, new_flag=None, **kwargs):
        self.new_flag = new_flag
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        replacement = f" Use '{self.new_flag}' instead." if self.new_flag is not None else ""
        print_deprecated_warning(
            f"'{option_string}' is deprecated: {self.reason}.{replacement}"
        )


class ServerArgs:
    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--widgets", type=int)
        parser.add_argument("--widget-count", action=DeprecatedAliasAction, new_flag="--widgets")
"""


def test_a_placeholder_the_flag_does_not_bind_is_said_to_be_computed_at_run_time() -> None:
    # A test other than a bare `self.new_flag`, and an attribute add_argument does not pass:
    # no literal `{replacement}` / `{self.reason}`, the code is shown as a help's would be.
    _flags, sites = _version({SERVER_ARGS_PATH: UNBOUND})
    message = _warnings(sites)["--widget-count"]["message"]
    assert message == (
        "'--widget-count' is deprecated: (computed at run time: self.reason)."
        "(computed at run time: f\" Use '{self.new_flag}' instead.\" if self.new_flag is not None"
        " else '')"
    )
