"""A constraint site as one short sentence for one value (kb/requirements.py): negations
pushed in, the value's own tests decided, `==`/`or` tests collected into sets, earlier
branches folded into "unless", and a value's requirements summed up by topic."""

from __future__ import annotations

import ast

from kb.help_claims import contradictions, help_claims
from kb.requirements import MAX_STATEMENT, Subject, simplify, statement, summarize

OPTIONS = {
    "backend": "--backend",
    "quantization": "--quantization",
    "ep_size": "--ep-size",
    "tp_size": "--tp-size",
    "a2a": "--a2a",
    "device": "--device",
    "deterministic": "--deterministic",
    "topk": "--topk",
    "spec": "--spec",
}
VALUES = frozenset({"a", "b", "c"})


def said(conditions: list[str], value: str | None = "a", kind: str = "raise") -> str:
    subject = Subject("backend", value, VALUES) if value is not None else None
    found = statement(conditions, kind, OPTIONS, subject)
    assert found is not None
    return found.text


def simple(text: str, value: str | None = None, negate: bool = False) -> str:
    subject = Subject("backend", value, VALUES) if value is not None else None
    return ast.unparse(simplify(ast.parse(text, mode="eval").body, subject, negate))


def test_double_negations_fold_and_negations_go_in() -> None:
    assert simple("not (not f())") == "f()"
    assert simple("not (not (not x))") == "not x"
    assert simple("not (a == 1 and b in [2])") == "a != 1 or b not in [2]"
    assert simple("not (x is None or y > 2)") == "x is not None and y <= 2"


def test_tests_of_one_subject_collect_into_a_set() -> None:
    assert simple("q == 'x' or q == 'y' or q is None") == "q in ['x', 'y', None]"
    assert simple("not (q == 'x' or q == 'y')") == "q not in ['x', 'y']"
    # one test alone stays as written
    assert simple("q is None or f()") == "q is None or f()"


def test_the_values_own_tests_are_decided() -> None:
    assert simple("self.backend == 'a' and f()", "a") == "f()"
    assert simple("self.backend == 'b' and f()", "a") == "False"
    assert simple("self.backend in ['a', 'b'] or g()", "a") == "True"
    assert simple("not (self.backend is None)", "a") == "True"
    assert simple("Backend(self.backend).is_a()", "a") == "True"
    assert simple("self.backend.lower() != 'a'", "a") == "False"
    # another flag's test is not the value's
    assert simple("self.a2a == 'a'", "a") == "self.a2a == 'a'"


def test_a_whole_condition_reads_as_what_the_value_requires() -> None:
    conditions = ["self.backend == 'a'", "not (self.quantization in ['fp4', 'fp8', None])"]
    assert said(conditions) == "Requires --quantization ∈ {fp4, fp8, unset}"
    assert said(["self.backend == 'a'", "not (self.ep_size in [1, self.tp_size])"]) == (
        "Requires --ep-size ∈ {1, --tp-size}"
    )


def test_a_negative_test_of_the_flag_is_decided_for_the_other_values() -> None:
    conditions = ["self.a2a == 'fast'", "not (self.backend in ['b'])"]
    assert said(conditions, "a") == "Requires --a2a ≠ fast"
    assert statement(conditions, "raise", OPTIONS, Subject("backend", "b", VALUES)) is None


def test_earlier_branches_fold_into_unless() -> None:
    conditions = [
        "not (is_hip() and self.device == 'cpu')",
        "self.backend == 'a'",
        "not (self.topk == 1)",
    ]
    assert said(conditions) == "Requires --topk = 1, unless is_hip() and --device = cpu"
    assert "not (not" not in said(["not (not (self.spec is None))", "self.backend == 'a'"])


def test_a_check_the_value_itself_fails_reads_fails_when() -> None:
    conditions = ["self.deterministic", "is_big_model", "self.backend not in ['b', 'c']"]
    assert said(conditions) == "Fails when --deterministic and is_big_model"
    assert said(["self.backend == 'a'"]) == "Fails with this value"
    assert said(["self.deterministic", "self.backend == 'a'"]) == "Requires not --deterministic"


def test_a_pinned_name_decides_the_earlier_branches_testing_it() -> None:
    conditions = [
        "not (model_arch in ['Alpha', 'Beta'])",
        "not ('Llama' in model_arch and self.device != 'cpu')",
        "model_arch in ['Gamma']",
        "self.backend == 'a'",
    ]
    assert said(conditions) == "Requires model_arch ≠ Gamma"
    conditions[2] = "model_arch in ['Gamma', 'Llama9']"  # Llama9 keeps the Llama branch
    assert "contains Llama" in said(conditions)


