"""The site scan (ingest/sites.py) where a match or its context holds a blank line, reads
through local names of the server args and locals bound to a flag's read (synthetic sources
modelled on SGLang's)."""

from __future__ import annotations

from typing import Any

from ingest import sites

HEAD = b"""import os

from sglang.srt.server_args import ServerArgs


def setup(server_args):
    if server_args.attention_backend == "triton":
        x = 1

    mode = server_args.kv_cache_dtype
"""
TAIL = b"""

class Runner:
    def run(self, server_args):
        if self.backend in ("flashinfer", "fa3"):
            return server_args.enable_x
        return AttentionBackend.TRITON
"""


def test_reads_and_choices_in_file_order_with_their_lines() -> None:
    got = sites.scan(HEAD + b"\n\nextra = server_args.tp_size\n" + TAIL)
    assert [r[0] for r in got["reads"]] == [
        "attention_backend", "kv_cache_dtype", "tp_size", "enable_x",
    ]  # fmt: skip
    assert got["choices"][-1][:2] == ["fa3", 18]
    changed = sites.scan((HEAD + TAIL).replace(b'== "triton"', b'!= "fa3"'))
    assert ["fa3", 7, "attention_backend", "compare"] in changed["choices"]


def test_a_literal_cut_by_a_blank_line() -> None:
    # `in (` whose closing bracket lies after a blank line
    data = b'if backend in (\n    "a",\n\n    "b",\n):\n    pass\n\nx = y in ("c", "d")\n'
    assert [c[0] for c in sites.scan(data)["choices"]] == ["a", "b", "c", "d"]


def test_a_literal_closed_after_the_blank_line_within_reach() -> None:
    # The whole scan's window (800 bytes) finds the `)` after the blank line.
    data = b'if backend in (\n    "a"\n\n)\n'
    assert [c[0] for c in sites.scan(data)["choices"]] == ["a"]


def test_sites_read_from_the_lines_before_give_the_whole_scan() -> None:
    # the joined texts of sites whose compared expression starts on the lines before; a
    # blank line before stops the join
    data = (
        b"if (\n    x\n    and self.server_args.attention_backend\n    in ['a', 'b']\n):\n"
        b"    pass\n\ny = self.enable or getattr(\n    self, 'attention_backend', None\n"
        b") == 'c'\n\nz = f(\n\n) == 'd'\n"
    )
    got = sites.scan(data)
    assert [c[:3] for c in got["choices"]] == [
        ["c", 10, "attention_backend"],
        ["a", 4, "attention_backend"],
        ["b", 4, "attention_backend"],
    ]
    assert got["lines"]["4"] == "and self.server_args.attention_backend in ['a', 'b']"
    # how many lines above each joined text starts, for its citation to span them (none
    # for line 14: its line above is blank)
    assert got["spans"] == {"4": 1, "10": 2}


def test_a_joined_line_whose_text_an_alias_read_replaces_spans_nothing() -> None:
    # the read through `sa` records the line's own text: its citation is the line alone
    data = (
        b"def f(self):\n    sa = get_global_server_args()\n    y = getattr(\n"
        b'        self, "attention_backend"\n    ) == "fa3" or sa.enable_x\n'
    )
    got = sites.scan(data)
    assert got["choices"] == [["fa3", 5, "attention_backend", "compare"]]
    assert got["lines"]["5"] == ') == "fa3" or sa.enable_x'
    assert "spans" not in got
    assert sites.scan(data.replace(b" or sa.enable_x", b""))["spans"] == {"5": 2}


def test_patterns_whose_spaces_hold_a_blank_line() -> None:
    for data in (
        b'x = getattr(\n\nserver_args, "alpha")\n',
        b'x = getattr(server_args,\n\n"alpha")\n',
        b'x = getattr(self.server_args\n\n, "alpha")\n',
        b'x = global_server_args_dict[\n\n"alpha"]\n',
        b'x = global_server_args_dict["alpha"\n\n]\n',
        b'x = global_server_args_dict.get(\n\n"alpha")\n',
        b'if (backend ==\n\n"triton"):\n    pass\n',
        b'if (backend == (\n\n"triton")):\n    pass\n',
        b'if (backend !=\n\n"triton"):\n    pass\n',
        b'if (backend in\n\n("a", "b")):\n    pass\n',
    ):
        got = sites.scan(data + b"\n\ny = server_args.beta\n")
        found = [r[0] for r in got["reads"]] + [c[0] for c in got["choices"]]
        assert found[-1] in ("alpha", "triton", "b"), data  # the match across the blank line


