"""The simulator on synthetic SGLang-like modules held in memory: call order, caller
conditions, locals from the profile, undecidable predicates naming their missing fact,
and the bounds that keep hostile code harmless."""

from __future__ import annotations

import ast
import textwrap
from typing import Any

import pytest

from ingest.constraints import extract_constraints
from kb.explain.predicates import (
    NEEDS_CUDA,
    NEEDS_DEVICE_NAME,
    NEEDS_MEMORY,
    Profile,
    ProfileError,
    Unknown,
)
from kb.explain.simulate import Result, Simulator
from kb.explain.source_modules import Module, parse_module
from tests import sim_repos

ARGS = "python/sglang/srt/server_args.py"


def modules(files: dict[str, str]) -> dict[str, Module]:
    out = {}
    for path, text in files.items():
        mod = parse_module(path, textwrap.dedent(text))
        assert mod is not None
        out[path] = mod
    return out


ERA2_FILES = {
    ARGS: sim_repos.ERA2,
    sim_repos.UTILS: sim_repos.UTILS_TEXT,
    sim_repos.MODEL_CONFIG: sim_repos.MODEL_CONFIG_TEXT,
    sim_repos.ENVIRON: sim_repos.ENVIRON_TEXT,
}
ERA2_FIELDS: dict[str, Any] = {
    "model_path": "m",
    "tp_size": 1,
    "pp_size": 1,
    "quantization": None,
    "attention_backend": None,
    "moe_runner_backend": "auto",
    "moe_a2a_backend": "none",
    "enable_two_batch_overlap": False,
    "enable_mixed_chunk": False,
    "disable_overlap_schedule": False,
    "mem_fraction_static": None,
}


def run(files: dict[str, str], fields: dict[str, Any], profile: dict | None = None) -> Result:
    mods = modules(files)
    sim = Simulator(mods.get, mods[ARGS], fields, Profile.parse(profile), given={"model_path"})
    return sim.run()


def changes(result: Result) -> dict[str, Any]:
    return {c.field: c.after for c in result.changes if c.certain}


GLM_FP4_B200 = {"arch": "GlmMoeForCausalLM", "quant": "modelopt_fp4", "sm": 100, "gpus": 8}


def test_handlers_run_in_order_and_later_ones_see_earlier_changes() -> None:
    result = run(ERA2_FILES, ERA2_FIELDS, GLM_FP4_B200)
    called = [name for name, _ in result.calls]
    assert called[:5] == [
        "__post_init__",
        "_handle_gpu_memory",
        "_handle_model_specific_adjustments",
        "_handle_attention_backend",
        "_handle_moe",
    ]
    got = changes(result)
    # the model handler sets the quantization from the config, then the backend;
    # the MoE handler, later, reads that backend and disables the fusion
    assert got["quantization"] == "modelopt_fp4"
    assert got["moe_runner_backend"] == "flashinfer_trtllm"
    assert got["disable_shared_experts_fusion"] is True
    assert got["attention_backend"] == "trtllm_mha"
    trtllm = next(c for c in result.changes if c.field == "moe_runner_backend")
    assert trtllm.path == ARGS
    source = textwrap.dedent(sim_repos.ERA2).splitlines()
    assert 'self.moe_runner_backend = "flashinfer_trtllm"' in source[trtllm.line - 1]
    assert any("is_sm100_supported()" in c for c in trtllm.conditions)
    # predicates are cited to their definitions in the version's own files
    sm100 = result.predicates["is_sm100_supported"]
    assert (sm100.path, sm100.value) == (sim_repos.UTILS, True)
    assert sm100.line is not None and sm100.line > 1


def test_other_hardware_takes_other_branches() -> None:
    hopper = changes(run(ERA2_FILES, ERA2_FIELDS, {**GLM_FP4_B200, "sm": 90, "cuda": "12.4"}))
    assert "moe_runner_backend" not in hopper and "quantization" not in hopper
    assert hopper["attention_backend"] == "fa3"
    rocm = changes(run(ERA2_FILES, ERA2_FIELDS, {"arch": "LlamaForCausalLM", "platform": "rocm"}))
    assert rocm["attention_backend"] == "aiter"


