"""The three-valued core every evaluator uses: operators agree with Python on known values,
an Unknown operand propagates with its reason, the bounds hold, and `and`/`or` decide what
one operand settles."""

from __future__ import annotations

import ast
import operator
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ingest.static_eval import CannotFold, Scope, fold
from kb.threeval import (
    NO_LIKELY,
    Unknown,
    all_of,
    any_of,
    binary,
    compare,
    is_unknown,
    lift,
    not_,
    truth,
    unary,
    unknown,
)

SMALL_INTS = st.integers(min_value=-1000, max_value=1000)
SMALL_STRS = st.text(alphabet="abc", max_size=4)

ARITHMETIC = {
    ast.Add(): operator.add,
    ast.Sub(): operator.sub,
    ast.Mult(): operator.mul,
    ast.Div(): operator.truediv,
    ast.FloorDiv(): operator.floordiv,
    ast.Mod(): operator.mod,
    ast.BitOr(): operator.or_,
    ast.BitAnd(): operator.and_,
}
ORDERINGS = {
    ast.Eq(): operator.eq,
    ast.NotEq(): operator.ne,
    ast.Lt(): operator.lt,
    ast.LtE(): operator.le,
    ast.Gt(): operator.gt,
    ast.GtE(): operator.ge,
}


@given(SMALL_INTS, SMALL_INTS, st.sampled_from(list(ARITHMETIC)))
def test_arithmetic_on_small_ints_agrees_with_python(a: int, b: int, op: ast.operator) -> None:
    try:
        expected = ARITHMETIC[op](a, b)
    except ZeroDivisionError:
        result = binary(op, a, b)
        assert is_unknown(result) and "arithmetic fails" in result.reason
        return
    assert binary(op, a, b) == expected


@given(SMALL_INTS, st.integers(min_value=0, max_value=20))
def test_small_powers_and_shifts_agree_with_python(a: int, b: int) -> None:
    assert binary(ast.Pow(), a, b) == a**b
    assert binary(ast.LShift(), a, b) == a << b


@given(SMALL_STRS, SMALL_STRS, st.integers(min_value=0, max_value=5))
def test_string_operations_agree_with_python(a: str, b: str, n: int) -> None:
    assert binary(ast.Add(), a, b) == a + b
    assert binary(ast.Mult(), a, n) == a * n
    assert compare(ast.In(), a, b) is (a in b)
    assert compare(ast.NotIn(), a, b) is (a not in b)


@given(
    st.one_of(st.tuples(SMALL_INTS, SMALL_INTS), st.tuples(SMALL_STRS, SMALL_STRS)),
    st.sampled_from(list(ORDERINGS)),
)
def test_comparisons_agree_with_python(pair: tuple[object, object], op: ast.cmpop) -> None:
    a, b = pair
    assert compare(op, a, b) is ORDERINGS[op](a, b)


@given(SMALL_INTS, st.sampled_from([*ARITHMETIC, ast.Pow()]))
def test_an_unknown_operand_propagates_with_its_reason(a: int, op: ast.operator) -> None:
    why = unknown("the GPU's SM version")
    for result in (binary(op, why, a), binary(op, a, why), compare(ast.Lt(), why, a)):
        assert is_unknown(result) and result.needs == ("the GPU's SM version",)
    both = binary(op, why, unknown("GPU memory"))
    assert both.needs == ("the GPU's SM version", "GPU memory")


@pytest.mark.parametrize(
    ("op", "left", "right", "why"),
    [
        (ast.Pow(), 2, 10**9, "power too large"),
        (ast.Pow(), 10**60, 64, "power too large"),
        (ast.Mult(), "x", 10**9, "value too large"),
        (ast.Mult(), [0], 10**9, "value too large"),
        (ast.Add(), "x" * 60_000, "y" * 60_000, "value too large"),
        (ast.LShift(), 1, 10**9, "number too large"),
        (ast.Mult(), 2**200, 2**200, "number too large"),
    ],
)
def test_bounds_refuse_huge_values_quickly(op: ast.operator, left, right, why: str) -> None:
    start = time.perf_counter()
    result = binary(op, left, right)
    assert is_unknown(result) and result.reason == why
    assert time.perf_counter() - start < 0.5


def test_two_to_the_ten_to_the_nine_folds_to_unknown() -> None:
    inner = binary(ast.Pow(), 10, 9)
    assert inner == 10**9
    assert binary(ast.Pow(), 2, inner).reason == "power too large"


