"""At the first forward, a model's layers read the attention backend the batch carries
(`forward_batch.attn_backend`, or `get_attn_backend()` from the forward context in later
versions): the ModelRunner's, as `init_attention_backend` built it (a HybridAttnBackend when
the prefill and decode backends differ, a TboAttnBackend with two-batch overlap, the
registry's backend wrapped for a hybrid linear-attention model), with what each batch sets on
it unknown (kb/explain/batch_backend.py). The layers are chosen per layer from a table of
classes by config.json's pattern (kb/explain/model_class.py). On a synthetic repository
shaped like SGLang's (no SGLang code)."""

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
from tests.sim_repos import REGISTER_ATTENTION_BACKEND

SRT = "python/sglang/srt/"
ATTENTION = SRT + "layers/attention/"
MODEL = SRT + "models/toy_hybrid.py"

ARGS = """
import argparse
import dataclasses


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    attention_backend: str = "flashinfer"
    prefill_attention_backend: str = None
    decode_attention_backend: str = None
    enable_two_batch_overlap: bool = False

    def __post_init__(self):
        pass

    def get_attention_backends(self):
        prefill = self.prefill_attention_backend or self.attention_backend
        decode = self.decode_attention_backend or self.attention_backend
        return prefill, decode

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", type=str, required=True, help="Model weights.")
        parser.add_argument("--attention-backend", type=str, default="flashinfer", help="A.")
        parser.add_argument("--prefill-attention-backend", type=str, help="Prefill.")
        parser.add_argument("--decode-attention-backend", type=str, help="Decode.")
        parser.add_argument("--enable-two-batch-overlap", action="store_true", help="TBO.")


def get_global_server_args():
    return None
"""

RUNNER = """
from sglang.srt.configs.foreign import ForeignConfig
from sglang.srt.configs.toy_hybrid import ToyHybridConfig
from sglang.srt.layers.attention.attention_registry import (
    ATTENTION_BACKENDS,
    attn_backend_wrapper,
)
from sglang.srt.layers.attention.tbo_backend import TboAttnBackend


class ModelRunner:
    def __init__(self, model_config, server_args):
        self.model_config = model_config
        self.server_args = server_args

    @property
    def mamba_config(self):
        config = self.model_config.hf_config
        if isinstance(config, ForeignConfig | ToyHybridConfig):
            return config
        return None

    def init_attention_backend(self):
        if self.server_args.enable_two_batch_overlap:
            self.attn_backend = TboAttnBackend.init_new(self._get_attention_backend)
        else:
            self.attn_backend = self._get_attention_backend()

    def _get_attention_backend(self):
        prefill, decode = self.server_args.get_attention_backends()
        if prefill != decode:
            from sglang.srt.layers.attention.hybrid_attn_backend import HybridAttnBackend

            return HybridAttnBackend(self, self._from_str(decode), self._from_str(prefill))
        return self._from_str(prefill)

    def _from_str(self, name):
        return attn_backend_wrapper(self, ATTENTION_BACKENDS[name](self))
"""

REGISTRY = (
    """
ATTENTION_BACKENDS = {}


"""
    + REGISTER_ATTENTION_BACKEND
    + """

@register_attention_backend("flashinfer")
def create_flashinfer_backend(runner):
    # (the config is an object of a config class, never a dict: a builtin type decides)
    if runner.server_args.enable_two_batch_overlap:
        if isinstance(runner.model_config.hf_config, dict):
            raise ValueError("a config dict")
    from sglang.srt.layers.attention.flashinfer_backend import FlashInferAttnBackend

    return FlashInferAttnBackend(runner)


@register_attention_backend("fa3")
def create_fa3_backend(runner):
    if runner.mamba_config:
        raise ValueError("fa3 does not support hybrid linear attention models")
    from sglang.srt.layers.attention.flashinfer_backend import FlashInferAttnBackend

    return FlashInferAttnBackend(runner)


@register_attention_backend("triton")
def create_triton_backend(runner):
    from sglang.srt.layers.attention.flashinfer_backend import TritonAttnBackend

    return TritonAttnBackend(runner)


def attn_backend_wrapper(runner, full_attn_backend):
    if runner.mamba_config:
        from sglang.srt.layers.attention.hybrid_linear_attn_backend import (
            HybridLinearAttnBackend,
            MambaAttnBackend,
        )

        return HybridLinearAttnBackend(full_attn_backend, MambaAttnBackend(runner))
    return full_attn_backend
"""
)

