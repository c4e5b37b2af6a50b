"""The weight loader SGLang selects and its checks, steps of the load stage (kb.explain.deploy).

The ModelRunner builds a LoadConfig from the server args (`LoadConfig(load_format=
self.server_args.load_format, model_loader_extra_config=...)`, whose `__post_init__` parses
the extra config's JSON and turns the format into a LoadFormat member), then asks
`get_model_loader(load_config, model_config)` in model_loader/loader.py for the loader of its
format and builds it: DummyModelLoader's constructor refuses any extra config,
DefaultModelLoader's keys it does not know... (`construction_step`).

The loader's `load_model` builds the model (kb.explain.model_loading, kb.explain.model_class)
and then hands it to the method that loads its weights (`self._load_weights(model_config,
model)` of the bitsandbytes loader), whose first statements check the model and config.json
before any weight file is read (a pre-quantized bitsandbytes checkpoint under tensor
parallelism). Those statements are run (`checks_step`), up to the first that calls a method
of the loader or of the model (reading the files, iterating their tensors): what the files
hold decides the checks past that point, which are left undecided, never claimed. The model
is an object of the architecture's class whose constructor is not run (what it would set is
unknown); the parallel-state getters are answered from the server args.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kb.explain import classes, parallel_state
from kb.explain.abstract_values import ClassRef, Func, Instance, Obj
from kb.explain.derived import MODEL_RUNNER_MODULE
from kb.explain.frames import Ctx, Frame
from kb.explain.memo import by_identity
from kb.explain.model_loading import LOADER_MODULE
from kb.explain.model_registry import architecture_class
from kb.explain.predicates import Profile, unknown

if TYPE_CHECKING:
    from kb.explain.simulate import Simulator

CONSTRUCTION_PART = "the model loader's constructor"
CHECKS_PART = "the model loader's checks before it reads the weights"
SELECT = "get_model_loader"
LOAD_CONFIG = "LoadConfig"
LOAD_MODEL = "load_model"


class Selected:
    """What the construction step built: the loader (an Instance once decided)."""

    def __init__(self) -> None:
        self.loader: Any = unknown("the model loader")


def construction_step(sim: Simulator, selected: Selected) -> Callable[[], None] | None:
    """The ModelRunner's LoadConfig and `get_model_loader(...)`, with the classes of the
    loader's and the load config's modules built (their constructors run); None when the
    version has neither."""
    runner_mod = sim.module(MODEL_RUNNER_MODULE)
    loader_mod = sim.module(LOADER_MODULE)
    select = loader_mod.functions.get(SELECT) if loader_mod is not None else None
    runner = runner_mod.classes.get("ModelRunner") if runner_mod is not None else None
    call = _load_config_call(runner) if runner is not None else None
    if runner_mod is None or loader_mod is None or select is None or call is None:
        return None
    params = [p.arg for p in (*select.args.posonlyargs, *select.args.args)]

    def step() -> None:
        frame = Frame(runner_mod, "load_model", {"self": Obj("runner")})
        cls = sim.eval(call.func, frame, Ctx())
        if not isinstance(cls, ClassRef):
            return
        construct_under, sim.construct_under = sim.construct_under, (loader_mod.path, cls.path)
        try:
            kwargs: dict[str, Any] = {}
            marks: dict[str, frozenset[str]] = {}  # each field's server args
            for k in call.keywords:
                if k.arg is not None:
                    outer, sim.reads = sim.reads, set()
                    try:
                        kwargs[k.arg] = _server_arg_value(sim, k.value, frame)
                    finally:
                        marks[k.arg], sim.reads = frozenset(sim.reads), outer
            load_config = classes.call_class(sim, cls, [], kwargs, Ctx(), call)
            if isinstance(load_config, Instance):
                load_config.marks.update((k, m) for k, m in marks.items() if m)
            args = {"load_config": load_config, "model_config": Obj("model_config")}
            selected.loader = sim.call_function(
                Func(loader_mod, select),
                [args.get(p, unknown(f"argument {p} of {SELECT}()")) for p in params],
                {},
                Ctx(),
            )
        finally:
            sim.construct_under = construct_under

    return step


def settings_given(sim: Simulator, given: set[str]) -> bool:
    """Whether the command gives a server arg the LoadConfig is built from (`--load-format`,
    `--model-loader-extra-config`, ...). Without one, and without config.json, the loader
    is the default's, whose constructors check only those settings: nothing to decide."""
    runner_mod = sim.module(MODEL_RUNNER_MODULE)
    runner = runner_mod.classes.get("ModelRunner") if runner_mod is not None else None
    return runner is not None and bool(_load_config_reads(runner) & given)


