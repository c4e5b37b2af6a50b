"""The first forward of the model's own blocks, a step of the first-forward stage
(kb.explain.deploy).

A model class's block may refuse, in its `forward`, a configuration its constructor built:
GPT-OSS's MoE block raises "forward_deepep branch not implemented yet" when the a2a backend
is DeepEP, before its experts run. The step runs the `forward` of each class the
architecture's class builds (kb.explain.model_class) that is decided to be built and whose
forward (or a method of its own it calls) raises or asserts, on arguments that are all
unknown (the batch's tensors and mode) and an object whose fields are unknown. Only what
fires whatever the batch is kept: a raise on a branch the settings and the GPU decide. A
check the batch decides (a tensor's shape, prefill or decode) says nothing of the command,
so it is dropped rather than reported as undecided.
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from kb.explain import classes, model_attrs, model_class, parallel_state, tensors
from kb.explain.abstract_values import ClassRef, Func, Instance, Obj
from kb.explain.frames import Ctx, Raised
from kb.explain.model_registry import architecture_class
from kb.explain.predicates import Profile, unknown
from kb.pyast import self_call

if TYPE_CHECKING:
    from kb.explain.simulate import Simulator

PART = "the first forward of the model's blocks"
FORWARD = "forward"
APPLY = "apply"  # a linear layer's quantization method runs its forward
FORWARD_CONTEXT = "sglang.srt.model_executor.forward_context"
CURRENT = "_current"  # the module's global holding the forward's context
BATCH = "forward_batch"  # the parameter a forward gets the batch in (its attention backend known)


def step(
    sim: Simulator,
    path: str | None,
    profile: Profile | None,
    quant_config: Any,
    linear_layers: list[Instance],
) -> Callable[[], None] | None:
    """The step to run; None without config.json, the architecture's class, or a block
    whose forward checks anything. `linear_layers`: those the model class's step built, whose
    quantization method's `apply` runs at their first forward."""
    if profile is None or profile.config is None:
        return None
    root = architecture_class(sim, path, profile.arch)
    if root is None:
        return None
    checking = [b for b in model_class.classes_built(sim, root) if _forward_checks(b.cls)]
    if not checking and not linear_layers:
        return None

    def run() -> None:
        _publish_forward_context(sim)
        with parallel_state.answered(sim):
            for b in model_class.decided_built(sim, root, checking, profile, quant_config):
                forward = classes.instance_attr(sim, Instance(b.cls), FORWARD, allow_missing=True)
                _run(sim, forward, [], f"{b.cls.name}.forward")
            for layer in linear_layers:  # `self.quant_method.apply(self, x, bias)`
                method = layer.fields.get("quant_method")
                if isinstance(method, Instance):
                    apply = classes.instance_attr(sim, method, APPLY, allow_missing=True)
                    # (its input: the hidden states, a tensor of a dtype not known here)
                    x = tensors.Tensor(unknown("the hidden states' dtype"), parameter=False)
                    _run(sim, apply, [layer, x], f"{method.cls.name}.apply")

    return run


def _publish_forward_context(sim: Simulator) -> None:
    """The ModelRunner publishes a ForwardContext holding its attention backend for each
    forward (`forward_context(ForwardContext(attn_backend=self.attn_backend))`), which the
    layers read back (`get_attn_backend()`): the module's `_current` is that object, its
    backend the batch's (kb.explain.batch_backend)."""
    mod = sim.module(FORWARD_CONTEXT)
    if mod is None or "ForwardContext" not in mod.classes or CURRENT not in mod.assigns:
        return
    context = Instance(classes.class_ref(mod, "ForwardContext"), "built for each forward")
    context.fields["attn_backend"] = model_attrs.batch_attr(sim, "attn_backend")
    sim.overlay[mod.path, CURRENT] = context


def _run(sim: Simulator, fn: Any, given: list[Any], name: str) -> None:
    """`fn` on `given`, then every other argument unknown (the caller's, not the parameter's
    default: `forward_batch=None`); only the checks that certainly fire are kept."""
    if not isinstance(fn, Func):
        return
    params = fn.node.args
    names = [p.arg for p in (*params.posonlyargs, *params.args, *params.kwonlyargs)]
    names = names[1 + len(given) :]  # (past self and what is given)
    args = {
        n: Obj("forward_batch") if n == BATCH else unknown(f"argument {n} of {name} (the batch)")
        for n in names
    }
    with only_certain(sim):
        sim.call_function(fn, list(given), args, Ctx())


@contextlib.contextmanager
def only_certain(sim: Simulator) -> Iterator[None]:
    """Run a forward's code keeping only the checks that certainly fire: what the batch
    decides says nothing of the command (a raise ends the run, as it ends SGLang's)."""
    start = len(sim.result.checks)
    try:
        with contextlib.suppress(Raised):
            yield
    finally:
        sim.result.checks[start:] = [c for c in sim.result.checks[start:] if c.outcome == "fired"]


def _forward_checks(cls: ClassRef) -> bool:
    """Whether the class's own `forward`, or a method of its own that forward calls on
    `self` (followed through each other), raises or asserts."""
    methods = {
        n.name: n for n in cls.node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    todo, seen = [FORWARD], set()
    while todo:
        name = todo.pop()
        node = methods.get(name)
        if node is None or name in seen:
            continue
        seen.add(name)
        for n in ast.walk(node):
            if isinstance(n, ast.Raise | ast.Assert):
                return True
            if (method := self_call(n)) is not None:
                todo.append(method)
    return False
