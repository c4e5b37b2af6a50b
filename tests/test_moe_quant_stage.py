"""The MoE layer's quantization method, a step of the load stage (kb.explain.moe_quant), on
synthetic modules shaped like SGLang's: FusedMoE's constructor reads the MoE parallel sizes
from the parallel state, asks the quantization config for its method (chosen by the layer's
type: a linear layer gets another one) and has it create the weights on the per-rank
intermediate size; the FP8 MoE method raises when that size is not a multiple of the block,
and its constructor asserts the GPU for the cutlass runner."""

from __future__ import annotations

from typing import Any

from kb.explain import classes, derived, moe, moe_quant
from kb.explain.abstract_values import Instance
from kb.explain.frames import Ctx, Frame
from kb.explain.predicates import Profile, Unknown
from kb.explain.simulate import Check, Simulator
from kb.explain.source_modules import Module
from tests import sim_repos

SRT = "python/sglang/srt/"
ARGS = SRT + "server_args.py"

SERVER_ARGS = """
from dataclasses import dataclass


@dataclass
class ServerArgs:
    model_path: str
    tp_size: int = 1
    ep_size: int = 1
    moe_runner_backend: str = "auto"

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
    CUTLASS = "cutlass"
    FLASHINFER = "flashinfer"
    DEEP_GEMM = "deep_gemm"
    FLASHINFER_CUTLASS = "flashinfer_cutlass"

    def is_cutlass(self):
        return self == MoeRunnerBackend.CUTLASS

    def is_flashinfer(self):
        return self == MoeRunnerBackend.FLASHINFER

    def is_deep_gemm(self):
        return self == MoeRunnerBackend.DEEP_GEMM

    def is_flashinfer_cutlass(self):
        return self == MoeRunnerBackend.FLASHINFER_CUTLASS


MOE_RUNNER_BACKEND = None


def initialize_moe_config(server_args):
    global MOE_RUNNER_BACKEND
    MOE_RUNNER_BACKEND = MoeRunnerBackend(server_args.moe_runner_backend)


def get_moe_runner_backend():
    return MOE_RUNNER_BACKEND
"""

# the process groups exist only once initialize_model_parallel ran: interpreted, the
# getters' asserts would fail (the step answers them from the server args instead)
PARALLEL_STATE = """
_MOE_TP = None


def get_moe_tp_group():
    assert _MOE_TP is not None, "expert model parallel group is not initialized"
    return _MOE_TP


def get_moe_tensor_parallel_world_size():
    return get_moe_tp_group().world_size


def get_moe_expert_parallel_world_size():
    assert _MOE_TP is not None, "expert model parallel group is not initialized"
"""

DISTRIBUTED = """
from sglang.srt.distributed.parallel_state import *
"""

LINEAR = """
import torch


class LinearBase(torch.nn.Module):
    pass
"""

