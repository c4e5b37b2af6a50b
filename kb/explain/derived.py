"""What SGLang's ModelConfig derives from the model's config.json, read from the version's own
`sglang/srt/configs/model_config.py` and interpreted by the simulator that runs ServerArgs.

ServerArgs reads `self.get_model_config().x`. Here `x` is, in the version's ModelConfig class:
- a method (`get_num_kv_heads`): a function bound to the model config, interpreted when
  called; a property: called at once;
- a field set once, at the top level of the constructor (`self.is_multimodal = ...`) or of
  a helper taking only `self`: its right-hand side evaluated after that method's statements
  that bind the locals it reads
  (a backward slice: `if enable_multimodal is None: ... enable_multimodal = True`). The
  constructor's parameters are the arguments `ModelConfig.from_server_args` passes, read
  from the server args being simulated, else their defaults.
Anything else stays unknown, with the attribute named. The derivation never records checks
or changes: what ModelConfig raises or logs is not ServerArgs' to report.
"""

from __future__ import annotations

import ast
import contextlib
import copy
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from kb.explain import module_state
from kb.explain.abstract_values import SELF, Func, Instance, Obj, merge_needs, truth
from kb.explain.memo import by_identity
from kb.explain.model_registry import architecture_class
from kb.explain.predicates import MISSING, Unknown, unknown
from kb.explain.simulate import Ctx, Frame, _Break, _Continue, _Return
from kb.explain.source_modules import Module

if TYPE_CHECKING:
    from kb.explain.simulate import Simulator

MODEL_CONFIG_MODULE = "sglang.srt.configs.model_config"
MAX_ITEMS = 512  # items of one comprehension (SGLang's list of multimodal architectures: ~150)

Method = ast.FunctionDef | ast.AsyncFunctionDef


def model_config_attr(sim: Simulator, attr: str, allow_missing: bool = False) -> Any:
    """`model_config.<attr>` as the version's ModelConfig derives it (cached per run);
    `allow_missing` (hasattr, getattr with a default): MISSING for an attribute the class
    never has."""
    if allow_missing and _never_set(sim, MODEL_CONFIG_MODULE, "ModelConfig", attr):
        return MISSING
    if attr not in sim.derived:
        sim.derived[attr] = unknown(f"the model's {attr} (derived from itself)")
        # (derived apart from the code that asked: a `try` there does not catch its raises)
        catching, sim.catching = sim.catching, []
        try:
            sim.derived[attr] = _derive(sim, attr)
        finally:
            sim.catching = catching
    return sim.derived[attr]


def hf_config_attr(sim: Simulator, attr: str) -> Any:
    """`hf_config.<attr>` when ModelConfig's constructor sets it on the config it loaded
    (`self.hf_config.encoder_only = encoder_only`, whatever config.json says): its value
    there, after the statements before it; MISSING when the constructor sets no such
    attribute (config.json's is read). Kept per run (every read of config.json asks)."""
    key = f"hf_config.{attr}"
    if key in sim.derived:
        return sim.derived[key]
    mod = sim.module(MODEL_CONFIG_MODULE)
    cls = mod.classes.get("ModelConfig") if mod is not None else None
    init = _methods(cls).get("__init__") if cls is not None else None
    found = _config_sets(init).get(attr) if mod is not None and init is not None else None
    if mod is None or init is None or found is None:
        sim.derived[key] = MISSING
        return MISSING
    sim.derived[key] = unknown(f"the model's {attr} (derived from itself)")
    index, value = found
    frame = Frame(mod, init.name, {"self": Obj("model_config")})
    sim.derived[key] = _evaluate(sim, frame, init.body[:index], value, _params(init, sim))
    return sim.derived[key]


@lru_cache(maxsize=16)
def _config_sets(init: Method) -> dict[str, tuple[int, ast.expr]]:
    """The constructor's top-level `self.hf_config.<attr> = value` statements: attr ->
    (index, value); an attribute set more than once, or also in a nested block, left out
    (which one holds is not decided here)."""
    found: dict[str, tuple[int, ast.expr]] = {}
    seen: dict[str, int] = {}
    for node in ast.walk(init):
        if (attr := _config_attr_set(node)) is not None:
            seen[attr] = seen.get(attr, 0) + 1
    for index, stmt in enumerate(init.body):
        attr = _config_attr_set(stmt)
        if attr is not None and seen.get(attr) == 1:
            found[attr] = (index, stmt.value)  # type: ignore[attr-defined]
    return found


