"""Explain with a deployment profile on a knowledge base the real ingest builds from a
synthetic repository (tests/sim_repos.py): the effective configuration, verified fixes, the
annotated command, and the upgrade check with the profile on both sides."""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.main import create_app
from kb.explain import explain
from kb.explain.predicates import NEEDS_MEMORY, Profile
from kb.profile import ProfileFields
from kb.schema import make_engine
from tests.conftest import ingest_into
from tests.sim_repos import build_sim_repo

GLM_FP4_B200 = Profile.parse(
    {"arch": "GlmMoeForCausalLM", "quant": "modelopt_fp4", "sm": 100, "gpus": 8}
)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sim")
    path = root / "kb.db"
    ingest_into(build_sim_repo(root), path, jobs=1)
    return path


@pytest.fixture(scope="module")
def session(db: Path) -> Iterator[Session]:
    engine = make_engine(f"sqlite:///{db}", readonly=True)
    with Session(engine) as s:
        yield s
    engine.dispose()


def effective(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["field"]: row for row in result["effective"] if row["certain"]}


def test_effective_configuration_with_a_profile(session: Session) -> None:
    result = explain(session, "v0.2.0", "--model-path m --tp-size 8", profile=GLM_FP4_B200)
    assert result["simulated"] and result["profile"]["arch"] == "GlmMoeForCausalLM"
    rows = effective(result)
    quant = rows["quantization"]
    assert (quant["from"], quant["to"], quant["flag"]) == (None, "modelopt_fp4", "--quantization")
    moe = rows["moe_runner_backend"]
    assert (moe["from"], moe["to"]) == ("auto", "flashinfer_trtllm")
    assert "is_sm100_supported()" in moe["condition"]
    assert moe["source"]["permalink"].startswith(
        "/v/v0.2.0/source/python/sglang/srt/server_args.py#L"
    )
    assert rows["disable_shared_experts_fusion"]["to"] is True
    assert rows["attention_backend"]["to"] == "trtllm_mha"
    # what the profile could not decide is listed with the fact it needs
    memory = next(r for r in result["effective"] if r["field"] == "mem_fraction_static")
    assert not memory["certain"] and memory["needs"] == [NEEDS_MEMORY]
    # and the check on GPU memory is undecidable, naming it
    (undecidable,) = [f for f in result["findings"] if f["kind"] == "undecidable"]
    assert undecidable["needs"] == [NEEDS_MEMORY] and "40 GB" in undecidable["message"]
    sm100 = next(p for p in result["predicates"] if p["name"] == "is_sm100_supported")
    assert sm100["value"] is True and sm100["source"]["path"].endswith("utils/common.py")
    assert "flashinfer-python >= 0.6.2 is installed" in result["assumptions"]


def test_more_gpus_than_the_profile_has(session: Session) -> None:
    few = Profile.parse({"arch": "GlmMoeForCausalLM", "sm": 100, "gpus": 4})
    result = explain(session, "v0.2.0", "--model-path m --tp-size 8", profile=few)
    (warning,) = [f for f in result["findings"] if f["kind"] == "profile"]
    assert warning["message"].startswith("tp_size × pp_size = 8 GPUs, but the profile has 4")
    fits = explain(session, "v0.2.0", "--model-path m --tp-size 4", profile=few)
    assert not [f for f in fits["findings"] if f["kind"] == "profile"]


def test_hopper_takes_none_of_the_blackwell_branch(session: Session) -> None:
    hopper = Profile.parse(
        {"arch": "GlmMoeForCausalLM", "quant": "modelopt_fp4", "sm": 90, "cuda": "12.4"}
    )
    rows = effective(explain(session, "v0.2.0", "--model-path m", profile=hopper))
    assert "moe_runner_backend" not in rows and "quantization" not in rows
    assert rows["attention_backend"]["to"] == "fa3"


