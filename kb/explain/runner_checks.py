"""The ModelRunner's checks of the loaded model (steps of the load stage, kb.explain.deploy):
`initialize` computes the initial expert location, which asks the model class (through the
model registry) for its expert counts and asserts they divide among the ep ranks; then the
runner reads the model's forward signature (`"pp_proxy_tensors" in
inspect.signature(self.model.forward).parameters`) and asserts it under `--pp-size` > 1.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kb.explain import classes, parallel_state
from kb.explain.abstract_values import SELF, ClassRef, Func, Obj
from kb.explain.derived import MODEL_RUNNER_MODULE
from kb.explain.frames import Ctx
from kb.explain.memo import by_identity
from kb.explain.model_class import self_attr
from kb.explain.model_registry import architecture_class
from kb.explain.predicates import Profile

if TYPE_CHECKING:
    from kb.explain.simulate import Simulator

FORWARD_PART = "the model runner's checks of the model's forward"


def forward_step(
    sim: Simulator, path: str | None, profile: Profile | None
) -> Callable[[], None] | None:
    """ModelRunner's checks that read the model's forward signature once loaded: `self.X =
    "pp_proxy_tensors" in inspect.signature(self.model.forward).parameters`, then `if
    self.pp_size > 1: assert self.X, "Pipeline Parallel is not compatible with this model."`.
    Each such check runs with the signature read from the architecture's class (its own
    `forward` or the nearest base's); None when the class or the runner is not held."""
    root = architecture_class(sim, path, profile.arch if profile is not None else None)
    mod = sim.module(MODEL_RUNNER_MODULE)
    runner = mod.classes.get("ModelRunner") if mod is not None else None
    if root is None or mod is None or runner is None:
        return None
    checks = _forward_checks(sim.modules, runner, root.node)(sim, root)
    if not checks:
        return None

    def run() -> None:
        owner = classes.class_ref(mod, "ModelRunner")
        for method, stmts in checks:
            node = copy.copy(method)
            node.args = ast.arguments([], [ast.arg("self")], None, [], [], None, [])
            node.body = stmts
            sim.call_function(Func(mod, node, Obj("runner"), owner), [], {}, Ctx())

    return run


@by_identity
def _forward_checks(
    _modules: Any, runner: ast.ClassDef, _root: ast.ClassDef
) -> Callable[[Simulator, ClassRef], list[tuple[ast.FunctionDef, list[ast.stmt]]]]:
    """The runner's checks of the forward signature of the architecture's class, found once
    per version's modules (the class's bases are theirs), runner and class."""
    found: list[list[tuple[ast.FunctionDef, list[ast.stmt]]]] = []

    def checks(sim: Simulator, root: ClassRef) -> list[tuple[ast.FunctionDef, list[ast.stmt]]]:
        if not found:
            found.append(
                [
                    (method, stmts)
                    for method in runner.body
                    if isinstance(method, ast.FunctionDef)
                    and (stmts := _signature_checks(sim, method, root))
                ]
            )
        return found[0]

    return checks


LOADED_PART = "the model runner's checks of the model it loaded"


def loaded_model_step(sim: Simulator, profile: Profile | None) -> Callable[[], None] | None:
    """ModelRunner.load_model's top-level statements after the one that loads the model
    (`self.model = self.loader.load_model(...)`) that raise or assert and read
    `self.model`: with `--kv-cache-dtype fp8_e4m3` and a scales file, a model without
    `load_kv_cache_scales` raises. `self.model` is the architecture's class on config.json
    (kb.explain.derived.loaded_model); None without config.json or such statements."""
    mod = sim.module(MODEL_RUNNER_MODULE)
    runner = mod.classes.get("ModelRunner") if mod is not None else None
    if mod is None or runner is None or profile is None or profile.config is None:
        return None
    found = _after_loading(runner)
    if found is None:
        return None
    method, stmts = found

    def run() -> None:
        node = copy.copy(method)
        node.args = ast.arguments([], [ast.arg("self")], None, [], [], None, [])
        node.body = stmts
        owner = classes.class_ref(mod, "ModelRunner")
        sim.call_function(Func(mod, node, Obj("runner"), owner), [], {}, Ctx())

    return run


_after_loading_cache: dict[int, tuple[ast.ClassDef, Any]] = {}


def _after_loading(runner: ast.ClassDef) -> tuple[ast.FunctionDef, list[ast.stmt]] | None:
    """load_model and its statements that check the model it loaded (once per parsed
    ModelRunner: every simulation asks)."""
    cached = _after_loading_cache.get(id(runner))
    if cached is None or cached[0] is not runner:
        if len(_after_loading_cache) > 64:
            _after_loading_cache.clear()
        cached = _after_loading_cache[id(runner)] = (runner, _find_after_loading(runner))
    found: tuple[ast.FunctionDef, list[ast.stmt]] | None = cached[1]
    return found


def _find_after_loading(runner: ast.ClassDef) -> tuple[ast.FunctionDef, list[ast.stmt]] | None:
    method = next(
        (m for m in runner.body if isinstance(m, ast.FunctionDef) and m.name == "load_model"),
        None,
    )
    if method is None:
        return None
    start = next((i for i, stmt in enumerate(method.body) if _loads_model(stmt)), None)
    if start is None:
        return None
    stmts = [
        stmt
        for stmt in method.body[start + 1 :]
        if any(isinstance(n, ast.Assert | ast.Raise) for n in ast.walk(stmt))
        and any(self_attr(n) == "model" for n in ast.walk(stmt))
    ]
    return (method, stmts) if stmts else None


