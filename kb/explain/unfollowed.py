"""Which attributes of an object the run built code it did not follow may still set.

An object built without (all of) its constructor (`Instance.note`) reads every attribute
the run did not set as unknown: the rest may set it. SGLang's MoE layer is one:
kb.explain.moe builds it without FusedMoE's constructor, kb.explain.moe_quant then runs
that constructor through its runner and dispatcher and the quantization method's
`process_weights_after_loading`. Its forward reads, with a default, attributes that only
another platform's loading sets: `use_intel_amx_backend(layer)` is `getattr(layer,
"use_intel_amx_backend", False)`, set by the AMX weight packing that
`process_weights_after_loading` runs on the CPU only. Unknown, it left undecided every
check past it (the MoE runner's missing pre-permute function for DeepEP with the triton
runner, layers/moe/moe_runner/base.py).

Once those steps ran (`settle`), what code not followed may still set on the layer is
what its classes name as attributes set, anywhere in their bodies and on any object (the
constructor's rest, the weight loaders, the forward's own methods); `getattr`/`hasattr` of
any other attribute the run did not set finds none, as in SGLang (kb.explain.classes).
That rests on an assumption, stated when it decides something: nothing outside the
layer's classes sets an attribute on it before its first forward but what the run
followed. A class that may set attributes of any name (`setattr(x, name, ...)` with a
computed name, `__dict__`, `__getattr__`, torch's `register_*` with a computed name) or a
base class not held leaves every attribute unknown; so does a layer the run handed to code
it did not follow before (`handed`: `setattr`, torch's `register_buffer`, a function of a
package not held, a call past the recursion bound), which may set any attribute on it.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from typing import Any

from kb.explain import classes
from kb.explain.abstract_values import ExternalName, Instance, Method, Unfollowed
from kb.explain.known_names import TORCH_SETTERS

Simulator = Any  # kb.explain.simulate.Simulator (which imports classes, which this imports)

# builtins that may set an attribute of what they are given
BUILTIN_SETTERS = frozenset({"setattr", "delattr", "vars"})
# names that let an object answer attributes of any name
GENERIC = frozenset({"__dict__", "__getattr__", "__getattribute__", "__setattr__", "__slots__"})


def settle(sim: Simulator, obj: Instance, what: str) -> None:
    """Mark `obj`, whose building and loading the run followed (`what` says which steps),
    as having only the attributes the run set and those its classes may set; not one the
    run handed to code it did not follow (`handed`)."""
    if obj.unseen:
        return
    found, complete = classes.mro(sim, obj.cls)
    names: set[str] = set()
    for cls in found:
        named = names_set(cls.node)
        if named is None:
            return
        names |= named
    if not complete:
        return
    key = f"unfollowed:{obj.cls.path}:{obj.cls.name}"
    words = (
        f"nothing outside {obj.cls.name}'s classes sets an attribute on it before its first "
        f"forward but {what}"
    )
    obj.unfollowed = Unfollowed(frozenset(names), key, words)


@lru_cache(maxsize=64)
def names_set(cls: ast.ClassDef) -> frozenset[str] | None:
    """The attributes the class's body defines or sets or deletes (on any object:
    `x.name = ...`, `setattr(x, "name", ...)`, `self.register_buffer("name", ...)`); None
    when it may set one of any name."""
    names: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute):
            if node.attr in GENERIC:
                return None
            if not isinstance(node.ctx, ast.Load):
                names.add(node.attr)
        elif isinstance(node, ast.Call):
            name = _setter_name(node)
            if name is None:
                return None
            names |= name
    return None if names & GENERIC else frozenset(names)


def _setter_name(call: ast.Call) -> set[str] | None:
    """The attribute name a call sets: `setattr(x, "a", v)` and torch's registering methods
    {"a"}; one computed: None; any other call: {}."""
    func = call.func
    if isinstance(func, ast.Name) and func.id == "setattr":
        named = call.args[1] if len(call.args) > 1 else None
    elif isinstance(func, ast.Attribute) and func.attr in TORCH_SETTERS:
        keyword = next((k.value for k in call.keywords if k.arg == "name"), None)
        named = call.args[0] if call.args else keyword
    else:
        return set()
    if isinstance(named, ast.Constant) and isinstance(named.value, str):
        return {named.value}
    return None


def handed(callee: Any, values: list[Any]) -> None:
    """A call the run does not follow (a function of a package not held, one past the
    recursion bound, `setattr`): the objects it built among `values` may get attributes
    there; marked, `settle` leaves them alone. Builtins that set none (`isinstance`,
    `getattr`, `len`) and the methods of values (`"x".join(...)`) hand nothing over."""
    if isinstance(callee, ExternalName) and callee.module == "builtins":
        if callee.name not in BUILTIN_SETTERS:
            return
    elif isinstance(callee, Method):
        return  # (a layer's register_parameter: kb.explain.tensors sets the attribute)
    for value in values:
        if isinstance(value, Instance):
            value.unseen = True
            value.unfollowed = None  # (handed over after `settle` too: its forward's)