def test_without_a_profile_model_branches_are_unknown_and_say_why() -> None:
    result = run(ERA2_FILES, ERA2_FIELDS)
    backend = result.fields["attention_backend"]
    assert isinstance(backend, Unknown)
    assert any("platform" in n for n in backend.needs)
    assert "moe_runner_backend" not in changes(result)


def test_an_undecidable_predicate_names_its_missing_fact() -> None:
    result = run(ERA2_FILES, {**ERA2_FIELDS, "tp_size": 8}, GLM_FP4_B200)
    check = next(c for c in result.checks if "40 GB" in c.message)
    assert check.outcome == "unknown"
    assert check.needs == (NEEDS_MEMORY,)
    memory = result.fields["mem_fraction_static"]
    assert isinstance(memory, Unknown) and memory.needs == (NEEDS_MEMORY,)
    assert set(memory.options or ()) == {0.85, 0.8}


def test_environment_variables_are_assumed_unset_and_reported() -> None:
    result = run(ERA2_FILES, ERA2_FIELDS, GLM_FP4_B200)
    assert "environment variable FIXTURE_FORCE_TRITON is not set" in result.assumptions.values()
    unknown_env = run(ERA2_FILES, ERA2_FIELDS, {**GLM_FP4_B200, "env": "unknown"})
    assert isinstance(unknown_env.fields["attention_backend"], Unknown)


def test_check_server_args_runs_after_post_init() -> None:
    result = run(ERA2_FILES, {**ERA2_FIELDS, "enable_two_batch_overlap": True}, GLM_FP4_B200)
    (error,) = result.errors
    assert error.kind == "raise" and "all-to-all" in error.message
    assert [name for name, _ in result.calls][-1] == "check_server_args"


def test_a_hook_site_carries_the_dispatchers_condition() -> None:
    files = {ARGS: sim_repos.ERA3, sim_repos.HOOK: sim_repos.HOOK_TEXT}
    fields = {"model_path": "m", "pp_size": 2, "speculative_algorithm": None}
    assert run(files, fields).errors == []
    eagle = run(files, {**fields, "speculative_algorithm": "EAGLE"})
    assert eagle.errors == [] and changes(eagle)["speculative_num_steps"] == 3
    dflash = run(files, {**fields, "speculative_algorithm": "DFLASH"})
    (error,) = dflash.errors
    assert error.path == sim_repos.HOOK
    assert "speculative_algorithm == 'DFLASH'" in error.conditions
    assert ("_handle_dflash", error.conditions[:-1]) in dflash.calls


def test_hostile_code_is_never_run_and_loops_are_bounded(tmp_path: Any) -> None:
    marker = tmp_path / "pwned"
    hostile = f"""
    import os
    os.system("touch {marker}")


    class ServerArgs:
        def __post_init__(self):
            os.system("touch {marker}")
            open("{marker}", "w").write("x")
            while True:
                self.x = self.x + 1
            self.__post_init__()
            for i in range(10**12):
                self.y = i
    """
    result = run({ARGS: hostile}, {"x": 1})
    assert not marker.exists()
    assert result.truncated is None
    assert isinstance(result.fields["x"], Unknown)


def test_profile_parsing() -> None:
    config = {
        "architectures": ["GlmMoeForCausalLM"],
        "quantization_config": {"quant_method": "modelopt_fp4"},
        "model_type": "glm4_moe",
    }
    profile = Profile.parse({"config": config, "sm": "sm100", "gpus": "8"})
    assert profile is not None
    assert (profile.arch, profile.quant, profile.platform, profile.sm, profile.gpus) == (
        "GlmMoeForCausalLM",
        "modelopt_fp4",
        "cuda",
        100,
        8,
    )
    assert profile.hf_attr("model_type") == "glm4_moe"
    assert Profile.parse({}) is None
    assert Profile.parse({"packages": "assume-ok"}) is None
    with pytest.raises(ProfileError):
        Profile.parse({"platform": "tpu"})
    with pytest.raises(ProfileError):
        Profile.parse({"config": "{not json"})


def test_handing_the_server_args_to_code_we_do_not_hold_is_reported() -> None:
    source = """
    from sglang.srt.speculative.registry import lookup


    class ServerArgs:
        def __post_init__(self):
            if self.speculative_algorithm is not None:
                algo = lookup(self.speculative_algorithm)
                algo.validate(self)
    """
    result = run({ARGS: source}, {"speculative_algorithm": "DFLASH"})
    (opaque,) = [c for c in result.checks if c.kind == "opaque"]
    assert "algo.validate()" in opaque.message and "speculative_algorithm" in opaque.reads
    assert result.errors == []


