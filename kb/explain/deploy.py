"""Explain with a deployment profile: run the simulation (kb.explain.simulate) over the
version's own source, read from the knowledge base's blobs, and turn what it found into
findings, the effective configuration, the checks that passed and verified fixes.

The source is parsed at explain time rather than reduced to facts at ingest: the simulator
needs whole method bodies in order (a fact table would be the AST again), the blobs are
already stored for citations, and a parse is cached per blob sha, so it is paid once per
distinct file for the life of the process (~60 ms for server_args.py).
"""

from __future__ import annotations

import ast
import posixpath
import re
import shlex
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kb.dests import dest_rank
from kb.explain import (
    attention_forward,
    batch_forward,
    block_forward,
    derived,
    draft_stage,
    model_class,
    model_config_checks,
    model_loading,
    model_registry,
    model_weights,
    moe,
    moe_forward,
    moe_quant,
    parallel_state,
    runner_checks,
    tbo_strategy,
    weight_loader,
)
from kb.explain.abstract_values import Again, Func, Instance, Method, Obj
from kb.explain.analysis import Analysis
from kb.explain.facts import FlagSpec, SiteSpec, VersionFacts
from kb.explain.frames import Ctx
from kb.explain.predicates import ASSUMED, GPU, MODEL, SM_NAMES, Profile, Unknown, unknown
from kb.explain.report import Finding, finding, one_line
from kb.explain.report import display as _display
from kb.explain.shell import tokenize
from kb.explain.simulate import Budget, Change, Check, Result, Simulator
from kb.explain.source_modules import Module, parse_module
from kb.explain.values import default_of as _default_of
from kb.profile import PLATFORMS
from kb.pyast import and_all

Cite = Callable[[str, int, int], dict[str, Any]]
SERVER_ARGS = "python/sglang/srt/server_args.py"
MAX_FIX_TRIES = 12

# Parsed modules kept (blob sha -> module), least recently used out: a run with a profile
# reads ~100 modules past ServerArgs (the loader, quantization, MoE layers); fewer kept
# than a run reads, each run would parse them all again.
MAX_MODULES = 192
_modules: OrderedDict[str, Module | None] = OrderedDict()


def cached_module(sha: str, path: str, text: Callable[[], str | None]) -> Module | None:
    if sha in _modules:
        _modules.move_to_end(sha)
        return _modules[sha]
    source = text()
    mod = parse_module(path, source) if source is not None else None
    _modules[sha] = mod
    while len(_modules) > MAX_MODULES:
        _modules.popitem(last=False)
    return mod


@dataclass
class Simulation:
    result: Result
    findings: list[Finding]
    fired: dict[str, Finding]
    effective: list[dict[str, Any]]
    passed: list[dict[str, Any]]
    predicates: list[dict[str, Any]]
    assumptions: list[str]
    errors: set[str] = field(default_factory=set)  # keys of the errors
    assumed: set[str] = field(default_factory=set)  # keys of the raises only assumed
    # what was simulated past ServerArgs (the MoE configuration, the MoE layer, the
    # attention backends, the first forward), when the version's code could be followed
    load_parts: list[str] = field(default_factory=list)
    last_stage: str = "server_args"  # the last stage simulated: load, first_forward


def _as_json(value: Any) -> Any:
    """A simulated value as the answer's JSON: null when unknown, a set as its sorted
    texts, a value JSON cannot hold as its text."""
    if isinstance(value, Unknown | Instance):  # (an object of SGLang's: no JSON value)
        return None
    if isinstance(value, set | frozenset):
        return sorted(map(str, value))
    if isinstance(value, str | int | float | bool | list | dict) or value is None:
        return value
    return str(value)


def _shown(value: Any) -> str:
    if isinstance(value, Unknown):
        if value.options:
            return " or ".join(_display(o) for o in value.options) + " (unknown which)"
        return "(unknown)"
    if isinstance(value, Instance):
        return f"a {value.cls.name} object"
    return _display(value)


class _Index:
    """The version's flags by dest, and its constraint sites by line."""

    def __init__(self, facts: VersionFacts, canon: Callable[[str], str]) -> None:
        self.by_dest: dict[str, FlagSpec] = {}
        for flag in sorted(facts.flags, key=lambda f: dest_rank(f.name, f.dest, f.deprecated)):
            self.by_dest[canon(flag.dest)] = flag  # the best of flags sharing a dest, last
        self.sites: dict[tuple[str, int], SiteSpec] = {(s.path, s.line): s for s in facts.sites}

    def option(self, dest: str) -> str | None:
        flag = self.by_dest.get(dest)
        return flag.name if flag else None

    def key(self, kind: str, path: str, line: int, message: str) -> str:
        site = self.sites.get((path, line))
        return site.key if site and site.key else f"{kind}:{posixpath.basename(path)}:{message}"


