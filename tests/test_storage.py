"""Blob texts and facts stored as zstd delta chains: each decodes to what git and the analyzer
give, chains link a path's previous row and stay within their bound, and a wrong base fails."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard
from sqlalchemy import create_engine

import ingest.runner
from ingest.analyze import analyze, facts_key, kind_of
from ingest.store import Chains, load_facts
from kb.schema import blob_text, pack, unpack, unpack_chain
from tests.conftest import ingest_into
from tests.fixture_repos import SERVER_ARGS, build_many_versions_repo

TEXT = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(200)).encode()


def test_a_delta_against_another_base_raises() -> None:
    other = TEXT.replace(b"return", b"yield")
    delta = pack(TEXT + b"# new\n", TEXT)
    assert unpack(delta, TEXT) == TEXT + b"# new\n"
    with pytest.raises(zstandard.ZstdError):  # the frame's checksum, not another text
        unpack(delta, other)


def test_chains_link_the_previous_row_up_to_their_bound() -> None:
    chains = Chains(max_depth=2)
    texts = [TEXT + b"".join(b"# %d\n" % j for j in range(i)) for i in range(6)]
    out = [chains.pack("a.py", f"k{i}", t) for i, t in enumerate(texts)]
    assert [(base, depth) for _p, base, depth in out] == [
        (None, 0), ("k0", 1), ("k1", 2), (None, 0), ("k3", 1), ("k4", 2),
    ]  # fmt: skip
    assert unpack_chain([p for p, _b, _d in out[:3]]) == texts[2]
    # A read decompresses at most max_bytes: here three texts' worth.
    budget = Chains(max_depth=10, max_bytes=3 * len(texts[5]))
    depths = [budget.pack("a.py", f"k{i}", t)[2] for i, t in enumerate(texts)]
    assert depths == [0, 1, 2, 0, 1, 2]
    # Another path has its own chain; a text unlike the last is stored whole.
    assert chains.pack("b.py", "b0", texts[0])[1] is None
    assert chains.pack("a.py", "k6", bytes(range(256)) * 40)[1:] == (None, 0)


@pytest.fixture(scope="module")
def chained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Six releases that each add a flag, ingested with chains of at most 2 deltas."""
    root = tmp_path_factory.mktemp("chains")
    repo = build_many_versions_repo(root, 6)
    db = root / "kb.db"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ingest.runner, "MAX_TEXT_CHAIN", 2)
        mp.setattr(ingest.runner, "MAX_FACTS_CHAIN", 2)
        ingest_into(repo, db)
    return repo, db


def _git_blob(repo: Path, sha: str) -> bytes:
    return subprocess.run(
        ["git", "-C", str(repo), "cat-file", "blob", sha], capture_output=True, check=True
    ).stdout


def _rows(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


def test_ingested_texts_are_chains_of_the_previous_version(chained: tuple[Path, Path]) -> None:
    repo, db = chained
    shas = [
        sha
        for (sha,) in _rows(
            db,
            "SELECT f.sha FROM versionfile f JOIN version v ON v.id = f.version_id "
            f"WHERE f.path = '{SERVER_ARGS}' ORDER BY v.position",
        )
    ]
    stored = {
        sha: (base, depth) for sha, base, depth in _rows(db, "SELECT sha, base, depth FROM blob")
    }
    assert [stored[s] for s in shas] == [
        (None, 0), (shas[0], 1), (shas[1], 2), (None, 0), (shas[3], 1), (shas[4], 2),
    ]  # fmt: skip
    with create_engine(f"sqlite:///{db}").connect() as conn:
        for sha in shas:
            assert blob_text(conn, sha) == _git_blob(repo, sha).decode()


def test_ingested_facts_are_the_analyzers(chained: tuple[Path, Path]) -> None:
    repo, db = chained
    keys = [k for (k,) in _rows(db, "SELECT key FROM blobfacts")]
    assert max(d for (d,) in _rows(db, "SELECT depth FROM blobfacts")) == 2
    found = load_facts(create_engine(f"sqlite:///{db}"), keys)
    assert sorted(found) == sorted(keys)
    for key, data in found.items():
        sha, kind = key.split(":")
        assert kind == kind_of(SERVER_ARGS) and facts_key(sha, kind) == key
        expected = analyze(_git_blob(repo, sha), kind, SERVER_ARGS)
        assert json.loads(data) == json.loads(json.dumps(expected))


def test_a_paths_facts_are_one_chain_whichever_worker_analyzed_them(tmp_path: Path) -> None:
    """Each blob its own batch for two workers: the facts rows still link each version's
    blob of a path to the previous version's (a worker sees every other blob only)."""
    repo = build_many_versions_repo(tmp_path, 6)
    db = tmp_path / "kb.db"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ingest.runner, "BATCH", 1)
        mp.setattr(ingest.runner, "MAX_FACTS_CHAIN", 2)
        ingest_into(repo, db, jobs=2)
    keys = [
        facts_key(sha, kind_of(SERVER_ARGS))
        for (sha,) in _rows(
            db,
            "SELECT f.sha FROM versionfile f JOIN version v ON v.id = f.version_id "
            f"WHERE f.path = '{SERVER_ARGS}' ORDER BY v.position",
        )
    ]
    stored = {
        key: (base, depth)
        for key, base, depth in _rows(db, "SELECT key, base, depth FROM blobfacts")
    }
    assert [stored[k] for k in keys] == [
        (None, 0), (keys[0], 1), (keys[1], 2), (None, 0), (keys[3], 1), (keys[4], 2),
    ]  # fmt: skip


