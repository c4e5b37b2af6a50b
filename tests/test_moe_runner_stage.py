"""What FusedMoE's constructor builds after the weights, in the MoE quantization step of the
load stage (kb.explain.moe_quant, kb.explain.class_tables), on synthetic modules shaped
like SGLang's: the quantization method's `create_moe_runner` builds a MoeRunner, which
raises when its backend has no runner core and no fused function is registered for the
(a2a backend, runner backend) pair in FusedOpPool (filled by decorators of the runner
package's modules); then `create_moe_dispatcher` builds the a2a backend's token
dispatcher, whose Mooncake one raises for the DeepEP normal mode."""

from __future__ import annotations

from typing import Any

from kb.explain import classes, derived, moe, moe_quant
from kb.explain.abstract_values import Instance
from kb.explain.frames import Ctx
from kb.explain.predicates import Profile
from kb.explain.simulate import Check, Simulator
from tests import sim_repos

SRT = "python/sglang/srt/"
ARGS = SRT + "server_args.py"
MOE = SRT + "layers/moe/"

SERVER_ARGS = """
from dataclasses import dataclass


@dataclass
class ServerArgs:
    model_path: str
    tp_size: int = 1
    ep_size: int = 1
    moe_runner_backend: str = "auto"
    moe_a2a_backend: str = "none"
    deepep_mode: str = "auto"

    def __post_init__(self):
        pass
"""

SCHEDULER = """
from sglang.srt.layers.moe.utils import initialize_moe_config


class Scheduler:
    def init_moe_gemm_config(self):
        initialize_moe_config(self.server_args)
"""

MOE_UTILS = """
from enum import Enum


class MoeRunnerBackend(Enum):
    AUTO = "auto"
    TRITON = "triton"
    FLASHINFER_TRTLLM = "flashinfer_trtllm"

    def is_auto(self):
        return self == MoeRunnerBackend.AUTO

    def is_triton(self):
        return self == MoeRunnerBackend.TRITON

    def is_flashinfer_trtllm(self):
        return self == MoeRunnerBackend.FLASHINFER_TRTLLM


class MoeA2ABackend(Enum):
    NONE = "none"
    DEEPEP = "deepep"
    MOONCAKE = "mooncake"

    def is_none(self):
        return self == MoeA2ABackend.NONE

    def is_deepep(self):
        return self == MoeA2ABackend.DEEPEP

    def is_mooncake(self):
        return self == MoeA2ABackend.MOONCAKE


class DeepEPMode(Enum):
    NORMAL = "normal"
    LOW_LATENCY = "low_latency"
    AUTO = "auto"

    def enable_normal(self):
        return self in [DeepEPMode.NORMAL, DeepEPMode.AUTO]

    def enable_low_latency(self):
        return self in [DeepEPMode.LOW_LATENCY, DeepEPMode.AUTO]


MOE_RUNNER_BACKEND = None
MOE_A2A_BACKEND = None
DEEPEP_MODE = None


def initialize_moe_config(server_args):
    global MOE_RUNNER_BACKEND, MOE_A2A_BACKEND, DEEPEP_MODE
    MOE_RUNNER_BACKEND = MoeRunnerBackend(server_args.moe_runner_backend)
    MOE_A2A_BACKEND = MoeA2ABackend(server_args.moe_a2a_backend)
    DEEPEP_MODE = DeepEPMode(server_args.deepep_mode)


def get_moe_runner_backend():
    return MOE_RUNNER_BACKEND


def get_moe_a2a_backend():
    return MOE_A2A_BACKEND


def get_deepep_mode():
    return DEEPEP_MODE
"""

PARALLEL_STATE = """
_MOE_TP = None


def get_moe_tensor_parallel_world_size():
    assert _MOE_TP is not None, "expert model parallel group is not initialized"


def get_moe_expert_parallel_world_size():
    assert _MOE_TP is not None, "expert model parallel group is not initialized"
"""

FP8 = """
from sglang.srt.layers.moe.moe_runner import MoeRunner
from sglang.srt.layers.moe.utils import MoeRunnerBackend, get_moe_runner_backend


class Fp8Config:
    @classmethod
    def get_name(cls):
        return "fp8"

    def get_quant_method(self, layer, prefix):
        return Fp8MoEMethod(self)


class Fp8MoEMethod:
    def __init__(self, quant_config):
        self.quant_config = quant_config

    def create_weights(self, layer, num_experts, hidden_size, intermediate_size_per_partition):
        pass

    def create_moe_runner(self, layer, moe_runner_config):
        backend = get_moe_runner_backend()
        if backend.is_auto():
            backend = MoeRunnerBackend.TRITON
        self.runner = MoeRunner(backend, moe_runner_config)
"""

RUNNER_INIT = """
from sglang.srt.layers.moe.moe_runner.runner import MoeRunner
"""

