"""Facts stored once (kb/factored.py): the views keep the old tables' shape, versions share
fact rows, a forced re-ingest neither grows the knowledge base nor touches other versions,
and ORM writes of the viewed models (hand-built test databases) work copy-on-write."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select

from ingest.runner import IngestOptions, run
from kb.factored import SPEC, tables
from kb.schema import SQLModel, UsageSite, Version, create_schema, make_engine
from tests.conftest import ingest_into
from tests.pg import fresh_database, index_at


def counts(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(db)
    try:
        out = {}
        for name in SPEC:
            for part in ("fact", "loc"):
                out[f"{name}_{part}"] = conn.execute(
                    f"select count(*) from {name}_{part}"
                ).fetchone()[0]
        return out
    finally:
        conn.close()


def view_rows(db: Path, table: str) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        cols = [r[1] for r in conn.execute(f"pragma table_info({table})")]
        keep = ", ".join(f't."{c}"' for c in cols if c != "id")
        return conn.execute(
            f"select v.name, {keep} from {table} t join version v "
            "on v.id = t.version_id order by t.id"
        ).fetchall()
    finally:
        conn.close()


def per_version(rows: list[tuple]) -> dict[str, list[tuple]]:
    """Each version's rows in id order (a re-ingested version's rows get new ids)."""
    out: dict[str, list[tuple]] = {}
    for row in rows:
        out.setdefault(row[0], []).append(row)
    return out


def test_views_have_exactly_the_models_columns(kb_db: Path) -> None:
    conn = sqlite3.connect(kb_db)
    try:
        views = {r[0] for r in conn.execute("select name from sqlite_master where type = 'view'")}
        assert views == set(SPEC)
        for name in SPEC:
            cols = [r[1] for r in conn.execute(f"pragma table_info({name})")]
            assert cols == [c.name for c in SQLModel.metadata.tables[name].columns]
    finally:
        conn.close()


def test_versions_share_facts(kb_db: Path) -> None:
    n = counts(kb_db)
    # Four versions of a few files: most facts recur, so far fewer facts than rows.
    assert n["usagesite_fact"] < n["usagesite_loc"]
    assert n["flag_fact"] < n["flag_loc"]
    conn = sqlite3.connect(kb_db)
    try:
        shared = conn.execute(
            "select count(*) from (select fact_id from flag_loc group by fact_id "
            "having count(distinct version_id) > 1)"
        ).fetchone()[0]
    finally:
        conn.close()
    assert shared > 0


def test_forced_reingest_keeps_size_ids_and_rows(
    kb_db: Path, three_era_repo: Path, tmp_path: Path
) -> None:
    db = tmp_path / "kb.db"
    with sqlite3.connect(kb_db) as src, sqlite3.connect(db) as dst:
        src.backup(dst)  # the WAL's pages included
    before = {t: view_rows(db, t) for t in SPEC}
    before_counts = counts(db)
    conn = sqlite3.connect(db)
    ids = dict(conn.execute("select name, id from version"))
    # A fact only this version holds, which the re-ingest must sweep away.
    vid = ids["v0.2.0"]
    fact = conn.execute("select max(id) + 1 from usagesite_fact").fetchone()[0]
    conn.execute("insert into usagesite_fact values (?, 'x', 'read', 'p.py', 'x = 1')", (fact,))
    conn.execute(
        "insert into usagesite_loc values ((select max(id) + 1 from usagesite_loc), ?, ?, 1)",
        (vid, fact),
    )
    conn.commit()
    conn.close()
    ingest_into(three_era_repo, db, force=True, tags="v0.2.0", jobs=1)
    conn = sqlite3.connect(db)
    assert dict(conn.execute("select name, id from version")) == ids
    conn.close()
    assert counts(db) == before_counts
    for table, rows in before.items():
        assert per_version(view_rows(db, table)) == per_version(rows), table


def test_orm_writes_go_to_facts_and_locations_copy_on_write(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'kb.db'}")
    create_schema(engine)
    with Session(engine) as session:
        versions = []
        for name in ("v1", "v2"):
            v = Version(
                name=name,
                commit=name,
                date=datetime(2025, 1, 1, tzinfo=UTC),
                sort_key=name,
                era=1,
                extractor_version=1,
                web_url="",
            )
            session.add(v)
            session.flush()
            versions.append(v.id)
        sites = [
            UsageSite(version_id=vid, dest="tp_size", path="a.py", line=3 + i, text="args.tp_size")
            for i, vid in enumerate(versions)
        ]
        session.add_all(sites)
        session.commit()
        assert [s.id for s in sites] == [1, 2]
    with Session(engine) as session:
        one = session.exec(select(UsageSite).where(UsageSite.version_id == versions[0])).one()
        one.text = "args.tp_size  # changed"
        session.add(one)
        session.commit()
        rows = session.exec(select(UsageSite).order_by(UsageSite.id)).all()
        assert [(r.id, r.line, r.text) for r in rows] == [
            (1, 3, "args.tp_size  # changed"),
            (2, 4, "args.tp_size"),  # the other version's row kept its fact
        ]
        session.delete(rows[1])
        session.commit()
        assert [r.id for r in session.exec(select(UsageSite)).all()] == [1]
    table = tables()["usagesite"]
    with engine.connect() as conn:
        assert conn.exec_driver_sql(f"select count(*) from {table.fact.name}").scalar() == 2


@pytest.mark.postgres
def test_forced_reingest_on_postgres(three_era_repo: Path, tmp_path: Path) -> None:
    url = fresh_database("factored")

    def state() -> tuple[dict[str, int], dict[str, int], int]:
        engine = make_engine(url)
        with engine.connect() as conn:
            sizes = {
                f"{n}_{p}": conn.exec_driver_sql(f"select count(*) from {n}_{p}").scalar() or 0
                for n in SPEC
                for p in ("fact", "loc")
            }
            ids = dict(conn.exec_driver_sql("select name, id from version").all())
            flags = conn.exec_driver_sql("select count(*) from flag").scalar() or 0
        engine.dispose()
        return sizes, ids, flags

    def ingest(**kwargs: Any) -> None:
        with index_at(tmp_path / "index"):
            run(
                IngestOptions(
                    repo=str(three_era_repo),
                    db_url=url,
                    web_url="",
                    cache_dir=tmp_path / "repos",
                    jobs=1,
                    **kwargs,
                )
            )

    ingest()
    before = state()
    assert before[2] > 0
    ingest(force=True, tags="v0.2.0")
    assert state() == before


def test_statistics_count_every_version_after_an_ingest(
    three_era_repo: Path, tmp_path: Path
) -> None:
    """Statistics taken at 1, 2, 4... versions are refreshed at the end of a run: the planner
    must not choose plans on a table's size of a few versions ago."""
    db = tmp_path / "kb.db"
    ingest_into(three_era_repo, db, jobs=1)
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM version").fetchone()[0] == 3
    for name in ("flag", "usagesite"):
        rows = conn.execute(f"SELECT count(*) FROM {name}_loc").fetchone()[0]
        stat = conn.execute(
            "SELECT stat FROM sqlite_stat1 WHERE tbl = ? AND idx LIKE 'ix_%'", (f"{name}_loc",)
        ).fetchone()[0]
        assert int(stat.split()[0]) == rows
    conn.close()
