"""A re-ingested version keeps its identity, and a web request reads one snapshot: readers
polling while `ingest --force` rewrites the version never see it empty or half written."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import event

from app.main import create_app
from tests.conftest import ingest_into
from tests.fixture_repos import build_many_versions_repo

ROOT = Path(__file__).resolve().parent.parent
TABLES = ["flag", "option", "constraintsite", "constraint_flag", "usagesite", "versionfile"]


def snapshot(db: Path) -> dict[str, Any]:
    conn = sqlite3.connect(db)
    out: dict[str, Any] = {"versions": conn.execute("select id, name from version").fetchall()}
    for table in TABLES:
        out[table] = conn.execute(f"select count(*) from {table}").fetchone()[0]
    conn.close()
    return out


def test_force_keeps_the_version_id(tmp_path: Path) -> None:
    repo = build_many_versions_repo(tmp_path, 3)
    db = tmp_path / "kb.db"
    ingest_into(repo, db, jobs=1)
    before = snapshot(db)
    assert before["option"] >= before["flag"] > 0 and before["constraint_flag"] > 0
    ingest_into(repo, db, jobs=1, force=True)
    assert snapshot(db) == before  # same ids, child rows replaced (not added)


# Re-ingests the label `cur` from two commits in turn, so its facts really change each time.
REINGEST = """
import sys
from pathlib import Path
from ingest.runner import IngestOptions, run

repo, db, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(rounds):
    ref = ("v0.3.0", "v0.2.0")[i % 2]
    run(IngestOptions(repo=repo, db_url=f"sqlite:///{db}", tags="none", refs=[(ref, "cur")],
                      web_url="https://github.com/sgl-project/sglang",
                      cache_dir=Path(db).parent / "cache", force=True, jobs=1))
"""
URLS = ["/api/v/cur/backends", "/api/v/cur/flags/--moe-runner-backend", "/api/v/cur/constraints"]


def test_readers_never_see_a_torn_version(tmp_path: Path, three_era_repo: Path) -> None:
    db = tmp_path / "kb.db"
    app = create_app_after(three_era_repo, db)
    client = TestClient(app)
    answers: list[list[Any]] = []
    for ref in ("v0.2.0", "v0.3.0"):
        ingest_into(three_era_repo, db, tags="none", refs=[(ref, "cur")], force=True, jobs=1)
        answers.append([client.get(url).json() for url in URLS])
    assert all(a != b for a, b in zip(*answers, strict=True))  # each page differs

    # Test-side only: every statement of the app takes 2 ms longer, so the ingest's commits
    # land inside requests (a request without one snapshot then sees the version torn).
    @event.listens_for(app.state.engine, "before_cursor_execute")
    def _slow(*_args: Any) -> None:
        time.sleep(0.002)

    proc = subprocess.Popen(
        [sys.executable, "-c", REINGEST, str(three_era_repo), str(db), "8"],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    polls, torn = 0, []
    try:
        while proc.poll() is None:
            for i, url in enumerate(URLS):
                response = client.get(url)
                if response.status_code != 200 or all(
                    response.json() != answer[i] for answer in answers
                ):
                    torn.append((url, response.status_code, response.text[:200]))
            polls += 1
    finally:
        _out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert polls >= 20, f"only {polls} polls overlapped the ingest"
    assert torn == [], f"{len(torn)} torn answers in {polls} polls: {torn[:3]}"


def create_app_after(repo: Path, db: Path) -> Any:
    """The app on `db` once it holds the label `cur` (the app checks the schema on start)."""
    ingest_into(repo, db, tags="none", refs=[("v0.2.0", "cur")], jobs=1)
    return create_app(f"sqlite:///{db}")
