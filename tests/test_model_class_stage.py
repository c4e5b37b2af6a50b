"""Past ServerArgs, the model loader builds the architecture's class, whose constructors
check the model and the parallel sizes, and the ModelRunner then checks the loaded model's
forward signature for pipeline parallelism (kb/explain/model_class.py). Followed on a
synthetic repository shaped like SGLang's (no SGLang code): a MoE block raising when the tp
size exceeds the experts, built by a decoder layer only for its sparse layers (decided by a
helper reading config.json and the layer id), the layers built through a lambda handed to
`make_layers`, and a runner asserting `pp_proxy_tensors` in the model's forward.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from sqlmodel import Session

from kb.explain import explain
from kb.explain.predicates import Profile
from tests.conftest import one_release_session
from tests.fixture_repos import SERVER_ARGS
from tests.sim_repos import UTILS, UTILS_TEXT

SRT = "python/sglang/srt/"
MODEL = SRT + "models/toy_moe.py"
RUNNER = SRT + "model_executor/model_runner.py"

ARGS = """
import argparse
import dataclasses


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    tp_size: int = 1
    pp_size: int = 1
    ep_size: int = 1
    expert_distribution_recorder_mode: str = None
    deepep_mode: str = "auto"
    enable_two_batch_overlap: bool = False
    disable_cuda_graph: bool = False
    dp_size: int = 1
    enable_dp_attention: bool = False

    def __post_init__(self):
        pass

    def check_server_args(self):
        pass

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", type=str, required=True, help="Model weights.")
        parser.add_argument("--tp-size", type=int, default=ServerArgs.tp_size, help="TP.")
        parser.add_argument("--pp-size", type=int, default=ServerArgs.pp_size, help="PP.")
        parser.add_argument("--ep-size", type=int, default=ServerArgs.ep_size, help="EP.")
        parser.add_argument("--expert-distribution-recorder-mode", type=str, help="EPLB.")
        parser.add_argument("--deepep-mode", type=str, default="auto", help="DeepEP mode.")
        parser.add_argument("--enable-two-batch-overlap", action="store_true", help="TBO.")
        parser.add_argument("--disable-cuda-graph", action="store_true", help="No graphs.")
        parser.add_argument("--dp-size", type=int, default=ServerArgs.dp_size, help="DP.")
        parser.add_argument("--enable-dp-attention", action="store_true", help="DP attention.")


_global_server_args = None


def get_global_server_args():
    return _global_server_args
"""

PARALLEL_STATE = """
_TP = None
_PP = None


def get_tensor_model_parallel_world_size():
    return _TP.world_size


def get_pp_group():
    return _PP
"""

LAYER_UTILS = """
def make_layers(num_hidden_layers, layer_fn, prefix=""):
    return [layer_fn(idx=i, prefix=prefix) for i in range(num_hidden_layers)]
"""

MODEL_TEXT = """
from torch import nn

from sglang.srt.batch_overlap.two_batch_overlap import model_forward_maybe_tbo
from sglang.srt.distributed.parallel_state import (
    get_pp_group,
    get_tensor_model_parallel_world_size,
)
from sglang.srt.eplb.expert_location import ModelConfigForExpertLocation
from sglang.srt.layers.dp_attention import get_attention_tp_size
from sglang.srt.server_args import get_global_server_args
from sglang.srt.utils.layers import make_layers


class ToyRouter(nn.Module):
    # refuses, in its forward, what its constructor accepted (GPT-OSS's MoE block and DeepEP)
    def __init__(self, config):
        super().__init__()

    def forward(self, hidden_states, forward_batch=None):
        if get_global_server_args().ep_size > 1:
            raise NotImplementedError("ToyRouter has no expert-parallel forward")
        return self._route(hidden_states, forward_batch)

    def _route(self, hidden_states, forward_batch):
        assert forward_batch is not None  # the batch's: undecided, never said
        assert hidden_states.shape[0] > 0
        return hidden_states


class ToyMoE(nn.Module):
    def __init__(self, config, quant_config=None, layer_id=0, prefix=""):
        super().__init__()
        self.tp_size = get_tensor_model_parallel_world_size()
        if self.tp_size > config.num_experts:
            raise ValueError(
                f"Tensor parallel size {self.tp_size} is greater than the number of "
                f"experts {config.num_experts}."
            )


