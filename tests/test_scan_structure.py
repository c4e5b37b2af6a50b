"""scan_structure's facts of one file: its imports (the items kept by statement text), its
carriers (find_carriers) and the accessor-only use scan (synthetic sources in SGLang's
shapes)."""

from __future__ import annotations

import ast
from typing import Any

import pytest

import ingest.analyze as analyze
import ingest.carriers as carriers
from ingest.carriers import CarrierId, UsePattern, file_uses, find_carriers, scan_structure
from ingest.pyfile import PyFile

PATH = "python/sglang/srt/layers/feature.py"

V1 = '''\
"""Feature switches.

Read once from the server args.
"""

import logging
from sglang.srt.utils import get_bool_env_var, is_cuda
from .config import (
    FeatureConfig as Config,
    load,  # the loader
)

_ENABLED = None
IS_TBO_ENABLED = get_global_server_args().enable_two_batch_overlap


def init(server_args):
    global _ENABLED
    _ENABLED = server_args.enable_x


def is_tbo_enabled():
    return IS_TBO_ENABLED


class Flags:
    """Switches."""

    def mode(self):
        return server_args.attention_mode

    def backend(self):
        if self.mode() == "fa3":
            return "fa3"

        return self.mode()


async def serve(server_args):
    return server_args.port
'''


def _reads(text: str) -> list[list[Any]]:
    out = []
    for no, line in enumerate(text.split("\n"), 1):
        for name in ("enable_x", "enable_two_batch_overlap", "attention_mode", "port"):
            if name in line:
                out.append([name, no, "read"])
    return out


def _scan(text: str) -> dict[str, Any]:
    return scan_structure(text.encode(), _reads(text))