def test_failures_say_why() -> None:
    assert binary(ast.Add(), "x", 1).reason == "mixes str and int"
    assert compare(ast.Lt(), 1, None).reason == "compares int with NoneType"
    assert compare(ast.In(), 1, 5).reason == "tests membership in int"
    assert binary(ast.MatMult(), 1, 2).reason == "uses the operator MatMult"
    assert unary(ast.USub(), "x").reason == "applies USub to str"


def test_identity_is_exact_for_none_and_booleans_only() -> None:
    assert compare(ast.Is(), None, None) is True
    assert compare(ast.IsNot(), False, 0) is True
    assert compare(ast.Is(), 8, 8).reason == "identity of values is not static"


def test_false_and_unknown_is_false_true_or_unknown_is_true() -> None:
    why = unknown("the platform")
    assert all_of([why, False]) is False
    assert any_of([why, True]) is True
    assert all_of([True, True]) is True and any_of([False, False]) is False
    pending = all_of([why, True, unknown("the CUDA version")])
    assert isinstance(pending, Unknown)
    assert pending.needs == ("the platform", "the CUDA version")
    assert not_(why).needs == why.needs


def test_and_stops_at_the_deciding_operand() -> None:
    seen: list[int] = []

    def truths():
        for i, t in enumerate([unknown("x"), False, True]):
            seen.append(i)
            yield t

    assert all_of(truths()) is False
    assert seen == [0, 1]


def test_options_and_likely_values_are_carried() -> None:
    sm = Unknown(("the GPU's SM version",), options=(90, 100), likely=90)
    assert compare(ast.GtE(), sm, 80) is True  # every option agrees
    newer = compare(ast.GtE(), sm, 100)
    assert newer.options == (False, True) and newer.likely is False
    assert not_(truth(newer)).likely is True
    assert truth(Unknown(("x",), options=(1, 2))) is True
    assert lift(len, unknown("x")).likely is NO_LIKELY
    assert all_of([Unknown(("a",), likely=True), Unknown(("b",), likely=False)]).likely is False


def test_an_unknown_has_no_truth_value() -> None:
    with pytest.raises(TypeError):
        bool(unknown("x"))
    assert unknown("a", "", "a").needs == ("a",)
    assert unknown().reason == "unknown"


def test_static_folding_raises_the_unknown_saying_why() -> None:
    with pytest.raises(CannotFold) as raised:
        fold(ast.parse("2 ** 10 ** 9", mode="eval").body, Scope())
    assert raised.value.unknown.reason == "power too large"
    assert fold(ast.parse("10 * 1000 * 1000", mode="eval").body, Scope()) == 10_000_000


def test_a_container_holding_an_unknown_compares_item_by_item() -> None:
    # a tensor's shape with a dimension not decided: Python's `==` would compare the
    # Unknown dataclasses and decide it (an AWQ checkpoint's `packed.shape == (k, n // 8)`)
    k = unknown("the rows per rank")
    assert isinstance(compare(ast.Eq(), (k, 8), (unknown("the groups"), 8)), Unknown)
    assert isinstance(compare(ast.Eq(), (k, 8), (k, 8)), Unknown)  # (not known to be one)
    assert compare(ast.Eq(), (k, 8), (5, 9)) is False  # a known item differs
    assert compare(ast.NotEq(), (k, 8), (5, 9)) is True
    assert compare(ast.Eq(), (k,), (k, 1)) is False  # the lengths differ
    assert compare(ast.In(), 3, [k, 3]) is True
    assert isinstance(compare(ast.In(), 4, [k, 3]), Unknown)
    assert isinstance(compare(ast.NotIn(), 4, [k, 3]), Unknown)


def test_identity_with_none_and_a_dict_s_keys_stay_decided_beside_an_unknown() -> None:
    # `weight_block_size is not None` with a dimension not known; `key in table` whose
    # values are not known: decided (a container is never None; a dict's keys decide `in`)
    block = [128, unknown("the block's other side")]
    assert compare(ast.IsNot(), block, None) is True
    assert compare(ast.Is(), block, None) is False
    assert compare(ast.In(), "fp8", {"fp8": unknown("its method")}) is True
    assert compare(ast.NotIn(), "w4", {"fp8": unknown("its method")}) is True
