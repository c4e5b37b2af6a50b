"""The attention backend a forward batch carries (`forward_batch.attn_backend`, read by a
model's blocks at their first forward: kb.explain.block_forward).

It is the ModelRunner's (ForwardBatch's `attn_backend=model_runner.attn_backend`), as the
load stage built it: a model layer's `assert isinstance(forward_batch.attn_backend,
HybridLinearAttnBackend)` is decided by its class (a HybridAttnBackend when the prefill and
decode backends differ, a TboAttnBackend with two-batch overlap). But before each forward
SGLang calls the backend's `init_forward_metadata(forward_batch)` (or its CUDA-graph capture
and replay variants), which sets the batch's metadata on it and its sub-backends (a hybrid's
full and linear ones, two-batch overlap's children). What those methods assign is the
batch's, not the command's: on the backend the batch sees, it is unknown (a Mamba backend's
`assert isinstance(self.forward_metadata, Mamba2Metadata)` is not decided by the None its
constructor left). The backend the load stage built is not changed: the batch gets a copy.
"""

from __future__ import annotations

import ast
import copy
from typing import Any

from kb.explain import classes
from kb.explain.abstract_values import ClassRef, Instance
from kb.explain.predicates import unknown

PER_BATCH = "init_forward_metadata"  # the methods named so, or with it as a prefix
ATTENTION_DIR = "python/sglang/srt/layers/attention/"

Simulator = Any  # kb.explain.simulate.Simulator (which this module must not import)


def as_the_batch_sees_it(sim: Simulator, backend: Any) -> Any:
    """A copy of `backend` (and of the attention backends its fields hold) with the fields
    its per-batch methods set unknown."""
    copies: dict[int, Instance] = {}

    def view(value: Any) -> Any:
        if isinstance(value, list | tuple):
            return type(value)(view(v) for v in value)
        if not isinstance(value, Instance) or not value.cls.path.startswith(ATTENTION_DIR):
            return value
        if id(value) in copies:
            return copies[id(value)]
        seen = copies[id(value)] = copy.copy(value)
        seen.fields, seen.marks = dict(value.fields), dict(value.marks)
        for name, v in value.fields.items():
            seen.fields[name] = view(v)
        for name in _set_per_batch(sim, value.cls):
            why = f"{value.cls.name}.{name} (set for each batch by its {PER_BATCH})"
            seen.fields[name] = unknown(why)
        return seen

    return view(backend)


def _set_per_batch(sim: Simulator, cls: ClassRef) -> set[str]:
    """The fields of `self` the class's per-batch methods assign, through the methods of
    its own they call on `self` (once per class of a version: each explain builds the
    backend's batch view several times)."""
    cached = _per_batch_cache.get(id(cls.node))
    if cached is None or cached[0] is not cls.node:  # (a version's parsed class, kept)
        if len(_per_batch_cache) > 256:
            _per_batch_cache.clear()
        cached = _per_batch_cache[id(cls.node)] = (cls.node, _per_batch_fields(sim, cls))
    return set(cached[1])


_per_batch_cache: dict[int, tuple[ast.ClassDef, frozenset[str]]] = {}


def _per_batch_fields(sim: Simulator, cls: ClassRef) -> frozenset[str]:
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for c in reversed(classes.mro(sim, cls)[0]):  # (a subclass's method wins)
        for node in c.node.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                methods[node.name] = node
    todo = [name for name in methods if name.startswith(PER_BATCH)]
    seen: set[str] = set()
    fields: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in methods:
            continue
        seen.add(name)
        for n in ast.walk(methods[name]):
            if isinstance(n, ast.Attribute) and _on_self(n):
                if isinstance(n.ctx, ast.Store):
                    fields.add(n.attr)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and _on_self(n.func):
                todo.append(n.func.attr)
    return frozenset(fields)


def _on_self(node: ast.Attribute) -> bool:
    return isinstance(node.value, ast.Name) and node.value.id == "self"
