"""Which database a command uses: DATABASE_URL wins over FLAGATLAS_DB for every command;
and where its search index lives.

The image sets FLAGATLAS_DB (SQLite in its volume) and compose.yaml adds DATABASE_URL
(PostgreSQL): the ingest once wrote the SQLite file while the web service read PostgreSQL.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from kb.schema import database_url
from kb.search import default_index_dir

ROOT = Path(__file__).resolve().parent.parent


def test_database_url_wins_over_flagatlas_db(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLAGATLAS_DB", "/srv/a.db")
    monkeypatch.setenv("DATABASE_URL", "postgresql+psycopg://u@h/db")
    assert database_url() == "postgresql+psycopg://u@h/db"
    assert database_url("x.db") == "sqlite:///x.db"  # an explicit --db wins over both
    monkeypatch.delenv("DATABASE_URL")
    assert database_url() == "sqlite:////srv/a.db"


def test_a_postgresql_index_does_not_depend_on_the_working_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The search index of a PostgreSQL knowledge base is found in the same place whichever
    directory the ingest or the server starts from (it was data/ below the current one)."""
    url = "postgresql+psycopg://u:secret@db.example:5433/atlas"
    monkeypatch.delenv("FLAGATLAS_INDEX", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    places = set()
    for cwd in (tmp_path, ROOT):
        monkeypatch.chdir(cwd)
        places.add(default_index_dir(url))
    assert places == {tmp_path / "share" / "flagatlas" / "atlas@db.example_5433.search"}
    other = default_index_dir("postgresql+psycopg://u@db.example:5433/other")
    assert other != default_index_dir(url)  # one per database
    monkeypatch.setenv("FLAGATLAS_INDEX", "/srv/index")
    assert default_index_dir(url) == Path("/srv/index")
    assert default_index_dir("sqlite:///kb/x.db") == Path("/srv/index")
    monkeypatch.delenv("FLAGATLAS_INDEX")
    assert default_index_dir("sqlite:///kb/x.db") == Path("kb/x.db.search")


def test_ingest_writes_where_database_url_points(tmp_path: Path, three_era_repo: Path) -> None:
    chosen, ignored = tmp_path / "chosen.db", tmp_path / "ignored.db"
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{chosen}", "FLAGATLAS_DB": str(ignored)}
    result = subprocess.run(
        [sys.executable, "-m", "cli", "ingest", "--repo", str(three_era_repo), "--jobs", "1"],
        capture_output=True, text=True, cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert not ignored.exists()
    names = [r[0] for r in sqlite3.connect(chosen).execute("select name from version")]
    assert sorted(names) == ["v0.1.0", "v0.2.0", "v0.3.0"]