def _loads_model(stmt: ast.stmt) -> bool:
    """`self.model = <...>.load_model(...)`, at the top or in a block of `stmt`."""
    return any(
        isinstance(n, ast.Assign)
        and any(self_attr(t) == "model" for t in n.targets)
        and isinstance(n.value, ast.Call)
        and ast.unparse(n.value.func).endswith("load_model")
        for n in ast.walk(stmt)
    )


def _signature_checks(sim: Simulator, method: ast.FunctionDef, root: ClassRef) -> list[ast.stmt]:
    """The method's top-level statements that raise or assert on a field it set from the
    model's signature, with that field replaced by its value and the signature's
    parameters by the architecture's (a tuple of their names)."""
    fields: dict[str, ast.expr] = {}
    out: list[ast.stmt] = []
    for stmt in method.body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and self_attr(stmt.targets[0]) is not None
            and (value := _with_signature(sim, stmt.value, root)) is not None
        ):
            fields[self_attr(stmt.targets[0]) or ""] = value
        elif fields and any(isinstance(n, ast.Assert | ast.Raise) for n in ast.walk(stmt)):
            reads = {self_attr(n) for n in ast.walk(stmt)} & set(fields)
            if reads:
                out.append(_Substitute(fields).visit(copy.deepcopy(stmt)))
    return out


def _with_signature(sim: Simulator, value: ast.expr, root: ClassRef) -> ast.expr | None:
    """`value` with each `inspect.signature(self.model.<m>).parameters` replaced by the
    names of the parameters of the architecture's `<m>`; None when it has none, or when a
    method it names is not found in the classes held."""
    found = False
    for node in ast.walk(value):
        if isinstance(node, ast.Attribute) and node.attr == "parameters":
            call = node.value
            if not (
                isinstance(call, ast.Call)
                and ast.unparse(call.func) in ("inspect.signature", "signature")
                and len(call.args) == 1
                and isinstance(call.args[0], ast.Attribute)
                and ast.unparse(call.args[0].value) == "self.model"
            ):
                continue
            params = _method_params(sim, root, call.args[0].attr)
            if params is None:
                return None
            found = True
    if not found:
        return None
    return _Signature(sim, root).visit(copy.deepcopy(value))


def _method_params(sim: Simulator, root: ClassRef, name: str) -> list[str] | None:
    for c in classes.mro(sim, root)[0]:
        for node in c.node.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
                a = node.args
                return [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)][1:]
    return None  # (defined by a base not held here, if at all)


class _Signature(ast.NodeTransformer):
    def __init__(self, sim: Simulator, root: ClassRef) -> None:
        self.sim, self.root = sim, root

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        call = node.value
        if node.attr == "parameters" and isinstance(call, ast.Call) and call.args:
            target = call.args[0]
            if isinstance(target, ast.Attribute):
                params = _method_params(self.sim, self.root, target.attr) or []
                names: list[ast.expr] = [ast.Constant(p) for p in params]
                return ast.copy_location(ast.Tuple(names, ast.Load()), node)
        return self.generic_visit(node)


class _Substitute(ast.NodeTransformer):
    def __init__(self, fields: dict[str, ast.expr]) -> None:
        self.fields = fields

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        name = self_attr(node)
        if name in self.fields and isinstance(node.ctx, ast.Load):
            return ast.copy_location(copy.deepcopy(self.fields[name]), node)
        return self.generic_visit(node)


# --- the initial expert location ---------------------------------------------------------

EXPERT_LOCATION_PART = "the initial expert location"
EXPERT_LOCATION = ("sglang.srt.eplb.expert_location", "compute_initial_expert_location_metadata")
EXPERT_DISTRIBUTION = ("sglang.srt.eplb.expert_distribution", "ExpertDistributionRecorder")


def expert_location_step(sim: Simulator) -> Callable[[], None] | None:
    """`ModelRunner.initialize`'s `compute_initial_expert_location_metadata(server_args,
    model_config, moe_ep_rank)`, which asks the model class (through the registry) for its
    expert counts and asserts the physical experts divide among the ep ranks (rank 0's
    run), then `ExpertDistributionRecorder.init_new(server_args, that metadata, rank)`,
    which refuses a recorder mode without metadata (a model class that gives none) and a
    DeepEP mode its gatherers lack (`auto`); None without the function."""
    mod = sim.module(EXPERT_LOCATION[0])
    fn = mod.functions.get(EXPERT_LOCATION[1]) if mod is not None else None
    if mod is None or fn is None:
        return None
    compute = Func(mod, fn)
    recorder = sim.module(EXPERT_DISTRIBUTION[0])
    found = recorder.classes.get(EXPERT_DISTRIBUTION[1]) if recorder is not None else None
    init_new = (
        classes.class_attr(sim, classes.class_ref(recorder, EXPERT_DISTRIBUTION[1]), "init_new")
        if recorder is not None and found is not None
        else None
    )

    def run() -> None:
        # (the dataclass the model class answers with is built as written)
        construct, sim.construct = sim.construct, True
        try:
            with parallel_state.answered(sim):
                metadata = sim.call_function(compute, [SELF, Obj("model_config"), 0], {}, Ctx())
                # ... then the expert distribution recorder on it (EPLB's: its gatherer for
                # the a2a backend and DeepEP mode)
                if isinstance(init_new, Func):
                    sim.call_function(init_new, [SELF, metadata], {"rank": 0}, Ctx())
        finally:
            sim.construct = construct

    return run