class ToyMLP(nn.Module):
    def __init__(self, hidden_size, hidden_act):
        super().__init__()
        if hidden_act != "silu":
            raise ValueError(f"Unsupported activation: {hidden_act}.")


class ToyAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, quant_config=None, prefix=""):
        super().__init__()
        tp_size = get_tensor_model_parallel_world_size()
        self.total_num_heads = num_heads
        assert self.total_num_heads % tp_size == 0


class ToyDecoderLayer(nn.Module):
    def __init__(self, config, layer_id, quant_config=None, prefix=""):
        super().__init__()
        self.config = config
        self.self_attn = ToyAttention(
            hidden_size=config.hidden_size,
            num_heads=config.num_attention_heads,
            quant_config=quant_config,
        )
        self.router = ToyRouter(config)
        self.is_sparse = self._is_sparse(layer_id)
        if self.is_sparse:
            self.mlp = ToyMoE(config=config, quant_config=quant_config, layer_id=layer_id)
        else:
            self.mlp = ToyMLP(config.hidden_size, hidden_act=config.hidden_act)

    def _is_sparse(self, layer_id):
        return layer_id >= self.config.first_k_dense_replace


class ToyModel(nn.Module):
    def __init__(self, config, quant_config=None, prefix="", decoder_layer_type=ToyDecoderLayer):
        super().__init__()
        self.layers = make_layers(
            config.num_hidden_layers,
            lambda idx, prefix: decoder_layer_type(
                config=config, layer_id=idx, quant_config=quant_config, prefix=prefix
            ),
        )


class WideDecoderLayer(ToyDecoderLayer):
    def __init__(self, config, layer_id, quant_config=None, prefix=""):
        super().__init__(config, layer_id, quant_config, prefix)
        if config.hidden_size % 128:
            raise ValueError("Wide layers need a hidden size that is a multiple of 128.")


class WideModel(ToyModel):
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__(config, quant_config, prefix, decoder_layer_type=WideDecoderLayer)


class ToyMoeForCausalLM(nn.Module):
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__()
        self.model = ToyModel(config, quant_config=quant_config, prefix="model")

    @classmethod
    def get_model_config_for_expert_location(cls, config):
        return ModelConfigForExpertLocation(
            num_layers=config.num_hidden_layers, num_logical_experts=config.num_experts
        )

    def forward(self, input_ids, positions, forward_batch, pp_proxy_tensors=None):
        return self.model(input_ids)


class ToyHeadsForCausalLM(ToyMoeForCausalLM):
    # (the attention's tp size: tp, over dp with DP attention; a global set at start-up)
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__(config, quant_config, prefix)
        attn_tp_size = get_attention_tp_size()
        assert config.num_attention_heads % attn_tp_size == 0


class ToyNoPipelineForCausalLM(ToyMoeForCausalLM):
    def forward(self, input_ids, positions, forward_batch):
        return self.model(input_ids)


class ToyOneStageForCausalLM(ToyNoPipelineForCausalLM):
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__(config, quant_config, prefix)
        self.pp_group = get_pp_group()
        assert self.pp_group.is_first_rank and self.pp_group.is_last_rank


class ToyWideForCausalLM(ToyMoeForCausalLM):
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__(config, quant_config, prefix)
        self.model = WideModel(config, quant_config=quant_config, prefix="model")


class WideHandedModel(ToyModel):
    # (Qwen3-MoE's shape: its own parameter, defaulting to its layer, handed to the base)
    def __init__(self, config, quant_config=None, prefix="", decoder_layer_type=WideDecoderLayer):
        super().__init__(config, quant_config, prefix, decoder_layer_type=decoder_layer_type)


class ToyWideHandedForCausalLM(ToyMoeForCausalLM):
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__(config, quant_config, prefix)
        self.model = WideHandedModel(config, quant_config=quant_config, prefix="model")


class OtherDecoderLayer(ToyDecoderLayer):
    pass


class ToyNestedModel(nn.Module):
    # its layers built by a function its constructor defines, handed to make_layers
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__()

        def layer_fn(idx, prefix):
            return OtherDecoderLayer(config=config, layer_id=idx, quant_config=quant_config)

        self.layers = make_layers(config.num_hidden_layers, layer_fn)


