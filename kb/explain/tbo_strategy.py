"""Two-batch overlap's operations strategy, a step of the first-forward stage
(kb.explain.deploy).

With `--enable-two-batch-overlap`, a model whose forward supports it (it imports
`model_forward_maybe_tbo`) runs its layers through `OperationsStrategy.init_new_tbo(layers,
forward_mode)`, which knows the decoder layers of a few model families by class name and
raises for any other (MiniMax-M2's: operations_strategy.py). The decode CUDA graphs are
captured with split batches, so the first capture reaches it; without CUDA graphs, whether
a batch is split is the batch's, not decided here. The decoder layer class is the one the
model builds its `layers` of (kb.explain.model_class); with pipeline parallelism a later
stage's first layer is a placeholder, not followed here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kb.explain import block_forward, classes, model_class
from kb.explain.abstract_values import Func, Instance
from kb.explain.frames import Ctx
from kb.explain.model_registry import architecture_class
from kb.explain.predicates import Profile, unknown

if TYPE_CHECKING:
    from kb.explain.simulate import Simulator

PART = "two-batch overlap's operations strategy (the first CUDA-graph capture)"
STRATEGY_MODULES = (  # where OperationsStrategy lives, newest first
    "sglang.srt.batch_overlap.operations_strategy",
    "sglang.srt.operations_strategy",
)
TBO_FORWARD = "model_forward_maybe_tbo"
LAYERS = "layers"  # the model's attribute holding its decoder layers
TBO_FIELDS = ("enable_two_batch_overlap", "disable_cuda_graph")


def step(
    sim: Simulator, path: str | None, profile: Profile | None, fields: dict[str, Any]
) -> Callable[[], None] | None:
    """The step to run; None when two-batch overlap is off or not decided to split the
    first capture, or the model does not run its layers through it."""
    if fields.get("enable_two_batch_overlap") is not True:
        return None
    if fields.get("disable_cuda_graph") is not False or fields.get("pp_size", 1) != 1:
        return None
    mod = sim.modules(path) if path else None
    if mod is None or profile is None or TBO_FORWARD not in mod.imports:
        return None
    root = architecture_class(sim, path, profile.arch)
    built = model_class.classes_built(sim, root) if root is not None else []
    decoders = {b.cls.name: b for b in built if b.attr == LAYERS}
    # (one class: with several, which the model keeps is not decided here)
    layer = next(iter(decoders.values())) if len(decoders) == 1 else None
    strategy = next((m for name in STRATEGY_MODULES if (m := sim.module(name))), None)
    if layer is None or strategy is None or "OperationsStrategy" not in strategy.classes:
        return None
    cls = classes.class_ref(strategy, "OperationsStrategy")
    init_new_tbo = classes.class_attr(sim, cls, "init_new_tbo")
    if not isinstance(init_new_tbo, Func):
        return None

    def run() -> None:
        layers = [Instance(layer.cls, "a decoder layer: its fields are not followed here")]
        mode = unknown("the captured batch's forward mode")
        # (what a raise there rests on: the flag, and the CUDA graphs that split the batch)
        ctx = Ctx().under(
            "two-batch overlap splits the captured batches", (), frozenset(TBO_FIELDS)
        )
        # (the strategies of the layers it knows read the layers' fields: not said)
        with block_forward.only_certain(sim):
            sim.call_function(init_new_tbo, [layers, mode], {}, ctx)

    return run
