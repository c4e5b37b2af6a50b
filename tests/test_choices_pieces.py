"""scan_choice_shapes from a blob's pieces (ingest/chunks.py) gives what the whole-blob scan
gives, version after version of one path, including the shapes that are not local to a
piece: a literal or a match cut by a blank line, a lookahead that sees the next piece, a
dispatch dict's name above a blank line, a receiver's type split across pieces."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.choices import NONLOCAL, SHAPES, scan_choice_shapes
from ingest.chunks import Piece, PieceMemo


class _Pieces:
    """What analyze() hands the scan: the blob's pieces, with the memo's results."""

    def __init__(self, memo: PieceMemo, path: str, data: bytes) -> None:
        self.parts = memo.pieces(path, data)

    def get(self) -> list[Piece]:
        return self.parts


def _is_call(tail: str) -> list[Any]:
    return ["x", 1, tail, "is_call"]


def _versions(
    texts: list[str], choices: list[list[Any]] | None = None
) -> list[tuple[dict[str, Any], dict[str, Any], _Pieces]]:
    """Each version of one path scanned from its pieces (one memo) and whole."""
    memo = PieceMemo()
    out = []
    for text in texts:
        data = text.encode()
        pieces = _Pieces(memo, "a.py", data)
        found = scan_choice_shapes(data, choices or [], None, pieces)
        out.append((found, scan_choice_shapes(data, choices or []), pieces))
    return out


def _same(texts: list[str], choices: list[list[Any]] | None = None) -> list[dict[str, Any]]:
    results = _versions(texts, choices)
    for found, whole, _p in results:
        assert found == whole
        assert list(found["lines"]) == list(whole["lines"])  # the same citing order
    return [found for found, _w, _p in results]


REGISTRY = """\
import x


@register_attention_backend("fa3")
def fa3():
    pass


MODES = ["a", "b"]
OTHER = ("c", "d")


def pick(mode):
    if mode in SUPPORTED:
        return {
            "fa3": A,
            "triton": B,
        }[mode]