def test_a_comment_ending_in_equals_signs_compares_nothing() -> None:
    data = b'# ======\n\n"a" if x == "b" else 1\n'
    assert sites.scan(data)["choices"] == [["b", 3, "x", "compare"]]


def test_a_write_after_a_blank_line() -> None:
    for after, access in ((b"= 1", "write"), (b"== 1", "read"), (b"+= 1", "write")):
        data = b"def f(server_args):\n    server_args.alpha\n\n" + after + b"\n"
        assert sites.scan(data)["reads"] == [["alpha", 2, access]], after


def test_in_needs_a_space_before_it() -> None:
    # CONTAINS_RE is led by `in`; `.join([...])` and `min(...)` are no `in` tests.
    data = b'x = ",".join(["a", "b"])\ny = min("c", "d")\nif z not in ("e",):\n    pass\n'
    assert sites.scan(data)["choices"] == [["e", 3, "z", "contains"]]


def test_an_enum_class_with_blank_lines_in_its_body() -> None:
    data = b"""from enum import Enum


class Backend(str, Enum):
    TRITON = "triton"

    FA3 = "fa3"

    def is_fa3(self):
        return self == Backend.FA3
"""
    got = sites.scan(data)
    assert [m["value"] for m in got["enums"][0]["members"]] == ["triton", "fa3"]
    assert got["enums"][0]["is_methods"] == {"fa3": "FA3"}


ALIASED = b"""from sglang.srt.server_args import get_global_server_args


def is_cp_enabled():
    sa = get_global_server_args()

    # sa.not_a_read in a comment
    return sa.enable_cp and sa.cp_size > 1 and sa.describe()


def later():
    global_server_args = get_global_server_args()
    return global_server_args.tp_size
"""


def test_reads_through_a_local_name_of_the_server_args() -> None:
    """`sa = get_global_server_args()`, then `sa.x` after a blank line (a method call and a
    comment are not reads; `global_server_args.x` was read already)."""
    got = sites.scan(ALIASED)
    assert [r[:2] for r in got["reads"]] == [["tp_size", 13], ["enable_cp", 8], ["cp_size", 8]]
    assert got["lines"]["8"].strip().startswith("return sa.enable_cp")
    # Bound to something else too, or a function's parameter: the name could be anything.
    rebound = ALIASED + b"\n\ndef other():\n    sa = make_config()\n    return sa.enable_cp\n"
    param = ALIASED + b"\n\ndef other(sa):\n    return sa.enable_cp\n"
    for text in (rebound, param):
        assert [r[0] for r in sites.scan(text)["reads"]] == ["tp_size"]


def test_server_args_aliases_are_names_bound_at_a_line_start_only() -> None:
    """A name counts when each `name = …` at a line's start binds the server args: `sa2 = 1`,
    `x.sa = 3`, `sa == 2` and a keyword argument are no bindings of `sa`; `\tsa = 3` is."""
    assert sites.server_args_aliases(
        b"sa = get_global_server_args()\nsa2 = 1\nx.sa = 3\nif sa == 2:\n    pass\n"
        b"  sb  = get_global_server_args()  \nf(sc = get_global_server_args())\n"
    ) == {b"sa", b"sb"}
    assert sites.server_args_aliases(b"sa = get_global_server_args()\n\tsa = 3\n") == set()
    assert sites.server_args_aliases(b"x = 1\n= get_global_server_args()\n") == set()


def test_a_def_taking_the_name_makes_it_no_alias() -> None:
    bound = b"sa = get_global_server_args()\n"
    for text, alias in [
        (b"def f(x, sa=None):\n    pass\n", False),
        (b"async def f(\n    sa,\n):\n    pass\n", False),
        (b"def f(sa2, xsa):\n    pass\n", True),  # other names
        (b"undef f(sa):\n", True),  # no `def` at a word's start
        (b"def f(x) -> sa:\n", True),  # not among the parameters
    ]:
        assert sites.server_args_aliases(bound + text) == ({b"sa"} if alias else set()), text