def initial_fields(facts: VersionFacts, analysis: Analysis) -> dict[str, Any]:
    env = analysis.env
    fields: dict[str, Any] = {}
    for flag in facts.flags:
        dest = env.canon(flag.dest)
        if dest not in fields:
            fields[dest] = _default_of(flag)
    for dest, value in analysis.given.items():
        fields[env.canon(dest)] = value
    return fields


def simulatable(modules: Callable[[str], Module | None]) -> bool:
    """The version's ServerArgs source is stored and has the __post_init__ to replay."""
    entry = modules(SERVER_ARGS)
    cls = entry.classes.get("ServerArgs") if entry is not None else None
    return cls is not None and any(
        getattr(node, "name", None) == "__post_init__" for node in cls.body
    )


def simulate(
    facts: VersionFacts,
    analysis: Analysis,
    modules: Callable[[str], Module | None],
    profile: Profile | None,
    cite: Cite,
    environ: dict[str, str] | None = None,
    budget: Budget | None = None,
    models: dict[str, str] | None = None,
    paths: Sequence[str] = (),
) -> Simulation | None:
    """`models`: the version's architectures -> the model file defining each (its
    EntryClass), for the model registry and the model class's constructors; `paths`: the
    files the knowledge base holds at the version (registries read from a package's)."""
    entry = modules(SERVER_ARGS)
    if entry is None or not simulatable(modules):
        return None
    canon = analysis.env.canon
    given = {canon(d) for d in analysis.given}
    sim = Simulator(
        modules,
        entry,
        initial_fields(facts, analysis),
        profile,
        canon=canon,
        given=given,
        environ=environ,
        env_defaults={
            name: spec.fallback["default"]
            for name, spec in facts.env.items()
            if spec.fallback and spec.fallback.get("default") is not None
        },
        derive=derived,
        budget=budget,
    )
    # the objects SGLang's code builds along the way (attention backends, CudaGraphConfig)
    # are not built here: their constructors decide nothing this reports, at a cost
    sim.construct = False
    sim.models = model_registry.ModelRegistry.of(models) if models else None
    model_file = (models or {}).get(profile.arch or "") if profile is not None else None
    result = sim.run()
    stages: list[tuple[int, str]] = []  # (the first check of a stage, its name)
    load_parts: list[str] = []

    def stage(name: str, part: str, step: Any) -> bool:
        start = len(result.checks)
        if stages and raised(result.checks[stages[0][0] :]):
            return False  # SGLang stopped at an earlier stage's raise
        if result.truncated or step is None or not sim.run_after(step):
            return False  # (a stage not followed to its end decides nothing: its checks gone)
        stages.append((start, name))
        load_parts.append(part)
        return True

    # Past ServerArgs, in SGLang's order: the scheduler initializes the MoE configuration
    # and the FP8/FP4 GEMM backends (module globals the MoE and linear layers read; its
    # method tests config.json for experts itself), the ModelRunner loads the model (the MoE layer
    # class selected and built) and builds its attention backend from the registry
    # (`ATTENTION_BACKENDS[name](runner)`, whose functions check the GPU and model); the
    # first forward runs the MoE layer.
    moe_model = moe.is_moe(profile)
    built = moe.MoeLayer()
    # the ModelRunner copies some of its attributes onto the global server args when built
    # (the draft model's runner, built later, copies its own before the draft's backends)
    copied = derived.server_args_set_by_runner(sim)
    drafts: list[Profile | None] = []

    def draft_of() -> Profile | None:
        """The draft model's profile (kb.explain.model_weights), derived once, in a step."""
        if not drafts:
            drafts.append(model_weights.draft_model(sim, profile))
        return drafts[0]

    def runner_copies(runner: Obj) -> None:
        values: dict[str, Any] = {}

        def copy() -> None:
            # the draft's runner is of its config's (the target's own checkpoint, or one of
            # its own), else its attributes are not known
            draft = draft_of() if runner.kind == "draft_runner" else None
            if draft is None:
                values.update((n, derived.runner_attr(sim, runner, a)) for n, a in copied.items())
                return
            with model_weights.as_model(sim, draft):
                main = Obj("runner")
                values.update((n, derived.runner_attr(sim, main, a)) for n, a in copied.items())

        done = bool(copied) and sim.run_after(copy)  # (a step: the budget bounds it)
        for name in copied:
            why = "what the ModelRunner sets it to (not followed: budget)"
            sim.fields[sim.canon(name)] = values[name] if done else unknown(why)

    runner_copies(Obj("runner"))
    # the model's ModelConfig, built before anything loads (kb.explain.model_config_checks)
    known = profile is not None and profile.config is not None
    stage("load", model_config_checks.PART, model_config_checks.step(sim) if known else None)
    # (config.json: the loader builds the quantization config from its whole
    # `quantization_config`, the scheduler tests it for experts; a profile naming only the
    # method would read as a config missing every other key: errors SGLang does not raise)
    config_step = moe.moe_config(sim) if moe_model or known else None
    configured = stage("load", "the MoE and GEMM configuration", config_step) and moe_model
    # the ModelRunner's load config and the loader get_model_loader picks for its format
    # (kb.explain.weight_loader): their constructors check the command's load settings
    selected = weight_loader.Selected()
    if known or weight_loader.settings_given(sim, given):
        step = weight_loader.construction_step(sim, selected)
        stage("load", weight_loader.CONSTRUCTION_PART, step)
    loaded = model_loading.Loaded()
    linear_layers: list[Instance] = []  # built by the model class's step, run at the forward
    step = model_loading.quantization_config_step(sim, loaded) if known else None
    loader_start = len(result.checks)
    stage("load", "the model loader's quantization checks", step)
    # (a loader that certainly raises builds no layer: its methods' checks are not reached)
    loader_raised = raised(result.checks[loader_start:])
    # (the loader builds the model and loads its weights with torch's default dtype set to
    # the model's: `with set_default_torch_dtype(model_config.dtype)`)
    dtype: list[Any] = []
    if known and sim.run_after(lambda: dtype.append(derived.model_config_attr(sim, "dtype"))):
        sim.default_dtype = dtype[0]
    if not loader_raised:  # the loader then builds the architecture's class
        # (whose constructor may first set server args its blocks read: kept past the step)
        set_: dict[str, Any] = {}
        step = model_class.server_args_step(sim, model_file, profile, loaded.quant_config, set_)
        if step is not None and sim.run_after(step):
            sim.fields.update(set_)
        step = model_class.step(sim, model_file, profile, loaded.quant_config, linear_layers)
        stage("load", model_class.PART, step)
        # ... and hands it to its weight-loading method, which checks it and config.json
        # before it reads the weight files
        step = weight_loader.checks_step(sim, selected, model_file, profile) if known else None
        stage("load", weight_loader.CHECKS_PART, step)
        # ... whose call of the model's load_weights checks config.json before the weights
        step = model_weights.step(sim, selected.loader, model_file, profile, loaded.quant_config)
        stage("load", model_weights.PART, step)
        # ... then the ModelRunner checks the model it loaded (its KV cache scales' loader)
        stage("load", runner_checks.LOADED_PART, runner_checks.loaded_model_step(sim, profile))
        # ... and the loaded model's forward (pipeline parallelism)
        stage(
            "load", runner_checks.FORWARD_PART, runner_checks.forward_step(sim, model_file, profile)
        )
        # (its initialize computed the initial expert location first: the same stage)
        if known:
            stage(
                "load", runner_checks.EXPERT_LOCATION_PART, runner_checks.expert_location_step(sim)
            )
    if configured:

        def build() -> None:
            qc = loaded.quant_config
            if not loaded.built:  # (a version without the loader's function)
                qc = moe.quant_config(sim, derived.model_config_attr(sim, "quantization"))
            built.__dict__.update(moe.build_layer(sim, qc).__dict__)

        if stage("load", "the MoE layer", build):
            # FusedMoE's own constructor: the layer's quantization method, its weights, its
            # MoE runner and token dispatcher
            # (None: an unquantized model, whose FusedMoE builds its own unquantized method)
            qc = (
                loaded.quant_config
                if loaded.built and not loader_raised
                else unknown("the quantization config")
            )
            step = moe_quant.step(sim, built, qc, profile, paths, model_file)
            stage("load", moe_quant.PART, step)
    sim.default_dtype = None
    # ... with a draft model, its worker then builds the draft decode/extend backends
    # (kb.explain.draft_stage)
    made: list[Any] = []  # the main model's backend: what each forward batch carries

    def main_backend() -> Callable[[], None] | None:
        # (the runner's init_attention_backend wraps the registry's backend for two-batch
        # overlap; a version without that method builds it directly)
        init = derived.runner_method(sim, _INIT_BACKEND)
        build = derived.runner_method(sim, _BACKEND)
        if init is not None and build is not None:

            def run() -> None:
                # (built once: two-batch overlap's primary and children are the same backend)
                first = sim.call_function(build, [], {}, Ctx())
                sim.derived[f"runner.{_BACKEND}"] = Method(Again(first), "call")
                sim.call_function(init, [], {}, Ctx())
                made.append(derived.runner_attr(sim, Obj("runner"), "attn_backend"))

            return run
        return (
            None if build is None else lambda: made.append(sim.call_function(build, [], {}, Ctx()))
        )

    def draft_weights() -> Callable[[], None] | None:  # (the draft model loads first)
        qc = loaded.quant_config
        return model_weights.draft_step(sim, selected.loader, models or {}, profile, qc, draft_of)

    def as_draft(step: Func | Callable[[], Any] | None) -> Callable[[], Any] | None:
        """`step` run as the draft model, when its config is known (its ModelConfig, the
        draft runner's, is then derived from it)."""
        if step is None:
            return None

        def run() -> Any:
            draft = draft_of()
            call = (
                (lambda: sim.call_function(step, [], {}, Ctx())) if isinstance(step, Func) else step
            )
            if draft is None:
                return call()
            with model_weights.as_model(sim, draft):
                return call()

        return run

    draft_copied = False

    def worker_constructor() -> Callable[[], None] | None:
        # (the draft's ModelConfig is built with the server args as the constructor left
        # them: its context length the target's)
        def draft_config() -> None:
            draft = draft_of()
            if draft is not None and draft.config is not None:
                with model_weights.as_model(sim, draft):
                    model_config_checks.checks(sim, draft=True)

        return draft_stage.constructor_step(sim, draft_config)

    backends: tuple[tuple[bool, str, Callable[[], Any]], ...] = (
        (False, "the attention backend", main_backend),
        (True, draft_stage.CONSTRUCTOR_PART, worker_constructor),
        (True, model_weights.DRAFT_PART, draft_weights),
        (True, "the draft model's attention backend",
         lambda: as_draft(derived.runner_method(sim, _BACKEND, True))),
        (True, draft_stage.PART, lambda: as_draft(draft_stage.step(sim))),
    )  # fmt: skip
    # (the backends the registry builds are: their constructors check the model)
    sim.construct_under = (ATTENTION_DIR,)
    for draft, part, backend in backends:
        if not isinstance(result.fields.get("attention_backend"), str):
            break  # ServerArgs left the choice to the ModelRunner (v0.5.3), not simulated
        if draft and not _has_draft_model(result.fields.get("speculative_algorithm")):
            continue
        if draft and not draft_copied:  # (once, before the draft's first part)
            runner_copies(Obj("draft_runner"))
            draft_copied = True
        step = backend()
        if part != model_weights.DRAFT_PART:  # (a backend's constructor may ask its sizes)
            step = _with_parallel(sim, step)
        # (the worker's constructor or the draft's weights not followed, the draft's
        # backends still are)
        followed = stage("load", part, step)
        if not followed and part not in (draft_stage.CONSTRUCTOR_PART, model_weights.DRAFT_PART):
            break
    sim.construct_under = ()
    # the main backend prepares its first batches: the decode graphs' capture, the warmup
    # prefill, a decode (kb.explain.batch_forward)
    stage(
        "first_forward",
        batch_forward.PART,
        _with_parallel(sim, batch_forward.step(sim, made[0], result.fields) if made else None),
    )
    # the first prefill of an encoder-only model's attention (kb.explain.attention_forward)
    kind = attention_forward.layer_kind(sim, model_file) if made else None
    stage(
        "first_forward",
        attention_forward.PART,
        attention_forward.step(sim, made[0], kind) if kind else None,
    )
    # ... the model's forward: with two-batch overlap, its strategy for the decoder layers
    stage(
        "first_forward",
        tbo_strategy.PART,
        tbo_strategy.step(sim, model_file, profile, result.fields),
    )
    # ... then the model's blocks: one may refuse what its constructor built (GPT-OSS's MoE
    # block with DeepEP), before its MoE layer's forward runs
    stage(
        "first_forward",
        block_forward.PART,
        block_forward.step(sim, model_file, profile, loaded.quant_config, linear_layers),
    )
    if built.layer is not None:
        ran: list[bool] = []
        name = built.layer.cls.name
        forward = stage(
            "first_forward",
            f"the first forward of {name}",
            lambda: ran.append(moe.first_forward(sim, result.fields, built)),
        )
        if forward and not any(ran):
            stages.pop()  # nothing of its forward is simulated
            load_parts.pop()
            # ... a layer with the standard dispatcher: routed by its block's TopK
            step = moe_forward.step(
                sim, result.fields, built, model_file, profile, loaded.quant_config
            )
            stage("first_forward", f"the first forward of {name}", step)
    return _report(facts, analysis, result, given, profile, cite, stages, load_parts)


