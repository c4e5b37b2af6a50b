"""The MoE layer's quantization method, a step of the load stage (kb.explain.deploy).

Building the MoE layer (kb.explain.moe builds it without FusedMoE's own constructor),
FusedMoE.__init__ computes the per-rank sizes from the parallel state (`moe_ep_size`,
`moe_tp_size`; `intermediate_size_per_partition = intermediate_size // moe_tp_size`),
asks the quantization config for its method (`quant_config.get_quant_method(self,
prefix)`: the config class decides by the layer's type, FusedMoE through the layer's
bases) and has it create the weights on those sizes. Both raise on real commands: an FP8
block-quantized MoE whose per-rank intermediate size is not a multiple of the block
(`Fp8MoEMethod.create_weights`), a method whose constructor checks the GPU for the MoE
runner (`Fp8MoEMethod`, `ModelOptNvFp4FusedMoEMethod`).

The step interprets the version's own FusedMoE.__init__ from its start through the last of
the statements that build the layer's parts (BUILDS: the weights, then the method's
`create_moe_runner`, whose MoeRunner raises when no fused function is registered for its
backends (kb.explain.class_tables reads the registry), then `create_moe_dispatcher`, whose
a2a backend's dispatcher may refuse the DeepEP mode: Mooncake's and Nixl's the normal
one); what follows is not followed. It runs on the layer object the MoE step built, with
constructors run, then runs the quantization method's `process_weights_after_loading` on
the layer (kb.explain.model_loading), after which the layer's attributes no code followed
set are those its classes may set (kb.explain.unfollowed): what its forward reads with a
default (`use_intel_amx_backend(layer)`) is decided. Its arguments are those the model
classes pass, read from config.json (MODEL_KEYS; when config.json does not settle them,
those the model's MoE block passes, with its other arguments, when the run decides them:
kb.explain.moe_block); the parallel-state getters are answered
from the server args (kb.explain.parallel_state). Without those keys, or with the
quantization config not known, nothing runs: unknown stays unknown. An unquantized model
(no quantization config) gets the method FusedMoE's constructor builds itself.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kb.explain import (
    class_tables,
    classes,
    model_loading,
    moe,
    moe_block,
    parallel_state,
    unfollowed,
)
from kb.explain.abstract_values import EnumMember, Func
from kb.explain.predicates import Profile, Unknown

if TYPE_CHECKING:
    from kb.explain.simulate import Simulator

PART = "the MoE layer's quantization method"
FOLLOWED = (
    "what the run followed: its constructor through its token dispatcher, its quantization "
    "method's create_weights and process_weights_after_loading"
)
# FusedMoE's argument <- the config.json keys the MoE model classes pass for it, the first
# one present (Qwen3-MoE `num_experts`, DeepSeek/GLM-4 MoE `n_routed_experts`); a model
# without `moe_intermediate_size` (Mixtral passes its `intermediate_size`) is not followed
MODEL_KEYS = {
    "num_experts": ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts"),
    "hidden_size": ("hidden_size",),
    # (a model with one FFN size, Mixtral's and GPT-OSS's, builds its experts with it: see
    # _intermediate_keys)
    "intermediate_size": ("moe_intermediate_size", "intermediate_size"),
    "top_k": ("num_experts_per_tok",),
}


def step(
    sim: Simulator,
    built: moe.MoeLayer,
    quant_config: Any,
    profile: Profile | None,
    paths: Iterable[str] = (),
    model_file: str | None = None,
) -> Callable[[], None] | None:
    """The step to run past ServerArgs; None when there is nothing to follow (no MoE layer
    built, the quantization config not known (None: an unquantized model), the model's
    sizes not in its config.json nor computed by its MoE block). `paths`: the version's
    files (where the MoE runner's registries are read from); `model_file`: the
    architecture's (its MoE block's arguments to the experts)."""
    layer = built.layer
    if layer is None or isinstance(quant_config, Unknown):
        return None
    init = _through_builds(sim, layer)
    if init is None:
        return None
    block = block_args(sim, model_file, profile, quant_config)
    args = layer_args(sim, profile, block)
    if args is None:
        return None
    kwargs, keys, passed = args
    kwargs["quant_config"] = quant_config
    read = [f"config.json's {', '.join(keys)} (the keys the MoE model classes pass)"] * bool(keys)
    read += [f"the {', '.join(passed)} its MoE block passes"] * bool(passed)

    def run() -> None:
        sim.result.assumptions["moe-layer-args"] = (
            "the MoE layer is built with " + ", and ".join(read) + ", in its first MoE layer"
        )
        sim.result.assumptions["parallel-state"] = (
            "the MoE expert-parallel size is the ep size and the MoE tensor-parallel size the "
            "tp size // the ep size, as initialize_model_parallel sets them"
        )
        construct, sim.construct = sim.construct, True  # the method's constructor checks
        class_tables.fill(sim, paths)  # (the runner asks its pools)
        try:
            with parallel_state.answered(sim):
                sim.call_function(init, [], dict(kwargs), built.ctx)
                model_loading.after_loading(sim, layer, built.ctx)
                # (what its forward reads with a default, no code followed set: absent)
                unfollowed.settle(sim, layer, FOLLOWED)
        finally:
            sim.construct = construct

    return run


def _through_builds(sim: Simulator, layer: Any) -> Func | None:
    """FusedMoE.__init__ bound to the layer, cut after the last of its statements that
    build the layer's parts (BUILDS); None when the version has none."""
    mod = sim.module(moe.FUSED_MOE[0])
    if mod is None or moe.FUSED_MOE[1] not in mod.classes:
        return None
    cls = classes.class_ref(mod, moe.FUSED_MOE[1])
    for node in cls.node.body:
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            last = max((i for i, stmt in enumerate(node.body) if _builds(stmt)), default=None)
            if last is not None:
                part = copy.copy(node)
                # (and the fields it then copies from its arguments, which its forward
                # reads: `self.routing_method_type = routing_method_type`)
                part.body = node.body[: last + 1] + [
                    stmt for stmt in node.body[last + 1 :] if _copies_field(stmt)
                ]
                return Func(mod, part, layer, cls)
    return None