def test_error_with_a_verified_fix(session: Session) -> None:
    command = "--model-path m --enable-two-batch-overlap"
    result = explain(session, "v0.2.0", command, profile=GLM_FP4_B200)
    error = next(f for f in result["findings"] if f["severity"] == "error")
    assert error["message"].startswith("raises at server_args.py:")
    assert error["stage"] == "server_args"
    # the smallest change first: drop the switch; then the values that pass, each verified
    # (mooncake comes first in the choices but raises elsewhere: not offered)
    assert error["fix"]["remove"] == ["--enable-two-batch-overlap"]
    assert error["fix"]["verified_through"] == "server_args"
    (deepep,) = error["alternatives"]
    assert deepep["add"] == ["--moe-a2a-backend deepep"]
    assert deepep["command"] == command + " --moe-a2a-backend deepep"
    for fix in (error["fix"], deepep):
        fixed = explain(session, "v0.2.0", fix["command"], profile=GLM_FP4_B200)
        assert fixed["errors"] == 0
    unknown = explain(session, "v0.2.0", "--model-path m --no-such-flag")
    assert {f["stage"] for f in unknown["findings"] if f["kind"] == "unknown_flag"} == {"parse"}


def test_pipeline_assert_after_its_override_and_its_fix(session: Session) -> None:
    alone = explain(session, "v0.2.0", "--model-path m --pp-size 2")
    assert alone["errors"] == 0
    assert any(
        f["message"].startswith("overrides --disable-overlap-schedule to True")
        for f in alone["findings"]
    )
    mixed = explain(session, "v0.2.0", "--model-path m --pp-size 2 --enable-mixed-chunk")
    error = next(f for f in mixed["findings"] if f["severity"] == "error")
    assert error["message"].startswith("assertion fails at server_args.py:")
    assert error["fix"]["remove"] == ["--enable-mixed-chunk"]


def test_tokens_mark_abbreviations_and_aliases(session: Session) -> None:
    result = explain(
        session,
        "v0.2.0",
        "python -m sglang.launch_server --model-path m --tensor-parallel 2 "
        "--tensor-parallel-size 4",
    )
    tokens = result["tokens"]
    assert tokens[0]["role"] == "launcher"
    flags = [t for t in tokens if t["role"] == "flag"]
    assert [(t["text"], t["flag"], t["via"]) for t in flags] == [
        ("--model-path", "--model-path", "exact"),
        ("--tensor-parallel", "--tp-size", "abbreviation"),
        ("--tensor-parallel-size", "--tp-size", "alias"),
    ]
    assert flags[0]["help"] == "Model weights."
    values = [t for t in tokens if t["role"] == "value"]
    assert [(t["text"], t["value_of"]) for t in values] == [
        ("m", "--model-path"),
        ("2", "--tp-size"),
        ("4", "--tp-size"),
    ]


def test_upgrade_check_with_the_profile_on_both_sides(session: Session) -> None:
    result = explain(
        session, "v0.2.0", "--model-path m --pp-size 2 --enable-mixed-chunk", compare_to="v0.3.0"
    )
    cmp = result["compare"]
    assert cmp["errors"] == 0
    assert [f["message"].split(":")[0] for f in cmp["constraints_stopped"]][:1] == [
        "assertion fails at server_args.py"
    ]
    assert cmp["changed_meaning"] == []
    # the pipeline override exists on both sides: listed once, as persisting
    assert any("overrides --disable-overlap-schedule" in f["message"] for f in cmp["persisting"])
    assert not any("overrides" in f["message"] for f in cmp["constraints_started"])


def test_hook_sites_carry_the_dispatchers_condition(session: Session) -> None:
    plain = explain(session, "v0.3.0", "--model-path m --pp-size 2")
    assert plain["errors"] == 0
    dflash = explain(session, "v0.3.0", "--model-path m --pp-size 2 --speculative-algorithm DFLASH")
    error = next(f for f in dflash["findings"] if f["severity"] == "error")
    assert error["message"].startswith("raises at speculative_hook.py:")
    assert "speculative_algorithm == 'DFLASH'" in error["condition"]


def test_json_api_takes_the_profile_in_the_body_or_the_query(db: Path) -> None:
    client = TestClient(create_app(f"sqlite:///{db}"))
    body = {
        "version": "v0.2.0",
        "command": "--model-path m --enable-two-batch-overlap",
        "profile": {"arch": "GlmMoeForCausalLM", "quant": "modelopt_fp4", "sm": 100},
    }
    posted = client.post("/api/explain", json=body).json()
    query = "version=v0.2.0&command=--model-path+m+--enable-two-batch-overlap"
    got = client.get(f"/api/explain?{query}&arch=GlmMoeForCausalLM&quant=modelopt_fp4&sm=100")
    assert got.status_code == 200
    for answer in (posted, got.json()):
        assert answer["profile"]["platform"] == "cuda"
        rows = {e["field"]: e for e in answer["effective"]}
        assert set(rows["moe_runner_backend"]) >= {
            "field",
            "flag",
            "from",
            "to",
            "condition",
            "source",
        }
        assert rows["moe_runner_backend"]["to"] == "flashinfer_trtllm"
        error = next(f for f in answer["findings"] if f["severity"] == "error")
        assert error["alternatives"][0]["add"] == ["--moe-a2a-backend deepep"]
        assert {"text", "flag", "help"} <= set(answer["tokens"][0])
        assert isinstance(answer["passed"], list)
    bad = client.get(f"/api/explain?{query}&platform=tpu")
    assert bad.status_code == 400 and "unknown platform" in bad.json()["detail"]
    page = client.get(f"/explain?{query}&arch=GlmMoeForCausalLM&sm=100")
    assert page.status_code == 200 and "Effective configuration" in page.text
    assert "arch=GlmMoeForCausalLM" in page.text  # the fix link keeps the profile


