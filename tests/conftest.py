"""Shared fixtures: a knowledge base ingested from the synthetic three-era repository, and
one browser per browser-test module."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session

from ingest.runner import IngestOptions, IngestSummary, run
from kb.schema import make_engine
from tests.fixture_repos import build_three_era_repo, commit, git, write
from tests.hub_fixture import closed_port

# No test reaches the Hugging Face Hub or reads the machine's model directories: explain
# reads the command's --model-path (kb/model_source.py); the hub tests serve their own hub
# (tests/hub_fixture.py). Set before huggingface_hub is imported: it reads these once.
os.environ["HF_ENDPOINT"] = closed_port()
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
for name in ("HF_HUB_OFFLINE", "HF_TOKEN", "FLAGATLAS_MODEL_DIRS", "FLAGATLAS_MODEL_CACHE"):
    os.environ.pop(name, None)


def ingest_into(repo: Path, db: Path, **kwargs) -> IngestSummary:  # type: ignore[no-untyped-def]
    opts = IngestOptions(
        repo=str(repo),
        db_url=f"sqlite:///{db}",
        web_url="https://github.com/sgl-project/sglang",
        cache_dir=db.parent / "repos",
        **kwargs,
    )
    return run(opts)


@pytest.fixture(scope="session")
def three_era_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_three_era_repo(tmp_path_factory.mktemp("repo"))


@pytest.fixture(scope="session")
def kb_db(three_era_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Path of a SQLite KB with v0.1.0 (era 1), v0.2.0 (era 2), v0.3.0 (era 3) and the
    `dev` branch ingested as label `dev` (era 3 plus a hostile module)."""
    db = tmp_path_factory.mktemp("kb") / "flagatlas.db"
    ingest_into(three_era_repo, db, refs=[("dev", "dev")], jobs=1)
    return db


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless chromium per browser-test module (Debian's, see tests/browser_support)."""
    from browser_support import chromium

    with chromium() as b:
        yield b


def one_release_session(
    tmp_path_factory: pytest.TempPathFactory, name: str, files: dict[str, str]
) -> Iterator[Session]:
    """A read-only session on the knowledge base of a synthetic repository with one release,
    v0.1.0, holding `files` (path -> text): for the module fixtures of explain's tests."""
    root = tmp_path_factory.mktemp(name)
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for path, text in files.items():
        write(repo, path, text)
    commit(repo, name, "2025-01-01T12:00:00Z", "v0.1.0")
    yield from ingested_session(repo, root / "kb.db")


def ingested_session(repo: Path, db: Path) -> Iterator[Session]:
    """A read-only session on the knowledge base of `repo`, ingested into `db`."""
    ingest_into(repo, db, jobs=1)
    engine = make_engine(f"sqlite:///{db}", readonly=True)
    with Session(engine) as s:
        yield s
    engine.dispose()


def api_json(client: Any, url: str) -> dict[str, Any]:
    """The JSON of `/api<url>` through a TestClient, which must answer 200."""
    response = client.get("/api" + url)
    assert response.status_code == 200, response.text[:300]
    found: dict[str, Any] = response.json()
    return found
