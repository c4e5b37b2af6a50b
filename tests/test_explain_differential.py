"""Explain's parse against real argparse (issue 9), on flag rows shaped like the ingest's.

Each era's rows carry the facts the ingest records for argparse's view of a flag
(`takes_value`, `nargs`, `negation`, `deprecated_kind`, `action_error`, `action_path`,
`action_line`). They become explain's facts through `kb.explain.load.flag_spec`, exactly as
rows of the database do, and a real `argparse.ArgumentParser` through
`argparse_oracle.build_parser`; generated commands must get the same verdict from both.
"""

from __future__ import annotations

import functools
import random
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import argparse_oracle as oracle
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kb.contract import Finding
from kb.explain.analysis import analyze
from kb.explain.facts import VersionFacts
from kb.explain.load import flag_spec
from kb.explain.parsing import OptionTable
from kb.schema import Version

ARGS = "python/sglang/srt/server_args.py"


def row(name: str, **kw: Any) -> dict[str, Any]:
    """A flag row with the ingest's defaults: a plain store of one str value."""
    base: dict[str, Any] = {
        "name": name,
        "dest": name.lstrip("-").replace("-", "_"),
        "aliases": "[]",
        "type": "str",
        "default": None,
        "default_expr": None,
        "choices": None,
        "choices_dynamic": False,
        "choices_extensible": False,
        "action": None,
        "nargs": None,
        "const": None,
        "required": False,
        "deprecated": False,
        "deprecated_message": None,
        "replacement": None,
        "help": f"{name} (synthetic).",
        "hidden": False,
        "path": ARGS,
        "line": 10,
        "end_line": 12,
        "takes_value": True,
        "negation": None,
        "deprecated_kind": None,
        "action_error": None,
        "action_path": None,
        "action_line": None,
    }
    base.update(kw)
    return base


def common() -> list[dict[str, Any]]:
    return [
        row("--model-path", aliases='["--model"]', required=True),
        row("--tp-size", aliases='["--tensor-parallel-size"]', type="int", default="1"),
        row("--host", default='"127.0.0.1"'),
        row("--hicache-ratio", type="float", default="2.0"),
        row("--hicache-size", type="int", default="0"),
        row("--mem-fraction-static", type="float"),
        row("--enable-mixed-chunk", action="store_true", takes_value=False, default="false"),
        row("--disable-radix", action="store_true", takes_value=False, default="false"),
        row("--attention-backend", choices='["fa3", "triton", "flashinfer"]'),
        row("--json-model-override-args", type="json.loads", default='"{}"'),
        row("--max-prefill-tokens", type="human_readable_int"),
        row("--stream-interval", type="int", default="1"),
    ]


def era1() -> list[dict[str, Any]]:
    """argparse era: DeprecatedAction with nargs=0 set in its __init__ (class 1), one that
    raises when used (class 8), choices=CONST + ["all"] (class 2)."""
    return [
        *common(),
        row(
            "--enable-overlap-schedule",
            action="DeprecatedAction",
            nargs="0",
            takes_value=False,
            deprecated=True,
            deprecated_kind="warns",
            action_path=ARGS,
            action_line=3,
        ),
        row(
            "--disable-disk-cache",
            action="DeprecatedAction",
            nargs="0",
            takes_value=False,
            deprecated=True,
            deprecated_kind="raises",
            action_error="The option --disable-disk-cache is deprecated: remove it.",
            action_path=ARGS,
            action_line=5,
        ),
        row(
            "--lora-target-modules",
            nargs="*",
            choices='["q_proj", "k_proj", "v_proj", "all"]',
        ),
        row("--lora-paths", nargs="*"),
    ]


def era2() -> list[dict[str, Any]]:
    """Hooks and BooleanOptionalAction (class 3), soft deprecation (class 11)."""
    return [
        *common(),
        row(
            "--lora-strict-loading",
            action="argparse.BooleanOptionalAction",
            takes_value=False,
            negation="--no-lora-strict-loading",
            default="false",
        ),
        row(
            "--enable-ep-moe",
            action="store_true",
            takes_value=False,
            deprecated=True,
            deprecated_kind="soft",
            replacement="--ep-size",
        ),
        row("--ep-size", aliases='["--ep"]', type="int", default="1"),
        row("--moe-runner-backend", choices='["auto", "triton"]', choices_dynamic=True),
        row("--dp-size", type="int", nargs="2"),
    ]


