"""The attention backend's first batches (kb.explain.deploy's first-forward stage): what
the main model's backend checks when SGLang prepares a batch for it, before any layer runs.

SGLang prepares each batch by calling the backend's per-batch methods with the batch's
forward mode: at start-up the CUDA-graph runner captures the decode graphs
(`init_cuda_graph_state(max_bs, max_num_tokens)`, then
`init_forward_metadata_capture_cuda_graph(bs, ..., forward_mode, spec_info)` for each
batch size; a RuntimeError there is re-raised by the runner as "Capture cuda graph
failed", which the finding names beside the raise), then the warmup request's prefill and
the decodes call `init_forward_metadata(forward_batch)`. The mode captured and decoded is DECODE, or
TARGET_VERIFY for the target model of speculative decoding (EAGLE, EAGLE3, STANDALONE,
NGRAM: the draft's tokens are verified in one batch); an embedding model only prefills.

The batch is known by its mode, and by carrying no speculative input without speculative
decoding; its sizes and tensors are unknown, and the backend is the load stage's as a batch
sees it (kb.explain.batch_backend). Only what certainly fires is kept: a check resting on the
batch says nothing of the command.
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kb.explain import batch_backend, block_forward, classes
from kb.explain.abstract_values import EnumMember, Func, Instance, Obj
from kb.explain.frames import Ctx
from kb.explain.predicates import unknown

if TYPE_CHECKING:
    from kb.explain.simulate import Check, Simulator

PART = "the attention backend's first batches (CUDA-graph capture, prefill, decode)"
FORWARD_INFO = "sglang.srt.model_executor.forward_batch_info"
# the CUDA-graph runner of the decode graphs, by version (its capture's error handling)
GRAPH_RUNNERS = (
    "sglang.srt.model_executor.cuda_graph_runner",
    "sglang.srt.model_executor.runner.decode_cuda_graph_runner",
)
CAPTURE_STATE = "init_cuda_graph_state"
CAPTURE = "init_forward_metadata_capture_cuda_graph"
PER_BATCH = "init_forward_metadata"
# what `except RuntimeError` catches of the errors a check names
RUNTIME_ERRORS = frozenset({"RuntimeError", "NotImplementedError", "RecursionError"})
# speculative algorithms whose target model verifies a draft's tokens (ServerArgs turns
# NEXTN into EAGLE)
VERIFYING = frozenset({"EAGLE", "EAGLE3", "STANDALONE", "NGRAM", "NEXTN"})
_UNSET = object()


def step(sim: Simulator, backend: Any, fields: dict[str, Any]) -> Callable[[], None] | None:
    """The step to run; None without a built backend or the version's ForwardMode."""
    mod = sim.module(FORWARD_INFO)
    if not isinstance(backend, Instance) or mod is None or "ForwardMode" not in mod.classes:
        return None
    modes = classes.members(sim, classes.class_ref(mod, "ForwardMode"))
    algorithm = fields.get("speculative_algorithm")
    if algorithm is not None and not isinstance(algorithm, str):
        return None  # whether the target verifies is not known: its batches are not
    verifying = isinstance(algorithm, str) and algorithm.upper() in VERIFYING
    decode = modes.get("TARGET_VERIFY" if verifying else "DECODE")
    extend = modes.get("EXTEND")
    if decode is None or extend is None:
        return None
    # (the verify batch carries the draft's tokens: an input not known here)
    spec_info = unknown("the batch's speculative input") if verifying else None
    embedding = fields.get("is_embedding")
    captured = _captures_decode(fields) and embedding is False

    def run() -> None:
        seen = batch_backend.as_the_batch_sees_it(sim, backend)
        with block_forward.only_certain(sim):
            if captured:
                _capture(sim, seen, decode, spec_info)
            with _batch(sim, extend, spec_info):
                _call(sim, seen, PER_BATCH, {})
            if embedding is False:
                with _batch(sim, decode, spec_info):
                    _call(sim, seen, PER_BATCH, {})

    return run


def _captures_decode(fields: dict[str, Any]) -> bool:
    """Whether the decode graphs are certainly captured: `--disable-cuda-graph` not set
    and, in versions that configure graphs per phase (`cuda_graph_config.decode.backend`,
    which ServerArgs sets to DISABLED for backends without graphs), that backend known and
    not DISABLED."""
    if fields.get("disable_cuda_graph") is not False:
        return False
    if "cuda_graph_config" not in fields:
        return True
    config = fields["cuda_graph_config"]
    decode = config.fields.get("decode") if isinstance(config, Instance) else None
    backend = decode.fields.get("backend") if isinstance(decode, Instance) else None
    return isinstance(backend, EnumMember) and backend.name != "DISABLED"


