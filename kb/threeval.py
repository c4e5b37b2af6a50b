"""Three-valued evaluation: the one `Unknown` and the bounded operators every evaluator uses.

The ingest folds constants (ingest.static_eval) and follows literal arguments
(ingest.indirect); explain decides stored conditions (kb.explain.safe_eval), replays SGLang's
argument handling (kb.explain.simulate) and reads which values a test is true for
(kb.polarity). All compute with plain Python values and, where a value cannot be known
statically, an `Unknown` that says why in words (`needs`), and may narrow it to a few
`options` or a `likely` value.

The operations here never raise on an unknown operand nor build a value past the bounds:
they return an Unknown saying why. Nothing is eval'ed: an operator is a lookup of its AST
node's type in a table of functions written here.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

# What one operation may build: it costs a bounded amount of work whatever the operands
# (`[0] * dp_size` with a huge value from a command, `2 ** 10 ** 9` in a condition).
MAX_SIZE = 100_000  # items or characters of a str, list, tuple, set or dict
MAX_INT_BITS = 256
MAX_EXPONENT = 64
MAX_POWER_BITS = 4096  # bits of the base times the exponent, checked before computing
MAX_KNOWN_ITEMS = 10_000  # a container larger than this is not a value to compute with
MAX_OPTIONS = 4  # possible values an Unknown keeps
MAX_COMBINATIONS = 16  # of the options of an operation's unknown operands

CANNOT_COMPUTE = "a value this analysis cannot compute"

NO_LIKELY: Any = type("NoLikely", (), {"__repr__": lambda self: "NO_LIKELY"})()


@dataclass(frozen=True)
class Unknown:
    """A value that cannot be known statically. `needs` says why in words (the facts that
    would decide it, or what the evaluator does not interpret); `options` lists the values
    it may have when they are few and all known; `likely` is the value it has under the
    assumption the caller states (kb.explain: SGLang keeps a flag the command gave),
    NO_LIKELY when there is none."""

    needs: tuple[str, ...]
    options: tuple[Any, ...] | None = None
    likely: Any = NO_LIKELY

    def __bool__(self) -> bool:  # a forgotten check must not read as True
        raise TypeError("Unknown has no truth value; test it with is_unknown()")

    @property
    def reason(self) -> str:
        return ", ".join(self.needs) if self.needs else "unknown"


def unknown(*needs: str) -> Unknown:
    return Unknown(tuple(dict.fromkeys(n for n in needs if n)))


def is_unknown(value: object) -> bool:
    return isinstance(value, Unknown)


def merge_needs(*values: Any) -> tuple[str, ...]:
    """The needs of the unknown ones among `values`, each once, in order."""
    needs: dict[str, None] = {}
    for v in values:
        if isinstance(v, Unknown):
            needs.update(dict.fromkeys(v.needs))
    return tuple(needs)


def likely_of(value: Any) -> Any:
    return value.likely if isinstance(value, Unknown) else value


class Named:
    """Base of the values that stand for one named thing (an enum member, a class, a name
    not interpreted): known, and one object in Python, so `is` is `==` for them."""


SCALARS = (str, int, float, bool, type(None))


def is_known(value: Any) -> bool:
    """A value to compute with: scalars, Named values and small containers of them."""
    if isinstance(value, (*SCALARS, Named)):
        return True
    if isinstance(value, list | tuple | set | frozenset):
        return len(value) <= MAX_KNOWN_ITEMS and all(is_known(v) for v in value)
    if isinstance(value, dict):
        return len(value) <= MAX_KNOWN_ITEMS and all(
            is_known(k) and is_known(v) for k, v in value.items()
        )
    return False


def same_value(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def options_of(values: Iterable[Any]) -> tuple[Any, ...] | None:
    """The few known values `values` (some of them Unknown with options) may be, or None."""
    out: list[Any] = []
    for v in values:
        if isinstance(v, Unknown):
            if v.options is None:
                return None
            candidates: Iterable[Any] = v.options
        else:
            if not is_known(v):
                return None
            candidates = [v]
        for c in candidates:
            if not any(same_value(c, o) for o in out):
                out.append(c)
    return tuple(out) if len(out) <= MAX_OPTIONS else None


class Refused(ValueError):
    """An operation refused by a bound or by its operands' types; the text says why."""


