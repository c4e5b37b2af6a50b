"""A database of another schema meets `serve` and `ingest` with one line naming the command
that rebuilds it; `ingest --rebuild` does."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from kb.schema import SCHEMA_VERSION, SchemaMismatch

ROOT = Path(__file__).resolve().parent.parent

# The shape before the schema was versioned: no meta table (a few of its tables suffice).
OLD_SCHEMA = """
CREATE TABLE version (id INTEGER PRIMARY KEY, name VARCHAR NOT NULL UNIQUE,
    "commit" VARCHAR NOT NULL, date DATETIME NOT NULL, sort_key VARCHAR NOT NULL,
    position INTEGER NOT NULL, era INTEGER NOT NULL, extractor_version INTEGER NOT NULL,
    web_url VARCHAR NOT NULL, report VARCHAR NOT NULL, ingested_at DATETIME NOT NULL);
CREATE TABLE flag (id INTEGER PRIMARY KEY, version_id INTEGER NOT NULL REFERENCES version(id),
    name VARCHAR NOT NULL, dest VARCHAR NOT NULL, aliases VARCHAR NOT NULL);
INSERT INTO version VALUES (1, 'v0.1.0', 'abc', '2024-01-01', 'v0.1.0', 0, 1, 7,
    'https://github.com/sgl-project/sglang', '{}', '2024-01-02');
INSERT INTO flag VALUES (1, 1, '--port', 'port', '[]');
"""


def old_db(path: Path, meta_version: int | None = None) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript(OLD_SCHEMA)
    if meta_version is not None:
        conn.executescript(
            "CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL);"
            f"INSERT INTO meta VALUES ('schema_version', '{meta_version}');"
        )
    conn.commit()
    conn.close()
    return path


def flagatlas(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


READERS = {
    "serve": ["--port", "1"],
    "reindex": [],
    "explain": ["--", "python", "-m", "sglang.launch_server", "--port", "1"],
}


@pytest.mark.parametrize("meta_version", [None, SCHEMA_VERSION + 1])
@pytest.mark.parametrize("command", ["serve", "reindex", "explain"])
def test_readers_name_the_rebuild(tmp_path: Path, meta_version: int | None, command: str) -> None:
    db = old_db(tmp_path / "old.db", meta_version)
    result = flagatlas(command, "--db", str(db), *READERS[command])
    assert result.returncode in (1, 2)
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"flagatlas {command}: {db}: ")
    assert lines[0].endswith(f"rebuild it: flagatlas ingest --rebuild --db {db}")
    assert f"schema {meta_version or 1}" in lines[0]
    if command == "serve":
        with pytest.raises(SchemaMismatch):
            create_app(f"sqlite:///{db}")


def test_ingest_names_the_rebuild_then_rebuilds(tmp_path: Path, three_era_repo: Path) -> None:
    db = old_db(tmp_path / "old.db")
    args = ["ingest", "--repo", str(three_era_repo), "--db", str(db), "--jobs", "1"]
    result = flagatlas(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "schema 1" in lines[0] and lines[0].endswith(" --rebuild")
    assert f"flagatlas ingest --repo {three_era_repo} --db {db}" in lines[0]
    # The file is untouched, and the named command rebuilds it.
    assert sqlite3.connect(db).execute("select count(*) from flag").fetchone() == (1,)
    rebuilt = flagatlas(*args, "--rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    conn = sqlite3.connect(db)
    assert conn.execute("select value from meta").fetchone() == (str(SCHEMA_VERSION),)
    versions = [r[0] for r in conn.execute("select name from version order by position")]
    assert versions == ["v0.1.0", "v0.2.0", "v0.3.0"]
    client = TestClient(create_app(f"sqlite:///{db}"))
    assert client.get("/api/v/v0.3.0/flags/--tp").json()["name"] == "--tp-size"


def test_empty_file_is_not_a_knowledge_base(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    sqlite3.connect(db).close()
    result = flagatlas("serve", "--db", str(db), "--port", "1")
    assert result.returncode == 1 and "holds no knowledge base" in result.stderr
