"""`try`/`except` in the code the simulator runs (kb.explain.simulate).

Past ServerArgs SGLang's code raises to signal, and catches it itself:

    def get_from_keys_or(config, keys, default):
        try:
            return QuantizationConfig.get_from_keys(config, keys)
        except ValueError:
            return default

A raise that an enclosing `try` of the run catches (by the exception's name, or a bare
`except`, `Exception`, `BaseException`) is no error: when it certainly happens, control goes
to that handler, as in Python; when it happens only on an undecided path, it is dropped (the
path goes on as if nothing was raised: what the handler would do is not followed there). A
raise that nothing catches is the run's check, as before.
"""

from __future__ import annotations

import ast
from typing import Any

from kb.explain.frames import Ctx, Frame
from kb.explain.predicates import unknown
from kb.pyast import call_name

Simulator = Any  # kb.explain.simulate.Simulator (which this module must not import)

CATCH_ALL = frozenset({"Exception", "BaseException"})


class Caught(Exception):
    """A raise unwinding to the `try` whose handler catches it."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def handled(sim: Simulator, name: str, ctx: Ctx) -> bool:
    """Whether a raise of exception `name` is caught by a `try` the run is in: it unwinds
    there (Caught) when certain; True (drop it) when on an undecided path; False when
    nothing catches it."""
    if not any(catches(names, name) for names in sim.catching):
        return False
    if not ctx.needs:
        raise Caught(name)
    return True


def raised_name(node: ast.Raise) -> str:
    """`raise ValueError(...)` -> "ValueError"; "" when not known (`raise err`)."""
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    if isinstance(exc, ast.Name):
        return exc.id
    if isinstance(exc, ast.Attribute):
        return exc.attr
    return ""


def run_try(sim: Simulator, node: ast.Try, frame: Frame, ctx: Ctx) -> None:
    names = [_handler_names(h) for h in node.handlers]
    caught: Caught | None = None
    every = [n for n in names if n is not None]
    sim.catching.append(frozenset().union(*every) if len(every) == len(names) else None)
    try:
        sim.block(node.body, frame, ctx)
    except Caught as exc:
        caught = exc
    finally:
        sim.catching.pop()
    try:
        if caught is None:
            sim.block(node.orelse, frame, ctx)
            return
        for handler, kinds in zip(node.handlers, names, strict=True):
            if catches(kinds, caught.name):
                if handler.name:
                    frame.locals[handler.name] = unknown(f"the {caught.name or 'exception'}")
                sim.block(handler.body, frame, ctx)
                return
        raise caught  # (another try of the run catches it)
    finally:
        sim.block(node.finalbody, frame, ctx)


def run_with(sim: Simulator, node: ast.With | ast.AsyncWith, frame: Frame, ctx: Ctx) -> None:
    """`with ...:` runs its body; `with suppress(ValueError):` (contextlib's) is a `try`
    whose handler for those exceptions does nothing."""
    for item in node.items:  # `with open(path) as f:` binds the file (kb.explain.model_files)
        call = item.context_expr
        if isinstance(item.optional_vars, ast.Name) and isinstance(call, ast.Call):
            if call_name(call) == "open":
                file = sim.eval(call, frame, ctx)
                sim.assign(item.optional_vars, file, frame, ctx, node)
    kinds = [
        arg
        for item in node.items
        if isinstance(call := item.context_expr, ast.Call)
        and call_name(call).rsplit(".", 1)[-1] == "suppress"
        for arg in call.args
    ]
    if not kinds:
        sim.block(node.body, frame, ctx)
        return
    handler = ast.ExceptHandler(type=ast.Tuple(elts=kinds, ctx=ast.Load()), body=[])
    run_try(sim, ast.Try(body=node.body, handlers=[handler], orelse=[], finalbody=[]), frame, ctx)


def _handler_names(handler: ast.ExceptHandler) -> frozenset[str] | None:
    """The names a handler catches; None for all (`except:`, `except Exception`)."""
    kinds = handler.type
    if kinds is None:
        return None
    elts = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
    found = set()
    for elt in elts:
        name = elt.attr if isinstance(elt, ast.Attribute) else getattr(elt, "id", "")
        if name in CATCH_ALL:
            return None
        found.add(name)
    return frozenset(found)


def catches(names: frozenset[str] | None, name: str) -> bool:
    return names is None or (bool(name) and name in names)
