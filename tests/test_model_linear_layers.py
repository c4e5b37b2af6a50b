"""The linear layers a model class builds, followed in its constructor (kb/explain/model_class.py):
a column-parallel layer divides its output across the tp ranks (`divide` asserting it),
asks the quantization config for its method by the layer's type and module name, and has it
create the weights on the per-rank sizes; a block-quantized method raises when the per-rank
output is not a multiple of the block. Synthetic modules shaped like SGLang's (no SGLang
code); the MLP class raises nothing itself, so only the layer it builds can."""

from __future__ import annotations

from typing import Any

from kb.explain import block_forward, derived, model_class
from kb.explain.frames import Ctx, Frame
from kb.explain.predicates import Profile
from kb.explain.simulate import Check, Simulator
from kb.explain.source_modules import Module
from tests import sim_repos

SRT = "python/sglang/srt/"
ARGS = SRT + "server_args.py"
MODEL = SRT + "models/toy.py"
QUANT = SRT + "layers/quantization/block.py"

FILES = {
    ARGS: """
        from dataclasses import dataclass


        @dataclass
        class ServerArgs:
            model_path: str
            tp_size: int = 1
            mm_attention_backend: str = None

            def __post_init__(self):
                pass


        _global_server_args = None


        def get_global_server_args():
            return _global_server_args
        """,
    SRT + "layers/attention/vision.py": """
        import torch
        from torch import nn

        from sglang.srt.server_args import get_global_server_args


        class VisionAttention(nn.Module):
            def __init__(self, embed_dim, num_heads):
                super().__init__()
                backend = get_global_server_args().mm_attention_backend
                if backend == "fa3" and torch.cuda.get_device_capability()[0] >= 10:
                    raise ValueError("The 'fa3' backend is not supported on Blackwell GPUs")
        """,
    SRT + "distributed/__init__.py": """
        from sglang.srt.distributed.parallel_state import *
        from sglang.srt.distributed.utils import *
        """,
    SRT + "distributed/parallel_state.py": """
        _TP = None


        def get_tensor_model_parallel_world_size():
            return _TP.world_size
        """,
    SRT + "distributed/utils.py": """
        def divide(numerator, denominator):
            assert numerator % denominator == 0, f"{numerator} is not divisible by {denominator}"
            return numerator // denominator
        """,
    SRT + "utils/common.py": """
        def add_prefix(name, prefix):
            return name if not prefix else f"{prefix}.{name}"


        def is_flashinfer_available():
            return False
        """,
    SRT + "layers/linear.py": """
        import torch

        from sglang.srt.distributed import divide, get_tensor_model_parallel_world_size


        class LinearBase(torch.nn.Module):
            def __init__(self, input_size, output_size, quant_config=None, prefix=""):
                super().__init__()
                self.input_size = input_size
                self.output_size = output_size
                self.quant_method = quant_config.get_quant_method(self, prefix=prefix)


        class ColumnParallelLinear(LinearBase):
            def __init__(
                self, input_size, output_size, quant_config=None, prefix="", fast_gemm=False
            ):
                super().__init__(input_size, output_size, quant_config, prefix)
                self.fast_gemm = fast_gemm
                tp_size = get_tensor_model_parallel_world_size()
                self.output_size_per_partition = divide(output_size, tp_size)
                self.quant_method.create_weights(
                    layer=self, output_size_per_partition=self.output_size_per_partition
                )
        """,
    QUANT: """
        import torch

        from sglang.srt.layers.linear import LinearBase


        class BlockConfig:
            def __init__(self, block, ignored, native=False):
                self.block = block
                self.ignored = ignored
                self.native = native

            def get_quant_method(self, layer, prefix):
                if isinstance(layer, LinearBase) and prefix not in self.ignored:
                    return BlockLinearMethod(self)
                return None


        class BlockLinearMethod:
            def __init__(self, quant_config):
                self.block = quant_config.block
                self.native = quant_config.native

            def process_weights_after_loading(self, layer):
                if self.native and torch.cuda.get_device_capability()[0] < 10:
                    raise ValueError("native block GEMMs need SM100")

            def apply(self, layer, x, bias=None):
                if isinstance(x, tuple):  # (an input quantized before: the same GEMM)
                    return self._gemm(x[0])
                return self._gemm(x)

            def _gemm(self, x):
                if self.block == 32 and torch.cuda.get_device_capability()[0] != 10:
                    raise RuntimeError("32-wide blocks run on SM100 only")
                assert x.shape[-1] % self.block == 0  # the batch's: not said
                return x

            def create_weights(self, layer, output_size_per_partition):
                if output_size_per_partition % self.block != 0:
                    raise ValueError(
                        f"Output {output_size_per_partition} is not divisible by {self.block}."
                    )
        """,
    MODEL: """
        from torch import nn

        from sglang.srt.layers.attention.vision import VisionAttention
        from sglang.srt.layers.linear import ColumnParallelLinear
        from sglang.srt.utils.common import add_prefix, is_flashinfer_available


        class ToyMLP(nn.Module):
            def __init__(self, hidden_size, intermediate_size, quant_config=None, prefix=""):
                super().__init__()
                self.up_proj = ColumnParallelLinear(
                    hidden_size,
                    intermediate_size,
                    quant_config=quant_config,
                    prefix=add_prefix("up_proj", prefix),
                    # (an argument resting on an installed package: the run assumes it)
                    fast_gemm=is_flashinfer_available(),
                )


        class ToyVisionBlock(nn.Module):
            # a vision tower's block: its attention layer checks the multimodal backend
            def __init__(self, config):
                super().__init__()
                self.attn = VisionAttention(config.hidden_size, 8)


        class ToyForCausalLM(nn.Module):
            def __init__(self, config, quant_config=None, prefix=""):
                super().__init__()
                self.visual = ToyVisionBlock(config)
                self.mlp = ToyMLP(
                    config.hidden_size,
                    config.intermediate_size,
                    quant_config=quant_config,
                    prefix=add_prefix("mlp", prefix),
                )


        EntryClass = ToyForCausalLM
        """,
}
CONFIG = {
    "architectures": ["ToyForCausalLM"],
    "hidden_size": 64,
    "intermediate_size": 1216 * 8,
    "num_hidden_layers": 2,
}


