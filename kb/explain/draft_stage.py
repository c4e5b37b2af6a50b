"""The load stage's speculative-decoding step: the draft worker building its own attention
backends (the multi-step draft decode and the draft extend), as the version's code does it.

With a draft model (EAGLE, EAGLE3, STANDALONE), SGLang's scheduler asks
`SpeculativeAlgorithm.from_string(server_args.speculative_algorithm).create_worker(server_args)`
for the worker class; the worker (or the draft worker its constructor builds into a field,
`self._draft_worker = EagleDraftWorker(...)`) then runs a method that builds
`DraftBackendFactory(server_args, draft_runner, topk, num_steps)` and asks it for its
backends. The factory looks the backend's name up in maps of its own, which lack some of the
names ServerArgs accepts, and raises for those: nothing in ServerArgs guards it.

All of that is interpreted by the simulator over the version's own source, so which worker,
which backend name and which map are the version's. The worker's constructor is run up to
where it loads the draft model, for its checks of the server args (`_constructor_checks`);
past that it is not run: the fields the method reads are derived from the constructor's
top-level `self.<field> = <value>` statements (the value after the statements before it that
bind what it reads), with the server args being simulated as its `server_args`. The draft
worker's ModelRunner is the draft model's (`Obj("draft_runner")`, kb.explain.derived): its
own `model_runner`, and a field taken from one (`self.draft_runner =
self.draft_worker.model_runner`). What is not decided stays unknown, and a raise behind it is
reported as undecided, with what would decide it.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kb.explain import classes, derived
from kb.explain.abstract_values import SELF, ClassRef, Func, Instance, Obj
from kb.explain.frames import Ctx, Frame, Raised
from kb.explain.predicates import Unknown, unknown

if TYPE_CHECKING:
    from kb.explain.simulate import Check, Simulator

PART = "the draft worker's attention backends"
CONSTRUCTOR_PART = "the speculative worker's constructor, and the draft's ModelConfig"
SPEC_INFO = "sglang.srt.speculative.spec_info"
ALGORITHM_CLASS = "SpeculativeAlgorithm"
FACTORY = "DraftBackendFactory"
NOT_RUN = "its constructor is not simulated: only the fields it sets from the server args"
SPECULATIVE_DIR = "python/sglang/srt/speculative/"

Method = ast.FunctionDef | ast.AsyncFunctionDef


def step(sim: Simulator) -> Callable[[], None] | None:
    """The step to run past ServerArgs (`sim.run_after`); None when the version has no
    draft backend factory to follow (its speculative workers are not simulated then)."""
    mod = sim.module(SPEC_INFO)
    if mod is None or ALGORITHM_CLASS not in mod.classes:
        return None
    algorithm_cls = classes.class_ref(mod, ALGORITHM_CLASS)
    from_string = classes.class_attr(sim, algorithm_cls, "from_string")
    if not isinstance(from_string, Func):
        return None

    return lambda: _building(
        sim, lambda: build(sim, from_string, lambda worker: _build_backends(sim, worker))
    )


def _building(sim: Simulator, run: Callable[[], None]) -> None:
    """`run()` with the objects it builds constructed (the draft worker a worker builds in
    its constructor, the draft backend factory whose constructor holds what its check
    reads); an undecided raise here is said as such, never as a likely error."""
    start = len(sim.result.checks)
    construct, sim.construct = sim.construct, True
    try:
        run()
    finally:
        sim.construct = construct
        checks = sim.result.checks
        for i in range(start, len(checks)):
            if checks[i].outcome == "likely":
                checks[i] = replace(checks[i], outcome="unknown")


def constructor_step(sim: Simulator, then: Callable[[], None]) -> Callable[[], None] | None:
    """The step running the speculative worker's constructor up to where it loads the draft
    model (its checks of the server args, and the server args it sets for the draft:
    `context_length`, the target's), then `then` (the draft's ModelConfig checks), with
    the server args as the constructor left them. None as for `step`."""
    mod = sim.module(SPEC_INFO)
    if mod is None or ALGORITHM_CLASS not in mod.classes:
        return None
    from_string = classes.class_attr(sim, classes.class_ref(mod, ALGORITHM_CLASS), "from_string")
    if not isinstance(from_string, Func):
        return None

    def each(worker: ClassRef) -> None:
        _constructor_checks(sim, worker)
        then()

    return lambda: _building(sim, lambda: build(sim, from_string, each))


def build(sim: Simulator, from_string: Func, each: Callable[[ClassRef], None]) -> None:
    """The scheduler's choice of the speculative worker, then `each` of the worker class
    (of each class, when it is not decided)."""
    ctx = Ctx()
    name = sim.attribute(SELF, "speculative_algorithm")
    algorithm = sim.call_function(from_string, [name], {}, ctx)
    create = sim.attribute(algorithm, "create_worker")
    if not isinstance(create, Func):
        return
    worker = sim.call_function(create, [SELF], {}, ctx)
    if isinstance(worker, ClassRef):
        each(worker)
    elif isinstance(worker, Unknown) and worker.options:
        _each_worker(sim, worker, each)


def _each_worker(sim: Simulator, worker: Unknown, each: Callable[[ClassRef], None]) -> None:
    """The worker class not decided (`SGLANG_ENABLE_SPEC_V2` unknown picks EAGLEWorker or
    EAGLEWorkerV2): each is followed on its own; what fails with every one of them fails
    for sure, what fails with some only is undecided, naming what decides the worker. (A
    worker's run is not made undecided from its start: the objects it builds would get
    only unknown fields.)"""
    needs = worker.needs or ("which speculative worker SGLang builds",)
    # (a path on which create_worker returns no class ends in its own "unreachable" raise,
    # which the run reports: it builds no backends)
    options = [option for option in worker.options or () if isinstance(option, ClassRef)]
    runs: list[list[Check]] = []
    for option in options:
        start = len(sim.result.checks)
        each(option)
        runs.append(sim.result.checks[start:])
        del sim.result.checks[start:]
    fails = [{(c.path, c.line) for c in run if c.outcome in ("fired", "likely")} for run in runs]
    everywhere = set.intersection(*fails) if fails else set()
    for option, run in zip(options, runs, strict=True):
        said = f"the speculative worker is {option.name}"
        for check in run:
            if check.outcome in ("fired", "likely") and (check.path, check.line) not in everywhere:
                check = replace(
                    check,
                    outcome="unknown",
                    conditions=(said, *check.conditions),
                    needs=tuple(dict.fromkeys((*needs, *check.needs))),
                )
            sim.result.checks.append(check)


def _build_backends(sim: Simulator, worker: ClassRef) -> None:
    found = _drafter(sim, worker)
    if found is None:
        return
    drafter, method = found
    obj = Instance(drafter, NOT_RUN)
    obj.fields["model_runner"] = Obj("draft_runner")  # a TpModelWorker of the draft model
    for attr in sorted(_self_reads(method.node)):
        value = _constructor_field(sim, drafter, obj, attr)
        if value is not None:
            obj.fields[attr] = value
    bound = Func(method.module, method.node, obj, method.owner)
    sim.call_function(bound, [], {}, Ctx())


def _constructor_checks(sim: Simulator, cls: ClassRef) -> None:
    """The statements of the class's constructor before the first that loads a model (builds
    a TpModelWorker or ModelRunner, or runs a base class's constructor: the draft model's
    load, followed by the load stage's other steps), with `server_args` the server args
    being simulated and its other parameters unknown. A class it builds on the way (the
    draft worker in a field: `self._draft_worker = EagleDraftWorker(...)`) is constructed,
    as the step builds objects (its TpModelWorker is not held: unknown)."""
    init = classes.class_attr(sim, cls, "__init__")
    if not isinstance(init, Func) or not init.module.path.startswith(SPECULATIVE_DIR):
        return
    body: list[ast.stmt] = []
    for stmt in init.node.body:
        if any(_loads(n) for n in ast.walk(stmt)):
            break
        body.append(stmt)
    if not body:
        return
    node = copy.copy(init.node)
    node.body = body
    obj = Instance(cls, NOT_RUN)
    args = init.node.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)][1:]
    given: dict[str, Any] = {
        n: SELF if n == "server_args" else unknown(f"{cls.name}({n})") for n in names
    }
    if "target_worker" in given:  # the target model's worker, built before (its runner's)
        given["target_worker"] = _target_worker(sim) or given["target_worker"]
    start = len(sim.result.checks)
    try:
        sim.call_function(Func(init.module, node, obj, init.owner), [], given, Ctx())
    except Raised:
        last = sim.result.checks[-1]
        if last.path.startswith(SPECULATIVE_DIR) and last.kind != "opaque":
            raise
    finally:
        # (only the speculative code's own raises and asserts: what else it calls, such as
        # loading a tokenizer, is the load stage's and rests on files not known here; the
        # server args handed to code not held end this step, not SGLang's start)
        checks = sim.result.checks
        checks[start:] = [
            c for c in checks[start:] if c.path.startswith(SPECULATIVE_DIR) and c.kind != "opaque"
        ]


TP_WORKER = "sglang.srt.managers.tp_worker"


def _target_worker(sim: Simulator) -> Instance | None:
    """The target model's TpModelWorker, as the speculative worker is handed it: its
    ModelRunner and ModelConfig are the main model's (its constructor is not run)."""
    mod = sim.module(TP_WORKER)
    if mod is None or "TpModelWorker" not in mod.classes:
        return None
    worker = Instance(classes.class_ref(mod, "TpModelWorker"), NOT_RUN)
    worker.fields.update(model_runner=Obj("runner"), model_config=Obj("model_config"))
    return worker