def test_long_sentences_fold_their_unless_then_their_outer_conditions() -> None:
    branches = [f"not (self.spec == 'mode{i}' and long_helper_function_{i}())" for i in range(6)]
    text = said([*branches, "self.backend == 'a'", "not (self.topk == 1)"])
    assert text == "Requires --topk = 1, unless one of 6 earlier branches holds"
    outer = [f"check_the_hardware_thing_number_{i}(self.device)" for i in range(12)]
    text = said([*outer, "self.backend == 'a'", "not (self.topk == 1)"])
    assert len(text) <= MAX_STATEMENT
    assert text.startswith("Requires --topk = 1 when ") and "more conditions)" in text


def test_an_override_switching_to_the_value_keeps_the_flags_tests() -> None:
    found = statement(
        ["self.backend is None", "is_sm100()"],
        "override",
        OPTIONS,
        None,
        {"backend": "'a'"},
    )
    assert found is not None
    assert found.text == "Sets --backend = 'a' when --backend unset and is_sm100()"


def test_a_condition_that_does_not_parse_gives_no_statement() -> None:
    assert statement(["self.backend == ("], "raise", OPTIONS, Subject("backend", "a")) is None


def test_the_summary_sorts_unconditional_requirements_by_topic() -> None:
    def req(conditions: list[str]) -> dict[str, object]:
        found = statement(conditions, "raise", OPTIONS, Subject("backend", "a", VALUES))
        assert found is not None
        return {
            "requirement": found.requirement,
            "topic": found.topic,
            "conditional": found.conditional,
        }

    summary = summarize(
        [
            req(["self.backend == 'a'", "not (self.quantization in ['fp4', None])"]),
            req(["self.backend == 'a'", "not is_sm100_supported()"]),
            req(["self.backend == 'a'", "not (self.ep_size in [1, self.tp_size])"]),
            req(["self.spec == 'x'", "self.backend == 'a'", "self.topk > 1"]),
        ]
    )
    assert summary["quantization"] == ["--quantization ∈ {fp4, unset}"]
    assert summary["gpu"] == ["is_sm100_supported()"]
    assert summary["flags"] == ["--ep-size ∈ {1, --tp-size}"]
    assert summary["model"] == [] and summary["load_time"] == []
    assert summary["conditional"] == 1


# --- a help text a handled value contradicts (kb/help_claims.py) ------------------------------

HELP = "Kernel: 'auto' (default, selects between x_cudnn/x_cutlass by CUDA version), 'x_cudnn'."
CHOICES = ["auto", "x_cudnn", "x_cutlass"]
MAPS = """
def gemm(backend):
    kernel = (
        backend.name()
        if not backend.is_auto()
        else "{literal}"
    )
"""


def found_contradictions(help_text: str, code: str) -> list[dict[str, object]]:
    sites = {"auto": [{"path": "gemm.py", "line": 5, "end_line": 5}]}
    return contradictions(help_text, CHOICES, sites, lambda path: code)


def test_help_claims_need_a_value_choosing_among_named_choices() -> None:
    [claim] = help_claims(HELP, CHOICES)
    assert claim.value == "auto" and claim.named == ("x_cudnn", "x_cutlass")
    assert help_claims("'auto' (default: x_cudnn or x_cutlass)", CHOICES) == []  # no choosing
    assert help_claims("'auto' (selects x_cudnn when it can)", CHOICES) == []  # one named


def test_a_value_the_code_maps_to_one_named_choice_contradicts_the_help() -> None:
    [found] = found_contradictions(HELP, MAPS.format(literal="cutlass"))
    assert (found["value"], found["maps_to"], found["choice"]) == ("auto", "cutlass", "x_cutlass")
    assert (found["line"], found["end_line"]) == (4, 6)
    if_statement = "def g(b):\n    if b == 'auto':\n        k = 'x_cudnn'\n"
    sites = {"auto": [{"path": "g.py", "line": 2}]}
    assert contradictions(HELP, CHOICES, sites, lambda path: if_statement)[0]["choice"] == "x_cudnn"


def test_nothing_is_flagged_when_the_code_agrees_or_says_too_little() -> None:
    assert found_contradictions(HELP, MAPS.format(literal="triton")) == []  # names no choice
    assert found_contradictions(HELP.replace("selects between", "is"), MAPS) == []
    both = MAPS.format(literal="cutlass") + MAPS.format(literal="cudnn").replace("gemm", "g2")
    sites = {"auto": [{"path": "a.py", "line": 5}, {"path": "a.py", "line": 12}]}
    assert contradictions(HELP, CHOICES, sites, lambda path: both) == []  # it does choose
    assert found_contradictions(HELP, "def broken(:\n") == []
