"""Doc commands end to end: extracted at ingest, checked with explain's pipeline on request,
served as JSON and as a page, in the version diff and as flag examples."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.main import create_app
from kb.doc_commands import store_checks
from kb.schema import DocCommand, Version, loads, make_engine
from tests.conftest import ingest_into
from tests.doc_command_repos import COOKBOOK, GUIDE, build_doc_command_repo


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("docs")
    path = root / "kb.db"
    ingest_into(build_doc_command_repo(root), path, jobs=1)
    return path


@pytest.fixture(scope="module")
def session(db: Path) -> Iterator[Session]:
    engine = make_engine(f"sqlite:///{db}", readonly=True)
    with Session(engine) as s:
        yield s
    engine.dispose()


def test_ingest_stores_each_command_with_its_file_and_line(session: Session) -> None:
    version = session.exec(select(Version).where(Version.name == "v1.0.0")).one()
    rows = session.exec(select(DocCommand).where(DocCommand.version_id == version.id)).all()
    found = {(r.path, r.line, r.command) for r in rows}
    assert (
        COOKBOOK,
        10,
        "python -m sglang.launch_server --model-path org/plain --moe-runner-backend=triton",
    ) in found
    found -= {f for f in found if "triton" in f[2]}
    assert found == {
        (GUIDE, 4, "python -m sglang.launch_server --model-path org/plain --tp-size 2"),
        (GUIDE, 10, "python -m sglang.launch_server --model-path org/plain --no-such-flag"),
        (
            GUIDE,
            16,
            "python -m sglang.launch_server --model-path org/plain --enable-two-batch-overlap",
        ),
        (GUIDE, 17, "python -m sglang.launch_server --model-path org/plain --tp-size 8"),
        (GUIDE, 20, "python -m sglang.launch_server --model-path org/plain --enable-mixed-chunk"),
        (
            COOKBOOK,
            4,
            "SGLANG_X=1 python3 -m sglang.launch_server --model-path org/plain --tp-size 2",
        ),
    }
    assert loads(version.report)["counts"]["doc_commands_skipped"] == 1


@pytest.fixture(scope="module")
def client(db: Path) -> TestClient:
    return TestClient(create_app(f"sqlite:///{db}"), follow_redirects=False)


def by_command(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["command"].split("org/plain ", 1)[-1]: row for row in body["commands"]}


def test_api_gives_each_command_its_status_with_the_findings(client: TestClient) -> None:
    response = client.get("/api/v/v1.0.0/docs-commands")
    assert response.status_code == 200
    body = response.json()
    assert body["version"] == "v1.0.0"
    rows = by_command(body)
    assert rows["--tp-size 2"]["status"] == "ok"
    assert rows["--enable-mixed-chunk"]["status"] == "ok"
    rejected = rows["--no-such-flag"]
    assert rejected["status"] == "rejected"
    assert any(f["kind"] == "unknown_flag" for f in rejected["findings"])
    fails = rows["--enable-two-batch-overlap"]
    assert fails["status"] == "fails"
    assert any("all-to-all" in f["message"] for f in fails["findings"])
    # tp_size > 4 raises only on a GPU under 40 GB: the check needs a GPU it was not given
    assert rows["--tp-size 8"]["status"] == "undecided"
    assert rows["--tp-size 8"]["findings"]
    assert {r["path"] for r in body["commands"]} == {GUIDE, COOKBOOK}
    assert body["counts"] == {
        "ok": 4,
        "rejected": 1,
        "fails": 1,
        "undecided": 1,
        "skipped": 1,
        "total": 7,
        "distinct": 7,
    }
    row = rows["--tp-size 2"]
    assert row["url"].startswith("https://github.com/sgl-project/sglang/blob/")
    assert row["url"].endswith(f"/{row['path']}#L{row['line']}")


def test_api_filters_by_status_and_knows_no_unknown_version(client: TestClient) -> None:
    body = client.get("/api/v/v1.0.0/docs-commands?status=rejected").json()
    assert [r["status"] for r in body["commands"]] == ["rejected"]
    assert body["counts"]["total"] == 7 and body["status"] == "rejected"
    missing = client.get("/api/v/v1.0.9/docs-commands")
    assert missing.status_code == 404
    assert "v1.0.0" in missing.text or "v1.1.0" in missing.text  # suggestions


def test_page_groups_by_file_filters_and_is_linked_from_the_drift_page(
    client: TestClient,
) -> None:
    response = client.get("/v/v1.0.0/docs-commands")
    assert response.status_code == 200
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "default-src 'self'" in response.headers["content-security-policy"]
    html = response.text
    assert html.index(f"<code>{COOKBOOK}</code>") < html.index(f"<code>{GUIDE}</code>")
    assert 'href="/v/v1.0.0/docs-commands?status=fails"' in html
    assert "--enable-two-batch-overlap" in html and "all-to-all" in html
    explain = "/explain?version=v1.0.0&amp;command=python+-m+sglang.launch_server"
    assert f'href="{explain}+--model-path+org%2Fplain+--tp-size+8"' in html
    only = client.get("/v/v1.0.0/docs-commands?status=fails").text
    assert "--enable-two-batch-overlap" in only and "--no-such-flag" not in only
    drift = client.get("/v/v1.0.0/docs-drift").text
    assert 'href="/v/v1.0.0/docs-commands"' in drift


def test_flag_json_and_page_give_the_doc_commands_using_it(client: TestClient) -> None:
    body = client.get("/api/v/v1.0.0/flags/--tp-size").json()
    assert [(e["path"], e["line"]) for e in body["examples"]] == [
        (COOKBOOK, 4),
        (GUIDE, 4),
        (GUIDE, 17),
    ]
    first = body["examples"][0]
    assert first["url"].startswith("/v/v1.0.0/docs-commands#cmd-")
    assert first["source_url"].endswith(f"/{COOKBOOK}#L4")
    assert client.get("/api/v/v1.0.0/flags/--quantization").json()["examples"] == []
    html = client.get("/v/v1.0.0/flags/--tp-size").text
    assert 'id="examples"' in html and f'href="{first["url"]}"' in html
    assert 'id="examples"' not in client.get("/v/v1.0.0/flags/--quantization").text
    # the anchor is the command's row on the docs-commands page
    assert f'id="{first["url"].split("#")[1]}"' in client.get("/v/v1.0.0/docs-commands").text


def test_value_page_gives_the_commands_using_that_value(client: TestClient) -> None:
    body = client.get("/api/v/v1.0.0/backends/--moe-runner-backend/triton").json()
    assert [(e["path"], e["line"]) for e in body["examples"]] == [(COOKBOOK, 10)]
    assert client.get("/api/v/v1.0.0/backends/--moe-runner-backend/auto").json()["examples"] == []
    html = client.get("/v/v1.0.0/backends/--moe-runner-backend/triton").text
    assert 'id="examples"' in html and "--moe-runner-backend=triton" in html


def test_diff_names_the_doc_commands_a_version_broke_once_they_are_checked(
    client: TestClient, db: Path
) -> None:
    # not checked yet (stored): the diff checks none itself and says so with null
    assert client.get("/api/diff/v1.0.0/v1.1.0").json()["doc_commands_broken"] is None
    engine = make_engine(f"sqlite:///{db}")
    try:
        # two worker processes, one version each; stored as they finish
        assert sorted(store_checks(engine, None, jobs=2)) == ["v1.0.0", "v1.1.0"]
        assert store_checks(engine, None) == []  # each version once
    finally:
        engine.dispose()
    body = client.get("/api/diff/v1.0.0/v1.1.0").json()
    broken = body["doc_commands_broken"]
    assert [(c["command"], c["from"], c["to"]) for c in broken] == [
        (
            "python -m sglang.launch_server --model-path org/plain --enable-mixed-chunk",
            "ok",
            "rejected",
        )
    ]
    assert broken[0]["path"] == GUIDE and broken[0]["line"] == 20
    assert any(f["kind"] == "unknown_flag" for f in broken[0]["findings"])
    assert client.get("/api/diff/v1.1.0/v1.0.0").json()["doc_commands_broken"] == []
    html = client.get("/diff/v1.0.0...v1.1.0").text
    assert 'id="doc-commands"' in html and f'href="{broken[0]["url"]}"' in html
    # the stored verdicts are the ones computed on request
    stored = client.get("/api/v/v1.0.0/docs-commands").json()
    assert stored["counts"]["fails"] == 1 and stored["counts"]["undecided"] == 1
