"""Explain a launch command: parsing like argparse, findings, constraints, ranges, API, CLI."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import explain_kb
import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session
from typer.testing import CliRunner

from app.main import create_app
from cli import cli
from kb.explain import CommandRejected, explain
from kb.explain.analysis import analyze
from kb.explain.facts import FlagSpec, SiteSpec, VersionFacts
from kb.explain.load import load_facts
from kb.explain.parsing import OptionTable, parse
from kb.explain.ranges import VersionOptions, valid_in
from kb.explain.shell import tokenize
from kb.queries import NotFound, get_version
from kb.schema import make_engine

SERVE = "python -m sglang.launch_server"


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return explain_kb.build(tmp_path_factory.mktemp("explain") / "kb.db")


@pytest.fixture(scope="module")
def session(db_url: str):
    engine = make_engine(db_url, readonly=True)
    with Session(engine) as s:
        yield s
    engine.dispose()


@pytest.fixture(scope="module")
def client(db_url: str) -> TestClient:
    return TestClient(create_app(db_url))


def run(session: Session, command: str, version: str = "v0.2.0", **kw: Any) -> dict[str, Any]:
    return explain(session, version, command, **kw)


def kinds(result: dict[str, Any], severity: str | None = None) -> list[str]:
    return [f["kind"] for f in result["findings"] if severity in (None, f["severity"])]


def find(result: dict[str, Any], kind: str) -> dict[str, Any]:
    found = [f for f in result["findings"] if f["kind"] == kind]
    assert found, f"no {kind} finding in {result['findings']}"
    return found[0]


def facts(session: Session, version: str = "v0.2.0") -> VersionFacts:
    return load_facts(session, get_version(session, version))


# --- tokenizing -----------------------------------------------------------------------------


def test_launcher_env_assignments_and_continuations_are_stripped() -> None:
    text = (
        "CUDA_VISIBLE_DEVICES=0,1 NCCL_DEBUG=INFO python3 -m sglang.launch_server \\\n"
        "    --model-path /models/x \\   \n"  # trailing blanks after the backslash
        "    --tp 2  # two GPUs\n"
    )
    tokens = tokenize(text)
    assert (
        tokens.launcher
        == "CUDA_VISIBLE_DEVICES=0,1 NCCL_DEBUG=INFO python3 -m sglang.launch_server"
    )
    assert tokens.argv == ["--model-path", "/models/x", "--tp", "2"]


@pytest.mark.parametrize(
    "text",
    [
        "sglang serve --model-path m --tp 2",
        "docker run --gpus all -p 30000:30000 img python3 -m sglang.launch_server"
        " --model-path m --tp 2",
        "bash -c 'python -m sglang.launch_server --model-path m --tp 2'",
        "python -m sglang.launch_server --model-path m --tp 2 2>&1 | tee server.log &",
        "pip install sglang && python -m sglang.launch_server --model-path m --tp 2 > log.txt",
        "command:\n  - python3\n  - -m\n  - sglang.launch_server\n  - --model-path\n  - m\n"
        '  - --tp\n  - "2"\n',
        'args: ["--model-path", "m", "--tp", "2"]',
        "--model-path m --tp 2",
    ],
)
def test_pasted_forms_yield_the_same_argv(text: str) -> None:
    assert tokenize(text).argv == ["--model-path", "m", "--tp", "2"]


def test_quoted_json_values_stay_one_word() -> None:
    argv = tokenize(
        f"""{SERVE} --json-model-override-args '{{"rope_scaling": {{"factor": 4}}}}' """
        """--model-path "/my models/x" """
    ).argv
    assert argv == [
        "--json-model-override-args",
        '{"rope_scaling": {"factor": 4}}',
        "--model-path",
        "/my models/x",
    ]


def test_unbalanced_quote_is_an_error_but_the_rest_is_explained(session: Session) -> None:
    result = run(session, f"{SERVE} --model-path m --tp 2 --chat-template 'oops")
    assert find(result, "parse")["severity"] == "error"
    assert [f["name"] for f in result["flags"]][:2] == ["--model-path", "--tp-size"]


# --- parsing like argparse --------------------------------------------------------------------


def table_v2(session: Session) -> OptionTable:
    return OptionTable(facts(session).flags)


def test_equals_syntax_alias_and_store_true(session: Session) -> None:
    uses, leftovers = parse(
        ["--model=m", "--tensor-parallel-size=4", "--enable-mixed-chunk", "--pp-size", "2"],
        table_v2(session),
    )
    assert leftovers == []
    got = [(u.match.kind, u.flag.name if u.flag else None, u.values) for u in uses]
    assert got == [
        ("alias", "--model-path", ["m"]),
        ("alias", "--tp-size", ["4"]),
        ("exact", "--enable-mixed-chunk", []),
        ("exact", "--pp-size", ["2"]),
    ]


def test_abbreviation_is_accepted_with_a_warning(session: Session) -> None:
    result = run(session, f"{SERVE} --model-path m --mem-frac=0.8 --speculative-algo EAGLE")
    abbreviations = [f for f in result["findings"] if f["kind"] == "abbreviation"]
    assert {f["flag"] for f in abbreviations} == {
        "--mem-fraction-static",
        "--speculative-algorithm",
    }
    assert all(f["severity"] == "warning" for f in abbreviations)
    assert result["errors"] == 0


def test_ambiguous_abbreviation_is_an_error(session: Session) -> None:
    result = run(session, f"{SERVE} --model-path m --enable 1")
    finding = find(result, "ambiguous")
    assert finding["severity"] == "error"
    assert "--enable-mixed-chunk" in finding["candidates"]
    assert "--enable-two-batch-overlap" in finding["candidates"]
    # The word after it belongs to it: it is not reported a second time as unplaced.
    assert "unplaced" not in kinds(result)


def test_a_prefix_of_two_spellings_of_one_flag_is_ambiguous(session: Session) -> None:
    # "--te" matches the alias --tensor-parallel-size alone. "--t" matches --tp-size too:
    # argparse counts option strings, not flags, so that is ambiguous although both name
    # one flag (CPython 3.11 and 3.13 alike).
    uses, _ = parse(["--te", "2"], table_v2(session))
    assert uses[0].match.kind == "abbreviation" and uses[0].flag is not None
    assert uses[0].flag.name == "--tp-size"
    uses, _ = parse(["--t", "2"], table_v2(session))
    assert uses[0].match.kind == "ambiguous"
    assert set(uses[0].match.candidates) == {"--tp-size", "--tensor-parallel-size"}


def test_nargs_star_takes_the_following_words(session: Session) -> None:
    uses, leftovers = parse(["--lora-paths", "a", "b", "c", "--tp-size", "2"], table_v2(session))
    assert uses[0].values == ["a", "b", "c"] and leftovers == []
    result = run(session, f"{SERVE} --model-path m --lora-paths a b --tp-size 2")
    assert result["flags"][1]["value"] == ["a", "b"]
    assert result["errors"] == 0


def test_missing_argument_and_value_given_to_a_switch(session: Session) -> None:
    result = run(session, f"{SERVE} --model-path --tp-size 2 --enable-mixed-chunk=yes")
    messages = [f["message"] for f in result["findings"] if f["kind"] == "arguments"]
    assert any("--model-path expects one argument" in m for m in messages)
    assert any("takes no argument" in m for m in messages)


def test_negative_numbers_are_values_and_double_dash_is_unplaced(session: Session) -> None:
    # `--` makes every later word plain, and SGLang's parser has no positionals: argparse
    # stops with "unrecognized arguments: -- --tp-size".
    uses, leftovers = parse(["--chunked-prefill-size", "-1", "--", "--tp-size"], table_v2(session))
    assert uses[0].values == ["-1"]
    assert leftovers == ["--", "--tp-size"]


def test_junk_input_gives_findings_not_crashes(session: Session) -> None:
    for junk in [
        "",
        "   \n\\\n",
        "hello world",
        "'''",
        "-",
        "--",
        "$(rm -rf /)",
        "\x01\x02",
        "=" * 50,
    ]:
        result = run(session, junk)
        assert isinstance(result["findings"], list)
    # no shell passes NUL in argv (and PostgreSQL text cannot hold it): refused, not explained
    with pytest.raises(CommandRejected, match="NUL"):
        run(session, "\x00\x01")
    result = run(session, f"{SERVE} --model-path m stray words")
    unplaced = [f for f in result["findings"] if f["kind"] == "unplaced"]
    assert [f["severity"] for f in unplaced] == ["error", "error"]
    assert "`stray`" in unplaced[0]["message"]


# --- findings -----------------------------------------------------------------------------------


def test_unknown_flag_with_did_you_mean(session: Session) -> None:
    result = run(session, f"{SERVE} --model-path m --enable-two-batch-overlaps")
    finding = find(result, "unknown_flag")
    assert finding["severity"] == "error"
    assert finding["suggestions"][0] == "--enable-two-batch-overlap"
    assert "did you mean --enable-two-batch-overlap" in finding["message"]


def test_invalid_choice_lists_valid_ones_and_suggests(session: Session) -> None:
    result = run(session, f"{SERVE} --model-path m --moe-runner-backend flashinfer_cutlas")
    finding = find(result, "invalid_choice")
    assert finding["severity"] == "error"
    assert finding["choices"] == ["auto", "triton", "flashinfer_cutlass"]
    assert finding["suggestions"] == ["flashinfer_cutlass"]
    assert finding["source"]["path"] == explain_kb.ARGS


def test_wrong_type_is_an_error(session: Session) -> None:
    result = run(session, f"{SERVE} --model-path m --tp-size two --mem-fraction-static 0.8x")
    wrong = [f for f in result["findings"] if f["kind"] == "wrong_type"]
    assert [f["flag"] for f in wrong] == ["--tp-size", "--mem-fraction-static"]
    assert "expects an integer, got 'two'" in wrong[0]["message"]


def test_missing_required_flag(session: Session) -> None:
    result = run(session, f"{SERVE} --tp-size 2")
    finding = find(result, "missing_required")
    assert finding["severity"] == "error" and finding["flag"] == "--model-path"


def test_deprecated_flag_names_its_replacement(session: Session) -> None:
    result = run(session, f"{SERVE} --model-path m --enable-deepep-moe")
    finding = find(result, "deprecated")
    assert finding["severity"] == "warning"
    # With the value SGLang's message names (one of the replacement's choices).
    assert finding["replacement"] == "--moe-a2a-backend=deepep"
    assert "use --moe-a2a-backend=deepep instead" in finding["message"]


def test_deprecated_names_the_stored_replacement() -> None:
    """The replacement as the ingest stored it (the flag page's): explain reads no value from
    the message itself, so `use --widget-backend safe` (unquoted, which the ingest leaves
    without a value) stays `--widget-backend`."""
    from kb.explain.checks import UseChecker
    from kb.explain.facts import FlagSpec, VersionFacts
    from kb.explain.parsing import OptionTable

    new = FlagSpec(name="--widget-backend", dest="widget_backend", choices=("fast", "safe"))
    facts = VersionFacts(name="v", flags=[new])

    def named(message: str, replacement: str | None) -> Any:
        findings: list[Any] = []
        old = FlagSpec(
            name="--old", dest="old", deprecated=True, replacement=replacement,
            deprecated_message=message,
        )  # fmt: skip
        UseChecker(facts, OptionTable(facts.flags), findings).deprecated(old)
        return findings[0]["replacement"]

    assert named("Use --widget-backend safe instead.", "--widget-backend") == "--widget-backend"
    assert named("Use '--widget-backend safe'.", "--widget-backend=safe") == "--widget-backend=safe"
    assert named("Deprecated.", None) is None


def test_default_value_given_is_info(session: Session) -> None:
    result = run(session, f"{SERVE} --model-path m --tp-size 1 --moe-runner-backend auto")
    defaults = [f for f in result["findings"] if f["kind"] == "default_value"]
    assert {f["flag"] for f in defaults} == {"--tp-size", "--moe-runner-backend"}
    assert all(f["severity"] == "info" for f in defaults)
    # At v0.3.0 the runner default changed, so giving `auto` is no longer a default.
    newer = run(session, f"{SERVE} --model-path m --moe-runner-backend auto", version="v0.3.0")
    assert "default_value" not in kinds(newer)


def test_shell_variables_are_not_checked(session: Session) -> None:
    result = run(session, f'{SERVE} --model-path "$MODEL" --tp-size ${{TP}} $EXTRA_ARGS')
    assert result["errors"] == 0
    assert find(result, "shell")["severity"] in ("info", "warning")


def test_every_flag_has_a_help_line_linking_to_its_page(session: Session) -> None:
    result = run(session, f"{SERVE} --model m --tp 2")
    rows = {row["name"]: row for row in result["flags"]}
    assert rows["--model-path"]["help"] == "Where the weights live."
    assert rows["--model-path"]["url"] == "/v/v0.2.0/flags/--model-path"
    assert rows["--tp-size"]["via"] == "abbreviation"


# --- constraint sites -------------------------------------------------------------------------


def test_raise_fires_and_is_cited(session: Session) -> None:
    result = run(session, f"{SERVE} --model-path m --enable-two-batch-overlap")
    finding = find(result, "constraint")
    assert finding["severity"] == "error"
    assert finding["message"].startswith("raises at server_args.py:")
    assert "all-to-all" in finding["message"]
    assert finding["source"]["url"].startswith(explain_kb.WEB_URL + "/blob/")
    # Given the backend the raise wants, it stops firing.
    fixed = run(
        session, f"{SERVE} --model-path m --enable-two-batch-overlap --moe-a2a-backend deepep"
    )
    assert "constraint" not in kinds(fixed)


def test_override_is_reported_and_applied_before_the_assert(session: Session) -> None:
    result = run(session, f"{SERVE} --model-path m --pp-size 2")
    finding = find(result, "constraint")
    assert finding["message"].startswith("overrides --disable-overlap-schedule to True at ")
    assert finding["severity"] == "warning"
    # The assert after it holds because the override already disabled the overlap schedule.
    assert not any("assertion fails" in f["message"] for f in result["findings"])


def test_assertion_fails(session: Session) -> None:
    result = run(session, f"{SERVE} --model-path m --pp-size 2 --speculative-algorithm EAGLE")
    assert any(
        f["message"].startswith("assertion fails at server_args.py:") and f["severity"] == "error"
        for f in result["findings"]
    )


def test_value_computed_at_run_time_makes_the_site_undecidable(session: Session) -> None:
    result = run(session, f"{SERVE} --model-path m --enable-mixed-chunk")
    finding = find(result, "undecidable")
    assert finding["severity"] == "info"
    assert "cannot be decided here" in finding["message"]
    assert "--mem-fraction-static is computed at run time" in finding["message"]
    # Given the value, the same site is decided both ways.
    fires = run(session, f"{SERVE} --model-path m --enable-mixed-chunk --mem-fraction-static 0.95")
    assert "raises at" in find(fires, "constraint")["message"]
    holds = run(session, f"{SERVE} --model-path m --enable-mixed-chunk --mem-fraction-static 0.5")
    assert "constraint" not in kinds(holds) and "undecidable" not in kinds(holds)


def test_condition_calling_a_function_is_undecidable(session: Session) -> None:
    result = run(session, f"{SERVE} --model-path m --enable-torch-compile")
    finding = find(result, "undecidable")
    assert "depends on the model/hardware/environment" in finding["message"]
    assert "calls is_hip()" in finding["message"]


def test_override_of_a_value_you_gave_says_so(session: Session) -> None:
    result = run(session, f"{SERVE} --model-path m --chunked-prefill-size -5")
    finding = find(result, "constraint")
    assert "overrides --chunked-prefill-size to -1" in finding["message"]
    assert "you gave -5" in finding["message"]


# --- across versions --------------------------------------------------------------------------


def test_valid_in_ranges_and_what_limits_them(session: Session) -> None:
    result = run(session, f"{SERVE} --model-path m --tp 2 --enable-two-batch-overlap")
    assert result["valid_in"] == [
        {
            "from": "v0.2.0",
            "to": "v0.2.0",
            "versions": 1,
            "limited_from": [
                {
                    "flag": "--enable-two-batch-overlap",
                    "problem": "missing",
                    "message": "unknown flag --enable-two-batch-overlap in v0.1.0",
                }
            ],
            "before": "v0.1.0",
            # --tp becomes ambiguous with --tp-offload in v0.3.0
            "limited_to": [
                {
                    "flag": "--tp",
                    "problem": "ambiguous",
                    "message": "ambiguous abbreviation --tp: could match --tp-offload, --tp-size",
                }
            ],
            "after": "v0.3.0",
        }
    ]
    assert result["presence"]["--tp"] == [{"from": "v0.1.0", "to": "v0.2.0"}]


def _version(name: str, *flags: FlagSpec) -> VersionOptions:
    return VersionOptions.of_flags(name, flags)


def test_valid_in_pure_function_with_gaps() -> None:
    x, y, yy = FlagSpec("--x", "x"), FlagSpec("--y", "y"), FlagSpec("--yy", "yy")
    versions = [_version("a", x), _version("b", x, y), _version("c", y), _version("d", x, y, yy)]
    got = valid_in(f"{SERVE} --x 1 --y 2", versions)
    assert [(r["from"], r["to"]) for r in got] == [("b", "b"), ("d", "d")]
    assert [(i["flag"], i["problem"]) for i in got[0]["limited_from"]] == [("--y", "missing")]
    assert [(i["flag"], i["problem"]) for i in got[0]["limited_to"]] == [("--x", "missing")]
    assert got[1]["after"] is None and got[1]["limited_to"] == []
    assert valid_in(f"{SERVE} --nope", versions) == []
    # versions that parse alike share one analysis; the limit's message names its own version
    only = valid_in(f"{SERVE} --x 1 --y 2", [_version("a0", x), *versions])[0]
    assert only["limited_from"][0]["message"] == "unknown flag --y in a"


def test_valid_in_counts_a_version_only_where_the_values_are_accepted() -> None:
    """A choice added in one version and removed in a later one bounds the range, as does a
    type that stops accepting the word and a flag whose action starts raising."""
    lb = FlagSpec("--lb", "lb", choices=("auto",))
    versions = [
        _version("a", lb, FlagSpec("--n", "n", type="str")),
        _version("b", replace(lb, choices=("auto", "shortest")), FlagSpec("--n", "n", type="str")),
        _version("c", replace(lb, choices=("auto", "shortest")), FlagSpec("--n", "n", type="str")),
        _version("d", replace(lb, choices=("auto", "shortest")), FlagSpec("--n", "n", type="int")),
        _version("e", lb, FlagSpec("--n", "n", type="str")),
    ]
    got = valid_in(f"{SERVE} --lb shortest --n two", versions)
    assert [(r["from"], r["to"], r["versions"]) for r in got] == [("b", "c", 2)]
    (start,) = got[0]["limited_from"]
    assert start["flag"] == "--lb" and start["problem"] == "invalid_choice"
    assert "invalid choice 'shortest'" in start["message"]
    (end,) = got[0]["limited_to"]
    assert end["flag"] == "--n" and end["problem"] == "wrong_type"
    raising = replace(lb, choices=None, deprecated_kind="raises", action_error="use --other")
    assert valid_in(f"{SERVE} --lb x", [_version("a", lb), _version("b", raising)]) == []


def test_valid_in_agrees_with_explain_at_every_version(session: Session) -> None:
    """A value no version accepts: no range at all, although every flag exists everywhere."""
    result = run(session, f"{SERVE} --model-path m --moe-runner-backend bogus")
    assert kinds(result, "error") == ["invalid_choice"]
    assert result["presence"]["--moe-runner-backend"] == [{"from": "v0.1.0", "to": "v0.3.0"}]
    assert result["valid_in"] == []


def test_upgrade_check_lists_removed_flags_defaults_and_constraints(session: Session) -> None:
    command = f"{SERVE} --model-path m --enable-deepep-moe --moe-runner-backend auto --pp-size 2"
    result = run(session, command, version="v0.1.0", compare_to="v0.3.0")
    compare = result["compare"]
    assert [r["flag"] for r in compare["removed"]] == ["--enable-deepep-moe"]
    assert {"pp-overlap"} <= {f["key"] for f in compare["constraints_started"]}
    defaults = {d["flag"] for d in compare["defaults_changed"]}
    assert "--moe-runner-backend" not in defaults  # given in the command: not "under you"
    assert compare["errors"] >= 1 and any(
        f["kind"] == "unknown_flag" for f in compare["findings_new"]
    )


def test_unknown_version_suggests_names(session: Session) -> None:
    with pytest.raises(NotFound) as info:
        run(session, f"{SERVE} --model-path m", version="v0.2")
    assert "v0.2.0" in info.value.suggestions


def test_abbreviation_finding_is_pure() -> None:
    flags = [FlagSpec("--alpha-beta", "alpha_beta", type="int", default=0)]
    analysis = analyze(VersionFacts("x", flags), "--alpha 3")
    assert [f["kind"] for f in analysis.findings] == ["abbreviation"]
    assert analysis.env["alpha_beta"] == 3


# --- API and page -----------------------------------------------------------------------------


def test_api_explain_follows_the_contract(client: TestClient) -> None:
    response = client.post(
        "/api/explain",
        json={
            "version": "v0.2.0",
            "command": f"{SERVE} --model-path m --pp-size 2 --tp x 2>&1 | tee log",
            "compare": "v0.3.0",
        },
    )
    assert response.status_code == 200
    body = response.json()
    assert {"flags", "findings", "valid_in", "compare"} <= set(body)
    for finding in body["findings"]:
        assert {"severity", "flag", "message", "source"} <= set(finding)
        if finding["source"]:
            assert {"path", "line", "end_line", "url", "permalink"} <= set(finding["source"])
    assert {"parse", "wrong_type", "constraint"} <= {f["kind"] for f in body["findings"]}
    assert body["compare"]["to"] == "v0.3.0"


def test_api_errors_are_json(client: TestClient) -> None:
    missing = client.post("/api/explain", json={"version": "v9", "command": "--tp 1"})
    assert missing.status_code == 404
    assert missing.json()["suggestions"]
    # Statuses as documented in docs/API.md: too long 413, a body missing a field 422,
    # a body that is not JSON or a bad query parameter 400; all of them an ErrorBody.
    too_long = client.post("/api/explain", json={"command": "x" * 30_000})
    assert (too_long.status_code, too_long.json()["kind"]) == (413, "command")
    assert client.get("/api/explain", params={"command": "x" * 30_000}).status_code == 413
    no_command = client.post("/api/explain", json={"version": "v0.2.0"})
    assert (no_command.status_code, no_command.json()["kind"]) == (422, "body")
    assert no_command.json()["name"] == "command"
    not_json = client.post(
        "/api/explain", content=b"{", headers={"content-type": "application/json"}
    )
    assert not_json.status_code == 400
    no_query = client.get("/api/explain", params={"version": "v0.2.0"})
    assert (no_query.status_code, no_query.json()["kind"]) == (400, "parameter")


def test_page_is_a_permalink_and_escapes_input(client: TestClient) -> None:
    command = f"{SERVE} --model-path m --enable-two-batch-overlap --x '<script>alert(1)</script>'"
    page = client.get("/explain", params={"version": "v0.2.0", "command": command})
    assert page.status_code == 200
    html = page.text
    assert "raises at server_args.py:" in html
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;" in html
    assert 'href="/v/v0.2.0/source/' in html  # the in-app citation
    assert 'option value="v0.2.0" selected' in html


def test_htmx_request_gets_only_the_results(client: TestClient) -> None:
    params = {"version": "v0.2.0", "command": "--model-path m --pp-size 2"}
    fragment = client.get("/explain", params=params, headers={"HX-Request": "true"})
    assert fragment.status_code == 200
    assert fragment.text.lstrip().startswith('<section id="explain-results"')
    assert "overrides --disable-overlap-schedule" in fragment.text


def test_page_with_unknown_version_keeps_the_command(client: TestClient) -> None:
    page = client.get("/explain", params={"version": "v0.2", "command": "--pp-size 2"})
    assert page.status_code == 404
    assert "/explain?version=v0.2.0&amp;command=--pp-size+2" in page.text


# --- CLI ------------------------------------------------------------------------------------------


def test_cli_exit_status_follows_errors(db_url: str) -> None:
    db = db_url.removeprefix("sqlite:///")
    runner = CliRunner()
    bad = runner.invoke(
        cli,
        [
            "explain",
            "--db",
            db,
            "--version",
            "v0.2.0",
            "--",
            *SERVE.split(),
            "--model-path",
            "m",
            "--enable-two-batch-overlap",
        ],
    )
    assert bad.exit_code == 1, bad.output
    assert "raises at server_args.py:" in bad.output
    good = runner.invoke(
        cli, ["explain", "--db", db, "--version", "v0.2.0", "--", "--model-path", "m", "--tp", "2"]
    )
    assert good.exit_code == 0, good.output
    assert "abbreviation of --tp-size" in good.output
    as_json = runner.invoke(cli, ["explain", "--db", db, "--json", "--", "--model-path m --tp 2"])
    printed = json.loads(as_json.output)
    assert printed["version"] == "v0.3.0"  # newest by default
    api = TestClient(create_app(db_url)).post(
        "/api/explain", json={"command": "--model-path m --tp 2"}
    )
    assert printed == api.json()  # the CLI prints the API's model
    unknown = runner.invoke(cli, ["explain", "--db", db, "--version", "v9", "--", "--tp", "1"])
    assert unknown.exit_code == 2


def test_cli_reads_stdin(db_url: str) -> None:
    db = db_url.removeprefix("sqlite:///")
    result = CliRunner().invoke(
        cli,
        ["explain", "--db", db, "--version", "v0.2.0"],
        input=f"{SERVE} \\\n  --model-path m \\\n  --pp-size 2\n",
    )
    assert result.exit_code == 0, result.output
    assert "overrides --disable-overlap-schedule to True" in result.output


def test_fixture_citations_point_at_the_cited_line(session: Session) -> None:
    from kb.schema import VersionFile, blob_text

    version = get_version(session, "v0.2.0")
    site = next(s for s in facts(session).sites if s.key == "tbo-a2a")
    sha = session.get(VersionFile, (version.id, explain_kb.ARGS)).sha  # type: ignore[union-attr]
    text = blob_text(session, sha)
    assert text is not None
    assert "raise" in text.splitlines()[site.line - 1]
    assert Path(explain_kb.ARGS).name == "server_args.py"


def test_alias_spelling_of_a_dest_reaches_the_conditions() -> None:
    # argparse stores --tensor-parallel-size as tensor_parallel_size, SGLang's code reads
    # self.tp_size: a site naming tp_size must still see the value given as --tp.
    flags = [
        FlagSpec("--tensor-parallel-size", "tensor_parallel_size", ("--tp-size",), "int", 1),
        FlagSpec("--nnodes", "nnodes", (), "int", 1),
    ]
    site = SiteSpec(
        "assert",
        "check",
        ("not (self.tp_size % self.nnodes == 0)",),
        "tp must divide by nodes",
        ("tp_size", "--nnodes"),
        path="srv/server_args.py",
        line=7,
    )
    fails = analyze(VersionFacts("x", flags, [site]), "--tp 3 --nnodes 2")
    assert any(
        f["message"].startswith("assertion fails at server_args.py:7") for f in fails.findings
    )
    holds = analyze(VersionFacts("x", flags, [site]), "--tp 4 --nnodes 2")
    assert not any(f["kind"] == "constraint" for f in holds.findings)
    shell = analyze(VersionFacts("x", flags, [site]), "--tp $TP --nnodes 2")
    undecided = [f for f in shell.findings if f["kind"] == "undecidable"]
    assert "depends on a value from the shell" in undecided[0]["message"]


def test_an_action_deprecation_warning_is_one_finding() -> None:
    # The warning site of a deprecated flag's action (`DeprecatedStoreTrueAction.__call__`)
    # and the flag's "deprecated" finding say one thing: the finding naming the replacement.
    flags = [
        FlagSpec("--stream-widgets", "stream_widgets", action="store_true"),
        FlagSpec(
            "--stream-widget",
            "stream_widgets",
            action="DeprecatedStoreTrueAction",
            deprecated=True,
            replacement="--stream-widgets",
            deprecated_kind="warns",
        ),
    ]
    site = SiteSpec(
        "warning",
        "DeprecatedStoreTrueAction.__call__",
        (),
        "'--stream-widget' is deprecated and will be removed. Use '--stream-widgets' instead.",
        ("--stream-widget",),
        ("--stream-widgets",),
        path="srv/argparse_actions.py",
        line=9,
    )
    found = analyze(VersionFacts("x", flags, [site]), "--stream-widget").findings
    assert [(f["kind"], f.get("replacements")) for f in found] == [
        ("deprecated", ["--stream-widgets"])
    ]
    # Any other warning site of the flag is still its own finding.
    other = SiteSpec("warning", "ServerArgs.check", (), "streams are slow", ("--stream-widget",))
    found = analyze(VersionFacts("x", flags, [site, other]), "--stream-widget").findings
    assert [f["kind"] for f in found] == ["deprecated", "constraint"]


def test_site_relevance_does_not_depend_on_the_ingest_listing_the_flag() -> None:
    # The ingest may not map a renamed dest (pp_size for --pipeline-parallel-size) to an
    # option; the condition text still says which flag it reads.
    flags = [
        FlagSpec("--pipeline-parallel-size", "pipeline_parallel_size", ("--pp-size",), "int", 1),
        FlagSpec("--disable-overlap-schedule", "disable_overlap_schedule", action="store_true"),
    ]
    site = SiteSpec(
        "override",
        "handle",
        ("self.pp_size > 1",),
        affects=("--disable-overlap-schedule",),
        writes=(("disable_overlap_schedule", "True"),),
        path="srv/server_args.py",
        line=9,
    )
    result = analyze(VersionFacts("x", flags, [site]), "--pp-size 2")
    assert [f["message"] for f in result.findings if f["kind"] == "constraint"] == [
        "overrides --disable-overlap-schedule to True at server_args.py:9"
    ]