def test_environment_variables_the_command_sets_are_used() -> None:
    mods = modules(ERA2_FILES)
    sim = Simulator(
        mods.get,
        mods[ARGS],
        ERA2_FIELDS,
        Profile.parse(GLM_FP4_B200),
        environ={"FIXTURE_FORCE_TRITON": "1"},
    )
    result = sim.run()
    assert changes(result)["attention_backend"] == "triton"
    assert "environment variable FIXTURE_FORCE_TRITON=1" in result.assumptions.values()


# --- era 2 before ModelConfig: `self.get_hf_config().architectures[0]` -------------------
# (modelled on v0.5.x: a ServerArgs method returns SGLang's get_config(), which loads the
# config with transformers' AutoConfig and then refines it in branches of its own)
HF_UTILS = "python/sglang/srt/utils/hf_transformers_utils.py"
HF_UTILS_TEXT = """
from transformers import AutoConfig

_CONFIG_REGISTRY = {}


def get_config(model, trust_remote_code, revision=None, model_override_args=None, **kwargs):
    if model.endswith(".gguf"):
        kwargs["gguf_file"] = model
    try:
        config = AutoConfig.from_pretrained(model, trust_remote_code=trust_remote_code)
    except ValueError as e:
        raise e
    if config.model_type in _CONFIG_REGISTRY:
        config = _CONFIG_REGISTRY[config.model_type].from_pretrained(model)
    if model_override_args:
        config.update(model_override_args)
    return config
"""
HF_ARGS = """
import json
from dataclasses import dataclass
from typing import Optional

from sglang.srt.utils import is_sm90_supported
from sglang.srt.utils.hf_transformers_utils import get_config


def warn_deprecated(message: str):
    logger.warning(f"\\033[33m{message}\\033[0m")


@dataclass
class ServerArgs:
    model_path: str
    attention_backend: Optional[str] = None
    kv_cache_dtype: str = "auto"
    json_model_override_args: str = "{}"
    enable_old_moe: bool = False
    ep_size: int = 1
    tp_size: int = 1

    def __post_init__(self):
        if self.enable_old_moe:
            self.ep_size = self.tp_size
            warn_deprecated(
                "--enable-old-moe is deprecated. Please set `--ep-size` instead."
            )
        self._handle_model_specific_adjustments()

    def get_hf_config(self):
        hf_config = get_config(
            self.model_path,
            trust_remote_code=False,
            model_override_args=json.loads(self.json_model_override_args),
        )
        return hf_config

    def _handle_model_specific_adjustments(self):
        hf_config = self.get_hf_config()
        model_arch = hf_config.architectures[0]
        if model_arch in ["DeepseekV3ForCausalLM"]:
            if self.kv_cache_dtype == "auto":
                self.kv_cache_dtype = "bf16"
        elif model_arch in ["GptOssForCausalLM"]:
            if self.attention_backend is None and is_sm90_supported():
                self.attention_backend = "fa3"
"""
HF_FILES = {ARGS: HF_ARGS, HF_UTILS: HF_UTILS_TEXT, sim_repos.UTILS: sim_repos.UTILS_TEXT}
HF_FIELDS: dict[str, Any] = {
    "model_path": "m",
    "attention_backend": None,
    "kv_cache_dtype": "auto",
    "json_model_override_args": "{}",
    "enable_old_moe": False,
    "ep_size": 1,
    "tp_size": 8,
}


def test_a_method_returning_the_hf_config_reads_the_profile() -> None:
    gpt_oss = run(HF_FILES, HF_FIELDS, {"arch": "GptOssForCausalLM", "gpu": "H100", "gpus": 8})
    assert changes(gpt_oss) == {"attention_backend": "fa3"}
    # the other architecture's branch is not taken: no "bfloat16 or bf16" guess
    assert all(c.field != "kv_cache_dtype" for c in gpt_oss.changes)
    llama = run(HF_FILES, HF_FIELDS, {"arch": "LlamaForCausalLM", "sm": 90})
    assert llama.changes == []
    # a pasted config.json answers the same way
    config = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3"}
    assert changes(run(HF_FILES, HF_FIELDS, {"config": config})) == {"kv_cache_dtype": "bf16"}
    # without a profile the missing fact is the architecture, not the loader's internals
    unknown = run(HF_FILES, HF_FIELDS)
    needs = {n for c in unknown.changes for n in c.needs}
    assert "the model architecture" in needs
    assert not any("AutoConfig" in n or "from_pretrained" in n for n in needs)