def _config_attr_set(node: ast.AST) -> str | None:
    """`self.hf_config.<attr> = value`: attr."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Attribute)
            and _is_self_attr(target.value, "hf_config")
        ):
            return target.attr
    return None


def _never_set(sim: Simulator, module: str, class_name: str, attr: str) -> bool:
    """Whether no instance of the class has `attr`: a class of no bases that neither
    defines it nor sets `self.<attr>` anywhere (nor anything generically: `__getattr__`,
    `__slots__`, `setattr(self, ...)`, `self.__dict__`)."""
    mod = sim.module(module)
    cls = mod.classes.get(class_name) if mod is not None else None
    names = _names_set(cls) if cls is not None else None
    return names is not None and attr not in names


@lru_cache(maxsize=64)
def _names_set(cls: ast.ClassDef) -> frozenset[str] | None:
    """The names the class defines, or sets or deletes as attributes (of any object), and
    the names it reads; None when it may have attributes by other means (a base, a
    decorator such as dataclass's, the generic ways)."""
    if cls.bases or cls.keywords or cls.decorator_list:
        return None
    names: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
            names.add(node.attr)
        elif _sets_generically(node):
            return None
    return None if names & {"__getattr__", "__getattribute__", "__slots__"} else frozenset(names)


def _sets_generically(node: ast.AST) -> bool:
    """`self.__dict__`, `setattr(self, ...)`: attributes of any name."""
    if isinstance(node, ast.Attribute):
        return node.attr == "__dict__"
    return (
        isinstance(node, ast.Call)
        and ast.unparse(node.func) == "setattr"
        and (not node.args or ast.unparse(node.args[0]) == "self")
    )


def _derive(sim: Simulator, attr: str) -> Any:
    return _derived_attr(
        sim,
        MODEL_CONFIG_MODULE,
        "ModelConfig",
        Obj("model_config"),
        attr,
        lambda init: _params(init, sim),
        f"the model's {attr}",
    )


# --- the ModelRunner that loads the model (the load stage: kb.explain.deploy.simulate) ----

MODEL_RUNNER_MODULE = "sglang.srt.model_executor.model_runner"
# ModelRunner's size parameters -> the server args the TpModelWorker passes for them
# (`tp_size=self.tp_size`, `moe_ep_size=self.ep_size`, `pp_size=self.pp_size`, from its
# server_args), for the main model's runner (the draft worker's passes the same)
RUNNER_SIZES = {"tp_size": "tp_size", "pp_size": "pp_size", "moe_ep_size": "ep_size"}


def runner_attr(sim: Simulator, runner: Obj, attr: str) -> Any:
    """`<runner>.<attr>` for the main model's ModelRunner (Obj("runner")) or the draft
    model's (Obj("draft_runner")), as the version's class derives it; each is built with
    the server args being simulated and its model's config (the draft model's is not known
    here: its attributes stay unknown)."""
    draft = runner.kind == "draft_runner"
    model_config = Obj("draft_model_config" if draft else "model_config")
    if attr == "server_args":
        return SELF
    if attr == "model_config":
        return model_config
    if attr == "is_draft_worker":
        return draft
    key = f"{runner.kind}.{attr}"
    if attr == "model" and not draft and key not in sim.derived:
        sim.derived[key] = loaded_model(sim)
    if key not in sim.derived:
        sim.derived[key] = unknown(f"ModelRunner.{attr} (derived from itself)")

        def built_with(_init: Method) -> dict[str, Callable[[], Any]]:
            sizes = {
                param: (lambda f=field: sim.attribute(SELF, f))
                for param, field in RUNNER_SIZES.items()
            }
            return {"server_args": lambda: SELF, "model_config": lambda: model_config, **sizes}

        sim.derived[key] = _derived_attr(
            sim,
            MODEL_RUNNER_MODULE,
            "ModelRunner",
            runner,
            attr,
            built_with,
            f"ModelRunner.{attr}",
        )
    return sim.derived[key]


def loaded_model(sim: Simulator) -> Any:
    """The ModelRunner's `model`: an instance of the architecture's class on config.json
    (`self.config`), for its methods that read only the config
    (`get_attention_sliding_window_size()`); the rest of what its constructor built is
    unknown (the instance is not constructed here)."""
    profile = sim.profile
    files = dict(sim.models.files) if sim.models is not None else {}
    arch = profile.arch if profile is not None and profile.config is not None else None
    cls = architecture_class(sim, files.get(arch or ""), arch)
    if cls is None:
        return unknown("the model the ModelRunner loaded")
    model = Instance(cls, "loaded by the ModelRunner (its constructor not run here)")
    model.fields["config"] = Obj("hf_config")
    return model


def server_args_set_by_runner(sim: Simulator) -> dict[str, str]:
    """The server args fields the ModelRunner sets on the global server args from its own
    attributes (`global_server_args = get_global_server_args()` then
    `global_server_args.use_mla_backend = self.use_mla_backend`, shadowing ServerArgs'
    method of that name for the code run after it): field -> the runner's attribute."""
    mod = sim.module(MODEL_RUNNER_MODULE)
    cls = mod.classes.get("ModelRunner") if mod is not None else None
    if cls is None:
        return {}
    cached = _runner_copies_cache.get(id(cls))
    if cached is None or cached[0] is not cls:  # (one walk per parsed ModelRunner)
        cached = _runner_copies_cache[id(cls)] = (cls, _runner_copies(cls))
    return dict(cached[1])


_runner_copies_cache: dict[int, tuple[ast.ClassDef, dict[str, str]]] = {}


def _runner_copies(cls: ast.ClassDef) -> dict[str, str]:
    out: dict[str, str] = {}
    for method in _methods(cls).values():
        assigns = [
            (n.targets[0], n.value)
            for n in ast.walk(method)
            if isinstance(n, ast.Assign) and len(n.targets) == 1
        ]
        held = {
            target.id
            for target, value in assigns
            if isinstance(target, ast.Name)
            and isinstance(value, ast.Call)
            and _called(value.func) == "get_global_server_args"
        }
        for target, value in assigns:
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id in held
                and isinstance(value, ast.Attribute)
                and isinstance(value.value, ast.Name)
                and value.value.id == "self"
            ):
                out[target.attr] = value.attr
    return out