"""


def test_unchanged_pieces_keep_their_results_and_shift_with_the_file() -> None:
    moved = "import y\n\n\n" + REGISTRY.replace('"triton": B', '"flashinfer": C')
    first, second = _same([REGISTRY, moved])
    assert first["registry"] == [["fa3", 4, "register_attention_backend", 0]]
    assert second["registry"] == [["fa3", 7, "register_attention_backend", 0]]  # shifted
    assert second["dispatch"][0][0] == [["fa3", 19], ["flashinfer", 20]]
    assert first["consts"] == second["consts"] == {"MODES": ["a", "b"], "OTHER": ["c", "d"]}
    assert second["named_contains"] == [["SUPPORTED", 17, "mode"]]


def test_the_second_version_scans_only_its_new_pieces(monkeypatch: Any) -> None:
    import ingest.choices

    scanned: list[bytes] = []
    found = ingest.choices._found

    def spy(data: bytes, lines: Any, texts: list[bytes] | None) -> Any:
        scanned.extend(texts or [])  # (the whole-blob scans: none)
        return found(data, lines, texts)

    monkeypatch.setattr(ingest.choices, "_found", spy)
    changed = REGISTRY.replace("pass", "return 1")
    (_f, _w, first), (_f2, _w2, second) = _versions([REGISTRY, changed])
    # All the pieces of the first version, then the new one of the second.
    new = b'\n@register_attention_backend("fa3")\ndef fa3():\n    return 1'
    assert scanned[len(first.get()) :] == [new]


def test_a_test_whose_expression_starts_above_spans_those_lines_in_pieces_too() -> None:
    text = 'SUPPORTED = ["a"]\n\n\ndef f(mode):\n    if (\n        mode\n        in SUPPORTED\n'
    first, second = _same([text, "import y\n\n\n" + text])
    assert first["named_contains"] == [["SUPPORTED", 7, "mode"]]
    assert first["lines"]["7"] == "mode in SUPPORTED"
    assert first["spans"] == {"7": 1}  # cited from line 6
    assert second["spans"] == {"10": 1}  # the piece's kept result, shifted with it


def test_a_text_repeated_in_a_file_is_cited_at_each_place() -> None:
    block = 'TABLE = {\n    "a": 1,\n    "b": 2,\n}\n'
    text = block + "\n\nx = 1\n\n\n" + block
    (found,) = _same([text])
    assert [group[0] for group in found["dispatch"]] == [
        [["a", 2], ["b", 3]],
        [["a", 11], ["b", 12]],
    ]


def test_a_literal_cut_by_a_blank_line_is_read_whole() -> None:
    # The first piece leaves the bracket open: in the second version only the piece after
    # the blank line changed, and the literal's values must follow it.
    first = 'NAMES = [\n    "a",\n\n    "b",\n]\n'
    second = 'NAMES = [\n    "a",\n\n    "c",\n]\n'
    found = _same([first, second])
    assert [f["consts"] for f in found] == [{"NAMES": ["a", "b"]}, {"NAMES": ["a", "c"]}]


def test_a_lookahead_past_a_blank_line_sees_the_next_piece() -> None:
    # ` in CHOICES` then `(`: a call, not containment in a constant; then a version where
    # the next piece no longer starts with a bracket.
    first = "ok = mode in CHOICES\n\n(1, 2)\n"
    second = "ok = mode in CHOICES\n\nx = 1\n"
    first, second = "for a in b:\n    pass\n\n" + first, "for a in b:\n    pass\n\n" + second
    found = _same([first, second])
    assert "named_contains" not in found[0]
    assert found[1]["named_contains"] == [["CHOICES", 4, "mode"]]


def test_a_match_that_runs_past_a_blank_line_is_found() -> None:
    registry, named = _same(
        [
            'register_backend(\n\n    "fa3")\n',
            "ok = mode in\n\nCHOICES  # (and for a in b)\n",
        ]
    )
    assert registry["registry"] == [["fa3", 1, "register_backend", 0]]
    assert named["named_contains"] == [["CHOICES", 1, "mode"]]


def test_a_piece_that_is_not_local_stays_marked() -> None:
    texts = ["ok = mode in\n\nCHOICES\n", "ok = mode in\n\nX = 1\n"]
    (_f, _w, pieces), _second = _versions(texts)
    assert pieces.get()[0][2][SHAPES] == NONLOCAL


def test_a_dispatch_dicts_name_above_a_blank_line() -> None:
    text = 'table = {\n\n    "a": 1,\n    "b": 2,\n}\n'
    (found,) = _same([text, text.replace('"b"', '"c"')])[:1]
    assert found["dispatch"] == [[[["a", 3], ["b", 4]], 3, "table", []]]


def test_a_dispatch_run_goes_on_past_a_blank_line() -> None:
    text = 'table = {\n    "a": 1,\n\n    "b": 2,\n}\n'
    found = _same([text, text.replace('"b"', '"c"')])
    assert found[1]["dispatch"] == [[[["a", 2], ["c", 4]], 2, "table", []]]


def test_a_receivers_type_split_across_pieces() -> None:
    choices = [_is_call("backend")]
    first = "backend\n\n= get_moe_runner_backend()\n\nif backend.is_x():\n    pass\n"
    second = first.replace("get_moe_runner_backend", "get_other_backend")
    found = _same([first, second], choices)
    assert found[0]["types"] == {"backend": "get:moe_runner_backend"}
    assert found[1]["types"] == {"backend": "get:other_backend"}


def test_receivers_types_from_pieces_take_the_first_getter_then_the_first_type() -> None:
    choices = [_is_call("backend"), _is_call("mode")]
    text = (
        "backend: AttentionBackend = x\n\n"
        "mode = Mode.A\n\n"
        "backend = get_attention_backend()\n\n"
        "xbackend = get_wrong()\n"
    )
    found = _same([text, text.replace("Mode.A", "Mode.B"), text.replace("x\n", "y\n")], choices)
    assert found[0]["types"] == {"backend": "get:attention_backend"}  # `Mode.` is no type
    assert found[2]["types"] == {"backend": "get:attention_backend"}


LINES = st.sampled_from(
    [
        "",
        "",
        "x = 1",
        'MODES = ["a", "b"]',
        "NAMES = [",
        '    "c",',
        "]",
        "table = {",
        '    "fa3": A,',
        '    "triton": B,',
        "}",
        "if mode in SUPPORTED_MODES:",
        "ok = mode in",
        "    CHOICES",
        "(1, 2)",
        '@register_backend("fa3")',
        "register_backend(",
        '    "triton")',
        '@register_pair("none", "triton")',
        'register_pair("a",',
        '    "b", fn)',
        '    "c",',
        '"""@register_pair("x", "y")"""',
        "def register_pair(first_name, runner_name):",
        "    key = (first_name, runner_name)",
        '"""',
        "backend: AttentionBackend = None",
        "backend",
        "= get_moe_runner_backend()",
        "# a comment with mode in MODES",
        "if (",
        "    mode",
        "    in SUPPORTED_MODES",
        "):",
    ]
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(LINES, max_size=30), min_size=1, max_size=4))
def test_pieces_give_the_whole_scans_facts_for_any_history(versions: list[list[str]]) -> None:
    _same(["\n".join(lines) + "\n" for lines in versions], [_is_call("backend")])


