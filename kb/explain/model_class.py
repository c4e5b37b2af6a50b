"""The model class's constructors, a step of the load stage (kb.explain.deploy).

The model loader builds the architecture's class (`model_class(config=hf_config,
quant_config=..., prefix=...)`), whose constructor builds its model, the model its decoder
layers, and each layer its attention and MLP or MoE block. Those constructors check the
model against the parallel sizes (`assert self.total_num_heads % tp_size == 0`, `if
self.tp_size > config.n_routed_experts: raise ValueError`), and the linear layers they
build ask the quantization config for their method, which checks the per-rank sizes when
it creates the weights (an FP8 block, a Marlin tile).

Building the whole model is not followed (a constructor per layer, far past a run's
budget). The step finds the classes the architecture's class builds, through their
constructors, in the model files the knowledge base holds (DeepseekV2ForCausalLM ->
DeepseekV2Model -> DeepseekV2DecoderLayer -> DeepseekV2MoE; through `make_layers`' lambda,
a factory method, a decoder class passed as a parameter), and runs the constructor of each
one that checks something or builds a linear layer, with the other objects it builds not
built, except the linear layers and quantization methods (LAYERS_BUILT). Its arguments are
what its builder passes when that is known: the builder's own `config` or `quant_config`
handed on, an argument computed from config.json alone, the layer id followed, the module
name SGLang's add_prefix gives it (a stated assumption), a default the builder leaves;
anything else is unknown, so a check reading it stays undecided. The parallel-state getters
are answered from the server args.

A class its builder builds only under a condition (the MoE block of a sparse layer) is run
for layers config.json decides it is built in (the builder's test evaluated on a slice of
its constructor); when no layer tried decides it, its raises are stated as assumed (that the
builder builds it), never claimed as errors. The ModelRunner's own checks of the loaded model
are kb.explain.runner_checks.
"""

from __future__ import annotations

import ast
import contextlib
import copy
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from kb.explain import classes, model_attrs, model_loading, parallel_state
from kb.explain.abstract_values import ClassRef, Func, Instance, Obj
from kb.explain.frames import Ctx, Frame, Raised
from kb.explain.memo import by_identity
from kb.explain.model_registry import architecture_class
from kb.explain.predicates import MISSING, Profile, Unknown, assumed, unknown
from kb.explain.source_modules import Module, module_path
from kb.pyast import NOT_LITERAL, literal, self_call

if TYPE_CHECKING:
    from kb.explain.simulate import Simulator

PART = "the model class's constructors"
MODELS_PACKAGE = "sglang.srt.models"
MAX_CLASSES = 24  # classes followed from the architecture's (a VLM: ~12)
MAX_DEPTH = 5  # builders deep: ForCausalLM -> Model -> DecoderLayer -> MoE -> (a helper)
# the arguments the loader passes the architecture's class (model_loader/loader.py
# `_initialize_model`: `model_class(config=..., quant_config=..., prefix=...)`)
ROOT_ARGS = ("config", "quant_config")
CONFIG_NAMES = frozenset({"config", "quant_config"})  # what a computed argument may read
ARGUMENT_BUILTINS = frozenset({"getattr", "hasattr", "int", "float", "min", "max", "len"})
LAYER_PARAMS = ("layer_id", "layer_idx")  # a layer's index, as the model classes name it
# the classes built with their constructors when a model class builds them: the linear
# layers (which ask the quantization config for their method and have it create the
# weights on the per-rank sizes) and the quantization methods
LAYERS_BUILT = (
    "python/sglang/srt/layers/linear.py",
    "python/sglang/srt/layers/quantization/",
    "python/sglang/srt/layers/attention/vision.py",
)
MAX_LAYER_RUNS = 2  # layers a block's constructor is run for, looking for one that raises


@dataclass(frozen=True)
class Built:
    """A class the architecture's class builds: where, and under what condition."""

    cls: ClassRef
    builder: str  # the class whose constructor builds it
    line: int  # of the call
    condition: str  # "" when built whenever its builder is
    handed: dict[str, str]  # parameter -> the builder's parameter handed on unchanged
    keywords: frozenset[str]  # the parameters the call passes by name
    positional: int  # how many it passes by position (-1: a `*args` or `**kwargs` spread)
    # the call is in the body (True) or `else` (False) of the `if` that is the builder
    # constructor's statement at this index: the test then decides whether it is built
    # (the same for the nested `if`s inside that branch, outermost first: `if sparse: ...
    # if shared == 0: Moe(...)`)
    guard: tuple[tuple[int, bool], ...] | None = None
    call: ast.Call | None = None  # the call building it (None for the architecture's)
    where: Module | None = None  # the module holding that call
    # what the builder's own `config` is: "config", the model's hf_config (handed down from
    # the architecture's class); "config.<key>", its text sub-config (a multimodal model's
    # language model built with `config=config.text_config`); None, not known. Its call's
    # arguments over `config` are computed when it is known.
    config_source: str | None = None
    attr: str | None = None  # the builder's attribute it is assigned to (`self.mlp = ...`)
    # its module name ("model.layers.{layer}.mlp"), as SGLang's add_prefix builds the
    # `prefix` each class gets from its attributes; None when not known
    prefix: str | None = None
    # a class looked up in a module's table of classes by the layer's type
    # (`layer_class = ALL_DECODER_LAYER_TYPES[config.hybrid_override_pattern[idx]]` in the
    # function handed to make_layers): that lookup, what binds its names before it, and
    # the function's parameter that is the layer's index; it decides the class per layer
    chooser: tuple[ast.expr, tuple[ast.stmt, ...], str] | None = None


