"""Small helpers over Python's `ast` shared by the extractors. Nothing here executes code."""

from __future__ import annotations

import ast
import gc
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

NOT_LITERAL = object()

# What ast.parse raises besides SyntaxError on pathological input (a 100,000-term expression):
# one such file must cost a warning, never the whole ingest.
PARSE_FAILURES = (ValueError, RecursionError, MemoryError)


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic collector off while a tree is built and read: `ast.parse` of a large file
    makes ~10^6 objects and no cycles, and the collector's passes over them (half of the
    parse's time for server_args.py) find nothing to free. Reference counting still frees
    the tree when it is dropped."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# Receivers through which server args are read: `self.x` inside ServerArgs,
# `server_args.x` / `self.server_args.x` / `args.x` in hooks and helpers.
ARGS_RECEIVERS = {"self", "server_args", "args", "_server_args", "global_server_args"}


def and_term(condition: str) -> str:
    """A condition as one term of an `and`: in parentheses when it binds more loosely (an
    `or`, a conditional expression, a lambda), so `(a or b) and c` is not read as
    `a or (b and c)`. Text that does not parse is bracketed when it has an " or "."""
    try:
        node = ast.parse(condition.strip(), mode="eval").body
    except (SyntaxError, *PARSE_FAILURES):
        return f"({condition})" if " or " in condition else condition
    loose = isinstance(node, ast.IfExp | ast.Lambda | ast.NamedExpr) or (
        isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or)
    )
    return f"({condition})" if loose else condition


def and_all(conditions: Sequence[str]) -> str:
    """Conditions (each a Python expression) ANDed into one that means the same."""
    if len(conditions) == 1:
        return conditions[0]
    return " and ".join(and_term(c) for c in conditions)


def literal(node: ast.AST | None) -> Any:
    """The value of a literal expression (including -1, tuples, lists), else NOT_LITERAL."""
    if node is None:
        return NOT_LITERAL
    # The common cases as ast.literal_eval answers them, without its nested functions:
    # each call made a reference cycle of them: nearly all of a worker's cyclic garbage.
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Name, ast.Attribute)):
        return NOT_LITERAL
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return NOT_LITERAL


def source(node: ast.AST) -> str:
    # `x` and `a.x` (most types, actions and receivers) as ast.unparse writes them, without
    # its visitor.
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return ast.unparse(node)


# terminal colour codes (`"\\033[33m"`): SGLang colours some warnings; a reader sees no escapes
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    return ANSI_ESCAPE.sub("", text)


def fill_names(given: dict[str, str]) -> Callable[[ast.FormattedValue], str]:
    """A `fill` for render_text: a plain `{name}` that `given` holds is its value."""

    def fill(value: ast.FormattedValue) -> str:
        inner = value.value
        known = given.get(inner.id) if isinstance(inner, ast.Name) else None
        if known is not None and value.conversion == -1 and not value.format_spec:
            return known
        return "{" + source(inner) + "}"

    return fill


def render_text(
    node: ast.AST | None,
    strings: dict[str, str] | None = None,
    fill: Callable[[ast.FormattedValue], str] | None = None,
) -> str | None:
    """Render a help text or message as the user reads it.

    Implicit concatenation is already one constant; `+` is joined; f-strings keep their
    `{expr}` placeholders, or what `fill` makes of them; names of module-level string
    constants are resolved; terminal colour codes are dropped. Returns None when the
    expression is not text-like.
    """
    if node is None:
        return None
    if isinstance(node, ast.Constant):
        return strip_ansi(node.value) if isinstance(node.value, str) else None
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(strip_ansi(str(value.value)))
            elif isinstance(value, ast.FormattedValue):
                parts.append(strip_ansi(fill(value)) if fill else "{" + source(value.value) + "}")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = render_text(node.left, strings, fill), render_text(node.right, strings, fill)
        if left is not None and right is not None:
            return left + right
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return render_text(node.left, strings, fill)  # "... %s" % x: keep the template
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "format":
            return render_text(node.func.value, strings, fill)
    if isinstance(node, ast.Name) and strings and node.id in strings:
        return strings[node.id]
    return None


def args_attr(node: ast.AST) -> str | None:
    """`x` for `self.x`, `server_args.x`, `self.server_args.x`, `get_global_server_args().x`."""
    if not isinstance(node, ast.Attribute):
        return None
    base = node.value
    if isinstance(base, ast.Name) and base.id in ARGS_RECEIVERS:
        return node.attr
    if isinstance(base, ast.Attribute) and base.attr in ("server_args", "_server_args"):
        return node.attr
    if (
        isinstance(base, ast.Call)
        and isinstance(base.func, ast.Name)
        and base.func.id in ("get_global_server_args", "get_server_args")
    ):
        return node.attr
    return None


def getattr_name(node: ast.AST) -> str | None:
    """`x` for getattr(self|server_args, "x"[, default])."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "hasattr")
        and len(node.args) >= 2
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id in ARGS_RECEIVERS
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    ):
        return node.args[1].value
    return None


def names_read(node: ast.AST | None) -> list[str]:
    """Server-args attributes read anywhere in an expression, in order, without repeats."""
    if node is None:
        return []
    seen: dict[str, None] = {}
    for sub in ast.walk(node):
        name = args_attr(sub) or getattr_name(sub)
        if name:
            seen[name] = None
    return list(seen)


def call_name(node: ast.AST) -> str:
    """Dotted name of a call's function: `logger.warning`, `warnings.warn`, `ValueError`."""
    func = node.func if isinstance(node, ast.Call) else node
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


def kwarg(call: ast.Call, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def self_call(node: ast.AST) -> str | None:
    """`self.<method>(...)`: the method's name; None for any other node."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "self"
    ):
        return node.func.attr
    return None
