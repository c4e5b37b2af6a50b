"""`x[k] = v` in the code the simulator runs (kb.explain.simulate): the container it
changes is a local (`tiers[key] = entry`), an item of one (`scheme_map[target]["weights"] =
args`: the dict held at `scheme_map[target]` changes), or an object's field (`self.map[k] =
v`). Each is rebuilt with the item stored when it and the keys are known; otherwise what
holds it becomes unknown: never left as it was, which would read as known and wrong."""

from __future__ import annotations

import ast
from typing import Any

from kb.explain.abstract_values import Instance, is_known
from kb.explain.frames import Ctx, Frame
from kb.explain.predicates import Unknown, unknown

Simulator = Any  # kb.explain.simulate.Simulator (which this module must not import)


def store_item(sim: Simulator, target: ast.Subscript, value: Any, frame: Frame, ctx: Ctx) -> None:
    key = sim.eval(target.slice, frame, ctx)
    holder = target.value
    if isinstance(holder, ast.Name):
        sim.update_local(holder, "__setitem__", [key, value], frame, ctx)
    elif isinstance(holder, ast.Subscript):  # `a[b][key] = value`: a[b] changes
        inner = sim.eval(holder, frame, ctx)
        store_item(sim, holder, _with_item(inner, key, value, ctx), frame, ctx)
    elif isinstance(holder, ast.Attribute):  # `obj.attr[key] = value`: the field changes
        obj = sim.eval(holder.value, frame, ctx)
        if isinstance(obj, Instance) and holder.attr in obj.fields:
            obj.fields[holder.attr] = _with_item(obj.fields[holder.attr], key, value, ctx)


def _with_item(container: Any, key: Any, value: Any, ctx: Ctx) -> Any:
    """A copy of `container` with `container[key] = value`, or unknown."""
    if isinstance(container, dict) and is_known(key):
        return {**container, key: value}
    in_list = isinstance(container, list) and isinstance(key, int)
    if in_list and -len(container) <= key < len(container):
        changed = list(container)
        changed[key] = value
        return changed
    if isinstance(container, Unknown):
        return container
    return unknown(*ctx.needs, "a container changed in place")