# the pool and its decorator factory (the factory's own body passes its parameters on)
RUNNER_BASE = """
from dataclasses import dataclass


@dataclass
class MoeRunnerConfig:
    num_experts: int = 0


class FusedOpPool:
    _fused_funcs: dict = {}

    @classmethod
    def register_fused_func(cls, a2a_backend_name, runner_backend_name, fused_func):
        cls._fused_funcs[(a2a_backend_name, runner_backend_name)] = fused_func

    @classmethod
    def get_fused_func(cls, dispatch_name, runner_name):
        return cls._fused_funcs.get((dispatch_name, runner_name))


def register_fused_func(a2a_backend_name, runner_backend_name):
    def decorator(fused_func):
        FusedOpPool.register_fused_func(a2a_backend_name, runner_backend_name, fused_func)
        return fused_func

    return decorator
"""

RUNNER = """
from sglang.srt.layers.moe.moe_runner.base import FusedOpPool
from sglang.srt.layers.moe.moe_runner.triton import TritonRunnerCore
from sglang.srt.layers.moe.utils import get_moe_a2a_backend


class MoeRunner:
    def __init__(self, runner_backend, config):
        if runner_backend.is_triton():
            self.runner_core = TritonRunnerCore(config)
        elif runner_backend.is_flashinfer_trtllm():
            self.runner_core = None
        else:
            raise NotImplementedError("Unsupported runner backend")
        a2a_backend_name = get_moe_a2a_backend().value
        self.fused_func = FusedOpPool.get_fused_func(a2a_backend_name, runner_backend.value)
        if self.runner_core is None and self.fused_func is None:
            raise NotImplementedError("no fused func registered")
"""

TRITON = """
from sglang.srt.layers.moe.moe_runner.base import register_fused_func


class TritonRunnerCore:
    def __init__(self, config):
        self.config = config


@register_fused_func("none", "triton")
def fused_experts_none_to_triton(dispatch_output, quant_info, runner_config):
    return dispatch_output
"""

TRTLLM = """
from sglang.srt.layers.moe.moe_runner.base import register_fused_func


@register_fused_func("none", "flashinfer_trtllm")
def fused_experts_none_to_flashinfer_trtllm(dispatch_output, quant_info, runner_config):
    return dispatch_output
"""

# a registration whose names are computed: the table is not known from the source
COMPUTED = """
from sglang.srt.layers.moe.moe_runner.base import register_fused_func

BACKENDS = ["deepep"]

for name in BACKENDS:
    register_fused_func(name, "flashinfer_trtllm")(print)
"""

MOONCAKE = """
from sglang.srt.layers.moe.utils import DeepEPMode


class MooncakeEPDispatcher:
    def __init__(self, num_experts=None, deepep_mode=DeepEPMode.AUTO):
        self.deepep_mode = deepep_mode
        if self.deepep_mode.enable_normal():
            raise NotImplementedError
"""

FUSED = """
import torch

from sglang.srt.distributed import (
    get_moe_expert_parallel_world_size,
    get_moe_tensor_parallel_world_size,
)
from sglang.srt.layers.moe.moe_runner import MoeRunnerConfig
from sglang.srt.layers.moe.token_dispatcher.mooncake import MooncakeEPDispatcher
from sglang.srt.layers.moe.utils import get_deepep_mode, get_moe_a2a_backend


class StandardDispatcher:
    def __init__(self, moe_runner_config):
        self.moe_runner_config = moe_runner_config


class DeepEPDispatcher:
    def __init__(self, num_experts=None, deepep_mode=None):
        self.deepep_mode = deepep_mode


def create_moe_dispatcher(moe_runner_config):
    a2a_backend = get_moe_a2a_backend()
    if a2a_backend.is_none():
        return StandardDispatcher(moe_runner_config)
    elif a2a_backend.is_deepep():
        return DeepEPDispatcher(
            num_experts=moe_runner_config.num_experts, deepep_mode=get_deepep_mode()
        )
    elif a2a_backend.is_mooncake():
        return MooncakeEPDispatcher(
            num_experts=moe_runner_config.num_experts, deepep_mode=get_deepep_mode()
        )
    raise NotImplementedError("Unsupported a2a backend")


class FusedMoE(torch.nn.Module):
    def __init__(self, num_experts, hidden_size, intermediate_size, layer_id, top_k=None,
                 quant_config=None, prefix=""):
        super().__init__()
        self.moe_ep_size = get_moe_expert_parallel_world_size()
        self.moe_tp_size = get_moe_tensor_parallel_world_size()
        self.num_local_experts = num_experts // self.moe_ep_size
        self.intermediate_size_per_partition = intermediate_size // self.moe_tp_size
        self.moe_runner_config = MoeRunnerConfig(num_experts=num_experts)
        self.quant_method = quant_config.get_quant_method(self, prefix)
        self.quant_method.create_weights(
            layer=self,
            num_experts=self.num_local_experts,
            hidden_size=hidden_size,
            intermediate_size_per_partition=self.intermediate_size_per_partition,
        )
        self.quant_method.create_moe_runner(self, self.moe_runner_config)
        self.dispatcher = create_moe_dispatcher(self.moe_runner_config)
        raise RuntimeError("past the dispatcher: not this step's")
"""

EP_LAYER = """
from sglang.srt.layers.moe.fused_moe_triton.layer import FusedMoE


def get_moe_impl_class(quant_config):
    return FusedMoE
"""

