"""Synthetic SGLang-shaped git repositories, built by the tests with plain git.

They are modelled on the shapes of SGLang's real flag code in its three eras (argparse calls,
choices constants extended by hooks, annotated dataclass fields, hook modules), with made-up
flags and text. Nothing here is copied from SGLang.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

SERVER_ARGS = "python/sglang/srt/server_args.py"

# A marker file that the hostile server_args.py would create if anything imported it.
PWNED_ENV = "FLAGATLAS_FIXTURE_PWNED"

ERA1_SERVER_ARGS = '''
"""Server arguments (era 1 shape)."""

import argparse
import dataclasses
from typing import Optional


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    port: int = 30000
    tp_size: int = 1
    dtype: str = "auto"
    mem_fraction_static: Optional[float] = None
    disable_cuda_graph: bool = False
    schedule_policy: str = "lpm"

    def __post_init__(self):
        if self.mem_fraction_static is None:
            if self.tp_size >= 4:
                self.mem_fraction_static = 0.8
            else:
                self.mem_fraction_static = 0.9
        if self.tp_size > 1:
            self.disable_cuda_graph = True
        assert self.port > 0, "port must be positive"

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        # Model and tokenizer
        parser.add_argument(
            "--model-path",
            type=str,
            help="Path of the model weights.",
            required=True,
        )
        parser.add_argument(
            "--dtype",
            type=str,
            default=ServerArgs.dtype,
            choices=["auto", "half", "bfloat16"],
            help="Data type of the weights. "
            "'auto' picks the type from the config.",
        )

        # Parallelism
        parser.add_argument(
            "--tensor-parallel-size",
            "--tp-size",
            type=int,
            default=ServerArgs.tp_size,
            help="Tensor parallel degree.",
        )
        # Note: the port must be free.
        parser.add_argument("--port", type=int, default=ServerArgs.port, help="HTTP port.")
        parser.add_argument(
            "--mem-fraction-static",
            type=float,
            default=ServerArgs.mem_fraction_static,
            help="Fraction of memory for static allocation.",
        )
        parser.add_argument(
            "--disable-cuda-graph",
            action="store_true",
            help="Turn graph capture off.",
        )
        # Scheduling
        parser.add_argument(
            "--schedule-policy",
            type=str,
            default=ServerArgs.schedule_policy,
            choices=["lpm", "fcfs", "random"],
            help="Scheduling policy.",
        )

    @classmethod
    def from_cli_args(cls, args: argparse.Namespace):
        args.tp_size = args.tensor_parallel_size
        attrs = [attr.name for attr in dataclasses.fields(cls)]
        return cls(**{attr: getattr(args, attr) for attr in attrs})
'''

ERA1_RUNNER = """
global_server_args_dict = {}


class ModelRunner:
    def __init__(self, server_args):
        self.server_args = server_args
        if not self.server_args.disable_cuda_graph:
            self.capture()
        # TODO: read server_args.port here (a mention in a comment, not a read)
        if global_server_args_dict["dtype"] == "half":
            self.half = True
        if server_args.schedule_policy in ("fcfs", "random"):
            self.simple = True