def step(
    sim: Simulator,
    path: str | None,
    profile: Profile | None,
    quant_config: Any,
    linear_layers: list[Instance] | None = None,
) -> Callable[[], None] | None:
    """The step to run; None without the model's config.json (what the constructors check
    is the model's sizes against the parallel ones: nothing would be decided), or when the
    architecture's class is not held (its file is not in the knowledge base) or builds
    nothing that checks. `linear_layers` gets one linear layer of each (layer class,
    method class) built, for their first forward (kb.explain.block_forward)."""
    if profile is None or profile.config is None:
        return None
    root = architecture_class(sim, path, profile.arch)
    if root is None:
        return None
    built, checking = _classes(sim, root)
    if not checking:
        return None
    chain = {b.cls.name: b for b in built}
    layers, count = _layers(profile)

    def run() -> None:
        construct, sim.construct = sim.construct, False
        # (the linear layers the classes build are: their quantization method's weights)
        sim.construct_under, sim.built_under = LAYERS_BUILT, []
        try:
            with parallel_state.answered(sim):
                for b in checking:
                    _check(sim, b, chain, quant_config, layers, count)
                # the loader then processes each linear layer's weights, once per layer
                # and method class
                seen: set[tuple[str, str]] = set()
                for layer in sim.built_under:
                    method = layer.fields.get("quant_method")
                    if (
                        isinstance(method, Instance)
                        and (layer.cls.name, method.cls.name) not in seen
                    ):
                        seen.add((layer.cls.name, method.cls.name))
                        model_loading.after_loading(sim, layer, Ctx())
                        if linear_layers is not None:
                            linear_layers.append(layer)
        finally:
            sim.construct, sim.construct_under, sim.built_under = construct, (), None

    return run


# architecture's class -> the classes it builds and those of them to run: a reading of the
# model files' ASTs alone (~10 ms for a large model), kept per parsed module
_built: OrderedDict[tuple[str, str, int], tuple[list[Built], list[Built]]] = OrderedDict()
MAX_KEPT = 64


def _classes(sim: Simulator, root: ClassRef) -> tuple[list[Built], list[Built]]:
    """The classes the architecture's class builds, and those to run: those whose
    constructor checks something or builds a linear layer."""
    key = (root.path, root.name, id(root.module))
    if key not in _built:
        built = list(_closure(sim, root))
        checking = [b for b in built if _checks(constructor(sim, b.cls)) or _builds_layers(b)]
        _built[key] = (built, checking)
        while len(_built) > MAX_KEPT:
            _built.popitem(last=False)
    _built.move_to_end(key)
    return _built[key]


def server_args_step(
    sim: Simulator, path: str | None, profile: Profile | None, quant_config: Any, set_: dict
) -> Callable[[], None] | None:
    """The step running what the architecture's constructor sets on the global server
    args before it builds its blocks (DeepSeek-V2's determine_num_fused_shared_experts
    turns the shared experts' fusion off for another architecture), which the blocks'
    constructors and forwards then read: the values it sets go to `set_` (the caller
    keeps them past the stage). None when it sets none."""
    if profile is None or profile.config is None:
        return None
    root = architecture_class(sim, path, profile.arch)
    built = classes_built(sim, root) if root is not None else []
    init = constructor(sim, root) if root is not None else None
    indices = _setting_statements(sim, built[0]) if built and init is not None else []
    if root is None or init is None or not indices:
        return None

    def run() -> None:
        before = dict(sim.fields)
        with parallel_state.answered(sim):
            for index in indices:
                stmt = init.node.body[index]
                run_statement(sim, root, built[0], profile, quant_config, index, stmt)
        set_.update((k, v) for k, v in sim.fields.items() if before.get(k, MISSING) is not v)

    return run


def _setting_statements(sim: Simulator, root: Built) -> list[int]:
    """The top-level `self.<method>(...)` statements of the architecture's constructor
    whose method (or one it calls on self) assigns an attribute of the global server args
    (`get_global_server_args().disable_shared_experts_fusion = True`)."""
    init = constructor(sim, root.cls)
    if init is None:
        return []
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for c in classes.mro(sim, root.cls)[0]:  # (nearest first)
        for node in c.node.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                methods.setdefault(node.name, node)

    def sets(name: str | None, seen: set[str]) -> bool:
        method = methods.get(name or "")
        if method is None or name in seen:
            return False
        seen.add(method.name)
        return _sets_server_args(method) or any(
            sets(self_call(n), seen) for n in ast.walk(method) if self_call(n)
        )

    return [
        i
        for i, stmt in enumerate(init.node.body)
        if isinstance(stmt, ast.Expr) and sets(self_call(stmt.value), set())
    ]


def _sets_server_args(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Attribute)
        and isinstance(n.ctx, ast.Store)
        and isinstance(n.value, ast.Call)
        and getattr(n.value.func, "id", None) == "get_global_server_args"
        for n in ast.walk(node)
    )


def classes_built(sim: Simulator, root: ClassRef) -> list[Built]:
    """Every class the architecture's class builds (itself first), as `_closure` finds them."""
    return _classes(sim, root)[0]


