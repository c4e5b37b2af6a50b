"""The JSON API contract of the dashboard (docs/DESIGN.md), over a small synthetic knowledge base:
every route, its field names, 404s with suggestions, /latest redirects and odd input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dashboard_kb import ARGS, ENUMS, RUNNER, WEB_URL, build_kb, dashboard_client
from fastapi.testclient import TestClient

from app.main import create_app
from tests.pg import BACKENDS

FLAG_FIELDS = {"name", "dest", "aliases", "type", "default", "choices", "help", "deprecated"}
SGLANG = "https://github.com/sgl-project/sglang"  # web_url of the kb_db fixture
CITATION_FIELDS = {"path", "line", "end_line", "url", "permalink"}
CONSTRAINT_FIELDS = {"kind", "function", "condition", "message", "flags", "affects", "source"}


@pytest.fixture(scope="module", params=BACKENDS)
def client(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    """The contract holds on SQLite and on PostgreSQL (when FLAGATLAS_TEST_PG_URL is set)."""
    return dashboard_client(request.param, tmp_path_factory.mktemp("kb"), "api")


def get(client: TestClient, url: str, status: int = 200) -> Any:
    response = client.get(url)
    assert response.status_code == status, (url, response.text[:500])
    return response.json()


def check_citation(
    cite: dict[str, Any], version: str, commit: str | None = None, web_url: str = WEB_URL
) -> None:
    assert set(cite) >= CITATION_FIELDS
    assert cite["line"] <= cite["end_line"]
    assert cite["url"].startswith(f"{web_url}/blob/")
    assert cite["url"].endswith(f"/{cite['path']}#L{cite['line']}-L{cite['end_line']}")
    if commit:
        assert f"/blob/{commit}/" in cite["url"]
    assert cite["permalink"].startswith(f"/v/{version}/source/{cite['path']}#L{cite['line']}")


def test_versions_newest_first_with_counts(client: TestClient) -> None:
    versions = get(client, "/api/versions")["versions"]
    assert [v["name"] for v in versions] == ["v0.3.0", "v0.2.0", "v0.1.0"]
    for v in versions:
        assert {"name", "commit", "date", "flags"} <= set(v)
        assert len(v["commit"]) == 40
    assert [v["flags"] for v in versions] == [8, 8, 8]
    assert versions[0]["date"].startswith("2026-03-01")


def test_flags_of_a_version(client: TestClient) -> None:
    body = get(client, "/api/v/v0.3.0/flags")
    assert body["version"] == "v0.3.0"
    by_name = {f["name"]: f for f in body["flags"]}
    assert "--fp4-gemm-backend" in by_name and "--old-cache" not in by_name
    for flag in body["flags"]:
        assert FLAG_FIELDS | {"source"} <= set(flag)
        check_citation(flag["source"], "v0.3.0")
    tp = by_name["--tp-size"]
    assert (tp["dest"], tp["aliases"], tp["type"], tp["default"]) == ("tp_size", ["--tp"], "int", 1)
    banner = by_name["--show-banner"]
    assert banner["default"] is None and banner["default_expr"] == "ServerArgs.banner"
    assert by_name["--moe-runner-backend"]["choices"][-1] == "flashinfer_trtllm"


def test_flags_filter(client: TestClient) -> None:
    names = [f["name"] for f in get(client, "/api/v/v0.3.0/flags?q=moe_runner")["flags"]]
    assert names == ["--moe-runner-backend"]
    by_help = [f["name"] for f in get(client, "/api/v/v0.3.0/flags?q=micro-batches")["flags"]]
    assert by_help == ["--enable-two-batch-overlap"]


def test_flag_page_contract(client: TestClient) -> None:
    flag = get(client, "/api/v/v0.3.0/flags/--moe-runner-backend")
    commit = get(client, "/api/v/v0.3.0")["commit"]
    assert FLAG_FIELDS | {"constraints", "usages", "choice_sites", "enum", "history"} <= set(flag)
    check_citation(flag["source"], "v0.3.0", commit)
    assert flag["source"]["path"] == ARGS
    # Usages are Sites: a citation plus the cited text.
    (usage,) = flag["usages"]
    assert usage["path"] == RUNNER and "server_args.moe_runner_backend" in usage["text"]
    check_citation(usage, "v0.3.0", commit)
    # One key per choice; attributed sites and ambiguous ones naming this flag.
    sites = flag["choice_sites"]
    assert list(sites) == ["auto", "triton", "flashinfer_cutlass", "flashinfer_trtllm"]
    assert [s["text"].strip() for s in sites["triton"]] == ["if backend == 'triton':"]
    assert sites["auto"][0]["attributed"] is False
    assert "--fp4-gemm-backend" in sites["auto"][0]["candidates"]
    assert sites["flashinfer_trtllm"] == []
    enum = flag["enum"]
    assert enum["name"] == "MoeRunnerBackend" and enum["values"][0] == "auto"
    assert enum["flags"] == ["--moe-runner-backend"] and enum["source"]["path"] == ENUMS


def test_flag_constraints_cite_the_right_lines(client: TestClient) -> None:
    flag = get(client, "/api/v/v0.3.0/flags/--enable-two-batch-overlap")
    (site,) = flag["constraints"]
    assert set(site) >= CONSTRAINT_FIELDS
    assert site["kind"] == "raise"
    assert site["flags"] == ["--enable-two-batch-overlap", "--moe-a2a-backend"]
    check_citation(site["source"], "v0.3.0")
    # The cited line in the stored blob is the raise itself.
    source = get(client, f"/api/v/v0.3.0/source/{ARGS}")
    line = source["text"].split("\n")[site["source"]["line"] - 1]
    assert "raise ValueError('two-batch overlap" in line
    # Overrides show up on the flag they change as well as the one they read.
    affected = get(client, "/api/v/v0.3.0/flags/--disable-overlap-schedule")["constraints"]
    assert [c["kind"] for c in affected] == ["override"]
    assert affected[0]["writes"] == {"disable_overlap_schedule": "True"}


def test_history(client: TestClient) -> None:
    history = get(client, "/api/v/v0.3.0/flags/--moe-runner-backend")["history"]
    assert history[0] == {
        "version": "v0.1.0",
        "field": "added",
        "from": None,
        "to": "--moe-runner-backend",
        "name": "--moe-runner-backend",
    }
    choices = [h for h in history if h["field"] == "choices"]
    assert len(choices) == 1 and choices[0]["version"] == "v0.3.0"
    assert choices[0]["to"][-1] == "flashinfer_trtllm"
    old = get(client, "/api/v/v0.1.0/flags/--old-cache")["history"]
    assert [(h["version"], h["field"]) for h in old] == [
        ("v0.1.0", "added"),
        ("v0.2.0", "deprecated"),
        ("v0.3.0", "removed"),
    ]
    pp = get(client, "/api/v/v0.2.0/flags/--pp-size")["history"]
    assert [(h["version"], h["field"]) for h in pp] == [("v0.1.0", "added"), ("v0.2.0", "help")]


@pytest.mark.parametrize(
    "spelling", ["--tp-size", "tp-size", "tp_size", "TP_SIZE", "--tp", "tp", "--TP-Size"]
)
def test_flag_spellings_resolve(client: TestClient, spelling: str) -> None:
    assert get(client, f"/api/v/v0.3.0/flags/{spelling}")["name"] == "--tp-size"


def test_enums_and_constraints(client: TestClient) -> None:
    (enum,) = get(client, "/api/v/v0.2.0/enums")["enums"]
    assert {"name", "values", "flags", "source"} <= set(enum)
    assert enum["values"] == ["auto", "triton", "flashinfer_cutlass"]
    constraints = get(client, "/api/v/v0.2.0/constraints")["constraints"]
    assert sorted(c["kind"] for c in constraints) == ["assert", "override", "raise"]
    for c in constraints:
        assert set(c) >= CONSTRAINT_FIELDS
        check_citation(c["source"], "v0.2.0")
    only = get(client, "/api/v/v0.2.0/constraints?flag=pp_size")["constraints"]
    assert [c["kind"] for c in only] == ["override"]
    asserts = get(client, "/api/v/v0.2.0/constraints?kind=assert")["constraints"]
    assert [c["flags"] for c in asserts] == [["--tp-size"]]


def test_unknown_constraint_kind_is_a_400_naming_the_kinds(client: TestClient) -> None:
    """An unknown kind answered 200 with an empty list, as if the version had no such
    sites: the JSON twin, the page, its htmx fragment and its downloads now say it is not
    a kind and link each valid one (the rest of the query kept)."""
    kinds = ["raise", "assert", "override", "warning"]
    api = client.get("/api/v/v0.2.0/constraints?kind=rasie&flag=tp-size")
    assert api.status_code == 400
    body = api.json()
    assert (body["kind"], body["name"]) == ("parameter", "kind")
    assert [s["name"] for s in body["suggestions"]] == kinds
    assert "'rasie'" in body["detail"] and "raise, assert, override, warning" in body["detail"]
    first = body["suggestions"][0]["url"]
    assert first.startswith("/api/v/v0.2.0/constraints?") and "flag=tp-size" in first
    assert client.get(first).status_code == 200
    for url, headers in [
        ("/v/v0.2.0/constraints?kind=Raise", {}),
        ("/v/v0.2.0/constraints?kind=x", {"HX-Request": "true"}),
        ("/v/v0.2.0/constraints?kind=x&format=csv", {}),
    ]:
        page = client.get(url, headers=headers)
        assert page.status_code == 400, url
        assert 'href="/v/v0.2.0/constraints?kind=override' in page.text
    # The known kinds, an empty kind and an unknown version answer as before.
    for kind in ["", *kinds]:
        assert client.get(f"/api/v/v0.2.0/constraints?kind={kind}").status_code == 200
    assert client.get("/api/v/v9.9.9/constraints?kind=x").status_code == 404


def test_backends(client: TestClient) -> None:
    backends = get(client, "/api/v/v0.3.0/backends")["backends"]
    assert [b["flag"] for b in backends] == [
        "--moe-runner-backend",
        "--moe-a2a-backend",
        "--fp4-gemm-backend",
    ]
    runner = backends[0]
    assert runner["enum"] == "MoeRunnerBackend"
    assert {v["value"]: v["sites"] for v in runner["values"]}["triton"] == 1
    value = get(client, "/api/v/v0.3.0/backends/--moe-runner-backend/flashinfer_cutlass")
    assert (value["flag"], value["value"]) == ("--moe-runner-backend", "flashinfer_cutlass")
    (site,) = value["sites"]
    assert site["attributed"] and site["path"] == RUNNER and "flashinfer_cutlass" in site["text"]
    check_citation(site, "v0.3.0")
    ambiguous = get(client, "/api/v/v0.3.0/backends/fp4_gemm_backend/auto")["sites"]
    assert [s["attributed"] for s in ambiguous] == [False]


def test_latest_redirects_to_the_concrete_version(client: TestClient) -> None:
    response = client.get("/latest/flags/--pp-size?x=1")
    assert response.status_code == 302
    assert response.headers["location"] == "/v/v0.3.0/flags/--pp-size?x=1"
    assert client.get("/latest").headers["location"] == "/v/v0.3.0/flags"
    api = client.get("/api/latest/flags")
    assert (api.status_code, api.headers["location"]) == (302, "/api/v/v0.3.0/flags")


def test_unknown_version_suggests(client: TestClient) -> None:
    body = get(client, "/api/v/v0.3/flags/--pp-size", 404)
    assert body["kind"] == "version"
    assert body["suggestions"][0] == {"name": "v0.3.0", "url": "/api/v/v0.3.0/flags/--pp-size"}


def test_unknown_flag_suggests_and_says_where_it_exists(client: TestClient) -> None:
    body = get(client, "/api/v/v0.3.0/flags/--moe-runer-backend", 404)
    assert body["kind"] == "flag"
    assert body["suggestions"][0]["name"] == "--moe-runner-backend"
    assert body["suggestions"][0]["url"] == "/api/v/v0.3.0/flags/--moe-runner-backend"
    gone = get(client, "/api/v/v0.3.0/flags/--old-cache", 404)
    # The JSON twin of the page there, as the suggestions are (the HTML page links the page).
    assert gone["elsewhere"] == [{"version": "v0.2.0", "url": "/api/v/v0.2.0/flags/--old-cache"}]
    assert get(client, gone["elsewhere"][0]["url"], 200)["name"] == "--old-cache"
    page = client.get("/v/v0.3.0/flags/--old-cache")
    assert page.status_code == 404 and 'href="/v/v0.2.0/flags/--old-cache"' in page.text
    future = get(client, "/api/v/v0.1.0/flags/fp4_gemm_backend", 404)
    assert [e["version"] for e in future["elsewhere"]] == ["v0.3.0"]


def test_unknown_value_and_path(client: TestClient) -> None:
    body = get(client, "/api/v/v0.3.0/backends/--moe-runner-backend/triton2", 404)
    assert (body["kind"], body["suggestions"][0]["name"]) == ("value", "triton")
    path = get(client, "/api/v/v0.3.0/source/python/sglang/srt/server_arg.py", 404)
    assert path["suggestions"][0]["name"] == ARGS
    assert path["suggestions"][0]["url"] == f"/api/v/v0.3.0/source/{ARGS}"


@pytest.mark.parametrize(
    "url",
    [
        "/api/v/v0.3.0/source/../../etc/passwd",
        "/api/v/v0.3.0/source/%2e%2e/%2e%2e/etc/passwd",
        "/api/v/v0.3.0/source//etc/passwd",
        "/api/v/v0.3.0/source/python/sglang/srt/server_args.py%00.txt",
        "/api/v/v0.3.0/flags/" + "x" * 5000,
        "/api/v/v0.3.0/flags/%00%ff%fe",
        "/api/v/v0.3.0/flags/%F0%9F%92%A5",
        "/api/v/v0.3.0/flags/----",
        "/api/v/v0.3.0/flags/%25_%25",
        "/api/v/" + "%2F" * 50 + "/flags",
        "/api/v/v0.3.0/backends/--moe-runner-backend/%00",
        "/api/v/v0.3.0/flags?q=" + "%" * 300,
        "/api/v/v0.3.0/constraints?kind=<script>&flag=%00",
        "/v/v0.3.0/flags/<script>alert(1)</script>",
        "/switch?to=%00&page=//evil.example/x",
    ],
)
def test_odd_input_is_never_a_500(client: TestClient, url: str) -> None:
    response = client.get(url)
    assert response.status_code in (200, 302, 400, 404), (url, response.status_code)
    if response.status_code == 404 and url.startswith("/api/"):
        assert "suggestions" in response.json()
    assert "<script>alert" not in response.text


def test_security_headers_everywhere(client: TestClient) -> None:
    for url in ["/", "/api/versions", "/static/style.css", "/nope", "/api/v/nope/flags"]:
        headers = client.get(url).headers
        csp = headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp, url
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"]


def test_switch_keeps_the_page_and_stays_on_site(client: TestClient) -> None:
    response = client.get("/switch?to=v0.1.0&page=flags/--pp-size")
    assert (response.status_code, response.headers["location"]) == (
        302,
        "/v/v0.1.0/flags/--pp-size",
    )
    # Only a path inside a version: anything else is a 400 naming the parameter, no redirect.
    for evil in ("//evil.example/x", "http://evil.example/", "../../flags", "/\\evil.example"):
        response = client.get("/switch", params={"to": "v0.1.0", "page": evil})
        assert response.status_code == 400, evil
        assert "location" not in response.headers


def test_kb_db_fixture_routes(request: pytest.FixtureRequest) -> None:
    """Every route over the lead's ingested fixture repos, when that fixture exists."""
    try:
        db = request.getfixturevalue("kb_db")
    except pytest.FixtureLookupError:
        pytest.skip("tests/conftest.py has no kb_db fixture yet")
    client = TestClient(create_app(f"sqlite:///{Path(db)}"), follow_redirects=False)
    versions = get(client, "/api/versions")["versions"]
    assert len(versions) >= 2
    for version in versions:
        name = version["name"]
        flags = get(client, f"/api/v/{name}/flags")["flags"]
        assert len(flags) == version["flags"] > 0
        for flag in flags:
            page = get(client, flag["url"].replace("/v/", "/api/v/", 1))
            assert page["name"] == flag["name"]
            check_citation(page["source"], name, version["commit"], SGLANG)
            assert client.get(flag["url"]).status_code == 200
            for value in (page["choices"] or [])[:3]:
                url = f"/api/v/{name}/backends/{flag['name']}/{value}"
                assert get(client, url)["value"] == str(value)
        for c in get(client, f"/api/v/{name}/constraints")["constraints"]:
            check_citation(c["source"], name, version["commit"], SGLANG)
            assert client.get(c["source"]["permalink"].split("#")[0]).status_code == 200
        get(client, f"/api/v/{name}/enums")
        assert client.get(f"/v/{name}/backends").status_code == 200


