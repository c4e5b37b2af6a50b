"""scan_choice_shapes' CPU alone, this checkout against another, in one run.

    .venv/bin/python bench/bench_shapes.py --repo /path/to/tagged/sglang.git --against TREE

Every distinct blob of every tag, in bench_analyze.py's order (oldest version first), is
scanned whole by each checkout's ingest.choices in a
child process; the choices it reads (ingest.sites.scan) are computed outside the timing.
The results of both are compared (key order included): the count that differ must be 0.
"""

from __future__ import annotations

import argparse
import json
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def child(code: Path, repo: Path, items_file: Path, out: Path) -> None:
    sys.path.insert(0, str(code))
    from ingest.choices import scan_choice_shapes
    from ingest.git_source import BlobReader
    from ingest.sites import LineIndex, scan

    items = pickle.loads(items_file.read_bytes())
    reader = BlobReader(repo)
    blobs = list(reader.read_many([sha for sha, _k, _p in items]))
    reader.close()
    scanning = 0.0
    results = []
    for data in blobs:
        index = LineIndex(data)
        choices = scan(data, index)["choices"]
        t = time.process_time()
        found = scan_choice_shapes(data, choices, index)
        scanning += time.process_time() - t
        results.append(json.dumps(found))
    out.write_bytes(pickle.dumps({"scan": scanning, "results": results}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--repo", type=Path, required=True)
    p.add_argument("--against", type=Path, help="another checkout (the before; required)")
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        code, items_file, out = args.child
        child(Path(code), args.repo, Path(items_file), Path(out))
        return
    if args.against is None:
        p.error("--against is required")
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_analyze import _items

    items = [item for item in _items(args.repo, None) if not item[1].startswith("docs_")]
    runs: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        items_file = Path(tmp) / "items.pickle"
        items_file.write_bytes(pickle.dumps(items))
        for label, tree in (("this", ROOT), ("against", args.against)):
            out = Path(tmp) / f"{label}.pickle"
            subprocess.run(
                [sys.executable, __file__, "--repo", str(args.repo), "--child",
                 str(tree), str(items_file), str(out)],
                check=True,
            )  # fmt: skip
            runs[label] = pickle.loads(out.read_bytes())
    this, before = runs["this"], runs["against"]
    print(f"{len(items)} blobs")
    print(f"against: scan_choice_shapes {before['scan']:.2f} s CPU")
    print(
        f"this:    scan_choice_shapes {this['scan']:.2f} s CPU "
        f"(ratio {this['scan'] / before['scan']:.2f})"
    )
    differ = sum(a != b for a, b in zip(before["results"], this["results"], strict=True))
    print(f"results that differ: {differ} of {len(items)}")


if __name__ == "__main__":
    main()
