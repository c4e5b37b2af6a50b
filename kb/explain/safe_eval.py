"""Evaluate SGLang condition texts against flag values, without eval or exec.

Condition texts come from an untrusted repository, so they are parsed with `ast` and only a
whitelisted subset is interpreted: names of flags (`self.x`, `server_args.x`, bare `x`),
constants, comparisons, `in`, `is None`, boolean operators, `not`, arithmetic, conditional
expressions and `:=` (its value). Everything else (calls, subscripts, other attributes...)
yields an `Unknown` saying why, and three-valued logic lets `False and <anything>` still
decide (kb.threeval: the operators, their bounds and the logic are the ones every evaluator
uses).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from kb.pyast import ARGS_RECEIVERS, args_attr, names_read
from kb.threeval import (
    BINARY,
    SCALARS,
    Unknown,
    all_of,
    any_of,
    binary,
    compare,
    is_unknown,
    not_,
    unary,
    unknown,
)
from kb.threeval import truth as truth_of

# Receivers through which server args are read (the same set the ingest recognises).
RECEIVERS = frozenset(ARGS_RECEIVERS)

MAX_EXPR_CHARS = 4000
MAX_SEQUENCE = 1000  # elements of a literal list/tuple/set


@lru_cache(maxsize=8192)
def _parse(text: str) -> ast.expr | Unknown:
    text = text.strip()
    if len(text) > MAX_EXPR_CHARS:
        return unknown("condition too long to analyse")
    try:
        return ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        try:  # a condition spanning lines without its original parentheses
            return ast.parse(f"({text})", mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return unknown("condition text does not parse")


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
    """One evaluation context: `env` maps flag dests to values (or Unknown)."""

    env: Mapping[str, Any]
    bare_names: bool = True  # hook modules pass flags around as plain names too
    names_read: set[str] = field(default_factory=set)

    # --- public API -------------------------------------------------------------------

    def truth(self, text: str) -> bool | Unknown:
        """Truth value of a condition: True, False or Unknown."""
        node = _parse(text)
        if isinstance(node, Unknown):
            return node
        return self._guard(self._truth, node)

    def value(self, text: str) -> Any:
        """Value of an expression (e.g. the right-hand side of an override), or Unknown."""
        node = _parse(text)
        if isinstance(node, Unknown):
            return node
        return self._guard(self._value, node)

    # --- internals --------------------------------------------------------------------

    def _guard(self, fn: Callable[[ast.expr], Any], node: ast.expr) -> Any:
        try:
            return fn(node)
        except RecursionError:
            return unknown("condition nested too deeply")

    def _truth(self, node: ast.expr) -> bool | Unknown:
        if isinstance(node, ast.BoolOp):
            # every operand is read (names_read) even when one decides
            truths = [self._truth(v) for v in node.values]
            return all_of(truths) if isinstance(node.op, ast.And) else any_of(truths)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not_(self._truth(node.operand))
        return truth_of(self._value(node))

    def _lookup(self, name: str, shown: str) -> Any:
        if name in self.env:
            self.names_read.add(name)
            return self.env[name]
        return unknown(f"reads {shown}, which is not a flag")

    def _value(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, SCALARS):
                return node.value
            return unknown(f"uses the constant {_source(node)}")
        if isinstance(node, ast.Name):
            if self.bare_names:
                return self._lookup(node.id, node.id)
            return unknown(f"reads {node.id}")
        if isinstance(node, ast.Attribute):
            attr = args_attr(node)
            if attr is not None:
                return self._lookup(attr, _source(node))
            read = env_read(node)  # envs.X.value
            if read is not None:
                return self._environ(*read)
            return unknown(f"reads {_source(node)}")
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            if len(node.elts) > MAX_SEQUENCE:
                return unknown("literal too large")
            items = [self._value(e) for e in node.elts]
            for item in items:
                if is_unknown(item):
                    return item
            if isinstance(node, ast.Set):
                try:
                    return frozenset(items)
                except TypeError:
                    return unknown("unhashable set member")
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
            if is_unknown(test):
                body, orelse = self._value(node.body), self._value(node.orelse)
                same = not is_unknown(body) and not is_unknown(orelse) and body == orelse
                return body if same else test
            return self._value(node.body if test else node.orelse)
        return unknown(f"uses {type(node).__name__.lower()} {_source(node)}")

    def _environ(self, variable: str, how: str) -> Any:
        """An environment variable read: decided when the command sets it."""
        environ = getattr(self.env, "environ", None) or {}
        if variable not in environ:
            return unknown(f"reads the environment variable {variable}, not set here")
        typed, raw = environ[variable]
        if how == "bool":  # get_bool_env_var: "true"/"1" (any case) are true
            return raw.strip().lower() in ("true", "1")
        if how == "int":
            try:
                return int(raw)
            except ValueError:
                return unknown(f"{variable}={raw} is not an integer")
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
            return unknown(f"reads {attr}, which is not a flag")
        return unknown(f"calls {_source(func, 40)}()")

    def _boolop_value(self, node: ast.BoolOp) -> Any:
        # Python semantics: `and` yields the first falsy operand, else the last one.
        result: Any = None
        for operand in node.values:
            result = self._value(operand)
            if is_unknown(result):
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
        return unary(node.op, self._value(node.operand))

    def _binop(self, node: ast.BinOp) -> Any:
        if type(node.op) not in BINARY:
            return unknown(f"uses the operator in {_source(node)}")
        left, right = self._value(node.left), self._value(node.right)
        if not is_unknown(left) and not is_unknown(right):
            # a condition's arithmetic is on numbers; `+` also joins two strs or two tuples
            numbers = _is_number(left) and _is_number(right)
            concat = isinstance(node.op, ast.Add) and (
                (isinstance(left, str) and isinstance(right, str))
                or (isinstance(left, tuple) and isinstance(right, tuple))
            )
            if not (numbers or concat):
                return unknown(f"mixes {type(left).__name__} and {type(right).__name__}")
        return binary(node.op, left, right)

    def _compare(self, node: ast.Compare) -> bool | Unknown:
        return all_of(self._links(node))  # a chain is false as soon as one link is

    def _links(self, node: ast.Compare) -> Iterator[bool | Unknown]:
        left = self._value(node.left)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = self._value(comparator)
            yield truth_of(compare(op, left, right))
            left = right


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


@lru_cache(maxsize=8192)
def flag_names(text: str) -> frozenset[str]:
    """Attributes read through a server-args receiver (`self.x`, `server_args.x`,
    `getattr(self, "x")`): which flags a condition depends on, whatever it evaluates to."""
    node = _parse(text)
    if isinstance(node, Unknown):
        return frozenset()
    # The same recognition of server-args reads as the ingest uses.
    return frozenset(names_read(node))


def truth(text: str, env: Mapping[str, Any]) -> bool | Unknown:
    return Evaluator(env).truth(text)


def evaluate(text: str, env: Mapping[str, Any]) -> Any:
    return Evaluator(env).value(text)