_BACKEND = "_get_attention_backend"
_INIT_BACKEND = "init_attention_backend"
ATTENTION_DIR = "python/sglang/srt/layers/attention/"


def _with_parallel(sim: Simulator, step: Callable[[], Any] | None) -> Callable[[], Any] | None:
    """`step` with the parallel groups' sizes answered from the server args
    (kb.explain.parallel_state: `get_parallel().attn_tp_size` in a backend's constructor)."""
    if step is None:
        return None

    def run() -> Any:
        with parallel_state.answered(sim):
            return step()

    return run


def raised(checks: list[Any]) -> bool:
    """Whether one of `checks` is a raise or failed assert that certainly fires."""
    return any(c.outcome == "fired" and c.kind != "warning" for c in checks)


def _has_draft_model(algorithm: Any) -> bool:
    """Speculative decoding with a draft model, which gets a ModelRunner of its own (NGRAM
    drafts from the prompt, without one)."""
    return isinstance(algorithm, str) and algorithm.upper() not in ("", "NONE", "NGRAM")


def _report(
    facts: VersionFacts,
    analysis: Analysis,
    result: Result,
    given: set[str],
    profile: Profile | None,
    cite: Cite,
    stages: list[tuple[int, str]] | None = None,
    load_parts: list[str] | None = None,
) -> Simulation:
    """The run's checks and changes as findings and effective settings; `stages` says
    where the checks of each stage past ServerArgs begin (the first check's index, the
    stage's name: load, first_forward)."""
    index = _Index(facts, analysis.env.canon)
    relevant = set(given)
    if profile is not None:  # what reads the profile's model or GPU facts
        relevant |= {r for c in result.checks for r in c.reads if r.startswith("<")}
    findings: list[Finding] = []
    fired: dict[str, Finding] = {}
    errors: set[str] = set()
    assumed: set[str] = set()

    def first_flag(reads: frozenset[str]) -> str | None:
        for dest in sorted(reads & given):
            if (name := index.option(dest)) is not None:
                return name
        return None

    def loc(path: str, line: int) -> str:
        return f"{posixpath.basename(path)}:{line}"

    def when(conds: Sequence[str]) -> str:
        return and_all(conds)

    seen: set[tuple[str, int, str]] = set()
    for check in result.checks:
        mark = (check.path, check.line, check.outcome)
        if mark in seen:
            continue
        seen.add(mark)
        key = index.key(check.kind, check.path, check.line, check.template or check.message)
        text_msg = f": {check.message}" if check.message else ""
        if check.outcome == "likely":
            if not check.reads & given:
                continue
            text_msg += (
                " (assuming SGLang keeps the values you gave; whether the model or hardware "
                f"changes them first needs: {', '.join(check.needs)})"
            )
        source = cite(check.path, check.line, check.end_line)
        if check.kind == "opaque":
            if check.reads & given:
                callee = check.message.split(" to ")[-1].split(",")[0]
                findings.append(
                    finding(
                        "info",
                        first_flag(check.reads),
                        f"at {loc(check.path, check.line)} SGLang {check.message}: what it "
                        "checks or changes there is not simulated",
                        "undecidable",
                        source,
                        key=key,
                        needs=[f"the code behind {callee}"],
                        condition=when(check.conditions),
                    )
                )
            continue
        if check.outcome == "assumed":
            # raises only if what the run assumed holds: said, never claimed as an error
            assumed.add(key)
            words = _assumed_words(check.reads, result)
            verb = {"raise": "raises", "assert": "an assertion fails"}.get(check.kind, "fails")
            findings.append(
                finding(
                    "warning",
                    first_flag(check.reads),
                    f"{verb} at {loc(check.path, check.line)}{text_msg}, assuming "
                    + "; ".join(words),
                    "assumed",
                    source,
                    key=key,
                    needs=words,
                    condition=when(check.conditions),
                )
            )
            continue
        if check.outcome in ("fired", "likely"):
            warns = check.kind == "warning"
            if warns and not (check.reads & relevant):
                continue
            verb = {"warning": "logs a warning", "raise": "raises"}.get(
                check.kind, "assertion fails"
            )
            # an error names the fields its condition read (the fixes change those)
            reads = {} if warns else {"reads": sorted(r for r in check.reads if r[:1] != "<")}
            # ... and the profile's assumptions it rests on (packages: assume-ok)
            profile_words = _assumed_words({r for r in check.reads if r[:1] == "<"}, result)
            again = check.reraised
            found = finding(
                "warning" if warns else "error",
                first_flag(check.reads),
                f"{verb} at {loc(check.path, check.line)}{text_msg}"
                + (f", given the profile: {'; '.join(profile_words)}" if profile_words else "")
                + (f"; re-raised at {loc(again[0], again[1])}" if again else ""),
                "constraint",
                source,
                key=key,
                condition=when(check.conditions),
                **reads,
                **({"reraised_at": cite(*again)} if again else {}),
            )
            if not warns:
                errors.add(key)
            findings.append(found)
            fired[key] = found
        elif check.outcome == "unknown" and check.kind != "warning" and check.reads & given:
            verb = {"raise": "a raise", "assert": "an assertion"}[check.kind]
            needs = ", ".join(check.needs)
            findings.append(
                finding(
                    "info",
                    first_flag(check.reads),
                    f"{verb} at {loc(check.path, check.line)} cannot be decided here "
                    f"(needs: {needs}){text_msg}",
                    "undecidable",
                    source,
                    key=key,
                    needs=list(check.needs),
                    condition=when(check.conditions),
                )
            )

    effective = _effective(result, analysis, index, given, cite)
    if result.truncated:
        findings.append(_stopped(result))
        for row in effective:  # later code may change any of them again
            row.update(certain=False, to=None, needs=[*row["needs"], STOPPED])
            row["to_text"] += " when the simulation stopped"
    for row in effective:
        change = row["_change"]
        if not change.certain or not (change.reads & given or row["dest"] in given):
            continue
        key = index.key("override", change.path, change.line, row["field"])
        you_gave = (
            f" (you gave {_display(analysis.given_value(row['dest']))})"
            if row["dest"] in given
            else ""
        )
        found = finding(
            "warning",
            row["flag"] or first_flag(change.reads),
            f"overrides {row['flag'] or row['field']} to {row['to_text']}{you_gave} at "
            f"{loc(change.path, change.line)} (when {row['condition'] or 'always'})",
            "constraint",
            row["source"],
            key=key,
        )
        findings.append(found)
        fired[key] = found
    for row in effective:
        row.pop("_change")

    findings.extend(_gpu_count(result, profile, index))
    passed = [
        {
            "kind": c.kind,
            "condition": when(c.conditions),
            "message": c.message,
            "flags": sorted({n for d in c.reads if (n := index.option(d))}),
            "source": cite(c.path, c.line, c.end_line),
        }
        for c in _unique(result.checks)
        if c.outcome == "passed" and c.kind != "warning" and c.reads & relevant
    ]
    predicates = [
        {
            "name": p.name,
            "meaning": p.meaning,
            "value": _as_json(p.value),
            "needs": list(p.value.needs) if isinstance(p.value, Unknown) else [],
            "source": cite(p.path, p.line, p.line) if p.path and p.line else None,
        }
        for p in result.predicates.values()
    ]
    # a check's key -> the first stage reaching it (ServerArgs' handling first)
    stage_of: dict[str, str] = {}
    bounds = [(0, "server_args"), *(stages or []), (len(result.checks), "")]
    for (start, name), (end, _) in zip(bounds, bounds[1:], strict=False):
        for c in result.checks[start:end]:
            stage_of.setdefault(index.key(c.kind, c.path, c.line, c.template or c.message), name)
    for found in findings:
        found["stage"] = stage_of.get(found.get("key") or "", "server_args")
    return Simulation(
        result,
        findings,
        fired,
        effective,
        passed,
        predicates,
        sorted(result.assumptions.values()),
        errors,
        assumed,
        list(load_parts or []),
        stages[-1][1] if stages else "server_args",
    )


