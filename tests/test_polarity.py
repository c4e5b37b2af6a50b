"""A model's or a backend value's constraints follow the polarity of the tests in their
conditions: a later branch of an if/elif chain on the architecture is not the earlier
branches' models', and `assert backend in ['x']` is a requirement of every value but x.
Unit tests on condition texts, then a synthetic repository through the pages."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from kb.polarity import OTHER, arch_reading, value_reading
from tests.conftest import ingest_into
from tests.fixture_repos import SERVER_ARGS, commit, git, write

# --- the conditions alone ----------------------------------------------------------------------

ALPHA, BETA = "AlphaMoeForCausalLM", "BetaNextForCausalLM"


def allowed(conditions: list[str], archs: list[str]) -> tuple[set[str], set[str]]:
    reading = arch_reading(conditions, archs)
    assert reading is not None
    return set(reading.may) - {OTHER}, set(reading.named)


def test_an_elif_branch_is_not_the_earlier_branches_model() -> None:
    later = [f"not (model_arch in ['{ALPHA}', 'AlphaVLForCausalLM'])", f"model_arch in ['{BETA}']"]
    assert allowed(later, [ALPHA]) == (set(), {ALPHA})  # tested, excluded
    assert allowed(later, [BETA]) == ({BETA}, {BETA})
    # the first branch is still Alpha's; a condition naming neither tests neither
    assert allowed([f"model_arch in ['{ALPHA}'] and is_sm100_supported()"], [ALPHA])[0] == {ALPHA}
    assert allowed(["self.tp_size > 1"], [ALPHA]) == ({ALPHA}, set())
    # `!=` and `not in` are negations too; `not (a and b)` rules nothing out
    assert allowed([f"model_arch != '{ALPHA}'"], [ALPHA])[0] == set()
    assert allowed([f"model_arch not in ['{ALPHA}']"], [ALPHA])[0] == set()
    assert allowed([f"not (model_arch == '{ALPHA}' and self.device != 'cpu')"], [ALPHA])[0] == {
        ALPHA
    }
    # a part of the name: `'Gamma4' in model_arch`, and its negation
    assert allowed(["'Gamma4' in model_arch"], ["Gamma4ForCausalLM"])[0] == {"Gamma4ForCausalLM"}
    assert allowed(["not ('Gamma4' in model_arch)"], ["Gamma4ForCausalLM"])[0] == set()
    # an unparsable condition: the caller falls back to the text
    assert arch_reading(["model_arch in ["], [ALPHA]) is None


def test_a_value_tested_under_not_is_the_other_values() -> None:
    values = ["auto", "triton", "cutlass", "trtllm"]
    dests = ["runner_backend", "a2a_backend", "quantization"]

    def read(*conditions: str) -> tuple[set[str], set[str]]:
        reading = value_reading(list(conditions), "runner_backend", dests, values)
        assert reading is not None
        return set(reading.may) - {OTHER}, set(reading.named)

    # `assert self.runner_backend in ['cutlass']` under a2a == 'fi', as stored
    negated = read("self.a2a_backend == 'fi'", "not (self.runner_backend in ['cutlass'])")
    assert negated == ({"auto", "triton", "trtllm"}, {"cutlass"})
    assert read("self.runner_backend == 'cutlass'") == ({"cutlass"}, {"cutlass"})
    assert read("self.runner_backend != 'auto'")[0] == {"triton", "cutlass", "trtllm"}
    assert read("self.runner_backend not in ['auto', None]")[0] == {"triton", "cutlass", "trtllm"}
    # another flag's test with a shared value says nothing of this flag
    assert read("self.a2a_backend == 'triton'") == (set(values), set())
    # `is None`: no value; an enum's method; a local copy compared with a value
    assert read("self.runner_backend is None")[0] == set()
    assert read("Runner(self.runner_backend).is_trtllm()")[0] == {"trtllm"}
    assert read("not Runner(self.runner_backend).is_trtllm()")[0] == {"auto", "triton", "cutlass"}
    assert read("backend == 'triton'")[0] == {"triton"}
    # an elif chain on the flag: only the later branch's value
    assert read("not (self.runner_backend == 'auto')", "self.runner_backend in ['triton', 'auto']")[
        0
    ] == {"triton"}


# --- through the pages ----------------------------------------------------------------------

ARGS = """
import argparse
import dataclasses
from typing import Optional

