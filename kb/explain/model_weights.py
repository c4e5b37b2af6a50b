"""The model's `load_weights(weights)`, a step of the load stage (kb.explain.deploy): the
main model's, and, with speculative decoding, the draft model's, when its config is known:
the target's own checkpoint (MTP: `--speculative-algorithm EAGLE` or NEXTN on DeepSeek-V3),
or a checkpoint of its own (`--speculative-draft-model-path org/other`) whose config.json
the profile gives (`draft_config`). SGLang loads the latter as it loads the model: the
loader builds its quantization config (kb.explain.model_loading's step, on the draft's
ModelConfig, whose quantization is `speculative_draft_model_quantization`), then its class
(kb.explain.model_class's step), then calls its load_weights.

The loader hands the model it built the iterator of the checkpoint's tensors
(`model.load_weights(weights)` in DefaultModelLoader.load_weights_and_postprocess). A
model's method checks its config before it reads any of them: DeepSeek's NextN draft asserts
`num_nextn_predict_layers == 1` (Kimi-K2's config.json has 0) before its loop over the
weights. The method is run, as the version's code has it, with the weights unknown and the
model an object of the architecture's class whose constructor is not run (the fields it sets
from its `config` and `quant_config` arguments are those; the rest is unknown). The run ends
at its first loop over something it cannot read (the weights, the model's parameters): what
follows depends on the files, and walking it would cost a run's budget for nothing. Only what
certainly fires is kept (block_forward.only_certain): a raise the weights' names or shapes
decide says nothing of the command. A key config.json lacks is not taken as absent: the
config's class may set it (DeepSeek-V3's own code sets `num_nextn_predict_layers=1`).

The draft model is built from its own ModelConfig (`from_server_args(..., model_path=<the
draft's>, is_draft_model=True)`): its config.json (the target's when the draft path is the
model path: ServerArgs points it there for MTP architectures) with the changes
`ModelConfig._config_draft_model` makes for a draft (the architecture renamed to the
draft's class, `num_nextn_predict_layers` set), read by running that method's `if`s.
"""

from __future__ import annotations

import ast
import contextlib
import copy
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from kb.explain import block_forward, classes, model_class, model_loading, parallel_state
from kb.explain.abstract_values import ClassRef, Func, Instance, Obj, is_known
from kb.explain.frames import Ctx, Frame
from kb.explain.model_attrs import DRAFT as DRAFT_MODEL
from kb.explain.model_registry import architecture_class
from kb.explain.predicates import Profile, missing, unknown

if TYPE_CHECKING:
    from kb.explain.simulate import Simulator

PART = "the model's load_weights (before it reads the weights)"
DRAFT_PART = "the draft model's load_weights (before it reads the weights)"
LOAD_WEIGHTS = "load_weights"
DRAFT_PATH = "speculative_draft_model_path"
DRAFT_QUANTIZATION = "speculative_draft_model_quantization"
LOAD_MODEL = "load_model"
MODEL_CONFIG = "sglang.srt.configs.model_config"
DRAFT_CONFIG = "_config_draft_model"  # ModelConfig's method turning the config into the draft's
NOT_RUN = "its constructor is not simulated"
HANDED = ("config", "quant_config")  # the constructor's arguments the loader passes
MAX_LOADER_METHODS = 8  # the loader's methods followed from load_model, looking for the call


class _WeightsRead(Exception):
    """The run reached a loop over what it cannot read: the step ends there."""


def step(
    sim: Simulator, loader: Any, path: str | None, profile: Profile | None, quant_config: Any
) -> Callable[[], None] | None:
    """The main model's `load_weights`; None without config.json, a loader decided to call
    it (the dummy loader does not), or the architecture's class and its method."""
    if profile is None or profile.config is None or not calls_load_weights(sim, loader):
        return None
    root = architecture_class(sim, path, profile.arch)
    if root is None:
        return None
    return _step(sim, root, quant_config)


def draft_step(
    sim: Simulator,
    loader: Any,
    models: dict[str, str],
    profile: Profile | None,
    quant_config: Any,
    draft_of: Callable[[], Profile | None],
) -> Callable[[], None] | None:
    """The draft model's load: its quantization config (model_loading's step, run on the
    draft's ModelConfig) for a draft that is a checkpoint of its own, then its
    `load_weights`; None when the draft's config is not known (`draft_of`, run in the
    step: draft_model). `quant_config`: the main model's, which is an own-checkpoint
    draft's when the command quantizes both alike (its ModelConfig takes
    `speculative_draft_model_quantization` where the version has it)."""
    if profile is None or not calls_load_weights(sim, loader):
        return None
    separate = separate_checkpoint(sim, profile)
    if not separate and (own_checkpoint(sim, profile) is None):
        return None
    quantization = sim.fields.get("quantization")
    same = sim.fields.get(DRAFT_QUANTIZATION, quantization) == quantization
    draft_quant = quant_config if same else unknown("the draft model's quantization config")

    def run() -> None:
        draft = draft_of()
        if draft is None:
            return
        with as_model(sim, draft):
            qc = draft_quant
            if separate:  # (SGLang's loader builds the draft's as the model's)
                loaded = model_loading.Loaded()
                build = model_loading.quantization_config_step(sim, loaded)
                if build is None:
                    return
                build()
                qc = loaded.quant_config
            model_file = models.get(draft.arch or "")
            root = architecture_class(sim, model_file, draft.arch)
            if root is None:
                return
            if separate:  # (the loader builds the draft's class: its constructors check it)
                build = model_class.step(sim, model_file, draft, qc)
                if build is not None:
                    build()
            # (its raise rests on the draft the speculative algorithm loads: what a fix changes)
            reads = frozenset({"speculative_algorithm", DRAFT_PATH})
            ctx = Ctx((f"the draft model ({root.name}) loads its weights",), (), reads)
            inner = _step(sim, root, qc, ctx)
            if inner is not None:
                inner()

    return run