# What a setting needs when the run stopped before SGLang's argument handling ended.
STOPPED = "the rest of SGLang's argument handling (the simulation stopped)"


def _stopped(result: Result) -> Finding:
    """The run stopped early (its step budget spent, or code nested too deeply): what it
    found holds, what the code after that point checks or changes is unknown."""
    return finding(
        "warning",
        None,
        f"unknown: {result.truncated}: the simulation stopped there; the checks and settings "
        "after that point are not known",
        "budget",
        None,
        needs=[STOPPED],
    )


def _gpu_count(result: Result, profile: Profile | None, index: _Index) -> list[Finding]:
    """The GPUs the parallel sizes ask for against the profile's GPUs per node × nodes."""
    if profile is None or not profile.gpus:
        return []
    sizes = {name: result.fields.get(name) for name in ("tp_size", "pp_size")}
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in sizes.values()):
        return []
    need = int(sizes["tp_size"] or 1) * int(sizes["pp_size"] or 1)
    have = profile.gpus * (profile.nodes or 1)
    if need <= have:
        return []
    return [
        finding(
            "warning",
            index.option("tp_size"),
            f"tp_size × pp_size = {need} GPUs, but the profile has {have} "
            f"({profile.gpus} per node × {profile.nodes or 1} node(s))",
            "profile",
            None,
        )
    ]


