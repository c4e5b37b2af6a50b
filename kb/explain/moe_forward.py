"""The first forward of an MoE layer whose token dispatcher is the standard one (no a2a
backend), a step of the first-forward stage (kb.explain.deploy).

The model's MoE block routes the tokens with the TopK object its constructor built
(`self.topk = TopK(top_k=config.num_experts_per_tok, renormalize=config.norm_topk_prob,
...)`), then calls its experts (`self.experts(hidden_states, topk_output)`). TopK's forward
chooses the class of its output from its config and the MoE runner backend (BYPASSED under
flashinfer_trtllm: the object carries the TopK's config, which the kernels read), and the
layer's forward dispatches it and has its quantization method `apply` it (a platform op's
`forward`, the platform's method: kb.explain.classes), whose asserts, and the MoE runner's it
calls, read that config (`topk_config.top_k == 1` for ModelOpt FP8 with flashinfer_trtllm,
`renormalize` for FlashInfer TRT-LLM's BF16 function) and the output's class.

The step builds that TopK (kb.explain.moe_block: the statements of the block's constructor
its call reads, on config.json), with TopK's own constructor. It runs
TopK's forward on unknown tensors, then the MoE layer's `forward_impl` (the path each of
FusedMoE.forward's branches reaches: the piecewise-CUDA-graph ones rebuild an output of the
same class first) on the layer object kb.explain.moe_quant built, keeping only the checks
that certainly fire (kb.explain.block_forward.only_certain): what the batch decides is
dropped. A model whose blocks build no TopK, or whose TopK's arguments are not all known,
leaves what it decides unknown.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kb.explain import block_forward, classes, moe, moe_block, tensors
from kb.explain.abstract_values import Func, Instance
from kb.explain.frames import Ctx
from kb.explain.predicates import Profile, unknown

if TYPE_CHECKING:
    from kb.explain.simulate import Simulator

RUNNERS = "python/sglang/srt/layers/moe/moe_runner/"  # (MoeRunner, its cores and fused funcs)
# the a2a backends whose dispatcher is the StandardDispatcher (flashinfer's is another
# dispatcher, with its own all-to-all: not followed)
STANDARD = ("none",)


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
    found = moe_block.find(sim, path, profile, moe_block.builds_topk, True) if profile else None
    if profile is None or found is None:
        return None

    def run() -> None:
        topk = moe_block.topk(sim, found, profile, quant_config)
        if topk is not None:
            forward(sim, layer, topk, built.ctx)

    return run


def forward(sim: Simulator, layer: Instance, topk: Instance, ctx: Ctx) -> None:
    """TopK's forward on unknown tensors, then the layer's on what it returned."""
    hidden = tensors.Tensor(unknown("the hidden states' dtype"), parameter=False)
    logits = tensors.Tensor(unknown("the router logits' dtype"), parameter=False)
    # (TopK is a platform op: its `forward` is the platform's method, kb.explain.classes)
    route = classes.instance_attr(sim, topk, "forward", allow_missing=True)
    run = classes.instance_attr(sim, layer, "forward_impl", allow_missing=True)
    if not isinstance(run, Func):
        run = classes.instance_attr(sim, layer, "forward", allow_missing=True)
    if not isinstance(route, Func) or not isinstance(run, Func):
        return
    method = layer.fields.get("quant_method")
    # what the layer, its method's `apply`, TopK and the MoE runner (MoeRunner, its cores
    # and fused functions: an unquantized layer's triton-kernels core asserts a gated MoE,
    # FlashInfer TRT-LLM's fused function the TopK's renormalize) check; what they call
    # elsewhere (the kernels' own packages) is not said
    own = {run.module.path, moe_block.TOPK[0]}
    own |= {method.cls.path} if isinstance(method, Instance) else set()
    start = len(sim.result.checks)
    with block_forward.only_certain(sim):
        output = sim.call_function(route, [hidden, logits], {}, ctx)
        sim.call_function(run, [hidden, output], {}, ctx)
    sim.result.checks[start:] = [
        c for c in sim.result.checks[start:] if c.path in own or c.path.startswith(RUNNERS)
    ]