def lift(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn` applied to values some of which may be Unknown: known when every combination of
    their few options agrees, else Unknown with the needs of the operands. An operation
    failing on known values is Unknown saying why (`Refused`), or CANNOT_COMPUTE."""
    if not any(isinstance(a, Unknown) for a in args):
        try:
            return fn(*args)
        except Refused as exc:
            return unknown(str(exc))
        except Exception:  # noqa: BLE001 - a type error in the analysed code under our values
            return unknown(CANNOT_COMPUTE)
    combos: list[list[Any]] = [[]]
    for a in args:
        if isinstance(a, Unknown):
            if a.options is None:
                return Unknown(merge_needs(*args), None, likely_result(fn, args))
            combos = [c + [o] for c in combos for o in a.options]
        else:
            combos = [c + [a] for c in combos]
        if len(combos) > MAX_COMBINATIONS:
            return Unknown(merge_needs(*args), None, likely_result(fn, args))
    results = []
    for combo in combos:
        try:
            results.append(fn(*combo))
        except Exception:  # noqa: BLE001
            return Unknown(merge_needs(*args), None, likely_result(fn, args))
    first = results[0]
    if all(same_value(r, first) for r in results):
        return first
    return Unknown(merge_needs(*args), options_of(results), likely_result(fn, args))


def likely_result(fn: Callable[..., Any], args: Sequence[Any]) -> Any:
    values = [a.likely if isinstance(a, Unknown) else a for a in args]
    if any(v is NO_LIKELY for v in values):
        return NO_LIKELY
    try:
        return fn(*values)
    except Exception:  # noqa: BLE001
        return NO_LIKELY


# --- truth -------------------------------------------------------------------------------


def truth(value: Any) -> bool | Unknown:
    """True, False, or Unknown (with the value's options and likely value read as truths)."""
    if isinstance(value, Unknown):
        return lift(bool, value)  # type: ignore[no-any-return]
    try:
        return bool(value)
    except Exception:  # noqa: BLE001 - an object of the analysed code's own making
        return unknown(CANNOT_COMPUTE)


def not_(value: bool | Unknown) -> bool | Unknown:
    """`not` of a truth."""
    return lift(operator.not_, value)  # type: ignore[no-any-return]


def _decide(truths: Iterable[bool | Unknown], decider: bool) -> bool | Unknown:
    pending: list[Unknown] = []
    for t in truths:  # consumed lazily: an operand after the deciding one is not evaluated
        if t is decider:
            return decider
        if isinstance(t, Unknown):
            pending.append(t)
    if not pending:
        return not decider
    likelies = [p.likely for p in pending]
    likely = NO_LIKELY
    if all(v is not NO_LIKELY for v in likelies):
        likely = any(likelies) if decider else all(likelies)
    return Unknown(merge_needs(*pending), None, likely)


def all_of(truths: Iterable[bool | Unknown]) -> bool | Unknown:
    """Three-valued `and`: False as soon as one is False (whatever the unknown ones), True
    when all are, else Unknown with the needs of the unknown ones."""
    return _decide(truths, False)


def any_of(truths: Iterable[bool | Unknown]) -> bool | Unknown:
    """Three-valued `or`: True as soon as one is True, False when none may be."""
    return _decide(truths, True)


# --- operators ---------------------------------------------------------------------------

_SEQUENCES = (str, list, tuple)
_SIZED = (str, list, tuple, set, frozenset, dict)


def sized(value: Any) -> Any:
    """`value`, or Refused when it is past the bounds."""
    if isinstance(value, _SIZED) and len(value) > MAX_SIZE:
        raise Refused("value too large")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise Refused("number too large")
    return value


def _arithmetic(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def apply(a: Any, b: Any) -> Any:
        try:
            result = fn(a, b)
        except TypeError as exc:
            raise Refused(f"mixes {type(a).__name__} and {type(b).__name__}") from exc
        except (ArithmeticError, ValueError) as exc:
            if isinstance(exc, Refused):
                raise
            raise Refused(f"arithmetic fails ({exc})") from exc
        return sized(result)

    return apply


def _add(a: Any, b: Any) -> Any:
    if isinstance(a, _SEQUENCES) and isinstance(b, _SEQUENCES) and len(a) + len(b) > MAX_SIZE:
        raise Refused("value too large")
    return a + b


def _mul(a: Any, b: Any) -> Any:
    seq, times = (a, b) if isinstance(a, _SEQUENCES) else (b, a)
    if isinstance(seq, _SEQUENCES) and isinstance(times, int) and len(seq) * times > MAX_SIZE:
        raise Refused("value too large")
    return a * b


def _pow(a: Any, b: Any) -> Any:
    if isinstance(b, int | float) and (
        abs(b) > MAX_EXPONENT or (isinstance(a, int) and a.bit_length() * abs(b) > MAX_POWER_BITS)
    ):
        raise Refused("power too large")
    return a**b


def _lshift(a: Any, b: Any) -> Any:
    if isinstance(b, int) and b > MAX_INT_BITS:
        raise Refused("number too large")
    return a << b


BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    op: _arithmetic(fn)
    for op, fn in {
        ast.Add: _add,
        ast.Sub: operator.sub,
        ast.Mult: _mul,
        ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv,
        ast.Mod: operator.mod,
        ast.Pow: _pow,
        ast.LShift: _lshift,
        ast.BitOr: operator.or_,
        ast.BitAnd: operator.and_,
    }.items()
}


def identical(a: Any, b: Any) -> bool:
    """`is` as SGLang means it: exact for None and booleans, `==` for Named values and other
    objects; refused for numbers and strings, whose identity Python does not promise."""
    if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, str | int | float) or isinstance(b, str | int | float):
        raise Refused("identity of values is not static")
    return bool(a == b)


def _ordered(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def apply(a: Any, b: Any) -> Any:
        try:
            return fn(a, b)
        except TypeError as exc:
            raise Refused(f"compares {type(a).__name__} with {type(b).__name__}") from exc

    return apply


def _contains(a: Any, b: Any) -> bool:
    try:
        return a in b
    except TypeError as exc:
        raise Refused(f"tests membership in {type(b).__name__}") from exc


COMPARISONS: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: _ordered(operator.lt),
    ast.LtE: _ordered(operator.le),
    ast.Gt: _ordered(operator.gt),
    ast.GtE: _ordered(operator.ge),
    ast.In: _contains,
    ast.NotIn: lambda a, b: not _contains(a, b),
    ast.Is: identical,
    ast.IsNot: lambda a, b: not identical(a, b),
}


def _negative(a: Any) -> Any:
    if not isinstance(a, int | float):
        raise Refused(f"applies USub to {type(a).__name__}")
    return -a


def _positive(a: Any) -> Any:
    if not isinstance(a, int | float):
        raise Refused(f"applies UAdd to {type(a).__name__}")
    return +a


UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.USub: _negative, ast.UAdd: _positive}


def binary(op: ast.operator, left: Any, right: Any) -> Any:
    """`left op right`, or Unknown saying why not."""
    fn = BINARY.get(type(op))
    if fn is None:
        return Unknown(merge_needs(left, right) or (f"uses the operator {type(op).__name__}",))
    return lift(fn, left, right)


def compare(op: ast.cmpop, left: Any, right: Any) -> Any:
    """`left op right` for one comparison operator, or Unknown saying why not."""
    if _holds_unknown(left) or _holds_unknown(right):
        return _compare_holding_unknown(op, left, right)
    return lift(COMPARISONS[type(op)], left, right)


def _holds_unknown(value: Any, depth: int = 0) -> bool:
    """A container with an Unknown inside (a tensor's shape with a dimension not decided):
    Python's own `==` would compare the Unknowns as dataclasses, and so decide it."""
    if isinstance(value, list | tuple | set | frozenset) and len(value) <= MAX_KNOWN_ITEMS:
        return depth < 4 and any(
            isinstance(v, Unknown) or _holds_unknown(v, depth + 1) for v in value
        )
    if isinstance(value, dict) and len(value) <= MAX_KNOWN_ITEMS:
        items = [*value.keys(), *value.values()]
        return depth < 4 and any(
            isinstance(v, Unknown) or _holds_unknown(v, depth + 1) for v in items
        )
    return False


def _compare_holding_unknown(op: ast.cmpop, left: Any, right: Any) -> Any:
    """`==` / `!=` item by item (decided by a known item that differs, or by the lengths),
    `in` / `not in` decided by a known item that is equal; Unknown otherwise."""
    needs = merge_needs(left, right, *_unknowns(left), *_unknowns(right))
    if isinstance(op, ast.Is | ast.IsNot) and any(
        v is None or isinstance(v, bool) for v in (left, right)
    ):
        return lift(COMPARISONS[type(op)], left, right)  # (a container is never None)
    if isinstance(op, ast.In | ast.NotIn) and isinstance(right, dict):
        right = list(right)  # (a dict's keys; what its values hold does not matter)
    if isinstance(op, ast.Eq | ast.NotEq) and isinstance(left, list | tuple):
        if type(left) is not type(right) or len(left) != len(right):
            return isinstance(op, ast.NotEq)
        same = all_of(truth(compare(ast.Eq(), a, b)) for a, b in zip(left, right, strict=True))
        return same if isinstance(op, ast.Eq) else not_(same)
    if isinstance(op, ast.In | ast.NotIn) and isinstance(right, list | tuple | set | frozenset):
        found = any_of(truth(compare(ast.Eq(), left, item)) for item in right)
        return found if isinstance(op, ast.In) else not_(found)
    return Unknown(needs or ("a container holding a value not known",))


def _unknowns(value: Any) -> list[Unknown]:
    if isinstance(value, Unknown):
        return [value]
    if isinstance(value, list | tuple | set | frozenset):
        return [u for v in value for u in _unknowns(v)]
    return []


def unary(op: ast.unaryop, operand: Any) -> Any:
    """`not`, `-` and `+` of a value, or Unknown saying why not."""
    if isinstance(op, ast.Not):
        return not_(truth(operand))
    fn = UNARY.get(type(op))
    if fn is None:
        return Unknown(merge_needs(operand) or (f"uses the operator {type(op).__name__}",))
    return lift(fn, operand)
