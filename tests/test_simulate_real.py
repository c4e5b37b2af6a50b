"""Explain with a deployment profile on a knowledge base ingested from SGLang's real tagged
history: the answers issue 10 asks for at snapshot-2026-02-01 and the upgrade check to
snapshot-2026-07-01. Opt-in through FLAGATLAS_REAL_DB (skipped without it); the knowledge
base must come from extractor version 8 or later (it cites the files the simulation reads).
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
SEED = (
    "--model-path m --tp 4 --pp-size 2 --moe-runner-backend flashinfer_cutlass "
    "--enable-two-batch-overlap --enable-nccl-nvls"
)
GLM = {"arch": "Glm4MoeForCausalLM", "quant": "modelopt_fp4", "platform": "cuda", "gpus": 8}

pytestmark = pytest.mark.skipif(
    not REAL_DB.is_file(), reason="FLAGATLAS_REAL_DB does not name a knowledge base"
)


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(f"sqlite:///{REAL_DB}"))


def explain(client: TestClient, command: str, **extra: Any) -> dict[str, Any]:
    body = {"version": VERSION, "command": command, **extra}
    response = client.post("/api/explain", json=body)
    assert response.status_code == 200, response.text[:300]
    return dict(response.json())


def changed(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["field"]: e for e in result["effective"] if e["certain"]}


def test_glm_fp4_on_blackwell(client: TestClient) -> None:
    result = explain(client, "--model-path m --tp 8", profile={**GLM, "sm": 100})
    rows = changed(result)
    assert (rows["quantization"]["from"], rows["quantization"]["to"]) == (None, "modelopt_fp4")
    moe = rows["moe_runner_backend"]
    assert (moe["from"], moe["to"]) == ("auto", "flashinfer_trtllm")
    assert "Glm4MoeForCausalLM" in moe["condition"] and "is_sm100_supported()" in moe["condition"]
    assert rows["disable_shared_experts_fusion"]["to"] is True
    assert rows["attention_backend"]["to"] == "trtllm_mha"
    for field in ("quantization", "moe_runner_backend", "attention_backend"):
        assert rows[field]["source"]["path"] == "python/sglang/srt/server_args.py"
    hopper = changed(explain(client, "--model-path m --tp 8", profile={**GLM, "sm": 90}))
    assert "moe_runner_backend" not in hopper and "quantization" not in hopper
    assert "disable_shared_experts_fusion" not in hopper


def test_the_seed_command_with_its_profile(client: TestClient) -> None:
    result = explain(client, SEED, profile={**GLM, "sm": 100})
    error = next(f for f in result["findings"] if f["severity"] == "error")
    assert "two batch overlap" in error["message"]
    # the smallest change first (drop the switch), then an a2a backend, each verified
    assert error["fix"]["verified"] and error["fix"]["remove"] == ["--enable-two-batch-overlap"]
    assert error["alternatives"][0]["add"][0] == "--moe-a2a-backend deepep"
    undecidable = [f for f in result["findings"] if f["kind"] == "undecidable"]
    assert len(undecidable) <= 2
    assert all(f["needs"] for f in undecidable)


def test_deepseek_fp8_on_blackwell(client: TestClient) -> None:
    profile = {"arch": "DeepseekV3ForCausalLM", "quant": "fp8", "sm": 100, "gpus": 8}
    rows = changed(explain(client, "--model-path m --tp 8", profile=profile))
    moe = rows["moe_runner_backend"]
    assert moe["to"] == "flashinfer_trtllm" and abs(moe["source"]["line"] - 1294) < 40
    assert rows["quantization"]["to"] == "fp8"


def test_mixed_chunk_with_pipeline_parallelism_across_the_upgrade(client: TestClient) -> None:
    assert explain(client, "--model-path m --pp-size 2")["errors"] == 0
    result = explain(
        client, "--model-path m --pp-size 2 --enable-mixed-chunk", compare="snapshot-2026-07-01"
    )
    error = next(f for f in result["findings"] if f["severity"] == "error")
    assert error["message"].startswith("assertion fails at server_args.py:")
    cmp = result["compare"]
    assert cmp["errors"] == 0
    assert any(f["key"] == error["key"] for f in cmp["constraints_stopped"])
    assert cmp["changed_meaning"] == []


def test_no_false_dflash_error_after_the_upgrade(client: TestClient) -> None:
    result = explain(client, SEED, compare="snapshot-2026-07-01")
    started = [f["message"] for f in result["compare"]["constraints_started"]]
    assert not any("DFLASH" in m for m in started)