def _unique(checks: list[Check]) -> list[Check]:
    seen: set[tuple[str, int]] = set()
    out = []
    for c in checks:
        if (c.path, c.line) not in seen:
            seen.add((c.path, c.line))
            out.append(c)
    return out


def _effective(
    result: Result, analysis: Analysis, index: _Index, given: set[str], cite: Cite
) -> list[dict[str, Any]]:
    """Per field, its value from the command/default and its final value, with the last
    site that changed it; fields whose final value depends on a missing fact are listed
    with `certain: false` and what is needed."""
    first: dict[str, Any] = {}
    last: dict[str, Any] = {}
    for change in result.changes:
        first.setdefault(change.field, change.before)
        last[change.field] = change
    rows = []
    for name, change in last.items():
        before, after = first[name], result.fields.get(name)
        if not isinstance(after, Unknown) and _same(before, after):
            continue
        if name == "model_config" or name.startswith("_"):
            continue
        certain = not isinstance(after, Unknown)
        came_from, assuming = input_of(change, given, result)
        rows.append(
            {
                "field": name,
                "dest": name,
                "flag": index.option(name),
                "from": _as_json(before),
                "to": _as_json(after),
                "from_text": _shown(before),
                "to_text": _shown(after),
                "certain": certain,
                "needs": list(after.needs) if isinstance(after, Unknown) else [],
                "given": name in given,
                "condition": and_all(change.conditions),
                "source": cite(change.path, change.line, change.end_line),
                "input": came_from,
                "assuming": assuming,
                "_change": change,
            }
        )
    rows.sort(key=lambda r: (not r["certain"], r["source"]["line"]))
    return rows


