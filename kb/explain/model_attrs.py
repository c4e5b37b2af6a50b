"""Attributes of the objects the profile stands for (`abstract_values.Obj`): the model's
hf_config (config.json's keys), its ModelConfig (derived: kb.explain.derived), the
ModelRunner, and the parallel groups a stage answers (kb.explain.parallel_state)."""

from __future__ import annotations

from typing import Any

from kb.explain import batch_backend, classes, parallel_state
from kb.explain.abstract_values import Method, Obj, Symbol, run_owned, torch_dtype
from kb.explain.predicates import GPU, MISSING, MODEL, missing, unknown
from kb.explain.source_modules import mla_archs

DRAFT = "is_draft_model"  # ModelConfig.from_server_args' argument building a draft's


def model_attr(sim: Any, obj: Obj, attr: str, allow_missing: bool) -> Any:
    if obj.kind in ("runner", "draft_runner"):
        if sim.derive is None:
            return unknown(f"ModelRunner.{attr}")
        return sim.derive.runner_attr(sim, obj, attr)
    if obj.kind == "parallel":  # get_parallel(), answered by a stage (parallel_state)
        size = parallel_state.context_attr(sim.parallel, attr)
        sim.reads |= size[1] if size else frozenset()
        return size[0] if size else unknown(f"the parallel state's {attr}")
    if obj.kind == "pp_group":  # get_pp_group(), answered by a stage (parallel_state)
        value, reads = parallel_state.pipeline_attr(sim.parallel, attr)
        sim.reads |= reads
        return value
    if obj.kind == "forward_batch":  # a forward's batch (kb.explain.block_forward)
        return batch_attr(sim, attr)
    if obj.kind == "device_properties":  # torch.cuda.get_device_properties(i)
        return device_property(sim, attr)
    if obj.kind == "draft_hf_config":  # get_config(<the draft's path>): its config.json
        value = (sim.profile.draft_config or {}).get(attr, MISSING)
        if missing(value):
            return MISSING if allow_missing else unknown(f"the draft's config.json ({attr})")
        return value
    if obj.kind == "draft_model_config" and not sim.model_config_args.get(DRAFT):
        return unknown(f"the draft model's {attr}")
    if obj.kind in ("model_config", "draft_model_config"):  # (the draft's, run as the model)
        if attr == "hf_config":
            return Obj("hf_config")
        if attr == "hf_text_config":
            return Obj("hf_text_config") if text_config(sim) is not None else Obj("hf_config")
        if attr == "attention_arch":
            return attention_arch(sim)
        if sim.derive is None:
            return unknown(f"the model's {attr}")
        return sim.derive.model_config_attr(sim, attr, allow_missing)
    if attr == "get_text_config":  # (its text part: read as the config, like hf_text_config)
        return Method(obj, attr)
    if obj.kind == "hf_text_config":
        return _text_attr(sim, attr, allow_missing)
    if obj.kind == "hf_config" and sim.derive is not None:
        # (what SGLang's ModelConfig sets on the config it loaded, over config.json's)
        value = sim.derive.hf_config_attr(sim, attr)
        if not missing(value):
            return value
    value = sim.profile.hf_attr(attr)
    if isinstance(value, dict | list):
        value = _owned(sim, attr, value)
    if attr in ("dtype", "torch_dtype"):
        # transformers reads either key of config.json into `dtype` (`torch_dtype` its
        # older name, an alias) and holds a torch dtype, not the text
        if missing(value):
            value = sim.profile.hf_attr("torch_dtype" if attr == "dtype" else "dtype")
        value = torch_dtype(value)
    if missing(value) and obj.kind == "hf_config":  # (the config class's own, by model_type)
        found = classes.config_method(sim, attr)
        if found is not None:
            return found
    if missing(value):
        return MISSING if allow_missing else unknown(f"the model's config.json ({attr})")
    sim.reads.add(MODEL)
    return value


def device_property(sim: Any, attr: str) -> Any:
    """An attribute of the GPU's properties from the profile's catalog GPU: its LLVM target
    on ROCm (`gcnArchName`, "gfx942"), its compute capability (`major`, `minor`), its
    name; others unknown."""
    gpu = sim.profile.catalog
    if gpu is None:
        return unknown(f"the GPU's {attr}")
    sim.reads.add(GPU)
    if attr == "gcnArchName" and gpu.platform == "rocm" and gpu.arch:
        return gpu.arch
    if attr in ("major", "minor") and gpu.sm is not None:
        return gpu.sm // 10 if attr == "major" else gpu.sm % 10
    if attr == "name" and gpu.device_name:
        return gpu.device_name
    return unknown(f"the GPU's {attr}")