def _called(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def runner_method(sim: Simulator, name: str, draft: bool = False) -> Func | None:
    """A method of the version's ModelRunner, bound to the main model's runner (or the
    draft model's); None without it."""
    mod = sim.module(MODEL_RUNNER_MODULE)
    cls = mod.classes.get("ModelRunner") if mod is not None else None
    node = _methods(cls).get(name) if cls is not None else None
    if mod is None or node is None:
        return None
    return Func(mod, node, Obj("draft_runner" if draft else "runner"))


def _derived_attr(
    sim: Simulator,
    module: str,
    class_name: str,
    bound: Obj,
    attr: str,
    init_params: Callable[[Method], dict[str, Callable[[], Any]]],
    words: str,
) -> Any:
    """`attr` of an instance of `class_name`: a method bound to it, a property called, or a
    field set once (see the module's docstring); else unknown, naming `words`."""
    mod = sim.module(module)
    cls = mod.classes.get(class_name) if mod is not None else None
    if mod is None or cls is None:
        return unknown(words)
    methods = _methods(cls)
    if attr in methods:
        node = methods[attr]
        decorators = {ast.unparse(d) for d in node.decorator_list}
        if "property" in decorators:
            return sim.call_function(Func(mod, node, bound), [], {}, Ctx())
        return Func(mod, node, None if "staticmethod" in decorators else bound)
    found = _set_once(cls, attr)
    if found is None:
        helper = _set_by_helper(cls, attr)
        if helper is not None:
            return _run_helper(sim, mod, bound, attr, *helper, init_params, words)
        guarded = _set_then_guarded(cls, attr)
        if guarded is not None:
            return _guarded_value(sim, mod, bound, init_params, *guarded)
        rewritten = _set_then_rewritten(cls, attr)
        if rewritten is None:
            return _set_in_constructor(sim, mod, bound, cls, attr, init_params, words)
        init, index, value, helpers = rewritten
        frame = Frame(mod, init.name, {"self": bound})
        start = _evaluate(sim, frame, init.body[:index], value, init_params(init))
        return _rewrite(sim, mod, bound, attr, start, helpers)
    method, index, value = found
    frame = Frame(mod, method.name, {"self": bound})
    params = init_params(method) if method.name == "__init__" else {}
    return _evaluate(sim, frame, method.body[:index], value, params)


def _params(init: Method, sim: Simulator) -> dict[str, Any]:
    """The constructor's parameters -> a function giving each one's value (lazily: only the
    parameters the slice reads are looked up, so only their server args count as read)."""
    names = [a.arg for a in (*init.args.posonlyargs, *init.args.args, *init.args.kwonlyargs)]
    return {name: (lambda n=name: _argument(sim, init, n)) for name in names if name != "self"}


def _evaluate(
    sim: Simulator,
    frame: Frame,
    before: list[ast.stmt],
    value: ast.expr | None,
    params: dict[str, Any],
) -> Any:
    """`value` after the statements of `before` that bind the names it reads."""
    if value is None:
        return unknown("a value this analysis cannot compute")
    stmts, names = _slice(before, _loaded(value))
    for name in names:
        if name in params and name not in frame.locals:
            frame.locals[name] = params[name]()
    checks, changes = len(sim.result.checks), len(sim.result.changes)
    saved = sim.current_path
    sim.current_path = frame.module.path
    try:
        for stmt in stmts:
            sim.stmt(stmt, frame, Ctx())
        return sim.eval(value, frame, Ctx())
    except (_Return, _Break, _Continue):
        return unknown("a value this analysis cannot compute")
    finally:
        sim.current_path = saved
        del sim.result.checks[checks:]
        del sim.result.changes[changes:]


def _argument(sim: Simulator, init: Method, name: str) -> Any:
    """What `ModelConfig.from_server_args(server_args)` passes as the constructor's `name`;
    the parameter's default when it passes nothing."""
    mod = sim.module(MODEL_CONFIG_MODULE)
    cls = mod.classes.get("ModelConfig") if mod is not None else None
    factory = _methods(cls).get("from_server_args") if cls is not None else None
    if mod is not None and factory is not None:
        for index, stmt in enumerate(factory.body):
            call = stmt.value if isinstance(stmt, ast.Return) else None
            if not (
                isinstance(call, ast.Call) and ast.unparse(call.func) in ("ModelConfig", "cls")
            ):
                continue
            given = {k.arg: k.value for k in call.keywords if k.arg}
            if name in given:
                frame = Frame(mod, "from_server_args", dict(sim.model_config_args))
                _bind_defaults(sim, factory, frame)
                return _evaluate(sim, frame, factory.body[:index], given[name], {})
    return _default(sim, mod, init, name)


def _bind_defaults(sim: Simulator, fn: Method, frame: Frame) -> None:
    """from_server_args(server_args, model_path=None, ...): the server args, then defaults."""
    positional = [*fn.args.posonlyargs, *fn.args.args]
    if positional and positional[0].arg in ("cls", "self"):
        positional = positional[1:]
    if positional:
        frame.locals[positional[0].arg] = SELF
    _fill_defaults(sim, fn, frame)
    if fn.args.kwarg is not None:
        frame.locals[fn.args.kwarg.arg] = {}


def _fill_defaults(sim: Simulator, fn: Method, frame: Frame) -> None:
    positional = [*fn.args.posonlyargs, *fn.args.args]
    with_default = positional[len(positional) - len(fn.args.defaults) :]
    pairs = list(zip(with_default, fn.args.defaults, strict=True))
    kw_defaults = zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True)
    pairs += [(a, d) for a, d in kw_defaults if d is not None]
    for param, default in pairs:
        if param.arg not in frame.locals:
            frame.locals[param.arg] = sim.eval(default, frame, Ctx())