BACKENDS = """
class FlashInferAttnBackend:
    def __init__(self, model_runner):
        self.kind = "flashinfer"


class TritonAttnBackend:
    def __init__(self, model_runner):
        self.kind = "triton"
"""

HYBRID_LINEAR = """
class MambaMetadata:
    pass


class MambaAttnBackend:
    def __init__(self, model_runner):
        self.forward_metadata = None

    def init_forward_metadata(self, forward_batch):
        self._prepare(forward_batch)

    def _prepare(self, forward_batch):
        self.forward_metadata = MambaMetadata()

    def forward(self, hidden_states, layer_id):
        # set for each batch: not the None the constructor left
        assert isinstance(self.forward_metadata, MambaMetadata)
        return hidden_states


class HybridLinearAttnBackend:
    def __init__(self, full_attn_backend, linear_attn_backend):
        self.full_attn_backend = full_attn_backend
        self.linear_attn_backend = linear_attn_backend

    def init_forward_metadata(self, forward_batch):
        self.full_attn_backend.init_forward_metadata(forward_batch)
        self.linear_attn_backend.init_forward_metadata(forward_batch)
"""

HYBRID = """
class HybridAttnBackend:
    def __init__(self, model_runner, decode_backend, prefill_backend):
        self.decode_backend = decode_backend
        self.prefill_backend = prefill_backend
"""

TBO = """
class TboAttnBackend:
    def __init__(self, primary, children):
        self.primary = primary
        self.children = children

    @classmethod
    def init_new(cls, creator):
        return cls(primary=creator(), children=[creator() for _ in range(2)])
"""

FORWARD_CONTEXT = """
from dataclasses import dataclass


@dataclass(frozen=True)
class ForwardContext:
    attn_backend: object


_current = None


def set_forward_context(ctx):
    global _current
    prev, _current = _current, ctx
    return prev


def get_forward_context():
    assert _current is not None, "no forward context active"
    return _current


def get_attn_backend():
    return get_forward_context().attn_backend
"""

CONFIG = """
from transformers import PretrainedConfig

MAMBA = "M"
ATTENTION = "*"


class ToyHybridConfig(PretrainedConfig):
    model_type = "toy_hybrid"
"""

# a config class whose model_type comes from a base this repository does not hold
FOREIGN = """
from transformers import OtherConfig


class ForeignConfig(OtherConfig):
    pass
"""

# SGLang's registry of its config classes by model_type (a model_type not held here comes
# from transformers' base classes)
CONFIG_REGISTRY = """
from sglang.srt.configs.foreign import ForeignConfig
from sglang.srt.configs.other import OtherHeldConfig
from sglang.srt.configs.toy_hybrid import ToyHybridConfig

_CONFIG_REGISTRY = {
    cls.model_type: cls for cls in [ForeignConfig, OtherHeldConfig, ToyHybridConfig]
}
"""

OTHER = """
from transformers import PretrainedConfig


class OtherHeldConfig(PretrainedConfig):
    model_type = "other_held"
"""

LAYER_UTILS = """
def make_layers(num_hidden_layers, layer_fn, prefix=""):
    return [layer_fn(idx=i, prefix=prefix) for i in range(num_hidden_layers)]
"""