@pytest.fixture(autouse=True)
def _fresh_memos(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(carriers, "_IMPORT_ITEMS", {})


def test_the_fixture_has_every_kind_of_fact() -> None:
    facts = _scan(V1)
    carriers = {(c["name"], c["member"]): c["line"] for c in facts["carriers"]}
    assert carriers == {
        ("IS_TBO_ENABLED", None): 14,
        ("_ENABLED", None): 19,
        ("is_tbo_enabled", None): 22,
        ("Flags", "mode"): 29,
        ("Flags", "backend"): 32,
        ("serve", None): 39,
    }
    assert facts["imports"][:3] == [
        ["sglang.srt.utils", "get_bool_env_var", "get_bool_env_var", 7],
        ["sglang.srt.utils", "is_cuda", "is_cuda", 7],
        [".config", "FeatureConfig", "Config", 8],
    ]


def test_a_def_moved_down_is_cited_at_its_line() -> None:
    facts = _scan("import os\n\n" + V1.replace("def is_tbo_enabled", "def tbo_on"))
    assert ("tbo_on", 24) in [(c["name"], c["line"]) for c in facts["carriers"]]


def test_the_import_memo_is_bounded_and_keyed_by_the_statement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(carriers, "MAX_IMPORT_ITEMS", 2)
    a = b"from sglang.a import (x,\n    y)\nfrom .b import z as w\n"
    b = b"from sglang.a import (x,\n    v)\nfrom .b import z as w\nfrom .c import q\n"
    assert carriers._imports(a) == [
        ["sglang.a", "x", "x", 1],
        ["sglang.a", "y", "y", 1],
        [".b", "z", "w", 3],
    ]
    assert carriers._imports(b) == [
        ["sglang.a", "x", "x", 1],
        ["sglang.a", "v", "v", 1],
        [".b", "z", "w", 3],
        [".c", "q", "q", 4],
    ]
    assert len(carriers._IMPORT_ITEMS) <= 2


ACCESSORS = (
    """\
from .config import (
    Flags,
    mode,
)


class Flags:
    def mode(self):
        return server_args.attention_mode

    def use_fa3(self):
        # self.mode() in a comment
        x = self.other()
        return self.mode() == "fa3"

    def long(self):
        y = self.mode()
"""
    + "        y += 1\n" * 50
    + """        return self.mode()


def fa3_enabled():
    return Flags.mode() or cls.mode()
"""
)


def test_accessor_uses_are_the_full_scans_accessor_uses() -> None:
    f = PyFile(ACCESSORS)
    patterns = [UsePattern(r, "mode", CarrierId("Flags", "mode")) for r in ("cls", "self", "Flags")]
    everything = file_uses(f, patterns)
    only = file_uses(PyFile(ACCESSORS), patterns, accessors=True)
    assert only == [u for u in everything if u.accessor is not None]
    assert [(u.line, u.accessor) for u in only] == [
        (14, ("Flags", "use_fa3")),
        (72, ("fa3_enabled", None)),
    ]
    assert len(everything) > len(only)  # the long method's and the plain uses


SERVER_ARGS = """\
import argparse


class ServerArgs:
    tp_size: int = 1

    def __post_init__(self):
        if self.tp_size > 1:
            self.dp_size = 2  # self.tp_size in a comment

        # self.x in a comment line
        self.check()
    def check(self):
        assert self.pp_size >= 1
def helper(self):
    return self.outside
"""


def test_self_reads_are_those_of_the_server_args_class() -> None:
    lines: dict[str, str] = {}
    found = analyze._self_reads(ast.parse(SERVER_ARGS), SERVER_ARGS, lines)
    assert ["dp_size", 9, "write"] in found
    assert ["pp_size", 14, "read"] in found
    assert lines["14"] == "assert self.pp_size >= 1"
    assert "outside" not in [name for name, _line, _access in found]  # past the class
    assert "x" not in [name for name, _line, _access in found]  # a comment line


@pytest.mark.parametrize("body", [39, 40])
def test_an_accessor_is_at_most_forty_lines_below_its_def(body: int) -> None:
    # def on line 1, `return` on line body + 2: an accessor while the block spans at most
    # MAX_ACCESSOR_LINES lines after its def (def_near looks no further up than that).
    text = "def mode():\n" + "    x = 1\n" * body + "    return server_args.attention_mode\n"
    found = find_carriers(text, {body + 2})
    assert [c["name"] for c in found] == (["mode"] if body + 1 <= 40 else [])


@pytest.mark.parametrize(
    ("text", "want"),
    [
        (
            "from sglang.a import x\n\nimport sglang.srt.models.m as m\n\n"
            "from .b import (\n    y,\n    z as w,\n)\n",
            [["sglang.a", "x", "x", 1], [".b", "y", "y", 5], [".b", "z", "w", 5],
             ["sglang.srt.models", "m", "m", 3]],
        ),
        # a bracket closed only past a blank line
        (
            "from sglang.a import (\n    x,\n\n    y,\n)\nfrom .c import q\n",
            [["sglang.a", "x", "x", 1], ["sglang.a", "y", "y", 1], [".c", "q", "q", 6]],
        ),
        # not at a line's start, its bracket open past a blank line: it hides `from .d`
        ("x = 1; from sglang.a import (\n\nfrom .d import e\n)\n", []),
        (
            "import os\n\n\ndef f():\n    from sglang.x import y  # local\n\n    return y\n",
            [["sglang.x", "y", "y", 5]],
        ),
        ("no imports here\n\nnone = 1\n", []),
    ],
)  # fmt: skip
def test_imports(text: str, want: list[list[Any]]) -> None:
    assert scan_structure(text.encode(), [])["imports"] == want


CARRIERS_V1 = """\
_ENABLED = None


def init(server_args):
    global _ENABLED
    _ENABLED = server_args.enable_x


class Flags:
    def mode(self):
        return server_args.attention_mode
"""


def _carriers(text: str) -> list[tuple[Any, ...]]:
    lines = {no for no, line in enumerate(text.split("\n"), 1) if "server_args." in line}
    found = find_carriers(text, lines)
    return [(c["name"], c["member"], c["kind"], c["dests"], c["line"]) for c in found]


def test_carriers_at_their_lines() -> None:
    assert _carriers("import os\nimport sys\n\n" + CARRIERS_V1) == [
        ("_ENABLED", None, "global", ["enable_x"], 9),
        ("Flags", "mode", "function", ["attention_mode"], 13),
    ]
    v2 = CARRIERS_V1.replace("attention_mode", "sampling_backend")
    assert ("Flags", "mode", "function", ["sampling_backend"], 10) in _carriers(v2)


GLOBAL = ("_ENABLED", None, "global", ["enable_x"], 6)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # The same block in another class: the carrier is that class's method.
        (
            CARRIERS_V1.replace("class Flags:", "class Options:"),
            [GLOBAL, ("Options", "mode", "function", ["attention_mode"], 10)],
        ),
        # ... and inside a function: not a carrier at all (nested functions are not).
        (
            CARRIERS_V1.replace("class Flags:", "def make():\n    x = 1\n    class Flags:").replace(
                "    def mode(self):\n        return", "        def mode(self):\n            return"
            ),
            [GLOBAL],
        ),
    ],
)
def test_a_method_s_carrier_depends_on_what_holds_it(text: str, want: list[Any]) -> None:
    assert _carriers(text) == want


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