@by_identity
def _load_config_reads(runner: ast.ClassDef) -> frozenset[str]:
    """The server args the ModelRunner's `self.load_config = LoadConfig(...)` reads."""
    call = _load_config_call(runner)
    if call is None:
        return frozenset()
    return frozenset(
        n.attr
        for k in call.keywords
        for n in ast.walk(k.value)
        if isinstance(n, ast.Attribute) and ast.unparse(n.value).endswith("server_args")
    )


@by_identity
def _load_config_call(runner: ast.ClassDef) -> ast.Call | None:
    """The ModelRunner's `self.load_config = LoadConfig(...)`."""
    for node in ast.walk(runner):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and ast.unparse(node.targets[0]) == "self.load_config"
            and isinstance(node.value, ast.Call)
            and ast.unparse(node.value.func) == LOAD_CONFIG
        ):
            return node.value
    return None


def _server_arg_value(sim: Simulator, value: ast.expr, frame: Frame) -> Any:
    """A LoadConfig argument computed from the server args alone (`self.server_args.x`),
    else unknown (the runner's rank, objects it built before)."""
    for node in ast.walk(value):
        if isinstance(node, ast.Name) and node.id != "self":
            return unknown(f"the load config's {ast.unparse(value)}")
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
            and node.attr != "server_args"
        ):
            return unknown(f"the load config's {ast.unparse(value)}")
    return sim.eval(value, frame, Ctx())


def checks_step(
    sim: Simulator, selected: Selected, path: str | None, profile: Profile | None
) -> Callable[[], None] | None:
    """The selected loader's weight-loading method, its statements before the first that
    reads the weights; None when the loader is not decided or has no such method."""
    loader = selected.loader
    if not isinstance(loader, Instance):
        return None
    load_model = classes.instance_attr(sim, loader, LOAD_MODEL, True)
    if not isinstance(load_model, Func):
        return None
    # load_model's own statements after it built the model (the layered loader's
    # `hasattr(model, "load_weights_to_module")`), then the method it hands the model to
    found = [_checking(load_model, _after_building(load_model.node.body) or [])]
    method = _weights_method(sim, loader, load_model.node)
    if method is not None:
        found.append(_checking(method, method.node.body))
    runs = [run for run in found if run is not None]
    if not runs:
        return None
    root = architecture_class(sim, path, profile.arch if profile is not None else None)
    model: Any = (
        Instance(root, "its constructor is not simulated here")
        if root is not None
        else unknown("the model the loader built")
    )
    values = {"model_config": Obj("model_config"), "model": model}

    def step() -> None:
        with parallel_state.answered(sim):
            for func in runs:
                node = func.node
                params = [p.arg for p in (*node.args.posonlyargs, *node.args.args)][1:]
                args = [values.get(p, unknown(f"argument {p} of {node.name}()")) for p in params]
                kwargs = {
                    p.arg: values.get(p.arg, unknown(f"argument {p.arg} of {node.name}()"))
                    for p in node.args.kwonlyargs
                }
                sim.call_function(Func(func.module, node, loader, func.owner), args, kwargs, Ctx())

    return step


def _checking(method: Func, body: list[ast.stmt]) -> Func | None:
    """`method` cut to `body`'s statements before the first that reads the weights, with
    `model` a parameter (the model built); None when nothing is left."""
    node = copy.copy(method.node)
    node.body = _before_reading(body)
    if not node.body:
        return None
    if not any(a.arg == "model" for a in (*node.args.args, *node.args.kwonlyargs)):
        node.args = copy.copy(node.args)
        node.args.kwonlyargs = [*node.args.kwonlyargs, ast.arg("model")]
        node.args.kw_defaults = [*node.args.kw_defaults, None]
    return Func(method.module, node, method.bound, method.owner)


def _after_building(body: list[ast.stmt]) -> list[ast.stmt] | None:
    """The statements that follow `model = ...` (at the top of `body` or in its `with`
    blocks, then those after each block); None when `body` builds no model there."""
    for index, stmt in enumerate(body):
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id == "model"
            and isinstance(stmt.value, ast.Call)
        ):
            return body[index + 1 :]
        if isinstance(stmt, ast.With | ast.AsyncWith):
            inner = _after_building(stmt.body)
            if inner is not None:
                return inner + body[index + 1 :]
    return None


def _weights_method(sim: Simulator, loader: Instance, load_model: ast.AST) -> Func | None:
    """The loader's method `load_model` hands the model it built (`self._load_weights(
    model_config, model)`)."""
    for node in ast.walk(load_model):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "self"
            and any(isinstance(a, ast.Name) and a.id == "model" for a in node.args)
        ):
            found = classes.instance_attr(sim, loader, node.func.attr, True)
            return found if isinstance(found, Func) else None
    return None


def _before_reading(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements before the first that calls a method of the loader or the model:
    from there on the weight files are read."""
    out: list[ast.stmt] = []
    for stmt in body:
        if any(_on_loader_or_model(n) for n in ast.walk(stmt)):
            break
        out.append(stmt)
    return out


def _on_loader_or_model(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in ("self", "model")
    )
