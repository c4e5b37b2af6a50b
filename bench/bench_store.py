"""CPU time of writing versions (ingest.store.write_version) over a full ingest, and the
knowledge base's size per table, for this tree and optionally another one, in one run.

    .venv/bin/python bench/bench_store.py --repo /path/to/tagged/sglang.git [--against TREE]

Each tree ingests every tag into an empty database of its own (in a subprocess with that
tree's own Python), with write_version wrapped by time.process_time: the main process's CPU
spent writing, not the workers' analysis. Also printed: that process's whole CPU time and
wall time, and `select name, sum(pgsize) from dbstat` grouped into blob tables and the rest.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SNIPPET = """
import json, sys, time
from pathlib import Path
import ingest.runner as runner
from ingest.runner import IngestOptions, run
spent = [0.0]
inner = runner.write_version
def timed(*args, **kwargs):
    t0 = time.process_time()
    try:
        return inner(*args, **kwargs)
    finally:
        spent[0] += time.process_time() - t0
runner.write_version = timed
repo, db, cache = sys.argv[1:4]
t0, c0 = time.perf_counter(), time.process_time()
run(IngestOptions(repo=repo, db_url="sqlite:///" + db, web_url="", cache_dir=Path(cache),
                  tags="*", rebuild=True, jobs=2))
print(json.dumps({"write_version_cpu": spent[0], "main_cpu": time.process_time() - c0,
                  "wall": time.perf_counter() - t0}))
"""

BLOB_TABLES = {"blob", "blobfacts", "sqlite_autoindex_blob_1", "sqlite_autoindex_blobfacts_1"}


def measure(tree: Path, repo: str, workdir: Path) -> dict:
    db = workdir / f"{tree.name}.db"
    out = subprocess.run(
        [str(tree / ".venv/bin/python"), "-c", SNIPPET, repo, str(db), str(workdir / "cache")],
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result = json.loads(out.strip().splitlines()[-1])
    with sqlite3.connect(db) as conn:
        sizes = dict(conn.execute("select name, sum(pgsize) from dbstat group by name"))
    result["blob_tables_mb"] = sum(v for k, v in sizes.items() if k in BLOB_TABLES) / 1e6
    result["other_tables_mb"] = sum(v for k, v in sizes.items() if k not in BLOB_TABLES) / 1e6
    result["total_mb"] = sum(sizes.values()) / 1e6
    result["tables_mb"] = {
        k: round(v / 1e6, 3) for k, v in sorted(sizes.items(), key=lambda kv: -kv[1]) if v > 1e5
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", required=True)
    parser.add_argument("--against", type=Path, help="another checkout of Flag Atlas")
    parser.add_argument("--keep", type=Path, help="keep the databases in this directory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        results = {"this": measure(ROOT, args.repo, workdir)}
        if args.against:
            results["against"] = measure(args.against.resolve(), args.repo, workdir)
            results["write_version_cpu_ratio"] = (
                results["this"]["write_version_cpu"] / results["against"]["write_version_cpu"]
            )
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