def era3() -> list[dict[str, Any]]:
    """Dataclass era: LoRAPathAction with action_kwargs nargs="*" (class 4), Arg(choices=)
    over the Literal (class 5), store-true style custom actions (class 6), an alias action
    that stores a value (class 7)."""
    return [
        *common(),
        row("--lora-paths", action="LoRAPathAction", nargs="*"),
        row("--cuda-graph-backend-prefill", choices='["none", "piecewise", "full"]'),
        row(
            "--stream-output",
            action="DeprecatedStoreTrueAction",
            takes_value=False,
            default="false",
            deprecated=True,
            deprecated_kind="warns",
        ),
        row(
            "--speculative-dflash-draft-window-size",
            action="DeprecatedAliasStoreAction",
            type="int",
            deprecated=True,
            deprecated_kind="warns",
            replacement="--speculative-draft-window-size",
        ),
        row("--mamba-scheduler-strategy", action="DeprecatedAliasStoreAction"),
        row("--nsa-prefill-cp-mode", action="DeprecatedAliasStoreAction"),
        row("--speculative-draft-window-size", type="int"),
    ]


ERAS = {"v0.4.0": era1, "v0.5.3": era2, "snapshot-2026-07-01": era3}


def version(name: str) -> Version:
    return Version(
        id=1,
        name=name,
        commit="0" * 40,
        date=datetime(2026, 1, 1, tzinfo=UTC),
        sort_key=name,
        era=1,
        extractor_version=0,
        web_url="https://example.invalid/sglang-like",
    )


def facts_of(name: str) -> tuple[VersionFacts, list[dict[str, Any]]]:
    rows = ERAS[name]()
    v = version(name)
    flags = [flag_spec(v, SimpleNamespace(**r)) for r in rows]  # type: ignore[arg-type]
    return VersionFacts(name, flags), rows


def explain(name: str, command: str) -> dict[str, Any]:
    facts, _ = facts_of(name)
    return analyze(facts, f"{oracle.SERVE} --model-path m {command}").to_json()


def errors(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in result["findings"] if f["severity"] == "error"]


def kinds(result: dict[str, Any]) -> set[str]:
    return {f["kind"] for f in result["findings"]}


# --- the differential -----------------------------------------------------------------------


@functools.cache
def prepared(name: str) -> tuple[VersionFacts, oracle.Parser, OptionTable]:
    facts, rows = facts_of(name)
    return facts, oracle.build_parser(rows), OptionTable(facts.flags)