LOCAL = b"""def create_backend(
    server_args,
    tokenizer,
) -> Backend:
    name = server_args.grammar_backend

    if name in REGISTRY:
        return REGISTRY[name]

    # the defaults
    if name == "outlines":
        return 1
    elif name.lower() != "xgrammar":
        return 2
    elif self.name == "none":
        return 3

    return name not in ("llguidance", "none")


class Runner:
    def __init__(self, server_args):
        self.server_args = server_args

    def pick(self):
        backend = self.server_args.sampling_backend  # what the user asked
        if backend == "flashinfer":
            return torch.ops.flashinfer
        raise ValueError(f"Invalid backend: {backend}")

    def other(self):
        return backend == "pytorch"


async def sample():
    mode = get_global_server_args().sampling_backend
    return mode == "pytorch"
"""


def _subjects(got: dict[str, Any]) -> list[tuple[str, int, str]]:
    return [(c[0], c[1], c[2]) for c in got["choices"]]


def test_a_local_bound_to_a_flag_s_read_stands_for_the_flag() -> None:
    """`name = server_args.grammar_backend`, then `name == "outlines"` after blank lines in
    the same function: a comparison of grammar_backend; not `self.name`, nor the same name
    in another function."""
    got = sites.scan(LOCAL)
    assert _subjects(got) == [
        ("outlines", 11, "grammar_backend"),
        ("xgrammar", 13, "grammar_backend"),
        ("none", 15, "name"),  # self.name: an attribute, not the local
        ("flashinfer", 27, "sampling_backend"),
        ("pytorch", 32, "backend"),  # another function's name
        ("pytorch", 37, "sampling_backend"),
        ("llguidance", 18, "grammar_backend"),
        ("none", 18, "grammar_backend"),
    ]


def test_a_local_bound_otherwise_too_stays_itself() -> None:
    """A name bound again, a parameter, used before its binding, bound by `for`/`as`, or not
    in a function: it may hold anything there, so the comparison keeps its own name."""
    body = b'    name = server_args.grammar_backend\n%b\n    if name == "outlines":\n        pass\n'
    for before, after in (
        (b"def f(server_args):\n", b'    name = "xgrammar"'),
        (b"def f(server_args):\n", b"    name += suffix"),
        (b"def f(server_args):\n", b"    name, other = split(name)"),
        (b"def f(server_args):\n", b"    for name in names:\n        pass"),
        (b"def f(server_args):\n", b"    with open(p) as name:\n        pass"),
        (b"def f(server_args, name):\n", b""),
        (b"def f(server_args):\n    log(name)\n", b""),
        (b"def f(server_args):\n    global name\n", b""),
        (b"if ready:\n", b""),
    ):
        data = before + body % after
        got = sites.scan(data)
        assert [c[2] for c in got["choices"] if c[0] == "outlines"] == ["name"], data
    # `name` in a call's arguments or a comparison binds nothing
    for after in (b"    log(name, level=1)", b"    ok = name >= 1 or name != 2"):
        data = b"def f(server_args):\n" + body % after
        assert sites.scan(data)["choices"][-1][2] == "grammar_backend", data


def test_a_local_is_followed_to_its_function_s_end() -> None:
    """A docstring line at the margin does not end the function; the next def does."""
    data = (
        b'def f(server_args):\n    mode = server_args.grammar_backend\n    """Doc\nat the margin\n'
        b'"""\n    if mode == "outlines":\n        pass\n'
        b'def g():\n    if mode == "none":\n        pass\n'
    )
    assert _subjects(sites.scan(data)) == [
        ("outlines", 6, "grammar_backend"),
        ("none", 9, "mode"),
    ]


