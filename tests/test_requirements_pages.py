"""Requirements in a sentence on the value and compare pages, each value's requirements in
short, and the flag page and compare page reading one list of reads through a chain
(issue 30), on a synthetic repository (tests/requirements_repo.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from kb.requirements import MAX_STATEMENT
from tests.conftest import api_json, ingest_into
from tests.requirements_repo import FP4_LINEAR, build_requirements_repo

COMPARE = "/v/v1.0.0/backends/--moe-runner-backend/compare?values=fast_cutlass,fast_trt"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    root = tmp_path_factory.mktemp("requirements")
    ingest_into(build_requirements_repo(root), root / "kb.db", jobs=1)
    return TestClient(create_app(f"sqlite:///{root / 'kb.db'}"))


def api(client: TestClient, url: str) -> dict[str, Any]:
    return api_json(client, url)


def test_compare_statements_are_short_sentences_of_the_structure(client: TestClient) -> None:
    data = api(client, COMPARE)
    said = {v: [c["statement"] for c in data["requirements"][v]] for v in data["values"]}
    assert said["fast_cutlass"] == [
        "Requires --ep-size ∈ {1, --tp-size} when model_arch ≠ AlphaForCausalLM, "
        "unless model_arch contains Llama9 and --device ≠ cpu",
        "Requires --quantization ∈ {fp4, fp8, unset}",
    ]
    assert said["fast_trt"] == [
        "Requires is_sm100_supported()",
        "Requires --moe-a2a-backend ≠ fused",
    ]
    for statements in said.values():
        assert all(len(s) <= MAX_STATEMENT and "not (not" not in s for s in statements)
    # the whole condition stays one click away
    first = data["requirements"]["fast_cutlass"][0]
    assert first["full_condition"].startswith("Fails when not (model_arch in ['AlphaForCausalLM'])")


def test_each_value_has_its_requirements_in_short(client: TestClient) -> None:
    cutlass = api(client, "/v/v1.0.0/backends/--moe-runner-backend/fast_cutlass")
    summary = cutlass["requirement_summary"]
    assert summary["quantization"] == ["--quantization ∈ {fp4, fp8, unset}"]
    assert summary["gpu"] == [] and summary["load_time"] == []
    assert summary["conditional"] == 1  # the ep-size check runs only outside the elif chain
    trt = api(client, COMPARE)["requirement_summaries"]["fast_trt"]
    assert trt["gpu"] == ["is_sm100_supported()"]
    assert trt["flags"] == ["--moe-a2a-backend ≠ fused"]


def test_the_summary_and_the_full_condition_are_on_the_pages(client: TestClient) -> None:
    html = client.get("/v/v1.0.0/backends/--moe-runner-backend/fast_trt").text
    assert 'id="requirement-summary"' in html and "<dt>GPU</dt>" in html
    assert "<code>is_sm100_supported()</code>" in html
    assert '<details class="full-condition"><summary>Full condition</summary>' in html
    html = client.get(COMPARE).text
    row = html[html.index('<tr class="req-summary-row">') : html.index('<tr class="enum">')]
    assert "<dt>Quantization</dt>" in row and "<dt>GPU</dt>" in row
    assert 'href="#requires-1"' in row and 'id="requires-1"' in html


def test_the_flag_page_and_the_compare_page_read_one_list_through_a_chain(
    client: TestClient,
) -> None:
    flag = api(client, "/v/v1.0.0/flags/--fp4-gemm-backend")
    chain = {(u["path"], u["line"]): u["via"] for u in flag["indirect_usages"]}
    # read into a local a deprecated variable may override, then a global, then a getter
    assert (FP4_LINEAR, 15) in chain
    assert chain[(FP4_LINEAR, 15)] == ["FP4_GEMM_RUNNER_BACKEND", "get_fp4_gemm_runner_backend()"]
    data = api(client, "/v/v1.0.0/backends/--fp4-gemm-backend/compare?values=auto,fast_cudnn")
    assert data["chain_reads"] == len(chain)
    assert data["chain_url"] == "/v/v1.0.0/flags/--fp4-gemm-backend#indirect"
    shown = {
        (row["path"], int(line)): via for row in data["rows"] for line, via in row["via"].items()
    }
    assert shown == {(FP4_LINEAR, 15): chain[(FP4_LINEAR, 15)]}
    html = client.get("/v/v1.0.0/backends/--fp4-gemm-backend/compare?values=auto,fast_cudnn")
    assert "read through a chain in 2 places" in html.text


def test_a_local_reassigned_from_another_flag_carries_neither(tmp_path: Path) -> None:
    from ingest.carriers import find_carriers

    text = (
        "def init(server_args):\n"
        "    global G\n"
        "    backend = server_args.fp4_gemm_runner_backend\n"
        "    if server_args.other:\n"
        "        backend = server_args.other\n"
        "    G = Kind(backend)\n"
    )
    assert find_carriers(text, {3, 5}) == []
    one = text.replace("backend = server_args.other", "backend = fallback()")
    assert [c["name"] for c in find_carriers(one, {3})] == ["G"]


def test_a_help_text_a_handled_value_contradicts_is_flagged_with_both_citations(
    client: TestClient,
) -> None:
    flag = api(client, "/v/v1.0.0/flags/--fp4-gemm-backend")
    [found] = flag["help_contradictions"]
    assert (found["value"], found["maps_to"], found["choice"]) == (
        "auto",
        "cutlass",
        "fast_cutlass",
    )
    assert found["help_says"].startswith("default, selects between fast_cudnn/fast_cutlass")
    assert found["help"] == flag["source"]
    assert (found["code"]["path"], found["code"]["line"]) == (FP4_LINEAR, 7)
    assert found["code"]["end_line"] == 9
    html = client.get("/v/v1.0.0/flags/--fp4-gemm-backend").text
    assert "help vs code" in html and f"/v/v1.0.0/source/{FP4_LINEAR}#L7-L9" in html
    # a flag whose help claims nothing has none
    assert api(client, "/v/v1.0.0/flags/--moe-runner-backend")["help_contradictions"] == []
