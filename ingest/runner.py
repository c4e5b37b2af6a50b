"""The ingest job: git -> blob facts (parallel, cached) -> per-version rows -> database.

1. Pick the refs to ingest and list each one's Python files (ls-tree, no checkout).
2. Analyze every blob not yet in the facts cache, in worker processes (one long-lived
   `git cat-file --batch` each); a blob shared by 100 versions is analyzed once.
3. For each version, oldest first, assemble its rows from the facts and write them in one
   transaction.
"""

from __future__ import annotations

import contextlib
import gc
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import forkserver, get_context, util
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, event
from sqlmodel import Session

from ingest.analyze import (
    Analyzed,
    Item,
    _worker_init,
    analyze_batch,
    facts_key,
    kind_of,
    loads_facts,
    pool_init,
)
from ingest.assemble import Assembly
from ingest.git_source import (
    PIPE_BYTES,
    BlobReader,
    Ref,
    list_files,
    list_tags,
    open_repo,
    resolve_ref,
)
from ingest.store import (
    Chains,
    existing_versions,
    load_facts,
    refresh_statistics,
    save_facts,
    write_version,
)
from ingest.versions import select
from kb.codec import MAX_FACTS_CHAIN, MAX_TEXT_CHAIN, unpack
from kb.procs import remove_when_gone
from kb.schema import (
    EXTRACTOR_VERSION,
    check_schema,
    create_schema,
    drop_schema,
    make_engine,
)
from kb.search import default_index_dir
from kb.search_build import IndexBuild

BATCH = 64  # blobs per worker task: large enough to amortize pickling, small for balance
MODULE_TEXTS = 128  # decoded blob texts kept for the assembly (read_text below)
GC_THRESHOLD = gc.get_threshold()  # Python's (the workers, forked from a server, keep it)


@dataclass
class IngestOptions:
    repo: str
    db_url: str
    web_url: str
    cache_dir: Path
    tags: str | None = None
    refs: list[tuple[str, str | None]] = field(default_factory=list)
    since: str | None = None
    latest: int | None = None
    force: bool = False
    rebuild: bool = False  # drop every table first (a database of another schema)
    jobs: int = os.cpu_count() or 1
    # Called inside each version's open transaction, before it commits (a test seam).
    before_commit: Callable[[str], None] | None = None


@dataclass
class VersionSummary:
    version: str
    era: int
    flags: int
    enums: int
    constraints: int
    usages: int
    choice_sites: int
    warnings: int
    seconds: float


@dataclass
class IngestSummary:
    versions: list[VersionSummary] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    blobs_analyzed: int = 0
    blobs_cached: int = 0
    index: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