@pytest.mark.parametrize("name", sorted(ERAS))
@settings(
    max_examples=200,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(seed=st.randoms(use_true_random=False))
def test_explain_accepts_and_rejects_what_argparse_does(name: str, seed: random.Random) -> None:
    facts, parser, table = prepared(name)
    argv = oracle.command(seed, facts.flags, table)
    truth, why = oracle.argparse_accepts(parser, argv)
    verdict, found = oracle.explain_accepts(facts, argv)
    assert verdict == truth, (argv, why, found)


def test_the_differential_can_fail() -> None:
    """A parse that ignores nargs="2" disagrees with argparse on `--dp-size 1`."""
    facts, rows = facts_of("v0.5.3")
    argv = ["--model-path", "m", "--dp-size", "1"]
    assert oracle.argparse_accepts(oracle.build_parser(rows), argv)[0] is False
    wrong = [r if r["name"] != "--dp-size" else {**r, "nargs": None} for r in rows]
    wrong_facts = VersionFacts(
        "v0.5.3", [flag_spec(version("x"), SimpleNamespace(**r)) for r in wrong]
    )  # type: ignore[arg-type]
    assert oracle.explain_accepts(wrong_facts, argv)[0] is True


# --- one test per class of issue 9 that explain decides ---------------------------------------


def test_class1_deprecated_action_with_nargs_zero_takes_no_value() -> None:
    result = explain("v0.4.0", "--enable-overlap-schedule --tp-size 2")
    assert errors(result) == []
    assert [f["deprecated_kind"] for f in result["findings"] if f["kind"] == "deprecated"] == [
        "warns"
    ]


def test_class2_appended_choice_is_accepted() -> None:
    assert errors(explain("v0.4.0", "--lora-target-modules all q_proj")) == []


def test_class3_generated_negation_is_known() -> None:
    result = explain("v0.5.3", "--no-lora-strict-loading")
    assert errors(result) == []
    assert result["flags"][1]["name"] == "--lora-strict-loading"
    assert errors(explain("v0.5.3", "--no-lora-strict-loading=1"))  # a switch takes no value


def test_class4_action_kwargs_nargs_takes_several_paths() -> None:
    result = explain("snapshot-2026-07-01", "--lora-paths a b")
    assert errors(result) == [] and result["flags"][1]["value"] == ["a", "b"]


def test_class5_arg_choices_override_the_literal() -> None:
    assert errors(explain("snapshot-2026-07-01", "--cuda-graph-backend-prefill full")) == []


def test_class6_store_true_style_action_takes_no_value() -> None:
    result = explain("snapshot-2026-07-01", "--stream-output --tp-size 2")
    assert errors(result) == []
    assert errors(explain("snapshot-2026-07-01", "--stream-output yes"))  # `yes` is unplaced


def test_class7_alias_store_action_takes_its_value() -> None:
    for command in (
        "--speculative-dflash-draft-window-size 8",
        "--mamba-scheduler-strategy auto",
        "--nsa-prefill-cp-mode round-robin-split",
    ):
        result = explain("snapshot-2026-07-01", command)
        assert errors(result) == [], command
        assert "unplaced" not in kinds(result)


def test_class8_raising_action_is_an_error_with_its_message_and_citation() -> None:
    result = explain("v0.4.0", "--disable-disk-cache")
    (error,) = errors(result)
    assert error["kind"] == "action_raises"
    assert "remove it" in error["message"]
    assert error["source"]["line"] == 5
    assert "deprecated" not in kinds(result)  # not a mere deprecation warning


def test_class11_soft_deprecation_is_distinct_from_an_action_that_warns() -> None:
    soft = [
        f for f in explain("v0.5.3", "--enable-ep-moe")["findings"] if f["kind"] == "deprecated"
    ]
    warns = [
        f
        for f in explain("v0.4.0", "--enable-overlap-schedule")["findings"]
        if f["kind"] == "deprecated"
    ]
    assert [(f["severity"], f["deprecated_kind"]) for f in soft] == [("info", "soft")]
    assert [(f["severity"], f["deprecated_kind"]) for f in warns] == [("warning", "warns")]
    assert "still works" in soft[0]["message"] and "--ep-size" in soft[0]["message"]
    # The JSON API's typed model keeps the field (pydantic would drop an undeclared one).
    assert Finding.model_validate(soft[0]).model_dump()["deprecated_kind"] == "soft"


def test_class12_single_dash_h_prefix_is_help_with_attached_text() -> None:
    result = explain("v0.5.3", "-hicache-ratio 2")
    (error,) = errors(result)
    assert error["kind"] == "attached_text"
    assert "-h" in error["message"] and "`icache-ratio`" in error["message"]
    assert "ignored explicit argument 'icache-ratio'" in error["message"]
    assert error["suggestions"] == ["--hicache-ratio"]
    assert "unplaced" not in kinds(result)  # the `2` belongs to the failed option


def test_class13_a_custom_type_is_never_claimed_valid() -> None:
    result = explain("v0.5.3", "--max-prefill-tokens=4K")
    (note,) = [f for f in result["findings"] if f["kind"] == "unchecked_value"]
    assert note["severity"] == "warning"
    assert "human_readable_int" in note["message"] and "does not evaluate" in note["message"]
    # A type Flag Atlas does evaluate is checked: json.loads rejects what is not JSON.
    assert {f["kind"] for f in errors(explain("v0.5.3", "--json-model-override-args {x"))} == {
        "wrong_type"
    }


def test_facts_without_the_new_columns_still_load() -> None:
    """A knowledge base from before issue 9: the columns are absent, getattr falls back."""
    old = row("--enable-overlap-schedule", action="DeprecatedAction")
    for key in (
        "takes_value",
        "negation",
        "deprecated_kind",
        "action_error",
        "action_path",
        "action_line",
    ):
        old.pop(key)
    spec = flag_spec(version("v0.4.0"), SimpleNamespace(**old))  # type: ignore[arg-type]
    assert spec.takes_value is None and spec.negations == ()
    facts = VersionFacts("v0.4.0", [spec, *facts_of("v0.4.0")[0].flags[:1]])
    result = analyze(facts, f"{oracle.SERVE} --model-path m --enable-overlap-schedule")
    assert errors(result.to_json()) == []
