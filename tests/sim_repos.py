"""A synthetic SGLang-like repository for the simulation tests (no SGLang code): an era 2
release whose `__post_init__` calls `_handle_*` methods that read the model's config and the
hardware, and an era 3 release that dispatches into `arg_groups/*_hook.py` functions."""

from __future__ import annotations

import textwrap
from pathlib import Path

from kb.explain.source_modules import Module, parse_module
from tests.fixture_repos import SERVER_ARGS, commit, git, write

UTILS = "python/sglang/srt/utils/common.py"
MODEL_CONFIG = "python/sglang/srt/configs/model_config.py"
ENVIRON = "python/sglang/srt/environ.py"
HOOK = "python/sglang/srt/arg_groups/speculative_hook.py"

# the decorator that fills SGLang's attention backend registry (`ATTENTION_BACKENDS`), as
# the registry fixtures of the load-stage tests share it
REGISTER_ATTENTION_BACKEND = """def register_attention_backend(name):
    def decorator(fn):
        ATTENTION_BACKENDS[name] = fn
        return fn

    return decorator
"""

UTILS_TEXT = """
import functools

import torch


def _check_cuda_device_version(device_capability_majors, cuda_version):
    return torch.cuda.get_device_capability()[0] in device_capability_majors


is_sm90_supported = functools.partial(_check_cuda_device_version, [9], (12, 3))
is_sm100_supported = functools.partial(_check_cuda_device_version, [10], (12, 8))


def is_hip():
    return torch.version.hip is not None


def get_device_memory_capacity(device=None):
    return torch.cuda.mem_get_info()[1]


def check_pkg_version_at_least(name, version):
    return True


def get_quantization_config(hf_config):
    config = getattr(hf_config, "quantization_config", None)
    if config is not None:
        return config.get("quant_method")
    return None
"""

MODEL_CONFIG_TEXT = """
class AttentionArch:
    MLA = "mla"
    MHA = "mha"


class ModelConfig:
    def __init__(self, hf_config):
        if "DeepNetV3ForCausalLM" in hf_config.architectures:
            self.attention_arch = AttentionArch.MLA
        else:
            self.attention_arch = AttentionArch.MHA
"""

ENVIRON_TEXT = """
import os
import warnings


class EnvBool:
    def __init__(self, default):
        self.default = default


class Envs:
    FIXTURE_FORCE_TRITON = EnvBool(False)


envs = Envs()


def _print_deprecated_env(old_name, new_name):
    if old_name in os.environ:
        warnings.warn(f"Environment variable {old_name} is deprecated, use {new_name}")
        os.environ[new_name] = os.environ[old_name]


_print_deprecated_env("FIXTURE_OLD_FORCE_TRITON", "FIXTURE_FORCE_TRITON")
"""

# Era 1: argparse with `default=ServerArgs.x`, the adjustments inline in __post_init__.
ERA1 = """
import argparse
import dataclasses
from typing import Optional

from sglang.srt.utils.common import get_device_memory_capacity, is_hip


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    tp_size: int = 1
    attention_backend: Optional[str] = None
    disable_cuda_graph: bool = False
    enable_torch_compile: bool = False
    mem_fraction_static: Optional[float] = None

    def __post_init__(self):
        if self.attention_backend is None:
            self.attention_backend = "triton" if is_hip() else "flashinfer"
        if self.mem_fraction_static is None:
            if get_device_memory_capacity() > 80 * 1024:
                self.mem_fraction_static = 0.88
            else:
                self.mem_fraction_static = 0.85
        if self.enable_torch_compile:
            assert not self.disable_cuda_graph, "torch.compile needs CUDA graphs"
            if self.tp_size > 2 and get_device_memory_capacity() < 24 * 1024:
                raise ValueError("torch.compile with tp > 2 needs 24 GB per GPU")

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", type=str, required=True, help="Model weights.")
        parser.add_argument(
            "--tp-size", type=int, default=ServerArgs.tp_size, help="Tensor parallel degree."
        )
        parser.add_argument(
            "--attention-backend", type=str, choices=["triton", "flashinfer"],
            default=ServerArgs.attention_backend, help="Attention kernels.",
        )
        parser.add_argument("--disable-cuda-graph", action="store_true", help="No graphs.")
        parser.add_argument("--enable-torch-compile", action="store_true", help="Compile.")
        parser.add_argument(
            "--mem-fraction-static", type=float, default=ServerArgs.mem_fraction_static,
            help="Memory share.",
        )
"""

