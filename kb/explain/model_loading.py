"""The model loader's quantization checks, a step of the load stage (kb.explain.deploy).

Before it builds the model, SGLang's loader builds the checkpoint's quantization config
(`_get_quantization_config` in model_loader/loader.py: `get_quant_config` picks the class
that `QUANTIZATION_METHODS` maps the model's quantization to and builds it from config.json's
`quantization_config`, `Fp8Config(use_mxfp8=True)` for online MXFP8...) and raises when the
GPU's compute capability is below the class's `get_min_capability()` or the model's dtype is
not one of its `get_supported_act_dtypes()`. The version's own function is interpreted, on
the ModelConfig derived from the server args and the profile (kb.explain.derived): what it
cannot decide (a checkpoint file it would read) stays unknown.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from kb.explain import classes
from kb.explain.abstract_values import Func, Instance, Obj
from kb.explain.frames import Ctx, Raised
from kb.explain.predicates import unknown

Simulator = Any  # kb.explain.simulate.Simulator (which this module must not import)

LOADER_MODULE = "sglang.srt.model_loader.loader"
QUANTIZATION_CONFIG = "_get_quantization_config"


class Loaded:
    """What the loader step built: the quantization config (None for an unquantized model,
    Unknown when not decided); `built` once the step ran."""

    def __init__(self) -> None:
        self.built = False
        self.quant_config: Any = unknown("the quantization config")


def quantization_config_step(sim: Simulator, loaded: Loaded) -> Callable[[], None] | None:
    """The loader's building of the quantization config as a step of the load stage
    (keeping what it built in `loaded`); None when the version has no such function."""
    mod = sim.module(LOADER_MODULE)
    node = mod.functions.get(QUANTIZATION_CONFIG) if mod is not None else None
    if mod is None or node is None:
        return None
    args: list[Any] = []
    for param in [*node.args.posonlyargs, *node.args.args]:
        if param.arg == "model_config":
            args.append(Obj("model_config"))
        elif param.arg == "packed_modules_mapping":
            args.append({})  # the model class's; it names layers, decides no check here
        elif param.arg == "load_config":
            args.append(unknown("the load config"))
        else:
            args.append(None)  # remap_prefix and the like: the model class's, mostly none

    def step() -> None:
        # the quantization config's constructor decides what its checks read
        # (Fp8Config(use_mxfp8=True) needs SM100), so it is run here
        construct, sim.construct = sim.construct, True
        try:
            loaded.quant_config = sim.call_function(Func(mod, node), args, {}, Ctx())
            loaded.built = True
        finally:
            sim.construct = construct

    return step


def after_loading(sim: Simulator, layer: Instance, ctx: Ctx) -> None:
    """The loader's last step once the weights are read: the layer's quantization method's
    `process_weights_after_loading(layer)` (the GPU checks of the kernels it prepares the
    weights for; the weights' values stay unknown). A raise there ends only this layer's."""
    method = classes.instance_attr(sim, layer, "quant_method", allow_missing=True)
    if not isinstance(method, Instance):
        return
    process = classes.instance_attr(sim, method, "process_weights_after_loading", True)
    if isinstance(process, Func):
        with contextlib.suppress(Raised):
            sim.call_function(process, [layer], {}, ctx)