def input_of(change: Change, given: set[str], result: Result) -> tuple[str, list[str]]:
    """The input a setting's value came from, and the assumptions it rests on: "assumed"
    (a fact the run assumed: the catalog's typical CUDA, an installed package), "gpu",
    "model" (config.json), "flag" (the command's flags), "default" (none of these)."""
    marks = change.inputs | {r for r in change.reads if r.startswith("<")}
    words = _assumed_words(marks, result)
    if words:
        return "assumed", words
    if GPU in marks:
        return "gpu", []
    if MODEL in marks:
        return "model", []
    if change.field in given or change.reads & given:
        return "flag", []
    return "default", []


def _assumed_words(marks: frozenset[str] | set[str], result: Result) -> list[str]:
    keys = sorted(m[len(ASSUMED) : -1] for m in marks if m.startswith(ASSUMED))
    return [result.assumptions[k] for k in keys if k in result.assumptions]


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


# --- fixes ------------------------------------------------------------------------------


def fix_candidates(
    finding: Finding,
    facts: VersionFacts,
    analysis: Analysis,
    profile: Profile | None = None,
    tests: str = "",
) -> list[dict[str, list[str]]]:
    """Values of the flags an error's condition reads that may make it pass: flags not in the
    command from their choices (or switched on), given switches switched off, and given
    flags set to another of their choices; those the error's message names first, then the
    smallest changes (change_size). `tests`: the source of the tests around the error's
    line, whose values rank next (see the comment below)."""
    canon = analysis.env.canon
    index = _Index(facts, canon)
    given = {canon(d) for d in analysis.given}
    adds: list[dict[str, list[str]]] = []
    removes: list[dict[str, list[str]]] = []
    # the checkpoint's own quantization is no choice: another method's kernels cannot load
    # its weights (ModelConfig refuses the mismatch, which is not simulated)
    fixed_by_model = {"quantization"} if profile is not None and profile.quant else set()
    for dest in finding.get("reads", []):
        flag = index.by_dest.get(dest)
        if flag is None or flag.deprecated or flag.hidden or dest in fixed_by_model:
            continue
        if dest in given:
            if flag.action_name == "store_true":
                removes.append({"remove": [flag.name]})
            elif flag.choices:  # another of its choices in place of the one given
                now = analysis.given_value(dest)
                for choice in flag.choices:
                    if choice is not None and not _same(choice, now):
                        removes.append({"set": [f"{flag.name} {choice}"]})
            continue
        if flag.action_name == "store_true":
            adds.append({"add": [flag.name]})
        elif flag.choices:
            current = _default_of(flag)
            for choice in flag.choices:
                if not _same(choice, current) and choice is not None:
                    adds.append({"add": [f"{flag.name} {choice}"]})
    # what the error's own message says to use first ("Please use `--attention-backend
    # flashinfer`"), then the smallest changes, of those first the values the tests around
    # it name (the assert in the else of `if get_moe_runner_backend().is_flashinfer_cutedsl()`)
    said = re.sub(r"[`'\"=]", " ", finding.get("message", ""))
    said = " ".join(said.split())
    condition = f"{finding.get('condition') or ''} {tests}"

    def rank(fix: dict[str, list[str]]) -> tuple[bool, tuple[int, int], bool]:
        parts = [*fix.get("add", []), *fix.get("set", [])]
        named = parts and all(re.search(rf"(?<!\S){re.escape(p)}(?!\S)", said) for p in parts)
        values = [p.split()[-1] for p in parts if len(p.split()) > 1]
        in_condition = values and all(
            re.search(rf"(?<![A-Za-z0-9]){re.escape(v)}(?![A-Za-z0-9])", condition) for v in values
        )
        return not named, change_size(fix), not in_condition

    return sorted(adds + removes, key=rank)[:MAX_FIX_TRIES]