def modules() -> dict[str, Module]:
    return sim_repos.parsed_modules(FILES)


def load_checks(
    tp: int,
    mm_backend: str | None = None,
    ignored: list[str] | None = None,
    native: bool = False,
    sm: int = 90,
    block: int = 128,
    forward: bool = False,
) -> list[tuple[str, str, int]]:
    """The checks that fire building the model (or, `forward`, at its first forward)."""
    mods = modules()
    profile = Profile.parse({"sm": sm, "config": CONFIG})
    sim = Simulator(
        mods.get,
        mods[ARGS],
        {"model_path": "m", "tp_size": tp, "mm_attention_backend": mm_backend},
        profile,
        derive=derived,
    )
    sim.run()
    frame = Frame(mods[QUANT], "<test>", {"ignored": ignored or [], "native": native})
    from ast import parse

    source = f"BlockConfig({block}, ignored, native)"
    config: Any = sim.eval(parse(source, mode="eval").body, frame, Ctx())
    linear_layers: list[Any] = []
    step = model_class.step(sim, MODEL, profile, config, linear_layers)
    assert step is not None and sim.run_after(step)
    start = len(sim.result.checks)
    if forward:
        first = block_forward.step(sim, MODEL, profile, config, linear_layers)
        assert first is not None and sim.run_after(first)
    checks = sim.result.checks[start:] if forward else sim.result.checks
    return [raised(c) for c in checks if c.outcome != "passed"]


def raised(check: Check) -> tuple[str, str, int]:
    return check.path.rsplit("/", 1)[-1], check.message, check.line


def test_a_linear_layer_s_quantization_method_checks_the_per_rank_size() -> None:
    # 9728 / 8 = 1216 per rank: not a multiple of the 128 block; an error, though another
    # argument of the layer rests on an assumption (each parameter keeps its own inputs)
    ((path, message, _),) = load_checks(8)
    assert (path, message) == ("block.py", "ValueError: Output 1216 is not divisible by 128.")
    assert load_checks(4) == []  # 2432 = 19 x 128


def test_the_layer_s_module_name_decides_whether_it_is_quantized() -> None:
    # the config's ignore list names the layer's module: no quantization method, no check
    assert load_checks(8, ignored=["mlp.up_proj"]) == []


def test_divide_asserts_the_tp_size_divides_the_layer() -> None:
    ((path, message, _), *_) = load_checks(3)
    assert (path, message) == ("utils.py", "{numerator} is not divisible by {denominator}")


def test_the_method_checks_the_gpu_once_the_weights_are_loaded() -> None:
    # process_weights_after_loading of each linear layer's method, after the model is built
    ((path, message, _),) = load_checks(4, native=True)
    assert (path, message) == ("block.py", "ValueError: native block GEMMs need SM100")
    assert load_checks(4, native=True, sm=100) == []
    assert load_checks(4, native=True, ignored=["mlp.up_proj"]) == []  # not quantized


def test_a_linear_layer_s_method_checks_the_gpu_at_its_first_forward() -> None:
    # its `apply` on the hidden states (a tensor, not a tuple): the GPU decides the raise;
    # the assert on the batch's shape is undecided and not said
    assert load_checks(4, block=32) == []  # built and loaded without a raise
    lines = FILES[QUANT].splitlines()
    line = 1 + next(i for i, x in enumerate(lines) if "32-wide blocks" in x)
    assert load_checks(4, block=32, forward=True) == [
        ("block.py", "RuntimeError: 32-wide blocks run on SM100 only", line)
    ]
    assert load_checks(4, block=32, sm=100, forward=True) == []


def test_a_vision_tower_s_attention_layer_checks_its_backend_when_built() -> None:
    assert load_checks(4, mm_backend="fa3", sm=100) == [
        ("vision.py", "ValueError: The 'fa3' backend is not supported on Blackwell GPUs", 13)
    ]
    assert load_checks(4, mm_backend="fa3", sm=90) == []
    assert load_checks(4, sm=100) == []
