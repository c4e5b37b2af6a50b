"""The environment scan over pieces (ingest/chunks.py) against the whole-blob scan, in one run.

    .venv/bin/python bench/bench_env_pieces.py --repo /path/to/tagged/sglang.git

Every distinct blob of every tag (the order of bench/bench_analyze.py: each path's versions
oldest first, in one process) is cut into pieces once with a fresh PieceMemo (timed apart:
the cut is shared by the line scans, paid by whichever asks first); then, `--reps` times
each, `scan_env` over every blob whole and from its pieces (the pieces' results cleared
before each run), timed with time.process_time; the best of each is printed with their
ratio. Both must give the same sites for every blob. Last, tracemalloc measures what the
scan's piece results keep (sites, block contexts, shallower-line answers) for the whole
history in one memo (the ingest's memo keeps the last version of at most 4096 paths), apart
from each results dict's first key table (any line scan's, ~110 B a piece).
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ingest.analyze import facts_key, kind_of  # noqa: E402
from ingest.chunks import Piece, PieceMemo  # noqa: E402
from ingest.env import scan_env  # noqa: E402
from ingest.git_source import BlobReader, list_files, list_tags  # noqa: E402
from ingest.sites import LineIndex  # noqa: E402


class _Cut:
    def __init__(self, pieces: list[Piece]) -> None:
        self.pieces = pieces

    def get(self) -> list[Piece]:
        return self.pieces


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--repo", type=Path, required=True)
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args()
    wanted: dict[str, tuple[str, str, str]] = {}
    for ref in sorted(list_tags(args.repo), key=lambda r: r.date):
        for path, sha in list_files(args.repo, ref.commit).items():
            kind = kind_of(path)
            if not kind.startswith("docs_"):
                wanted.setdefault(facts_key(sha, kind), (sha, kind, path))
    items = list(wanted.values())
    reader = BlobReader(args.repo)
    blobs = list(reader.read_many([sha for sha, _k, _p in items]))
    reader.close()
    print(f"{len(items)} blobs, {sum(map(len, blobs)) / 1e6:.0f} MB")

    memo = PieceMemo(paths=1 << 20)  # every path's last version: the memo of one worker
    t = time.process_time()
    cut = [_Cut(memo.pieces(path, data)) for (_s, _k, path), data in zip(items, blobs, strict=True)]
    print(f"cutting and memo lookups: {time.process_time() - t:.2f} s CPU")

    def clear(fill: bool = False) -> None:
        for pieces in cut:
            for _line, _text, results in pieces.pieces:
                results.clear()
                if fill:  # a dict's first key allocates its table: any scan's, counted apart
                    results["first"] = None
                    del results["first"]

    def run(with_pieces: bool) -> tuple[float, list[Any]]:
        clear()
        indexes = [LineIndex(data) for data in blobs]
        t = time.process_time()
        out = [
            scan_env(data, kind == "server_args", index, pieces if with_pieces else None)
            for (_s, kind, _p), data, index, pieces in zip(items, blobs, indexes, cut, strict=True)
        ]
        return time.process_time() - t, out

    best: dict[bool, float] = {}
    found: dict[bool, list[Any]] = {}
    for _ in range(args.reps):
        for with_pieces in (False, True):
            spent, found[with_pieces] = run(with_pieces)
            best[with_pieces] = min(best.get(with_pieces, spent), spent)
    print(f"scan_env whole blobs: {best[False]:.2f} s CPU (best of {args.reps})")
    print(f"scan_env from pieces: {best[True]:.2f} s CPU, ratio {best[True] / best[False]:.3f}")
    differ = sum(a != b for a, b in zip(found[False], found[True], strict=True))
    print(f"blobs whose sites differ: {differ} of {len(items)}")

    clear(fill=True)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = [
        scan_env(data, kind == "server_args", None, pieces)
        for (_s, kind, _p), data, pieces in zip(items, blobs, cut, strict=True)
    ]
    del kept
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    pieces_held = sum(len(pieces.pieces) for pieces in cut)
    print(
        f"kept in the piece results by the scan: {(after - before) / 2**20:.1f} MiB "
        f"(one memo of every path's last version, {pieces_held} pieces cut in all)"
    )


if __name__ == "__main__":
    main()
