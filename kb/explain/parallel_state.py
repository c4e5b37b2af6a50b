"""SGLang's parallel state read past ServerArgs, answered from the server args.

The process groups (`get_moe_tensor_parallel_world_size()`, ... in distributed/
parallel_state.py; `get_parallel().moe_tp_size` reaches the same getters through
runtime_context.py) only exist once `initialize_model_parallel` ran, which the simulation
does not do (its globals are None until then: interpreted, the getters' asserts would fail).
Their sizes are what the ModelRunner hands that function: `tensor_model_parallel_size`
tp_size and `expert_model_parallel_size` ep_size (the ModelRunner's `moe_ep_size`), from
which it sets `moe_ep_size = expert_model_parallel_size` and `moe_tp_size =
tensor_model_parallel_size // moe_ep_size` (`// moe_dp_size` too, in versions whose
ModelRunner passes `server_args.moe_dp_size`). Ranks stay unknown.

The pipeline group (`get_pp_group()`) has pp_size ranks: with one, its rank is both the
first and the last stage; with more, which stage a rank is stays unknown, but no rank is
both (`assert pp_group.is_first_rank and pp_group.is_last_rank`, a model class without
pipeline parallelism, fails on every rank: `exclusive_stages`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from kb.explain.abstract_values import ExternalName, Func, Obj, Symbol
from kb.explain.predicates import Unknown, unknown

HOME = "python/sglang/srt/distributed/"
# the attention's tensor-parallel size (DP attention divides it), a global its
# `initialize_dp_attention` sets at start-up
DP_ATTENTION_MODULE = "sglang.srt.layers.dp_attention"
DP_ATTENTION = "python/sglang/srt/layers/dp_attention.py"
PACKAGE = "sglang.srt.distributed"
# `_ps().get_moe_tensor_parallel_world_size` (runtime_context.py's lazy import of the module)
MODULE_NAME = "parallel_state."
Answer = tuple[Any, frozenset[str]]  # the value, and the server args it was computed from
# `get_parallel()` (runtime_context.py): an object whose properties read the getters
CONTEXT, CONTEXT_MODULE = "get_parallel", "sglang.srt.runtime_context"
PIPELINE = "get_pp_group"
FIRST_STAGE = "whether this rank is the first pipeline stage"
LAST_STAGE = "whether this rank is the last pipeline stage"
PROPERTIES = {
    "tp_size": "get_tensor_model_parallel_world_size",
    "attn_tp_size": "get_attn_tensor_model_parallel_world_size",
    "moe_ep_size": "get_moe_expert_parallel_world_size",
    "moe_tp_size": "get_moe_tensor_parallel_world_size",
}


def _name(callee: Any) -> str | None:
    return callee.node.name if isinstance(callee, Func) else getattr(callee, "name", None)


def _module(callee: Any) -> str | None:
    if isinstance(callee, Func):
        return callee.module.path.removeprefix("python/").removesuffix(".py").replace("/", ".")
    return getattr(callee, "module", None)


def context_attr(answers: dict[str, Answer], attr: str) -> Answer | None:
    """`get_parallel().<attr>`: the getter's answer; None for what is not answered."""
    getter = PROPERTIES.get(attr)
    return answers.get(getter) if getter is not None else None


def getter_name(callee: Any) -> str | None:
    """The name of a parallel-state function being called (`get_parallel` for the runtime
    context), None for anything else."""
    if _name(callee) == CONTEXT and _module(callee) == CONTEXT_MODULE:
        return CONTEXT
    if isinstance(callee, Func) and callee.bound is None and callee.module.path.startswith(HOME):
        return callee.node.name
    if isinstance(callee, Func) and callee.bound is None and callee.module.path == DP_ATTENTION:
        return callee.node.name  # (`get_attention_tp_size()`: a global set at start-up)
    if isinstance(callee, ExternalName) and callee.module.startswith(PACKAGE):
        return callee.name  # (a module the knowledge base does not hold)
    if isinstance(callee, ExternalName) and callee.module == DP_ATTENTION_MODULE:
        return callee.name
    if isinstance(callee, Symbol) and callee.dotted.startswith(MODULE_NAME):
        return callee.dotted.removeprefix(MODULE_NAME)
    return None


