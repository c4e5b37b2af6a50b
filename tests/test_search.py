"""Search index and ranking on a small hand-written knowledge base (synthetic texts)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from planted_kb import SEARCH_NEW as NEW
from planted_kb import SEARCH_OLD as OLD
from planted_kb import build_kb, flag
from sqlmodel import Session

from kb.schema import Flag, make_engine
from kb.search import SearchIndex, UnknownVersion, default_index_dir, highlight
from kb.search_build import build_index, normalize


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("search") / "kb.db"
    url = build_kb(path, [("s1", OLD), ("s2", NEW)])
    build_index(url, default_index_dir(url))
    return url


@pytest.fixture(scope="module")
def index(kb: str) -> SearchIndex:
    return SearchIndex(Path(kb.removeprefix("sqlite:///") + ".search"), kb)


def top(index: SearchIndex, q: str, **kw: Any) -> dict[str, Any]:
    results = index.search(q, **kw)["results"]
    assert results, f"no result for {q!r}"
    return results[0]


@pytest.mark.parametrize(
    "q", ["--enable-nccl-nvls", "enable_nccl_nvls", "ENABLE-NCCL-NVLS", " enable nccl nvls "]
)
def test_exact_name_in_any_spelling(index: SearchIndex, q: str) -> None:
    hit = top(index, q)
    assert (hit["name"], hit["match"], hit["kind"]) == ("--enable-nccl-nvls", "exact", "flag")
    assert hit["url"] == "/v/s2/flags/--enable-nccl-nvls"


@pytest.mark.parametrize(
    ("q", "name", "match"),
    [
        ("nvls", "--enable-nccl-nvls", "words"),
        ("two batch overlap", "--enable-two-batch-overlap", "words"),
        ("moe runnr backend", "--moe-runner-backend", "fuzzy"),  # a typo
        ("fp4 gemm", "--fp4-gemm-backend", "prefix"),
        ("--tp", "--tp-size", "alias"),
        ("chunked", "--chunked-prefill-size", "prefix"),
        ("multicast collective", "--enable-nccl-nvls", "text"),
        ("fp9 kv store", "--kv-store-dtype", "text"),  # its name, and "fp9" of "fp9_e4m3"
    ],
)
def test_people_queries(index: SearchIndex, q: str, name: str, match: str) -> None:
    hit = top(index, q)
    assert (hit["name"], hit["match"]) == (name, match)


def test_ranking_tiers(index: SearchIndex) -> None:
    # Exact dest, before flags that only start with it.
    names = [r["name"] for r in index.search("tp_size")["results"]]
    assert names[0] == "--tp-size"
    # Prefix matches come before text matches: "moe" starts two flag names.
    results = index.search("moe")["results"]
    assert {r["name"] for r in results[:2]} == {"--moe-runner-backend", "--moe-a2a-backend"}
    assert [r["match"] for r in results[:2]] == ["prefix", "prefix"]
    # The single-batch flag shares two words but not "two": it ranks after.
    names = [r["name"] for r in index.search("two batch overlap")["results"]]
    assert names.index("--enable-two-batch-overlap") < names.index("--enable-single-batch-overlap")


def test_choice_values_and_enum_members(index: SearchIndex) -> None:
    results = index.search("flashinfer_cutlass")["results"]
    hit = results[0]
    assert (hit["kind"], hit["name"], hit["flag"]) == (
        "choice",
        "flashinfer_cutlass",
        "--moe-runner-backend",
    )
    assert hit["url"] == "/v/s2/backends/--moe-runner-backend/flashinfer_cutlass"
    kinds = {r["kind"]: r for r in results}
    assert kinds["member"]["name"] == "MoeRunnerBackend.FLASHINFER_CUTLASS"
    assert kinds["member"]["url"] == "/v/s2/enums#enum-MoeRunnerBackend"


def test_constraint_messages_are_searchable(index: SearchIndex) -> None:
    results = index.search("all-to-all backend needs")["results"]
    hit = next(r for r in results if r["kind"] == "constraint")
    assert hit["flag"] == "--enable-two-batch-overlap"
    assert hit["url"] == "/v/s2/source/pkg/server_args.py#L40-L41"


def test_version_scope(index: SearchIndex) -> None:
    assert not any(r["name"] == "--legacy-knob" for r in index.search("legacy")["results"])
    hit = top(index, "legacy", version="s1")
    assert (hit["name"], hit["version"], hit["url"]) == (
        "--legacy-knob",
        "s1",
        "/v/s1/flags/--legacy-knob",
    )
    assert top(index, "flashinfer_trtllm")["version"] == "s2"
    old = index.search("flashinfer_trtllm", version="s1")["results"]
    assert "flashinfer_trtllm" not in {r["name"] for r in old}
    with pytest.raises(UnknownVersion):
        index.search("nvls", version="s9")


def test_all_versions_groups_hits_by_flag(index: SearchIndex) -> None:
    out = index.search("moe runner backend", version="all")
    runner = [r for r in out["results"] if r["name"] == "--moe-runner-backend"]
    # Two distinct facts (the choices changed) come back as one hit spanning both versions.
    assert len(runner) == 1
    assert runner[0]["versions"] == [{"from": "s1", "to": "s2"}]
    assert runner[0]["version"] == "s2"
    legacy = top(index, "legacy knob", version="all")
    assert (legacy["version"], legacy["versions"]) == ("s1", [{"from": "s1", "to": "s1"}])


@pytest.mark.parametrize(
    "q",
    ['"(*:', "", "   ", "*", "?", "AND OR NOT", "name:value", "a" * 10_000, "--", "ü€𝔘\x00"],
)
def test_junk_never_fails(index: SearchIndex, q: str) -> None:
    out = index.search(q)
    assert isinstance(out["results"], list)
    if not out["results"]:
        assert out["message"]


def test_empty_query_says_what_to_type(index: SearchIndex) -> None:
    out = index.search("")
    assert out["results"] == [] and "Type" in out["message"]


def test_rebuild_swaps_and_running_index_sees_it(kb: str, tmp_path: Path) -> None:
    url = build_kb(tmp_path / "kb.db", [("s1", OLD)])
    link = tmp_path / "idx"
    build_index(url, link)
    idx = SearchIndex(link)
    assert not idx.search("brand new")["results"]
    first = os.path.realpath(link)
    engine = make_engine(url)
    with Session(engine) as session:
        session.add(Flag(version_id=1, **flag("--brand-new-flag")))
        session.commit()
    engine.dispose()
    info = build_index(url, link)
    assert info["docs"] > 0 and link.is_symlink()
    assert os.path.realpath(link) != first
    assert top(idx, "brand new")["name"] == "--brand-new-flag"  # same object, new index
    # The previous build stays for searchers still reading it; older ones go.
    build_index(url, link)
    assert len(list((tmp_path / "idx.d").iterdir())) == 2


def test_missing_index_is_built_on_first_use(tmp_path: Path) -> None:
    url = build_kb(tmp_path / "kb.db", [("s1", OLD)])
    idx = SearchIndex(tmp_path / "kb.db.search", url)
    assert top(idx, "nvls")["name"] == "--enable-nccl-nvls"


def test_normalize_and_highlight() -> None:
    assert normalize("--Enable-NCCL nvls") == normalize("enable_nccl_nvls") == "enable_nccl_nvls"
    assert highlight("Use NVLS for prefill", ["nvls"]) == [
        ("Use ", False),
        ("NVLS", True),
        (" for prefill", False),
    ]
    assert highlight("<b>", ["x"]) == [("<b>", False)]


# --- pages and API --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(kb: str) -> Any:
    from fastapi.testclient import TestClient

    from app.main import create_app

    return TestClient(create_app(kb))


def test_api_search_contract(client: Any) -> None:
    body = client.get("/api/search", params={"q": "moe runnr backend"}).json()
    assert body["version"] == "s2"
    first = body["results"][0]
    assert {"kind", "name", "version", "url", "snippet"} <= set(first)
    assert (first["name"], first["url"]) == (
        "--moe-runner-backend",
        "/v/s2/flags/--moe-runner-backend",
    )
    everywhere = client.get("/api/search", params={"q": "legacy", "version": "all"}).json()
    assert everywhere["results"][0]["versions"] == [{"from": "s1", "to": "s1"}]


@pytest.mark.parametrize("q", ['"(*:', "", "x" * 5000, "%%%", "<script>alert(1)</script>"])
def test_junk_through_http(client: Any, q: str) -> None:
    api = client.get("/api/search", params={"q": q})
    assert api.status_code == 200 and isinstance(api.json()["results"], list)
    page = client.get("/search", params={"q": q})
    assert page.status_code == 200
    assert "<script>alert" not in page.text  # autoescaped


def test_unknown_version_is_a_404_with_suggestions(client: Any) -> None:
    r = client.get("/api/search", params={"q": "nvls", "version": "s3"})
    assert r.status_code == 404
    assert [s["name"] for s in r.json()["suggestions"]][:2] == ["s2", "s1"]
    assert client.get("/search", params={"q": "nvls", "version": "s3"}).status_code == 404


def test_page_groups_by_kind_and_marks_matches(client: Any) -> None:
    html = client.get("/search", params={"q": "flashinfer_cutlass"}).text
    assert html.index(">Values<") < html.index(">Enum members<")
    assert "<mark>flashinfer_cutlass</mark>" in html
    assert html.count("data-top-hit") == 1


def test_dropdown_fragment_for_the_header_box(client: Any) -> None:
    headers = {"HX-Request": "true", "HX-Target": "search-results"}
    r = client.get("/search", params={"q": "nvls", "version": "s1"}, headers=headers)
    assert r.status_code == 200
    assert "<html" not in r.text and 'data-q="nvls"' in r.text
    assert 'href="/v/s1/flags/--enable-nccl-nvls" data-top-hit' in r.text
    assert "/search?q=nvls&amp;version=s1" in r.text  # the "all results" link keeps the scope
    # An htmx request from elsewhere (not the dropdown) still gets the whole page.
    full = client.get("/search", params={"q": "nvls"}, headers={"HX-Request": "true"})
    assert "<html" in full.text


# --- the knowledge base ingested from the synthetic three-era repository -----------------


@pytest.fixture(scope="module")
def ingested(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    try:
        db = request.getfixturevalue("kb_db")
    except pytest.FixtureLookupError:
        pytest.skip("tests/conftest.py has no kb_db fixture")
    url = f"sqlite:///{db}"
    link = tmp_path_factory.mktemp("ingested") / "index"
    build_index(url, link)
    return SearchIndex(link)


def test_ingested_kb_answers_people_queries(ingested: SearchIndex) -> None:
    # A typo; the deprecated --moe-backend (same dest) must not come first.
    hit = top(ingested, "moe runnr backend")
    assert (hit["name"], hit["match"]) == ("--moe-runner-backend", "fuzzy")
    assert top(ingested, "--tp", version="v0.3.0")["name"] == "--tp-size"
    assert top(ingested, "two batch overlap", version="v0.2.0")["name"] == (
        "--enable-two-batch-overlap"
    )
    assert top(ingested, "fp4 gemm", version="v0.2.0")["name"] == "--fp4-gemm-backend"
    hit = top(ingested, "flashinfer_cutlass", version="v0.2.0")
    assert (hit["kind"], hit["match"]) == ("choice", "exact")
    # Era 1 spelled it --tensor-parallel-size; across all versions both are found.
    names = {r["name"] for r in ingested.search("tensor parallel", version="all")["results"]}
    assert {"--tensor-parallel-size", "--tp-size"} <= names


@pytest.mark.parametrize(
    "text",
    [
        "Enable the NCCL NVLS for prefill-heavy requests when available.",
        "fp8_e4m3 and fp8_e5m2 caches; v1.2 of the API (is an a the OR)",
        "Größe der Straße, 中文 words, x y z, running runs ran, __dunder__",
        "",
    ],
)
def test_words_indexes_the_tokens_of_the_stemming_chain(text: str) -> None:
    """The index build's one-pass tokens are the chain's (queries go through the chain)."""
    from kb.search_build import Words

    words = Words()
    chain = [(t.text, t.boost) for t in words.chain(text, mode="index", boosts=True)]
    fast = [(t.text, t.boost) for t in words(text, mode="index", boosts=True)]
    assert fast == chain
    assert [t.text for t in words(text, mode="query")] == [
        t.text for t in words.chain(text, mode="query")
    ]