FILES = {
    ARGS: SERVER_ARGS,
    SRT + "managers/scheduler.py": SCHEDULER,
    MOE + "utils.py": MOE_UTILS,
    SRT + "distributed/__init__.py": "from sglang.srt.distributed.parallel_state import *\n",
    SRT + "distributed/parallel_state.py": PARALLEL_STATE,
    SRT + "layers/quantization/fp8.py": FP8,
    MOE + "moe_runner/__init__.py": RUNNER_INIT + "from .base import MoeRunnerConfig\n",
    MOE + "moe_runner/base.py": RUNNER_BASE,
    MOE + "moe_runner/runner.py": RUNNER,
    MOE + "moe_runner/triton.py": TRITON,
    MOE + "moe_runner/flashinfer_trtllm.py": TRTLLM,
    MOE + "token_dispatcher/mooncake.py": MOONCAKE,
    MOE + "fused_moe_triton/layer.py": FUSED,
    MOE + "ep_moe/layer.py": EP_LAYER,
    sim_repos.UTILS: "",
    sim_repos.MODEL_CONFIG: sim_repos.MODEL_CONFIG_TEXT,
}
CONFIG = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "hidden_size": 4096,
    "moe_intermediate_size": 1536,
}
PROFILE = {"sm": 100, "cuda": "12.9", "config": CONFIG}


def step_checks(fields: dict[str, Any], files: dict[str, str] = FILES) -> list[Check]:
    """The MoE quantization step's checks (the layer built first), the version's files
    being `files`."""
    mods = sim_repos.parsed_modules(files)
    sim = Simulator(
        mods.get,
        mods[ARGS],
        {"model_path": "m", "tp_size": 8, "ep_size": 8, **fields},
        Profile.parse(PROFILE),
        given={"model_path", *fields},
        derive=derived,
    )
    sim.run()
    configure = moe.moe_config(sim)
    assert configure is not None and sim.run_after(configure)
    fp8 = sim.module("sglang.srt.layers.quantization.fp8")
    assert fp8 is not None
    qc = classes.call_class(sim, classes.class_ref(fp8, "Fp8Config"), [], {}, Ctx(), None)
    assert isinstance(qc, Instance)
    built = moe.MoeLayer()
    assert sim.run_after(lambda: built.__dict__.update(moe.build_layer(sim, qc).__dict__))
    step = moe_quant.step(sim, built, qc, Profile.parse(PROFILE), list(files))
    assert step is not None
    start = len(sim.result.checks)
    assert sim.run_after(step)
    return sim.result.checks[start:]


def raised(checks: list[Check]) -> list[tuple[str, str]]:
    return [(c.outcome, c.message) for c in checks if c.kind != "warning" and c.outcome != "passed"]


def test_the_runner_raises_without_a_fused_func_for_the_pair() -> None:
    # flashinfer_trtllm has no runner core: its fused func is registered for a2a none only
    deepep = step_checks({"moe_runner_backend": "flashinfer_trtllm", "moe_a2a_backend": "deepep"})
    assert raised(deepep) == [("fired", "NotImplementedError: no fused func registered")]
    fired = next(c for c in deepep if c.outcome == "fired")
    assert fired.path == MOE + "moe_runner/runner.py"
    # registered for a2a none (its fused func); triton has a runner core: no raise, and the
    # step goes on to the dispatcher and no further
    assert raised(step_checks({"moe_runner_backend": "flashinfer_trtllm"})) == []
    assert raised(step_checks({"moe_a2a_backend": "deepep"})) == []


def test_a_pool_its_source_does_not_determine_stays_undecided() -> None:
    # a registration whose names are computed: the pair may be registered
    computed = {**FILES, MOE + "moe_runner/computed.py": COMPUTED}
    fields = {"moe_runner_backend": "flashinfer_trtllm", "moe_a2a_backend": "deepep"}
    assert [o for o, _ in raised(step_checks(fields, computed))] == ["unknown"]
    # the version's files not known: the pool is not read as the `{}` its class starts with
    mods = sim_repos.parsed_modules(FILES)
    sim = Simulator(mods.get, mods[ARGS], {"model_path": "m"}, Profile.parse(PROFILE))
    base = sim.module("sglang.srt.layers.moe.moe_runner.base")
    assert base is not None
    pool = classes.class_ref(base, "FusedOpPool")
    table = classes.class_attr(sim, pool, "_fused_funcs")
    assert not isinstance(table, dict)


def test_the_mooncake_dispatcher_raises_for_the_normal_mode() -> None:
    mooncake = {"moe_a2a_backend": "mooncake"}
    assert raised(step_checks({**mooncake, "deepep_mode": "auto"})) == [
        ("fired", "NotImplementedError")
    ]
    assert raised(step_checks({**mooncake, "deepep_mode": "normal"})) == [
        ("fired", "NotImplementedError")
    ]
    # low-latency only: built, and nothing after the dispatcher is this step's
    assert raised(step_checks({**mooncake, "deepep_mode": "low_latency"})) == []
