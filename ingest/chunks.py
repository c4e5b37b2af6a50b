"""Pieces of a blob, and what the last version of its path gave for each of them.

A path's consecutive versions share most of their text: cut at blank lines, about 70% of the
bytes of SGLang's history are in pieces that the last version of the same path already had.
A scan whose findings in a piece depend on that piece alone can keep those pieces' results
(line numbers relative to the piece) and scan only the new ones. The ingest sends all the
versions of a path to the same worker, oldest first, so the memo of the last version hits.

Pieces never cut a triple-quoted string (a docstring with blank lines stays whole). They may
cut a bracketed expression that holds a blank line: a scan that looks across lines must
check that what it needs lies inside the piece.
"""

from __future__ import annotations

from typing import Any, Protocol

CUT = b"\n\n"
TRIPLE_QUOTES = (b'"""', b"'''")


def string_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each triple-quoted string, from its opening quote to past its closing
    one (an unclosed one runs to the end). bytes.find only: a regex costs several times more."""
    spans: list[tuple[int, int]] = []
    following = {q: data.find(q) for q in TRIPLE_QUOTES}  # next opening of each kind
    while live := [(at, q) for q, at in following.items() if at >= 0]:
        start, quote = min(live)
        end = data.find(quote, start + 3)
        end = len(data) if end < 0 else end + 3
        spans.append((start, end))
        for q, at in following.items():  # search again only for openings now passed
            if 0 <= at < end:
                following[q] = data.find(q, end)
    return spans


def pieces(data: bytes) -> list[tuple[int, bytes]]:
    """(first line, text) of each piece of `data`: the text between blank lines, with
    neighbours joined where the cut would fall inside a triple-quoted string. The pieces
    joined by CUT give `data` back."""
    parts = data.split(CUT)
    out: list[tuple[int, bytes]] = []
    line = 1
    if TRIPLE_QUOTES[0] not in data and TRIPLE_QUOTES[1] not in data:
        for part in parts:
            out.append((line, part))
            line += part.count(b"\n") + 2
        return out
    spans = iter(string_spans(data))
    past = (len(data) + 1, len(data) + 1)  # after the last span: beyond every cut
    start, end = next(spans, past)
    offset = 0  # where the current part starts in data
    held: list[bytes] = []
    for part in parts:
        offset += len(part)  # the cut after this part is at data[offset : offset + 2]
        while end <= offset:  # spans that end before this cut
            start, end = next(spans, past)
        if start < offset:  # the cut is inside a string: join the next part
            held.append(part)
            offset += len(CUT)
            continue
        if held:
            held.append(part)
            part = CUT.join(held)
            held = []
        out.append((line, part))
        line += part.count(b"\n") + 2
        offset += len(CUT)
    return out  # (the last part has no cut after it: nothing is left held)


# (first line of the piece in the blob, its text, scan name -> that scan's result for this
# text). The dict is shared with the memo: fill it in, never change a result once there; line
# numbers in a result are relative to the piece (1 = its first line). Plain tuples: a blob has
# ~60 pieces and the history 850 k, so an object each would cost more than the lookups.
Piece = tuple[int, bytes, dict[str, Any]]


class PieceSource(Protocol):
    """A blob's pieces, cut when a scan first asks (ingest.analyze.BlobPieces)."""

    def get(self) -> list[Piece]: ...


# Results that say "nothing here" for a whole piece, each one shared constant of a scan
# (sites.NOTHING, choices.EMPTY, env.NO_SITES, ...), by id: a module constant lives as
# long as the process, so its id is never reused. A piece whose results are all markers is
# kept by the memo as one shared tuple of (scan, marker) pairs.
MARKER_IDS: set[int] = set()


def marker(value: Any) -> Any:
    """`value`, a module constant, registered as a marker (never changed by any scan)."""
    MARKER_IDS.add(id(value))
    return value


Compact = tuple[tuple[str, Any], ...]  # a results dict of markers only, shared


class PieceMemo:
    """Per worker: for the last `paths` paths, each piece of the last version analyzed here
    -> what each scan found in it.

    A piece is known by its text's hash, not its text: holding every path's last text cost
    each worker ~20 MiB and pushed the ingest over its memory bar. Two different pieces of
    one path with the same 64-bit hash (odds ~1e-16 a version) would share results. A
    path's entry is replaced by its next version's.

    Most pieces find nothing in any scan: once a blob is done (at the next call), such a
    piece's results dict is replaced by one shared tuple of its items (a dict each cost
    ~190 bytes, 45% of the memo), copied back into a fresh dict when a version has the
    piece again (scans fill in results of their own). The memory saved holds more paths:
    860 paths take about the memory 640 took without (16.5 MB for the last 640 paths of the
    124 real tags, 17.0 MB for 860 with the imports of indirect.py kept too), and an ingest
    of the 124 tags with 2 workers misses 13% fewer pieces (234.6 k -> 202.9 k)."""

    def __init__(self, paths: int = 4096) -> None:
        self.paths = paths
        self._last: dict[str, dict[int, Any]] = {}  # (a results dict or a Compact)
        self.hits = self.misses = 0
        self._shared: dict[tuple[tuple[str, ...], tuple[int, ...]], Compact] = {}
        # the last blob's results, to compact once it is done (the arguments of _compact)
        self._done: tuple[dict[int, Any], list[int], list[tuple[int, Compact]]] | None = None

    def pieces(self, path: str | None, data: bytes) -> list[Piece]:
        """The pieces of `data`, with the results the last version of `path` had for the
        same text (a text repeated in this version shares one results dict)."""
        if self._done is not None:
            self._compact(*self._done)
        old = self._last.pop(path, {}) if path is not None else {}
        new: dict[int, dict[str, Any]] = {}
        fresh: list[int] = []  # the pieces to compact if they can be: new ones
        copied: list[tuple[int, Compact]] = []  # and those copied from a Compact
        out: list[Piece] = []
        for line, text in pieces(data):
            key = hash(text)
            results: dict[str, Any] | None = new.get(key)
            if results is None:
                kept = old.get(key)
                if kept is None:
                    results = {}
                    fresh.append(key)
                elif isinstance(kept, tuple):
                    results = dict(kept)
                    copied.append((key, kept))
                else:
                    results = kept  # (it holds more than markers: it stays a dict)
                new[key] = results
            out.append((line, text, results))
        self.misses += len(fresh)
        self.hits += len(new) - len(fresh)
        if path is not None:
            self._done = (new, fresh, copied)
            self._last[path] = new
            while len(self._last) > self.paths:
                self._last.pop(next(iter(self._last)))
        return out

    def _compact(
        self, new: dict[int, Any], fresh: list[int], copied: list[tuple[int, Compact]]
    ) -> None:
        self._done = None
        for key, kept in copied:
            if len(new[key]) == len(kept):  # no scan added a result: the same tuple again
                new[key] = kept
            else:
                fresh.append(key)
        shared = self._shared
        for key in fresh:
            results = new[key]
            ids = tuple(map(id, results.values()))
            if MARKER_IDS.issuperset(ids):
                sig = (tuple(results), ids)
                found = shared.get(sig)
                if found is None:
                    found = shared[sig] = tuple(results.items())
                new[key] = found