def decided_built(
    sim: Simulator, root: ClassRef, candidates: list[Built], profile: Profile, quant_config: Any
) -> Iterator[Built]:
    """Those of `candidates` config.json decides are built in some layer tried (each of
    their conditional builders builds them there)."""
    chain = {b.cls.name: b for b in classes_built(sim, root)}
    layers, _count = _layers(profile)
    for b in candidates:
        conditional = [link for link in _chain(b, chain) if link.condition]
        if not conditional or any(
            all(_builds(sim, link, chain, quant_config, layer) is True for link in conditional)
            for layer in layers
        ):
            yield b


def run_statement(
    sim: Simulator,
    root: ClassRef,
    b: Built,
    profile: Profile,
    quant_config: Any,
    index: int,
    last: ast.stmt,
) -> tuple[Instance, Any] | None:
    """The statements before `index` of the constructor of `b` that `last` reads (as a
    builder's test is sliced), then `last`, on the constructor's arguments for the first
    layer tried that config.json decides `b` is built in: the object and what `last`
    returned; None when no layer tried is decided. The constructor's own checks are not
    kept (its own run reports them)."""
    chain = {c.cls.name: c for c in classes_built(sim, root)}
    conditional = [link for link in _chain(b, chain) if link.condition]
    layers, _count = _layers(profile)
    layer = next(
        (
            n
            for n in layers
            if all(_builds(sim, link, chain, quant_config, n) is True for link in conditional)
        ),
        None,
    )
    init = constructor(sim, b.cls)
    if layer is None or init is None:
        return None
    # (what the statement reads: its value's, or all of an `if` run whole)
    read = last if isinstance(last, ast.If) else getattr(last, "value", None)
    node = copy.copy(init.node)
    node.body = [*_slice(init.node.body[:index], read), last] if read else [last]
    obj, returned = Instance(b.cls), None
    start = len(sim.result.checks)
    try:
        kwargs = _arguments(sim, init.node, b, quant_config, layer, chain)
        returned = sim.call_function(Func(init.module, node, obj, init.owner), [], kwargs, Ctx())
    except Raised:
        pass  # (what it set until then is what it built)
    finally:
        del sim.result.checks[start:]
    return obj, returned


def _layers(profile: Profile | None) -> tuple[list[int], int]:
    """Layer ids to follow a layer's constructors for, those likeliest to differ (the first
    two, the last dense one and the first two past it: `first_k_dense_replace` of DeepSeek
    and GLM-4 MoE, the middle one, the last), and how many layers there are; none when
    config.json does not say."""
    config = profile.config if profile is not None else None
    if isinstance(config, dict) and isinstance(config.get("text_config"), dict):
        config = config["text_config"]
    if not isinstance(config, dict):
        return [], 0
    count, dense = config.get("num_hidden_layers"), config.get("first_k_dense_replace", 0)
    if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
        return [], 0
    dense = dense if isinstance(dense, int) and not isinstance(dense, bool) else 0
    # (and a middle one: Step3's MoE layers are 4..59 of 61, named by a list in config.json)
    tried = (0, 1, dense - 1, dense, dense + 1, count // 2, count - 1)
    layers = {n for n in tried if 0 <= n < count}
    return sorted(layers), count


def _chain(b: Built, chain: dict[str, Built]) -> list[Built]:
    """`b` and its builders up to the architecture's class."""
    out: list[Built] = []
    link: Built | None = b
    while link is not None and link not in out:
        out.append(link)
        link = chain.get(link.builder)
    return out


def _check(
    sim: Simulator,
    b: Built,
    chain: dict[str, Built],
    quant_config: Any,
    layers: list[int],
    count: int,
) -> None:
    """Run the constructor of `b`: for the layers its builders are decided to build it in,
    the first where a check fires (else the first); nothing when they are decided to build
    it in no layer; when that is not decided, once, with its raises assumed on its
    builders building it."""
    conditional = [link for link in _chain(b, chain) if link.condition]
    if not conditional:  # (built in every layer: followed for the first)
        _construct(sim, b, quant_config, layers[0] if layers else None, Ctx())
        return
    kept: list[Any] | None = None
    runs, undecided = 0, not layers
    for layer in layers:
        built = [_builds(sim, link, chain, quant_config, layer) for link in conditional]
        if not all(d is True for d in built):
            undecided = undecided or any(d is None for d in built)
            continue
        start = len(sim.result.checks)
        _construct(sim, b, quant_config, layer, Ctx())
        ran = sim.result.checks[start:]
        del sim.result.checks[start:]
        fired = any(c.outcome == "fired" for c in ran)
        if kept is None or fired:
            kept = ran
        runs += 1
        if fired or runs >= MAX_LAYER_RUNS:
            break
    if kept is not None:
        sim.result.checks.extend(kept)
        return
    if not undecided and len(layers) == count:
        return  # no layer builds it
    ctx = Ctx()
    for link in conditional:
        key = f"built:{link.builder}.{link.cls.name}"
        sim.result.assumptions[key] = (
            f"{link.builder} builds {link.cls.name} (its constructor does when "
            f"{link.condition}, line {link.line})"
        )
        ctx = ctx.under(link.condition, (), frozenset({assumed(key)}))
    start = len(sim.result.checks)
    _construct(sim, b, quant_config, None, ctx)
    if not any(c.outcome == "assumed" for c in sim.result.checks[start:]):
        for link in conditional:  # (said only of a raise that rests on it)
            sim.result.assumptions.pop(f"built:{link.builder}.{link.cls.name}", None)


def _builds(
    sim: Simulator, link: Built, chain: dict[str, Built], quant_config: Any, layer: int
) -> bool | None:
    """Whether the builder of `link` builds it for `layer`: its constructor's statements
    up to the `if` guarding the call, then the `if`'s test (through the nested `if`s
    guarding it); None when not decided here."""
    builder = chain.get(link.builder)
    init = constructor(sim, builder.cls) if builder is not None else None
    if link.chooser is not None:
        return _chosen(sim, link, quant_config, layer)
    if builder is None or init is None or link.guard is None:
        return None
    node = copy.copy(init.node)
    node.body = _guard_test(init.node.body, link.guard)
    start = len(sim.result.checks)
    kwargs = _arguments(sim, init.node, builder, quant_config, layer, chain)
    bound = Func(init.module, node, Instance(builder.cls), init.owner)
    value = sim.call_function(bound, [], kwargs, Ctx())
    del sim.result.checks[start:]  # (the builder's own checks: its own run reports them)
    return value if isinstance(value, bool) else None


def _chosen(sim: Simulator, link: Built, quant_config: Any, layer: int) -> bool | None:
    """Whether the table lookup choosing the class per layer picks `link`'s class for
    `layer`; None when it is not decided (the builder's config not the model's, a key
    config.json lacks)."""
    assert link.chooser is not None
    lookup, before, index = link.chooser
    config = config_value(sim, link.config_source)
    if config is None or link.where is None:
        return None
    scope = {"config": config, "quant_config": quant_config, index: layer}
    frame = Frame(link.where, "<layer type>", scope)
    for stmt in before:  # (plain `name = expr` only: _choices keeps no other)
        assert isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name)
        frame.locals[stmt.targets[0].id] = sim.eval(stmt.value, frame, Ctx())
    value = sim.eval(lookup, frame, Ctx())
    return value == link.cls if isinstance(value, ClassRef) else None


