"""Every flag table of a version, not one: found by what the docs files hold (Markdown, JSX
in MDX, Markdown in MDX), each against the code and against each other."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import ingest_into
from fastapi.testclient import TestClient
from flag_tables_repo import (
    COOKBOOK_MDX,
    GUIDE,
    JSX_TABLE,
    MDX_MARKDOWN_TABLE,
    REFERENCE_MD,
    REFERENCE_MDX,
    ROUTER,
    build_flag_tables_repo,
)

from app.main import create_app
from ingest.analyze import kind_of
from ingest.docs import parse_docs


def test_a_jsx_table_in_mdx() -> None:
    rows = parse_docs(JSX_TABLE, "flags", bullets=False)
    assert [r["names"] for r in rows] == [
        ["--model-path"],
        ["--dtype"],
        ["--tp-size", "--tensor-parallel-size"],  # aliases after <br/>
        ["--port"],
        ["--mem-fraction-static"],  # a name broken over two backticked parts is one
        ["--disable-cuda-graph"],
        ["--schedule-policy"],
        ["--phantom-flag"],
    ]  # and no row for `--tp 2` in the prose
    dtype = rows[1]
    assert (dtype["default"], dtype["choices"]) == ("half", ["auto", "half"])
    assert dtype["description"] == "Weights' type."  # tags dropped, text kept
    assert rows[0]["type"] == "str" and rows[0]["default"] == "None"
    lines = JSX_TABLE.split("\n")
    assert all(lines[r["line"] - 1].strip().startswith("<tr") for r in rows)


def test_a_markdown_table_in_mdx_with_the_option_in_another_column() -> None:
    rows = parse_docs(MDX_MARKDOWN_TABLE, "flags", bullets=False)
    assert [r["names"] for r in rows] == [["--tp-size", "--tensor-parallel-size"], ["--port"]]
    assert rows[0]["description"] == "Tensor parallel degree."
    # A cell of prose that mentions an option names none.
    prose = "| A | B |\n| --- | --- |\n| x | Add `--port` to listen |\n| y | `--port` |\n"
    assert [r["names"] for r in parse_docs(prose, "flags", bullets=False)] == [["--port"]]


def test_a_guide_mentioning_an_option_has_no_flag_table() -> None:
    assert parse_docs(GUIDE, "flags", bullets=False) == []
    # The router's table is a flag table by its shape; kb/docsdrift.py leaves it out
    # because most of its options are not the server's.
    assert len(parse_docs(ROUTER, "flags", bullets=False)) == 3


def test_every_markdown_file_is_read_for_flag_tables() -> None:
    assert kind_of(REFERENCE_MDX) == kind_of(COOKBOOK_MDX) == "docs_flags"
    assert kind_of("python/sglang/srt/arg_groups/README.md") == "docs_flags"  # not a hook
    assert kind_of("docs/references/environment_variables.md") == "docs_env"
    assert kind_of("docs/diffusion/cli.md") == "plain"  # another program's docs


# --- ingested ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    root = tmp_path_factory.mktemp("tables")
    db = root / "kb.db"
    ingest_into(build_flag_tables_repo(root), db, jobs=1)
    return TestClient(create_app(f"sqlite:///{db}"), follow_redirects=False)


def drift(client: TestClient, version: str) -> Any:
    r = client.get(f"/api/v/{version}/docs-drift")
    assert r.status_code == 200, r.text[:400]
    return r.json()


def test_a_version_with_one_table(client: TestClient) -> None:
    d = drift(client, "v1.0.0")
    assert [c["path"] for c in d["docs_files"]["flags"]] == [REFERENCE_MD]
    flags = d["flags"]
    assert flags["missing_from_docs"] == ["--schedule-policy"]
    assert flags["not_in_code"] == ["--gone-flag"]
    [table] = flags["tables"]
    assert table["path"] == REFERENCE_MD and table["scope"] == "all"
    assert (table["rows"], table["named"]) == (7, 8)
    assert table["missing_from_docs"] == ["--schedule-policy"]
    assert table["not_in_code"] == ["--gone-flag"]
    assert flags["disagreements"] == []


def test_a_version_with_three_tables(client: TestClient) -> None:
    d = drift(client, "v2.0.0")
    paths = sorted([REFERENCE_MD, REFERENCE_MDX, COOKBOOK_MDX])
    assert [c["path"] for c in d["docs_files"]["flags"]] == paths  # not the guide, the router
    flags = d["flags"]
    tables = {t["path"]: t for t in flags["tables"]}
    assert sorted(tables) == paths
    md, jsx, cookbook = tables[REFERENCE_MD], tables[REFERENCE_MDX], tables[COOKBOOK_MDX]
    assert (md["missing_from_docs"], md["not_in_code"]) == (["--schedule-policy"], ["--gone-flag"])
    assert (jsx["missing_from_docs"], jsx["not_in_code"]) == ([], ["--phantom-flag"])
    assert jsx["details"]["not_in_code"][0]["docs"]["path"] == REFERENCE_MDX
    jsx_differs = {(r["name"], r["field"]) for r in jsx["differs"]}
    assert jsx_differs == {("--dtype", "default"), ("--dtype", "choices")}
    # The cookbook names two flags of one section: what it leaves out is their neighbours.
    assert cookbook["scope"] == "sections" and cookbook["sections"] == ["Parallelism"]
    assert cookbook["not_in_code"] == []
    assert "--schedule-policy" not in cookbook["missing_from_docs"]
    assert "--mem-fraction-static" in cookbook["missing_from_docs"]
    # The union: a flag is missing when no table names it.
    assert flags["missing_from_docs"] == []
    assert sorted(flags["not_in_code"]) == ["--gone-flag", "--phantom-flag"]


def test_two_tables_disagreeing(client: TestClient) -> None:
    rows = {
        (r["name"], r["field"]): r["tables"]
        for r in drift(client, "v2.0.0")["flags"]["disagreements"]
    }
    said = {k: {t["path"]: t["value"] for t in v} for k, v in rows.items()}
    assert said[("--schedule-policy", "named")] == {REFERENCE_MDX: "named", REFERENCE_MD: "missing"}
    assert said[("--dtype", "default")] == {REFERENCE_MD: "auto", REFERENCE_MDX: "half"}
    assert said[("--dtype", "choices")] == {
        REFERENCE_MD: ["auto", "half", "bfloat16"],
        REFERENCE_MDX: ["auto", "half"],
    }
    # `None` and ` None` are the same default; the types agree.
    assert ("--model-path", "default") not in rows and ("--port", "type") not in rows
    cite = {t["path"]: t["docs"] for t in rows[("--dtype", "default")]}
    assert "`--dtype`" in JSX_TABLE.split("\n")[cite[REFERENCE_MDX]["line"]]  # its <tr>
    assert all(c["url"] for c in cite.values())


def test_docs_files_are_cited_only_with_flag_rows(client: TestClient) -> None:
    r = client.get(f"/v/v2.0.0/source/{COOKBOOK_MDX}")
    assert r.status_code == 200  # cited: its rows' citations open
    assert client.get("/v/v2.0.0/source/docs/guide.md").status_code == 404


def test_the_page_lists_each_table(client: TestClient) -> None:
    page = client.get("/v/v2.0.0/docs-drift")
    assert page.status_code == 200
    for path in (REFERENCE_MD, REFERENCE_MDX, COOKBOOK_MDX):
        assert f'id="table-{path}"' in page.text
    assert "--phantom-flag" in page.text and "Where the tables disagree" in page.text
    md = client.get("/v/v2.0.0/docs-drift.md").text
    assert f"`{REFERENCE_MDX}`" in md and "| `--dtype` | default |" in md
