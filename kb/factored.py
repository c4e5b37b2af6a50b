"""Facts stored once, with a thin row per version that holds them (Bootlin Elixir's idea,
applied to facts rather than identifiers).

Most of a version's rows (flags, constraint sites, usage sites, ...) are the same as the
previous version's but for their line numbers. So each such table `T` is stored as
  - `T_fact`: every distinct fact once (all of T's columns but id, version_id and lines),
  - `T_loc`:  (id, version_id, fact_id, line[, end_line]) for each version that holds it,
and `T` is a VIEW joining them with exactly T's old columns (id is T_loc's id: stable per
version row, in insertion order), so every reader (kb.queries, app/, PostgreSQL) and the ORM
models read as before. Writes go through `write_rows` (ingest, and through `orm_writes` the
tests' hand-built knowledge bases' `session.add`).

Fact ids are assigned here (max + 1), never by the database, so a version's rows are two
executemany calls and no round trips. A `FactIndex` interns facts across the versions of an
ingest run; a failed write must `forget` it (its ids were rolled back).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

from sqlalchemy import Column, Connection, Engine, ForeignKey, Index, Integer, Table, event
from sqlalchemy.orm import Session
from sqlmodel import SQLModel

# Table (of kb.schema's models) -> (columns kept per version row, fact columns the pages
# look facts up by). kb.schema imports this module, so the tables are built on first use.
SPEC: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "flag": (("line", "end_line"), ("name",)),
    "constraintsite": (("line", "end_line"), ()),
    "usagesite": (("line",), ("dest",)),
    "choicesite": (("line",), ("value",)),
    "envvar": (("line", "end_line"), ("name",)),
    "envsite": (("line", "end_line"), ("name",)),
    "docentry": (("line",), ()),
    "doccommand": (("line",), ()),
    "indirectusage": (("line",), ("dest",)),
}
VIEW_NAMES = frozenset(SPEC)


class Factored:
    """One factored table: its view's columns, its fact and location tables."""

    def __init__(self, view: Table, loc_cols: Sequence[str], lookup: Sequence[str]):
        self.name = view.name
        self.columns = [c.name for c in view.columns]  # the view's, in the old order
        self.loc_cols = list(loc_cols)
        self.fact_cols = [c for c in self.columns if c not in ("id", "version_id", *loc_cols)]
        md = SQLModel.metadata
        self.fact = Table(
            f"{self.name}_fact",
            md,
            Column("id", Integer, primary_key=True, autoincrement=False),
            *(Column(c, view.c[c].type, nullable=view.c[c].nullable) for c in self.fact_cols),
        )
        for col in lookup:
            Index(f"ix_{self.name}_fact_{col}", self.fact.c[col])
        self.loc = Table(
            f"{self.name}_loc",
            md,
            Column("id", Integer, primary_key=True, autoincrement=False),
            Column("version_id", Integer, ForeignKey("version.id"), nullable=False),
            Column("fact_id", Integer, ForeignKey(f"{self.name}_fact.id"), nullable=False),
            *(Column(c, Integer, nullable=view.c[c].nullable) for c in loc_cols),
        )
        # A version's rows, and a fact's rows in a version (lookups start from the fact).
        Index(f"ix_{self.name}_loc_version", self.loc.c.version_id, self.loc.c.fact_id)
        self.defaults = {
            c.name: getattr(c.default, "arg", None)
            for c in view.columns
            if c.default is not None and getattr(c.default, "is_scalar", False)
        }

    def view_sql(self) -> str:
        picks = [
            f'l."{c}"' if c in ("id", "version_id", *self.loc_cols) else f'f."{c}"'
            for c in self.columns
        ]
        return (
            f'CREATE VIEW "{self.name}" AS SELECT {", ".join(picks)} '
            f'FROM "{self.loc.name}" l JOIN "{self.fact.name}" f ON f.id = l.fact_id'
        )


@cache
def tables() -> dict[str, Factored]:
    """The factored tables by view name (their Tables join SQLModel's metadata)."""
    return {name: Factored(SQLModel.metadata.tables[name], *spec) for name, spec in SPEC.items()}