def test_a_warning_through_a_helper_cites_the_call_and_its_text() -> None:
    result = run(HF_FILES, {**HF_FIELDS, "enable_old_moe": True}, {"arch": "LlamaForCausalLM"})
    (warning,) = [c for c in result.checks if c.kind == "warning"]
    assert warning.outcome == "fired"
    assert warning.message == "--enable-old-moe is deprecated. Please set `--ep-size` instead."
    lines = textwrap.dedent(HF_ARGS).splitlines()
    assert lines[warning.line - 1].strip() == "warn_deprecated("
    assert warning.path == ARGS and warning.end_line == warning.line + 2


def test_ingested_warnings_drop_terminal_colour_codes() -> None:
    tree = ast.parse(
        textwrap.dedent(
            """
            class ServerArgs:
                def __post_init__(self):
                    if self.enable_old_moe:
                        logger.warning(f"\\033[33mNOTE: {self.tp_size} is ignored\\033[0m")
            """
        )
    )
    (site,) = extract_constraints(tree, ARGS)
    assert site["kind"] == "warning" and site["message"] == "NOTE: {self.tp_size} is ignored"


def test_ingested_else_of_a_negated_test_reads_plainly() -> None:
    # `if not X: ... else: ...` and `assert not X` record X, not `not (not X)` (SGLang
    # v0.5.6's _handle_hicache: "... and not (not self.use_mla_backend())").
    tree = ast.parse(
        textwrap.dedent(
            """
            class ServerArgs:
                def __post_init__(self):
                    if not self.use_mla_backend():
                        self.decode_attention_backend = "flashinfer"
                    else:
                        self.decode_attention_backend = "triton"
                    assert not self.enable_x, "no x"
                    if not self.enable_y:
                        return
                    raise ValueError("y")
            """
        )
    )
    sites = extract_constraints(tree, ARGS)
    assert [(s["kind"], s["conditions"]) for s in sites] == [
        ("override", ["not self.use_mla_backend()"]),
        ("override", ["self.use_mla_backend()"]),
        ("assert", ["self.enable_x"]),
        ("raise", ["self.enable_y"]),
    ]


def test_the_else_of_a_negated_test_reads_plainly_in_the_simulation() -> None:
    files = {
        ARGS: textwrap.dedent(
            """
            class ServerArgs:
                def __post_init__(self):
                    if not self.enable_y:
                        self.attention_backend = "a"
                    else:
                        self.attention_backend = "b"
                    assert not self.enable_z, "no z"
            """
        )
    }
    result = run(files, {"enable_y": True, "enable_z": True, "attention_backend": None})
    (change,) = [c for c in result.changes if c.field == "attention_backend"]
    assert (change.after, change.conditions) == ("b", ("enable_y",))
    (check,) = [c for c in result.checks if c.message == "no z"]
    assert "enable_z" in check.conditions and not any("not (" in c for c in check.conditions)


# --- the machine: a catalog GPU, its memory, device name and CUDA version -------------------