def test_a_local_s_comparison_is_the_flag_s_when_the_flag_accepts_the_value() -> None:
    """The rewritten subject is the flag's dest: a value the flag takes is its choice site
    (by the name, whatever other flags take it), another value is no choice site of any."""
    from ingest.assemble import Attributor

    flags: list[dict[str, Any]] = [
        {"name": n, "dest": d, "choices": c, "choices_dynamic": False, "deprecated": None}
        for n, d, c in [
            ("--grammar-backend", "grammar_backend", ["xgrammar", "outlines", "none"]),
            ("--sampling-backend", "sampling_backend", ["flashinfer", "pytorch"]),
            ("--attention-backend", "attention_backend", ["flashinfer", "triton"]),
            ("--speculative-algorithm", "speculative_algorithm", ["none", "eagle"]),
        ]
    ]
    who = Attributor(flags, {f["dest"]: f["name"] for f in flags})
    got = {
        (v, no): who.attribute(v, tail, "pkg/runner.py")
        for v, no, tail in _subjects(sites.scan(LOCAL))
    }
    assert got[("outlines", 11)] == ("--grammar-backend", [], "subject")
    assert got[("none", 18)] == ("--grammar-backend", [], "subject")
    assert got[("llguidance", 18)] is None  # not a value of the flag compared
    assert got[("flashinfer", 27)] == ("--sampling-backend", [], "subject")
    # the bare names alone said nothing: `name` no flag's, `backend` either flag's
    assert who.attribute("outlines", "name") is None
    assert who.attribute("flashinfer", "backend") == (
        None, ["--attention-backend", "--sampling-backend"], "",
    )  # fmt: skip


def _spans_by_find(data: bytes) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(docstring spans, every triple-quoted span with an unclosed one to the end), by the
    plain walk of bytes.find: what sites.triple_quoted's passes must give."""
    every: list[tuple[int, int]] = []
    docs: list[tuple[int, int]] = []
    at = min((i for i in (data.find(b'"""'), data.find(b"'''")) if i >= 0), default=-1)
    while at >= 0:
        quote = data[at : at + 3]
        close = data.find(quote, at + 3)
        end = len(data) if close < 0 else close + 3
        every.append((at, end))
        if close >= 0 and data[at - 1 : at] not in (b"f", b"F"):
            docs.append((at, end))
        nexts = [i for i in (data.find(b'"""', end), data.find(b"'''", end)) if i >= 0]
        at = min(nexts) if close >= 0 and nexts else -1
    return docs, every


def test_triple_quoted_strings_by_their_quote_runs() -> None:
    cases = [  # (text, whether its last string is unclosed)
        (b'x = """a""""\ny = 1\n', False),  # a run of four closes at its first three
        (b'""""""\n"""b"""\n', False),  # an empty string, then another
        (b"s = '''a \"\"\" b'''\nt = \"\"\"c ''' d\"\"\"\n", False),  # each kind in the other
        (b'f"""{x}""" + """doc"""\nF"""y"""', False),  # f-strings are no docstrings
        (b"a = \"\"\"never closed\n'''x'''\n", True),  # unclosed: the rest is in it
        (b"'''''''\n", False),  # seven quotes: closed by the next three, one left
        (b"no quotes at all", False),
    ]
    for data, unclosed in cases:
        docs, every = _spans_by_find(data)
        assert sites.triple_quoted(data) == (every, unclosed), data
        assert sites.docstring_spans(data) == docs, data
        assert sites.docstring_spans(data.decode()) == docs, data  # str offsets alike (ASCII)


def test_line_start_from_any_numbered_offsets() -> None:
    data = b"a = 1\n\n    b = server_args.x\nc\n\nlast"
    starts = [0]
    for at, byte in enumerate(data):
        if byte == ord("\n"):
            starts.append(at + 1)
    for numbered in ([], [9], [9, 30], [len(data) - 1]):
        index = sites.LineIndex(data)
        for offset in numbered:
            index.number(offset)
        assert [index.line_start(no) for no in range(1, len(starts) + 1)] == starts
        assert index.line_start(len(starts) + 1) is None


def test_a_read_whose_word_overlaps_the_one_before() -> None:
    # `server_args` ends with the letter it starts with: the places of the word overlap
    got = sites.scan(b"x = server_argserver_args.tp_size\n")
    assert [r[0] for r in got["reads"]] == ["tp_size"]