FP8 = """
import torch

from sglang.srt.layers.deep_gemm_config import SCALE_UE8M0
from sglang.srt.layers.parameter import ModelWeightParameter
from sglang.srt.layers.quantization.utils import swizzle_blockscale
from sglang.srt.layers.moe.utils import get_moe_runner_backend
from sglang.srt.utils.common import is_sm90_supported, is_sm100_supported


class Fp8Config:
    def __init__(self, weight_block_size=None):
        self.weight_block_size = weight_block_size

    @classmethod
    def get_name(cls):
        return "fp8"

    def get_quant_method(self, layer, prefix):
        from sglang.srt.layers.linear import LinearBase
        from sglang.srt.layers.moe.fused_moe_triton.layer import FusedMoE

        if isinstance(layer, LinearBase):
            return Fp8LinearMethod(self)
        elif isinstance(layer, FusedMoE):
            return Fp8MoEMethod(self)
        return None


class Fp8LinearMethod:
    def __init__(self, quant_config):
        self.quant_config = quant_config


class Fp8MoEMethod:
    def __init__(self, quant_config):
        self.quant_config = quant_config
        self.block_quant = quant_config.weight_block_size is not None
        if get_moe_runner_backend().is_cutlass():
            assert is_sm100_supported() or is_sm90_supported()

    def create_weights(self, layer, num_experts, hidden_size, intermediate_size_per_partition):
        if self.block_quant:
            block_n = self.quant_config.weight_block_size[0]
            if intermediate_size_per_partition % block_n != 0:
                raise ValueError("intermediate size not divisible by block_n")
        scale = torch.nn.Parameter(torch.empty(4, dtype=torch.float32), requires_grad=False)
        scale.format_ue8m0 = False
        layer.register_parameter("w13_weight_scale_inv", scale)
        rows = (2 if layer.is_gated else 1) * intermediate_size_per_partition
        weight = ModelWeightParameter(
            data=torch.empty(layer.num_local_experts, rows, hidden_size // 2, dtype=torch.uint8),
            weight_loader=None,
        )
        layer.register_parameter("w13_weight", weight)
        block_scale = ModelWeightParameter(
            data=torch.empty((num_experts, rows, hidden_size // 16), dtype=torch.float8_e4m3fn),
            weight_loader=None,
        )
        layer.register_parameter("w13_blockscale", block_scale)

    def process_weights_after_loading(self, layer):
        if get_moe_runner_backend().is_flashinfer_cutlass():

            def per_expert(w):
                assert w.shape[0] == layer.num_local_experts, "one row per local expert"

            per_expert(layer.w13_weight)
            swizzled = swizzle_blockscale(layer.w13_blockscale)
            pad = swizzled.size(1) - layer.w13_weight.size(1)
            if pad:
                assert not layer.is_gated, "padding is not implemented for gated activations"
            return
        if get_moe_runner_backend().is_deep_gemm():
            if self._requant(layer.w13_weight_scale_inv):
                raise RuntimeError("requantized scales need the DeepEP layer")
        if get_moe_runner_backend().is_flashinfer():
            if not is_sm100_supported():
                raise RuntimeError("flashinfer repacking needs SM100")
            self._scale_kind(layer.w13_weight_scale)

    def _requant(self, scale):
        assert isinstance(scale, torch.nn.Parameter)
        assert scale.dtype == torch.float32
        if getattr(scale, "format_ue8m0", False) or not SCALE_UE8M0:
            return False
        return True

    def _scale_kind(self, scale):
        if scale.dtype == torch.uint8:
            return "e8m0"
        if scale.dtype == torch.float32:
            return "float"
        raise TypeError("Unsupported scale dtype")
"""

FUSED = """
import torch

from sglang.srt.distributed import (
    get_moe_expert_parallel_world_size,
    get_moe_tensor_parallel_world_size,
)
from sglang.srt.layers.quantization.unquant import UnquantizedFusedMoEMethod


class FusedMoE(torch.nn.Module):
    def __init__(self, num_experts, hidden_size, intermediate_size, layer_id, top_k=None,
                 quant_config=None, prefix="", routing_method_type=None):
        super().__init__()
        self.moe_ep_size = get_moe_expert_parallel_world_size()
        self.moe_tp_size = get_moe_tensor_parallel_world_size()
        assert num_experts % self.moe_ep_size == 0
        self.num_local_experts = num_experts // self.moe_ep_size
        assert intermediate_size % self.moe_tp_size == 0
        self.intermediate_size_per_partition = intermediate_size // self.moe_tp_size
        self.is_gated = True
        if quant_config is None:
            self.quant_method = UnquantizedFusedMoEMethod()
        else:
            self.quant_method = quant_config.get_quant_method(self, prefix)
        self.quant_method.create_weights(
            layer=self,
            num_experts=self.num_local_experts,
            hidden_size=hidden_size,
            intermediate_size_per_partition=self.intermediate_size_per_partition,
        )
        raise RuntimeError("past create_weights: not this step's")
        # (a field its forward reads, copied from an argument after the parts are built)
        self.routing_method_type = routing_method_type
"""