class ToyOtherForCausalLM(nn.Module):
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__()
        self.model = ToyNestedModel(config, quant_config=quant_config, prefix="model")

    def forward(self, input_ids, positions, forward_batch, pp_proxy_tensors=None):
        return self.model(input_ids)


class ToyChatModel(nn.Module):
    # a multimodal wrapper choosing its language model by the sub-config's architecture
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__()
        if config.llm_config.architectures[0] == "ToyMoeForCausalLM":
            self.language_model = ToyMoeForCausalLM(config=config.llm_config)
        else:
            raise NotImplementedError(
                f"{config.llm_config.architectures[0]} is not implemented."
            )


class StepMoE(nn.Module):
    def __init__(self, config, layer_id, quant_config=None, prefix=""):
        super().__init__()
        tp_size = get_tensor_model_parallel_world_size()
        if tp_size > config.moe_num_experts:
            raise ValueError("StepMoE needs an expert per rank.")


class StepDecoderLayer(nn.Module):
    def __init__(self, config, layer_id, quant_config=None, prefix=""):
        super().__init__()
        moe_layers = [int(i) for i in config.moe_layers_enum.split(",")]
        self.is_sparse = layer_id in moe_layers
        self.shared = 0
        if not self.is_sparse:
            self.mlp = ToyMLP(config.hidden_size, hidden_act=config.hidden_act)
        else:
            if self.shared == 0:
                self.moe = StepMoE(config=config, layer_id=layer_id, quant_config=quant_config)


class StepTextModel(nn.Module):
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__()
        self.layers = make_layers(
            config.num_hidden_layers,
            lambda idx, prefix: StepDecoderLayer(config=config, layer_id=idx, prefix=prefix),
        )


class StepVLForConditionalGeneration(nn.Module):
    # a multimodal model: its language model built on config.json's text sub-config
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__()
        self.language_model = StepTextModel(config=config.text_config, quant_config=quant_config)
        # (a sub-config read as config.json holds it; one of the names the top-k is given
        # under present decides the any(), as in the scheduler's test for experts)
        text = getattr(config, "text_config", config)
        if any(hasattr(text, a) for a in ("num_experts_per_tok", "moe_top_k")):
            if text.moe_num_experts % get_tensor_model_parallel_world_size():
                raise ValueError("StepVL splits its experts evenly.")


EntryClass = [
    StepVLForConditionalGeneration,
    ToyHeadsForCausalLM,
    ToyOtherForCausalLM,
    ToyChatModel,
    ToyMoeForCausalLM,
    ToyNoPipelineForCausalLM,
    ToyOneStageForCausalLM,
    ToyWideForCausalLM,
    ToyWideHandedForCausalLM,
]
"""

RUNNER_TEXT = """
import inspect


class ModelRunner:
    def __init__(self, model_config, tp_size, pp_size, server_args):
        self.model_config = model_config
        self.tp_size = tp_size
        self.pp_size = pp_size
        self.server_args = server_args
        self.page_size = server_args.page_size

    def initialize(self):
        self.load_model()
        self.support_pp = (
            "pp_proxy_tensors" in inspect.signature(self.model.forward).parameters
        )
        if self.pp_size > 1:
            assert self.support_pp, "Pipeline Parallel is not compatible with this model."
"""

# the runner's initial expert location asks the model class, found through the registry
LOADER_UTILS = """
from sglang.srt.models.registry import ModelRegistry


def get_model_architecture(model_config):
    architectures = getattr(model_config.hf_config, "architectures", [])
    return ModelRegistry.resolve_model_cls(architectures)
"""

EXPERT_LOCATION = """
from dataclasses import dataclass

from sglang.srt.model_loader.utils import get_model_architecture


@dataclass
class ModelConfigForExpertLocation:
    num_layers: int
    num_logical_experts: int

    @staticmethod
    def from_model_config(model_config):
        model_class, _ = get_model_architecture(model_config)
        if hasattr(model_class, "get_model_config_for_expert_location"):
            return model_class.get_model_config_for_expert_location(model_config.hf_config)
        return None


def compute_initial_expert_location_metadata(server_args, model_config, moe_ep_rank):
    config = ModelConfigForExpertLocation.from_model_config(model_config)
    if config is None:
        return None
    assert config.num_logical_experts % server_args.ep_size == 0
    return config
