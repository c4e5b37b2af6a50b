"""Evaluate SGLang condition texts against flag values, without eval or exec.

Condition texts come from an untrusted repository, so they are parsed with `ast` and only a
whitelisted subset is interpreted: names of flags (`self.x`, `server_args.x`, bare `x`),
constants, comparisons, `in`, `is None`, boolean operators, `not`, arithmetic, conditional
expressions and `:=` (its value). Everything else (calls, subscripts, other attributes...)
yields an `Undecidable` carrying the reason, and three-valued logic lets
`False and <anything>` still decide.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from kb.pyast import ARGS_RECEIVERS, args_attr, names_read

# Receivers through which server args are read (the same set the ingest recognises).
RECEIVERS = frozenset(ARGS_RECEIVERS)

MAX_EXPR_CHARS = 4000
MAX_SEQUENCE = 1000  # elements of a literal list/tuple/set
MAX_STR = 10_000  # characters a string concatenation may produce
MAX_INT_BITS = 256  # keeps `2 ** 10 ** 9` from eating the CPU


@dataclass(frozen=True)
class Undecidable:
    """The outcome cannot be decided statically; `reason` says why, for the reader."""

    reason: str

    def __bool__(self) -> bool:  # a forgotten check must not read as True
        raise TypeError("Undecidable has no truth value; test with isinstance()")


def undecidable(value: object) -> bool:
    return isinstance(value, Undecidable)


_SCALARS = (str, int, float, bool, type(None))

ARITHMETIC: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}

COMPARISONS: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


@lru_cache(maxsize=8192)
def _parse(text: str) -> ast.expr | Undecidable:
    text = text.strip()
    if len(text) > MAX_EXPR_CHARS:
        return Undecidable("condition too long to analyse")
    try:
        return ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        try:  # a condition spanning lines without its original parentheses
            return ast.parse(f"({text})", mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return Undecidable("condition text does not parse")


def _source(node: ast.AST, limit: int = 60) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # unparse of an odd tree: the reason text is cosmetic
        text = type(node).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_number(value: object) -> bool:
    return isinstance(value, int | float)


@dataclass
class Evaluator:
    """One evaluation context: `env` maps flag dests to values (or Undecidable)."""

    env: Mapping[str, Any]
    bare_names: bool = True  # hook modules pass flags around as plain names too
    names_read: set[str] = field(default_factory=set)

    # --- public API -------------------------------------------------------------------

    def truth(self, text: str) -> bool | Undecidable:
        """Truth value of a condition: True, False or Undecidable."""
        node = _parse(text)
        if isinstance(node, Undecidable):
            return node
        return self._guard(self._truth, node)

    def value(self, text: str) -> Any:
        """Value of an expression (e.g. the right-hand side of an override), or Undecidable."""
        node = _parse(text)
        if isinstance(node, Undecidable):
            return node
        return self._guard(self._value, node)

    # --- internals --------------------------------------------------------------------

    def _guard(self, fn: Callable[[ast.expr], Any], node: ast.expr) -> Any:
        try:
            return fn(node)
        except RecursionError:
            return Undecidable("condition nested too deeply")

    def _truth(self, node: ast.expr) -> bool | Undecidable:
        if isinstance(node, ast.BoolOp):
            results = [self._truth(v) for v in node.values]
            decided = [r for r in results if not isinstance(r, Undecidable)]
            pending = [r for r in results if isinstance(r, Undecidable)]
            if isinstance(node.op, ast.And):
                if any(r is False for r in decided):
                    return False
            elif any(r is True for r in decided):
                return True
            if pending:
                return pending[0]
            return isinstance(node.op, ast.And)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self._truth(node.operand)
            return inner if isinstance(inner, Undecidable) else not inner
        value = self._value(node)
        if isinstance(value, Undecidable):
            return value
        return bool(value)

    def _lookup(self, name: str, shown: str) -> Any:
        if name in self.env:
            self.names_read.add(name)
            return self.env[name]
        return Undecidable(f"reads {shown}, which is not a flag")

    def _value(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, _SCALARS):
                return node.value
            return Undecidable(f"uses the constant {_source(node)}")
        if isinstance(node, ast.Name):
            if self.bare_names:
                return self._lookup(node.id, node.id)
            return Undecidable(f"reads {node.id}")
        if isinstance(node, ast.Attribute):
            attr = args_attr(node)
            if attr is not None:
                return self._lookup(attr, _source(node))
            read = env_read(node)  # envs.X.value
            if read is not None:
                return self._environ(*read)
            return Undecidable(f"reads {_source(node)}")
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            if len(node.elts) > MAX_SEQUENCE:
                return Undecidable("literal too large")
            items = [self._value(e) for e in node.elts]
            for item in items:
                if isinstance(item, Undecidable):
                    return item
            if isinstance(node, ast.Set):
                try:
                    return frozenset(items)
                except TypeError:
                    return Undecidable("unhashable set member")
            return tuple(items)
        if isinstance(node, ast.BoolOp):
            return self._boolop_value(node)
        if isinstance(node, ast.UnaryOp):
            return self._unary(node)
        if isinstance(node, ast.BinOp):
            return self._binop(node)
        if isinstance(node, ast.Compare):
            return self._compare(node)
        if isinstance(node, ast.NamedExpr):  # `(x := self.y) is not None`: the value is y's
            return self._value(node.value)
        if isinstance(node, ast.IfExp):
            test = self._truth(node.test)
            if isinstance(test, Undecidable):
                body, orelse = self._value(node.body), self._value(node.orelse)
                same = not undecidable(body) and not undecidable(orelse) and body == orelse
                return body if same else test
            return self._value(node.body if test else node.orelse)
        return Undecidable(f"uses {type(node).__name__.lower()} {_source(node)}")

    def _environ(self, variable: str, how: str) -> Any:
        """An environment variable read: decided when the command sets it."""
        environ = getattr(self.env, "environ", None) or {}
        if variable not in environ:
            return Undecidable(f"reads the environment variable {variable}, not set here")
        typed, raw = environ[variable]
        if how == "bool":  # get_bool_env_var: "true"/"1" (any case) are true
            return raw.strip().lower() in ("true", "1")
        if how == "int":
            try:
                return int(raw)
            except ValueError:
                return Undecidable(f"{variable}={raw} is not an integer")
        if how == "is_set":
            return True
        return raw if how == "raw" else typed

    def _call(self, node: ast.Call) -> Any:
        read = env_read(node)
        if read is not None:
            return self._environ(*read)
        func = node.func
        name = func.id if isinstance(func, ast.Name) else None
        # getattr(self, "x"[, default]) / hasattr(self, "x"): the ingest reads these as flags.
        if (
            name in ("getattr", "hasattr")
            and 2 <= len(node.args) <= 3
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id in RECEIVERS
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and not node.keywords
        ):
            attr = node.args[1].value
            if attr in self.env:
                self.names_read.add(attr)
                return True if name == "hasattr" else self.env[attr]
            return Undecidable(f"reads {attr}, which is not a flag")
        return Undecidable(f"calls {_source(func, 40)}()")

    def _boolop_value(self, node: ast.BoolOp) -> Any:
        # Python semantics: `and` yields the first falsy operand, else the last one.
        result: Any = None
        for operand in node.values:
            result = self._value(operand)
            if isinstance(result, Undecidable):
                truth = self._truth(node)  # the truth may still be decided
                return truth
            if isinstance(node.op, ast.And) and not result:
                return result
            if isinstance(node.op, ast.Or) and result:
                return result
        return result

    def _unary(self, node: ast.UnaryOp) -> Any:
        if isinstance(node.op, ast.Not):
            return self._truth(node)
        operand = self._value(node.operand)
        if isinstance(operand, Undecidable):
            return operand
        if not _is_number(operand):
            return Undecidable(f"applies {type(node.op).__name__} to {type(operand).__name__}")
        if isinstance(node.op, ast.USub):
            return -operand
        if isinstance(node.op, ast.UAdd):
            return +operand
        return Undecidable("uses bitwise inversion")

    def _binop(self, node: ast.BinOp) -> Any:
        fn = ARITHMETIC.get(type(node.op))
        if fn is None:
            return Undecidable(f"uses the operator in {_source(node)}")
        left, right = self._value(node.left), self._value(node.right)
        for side in (left, right):
            if isinstance(side, Undecidable):
                return side
        numbers = _is_number(left) and _is_number(right)
        concat = isinstance(node.op, ast.Add) and (
            (isinstance(left, str) and isinstance(right, str))
            or (isinstance(left, tuple) and isinstance(right, tuple))
        )
        if not (numbers or concat):
            return Undecidable(f"mixes {type(left).__name__} and {type(right).__name__}")
        if concat and len(left) + len(right) > MAX_STR:
            return Undecidable("value too large")
        if isinstance(node.op, ast.Pow) and (
            abs(right) > 64 or (isinstance(left, int) and left.bit_length() * abs(right) > 4096)
        ):
            return Undecidable("power too large")
        try:
            result = fn(left, right)
        except (ArithmeticError, ValueError, TypeError) as exc:
            return Undecidable(f"arithmetic fails ({exc})")
        if isinstance(result, int) and result.bit_length() > MAX_INT_BITS:
            return Undecidable("number too large")
        return result

    def _compare(self, node: ast.Compare) -> Any:
        left = self._value(node.left)
        verdict: bool | Undecidable = True
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = self._value(comparator)
            outcome = self._compare_one(op, left, right)
            if outcome is False:
                return False  # a chain is false as soon as one link is
            if isinstance(outcome, Undecidable) and verdict is True:
                verdict = outcome
            left = right
        return verdict

    def _compare_one(self, op: ast.cmpop, left: Any, right: Any) -> bool | Undecidable:
        for side in (left, right):
            if isinstance(side, Undecidable):
                return side
        if isinstance(op, ast.Is | ast.IsNot):
            same = _identical(left, right)
            if isinstance(same, Undecidable):
                return same
            return same if isinstance(op, ast.Is) else not same
        if isinstance(op, ast.In | ast.NotIn) and not isinstance(
            right, str | tuple | frozenset | list | dict
        ):
            return Undecidable(f"tests membership in {type(right).__name__}")
        fn = COMPARISONS[type(op)]
        try:
            return bool(fn(left, right))
        except TypeError:
            return Undecidable(f"compares {type(left).__name__} with {type(right).__name__}")


ENV_HELPERS = {"get_bool_env_var": "bool", "get_int_env_var": "int"}
ENV_GETTERS = {"getenv", "get"}  # os.getenv("X"), os.environ.get("X")


def env_read(node: ast.expr) -> tuple[str, str] | None:
    """(variable, how it is read) for `get_bool_env_var("X")`, `get_int_env_var("X")`,
    `os.getenv("X")` / `os.environ.get("X")` (raw), `envs.X.get()` / `envs.X.value`
    (typed) and `envs.X.is_set()`; None for anything else."""
    if isinstance(node, ast.Attribute) and node.attr == "value":
        inner = node.value
        if isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name):
            if inner.value.id == "envs":
                return inner.attr, "typed"
        return None
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute):
        holder = func.value
        if isinstance(holder.value, ast.Name) and holder.value.id == "envs":
            if func.attr == "get":
                return holder.attr, "typed"
            if func.attr == "is_set":
                return holder.attr, "is_set"
    first = node.args[0] if node.args else None
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
        return None
    if isinstance(func, ast.Name) and func.id in ENV_HELPERS:
        return first.value, ENV_HELPERS[func.id]
    if isinstance(func, ast.Attribute) and func.attr in ENV_GETTERS:
        owner = ast.unparse(func.value)
        if owner in ("os", "os.environ", "environ"):
            return first.value, "raw"
    return None


def _identical(left: Any, right: Any) -> bool | Undecidable:
    """`is` for the values we hold: meaningful for None and booleans only."""
    if left is None or right is None:
        return left is None and right is None
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    return Undecidable("identity of values is not static")


@lru_cache(maxsize=8192)
def flag_names(text: str) -> frozenset[str]:
    """Attributes read through a server-args receiver (`self.x`, `server_args.x`,
    `getattr(self, "x")`): which flags a condition depends on, whatever it evaluates to."""
    node = _parse(text)
    if isinstance(node, Undecidable):
        return frozenset()
    # The same recognition of server-args reads as the ingest uses.
    return frozenset(names_read(node))


def truth(text: str, env: Mapping[str, Any]) -> bool | Undecidable:
    return Evaluator(env).truth(text)


def evaluate(text: str, env: Mapping[str, Any]) -> Any:
    return Evaluator(env).value(text)
