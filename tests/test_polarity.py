"""A model's or a backend value's constraints follow the polarity of the tests in their
conditions: a later branch of an if/elif chain on the architecture is not the earlier
branches' models', and `assert backend in ['x']` is a requirement of every value but x.
Unit tests on condition texts, then a synthetic repository through the pages."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from kb.polarity import OTHER, arch_reading
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
