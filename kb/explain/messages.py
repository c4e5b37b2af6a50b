"""A raise's message with the values the run knows filled in: `f"... Minimum capability:
{quant_config.get_min_capability()}. Current capability: {capability}."` reads "... Minimum
capability: 100. Current capability: 90." An expression whose value is not known (or not a
plain value) stays as written, in braces. Checks a filled-in expression would record are
dropped: the message is read, not run."""

from __future__ import annotations

import ast
from typing import Any

from kb.explain.abstract_values import SCALARS, is_known
from kb.explain.frames import Ctx, Frame
from kb.explain.source_modules import raise_message

Simulator = Any  # kb.explain.simulate.Simulator (which this module must not import)

MAX_PARTS = 12  # formatted values of one message evaluated (SGLang's longest: ~5)


def filled(sim: Simulator, text: ast.JoinedStr, frame: Frame, ctx: Ctx) -> str | None:
    """The f-string's text with known values in; None when it has too many parts."""
    parts = [v for v in text.values if isinstance(v, ast.FormattedValue)]
    if len(parts) > MAX_PARTS:
        return None
    out = []
    checks, changes, reads = len(sim.result.checks), len(sim.result.changes), sim.reads
    try:
        for value in text.values:
            if isinstance(value, ast.Constant):
                out.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                out.append(_part(sim, value, frame, ctx))
    finally:
        del sim.result.checks[checks:]
        del sim.result.changes[changes:]
        sim.reads = reads
    return "".join(out)


def _part(sim: Simulator, value: ast.FormattedValue, frame: Frame, ctx: Ctx) -> str:
    written = "{" + ast.unparse(value.value) + "}"
    if value.format_spec is not None:
        return written
    found = sim.eval(value.value, frame, ctx)
    if not (found is None or (isinstance(found, SCALARS) and is_known(found))):
        return written
    return repr(found) if value.conversion == ord("r") else str(found)


def raise_text(sim: Simulator, node: ast.Raise, frame: Frame, ctx: Ctx) -> str:
    """The raise's message, with what the run knows filled in: an f-string's values, or a
    template in a local (`ValueError(template.format(name=name))`) when both are known."""
    text = raise_message(node)
    exc = node.exc
    arg = exc.args[0] if isinstance(exc, ast.Call) and exc.args else None
    if isinstance(exc, ast.Call) and isinstance(arg, ast.JoinedStr):
        message = filled(sim, arg, frame, ctx)
        return f"{ast.unparse(exc.func)}: {message}" if message else text
    if not (
        isinstance(arg, ast.Call)
        and isinstance(arg.func, ast.Attribute)
        and arg.func.attr == "format"
        and isinstance(arg.func.value, ast.Name)
        and all(isinstance(a, ast.Name | ast.Constant) for a in arg.args)
        and all(k.arg and isinstance(k.value, ast.Name | ast.Constant) for k in arg.keywords)
    ):
        return text
    outer = sim.reads
    try:
        template = sim.eval(arg.func.value, frame, ctx)
        args = [sim.eval(a, frame, ctx) for a in arg.args]
        kwargs = {str(k.arg): sim.eval(k.value, frame, ctx) for k in arg.keywords}
    finally:
        sim.reads = outer
    values = [template, *args, *kwargs.values()]
    if not all(is_known(v) and isinstance(v, SCALARS) or v is None for v in values):
        return text
    try:
        return f"{text}: {str(template).format(*args, **kwargs)}"
    except (IndexError, KeyError, ValueError):
        return text
