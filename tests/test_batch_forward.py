"""The main attention backend's first batches (kb/explain/batch_forward.py): the decode
graphs' capture (a RuntimeError of it cited where the CUDA-graph runner re-raises it), the
warmup prefill and a decode, or the target's verify batch with speculative decoding; and the
ModelRunner's `sliding_window_size`, which its `load_model` takes from the loaded model's
`get_attention_sliding_window_size()`. On a synthetic repository shaped like SGLang's (no
SGLang code)."""

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

ARGS = """
import argparse
import dataclasses


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    attention_backend: str = "toy"
    page_size: int = 1
    kv_cache_dtype: str = "auto"
    speculative_algorithm: str = None
    speculative_eagle_topk: int = None
    disable_cuda_graph: bool = False
    is_embedding: bool = False
    encoder_only: bool = False
    tp_size: int = 1
    quantization_param_path: str = None

    def __post_init__(self):
        pass

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", type=str, required=True, help="Model weights.")
        parser.add_argument("--attention-backend", type=str, default="toy", help="A.")
        parser.add_argument("--page-size", type=int, default=1, help="Page.")
        parser.add_argument("--kv-cache-dtype", type=str, default="auto", help="KV.")
        parser.add_argument("--speculative-algorithm", type=str, help="Spec.")
        parser.add_argument("--speculative-eagle-topk", type=int, help="Topk.")
        parser.add_argument("--disable-cuda-graph", action="store_true", help="No graphs.")
        parser.add_argument("--is-embedding", action="store_true", help="Embedding.")
        parser.add_argument("--encoder-only", action="store_true", help="Encoder only.")
        parser.add_argument("--tp-size", type=int, default=1, help="TP.")
        parser.add_argument("--quantization-param-path", type=str, help="KV cache scales.")
"""

RUNNER = """
from sglang.srt.layers.attention.attention_registry import ATTENTION_BACKENDS


class ModelRunner:
    def __init__(self, model_config, server_args):
        self.model_config = model_config
        self.server_args = server_args
        self.page_size = server_args.page_size

    def load_model(self):
        self.model = self.loader.load_model(model_config=self.model_config)
        if self.server_args.kv_cache_dtype == "fp8_e4m3":
            if self.server_args.quantization_param_path is not None:
                if not callable(getattr(self.model, "load_kv_cache_scales", None)):
                    raise RuntimeError("the model cannot load KV cache scales")
        self.sliding_window_size = None
        if hasattr(self.model, "get_attention_sliding_window_size"):
            self.sliding_window_size = self.model.get_attention_sliding_window_size()
        elif self.model_config.attention_chunk_size is not None:
            self.sliding_window_size = self.model_config.attention_chunk_size

    def _get_attention_backend(self):
        return ATTENTION_BACKENDS[self.server_args.attention_backend](self)
"""

REGISTRY = (
    """
ATTENTION_BACKENDS = {}


"""
    + REGISTER_ATTENTION_BACKEND
    + """

@register_attention_backend("toy")
def create_toy_backend(runner):
    from sglang.srt.layers.attention.toy_backend import ToyAttnBackend

    return ToyAttnBackend(runner)
"""
)

BACKEND = """
from sglang.srt.layers.dp_attention import get_attention_tp_size


class ToyAttnBackend:
    def __init__(self, model_runner):
        heads = model_runner.model_config.hf_config.num_attention_heads // get_attention_tp_size()
        assert heads in (4, 8) or heads % 16 == 0, "4, 8 or a multiple of 16 heads a rank"
        self.topk = model_runner.server_args.speculative_eagle_topk or 0
        self.page_size = model_runner.page_size
        self.fp8_kv = model_runner.server_args.kv_cache_dtype == "fp8_e4m3"
        self.sliding_window_size = model_runner.sliding_window_size
        self.has_swa = self.sliding_window_size is not None and self.sliding_window_size > -1
        self.metadata = None

    def init_forward_metadata(self, forward_batch):
        if forward_batch.forward_mode.is_decode_or_idle():
            self.metadata = forward_batch.seq_lens
        elif forward_batch.forward_mode.is_target_verify():
            if self.topk > 1 and self.has_swa:
                self._swa_spec_metadata(forward_batch)
        else:
            assert forward_batch.seq_lens is not None, "a prefill has its lengths"

    def _swa_spec_metadata(self, forward_batch):
        assert self.page_size == 1, "no topk > 1 speculative decoding with paged SWA"

    def init_cuda_graph_state(self, max_bs, max_num_tokens):
        self.graph_metadata = {}

    def init_forward_metadata_capture_cuda_graph(
        self, bs, num_tokens, req_pool_indices, seq_lens, encoder_lens, forward_mode, spec_info
    ):
        if forward_mode.is_decode_or_idle() and spec_info is None:
            if self.fp8_kv:
                raise NotImplementedError("fp8 KV cache in a captured decode")
        self.graph_metadata[bs] = seq_lens
"""

