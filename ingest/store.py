"""Write one version into the knowledge base in a single transaction.

A version appears complete or not at all: if the process is interrupted (Ctrl-C, kill -9)
the transaction never commits and SQLite's journal restores the previous state. A version
written again (`--force`) keeps its row and id: only its child rows are replaced, so a
reader sees the old facts or the new ones under the same id, never a version without rows.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any, NamedTuple

from sqlalchemy import Connection, Engine, bindparam, delete, insert, select, update

from ingest.assemble import VersionRows
from ingest.git_source import Ref
from ingest.versions import order, sort_key
from kb.codec import MAX_READ_CHAIN, Chains, unpack
from kb.factored import analyze, delete_version, forget, tables, write_rows
from kb.pyast import and_all
from kb.relations import insert_rows as _insert
from kb.relations import write_relations_of
from kb.schema import (
    EXTRACTOR_VERSION,
    Blob,
    BlobFacts,
    ConstraintFlag,
    DocCheck,
    Enum,
    ModelFile,
    Option,
    Version,
    VersionFile,
)
from kb.schema import dumps as _dumps
from kb.search_build import EnumRow, IndexRows, SiteRow

# The per-version tables that are tables (the factored ones are views: kb.factored).
# (DocCheck: explain's verdicts on the version's doc commands, stale once it is rewritten.)
PER_VERSION_TABLES = [ConstraintFlag, Option, Enum, ModelFile, VersionFile, DocCheck]


def existing_versions(engine: Engine) -> dict[str, int]:
    """label -> extractor version of what is already ingested."""
    with engine.connect() as conn:
        rows = conn.execute(select(Version.name, Version.extractor_version))  # type: ignore[call-overload]
        return {name: ev for name, ev in rows}


def load_facts(engine: Engine, keys: list[str]) -> dict[str, bytes]:
    """key -> facts JSON of the keys cached by this analyzer version (deltas undone); a key
    whose chain is broken is left out (analyzed again)."""
    from ingest.analyze import ANALYZER_VERSION

    table = BlobFacts.__table__  # type: ignore[attr-defined]
    rows: dict[str, tuple[bytes, str | None]] = {}
    wanted = list(keys)
    with engine.connect() as conn:
        for _round in range(MAX_READ_CHAIN):  # each round fetches the bases the last one named
            for i in range(0, len(wanted), 900):
                found = conn.execute(
                    select(table.c.key, table.c.facts, table.c.base).where(
                        table.c.key.in_(wanted[i : i + 900]),
                        table.c.analyzer_version == ANALYZER_VERSION,
                    )
                )
                rows.update({k: (f, b) for k, f, b in found})
            wanted = sorted({b for _f, b in rows.values() if b is not None} - rows.keys())
            if not wanted:
                break
    decoded: dict[str, bytes | None] = {}
    for key in keys:
        if key not in rows:
            continue
        chain = [key]  # this key, then its bases, until one decoded or whole
        while chain[-1] not in decoded and (base := rows[chain[-1]][1]) is not None:
            if base not in rows or len(chain) > MAX_READ_CHAIN:
                decoded[chain[-1]] = None  # broken: the whole chain above it too
                break
            chain.append(base)
        data = decoded.get(chain[-1])
        if chain[-1] not in decoded:
            data = unpack(rows[chain[-1]][0])
            decoded[chain[-1]] = data
        for link in reversed(chain[:-1]):
            data = None if data is None else unpack(rows[link][0], data)
            decoded[link] = data
    return {k: d for k in keys if (d := decoded.get(k)) is not None}


def save_facts(conn: Connection, batch: list[tuple[str, bytes, str | None, int]]) -> None:
    """(key, packed facts, base, depth), as the workers packed them along each path's chain:
    stored in `conn`'s transaction (the ingest's: that of the next version it writes, one
    commit for both)."""
    from ingest.analyze import ANALYZER_VERSION

    table = BlobFacts.__table__  # type: ignore[attr-defined]
    rows = [
        {"key": key, "analyzer_version": ANALYZER_VERSION, "facts": packed, "base": base,
         "depth": depth}
        for key, packed, base, depth in batch
    ]  # fmt: skip
    # delete + insert rather than SQLite's INSERT OR REPLACE: works on any database.
    keys = [k for k, _p, _b, _d in batch]
    for i in range(0, len(keys), 900):
        conn.execute(delete(table).where(table.c.key.in_(keys[i : i + 900])))
    _insert(conn, table, rows)


# blob sha -> (its bytes, or None when pack(its bytes) is at hand; pack(its bytes) when at
# hand; (another blob's sha, pack(its bytes, that blob's bytes)) when at hand).
BlobText = Callable[[str], tuple[bytes | None, bytes | None, tuple[str, bytes] | None]]


def blob_rows(
    conn: Connection, cited: dict[str, str], blob_text: BlobText, chains: Chains
) -> list[dict[str, Any]]:
    """Blob rows for the cited (path -> sha) not stored yet: deltas along each path's chain,
    whose bases this run stored before (an earlier version, or an earlier row here)."""
    unknown = set(cited.values()) - chains.stored
    new = unknown - stored_blobs(conn, sorted(unknown))
    chains.stored |= unknown  # stored before, or below (a failed write fails the run)
    rows = []
    for path, sha in sorted(cited.items()):
        if sha in new:
            new.discard(sha)  # a blob at two paths is stored once
            data, whole, delta = blob_text(sha)
            text, base, depth = chains.pack(path, sha, data, whole, delta)
            rows.append({"sha": sha, "text": text, "base": base, "depth": depth})
    return rows


def stored_blobs(conn: Connection, shas: list[str]) -> set[str]:
    table = Blob.__table__  # type: ignore[attr-defined]
    found: set[str] = set()
    for i in range(0, len(shas), 900):
        found.update(
            r[0]
            for r in conn.execute(select(table.c.sha).where(table.c.sha.in_(shas[i : i + 900])))
        )
    return found


def refresh_statistics(engine: Engine) -> None:
    """The planner's statistics once more after a run: those taken at 1, 2, 4... versions
    can predate a table's first rows (indirectusage's were of 4 rows at 124 versions, and its
    lookup by dest scanned every fact)."""
    with engine.begin() as conn:
        analyze(conn)


def write_version(
    engine: Engine,
    ref: Ref,
    rows: VersionRows,
    web_url: str,
    seconds: float,
    blob_text: BlobText,
    chains: Chains,
    before_commit: Callable[[str], None] | None = None,
    also: Callable[[Connection], None] | None = None,
) -> Written:
    """Replace (or add) `ref`'s rows in one transaction, then re-rank every version.
    Returns the version's id and its rows as the search index reads them.

    `also(conn)` writes more in the same transaction (the ingest: the facts cache's rows
    analyzed meanwhile). `before_commit(label)` runs inside the open transaction (tests use
    it to kill -9 there).
    """
    t = {m: m.__table__ for m in [Version, Blob, *PER_VERSION_TABLES]}  # type: ignore[attr-defined]
    report = {
        "counts": rows.counts(),
        "warnings": rows.warnings,
        "seconds": round(seconds, 3),
        "env_prefix_aliases": rows.env_prefix_aliases,
        "choice_sites_by_how": rows.choice_sites_by_how(),
    }
    values = {
        "name": ref.label,
        "commit": ref.commit,
        "date": ref.date,
        "sort_key": sort_key(ref.label, ref.date),
        "era": rows.era,
        "extractor_version": EXTRACTOR_VERSION,
        "web_url": web_url,
        "report": dumps(report),
        "ingested_at": datetime.now(UTC),
    }
    try:
        with engine.begin() as conn:
            if also is not None:
                also(conn)
            vid = conn.execute(
                select(t[Version].c.id).where(t[Version].c.name == ref.label)
            ).scalar()
            if vid is not None:
                for model in PER_VERSION_TABLES:
                    conn.execute(delete(t[model]).where(t[model].c.version_id == vid))
                delete_version(conn, vid)
                conn.execute(update(t[Version]).where(t[Version].c.id == vid).values(**values))
            else:
                result = conn.execute(insert(t[Version]).values(position=0, **values))
                vid = result.inserted_primary_key[0]  # type: ignore[index]
            _insert(conn, t[Blob], blob_rows(conn, rows.cited, blob_text, chains))
            index_rows = _write_rows(conn, t, vid, rows)
            versions = _rerank(conn)
            if versions & (versions - 1) == 0:
                # Table statistics (7 ms) at 1, 2, 4, 8... versions: the shares they give
                # the query planner hardly move as versions are added.
                analyze(conn)
            if before_commit is not None:
                before_commit(ref.label)
    except BaseException:
        forget(engine)  # the facts it interned were rolled back
        raise
    return Written(int(vid), index_rows)


class Written(NamedTuple):
    vid: int
    index_rows: IndexRows  # for IndexBuild.add_rows: what it would read back


def _write_rows(conn: Connection, t: dict[Any, Any], vid: int, rows: VersionRows) -> IndexRows:
    """A version's rows: the factored tables' as (fact..., line...) tuples in the column
    order of kb.factored, the others as dicts. Returns those the search index reads."""
    flags = [_flag_row(f) for f in rows.flags]
    flag_ids = write_rows(conn, "flag", vid, _tuples("flag", flags))
    sites = [
        {
            "kind": c["kind"],
            "function": c["function"],
            "condition": _and_all(tuple(c["conditions"])),
            "conditions": dumps(c["conditions"]),
            "message": c["message"],
            "flags": dumps(c["flags"]),
            "affects": dumps(c["affects"]),
            "writes": dumps(c["writes"]),
            "key": c["key"],
            "path": c["path"],
            "line": c["line"],
            "end_line": c["end_line"],
        }
        for c in rows.constraints
    ]
    site_ids = write_rows(conn, "constraintsite", vid, _tuples("constraintsite", sites))
    write_rows(conn, "usagesite", vid, _tuples("usagesite", rows.usages))
    write_rows(conn, "choicesite", vid, _tuples("choicesite", rows.choice_sites, candidates=dumps))
    env_vars = _insert_env(conn, vid, rows)
    write_rows(conn, "indirectusage", vid, _tuples("indirectusage", rows.indirect, via=dumps))
    enums = [
        {
            "version_id": vid,
            "name": e["name"],
            "path": e["path"],
            "line": e["line"],
            "end_line": e["end_line"],
            "members": dumps(e["members"]),
            "flags": dumps(e["flags"]),
        }
        for e in rows.enums
    ]
    _insert(conn, t[Enum], enums)
    _insert(
        conn,
        t[ModelFile],
        [{"version_id": vid, **m, "architectures": dumps(m["architectures"])} for m in rows.models],
    )
    _insert(
        conn,
        t[VersionFile],
        [{"version_id": vid, "path": p, "sha": s} for p, s in rows.cited.items()],
    )
    write_relations_of(
        conn,
        vid,
        [
            (
                fid,
                f["name"],
                f["dest"],
                f["aliases"],
                f["deprecated"],
                f["replacement"],
                f["argparse_dest"],
                f["negation"],
            )
            for fid, f in zip(flag_ids, flags, strict=True)
        ],  # fmt: skip
        [(sid, c["flags"], c["affects"]) for sid, c in zip(site_ids, sites, strict=True)],
    )
    return IndexRows(
        [(vid, *_INDEX_FLAG(f)) for f in flags],
        [EnumRow(vid, e["name"], e["path"], e["members"], e["flags"]) for e in enums],
        [(vid, *_INDEX_ENV(v)) for v in env_vars],
        [SiteRow(vid, *_INDEX_SITE(c)) for c in sites],
        [(vid, u["dest"], dumps(u["via"])) for u in rows.indirect],
        [(vid, m["name"], m["path"], dumps(m["architectures"])) for m in rows.models],
    )


# The columns kb.search_build reads of each (IndexRows), after version_id.
_INDEX_FLAG = itemgetter(
    "name", "dest", "aliases", "help", "section", "choices", "deprecated", "argparse_dest",
    "negation",
)  # fmt: skip
_INDEX_ENV = itemgetter(
    "name", "type", "default", "default_expr", "deprecated_names", "replacement", "comment",
    "section", "flags",
)  # fmt: skip
_INDEX_SITE = itemgetter(
    "key", "kind", "function", "condition", "message", "flags", "affects", "path", "line",
    "end_line",
)  # fmt: skip


def _tuples(
    name: str, rows: list[dict[str, Any]], **encode: Callable[[Any], Any]
) -> list[tuple[Any, ...]]:
    """Rows as tuples of kb.factored's fact then location columns; `encode`: column ->
    what turns its value into the stored one (a JSON column's encoder)."""
    table = tables()[name]
    cols = [*table.fact_cols, *table.loc_cols]
    row = itemgetter(*cols)
    if not encode:
        return [row(r) for r in rows]
    at = [(cols.index(c), fn) for c, fn in encode.items()]
    out = []
    for r in rows:
        values = list(row(r))
        for i, fn in at:
            values[i] = fn(values[i])
        out.append(tuple(values))
    return out


def _insert_env(conn: Connection, vid: int, rows: VersionRows) -> list[dict[str, Any]]:
    """Environment variables, their sites and the docs entries of one version. Returns the
    environment variables' rows."""
    env_vars = [
        {
            **{k: v[k] for k in ENV_VAR_COLUMNS},
            "default": as_json(v["default"]),
            "deprecated_names": dumps(v["deprecated_names"]),
            "flags": dumps(v["flags"]),
            "conversion": as_json(v.get("conversion")),
            "fallback": as_json(v.get("fallback")),
        }
        for v in rows.env_vars
    ]
    write_rows(conn, "envvar", vid, _tuples("envvar", env_vars))
    write_rows(
        conn,
        "envsite",
        vid,
        _tuples(
            "envsite",
            [
                {
                    **{k: s[k] for k in ENV_SITE_COLUMNS},
                    "default": as_json(s["default"]),
                    "flags": dumps(s["flags"]),
                }
                for s in rows.env_sites
            ],
        ),
    )
    write_rows(
        conn,
        "docentry",
        vid,
        _tuples(
            "docentry",
            [
                {
                    "kind": d["kind"],
                    "name": d["names"][0],
                    "names": dumps(d["names"]),
                    "form": d["form"],
                    "description": d["description"],
                    "default": d["default"],
                    "choices": as_json(d["choices"]),
                    "type": d["type"],
                    "path": d["path"],
                    "line": d["line"],
                }
                for d in rows.docs
            ],
        ),
    )
    write_rows(
        conn,
        "doccommand",
        vid,
        _tuples("doccommand", rows.doc_commands),
    )
    return env_vars


@functools.lru_cache(maxsize=8192)
def _and_all(conditions: tuple[str, ...]) -> str:
    """and_all, remembered: a site's conditions come back in every version, and and_all
    parses each (~0.25 s of an ingest)."""
    return and_all(conditions)


# (not float: 0.0 and -0.0 are equal keys, written differently)
_SCALARS = frozenset({str, int, bool})


def _remembered(encode: Callable[[Any], str]) -> Callable[[Any], str]:
    """`encode`, remembering what it gave for lists of strings and for plain scalars: the
    same conditions, flag lists, candidates and defaults come back in every version
    (~200,000 encodings an ingest). Only a list of plain str is remembered, and a tuple
    equal to such a key holds the same strs; a scalar is keyed with its type (1 and True
    are equal keys)."""
    memo: dict[tuple[Any, ...], str] = {}
    scalars: dict[tuple[type, Any], str] = {}

    def encoded(value: Any) -> str:
        kind = type(value)
        if kind is not list:
            if kind not in _SCALARS:
                return encode(value)
            text = scalars.get((kind, value))
            if text is None:
                if len(scalars) >= 50_000:  # bounded: a few MB
                    scalars.clear()
                text = scalars[kind, value] = encode(value)
            return text
        key = tuple(value)
        try:
            return memo[key]
        except KeyError:
            pass
        except TypeError:  # an unhashable item (a dict)
            return encode(value)
        text = encode(value)
        if all(type(item) is str for item in key):
            if len(memo) >= 50_000:  # bounded: a few MB
                memo.clear()
            memo[key] = text
        return text

    return encoded


dumps = _remembered(_dumps)
# json.dumps(value, ensure_ascii=False, default=str), with one encoder for every call.
_encode = _remembered(json.JSONEncoder(ensure_ascii=False, default=str).encode)


def as_json(value: Any) -> str | None:
    return None if value is None else _encode(value)


ENV_VAR_COLUMNS = [
    "name", "declared", "type", "default_expr", "replacement", "comment", "section", "reads",
    "writes", "path", "line", "end_line",
]  # fmt: skip
ENV_SITE_COLUMNS = ["name", "access", "how", "function", "path", "line", "end_line", "text"]


def _flag_row(f: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": f["name"],
        "dest": f["dest"],
        "argparse_dest": f.get("argparse_dest") or f["dest"],
        "aliases": dumps(f["aliases"]),
        "type": f["type"],
        # With default_expr: the folded value, or null when it could not be folded.
        "default": as_json(f["default"])
        if f["default_expr"] is None or f["default"] is not None
        else None,
        "default_expr": f["default_expr"],
        "choices": as_json(f["choices"]),
        "choices_const": f["choices_const"],
        "choices_extensible": f["choices_extensible"],
        "choices_dynamic": f["choices_dynamic"],
        "known_values": as_json(f.get("known_values")),
        "help": f["help"] or "",
        "hidden": f["hidden"],
        "action": f["action"],
        "nargs": f["nargs"],
        "takes_value": f.get("takes_value", True),
        "negation": f.get("negation"),
        "required": f["required"],
        "const": as_json(f["const"]),
        "deprecated": f["deprecated"],
        "deprecated_message": f["deprecated_message"],
        "replacement": f["replacement"],
        "deprecated_kind": f.get("deprecated_kind"),
        "action_error": f.get("action_error"),
        "action_path": f.get("action_path"),
        "action_line": f.get("action_line"),
        "section": f["section"],
        "path": f["path"],
        "line": f["line"],
        "end_line": f["end_line"],
    }


def _rerank(conn: Connection) -> int:
    """Set every version's position; only the rows whose position changed are updated
    (appending the newest version changes one), in one executemany. Returns how many
    versions there are."""
    table = Version.__table__  # type: ignore[attr-defined]
    if conn.dialect.name == "sqlite":
        # Plain rows: SQLAlchemy's parsing of each date (124 per version written, ~15,000 an
        # ingest) cost more than the ordering; SQLite holds them as ISO text.
        found = conn.exec_driver_sql('SELECT id, name, date, position FROM "version"').all()
        rows: list[Any] = [
            (vid, name, datetime.fromisoformat(date), pos) for vid, name, date, pos in found
        ]
    else:
        rows = list(conn.execute(select(table.c.id, table.c.name, table.c.date, table.c.position)))
    labels = order((name, date) for _id, name, date, _pos in rows)
    current = {name: (vid, pos) for vid, name, _date, pos in rows}
    changed = [
        {"vid": current[label][0], "pos": position}
        for position, label in enumerate(labels)
        if current[label][1] != position
    ]
    if changed:
        conn.execute(
            update(table).where(table.c.id == bindparam("vid")).values(position=bindparam("pos")),
            changed,
        )
    return len(rows)