def run(
    opts: IngestOptions,
    on_start: Callable[[int], None] = lambda total: None,
    on_version: Callable[[VersionSummary], None] = lambda s: None,
) -> IngestSummary:
    started = time.perf_counter()
    engine = make_engine(opts.db_url)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _bulk_writes)
    if not opts.rebuild:
        check_schema(engine, empty_ok=True)  # before any git work: SchemaMismatch at once
    gitdir = open_repo(opts.repo, opts.cache_dir)
    extra = [resolve_ref(gitdir, ref, label) for ref, label in opts.refs]
    refs = select(list_tags(gitdir), opts.tags, extra, opts.since, opts.latest)
    if opts.rebuild:  # only once the repository answered: a typo keeps the old database
        drop_schema(engine)
    create_schema(engine)
    done = existing_versions(engine)
    summary = IngestSummary()
    todo: list[Ref] = []
    for ref in refs:
        if not opts.force and done.get(ref.label) == EXTRACTOR_VERSION:
            summary.skipped.append(ref.label)
        else:
            todo.append(ref)
    on_start(len(todo))
    if not todo:
        summary.seconds = time.perf_counter() - started
        return summary
    if opts.jobs > 1 and len(todo) > 1:  # enough work for the workers, probably
        _start_fork_server()

    trees = _list_trees(gitdir, todo)
    wanted: dict[str, Item] = {}  # facts key -> (sha, kind, path, the path's blob before)
    first_needed: dict[str, int] = {}  # facts key -> index of the first version that has it
    last_needed: dict[int, list[str]] = {}  # version index -> keys no later version has
    last_seen: dict[str, int] = {}
    blob_at: dict[str, str] = {}  # path -> its blob in the last version that had it
    for index, ref in enumerate(todo):
        for path, sha in trees[ref.label].items():
            kind = kind_of(path)
            key = facts_key(sha, kind)
            last_seen[key] = index
            if key not in wanted:
                before = blob_at.get(path)
                wanted[key] = (sha, kind, path, before if before != sha else None)
                first_needed[key] = index
            blob_at[path] = sha
    for key, index in last_seen.items():
        last_needed.setdefault(index, []).append(key)
    facts = PackedFacts()
    for key, data in load_facts(engine, list(wanted)).items():
        facts.add(key, data)
    summary.blobs_cached = len(facts)
    # sha -> pack(text), for blobs analyzed in this run that are likely to be cited
    texts: dict[str, bytes] = {}
    # sha -> (the sha of its path's blob before, pack(text, that blob's text)): the worker's
    text_deltas: dict[str, tuple[str, bytes]] = {}
    # Oldest versions' blobs first, so each version is written as soon as its blobs are in,
    # while the workers go on with the next ones.
    missing = sorted(
        (item for key, item in wanted.items() if key not in facts),
        key=lambda item: first_needed[facts_key(item[0], item[1])],
    )
    summary.blobs_analyzed = len(missing)
    # What lives through the run (trees, the facts' bytes, imported modules) is left out of
    # the cyclic garbage collector's scans, which otherwise cost seconds (and, in forked
    # workers, would copy the pages they touch).
    gc.freeze()
    # A version's rows are many small containers that live until it is written: a young
    # collection every 700 of them rescanned the same rows dozens of times (~1 s of CPU).
    gc.set_threshold(50_000, *GC_THRESHOLD[1:])

    # Started now, while this process is small: its `git` is forked (a preexec_fn rules out
    # vfork), and a fork of the ingest at its peak counted its ~290 MiB a second time.
    reader: BlobReader | None = BlobReader(gitdir) if missing else None

    def raw_text(sha: str) -> bytes:
        nonlocal reader
        packed = texts.get(sha)
        if packed is not None:
            return unpack(packed)
        reader = reader or BlobReader(gitdir)
        return reader.read(sha)

    def blob_text(sha: str) -> tuple[bytes | None, bytes | None, tuple[str, bytes] | None]:
        whole = texts.get(sha)  # with it, the text is unpacked only if a delta needs it
        return raw_text(sha) if whole is None else None, whole, text_deltas.get(sha)

    # Each path's texts and facts JSON as deltas against the previous ones in version order
    # (the batches come in that order).
    text_chains = Chains(MAX_TEXT_CHAIN)
    facts_chains = Chains(MAX_FACTS_CHAIN)

    module_texts: dict[str, str] = {}

    def read_text(sha: str) -> str:
        if sha not in module_texts:
            # The resolver asks for up to ~170 files per version of 2026 (monthly snapshots,
            # most files changed), several times each: with 32 kept, a full ingest unpacked
            # or read from git 3,300 blobs here, 2,700 with 128 (1,800 distinct per version).
            if len(module_texts) >= MODULE_TEXTS:
                module_texts.pop(next(iter(module_texts)))
            module_texts[sha] = raw_text(sha).decode("utf-8", "replace")
        return module_texts[sha]

    assembly = Assembly()  # keeps what consecutive versions share
    # The search index is extended as versions are written (while the workers analyze), in
    # a build of its own that is swapped in at the end: a running server keeps answering
    # meanwhile, and a killed ingest leaves the index as it was.
    with Session(engine) as session:
        search_index = IndexBuild(session, default_index_dir(opts.db_url))

    # The facts cache's rows of the batches analyzed since the last version was written:
    # saved in the next version's transaction (one commit for both).
    pending: list[tuple[str, bytes, str | None, int]] = []

    def save_pending(conn: Connection) -> None:
        save_facts(conn, pending)
        pending.clear()

    def write(index: int) -> None:
        ref = todo[index]
        t0 = time.perf_counter()
        rows = assembly.version(trees[ref.label], facts, read_text)
        stored = write_version(
            engine,
            ref,
            rows,
            opts.web_url,
            time.perf_counter() - t0,
            blob_text,
            text_chains,
            opts.before_commit,
            save_pending if pending else None,
        )
        search_index.add_rows(stored.vid, stored.index_rows)
        c = rows.counts()
        s = VersionSummary(
            ref.label, rows.era, c["flags"], c["enums"], c["constraints"], c["usages"],
            c["choice_sites"], c["warnings"], time.perf_counter() - t0,
        )  # fmt: skip
        summary.versions.append(s)
        on_version(s)
        # Facts and texts no later version needs are dropped: memory stays at the working set.
        for key in last_needed.pop(index, []):
            facts.pop(key)
            texts.pop(key.split(":", 1)[0], None)
            text_deltas.pop(key.split(":", 1)[0], None)
        gc.freeze()  # the assembly's caches, kept for the next versions

    written = 0
    finished = False
    try:
        for batch, ready in _analyze(
            gitdir, missing, opts.jobs, lambda item: first_needed[facts_key(item[0], item[1])]
        ):
            for a in batch:
                path = wanted[a.key][2]
                pending.append((a.key, *facts_chains.pack(path, a.key, a.json)))
                facts.add(a.key, a.json)
                if a.text is not None:
                    texts[a.key.split(":", 1)[0]] = a.text
                if a.text_delta is not None:
                    text_deltas[a.key.split(":", 1)[0]] = a.text_delta
            ready = min(ready, len(todo))
            while written < ready:
                write(written)
                written += 1
        if pending and written == len(todo):  # no version left to carry them
            with engine.begin() as conn:
                save_pending(conn)
        while written < len(todo):
            write(written)
            written += 1
        if written:
            refresh_statistics(engine)
        with Session(engine) as session:
            summary.index = search_index.finish(session)
        finished = True
    finally:
        if reader is not None:
            reader.close()
        if not finished:
            search_index.cancel()
        gc.set_threshold(*GC_THRESHOLD)
        gc.unfreeze()
    summary.seconds = time.perf_counter() - started
    return summary