def _choices(
    sim: Simulator, init: Func
) -> dict[str, tuple[list[ClassRef], tuple[ast.expr, tuple[ast.stmt, ...], str]]]:
    """Names a function the constructor defines binds to a lookup in a module-level table
    of model classes (`layer_class = ALL_DECODER_LAYER_TYPES[...]`): name -> the table's
    classes, and the chooser (see Built.chooser)."""
    out: dict[str, tuple[list[ClassRef], tuple[ast.expr, tuple[ast.stmt, ...], str]]] = {}
    for fn in init.node.body:
        if not isinstance(fn, ast.FunctionDef) or not fn.args.args:
            continue
        index = fn.args.args[0].arg
        for i, stmt in enumerate(fn.body):
            if not (
                isinstance(stmt, ast.Assign)
                and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Subscript)
                and isinstance(stmt.value.value, ast.Name)
            ):
                continue
            table = init.module.assigns.get(stmt.value.value.id)
            if not isinstance(table, ast.Dict):
                continue
            found = [
                c
                for v in table.values
                if isinstance(v, ast.Name) and (c := _model_class(sim, init.module, v.id))
            ]
            before = [
                b
                for b in _slice(fn.body[:i], stmt.value)
                if isinstance(b, ast.Assign) and isinstance(b.targets[0], ast.Name)
            ]
            if found and len(found) == len(table.values):
                out[stmt.targets[0].id] = (found, (stmt.value, tuple(before), index))
    return out


def _guard_test(body: list[ast.stmt], path: tuple[tuple[int, bool], ...]) -> list[ast.stmt]:
    """Statements returning whether the `if`s of `path` lead to their branch: the ones
    before each `if` that its test (and the inner tests) depend on, then the test."""
    (index, branch), inner = path[0], path[1:]
    guard = body[index]
    assert isinstance(guard, ast.If)
    test = guard.test if branch else ast.UnaryOp(ast.Not(), guard.test)
    at = {"lineno": guard.lineno, "col_offset": 0}
    tests = [test, *_inner_tests(guard.body if branch else guard.orelse, inner)]
    before = _slice(body[:index], ast.Tuple(tests, ast.Load()))
    if not inner:
        return [*before, ast.Return(test, **at)]
    rest = _guard_test(guard.body if branch else guard.orelse, inner)
    return [*before, ast.If(test, rest, [ast.Return(ast.Constant(False), **at)], **at)]


def _inner_tests(body: list[ast.stmt], path: tuple[tuple[int, bool], ...]) -> list[ast.expr]:
    out: list[ast.expr] = []
    for index, branch in path:
        guard = body[index]
        assert isinstance(guard, ast.If)
        out.append(guard.test)
        body = guard.body if branch else guard.orelse
    return out


def _slice(body: list[ast.stmt], test: ast.AST) -> list[ast.stmt]:
    """The statements of `body` the test depends on: those binding a name or `self.<field>`
    it reads (through each other), and every plain `self.x = <name or its attribute>`
    (a method the test calls may read such a field). A constructor builds its attention
    and MLP blocks before the `if` that chooses the MoE one: not run for the test."""
    wanted = _reads(test)
    kept: list[ast.stmt] = []
    for stmt in reversed(body):
        if _stores(stmt) & wanted or _plain_field(stmt):
            kept.append(stmt)
            wanted |= _reads(stmt)
    return kept[::-1]


def _names(node: ast.AST, ctx: type[ast.expr_context]) -> set[str]:
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ctx):
            out.add(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ctx) and self_attr(n):
            out.add(f"self.{n.attr}")
    return out


def _reads(node: ast.AST) -> set[str]:
    return _names(node, ast.Load)


