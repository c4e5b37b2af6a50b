"""The knowledge base and its search index do not depend on how the versions were ingested:
in one step, in two (the newest first), killed mid-way and resumed, or with versions
ingested again (`--force`: their rows get new ids). Every JSON answer, searches and every
list in every sort included, is the same (once the time each ingest took is left out)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from tests.api_routes import json_routes, normalized
from tests.conftest import ingest_into
from tests.drifting_repo import build_drifting_repo
from tests.stalled_ingest import start_stalled_ingest


def killed_and_resumed(repo: Path, db: Path) -> None:
    proc = start_stalled_ingest(repo, db, at="v1.0.2")
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    # the resumed ingest indexes v1.0.2 and v1.0.3 as it writes them, then the older two
    assert [v.version for v in ingest_into(repo, db, jobs=1).versions] == ["v1.0.2", "v1.0.3"]


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("paths")
    repo = build_drifting_repo(root)
    names = ("one step", "newest first", "killed", "forced")
    dbs = {name: root / name / "kb.db" for name in names}
    for db in dbs.values():
        db.parent.mkdir()
    ingest_into(repo, dbs["one step"], jobs=1)
    ingest_into(repo, dbs["newest first"], latest=2, jobs=1)
    ingest_into(repo, dbs["newest first"], jobs=1)
    killed_and_resumed(repo, dbs["killed"])
    ingest_into(repo, dbs["forced"], jobs=1)  # then two versions again: rows of new ids
    forced = ingest_into(repo, dbs["forced"], jobs=1, force=True, tags="v1.0.[13]")
    assert [v.version for v in forced.versions] == ["v1.0.1", "v1.0.3"]
    return dbs


def test_every_answer_is_the_same_whatever_the_ingest_path(paths: dict[str, Path]) -> None:
    clients = {name: TestClient(create_app(f"sqlite:///{db}")) for name, db in paths.items()}
    reference = clients.pop("one step")
    routes = json_routes(reference)
    assert len(routes) > 500 and sum("/api/search" in r for r in routes) > 20
    for route in routes:
        expected = reference.get(route)
        assert expected.status_code == 200, route
        for name, client in clients.items():
            answer = client.get(route)
            assert answer.status_code == 200, (name, route)
            assert normalized(answer.content) == normalized(expected.content), (name, route)


def test_a_result_reads_as_its_version_does(paths: dict[str, Path]) -> None:
    """What a result shows of a fact is that version's: the check of the renamed method is
    found at v1.0.0 in check_server_args, at v1.0.3 in validate_server_args; across all
    versions a result links to the newest version and reads as it does."""
    client = TestClient(create_app(f"sqlite:///{paths['killed']}"))

    def constraints(q: str, version: str) -> list[dict[str, Any]]:
        answer = client.get("/api/search", params={"q": q, "version": version}).json()
        return [r for r in answer["results"] if r["kind"] == "constraint"]

    def snippets(version: str) -> list[str]:
        return [r["snippet"] for r in constraints("chunk size negative", version)]

    assert any("in ServerArgs.check_server_args" in s for s in snippets("v1.0.0"))
    assert not any("validate_server_args" in s for s in snippets("v1.0.0"))
    assert any("in ServerArgs.validate_server_args" in s for s in snippets("v1.0.3"))
    # the warning of _handle_pipeline_parallelism (v1.0.0-v1.0.2), renamed _handle_pp in v1.0.3
    (newest,) = [r for r in constraints("pipeline parallelism", "v1.0.3") if "warn" in r["snippet"]]
    (across,) = [r for r in constraints("pipeline parallelism", "all") if "warn" in r["snippet"]]
    assert "_handle_pp:" in newest["snippet"]
    assert across["versions"] == [{"from": "v1.0.0", "to": "v1.0.3"}]
    assert (across["snippet"], across["url"]) == (newest["snippet"], newest["url"])