# the method FusedMoE builds itself for an unquantized model (no quantization config)
UNQUANT = """
from sglang.srt.layers.moe.utils import get_moe_runner_backend


class UnquantizedFusedMoEMethod:
    def create_weights(self, layer, num_experts, hidden_size, intermediate_size_per_partition):
        assert not get_moe_runner_backend().is_cutlass(), "no unquantized cutlass MoE kernel"
"""

EP_LAYER = """
from sglang.srt.layers.moe.fused_moe_triton.layer import FusedMoE


def get_moe_impl_class(quant_config):
    return FusedMoE
"""

# SGLang's parameter classes: torch's Parameter of the data they wrap
PARAMETER = """
from torch.nn import Parameter


class BasevLLMParameter(Parameter):
    def __new__(cls, data, **kwargs):
        return super().__new__(cls, data=data, requires_grad=False)

    def __init__(self, data, weight_loader):
        self._weight_loader = weight_loader


class ModelWeightParameter(BasevLLMParameter):
    pass
"""

# the NVFP4 scales' swizzled layout: rows padded to 128, columns to 4
QUANT_UTILS = """
import torch


def swizzle_blockscale(scale):
    B, M, K = scale.shape
    round_up = lambda x, m: (x + m - 1) // m * m
    padded = torch.zeros((B, round_up(M, 128), round_up(K, 4)), dtype=scale.dtype)
    padded[:B, :M, :K] = scale
    batches, rows, cols = padded.shape
    tiles = padded.reshape(batches, -1, 4, 32, cols // 4, 4).permute((0, 1, 4, 3, 2, 5))
    return tiles.contiguous().cuda().reshape(batches, rows, cols)
"""

# values its module computes when imported, one an alias of another
DEEP_GEMM_CONFIG = """
from sglang.srt.utils.common import is_sm100_supported


def _compute_enable():
    return True


ENABLE = _compute_enable()
BLACKWELL = ENABLE and is_sm100_supported()
SCALE_UE8M0 = BLACKWELL
"""

UTILS = """
import torch


def is_sm90_supported():
    return torch.cuda.get_device_capability()[0] >= 9


def is_sm100_supported():
    return torch.cuda.get_device_capability()[0] >= 10
"""

FILES = {
    ARGS: SERVER_ARGS,
    SRT + "managers/scheduler.py": SCHEDULER,
    SRT + "layers/moe/utils.py": MOE_UTILS,
    SRT + "distributed/__init__.py": DISTRIBUTED,
    SRT + "distributed/parallel_state.py": PARALLEL_STATE,
    SRT + "layers/linear.py": LINEAR,
    SRT + "layers/quantization/fp8.py": FP8,
    SRT + "layers/quantization/unquant.py": UNQUANT,
    SRT + "layers/parameter.py": PARAMETER,
    SRT + "layers/quantization/utils.py": QUANT_UTILS,
    SRT + "layers/deep_gemm_config.py": DEEP_GEMM_CONFIG,
    SRT + "layers/moe/fused_moe_triton/layer.py": FUSED,
    SRT + "layers/moe/ep_moe/layer.py": EP_LAYER,
    sim_repos.UTILS: UTILS,
    sim_repos.MODEL_CONFIG: sim_repos.MODEL_CONFIG_TEXT,
}
# Qwen3-MoE's keys: 1536 // 8 = 192 per rank, not a multiple of 128
CONFIG = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "hidden_size": 4096,
    "moe_intermediate_size": 1536,
}


def modules() -> dict[str, Module]:
    return sim_repos.parsed_modules(FILES)


def simulator(fields: dict[str, Any], profile: dict[str, Any]) -> Simulator:
    mods = modules()
    sim = Simulator(
        mods.get,
        mods[ARGS],
        {"model_path": "m", **fields},
        Profile.parse(profile),
        given={"model_path", *fields},
        derive=derived,
    )
    sim.run()
    configure = moe.moe_config(sim)
    assert configure is not None and sim.run_after(configure)
    return sim