def test_a_wrong_or_missing_base_is_never_read_as_the_text(
    chained: tuple[Path, Path], tmp_path: Path
) -> None:
    _repo, original = chained
    db = tmp_path / "copy.db"
    with sqlite3.connect(original) as src, sqlite3.connect(db) as dst:
        src.backup(dst)
    (delta, base), (other,) = (
        _rows(db, "SELECT sha, base FROM blob WHERE depth = 2")[0],
        _rows(db, "SELECT sha FROM blob WHERE depth = 0")[-1],
    )
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE blob SET base = ? WHERE sha = ?", (other, base))
    with create_engine(f"sqlite:///{db}").connect() as conn, pytest.raises(zstandard.ZstdError):
        blob_text(conn, delta)
    # A facts row whose base is gone is left out (analyzed again), the others still load.
    links = dict(_rows(db, "SELECT key, base FROM blobfacts"))
    (gone,) = _rows(db, "SELECT base FROM blobfacts WHERE depth = 2 LIMIT 1")[0]
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM blobfacts WHERE key = ?", (gone,))
    missing = {gone} | {k for k, b in links.items() if b == gone}
    found = load_facts(create_engine(f"sqlite:///{db}"), sorted(links))
    assert len(missing) == 2 and set(found) == set(links) - missing


def test_analysis_workers_import_no_database_layers() -> None:
    # The pool's workers are forked from a server that imported ingest.analyze alone: what
    # it imports is in every worker (sqlalchemy, sqlmodel and GitPython are ~40 MiB).
    code = (
        "import sys, ingest.analyze; "
        "print(sorted(m for m in ('sqlalchemy', 'sqlmodel', 'git') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    ).stdout
    assert out.strip() == "[]"


def test_facts_json_keeps_what_json_keeps() -> None:
    """orjson encodes most facts, but writes a non-finite float as null: those facts (and
    integers past 64 bits) go through json, and every form reads back as json.loads reads it."""
    from ingest.analyze import dumps_facts, loads_facts

    plain = {"reads": [["tp_size", 3, "read"]], "env": [], "lines": {"3": "é ✓ x"}}
    inf_env = {**plain, "env": [{"name": "X", "default": float("inf")}]}
    flags = {**plain, "flags": [{"name": "--x", "default": float("-inf"), "const": 2**70}]}
    for kind, facts in [("plain", plain), ("plain", inf_env), ("server_args", flags)]:
        data = dumps_facts(kind, facts)
        assert loads_facts(data) == json.loads(data) == json.loads(json.dumps(facts))
    assert loads_facts(dumps_facts("plain", inf_env))["env"][0]["default"] == float("inf")
    assert loads_facts(dumps_facts("plain", {**plain, "consts": {"BIG": [2**70]}})) == {
        **plain,
        "consts": {"BIG": [2**70]},
    }


def test_compact_chains_and_texts_given_packed_store_the_same_rows() -> None:
    """A chain keeping its bases packed, or given the workers' packed texts, stores what a
    plain chain stores."""
    texts = [TEXT + b"".join(b"# %d\n" % j for j in range(i)) for i in range(6)]
    chains = Chains(max_depth=3)
    plain = [chains.pack("a.py", f"k{i}", t) for i, t in enumerate(texts)]
    compact = Chains(max_depth=3, compact=True)
    assert [compact.pack("a.py", f"k{i}", t) for i, t in enumerate(texts)] == plain
    given = Chains(max_depth=3)
    out = [given.pack("a.py", f"k{i}", None, pack(t)) for i, t in enumerate(texts)]
    assert [(base, depth) for _p, base, depth in out] == [(b, d) for _p, b, d in plain]
    assert unpack_chain([p for p, _b, _d in out[:3]]) == texts[2]


def test_a_delta_made_by_a_worker_is_stored_only_against_its_base() -> None:
    """The workers' delta against the path's blob before is stored when that blob is the
    chain's last (the bytes the chain would make), never against another base."""
    texts = [TEXT + b"".join(b"# %d\n" % j for j in range(i)) for i in range(4)]
    plain = Chains(max_depth=3)
    want = [plain.pack("a.py", f"k{i}", t) for i, t in enumerate(texts)]
    given = Chains(max_depth=3)
    given.pack("a.py", "k0", None, pack(texts[0]))
    made = ("k0", pack(texts[1], texts[0]))
    assert given.pack("a.py", "k1", None, pack(texts[1]), made) == want[1]
    taken = Chains(max_depth=3)  # taken as given: neither text is unpacked for it
    taken.pack("a.py", "k0", None, pack(texts[0]))
    assert taken.pack("a.py", "k1", None, pack(texts[1]), ("k0", b"made")) == (b"made", "k0", 1)
    # A delta against a blob that is not the chain's last (k1 is): made again, from k1.
    wrong = ("k0", pack(texts[2], texts[0]))
    out = given.pack("a.py", "k2", None, pack(texts[2]), wrong)
    assert out == want[2] and unpack(out[0], texts[1]) == texts[2]
