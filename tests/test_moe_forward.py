"""The first forward of an MoE layer with the standard dispatcher (kb.explain.moe_forward),
on synthetic modules shaped like SGLang's: the model's MoE block builds a TopK from
config.json, TopK's forward chooses its output's class by the MoE runner backend (BYPASSED
under flashinfer_trtllm, carrying the TopK's config), and the layer's forward dispatches it
to its quantization method's `apply`, which asserts on that config on the bypassed path
only. No SGLang code."""

from __future__ import annotations

from typing import Any

from kb.explain import derived, model_class, moe, moe_block, moe_forward, moe_quant
from kb.explain.abstract_values import Instance
from kb.explain.classes import class_ref
from kb.explain.predicates import Profile, Unknown
from kb.explain.simulate import Simulator
from kb.explain.source_modules import Module
from tests import sim_repos

SRT = "python/sglang/srt/"
ARGS = SRT + "server_args.py"
MODEL = SRT + "models/toy_moe.py"
LAYER = SRT + "layers/moe/fused_moe_triton/layer.py"
QUANT = SRT + "layers/quantization/toy_fp8.py"
UNQUANT = SRT + "layers/quantization/toy_unquant.py"

FILES = {
    ARGS: """
        from dataclasses import dataclass


        @dataclass
        class ServerArgs:
            model_path: str
            moe_runner_backend: str = "auto"
            moe_a2a_backend: str = "none"
            enable_torch_compile: bool = False
            disable_shared_experts_fusion: bool = False

            def __post_init__(self):
                pass


        _global_server_args = None


        def get_global_server_args():
            return _global_server_args
        """,
    SRT + "layers/moe/utils.py": """
        from enum import Enum

        from sglang.srt.server_args import get_global_server_args


        class MoeRunnerBackend(Enum):
            AUTO = "auto"
            FLASHINFER_TRTLLM = "flashinfer_trtllm"

            def is_flashinfer_trtllm(self):
                return self == MoeRunnerBackend.FLASHINFER_TRTLLM


        def get_moe_runner_backend():
            return MoeRunnerBackend(get_global_server_args().moe_runner_backend)
        """,
    SRT + "layers/moe/topk.py": """
        from dataclasses import dataclass
        from enum import IntEnum, auto
        from typing import NamedTuple, Optional

        import torch

        from sglang.srt.layers.moe.utils import get_moe_runner_backend
        from sglang.srt.layers.utils import MultiPlatformOp


        @dataclass
        class TopKConfig:
            top_k: int
            renormalize: bool = True
            output_format: Optional[int] = None


        class TopKOutputFormat(IntEnum):
            STANDARD = auto()
            BYPASSED = auto()


        class StandardTopKOutput(NamedTuple):
            topk_weights: torch.Tensor
            topk_ids: torch.Tensor
            router_logits: torch.Tensor


        class BypassedTopKOutput(NamedTuple):
            hidden_states: torch.Tensor
            router_logits: torch.Tensor
            topk_config: TopKConfig


        class TopKOutputChecker:
            @staticmethod
            def format_is_bypassed(topk_output):
                return isinstance(topk_output, BypassedTopKOutput)


        def select_experts(hidden_states, router_logits, topk_config):
            weights, ids = torch.topk(router_logits, topk_config.top_k)
            return StandardTopKOutput(weights, ids, router_logits)


        class TopK(MultiPlatformOp):
            def __init__(
                self, top_k, *, renormalize=True, output_format=None, correction_bias=None
            ):
                super().__init__()
                self.topk_config = TopKConfig(
                    top_k=top_k, renormalize=renormalize, output_format=output_format
                )

            def forward_cuda(self, hidden_states, router_logits):
                if self.topk_config.output_format is not None:
                    output_format = self.topk_config.output_format
                elif get_moe_runner_backend().is_flashinfer_trtllm():
                    output_format = TopKOutputFormat.BYPASSED
                else:
                    output_format = TopKOutputFormat.STANDARD
                if output_format == TopKOutputFormat.BYPASSED:
                    return BypassedTopKOutput(hidden_states, router_logits, self.topk_config)
                return select_experts(hidden_states, router_logits, self.topk_config)
        """,
    SRT + "layers/moe/token_dispatcher.py": """
        from typing import NamedTuple

        import torch


        class StandardDispatchOutput(NamedTuple):
            hidden_states: torch.Tensor
            topk_output: object


        class StandardDispatcher:
            def dispatch(self, hidden_states, topk_output):
                return StandardDispatchOutput(hidden_states=hidden_states, topk_output=topk_output)
        """,
    LAYER: """
        import torch


        class FusedMoE(torch.nn.Module):
            def __init__(
                self,
                num_experts,
                top_k,
                intermediate_size=None,
                apply_router_weight_on_input=False,
                routing=None,
                routing_method_type=None,
                layer_id=None,
                quant_config=None,
                prefix="",
            ):
                raise RuntimeError("the step runs on the layer it is given")

            def forward(self, hidden_states, topk_output):
                return self.forward_impl(hidden_states, topk_output)

            def forward_impl(self, hidden_states, topk_output):
                assert self.quant_method is not None
                dispatch_output = self.dispatcher.dispatch(
                    hidden_states=hidden_states, topk_output=topk_output
                )
                return self.quant_method.apply(layer=self, dispatch_output=dispatch_output)
        """,
    SRT + "layers/moe/moe_runner/toy.py": """
        class ToyWrapper:
            pass


        def run_kernel(layer):
            # (state the first call builds itself: followed, no error)
            if getattr(layer, "lazy_wrapper", None) is None:
                layer.lazy_wrapper = ToyWrapper()
            assert layer.lazy_wrapper is not None, "the kernel's wrapper is built"
            # (the runner's own check, on what the layer was built with)
            assert layer.activation == "silu", "Only silu is supported by the toy kernel"
        """,
    # an unquantized method is a platform op (MultiPlatformOp, whose module is not held):
    # its `forward` calls the method its constructor chose for the platform
    SRT + "layers/quantization/toy_unquant.py": """
        from sglang.srt.layers.moe.moe_runner.toy import run_kernel
        from sglang.srt.layers.utils import MultiPlatformOp


        class ToyUnquantizedMoEMethod(MultiPlatformOp):
            def apply(self, layer, dispatch_output):
                return self.forward(layer=layer, dispatch_output=dispatch_output)

            def forward_cuda(self, layer, dispatch_output):
                run_kernel(layer)
                return dispatch_output.hidden_states

            def forward_hip(self, layer, dispatch_output):
                assert False, "no ROCm kernel"
        """,
    QUANT: """
        from sglang.srt.layers.moe.moe_runner.toy import run_kernel
        from sglang.srt.layers.moe.topk import TopKOutputChecker
        from sglang.srt.layers.moe.utils import get_moe_runner_backend


        class ToyFp8MoEMethod:
            def apply(self, layer, dispatch_output):
                x = dispatch_output.hidden_states
                topk_output = dispatch_output.topk_output
                if get_moe_runner_backend().is_flashinfer_trtllm() and (
                    TopKOutputChecker.format_is_bypassed(topk_output)
                ):
                    topk_config = topk_output.topk_config
                    assert topk_config.renormalize, "Renormalize is required"
                    assert topk_config.top_k == 1, "ModelOpt FP8 MoE requires top_k==1"
                # (the batch's: not said, whatever the settings)
                assert x.shape[0] % 4 == 0, "tokens padded to 4"
                run_kernel(layer)
                return x
        """,
    SRT + "layers/quantization/toy_gguf.py": """
        class ToyGGUFConfig:
            pass
        """,
    MODEL: """
        from enum import IntEnum

        from torch import nn

        from sglang.srt.layers.moe.fused_moe_triton.layer import FusedMoE
        from sglang.srt.layers.moe.topk import TopK
        from sglang.srt.server_args import get_global_server_args


        class ToyMoeBlock(nn.Module):
            def __init__(self, config, layer_id, quant_config=None, prefix=""):
                super().__init__()
                self.num_experts = config.num_experts
                from sglang.srt.layers.quantization.toy_gguf import ToyGGUFConfig

                norm_topk_prob = config.norm_topk_prob
                if isinstance(quant_config, ToyGGUFConfig):
                    norm_topk_prob = False
                self.is_hash = False
                if self.is_hash:
                    self.topk = None
                else:
                    # (built in a branch, from a dict of its keyword arguments)
                    topk_kwargs = dict(
                        top_k=config.num_experts_per_tok,
                        renormalize=norm_topk_prob,
                        correction_bias=config.routing_kind,  # (not in config.json: unknown)
                    )
                    self.topk = TopK(**topk_kwargs)
                intermediate_size = config.intermediate_size
                self.experts = FusedMoE(
                    num_experts=self.num_experts,
                    top_k=config.num_experts_per_tok,
                    intermediate_size=intermediate_size,
                    apply_router_weight_on_input=True,
                    routing=config.routing_kind,
                    routing_method_type=RoutingMethodType.Toy,
                    layer_id=layer_id,
                    quant_config=quant_config,
                )


        class RoutingMethodType(IntEnum):
            Toy = 1


        class ToyDecoderLayer(nn.Module):
            def __init__(
                self, config, layer_id, quant_config=None, moe_quant_config_override=None
            ):
                super().__init__()
                # (the override its builder leaves out: its default)
                self.mlp = ToyMoeBlock(
                    config, layer_id, quant_config=moe_quant_config_override or quant_config
                )


        class ToyForCausalLM(nn.Module):
            def __init__(self, config, quant_config=None, prefix=""):
                super().__init__()
                self.config = config
                self.determine_fusion()
                self.layer = ToyDecoderLayer(config, 0, quant_config=quant_config)

            def determine_fusion(self):
                if self.config.num_experts != 256:
                    get_global_server_args().disable_shared_experts_fusion = True


        EntryClass = ToyForCausalLM
        """,
}