def fp8_config(sim: Simulator, block: Any) -> Instance:
    mod = sim.module("sglang.srt.layers.quantization.fp8")
    assert mod is not None
    qc = classes.call_class(sim, classes.class_ref(mod, "Fp8Config"), [block], {}, Ctx(), None)
    assert isinstance(qc, Instance)
    return qc


def quant_step(
    fields: dict[str, Any],
    profile: dict[str, Any],
    block: Any = (128, 128),
    quantized: bool = True,
) -> list[Check] | None:
    """The step's checks (None when it has nothing to run), after the layer was built
    (with the FP8 config of `block`, or `quantized` False: no quantization config)."""
    sim = simulator(fields, profile)
    qc = fp8_config(sim, list(block) if block is not None else None) if quantized else None
    built = moe.MoeLayer()
    assert sim.run_after(lambda: built.__dict__.update(moe.build_layer(sim, qc).__dict__))
    step = moe_quant.step(sim, built, qc, Profile.parse(profile))
    if step is None:
        return None
    start = len(sim.result.checks)
    assert sim.run_after(step)
    return sim.result.checks[start:]


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def raised(checks: list[Check] | None) -> list[tuple[str, str, int]]:
    assert checks is not None
    return [
        (c.outcome, c.message, c.line)
        for c in checks
        if c.kind != "warning" and c.outcome != "passed"
    ]


def test_get_quant_method_chooses_by_the_layer_s_type() -> None:
    sim = simulator({}, {"sm": 90, "cuda": "12.9", "config": CONFIG})
    sim.construct = True
    qc = fp8_config(sim, [128, 128])
    method = classes.instance_attr(sim, qc, "get_quant_method")
    for module, name, expected in (
        ("sglang.srt.layers.linear", "LinearBase", "Fp8LinearMethod"),
        ("sglang.srt.layers.moe.fused_moe_triton.layer", "FusedMoE", "Fp8MoEMethod"),
    ):
        mod = sim.module(module)
        assert mod is not None
        layer = Instance(classes.class_ref(mod, name), "not built")
        chosen = sim.call_function(method, [layer, "model.layers.0"], {}, Ctx())  # type: ignore[arg-type]
        assert isinstance(chosen, Instance) and chosen.cls.name == expected


def test_create_weights_raises_when_the_rank_s_size_is_not_a_multiple_of_the_block() -> None:
    checks = quant_step({"tp_size": 8}, {"sm": 90, "cuda": "12.9", "config": CONFIG})
    fp8 = SRT + "layers/quantization/fp8.py"
    message = "ValueError: intermediate size not divisible by block_n"
    assert raised(checks) == [("fired", message, line_of(FP8, "raise ValueError"))]
    assert checks is not None
    (fired,) = [c for c in checks if c.outcome == "fired"]
    assert fired.path == fp8 and {"tp_size", "ep_size"} <= fired.reads  # what a fix changes
    # expert parallelism leaves each rank all of the intermediate size; tp 4 leaves 384
    assert (
        raised(
            quant_step({"tp_size": 8, "ep_size": 8}, {"sm": 90, "cuda": "12.9", "config": CONFIG})
        )
        == []
    )
    assert raised(quant_step({"tp_size": 4}, {"sm": 90, "cuda": "12.9", "config": CONFIG})) == []
    # without block quantization nothing is checked
    assert (
        raised(quant_step({"tp_size": 8}, {"sm": 90, "cuda": "12.9", "config": CONFIG}, None)) == []
    )