# what FusedMoE's constructor builds that this step follows, in its order: the weights,
# the runner, the token dispatcher (the calls' names, attribute or function)
BUILDS = ("create_weights", "create_moe_runner", "create_moe_dispatcher")


def _copies_field(stmt: ast.stmt) -> bool:
    """`self.x = <a name or constant>`: a field set from an argument, calling nothing."""
    target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
    if isinstance(stmt, ast.AnnAssign):
        target = stmt.target
    value = getattr(stmt, "value", None)
    return (
        isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
        and isinstance(value, ast.Name | ast.Constant)
    )


def _builds(stmt: ast.stmt) -> bool:
    return any(
        (isinstance(n, ast.Attribute) and n.attr in BUILDS)
        or (isinstance(n, ast.Name) and n.id in BUILDS)
        for n in ast.walk(stmt)
    )


def block_args(
    sim: Simulator, model_file: str | None, profile: Profile | None, quant_config: Any
) -> dict[str, Any]:
    """The keyword arguments the model's MoE block builds its experts with, as the run
    computes them (kb.explain.moe_block); none when not found or not followed."""
    found: dict[str, Any] = {}
    if profile is None or model_file is None:
        return found

    def read() -> None:
        with parallel_state.answered(sim):
            found.update(moe_block.experts_arguments(sim, model_file, profile, quant_config) or {})

    return found if sim.run_after(read) else {}


# the values of the block's arguments taken: plain ones the run decides (an argument not
# decided, or a tensor, a dtype, a function, is left out, as every argument but MODEL_KEYS
# was before the block was read: FusedMoE's default stands in for it)
PLAIN = (bool, int, float, str)