def _start_fork_server() -> BaseContext:
    """Start the analysis workers' fork server now: its import of ingest.analyze (~0.3 s)
    overlaps the listing of the trees instead of delaying the first batch (`_analyze`'s pool
    finds it running). Its socket's temporary directory goes even after a `kill -9`."""
    context = get_context("forkserver")
    context.set_forkserver_preload(["ingest.analyze"])
    remove_when_gone(util.get_temp_dir())
    forkserver.ensure_running()
    return context


def _bulk_writes(dbapi_conn: Any, _record: Any) -> None:
    """The ingest's own SQLite connections skip foreign key checks (after make_engine's
    pragmas turned them on): it assigns every id itself, and ~300,000 rows' references were
    each looked up again."""
    dbapi_conn.execute("PRAGMA foreign_keys=OFF")


class PackedFacts:
    """Blob facts kept as their JSON bytes until a version asks for them: a dict per blob
    costs ~5x its JSON, and the workers run ahead of the versions being written. Each
    lookup decodes (the assembly keeps what it decoded for as long as the file keeps its
    blob)."""

    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}  # key -> facts JSON (as stored, deltas undone)

    def add(self, key: str, data: bytes) -> None:
        self._data[key] = data

    def __getitem__(self, key: str) -> dict[str, Any]:
        return loads_facts(self._data[key])

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def pop(self, key: str) -> None:
        self._data.pop(key, None)


def _list_trees(gitdir: Path, refs: list[Ref]) -> dict[str, dict[str, str]]:
    """Each version's files, listed by a few `git ls-tree` at once (the wait is git's). The
    same path and sha strings are shared by every version that has them."""
    strings: dict[str, str] = {}
    share = strings.setdefault

    def listed(ref: Ref) -> dict[str, str]:
        return list_files(gitdir, ref.commit)

    with ThreadPoolExecutor(max_workers=4) as pool:
        found = list(pool.map(listed, refs))
    return {
        ref.label: {share(path, path): share(sha, sha) for path, sha in files.items()}
        for ref, files in zip(refs, found, strict=True)
    }


def _analyze(
    gitdir: Path, items: list[Item], jobs: int, first_needed: Callable[[Item], int]
) -> Iterator[tuple[list[Analyzed], int]]:
    """Yield (analyzed batch, n), the batches in order: with it, the blobs of the first n
    versions are all in (`items` come oldest version first)."""
    if not items:
        return
    batches = [items[i : i + BATCH] for i in range(0, len(items), BATCH)]

    def complete(i: int) -> int:  # the versions complete once the batches up to i are in
        return first_needed(batches[i + 1][0]) if i + 1 < len(batches) else 1 << 62

    if jobs <= 1 or len(batches) <= 1:
        _worker_init(str(gitdir))
        for i, batch in enumerate(batches):
            yield analyze_batch(batch), complete(i)
        return
    # Workers forked from a server that imported ingest.analyze alone: a fork of the ingest
    # would carry (and count in each worker) its imports and trees.
    pool = ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=_start_fork_server(),
        initializer=pool_init,
        initargs=(str(gitdir), os.getpid()),
    )
    _widen_results_pipe(pool)
    try:
        for i, analyzed in enumerate(pool.map(analyze_batch, batches)):
            if i == len(batches) - 1:
                # The workers have nothing left to do: they go now, not once the caller has
                # written the versions that still wait for this batch (~1/5 of the run, with
                # the idle workers' ~180 MiB counted at the ingest's peak).
                pool.shutdown(wait=True)
            yield analyzed, complete(i)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _widen_results_pipe(pool: ProcessPoolExecutor) -> None:
    """A pipe of 1 MiB for the workers' results (Linux; else as it was). A batch's result
    (~0.6 MB) went through 64 KiB at a time, each read by the pool's thread in this process
    once it got the GIL from the busy main thread; the worker waited meanwhile, and so did
    the other one for the queue's lock (~2.5 s of waiting per worker in a full ingest on a
    busy machine, ~0.7 s with 1 MiB)."""
    with contextlib.suppress(AttributeError, OSError):
        import fcntl

        writer = pool._result_queue._writer  # type: ignore[attr-defined]
        fcntl.fcntl(writer.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)


def summary_json(summary: IngestSummary) -> dict[str, Any]:
    return {
        "versions": [vars(v) for v in summary.versions],
        "skipped": summary.skipped,
        "blobs_analyzed": summary.blobs_analyzed,
        "blobs_cached": summary.blobs_cached,
        "search_index": {k: str(v) for k, v in summary.index.items()},
        "seconds": round(summary.seconds, 3),
    }