def _stores(stmt: ast.stmt) -> set[str]:
    """The names the statement binds: assigned, or imported (a constructor's own
    `from ...gguf import GGUFConfig` before its `isinstance(quant_config, GGUFConfig)`)."""
    imported = {
        (alias.asname or alias.name).split(".")[0]
        for n in ast.walk(stmt)
        if isinstance(n, ast.Import | ast.ImportFrom)
        for alias in n.names
    }
    return _names(stmt, ast.Store) | imported


def _plain_field(stmt: ast.stmt) -> bool:
    """`self.x = y` or `self.x = y.z`: a field copied from an argument."""
    value = stmt.value if isinstance(stmt, ast.Assign) else None
    while isinstance(value, ast.Attribute):
        value = value.value
    return (
        isinstance(stmt, ast.Assign)
        and all(self_attr(t) for t in stmt.targets)
        and isinstance(value, ast.Name)
    )


def _construct(sim: Simulator, b: Built, quant_config: Any, layer: int | None, ctx: Ctx) -> None:
    init = constructor(sim, b.cls)
    if init is not None:
        kwargs = _arguments(sim, init.node, b, quant_config, layer)
        bound = Func(init.module, init.node, Instance(b.cls), init.owner)
        # A raise ends this constructor. Each class runs on its own, not in SGLang's order
        # of building them, so a raise of another class is still found (which of two SGLang
        # reaches first is not decided here: both are reported); the stage ends after them.
        with contextlib.suppress(Raised):
            sim.call_function(bound, [], kwargs, ctx)


def _arguments(
    sim: Simulator,
    node: ast.FunctionDef | ast.AsyncFunctionDef,
    b: Built,
    quant_config: Any,
    layer: int | None,
    chain: dict[str, Built] | None = None,
) -> dict[str, Any]:
    """The constructor's arguments: the model's hf_config and the loader's quantization
    config where the builder hands its own on, the layer id being followed; a parameter
    the call leaves out keeps its default; anything else is unknown, naming the builder.
    `chain`: the classes built, by name (a builder's parameter its own builder leaves
    out is its default in what it computes: `moe_quant_config_override or quant_config`)."""
    builder = b.builder or "the model loader"
    config = config_value(sim, b.config_source)
    handed = {
        "config": config or unknown(f"the config {builder} passes"),
        "quant_config": quant_config,
    }
    names = [a.arg for a in (*node.args.posonlyargs, *node.args.args)][1:]
    passed = set(b.keywords) | set(names[: max(b.positional, 0)])
    defaults = _left_out(sim, chain.get(b.builder)) if chain and b.builder else {}
    out: dict[str, Any] = {}
    for name in [*names, *(a.arg for a in node.args.kwonlyargs)]:
        if name == "config" and (own := _own_config(b)) not in (None, b.config_source):
            out[name] = config_value(sim, own) or unknown(f"the {own} {builder} passes")
        elif b.handed.get(name) in handed:
            out[name] = handed[b.handed[name]]
        elif name in LAYER_PARAMS and layer is not None and name in passed:
            out[name] = layer
        elif name == "prefix" and name in passed and (prefix := _prefix(sim, b, layer)):
            out[name] = prefix
        elif name in passed or b.positional < 0:
            out[name] = _argument(sim, b, names, name, quant_config, layer, defaults)
            if isinstance(out[name], Unknown):
                out[name] = unknown(f"the {name} {builder} passes")
    return out


def _prefix(sim: Simulator, b: Built, layer: int | None) -> str | None:
    """The `prefix` the class gets (its module name), when known for the layer followed;
    stated as an assumption (the names the quantization config's ignore lists match)."""
    if b.prefix is None or ("{layer}" in b.prefix and layer is None):
        return None
    sim.result.assumptions["module-names"] = (
        "the model's module names follow its classes' attributes (model.layers.N.mlp), as "
        "SGLang's add_prefix builds them"
    )
    return b.prefix.format(layer=layer)


def _left_out(sim: Simulator, builder: Built | None) -> dict[str, Any]:
    """The parameters of `builder`'s constructor its own builder's call leaves out, with
    their literal defaults (what its constructor sees for them)."""
    init = constructor(sim, builder.cls) if builder is not None else None
    if builder is None or init is None or builder.positional < 0:
        return {}
    args = init.node.args
    params = [a.arg for a in (*args.posonlyargs, *args.args)][1:]
    defaults = dict(zip(reversed(params), reversed(args.defaults), strict=False))
    defaults |= {
        a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None
    }
    passed = set(builder.keywords) | set(params[: builder.positional])
    out = {}
    for name, node in defaults.items():
        if name not in passed and (value := literal(node)) is not NOT_LITERAL:
            out[name] = value
    return out


def _argument(
    sim: Simulator,
    b: Built,
    names: list[str],
    name: str,
    quant_config: Any,
    layer: int | None,
    defaults: dict[str, Any] | None = None,
) -> Any:
    """The argument the builder's call passes for `name` when it is computed from the
    model's config alone (`num_heads=config.num_attention_heads`, `getattr(config,
    "rope_theta", 1000000)`), or with the builder's parameters its own builder leaves out
    (`defaults`); else unknown."""
    call, mod = b.call, b.where
    config = config_value(sim, b.config_source)
    if call is None or mod is None or config is None:
        return unknown(name)
    given = {k.arg: k.value for k in call.keywords if k.arg}
    given |= {
        n: a for n, a in zip(names, call.args, strict=False) if not isinstance(a, ast.Starred)
    }
    expr = given.get(name)
    if isinstance(expr, ast.Name) and expr.id not in CONFIG_NAMES:
        # a local of the builder's constructor assigned once from the config (Nemotron-H's
        # `layer_config = config.get_nemotron_h_config_for_layer(layer_idx)`)
        expr = _assigned_once(mod, b.builder, expr.id)
    if expr is None:
        return unknown(name)
    read = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}
    layer_params = read & set(LAYER_PARAMS)  # (the layer followed: `layer_idx`)
    left_out = {k: v for k, v in (defaults or {}).items() if k in read - CONFIG_NAMES}
    if not read <= CONFIG_NAMES | layer_params | ARGUMENT_BUILTINS | set(left_out):
        return unknown(name)
    if layer_params and layer is None:
        return unknown(name)
    frame = Frame(mod, "<arguments>", {"config": config, "quant_config": quant_config})
    frame.locals.update(dict.fromkeys(layer_params, layer))
    frame.locals.update(left_out)
    return sim.eval(expr, frame, Ctx())