def test_cli_takes_a_profile(db: Path) -> None:
    from typer.testing import CliRunner

    from cli import cli

    args = ["explain", "--db", str(db), "--version", "v0.2.0"]
    command = ["--", "--model-path", "m", "--enable-two-batch-overlap"]
    flags = ["--arch", "GlmMoeForCausalLM", "--quant", "modelopt_fp4", "--sm", "100"]
    result = CliRunner().invoke(cli, [*args, *flags, *command])
    assert result.exit_code == 1, result.output
    assert "fix (verified through server args): remove --enable-two-batch-overlap" in result.output
    assert "or (verified through server args): add --moe-a2a-backend deepep" in result.output
    assert "--moe-runner-backend: auto → flashinfer_trtllm" in result.output
    profile = '{"arch": "GlmMoeForCausalLM", "quant": "modelopt_fp4", "sm": 90}'
    hopper = CliRunner().invoke(cli, [*args, "--profile", profile, "--json", *command])
    answer = json.loads(hopper.stdout)
    assert answer["profile"]["sm"] == 90
    assert "moe_runner_backend" not in {e["field"] for e in answer["effective"]}
    bad = CliRunner().invoke(cli, [*args, "--platform", "tpu", *command])
    assert bad.exit_code == 2 and "Unusable profile" in bad.output


def test_every_profile_field_is_a_parameter_of_each_twin_and_the_cli(db: Path) -> None:
    """ProfileFields is the one definition: a field added there is a query parameter of
    GET /api/explain (as text, bounded), a control of the /explain form, and a CLI option."""
    from typer.testing import CliRunner

    from cli import cli

    fields = list(ProfileFields.model_fields)
    client = TestClient(create_app(f"sqlite:///{db}"))
    spec = client.get("/api/openapi.json").json()
    params = spec["paths"]["/api/explain"]["get"]["parameters"]
    assert [p["name"] for p in params] == ["command", "version", "compare", *fields]
    by_name = {p["name"]: p["schema"] for p in params}
    assert by_name["sm"] == {
        "type": "string",
        "maxLength": 10,
        "pattern": "^((sm|SM)?([0-9]{1,3}|1000))?$",
        "default": "",
        "title": "Sm",
        "description": "CUDA SM, e.g. 90, 100, 120",
    }
    assert by_name["arch"]["maxLength"] == 200 and by_name["config"]["maxLength"] == 2_000
    body = spec["components"]["schemas"]["DeployProfile"]["properties"]
    assert list(body) == fields
    page = client.get("/explain?command=--tp+2&gpus=8").text
    for name in fields:
        assert f'id="profile-{name}" name="{name}"' in page
    assert 'id="explain-profile" open' in page  # a profile with the GPU count alone shows it
    assert (
        'id="explain-profile" open'
        not in client.get("/explain?command=--tp+2&packages=assume-ok&env=assume-unset&gpus=").text
    )  # what the form sends when nothing is chosen
    wide = {"COLUMNS": "200"}
    help_text = CliRunner().invoke(cli, ["explain", "--help"], env=wide).output
    for name, info in ProfileFields.model_fields.items():
        assert f"--{name} " in help_text
        if name not in ("config", "draft_config"):  # "the model's config.json (a file)"
            assert f"Profile: {info.description}." in help_text