def test_history_follows_a_new_ingest(tmp_path: Path) -> None:
    """History is cached per state of the version table: a new version shows up at once."""
    from datetime import UTC, datetime

    from sqlmodel import Session

    from kb.schema import Flag, Version, make_engine

    db = build_kb(tmp_path / "kb.db")
    client = TestClient(create_app(f"sqlite:///{db}"))
    before = get(client, "/api/v/v0.3.0/flags/--pp-size")["history"]
    assert before[-1]["version"] == "v0.2.0"
    engine = make_engine(f"sqlite:///{db}")
    with Session(engine) as session:
        version = Version(
            name="v0.4.0",
            commit="f" * 40,
            date=datetime(2027, 1, 1, tzinfo=UTC),
            sort_key="v0.4.0",
            position=3,
            era=3,
            extractor_version=1,
            web_url=WEB_URL,
            ingested_at=datetime(2027, 1, 1, tzinfo=UTC),
        )
        session.add(version)
        session.flush()
        assert version.id is not None
        session.add(
            Flag(
                version_id=version.id,
                name="--pp-size",
                dest="pp_size",
                type="int",
                default="2",
                help="Pipeline parallel degree.",
                path=ARGS,
                line=1,
                end_line=1,
            )
        )
        session.commit()
    engine.dispose()
    after = get(client, "/api/v/v0.3.0/flags/--pp-size")["history"]
    assert after[-1]["version"] == "v0.4.0" and after[-1]["field"] in ("default", "help")
    assert any(h["field"] == "default" and h["to"] == 2 for h in after)