def sizes(fields: dict[str, Any]) -> dict[str, Answer]:
    """The group sizes the getters return, by getter name, from the final server args
    (unknown, needing them, when tp_size or ep_size is not a known positive int)."""
    tp, ep, dp = fields.get("tp_size"), fields.get("ep_size", 1), fields.get("moe_dp_size", 1)
    reads = frozenset(
        {"tp_size", "ep_size"} | ({"moe_dp_size"} if "moe_dp_size" in fields else set())
    )
    moe_tp: Any = unknown("the MoE tensor-parallel size (the tp and ep sizes)")
    if all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (tp, ep, dp)):
        moe_tp = tp // ep // dp  # type: ignore[operator]
    known = _size(tp, "the tp size"), _size(ep, "the ep size")
    attn_tp, attn_reads = attention_tp_size(fields)
    return {
        "get_attention_tp_size": (attn_tp, attn_reads),
        "get_attn_tensor_model_parallel_world_size": (attn_tp, attn_reads),
        CONTEXT: (Obj("parallel"), frozenset()),
        PIPELINE: (Obj("pp_group"), frozenset()),
        "pp_size": (_size(fields.get("pp_size", 1), "the pp size"), frozenset({"pp_size"})),
        "get_tensor_model_parallel_world_size": (known[0], frozenset({"tp_size"})),
        "get_moe_expert_parallel_world_size": (known[1], frozenset({"ep_size"})),
        "get_moe_tensor_parallel_world_size": (moe_tp, reads),
    }


def attention_tp_size(fields: dict[str, Any]) -> Answer:
    """The attention's tensor-parallel size: tp_size over the attention's context-parallel
    size and, with DP attention, over dp_size (the ModelRunner's `dp_size` is the server
    args' only then: `initialize_model_parallel(..., attention_data_parallel_size=
    self.dp_size, attention_context_model_parallel_size=self.attn_cp_size)`)."""
    tp, dp = fields.get("tp_size"), fields.get("dp_size", 1)
    cp, enabled = fields.get("attn_cp_size", 1), fields.get("enable_dp_attention", False)
    reads = frozenset({"tp_size", "dp_size", "enable_dp_attention"})
    reads |= {"attn_cp_size"} if "attn_cp_size" in fields else set()
    sizes = (tp, dp, cp)
    if not isinstance(enabled, bool) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in sizes
    ):
        return unknown("the attention's tensor-parallel size (tp, dp, DP attention)"), reads
    return tp // cp // (dp if enabled else 1), reads  # type: ignore[operator]


@contextlib.contextmanager
def answered(sim: Any) -> Iterator[None]:
    """The getters answered from the simulated server args for the duration (each step
    past ServerArgs that builds or runs SGLang's layers), as they were after."""
    saved, sim.parallel = sim.parallel, sizes(sim.fields)
    try:
        yield
    finally:
        sim.parallel = saved


def _size(value: Any, words: str) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return value if isinstance(value, Unknown) else unknown(words)


def pipeline_attr(answers: dict[str, Answer], attr: str) -> Answer:
    """`get_pp_group().<attr>`: its size, and whether a rank is the first or last stage."""
    size, reads = answers.get("pp_size", (unknown("the pp size"), frozenset()))
    if attr == "world_size":
        return size, reads
    if attr in ("is_first_rank", "is_last_rank"):
        if size == 1:
            return True, reads
        stage = FIRST_STAGE if attr == "is_first_rank" else LAST_STAGE
        return (unknown(stage) if isinstance(size, int) else size), reads
    return unknown(f"the pipeline group's {attr}"), frozenset()


def exclusive_stages(values: list[Any]) -> bool:
    """Whether `and`-ed values include a rank being both the first and the last stage of
    a pipeline of more than one (an Unknown for each, pipeline_attr's): false on every rank."""
    needs = {n for v in values if isinstance(v, Unknown) for n in v.needs}
    return FIRST_STAGE in needs and LAST_STAGE in needs
