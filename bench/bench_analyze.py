"""Per-blob analysis CPU (what the ingest's workers do), this checkout against another, in one run.

    .venv/bin/python bench/bench_analyze.py --repo /path/to/tagged/sglang.git --against TREE

Every distinct (blob, kind) of every tag is read once with one `git cat-file --batch`, its
batches of 64 dealt in turn to shards as the ingest's pool hands them to its workers
(`--shards`, default the cores), then each checkout's `ingest.analyze.analyze` runs over each
shard in a child process of its own (its own `sys.path`, its own caches; a `gc.freeze()`
every 64 blobs, as analyze_batch),
one after the other, timed with time.process_time: in all, per analyzer (the functions
ingest/analyze.py calls, wrapped), and the worker's packing (facts and texts compressed, and
each text's delta against the path's blob before where the code makes it, as analyze_batch
does). The facts of both are compared as canonical JSON: the count that differ
must be 0. `--profile N` prints the cProfile of this checkout's analysis, top N functions.
`--limit N` analyzes only the first N blobs (a quick look).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import inspect
import io
import json
import os
import pickle
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _items(repo: Path, limit: int | None) -> list[tuple[str, str, str, str | None]]:
    """(sha, kind, path, the path's blob before or None), as ingest.runner sends them."""
    from ingest.analyze import facts_key, kind_of
    from ingest.git_source import list_files, list_tags

    wanted: dict[str, tuple[str, str, str, str | None]] = {}
    blob_at: dict[str, str] = {}
    for ref in sorted(list_tags(repo), key=lambda r: r.date):
        for path, sha in list_files(repo, ref.commit).items():
            kind = kind_of(path)
            before = blob_at.get(path)
            wanted.setdefault(facts_key(sha, kind), (sha, kind, path, before))
            blob_at[path] = sha
    items = list(wanted.values())
    return items[:limit] if limit else items


def child(code: Path, repo: Path, items_file: Path, out: Path, profile: int) -> None:
    """Analyze every item with the code of `code`; write timings and facts to `out`."""
    sys.path.insert(0, str(code))
    import ingest.analyze as analyze_mod
    from ingest.git_source import BlobReader

    assert Path(analyze_mod.__file__).is_relative_to(code), analyze_mod.__file__
    items = pickle.loads(items_file.read_bytes())
    reader = BlobReader(repo)
    blobs = list(reader.read_many([sha for sha, _k, _p, _b in items]))
    befores = sorted({b for _s, _k, _p, b in items if b is not None})
    before_text = dict(zip(befores, reader.read_many(befores), strict=True))
    reader.close()
    # (the worker's delta of a text against the path's blob before, where the code makes it)
    with_before = "before" in inspect.signature(analyze_mod.packed).parameters

    # Each analyzer analyze() calls, wrapped to add its CPU time (nested calls counted once
    # in each: the figures are per function, the total is measured around analyze()).
    spent: dict[str, float] = {}
    targets = [
        name
        for name, fn in vars(analyze_mod).items()
        if callable(fn)
        and getattr(fn, "__module__", "").startswith("ingest.")
        and getattr(fn, "__module__", "") != "ingest.analyze"
        and not isinstance(fn, type)
    ]
    for name in targets:
        fn = getattr(analyze_mod, name)

        def timed(*args: Any, _fn: Any = fn, _name: str = name, **kw: Any) -> Any:
            t = time.process_time()
            try:
                return _fn(*args, **kw)
            finally:
                spent[_name] = spent.get(_name, 0.0) + time.process_time() - t

        setattr(analyze_mod, name, timed)

    prof = cProfile.Profile() if profile else None
    facts: dict[str, str] = {}
    t0 = time.process_time()
    if prof:
        prof.enable()
    results = []
    for (_sha, kind, path, _before), data in zip(items, blobs, strict=True):
        results.append(analyze_mod.analyze(data, kind, path))
        if len(results) % 64 == 0:  # as analyze_batch does after each batch of 64
            gc.freeze()
    if prof:
        prof.disable()
    analysis = time.process_time() - t0
    for (sha, kind, _path, _before), result in zip(items, results, strict=True):
        facts[f"{sha}:{kind}"] = json.dumps(result, sort_keys=True)

    # The worker's packing: what analyze_batch does with each blob's facts (`packed`), then
    # the pool's pickling of each batch's results to the parent (64 blobs a batch).
    t0 = time.process_time()
    packed_facts = packed_texts = 0
    batch: list[Any] = []
    for (sha, kind, path, before), data, result in zip(items, blobs, results, strict=True):
        if with_before:
            base = (before, before_text[before]) if before is not None else None
            a = analyze_mod.packed(sha, kind, path, data, result, base)
            f, t, sent = a.json, a.text, a
        elif hasattr(analyze_mod, "packed"):
            a = analyze_mod.packed(sha, kind, path, data, result)
            f, t, sent = a.json, a.text, a
        else:  # main before it: json + pickle of the facts, zstd of likely-cited texts
            f = json.dumps(result, separators=(",", ":")).encode()
            cited = analyze_mod.likely_cited(kind, result)
            t = analyze_mod.pack(data) if cited else None
            a = analyze_mod.Analyzed(f"{sha}:{kind}", path, {}, f, t)
            sent = (a, pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
        batch.append(sent)
        if len(batch) == 64:
            pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
            batch = []
        packed_facts += len(f)
        packed_texts += len(t) if t else 0
    pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
    packing = time.process_time() - t0
    stats = ""
    if prof:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(profile)
        stats = s.getvalue()
    out.write_bytes(
        pickle.dumps(
            {
                "analysis": analysis,
                "packing": packing,
                "per": spent,
                "facts": facts,
                "packed_facts": packed_facts,
                "packed_texts": packed_texts,
                "profile": stats,
            }
        )
    )


def _summed(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The shards' runs as one: times and sizes added, facts merged, profiles one after
    the other."""
    run: dict[str, Any] = {"per": {}, "facts": {}, "profile": ""}
    for part in parts:
        for key in ("analysis", "packing", "packed_facts", "packed_texts"):
            run[key] = run.get(key, 0) + part[key]
        for name, s in part["per"].items():
            run["per"][name] = run["per"].get(name, 0.0) + s
        run["facts"].update(part["facts"])
        run["profile"] += part["profile"]
    return run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--repo", type=Path, required=True)
    p.add_argument("--against", type=Path, help="another checkout of Flag Atlas (the before)")
    p.add_argument("--limit", type=int)
    p.add_argument("--profile", type=int, default=0, help="cProfile: top N functions")
    p.add_argument(
        "--shards",
        type=int,
        default=os.cpu_count() or 1,
        help="worker shards, as the ingest deals them (default: the cores, as its --jobs)",
    )
    p.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        code, items_file, out, profile = args.child
        child(Path(code), args.repo, Path(items_file), Path(out), int(profile))
        return
    sys.path.insert(0, str(ROOT))
    from ingest.runner import BATCH

    items = _items(args.repo, args.limit)
    # Batch i to shard i % shards, each shard analyzed in a process of its own: what a
    # worker keeps between batches (its caches) is per worker.
    batches = [items[i : i + BATCH] for i in range(0, len(items), BATCH)]
    shards = [
        [item for batch in batches[n :: args.shards] for item in batch]
        for n in range(min(args.shards, len(batches)))
    ]
    print(f"{len(items)} distinct blobs in {len(shards)} shards")
    runs: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        trees = [("this", ROOT)] + ([("against", args.against)] if args.against else [])
        for label, tree in trees:
            parts = []
            for n, shard in enumerate(shards):
                items_file = Path(tmp) / f"items{n}.pickle"
                items_file.write_bytes(pickle.dumps(shard))
                out = Path(tmp) / f"{label}{n}.pickle"
                profile = args.profile if label == "this" else 0
                subprocess.run(
                    [sys.executable, __file__, "--repo", str(args.repo), "--child",
                     str(tree), str(items_file), str(out), str(profile)],
                    check=True,
                )  # fmt: skip
                parts.append(pickle.loads(out.read_bytes()))
            runs[label] = _summed(parts)
    for label, run in runs.items():
        print(
            f"{label}: analysis {run['analysis']:.2f} s CPU, packing {run['packing']:.2f} s; "
            f"facts JSON {run['packed_facts'] / 1e6:.1f} MB, "
            f"texts kept {run['packed_texts'] / 1e6:.1f} MB"
        )
        for name, s in sorted(run["per"].items(), key=lambda kv: -kv[1]):
            print(f"    {name:28} {s:6.2f} s")
    if "against" in runs:
        a, b = runs["against"], runs["this"]
        both = (b["analysis"] + b["packing"]) / (a["analysis"] + a["packing"])
        print(f"ratio analysis {b['analysis'] / a['analysis']:.2f}, analysis+packing {both:.2f}")
        differ = [k for k in a["facts"] if a["facts"][k] != b["facts"].get(k)]
        print(f"facts that differ: {len(differ)} of {len(a['facts'])}")
        for key in differ[:5]:
            print("   ", key)
    if runs["this"]["profile"]:
        print(runs["this"]["profile"])


if __name__ == "__main__":
    main()
