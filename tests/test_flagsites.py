"""The flag page's per-version site tables (kb/flagsites.py) against the per-flag queries
they replace, their life with the knowledge base's stamp, and which read a model cites."""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.main import create_app
from kb.flagsites import version_sites
from kb.queries import (
    choice_site_dict,
    choice_sites,
    constraint_dict,
    flag_constraints,
    flag_usages,
    get_version,
    ordered_versions,
    usage_site_dict,
)
from kb.reach import (
    MODELS_DIR,
    flag_models,
    indirect_site_dict,
    indirect_usages,
    one_per_line,
)
from kb.schema import Flag, ModelFile, UsageSite, make_engine
from tests.conftest import ingest_into
from tests.dashboard_kb import build_kb
from tests.reach_fixtures import build_reach_repo


@pytest.fixture(scope="module")
def reach_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("flagsites")
    ingest_into(build_reach_repo(root), root / "kb.db", jobs=1)
    return f"sqlite:///{root / 'kb.db'}"


def test_every_flag_gets_what_its_own_queries_give(reach_url: str, tmp_path: Path) -> None:
    """Reads, uses through a chain, constraint sites and choice sites (attributed and
    ambiguous) of every flag of every version of two knowledge bases, in the same order."""
    seen = {"usages": 0, "indirect": 0, "constraints": 0, "choices": 0, "ambiguous": 0}
    build_kb(tmp_path / "dashboard.db")
    for url in (reach_url, f"sqlite:///{tmp_path / 'dashboard.db'}"):
        compare_all(url, seen)
    assert all(seen.values()), seen  # the fixtures exercise every kind of site


def compare_all(url: str, seen: dict[str, int]) -> None:
    with Session(make_engine(url)) as session:
        for version in ordered_versions(session):
            version = get_version(session, version.name)
            shared = version_sites(session, version)
            flags = session.exec(select(Flag).where(Flag.version_id == version.id)).all()
            for flag in flags:
                usages = [
                    usage_site_dict(version, u) for u in flag_usages(session, version, flag.dest)
                ]
                assert shared.usage_dicts(flag.dest) == usages
                indirect = [
                    indirect_site_dict(version, u)
                    for u in one_per_line(indirect_usages(session, version, flag.dest))
                ]
                assert shared.indirect_dicts(flag.dest) == indirect
                constraints = [
                    constraint_dict(version, c)
                    for c in flag_constraints(session, version, flag.name)
                ]
                assert shared.constraint_dicts(flag.name) == constraints
                values = ["nope", *(str(v) for v in json.loads(flag.choices or "[]"))]
                expected = {
                    value: [choice_site_dict(version, s) for s in found]
                    for value, found in choice_sites(session, version, flag.name, values).items()
                }
                got = shared.choice_dicts(flag.name, values)
                assert got == expected and list(got) == list(expected)
                seen["usages"] += len(usages)
                seen["indirect"] += len(indirect)
                seen["constraints"] += len(constraints)
                for found in expected.values():
                    seen["choices"] += len(found)
                    seen["ambiguous"] += sum(1 for s in found if not s["attributed"])


def test_a_reingested_version_is_read_again(reach_url: str, tmp_path: Path) -> None:
    """The tables are per stamp: changed rows under a newer `ingested_at` are seen."""
    db = tmp_path / "copy.db"
    with sqlite3.connect(reach_url.removeprefix("sqlite:///")) as src, sqlite3.connect(db) as dst:
        src.backup(dst)
    url = f"sqlite:///{db}"
    with Session(make_engine(url)) as session:
        version = get_version(session, "v0.4.0")
        first = version_sites(session, version)
        assert version_sites(session, version) is first  # one read per stamp
        dest, found = next(iter(first.usages.items()))
    with Session(make_engine(url)) as session:
        version = get_version(session, "v0.4.0")
        row = session.get(UsageSite, found[0].id)
        assert row is not None
        row.text = "changed by a re-ingest"
        version.ingested_at = version.ingested_at + timedelta(days=1)
        session.add(row)
        session.add(version)
        session.commit()
    with Session(make_engine(url)) as session:
        again = version_sites(session, get_version(session, "v0.4.0"))
        assert again is not first
        assert "changed by a re-ingest" in [u["text"] for u in again.usage_dicts(dest)]


def test_a_model_cites_its_first_read_in_the_file(tmp_path: Path) -> None:
    """A model file that reads the flag twice is cited at the first read in the file, not
    at whichever the database stored first (here the later line is stored first)."""
    build_kb(tmp_path / "kb.db")
    url = f"sqlite:///{tmp_path / 'kb.db'}"
    path = MODELS_DIR + "twice.py"
    with Session(make_engine(url)) as session:
        version = get_version(session, "v0.3.0")
        flag = session.exec(
            select(Flag).where(Flag.version_id == version.id, Flag.name == "--tp-size")
        ).one()
        session.add(ModelFile(version_id=version.id, name="twice", path=path))
        for line in (30, 12):
            text = f"server_args.{flag.dest}  # {line}"
            session.add(
                UsageSite(version_id=version.id, dest=flag.dest, path=path, line=line, text=text)
            )
        session.commit()
        version = get_version(session, "v0.3.0")
        assert [m["site"]["line"] for m in flag_models(session, version, flag.dest)] == [12]
    client = TestClient(create_app(url, cache_mb=0))
    models = client.get("/api/v/v0.3.0/flags/--tp-size").json()["models"]
    assert [(m["name"], m["direct"], m["site"]["line"]) for m in models] == [("twice", True, 12)]