# Era 2: the order of the handlers matters (the MoE handler reads what the model handler set).
ERA2 = """
import argparse
import dataclasses
from typing import Optional

from sglang.srt.environ import envs
from sglang.srt.utils.common import (
    check_pkg_version_at_least,
    get_device_memory_capacity,
    get_quantization_config,
    is_hip,
    is_sm90_supported,
    is_sm100_supported,
)

MOE_RUNNER_BACKEND_CHOICES = ["auto", "triton", "flashinfer_cutlass", "flashinfer_trtllm"]
MOE_A2A_BACKEND_CHOICES = ["none", "mooncake", "deepep"]


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    tp_size: int = 1
    pp_size: int = 1
    quantization: Optional[str] = None
    attention_backend: Optional[str] = None
    moe_runner_backend: str = "auto"
    moe_a2a_backend: str = "none"
    enable_two_batch_overlap: bool = False
    enable_mixed_chunk: bool = False
    disable_overlap_schedule: bool = False
    disable_shared_experts_fusion: bool = False
    mem_fraction_static: Optional[float] = None

    def __post_init__(self):
        self._handle_gpu_memory()
        self._handle_model_specific_adjustments()
        self._handle_attention_backend()
        self._handle_moe()
        self._handle_pipeline_parallelism()

    def _handle_gpu_memory(self):
        gpu_mem = get_device_memory_capacity()
        if self.mem_fraction_static is None:
            if gpu_mem > 100 * 1024:
                self.mem_fraction_static = 0.85
            else:
                self.mem_fraction_static = 0.8

    def get_model_config(self):
        from sglang.srt.configs.model_config import ModelConfig

        return ModelConfig.from_server_args(self)

    def _handle_model_specific_adjustments(self):
        hf_config = self.get_model_config().hf_config
        model_arch = hf_config.architectures[0]
        if model_arch in ["GlmMoeForCausalLM"]:
            if is_sm100_supported():
                quant_method = get_quantization_config(hf_config)
                if self.quantization is None and quant_method is not None:
                    self.quantization = quant_method
                if (
                    self.quantization == "modelopt_fp4"
                    and self.moe_a2a_backend == "none"
                    and self.moe_runner_backend == "auto"
                ):
                    if check_pkg_version_at_least("flashinfer-python", "0.6.2"):
                        self.moe_runner_backend = "flashinfer_trtllm"

    def _handle_attention_backend(self):
        if self.attention_backend is None:
            if envs.FIXTURE_FORCE_TRITON.get():
                self.attention_backend = "triton"
            elif is_sm100_supported():
                self.attention_backend = "trtllm_mha"
            elif is_sm90_supported():
                self.attention_backend = "fa3"
            elif is_hip():
                self.attention_backend = "aiter"
            else:
                self.attention_backend = "triton"

    def _handle_moe(self):
        if self.moe_runner_backend == "flashinfer_trtllm":
            self.disable_shared_experts_fusion = True
        if self.moe_a2a_backend == "mooncake":
            raise ValueError("mooncake all-to-all needs a mooncake build")
        if self.tp_size > 4 and get_device_memory_capacity() < 40 * 1024:
            raise ValueError("tensor parallel above 4 needs 40 GB per GPU")

    def _handle_pipeline_parallelism(self):
        if self.pp_size > 1:
            self.disable_overlap_schedule = True

    def check_server_args(self):
        if self.pp_size > 1:
            assert (
                self.disable_overlap_schedule and not self.enable_mixed_chunk
            ), "Pipeline parallelism needs the plain scheduler and no mixed chunks."
        if self.enable_two_batch_overlap and self.moe_a2a_backend == "none":
            raise ValueError("Two batch overlap needs an all-to-all backend.")

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", type=str, required=True, help="Model weights.")
        parser.add_argument(
            "--tp-size", "--tensor-parallel-size", type=int, default=ServerArgs.tp_size,
            help="Tensor parallel degree.",
        )
        parser.add_argument(
            "--pp-size", type=int, default=ServerArgs.pp_size, help="Pipeline stages."
        )
        parser.add_argument(
            "--quantization", type=str, default=ServerArgs.quantization, help="Quantization."
        )
        parser.add_argument(
            "--attention-backend", type=str, default=ServerArgs.attention_backend,
            help="Attention kernels.",
        )
        parser.add_argument(
            "--moe-runner-backend", type=str, choices=MOE_RUNNER_BACKEND_CHOICES,
            default=ServerArgs.moe_runner_backend, help="MoE runner backend.",
        )
        parser.add_argument(
            "--moe-a2a-backend", type=str, choices=MOE_A2A_BACKEND_CHOICES,
            default=ServerArgs.moe_a2a_backend, help="MoE all-to-all backend.",
        )
        parser.add_argument(
            "--enable-two-batch-overlap", action="store_true", help="Two batch overlap."
        )
        parser.add_argument("--enable-mixed-chunk", action="store_true", help="Mixed chunks.")
        parser.add_argument(
            "--disable-overlap-schedule", action="store_true", help="No overlap scheduler."
        )
        parser.add_argument(
            "--mem-fraction-static", type=float, default=ServerArgs.mem_fraction_static,
            help="Memory share.",
        )
"""