def modules() -> dict[str, Module]:
    return sim_repos.parsed_modules(FILES)


def forward_checks(
    top_k: int,
    runner: str = "flashinfer_trtllm",
    torch_compile: bool = False,
    method: str = "ToyFp8MoEMethod",
    activation: str = "silu",
    platform: str = "cuda",
    gguf: bool = False,
) -> list[tuple[str, str]]:
    """The checks the step keeps at the first forward (the path's file name, the message),
    the layer built with the quantization `method` and the experts' `activation`."""
    mods = modules()
    config = {
        "architectures": ["ToyForCausalLM"],
        "num_experts": 128,
        "num_experts_per_tok": top_k,
        "norm_topk_prob": True,
        "num_hidden_layers": 2,
    }
    hardware = {"sm": 100} if platform == "cuda" else {"gpu": "MI300X"}
    profile = Profile.parse({**hardware, "platform": platform, "config": config})
    fields = {
        "model_path": "m",
        "moe_runner_backend": runner,
        "enable_torch_compile": torch_compile,
    }
    sim = Simulator(mods.get, mods[ARGS], fields, profile, derive=derived)
    sim.run()
    layer = Instance(class_ref(mods[LAYER], "FusedMoE"))
    layer.fields["activation"] = activation
    quant = mods[QUANT if method == "ToyFp8MoEMethod" else UNQUANT]
    layer.fields["quant_method"] = Instance(class_ref(quant, method))
    dispatchers = mods[SRT + "layers/moe/token_dispatcher.py"]
    layer.fields["dispatcher"] = Instance(class_ref(dispatchers, "StandardDispatcher"))
    built = moe.MoeLayer()
    built.layer = layer
    start = len(sim.result.checks)
    gguf_config = Instance(
        class_ref(mods[SRT + "layers/quantization/toy_gguf.py"], "ToyGGUFConfig")
    )
    step = moe_forward.step(
        sim, sim.fields, built, MODEL, profile, gguf_config if gguf else object()
    )
    if step is None:
        return []
    assert sim.run_after(step)
    return [
        (c.path.rsplit("/", 1)[-1], c.message)
        for c in sim.result.checks[start:]
        if c.outcome != "passed"
    ]