def enclosing_tests(module: Module | None, line: int) -> str:
    """The source of the `if`/`while` tests whose statements hold `line` (the error's), the
    `elif` chains' earlier tests included."""
    if module is None:
        return ""
    tests: list[str] = []
    # (only the nodes spanning the line are entered: ServerArgs' class is ~5,000 lines)
    todo: list[ast.AST] = [*module.functions.values(), *module.classes.values()]
    while todo:
        node = todo.pop()
        start, end = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
        if start is not None and not start <= line <= (end or 0):
            continue
        if isinstance(node, ast.If | ast.While):
            tests.append(ast.unparse(node.test))
        todo.extend(ast.iter_child_nodes(node))
    return " ".join(tests)


def change_size(fix: dict[str, list[str]]) -> tuple[int, int]:
    """How much a fix changes the command: the words it adds, removes or changes (a switch
    is one, a flag and its value two, another value for a flag given one); at equal size
    dropping a switch given comes first (it takes nothing the user did not ask for), then
    changing a value."""
    words = sum(len(part.split()) for part in [*fix.get("add", []), *fix.get("remove", [])])
    words += len(fix.get("set", []))
    return words, 0 if "remove" in fix else 1 if "set" in fix else 2


def fixed_command(command: str, analysis: Analysis, fix: dict[str, list[str]]) -> str:
    if "add" in fix:
        return command.rstrip() + " " + " ".join(fix["add"])
    tokens = tokenize(command)
    drop = set(fix.get("remove", [])) | {part.split()[0] for part in fix.get("set", [])}
    argv = [
        word
        for use in analysis.uses
        if not (use.flag and use.flag.name in drop)
        for word in [tokens.argv[use.index], *use.values]
        if use.match.explicit is None or word == tokens.argv[use.index]
    ]
    for part in fix.get("set", []):  # the flag given again, with its new value, at the end
        argv.extend(part.split(" ", 1))
    prefix = tokens.launcher or "python -m sglang.launch_server"
    return prefix + " " + shlex.join(argv)


