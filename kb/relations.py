"""The relation tables derived from a version's Flag and ConstraintSite rows: `option` (every
name a flag answers to) and `constraint_flag` (the flags a constraint site reads or affects).

They are written in the same transaction as the rows they come from (ingest/store.py), so
readers find them together; `write_relations` is also how hand-built test databases get them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection, Engine, delete, insert, select

from kb.schema import ConstraintFlag, ConstraintSite, Flag, Option, Version, name_key

# The kinds of names, in the order a lookup prefers them when one key names several flags.
KINDS = ("option", "alias", "dest", "argparse_dest", "deprecated_alias", "negation")
RANK = {kind: rank for rank, kind in enumerate(KINDS)}
CLI_KINDS = ("option", "alias", "negation")  # the strings argparse accepts on a command line


def option_rows(version_id: int, flags: Sequence[Any]) -> list[dict[str, Any]]:
    """`flags`: rows (id, name, dest, aliases JSON, deprecated, replacement, argparse_dest,
    negation). Command-line strings (option, alias, negation) each get a row; another name
    whose key the flag already answers to adds nothing (a dest spelled like its option)."""
    rows: dict[tuple[str, int, str], dict[str, Any]] = {}
    keys: set[tuple[str, int]] = set()

    def add(flag_id: int, name: str | None, kind: str) -> None:
        key = name_key(name) if name else ""
        if not key or (kind not in CLI_KINDS and (key, flag_id) in keys):
            return
        keys.add((key, flag_id))
        rows.setdefault(
            (key, flag_id, name or ""),
            {"version_id": version_id, "key": key, "flag_id": flag_id, "name": name, "kind": kind},
        )

    live = [f for f in flags if not f[4]]
    live_dests = {f[2]: f[0] for f in reversed(live)}  # the first live flag owns a dest
    for fid, name, dest, aliases, deprecated, _repl, argparse_dest, negation in flags:
        add(fid, name, "option")
        for alias in _names(aliases):
            add(fid, alias, "alias")
        # A deprecated flag storing into a live flag's dest does not answer to that dest.
        if not (deprecated and dest in live_dests):
            add(fid, dest, "dest")
        add(fid, argparse_dest, "argparse_dest")
        add(fid, negation, "negation")
    # A deprecated flag is also a name of the flag that replaces it (named by `replacement`,
    # or the live flag whose dest it stores into): the constraints filter follows it there.
    owner = {name_key(f[1]): f[0] for f in reversed(live)}
    for fid, name, dest, aliases, deprecated, replacement, _ad, _neg in flags:
        if not deprecated:
            continue
        # (a replacement may carry the value to give it: `--attention-backend=triton`)
        target = owner.get(name_key(replacement.partition("=")[0])) if replacement else None
        if target is None:  # (not `or`: the version's first flag is index 0 in a template)
            target = live_dests.get(dest)
        if target is not None and target != fid:
            for spelling in [name, *_names(aliases)]:
                add(target, spelling, "deprecated_alias")
    return list(rows.values())


def _names(text: str | None) -> list[str]:
    """A JSON list column; most are empty, and skipping their decoding halves the cost."""
    return json.loads(text) if text and text != "[]" else []


def constraint_flag_rows(
    version_id: int, sites: Sequence[Any], flag_ids: dict[str, int]
) -> list[dict[str, Any]]:
    """`sites`: rows (id, flags JSON, affects JSON); `flag_ids`: canonical option -> id."""
    rows = []
    for site_id, reads, affects in sites:
        for role, names in (("reads", reads), ("affects", affects)):
            for option in dict.fromkeys(_names(names)):
                flag_id = flag_ids.get(option)
                rows.append(
                    {
                        "constraint_id": site_id,
                        "version_id": version_id,
                        "flag_id": flag_id,
                        "option": option if flag_id is None else None,
                        "role": role,
                    }
                )
    return rows


def write_relations(conn: Connection, version_id: int) -> None:
    """Derive and insert the relation rows of a version whose Flag and ConstraintSite rows
    are written (and whose relation rows are not)."""
    f, c = Flag.__table__, ConstraintSite.__table__  # type: ignore[attr-defined]
    flags = conn.execute(
        select(
            f.c.id,
            f.c.name,
            f.c.dest,
            f.c.aliases,
            f.c.deprecated,
            f.c.replacement,
            f.c.argparse_dest,
            f.c.negation,
        )
        .where(f.c.version_id == version_id)
        .order_by(f.c.id)
    ).all()
    sites = conn.execute(
        select(c.c.id, c.c.flags, c.c.affects).where(c.c.version_id == version_id)
    ).all()
    write_relations_of(conn, version_id, flags, sites)


def write_relations_of(
    conn: Connection, version_id: int, flags: Sequence[Any], sites: Sequence[Any]
) -> None:
    """Insert the relation rows of a version from its flags (rows as option_rows takes them,
    in id order) and constraint sites (id, flags JSON, affects JSON)."""
    flag_ids: dict[str, int] = {}
    for row in flags:
        flag_ids.setdefault(row[1], row[0])
    ids = [row[0] for row in flags]
    options = [
        (version_id, key, ids[i], name, kind) for key, i, name, kind in _option_template(flags)
    ]
    insert_tuples(conn, Option.__table__, OPTION_COLUMNS, options)  # type: ignore[attr-defined]
    links = []
    for site_id, reads, affects in sites:
        for option, role in _site_names(reads, affects):
            flag_id = flag_ids.get(option)
            links.append((site_id, version_id, flag_id, option if flag_id is None else None, role))
    insert_tuples(conn, ConstraintFlag.__table__, CONSTRAINT_FLAG_COLUMNS, links)  # type: ignore[attr-defined]


OPTION_COLUMNS = ("version_id", "key", "flag_id", "name", "kind")
CONSTRAINT_FLAG_COLUMNS = ("constraint_id", "version_id", "flag_id", "option", "role")

# The last version's flags (without ids) and their option rows with each flag's index in
# place of its id: consecutive versions mostly answer to the same names, and an ingest
# writes ~18,000 option rows.
_last_options: tuple[list[tuple[Any, ...]], list[tuple[str, int, str, str]]] = ([], [])


def _option_template(flags: Sequence[Any]) -> list[tuple[str, int, str, str]]:
    """option_rows of `flags` as (key, index of the flag, name, kind)."""
    global _last_options
    content = [tuple(f[1:]) for f in flags]
    if content and content == _last_options[0]:
        return _last_options[1]
    rows = option_rows(0, [(i, *c) for i, c in enumerate(content)])
    template = [(r["key"], r["flag_id"], r["name"], r["kind"]) for r in rows]
    _last_options = (content, template)
    return template


@functools.lru_cache(maxsize=4096)
def _site_names(reads: str | None, affects: str | None) -> tuple[tuple[str, str], ...]:
    """(option, role) of a constraint site's flags and affects JSON lists, as
    constraint_flag_rows takes them (most sites' lists repeat in every version)."""
    return tuple(
        (option, role)
        for role, names in (("reads", reads), ("affects", affects))
        for option in dict.fromkeys(_names(names))
    )


def rebuild_relations(engine: Engine) -> None:
    """Derive the relation rows of every version again (for databases built row by row,
    like the tests' hand-made knowledge bases)."""
    o, cf, v = (m.__table__ for m in (Option, ConstraintFlag, Version))  # type: ignore[attr-defined,union-attr]
    with engine.begin() as conn:
        conn.execute(delete(o))
        conn.execute(delete(cf))
        for (version_id,) in conn.execute(select(v.c.id)).all():
            write_relations(conn, version_id)


def insert_rows(conn: Connection, table: Any, rows: list[dict[str, Any]]) -> None:
    """Bulk insert of plain dicts (all with the same keys)."""
    if not rows:
        return
    if conn.dialect.name != "sqlite":
        conn.execute(insert(table), rows)
        return
    # SQLite: hand plain tuples to the driver's executemany. SQLAlchemy's per-row parameter
    # processing cost more than the inserts themselves (about 300,000 rows for SGLang).
    cols = list(rows[0])
    names = ", ".join(f'"{c}"' for c in cols)  # quoted: "default" and "commit" are keywords
    sql = f'INSERT INTO "{table.name}" ({names}) VALUES ({", ".join("?" * len(cols))})'
    row = itemgetter(*cols)  # a tuple per dict (one column still gives a tuple below)
    conn.exec_driver_sql(
        sql, [row(r) for r in rows] if len(cols) > 1 else [(row(r),) for r in rows]
    )


def insert_tuples(
    conn: Connection, table: Any, cols: Sequence[str], rows: list[tuple[Any, ...]]
) -> None:
    """Bulk insert of tuples in the order of `cols`."""
    if not rows:
        return
    if conn.dialect.name != "sqlite":
        conn.execute(insert(table), [dict(zip(cols, r, strict=True)) for r in rows])
        return
    names = ", ".join(f'"{c}"' for c in cols)
    marks = ", ".join("?" * len(cols))
    conn.exec_driver_sql(f'INSERT INTO "{table.name}" ({names}) VALUES ({marks})', rows)