MACHINE_ARGS = """
import dataclasses
from typing import Optional

import torch

from sglang.srt.utils.common import (
    get_device_memory_capacity,
    get_device_name,
    is_hopper_with_cuda_12_3,
    is_sm90_supported,
)


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    attention_backend: Optional[str] = None
    chunked_prefill_size: Optional[int] = None
    mem_fraction_static: Optional[float] = None
    enable_fusion: bool = False
    linear_backend: Optional[str] = None

    def __post_init__(self):
        gpu_mem = get_device_memory_capacity()
        self._handle_gpu_memory_settings(gpu_mem)
        device_name = get_device_name()
        is_h20 = device_name and "H20" in device_name and "H200" not in device_name
        if is_sm90_supported() and not is_h20:
            self.enable_fusion = True
        if self.attention_backend is None:
            archs = getattr(self.get_model_config().hf_config, "architectures", None)
            if not isinstance(archs, list) or not archs:
                self.attention_backend = "triton"
            elif is_hopper_with_cuda_12_3():
                self.attention_backend = "fa3"
            else:
                self.attention_backend = "flashinfer"
        if self.attention_backend == "fa3":
            self.page_size = 1
        cuda = torch.version.cuda
        major = int(cuda.split(".")[0]) if cuda is not None else 0
        capability = torch.cuda.get_device_capability()[0]
        if self.linear_backend == "flashinfer" and capability >= 10 and major < 13:
            raise ValueError("flashinfer linear attention on SM100+ needs CUDA 13")

    def get_model_config(self):
        from sglang.srt.configs.model_config import ModelConfig

        return ModelConfig.from_server_args(self)

    def _handle_gpu_memory_settings(self, gpu_mem):
        if gpu_mem < 90 * 1024:
            self.chunked_prefill_size = 8192
        else:
            self.chunked_prefill_size = 16384
        self.mem_fraction_static = round((gpu_mem - 10 * 1024) / gpu_mem, 3)
"""
MACHINE_FILES = {ARGS: MACHINE_ARGS, sim_repos.UTILS: sim_repos.UTILS_TEXT}
MACHINE_FIELDS: dict[str, Any] = {
    "model_path": "m",
    "attention_backend": None,
    "chunked_prefill_size": None,
    "mem_fraction_static": None,
    "enable_fusion": False,
    "linear_backend": None,
}
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}


def machine(profile: dict[str, Any], **fields: Any) -> Result:
    return run(MACHINE_FILES, {**MACHINE_FIELDS, **fields}, {"config": LLAMA, **profile})


def test_a_catalog_gpu_gives_its_sm_platform_and_memory() -> None:
    b200 = Profile.parse({"gpu": "b200"})
    assert b200 is not None and (b200.gpu, b200.platform, b200.sm) == ("B200", "cuda", 100)
    assert b200.memory_mib() == (183359.0, None)  # nvidia-smi's total, on record
    got = changes(machine({"gpu": "B200"}))
    assert got["chunked_prefill_size"] == 16384
    assert got["mem_fraction_static"] == round((183359 - 10240) / 183359, 3)
    h100 = changes(machine({"gpu": "H100"}))
    assert h100["chunked_prefill_size"] == 8192


def test_explicit_gpu_facts_override_the_catalogs() -> None:
    more = changes(machine({"gpu": "H100", "gpu_mem_gb": 141}))
    assert more["chunked_prefill_size"] == 16384  # 141 GB × 1024 MiB, not the H100's 80
    sm = Profile.parse({"gpu": "H100", "sm": 100})
    assert sm is not None and sm.sm == 100
    older = changes(machine({"gpu": "H100", "cuda": "12.1"}))
    assert older["attention_backend"] == "flashinfer"  # is_hopper_with_cuda_12_3: 12.1 < 12.3


def test_an_unknown_gpu_is_unusable_and_names_close_ones() -> None:
    with pytest.raises(ProfileError, match=r"Unknown GPU 'H1OO'\. Did you mean H100 80GB"):
        Profile.parse({"gpu": "H1OO"})
    with pytest.raises(ProfileError, match="cuda must be a version"):
        Profile.parse({"gpu": "H100", "cuda": "twelve"})


def test_without_memory_the_gpu_memory_branch_stays_unknown_and_says_which_input() -> None:
    result = machine({"sm": 90, "cuda": "12.4"})
    size = result.fields["chunked_prefill_size"]
    assert isinstance(size, Unknown) and size.needs == (NEEDS_MEMORY,)
    assert set(size.options or ()) == {8192, 16384}


def test_memory_without_a_record_of_the_total_is_an_assumption() -> None:
    result = machine({"gpu": "B300"})  # 288 GB; no nvidia-smi total on record
    change = next(c for c in result.changes if c.field == "chunked_prefill_size")
    assert change.after == 16384
    assert "<assumed:gpu:memory>" in change.inputs
    assert "288 GB × 1024" in result.assumptions["gpu:memory"]