RUNNER_CHOICES = ["auto", "triton", "cutlass", "trtllm"]


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    runner_backend: str = "auto"
    a2a_backend: str = "none"
    attention_backend: Optional[str] = None
    quantization: Optional[str] = None
    disable_overlap: bool = False

    def __post_init__(self):
        self._handle_models()
        self._handle_a2a()

    def _handle_models(self):
        model_arch = self.get_model_arch()
        if model_arch in ["AlphaMoeForCausalLM", "AlphaVLForCausalLM"]:
            if self.runner_backend == "auto":
                self.runner_backend = "trtllm"
        elif model_arch in ["BetaNextForCausalLM"]:
            self.disable_overlap = True
            self.attention_backend = "triton"
        else:
            logger.warning("no tuned defaults for this model")

    def _handle_a2a(self):
        if self.a2a_backend == "fi":
            assert self.runner_backend in [
                "cutlass"
            ], "fi all-to-all runs only with the cutlass runner"
        if self.runner_backend == "trtllm":
            assert self.quantization in ["fp8", None], "trtllm runner wants fp8"
        if self.runner_backend != "auto":
            logger.warning("runner backend chosen by hand")

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", type=str, required=True, help="Weights.")
        parser.add_argument(
            "--runner-backend", type=str, choices=RUNNER_CHOICES, default="auto", help="Runner."
        )
        parser.add_argument(
            "--a2a-backend", type=str, choices=["none", "fi"], default="none", help="A2A."
        )
        parser.add_argument("--attention-backend", type=str, help="Attention.")
        parser.add_argument("--quantization", type=str, choices=["fp8", "awq"], help="Q.")
        parser.add_argument("--disable-overlap", action="store_true", help="No overlap.")
"""

MODEL = """
class {name}:
    def forward(self, batch):
        return batch


EntryClass = {name}
"""


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    root = tmp_path_factory.mktemp("polarity")
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write(repo, SERVER_ARGS, ARGS)
    for file, name in (("alpha_moe", ALPHA), ("beta_next", BETA)):
        write(repo, f"python/sglang/srt/models/{file}.py", MODEL.format(name=name))
    commit(repo, "polarity", "2025-09-01T12:00:00Z", "v0.4.0")
    ingest_into(repo, root / "kb.db", jobs=1)
    return TestClient(create_app(f"sqlite:///{root / 'kb.db'}"), follow_redirects=False)


def get(client: TestClient, url: str) -> Any:
    response = client.get(url)
    assert response.status_code == 200, (url, response.text[:500])
    return response.json()


def test_model_pages_list_only_the_branches_that_can_apply(client: TestClient) -> None:
    alpha = get(client, "/api/v/v0.4.0/models/alpha_moe")["constraints"]
    # the first branch's override only: not Beta's two overrides, not the else's warning
    assert [(c["kind"], c["writes"]) for c in alpha] == [
        ("override", {"runner_backend": "'trtllm'"})
    ]
    beta = get(client, "/api/v/v0.4.0/models/beta_next")["constraints"]
    assert sorted(next(iter(c["writes"])) for c in beta) == ["attention_backend", "disable_overlap"]
    assert all(f"model_arch in ['{BETA}']" in c["conditions"] for c in beta)
    html = client.get("/v/v0.4.0/models/alpha_moe").text
    assert "disable_overlap" not in html


def test_a_negated_value_test_is_the_other_values_requirement(client: TestClient) -> None:
    url = "/api/v/v0.4.0/backends/--runner-backend/compare?values=cutlass,trtllm"
    body = get(client, url)
    fi = "fi all-to-all runs only with the cutlass runner"
    # cutlass is what the assert demands: no requirement of cutlass's
    assert body["requirements"]["cutlass"] == []
    trtllm = {r["message"]: r for r in body["requirements"]["trtllm"]}
    assert set(trtllm) == {fi, "trtllm runner wants fp8"}
    assert trtllm[fi]["excluding"] == ["cutlass"]
    assert trtllm["trtllm runner wants fp8"]["excluding"] == []  # tested positively
    # the warning for any runner but auto: both values', not auto's
    for value in ("cutlass", "trtllm"):
        warns = [e for e in body["side_effects"][value] if e["kind"] == "warning"]
        assert [(w["message"], w["excluding"]) for w in warns] == [
            ("runner backend chosen by hand", ["auto"])
        ]
    auto = get(client, "/api/v/v0.4.0/backends/--runner-backend/auto")
    assert [r["message"] for r in auto["requirements"]] == [fi]
    assert not [e for e in auto["side_effects"] if e["kind"] == "warning"]
    html = client.get(url.removeprefix("/api")).text
    assert "applies to every value but <code>cutlass</code>" in html
    single = client.get("/v/v0.4.0/backends/--runner-backend/triton").text
    assert fi in single and "applies to every value but <code>cutlass</code>" in single
