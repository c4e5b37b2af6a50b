"""PostgreSQL as a backend: the three-era fixture repository ingested into PostgreSQL answers
every JSON route byte for byte as the same ingest into SQLite does (lists and source marks
have a total order), and a server on it builds its search index where FLAGATLAS_INDEX says.
Skipped unless FLAGATLAS_TEST_PG_URL names a server (`.ci/run` starts one)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from ingest.runner import IngestOptions, run
from tests.pg import fresh_database, index_at

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def pg_url(three_era_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    url = fresh_database("ingest")
    index = tmp_path_factory.mktemp("pg") / "index"
    with index_at(index):
        run(
            IngestOptions(
                repo=str(three_era_repo),
                db_url=url,
                web_url="https://github.com/sgl-project/sglang",
                cache_dir=index.parent / "repos",
                refs=[("dev", "dev")],
                jobs=1,
            )
        )
    return url, index


def routes(client: TestClient) -> list[str]:
    """Every JSON route of the knowledge base: each version's lists and each thing in them."""
    urls = ["/api/versions"]
    versions = [v["name"] for v in client.get("/api/versions").json()["versions"]]
    for v in versions:
        base = f"/api/v/{quote(v, safe='')}"
        urls += [base, f"{base}/flags", f"{base}/constraints", f"{base}/enums", f"{base}/backends"]
        for flag in client.get(f"{base}/flags").json()["flags"]:
            urls.append(f"{base}/flags/{quote(flag['name'], safe='')}")
            for cite in (flag.get("source") or {},):
                if cite.get("path"):
                    urls.append(f"{base}/source/{cite['path']}")
        for backend in client.get(f"{base}/backends").json().get("backends", []):
            for value in backend.get("values", [])[:5]:
                name = value["value"] if isinstance(value, dict) else value
                urls.append(f"{base}/backends/{quote(backend['flag'], safe='')}/{quote(name)}")
    urls += [f"/api/diff/{versions[-1]}/{versions[0]}", f"/api/diff/{versions[0]}/{versions[1]}"]
    urls += ["/api/search?q=moe", "/api/search?q=backend&version=all", "/api/search?q=tp"]
    urls.append(f"/api/explain?version={versions[0]}&command=--tp-size+2+--pp-size+2")
    return sorted(set(urls))


def test_postgres_answers_like_sqlite(kb_db: Path, pg_url: tuple[str, Path]) -> None:
    url, index = pg_url
    lite = TestClient(create_app(f"sqlite:///{kb_db}"))
    with index_at(index):
        pg = TestClient(create_app(url))
    checked = 0
    for route in routes(lite):
        a, b = lite.get(route), pg.get(route)
        assert a.status_code == b.status_code == 200, route
        assert a.content == b.content, route
        checked += 1
    assert checked > 40
    assert index.exists()  # the ingest built the index where FLAGATLAS_INDEX said


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