def test_an_unquantized_model_s_layer_builds_the_unquantized_method_itself() -> None:
    # (no quantization config: FusedMoE's constructor builds its own method, whose weights'
    # creation refuses the cutlass runner)
    sm90 = {"sm": 90, "cuda": "12.9", "config": CONFIG}
    cutlass = raised(quant_step({"moe_runner_backend": "cutlass"}, sm90, quantized=False))
    assert cutlass == [
        ("fired", "no unquantized cutlass MoE kernel", line_of(UNQUANT, "assert not"))
    ]
    assert raised(quant_step({}, sm90, quantized=False)) == []
    # a quantization config not known: nothing followed
    sim = simulator({}, sm90)
    built = moe.MoeLayer()
    assert sim.run_after(lambda: built.__dict__.update(moe.build_layer(sim, None).__dict__))
    unsure = Unknown(("the quantization config",))
    assert moe_quant.step(sim, built, unsure, Profile.parse(sm90)) is None


def test_the_fields_copied_after_the_parts_are_built_are_set() -> None:
    sim = simulator({}, {"sm": 90, "cuda": "12.9", "config": CONFIG})
    built = moe.MoeLayer()
    assert sim.run_after(lambda: built.__dict__.update(moe.build_layer(sim, None).__dict__))
    step = moe_quant.step(sim, built, None, Profile.parse({"sm": 90, "config": CONFIG}))
    assert step is not None and sim.run_after(step)
    assert built.layer is not None and built.layer.fields["routing_method_type"] is None


def test_the_moe_globals_start_at_their_module_values() -> None:
    # (the scheduler initializes them only for a config.json with num_experts_per_tok at
    # its top: without it the globals keep their module values; with it only in the text
    # config (Llama-4's), whether the config class answers it is not known here)
    scheduler = SCHEDULER.replace(
        "        initialize_moe_config(self.server_args)",
        '        if hasattr(self.model_config.hf_config, "num_experts_per_tok"):\n'
        "            initialize_moe_config(self.server_args)",
    )
    mods = sim_repos.parsed_modules({**FILES, SRT + "managers/scheduler.py": scheduler})
    dense = {"architectures": CONFIG["architectures"], "hidden_size": 4096}
    nested = {"architectures": CONFIG["architectures"], "text_config": CONFIG}
    found = []
    for config in (CONFIG, dense, nested):
        fields = {"model_path": "m", "moe_runner_backend": "deep_gemm"}
        profile = Profile.parse({"sm": 90, "config": config})
        sim = Simulator(mods.get, mods[ARGS], fields, profile, given=set(fields), derive=derived)
        sim.run()
        step = moe.moe_config(sim)
        assert step is not None and sim.run_after(step)
        utils = sim.module("sglang.srt.layers.moe.utils")
        assert utils is not None
        found.append(sim.lookup("MOE_RUNNER_BACKEND", Frame(utils, "<module>", {})))
    assert str(found[0]).endswith("DEEP_GEMM") and found[1] is None
    assert isinstance(found[2], Unknown)


def test_the_method_s_constructor_asserts_the_gpu_for_the_cutlass_runner() -> None:
    cutlass = {"moe_runner_backend": "cutlass"}
    sm120 = raised(quant_step(cutlass, {"sm": 120, "cuda": "12.9", "config": CONFIG}))
    assert sm120 == [("fired", "", line_of(FP8, "assert is_sm100"))]
    assert raised(quant_step(cutlass, {"sm": 90, "cuda": "12.9", "config": CONFIG})) == []
    assert raised(quant_step({}, {"sm": 120, "cuda": "12.9", "config": CONFIG})) == []


def test_undecided_sizes_are_no_error() -> None:
    # the tp size not known: the raise is undecided, never an error
    unsure = quant_step(
        {"tp_size": Unknown(("the tp size",))}, {"sm": 90, "cuda": "12.9", "config": CONFIG}
    )
    assert {outcome for outcome, _, _ in raised(unsure)} <= {"unknown"}
    assert raised(unsure)
    # a model whose config.json lacks the size the model class passes: nothing runs
    bare = {k: v for k, v in CONFIG.items() if k != "moe_intermediate_size"}
    assert quant_step({"tp_size": 8}, {"sm": 90, "cuda": "12.9", "config": bare}) is None


