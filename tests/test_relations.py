"""Relations as tables: a flag by any of its names (option, alias, dest, deprecated alias,
--no-x) in one indexed query, and the constraint <-> flag table the filters query."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from planted_kb import build_kb, flag
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from app.main import create_app
from kb.queries import find_flag, get_version
from kb.relations import _option_template, option_rows
from kb.schema import VersionFile, make_engine
from kb.search import SearchIndex
from kb.search_build import build_index


@pytest.fixture(scope="module")
def client(kb_db: Path) -> TestClient:
    return TestClient(create_app(f"sqlite:///{kb_db}"), follow_redirects=False)


def sites(client: TestClient, version: str, flag: str) -> list[tuple[str, int]]:
    response = client.get(f"/api/v/{version}/constraints", params={"flag": flag})
    assert response.status_code == 200
    return [(c["function"], c["source"]["line"]) for c in response.json()["constraints"]]


@pytest.mark.parametrize(
    "spelling", ["tp-size", "--tp-size", "TP_SIZE", "tensor-parallel-size", "tensor_parallel_size"]
)
def test_constraints_filter_takes_any_name(client: TestClient, spelling: str) -> None:
    # v0.1.0 defines --tensor-parallel-size with the alias --tp-size (dest tp_size): every
    # name lists the flag's three sites (a substring filter found none for "tp-size").
    assert len(sites(client, "v0.1.0", spelling)) == 3
    assert sites(client, "v0.1.0", spelling) == sites(client, "v0.1.0", "--tensor-parallel-size")


def test_constraints_filter_follows_a_deprecated_alias(client: TestClient) -> None:
    # --enable-old-overlap is deprecated in favour of --enable-two-batch-overlap.
    tbo = sites(client, "v0.2.0", "--enable-two-batch-overlap")
    assert tbo and set(tbo) <= set(sites(client, "v0.2.0", "enable-old-overlap"))


def test_constraints_filter_still_filters_as_you_type(client: TestClient) -> None:
    # "spec" names no flag: it matches as a substring of names (--speculative-*).
    partial = sites(client, "v0.3.0", "spec")
    assert len(partial) == 3
    assert sites(client, "v0.3.0", "no-such-flag-at-all") == []
    kinds = client.get("/api/v/v0.3.0/constraints?flag=pp-size&kind=raise").json()
    assert [c["kind"] for c in kinds["constraints"]] == ["raise"]


def test_flag_list_counts_come_from_the_table(client: TestClient) -> None:
    # v0.2.0: --pp-size is read by two sites (an override and a warning), --chunk-size by two.
    html = client.get("/v/v0.2.0/flags?q=pp-size").text
    assert len(sites(client, "v0.2.0", "--pp-size")) == 2
    assert '<span class="badge info">2 constraints</span>' in html
    html = client.get("/v/v0.2.0/flags?q=chunk-size").text
    assert '<span class="badge info">2 constraints</span>' in html


def test_backend_value_through_a_deprecated_alias(client: TestClient) -> None:
    canonical = client.get("/api/v/v0.3.0/backends/--moe-runner-backend/triton").json()
    for spelling in ("--moe-backend", "moe_runner_backend", "MOE-RUNNER-BACKEND"):
        other = client.get(f"/api/v/v0.3.0/backends/{spelling}/triton")
        assert other.status_code == 200 and other.json() == canonical
    assert canonical["sites"]
    # the flag page of the deprecated option itself stays its own
    assert client.get("/api/v/v0.3.0/flags/--moe-backend").json()["name"] == "--moe-backend"


def test_option_rows(kb_db: Path) -> None:
    conn = sqlite3.connect(kb_db)
    rows = conn.execute(
        "select v.name, o.name, o.kind, f.name from option o join flag f on f.id = o.flag_id "
        "join version v on v.id = o.version_id where o.kind != 'option'"
    ).fetchall()
    assert ("v0.3.0", "--tp", "alias", "--tp-size") in rows
    assert ("v0.3.0", "--moe-backend", "deprecated_alias", "--moe-runner-backend") in rows
    assert ("v0.1.0", "--tp-size", "alias", "--tensor-parallel-size") in rows
    # every flag answers to its own option; the relation rows of every site resolve
    missing = conn.execute(
        "select count(*) from flag f where not exists "
        "(select 1 from option o where o.flag_id = f.id and o.kind = 'option')"
    ).fetchone()
    unresolved = conn.execute(
        "select count(*) from constraint_flag where flag_id is null"
    ).fetchone()
    per_site = conn.execute(
        "select count(*) from constraintsite s where (select count(*) from constraint_flag c "
        "where c.constraint_id = s.id) = 0"
    ).fetchone()
    assert missing == (0,) and unresolved == (0,) and per_site == (0,)
    plan = " ".join(
        str(r)
        for r in conn.execute(
            "explain query plan select flag_id from option where version_id = 1 and key = 'tp'"
        )
    )
    assert "ix_option_version_key" in plan


def test_a_replacement_with_its_value_names_its_flag() -> None:
    # `--attention-backend=triton`: the deprecated name still answers for --attention-backend.
    flags = [
        (1, "--attention-backend", "attention_backend", "[]", False, None, None, None),
        (2, "--disable-widget", "disable_widget", "[]", True, "--attention-backend=triton",
         None, None),
    ]  # fmt: skip
    rows = {(r["name"], r["kind"], r["flag_id"]) for r in option_rows(7, flags)}
    assert ("--disable-widget", "deprecated_alias", 1) in rows


def negation_kb(tmp_path: Path) -> str:
    spec: dict[str, Any] = {
        "flags": [
            flag("--enable-cache", action="BooleanOptionalAction", negation="--no-enable-cache"),
            flag("--beta", argparse_dest="beta_value"),
        ],
        "constraints": [("k1", "raise", "ServerArgs.check", "cache needs beta", 20)],
        "enums": {},
    }
    return build_kb(tmp_path / "kb.db", [("s1", spec)])


def test_negation_and_argparse_dest_are_names(tmp_path: Path) -> None:
    url = negation_kb(tmp_path)
    engine = make_engine(url)
    with Session(engine) as session:
        version = get_version(session, "s1")
        for name, want in (
            ("--no-enable-cache", "--enable-cache"),
            ("no_enable_cache", "--enable-cache"),
            ("beta_value", "--beta"),
            ("enable_cache", "--enable-cache"),
        ):
            found = find_flag(session, version, name)
            assert found is not None and found.name == want, name
    engine.dispose()
    client = TestClient(create_app(url))
    assert client.get("/api/v/s1/flags/--no-enable-cache").json()["name"] == "--enable-cache"
    build_index(url, tmp_path / "idx")
    hit = SearchIndex(tmp_path / "idx").search("no-enable-cache", version="s1")["results"][0]
    assert hit["name"] == "--enable-cache"


def test_version_file_needs_its_blob(tmp_path: Path) -> None:
    url = negation_kb(tmp_path)
    engine = make_engine(url)
    with Session(engine) as session, pytest.raises(IntegrityError):
        session.add(VersionFile(version_id=1, path="pkg/x.py", sha="0" * 40))
        session.commit()
    engine.dispose()


def test_a_deprecated_flag_names_its_replacement_even_the_first_flag() -> None:
    # Option rows are made from a template numbering the flags from 0: the first flag of a
    # version (index 0) is a replacement too, not "no target".
    flags = [
        (10, "--runner", "runner", "[]", False, None, "runner", None),
        (11, "--old-runner", "old_runner", "[]", True, "--runner", "old_runner", None),
    ]
    rows = [(key, i, name, kind) for key, i, name, kind in _option_template(flags)]
    assert ("old_runner", 0, "--old-runner", "deprecated_alias") in rows
