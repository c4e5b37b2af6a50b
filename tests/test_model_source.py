"""Where explain's model config comes from (kb/model_source.py): a Hugging Face id fetched
once through the real huggingface_hub client from a hub served over real HTTP on loopback
(tests/hub_fixture.py), a local model directory (any on the CLI; on the server only under
FLAGATLAS_MODEL_DIRS), and transformers' defaults for an architecture given alone."""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kb import model_source
from kb.model_source import ModelPlaces, ModelUnavailable, command_model, with_model
from tests.hub_fixture import Hub, Repo, serve_hub

GLM_FP4 = {
    "architectures": ["GlmMoeForCausalLM"],
    "quantization_config": {"quant_method": "modelopt_fp4"},
}
MODELOPT = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4"}}
REPOS = {
    "org/glm-fp4": Repo({"config.json": GLM_FP4}),
    "nvidia/llama-fp4": Repo(
        {"config.json": {"architectures": ["LlamaForCausalLM"]}, "hf_quant_config.json": MODELOPT}
    ),
    "org/gated": Repo({"config.json": GLM_FP4}, gated=True),
}
COMMAND = "--model-path org/glm-fp4 --tp-size 8"
WHAT_TO_DO = ("paste the model's config.json", "local model directory")


@pytest.fixture(autouse=True)
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test its own model cache, and no memory of an unreachable hub."""
    monkeypatch.setenv("FLAGATLAS_MODEL_CACHE", str(tmp_path / "models"))
    model_source._unreachable.clear()
    yield
    model_source._unreachable.clear()


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[Hub]:
    with serve_hub(REPOS) as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        yield served


def resolves(hub: Hub) -> list[tuple[str, str]]:
    """The file requests the hub received (not the client's own telemetry, if any)."""
    return [(method, path) for method, path in hub.requests if "/resolve/" in path]


# --- the Hugging Face Hub ---------------------------------------------------------------


def test_a_modelopt_checkpoint_brings_its_hf_quant_config(hub: Hub, tmp_path: Path) -> None:
    places = ModelPlaces(tmp_path / "cache", ())
    data, origin = with_model({"sm": 100}, "--model-path nvidia/llama-fp4", places)
    assert origin.source == f"hub:nvidia/llama-fp4@{REPOS['nvidia/llama-fp4'].commit}"
    assert origin.notes == ["hf_quant_config.json: quant_algo NVFP4"]
    assert data is not None and data["hf_quant_config"] == MODELOPT
    assert len(resolves(hub)) == 5  # HEAD, HEAD, GET config.json; HEAD, GET hf_quant_config
    with_model({"sm": 100}, "--model-path nvidia/llama-fp4", places)
    assert len(resolves(hub)) == 5


def test_the_command_revision_is_fetched(hub: Hub, tmp_path: Path) -> None:
    commit = REPOS["org/glm-fp4"].commit
    places = ModelPlaces(tmp_path / "cache", ())
    _, origin = with_model(None, f"--model-path org/glm-fp4 --revision {commit}", places)
    assert origin.source == f"hub:org/glm-fp4@{commit}"
    assert all(f"/resolve/{commit}/" in path for _, path in resolves(hub))
    _, missing = with_model(None, "--model-path org/glm-fp4 --revision nope", places)
    assert missing.source is None and "no revision 'nope'" in missing.notes[0]


def test_a_hub_that_never_answers_times_out(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with socket.socket() as silent:  # accepts connections (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{silent.getsockname()[1]}")
        monkeypatch.setenv("FLAGATLAS_HUB_TIMEOUT", "1")
        start = time.monotonic()
        with pytest.raises(ModelUnavailable) as failed:
            model_source.from_hub("org/glm-fp4", "main", tmp_path)
        assert time.monotonic() - start < 3
        assert failed.value.status == 503 and "unreachable" in str(failed.value)
        start = time.monotonic()  # remembered: the next one does not wait
        with pytest.raises(ModelUnavailable):
            model_source.from_hub("org/other", "main", tmp_path)
        assert time.monotonic() - start < 0.5


def test_hf_hub_offline_is_respected(
    monkeypatch: pytest.MonkeyPatch, hub: Hub, tmp_path: Path
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailable) as failed:
        model_source.from_hub("org/glm-fp4", "main", tmp_path)
    assert failed.value.status == 503 and "HF_HUB_OFFLINE" in str(failed.value)
    assert resolves(hub) == []


# --- local model directories ------------------------------------------------------------


def model_dir(path: Path, config: dict[str, Any], quant: dict[str, Any] | None = None) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(config))
    if quant is not None:
        (path / "hf_quant_config.json").write_text(json.dumps(quant))
    return path


def test_local_directories_any_on_the_cli_only_under_roots_on_the_server(tmp_path: Path) -> None:
    root = tmp_path / "models"
    allowed = model_dir(root / "glm", GLM_FP4, MODELOPT)
    outside = model_dir(tmp_path / "secret", {"architectures": ["SecretForCausalLM"]})
    on_cli = ModelPlaces(tmp_path / "cache", None)
    data, origin = with_model(None, f"--model-path {outside}", on_cli)
    assert origin.source == f"local:{outside}" and data is not None
    assert data["config"]["architectures"] == ["SecretForCausalLM"]
    on_server = ModelPlaces(tmp_path / "cache", (root,))
    data, origin = with_model({"model": str(allowed)}, "", on_server)
    assert origin.source == f"local:{allowed}" and data is not None
    assert data["hf_quant_config"] == MODELOPT
    (root / "escape").symlink_to(outside)
    for attempt in (str(outside), f"{root}/../secret", str(root / "escape")):
        with pytest.raises(ModelUnavailable, match="not a directory under FLAGATLAS_MODEL_DIRS"):
            with_model({"model": attempt}, "", on_server)
    with pytest.raises(ModelUnavailable, match="reads no local model directories"):
        with_model({"model": str(allowed)}, "", ModelPlaces(tmp_path / "cache", ()))


# --- transformers' reference configs ----------------------------------------------------


def test_without_transformers_an_architecture_alone_stays_unknown(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # as if not installed
    data, origin = with_model({"arch": "LlamaForCausalLM"}, "", ModelPlaces(tmp_path, ()))
    assert origin.source is None and data == {"arch": "LlamaForCausalLM"}
    assert "pip install 'flagatlas[models]'" in origin.notes[0]


def test_a_reference_config_is_transformers_defaults_and_says_so(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    places = ModelPlaces(tmp_path, ())
    data, origin = with_model({"arch": "LlamaForCausalLM", "quant": "fp8"}, "", places)
    assert origin.source == f"reference:transformers LlamaConfig {transformers.__version__}"
    assert origin.notes == [
        f"assuming transformers' default LlamaConfig config (transformers "
        f"{transformers.__version__}), not a real checkpoint's"
    ]
    assert data is not None
    expected = json.loads(json.dumps(transformers.LlamaConfig().to_dict()))
    assert data["config"]["hidden_size"] == expected["hidden_size"]
    assert data["config"]["architectures"] == ["LlamaForCausalLM"]  # the one chosen
    assert data["config"]["quantization_config"] == {"quant_method": "fp8"}  # as given
    _, unknown = with_model({"arch": "NoSuchForCausalLM"}, "", places)
    assert unknown.source is None and "no config class for NoSuchForCausalLM" in unknown.notes[0]
    # Only for an architecture without a config: a pasted one is used as it is.
    _, pasted = with_model({"arch": "LlamaForCausalLM", "config": "{}"}, "", places)
    assert pasted.source == "pasted" and pasted.notes == []


# --- the command's model ------------------------------------------------------------------


def test_the_model_is_read_from_the_command_as_argparse_keeps_it() -> None:
    assert command_model("python -m sglang.launch_server --model-path a/b --tp 2") == ("a/b", None)
    assert command_model("--model=a/b --model-path c/d --revision=v1") == ("c/d", "v1")
    assert command_model("--tp 2 --model-path") == (None, None)
    assert command_model("--model-path --tp 2") == (None, None)