def test_a_match_across_new_pieces_that_are_not_neighbours() -> None:
    # The second version's new pieces are scanned joined: the first ends in the receiver's
    # name, the third starts with a getter, but in the file an unchanged piece is between.
    choices = [_is_call("backend")]
    first = "x = 1\n\npass\n\ny = 2\n"
    second = "x = 1\nbackend\n\npass\n\n= get_other()\n"
    found = _same([first, second], choices)
    assert "types" not in found[1]


def test_containment_needs_the_whole_blobs_cheap_test() -> None:
    # `in` then a tab: the regex matches, but the whole-blob scan only looks when the blob
    # has ` in ` somewhere; the pieces must give the same.
    text = "ok = mode in\tCHOICES or x\n"
    found = _same([text, text + "for a in b:\n    pass\n"])
    assert "named_contains" not in found[0]
    assert found[1]["named_contains"] == [["CHOICES", 1, "mode"]]


def test_each_string_argument_of_a_registry_call_keeps_its_position() -> None:
    text = (
        '@register_pair("none", "triton")\ndef f():\n    pass\n\n\n'
        'register_pair("a",\n    "b", make)\n\n'
        'register_pair("c", other, "d")\n\n'
        'register_pair("e" + x, "f")\n'
    )
    (found,) = _same([text])
    assert found["registry"] == [
        ["none", 1, "register_pair", 0],
        ["triton", 1, "register_pair", 1],
        ["a", 6, "register_pair", 0],
        ["b", 7, "register_pair", 1],
        ["c", 9, "register_pair", 0],  # not past an argument that is no string
        ["e", 11, "register_pair", 0],
    ]


def test_a_registry_call_going_on_past_a_blank_line() -> None:
    first = 'register_pair("a",\n\n    "b")\n'
    second = 'register_pair("a",\n\n    "c")\n'
    found = _same([first, second])
    assert [f["registry"][1][0] for f in found] == ["b", "c"]
    assert found[1]["registry"][1][1] == 3


def test_a_registry_call_quoted_in_a_docstring_registers_nothing() -> None:
    text = 'def f():\n    """Uses\n\n    @register_pair("none", "triton")."""\n'
    (found,) = _same([text, text + '\n\n@register_pair("a", "b")\ndef g():\n    pass\n'])[:1]
    assert "registry" not in found
