"""The model's ModelConfig methods answered once per run and model (kb.explain.simulate's
call_function): SGLang asks `model_config.get_num_kv_heads(tp)` and its like several
times while it builds a model and its attention backend, and with config.json partly
unknown each answer interprets every branch of a long chain of model types.

A call is kept only when its answer is all it did: it raised or asserted nothing (no
check recorded), set no server arg or module global, and ran on a path no condition
made undecided (a return there would carry the caller's condition). Its answer is
kept with the inputs it read, which a later caller reads again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kb.explain.abstract_values import Func, Obj
from kb.explain.frames import Ctx

Simulator = Any  # kb.explain.simulate.Simulator (which calls this module: not imported)

CALLS = "calls of ModelConfig's methods"  # (its entry in Simulator.derived, per model)
PLAIN = (str, int, float, bool, type(None))


def key(fn: Func, args: list[Any], kwargs: dict[str, Any], ctx: Ctx) -> tuple[Any, ...] | None:
    """The call's key when it may be kept: a ModelConfig method, plain arguments, a
    decided path; else None."""
    bound = fn.bound
    if not isinstance(bound, Obj) or bound.kind not in ("model_config", "draft_model_config"):
        return None
    if ctx.needs or not all(type(a) in PLAIN for a in (*args, *kwargs.values())):
        return None
    return (fn.node, bound.kind, tuple(args), tuple(sorted(kwargs.items())))


def call(sim: Simulator, call_key: tuple[Any, ...], run: Callable[[], Any]) -> Any:
    memo: dict[tuple[Any, ...], tuple[Any, Any, frozenset[str]]] = sim.derived.setdefault(CALLS, {})
    kept = memo.get(call_key)
    if kept is not None and kept[0] is sim.profile:  # (a draft's config read in its place)
        sim.reads |= kept[2]
        return kept[1]
    checks, overlay = len(sim.result.checks), dict(sim.overlay)
    outer_reads, outer_written = sim.reads, sim.written
    sim.reads, sim.written = set(), set()
    try:
        value = run()
    finally:
        reads, written = frozenset(sim.reads), sim.written
        sim.reads, sim.written = outer_reads | reads, outer_written | written
    if (
        not written
        and len(sim.result.checks) == checks
        and len(sim.overlay) == len(overlay)
        and all(sim.overlay[k] is v for k, v in overlay.items())
    ):
        memo[call_key] = (sim.profile, value, reads)
    return value
