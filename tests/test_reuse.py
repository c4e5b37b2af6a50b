"""What a worker reuses from the last version of a path gives the facts a fresh analysis
gives: server_args.py's unchanged methods (ingest.reuse) and the blocks find_carriers read
(ingest.indirect.BlockMemo). Each case analyzes version 1, then version 2 with what version 1
left, and compares with version 2 analyzed alone (synthetic sources in SGLang's shapes)."""

from __future__ import annotations

import ast
from typing import Any

import pytest

import ingest.indirect as indirect
import ingest.reuse as reuse
from ingest.analyze import SERVER_ARGS_PATH, analyze
from ingest.indirect import BlockMemo, find_carriers

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
    reuse._MEMO.clear()
    return analyze(text.encode(), "server_args", SERVER_ARGS_PATH)


def _after(v1: str, v2: str) -> dict[str, Any]:
    """Version 2's facts with what version 1 left in the worker."""
    reuse._MEMO.clear()
    analyze(v1.encode(), "server_args", SERVER_ARGS_PATH)
    return analyze(v2.encode(), "server_args", SERVER_ARGS_PATH)


def _methods_parsed(v1: str, v2: str) -> list[str]:
    """The ServerArgs methods in version 2's tree (the others were reused, not parsed)."""
    reuse._MEMO.clear()
    reuse.parse_server_args(v1, SERVER_ARGS_PATH)
    tree = reuse.parse_server_args(v2, SERVER_ARGS_PATH).tree
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    return [n.name for n in cls.body if isinstance(n, ast.FunctionDef)]


def test_unchanged_method_moved_down_is_reused_with_its_lines_shifted() -> None:
    v1 = HEAD + CHECK + WARN + TAIL
    v2 = HEAD + "    pp_size: int = 1\n    ep_size: int = 1\n" + CHECK + WARN + TAIL
    assert _methods_parsed(v1, v2) == ["add_cli_args", "url"]  # both checks reused
    facts = _after(v1, v2)
    assert facts == _fresh(v2)
    raises = [s for s in facts["constraints"] if s["kind"] == "raise"]
    assert [(s["line"], s["function"]) for s in raises] == [(17, "ServerArgs.check_parallel")]


def test_changed_method_is_parsed_again() -> None:
    v1 = HEAD + CHECK + WARN + TAIL
    v2 = HEAD + CHECK.replace("4096", "8192") + WARN + TAIL
    assert _methods_parsed(v1, v2) == ["check_parallel", "add_cli_args", "url"]
    facts = _after(v1, v2)
    assert facts == _fresh(v2)
    (override,) = [s for s in facts["constraints"] if s["kind"] == "override"]
    assert override["writes"] == {"chunked_prefill_size": "8192"}


def test_same_method_text_inside_a_string_is_not_a_method() -> None:
    # Version 2 holds check_parallel's text inside a string of the class body: the outline
    # (by indentation) still sees a method there, the parser does not.
    v1 = HEAD + CHECK + WARN + TAIL
    v2 = HEAD + '    NOTES = """\n' + CHECK + '    """\n' + WARN + TAIL
    facts = _after(v1, v2)
    assert facts == _fresh(v2)
    assert not [s for s in facts["constraints"] if s["function"] == "ServerArgs.check_parallel"]


def test_last_method_is_never_left_out() -> None:
    # The class's span (read by _self_reads and the flag sections) ends with its last
    # statement: an unchanged last method is parsed again.
    last = "\n    def last_check(self):\n        if self.dp_size:\n            self.tp_size = 2\n"
    v1 = HEAD + CHECK + TAIL + last
    v2 = HEAD + "    pp_size: int = 1\n" + CHECK + TAIL + last
    facts = _after(v1, v2)
    assert facts == _fresh(v2)
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


def test_helper_that_stops_logging_makes_unchanged_callers_parsed_again() -> None:
    v1 = HEAD + DEPRECATED + TAIL + _helper("33")
    v2 = HEAD + DEPRECATED + TAIL + "\n\ndef print_deprecated_warning(message: str):\n    pass\n"
    facts = _after(v1, v2)
    assert facts == _fresh(v2)
    assert not [s for s in facts["constraints"] if s["kind"] == "warning"]


