"""A flag's models grouped by the entry point they reach it through: the shared code (a
function, a class) whose use in a model's own code, or in a model class it derives from or
holds, reaches the flag's reads (synthetic repo: tests/entry_fixtures.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from kb.schema import chain_entry
from tests.conftest import ingest_into
from tests.entry_fixtures import FLAG, FORWARD, HELPER, HELPER_ONLY, RUNS_FORWARD, build_entry_repo


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    root = tmp_path_factory.mktemp("entries")
    db = root / "kb.db"
    ingest_into(build_entry_repo(root), db, jobs=1)
    return TestClient(create_app(f"sqlite:///{db}"), follow_redirects=False)


def flag_page(client: TestClient) -> dict[str, Any]:
    response = client.get(f"/api/v/v0.5.0/flags/{FLAG}")
    assert response.status_code == 200, response.text[:500]
    return response.json()


def test_models_are_grouped_by_the_entry_point_they_reach_the_flag_through(
    client: TestClient,
) -> None:
    groups = {g["entry"]: g for g in flag_page(client)["model_groups"]}
    assert set(groups) == {FORWARD, HELPER}
    # the function named for the feature: exactly the models whose forward runs it (alpha
    # calls it, beta's model derives from alpha's, gamma holds alpha's causal LM) ...
    assert groups[FORWARD]["models"] == RUNS_FORWARD
    assert groups[FORWARD]["by_name"] and not groups[HELPER]["by_name"]
    # ... and the shared layer helper: every model building its decoder layers
    assert groups[HELPER]["models"] == sorted(RUNS_FORWARD + HELPER_ONLY)
    # the feature's own entry point first
    assert [g["entry"] for g in flag_page(client)["model_groups"]] == [FORWARD, HELPER]


def test_each_model_shows_every_entry_point_with_its_chain(client: TestClient) -> None:
    models = {m["name"]: m for m in flag_page(client)["models"]}
    assert sorted(models) == sorted(RUNS_FORWARD + HELPER_ONLY)
    entries = {name: [e["entry"] for e in m["entries"]] for name, m in models.items()}
    for name in RUNS_FORWARD:
        assert entries[name] == [FORWARD, HELPER], name
    for name in HELPER_ONLY:
        assert entries[name] == [HELPER], name
    forward = ["IS_QBO_ENABLED", "is_qbo_enabled()", FORWARD]
    by_entry = {e["entry"]: e for e in models["beta"]["entries"]}
    # through the class beta's model derives from, cited on its `class` line
    assert by_entry[FORWARD]["via"] == [*forward, "AlphaModel"]
    assert by_entry[FORWARD]["site"]["line"] == 4 and not by_entry[FORWARD]["direct"]
    gamma = {e["entry"]: e["via"] for e in models["gamma"]["entries"]}
    assert gamma[FORWARD] == [
        *forward,
        "self.model = AlphaModel(…)",
        "self.language_model = AlphaForCausalLM(…)",
    ]
    assert gamma[HELPER][-1] == "self.language_model = AlphaForCausalLM(…)"
    # alpha calls both itself: each cited where it does
    alpha = {e["entry"]: e for e in models["alpha"]["entries"]}
    assert alpha[FORWARD]["via"] == forward
    assert alpha[HELPER]["via"][-1] == "LayerScatterModes.init_new()"
    assert alpha[FORWARD]["site"]["line"] != alpha[HELPER]["site"]["line"]
    # the model's first entry is still its `via` (the JSON's existing fields)
    assert models["alpha"]["via"] == forward


def test_entry_of_a_stored_chain() -> None:
    forward = ["IS_TBO_ENABLED", "is_tbo_enabled()", {"name": FORWARD, "by_name": True}]
    assert chain_entry(forward) == (FORWARD, True)
    held = [*forward, {"name": "self.model = DeepseekV2Model(…)", "model": True}]
    assert chain_entry(held) == (FORWARD, True)
    helper = ["LayerScatterModes._should_gather_for_tbo()", "LayerScatterModes.init_new()"]
    assert chain_entry([*helper, {"name": "DeepseekV2Model", "model": True}]) == (
        HELPER,
        False,
    )
    assert chain_entry(["IS_TBO_ENABLED", "is_tbo_enabled()"]) == ("is_tbo_enabled", False)
    # a model file's own carrier: no shared code
    assert chain_entry([{"name": "Glm4MoeModel._use_x()", "model": True}]) == ("", False)
    assert chain_entry([]) == ("", False)


def test_the_reads_past_the_first_hop_cite_a_line_once(client: TestClient) -> None:
    """gamma's `self.language_model = AlphaForCausalLM(...)` reaches the flag through both
    entry points: its model lists both, the flag's uses past the first read cite the line
    once, through the shortest chain."""
    page = flag_page(client)
    lines = [(u["path"], u["line"]) for u in page["indirect_usages"]]
    assert len(lines) == len(set(lines))
    gamma = [u for u in page["indirect_usages"] if u["path"].endswith("/gamma.py")]
    entries = {m["name"]: m["entries"] for m in page["models"]}["gamma"]
    assert len(gamma) == 1 and len(entries) == 2
    assert gamma[0]["via"] == min((e["via"] for e in entries), key=len)


# Read by hand in SGLang's source at snapshot-2026-02-01: the model files whose forward runs
# model_forward_maybe_tbo. deepseek_v2, glm4_moe, minimax_m2 and qwen2_moe call it in their
# model's forward; glm4_moe_lite, mistral_large_3(_eagle) and qwen3_moe derive from such a
# model (MistralLarge3Model's forward calls super().forward()); the others hold one
# (`self.language_model = DeepseekV2ForCausalLM(...)`). deepseek_nextn, bailing_moe_nextn
# and the rest build decoder layers only: LayerScatterModes reads the flag there.
TBO_FORWARD = [
    "deepseek_ocr", "deepseek_v2", "deepseek_vl2", "dots_vlm", "glm4_moe", "glm4_moe_lite",
    "glm4v_moe", "interns1", "internvl", "kimi_k25", "kimi_vl", "minimax_m2", "mistral_large_3",
    "mistral_large_3_eagle", "pixtral", "qwen2_moe", "qwen3_moe",
]  # fmt: skip
TBO_SHARED_ONLY = [
    "bailing_moe", "bailing_moe_nextn", "deepseek_nextn", "llada2", "llama4", "mimo_v2_flash",
    "mllama4", "step3_vl",
]  # fmt: skip
REAL_DB = Path(os.environ.get("FLAGATLAS_REAL_DB", ""))


@pytest.mark.skipif(not REAL_DB.is_file(), reason="FLAGATLAS_REAL_DB names no knowledge base")
def test_real_tbo_groups_separate_the_models_running_the_overlap_forward() -> None:
    client = TestClient(create_app(f"sqlite:///{REAL_DB}"))
    page = client.get("/api/v/snapshot-2026-02-01/flags/--enable-two-batch-overlap").json()
    groups = {g["entry"]: g["models"] for g in page["model_groups"]}
    assert page["model_groups"][0]["entry"] == "model_forward_maybe_tbo"
    assert groups["model_forward_maybe_tbo"] == TBO_FORWARD
    assert sorted(m["name"] for m in page["models"]) == sorted(TBO_FORWARD + TBO_SHARED_ONLY)
    assert set(TBO_SHARED_ONLY) <= set(groups["LayerScatterModes"])
    # glm4_moe calls it itself: cited there first, the shared layer helper second
    glm4 = {m["name"]: m for m in page["models"]}["glm4_moe"]
    assert [e["entry"] for e in glm4["entries"]] == ["model_forward_maybe_tbo", "LayerScatterModes"]
    assert glm4["via"][-1] == "model_forward_maybe_tbo" and glm4["site"]["line"] == 972
