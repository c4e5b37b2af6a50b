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
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.main import create_app
from cli import cli
from kb import model_source
from kb.explain.predicates import Profile
from kb.model_source import ModelPlaces, ModelUnavailable, command_model, with_model
from tests.conftest import ingest_into
from tests.hub_fixture import Hub, Repo, closed_port, serve_hub
from tests.sim_repos import build_sim_repo

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


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sim")
    path = root / "kb.db"
    ingest_into(build_sim_repo(root), path, jobs=1)
    return path


@pytest.fixture(autouse=True)
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test its own model cache, and no memory of an unreachable hub or its refusals."""
    monkeypatch.setenv("FLAGATLAS_MODEL_CACHE", str(tmp_path / "models"))
    model_source._unreachable.clear()
    model_source._refused.clear()
    yield
    model_source._unreachable.clear()
    model_source._refused.clear()


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[Hub]:
    with serve_hub(REPOS) as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        yield served


def resolves(hub: Hub) -> list[tuple[str, str]]:
    """The file requests the hub received (not the client's own telemetry, if any)."""
    return [(method, path) for method, path in hub.requests if "/resolve/" in path]


def effective(answer: dict[str, Any]) -> dict[str, Any]:
    return {e["field"]: e["to"] for e in answer["effective"] if e["certain"]}


# --- the Hugging Face Hub ---------------------------------------------------------------


def test_a_hub_model_is_fetched_once_cached_and_used(db: Path, hub: Hub) -> None:
    client = TestClient(create_app(f"sqlite:///{db}"))
    body = {"version": "v0.2.0", "command": COMMAND, "profile": {"sm": 100, "gpus": 8}}
    first = client.post("/api/explain", json=body)
    assert first.status_code == 200, first.text
    answer = first.json()
    commit = REPOS["org/glm-fp4"].commit
    assert answer["model_source"] == f"hub:org/glm-fp4@{commit}"
    # The architecture and quantization of the fetched config.json decide the simulation.
    assert answer["profile"]["arch"] == "GlmMoeForCausalLM"
    assert answer["profile"]["quant"] == "modelopt_fp4"
    rows = effective(answer)
    assert rows["quantization"] == "modelopt_fp4"
    assert rows["moe_runner_backend"] == "flashinfer_trtllm"
    # What the installed huggingface_hub asks: the probe (HEAD, no retries), then
    # hf_hub_download's HEAD and GET, then hf_quant_config.json at the commit (absent).
    config = "/org/glm-fp4/resolve/main/config.json"
    assert resolves(hub) == [
        ("HEAD", config),
        ("HEAD", config),
        ("GET", config),
        ("HEAD", f"/org/glm-fp4/resolve/{commit}/hf_quant_config.json"),
    ]
    # Fetched once: the same model again, from the profile, the query string or the page,
    # makes no request.
    again = client.post("/api/explain", json=body).json()
    assert again["model_source"] == answer["model_source"] and effective(again) == rows
    query = {"version": "v0.2.0", "command": "--tp-size 8", "model": "org/glm-fp4", "sm": "100"}
    got = client.get("/api/explain", params=query).json()
    assert got["profile"]["model"] == "org/glm-fp4" and effective(got) == rows
    page = client.get("/explain", params=query)
    assert page.status_code == 200
    assert "config.json of org/glm-fp4 at commit " + commit[:12] in page.text
    assert "from the Hugging Face Hub" in page.text
    assert len(resolves(hub)) == 4
    cache = Path(model_source.default_cache_dir(f"sqlite:///{db}"))
    assert (cache / "models--org--glm-fp4").is_dir()  # huggingface_hub's own layout


def test_a_modelopt_checkpoint_brings_its_hf_quant_config(hub: Hub, tmp_path: Path) -> None:
    places = ModelPlaces(tmp_path / "cache", ())
    data, origin = with_model({"sm": 100}, "--model-path nvidia/llama-fp4", places)
    assert origin.source == f"hub:nvidia/llama-fp4@{REPOS['nvidia/llama-fp4'].commit}"
    assert origin.notes == ["hf_quant_config.json: quant_algo NVFP4"]
    profile = Profile.parse(data)
    assert profile is not None and profile.hf_quant_config == MODELOPT
    assert profile.arch == "LlamaForCausalLM"
    # config.json has no quantization_config: as SGLang's hf_config, the profile has none
    # (ModelConfig reads hf_quant_config.json; hf_config does not).
    assert profile.quant is None
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


def test_a_missing_or_gated_model_is_a_clear_error(db: Path, hub: Hub) -> None:
    client = TestClient(create_app(f"sqlite:///{db}"))
    missing = client.post(
        "/api/explain", json={"command": "--tp-size 8", "profile": {"model": "org/nothing"}}
    )
    assert missing.status_code == 404
    assert missing.json()["kind"] == "model"
    assert missing.json()["detail"].startswith("no such model on the hub: org/nothing")
    gated = client.get("/api/explain", params={"command": "--tp-size 8", "model": "org/gated"})
    assert gated.status_code == 403
    assert "gated or private" in gated.json()["detail"] and "HF_TOKEN" in gated.json()["detail"]
    page = client.get("/explain", params={"command": "--tp-size 8", "model": "org/gated"})
    assert page.status_code == 403 and "set HF_TOKEN on the server" in page.text
    # Named by the command only, it is a note; the explain goes on.
    noted = client.post("/api/explain", json={"command": "--model-path org/nothing --tp 2"})
    assert noted.status_code == 200
    assert noted.json()["model_source"] is None
    assert noted.json()["model_notes"][0].startswith("--model-path org/nothing: no such model")
    # The hub was asked once per model: a refusal is remembered (each visitor's page does
    # not send the hub a request), with its status and words.
    asked = resolves(hub)
    assert sum("/org/nothing/" in path for _, path in asked) == 1
    assert sum("/org/gated/" in path for _, path in asked) == 1
    again = client.get("/api/explain", params={"command": "--tp-size 8", "model": "org/gated"})
    assert again.status_code == 403 and again.json()["detail"] == gated.json()["detail"]
    assert resolves(hub) == asked


def test_a_hub_failure_is_kept_by_url_only_while_it_is_remembered(
    db: Path, hub: Hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The URL cache's key (the knowledge base's state) does not follow the hub: a permalink
    answered while the model was missing is kept as long as the refusal is remembered, then
    answers with the model once it is there."""
    client = TestClient(create_app(f"sqlite:///{db}"))
    query = {"version": "v0.2.0", "command": "--model-path org/later --tp-size 8", "sm": "100"}
    before = client.get("/api/explain", params=query)
    assert before.json()["model_source"] is None
    assert "no such model" in before.json()["model_notes"][0]
    assert before.headers["cache-control"] in ("private, max-age=299", "private, max-age=300")
    hub.repos = {**hub.repos, "org/later": Repo({"config.json": GLM_FP4})}
    assert client.get("/api/explain", params=query).content == before.content  # remembered
    clock = time.monotonic() + model_source.REFUSED_FOR + 1  # (REFUSED_FOR seconds later)
    monkeypatch.setattr(time, "monotonic", lambda: clock)
    after = client.get("/api/explain", params=query)
    assert after.json()["model_source"] == f"hub:org/later@{hub.repos['org/later'].commit}"
    assert after.headers["cache-control"] == "public, max-age=60"  # fetched: it holds
    page = client.get("/explain", params=query)
    assert "config.json of org/later" in page.text


def test_an_unreachable_hub_fails_fast_and_says_what_to_do(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = TestClient(create_app(f"sqlite:///{db}"))
    body = {"command": "--tp-size 8", "profile": {"model": "org/glm-fp4"}}
    # A closed loopback port (HF_ENDPOINT is respected), then the default endpoint (these
    # machines have no internet; with one, the real hub answers: no such model).
    for endpoint in (closed_port(), None):
        if endpoint:
            monkeypatch.setenv("HF_ENDPOINT", endpoint)
        else:
            monkeypatch.delenv("HF_ENDPOINT")
        model_source._unreachable.clear()
        start = time.monotonic()
        answer = client.post("/api/explain", json=body)
        assert time.monotonic() - start < 5
        if endpoint is None and answer.status_code == 404:
            continue  # the machine reaches the real hub
        assert answer.status_code == 503, answer.text
        detail = answer.json()["detail"]
        assert "unreachable" in detail and all(what in detail for what in WHAT_TO_DO)
    # Named by the command, the same failure is a note and the answer goes on, at once.
    start = time.monotonic()
    noted = client.post("/api/explain", json={"command": COMMAND})
    assert time.monotonic() - start < 5 and noted.status_code == 200
    assert noted.json()["model_notes"] and noted.json()["model_source"] is None


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


def test_the_cli_reads_a_local_model_directory(db: Path, tmp_path: Path) -> None:
    local = model_dir(tmp_path / "glm", GLM_FP4, MODELOPT)
    args = ["explain", "--db", str(db), "--version", "v0.2.0", "--sm", "100", "--gpus", "8"]
    result = CliRunner().invoke(cli, [*args, "--json", "--", "--model-path", str(local)])
    answer = json.loads(result.stdout)
    assert answer["model_source"] == f"local:{local}"
    assert effective(answer)["moe_runner_backend"] == "flashinfer_trtllm"
    text = CliRunner().invoke(cli, [*args, "--model", str(local), "--", "--tp-size", "8"])
    assert f"model config: config.json read from {local}" in text.output
    assert "hf_quant_config.json: quant_algo NVFP4" in text.output
    gone = CliRunner().invoke(cli, [*args, "--model", str(tmp_path / "nope"), "--", "--tp", "8"])
    assert gone.exit_code == 2 and "Unusable model" in gone.output


def test_the_server_reads_only_directories_under_its_roots(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "models"
    allowed = model_dir(root / "glm", GLM_FP4)
    outside = model_dir(tmp_path / "secret", {"architectures": ["SecretForCausalLM"]})
    client = TestClient(create_app(f"sqlite:///{db}"))

    def explain(model: str) -> Any:
        body = {"version": "v0.2.0", "command": "--tp-size 8", "profile": {"model": model}}
        return client.post("/api/explain", json=body)

    unset = explain(str(allowed))  # FLAGATLAS_MODEL_DIRS unset: no directory at all
    assert unset.status_code == 400 and "reads no local model directories" in unset.text
    monkeypatch.setenv("FLAGATLAS_MODEL_DIRS", str(root))
    ok = explain(str(allowed))
    assert ok.status_code == 200 and ok.json()["model_source"] == f"local:{allowed}"
    assert ok.json()["profile"]["arch"] == "GlmMoeForCausalLM"
    (root / "escape").symlink_to(outside)
    (root / "linked").mkdir()
    (root / "linked" / "config.json").symlink_to(outside / "config.json")
    for attempt in (str(outside), f"{root}/../secret", str(root / "escape")):
        refused = explain(attempt)
        assert refused.status_code == 400, attempt
        assert "not a directory under FLAGATLAS_MODEL_DIRS" in refused.json()["detail"]
        assert "Secret" not in refused.text
    linked = explain(str(root / "linked"))
    assert linked.status_code == 400 and "links outside" in linked.json()["detail"]
    assert explain("relative/../path").status_code == 400  # neither an id nor allowed
    # From the command, a directory the server may not read is a note.
    noted = client.post("/api/explain", json={"command": f"--model-path {outside} --tp 2"})
    assert noted.status_code == 200 and noted.json()["model_source"] is None
    assert "not a directory under FLAGATLAS_MODEL_DIRS" in noted.json()["model_notes"][0]


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
    assert unknown.notes[0].startswith("no reference config for NoSuchForCausalLM")
    assert unknown.source is None and "has no config class for it" in unknown.notes[0]
    # Only for an architecture without a config: a pasted one is used as it is.
    _, pasted = with_model({"arch": "LlamaForCausalLM", "config": "{}"}, "", places)
    assert pasted.source == "pasted" and pasted.notes == []


# --- the command's model ------------------------------------------------------------------


def test_the_model_is_read_from_the_command_as_argparse_keeps_it() -> None:
    assert command_model("python -m sglang.launch_server --model-path a/b --tp 2") == ("a/b", None)
    assert command_model("--model=a/b --model-path c/d --revision=v1") == ("c/d", "v1")
    assert command_model("--tp 2 --model-path") == (None, None)
    assert command_model("--model-path --tp 2") == (None, None)


# --- the draft model of speculative decoding ----------------------------------------------

DRAFT = {"architectures": ["LlamaForCausalLM"], "vocab_size": 128256}
SPECULATIVE = "--speculative-algorithm STANDALONE --speculative-draft-model-path"


def test_a_separate_draft_models_config_is_read_as_the_models_is(tmp_path: Path) -> None:
    draft = model_dir(tmp_path / "draft", DRAFT)
    places = ModelPlaces(tmp_path / "cache", None)
    pasted = {"config": GLM_FP4}
    command = f"--model-path org/glm-fp4 {SPECULATIVE} {draft}"
    data, origin = with_model(pasted, command, places)
    assert data is not None and data["draft_config"] == DRAFT and data["config"] == GLM_FP4
    assert (origin.source, origin.draft_source) == ("pasted", f"local:{draft}")
    assert origin.holds_for == 0  # (a directory may change)
    # pasted, it is not read; the model's own checkpoint as its draft (MTP) is the model's
    data, origin = with_model({**pasted, "draft_config": DRAFT}, command, places)
    assert origin.draft_source == "pasted" and data is not None and data["draft_config"] == DRAFT
    own = f"--model-path {draft} {SPECULATIVE} {draft}"
    data, origin = with_model(None, own, places)
    assert data is not None and "draft_config" not in data and origin.draft_source is None
    # one that cannot be had is a note, not an error
    gone = tmp_path / "gone"
    data, origin = with_model(pasted, f"--model-path org/glm-fp4 {SPECULATIVE} {gone}", places)
    assert data == pasted and origin.draft_source is None
    assert origin.notes and origin.notes[0].startswith(f"--speculative-draft-model-path {gone}: ")
    # on the server, only under its roots, as the model's
    on_server = ModelPlaces(tmp_path / "cache", (tmp_path / "models",))
    data, origin = with_model(pasted, command, on_server)
    assert data == pasted and "not a directory under FLAGATLAS_MODEL_DIRS" in origin.notes[0]


def test_the_draft_config_is_a_profile_field_validated_as_the_config(
    db: Path, tmp_path: Path
) -> None:
    parsed = Profile.parse({"sm": 90, "draft_config": json.dumps(DRAFT)})
    assert parsed is not None and parsed.draft_config == DRAFT
    assert parsed.to_json()["draft_config"] == DRAFT
    for bad, words in (
        ("{not json", "the draft model's pasted config.json is not JSON"),
        ("[1]", "draft_config must be a JSON object"),
        ({"a": "\ud800"}, "the draft model's config.json holds text that is not valid"),
    ):
        with pytest.raises(ValueError, match=words):
            Profile.parse({"draft_config": bad})
    client = TestClient(create_app(f"sqlite:///{db}"))
    command = f"--model-path org/glm-fp4 {SPECULATIVE} org/draft"
    profile = {"sm": 90, "config": GLM_FP4, "draft_config": DRAFT}
    answer = client.post(
        "/api/explain", json={"version": "v0.2.0", "command": command, "profile": profile}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["profile"]["draft_config"] == DRAFT
    assert answer.json()["draft_model_source"] == "pasted"
    refused = client.post(
        "/api/explain",
        json={"command": command, "profile": {"draft_config": "{not json"}},
    )
    assert refused.status_code == 400 and "draft model's" in refused.text
    page = client.get(
        "/explain", params={"command": command, "sm": "90", "draft_config": json.dumps(DRAFT)}
    )
    assert page.status_code == 200 and 'id="profile-draft_config"' in page.text
    assert "Draft model config: the pasted config.json" in page.text
    draft = model_dir(tmp_path / "draft", DRAFT)
    args = ["explain", "--db", str(db), "--version", "v0.2.0", "--sm", "90"]
    text = CliRunner().invoke(
        cli, [*args, "--draft_config", str(draft / "config.json"), "--", *command.split()]
    )
    assert "draft model config: the pasted config.json" in text.output, text.output