def _step(
    sim: Simulator, root: ClassRef, quant_config: Any, ctx: Ctx | None = None
) -> Callable[[], None] | None:
    model = Instance(root, NOT_RUN)
    handed = {"config": Obj("hf_config"), "quant_config": quant_config}
    init = model_class.constructor(sim, root)
    if init is not None:  # the fields its constructor copies from its arguments
        for stmt in init.node.body:
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and (field := model_class.self_attr(stmt.targets[0])) is not None
                and isinstance(stmt.value, ast.Name)
                and stmt.value.id in HANDED
            ):
                model.fields[field] = handed[stmt.value.id]
    load = classes.instance_attr(sim, model, LOAD_WEIGHTS, allow_missing=True)
    if not isinstance(load, Func):
        return None

    def run() -> None:
        profile = sim.profile
        sim.profile = _DefaultsUnknown.model_construct(
            **{name: getattr(profile, name) for name in Profile.model_fields}
        )
        sim.unknown_loop = _stop
        try:
            with parallel_state.answered(sim), block_forward.only_certain(sim):
                weights = unknown("the checkpoint's weights")
                sim.call_function(load, [weights], {}, ctx or Ctx())
        except _WeightsRead:
            pass
        finally:
            sim.profile, sim.unknown_loop = profile, None

    return run


class _DefaultsUnknown(Profile):
    """The profile as a model's code reads its config: a key config.json lacks has the
    default of the config's class (transformers' or the checkpoint's own code, which sets
    `num_nextn_predict_layers=1` for DeepSeek-V3), not read here: unknown, not absent (a
    `hasattr` on it is not decided)."""

    def hf_attr(self, name: str) -> Any:
        value = super().hf_attr(name)
        if missing(value):
            return unknown(f"config.json's {name} (absent: its config class's default)")
        return value


def _stop() -> None:
    raise _WeightsRead


def calls_load_weights(sim: Simulator, loader: Any) -> bool:
    """Whether the loader's `load_model` (or a method of its own it calls on `self`) calls
    `<model>.load_weights(...)`."""
    if not isinstance(loader, Instance):
        return False
    first = classes.instance_attr(sim, loader, LOAD_MODEL, allow_missing=True)
    todo: list[Any] = [first]
    seen: set[int] = set()
    while todo and len(seen) < MAX_LOADER_METHODS:
        method = todo.pop()
        if not isinstance(method, Func) or id(method.node) in seen:
            continue
        seen.add(id(method.node))
        for n in ast.walk(method.node):
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
                continue
            on, name = n.func.value, n.func.attr
            if name == LOAD_WEIGHTS and not (isinstance(on, ast.Name) and on.id == "self"):
                return True
            if isinstance(on, ast.Name) and on.id in ("self", loader.cls.name):
                todo.append(classes.instance_attr(sim, loader, name, allow_missing=True))
            elif _is_super(on) and method.owner is not None:  # (`super().load_model(...)`)
                todo.append(_base_method(sim, loader, method.owner, name))
    return False


def _is_super(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
    )


def _base_method(sim: Simulator, loader: Instance, owner: Any, name: str) -> Func | None:
    """The method `name` of the classes after `owner` in the loader's class order."""
    order, _ = classes.mro(sim, loader.cls)
    after = order[order.index(owner) + 1 :] if owner in order else []
    for cls in after:
        for node in cls.node.body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return Func(cls.module, node, loader, cls)
    return None


@contextlib.contextmanager
def as_model(sim: Simulator, profile: Profile) -> Iterator[None]:
    """Run as the draft model loaded (its ModelConfig, `ModelConfig.from_server_args(...,
    model_path=<the draft's path>, is_draft_model=True)`, and its ModelRunner are derived
    from its profile), then back to the main model."""
    main, derived, args = sim.profile, sim.derived, sim.model_config_args
    sim.profile, sim.derived = profile, {}
    sim.model_config_args = {"model_path": sim.fields.get(DRAFT_PATH), DRAFT_MODEL: True}
    try:
        yield
    finally:
        sim.profile, sim.derived, sim.model_config_args = main, derived, args