# Era 3: dataclass fields, and the speculative logic moved into a hook module.
ERA3 = """
import argparse
import dataclasses
from typing import Literal, Optional

from sglang.srt.arg_groups.arg_utils import A, Arg, add_cli_args_from_dataclass


@dataclasses.dataclass
class ServerArgs:
    model_path: A[str, Arg(help="Model weights.")]
    tp_size: A[int, Arg(help="Tensor parallel degree.", aliases=["--tp"])] = 1
    pp_size: A[int, "Pipeline stages."] = 1
    enable_mixed_chunk: A[bool, "Mixed chunks."] = False
    disable_overlap_schedule: A[bool, "No overlap scheduler."] = False
    speculative_algorithm: A[
        Optional[Literal["EAGLE", "DFLASH"]], Arg(help="Speculative algorithm.")
    ] = None
    speculative_num_steps: A[Optional[int], "Draft steps."] = None
    moe_runner_backend: A[
        Literal["auto", "triton", "flashinfer_trtllm"], Arg(help="MoE runner backend.")
    ] = "auto"
    moe_a2a_backend: A[Literal["none", "deepep"], Arg(help="MoE all-to-all.")] = "none"

    def __post_init__(self):
        self._handle_pipeline_parallelism()
        self._handle_model_specific_adjustments()
        from sglang.srt.arg_groups.speculative_hook import handle_speculative_decoding

        handle_speculative_decoding(self)

    def get_model_config(self):
        return None

    def _handle_model_specific_adjustments(self):
        model_arch = self.get_model_config().hf_config.architectures[0]
        if model_arch in ["BigMoeForCausalLM"]:
            from sglang.srt.arg_groups.big_moe_hook import handle_big_moe

            handle_big_moe(self, model_arch)

    def _handle_pipeline_parallelism(self):
        if self.pp_size > 1:
            self.disable_overlap_schedule = True

    def check_server_args(self):
        if self.pp_size > 1:
            assert self.disable_overlap_schedule, "Pipeline parallelism needs no overlap."
        if self.moe_runner_backend == "flashinfer_trtllm" and self.pp_size > 1:
            raise ValueError("flashinfer_trtllm MoE does not support pipeline parallelism.")

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        add_cli_args_from_dataclass(parser, ServerArgs)
"""

HOOK_TEXT = """
from __future__ import annotations


def handle_speculative_decoding(server_args) -> None:
    if server_args.speculative_algorithm is None:
        return
    if server_args.speculative_num_steps is None:
        server_args.speculative_num_steps = 3
    if server_args.speculative_algorithm == "DFLASH":
        _handle_dflash(server_args)


def _handle_dflash(server_args) -> None:
    if server_args.pp_size != 1:
        raise ValueError("DFLASH only supports pp_size == 1.")
"""


BIG_MOE_HOOK = "python/sglang/srt/arg_groups/big_moe_hook.py"
BIG_MOE_HOOK_TEXT = """
from sglang.srt.utils.common import get_device_memory_capacity, is_sm100_supported


def handle_big_moe(server_args, model_arch) -> None:
    if is_sm100_supported() and server_args.moe_runner_backend == "auto":
        server_args.moe_runner_backend = "flashinfer_trtllm"
    if server_args.moe_a2a_backend == "deepep" and get_device_memory_capacity() < 80 * 1024:
        raise ValueError(f"{model_arch} with deepep needs 80 GB per GPU")
"""


def build_sim_repo(root: Path) -> Path:
    """v0.1.0 (era 1), v0.2.0 (era 2 with model/hardware handlers) and v0.3.0 (era 3 with
    hooks)."""
    repo = root / "simrepo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    write(repo, SERVER_ARGS, ERA1)
    write(repo, UTILS, UTILS_TEXT)
    commit(repo, "era 1", "2024-06-01T12:00:00Z", "v0.1.0")
    write(repo, SERVER_ARGS, ERA2)
    write(repo, UTILS, UTILS_TEXT)
    write(repo, MODEL_CONFIG, MODEL_CONFIG_TEXT)
    write(repo, ENVIRON, ENVIRON_TEXT)
    commit(repo, "era 2", "2025-06-01T12:00:00Z", "v0.2.0")
    write(repo, SERVER_ARGS, ERA3)
    write(repo, HOOK, HOOK_TEXT)
    write(repo, BIG_MOE_HOOK, BIG_MOE_HOOK_TEXT)
    write(repo, "python/sglang/srt/arg_groups/arg_utils.py", "A = None\n")
    commit(repo, "era 3", "2026-07-01T12:00:00Z", "v0.3.0")
    return repo


def parsed_modules(files: dict[str, str]) -> dict[str, Module]:
    """path -> the module parsed from its (dedented) text, for the simulator's `modules`
    (the explain tests that run it on synthetic modules without a repository)."""
    out = {}
    for path, text in files.items():
        mod = parse_module(path, textwrap.dedent(text))
        assert mod is not None, path
        out[path] = mod
    return out