"""

# two-batch overlap's strategy knows some decoder layers by name
OPERATIONS_STRATEGY = """
class OperationsStrategy:
    @staticmethod
    def init_new_tbo(layers, forward_mode):
        layer_name = layers[0].__class__.__name__
        if layer_name == "ToyDecoderLayer":
            assert forward_mode is not None  # the batch's: not said
            return OperationsStrategy()
        raise NotImplementedError
"""

# the runner's expert distribution recorder, on the initial expert location's metadata
EXPERT_DISTRIBUTION = """
class ExpertDistributionRecorder:
    @staticmethod
    def init_new(server_args, expert_location_metadata, rank):
        if server_args.expert_distribution_recorder_mode is not None:
            assert expert_location_metadata is not None, "ExpertLocationMetadata is required"
            return _RecorderReal(server_args, expert_location_metadata, rank)
        return None


class _RecorderReal:
    def __init__(self, server_args, expert_location_metadata, rank):
        self._gatherers = {k: _Gatherer.init_new(server_args) for k in ["primary"]}


class _Gatherer:
    @staticmethod
    def init_new(server_args):
        if server_args.ep_size > 1:
            if server_args.deepep_mode == "normal":
                return _Gatherer()
            raise NotImplementedError("no gatherer for this DeepEP mode")
        return _Gatherer()
"""

# Llama's shape: the base class builds its model through a factory method the subclass
# overrides (Llama-4's `_init_model`)
FACTORY_TEXT = """
from torch import nn

from sglang.srt.models.toy_moe import ToyModel


class ToyBaseForCausalLM(nn.Module):
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__()
        self.model = self._init_model(config, quant_config, "model")

    def _init_model(self, config, quant_config=None, prefix=""):
        return None


class ToyFactoryForCausalLM(ToyBaseForCausalLM):
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__(config, quant_config, prefix)

    def _init_model(self, config, quant_config=None, prefix=""):
        return ToyModel(config, quant_config=quant_config, prefix=prefix)


EntryClass = [ToyFactoryForCausalLM]
"""

# Llama-4's multimodal shape: the language model's class imported inside the constructor,
# handed the text config when config.json has one
VL_TEXT = """
from torch import nn


class ToyVLForConditionalGeneration(nn.Module):
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__()
        from sglang.srt.models.toy_factory import ToyFactoryForCausalLM

        self.language_model = ToyFactoryForCausalLM(
            config.text_config if hasattr(config, "text_config") else config,
            quant_config=quant_config,
        )


EntryClass = ToyVLForConditionalGeneration
"""

# Nemotron-H's shape: a layer's config is a method of SGLang's config class for the model
# type (registered by model_type), called in the layer's constructor and handed on
LAYERED_CONFIG = """
from transformers import PretrainedConfig


class ToyLayeredConfig(PretrainedConfig):
    model_type = "toy_layered"

    def get_config_for_layer(self, layer_idx):
        return self
"""

CONFIG_REGISTRY = """
from sglang.srt.configs.toy_layered import ToyLayeredConfig

_CONFIG_REGISTRY = {cls.model_type: cls for cls in [ToyLayeredConfig]}
"""

LAYERED_TEXT = """
from torch import nn

from sglang.srt.models.toy_moe import ToyMoE
from sglang.srt.utils.layers import make_layers


class ToyLayeredDecoderLayer(nn.Module):
    def __init__(self, config, layer_idx, quant_config=None, prefix=""):
        super().__init__()
        layer_config = config.get_config_for_layer(layer_idx)
        self.mlp = ToyMoE(layer_config, quant_config)


class ToyLayeredForCausalLM(nn.Module):
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__()
        self.layers = make_layers(
            config.num_hidden_layers,
            lambda idx, prefix: ToyLayeredDecoderLayer(config, idx, quant_config=quant_config),
        )