def test_the_top_k_output_s_config_makes_the_apply_assert_fire() -> None:
    # flashinfer_trtllm: TopK's forward bypasses, its config (top_k 8) reaches `apply`
    assert forward_checks(8) == [("toy_fp8.py", "ModelOpt FP8 MoE requires top_k==1")]


def test_a_top_k_the_assert_accepts_passes() -> None:
    assert forward_checks(1) == []


def test_the_standard_output_does_not_reach_the_bypassed_path() -> None:
    assert forward_checks(8, runner="auto") == []


def test_the_block_s_own_import_decides_the_top_k_s_config() -> None:
    # (a class the block's constructor imports itself, tested with isinstance)
    assert forward_checks(1, gguf=True) == [("toy_fp8.py", "Renormalize is required")]


def test_the_architecture_s_constructor_sets_server_args_first() -> None:
    mods = modules()
    config = {"architectures": ["ToyForCausalLM"], "num_experts": 2, "num_hidden_layers": 2}
    profile = Profile.parse({"sm": 100, "platform": "cuda", "config": config})
    sim = Simulator(mods.get, mods[ARGS], {"model_path": "m"}, profile, derive=derived)
    sim.run()
    set_: dict[str, Any] = {}
    step = model_class.server_args_step(sim, MODEL, profile, None, set_)
    assert step is not None and sim.run_after(step)
    assert set_ == {"disable_shared_experts_fusion": True}
    # (a stage's own writes are not kept: the caller keeps what the step found)
    assert sim.fields["disable_shared_experts_fusion"] is False
    v3 = Profile.parse({"sm": 100, "platform": "cuda", "config": {**config, "num_experts": 256}})
    sim = Simulator(mods.get, mods[ARGS], {"model_path": "m"}, v3, derive=derived)
    sim.run()
    kept: dict[str, Any] = {}
    step = model_class.server_args_step(sim, MODEL, v3, None, kept)
    assert step is not None and sim.run_after(step) and kept == {}