def _loads(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    name = ast.unparse(node.func)
    return name.endswith(("TpModelWorker", "ModelRunner")) or name == "super().__init__"


def _drafter(sim: Simulator, worker: ClassRef) -> tuple[ClassRef, Func] | None:
    """The class whose method builds the draft backend factory, and that method: the worker
    class itself, or a class its constructor builds into one of its fields."""
    method = _factory_method(sim, worker)
    if method is not None:
        return worker, method
    init = classes.class_attr(sim, worker, "__init__")
    if not isinstance(init, Func):
        return None
    frame = Frame(init.module, "__init__", {})
    for node in ast.walk(init.node):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        if not any(_is_self_attr(t) for t in node.targets):
            continue
        func = node.value.func
        if isinstance(func, ast.Name):
            built = sim.lookup(func.id, frame)
            if isinstance(built, ClassRef) and (method := _factory_method(sim, built)):
                return built, method
    return None


def _factory_method(sim: Simulator, cls: ClassRef) -> Func | None:
    """The method of `cls` (as its classes resolve the name) that calls the factory."""
    found, _ = classes.mro(sim, cls)
    for owner in found:
        for node in owner.node.body:
            if isinstance(node, ast.FunctionDef) and _calls_factory(node):
                nearest = classes.class_attr(sim, cls, node.name)
                if isinstance(nearest, Func) and nearest.node is node:
                    return nearest
                return None  # overridden by a method that does not build it
    return None


_calls_cache: dict[int, tuple[ast.AST, bool]] = {}


def _calls_factory(node: Method) -> bool:
    cached = _calls_cache.get(id(node))
    if cached is not None and cached[0] is node:
        return cached[1]
    calls = any(
        isinstance(n, ast.Call) and ast.unparse(n.func).split(".")[-1] == FACTORY
        for n in ast.walk(node)
    )
    if len(_calls_cache) > 256:
        _calls_cache.clear()
    _calls_cache[id(node)] = (node, calls)
    return calls


def _self_reads(node: Method) -> set[str]:
    return {
        n.attr
        for n in ast.walk(node)
        if _is_self_attr(n) and isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)
    }


