"""What a per-line memo could save the line-level scans, measured on a real clone.

    .venv/bin/python bench/bench_lines.py --repo /path/to/tagged/sglang.git

The idea (issue 13): consecutive versions of a path share almost every line, and most of what
ingest/sites.py, ingest/env.py and ingest/choices.py find is line-local, so a line seen before
could skip the regex passes. This prints, over every distinct blob of every tag (CPU seconds,
time.process_time, one process):

- the three scans as they are (sites.scan + scan_env + scan_choice_shapes);
- the per-line work any such memo costs even when it holds every line: splitting each blob
  into lines and one dict lookup per line (a real memo needs more: finding the new lines,
  joining them, putting the results back);
- the bytes a memo leaves to scan, in the runner's order (batches of 64 blobs, workers taking
  turns), for memos of two generations of K lines each, with the memo's size.

A memo pays only if (per-line work) + (left to scan) x (scan cost per byte) is well under the
scans' cost, within the memory the ingest can spare per worker.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BATCH = 64  # ingest/runner.py's


def memo_size(memo: dict[bytes, object]) -> int:
    return sys.getsizeof(memo) + sum(map(sys.getsizeof, memo))


def left_to_scan(blobs: list[list[bytes]], workers: int, limit: int | None) -> tuple[float, int]:
    """(fraction of bytes in lines no memo held, largest memo in bytes)."""
    current: list[dict[bytes, object]] = [{} for _ in range(workers)]
    older: list[dict[bytes, object]] = [{} for _ in range(workers)]
    new = total = largest = 0
    for i, lines in enumerate(blobs):
        w = (i // BATCH) % workers
        cur, old = current[w], older[w]
        for line in lines:
            total += len(line) + 1
            if line in cur:
                continue
            if line not in old:
                new += len(line) + 1
            cur[line] = None
        if limit is not None and len(cur) > limit:
            largest = max(largest, memo_size(cur) + memo_size(old))
            older[w], current[w] = cur, {}
    for cur, old in zip(current, older, strict=True):
        largest = max(largest, memo_size(cur) + memo_size(old))
    return new / total, largest


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--repo", type=Path, required=True)
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_analyze import _items

    from ingest.analyze import LineIndex
    from ingest.choices import scan_choice_shapes
    from ingest.env import scan_env
    from ingest.git_source import BlobReader
    from ingest.sites import scan

    items = [item for item in _items(args.repo, None) if not item[1].startswith("docs_")]
    reader = BlobReader(args.repo)
    blobs = list(reader.read_many([sha for sha, _k, _p in items]))
    reader.close()

    t = time.process_time()
    for (_sha, kind, _path), data in zip(items, blobs, strict=True):
        index = LineIndex(data)
        facts = scan(data, index)
        scan_env(data, kind == "server_args", index)
        scan_choice_shapes(data, facts["choices"], index)
    scans = time.process_time() - t

    t = time.process_time()
    split = [data.split(b"\n") for data in blobs]
    splitting = time.process_time() - t
    every: dict[bytes, object] = {}
    for lines in split:
        every.update(dict.fromkeys(lines))
    t = time.process_time()
    for lines in split:
        list(map(every.get, lines))
    lookups = time.process_time() - t

    size = sum(map(len, blobs))
    nlines = sum(map(len, split))
    distinct = sum(len(line) + 1 for line in every)
    print(f"{len(blobs)} blobs, {size / 1e6:.0f} MB, {nlines / 1e6:.2f} M lines, "
          f"{len(every) / 1e3:.0f} k distinct ({distinct / size:.1%} of the bytes)")  # fmt: skip
    print(f"the three scans          {scans:6.2f} s CPU ({scans / size * 1e8:.2f} s per 100 MB)")
    print(f"split into lines         {splitting:6.2f} s")
    print(f"one lookup a line        {lookups:6.2f} s   (memo of every line: "
          f"{memo_size(every) / 2**20:.0f} MiB)")  # fmt: skip
    for workers in (1, 2):
        for limit in (20_000, 40_000, 80_000, None):
            left, largest = left_to_scan(split, workers, limit)
            floor = splitting + lookups + left * scans
            print(
                f"{workers} worker(s), K={limit or 'all':>6}: {left:6.1%} of the bytes left to "
                f"scan, memo {largest / 2**20:5.1f} MiB a worker; floor >= {floor:5.2f} s "
                f"({scans / floor:.2f}x)"
            )


if __name__ == "__main__":
    main()