def _assigned_once(mod: Module, builder: str | None, local: str) -> ast.expr | None:
    """The value the builder class's constructor assigns to `local` in its one top-level
    assignment of it; None otherwise."""
    cls = mod.classes.get(builder or "")
    init = (
        next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if cls is not None
        else None
    )
    if init is None:
        return None
    found = [
        stmt.value
        for stmt in init.body
        if isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and stmt.targets[0].id == local
    ]
    stored = sum(
        1
        for n in ast.walk(init)
        if isinstance(n, ast.Name) and n.id == local and isinstance(n.ctx, ast.Store)
    )
    return found[0] if len(found) == 1 and stored == 1 else None


def constructor(sim: Simulator, cls: ClassRef) -> Func | None:
    """The constructor that runs for `cls`: its own or the nearest base's we hold."""
    for c in classes.mro(sim, cls)[0]:
        for node in c.node.body:
            if isinstance(node, ast.FunctionDef) and node.name == "__init__":
                return Func(c.module, node, None, c)
    return None


def _builds_layers(b: Built) -> bool:
    """Whether the class's constructor builds a class of LAYERS_BUILT (a linear layer)."""
    init = b.cls.node
    mod = b.cls.module
    for node in ast.walk(init):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            target = mod.imports.get(node.func.id)
            paths = module_path(target[0]) if target else []
            if any(path.startswith(LAYERS_BUILT) for path in paths):
                return True
    return False


def _checks(init: Func | None) -> bool:
    return init is not None and any(
        isinstance(n, ast.Raise | ast.Assert) for n in ast.walk(init.node)
    )


def _closure(sim: Simulator, root: ClassRef) -> Iterator[Built]:
    """The architecture's class and the classes built through constructors from it, in the
    model package, breadth first (each once)."""
    # (the loader hands the architecture's class the hf_config as `config`)
    handed = {a: a for a in ROOT_ARGS}
    first = Built(
        root, "", 0, "", handed, frozenset(ROOT_ARGS), 0, prefix="", config_source="config"
    )
    yield first
    queue, seen = [(first, 0)], {(root.path, root.name)}
    while queue and len(seen) < MAX_CLASSES:
        holder, depth = queue.pop(0)
        init = constructor(sim, holder.cls)
        if init is None or depth >= MAX_DEPTH:
            continue
        for b in _built_by(sim, holder.cls, init):
            if (b.cls.path, b.cls.name) in seen or len(seen) >= MAX_CLASSES:
                continue
            b = replace(
                b, config_source=_own_config(holder), prefix=_child_prefix(holder.prefix, b.attr)
            )
            seen.add((b.cls.path, b.cls.name))
            yield b
            queue.append((b, depth + 1))


def _own_config(b: Built) -> str | None:
    """What the `config` of the class `b` builds is (Built.config_source)."""
    if b.handed.get("config") == "config":
        return b.config_source
    key = sub_config(b.call)
    return f"config.{key}" if key is not None and b.config_source == "config" else None


def sub_config(call: ast.Call | None) -> str | None:
    """The text sub-config a call passes as `config` (`config=config.text_config`)."""
    if call is None:
        return None
    given = [k.value for k in call.keywords if k.arg == "config"] or call.args[:1]
    value = given[0] if given else None
    if isinstance(value, ast.IfExp) and _tests_for_own(value):
        value = value.body  # (`config.text_config if hasattr(config, "text_config") else config`)
    if (
        isinstance(value, ast.Attribute)
        and isinstance(value.value, ast.Name)
        and value.value.id == "config"
        and value.attr in model_attrs.TEXT_CONFIG_KEYS
    ):
        return value.attr
    return None


def _tests_for_own(choice: ast.IfExp) -> bool:
    """`config.<key> if hasattr(config, "<key>") else config`: the sub-config when config.json
    holds it (config_value answers only then)."""
    test, body = choice.test, choice.body
    return (
        isinstance(test, ast.Call)
        and ast.unparse(test.func) == "hasattr"
        and len(test.args) == 2
        and isinstance(body, ast.Attribute)
        and isinstance(test.args[1], ast.Constant)
        and test.args[1].value == body.attr
        and ast.unparse(test.args[0]) == ast.unparse(body.value)
        and ast.unparse(choice.orelse) == ast.unparse(body.value)
    )


def config_value(sim: Simulator, source: str | None) -> Obj | None:
    """The value of a Built.config_source: the hf_config, or the text sub-config when it is
    the one SGLang reads as hf_text_config (model_attrs.text_config); None when not known."""
    if source == "config":
        return Obj("hf_config")
    config = sim.profile.config if sim.profile is not None else None
    if source is None or not source.startswith("config.") or not isinstance(config, dict):
        return None
    sub = config.get(source.removeprefix("config."))
    return (
        Obj("hf_text_config") if sub is not None and sub is model_attrs.text_config(sim) else None
    )


