"""The model's MoE block, read for what it builds its MoE layer's parts with: the TopK
its constructor builds (`self.topk = TopK(top_k=config.num_experts_per_tok, ...)`) and the
arguments it builds its experts with (`self.experts = FusedMoE(num_experts=...,
apply_router_weight_on_input=True, ...)`, or `get_moe_impl_class(quant_config)(...)`).

Such a statement is found at the top level of the constructor of a class the architecture's
class builds (kb.explain.model_class's closure), and run with the statements before it that
it reads (model_class.slice_for), on the arguments the model class's machinery gives the
block (config.json's), in the first layer config.json decides the block is built in. The
block's own checks are not reported here (the model class's step runs its constructor).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kb.explain import model_class
from kb.explain.abstract_values import ClassRef, Func, Instance
from kb.explain.model_registry import architecture_class
from kb.explain.predicates import Profile

if TYPE_CHECKING:
    from kb.explain.simulate import Simulator

TOPK = ("python/sglang/srt/layers/moe/topk.py", "TopK")  # (its TopKConfig dataclass too)
FUSED_MOE_PATHS = (
    "python/sglang/srt/layers/moe/fused_moe_triton/layer.py",
    "python/sglang/srt/layers/moe/ep_moe/layer.py",
)
SELECT = "get_moe_impl_class"  # `get_moe_impl_class(quant_config)(...)`


@dataclass(frozen=True)
class Statement:
    """A top-level `self.<attr> = <call>` of a block's constructor."""

    root: ClassRef  # the architecture's class
    block: model_class.Built
    init: Func  # the block's constructor
    index: int  # of the statement in its body (the `if` holding it, for a nested one)
    nested: ast.Assign | None = None  # the statement, inside the `if` at `index`

    @property
    def assign(self) -> ast.Assign:
        stmt = self.nested or self.init.node.body[self.index]
        assert isinstance(stmt, ast.Assign)
        return stmt

    @property
    def top(self) -> ast.stmt:
        """The constructor's top-level statement that runs it."""
        return self.init.node.body[self.index]

    @property
    def attr(self) -> str:
        return model_class.self_attr(self.assign.targets[0]) or ""

    @property
    def call(self) -> ast.Call:
        assert isinstance(self.assign.value, ast.Call)
        return self.assign.value


def find(
    sim: Simulator,
    path: str | None,
    profile: Profile | None,
    wanted: Callable[[Simulator, Func, ast.Call], bool],
    nested: bool = False,
) -> Statement | None:
    """The first top-level `self.<attr> = <call>` that `wanted` accepts, in the
    constructors of the classes the architecture's class builds (breadth first); with
    `nested`, one inside a top-level `if` too (DeepSeek-V2's MoE block builds its TopK in
    the `else` of `if self.is_hash:`), run as that `if`."""
    root = architecture_class(sim, path, profile.arch if profile is not None else None)
    if root is None:
        return None
    for b in model_class.classes_built(sim, root):
        init = model_class.constructor(sim, b.cls)
        if init is None:
            continue
        for i, stmt in enumerate(init.node.body):
            if _builds_attr(sim, init, stmt, wanted):
                return Statement(root, b, init, i)
            if nested and isinstance(stmt, ast.If):
                inner = [n for n in ast.walk(stmt) if _builds_attr(sim, init, n, wanted)]
                if len(inner) == 1 and isinstance(inner[0], ast.Assign):
                    return Statement(root, b, init, i, inner[0])
    return None


def _builds_attr(
    sim: Simulator, init: Func, stmt: ast.AST, wanted: Callable[[Simulator, Func, ast.Call], bool]
) -> bool:
    return (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and model_class.self_attr(stmt.targets[0]) is not None
        and isinstance(stmt.value, ast.Call)
        and wanted(sim, init, stmt.value)
    )


def builds_topk(sim: Simulator, init: Func, call: ast.Call) -> bool:
    return _imported_class(sim, init, call.func) in (TOPK,)


def builds_experts(sim: Simulator, init: Func, call: ast.Call) -> bool:
    """`FusedMoE(...)` (or a class of the MoE layers' modules), `get_moe_impl_class(qc)(...)`."""
    func = call.func
    if isinstance(func, ast.Call) and isinstance(func.func, ast.Name):
        return func.func.id == SELECT
    found = _imported_class(sim, init, func)
    return found is not None and found[0] in FUSED_MOE_PATHS


def _imported_class(sim: Simulator, init: Func, func: ast.expr) -> tuple[str, str] | None:
    if not isinstance(func, ast.Name):
        return None
    target = init.module.imports.get(func.id)
    if target is None or target[1] is None:
        return None
    found = sim.exported(target[0], target[1])
    return (found.path, found.name) if isinstance(found, ClassRef) else None


def run(
    sim: Simulator,
    found: Statement,
    profile: Profile,
    quant_config: Any,
    last: ast.stmt,
    built_under: tuple[str, ...] = (),
) -> tuple[Instance, Any] | None:
    """The block's constructor's statements `found` reads, then `last` (the statement
    itself, or a `return` of what to read of it), with the classes of `built_under` built
    with their constructors (kb.explain.model_class.run_statement: none of its checks
    is kept)."""
    under, sim.construct_under = sim.construct_under, built_under
    try:
        return model_class.run_statement(
            sim, found.root, found.block, profile, quant_config, found.index, last
        )
    finally:
        sim.construct_under = under


def topk(sim: Simulator, found: Statement, profile: Profile, quant_config: Any) -> Any:
    """The TopK object the model's MoE block builds at `found` (find's, with builds_topk);
    None when it is not built."""
    ran = run(sim, found, profile, quant_config, found.top, (TOPK[0],))
    obj = ran[0].fields.get(found.attr) if ran is not None else None
    return obj if isinstance(obj, Instance) else None


def experts_arguments(
    sim: Simulator, path: str | None, profile: Profile, quant_config: Any
) -> dict[str, Any] | None:
    """The keyword arguments the model's MoE block builds its experts with (each as the
    run computes it: unknown when config.json does not decide it); None when no block
    building them is found or built."""
    found = find(sim, path, profile, builds_experts)
    if found is None:
        return None
    named = [k for k in found.call.keywords if k.arg]
    values = ast.Dict([ast.Constant(k.arg) for k in named], [k.value for k in named])
    last = ast.Return(values, lineno=found.assign.lineno, col_offset=0)
    ran = run(sim, found, profile, quant_config, last)
    return ran[1] if ran is not None and isinstance(ran[1], dict) else None
