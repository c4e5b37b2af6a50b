"""Class-level registries that SGLang fills when the modules registering into them load,
read from the source (kb.explain.classes reads such a table as unknown, not as its `{}`).

The MoE runner's pools (layers/moe/moe_runner/base.py): `FusedOpPool._fused_funcs`, keyed
by (a2a backend, runner backend), filled by `@register_fused_func("none", "triton")` on the
fused functions of the package's modules; `PermuteMethodPool`'s pre- and post-permute
tables likewise. `MoeRunner.__init__` raises when its backend has no runner core and no
fused function is registered for the pair (deepep with flashinfer_trtllm at
snapshot-2026-07-01).

A table is what its package's modules register, each registration with constant names
(whether a module is imported by then is not followed: a pair registered anywhere in the
package is taken as registered, so an error is never claimed for it). A table with a
registration this reading cannot name (its names computed), or a module of the package
the knowledge base does not hold, stays unknown: the checks reading it stay undecided.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import Any

from kb.explain import classes
from kb.explain.abstract_values import Func, Symbol
from kb.explain.source_modules import Module

Simulator = Any  # kb.explain.simulate.Simulator (which imports classes, which this imports)

RUNNER_BASE = "sglang.srt.layers.moe.moe_runner.base"
RUNNER_PACKAGE = "python/sglang/srt/layers/moe/moe_runner/"
# (the class, its table, the decorator factory registering into it)
TABLES = (
    ("FusedOpPool", "_fused_funcs", "register_fused_func"),
    ("PermuteMethodPool", "_pre_permute_methods", "register_pre_permute"),
    ("PermuteMethodPool", "_post_permute_methods", "register_post_permute"),
)


def fill(sim: Simulator, paths: Iterable[str]) -> None:
    """Put in the run's class cache each table of the MoE runner's pools whose entries the
    package's source determines (see the module's docstring)."""
    base = sim.module(RUNNER_BASE)
    files = [p for p in paths if p.startswith(RUNNER_PACKAGE) and p.endswith(".py")]
    if base is None or not files:
        return
    parsed = [sim.modules(p) for p in files]
    if any(mod is None for mod in parsed):
        return  # a module not held (or not parsed) may register anything
    for cls_name, table, factory in TABLES:
        if cls_name not in base.classes:
            continue
        entries = registrations([m for m in parsed if m is not None], factory)
        if entries is not None:
            cls = classes.class_ref(base, cls_name)
            sim.class_cache[("value", cls.path, cls.name, table)] = entries


def registrations(mods: list[Module], factory: str) -> dict[tuple[str, str], Any] | None:
    """(name, name) -> the function registered, over the modules' calls of `factory`
    (`@factory("a", "b")`, `factory("a", "b")(fn)`, `Pool.factory("a", "b", fn)`); None
    when one of them passes a name not written as a constant."""
    found: dict[tuple[str, str], Any] = {}
    for mod in mods:
        scan = f"class-table:{factory}"  # (once per parsed module: a walk of its tree)
        if scan not in mod.registries:
            mod.registries[scan] = {"entries": _registered_in(mod, factory)}
        entries = mod.registries[scan]["entries"]
        if entries is None:
            return None
        found.update(entries)
    return found


def _registered_in(mod: Module, factory: str) -> dict[tuple[str, str], Any] | None:
    """One module's registrations through `factory` (see registrations). The factory's own
    definition (whose body passes its parameters on) is no registration."""
    found: dict[tuple[str, str], Any] = {}
    for node in _outside_definitions(mod.body or [], factory):
        if isinstance(node, ast.Call) and _called(node.func) == factory:
            key = _key(node)
            if key is None:
                return None
            found.setdefault(key, Symbol(f"the function registered for {key[0]}/{key[1]}"))
    for fn in mod.functions.values():  # a decorated function is the one registered
        for d in fn.decorator_list:
            if isinstance(d, ast.Call) and _called(d.func) == factory:
                if (key := _key(d)) is not None:
                    found[key] = Func(mod, fn)
    return found


def _key(call: ast.Call) -> tuple[str, str] | None:
    """The call's first two arguments, when both are strings written as constants."""
    names = [a.value for a in call.args[:2] if isinstance(a, ast.Constant)]
    if len(names) == 2 and isinstance(names[0], str) and isinstance(names[1], str):
        return names[0], names[1]
    return None


def _called(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _outside_definitions(body: list[ast.stmt], factory: str) -> Iterable[ast.AST]:
    """The module's nodes, but for those inside a function or method named `factory`."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == factory:
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))
