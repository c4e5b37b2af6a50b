"""CPU time of the per-version assembly over every tag, and a digest of its rows.

    .venv/bin/python bench/bench_assemble.py --repo CLONE --db KB.db [--tree OTHER_CHECKOUT]
        [--digest OUT.json] [--check BEFORE.json]

The cached blob facts of an ingested knowledge base (its blobfacts table) stand in for the
workers, so only `assemble()` is timed (time.process_time, the main process's CPU), versions
oldest first as the ingest runs them. `--tree` imports another checkout's ingest code (main's,
for a before/after in one script). `--digest` writes a hash of every VersionRows field per
version; `--check` compares with one written before and names the versions and fields that
differ (exit 1), so a faster assembly is proved to give the same rows.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
import zlib
from pathlib import Path

FIELDS = [
    "era", "flags", "enums", "constraints", "usages", "choice_sites", "env_vars", "env_sites",
    "env_prefix_aliases", "docs", "indirect", "models", "cited", "warnings",
]  # fmt: skip


def digest(value: object) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--db", type=Path, required=True, help="a KB with cached blob facts")
    parser.add_argument("--tree", type=Path, help="the checkout whose ingest/ to import")
    parser.add_argument("--digest", type=Path)
    parser.add_argument("--check", type=Path)
    parser.add_argument("--profile", type=Path, help="write a cProfile of the assembly")
    opts = parser.parse_args()
    sys.path.insert(0, str((opts.tree or Path(__file__).resolve().parent.parent).resolve()))
    import sqlite3

    import ingest.assemble as assembly_module
    from ingest.analyze import facts_key, kind_of
    from ingest.git_source import BlobReader, list_files, list_tags
    from ingest.versions import select

    refs = select(list_tags(opts.repo), "*", [], None, None)
    trees = {ref.label: list_files(opts.repo, ref.commit) for ref in refs}
    wanted = {facts_key(sha, kind_of(p)) for t in trees.values() for p, sha in t.items()}
    conn = sqlite3.connect(f"file:{opts.db}?mode=ro", uri=True)
    columns = {r[1] for r in conn.execute("pragma table_info(blobfacts)")}
    if "base" in columns:  # schema 4: zstd deltas, undone by the store that wrote them
        from ingest.store import load_facts
        from kb.schema import make_engine

        engine = make_engine(f"sqlite:///{opts.db}")
        facts = {k: json.loads(f) for k, f in load_facts(engine, sorted(wanted)).items()}
    else:  # schema 3: zlib JSON
        facts = {
            k: json.loads(zlib.decompress(f))
            for k, f in conn.execute("select key, facts from blobfacts")
            if k in wanted
        }
    reader = BlobReader(opts.repo)
    texts: dict[str, str] = {}
    reading = 0.0  # CPU of git reads, left out of the assembly's

    def read_text(sha: str) -> str:
        nonlocal reading
        if sha not in texts:  # all texts kept: git reads are not what is measured
            start = time.process_time()
            texts[sha] = reader.read(sha).decode("utf-8", "replace")
            reading += time.process_time() - start
        return texts[sha]

    # One Assembly over all versions where the tree has it (as its ingest does), else
    # `assemble()` per version.
    if hasattr(assembly_module, "Assembly"):
        assemble = assembly_module.Assembly().version
    else:
        assemble = assembly_module.assemble
    resolving = 0.0  # CPU of the indirect reads' resolution, inside the assembly's
    import ingest.indirect as indirect

    if hasattr(indirect, "Resolver"):
        resolve = indirect.Resolver.resolve

        def timed_resolve(*args, **kwargs):  # type: ignore[no-untyped-def]
            nonlocal resolving
            start = time.process_time()
            try:
                return resolve(*args, **kwargs)
            finally:
                resolving += time.process_time() - start

        indirect.Resolver.resolve = timed_resolve  # type: ignore[method-assign]
    prof = None
    if opts.profile:
        import cProfile

        prof = cProfile.Profile()
    out: dict[str, dict[str, str]] = {}
    cpu = 0.0
    import gc

    # As the ingest runs it: what lives through the run is out of the collector's scans.
    gc.freeze()
    gc.set_threshold(50_000, *gc.get_threshold()[1:])
    for ref in refs:
        gc.freeze()
        start = time.process_time()
        if prof:
            prof.enable()
        rows = assemble(trees[ref.label], facts, read_text)
        if prof:
            prof.disable()
        cpu += time.process_time() - start
        out[ref.label] = {name: digest(getattr(rows, name)) for name in FIELDS}
    reader.close()
    cpu -= reading
    print(
        f"assemble over {len(refs)} versions: {cpu:.2f} s CPU, git reads left out "
        f"({reading:.2f} s; {opts.tree or 'this tree'}); of which resolve {resolving:.2f} s"
    )
    if prof:
        prof.dump_stats(str(opts.profile))
    if opts.digest:
        opts.digest.write_text(json.dumps(out, indent=0))
    if opts.check:
        before = json.loads(opts.check.read_text())
        bad = [
            (v, f) for v in sorted(set(before) | set(out)) for f in FIELDS
            if before.get(v, {}).get(f) != out.get(v, {}).get(f)
        ]  # fmt: skip
        for v, f in bad[:40]:
            print(f"differs: {v} {f}")
        print(f"{len(bad)} (version, field) pairs differ of {len(out) * len(FIELDS)}")
        sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
