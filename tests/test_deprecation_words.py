"""A deprecated flag whose message names its replacement only in words (`Please set
`--x` to 'v' instead`): the replacement is read from the message, among the flags of the
version (synthetic server_args.py in SGLang's shapes)."""

from __future__ import annotations

from typing import Any

import pytest

from ingest.analyze import SERVER_ARGS_PATH, analyze, facts_key, kind_of
from ingest.assemble import assemble
from ingest.flags import replacement_in_message

SERVER_ARGS = """\
import argparse


class DeprecatedAction(argparse.Action):
    def __init__(self, option_strings, dest, nargs=0, **kwargs):
        super().__init__(option_strings, dest, nargs=nargs, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        raise ValueError(self.help)


class ServerArgs:
    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--tp-size", type=int, default=1)
        parser.add_argument("--ep-size", type=int, default=1)
        parser.add_argument("--widget-backend", choices=["none", "fast"], default="none")
        parser.add_argument("--enable-metrics", action="store_true")
        parser.add_argument(
            "--enable-ep-widget",
            action=DeprecatedAction,
            help="NOTE: --enable-ep-widget is deprecated. Please set `--ep-size` to the same "
            "value as `--tp-size` instead.",
        )
        parser.add_argument(
            "--enable-fast-widget",
            action=DeprecatedAction,
            help="NOTE: --enable-fast-widget is deprecated. Please set `--widget-backend` to "
            "'fast' instead.",
        )
        parser.add_argument(
            "--collect-widget-stats",
            action="store_true",
            help="Deprecated. Stats are collected when --enable-metrics is set.",
        )
        parser.add_argument(
            "--disable-widget",
            action=DeprecatedAction,
            help="'--disable-widget' is deprecated. Please use '--widget-backend none' instead.",
        )
        parser.add_argument(
            "--disable-fast-widget",
            action=DeprecatedAction,
            help="'--disable-fast-widget' is deprecated. Please use '--widget-backend fsat' "
            "instead.",
        )
        parser.add_argument(
            "--enable-auto-widget",
            action="store_true",
            help="(Deprecated: use --widget-backend=fast) Enable the fast widget.",
        )
        parser.add_argument(
            "--widget-split-mode",
            default="rr",
            help="[Deprecated] Use --widget-backend instead. 'rr' splits by token_idx %% cp_size.",
        )
        parser.add_argument(
            "--enable-gone-widget",
            action=DeprecatedAction,
            help="NOTE: deprecated. Please set `--gone-backend` to 'x' instead.",
        )
"""


def _flags() -> dict[str, dict[str, Any]]:
    key = facts_key("sha", kind_of(SERVER_ARGS_PATH))
    facts = {key: analyze(SERVER_ARGS.encode(), kind_of(SERVER_ARGS_PATH), SERVER_ARGS_PATH)}
    return {f["name"]: f for f in assemble({SERVER_ARGS_PATH: "sha"}, facts).flags}


def test_replacement_read_from_the_words_of_the_message() -> None:
    flags = _flags()
    # The flag `set` names, not the one its value is compared with.
    assert flags["--enable-ep-widget"]["replacement"] == "--ep-size"
    assert flags["--enable-fast-widget"]["replacement"] == "--widget-backend=fast"
    # A flag named as a condition is no replacement; a flag the version lacks neither.
    assert flags["--collect-widget-stats"]["deprecated"]
    assert flags["--collect-widget-stats"]["replacement"] is None
    assert flags["--enable-gone-widget"]["replacement"] is None


def test_replacement_read_by_use_keeps_its_value() -> None:
    flags = _flags()
    # `use '--x v'` and `use --x=v` keep the value, as `set --x to 'v'` does.
    assert flags["--disable-widget"]["replacement"] == "--widget-backend=none"
    assert flags["--enable-auto-widget"]["replacement"] == "--widget-backend=fast"
    # A value the flag cannot take (a typo in SGLang's message) is dropped.
    assert flags["--disable-fast-widget"]["replacement"] == "--widget-backend"


def test_help_and_deprecation_message_as_argparse_prints_them() -> None:
    # argparse %-formats help: `%%` is printed `%`, in the help and the deprecation message
    # (the JSON's deprecated_message is the text the page shows).
    flag = _flags()["--widget-split-mode"]
    assert flag["deprecated"] and flag["replacement"] == "--widget-backend"
    said = "[Deprecated] Use --widget-backend instead. 'rr' splits by token_idx % cp_size."
    assert flag["help"] == flag["deprecated_message"] == said


FLAGS: dict[str, list[Any] | None] = {
    "--ep-size": None,
    "--tp-size": None,
    "--cache-decode": ["on", "off"],
    "--cache-prefill": ["on", "off"],
    "--widget-backend": ["none", "fast"],
}


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Use of --old is deprecated: pass --ep-size instead.", "--ep-size"),
        ("Deprecated: set --widget-backend=fast instead.", "--widget-backend=fast"),
        ("Please set `--widget-backend` to 'fsat' instead.", "--widget-backend"),  # no such value
        # several: a brace pair when they differ in their last part, with one value
        ("Set --cache-decode=off and --cache-prefill=off instead.", "--cache-{decode,prefill}=off"),
        ("Set --cache-decode=off and --cache-prefill=on instead.", None),
        ("Pass --ep-size and --widget-backend instead.", None),
        ("--old is deprecated.", None),  # only its own name
    ],
)
def test_replacement_in_message(message: str, expected: str | None) -> None:
    assert replacement_in_message(message, {"--old"}, FLAGS) == expected