FORWARD_INFO = """
from enum import IntEnum, auto


class ForwardMode(IntEnum):
    EXTEND = auto()
    DECODE = auto()
    IDLE = auto()
    TARGET_VERIFY = auto()

    def is_extend(self):
        return self == ForwardMode.EXTEND

    def is_decode_or_idle(self):
        return self == ForwardMode.DECODE or self == ForwardMode.IDLE

    def is_target_verify(self):
        return self == ForwardMode.TARGET_VERIFY
"""

GRAPH_RUNNER = """
class CudaGraphRunner:
    def __init__(self, model_runner):
        self.model_runner = model_runner
        try:
            self.capture()
        except RuntimeError as e:
            raise Exception(f"Capture cuda graph failed: {e}")

    def capture(self):
        pass
"""

MODEL = """
from torch import nn


class ToySwaForCausalLM(nn.Module):
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__()
        self.config = config

    def get_attention_sliding_window_size(self):
        return self.config.sliding_window - 1

    def load_kv_cache_scales(self, path):
        pass


class ToyMultimodalForCausalLM(ToySwaForCausalLM):
    # (encoder_only is no key of config.json: SGLang's ModelConfig sets it on the config)
    def get_attention_sliding_window_size(self):
        if self.config.encoder_only:
            return None
        return self.config.sliding_window - 1


class ToyDenseForCausalLM(nn.Module):
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__()
        self.config = config


EntryClass = [ToySwaForCausalLM, ToyMultimodalForCausalLM, ToyDenseForCausalLM]
"""

MODEL_CONFIG = """
class ModelConfig:
    def __init__(self, model_path, encoder_only=False):
        self.hf_config = get_config(model_path)
        self.hf_config.encoder_only = encoder_only

    @staticmethod
    def from_server_args(server_args, **kwargs):
        return ModelConfig(server_args.model_path, encoder_only=server_args.encoder_only)
"""

FILES = {
    SERVER_ARGS: ARGS,
    SRT + "configs/model_config.py": MODEL_CONFIG,
    SRT + "model_executor/model_runner.py": RUNNER,
    SRT + "model_executor/forward_batch_info.py": FORWARD_INFO,
    SRT + "model_executor/cuda_graph_runner.py": GRAPH_RUNNER,
    ATTENTION + "attention_registry.py": REGISTRY,
    ATTENTION + "toy_backend.py": BACKEND,
    SRT + "models/toy.py": MODEL,
}
SWA = {
    "architectures": ["ToySwaForCausalLM"],
    "model_type": "toy_swa",
    "sliding_window": 128,
    "num_attention_heads": 32,
}
DENSE = {
    "architectures": ["ToyDenseForCausalLM"],
    "model_type": "toy_dense",
    "num_attention_heads": 32,
}
VERIFY = "--speculative-algorithm NGRAM --speculative-eagle-topk 4"


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    yield from one_release_session(
        tmp_path_factory, "batchforward", {p: textwrap.dedent(t) for p, t in FILES.items()}
    )


def errors(session: Session, flags: str, config: dict[str, Any] = SWA) -> list[tuple[str, str]]:
    profile = Profile.parse({"sm": 90, "platform": "cuda", "config": config})
    result = explain(session, "v0.1.0", f"--model-path org/model {flags}", profile=profile)
    return [(f["stage"], f["message"]) for f in result["findings"] if f["severity"] == "error"]


def line_of(text: str, needle: str) -> int:
    lines = textwrap.dedent(text).lstrip().splitlines()
    return next(i for i, line in enumerate(lines, 1) if needle in line)


def test_the_verify_batch_of_a_sliding_window_model_refuses_paged_tree_decoding(
    session: Session,
) -> None:
    # the backend's has_swa rests on the runner's sliding_window_size, which load_model
    # takes from the model class's method on config.json
    line = line_of(BACKEND, "assert self.page_size == 1")
    assert errors(session, f"{VERIFY} --page-size 16") == [
        (
            "first_forward",
            f"assertion fails at toy_backend.py:{line}: no topk > 1 speculative decoding "
            "with paged SWA",
        )
    ]


