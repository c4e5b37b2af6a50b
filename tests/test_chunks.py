"""Pieces of a blob and the per-path memo of their results (ingest/chunks.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ingest.chunks import CUT, PieceMemo, marker, pieces, string_spans

SOURCE = b'''import os


def f(x):
    """Say what f does.

    More words after a blank line, inside the docstring.
    """
    return x == "a"


class C:
    def g(self):
        return 1
'''


def _lines_of(data: bytes, line: int, text: bytes) -> bool:
    return data.split(b"\n")[line - 1 : line - 1 + text.count(b"\n") + 1] == text.split(b"\n")


def test_pieces_cut_at_blank_lines_and_keep_docstrings_whole() -> None:
    found = pieces(SOURCE)
    texts = [text for _line, text in found]
    assert CUT.join(texts) == SOURCE
    docstring = next(text for text in texts if b"Say what" in text)
    assert b"More words" in docstring and b'return x == "a"' in docstring
    assert [line for line, _t in found] == [1, 3, 11]  # a part may start with a newline
    assert all(_lines_of(SOURCE, line, text) for line, text in found)


def test_an_unclosed_string_runs_to_the_end() -> None:
    data = b'x = 1\n\ns = """open\n\nstill open\n\nend'
    assert pieces(data) == [(1, b"x = 1"), (3, b's = """open\n\nstill open\n\nend')]
    assert string_spans(data) == [(data.index(b'"""'), len(data))]


def test_single_quoted_triple_strings_count_too() -> None:
    data = b"a = '''one\n\ntwo'''\n\nb = 2"
    assert [text for _l, text in pieces(data)] == [b"a = '''one\n\ntwo'''", b"b = 2"]


text_parts = st.lists(
    st.sampled_from([b"x = 1", b"", b'"""', b"'''", b"def f():\n    pass", b"\n", b'"""doc\n'])
)


@given(text_parts)
def test_pieces_give_the_blob_back_with_its_line_numbers(parts: list[bytes]) -> None:
    data = b"\n".join(parts)
    found = pieces(data)
    assert CUT.join(text for _l, text in found) == data
    assert all(_lines_of(data, line, text) for line, text in found)
    for start, end in string_spans(data):  # no cut inside a triple-quoted string
        offset = 0
        for _line, text in found[:-1]:
            offset += len(text)
            assert not (start < offset < end)
            offset += len(CUT)


def test_the_memo_hands_back_the_last_versions_results_for_the_same_text() -> None:
    memo = PieceMemo(paths=2)
    first = memo.pieces("a.py", SOURCE)
    for _line, text, results in first:
        results["n"] = len(text)
    changed = SOURCE.replace(b"return 1", b"return 2")
    second = memo.pieces("a.py", changed)
    kept = [results for _l, _t, results in second if results]
    assert len(kept) == len(second) - 1  # all but the changed piece
    assert [r["n"] for r in kept] == [len(t) for _l, t, r in second if r]
    assert not second[-1][2]  # the class changed: nothing kept
    # another path with the same text starts empty: results are per path
    assert not any(results for _l, _t, results in memo.pieces("b.py", SOURCE))


def test_the_memo_forgets_the_oldest_paths_beyond_its_bound() -> None:
    memo = PieceMemo(paths=2)
    for path in ("a.py", "b.py", "c.py"):
        for _l, _t, results in memo.pieces(path, SOURCE):
            results["seen"] = True
    assert not any(r for _l, _t, r in memo.pieces("a.py", SOURCE))  # forgotten
    assert all(r for _l, _t, r in memo.pieces("c.py", SOURCE))


NOTHING_HERE = marker(("test: nothing",))


def test_pieces_that_found_nothing_are_kept_compact_and_come_back_as_fresh_dicts() -> None:
    memo = PieceMemo(paths=4)
    for _l, _t, results in memo.pieces("a.py", SOURCE):
        results["scan"] = NOTHING_HERE
    for _l, _t, results in memo.pieces("b.py", SOURCE):
        results["scan"] = NOTHING_HERE
    memo.pieces("c.py", b"x = 1\n")  # the next blob: b.py's results are compacted
    kept = memo._last["b.py"]
    assert all(type(r) is tuple for r in kept.values())
    # one shared tuple for every piece of a.py and b.py that found the same nothing
    assert len({id(r) for p in ("a.py", "b.py") for r in memo._last[p].values()}) == 1
    again = memo.pieces("a.py", SOURCE)
    assert all(r == {"scan": NOTHING_HERE} and r["scan"] is NOTHING_HERE for _l, _t, r in again)
    # a scan filling in a result of its own changes this version's piece alone
    again[0][2]["other"] = NOTHING_HERE
    assert memo.pieces("b.py", SOURCE)[0][2] == {"scan": NOTHING_HERE}
    memo.pieces("d.py", b"y = 2\n")
    assert memo._last["a.py"][hash(again[0][1])] == (
        ("scan", NOTHING_HERE),
        ("other", NOTHING_HERE),
    )


def test_results_other_than_markers_stay_dicts() -> None:
    memo = PieceMemo(paths=4)
    for _l, text, results in memo.pieces("a.py", SOURCE):
        results["scan"] = NOTHING_HERE
        results["found"] = [len(text)]  # a list: not a marker
    memo.pieces("b.py", b"x = 1\n")
    assert all(type(r) is dict for r in memo._last["a.py"].values())
    assert [r["found"] for _l, _t, r in memo.pieces("a.py", SOURCE)] == [
        [len(t)] for _l, t, _r in pieces_of(SOURCE)
    ]


def pieces_of(data: bytes) -> list[tuple[int, bytes, None]]:
    return [(line, text, None) for line, text in pieces(data)]