def test_the_runner_s_own_checks_are_kept() -> None:
    # (its lazily built state followed: no error of it)
    relu2 = forward_checks(1, activation="relu2")
    assert relu2 == [("toy.py", "Only silu is supported by the toy kernel")]


def test_a_platform_op_s_forward_is_its_platform_s_method() -> None:
    unquantized = {"method": "ToyUnquantizedMoEMethod", "runner": "auto"}
    assert forward_checks(8, activation="relu2", **unquantized) == [
        ("toy.py", "Only silu is supported by the toy kernel")
    ]
    assert forward_checks(8, **unquantized) == []
    assert forward_checks(8, platform="rocm", **unquantized) == [
        ("toy_unquant.py", "no ROCm kernel")
    ]


def test_what_the_batch_decides_is_dropped() -> None:
    # the assert on the tokens' count is reached on every path: undecided, not said
    assert all("padded" not in message for _, message in forward_checks(1))
    assert all("padded" not in message for _, message in forward_checks(8, runner="auto"))


def test_under_torch_compile_the_batch_decides_the_output_s_class() -> None:
    # (a batch of one token takes forward_native there: nothing followed)
    assert forward_checks(8, torch_compile=True) == []


def test_nothing_is_followed_without_the_architecture_or_under_deepep() -> None:
    mods = modules()
    profile = Profile.parse({"sm": 100, "platform": "cuda", "config": {"num_experts": 2}})
    sim = Simulator(mods.get, mods[ARGS], {"model_path": "m"}, profile, derive=derived)
    sim.run()
    built = moe.MoeLayer()
    built.layer = Instance(class_ref(mods[LAYER], "FusedMoE"))
    built.layer.fields["quant_method"] = None  # (unquantized)
    assert moe_forward.step(sim, sim.fields, built, MODEL, profile, None) is None
    fields: dict[str, Any] = {**sim.fields, "moe_a2a_backend": "deepep"}
    assert moe_forward.step(sim, fields, built, MODEL, profile, None) is None


def test_the_experts_arguments_are_those_the_block_passes() -> None:
    # (Llama-4's shape: one FFN size per kind of layer in config.json, the experts' passed
    # through a local; a flag config.json does not decide is not taken)
    mods = modules()
    config = {
        "architectures": ["ToyForCausalLM"],
        "num_experts": 16,
        "num_experts_per_tok": 1,
        "hidden_size": 64,
        "intermediate_size": 8192,
        "intermediate_size_mlp": 16384,
        "num_hidden_layers": 2,
    }
    profile = Profile.parse({"sm": 100, "platform": "cuda", "config": config})
    sim = Simulator(mods.get, mods[ARGS], {"model_path": "m"}, profile, derive=derived)
    sim.run()
    passed: dict[str, Any] = {}
    ran = sim.run_after(
        lambda: passed.update(moe_block.experts_arguments(sim, MODEL, profile, None) or {})
    )
    assert ran
    assert passed["intermediate_size"] == 8192
    assert passed["apply_router_weight_on_input"] is True
    assert isinstance(passed["routing"], Unknown)
    # config.json's own keys first; the block's for what config.json does not settle
    args = moe_quant.layer_args(sim, profile, moe_quant.block_args(sim, MODEL, profile, None))
    assert args is not None
    kwargs, keys, passed_names = args
    assert keys == ["hidden_size"]  # (the block passes the others)
    assert passed_names == [
        "apply_router_weight_on_input",
        "intermediate_size",
        "num_experts",
        "routing_method_type",
        "top_k",
    ]
    assert kwargs["intermediate_size"] == 8192
    assert kwargs["apply_router_weight_on_input"] is True
    assert "routing" not in kwargs  # (not decided: left out)
    assert moe_quant.layer_args(sim, profile) is None  # (config.json alone: not settled)
    # a size the run does not decide: config.json's alone, none of the block's others
    # (its flags may be set for the counts it passes: fused shared experts)
    mixed = {**passed, "num_experts": Unknown(("n",)), "intermediate_size": 4096}
    sized = Profile.parse({"sm": 100, "config": {**config, "moe_intermediate_size": 512}})
    args = moe_quant.layer_args(sim, sized, mixed)
    assert args is not None
    kwargs, keys, passed_names = args
    assert (kwargs["num_experts"], kwargs["intermediate_size"], passed_names) == (16, 512, [])
    assert "apply_router_weight_on_input" not in kwargs
    # config.json settling every size: its keys, whatever the block computes (what it
    # computes may read server args the architecture's constructor changes first), with
    # the block's choices of kind (a flag, a string), which config.json decides
    args = moe_quant.layer_args(sim, sized, {**passed, "layer_count": 3})
    assert args is not None and args[0]["intermediate_size"] == 512
    assert args[2] == ["apply_router_weight_on_input", "routing_method_type"]