def test_its_near_misses_pass(session: Session) -> None:
    assert errors(session, f"{VERIFY} --page-size 1") == []  # one token a page
    assert errors(session, "--page-size 16 --speculative-algorithm NGRAM") == []  # a chain
    assert errors(session, f"{VERIFY} --page-size 16", DENSE) == []  # no sliding window
    assert errors(session, "--page-size 16") == []  # no verify batch: a decode


def test_a_runtime_error_in_the_capture_names_the_graph_runners_re_raise(
    session: Session,
) -> None:
    # NotImplementedError is a RuntimeError: the runner's `except RuntimeError` re-raises it;
    # the raise is the first SGLang hits, the re-raise what its traceback ends with
    raised = line_of(BACKEND, 'raise NotImplementedError("fp8 KV cache')
    again = line_of(GRAPH_RUNNER, "raise Exception")
    found = errors(session, "--kv-cache-dtype fp8_e4m3", DENSE)
    assert found == [
        (
            "first_forward",
            f"raises at toy_backend.py:{raised}: NotImplementedError: fp8 KV cache in a "
            f"captured decode; re-raised at cuda_graph_runner.py:{again}",
        )
    ]
    profile = Profile.parse({"sm": 90, "platform": "cuda", "config": DENSE})
    result = explain(
        session, "v0.1.0", "--model-path org/model --kv-cache-dtype fp8_e4m3", profile=profile
    )
    (error,) = [f for f in result["findings"] if f["severity"] == "error"]
    assert error["source"]["line"] == raised
    assert error["reraised_at"]["path"].endswith("cuda_graph_runner.py")
    assert error["reraised_at"]["line"] == again


def test_no_capture_without_cuda_graphs_or_for_an_embedding_model(session: Session) -> None:
    assert errors(session, "--kv-cache-dtype fp8_e4m3 --disable-cuda-graph", DENSE) == []
    assert errors(session, "--kv-cache-dtype fp8_e4m3 --is-embedding", DENSE) == []


def test_what_the_model_config_sets_on_the_config_is_read(session: Session) -> None:
    # ModelConfig's `self.hf_config.encoder_only = encoder_only`, over config.json's lack
    multimodal = {**SWA, "architectures": ["ToyMultimodalForCausalLM"]}
    (found,) = errors(session, f"{VERIFY} --page-size 16", multimodal)
    assert found[1].startswith("assertion fails at toy_backend.py:")
    assert errors(session, f"{VERIFY} --page-size 16 --encoder-only", multimodal) == []
    # (a key of config.json of that name is SGLang's to overwrite)
    said = {**multimodal, "encoder_only": True}
    assert errors(session, f"{VERIFY} --page-size 16", said) != []


def test_graphs_configured_per_phase_are_captured_only_when_known() -> None:
    # (2026-07: ServerArgs turns a backend's graphs off through
    # `cuda_graph_config.decode.backend = Backend.DISABLED`; an object not decided here)
    from kb.explain.batch_forward import _captures_decode
    from kb.explain.predicates import unknown

    assert _captures_decode({"disable_cuda_graph": False})
    assert not _captures_decode({"disable_cuda_graph": True})
    assert not _captures_decode({"disable_cuda_graph": unknown("x")})
    config = {"disable_cuda_graph": False, "cuda_graph_config": unknown("its decode backend")}
    assert not _captures_decode(config)


def test_the_backend_s_constructor_reads_the_parallel_sizes(session: Session) -> None:
    # 32 heads on 1 rank (32) or 4 ranks (8) pass; on 2 ranks, 16 a rank pass; 32 / 32 = 1
    line = line_of(BACKEND, "assert heads in (4, 8)")
    assert errors(session, "--tp-size 4", DENSE) == []
    assert errors(session, "--tp-size 32", DENSE) == [
        ("load", f"assertion fails at toy_backend.py:{line}: 4, 8 or a multiple of 16 heads a rank")
    ]


def test_the_runner_checks_the_model_it_loaded_can_load_kv_cache_scales(session: Session) -> None:
    line = line_of(RUNNER, "raise RuntimeError")
    flags = "--kv-cache-dtype fp8_e4m3 --quantization-param-path /scales.json --disable-cuda-graph"
    assert errors(session, flags, DENSE) == [
        (
            "load",
            f"raises at model_runner.py:{line}: RuntimeError: "
            "the model cannot load KV cache scales",
        )
    ]
    assert errors(session, flags, SWA) == []  # (its class defines the method)
    assert errors(session, "--kv-cache-dtype fp8_e4m3 --disable-cuda-graph", DENSE) == []
