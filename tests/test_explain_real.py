"""Explain on a knowledge base ingested from SGLang's real tagged history.

Opt-in: runs when FLAGATLAS_REAL_DB names a knowledge base (README: "Real-data checks"),
skipped otherwise (CI has no SGLang history).
Checks the answers issue 5 names at snapshot-2026-02-01, an upgrade
check v0.4.0 -> v0.5.6, and that commands shaped like those in public SGLang issues
(abbreviations, shell variables, quoted JSON, continuations) parse without spurious errors.
The commands are written here for the test; none is copied from SGLang.
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


def explain(client: TestClient, command: str, **extra: str) -> dict[str, Any]:
    response = client.post("/api/explain", json={"version": VERSION, "command": command, **extra})
    assert response.status_code == 200, response.text[:300]
    return dict(response.json())


def messages(result: dict[str, Any], severity: str | None = None) -> list[str]:
    return [f["message"] for f in result["findings"] if severity in (None, f["severity"])]


def test_two_batch_overlap_raises_about_the_a2a_backend(client: TestClient) -> None:
    result = explain(
        client, "python -m sglang.launch_server --model-path m --enable-two-batch-overlap"
    )
    raises = [m for m in messages(result, "error") if m.startswith("raises at server_args.py:")]
    assert raises and "moe_a2a_backend" in raises[0]
    fixed = explain(client, "--model-path m --enable-two-batch-overlap --moe-a2a-backend deepep")
    assert not any("moe_a2a_backend cannot be" in m for m in messages(fixed))


def test_pp_size_overrides_the_overlap_schedule(client: TestClient) -> None:
    result = explain(client, "--model-path m --pp-size 2")
    assert any(
        m.startswith("overrides --disable-overlap-schedule to True at server_args.py:")
        for m in messages(result, "warning")
    )
    assert result["errors"] == 0  # the assert on pp_size holds once the override applied


def test_misspelled_runner_backend_suggests_the_right_one(client: TestClient) -> None:
    result = explain(client, "--model-path m --moe-runner-backend flashinfer_cutlas")
    finding = next(f for f in result["findings"] if f["kind"] == "invalid_choice")
    assert finding["severity"] == "error"
    assert finding["suggestions"] == ["flashinfer_cutlass"]


def test_upgrade_check_lists_removed_flags(client: TestClient) -> None:
    command = (
        "python3 -m sglang.launch_server --model-path org/model --tp 4 \\\n"
        "  --enable-overlap-schedule --disable-disk-cache --port 30000"
    )
    response = client.post(
        "/api/explain", json={"version": "v0.4.0", "command": command, "compare": "v0.5.6"}
    )
    removed = {r["flag"] for r in response.json()["compare"]["removed"]}
    assert removed == {"--enable-overlap-schedule", "--disable-disk-cache"}


@pytest.mark.parametrize(
    "command",
    [
        "MODEL=x CUDA_VISIBLE_DEVICES=0,1 python3 -m sglang.launch_server \\\n"
        "  --model $MODEL --tp ${TP} --mem-fraction 0.8 \\\n"
        "  --speculative-algo EAGLE3 --speculative-draft-model-path org/draft \\\n"
        "  --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4",
        "python3 -m sglang.launch_server --model-path org/model --context-length 65536 "
        """--json-model-override-args '{"rope_scaling": {"rope_type": "yarn", "factor": 2.0}}'""",
        'bash -c "python3 -m sglang.launch_server --model-path org/model \\\n'
        '  --tp 16 --dist-init-addr $(hostname):5000 --nnodes 2 --node-rank 1" 2>&1 | tee log',
        "entrypoint: python3 -m sglang.launch_server\ncommand:\n  --model-path org/model\n"
        "  --tp 8\n  --host 0.0.0.0",
    ],
)
def test_commands_from_the_wild_parse_without_errors(client: TestClient, command: str) -> None:
    result = explain(client, command)
    assert result["errors"] == 0, messages(result, "error")
    assert result["valid_in"], "some ingested version accepts every flag"