"""

ERA2_SERVER_ARGS = '''
"""Server arguments (era 2 shape)."""

import argparse
import dataclasses
import logging
from typing import List, Optional

from sglang.srt.lora.utils import TARGET_MODULES

logger = logging.getLogger(__name__)

ATTENTION_BACKEND_CHOICES = ["triton", "flashinfer", "fa3"]

MOE_RUNNER_BACKEND_CHOICES = [
    "auto",
    "triton",
    "flashinfer_cutlass",
    "flashinfer_trtllm",
]

FP4_GEMM_RUNNER_BACKEND_CHOICES = ["auto", "flashinfer_cutlass", "flashinfer_cudnn"]


def add_attention_backend_choices(choices):
    ATTENTION_BACKEND_CHOICES.extend(choices)


def add_moe_runner_backend_choices(choices):
    MOE_RUNNER_BACKEND_CHOICES.extend(choices)


class DeprecatedAction(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        raise ValueError(self.help)


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    tp_size: int = 1
    pp_size: int = 1
    attention_backend: Optional[str] = None
    moe_runner_backend: str = "auto"
    moe_a2a_backend: str = "none"
    fp4_gemm_runner_backend: str = "auto"
    enable_two_batch_overlap: bool = False
    disable_overlap_schedule: bool = False
    enable_fast_path: bool = False
    lora_target_modules: Optional[List[str]] = None
    chunk_size: int = 8192

    def __post_init__(self):
        self._handle_pipeline_parallelism()
        self._handle_moe()
        self.check_server_args()

    def _handle_pipeline_parallelism(self):
        if self.pp_size > 1:
            self.disable_overlap_schedule = True
            logger.warning("Pipeline parallelism turns overlap scheduling off.")

    def _handle_moe(self):
        if self.moe_runner_backend == "flashinfer_trtllm":
            if self.tp_size > 1:
                if self.chunk_size > 4096:
                    self.chunk_size = 4096
            else:
                self.enable_fast_path = True
        if self.moe_runner_backend == "flashinfer_cutlass" and detect_gpu() == "sm100":
            self.enable_fast_path = True

    def check_server_args(self):
        if self.chunk_size < 0:
            raise ValueError("--chunk-size must not be negative")
        if self.enable_two_batch_overlap and self.moe_a2a_backend == "none":
            raise ValueError(
                "Two batch overlap needs an all-to-all backend: "
                f"set --moe-a2a-backend (got {self.moe_a2a_backend})."
            )

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        # Model and tokenizer
        parser.add_argument("--model-path", type=str, required=True, help="Model weights.")

        # Parallelism
        parser.add_argument(
            "--tp-size", type=int, default=ServerArgs.tp_size, help="Tensor parallel degree."
        )
        parser.add_argument(
            "--pp-size", type=int, default=ServerArgs.pp_size, help="Pipeline parallel degree."
        )

        # Kernel backend
        parser.add_argument(
            "--attention-backend",
            type=str,
            choices=ATTENTION_BACKEND_CHOICES,
            default=ServerArgs.attention_backend,
            help="Attention kernels.",
        )
        parser.add_argument(
            "--moe-runner-backend",
            type=str,
            choices=MOE_RUNNER_BACKEND_CHOICES,
            default=ServerArgs.moe_runner_backend,
            help=f"MoE runner backend, one of {MOE_RUNNER_BACKEND_CHOICES}.",
        )
        parser.add_argument(
            "--moe-a2a-backend",
            type=str,
            choices=["none", "deepep"],
            default=ServerArgs.moe_a2a_backend,
            help="All-to-all backend for " + "expert parallelism.",
        )
        parser.add_argument(
            "--fp4-gemm-backend",
            type=str,
            dest="fp4_gemm_runner_backend",
            choices=FP4_GEMM_RUNNER_BACKEND_CHOICES,
            default=ServerArgs.fp4_gemm_runner_backend,
            help="FP4 GEMM runner.",
        )
        parser.add_argument(
            "--lora-target-modules",
            type=str,
            nargs="*",
            choices=TARGET_MODULES + ["all"],
            default=None,
            help="Modules LoRA applies to.",
        )

        # Optimization/debug options
        parser.add_argument(
            "--enable-two-batch-overlap",
            action="store_true",
            help="Overlap two micro batches.",
        )
        parser.add_argument(
            "--disable-overlap-schedule",
            action="store_true",
            help="Turn the overlap scheduler off.",
        )
        parser.add_argument(
            "--chunk-size", type=int, default=ServerArgs.chunk_size, help="Prefill chunk."
        )

        # Deprecated arguments
        parser.add_argument(
            "--enable-old-overlap",
            action=DeprecatedAction,
            help="Deprecated. Use --enable-two-batch-overlap instead.",
        )
'''

ERA2_LORA_UTILS = """
TARGET_MODULES = ["q_proj", "k_proj", "v_proj"]
"""

ERA2_MOE_UTILS = """
from enum import Enum


class MoeRunnerBackend(Enum):
    AUTO = "auto"
    TRITON = "triton"
    FLASHINFER_CUTLASS = "flashinfer_cutlass"
    FLASHINFER_TRTLLM = "flashinfer_trtllm"

    def is_triton(self):
        return self == MoeRunnerBackend.TRITON

    def is_flashinfer_cutlass(self):
        return self == MoeRunnerBackend.FLASHINFER_CUTLASS


MOE_RUNNER_BACKEND = None


def get_moe_runner_backend():
    return MOE_RUNNER_BACKEND
"""

ERA2_FP4_UTILS = """
from enum import Enum


