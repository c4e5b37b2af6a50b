"""What SGLang checks of a model when it builds it, for the model page: for each
architecture (EntryClass) of a model file, the classes its constructor builds through the
model files the knowledge base holds (DeepseekV2ForCausalLM -> DeepseekV2Model ->
DeepseekV2DecoderLayer -> DeepseekV2MoE), each one's constructor raises and asserts with
the tests around them (`if self.tp_size > config.n_routed_experts: raise ValueError`), and
whether its forward takes `pp_proxy_tensors`, which the ModelRunner asserts under
`--pp-size` > 1. Read statically from the stored code; explain evaluates the same checks for
a deployment (kb.explain.model_class).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kb import layer_sites
from kb import quant_requirements as qr
from kb.explain.model_class import calls_under, named_defaults
from kb.explain.source_modules import Module

MODELS_DIR = "python/sglang/srt/models/"
RUNNER = "python/sglang/srt/model_executor/model_runner.py"
PP_PARAMETER = "pp_proxy_tensors"
MAX_CLASSES = 24  # classes followed from the architecture's (as explain follows them)

Cite = Callable[[str, int, int], dict[str, Any]]


@dataclass(frozen=True)
class Built:
    ref: qr.ClassRef
    chain: tuple[str, ...]  # the classes from the architecture's down to this one
    when: str  # the tests its builder builds it under, as written ("" always)


def architecture_checks(
    modules: qr.Modules, path: str, arch: str, flags: layer_sites.Flags, cite: Cite
) -> dict[str, Any] | None:
    """{"architecture", "pipeline_parallel", "forward", "pp_check", "checks"} for the
    architecture defined (or imported) in the model file `path`; None when not held."""
    mod = modules(path)
    root = qr.resolve_class(modules, mod, arch) if mod is not None else None
    if root is None:
        return None
    checks = []
    for built in _closure(modules, root):
        found = qr.method_of(modules, built.ref, "__init__")
        if found is None or not found[0].module.path.startswith(MODELS_DIR):
            continue
        for check in layer_sites.constructor_checks(modules, built.ref, found, flags):
            checks.append(
                {
                    "owner": check.owner,
                    "built_by": list(built.chain),
                    "built_when": built.when,
                    "kind": check.kind,
                    "condition": check.condition,
                    "requires": check.requires,
                    "message": check.message,
                    "flags": list(check.flags),
                    "source": cite(check.path, check.line, check.end),
                }
            )
    forward = qr.method_of(modules, root, "forward")
    params = _params(forward[1]) if forward is not None else None
    runner = _pp_assert(modules)
    return {
        "architecture": arch,
        # None: no forward in the classes held (a base from outside defines it)
        "pipeline_parallel": None if params is None else PP_PARAMETER in params,
        "forward": None
        if forward is None
        else cite(forward[0].module.path, forward[1].lineno, forward[1].lineno),
        "pp_check": None if runner is None else cite(RUNNER, runner, runner),
        "checks": checks,
    }


def _closure(modules: qr.Modules, root: qr.ClassRef) -> Iterator[Built]:
    """The architecture's class and the model classes built through constructors from it,
    breadth first, each once."""
    queue = [Built(root, (root.node.name,), "")]
    seen = {(root.module.path, root.node.name)}
    while queue:
        built = queue.pop(0)
        yield built
        found = qr.method_of(modules, built.ref, "__init__")
        if found is None:
            continue
        for module, call, conds, chosen in _calls(modules, built.ref, found):
            if not isinstance(call.func, ast.Name) or len(seen) >= MAX_CLASSES:
                continue
            target = chosen or qr.resolve_class(modules, module, call.func.id)
            if target is None or not _in_models(target):
                continue
            key = (target.module.path, target.node.name)
            if key not in seen:
                seen.add(key)
                chain = (*built.chain, target.node.name)
                queue.append(Built(target, chain, " and ".join(conds)))


def _calls(
    modules: qr.Modules,
    ref: qr.ClassRef,
    init: tuple[qr.ClassRef, ast.FunctionDef],
    chosen: dict[str, qr.ClassRef] | None = None,
    depth: int = 0,
) -> Iterator[tuple[Module, ast.Call, tuple[str, ...], qr.ClassRef | None]]:
    """The calls of a constructor, of the factory methods of its class it calls (`self.model
    = self._init_model(...)`) and of its base's constructor (`super().__init__(...,
    decoder_layer_type=Qwen3DecoderLayer)`), with the tests they run under; a class a
    parameter names is the one passed for it, or its default."""
    owner, fn = init
    defaults = {
        p: found
        for p, name in named_defaults(fn).items()
        if (found := qr.resolve_class(modules, owner.module, name)) is not None
    }
    classes_of = {**defaults, **(chosen or {})}
    for call, conds in calls_under(fn.body, ()):
        func = call.func
        if isinstance(func, ast.Attribute) and depth == 0:
            if ast.unparse(func.value) == "self":
                factory = qr.method_of(modules, ref, func.attr)
                if factory is not None:
                    for inner, more in calls_under(factory[1].body, ()):
                        yield factory[0].module, inner, (*conds, *more), None
                    continue
            if func.attr == "__init__" and ast.unparse(func.value) == "super()":
                base = _base_init(modules, owner)
                if base is not None:
                    named = {
                        k.arg: found
                        for k in call.keywords
                        if k.arg
                        and isinstance(k.value, ast.Name)
                        and (found := qr.resolve_class(modules, owner.module, k.value.id))
                    }
                    yield from _calls(modules, ref, base, named, depth + 1)
                    continue
        chosen_class = classes_of.get(func.id) if isinstance(func, ast.Name) else None
        yield owner.module, call, conds, chosen_class


def _base_init(
    modules: qr.Modules, owner: qr.ClassRef
) -> tuple[qr.ClassRef, ast.FunctionDef] | None:
    for base in owner.node.bases:
        if isinstance(base, ast.Name):
            parent = qr.resolve_class(modules, owner.module, base.id)
            if parent is not None and (found := qr.method_of(modules, parent, "__init__")):
                return found
    return None


def _in_models(ref: qr.ClassRef) -> bool:
    return ref.module.path.startswith(MODELS_DIR) and "registry" not in ref.module.path


def _params(fn: ast.FunctionDef) -> list[str]:
    a = fn.args
    return [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]


def _pp_assert(modules: qr.Modules) -> int | None:
    """The line of ModelRunner's assert on a field it set from the model's forward
    signature (`self.support_pp = "pp_proxy_tensors" in inspect.signature(...)`)."""
    mod = modules(RUNNER)
    cls = mod.classes.get("ModelRunner") if mod is not None else None
    if cls is None:
        return None
    fields = {
        t.attr
        for node in ast.walk(cls)
        if isinstance(node, ast.Assign) and PP_PARAMETER in ast.unparse(node.value)
        for t in node.targets
        if isinstance(t, ast.Attribute)
    }
    for node in ast.walk(cls):
        if isinstance(node, ast.Assert) and any(
            isinstance(n, ast.Attribute) and n.attr in fields for n in ast.walk(node.test)
        ):
            return node.lineno
    return None