def test_the_method_checks_the_gpu_once_the_weights_are_loaded() -> None:
    # process_weights_after_loading: the flashinfer repacking needs SM100; the dtype tests
    # of the weights' scales stay undecided, and the raise after them is no error, not
    # even a likely one (nothing makes one dtype likelier)
    flashinfer = {"moe_runner_backend": "flashinfer"}
    hopper = raised(quant_step(flashinfer, {"sm": 90, "cuda": "12.9", "config": CONFIG}))
    repack = line_of(FP8, 'raise RuntimeError("flashinfer')
    assert hopper == [("fired", "RuntimeError: flashinfer repacking needs SM100", repack)]
    blackwell = raised(quant_step(flashinfer, {"sm": 100, "cuda": "12.9", "config": CONFIG}))
    assert [r[0] for r in blackwell] == ["unknown"]
    assert blackwell[0][1] == "TypeError: Unsupported scale dtype"


def test_a_model_with_one_ffn_size_builds_its_experts_with_it() -> None:
    # Mixtral's and GPT-OSS's keys: num_local_experts, intermediate_size (14336 // 8 per
    # rank = 1792, a multiple of 128); 14400 // 8 = 1800 is not
    mixtral = {
        "architectures": ["MixtralForCausalLM"],
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "hidden_size": 4096,
        "intermediate_size": 14336,
    }
    sm90 = {"sm": 90, "cuda": "12.9"}
    assert raised(quant_step({"tp_size": 8}, {**sm90, "config": mixtral})) == []
    odd = {**mixtral, "intermediate_size": 14400}
    assert [r[0] for r in raised(quant_step({"tp_size": 8}, {**sm90, "config": odd}))] == ["fired"]
    # beside another FFN size, intermediate_size may be the dense layers': not used
    two = {**odd, "intermediate_size_mlp": 16384}
    assert quant_step({"tp_size": 8}, {**sm90, "config": two}) is None


def test_a_registered_parameter_keeps_its_dtype_and_the_attributes_set_on_it() -> None:
    # create_weights registers a float32 scale marked not UE8M0; after loading, the
    # DeepGEMM runner requantizes only scales not marked, on Blackwell (SCALE_UE8M0, an
    # alias of a value the module computed when imported)
    deep_gemm = {"moe_runner_backend": "deep_gemm"}
    hopper = raised(quant_step(deep_gemm, {"sm": 90, "cuda": "12.9", "config": CONFIG}))
    assert hopper == []  # the isinstance and dtype asserts hold: no undecided check
    blackwell = raised(quant_step(deep_gemm, {"sm": 100, "cuda": "12.9", "config": CONFIG}))
    assert blackwell == [
        (
            "fired",
            "RuntimeError: requantized scales need the DeepEP layer",
            line_of(FP8, 'raise RuntimeError("requantized'),
        )
    ]


def test_a_parameter_s_shape_decides_the_padding_check() -> None:
    # flashinfer_cutlass pads the per-rank w13 rows to the swizzled scales' 128: with 768
    # // 8 = 96 per rank, 2 * 96 = 192 rows pad to 256, which a gated activation refuses;
    # 1536 // 8 = 192 per rank makes 384 rows, a multiple of 128. The nested check reads
    # the enclosing method's layer (a closure): one row per local expert, no error.
    cutlass = {"moe_runner_backend": "flashinfer_cutlass", "tp_size": 8}
    b200 = {"sm": 100, "cuda": "12.9"}
    assert raised(quant_step(cutlass, {**b200, "config": CONFIG}, block=None)) == []
    narrow = {**CONFIG, "moe_intermediate_size": 768}
    assert raised(quant_step(cutlass, {**b200, "config": narrow}, block=None)) == [
        (
            "fired",
            "padding is not implemented for gated activations",
            line_of(FP8, "assert not layer.is_gated"),
        )
    ]