class Fp4GemmRunnerBackend(Enum):
    AUTO = "auto"
    FLASHINFER_CUTLASS = "flashinfer_cutlass"
    FLASHINFER_CUDNN = "flashinfer_cudnn"

    def is_flashinfer_cutlass(self):
        return self == Fp4GemmRunnerBackend.FLASHINFER_CUTLASS
"""

ERA2_LAYER = """
from sglang.srt.layers.moe.utils import MoeRunnerBackend, get_moe_runner_backend
from sglang.srt.layers.quantization.fp4_utils import Fp4GemmRunnerBackend


def pick(server_args, backend):
    if get_moe_runner_backend().is_flashinfer_cutlass():
        return "moe"
    if backend.is_flashinfer_cutlass():
        return "either"
    if server_args.fp4_gemm_runner_backend == Fp4GemmRunnerBackend.FLASHINFER_CUDNN.value:
        return "fp4"
    if server_args.moe_runner_backend == "flashinfer_trtllm":
        return "trtllm"
    if server_args.enable_two_batch_overlap:
        return MoeRunnerBackend.TRITON
"""

ERA3_SERVER_ARGS = '''
"""Server arguments (era 3 shape)."""

import argparse
import dataclasses
from typing import Annotated as A
from typing import List, Literal, Optional

from sglang.srt.arg_groups.arg_utils import Arg, add_cli_args_from_dataclass
from sglang.srt.arg_groups.speculative_hook import handle_speculative

MOE_RUNNER_BACKEND_CHOICES = ["auto", "triton", "flashinfer_cutlass", "flashinfer_trtllm"]


def add_moe_runner_backend_choices(choices):
    MOE_RUNNER_BACKEND_CHOICES.extend(choices)


class DeprecatedAliasStoreAction(argparse.Action):
    pass


@dataclasses.dataclass
class ServerArgs:
    # -------------------------------------------------------------------------
    # Model and tokenizer
    # -------------------------------------------------------------------------
    model_path: A[str, Arg(help="Model weights.", aliases=["--model"])]
    load_mode: A[Literal["eager", "lazy"], "How weights are loaded."] = "eager"

    # -------------------------------------------------------------------------
    # Parallelism
    # -------------------------------------------------------------------------
    tp_size: A[int, Arg(help="Tensor parallel degree.", cli_name="--tp-size", aliases=["--tp"])] = 1
    pp_size: A[int, "Pipeline parallel degree."] = 1
    disable_overlap_schedule: A[bool, "Turn the overlap scheduler off."] = False
    cuda_graph_bs: A[Optional[List[int]], "Batch sizes to capture."] = None

    # -------------------------------------------------------------------------
    # Kernel backend
    # -------------------------------------------------------------------------
    moe_runner_backend: A[
        str,
        Arg(
            help="MoE runner backend. "
            "Pick 'auto' unless you know better.",
            choices=MOE_RUNNER_BACKEND_CHOICES,
        ),
    ] = "auto"
    speculative_algorithm: A[Optional[str], "Speculative decoding algorithm."] = None
    speculative_num_steps: A[Optional[int], "Draft steps."] = None
    graph_backend: A[
        Optional[Literal["full", "disabled"]], Arg(help="Graph backend.", choices=Backend.ALL)
    ] = "full"
    load_mode: A[Literal["eager", "lazy"], "How weights are loaded (again)."] = "lazy"
    internal_cache: A[dict, Arg(help="Not a flag.", no_cli=True)] = dataclasses.field(
        default_factory=dict
    )
    plain_field: int = 3

    def __post_init__(self):
        self._handle_pipeline_parallelism()
        handle_speculative(self)

    def _handle_pipeline_parallelism(self):
        if self.pp_size > 1:
            self.disable_overlap_schedule = True

    def _handle_speculative_defaults(self):
        if self.speculative_algorithm is None:
            return
        self.tp_size = 1

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        add_cli_args_from_dataclass(parser, ServerArgs)

        # --- Deprecated argument registrations ---
        parser.add_argument(
            "--moe-backend",
            dest="moe_runner_backend",
            action=DeprecatedAliasStoreAction,
            new_flag="--moe-runner-backend",
            choices=MOE_RUNNER_BACKEND_CHOICES,
            help="[Deprecated] Use --moe-runner-backend instead.",
        )
'''

ERA3_HOOK = """
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sglang.srt.server_args import ServerArgs


