"""The attention backend's first forward, for a model whose attention is not a decoder's
(kb.explain.deploy): an encoder-only model (BERT, an embedding model: `RadixAttention(...,
attn_type=AttentionType.ENCODER_ONLY)`) reaches the backend's `forward_extend` at its first
prefill, where backends that only run causal attention raise (`TorchFlexAttnBackend does
not support non-causal attention`).

The layer handed to the backend has the attention type the model file builds its layers
with (when every `RadixAttention(...)` of the file names the same one) and is no cross
attention unless the file says so; its sizes and the tensors are unknown. A decoder's
attention is not followed: its forward depends on the batch, which is not simulated.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kb.explain import classes
from kb.explain.abstract_values import EnumMember, Func, Instance
from kb.explain.frames import Ctx, Frame
from kb.explain.memo import by_identity
from kb.explain.predicates import unknown
from kb.pyast import call_name

if TYPE_CHECKING:
    from kb.explain.simulate import Simulator
    from kb.explain.source_modules import Module

RADIX_MODULE = "sglang.srt.layers.radix_attention"
PART = "the first forward of the attention backend (prefill)"


def layer_kind(sim: Simulator, model_file: str | None) -> EnumMember | None:
    """The `AttentionType` member every `RadixAttention(...)` of the model file passes as
    `attn_type`; None when it passes none (a decoder's, the default), several, or one not
    decided here."""
    mod = sim.modules(model_file) if model_file else None
    node = _radix_attn_type(mod) if mod is not None else None
    if mod is None or node is None:
        return None
    kind = sim.eval(node, Frame(mod, "<module>", {}), Ctx())
    return kind if isinstance(kind, EnumMember) and kind.name != "DECODER" else None


@by_identity
def _radix_attn_type(mod: Module) -> ast.expr | None:
    """The one `attn_type` every `RadixAttention(...)` of the module passes (None: several,
    or one passing none)."""
    kinds: set[str] = set()
    node: ast.expr | None = None
    for stmt in mod.body:
        for call in ast.walk(stmt):
            if not (isinstance(call, ast.Call) and call_name(call).endswith("RadixAttention")):
                continue
            given = next((k.value for k in call.keywords if k.arg == "attn_type"), None)
            if given is None:
                return None  # a layer of the default type beside others: not one kind
            kinds.add(ast.unparse(given))
            node = given
    return node if len(kinds) == 1 else None


def step(sim: Simulator, backend: Any, kind: EnumMember | None) -> Callable[[], None] | None:
    """The step running `backend.forward_extend(q, k, v, layer, forward_batch)`; None when
    there is nothing to run (a decoder's layers, no backend built, no forward_extend)."""
    if kind is None or not isinstance(backend, Instance):
        return None
    forward = classes.instance_attr(sim, backend, "forward_extend", allow_missing=True)
    radix = sim.module(RADIX_MODULE)
    if not isinstance(forward, Func) or radix is None or "RadixAttention" not in radix.classes:
        return None
    layer = Instance(classes.class_ref(radix, "RadixAttention"), "the model's attention layer")
    layer.fields.update(attn_type=kind, is_cross_attention=False)
    tensors = [unknown(f"the prefill's {t}") for t in ("q", "k", "v")]

    def run() -> None:
        sim.call_function(forward, [*tensors, layer, unknown("the prefill's batch")], {}, Ctx())

    return run
