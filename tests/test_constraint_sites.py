"""server_args.py's constraint sites, self reads and accessor methods, as analyze() finds
them (synthetic sources in SGLang's shapes)."""

from __future__ import annotations

import ast
import textwrap
from typing import Any

import pytest

from ingest.analyze import SERVER_ARGS_PATH, analyze
from ingest.flags import accessor_dests

HEAD = """\
import argparse
import logging

logger = logging.getLogger(__name__)


class ServerArgs:
    model_path: str
    tp_size: int = 1
    dp_size: int = 1
"""

CHECK = """
    def check_parallel(self):
        if self.dp_size > 1:
            if self.tp_size < 2:
                raise ValueError("--dp-size needs --tp-size above 1")
            self.chunked_prefill_size = 4096
"""

WARN = """
    def warn_mem(self):
        if self.tp_size > 8:
            logger.warning("--tp-size above 8 is untested")
"""

TAIL = """
    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--tp-size", type=int, default=ServerArgs.tp_size)
        parser.add_argument("--dp-size", type=int, default=ServerArgs.dp_size)

    def url(self):
        return f"http://{self.host}:{self.port}"
"""


def _fresh(text: str) -> dict[str, Any]:
    return analyze(text.encode(), "server_args", SERVER_ARGS_PATH)


def test_raise_and_override_sites_of_the_methods() -> None:
    text = HEAD + "    pp_size: int = 1\n    ep_size: int = 1\n" + CHECK + WARN + TAIL
    facts = _fresh(text)
    raises = [s for s in facts["constraints"] if s["kind"] == "raise"]
    assert [(s["line"], s["function"]) for s in raises] == [(17, "ServerArgs.check_parallel")]
    (override,) = [s for s in facts["constraints"] if s["kind"] == "override"]
    assert override["writes"] == {"chunked_prefill_size": "4096"}


def test_a_method_text_inside_a_string_is_not_a_method() -> None:
    # check_parallel's text inside a string of the class body: the outline (by indentation)
    # sees a method there, the parser does not.
    facts = _fresh(HEAD + '    NOTES = """\n' + CHECK + '    """\n' + WARN + TAIL)
    assert not [s for s in facts["constraints"] if s["function"] == "ServerArgs.check_parallel"]


def test_the_last_method_s_self_reads() -> None:
    last = "\n    def last_check(self):\n        if self.dp_size:\n            self.tp_size = 2\n"
    facts = _fresh(HEAD + "    pp_size: int = 1\n" + CHECK + TAIL + last)
    assert ["tp_size", 29, "write"] in facts["reads"]


DEPRECATED = """
    def check_deprecated(self):
        if self.dp_size > 4:
            print_deprecated_warning("NOTE: --dp-size above 4 is deprecated. Use --tp-size.")
"""


def _helper(colour: str) -> str:
    return f"""

def print_deprecated_warning(message: str):
    logger.warning(f"\\033[{colour}m{{message}}\\033[0m")
"""


def test_call_of_a_warning_helper_is_a_warning_site_at_the_call() -> None:
    text = HEAD + DEPRECATED + TAIL + _helper("33")
    (site,) = [s for s in _fresh(text)["constraints"] if s["kind"] == "warning"]
    assert site["message"] == "NOTE: --dp-size above 4 is deprecated. Use --tp-size."
    assert site["line"] == 14  # the call, not the helper's logger.warning
    assert site["function"] == "ServerArgs.check_deprecated"
    assert site["conditions"] == ["self.dp_size > 4"]
    assert site["affects"] == ["dp_size", "tp_size"]


def test_a_helper_that_does_not_log_makes_no_warning_site() -> None:
    text = HEAD + DEPRECATED + TAIL + "\n\ndef print_deprecated_warning(message: str):\n    pass\n"
    assert not [s for s in _fresh(text)["constraints"] if s["kind"] == "warning"]


def test_call_of_a_local_warning_helper_is_a_warning_site() -> None:
    local = """
    def __post_init__(self):
        def print_deprecated_warning(message: str):
            logger.warning(f"\\033[33m{message}\\033[0m")

        if self.dp_size > 4:
            print_deprecated_warning("NOTE: --dp-size above 4 is deprecated.")
"""
    facts = _fresh(HEAD + local + TAIL)
    (site,) = [s for s in facts["constraints"] if s["line"] == 17]
    assert site["kind"] == "warning" and site["function"] == "ServerArgs.__post_init__"
    assert site["message"] == "NOTE: --dp-size above 4 is deprecated."


@pytest.mark.parametrize(
    ("method", "dests"),
    [
        (
            "    def get_b(self):\n        return self.a_backend or self.b_backend\n",
            ["a_backend", "b_backend"],
        ),
        # decorated: not a plain accessor
        ("    @property\n    def get_b(self):\n        return self.b_backend\n", []),
        # no `return`: nothing returned
        ("    def check(self):\n        assert self.b_backend\n", []),
        # a `return` only inside a word: no return statement
        ("    def check(self):\n        self.returned = self.b_backend\n", []),
        ("    def get_b(self):\n        return helper(self.b_backend)\n", []),
    ],
)
def test_accessor_dests_only_for_plain_accessors(method: str, dests: list[str]) -> None:
    (func,) = ast.parse(textwrap.dedent(method)).body
    assert isinstance(func, ast.FunctionDef)
    assert accessor_dests(func) == dests


def test_accessors_of_the_server_args_methods() -> None:
    getter = "\n    def get_b(self):\n        return self.tp_size or self.dp_size\n"
    assert _fresh(HEAD + CHECK + getter + TAIL)["accessors"] == {
        "get_b": ["dp_size", "tp_size"],
        "url": ["host", "port"],  # an f-string is no call
    }