def create_views(conn: Connection) -> None:
    existing = set(conn.dialect.get_view_names(conn))
    for table in tables().values():
        if table.name not in existing:
            conn.exec_driver_sql(table.view_sql())


class FactIndex:
    """fact tuple -> fact id for every factored table, loaded once and kept in step with the
    writes of one process."""

    def __init__(self, conn: Connection) -> None:
        self.ids: dict[str, dict[tuple[Any, ...], int]] = {}
        for name, table in tables().items():
            cols = ", ".join(f'"{c}"' for c in table.fact_cols)
            rows = conn.exec_driver_sql(f'SELECT id, {cols} FROM "{table.fact.name}"')
            self.ids[name] = {tuple(r[1:]): r[0] for r in rows}


_indexes: weakref.WeakKeyDictionary[Engine, FactIndex] = weakref.WeakKeyDictionary()


def fact_index(conn: Connection) -> FactIndex:
    """The engine's FactIndex (loaded on first use)."""
    index = _indexes.get(conn.engine)
    if index is None:
        index = _indexes[conn.engine] = FactIndex(conn)
    return index


def forget(engine: Engine) -> None:
    """Drop the engine's FactIndex: after a rollback, a drop or a sweep."""
    _indexes.pop(engine, None)


def _placeholders(conn: Connection, n: int) -> str:
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    return ", ".join([mark] * n)


def _cursor(conn: Connection) -> Any:
    """The DBAPI cursor of the connection's open transaction: a version's few bulk statements
    skip SQLAlchemy's per-statement work."""
    return conn.connection.cursor()


def _next_id(cur: Any, table: Table) -> int:
    cur.execute(f'SELECT max(id) FROM "{table.name}"')
    return (cur.fetchone()[0] or 0) + 1


def _insert_facts(
    conn: Connection, cur: Any, table: Factored, new_facts: list[tuple[Any, ...]]
) -> None:
    if new_facts:
        cols = ", ".join(f'"{c}"' for c in ["id", *table.fact_cols])
        marks = _placeholders(conn, len(table.fact_cols) + 1)
        cur.executemany(f'INSERT INTO "{table.fact.name}" ({cols}) VALUES ({marks})', new_facts)


def write_rows(
    conn: Connection, name: str, version_id: int, rows: Iterable[tuple[Any, ...]]
) -> list[int]:
    """Insert a version's rows of factored table `name`: each row a tuple of the fact
    columns then the location columns (Factored.fact_cols + loc_cols). Returns the rows' ids
    (the view's id column), in order."""
    table = tables()[name]
    ids = fact_index(conn).ids[name]
    cur = _cursor(conn)
    n_fact = len(table.fact_cols)
    next_fact = _next_id(cur, table.fact)
    first = _next_id(cur, table.loc)
    new_facts: list[tuple[Any, ...]] = []
    locs: list[tuple[Any, ...]] = []
    get, add = ids.get, locs.append  # (bound once: ~235,000 rows an ingest)
    for loc_id, row in enumerate(rows, first):
        fact = row[:n_fact]
        fact_id = get(fact)
        if fact_id is None:
            fact_id = ids[fact] = next_fact
            new_facts.append((next_fact, *fact))
            next_fact += 1
        add((loc_id, version_id, fact_id, *row[n_fact:]))
    next_loc = first + len(locs)
    _insert_facts(conn, cur, table, new_facts)
    if locs:
        cols = ", ".join(f'"{c}"' for c in ["id", "version_id", "fact_id", *table.loc_cols])
        marks = _placeholders(conn, 3 + len(table.loc_cols))
        cur.executemany(f'INSERT INTO "{table.loc.name}" ({cols}) VALUES ({marks})', locs)
    cur.close()
    return list(range(first, next_loc))