EntryClass = [ToyLayeredForCausalLM]
"""

FILES = {
    SERVER_ARGS: ARGS,
    SRT + "configs/toy_layered.py": LAYERED_CONFIG,
    SRT + "utils/hf_transformers/common.py": CONFIG_REGISTRY,
    SRT + "models/toy_layered.py": LAYERED_TEXT,
    SRT + "models/toy_factory.py": FACTORY_TEXT,
    SRT + "models/toy_vl.py": VL_TEXT,
    SRT + "eplb/expert_distribution.py": EXPERT_DISTRIBUTION,
    SRT + "batch_overlap/operations_strategy.py": OPERATIONS_STRATEGY,
    SRT + "model_loader/utils.py": LOADER_UTILS,
    SRT + "eplb/expert_location.py": EXPERT_LOCATION,
    UTILS: UTILS_TEXT,
    SRT + "distributed/parallel_state.py": PARALLEL_STATE,
    SRT + "utils/layers.py": LAYER_UTILS,
    MODEL: MODEL_TEXT,
    RUNNER: RUNNER_TEXT,
}
TOY = {
    "architectures": ["ToyMoeForCausalLM"],
    "num_experts": 8,
    "num_hidden_layers": 4,
    "first_k_dense_replace": 1,
    "hidden_size": 64,
    "num_attention_heads": 16,
    "hidden_act": "silu",
}


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    yield from one_release_session(
        tmp_path_factory, "modelclass", {p: textwrap.dedent(t) for p, t in FILES.items()}
    )


def load_findings(session: Session, flags: str, config: dict[str, Any]) -> list[tuple[str, str]]:
    profile = Profile.parse({"sm": 90, "platform": "cuda", "config": config})
    result = explain(session, "v0.1.0", f"--model-path org/model {flags}", profile=profile)
    return [
        (f["severity"], f["message"])
        for f in result["findings"]
        if f.get("stage") == "load" and f["severity"] in ("error", "warning")
    ]


def line_of(text: str, needle: str) -> int:
    """The line of `needle` in the file as the fixture writes it (dedented, stripped)."""
    lines = textwrap.dedent(text).lstrip().splitlines()
    return next(i for i, line in enumerate(lines, 1) if needle in line)


def test_a_moe_block_raises_in_its_constructor_for_a_sparse_layer(session: Session) -> None:
    line = line_of(MODEL_TEXT, "raise ValueError(")
    assert load_findings(session, "--tp-size 16", TOY) == [
        (
            "error",
            f"raises at toy_moe.py:{line}: ValueError: Tensor parallel size 16 is greater "
            "than the number of experts 8.",
        )
    ]
    assert load_findings(session, "--tp-size 8", TOY) == []


def test_a_model_whose_layers_are_all_dense_builds_no_moe_block(session: Session) -> None:
    # every layer dense (each of the 3 tried): ToyMLP only, no raise of ToyMoE's
    dense = {**TOY, "num_hidden_layers": 3, "first_k_dense_replace": 3}
    assert load_findings(session, "--tp-size 16", dense) == []


def test_layers_not_tried_leave_the_block_an_assumption(session: Session) -> None:
    # 40 dense layers of 41: the last is tried and sparse; with 41 of 41, not all are tried
    sparse_last = {**TOY, "num_hidden_layers": 41, "first_k_dense_replace": 40}
    assert [s for s, _ in load_findings(session, "--tp-size 16", sparse_last)] == ["error"]
    all_dense = {**TOY, "num_hidden_layers": 41, "first_k_dense_replace": 41}
    assert [s for s, _ in load_findings(session, "--tp-size 16", all_dense)] == ["warning"]


def test_a_builder_not_decided_makes_the_raise_an_assumption(session: Session) -> None:
    # without first_k_dense_replace, whether any layer is sparse is unknown: said, not claimed
    undecided = {k: v for k, v in TOY.items() if k != "first_k_dense_replace"}
    ((severity, message),) = load_findings(session, "--tp-size 16", undecided)
    assert severity == "warning"
    assert "Tensor parallel size 16" in message
    assert "assuming ToyDecoderLayer builds ToyMoE" in message


def test_pipeline_parallelism_needs_pp_proxy_tensors_in_the_forward(session: Session) -> None:
    line = line_of(RUNNER_TEXT, "assert self.support_pp")
    plain = {**TOY, "architectures": ["ToyNoPipelineForCausalLM"]}
    assert load_findings(session, "--pp-size 2", plain) == [
        (
            "error",
            f"assertion fails at model_runner.py:{line}: "
            "Pipeline Parallel is not compatible with this model.",
        )
    ]
    assert load_findings(session, "--pp-size 1", plain) == []
    assert load_findings(session, "--pp-size 2", TOY) == []  # its forward takes them


def test_a_model_class_for_one_pipeline_stage_fails_on_every_rank_of_two(
    session: Session,
) -> None:
    # with two stages no rank is both the first and the last; SGLang stops at that assert,
    # so the runner's own check of the forward is never reached
    line = line_of(MODEL_TEXT, "assert self.pp_group.is_first_rank")
    one_stage = {**TOY, "architectures": ["ToyOneStageForCausalLM"]}
    assert load_findings(session, "--pp-size 2", one_stage) == [
        ("error", f"assertion fails at toy_moe.py:{line}")
    ]
    assert load_findings(session, "--pp-size 1", one_stage) == []


def test_nothing_after_a_raise_that_certainly_fires_is_reported(session: Session) -> None:
    # Two constructors raise: both are said (which SGLang reaches first is not decided);
    # the runner's check of the forward, after the model is built, never runs.
    one_stage = {**TOY, "architectures": ["ToyOneStageForCausalLM"]}
    found = load_findings(session, "--pp-size 2 --tp-size 16", one_stage)
    assert [(s, m.split(":")[0]) for s, m in found] == [
        ("error", "assertion fails at toy_moe.py"),
        ("error", "raises at toy_moe.py"),
    ]
    # ... and nothing of a stage after the model class's: the MoE layer's (a fixture
    # without one) or the runner's
    assert all("model_runner.py" not in m for _s, m in found)


def test_the_model_page_lists_what_building_each_architecture_checks(session: Session) -> None:
    from kb.queries import get_version
    from kb.reach import model_detail

    page = model_detail(session, get_version(session, "v0.1.0"), "toy_moe")
    by_arch = {a["architecture"]: a for a in page["load_checks"]}
    assert by_arch["ToyMoeForCausalLM"]["pipeline_parallel"] is True
    plain = by_arch["ToyNoPipelineForCausalLM"]
    assert plain["pipeline_parallel"] is False
    assert plain["pp_check"]["line"] == line_of(RUNNER_TEXT, "assert self.support_pp")
    moe = [c for c in plain["checks"] if c["owner"] == "ToyMoE"]
    assert [(c["built_by"], c["built_when"], c["kind"]) for c in moe] == [
        (
            ["ToyNoPipelineForCausalLM", "ToyModel", "ToyDecoderLayer", "ToyMoE"],
            "self.is_sparse",
            "raise",
        )
    ]
    assert moe[0]["condition"] == "self.tp_size > config.num_experts"
    assert moe[0]["source"]["line"] == line_of(MODEL_TEXT, "raise ValueError(")


def test_an_argument_computed_from_config_json_decides_a_check(session: Session) -> None:
    # num_heads=config.num_attention_heads (16): 16 % 3 != 0 at ToyAttention's assert
    line = line_of(MODEL_TEXT, "assert self.total_num_heads % tp_size == 0")
    assert load_findings(session, "--tp-size 3", TOY) == [
        ("error", f"assertion fails at toy_moe.py:{line}")
    ]
    assert load_findings(session, "--tp-size 4", TOY) == []


def test_a_decoder_class_passed_to_the_base_s_constructor_is_the_one_built(
    session: Session,
) -> None:
    # WideModel hands WideDecoderLayer to ToyModel's constructor, which calls it through
    # its decoder_layer_type parameter (whose default, ToyDecoderLayer, builds no such check)
    line = line_of(MODEL_TEXT, 'raise ValueError("Wide layers')
    wide = {**TOY, "architectures": ["ToyWideForCausalLM"]}
    assert load_findings(session, "--tp-size 4", wide) == [
        (
            "error",
            f"raises at toy_moe.py:{line}: ValueError: Wide layers need a hidden size that is "
            "a multiple of 128.",
        )
    ]
    assert load_findings(session, "--tp-size 4", {**wide, "hidden_size": 128}) == []
    # ... or a parameter of the subclass's constructor naming it, handed on
    handed = {**wide, "architectures": ["ToyWideHandedForCausalLM"]}
    assert load_findings(session, "--tp-size 4", handed) == load_findings(
        session, "--tp-size 4", wide
    )
    assert load_findings(session, "--tp-size 4", {**handed, "hidden_size": 128}) == []


def test_the_runner_s_expert_location_asserts_the_experts_divide_among_the_ep_ranks(
    session: Session,
) -> None:
    # 8 experts on 3 expert-parallel ranks; the model class is found through the registry
    line = line_of(EXPERT_LOCATION, "assert config.num_logical_experts")
    assert load_findings(session, "--tp-size 4 --ep-size 3", TOY) == [
        ("error", f"assertion fails at expert_location.py:{line}")
    ]
    assert load_findings(session, "--tp-size 4 --ep-size 4", TOY) == []
    # a subclass inherits the method
    wide = {**TOY, "architectures": ["ToyWideForCausalLM"], "hidden_size": 128}
    assert [s for s, _ in load_findings(session, "--tp-size 4 --ep-size 3", wide)] == ["error"]


def test_a_sub_config_read_by_attribute_decides_the_language_model(session: Session) -> None:
    # config.json's nested `llm_config` is a config object in SGLang: its keys are attributes
    line = line_of(MODEL_TEXT, "is not implemented.") - 1  # (the raise opens the line above)
    chat = {"architectures": ["ToyChatModel"], "llm_config": {**TOY, "architectures": ["Other"]}}
    assert load_findings(session, "", chat) == [
        ("error", f"raises at toy_moe.py:{line}: NotImplementedError: Other is not implemented.")
    ]
    chat["llm_config"] = TOY
    assert load_findings(session, "", chat) == []


def test_a_block_refusing_in_its_forward_what_it_was_built_with(session: Session) -> None:
    # the raise its forward makes whatever the batch is, at the first forward, on the flag
    # it rests on; the forward's checks of the batch (its arguments) are not said
    profile = Profile.parse({"sm": 90, "platform": "cuda", "config": TOY})
    result = explain(session, "v0.1.0", "--model-path org/model --ep-size 2", profile=profile)
    errors = [f for f in result["findings"] if f["severity"] == "error"]
    line = line_of(MODEL_TEXT, 'raise NotImplementedError("ToyRouter')
    assert [(f["stage"], f["message"]) for f in errors] == [
        (
            "first_forward",
            f"raises at toy_moe.py:{line}: NotImplementedError: ToyRouter has no "
            "expert-parallel forward",
        )
    ]
    assert errors[0]["flag"] == "--ep-size"  # what the raise rests on
    assert load_findings(session, "--ep-size 1", TOY) == []
    plain = explain(session, "v0.1.0", "--model-path org/model --ep-size 1", profile=profile)
    assert not [f for f in plain["findings"] if f.get("stage") == "first_forward"]


def test_two_batch_overlap_needs_a_strategy_for_the_model_s_decoder_layers(
    session: Session,
) -> None:
    # the first CUDA-graph capture splits its batches: init_new_tbo(layers) raises for a
    # decoder layer class it does not know (built by a function the model defines)
    profile = Profile.parse(
        {"sm": 90, "platform": "cuda", "config": {**TOY, "architectures": ["ToyOtherForCausalLM"]}}
    )
    result = explain(
        session, "v0.1.0", "--model-path org/m --enable-two-batch-overlap", profile=profile
    )
    errors = [f for f in result["findings"] if f["severity"] == "error"]
    line = line_of(OPERATIONS_STRATEGY, "raise NotImplementedError")
    assert [(f["stage"], f["message"]) for f in errors] == [
        ("first_forward", f"raises at operations_strategy.py:{line}: NotImplementedError")
    ]
    assert errors[0]["fix"]["verified"] is True
    # a layer class it knows; no CUDA graphs (no batch decided to split): no error
    known = Profile.parse({"sm": 90, "platform": "cuda", "config": TOY})
    for profile_, flags in ((known, ""), (profile, " --disable-cuda-graph")):
        found = explain(
            session,
            "v0.1.0",
            "--model-path org/m --enable-two-batch-overlap" + flags,
            profile=profile_,
        )
        assert [f for f in found["findings"] if f["severity"] == "error"] == []


def test_a_multimodal_model_s_language_model_reads_the_text_sub_config(session: Session) -> None:
    # its layers' config is config.json's text_config (not the top-level one), the sparse
    # layers (4..7 of 12) are named by a list in it: a middle layer is tried, through the
    # nested `if` building the MoE block; one top-k key present decides the any()
    text = {
        "num_hidden_layers": 12,
        "moe_layers_enum": "4,5,6,7",
        "moe_num_experts": 8,
        "moe_top_k": 2,
        "hidden_size": 64,
        "hidden_act": "silu",
    }
    vlm = {"architectures": ["StepVLForConditionalGeneration"], "text_config": text}
    line = line_of(MODEL_TEXT, 'raise ValueError("StepMoE')
    vl_line = line_of(MODEL_TEXT, 'raise ValueError("StepVL')
    assert load_findings(session, "--tp-size 16", vlm) == [
        ("error", f"raises at toy_moe.py:{vl_line}: ValueError: StepVL splits its experts evenly."),
        ("error", f"raises at toy_moe.py:{line}: ValueError: StepMoE needs an expert per rank."),
    ]
    assert load_findings(session, "--tp-size 8", vlm) == []
    # no sparse layer among those tried: said as resting on the builder building it
    dense = {**vlm, "text_config": {**text, "moe_layers_enum": "10"}}
    assert [s for s, _ in load_findings(session, "--tp-size 16", dense)] == ["error", "warning"]


def test_the_runner_s_expert_distribution_recorder_needs_metadata_and_a_gatherer(
    session: Session,
) -> None:
    # the recorder's gatherer (built in a dict comprehension) for the DeepEP mode, and the
    # metadata the model class gives (none for one without get_model_config_for_expert_location)
    eplb = "--expert-distribution-recorder-mode stat"
    line = line_of(EXPERT_DISTRIBUTION, "raise NotImplementedError")
    assert load_findings(session, f"--tp-size 4 --ep-size 4 {eplb}", TOY) == [
        (
            "error",
            f"raises at expert_distribution.py:{line}: NotImplementedError: no gatherer for "
            "this DeepEP mode",
        )
    ]
    assert load_findings(session, f"--tp-size 4 --ep-size 4 --deepep-mode normal {eplb}", TOY) == []
    other = {**TOY, "architectures": ["ToyOtherForCausalLM"]}
    line = line_of(EXPERT_DISTRIBUTION, "assert expert_location_metadata")
    assert load_findings(session, eplb, other) == [
        (
            "error",
            f"assertion fails at expert_distribution.py:{line}: ExpertLocationMetadata is required",
        )
    ]
    assert load_findings(session, "", other) == []


def test_the_attention_s_tp_size_is_divided_by_dp_attention(session: Session) -> None:
    """`get_attention_tp_size()` (a module global SGLang sets at start-up) is tp_size, or
    tp_size / dp_size with DP attention: 16 heads split over 32 attention ranks fail."""
    line = line_of(MODEL_TEXT, "assert config.num_attention_heads % attn_tp_size == 0")
    heads = {**TOY, "architectures": ["ToyHeadsForCausalLM"], "num_experts": 64}
    failed = ("error", f"assertion fails at toy_moe.py:{line}")
    assert failed in load_findings(session, "--tp-size 32", heads)
    assert failed not in load_findings(
        session, "--tp-size 32 --dp-size 4 --enable-dp-attention", heads
    )
    assert failed not in load_findings(session, "--tp-size 8", heads)


def test_a_model_built_through_a_factory_or_a_class_imported_in_the_constructor(
    session: Session,
) -> None:
    line = line_of(MODEL_TEXT, "raise ValueError(")
    error = (
        "error",
        f"raises at toy_moe.py:{line}: ValueError: Tensor parallel size 16 is greater "
        "than the number of experts 8.",
    )
    # the base's constructor calls the subclass's factory
    factory = {**TOY, "architectures": ["ToyFactoryForCausalLM"]}
    assert load_findings(session, "--tp-size 16", factory) == [error]
    # the multimodal class imports the language model's class inside its constructor and
    # hands it the text config
    vl = {"architectures": ["ToyVLForConditionalGeneration"], "text_config": factory}
    assert load_findings(session, "--tp-size 16", vl) == [error]
    assert load_findings(session, "--tp-size 8", vl) == []


def test_a_layer_s_config_from_a_method_of_the_model_type_s_config_class(
    session: Session,
) -> None:
    # `layer_config = config.get_config_for_layer(layer_idx)`: SGLang's config class for
    # config.json's model_type returns the config itself
    line = line_of(MODEL_TEXT, "raise ValueError(")
    layered = {**TOY, "architectures": ["ToyLayeredForCausalLM"], "model_type": "toy_layered"}
    assert load_findings(session, "--tp-size 16", layered) == [
        (
            "error",
            f"raises at toy_moe.py:{line}: ValueError: Tensor parallel size 16 is greater "
            "than the number of experts 8.",
        )
    ]
    assert load_findings(session, "--tp-size 8", layered) == []