def _capture(sim: Simulator, backend: Instance, mode: EnumMember, spec_info: Any) -> None:
    """The decode graphs' capture; a RuntimeError of it says where the runner re-raises it."""
    start = len(sim.result.checks)
    try:
        _call(sim, backend, CAPTURE_STATE, {})
        given = {"forward_mode": mode, "spec_info": spec_info, "encoder_lens": None}
        _call(sim, backend, CAPTURE, given)
    except BaseException:
        _rewrap(sim, start)
        raise


@contextlib.contextmanager
def _batch(sim: Simulator, mode: EnumMember, spec_info: Any) -> Iterator[None]:
    """A forward batch (`Obj("forward_batch")`, kb.explain.model_attrs) of this mode."""
    keys = ("batch.forward_mode", "batch.spec_info")
    saved = {k: sim.derived.pop(k, _UNSET) for k in keys}
    sim.derived.update(zip(keys, (mode, spec_info), strict=True))
    try:
        yield
    finally:
        for key, value in saved.items():
            sim.derived.pop(key, None)
            if value is not _UNSET:
                sim.derived[key] = value


def _call(sim: Simulator, backend: Instance, name: str, given: dict[str, Any]) -> None:
    """`backend.<name>(...)`: the batch where it takes one, `given` by parameter name, the
    rest unknown (the batch's sizes and tensors)."""
    fn = classes.instance_attr(sim, backend, name, allow_missing=True)
    if not isinstance(fn, Func):
        return
    params = fn.node.args
    names = [p.arg for p in (*params.posonlyargs, *params.args, *params.kwonlyargs)][1:]
    args = {
        n: Obj("forward_batch")
        if n == block_forward.BATCH
        else given[n]
        if n in given
        else unknown(f"argument {n} of {backend.cls.name}.{name} (the batch's)")
        for n in names
    }
    sim.call_function(fn, [], args, Ctx())


def _rewrap(sim: Simulator, start: int) -> None:
    """A RuntimeError fired by the capture is the error (its raise the first SGLang hits),
    which the runner re-raises as its own (`except RuntimeError as e: raise
    Exception(f"Capture cuda graph failed: {e}...")`): both are said."""
    checks = sim.result.checks
    fired = [i for i in range(start, len(checks)) if checks[i].outcome == "fired"]
    if not fired or checks[fired[-1]].kind != "raise":
        return
    check = checks[fired[-1]]
    if _raised_class(sim, check) not in RUNTIME_ERRORS:
        return
    site = _reraise_site(sim)
    if site is None:
        return
    path, node = site
    checks[fired[-1]] = replace(
        check,
        conditions=(*check.conditions, "raised while capturing the decode CUDA graphs"),
        reraised=(path, node.lineno, node.end_lineno or node.lineno),
    )


def _raised_class(sim: Simulator, check: Check) -> str | None:
    """The class a raise check names (`raise NotImplementedError(...)`)."""
    mod = sim.modules(check.path)
    if mod is None:
        return None
    for node in _walk(mod.body):
        if isinstance(node, ast.Raise) and node.lineno == check.line and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            return exc.id if isinstance(exc, ast.Name) else None
    return None


def _reraise_site(sim: Simulator) -> tuple[str, ast.Raise] | None:
    """The `raise` in the graph runner's `except RuntimeError` around `self.capture()`."""
    for dotted in GRAPH_RUNNERS:
        mod = sim.module(dotted)
        if mod is None:
            continue
        for node in _walk(mod.body):
            if not (isinstance(node, ast.Try) and _calls_capture(node.body)):
                continue
            for handler in node.handlers:
                if isinstance(handler.type, ast.Name) and handler.type.id == "RuntimeError":
                    for stmt in handler.body:
                        if isinstance(stmt, ast.Raise):
                            return mod.path, stmt
    return None


def _walk(body: list[ast.stmt]) -> Iterator[ast.AST]:
    for stmt in body:
        yield from ast.walk(stmt)


def _calls_capture(body: list[ast.stmt]) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "capture"
        for stmt in body
        for n in ast.walk(stmt)
    )