def _built_by(
    sim: Simulator,
    holder: ClassRef,
    init: Func,
    outer: tuple[str, ...] | None = None,
    chosen: dict[str, ClassRef] | None = None,
    factories: bool = True,
) -> Iterator[Built]:
    """The model classes `init` calls (directly, in a lambda it hands to a helper such as
    make_layers, in a factory method of its class it calls: `self.model =
    self._init_model(...)`, or in its base's constructor it calls), each with the condition
    it is called under. A class a parameter names (`decoder_layer_type(...)`) is the one
    the call to the constructor passes (`chosen`) or the parameter's default."""
    params = {a.arg for a in (*init.node.args.args, *init.node.args.kwonlyargs)}
    defaults = {
        p: found
        for p, name in named_defaults(init.node).items()
        if (found := _model_class(sim, init.module, name)) is not None
    }
    classes_of = {**defaults, **(chosen or {})}
    guards = _guards(init.node.body) if outer is None else {}
    targets = _targets(init.node.body)
    choices = _choices(sim, init) if outer is None else {}
    for call, inner in _with_nested_builders(init.node.body, targets):
        conds = (*(outer or ()), *inner)
        base = _base_init(sim, init, call) if outer is None else None
        if base is not None:  # `super().__init__(..., decoder_layer_type=Qwen3DecoderLayer)`
            named = {
                k.arg: found
                for k in call.keywords
                if k.arg
                and isinstance(k.value, ast.Name)
                # (a class, or a parameter naming one handed on: `decoder_layer_type=
                # decoder_layer_type`, whose default is the subclass's own layer)
                and (
                    found := classes_of.get(k.value.id)
                    or _model_class(sim, init.module, k.value.id)
                )
                is not None
            }
            yield from _built_by(sim, holder, base, conds, named)
            continue
        # (the base's constructor calling the subclass's factory: Llama-4's `_init_model`)
        factory = _factory(sim, holder, call) if factories else None
        if factory is not None:  # (one level: a factory's own calls are not followed)
            for b in _built_by(sim, holder, factory, conds, factories=False):
                yield replace(b, attr=b.attr or targets.get(id(call)))
            continue
        if not isinstance(call.func, ast.Name):
            continue
        cls = classes_of.get(call.func.id) or _model_class(
            sim, init.module, call.func.id, _local_imports(init.node)
        )
        chosen_from = choices.get(call.func.id) if cls is None else None
        spread = any(isinstance(a, ast.Starred) for a in call.args) or any(
            k.arg is None for k in call.keywords
        )
        for one in [cls] if cls is not None else chosen_from[0] if chosen_from else []:
            # (a lookup under an `if` is not decided here: the `if` would be ignored)
            chooser = chosen_from[1] if chosen_from and not conds else None
            picked = f"{ast.unparse(chooser[0])} is {one.name}" if chooser else None
            yield Built(
                one,
                holder.name,
                call.lineno,
                " and ".join((*conds, picked) if picked else conds),
                _handed(call, params),
                frozenset(k.arg for k in call.keywords if k.arg),
                -1 if spread else len(call.args),
                guard if (guard := guards.get(id(call))) and len(guard) == len(conds) else None,
                call,
                init.module,
                attr=targets.get(id(call)),
                chooser=chooser,
            )


def _targets(body: list[ast.stmt]) -> dict[int, str]:
    """id(call) -> the attribute of `self` its statement assigns (`self.mlp = Mlp(...)`,
    `self.layers, self.start, self.end = make_layers(n, lambda idx, prefix: Layer(...))`)."""
    out: dict[int, str] = {}
    for stmt in body:
        for node in ast.walk(stmt):
            if not isinstance(node, ast.Assign):
                continue
            target = node.targets[0]
            if isinstance(target, ast.Tuple) and target.elts:
                target = target.elts[0]
            name = self_attr(target)
            if name is not None:
                for call in ast.walk(node.value):
                    if isinstance(call, ast.Call):
                        out.setdefault(id(call), name)
    return out


def _child_prefix(prefix: str | None, attr: str | None) -> str | None:
    """The module name of what a class assigns to `self.<attr>`: the layers a `layers`
    list holds are named by their index (`model.layers.{layer}`)."""
    if prefix is None or attr is None:
        return None
    name = f"{attr}.{{layer}}" if attr == "layers" else attr
    return f"{prefix}.{name}" if prefix else name