MODEL_TEXT = """
from torch import nn

from sglang.srt.configs.toy_hybrid import ATTENTION, MAMBA
from sglang.srt.layers.attention.hybrid_linear_attn_backend import HybridLinearAttnBackend
from sglang.srt.model_executor.forward_context import get_attn_backend
from sglang.srt.utils.layers import make_layers


class ToyAttentionLayer(nn.Module):
    def __init__(self, config, layer_id, prefix=""):
        super().__init__()


class ToyMambaLayer(nn.Module):
    def __init__(self, config, layer_id, prefix=""):
        super().__init__()
        self.layer_id = layer_id

    def forward(self, hidden_states, forward_batch):
        attn_backend = forward_batch.attn_backend
        assert isinstance(attn_backend, HybridLinearAttnBackend)
        return attn_backend.linear_attn_backend.forward(hidden_states, self.layer_id)


class ToyContextMambaLayer(ToyMambaLayer):
    # a later version: the backend read from the forward's context
    def forward(self, hidden_states, forward_batch):
        attn_backend = get_attn_backend()
        assert isinstance(attn_backend, HybridLinearAttnBackend)
        return attn_backend.linear_attn_backend.forward(hidden_states, self.layer_id)


ALL_LAYER_TYPES = {ATTENTION: ToyAttentionLayer, MAMBA: ToyMambaLayer}
CONTEXT_LAYER_TYPES = {ATTENTION: ToyAttentionLayer, MAMBA: ToyContextMambaLayer}


class ToyHybridModel(nn.Module):
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__()

        def get_layer(idx, prefix):
            layer_class = ALL_LAYER_TYPES[config.hybrid_pattern[idx]]
            return layer_class(config, idx, prefix=prefix)

        self.layers = make_layers(config.num_hidden_layers, get_layer)


class ToyContextModel(nn.Module):
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__()

        def get_layer(idx, prefix):
            layer_type = config.hybrid_pattern[idx]
            layer_class = CONTEXT_LAYER_TYPES[layer_type]
            return layer_class(config, idx, prefix=prefix)

        self.layers = make_layers(config.num_hidden_layers, get_layer)


class ToyHybridForCausalLM(nn.Module):
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__()
        self.model = ToyHybridModel(config, quant_config=quant_config, prefix="model")


class ToyContextForCausalLM(nn.Module):
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__()
        self.model = ToyContextModel(config, quant_config=quant_config, prefix="model")


EntryClass = [ToyHybridForCausalLM, ToyContextForCausalLM]
"""

FILES = {
    SERVER_ARGS: ARGS,
    SRT + "model_executor/model_runner.py": RUNNER,
    SRT + "model_executor/forward_context.py": FORWARD_CONTEXT,
    ATTENTION + "attention_registry.py": REGISTRY,
    ATTENTION + "flashinfer_backend.py": BACKENDS,
    ATTENTION + "hybrid_linear_attn_backend.py": HYBRID_LINEAR,
    ATTENTION + "hybrid_attn_backend.py": HYBRID,
    ATTENTION + "tbo_backend.py": TBO,
    SRT + "configs/toy_hybrid.py": CONFIG,
    SRT + "configs/foreign.py": FOREIGN,
    SRT + "configs/other.py": OTHER,
    SRT + "utils/hf_transformers/common.py": CONFIG_REGISTRY,
    SRT + "utils/layers.py": LAYER_UTILS,
    MODEL: MODEL_TEXT,
}
TOY = {
    "architectures": ["ToyHybridForCausalLM"],
    "model_type": "toy_hybrid",
    "num_hidden_layers": 4,
    "hybrid_pattern": "M*M*",
}
ASSERT = "assert isinstance(attn_backend, HybridLinearAttnBackend)"


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    yield from one_release_session(
        tmp_path_factory, "batchbackend", {p: textwrap.dedent(t) for p, t in FILES.items()}
    )


def errors(session: Session, flags: str, config: dict[str, Any] = TOY) -> list[tuple[str, str]]:
    profile = Profile.parse({"sm": 90, "platform": "cuda", "config": config})
    result = explain(session, "v0.1.0", f"--model-path org/model {flags}", profile=profile)
    return [(f["stage"], f["message"]) for f in result["findings"] if f["severity"] == "error"]