def draft_model(sim: Simulator, profile: Profile | None) -> Profile | None:
    """The draft model's profile: the target's own checkpoint's (MTP/NEXTN) or a checkpoint
    of its own, with what the version's `ModelConfig._config_draft_model` changes in its
    config.json for a draft; None when not known. (It runs SGLang's code: call it in a
    step.)"""
    if profile is None:
        return None
    if separate_checkpoint(sim, profile):
        assert profile.draft_config is not None
        config = profile.draft_config
        archs = config.get("architectures")
        arch = archs[0] if isinstance(archs, list) and archs else None
        quantization = config.get("quantization_config")
        own = profile.model_copy(
            update={
                "model": None,
                "config": config,
                "arch": arch if isinstance(arch, str) else None,
                "quant": quantization.get("quant_method")
                if isinstance(quantization, dict)
                else None,
                "hf_quant_config": None,  # (not read for a draft: absent, as config.json alone)
                "draft_config": None,
            }
        )
        method = _draft_config_method(sim)
        return draft_profile(sim, own, method) if method is not None else own
    method = own_checkpoint(sim, profile)
    return draft_profile(sim, profile, method) if profile is not None and method else None


def separate_checkpoint(sim: Simulator, profile: Profile | None) -> bool:
    """Whether the draft is a checkpoint of its own whose config.json the profile gives
    (`draft_config`): `--speculative-draft-model-path` names another model."""
    draft = sim.fields.get(DRAFT_PATH)
    return (
        profile is not None
        and profile.draft_config is not None
        and isinstance(draft, str)
        and draft != sim.fields.get("model_path")
    )


def own_checkpoint(sim: Simulator, profile: Profile | None) -> Func | None:
    """`ModelConfig._config_draft_model` when the draft is the target's own checkpoint
    (MTP/NEXTN: `--speculative-draft-model-path` is the model path) whose config.json the
    profile gives, and the version's ModelConfig says what changes in it for a draft."""
    if profile is None or profile.config is None:
        return None
    model_path = sim.fields.get("model_path")
    if not isinstance(model_path, str) or sim.fields.get(DRAFT_PATH) != model_path:
        return None
    return _draft_config_method(sim)


def _draft_config_method(sim: Simulator) -> Func | None:
    mod = sim.module(MODEL_CONFIG)
    node = mod.classes.get("ModelConfig") if mod is not None else None
    if mod is None or node is None:
        return None
    for stmt in node.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == DRAFT_CONFIG:
            return Func(mod, stmt, None, classes.class_ref(mod, "ModelConfig"))
    return None


def draft_profile(sim: Simulator, profile: Profile, method: Func) -> Profile | None:
    """The profile of the draft model: config.json as `_config_draft_model` leaves it,
    running its statements on a ModelConfig of a draft (`is_draft_model`); None when one
    is not of the shapes read here (an `if` on what is not known, a change other than to
    a key of the config)."""
    assert method.owner is not None
    obj = Instance(method.owner, NOT_RUN)
    obj.fields.update(is_draft_model=True, hf_config=Obj("hf_config"))
    frame = Frame(method.module, DRAFT_CONFIG, {"self": obj})
    config = copy.deepcopy(profile.config or {})
    main = sim.profile
    try:
        sim.profile = profile
        if not _changes(sim, method.node.body, frame, config):
            return None
        return sim.profile
    finally:
        sim.profile = main


def _changes(sim: Simulator, body: list[ast.stmt], frame: Frame, config: dict[str, Any]) -> bool:
    for stmt in body:
        if isinstance(stmt, ast.If):
            test = sim.eval(stmt.test, frame, Ctx())
            if not isinstance(test, bool):
                return False
            if not _changes(sim, stmt.body if test else stmt.orelse, frame, config):
                return False
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            if isinstance(target, ast.Name):
                frame.locals[target.id] = sim.eval(stmt.value, frame, Ctx())
                continue
            key, index = _config_key(target)
            value = sim.eval(stmt.value, frame, Ctx())
            if key is None or not is_known(value):
                return False
            if index is None:
                config[key] = value
            elif isinstance(config.get(key), list) and 0 <= index < len(config[key]):
                config[key][index] = value
            else:
                return False
            arch = config.get("architectures")
            first = arch[0] if isinstance(arch, list) and arch else None
            sim.profile = sim.profile.model_copy(
                update={"config": copy.deepcopy(config), "arch": first}
            )
        elif not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            return False  # (a docstring aside, nothing else is read here)
    return True


def _config_key(target: ast.expr) -> tuple[str | None, int | None]:
    """`self.hf_config.<key>` -> (key, None); `self.hf_config.<key>[<int>]` -> (key, int)."""
    index = None
    if isinstance(target, ast.Subscript):
        if not (isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, int)):
            return None, None
        index, target = target.slice.value, target.value
    if (
        isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Attribute)
        and target.value.attr == "hf_config"
        and model_class.self_attr(target.value) == "hf_config"
    ):
        return target.attr, index
    return None, None
