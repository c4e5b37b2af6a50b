"""The first forward of an MoE layer whose token dispatcher is the standard one (no a2a
backend), a step of the first-forward stage (kb.explain.deploy).

The model's MoE block routes the tokens with the TopK object its constructor built
(`self.topk = TopK(top_k=config.num_experts_per_tok, renormalize=config.norm_topk_prob,
...)`), then calls its experts (`self.experts(hidden_states, topk_output)`). TopK's forward
chooses the class of its output from its config and the MoE runner backend (BYPASSED under
flashinfer_trtllm: the object carries the TopK's config, which the kernels read), and the
layer's forward dispatches it and has its quantization method `apply` it, whose asserts read
that config (`topk_config.top_k == 1` for ModelOpt FP8 with flashinfer_trtllm) and the
output's class.

The step builds that TopK: the statements of the block's constructor its call reads (a
slice, as kb.explain.model_class slices a builder's test), run with the arguments the model
class's machinery gives the block (config.json's), with TopK's own constructor run. It runs
TopK's forward on unknown tensors, then the MoE layer's `forward_impl` (the path each of
FusedMoE.forward's branches reaches: the piecewise-CUDA-graph ones rebuild an output of the
same class first) on the layer object kb.explain.moe_quant built, keeping only the checks
that certainly fire (kb.explain.block_forward.only_certain): what the batch decides is
dropped. A model whose blocks build no TopK, or whose TopK's arguments are not all known,
leaves what it decides unknown.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kb.explain import block_forward, classes, model_class, moe, tensors
from kb.explain.abstract_values import ClassRef, Func, Instance
from kb.explain.frames import Ctx
from kb.explain.model_registry import architecture_class
from kb.explain.predicates import Profile, unknown

if TYPE_CHECKING:
    from kb.explain.simulate import Simulator

TOPK_PATH = "python/sglang/srt/layers/moe/topk.py"  # (its TopKConfig dataclass too)
# the a2a backends whose dispatcher is the StandardDispatcher (flashinfer's is another
# dispatcher, with its own all-to-all: not followed)
STANDARD = ("none",)
# the TopK method MultiPlatformOp's dispatch_forward picks per platform (ROCm's forward_hip
# is forward_cuda); under torch.compile a batch of one token takes forward_native instead
PLATFORM_FORWARD = {"cuda": "forward_cuda", "rocm": "forward_cuda"}


def step(
    sim: Simulator,
    fields: dict[str, Any],
    built: moe.MoeLayer,
    path: str | None,
    profile: Profile | None,
    quant_config: Any,
) -> Callable[[], None] | None:
    """The step to run; None when the layer's constructor was not followed, its
    dispatcher is not the standard one, or no block of the model builds a TopK."""
    layer = built.layer
    # (a layer whose constructor the MoE quantization step did not follow has no method)
    if layer is None or "quant_method" not in layer.fields:
        return None
    if fields.get("moe_a2a_backend") not in STANDARD:
        return None
    if fields.get("enable_torch_compile") is not False:
        return None  # (the batch's size decides TopK's forward, hence its output's class)
    found = topk_call(sim, path, profile)
    if found is None or profile is None:
        return None

    def run() -> None:
        topk = build_topk(sim, found, profile, quant_config)
        if topk is not None:
            forward(sim, layer, topk, built.ctx)

    return run


class TopKCall:
    """The statement of a block's constructor that builds its TopK (`self.topk = TopK(...)`)."""

    def __init__(self, root: ClassRef, block: model_class.Built, init: Func, index: int) -> None:
        self.root = root
        self.block = block
        self.init = init
        self.index = index  # of the statement in the constructor's body

    @property
    def attr(self) -> str:
        stmt = self.init.node.body[self.index]
        assert isinstance(stmt, ast.Assign)
        name = model_class.self_attr(stmt.targets[0])
        assert name is not None
        return name


def topk_call(sim: Simulator, path: str | None, profile: Profile | None) -> TopKCall | None:
    """The first class the architecture's class builds whose constructor assigns a TopK to
    one of its fields at its top level."""
    root = architecture_class(sim, path, profile.arch if profile is not None else None)
    if root is None:
        return None
    for b in model_class.classes_built(sim, root):
        init = model_class.constructor(sim, b.cls)
        if init is None:
            continue
        for i, stmt in enumerate(init.node.body):
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and model_class.self_attr(stmt.targets[0]) is not None
                and isinstance(stmt.value, ast.Call)
                and _is_topk(sim, init, stmt.value.func)
            ):
                return TopKCall(root, b, init, i)
    return None


def _is_topk(sim: Simulator, init: Func, func: ast.expr) -> bool:
    if not isinstance(func, ast.Name):
        return False
    target = init.module.imports.get(func.id)
    if target is None or target[1] is None:
        return False
    found = sim.exported(target[0], target[1])
    return isinstance(found, ClassRef) and (found.path, found.name) == (TOPK_PATH, "TopK")


def build_topk(
    sim: Simulator, call: TopKCall, profile: Profile, quant_config: Any
) -> Instance | None:
    """The block's TopK, built by the statements of its constructor the call reads, with
    the arguments the model class's machinery gives the block, in the first layer
    config.json decides it is built in; None when no layer tried is decided."""
    layer = model_class.first_layer_built(sim, call.root, call.block, profile, quant_config)
    if layer is None:
        return None
    init, stmt = call.init, call.init.node.body[call.index]
    assert isinstance(stmt, ast.Assign)
    node = copy.copy(init.node)
    node.body = [*model_class.slice_for(init.node.body[: call.index], stmt.value), stmt]
    kwargs = model_class.arguments(sim, init.node, call.block, quant_config, layer)
    block = Instance(call.block.cls)
    start = len(sim.result.checks)
    under = sim.construct_under
    sim.construct_under = (TOPK_PATH,)
    try:
        with block_forward.only_certain(sim):
            sim.call_function(Func(init.module, node, block, init.owner), [], kwargs, Ctx())
    finally:
        sim.construct_under = under
        del sim.result.checks[start:]  # (the block's own checks: its constructor's step)
    topk = block.fields.get(call.attr)
    return topk if isinstance(topk, Instance) else None


def forward(sim: Simulator, layer: Instance, topk: Instance, ctx: Ctx) -> None:
    """TopK's forward on unknown tensors, then the layer's on what it returned."""
    hidden = tensors.Tensor(unknown("the hidden states' dtype"), parameter=False)
    logits = tensors.Tensor(unknown("the router logits' dtype"), parameter=False)
    # (MultiPlatformOp's `forward` calls the method its constructor chose for the platform;
    # its module is not stored: the platform's method is called here)
    method = PLATFORM_FORWARD.get(sim.profile.platform or "")
    if method is None:
        return
    route = classes.instance_attr(sim, topk, method, allow_missing=True)
    run = classes.instance_attr(sim, layer, "forward_impl", allow_missing=True)
    if not isinstance(run, Func):
        run = classes.instance_attr(sim, layer, "forward", allow_missing=True)
    if not isinstance(route, Func) or not isinstance(run, Func):
        return
    with block_forward.only_certain(sim):
        output = sim.call_function(route, [hidden, logits], {}, ctx)
        sim.call_function(run, [hidden, output], {}, ctx)