def test_a_profile_out_of_the_declared_bounds_is_unusable(db: Path) -> None:
    """Bounds come from ProfileFields wherever the profile is read: the query string's
    text, a pasted config.json, the CLI (they were 500s where the twins disagreed)."""
    from typer.testing import CliRunner

    from cli import cli

    client = TestClient(create_app(f"sqlite:///{db}"))
    query = "/api/explain?version=v0.2.0&command=--model-path+m"
    for extra, name in (("&sm=5000", "sm"), ("&sm=sm1001", "sm"), ("&gpus=100001", "gpus")):
        answer = client.get(query + extra)  # out of the number's pattern in openapi.json
        assert (answer.status_code, answer.json()["name"]) == (400, name)
    assert client.get(query + "&sm=sm1000").json()["profile"]["sm"] == 1000
    config = {"architectures": ["A" * 201]}
    body = {"command": "--model-path m", "profile": {"config": config}}
    answer = client.post("/api/explain", json=body)
    assert answer.status_code == 400
    assert answer.json()["detail"] == "arch: String should have at most 200 characters"
    args = ["explain", "--db", str(db), "--sm", "5000", "--", "--model-path", "m"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "Unusable profile: sm out of range: 5000" in result.output


def test_cli_options_override_the_profile_json_except_the_assumptions(db: Path) -> None:
    from typer.testing import CliRunner

    from cli import cli

    args = ["explain", "--db", str(db), "--version", "v0.2.0", "--json"]
    profile = '{"arch": "Llama", "sm": 90, "packages": "unknown", "env": "unknown"}'
    options = ["--sm", "sm100", "--gpus", "4", "--packages", "assume-ok"]
    result = CliRunner().invoke(cli, [*args, "--profile", profile, *options, "--", "--tp", "2"])
    answer = json.loads(result.stdout)["profile"]
    # --sm and --gpus override the JSON; --packages and --env fill in what it leaves out
    assert answer == {
        "arch": "Llama",
        "platform": "cuda",
        "sm": 100,
        "gpus": 4,
        "packages": "unknown",
        "env": "unknown",
    }


def test_era_1_inline_adjustments(session: Session) -> None:
    rocm = Profile.parse({"platform": "rocm"})
    rows = effective(explain(session, "v0.1.0", "--model-path m", profile=rocm))
    assert rows["attention_backend"]["to"] == "triton"
    command = "--model-path m --tp-size 4 --enable-torch-compile --disable-cuda-graph"
    result = explain(session, "v0.1.0", command, profile=GLM_FP4_B200)
    error = next(f for f in result["findings"] if f["severity"] == "error")
    assert error["message"].startswith("assertion fails at server_args.py:")
    # switching the compile off is verified; it would not be if it exposed a new error
    assert error["fix"]["remove"] in (["--disable-cuda-graph"], ["--enable-torch-compile"])
    (undecidable,) = [f for f in result["findings"] if f["kind"] == "undecidable"]
    assert undecidable["needs"] == [NEEDS_MEMORY]


def test_era_3_hook_reached_through_the_model_handler(session: Session) -> None:
    big = Profile.parse({"arch": "BigMoeForCausalLM", "sm": 100})
    result = explain(session, "v0.3.0", "--model-path m", profile=big)
    moe = effective(result)["moe_runner_backend"]
    assert moe["to"] == "flashinfer_trtllm"
    assert moe["source"]["path"].endswith("arg_groups/big_moe_hook.py")
    assert "model_arch in ['BigMoeForCausalLM']" in moe["condition"]
    # the local model_arch comes from the profile: another model takes no branch
    other = explain(session, "v0.3.0", "--model-path m", profile=Profile.parse({"sm": 100}))
    assert isinstance(other["effective"], list)
    assert "moe_runner_backend" not in effective(
        explain(
            session, "v0.3.0", "--model-path m", profile=Profile.parse({"arch": "Llama", "sm": 100})
        )
    )
    # pipeline parallelism trips the backend the hook chose; the fix picks another value
    piped = explain(session, "v0.3.0", "--model-path m --pp-size 2", profile=big)
    error = next(f for f in piped["findings"] if f["severity"] == "error")
    assert "flashinfer_trtllm MoE does not support" in error["message"]
    assert error["fix"]["add"] == ["--moe-runner-backend triton"]
    # deepep needs GPU memory the profile does not give: undecidable, saying so
    deep = explain(session, "v0.3.0", "--model-path m --moe-a2a-backend deepep", profile=big)
    (undecidable,) = [f for f in deep["findings"] if f["kind"] == "undecidable"]
    assert undecidable["needs"] == [NEEDS_MEMORY]
    assert undecidable["source"]["path"].endswith("big_moe_hook.py")


def test_environment_assignments_in_the_command_feed_the_simulation(session: Session) -> None:
    command = "FIXTURE_FORCE_TRITON=1 python -m sglang.launch_server --model-path m"
    result = explain(session, "v0.2.0", command, profile=GLM_FP4_B200)
    assert effective(result)["attention_backend"]["to"] == "triton"
    assert "environment variable FIXTURE_FORCE_TRITON=1" in result["assumptions"]
    # A deprecated name: SGLang copies its value to the new name at import, so the
    # simulation reads it there too.
    command = "FIXTURE_OLD_FORCE_TRITON=1 python -m sglang.launch_server --model-path m"
    result = explain(session, "v0.2.0", command, profile=GLM_FP4_B200)
    assert effective(result)["attention_backend"]["to"] == "triton"
    assert "environment variable FIXTURE_FORCE_TRITON=1" in result["assumptions"]
    # Both set: the old value is copied over the new one, whichever comes first.
    for pair in (
        "FIXTURE_FORCE_TRITON=0 FIXTURE_OLD_FORCE_TRITON=1",
        "FIXTURE_OLD_FORCE_TRITON=1 FIXTURE_FORCE_TRITON=0",
    ):
        result = explain(
            session, "v0.2.0", f"{pair} {command.split(' ', 1)[1]}", profile=GLM_FP4_B200
        )
        assert effective(result)["attention_backend"]["to"] == "triton", pair


def test_a_catalog_gpu_through_the_twins_the_page_and_the_cli(db: Path) -> None:
    from typer.testing import CliRunner

    from cli import cli

    client = TestClient(create_app(f"sqlite:///{db}"))
    body = {"version": "v0.2.0", "command": "--model-path m", "profile": {"gpu": "B200"}}
    posted = client.post("/api/explain", json=body).json()
    query = "version=v0.2.0&command=--model-path+m"
    got = client.get(f"/api/explain?{query}&gpu=b200").json()
    for answer in (posted, got):
        assert (
            answer["profile"] | {"gpu": "B200", "platform": "cuda", "sm": 100}
            == (answer["profile"])
        )
        memory = next(p for p in answer["predicates"] if p["name"] == "get_device_memory_capacity")
        assert memory["value"] == 183359.0
        rows = effective(answer)
        assert (rows["mem_fraction_static"]["to"], rows["mem_fraction_static"]["input"]) == (
            0.85,
            "gpu",
        )
    # an unknown name: 400 naming the close ones, on each twin, the page and the CLI
    close = "Unknown GPU 'B2000'. Did you mean B200"
    bad = client.post("/api/explain", json={**body, "profile": {"gpu": "B2000"}})
    assert bad.status_code == 400 and bad.json()["detail"].startswith(close)
    bad = client.get(f"/api/explain?{query}&gpu=B2000")
    assert bad.status_code == 400 and bad.json()["detail"].startswith(close)
    page = client.get(f"/explain?{query}&gpu=B2000")
    assert page.status_code == 400 and close in page.text.replace("&#39;", "'")
    args = ["explain", "--db", str(db), "--version", "v0.2.0"]
    result = CliRunner().invoke(cli, [*args, "--gpu", "B2000", "--", "--model-path", "m"])
    assert result.exit_code == 2 and f"Unusable profile: {close}" in result.output
    cli_json = CliRunner().invoke(
        cli, [*args, "--gpu", "B200", "--json", "--", "--model-path", "m"]
    )
    assert json.loads(cli_json.stdout)["profile"]["sm"] == 100
    # the form offers the catalog
    form = client.get("/explain?command=--tp+2&gpu=H20").text
    assert '<option value="H20" selected>H20 · cuda sm90 · 96 GB</option>' in form


def test_each_effective_setting_names_its_input(session: Session) -> None:
    glm = {"arch": "GlmMoeForCausalLM", "quant": "modelopt_fp4"}
    b200 = Profile.parse({**glm, "gpu": "B200"})
    rows = effective(explain(session, "v0.2.0", "--model-path m --tp-size 8", profile=b200))
    assert rows["mem_fraction_static"]["input"] == "gpu"  # get_device_memory_capacity
    assert rows["attention_backend"]["input"] == "gpu"  # is_sm100_supported
    assert rows["quantization"]["input"] == "gpu"  # under is_sm100_supported, from the model
    assert rows["moe_runner_backend"]["input"] == "assumed"  # a package version
    assert rows["moe_runner_backend"]["assuming"] == ["flashinfer-python >= 0.6.2 is installed"]
    assert rows["disable_shared_experts_fusion"]["input"] == "assumed"  # read the one above
    # no profile: the command's flags, or SGLang's own defaults
    pp = effective(explain(session, "v0.2.0", "--model-path m --pp-size 2"))
    assert pp["disable_overlap_schedule"]["input"] == "flag"
    rocm = effective(
        explain(session, "v0.1.0", "--model-path m", profile=Profile.parse({"platform": "rocm"}))
    )
    assert rocm["attention_backend"]["input"] == "gpu"


def test_a_simulation_out_of_steps_says_what_it_does_not_know(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that spends its step budget stops there: a warning says so, and each setting it
    saw change is no longer certain (code after the stop may change it again)."""
    from kb.explain import simulate
    from kb.explain.deploy import STOPPED

    command = "--model-path m --tp-size 8"
    full = explain(session, "v0.2.0", command, profile=GLM_FP4_B200)
    assert not [f for f in full["findings"] if f["kind"] == "budget"]
    monkeypatch.setattr(simulate, "MAX_STEPS", 12)
    cut = explain(session, "v0.2.0", command, profile=GLM_FP4_B200)
    (stopped,) = [f for f in cut["findings"] if f["kind"] == "budget"]
    assert stopped["severity"] == "warning"
    assert stopped["message"].startswith("unknown: budget exhausted after 12 statements")
    assert cut["effective"] and len(cut["effective"]) < len(full["effective"])
    for row in cut["effective"]:
        assert not row["certain"] and row["to"] is None and STOPPED in row["needs"]
        assert row["to_text"].endswith("when the simulation stopped")


def test_the_fix_search_stops_when_its_budget_is_spent(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kb.explain import orchestrate

    command = "--model-path m --enable-two-batch-overlap"
    monkeypatch.setattr(orchestrate, "FIX_STEPS", 1)  # one run's first statement, no more
    result = explain(session, "v0.2.0", command, profile=GLM_FP4_B200)
    error = next(f for f in result["findings"] if f["severity"] == "error")
    assert "fix" not in error  # the one run tried was cut short: it verifies nothing
    (stopped,) = [f for f in result["findings"] if f["kind"] == "budget"]
    assert stopped["severity"] == "info"
    assert stopped["message"].startswith("unknown: budget exhausted: the search for fixes")


def test_a_set_value_is_shown_not_a_500() -> None:
    """A simulated field may hold a set (SGLang builds some): shown as its sorted texts."""
    from kb.explain.report import display

    assert display({"b", "a"}) == '["a", "b"]'
    assert display([1, {"x"}]) == '[1, ["x"]]'


def test_the_page_states_every_assumption_above_the_fold(db: Path) -> None:
    """What the run assumed is listed with what it decided and what it could not, the
    assumptions no setting rests on (an environment variable taken as unset) included."""
    client = TestClient(create_app(f"sqlite:///{db}"))
    query = "version=v0.2.0&command=--model-path+m+--tp-size+8"
    profile = "&arch=GlmMoeForCausalLM&quant=modelopt_fp4&gpu=B200"
    answer = client.get(f"/api/explain?{query}{profile}").json()
    resting = {a for row in answer["effective"] for a in row.get("assuming") or []}
    unused = [a for a in answer["assumptions"] if a not in resting]
    assert resting and unused  # both kinds, or this test proves nothing
    page = html.unescape(client.get(f"/explain?{query}{profile}").text)
    summary = page[page.index('<dl class="sim-summary"') :]
    summary = summary[: summary.index("</dl>")]
    for words in answer["assumptions"]:
        assert words in summary


def test_many_assumptions_no_setting_rests_on_fold_into_one_line(session: Session) -> None:
    from app.templating import env

    profile = Profile.parse({"arch": "GlmMoeForCausalLM", "quant": "modelopt_fp4", "gpu": "B200"})
    result = explain(session, "v0.2.0", "--model-path m --tp-size 8", profile=profile)
    extra = [f"environment variable FIXTURE_{n} is not set" for n in range(5)]
    result["assumptions"] = [*result["assumptions"], *extra]
    page = html.unescape(env.get_template("explain_results.html").render(result=result))
    summary = page[page.index('<dl class="sim-summary"') :]
    summary = summary[: summary.index("</dl>")]
    assert "<summary>6 more that no setting changed on:" in summary
    for words in extra:
        assert f"<li>{words}</li>" in summary