# --- the annotated command -------------------------------------------------------------


def annotate(command: str, analysis: Analysis, facts: VersionFacts) -> list[dict[str, Any]]:
    """Each word of the command with the flag it sets and its one-line help, explainshell
    style; abbreviations and aliases say so."""
    tokens = tokenize(command)
    out: list[dict[str, Any]] = []
    if tokens.launcher:
        out.append(
            {"text": tokens.launcher, "flag": None, "help": "the launcher", "role": "launcher"}
        )
    by_index = {use.index: use for use in analysis.uses}
    value_of: dict[int, str] = {}
    for use in analysis.uses:
        for k in range(len(use.values)):
            if use.match.explicit is None:
                value_of[use.index + 1 + k] = use.flag.name if use.flag else use.match.option
    for i, word in enumerate(tokens.argv):
        at = by_index.get(i)
        if at is not None:
            flag = at.flag
            out.append(
                {
                    "text": word,
                    "flag": flag.name if flag else None,
                    "help": one_line(flag.help) if flag else "not a flag of this version",
                    "role": "flag",
                    "via": at.match.kind,
                    "url": facts.flag_url(flag) if flag and not flag.builtin else None,
                }
            )
        else:
            out.append(
                {
                    "text": word,
                    "flag": None,
                    "help": f"value of {value_of[i]}" if i in value_of else "",
                    "role": "value" if i in value_of else "word",
                    "value_of": value_of.get(i),
                }
            )
    return out


_options_cache: dict[tuple[int, ...], dict[str, Any]] = {}


def profile_options(modules: Callable[[str], Module | None]) -> dict[str, Any]:
    """What the profile form offers at a version: the architectures its server_args and
    model config name, platforms and SMs with the GPUs people know them by."""
    import ast as _ast

    mods = [modules(p) for p in (SERVER_ARGS, "python/sglang/srt/configs/model_config.py")]
    key = tuple(id(m) for m in mods)
    if key in _options_cache:
        return _options_cache[key]
    pattern = re.compile(r"^[A-Z][A-Za-z0-9]+(ForCausalLM|ForConditionalGeneration|Model)\w*$")
    archs: set[str] = set()
    for mod in mods:
        if mod is None:
            continue
        for node in [*mod.classes.values(), *mod.functions.values()]:
            for c in _ast.walk(node):
                if isinstance(c, _ast.Constant) and isinstance(c.value, str):
                    if pattern.match(c.value):
                        archs.add(c.value)
    out = {
        "archs": sorted(archs),
        "platforms": list(PLATFORMS),
        "sms": [{"sm": k, "name": v} for k, v in SM_NAMES.items()],
    }
    if len(_options_cache) > 32:
        _options_cache.clear()
    _options_cache[key] = out
    return out