def layer_args(
    sim: Simulator, profile: Profile | None, block: dict[str, Any] | None = None
) -> tuple[dict[str, Any], list[str], list[str]] | None:
    """FusedMoE's arguments, the config.json keys read and the block's arguments taken:
    those of MODEL_KEYS read from config.json when it settles them all; else those the
    model's MoE block passes (`block`) when the run decides each of MODEL_KEYS it passes
    (its experts count then counts its fused shared experts, as the count it passes with
    them does), with its other arguments the run decides. None when one of MODEL_KEYS is
    in neither."""
    config = profile.config if profile is not None else None
    if isinstance(config, dict) and isinstance(config.get("text_config"), dict):
        config = config["text_config"]
    if not isinstance(config, dict):
        return None
    block = block or {}
    if not all(_is_int(block[arg]) for arg in MODEL_KEYS if arg in block):
        block = {}  # (mixed with config.json's sizes, its other arguments may not agree)
    if all(_config_key(config, arg, names) for arg, names in MODEL_KEYS.items()):
        # config.json settles them: its keys alone (what the block computes may read the
        # server args the architecture's constructor changes first, not followed here:
        # DeepSeek's and GLM's fused shared experts, turned off for DeepEP), with the
        # block's choices of kind, which config.json decides (Nemotron-H's experts:
        # `activation="relu2"`, `is_gated=False`)
        block = {k: v for k, v in block.items() if k not in MODEL_KEYS and isinstance(v, KINDS)}
    kwargs: dict[str, Any] = {}
    keys: list[str] = []
    for arg, names in MODEL_KEYS.items():
        if arg in block:
            kwargs[arg] = block[arg]  # (its redundant experts counted)
            continue
        key = _config_key(config, arg, names)
        if key is None:
            return None
        kwargs[arg] = config[key]
        keys.append(key)
        if arg == "num_experts":
            # the model classes add the server args' redundant experts to the routed ones
            redundant = sim.fields.get("ep_num_redundant_experts", 0)
            kwargs[arg] += redundant if _is_int(redundant) else 0
    kwargs |= {
        k: v
        for k, v in block.items()
        if k not in kwargs and k not in BLOCK_SET and isinstance(v, (*PLAIN, EnumMember))
    }
    first = config.get("first_k_dense_replace", 0)  # (DeepSeek/GLM: the dense layers first)
    kwargs["layer_id"] = first if isinstance(first, int) else 0
    kwargs["prefix"] = f"model.layers.{kwargs['layer_id']}.mlp.experts"
    return kwargs, keys, sorted(k for k in kwargs if k in block and k not in BLOCK_SET)


def _config_key(config: dict[str, Any], arg: str, names: tuple[str, ...]) -> str | None:
    """The config.json key FusedMoE's `arg` is read from, when config.json has one."""
    names = _intermediate_keys(config) if arg == "intermediate_size" else names
    return next((k for k in names if isinstance(config.get(k), int)), None)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# the block's arguments that choose a kind of MoE, not a count (a string, a flag, an enum
# member: `routing_method_type=RoutingMethodType.DeepSeekV3`)
KINDS = (str, bool, EnumMember)


# what the step sets itself whatever the block passes (its layer, its module name, the
# loader's quantization config)
BLOCK_SET = frozenset({"layer_id", "prefix", "quant_config"})


def _intermediate_keys(config: dict[str, Any]) -> tuple[str, ...]:
    """The key of the experts' FFN size: `moe_intermediate_size`; `intermediate_size` only
    in a config.json with no other FFN size (else it may be the dense layers')."""
    sizes = [k for k in config if "intermediate" in k or k.startswith("ffn")]
    if "moe_intermediate_size" in config or sizes != ["intermediate_size"]:
        return ("moe_intermediate_size",)
    return ("intermediate_size",)
