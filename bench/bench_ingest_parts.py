"""Main-process CPU of a full ingest, by part: assembly, writing, search index.

    .venv/bin/python bench/bench_ingest_parts.py --repo CLONE [--tree OTHER_CHECKOUT]
    .venv/bin/python bench/bench_ingest_parts.py --repo CLONE --against OTHER_CHECKOUT

Runs `ingest.runner.run` of this checkout (or `--tree`'s) in this process into a fresh
database, with time.process_time() summed around each version's assembly, each version's
write and the search index build, so a change is compared with main's in one script.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--tree", type=Path, help="the checkout whose code to run")
    parser.add_argument("--db", type=Path, help="database to write (default: a temporary one)")
    parser.add_argument(
        "--against", type=Path, help="another checkout: both run, each in its own process"
    )
    opts = parser.parse_args()
    if opts.against:  # this tree and the other, one after the other, each in a fresh process
        for tree in (opts.against, Path(__file__).resolve().parent.parent):
            cmd = [
                sys.executable,
                str(Path(__file__).resolve()),
                "--repo",
                str(opts.repo),
                "--tree",
                str(tree),
            ]
            subprocess.run(cmd, check=True, cwd=tree)  # the workers import from there
        return
    sys.path.insert(0, str((opts.tree or Path(__file__).resolve().parent.parent).resolve()))
    import ingest.runner as runner

    try:  # the index's writer, in its own module since the split of kb/search.py
        import kb.search_build as search
    except ImportError:
        import kb.search as search  # type: ignore[no-redef]

    cpu: Counter[str] = Counter()

    def timed(name: str, fn):  # type: ignore[no-untyped-def]
        def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
            start = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                cpu[name] += time.process_time() - start

        return wrapper

    if hasattr(runner, "Assembly"):
        runner.Assembly.version = timed("assemble", runner.Assembly.version)  # type: ignore[method-assign]
    else:
        runner.assemble = timed("assemble", runner.assemble)  # type: ignore[attr-defined]
    runner.write_version = timed("write_version", runner.write_version)
    import gc

    gc_start: list[float] = []

    def on_gc(phase: str, info: dict) -> None:  # type: ignore[type-arg]
        if phase == "start":
            gc_start.append(time.process_time())
        elif gc_start:
            cpu[f"gc gen{info['generation']}"] += time.process_time() - gc_start.pop()

    gc.callbacks.append(on_gc)
    search.build_index = timed("build_index", search.build_index)
    if hasattr(search, "IndexBuild"):  # the index extended as versions are written
        search.IndexBuild.add = timed("index add", search.IndexBuild.add)  # type: ignore[method-assign]
        search.IndexBuild.finish = timed("index finish", search.IndexBuild.finish)  # type: ignore[method-assign]
    if hasattr(search.IndexBuild, "add_rows"):  # fed the rows just written
        search.IndexBuild.add_rows = timed("index add", search.IndexBuild.add_rows)  # type: ignore[method-assign]
    # Parts inside those above (or elsewhere in the main process), where this tree has them.
    import ingest.store as store

    inner = {
        "save_facts": (runner, "save_facts"),
        "blob_rows": (store, "blob_rows"),
        "relations": (store, "write_relations_of"),
        "write_rows": (store, "write_rows"),
        "collect": (search, "_collect_rows" if hasattr(search, "_collect_rows") else "_collect"),
    }
    if hasattr(runner, "PackedFacts"):
        inner["facts decode"] = (runner.PackedFacts, "__getitem__")
    import ingest.indirect as indirect

    if hasattr(indirect, "Resolver"):
        inner["resolve"] = (indirect.Resolver, "resolve")
    for name, (owner, attr) in inner.items():
        if hasattr(owner, attr):
            setattr(owner, attr, timed(name, getattr(owner, attr)))
    with tempfile.TemporaryDirectory() as tmp:
        db = opts.db or Path(tmp) / "kb.db"
        start, wall = time.process_time(), time.perf_counter()
        runner.run(
            runner.IngestOptions(
                repo=str(opts.repo), db_url=f"sqlite:///{db}", web_url="https://example.org",
                cache_dir=Path(tmp) / "cache", tags="*",
            )
        )  # fmt: skip
        total, wall = time.process_time() - start, time.perf_counter() - wall
    print(f"tree {opts.tree or 'this'}: main process {total:.2f} s CPU, {wall:.2f} s wall")
    outer = [n for n in cpu if n not in inner]
    print(f"  {'elsewhere':<14} {total - sum(cpu[n] for n in outer):6.2f} s CPU")
    for name in sorted(outer, key=lambda n: -cpu[n]):
        print(f"  {name:<14} {cpu[name]:6.2f} s CPU")
    print("  of which (inside the parts above or elsewhere):")
    for name in sorted(inner, key=lambda n: -cpu[n]):
        print(f"    {name:<14} {cpu[name]:6.2f} s CPU")


if __name__ == "__main__":
    main()
