"""A synthetic SGLang-shaped repository for requirements in a sentence and reads through a
chain (issue 30): a MoE runner backend whose checks sit in an elif chain on the model
architecture, and an FP4 GEMM backend read once into a global (through a local a deprecated
environment variable may override), returned by a getter that layer files call. Made-up
flags and code, modelled on SGLang's shapes.
"""

from __future__ import annotations

from pathlib import Path

from tests.fixture_repos import SERVER_ARGS, commit, git, write

SRT = "python/sglang/srt/"
FP4_UTILS = SRT + "layers/quantization/fp4_utils.py"
FP4_LINEAR = SRT + "layers/quantization/fp4_linear.py"

ARGS = """
import argparse
import dataclasses
from typing import Optional

RUNNER_CHOICES = ["auto", "triton", "fast_cutlass", "fast_trt"]
FP4_CHOICES = ["auto", "fast_cudnn", "fast_cutlass"]


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    tp_size: int = 1
    ep_size: int = 1
    quantization: Optional[str] = None
    device: str = "cuda"
    moe_runner_backend: str = "auto"
    moe_a2a_backend: str = "none"
    fp4_gemm_runner_backend: str = "auto"

    def __post_init__(self):
        self._handle_moe()

    def _handle_moe(self):
        model_arch = self.get_model_arch()
        if model_arch in ["AlphaForCausalLM"]:
            self.ep_size = 1
        elif "Llama9" in model_arch and self.device != "cpu":
            self.tp_size = 1
        elif self.moe_runner_backend == "fast_cutlass":
            assert self.ep_size in [1, self.tp_size], "expert parallel size must be 1 or tp"
        if self.moe_runner_backend == "fast_cutlass":
            if not (self.quantization in ["fp4", "fp8", None]):
                raise ValueError("fast_cutlass runs fp4 or fp8 weights only")
        if self.moe_runner_backend == "fast_trt" and not is_sm100_supported():
            raise ValueError("fast_trt needs an SM100 GPU")
        if self.moe_a2a_backend == "fused" and not (self.moe_runner_backend in ["fast_cutlass"]):
            raise ValueError("the fused all-to-all runs with fast_cutlass only")

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", type=str, required=True, help="Weights.")
        parser.add_argument("--tp-size", type=int, default=1, help="TP.")
        parser.add_argument("--ep-size", type=int, default=1, help="EP.")
        parser.add_argument("--device", type=str, default="cuda", help="Device.")
        parser.add_argument(
            "--quantization", type=str, choices=["fp4", "fp8", "awq"], help="Weights."
        )
        parser.add_argument(
            "--moe-runner-backend",
            type=str,
            choices=RUNNER_CHOICES,
            default="auto",
            help="MoE runner.",
        )
        parser.add_argument(
            "--moe-a2a-backend",
            type=str,
            choices=["none", "fused"],
            default="none",
            help="MoE all-to-all.",
        )
        parser.add_argument(
            "--fp4-gemm-backend",
            type=str,
            dest="fp4_gemm_runner_backend",
            choices=FP4_CHOICES,
            default="auto",
            help="FP4 GEMM runner: 'auto' (default, selects between fast_cudnn/fast_cutlass "
            "by CUDA version), 'fast_cudnn' (cuDNN), 'fast_cutlass' (CUTLASS).",
        )
"""

FP4_UTILS_TEXT = """
from enum import Enum

from sglang.srt.environ import envs


class Fp4GemmRunnerBackend(Enum):
    AUTO = "auto"
    FAST_CUDNN = "fast_cudnn"
    FAST_CUTLASS = "fast_cutlass"

    def is_auto(self) -> bool:
        return self == Fp4GemmRunnerBackend.AUTO

    def is_fast_cudnn(self) -> bool:
        return self == Fp4GemmRunnerBackend.FAST_CUDNN

    def kernel_name(self) -> str:
        return self.value.removeprefix("fast_")


FP4_GEMM_RUNNER_BACKEND = None


def initialize_fp4_gemm_config(server_args) -> None:
    global FP4_GEMM_RUNNER_BACKEND

    backend = server_args.fp4_gemm_runner_backend
    if envs.OLD_FP4_BACKEND.is_set():
        backend = envs.OLD_FP4_BACKEND.get()

    FP4_GEMM_RUNNER_BACKEND = Fp4GemmRunnerBackend(backend)


def get_fp4_gemm_runner_backend() -> Fp4GemmRunnerBackend:
    global FP4_GEMM_RUNNER_BACKEND
    if FP4_GEMM_RUNNER_BACKEND is None:
        FP4_GEMM_RUNNER_BACKEND = Fp4GemmRunnerBackend.AUTO
    return FP4_GEMM_RUNNER_BACKEND
"""

FP4_LINEAR_TEXT = """
from sglang.srt.layers.quantization.fp4_utils import get_fp4_gemm_runner_backend


def fp4_gemm(x):
    fp4_backend = get_fp4_gemm_runner_backend()
    kernel = (
        fp4_backend.kernel_name()
        if not fp4_backend.is_auto()
        else "cutlass"
    )
    return run_kernel(x, kernel)


def prepare_weights(w):
    if get_fp4_gemm_runner_backend().is_fast_cudnn():
        return shuffle(w)
    return w
"""


def build_requirements_repo(root: Path) -> Path:
    repo = root / "requirements"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    write(repo, SERVER_ARGS, ARGS)
    write(repo, FP4_UTILS, FP4_UTILS_TEXT)
    write(repo, FP4_LINEAR, FP4_LINEAR_TEXT)
    commit(repo, "requirements", "2026-01-15T12:00:00Z", "v1.0.0")
    return repo