def _is_self_attr(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def _constructor_field(sim: Simulator, cls: ClassRef, obj: Instance, attr: str) -> Any:
    """`self.<attr>` as the class's constructor leaves it: its last top-level assignment in
    the nearest `__init__` (None when that sets it nowhere, or also in a nested block: then
    which one holds is not decided here)."""
    init = classes.class_attr(sim, cls, "__init__")
    if not isinstance(init, Func):
        return None
    body = init.node.body
    sites = [
        n
        for n in ast.walk(init.node)
        if isinstance(n, ast.Assign) and any(_named(t, attr) for t in n.targets)
    ]
    top = [i for i, stmt in enumerate(body) if stmt in sites]
    if not top:
        return None
    if len(top) != len(sites):
        return unknown(f"{cls.name}.{attr} (its constructor sets it on a path not simulated)")
    index = top[-1]
    value = body[index].value  # type: ignore[attr-defined]
    if isinstance(value, ast.Attribute) and value.attr == "model_runner":
        return Obj("draft_runner")  # the draft model's runner (`self.draft_worker.model_runner`)
    params = [a.arg for a in (*init.node.args.posonlyargs, *init.node.args.args)][1:]
    params += [a.arg for a in init.node.args.kwonlyargs]
    frame = Frame(init.module, "__init__", {"self": obj})
    for name in params:  # the server args being simulated; the rest is not known here
        frame.locals[name] = SELF if name == "server_args" else unknown(f"{cls.name}({name})")
    return _after(sim, frame, body[:index], value)


def _after(sim: Simulator, frame: Frame, before: list[ast.stmt], value: ast.expr) -> Any:
    """`value` after the statements of `before` that bind the locals it reads (their checks
    are the constructor's, not this step's)."""
    return derived._evaluate(sim, frame, before, value, {})


def _named(target: ast.expr, attr: str) -> bool:
    return _is_self_attr(target) and isinstance(target, ast.Attribute) and target.attr == attr