def handle_speculative(server_args: ServerArgs) -> None:
    if server_args.speculative_algorithm is not None:
        if server_args.speculative_num_steps is None:
            server_args.speculative_num_steps = 3
        if server_args.pp_size > 1:
            raise ValueError("Speculative decoding does not support pipeline parallelism.")
"""

# If anything imported or executed the ingested code, this would leave a file behind.
HOSTILE_PREFIX = """
import os
import pathlib

pathlib.Path(os.environ.get("FLAGATLAS_FIXTURE_PWNED", "/tmp/flagatlas-pwned")).write_text("x")
os.system("touch " + os.environ.get("FLAGATLAS_FIXTURE_PWNED", "/tmp/flagatlas-pwned"))
"""


def git(repo: Path, *args: str, date: str | None = None) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Fixture",
        "GIT_AUTHOR_EMAIL": "fixture@example.com",
        "GIT_COMMITTER_NAME": "Fixture",
        "GIT_COMMITTER_EMAIL": "fixture@example.com",
    }
    if date:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = date
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout


def write(repo: Path, path: str, text: str) -> None:
    target = repo / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(textwrap.dedent(text).lstrip())


def commit(repo: Path, message: str, date: str, tag: str | None = None) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message, date=date)
    if tag:
        git(repo, "tag", tag)


def build_three_era_repo(root: Path) -> Path:
    """v0.1.0 (era 1), v0.2.0 (era 2), v0.3.0 (era 3), plus tags that are not releases."""
    repo = root / "sglang"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    write(repo, SERVER_ARGS, ERA1_SERVER_ARGS)
    write(repo, "python/sglang/srt/model_runner.py", ERA1_RUNNER)
    write(repo, "README.md", "synthetic fixture\n")
    commit(repo, "era 1", "2024-03-01T12:00:00Z", "v0.1.0")

    write(repo, SERVER_ARGS, ERA2_SERVER_ARGS)
    write(repo, "python/sglang/srt/lora/utils.py", ERA2_LORA_UTILS)
    write(repo, "python/sglang/srt/layers/moe/utils.py", ERA2_MOE_UTILS)
    write(repo, "python/sglang/srt/layers/quantization/fp4_utils.py", ERA2_FP4_UTILS)
    write(repo, "python/sglang/srt/layers/moe/layer.py", ERA2_LAYER)
    # Another program with a ServerArgs of its own: its reads are not of these flags.
    write(repo, "python/sglang/multimodal_gen/runtime/pipeline.py", ERA2_LAYER)
    commit(repo, "era 2", "2025-06-01T12:00:00Z", "v0.2.0")
    git(repo, "tag", "gateway-v1.0.0")
    git(repo, "tag", "sgl-kernel-v0.2.0")

    write(repo, SERVER_ARGS, ERA3_SERVER_ARGS)
    write(repo, "python/sglang/srt/arg_groups/speculative_hook.py", ERA3_HOOK)
    write(repo, "python/sglang/srt/arg_groups/arg_utils.py", "A = None\n")
    commit(repo, "era 3", "2026-07-01T12:00:00Z", "v0.3.0")

    git(repo, "checkout", "-q", "-b", "dev")
    write(repo, "python/sglang/srt/extra.py", HOSTILE_PREFIX)
    write(repo, SERVER_ARGS, HOSTILE_PREFIX + ERA3_SERVER_ARGS)
    commit(repo, "hostile dev branch", "2026-08-01T12:00:00Z")
    git(repo, "checkout", "-q", "main")
    return repo


def build_many_versions_repo(root: Path, count: int) -> Path:
    """`count` era-2 releases v1.0.0 … that each add one flag (for kill/idempotency tests)."""
    repo = root / "many"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    for i in range(count):
        extra = "".join(
            f'        parser.add_argument("--extra-{j}", type=int, default={j}, help="X {j}.")\n'
            for j in range(i + 1)
        )
        text = textwrap.dedent(ERA2_SERVER_ARGS).lstrip() + extra
        (repo / SERVER_ARGS).parent.mkdir(parents=True, exist_ok=True)
        (repo / SERVER_ARGS).write_text(text)
        commit(repo, f"release {i}", f"2025-01-{i + 1:02d}T12:00:00Z", f"v1.0.{i}")
    return repo
