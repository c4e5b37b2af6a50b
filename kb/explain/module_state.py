"""Module-level tables that their own module extends when it is imported.

`QUANTIZATION_METHODS` in SGLang's layers/quantization/__init__.py is a dict literal that
the module then extends under a test of the platform:

    BASE_QUANTIZATION_METHODS = {"fp8": Fp8Config, ...}
    if is_cuda() or (_is_mxfp_supported and is_hip()):
        BASE_QUANTIZATION_METHODS.update({"mxfp4": Mxfp4Config})

Its literal alone would say that `mxfp4` is no method (a raise SGLang does not make). Such a
name is computed as the import computes it: the literal, then each later top-level statement
that mutates it (`.update()`, `.append()`, `X[k] = v`, under an `if` or `try` too), run by
the simulator in a frame of the module. The platform tests depend on the profile, so the
value is kept per run, not with the parsed module.
"""

from __future__ import annotations

import ast
from typing import Any

from kb.explain.frames import Ctx, Frame
from kb.explain.predicates import unknown
from kb.explain.source_modules import Module

Simulator = Any  # kb.explain.simulate.Simulator (which this module must not import)

MUTATORS = frozenset({"update", "append", "extend", "insert", "add", "setdefault", "pop"})

# id(module body) -> (the body, name -> the top-level statements mutating it, in order)
_cache: dict[int, tuple[list[ast.stmt], dict[str, list[ast.stmt]]]] = {}


def mutations(mod: Module) -> dict[str, list[ast.stmt]]:
    """The module's top-level statements that mutate one of its own assigned names."""
    cached = _cache.get(id(mod.body))
    if cached is not None and cached[0] is mod.body:
        return cached[1]
    found: dict[str, list[ast.stmt]] = {}
    for stmt in mod.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for name in mutated(stmt) & set(mod.assigns):
            found.setdefault(name, []).append(stmt)
    if len(_cache) > 256:
        _cache.clear()
    _cache[id(mod.body)] = (mod.body, found)
    return found


def mutated(stmt: ast.stmt) -> set[str]:
    """The names a statement changes in place: `table.update(...)`, `cfg_list.append(x)`,
    `d[k] = v`."""
    names = set()
    for node in ast.walk(stmt):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in MUTATORS
            and isinstance(node.func.value, ast.Name)
        ):
            names.add(node.func.value.id)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name):
                names.add(node.value.id)
    return names


def value(sim: Simulator, mod: Module, name: str) -> Any:
    """`name` as the module leaves it once imported, for this run's profile."""
    key = (mod.path, name)
    if key not in sim.module_values:
        sim.module_values[key] = unknown(f"{name} (computed when imported)")
        frame = Frame(mod, "<module>", {})
        frame.locals[name] = sim.eval(mod.assigns[name], frame, Ctx())
        assigned = mod.lines.get(name, 0)
        for stmt in mutations(mod).get(name, []):
            if stmt.lineno > assigned:
                sim.stmt(stmt, frame, Ctx())
        sim.module_values[key] = frame.locals[name]
    return sim.module_values[key]