def test_helper_changing_its_text_makes_callers_parsed_again() -> None:
    v1 = HEAD + DEPRECATED + WARN + TAIL + _helper("33")
    v2 = HEAD + DEPRECATED + WARN + TAIL + _helper("1;33")
    assert _methods_parsed(v1, v2) == ["check_deprecated", "warn_mem", "add_cli_args", "url"]
    assert _after(v1, v2) == _fresh(v2)


CARRIERS_V1 = """\
_ENABLED = None


def init(server_args):
    global _ENABLED
    _ENABLED = server_args.enable_x


class Flags:
    def mode(self):
        return server_args.attention_mode
"""


def _carriers(text: str, memo: BlockMemo | None) -> list[tuple[Any, ...]]:
    lines = {no for no, line in enumerate(text.split("\n"), 1) if "server_args." in line}
    found = find_carriers(text, lines, memo)
    return [(c["name"], c["member"], c["kind"], c["dests"], c["line"]) for c in found]


def _carriers_after(v1: str, v2: str) -> list[tuple[Any, ...]]:
    memo = BlockMemo({})
    _carriers(v1, memo)
    return _carriers(v2, BlockMemo(memo.new))


def test_carrier_blocks_moved_down_keep_their_lines() -> None:
    v2 = "import os\nimport sys\n\n" + CARRIERS_V1
    assert (
        _carriers_after(CARRIERS_V1, v2)
        == _carriers(v2, None)
        == [
            ("_ENABLED", None, "global", ["enable_x"], 9),
            ("Flags", "mode", "function", ["attention_mode"], 13),
        ]
    )


def test_changed_carrier_block_is_read_again() -> None:
    v2 = CARRIERS_V1.replace("attention_mode", "sampling_backend")
    assert _carriers_after(CARRIERS_V1, v2) == _carriers(v2, None)
    assert ("Flags", "mode", "function", ["sampling_backend"], 10) in _carriers(v2, None)


@pytest.mark.parametrize(
    "v2",
    [
        # The same block in another class: the carrier is that class's method.
        CARRIERS_V1.replace("class Flags:", "class Options:"),
        # ... and inside a function: not a carrier at all (nested functions are not).
        CARRIERS_V1.replace("class Flags:", "def make():\n    x = 1\n    class Flags:").replace(
            "    def mode(self):\n        return", "        def mode(self):\n            return"
        ),
    ],
)
def test_same_block_in_another_context(v2: str) -> None:
    assert _carriers_after(CARRIERS_V1, v2) == _carriers(v2, None)


def test_the_worker_memo_is_per_path_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(indirect, "_BLOCKS", {})
    monkeypatch.setattr(indirect, "MEMO_PATHS", 2)
    data = CARRIERS_V1.encode()
    reads = [["enable_x", 6, "read"], ["attention_mode", 11, "read"]]
    for path in ("a.py", "b.py", "c.py"):
        indirect.scan_structure(data, reads, path)
    assert list(indirect._BLOCKS) == ["b.py", "c.py"]
    assert indirect.scan_structure(data, reads, "c.py") == indirect.scan_structure(data, reads)


def test_lines_far_from_any_return_still_carry_through_global_or_module_level() -> None:
    # No `return` near either read: the global statement and the module-level assignment
    # are what make them carriers (find_carriers skips other such lines unread).
    text = (
        "IS_Y = get_global_server_args().enable_y\n\n\n"
        "def init(server_args):\n    global IS_X\n    x = 1\n    y = 2\n"
        "    IS_X = server_args.enable_x\n"
    )
    found = [(c["name"], c["kind"], c["dests"], c["line"]) for c in find_carriers(text, {1, 8})]
    assert found == [("IS_Y", "global", ["enable_y"], 1), ("IS_X", "global", ["enable_x"], 8)]
    # ... and in a file without any `global` statement.
    alone = text.split("\n\n\n")[0] + "\n\n\ndef f():\n    pass\n"
    assert [c["name"] for c in find_carriers(alone, {1})] == ["IS_Y"]


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
        # decorated: not a plain accessor (the text starts with its decorator)
        ("    @property\n    def get_b(self):\n        return self.b_backend\n", []),
        # no `return`: nothing returned
        ("    def check(self):\n        assert self.b_backend\n", []),
        # a `return` only inside a word: no return statement
        ("    def check(self):\n        self.returned = self.b_backend\n", []),
        ("    def get_b(self):\n        return helper(self.b_backend)\n", []),
    ],
)
def test_accessor_dests_only_for_plain_accessors(method: str, dests: list[str]) -> None:
    assert reuse.accessor_dests(method) == dests
