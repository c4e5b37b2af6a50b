"""The dashboard's answers on a knowledge base ingested from SGLang's real tagged history.

Opt-in: runs when FLAGATLAS_REAL_DB names a knowledge base (README: "Real-data checks"),
skipped otherwise (CI has no SGLang history).
Checks the facts the issues name at snapshot-2026-02-01, and that
every citation on those pages resolves to the cited text in the source view.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app

REAL_DB = Path(os.environ.get("FLAGATLAS_REAL_DB", ""))
VERSION = "snapshot-2026-02-01"

pytestmark = pytest.mark.skipif(
    not REAL_DB.is_file(), reason="FLAGATLAS_REAL_DB does not name a knowledge base"
)


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(f"sqlite:///{REAL_DB}"))


def flag(client: TestClient, name: str) -> dict[str, Any]:
    response = client.get(f"/api/v/{VERSION}/flags/{name}")
    assert response.status_code == 200, response.text[:300]
    assert client.get(f"/v/{VERSION}/flags/{name}").status_code == 200
    return dict(response.json())


def cited_lines(client: TestClient, cite: dict[str, Any]) -> str:
    source = client.get(f"/api/v/{VERSION}/source/{cite['path']}").json()
    lines = source["text"].split("\n")
    return "\n".join(lines[cite["line"] - 1 : cite["end_line"]])


def test_two_batch_overlap_raises_without_a2a_backend(client: TestClient) -> None:
    data = flag(client, "--enable-two-batch-overlap")
    (site,) = [
        c
        for c in data["constraints"]
        if c["kind"] == "raise" and "moe_a2a_backend" in c["condition"]
    ]
    assert "none" in site["condition"] and "--moe-a2a-backend" in site["flags"]
    assert "raise" in cited_lines(client, site["source"])
    commit = client.get(f"/api/v/{VERSION}").json()["commit"]
    assert f"/blob/{commit}/python/sglang/srt/server_args.py#L" in site["source"]["url"]


def test_nccl_nvls_is_read_in_the_engine(client: TestClient) -> None:
    usages = flag(client, "--enable-nccl-nvls")["usages"]
    engine = [u for u in usages if u["path"].endswith("entrypoints/engine.py")]
    assert engine
    for usage in engine:
        assert "enable_nccl_nvls" in cited_lines(client, usage)


def test_fp4_gemm_backend_enum_and_choices(client: TestClient) -> None:
    data = flag(client, "--fp4-gemm-backend")
    assert data["enum"]["name"] == "Fp4GemmRunnerBackend"
    assert set(data["choices"]) <= set(data["enum"]["values"])
    assert "class Fp4GemmRunnerBackend" in cited_lines(client, data["enum"]["source"])


def test_moe_runner_backend_choice_sites(client: TestClient) -> None:
    data = flag(client, "--moe-runner-backend")
    assert data["enum"]["name"] == "MoeRunnerBackend"
    for value in ("flashinfer_cutlass", "flashinfer_trtllm"):
        sites = client.get(f"/api/v/{VERSION}/backends/--moe-runner-backend/{value}").json()
        assert sites["sites"], value
        for site in sites["sites"]:
            assert site["attributed"] or "--moe-runner-backend" in site["candidates"]
            # A site cites the statement's first line; a list of values may run on.
            statement = cited_lines(client, {**site, "end_line": site["line"] + 8})
            assert value in statement.lower()


def test_pp_size_turns_off_overlap_schedule(client: TestClient) -> None:
    data = flag(client, "--pp-size")
    overrides = [
        c
        for c in data["constraints"]
        if c["kind"] == "override" and "--disable-overlap-schedule" in c["affects"]
    ]
    assert overrides and "pp_size > 1" in overrides[0]["condition"]


def test_constraints_filter_takes_any_name_of_a_flag(client: TestClient) -> None:
    def sites(name: str) -> list[tuple[str, int]]:
        response = client.get(f"/api/v/{VERSION}/constraints", params={"flag": name})
        assert response.status_code == 200
        return [(c["source"]["path"], c["source"]["line"]) for c in response.json()["constraints"]]

    canonical = sites("--pipeline-parallel-size")
    assert len(canonical) == 7
    for name in ("pp-size", "--pp-size", "pipeline-parallel-size", "pp_size"):
        assert sites(name) == canonical, name


def test_model_and_value_pages_follow_the_polarity_of_the_tests(client: TestClient) -> None:
    # v0.5.6's if/elif chain on model_arch: Qwen3Next's branch carries
    # not (model_arch in ['Qwen3MoeForCausalLM', ...]); it is not qwen3_moe's
    qwen3 = client.get("/api/v/v0.5.6/models/qwen3_moe").json()["constraints"]
    assert qwen3 and not [c for c in qwen3 if "Qwen3NextForCausalLM" in c["condition"]]
    gpt_oss = client.get("/api/v/v0.5.6/models/gpt_oss").json()["constraints"]
    assert gpt_oss  # (its own branch: 14 sites at v0.5.6)
    for c in gpt_oss:
        assert "model_arch in ['GptOssForCausalLM']" in c["conditions"], c["condition"]
    # `assert moe_runner_backend in ['flashinfer_cutlass']` under the flashinfer all-to-all
    url = f"/api/v/{VERSION}/backends/--moe-runner-backend/compare"
    body = client.get(url, params={"values": "flashinfer_cutlass,flashinfer_trtllm"}).json()

    def a2a(value: str) -> list[Any]:
        return [r for r in body["requirements"][value] if "moe_a2a_backend" in r["condition"]]

    assert a2a("flashinfer_cutlass") == []
    assert [r["excluding"] for r in a2a("flashinfer_trtllm")] == [["flashinfer_cutlass"]]


def test_an_open_registry_has_known_values_with_pages(client: TestClient) -> None:
    # From snapshot-2026-06-01 the flag has no choices (any registered name is taken): the
    # help's builtins and its enum's members but NONE are known values, each with a page.
    base = "/api/v/snapshot-2026-07-01"
    response = client.get(f"{base}/flags/--speculative-algorithm")
    if response.status_code != 200:
        pytest.skip("snapshot-2026-07-01 is not in this knowledge base")
    data = response.json()
    assert data["choices"] is None
    assert {"EAGLE", "EAGLE3", "NEXTN", "NGRAM", "STANDALONE"} <= set(data["known_values"])
    assert "NONE" not in data["known_values"] and data["enum"]["name"] == "SpeculativeAlgorithm"
    response = client.get(f"{base}/backends/--speculative-algorithm/EAGLE")
    assert response.status_code == 200
    assert {"compare", "is_call"} <= {s["how"] for s in response.json()["sites"]}


def test_enums_named_after_a_flag_give_its_known_values(client: TestClient) -> None:
    # --model-impl: a str enum whose values hold the default; --eplb-algorithm: an enum its
    # file looks up by name unless the flag holds "auto"
    impl = flag(client, "--model-impl")
    assert impl["choices"] is None and impl["enum"]["name"] == "ModelImpl"
    assert impl["known_values"] == ["auto", "sglang", "transformers", "mindspore"]
    eplb = flag(client, "--eplb-algorithm")
    assert eplb["enum"]["name"] == "EplbAlgorithm"
    assert eplb["known_values"][:3] == ["auto", "deepseek", "deepseek_hierarchical"]
    sites = client.get(f"/api/v/{VERSION}/backends/--model-impl/transformers").json()["sites"]
    assert {"enum"} <= {s["how"] for s in sites}
    assert all(s["flag"] == "--model-impl" for s in sites)


def test_a_site_whose_expression_starts_above_cites_every_line_it_shows(
    client: TestClient,
) -> None:
    # `or server_args.attention_backend` / `not in CHUNKED_..._BACKENDS` in model_runner.py:
    # the row is at the operator's line, its text and citation start on the line above
    sites = client.get(f"/api/v/{VERSION}/backends/--attention-backend/fa3").json()["sites"]
    spanned = [s for s in sites if s["end_line"] > s["line"]]
    assert any(s["path"].endswith("model_executor/model_runner.py") for s in spanned)
    for site in sites:
        shown = " ".join(line.strip() for line in cited_lines(client, site).split("\n"))
        assert shown[:240] == site["text"], site
    # the source view marks it over the same span
    site = spanned[0]
    marks = client.get(f"/api/v/{VERSION}/source/{site['path']}").json()["marks"]
    assert any(
        (m["what"], m["line"], m["end_line"]) == ("choice", site["line"], site["end_line"])
        for m in marks
    )
