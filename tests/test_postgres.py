"""PostgreSQL as a backend: a repository ingested into PostgreSQL answers every JSON route
(tests/api_routes.py: each list in every sort and filter, each thing in them) as the same
ingest into SQLite does, once normalized (keys sorted, the ingest's own time left out):
lists have a total order, which neither database's order of ties nor PostgreSQL's collation
decides. The PostgreSQL databases compare text as en_US does (the postgres image's default),
not by code point as SQLite does. A server on PostgreSQL builds its search index where
FLAGATLAS_INDEX says. Skipped unless FLAGATLAS_TEST_PG_URL names a server (`.ci/run`
starts one)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from ingest.runner import IngestOptions, run
from tests.api_routes import json_routes, normalized
from tests.conftest import ingest_into
from tests.drifting_repo import build_drifting_repo
from tests.pg import fresh_database, index_at

pytestmark = pytest.mark.postgres


def ingest_pg(repo: Path, index: Path, **kwargs) -> str:  # type: ignore[no-untyped-def]
    url = fresh_database("ingest", icu_locale="en-US")
    with index_at(index):
        run(
            IngestOptions(
                repo=str(repo),
                db_url=url,
                web_url="https://github.com/sgl-project/sglang",
                cache_dir=index.parent / "repos",
                jobs=1,
                **kwargs,
            )
        )
    return url


@pytest.fixture(scope="module")
def pg_url(three_era_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    index = tmp_path_factory.mktemp("pg") / "index"
    return ingest_pg(three_era_repo, index, refs=[("dev", "dev")]), index


@pytest.fixture(scope="module")
def drifting(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    """The drifting repository in SQLite and in PostgreSQL (ties in its lists, and paths
    that sort otherwise in en_US)."""
    root = tmp_path_factory.mktemp("drifting")
    repo = build_drifting_repo(root)
    ingest_into(repo, root / "kb.db", jobs=1)
    index = root / "pg" / "index"
    index.parent.mkdir()
    return root / "kb.db", ingest_pg(repo, index), index


def answers_alike(lite: TestClient, pg: TestClient) -> int:
    checked = 0
    for route in json_routes(lite):
        a, b = lite.get(route), pg.get(route)
        assert a.status_code == b.status_code == 200, route
        assert normalized(a.content) == normalized(b.content), route
        checked += 1
    return checked


def test_postgres_answers_like_sqlite(kb_db: Path, pg_url: tuple[str, Path]) -> None:
    url, index = pg_url
    lite = TestClient(create_app(f"sqlite:///{kb_db}"))
    with index_at(index):
        pg = TestClient(create_app(url))
    assert answers_alike(lite, pg) > 250
    assert index.exists()  # the ingest built the index where FLAGATLAS_INDEX said


def test_lists_are_in_the_same_order_on_both(drifting: tuple[Path, str, Path]) -> None:
    db, url, index = drifting
    lite = TestClient(create_app(f"sqlite:///{db}"))
    with index_at(index):
        pg = TestClient(create_app(url))
    assert answers_alike(lite, pg) > 500
    # what the fixture is for: ties on (path, line), and paths en_US sorts otherwise
    sites = lite.get("/api/v/v1.0.0/constraints?kind=warning&per_page=0").json()["constraints"]
    tied = [c["message"] for c in sites if c["function"] == "WarnedAction.__call__"]
    assert tied == sorted(tied) and len(tied) == 2
    reads = lite.get("/api/v/v1.0.0/flags/--chunk-size").json()["usages"]
    paths = [u["path"] for u in reads]
    assert paths == sorted(paths) and "python/sglang/srt/A_c.py" in paths


def test_a_replica_builds_its_missing_index_on_start(
    pg_url: tuple[str, Path], tmp_path: Path
) -> None:
    from cli.serve import ensure_index

    url, _index = pg_url
    replica = tmp_path / "replica-index"
    ensure_index(url, replica)
    assert replica.exists()
    built = os.path.realpath(replica)
    ensure_index(url, replica)  # up to date: kept as it is
    assert os.path.realpath(replica) == built
    with index_at(replica):
        client = TestClient(create_app(url))
    hits = client.get("/api/search?q=moe-runner-backend").json()
    assert hits["results"], hits