def test_the_device_name_decides_the_h20_rule() -> None:
    assert changes(machine({"gpu": "H100"}))["enable_fusion"] is True
    assert "enable_fusion" not in changes(machine({"gpu": "H20"}))
    assert changes(machine({"gpu": "H200"}))["enable_fusion"] is True  # "H200" is no H20
    # an SM alone does not say which GPU it is
    fusion = machine({"sm": 90, "cuda": "12.4"}).fields["enable_fusion"]
    assert isinstance(fusion, Unknown) and fusion.needs == (NEEDS_DEVICE_NAME,)


def test_the_cuda_version_decides_the_hopper_rule_and_the_catalogs_is_an_assumption() -> None:
    given = machine({"gpu": "H100", "cuda": "12.4"})
    fa3 = next(c for c in given.changes if c.field == "attention_backend")
    assert fa3.after == "fa3" and "<gpu>" in fa3.inputs and not given.assumptions.get("gpu:cuda")
    typical = machine({"gpu": "H100"})
    fa3 = next(c for c in typical.changes if c.field == "attention_backend")
    assert fa3.after == "fa3" and "<assumed:gpu:cuda>" in fa3.inputs
    assert typical.assumptions["gpu:cuda"].startswith(
        "CUDA 12.6, the catalog's typical version for H100 80GB"
    )
    # a field set from it carries the assumption on (page_size reads attention_backend)
    page = next(c for c in typical.changes if c.field == "page_size")
    assert "<assumed:gpu:cuda>" in page.inputs
    # no CUDA version at all: the branch is unknown, naming the input that decides it
    backend = machine({"sm": 90}).fields["attention_backend"]
    assert isinstance(backend, Unknown) and backend.needs == (NEEDS_CUDA,)
    assert set(backend.options or ()) == {"fa3", "flashinfer"}
    # sm100 needs CUDA >= 12.8 to run at all: is_sm100_supported's floor needs no version
    assert run(ERA2_FILES, ERA2_FIELDS, {"sm": 100}).predicates["is_sm100_supported"].value


def test_isinstance_checks_the_type_it_names() -> None:
    # is_fa3_default_architecture's `isinstance(architectures, list)` on a config's list
    assert changes(machine({"gpu": "H100", "cuda": "12.4"}))["attention_backend"] == "fa3"
    assert changes(machine({"gpu": "H100", "config": {"architectures": "Llama"}}))[
        "attention_backend"
    ] == ("triton")


def test_no_error_from_a_guard_decided_by_an_assumption_or_not_at_all() -> None:
    command = {"linear_backend": "flashinfer"}
    assumed = machine({"gpu": "B200"}, **command)  # the catalog's typical CUDA 12.9
    check = next(c for c in assumed.checks if "CUDA 13" in c.message)
    assert check.outcome == "assumed" and assumed.errors == []
    unknown_cuda = machine({"sm": 100}, **command)
    check = next(c for c in unknown_cuda.checks if "CUDA 13" in c.message)
    assert check.outcome == "unknown" and unknown_cuda.errors == []
    given = machine({"gpu": "B200", "cuda": "12.9"}, **command)
    assert [e.message for e in given.errors] == [
        "ValueError: flashinfer linear attention on SM100+ needs CUDA 13"
    ]
    assert machine({"gpu": "B200", "cuda": "13.0"}, **command).errors == []
    assert machine({"gpu": "H100", "cuda": "12.9"}, **command).errors == []  # sm90


NESTED_LOOPS = """
class ServerArgs:
    def __post_init__(self):
        self.first = 1
        for i in [{items}]:
            for j in [{items}]:
                for k in [{items}]:
                    self.x = i
        self.last = 2
"""


def test_a_run_stops_at_its_step_budget_and_says_so() -> None:
    """64³ loop iterations: the run stops at MAX_STEPS statements, or sooner at what a
    shared budget has left, and spends that budget."""
    from kb.explain.simulate import MAX_STEPS, Budget

    code = NESTED_LOOPS.format(items=", ".join(map(str, range(64))))
    result = run({ARGS: code}, {})
    assert result.truncated == f"budget exhausted after {MAX_STEPS:,} statements"
    assert result.steps == MAX_STEPS + 1
    assert result.fields["first"] == 1 and "last" not in result.fields
    mods = modules({ARGS: code})
    budget = Budget(500)
    cut = Simulator(mods.get, mods[ARGS], {}, budget=budget).run()
    assert cut.truncated == "budget exhausted after 500 statements"
    assert budget.exhausted
    assert Simulator(mods.get, mods[ARGS], {}, budget=budget).run().steps == 1  # none left


