"""Past ServerArgs for a mixture-of-experts model: SGLang's MoE configuration, the MoE
layer class it builds, and what that class's forward enforces, read from the version's own
source and run by the simulator (kb.explain.simulate, kb.explain.classes).

- `moe_config`: the scheduler's `init_moe_gemm_config` (`init_moe_config` in older
  versions), bound to a Scheduler built without its constructor whose model config is the
  profile's and whose server args are the run's: it calls `initialize_moe_config`, which
  sets layers/moe/utils.py's globals (MOE_A2A_BACKEND, DEEPEP_MODE, ...) for what follows,
  and may raise (SBO on SM90 at snapshot-2026-07-01).
- `moe_layer`: `get_moe_impl_class(quant_config)` with the quantization config the model
  loader built (kb.explain.model_loading; without it, an object of the method's config
  class, which layers/quantization/__init__.py maps names to, built without its
  constructor: its class methods such as `get_name()` known, its fields unknown);
  the class it returns is built with its own constructors, down to FusedMoE's (not
  interpreted: its fields are unknown), on the same quant config.
- `first_forward`: for a layer with a DeepEP dispatcher (the a2a backend deepep or
  mooncake), `run_moe_core` on the dispatch output of each mode the deepep mode runs
  (`auto`: normal for prefill, low-latency for decode). A layer with the standard
  dispatcher is routed by its block's TopK first: kb.explain.moe_forward.
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Callable
from typing import Any

from kb.explain import classes
from kb.explain.abstract_values import SELF, ClassRef, Func, Instance, Obj
from kb.explain.frames import Ctx, Frame, Raised
from kb.explain.predicates import Profile, Unknown, assumed

SCHEDULER = "sglang.srt.managers.scheduler"
MOE_UTILS = "sglang.srt.layers.moe.utils"
QUANTIZATION = "sglang.srt.layers.quantization"
MOE_LAYER = "sglang.srt.layers.moe.ep_moe.layer"
FUSED_MOE = ("sglang.srt.layers.moe.fused_moe_triton.layer", "FusedMoE")
DISPATCHERS = "sglang.srt.layers.moe.token_dispatcher"
# the dispatch output each DeepEP mode produces (`auto` resolves per batch: prefill, decode)
DISPATCH_OUTPUTS = {
    "normal": ("DeepEPNormalDispatchOutput",),
    "low_latency": ("DeepEPLLDispatchOutput",),
    "auto": ("DeepEPNormalDispatchOutput", "DeepEPLLDispatchOutput"),
}
DEEPEP_BACKENDS = ("deepep", "mooncake")
# what SGLang's MoE selection reads from the server args: what a fix of its checks changes
SELECTED_BY = frozenset({"moe_a2a_backend", "deepep_mode", "moe_runner_backend", "quantization"})
# class-name prefixes of layers written for one platform (ep_moe/layer.py NpuFuseEPMoE)
PLATFORM_PREFIXES = (("Npu", "npu"), ("Ascend", "npu"), ("Hpu", "hpu"), ("Xpu", "xpu"))
# config.json keys of a model with experts (the scheduler's own test: num_experts_per_tok)
EXPERT_KEYS = ("num_experts_per_tok", "n_routed_experts", "num_experts", "num_local_experts")

Simulator = Any  # kb.explain.simulate.Simulator (which this module must not import)


def is_moe(profile: Profile | None) -> bool:
    """The profile's config.json describes a model with experts (without a config.json
    the model is not known to be one, and nothing here runs)."""
    if profile is None or profile.config is None:
        return False
    config = profile.config.get("text_config") or profile.config
    return isinstance(config, dict) and any(config.get(k) for k in EXPERT_KEYS)


def moe_config(sim: Simulator) -> Callable[[], None] | None:
    """The step running the scheduler's method that initializes the MoE configuration,
    bound to a Scheduler whose model config and server args are the run's; None when the
    version has none. The MoE configuration's globals start at their module values, so
    those it leaves unset (it initializes them only for a config.json with
    `num_experts_per_tok` at its top: not Llama-4's) are what their getters default
    (`MOE_A2A_BACKEND = NONE`)."""
    mod = sim.module(SCHEDULER)
    if mod is None or "Scheduler" not in mod.classes:
        return None
    scheduler = classes.class_ref(mod, "Scheduler")
    for name in ("init_moe_gemm_config", "init_moe_config"):
        method = classes.class_attr(sim, scheduler, name, allow_missing=True)
        if isinstance(method, Func):
            obj = Instance(scheduler, "its constructor is not simulated")
            obj.fields.update(model_config=Obj("model_config"), server_args=SELF)
            bound = Func(method.module, method.node, obj, method.owner)

            def run(bound: Func = bound) -> None:
                _unset_globals(sim)  # (as the process starts)
                sim.call_function(bound, [], {}, Ctx())

            return run
    return None


def _unset_globals(sim: Simulator) -> None:
    """The MoE utilities' globals set at run time that the run has not set: their
    module-level constant (nothing sets them before the scheduler's method)."""
    mod = sim.module(MOE_UTILS)
    for name in sorted(mod.rebound) if mod is not None else ():
        value = mod.assigns.get(name)
        if (mod.path, name) not in sim.overlay and isinstance(value, ast.Constant):
            sim.overlay[mod.path, name] = value.value


def quant_config(sim: Simulator, name: Any) -> Any:
    """An object of the quantization method's config class, built without its constructor;
    None for no quantization; Unknown when the method or its class is not known."""
    if name is None:
        return None
    if not isinstance(name, str):
        return Unknown(("the model's quantization",))
    mod = sim.module(QUANTIZATION)
    if mod is None:
        return Unknown((f"the config class of quantization {name}",))
    # the table as the module leaves it once imported (its `.update()`s under platform tests
    # included: kb.explain.module_state), read as the interpreter reads any module name
    for table_name in ("QUANTIZATION_METHODS", "BASE_QUANTIZATION_METHODS"):
        if table_name not in mod.assigns:
            continue
        table = sim.lookup(table_name, Frame(mod, "<module>", {}))
        cls = table.get(name) if isinstance(table, dict) else None
        if isinstance(cls, ClassRef):
            return Instance(cls, "its constructor is not simulated")
    return Unknown((f"the config class of quantization {name}",))


class MoeLayer:
    """The MoE stage's state between its two parts (the layer built, then its forward)."""

    def __init__(self) -> None:
        self.layer: Instance | None = None
        self.impl: Any = None
        self.ctx = Ctx()


def build_layer(sim: Simulator, qc: Any) -> MoeLayer:
    """`get_moe_impl_class(quant_config)` on the quantization config the loader built (or,
    without it, an object of its class: quant_config) and the class it returns built (see
    the module's docstring); `impl` is what it returned, `layer` the object when a class
    was built."""
    out = MoeLayer()
    mod = sim.module(MOE_LAYER)
    select = mod.functions.get("get_moe_impl_class") if mod is not None else None
    if mod is None or select is None:
        return out
    impl = sim.call_function(Func(mod, select), [qc], {}, Ctx())
    out.impl = impl
    if not isinstance(impl, ClassRef):
        return out
    fused = sim.module(FUSED_MOE[0])
    if fused is not None and FUSED_MOE[1] in fused.classes:
        sim.skip_init.add(classes.class_ref(fused, FUSED_MOE[1]))
    ctx = Ctx().under(f"get_moe_impl_class(quant_config) is {impl.name}", (), SELECTED_BY)
    out.ctx = ctx
    _platform_named(sim, impl, ctx)
    layer = Instance(impl, "FusedMoE's constructor is not simulated")
    layer.fields["quant_config"] = qc
    init = classes.instance_attr(sim, layer, "__init__", allow_missing=True)
    if isinstance(init, Func):
        sim.call_function(init, [], {"quant_config": qc}, ctx)
    out.layer = layer
    return out


def _platform_named(sim: Simulator, impl: ClassRef, ctx: Ctx) -> None:
    """A layer class named for another platform than the profile's (NpuFuseEPMoE, selected
    by `--moe-a2a-backend ascend_fuseep`, on a CUDA GPU): SGLang checks no platform before
    calling its kernels, which then fail with no raise of its own to cite. Said as a failure
    resting on that (an assumption, so no fix verifies through it), at the class."""
    platform = sim.profile.platform
    named = next((p for prefix, p in PLATFORM_PREFIXES if impl.name.startswith(prefix)), None)
    if platform is None or named is None or named == platform:
        return
    key = f"platform-layer:{impl.name}"
    sim.result.assumptions[key] = (
        f"the kernels of {impl.name}, a layer named for the {named} platform, do not run on "
        f"{platform} (SGLang checks no platform before calling them)"
    )
    path, sim.current_path = sim.current_path, impl.path
    message = f"{impl.name} is a layer for the {named} platform"
    resting = Ctx(ctx.conds, ctx.needs, ctx.reads | {assumed(key)}, ctx.likely)
    sim.check("raise", impl.node, message, resting, fired=True)
    sim.current_path = path


def first_forward(sim: Simulator, fields: dict[str, Any], built: MoeLayer) -> bool:
    """`run_moe_core` of the layer on each DeepEP dispatch output its mode produces; False
    when there is nothing to run (no DeepEP layer, or the mode is not known)."""
    layer, backend, mode = built.layer, fields.get("moe_a2a_backend"), fields.get("deepep_mode")
    if layer is None or backend not in DEEPEP_BACKENDS or mode not in DISPATCH_OUTPUTS:
        return False
    run = classes.instance_attr(sim, layer, "run_moe_core", allow_missing=True)
    dispatchers = sim.module(DISPATCHERS)
    if not isinstance(run, Func) or dispatchers is None:
        return False
    ran = False
    for name in DISPATCH_OUTPUTS[mode]:
        kind = sim.lookup(name, Frame(dispatchers, "<module>", {}))
        if not isinstance(kind, ClassRef):
            continue
        output = Instance(kind, "the dispatch's tensors")
        ctx = built.ctx.under(f"a {name} reaches it", (), frozenset())
        # each output its own forward (prefill's, decode's: whichever runs first fails)
        with contextlib.suppress(Raised):
            sim.call_function(run, [output], {}, ctx)
        ran = True
    return ran