def _default(sim: Simulator, mod: Module | None, init: Method, name: str) -> Any:
    if mod is not None:
        frame = Frame(mod, "__init__", {})
        _fill_defaults(sim, init, frame)
        if name in frame.locals:
            return frame.locals[name]
    return unknown(f"argument {name} of ModelConfig()")


def _methods(cls: ast.ClassDef) -> dict[str, Method]:
    cached = _methods_cache.get(id(cls))
    if cached is None or cached[0] is not cls:  # (asked at every derived attribute)
        if len(_methods_cache) > 256:
            _methods_cache.clear()
        found = {
            n.name: n for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        cached = _methods_cache[id(cls)] = (cls, found)
    return cached[1]


_methods_cache: dict[int, tuple[ast.ClassDef, dict[str, Method]]] = {}


Assignment = ast.Assign | ast.AnnAssign | ast.AugAssign
# id(class node) -> (the node, attr -> its `self.<attr> = ...` statements and their methods):
# one walk of SGLang's ModelConfig per parsed blob, not one per attribute per run
_assignments_cache: dict[int, tuple[ast.ClassDef, dict[str, list[tuple[Method, Assignment]]]]] = {}


def _self_assignments(cls: ast.ClassDef) -> dict[str, list[tuple[Method, Assignment]]]:
    cached = _assignments_cache.get(id(cls))
    if cached is not None and cached[0] is cls:
        return cached[1]
    index: dict[str, list[tuple[Method, Assignment]]] = {}
    for method in _methods(cls).values():
        for node in ast.walk(method):
            if isinstance(node, Assignment):
                for target in _targets(node):
                    if isinstance(target, ast.Attribute) and _is_self_attr(target, target.attr):
                        index.setdefault(target.attr, []).append((method, node))
    if len(_assignments_cache) > 64:
        _assignments_cache.clear()
    _assignments_cache[id(cls)] = (cls, index)
    return index


def _set_once(cls: ast.ClassDef, attr: str) -> tuple[Method, int, ast.expr | None] | None:
    """The method and index of its top-level statement `self.<attr> = ...` when that is the
    class's only assignment of the attribute (else which one holds is not decided here), in
    the constructor or in a helper taking only `self` (`self._derive_hybrid_model()`: what
    ServerArgs reads exists, so the helper ran)."""
    assigned = _self_assignments(cls).get(attr, [])
    sites = [node for _, node in assigned]
    site = sites[0] if len(sites) == 1 else _memo_initial(assigned, attr)
    if not isinstance(site, ast.Assign | ast.AnnAssign):
        return None
    for method in _methods(cls).values():
        params = [*method.args.posonlyargs, *method.args.args, *method.args.kwonlyargs]
        if method.name != "__init__" and (len(params) != 1 or method.args.vararg):
            continue
        for index, stmt in enumerate(method.body):
            if stmt is site:
                return method, index, site.value
    return None


def _memo_initial(assigned: list[tuple[Method, Assignment]], attr: str) -> Assignment | None:
    """A cache filled on first use: `self.<attr> = _UNSET` in the constructor, every other
    assignment under `if self.<attr> is _UNSET:`. Its value is the constructor's until the
    method filling it runs (a run of that method sets it: kb.explain.simulate)."""
    init = [node for method, node in assigned if method.name == "__init__"]
    value = getattr(init[0], "value", None) if len(init) == 1 else None
    if not isinstance(value, ast.Name):
        return None
    for method, node in assigned:
        if method.name == "__init__":
            continue
        guards = [
            n
            for n in ast.walk(method)
            if isinstance(n, ast.If)
            and isinstance(n.test, ast.Compare)
            and isinstance(n.test.ops[0], ast.Is)
            and _is_self_attr(n.test.left, attr)
            and isinstance(n.test.comparators[0], ast.Name)
            and n.test.comparators[0].id == value.id
        ]
        if not any(node in ast.walk(g) for guard in guards for g in guard.body):
            return None
    return init[0]


def _set_by_helper(cls: ast.ClassDef, attr: str) -> tuple[Method, int, Method, ast.Call] | None:
    """(constructor, index, helper, call) when every assignment of `self.<attr>` is in one
    helper that the constructor calls as a top-level statement (`self._derive_x(arg)`)."""
    methods = _methods(cls)
    owners = {method.name for method, _ in _self_assignments(cls).get(attr, [])}
    init = methods.get("__init__")
    if len(owners) != 1 or init is None or "__init__" in owners:
        return None
    helper = methods[owners.pop()]
    for index, stmt in enumerate(init.body):
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if isinstance(call, ast.Call) and ast.unparse(call.func) == f"self.{helper.name}":
            return init, index, helper, call
    return None


def _set_then_guarded(
    cls: ast.ClassDef, attr: str
) -> tuple[Method, int, list[tuple[int, ast.If, int]]] | None:
    """(constructor, index, overrides) when the constructor sets `self.<attr> = value` as a
    top-level statement and every other assignment of it is a top-level statement of the
    body of a later top-level `if` without `else` of the constructor (`self.meta = None`,
    then `if <the checkpoint says so>: self.meta = {...}`): overrides are (the if's index,
    the if, the assignment's index in its body)."""
    methods = _methods(cls)
    init = methods.get("__init__")
    sites = _self_assignments(cls).get(attr, [])
    if init is None or len(sites) < 2 or any(method is not init for method, _ in sites):
        return None
    nodes = [node for _, node in sites]
    index = next((i for i, stmt in enumerate(init.body) if stmt is nodes[0]), None)
    if index is None or not isinstance(nodes[0], ast.Assign | ast.AnnAssign):
        return None
    overrides: list[tuple[int, ast.If, int]] = []
    for i, stmt in enumerate(init.body[index + 1 :], index + 1):
        if not isinstance(stmt, ast.If) or stmt.orelse:
            continue
        for k, inner in enumerate(stmt.body):
            if any(inner is node for node in nodes[1:]) and isinstance(inner, ast.Assign):
                overrides.append((i, stmt, k))
    return (init, index, overrides) if len(overrides) == len(nodes) - 1 else None


def _guarded_value(
    sim: Simulator,
    mod: Module,
    bound: Obj,
    init_params: Callable[[Method], dict[str, Callable[[], Any]]],
    init: Method,
    index: int,
    overrides: list[tuple[int, ast.If, int]],
) -> Any:
    """The value set first, replaced by each override whose `if` holds; unknown when an
    `if` is not decided."""

    def evaluate(before: list[ast.stmt], value: ast.expr | None) -> Any:
        frame = Frame(mod, init.name, {"self": bound})
        return _evaluate(sim, frame, before, value, init_params(init))

    first = init.body[index]
    assert isinstance(first, ast.Assign | ast.AnnAssign)
    value = evaluate(init.body[:index], first.value)
    for i, test, k in overrides:
        holds = truth(evaluate(init.body[:i], test.test))
        if holds is False:
            continue
        if holds is not True:
            return unknown(f"whether {ast.unparse(test.test)[:80]}")
        assign = test.body[k]
        assert isinstance(assign, ast.Assign)
        value = evaluate(init.body[:i] + test.body[:k], assign.value)
    return value


def _set_then_rewritten(
    cls: ast.ClassDef, attr: str
) -> tuple[Method, int, ast.expr | None, list[tuple[Method, ast.Call]]] | None:
    """(constructor, index, value, helpers) when the constructor sets `self.<attr> = value`
    as a top-level statement and every other assignment of it is in helpers taking only
    `self` that the constructor then calls as top-level statements (`self.quantization =
    quantization`, then `self._verify_quantization()` rewrites it from the checkpoint)."""
    methods = _methods(cls)
    init = methods.get("__init__")
    if init is None:
        return None
    sites = _self_assignments(cls).get(attr, [])
    in_init = [node for method, node in sites if method is init]
    if len(in_init) != 1 or not isinstance(in_init[0], ast.Assign | ast.AnnAssign):
        return None
    index = next((i for i, stmt in enumerate(init.body) if stmt is in_init[0]), None)
    owners = {method.name for method, _ in sites if method is not init}
    if index is None or not owners:
        return None
    helpers: list[tuple[Method, ast.Call]] = []
    for stmt in init.body[index + 1 :]:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if (
            isinstance(call, ast.Call)
            and not call.keywords
            and isinstance(call.func, ast.Attribute)
            and _is_self_attr(call.func, call.func.attr)
            and call.func.attr in owners
            and all(_of_self(a) for a in call.args)
        ):
            helpers.append((methods[call.func.attr], call))
    if {h.name for h, _ in helpers} != owners:
        return None  # a rewrite elsewhere (a method called later, by others): not decided
    return init, index, in_init[0].value, helpers


def _of_self(arg: ast.expr) -> bool:
    """An argument a helper call passes that reads only the object and constants
    (`self._maybe_pull_model_for_runai(self.model_path)`)."""
    return all(
        not isinstance(n, ast.Name) or n.id == "self"
        for n in ast.walk(arg)
        if not isinstance(n, ast.Starred)
    )


def _set_in_constructor(
    sim: Simulator,
    mod: Module,
    bound: Obj,
    cls: ast.ClassDef,
    attr: str,
    init_params: Callable[[Method], dict[str, Callable[[], Any]]],
    words: str,
) -> Any:
    """`self.<attr>` when only the constructor assigns it, more than once (`self.x = None`,
    then `if ...: self.x = {...}`): its statements that lead to it run with the field as a
    local; unknown when another method assigns it too."""
    methods = _methods(cls)
    sites = _self_assignments(cls).get(attr, [])
    # (or a method taking only `self` that the constructor's initialization runs: the
    # ModelRunner's `load_model` sets `sliding_window_size` from the model it loaded)
    setter = sites[0][0] if sites else methods.get("__init__")
    if setter is None or not sites or any(method is not setter for method, _ in sites):
        return unknown(words)
    if setter.name != "__init__" and (len(setter.args.args) != 1 or setter.args.vararg):
        return unknown(words)
    local = f"{attr}__derived"
    frame = Frame(mod, setter.name, {"self": bound, local: unknown(words)})
    body = _as_local(setter, attr, local)
    params = init_params(setter) if setter.name == "__init__" else {}
    return _evaluate(sim, frame, body, ast.Name(local, ast.Load()), params)


def _rewrite(
    sim: Simulator,
    mod: Module,
    bound: Obj,
    attr: str,
    value: Any,
    helpers: list[tuple[Method, ast.Call]],
) -> Any:
    """`value` as each helper in turn leaves `self.<attr>`, run on the arguments the
    constructor passes it (its other statements that do not lead to it skipped; a `return`
    ends the helper)."""
    local = f"{attr}__derived"
    for helper, call in helpers:
        frame = Frame(mod, helper.name, {"self": bound, local: value})
        caller = Frame(mod, "__init__", {"self": bound, local: value})
        params = [a.arg for a in (*helper.args.posonlyargs, *helper.args.args)][1:]
        for name, arg in zip(params, call.args, strict=False):
            passed = _AttrAsLocal(attr, local).visit(copy.deepcopy(arg))
            frame.locals[name] = sim.eval(passed, caller, Ctx())
        _fill_defaults(sim, helper, frame)
        stmts, _ = _slice(_as_local(helper, attr, local), {local})
        checks, changes = len(sim.result.checks), len(sim.result.changes)
        saved, sim.current_path = sim.current_path, mod.path
        try:
            for stmt in stmts:
                sim.stmt(stmt, frame, Ctx())
        except _Return:
            pass
        except (_Break, _Continue):
            return unknown(f"the model's {attr}")
        finally:
            sim.current_path = saved
            del sim.result.checks[checks:]
            del sim.result.changes[changes:]
        value = frame.locals.get(local, unknown(f"the model's {attr}"))
    return value


# A method's body with `self.<attr>` as a local, and the slices of bodies, are the same for
# every run of a version: kept (bounded) rather than copied and walked again per run.
_local_bodies: dict[tuple[int, str], tuple[Method, list[ast.stmt]]] = {}
_slices: dict[tuple[tuple[int, ...], frozenset[str]], Any] = {}
MAX_CACHED = 512


def _as_local(method: Method, attr: str, local: str) -> list[ast.stmt]:
    key = (id(method), attr)
    cached = _local_bodies.get(key)
    if cached is None or cached[0] is not method:
        if len(_local_bodies) > MAX_CACHED:
            _local_bodies.clear()
        body = [_AttrAsLocal(attr, local).visit(copy.deepcopy(stmt)) for stmt in method.body]
        cached = _local_bodies[key] = (method, body)
    return cached[1]


class _AttrAsLocal(ast.NodeTransformer):
    """`self.<attr>` (read or written) -> the local `name`."""

    def __init__(self, attr: str, name: str) -> None:
        self.attr, self.name = attr, name

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if _is_self_attr(node, self.attr):
            return ast.copy_location(ast.Name(self.name, node.ctx), node)
        return self.generic_visit(node)


def _run_helper(
    sim: Simulator,
    mod: Module,
    bound: Obj,
    attr: str,
    init: Method,
    index: int,
    helper: Method,
    call: ast.Call,
    init_params: Callable[[Method], dict[str, Callable[[], Any]]],
    words: str,
) -> Any:
    """The value the helper leaves in `self.<attr>`, run on the arguments the constructor
    passes it (each computed from the statements before the call); unknown on a path that
    sets nothing, or when the helper is called with what this cannot bind."""
    params = [a.arg for a in (*helper.args.posonlyargs, *helper.args.args)][1:]
    if call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
        return unknown(words)
    frame = Frame(mod, helper.name, {"self": bound})
    passed = init_params(init)
    for name, arg in zip(params, call.args, strict=False):
        before = Frame(mod, "__init__", {"self": bound})
        frame.locals[name] = _evaluate(sim, before, init.body[:index], arg, passed)
    _fill_defaults(sim, helper, frame)
    local = f"{attr}__derived"
    frame.locals[local] = unknown(words)
    body = _as_local(helper, attr, local)
    return _evaluate(sim, frame, body, ast.Name(local, ast.Load()), {})


def _targets(node: ast.Assign | ast.AnnAssign | ast.AugAssign) -> list[ast.expr]:
    return list(node.targets) if isinstance(node, ast.Assign) else [node.target]


def _is_self_attr(target: ast.expr, attr: str) -> bool:
    return (
        isinstance(target, ast.Attribute)
        and target.attr == attr
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    )


@by_identity
def _loaded(node: ast.AST) -> frozenset[str]:
    return frozenset(
        n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    )


def _slice(
    body: list[ast.stmt], names: set[str] | frozenset[str]
) -> tuple[list[ast.stmt], set[str]]:
    """The statements of `body` that bind (directly or through each other) any of `names`,
    in order, and every name they and the value read (cached: the statements stay alive
    with the entry, so their ids stay theirs)."""
    key = (tuple(map(id, body)), frozenset(names))
    cached = _slices.get(key)
    if cached is None:
        if len(_slices) > MAX_CACHED:
            _slices.clear()
        cached = _slices[key] = (list(body), _sliced(body, names))
    stmts, found = cached[1]
    return list(stmts), set(found)


def _sliced(
    body: list[ast.stmt], names: set[str] | frozenset[str]
) -> tuple[list[ast.stmt], set[str]]:
    names = set(names)
    kept: list[ast.stmt] = []
    for stmt in reversed(body):
        stored = {
            n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        if isinstance(stmt, ast.Import | ast.ImportFrom):  # `from x import f` inside a method
            stored |= {(a.asname or a.name).split(".")[0] for a in stmt.names}
        stored |= module_state.mutated(stmt)
        if stored & names:
            kept.append(stmt)
            names |= _loaded(stmt)
    return kept[::-1], names


def comprehension(sim: Simulator, node: ast.expr, frame: Frame, ctx: Ctx) -> Any:
    """A list/set comprehension or generator expression over known items (a generator as
    the list it yields): unknown when an item, a filter or a produced value is."""
    if not isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
        return unknown(f"{type(node).__name__} (not interpreted)")
    inner = Frame(frame.module, frame.name, dict(frame.locals), marks=dict(frame.marks))
    out: list[Any] = []

    def produce(level: int) -> Unknown | None:
        if level == len(node.generators):
            if isinstance(node, ast.DictComp):  # (a key and its value, as one item)
                key, value = sim.eval(node.key, inner, ctx), sim.eval(node.value, inner, ctx)
                out.append(Unknown(merge_needs(key)) if isinstance(key, Unknown) else (key, value))
            else:
                out.append(sim.eval(node.elt, inner, ctx))
            return None
        gen = node.generators[level]
        items = sim.eval(gen.iter, inner, ctx)
        if isinstance(items, dict):
            items = list(items)
        if gen.is_async or not isinstance(items, list | tuple | str | set | frozenset):
            return Unknown(merge_needs(items) or ("the items of a comprehension",))
        if len(items) > MAX_ITEMS:
            return unknown("a comprehension over many items")
        for item in list(items):
            sim.assign(gen.target, item, inner, ctx, node)
            kept: Any = True
            for test in gen.ifs:
                kept = truth(sim.eval(test, inner, ctx))
                if kept is not True:
                    break
            if isinstance(kept, Unknown):
                return kept
            if kept is True:
                stop = produce(level + 1)
                if stop is not None:
                    return stop
        return None

    stop = produce(0)
    if stop is not None:
        return Unknown(stop.needs or ("the items of a comprehension",))
    if any(isinstance(v, Unknown) for v in out) and not isinstance(node, ast.GeneratorExp):
        return Unknown(merge_needs(*out) or ("an item of a comprehension",))
    # (a generator's items, each as known as it is: any() and all() decide on known ones)
    if isinstance(node, ast.SetComp):
        with contextlib.suppress(TypeError):
            return set(out)
        return unknown("a set of unhashable values")
    if isinstance(node, ast.DictComp):
        if any(isinstance(v, Unknown) for _, v in out):
            return Unknown(merge_needs(*(v for _, v in out)) or ("a value of a comprehension",))
        with contextlib.suppress(TypeError):
            return dict(out)
        return unknown("a dict of unhashable keys")
    return out