def test_sequences_built_from_command_values_are_bounded() -> None:
    """`[0] * dp_size` with a huge dp_size: unknown, not a billion-item list."""
    code = """
    class ServerArgs:
        def __post_init__(self):
            self.slots = [0] * self.dp_size
            self.text = "x" * self.dp_size
            self.small = [0] * 3 + [1]
    """
    result = run({ARGS: code}, {"dp_size": 10**9})
    assert isinstance(result.fields["slots"], Unknown)
    assert isinstance(result.fields["text"], Unknown)
    assert result.fields["small"] == [0, 0, 0, 1]


def test_a_range_of_batch_sizes_is_computed_and_a_huge_one_is_not() -> None:
    code = """
    class ServerArgs:
        def __post_init__(self):
            self.sizes = [1, 2] + list(range(8, self.max_bs + 1, 8))
            self.top = max(self.sizes)
            self.huge = len(list(range(self.dp_size)))
    """
    result = run({ARGS: code}, {"max_bs": 32, "dp_size": 10**9})
    assert result.fields["sizes"] == [1, 2, 8, 16, 24, 32]
    assert result.fields["top"] == 32
    assert isinstance(result.fields["huge"], Unknown)


# --- a raise under a guard the run could not decide -------------------------------------
# (modelled on snapshot-2026-07-01: an architecture branch calls a helper that asserts on a
# flag the command gave, which SGLang may change on a platform not given (so it is known only
# as "likely"); an earlier branch may have returned)
GUARDED_ARGS = """
from dataclasses import dataclass

from sglang.srt.utils import is_hip


@dataclass
class ServerArgs:
    model_path: str
    page_size: int = 1

    def __post_init__(self):
        if is_hip():
            self.page_size = 1
        self._handle_model_specific_adjustments()

    def get_model_config(self):
        return None

    def _handle_model_specific_adjustments(self):
        hf_config = self.get_model_config().hf_config
        model_arch = hf_config.architectures[0]
        if model_arch in ["EarlyArch"] and is_hip():
            return
        if model_arch in ["HybridArch"]:
            self._handle_hybrid_cache(model_arch)

    def _handle_hybrid_cache(self, model_arch):
        assert self.page_size in (1, None), "hybrid cache only supports page_size=1."
"""
GUARDED_FILES = {ARGS: GUARDED_ARGS, sim_repos.UTILS: sim_repos.UTILS_TEXT}


def test_a_raise_in_a_method_called_from_an_undecided_branch_is_not_an_error() -> None:
    fields = {"model_path": "m", "page_size": 64}
    mods = modules(GUARDED_FILES)
    result = Simulator(mods.get, mods[ARGS], fields, given={"model_path", "page_size"}).run()
    check = next(c for c in result.checks if "page_size=1" in c.message)
    assert result.errors == []
    assert check.outcome == "unknown"  # not "likely": the architecture has no likely value
    assert "the model architecture" in check.needs
    # the architecture decides it: an error for the hybrid one, nothing for another
    hybrid = run(GUARDED_FILES, fields, {"arch": "HybridArch", "platform": "cuda"})
    assert [c.message for c in hybrid.errors] == ["hybrid cache only supports page_size=1."]
    other = run(GUARDED_FILES, fields, {"arch": "LlamaForCausalLM", "platform": "cuda"})
    assert other.errors == []
    assert all(c.outcome != "fired" for c in other.checks if "page_size" in c.message)


# --- a package the profile assumes installed: every package predicate says so ---------
PACKAGE_ARGS = """
from dataclasses import dataclass

from sglang.srt.utils import is_triton_kernels_available


@dataclass
class ServerArgs:
    model_path: str
    moe_runner_backend: str = "auto"
    enable_old_kernels: bool = False

    def __post_init__(self):
        if self.moe_runner_backend == "auto" and is_triton_kernels_available():
            self.moe_runner_backend = "triton_kernel"
        if self.enable_old_kernels and is_triton_kernels_available():
            raise ValueError("old kernels clash with triton_kernels.")
"""
PACKAGE_UTILS = """
def is_triton_kernels_available():
    return False
"""