def _owned(sim: Any, attr: str, value: Any) -> Any:
    """The run's own copy of config.json's `attr` (kb.explain.abstract_values.RunDict), the
    same one for every read of the run while the profile read is the same object (a draft's
    config is read with its own profile in place)."""
    key = f"config.{attr}"
    kept = sim.derived.get(key)
    if kept is None or kept[0] is not sim.profile:
        kept = sim.derived[key] = (sim.profile, run_owned(value))
    return kept[1]


def attention_arch(sim: Any) -> Any:
    """MLA when the version's model_config.py lists the architecture in the test of an
    `if` that sets `attention_arch = AttentionArch.MLA`, else MHA."""
    arch = sim.profile.arch
    if arch is None:
        return unknown("the model architecture")
    mod = sim.module("sglang.srt.configs.model_config")
    if mod is None:
        return unknown("the model's attention architecture (MLA or MHA)")
    sim.reads.add(MODEL)
    member = "MLA" if arch in mla_archs(mod) else "MHA"
    if "AttentionArch" in mod.classes:  # the class's own member (or value)
        return classes.class_attr(sim, classes.class_ref(mod, "AttentionArch"), member)
    return Symbol(f"AttentionArch.{member}")


# the sub-configs SGLang's get_hf_text_config takes as the language model's config of a
# multimodal model (02-01 tries text_config first, 07-01 thinker_config first: they agree
# when config.json holds one of them)
TEXT_CONFIG_KEYS = ("text_config", "llm_config", "language_config", "thinker_config")


def text_config(sim: Any) -> Any:
    """`model_config.hf_text_config` as get_hf_text_config picks it from config.json: the
    one sub-config a multimodal config.json holds (thinker_config's own text_config),
    None for the config itself (none, or a Llava*ForCausalLM, whose top-level config SGLang
    keeps); Unknown when config.json holds several."""
    config = sim.profile.config
    if not isinstance(config, dict):
        return None
    archs = config.get("architectures")
    first = archs[0] if isinstance(archs, list) and archs else None
    if isinstance(first, str) and first.startswith("Llava") and first.endswith("ForCausalLM"):
        return None
    held = [k for k in TEXT_CONFIG_KEYS if isinstance(config.get(k), dict)]
    if not held:
        return None
    if len(held) > 1:
        return unknown("which of config.json's sub-configs SGLang reads as the text config")
    sub = config[held[0]]
    if held[0] == "thinker_config" and isinstance(sub.get("text_config"), dict):
        return sub["text_config"]
    return sub


def _text_attr(sim: Any, attr: str, allow_missing: bool) -> Any:
    sub = text_config(sim)
    if not isinstance(sub, dict):
        return sub if sub is not None else unknown(f"the model's text config ({attr})")
    value = sub.get(attr, MISSING)
    if missing(value) and attr in ("dtype", "torch_dtype"):  # (the parent's, as SGLang sets)
        value = sub.get("torch_dtype" if attr == "dtype" else "dtype", MISSING)
        if missing(value):
            return model_attr(sim, Obj("hf_config"), attr, allow_missing)
    if attr in ("dtype", "torch_dtype"):
        value = torch_dtype(value)
    if missing(value):
        return MISSING if allow_missing else unknown(f"the model's text config ({attr})")
    sim.reads.add(MODEL)
    return value


def batch_attr(sim: Any, attr: str) -> Any:
    """`forward_batch.<attr>`: its attention backend is the ModelRunner's once the load stage
    built it (kb.explain.batch_backend); the rest is the batch's, not known."""
    if attr == "attn_backend" and "runner.attn_backend" in sim.derived:
        if "batch.attn_backend" not in sim.derived:  # (what each batch sets on it unknown)
            built = sim.derived["runner.attn_backend"]
            sim.derived["batch.attn_backend"] = batch_backend.as_the_batch_sees_it(sim, built)
        return sim.derived["batch.attn_backend"]
    if f"batch.{attr}" in sim.derived:  # its mode, its speculative input (batch_forward)
        return sim.derived[f"batch.{attr}"]
    return unknown(f"the batch's {attr}")