def test_kb_db_answers(request: pytest.FixtureRequest) -> None:
    """The dashboard's answers on the ingested three-era fixture: a raise site, an override,
    a choice handled by name, across eras."""
    try:
        db = request.getfixturevalue("kb_db")
    except pytest.FixtureLookupError:
        pytest.skip("tests/conftest.py has no kb_db fixture yet")
    client = TestClient(create_app(f"sqlite:///{Path(db)}"), follow_redirects=False)
    tbo = get(client, "/api/v/v0.2.0/flags/enable_two_batch_overlap")
    raises = [c for c in tbo["constraints"] if c["kind"] == "raise"]
    assert raises and "--moe-a2a-backend" in raises[0]["flags"]
    source = get(client, raises[0]["source"]["permalink"].split("#")[0].replace("/v/", "/api/v/"))
    assert "raise ValueError" in source["text"].split("\n")[raises[0]["source"]["line"] - 1]
    pp = get(client, "/api/v/v0.2.0/flags/--pp-size")
    assert any(
        c["kind"] == "override" and "--disable-overlap-schedule" in c["affects"]
        for c in pp["constraints"]
    )
    value = get(client, "/api/v/v0.2.0/backends/--moe-runner-backend/flashinfer_cutlass")
    assert value["sites"] and all(s["text"] for s in value["sites"])
    assert client.get("/latest/flags").headers["location"].startswith("/v/")
    assert get(client, "/api/v/v0.2/flags", 404)["suggestions"][0]["name"] == "v0.2.0"


def test_a_backend_page_missing_here_links_the_same_page_where_the_flag_is(
    client: TestClient,
) -> None:
    """From a compare page of a flag this version lacks, "it exists in" goes to the same
    comparison there (the values it has there), not to the flag page."""
    url = "/api/v/v0.1.0/backends/--fp4-gemm-backend/compare?values=auto,b"
    body = get(client, url, 404)
    assert [e["version"] for e in body["elsewhere"]] == ["v0.3.0"]
    assert body["elsewhere"][0]["url"] == (
        "/api/v/v0.3.0/backends/--fp4-gemm-backend/compare?values=auto"
    )
    page = client.get("/v/v0.1.0/backends/--fp4-gemm-backend/cutlass")
    assert page.status_code == 404
    assert 'href="/v/v0.3.0/backends/--fp4-gemm-backend/cutlass"' in page.text