def update_row(conn: Connection, name: str, row_id: int, row: tuple[Any, ...]) -> None:
    """Give one version row new values (copy on write: the fact it shared with other
    versions stays theirs)."""
    table = tables()[name]
    ids = fact_index(conn).ids[name]
    cur = _cursor(conn)
    fact, where = row[: len(table.fact_cols)], row[len(table.fact_cols) :]
    fact_id = ids.get(fact)
    if fact_id is None:
        fact_id = ids[fact] = _next_id(cur, table.fact)
        _insert_facts(conn, cur, table, [(fact_id, *fact)])
    sets = ", ".join(f'"{c}" = {_placeholders(conn, 1)}' for c in ["fact_id", *table.loc_cols])
    cur.execute(
        f'UPDATE "{table.loc.name}" SET {sets} WHERE id = {_placeholders(conn, 1)}',
        (fact_id, *where, row_id),
    )
    cur.close()


def delete_version(conn: Connection, version_id: int) -> None:
    """Delete a version's rows of every factored table, then the facts no version holds any
    more (so re-ingesting a version does not grow the knowledge base)."""
    mark = _placeholders(conn, 1)
    for table in tables().values():
        sql = f'DELETE FROM "{table.loc.name}" WHERE version_id = {mark}'
        conn.exec_driver_sql(sql, (version_id,))
        conn.exec_driver_sql(
            f'DELETE FROM "{table.fact.name}" WHERE id NOT IN '
            f'(SELECT fact_id FROM "{table.loc.name}")'
        )
    forget(conn.engine)


def analyze(conn: Connection) -> None:
    """Refresh SQLite's statistics of the factored tables (sampled: milliseconds), so that a
    lookup by value starts from the fact's index, not from the version's every row."""
    if conn.dialect.name != "sqlite":
        return  # PostgreSQL's autovacuum analyzes
    conn.exec_driver_sql("PRAGMA analysis_limit=400")
    for table in tables().values():
        conn.exec_driver_sql(f'ANALYZE "{table.fact.name}"')
        conn.exec_driver_sql(f'ANALYZE "{table.loc.name}"')


def orm_writes(session: Session, _context: Any, _instances: Any) -> None:
    """before_flush: the views take no INSERT, UPDATE or DELETE, so new, changed and deleted
    ORM objects of factored models are written here (write_rows, update_row, a delete of
    their location row) and expunged, as if the flush had done it. The tests' hand-built
    knowledge bases are written this way; the ingest calls write_rows itself."""
    # session.new iterates in the order the objects were added: their ids keep that order.
    groups: dict[tuple[str, int], list[Any]] = {}
    for obj in session.new:
        name = type(obj).__table__.name  # type: ignore[attr-defined]
        if name in SPEC:
            groups.setdefault((name, obj.version_id), []).append(obj)
    changed = [o for o in session.dirty if type(o).__table__.name in SPEC]  # type: ignore[attr-defined]
    gone = [o for o in session.deleted if type(o).__table__.name in SPEC]  # type: ignore[attr-defined]
    if not (groups or changed or gone):
        return
    conn = session.connection()
    for (name, version_id), objs in groups.items():
        rows = [_row(tables()[name], obj) for obj in objs]
        for obj, row_id in zip(objs, write_rows(conn, name, version_id, rows), strict=True):
            session.expunge(obj)
            obj.id = row_id
    for obj in changed:
        name = type(obj).__table__.name
        update_row(conn, name, obj.id, _row(tables()[name], obj))
        session.expunge(obj)
    for obj in gone:
        loc = tables()[type(obj).__table__.name].loc
        conn.exec_driver_sql(
            f'DELETE FROM "{loc.name}" WHERE id = {_placeholders(conn, 1)}', (obj.id,)
        )
        session.expunge(obj)


def _row(table: Factored, obj: Any) -> tuple[Any, ...]:
    return tuple(_value(table, obj, c) for c in table.fact_cols + table.loc_cols)


def _value(table: Factored, obj: Any, column: str) -> Any:
    value = getattr(obj, column)
    return table.defaults.get(column) if value is None else value


event.listen(Session, "before_flush", orm_writes)
