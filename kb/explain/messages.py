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
