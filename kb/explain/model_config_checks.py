"""ModelConfig's constructor checks (steps of the load stage, kb.explain.deploy): SGLang
builds the model's ModelConfig from the server args before anything loads, and the draft
model's when the speculative worker builds its draft worker, after it set the server args'
`context_length` to the target model's (`server_args.context_length =
target_worker.model_runner.model_config.context_len`). Its constructor raises for a
context length above what config.json allows (`_derive_context_length`), a quantization
that does not match the checkpoint's (`_verify_quantization`) and the like.

Only the constructor's top-level statements that raise or assert, directly or in a method
of the class they call (`self._derive_context_length(context_length)`), are run, with the
statements before each that bind the names it reads; the attributes they read are derived
(kb.explain.derived), the parameters are what `from_server_args` passes."""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from typing import TYPE_CHECKING

from kb.explain import classes
from kb.explain.abstract_values import Func, Obj
from kb.explain.derived import MODEL_CONFIG_MODULE, _loaded, _methods, _params, _slice
from kb.explain.frames import Ctx
from kb.explain.memo import by_identity
from kb.pyast import self_call

if TYPE_CHECKING:
    from kb.explain.simulate import Simulator

PART = "the model's ModelConfig"
DRAFT_PART = "the draft model's ModelConfig"


def checks(sim: Simulator, draft: bool = False) -> None:
    """Run the checks of ModelConfig's constructor, for the model being run (the draft's
    inside model_weights.as_model)."""
    mod = sim.module(MODEL_CONFIG_MODULE)
    cls = mod.classes.get("ModelConfig") if mod is not None else None
    init = _methods(cls).get("__init__") if cls is not None else None
    if mod is None or cls is None or init is None:
        return
    body, names = _checking(cls, init)
    if not body:
        return
    node = copy.copy(init)
    node.body = body
    params = _params(init, sim)
    given = {name: params[name]() for name in names if name in params}
    owner = classes.class_ref(mod, "ModelConfig")
    kind = "draft_model_config" if draft else "model_config"
    # (what these statements set on the ModelConfig holds for their own reads only: the
    # later steps read each attribute as derived from the whole constructor, not from the
    # part of it run here)
    derived = dict(sim.derived)
    try:
        sim.call_function(Func(mod, node, Obj(kind), owner), [], given, Ctx())
    finally:
        sim.derived.clear()
        sim.derived.update(derived)


def step(sim: Simulator) -> Callable[[], None] | None:
    """The main model's checks, as a step (None when the version's class has none)."""
    mod = sim.module(MODEL_CONFIG_MODULE)
    cls = mod.classes.get("ModelConfig") if mod is not None else None
    init = _methods(cls).get("__init__") if cls is not None else None
    if cls is None or init is None or not _checking(cls, init)[0]:
        return None
    return lambda: checks(sim)


@by_identity
def _checking(cls: ast.ClassDef, init: ast.FunctionDef) -> tuple[list[ast.stmt], frozenset[str]]:
    """The constructor's statements that may raise (with those binding what they read), in
    order, and the names they read."""
    methods = _methods(cls)
    kept: set[int] = set()
    names: set[str] = set()
    for index, stmt in enumerate(init.body):
        if not _raises(stmt, methods):
            continue
        kept.add(index)
        # (and the statements before it setting the attributes it reads: `self.quantization
        # = quantization` before `self._verify_quantization()`, which reads and sets it)
        attrs = _self_reads(stmt, methods)
        setting = [s for s in init.body[:index] if _sets_self(s) & attrs]
        kept |= {i for i, s in enumerate(init.body[:index]) if any(s is k for k in setting)}
        loaded = set(_loaded(stmt)).union(*(_loaded(s) for s in setting))
        sliced, read = _slice(init.body[:index], loaded)
        kept |= {i for i, s in enumerate(init.body[:index]) if any(s is k for k in sliced)}
        names |= read
    return [s for i, s in enumerate(init.body) if i in kept], frozenset(names)


def _self_reads(
    stmt: ast.stmt, methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
) -> set[str]:
    """The attributes of self the statement reads, itself or in the methods it calls."""
    nodes = [stmt, *(methods[m] for n in ast.walk(stmt) if (m := self_call(n) or "") in methods)]
    return {
        n.attr
        for node in nodes
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute)
        and isinstance(n.ctx, ast.Load)
        and isinstance(n.value, ast.Name)
        and n.value.id == "self"
    }


def _sets_self(stmt: ast.stmt) -> set[str]:
    """`self.<attr> = ...` at the statement's top: {attr}."""
    if isinstance(stmt, ast.Assign | ast.AnnAssign):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return {
            t.attr
            for t in targets
            if isinstance(t, ast.Attribute)
            and isinstance(t.value, ast.Name)
            and t.value.id == "self"
        }
    return set()


def _raises(stmt: ast.stmt, methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]) -> bool:
    """A raise or assert in the statement, or in a method of the class it calls on self."""
    for node in ast.walk(stmt):
        if isinstance(node, ast.Raise | ast.Assert):
            return True
        method = methods.get(self_call(node) or "")
        if method is not None and _raises_directly(method):
            return True
    return False


@by_identity
def _raises_directly(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Raise | ast.Assert) for n in ast.walk(node))