def test_a_package_predicate_states_its_assumption() -> None:
    files = {ARGS: PACKAGE_ARGS, sim_repos.UTILS: PACKAGE_UTILS}
    fields = {"model_path": "m", "moe_runner_backend": "auto", "enable_old_kernels": True}
    result = run(files, fields, {"platform": "cuda"})
    assert result.assumptions == {"pkg:triton_kernels": "triton_kernels is installed"}
    (change,) = result.changes
    assert change.after == "triton_kernel"
    assert "<assumed:pkg:triton_kernels>" in change.inputs | change.reads
    # the profile's `packages: assume-ok` (the default) states it: a raise resting on it is
    # an error, whose inputs name the assumption
    (check,) = [c for c in result.checks if c.kind == "raise"]
    assert check.outcome == "fired"
    clash = "ValueError: old kernels clash with triton_kernels."
    assert [c.message for c in result.errors] == [clash]
    assert "<assumed:pkg:triton_kernels>" in check.reads
    # without the assumption the package, and what it decides, stay unknown
    unsure = run(files, fields, {"platform": "cuda", "packages": "unknown"})
    assert unsure.assumptions == {}
    assert isinstance(unsure.fields["moe_runner_backend"], Unknown)
    assert "the installed version of triton_kernels" in unsure.fields["moe_runner_backend"].needs


# --- a registry list that callers fill at run time (snapshot-2026-05-01's linear-attention
# model registry: empty in the source, filled only by code outside SGLang's tree) ---------
REGISTRY = "python/sglang/srt/configs/fixture_registry.py"
REGISTRY_TEXT = """
from dataclasses import dataclass, field


@dataclass
class Spec:
    arch_names: list = field(default_factory=list)


_REGISTRY: list[Spec] = []


def register(spec):
    _REGISTRY.append(spec)


def spec_by_arch(arch_name):
    for spec in _REGISTRY:
        if arch_name in spec.arch_names:
            return spec
    return None
"""
REGISTRY_ARGS = """
from dataclasses import dataclass

from sglang.srt.configs.fixture_registry import spec_by_arch


@dataclass
class ServerArgs:
    model_path: str
    disable_overlap_schedule: bool = False

    def __post_init__(self):
        if spec_by_arch("HybridArch") is not None:
            self.disable_overlap_schedule = True
"""


def test_a_registry_filled_at_run_time_holds_its_source_entries_as_an_assumption() -> None:
    files = {ARGS: REGISTRY_ARGS, REGISTRY: REGISTRY_TEXT}
    result = run(files, {"model_path": "m", "disable_overlap_schedule": False})
    assert result.fields["disable_overlap_schedule"] is False
    (words,) = result.assumptions.values()
    assert "_REGISTRY" in words and "registered" in words
    # without the registry's module the spec stays unknown, and says which call
    result = run({ARGS: REGISTRY_ARGS}, {"model_path": "m", "disable_overlap_schedule": False})
    value = result.fields["disable_overlap_schedule"]
    assert isinstance(value, Unknown) and "spec_by_arch" in "; ".join(value.needs)


PARSERS = "python/sglang/srt/configs/fixture_parsers.py"
PARSERS_TEXT = """
_PARSERS: dict = {}


def register_parser(name):
    def wrapper(cls):
        _PARSERS[name] = cls
        return cls

    return wrapper


def get_parser(name):
    if name not in _PARSERS:
        raise ValueError(f"Unknown parser {name!r}.")
    return _PARSERS[name]()
"""
PARSERS_ARGS = """
from dataclasses import dataclass

from sglang.srt.configs.fixture_parsers import get_parser


@dataclass
class ServerArgs:
    model_path: str

    def __post_init__(self):
        get_parser("hf")
"""


def test_an_empty_table_filled_by_registrations_elsewhere_is_unknown_not_empty() -> None:
    """The parsers register themselves from other modules when those load: `"hf" not in
    _PARSERS` is not decided here, so its raise is not an error."""
    result = run({ARGS: PARSERS_ARGS, PARSERS: PARSERS_TEXT}, {"model_path": "m"})
    (check,) = [c for c in result.checks if c.kind == "raise"]
    assert check.outcome == "unknown" and "_PARSERS" in "; ".join(check.needs)