def lines_of(needle: str) -> list[int]:
    lines = textwrap.dedent(MODEL_TEXT).lstrip().splitlines()
    return [i for i, line in enumerate(lines, 1) if needle in line]


def test_a_layer_refuses_the_split_prefill_and_decode_backends(session: Session) -> None:
    # a HybridAttnBackend is not the HybridLinearAttnBackend the Mamba layer needs
    line = lines_of(ASSERT)[0]
    found = errors(session, "--prefill-attention-backend triton")
    assert found == [("first_forward", f"assertion fails at toy_hybrid.py:{line}")]


def test_the_same_backend_for_both_is_wrapped_and_passes(session: Session) -> None:
    # the registry's backend wrapped for the hybrid model (its config one of a union whose
    # other class's model_type is not known here), and the Mamba backend's per-batch
    # metadata not taken for the None its constructor left
    assert errors(session, "") == []
    assert errors(session, "--prefill-attention-backend flashinfer") == []


def test_two_batch_overlap_hands_the_layers_its_wrapper(session: Session) -> None:
    line = lines_of(ASSERT)[0]
    assert errors(session, "--enable-two-batch-overlap") == [
        ("first_forward", f"assertion fails at toy_hybrid.py:{line}")
    ]
    # (isinstance(hf_config, dict) is false, not left undecided)
    profile = Profile.parse({"sm": 90, "platform": "cuda", "config": TOY})
    result = explain(
        session, "v0.1.0", "--model-path org/m --enable-two-batch-overlap", profile=profile
    )
    assert not [f for f in result["findings"] if "a config dict" in f["message"]]


def test_no_layer_of_the_pattern_is_a_mamba_layer(session: Session) -> None:
    # config.json's pattern picks each layer's class: none is the Mamba layer
    assert (
        errors(session, "--prefill-attention-backend triton", {**TOY, "hybrid_pattern": "****"})
        == []
    )


def test_a_later_version_reads_the_backend_from_the_forward_context(session: Session) -> None:
    config = {**TOY, "architectures": ["ToyContextForCausalLM"]}
    line = lines_of(ASSERT)[1]
    assert errors(session, "--prefill-attention-backend triton", config) == [
        ("first_forward", f"assertion fails at toy_hybrid.py:{line}")
    ]
    assert errors(session, "", config) == []


def test_a_config_class_registered_for_another_model_type_is_not_the_union(
    session: Session,
) -> None:
    # `isinstance(config, ForeignConfig | ToyHybridConfig)` for a model whose model_type
    # SGLang registers OtherHeldConfig for: its bases say it is neither (ForeignConfig's
    # model_type, inherited from transformers, is not known here)
    other = {"architectures": ["OtherForCausalLM"], "model_type": "other_held"}
    profile = Profile.parse({"sm": 90, "platform": "cuda", "config": other})
    result = explain(
        session, "v0.1.0", "--model-path org/m --attention-backend fa3", profile=profile
    )
    assert not [f for f in result["findings"] if "hybrid linear" in f["message"]]
    # a model_type SGLang registers no class for: transformers' own class, none of these
    # (only one named for it may be the class registered under an inherited model_type)
    for model_type, said in (("plain_bert", False), ("foreign", True)):
        config = {"architectures": ["OtherForCausalLM"], "model_type": model_type}
        profile = Profile.parse({"sm": 90, "platform": "cuda", "config": config})
        result = explain(
            session, "v0.1.0", "--model-path org/m --attention-backend fa3", profile=profile
        )
        found = [f["severity"] for f in result["findings"] if "hybrid linear" in f["message"]]
        assert found == (["info"] if said else [])
    lines = textwrap.dedent(REGISTRY).lstrip().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "fa3 does not support" in text)
    assert errors(session, "--attention-backend fa3") == [
        (
            "load",
            f"raises at attention_registry.py:{line}: ValueError: fa3 does not support hybrid "
            "linear attention models",
        )
    ]