def named_defaults(node: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, str]:
    """Parameters whose default is a name (`decoder_layer_type=Qwen2DecoderLayer`)."""
    a = node.args
    positional = [*a.posonlyargs, *a.args]
    pairs = [*zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True)]
    pairs += [(p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None]
    return {p.arg: d.id for p, d in pairs if isinstance(d, ast.Name)}


def _base_init(sim: Simulator, init: Func, call: ast.Call) -> Func | None:
    """The base class's constructor `super().__init__(...)` calls in `init`."""
    func = call.func
    if not (
        isinstance(func, ast.Attribute)
        and func.attr == "__init__"
        and isinstance(func.value, ast.Call)
        and isinstance(func.value.func, ast.Name)
        and func.value.func.id == "super"
        and init.owner is not None
    ):
        return None
    after = classes.mro(sim, init.owner)[0][1:]
    for c in after:
        for node in c.node.body:
            if isinstance(node, ast.FunctionDef) and node.name == "__init__":
                return Func(c.module, node, None, c)
    return None


def _factory(sim: Simulator, holder: ClassRef, call: ast.Call) -> Func | None:
    """The method of the holder's class (or a base's) that `self.<method>(...)` calls."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
        return None
    if func.value.id != "self":
        return None
    for c in classes.mro(sim, holder)[0]:
        for node in c.node.body:
            if isinstance(node, ast.FunctionDef) and node.name == func.attr:
                return Func(c.module, node, None, c)
    return None


def _model_class(
    sim: Simulator, mod: Module, name: str, local: dict[str, tuple[str, str]] | None = None
) -> ClassRef | None:
    """The model class `name` is in the module, or in a constructor importing it itself
    (`local`: Llama-4's multimodal class imports its language model's class inside)."""
    if name in mod.classes:
        return classes.class_ref(mod, name)
    target = (local or {}).get(name) or mod.imports.get(name)
    if target is None or not target[0].startswith(MODELS_PACKAGE) or target[1] is None:
        return None
    found = sim.exported(target[0], target[1])
    return found if isinstance(found, ClassRef) else None


@by_identity
def _local_imports(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, tuple[str, str]]:
    """`from package.module import Name` statements inside a function: name -> (module,
    name)."""
    return {
        alias.asname or alias.name: (node.module, alias.name)
        for node in ast.walk(fn)
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
        for alias in node.names
    }


def _handed(call: ast.Call, params: set[str]) -> dict[str, str]:
    """Keyword (or first positional) arguments that are the builder's own parameters of the
    same name, handed on unchanged (`config=config`)."""
    out = {k.arg: k.value.id for k in call.keywords if k.arg and isinstance(k.value, ast.Name)}
    if call.args and isinstance(call.args[0], ast.Name) and call.args[0].id == "config":
        out.setdefault("config", "config")
    return {k: v for k, v in out.items() if v in params and k == v}


def _guards(
    body: list[ast.stmt], path: tuple[tuple[int, bool], ...] = ()
) -> dict[int, tuple[tuple[int, bool], ...]]:
    """id(call) -> the (index, branch) of each `if` leading to the call from the
    constructor's body (Built.guard), for the calls under `if`s only (not in a loop)."""
    out: dict[int, tuple[tuple[int, bool], ...]] = {}
    for i, stmt in enumerate(body):
        if isinstance(stmt, ast.If):
            for branch, stmts in ((True, stmt.body), (False, stmt.orelse)):
                out |= _guards(stmts, (*path, (i, branch)))
        elif path and not isinstance(stmt, ast.For | ast.While | ast.With | ast.Try):
            for call, conds in calls_under([stmt], ()):
                if not conds:
                    out[id(call)] = path
    return out


def _with_nested_builders(
    body: list[ast.stmt], targets: dict[int, str]
) -> Iterator[tuple[ast.Call, tuple[str, ...]]]:
    """`calls_under(body)`, and where a call hands a function the constructor defines
    (`def layer_fn(idx, prefix): return Layer(...)`, then `self.layers = make_layers(n,
    layer_fn)`), that function's calls too, under the same conditions and assigned to the
    same attribute (as a lambda handed there would be)."""
    nested = {s.name: s for s in body if isinstance(s, ast.FunctionDef)}
    for call, conds in calls_under(body, ()):
        yield call, conds
        for arg in (*call.args, *(k.value for k in call.keywords)):
            fn = nested.get(arg.id) if isinstance(arg, ast.Name) else None
            if fn is None:
                continue
            for inner, more in calls_under(fn.body, conds):
                if id(call) in targets:
                    targets.setdefault(id(inner), targets[id(call)])
                yield inner, more


def calls_under(
    stmts: list[ast.stmt], conds: tuple[str, ...]
) -> Iterator[tuple[ast.Call, tuple[str, ...]]]:
    """The calls of a constructor's statements, with the `if` tests (and their negations
    for `else`) they run under; a conditional expression's branches count as conditions."""
    for stmt in stmts:
        if isinstance(stmt, ast.If):
            test = ast.unparse(stmt.test)
            yield from _expr_calls(stmt.test, conds)
            yield from calls_under(stmt.body, (*conds, test))
            yield from calls_under(stmt.orelse, (*conds, f"not ({test})"))
        elif isinstance(stmt, ast.For | ast.While | ast.With | ast.Try):
            loop = (*conds, "its loop runs") if isinstance(stmt, ast.For | ast.While) else conds
            for part in ("body", "orelse", "finalbody"):
                yield from calls_under(getattr(stmt, part, []) or [], loop)
            for handler in getattr(stmt, "handlers", []):
                yield from calls_under(handler.body, (*conds, "an exception is caught"))
        elif not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield from _expr_calls(stmt, conds)


def _expr_calls(
    node: ast.AST, conds: tuple[str, ...]
) -> Iterator[tuple[ast.Call, tuple[str, ...]]]:
    if isinstance(node, ast.IfExp):
        test = ast.unparse(node.test)
        yield from _expr_calls(node.test, conds)
        yield from _expr_calls(node.body, (*conds, test))
        yield from _expr_calls(node.orelse, (*conds, f"not ({test})"))
        return
    if isinstance(node, ast.Call):
        yield node, conds
    for child in ast.iter_child_nodes(node):
        yield from _expr_calls(child, conds)


def self_attr(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.attr if node.value.id == "self" else None
    return None
