"""The launch commands SGLang's docs show (`doccommand`, ingest/doc_commands.py), each checked
with explain's pipeline at the same version, and what reads them: the docs-commands page,
the version diff's "doc commands this version broke" and the flag pages' examples.

Why the verdicts are stored rather than only computed on request: a command costs explain's
whole run (parse, then the simulation of SGLang's argument handling), 20-300 ms; the ~600
distinct commands of snapshot-2026-07-01 took 60-180 s on a loaded 2-core machine, far past
what a page may take. So `flagatlas check-docs` (run by `make run` after the ingest, never
inside it: the ingest's time stays git grep's) stores them in `doccheck`, once per version;
re-ingesting a version drops its rows (ingest/store.py). A version without stored verdicts
(a knowledge base where the step has not run) is checked on request, once per state of the
knowledge base (kb/cache.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

from sqlalchemy import Engine, delete, insert
from sqlmodel import Session, select

from kb.cache import Cache
from kb.explain.load import load_facts
from kb.explain.orchestrate import CommandRejected, check_command, run
from kb.explain.predicates import Profile, ProfileError
from kb.explain.report import finding
from kb.explain.shell import tokenize
from kb.model_source import cached_model, command_model
from kb.queries import per_stamp, quoted, session_stamp
from kb.schema import DocCheck, DocCommand, Version, loads

STATUSES = ("ok", "rejected", "fails", "undecided")
BROKEN_FROM, BROKEN_TO = ("ok", "undecided"), ("rejected", "fails")
# Findings that say what the run could not decide: the command needs inputs (a model, a GPU).
NEEDS_INPUTS = frozenset({"undecidable", "assumed", "budget"})
MAX_EXAMPLES = 50  # a flag's examples in its JSON (the page shows the first few)


class Verdict(NamedTuple):
    status: str
    findings: list[dict[str, Any]]


# kb/explain/deploy.py's words for a raise it found likely but not decided (the model or the
# hardware may change the values first): such an error needs inputs, it is not a failure.
LIKELY = "assuming SGLang keeps the values you gave"


def status_of(findings: Iterable[dict[str, Any]]) -> str:
    """`rejected` when argparse (or the shell) would refuse the command, `fails` when a
    decided constraint raises, `undecided` when a check needs inputs it was not given."""
    findings = list(findings)
    errors = [f for f in findings if f["severity"] == "error"]
    if any(f["kind"] != "constraint" for f in errors):
        return "rejected"
    if any(LIKELY not in f["message"] and not f.get("needs") for f in errors):
        return "fails"
    if errors or any(f["kind"] in NEEDS_INPUTS for f in findings):
        return "undecided"
    return "ok"


def _profile(command: str, model_cache: Path | None) -> Profile | None:
    """The profile of the command's Hugging Face model when its config is in the model
    cache (read from disk alone), else None: the run has no profile."""
    if model_cache is None:
        return None
    path, revision = command_model(command)
    files = cached_model(path, revision, model_cache) if path else None
    if files is None:
        return None
    try:
        return Profile.parse({"config": files.config, "hf_quant_config": files.quant_config})
    except ProfileError:
        return None


def check_version(
    session: Session, version: Version, commands: Iterable[str], model_cache: Path | None
) -> dict[str, Verdict]:
    """Each command's verdict at the version: explain's run (orchestrate.run, the API's)."""
    facts = load_facts(session, version, session_stamp(session))
    out: dict[str, Verdict] = {}
    for command in commands:
        try:
            check_command(command)
        except CommandRejected as exc:
            out[command] = Verdict("rejected", [finding("error", None, str(exc), "parse")])
            continue
        analysis, _sim = run(session, version, facts, command, _profile(command, model_cache))
        kept = [
            f for f in analysis.findings if f["severity"] != "info" or f["kind"] == "undecidable"
        ]
        out[command] = Verdict(status_of(kept), _plain(kept))
    return out


def _plain(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Findings as JSON values (stored as they are served)."""
    return json.loads(json.dumps(findings, default=str))  # type: ignore[no-any-return]


def distinct_commands(session: Session, version: Version) -> list[str]:
    rows = session.exec(select(DocCommand.command).where(DocCommand.version_id == version.id))
    return sorted(set(rows))


def stored_verdicts(session: Session, version: Version) -> dict[str, Verdict]:
    rows = session.exec(
        select(DocCheck.command, DocCheck.status, DocCheck.findings).where(
            DocCheck.version_id == version.id
        )
    )
    return {command: Verdict(status, loads(found)) for command, status, found in rows}


_on_request: Cache[dict[str, Verdict]] = Cache(8)


def verdicts(
    session: Session, version: Version, model_cache: Path | None, compute: bool = True
) -> dict[str, Verdict] | None:
    """command -> verdict for every distinct command of the version: stored ones, the rest
    checked now (once per state of the knowledge base); None when some are not stored and
    `compute` is false."""
    stored = stored_verdicts(session, version)
    wanted = distinct_commands(session, version)
    missing = [c for c in wanted if c not in stored]
    if not missing:
        return stored
    stamp = session_stamp(session)
    done = _on_request.get(version.name, stamp)
    if done is None:
        if not compute:
            return None
        done = check_version(session, version, missing, model_cache)
        _on_request.put(version.name, done, stamp)
    return {**stored, **done}


def store_checks(
    engine: Engine,
    model_cache: Path | None,
    names: list[str] | None = None,
    progress: Callable[[str, int, float], None] = lambda name, n, seconds: None,
    jobs: int = 1,
) -> list[str]:
    """Check and store the doc commands of each version (`names`, else all) that has none
    stored yet, one transaction per version, the versions shared among `jobs` worker
    processes (each reads the knowledge base itself; this one writes); returns the
    versions checked, in the order they were stored."""
    with Session(engine) as session:
        versions = session.exec(select(Version).order_by(Version.position.desc())).all()  # type: ignore[attr-defined]
        todo = [
            v.name
            for v in versions
            if (names is None or v.name in names)
            and distinct_commands(session, v)
            and not stored_verdicts(session, v)
        ]
        ids = {v.name: v.id for v in versions}
    url = engine.url.render_as_string(hide_password=False)
    done: list[str] = []

    def store(name: str, found: dict[str, Verdict], seconds: float) -> None:
        table = DocCheck.__table__  # type: ignore[attr-defined]
        with engine.begin() as conn:
            conn.execute(delete(table).where(table.c.version_id == ids[name]))
            conn.execute(
                insert(table),
                [
                    {
                        "version_id": ids[name],
                        "command": command,
                        "status": verdict.status,
                        "findings": json.dumps(verdict.findings, separators=(",", ":")),
                    }
                    for command, verdict in found.items()
                ],
            )
        done.append(name)
        progress(name, len(found), seconds)

    if jobs <= 1 or len(todo) <= 1:
        for name in todo:
            store(*_check_stored_version(url, name, model_cache))
        return done
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    from kb.procs import die_with_parent

    with ProcessPoolExecutor(jobs, get_context("spawn"), initializer=die_with_parent) as pool:
        futures = [pool.submit(_check_stored_version, url, n, model_cache) for n in todo]
        for future in as_completed(futures):
            store(*future.result())
    return done


def _check_stored_version(
    url: str, name: str, model_cache: Path | None
) -> tuple[str, dict[str, Verdict], float]:
    """A version's verdicts, read through an engine of its own (a worker's entry point)."""
    import time

    from kb.schema import make_engine

    engine = make_engine(url, readonly=True)
    try:
        with Session(engine) as session:
            version = session.exec(select(Version).where(Version.name == name)).one()
            start = time.perf_counter()
            commands = distinct_commands(session, version)
            found = check_version(session, version, commands, model_cache)
            return name, found, time.perf_counter() - start
    finally:
        engine.dispose()


# --- what the pages read -----------------------------------------------------------------


def anchor(path: str, line: int) -> str:
    """The id of a command's row on the docs-commands page (stable across reloads)."""
    return "cmd-" + hashlib.sha1(f"{path}:{line}".encode()).hexdigest()[:12]


def page_url(version: Version, path: str | None = None, line: int | None = None) -> str:
    url = f"/v/{quoted(version.name, '')}/docs-commands"
    return url if path is None or line is None else f"{url}#{anchor(path, line)}"


def forge_url(version: Version, path: str, line: int) -> str:
    return f"{version.web_url}/blob/{version.commit}/{quoted(path)}#L{line}"


def _rows(session: Session, version: Version) -> list[tuple[str, int, str]]:
    def read() -> list[tuple[str, int, str]]:
        query = (
            select(DocCommand.path, DocCommand.line, DocCommand.command)
            .where(DocCommand.version_id == version.id)
            .order_by(DocCommand.path, DocCommand.line)  # type: ignore[arg-type]
        )
        return [(p, n, c) for p, n, c in session.exec(query)]

    return per_stamp(("doc_commands", version.id), read, session)


def docs_commands(
    session: Session, version: Version, model_cache: Path | None, status: str = ""
) -> dict[str, Any]:
    """The page's data: every command of the version with its verdict (those of `status`
    alone when it is one), grouped by file on the page; counts over all of them."""
    checked = verdicts(session, version, model_cache) or {}
    rows = _rows(session, version)
    counts = dict.fromkeys(STATUSES, 0)
    for _path, _line, command in rows:
        counts[checked[command].status] += 1
    report = loads(version.report) or {}
    commands = [
        {
            "path": path,
            "line": line,
            "command": command,
            "status": checked[command].status,
            "findings": checked[command].findings,
            "url": forge_url(version, path, line),
            "anchor": anchor(path, line),
        }
        for path, line, command in rows
        if not status or checked[command].status == status
    ]
    return {
        "version": version.name,
        "commands": commands,
        "counts": {
            **counts,
            "skipped": int(report.get("counts", {}).get("doc_commands_skipped", 0)),
            "total": len(rows),
            "distinct": len(checked),
        },
        "status": status if status in STATUSES else None,
    }


def broken_commands(
    session: Session, old: Version, new: Version, model_cache: Path | None
) -> list[dict[str, Any]] | None:
    """The doc commands `new` broke: the same command text at both versions whose status
    went from ok/undecided to rejected/fails, with `new`'s errors; None when either
    version's verdicts are not stored (the diff does not check hundreds of commands on
    request)."""
    before = verdicts(session, old, model_cache, compute=False)
    after = verdicts(session, new, model_cache, compute=False)
    if before is None or after is None:
        return None
    where: dict[str, tuple[str, int]] = {}
    for path, line, command in _rows(session, new):
        where.setdefault(command, (path, line))
    out = []
    for command in sorted(after):
        was, now = before.get(command), after[command]
        if was is None or was.status not in BROKEN_FROM or now.status not in BROKEN_TO:
            continue
        path, line = where[command]
        out.append(
            {
                "command": command,
                "path": path,
                "line": line,
                "from": was.status,
                "to": now.status,
                "findings": [f for f in now.findings if f["severity"] == "error"],
                "url": page_url(new, path, line),
                "source_url": forge_url(new, path, line),
            }
        )
    return out


def _argv(session: Session, version: Version) -> list[tuple[str, int, str, list[str]]]:
    """The version's commands with their argv (after the launcher), read once per state."""

    def parse() -> list[tuple[str, int, str, list[str]]]:
        out = []
        for path, line, command in _rows(session, version):
            try:
                argv = tokenize(command).argv
            except ValueError:
                continue
            out.append((path, line, command, argv))
        return out

    return per_stamp(("doc_argv", version.id), parse, session)


def uses(argv: list[str], names: Iterable[str], value: str | None = None) -> bool:
    """Whether the argv gives one of the option `names` (with `value`, when given)."""
    for i, word in enumerate(argv):
        for name in names:
            if word == name:
                if value is None or (i + 1 < len(argv) and argv[i + 1] == value):
                    return True
            elif word.startswith(name + "="):
                if value is None or word[len(name) + 1 :] == value:
                    return True
    return False


def examples(
    session: Session, version: Version, names: Iterable[str], value: str | None = None
) -> list[dict[str, Any]]:
    """The doc commands that use the flag (one of its option `names`), or that give it
    `value`: one per distinct command text, at its first file and line."""
    names = [n for n in names if n.startswith("-")]
    seen: set[str] = set()
    out: list[dict[str, Any]] = []
    for path, line, command, argv in _argv(session, version):
        if command in seen or not uses(argv, names, value):
            continue
        seen.add(command)
        out.append(
            {
                "path": path,
                "line": line,
                "command": command,
                "url": page_url(version, path, line),
                "source_url": forge_url(version, path, line),
            }
        )
        if len(out) >= MAX_EXAMPLES:
            break
    return out
