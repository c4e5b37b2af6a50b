"""A synthetic SGLang-shaped repository for a flag's entry points: the shared code a model
reaches a flag through. --enable-quad-batch-overlap (qbo) is read into a global that an
accessor returns; `model_forward_maybe_qbo` (named for the feature) runs the overlapped
forward, and a shared layer helper (`LayerScatterModes`, as in SGLang's communicator) reads
the flag itself. Made-up code, modelled on SGLang's shapes.

- alpha calls `model_forward_maybe_qbo` in its model's forward, and builds decoder layers
  whose `__init__` calls `LayerScatterModes.init_new`: both entry points, in its own code;
- beta's model derives from alpha's (inheriting its forward and `__init__`): both;
- gamma holds alpha's causal LM (`self.language_model = AlphaForCausalLM(...)`): both;
- delta only builds a `LayerScatterModes` in its decoder layer: the shared helper only;
- epsilon (a draft model) holds alpha's decoder layer, not its model: the helper only;
- zeta's model derives from alpha's but replaces its forward: the helper only.
"""

from __future__ import annotations

from pathlib import Path

from tests.fixture_repos import SERVER_ARGS, commit, git, write

SRT = "python/sglang/srt/"
FLAG = "--enable-quad-batch-overlap"
FORWARD = "model_forward_maybe_qbo"
HELPER = "LayerScatterModes"
# the hand-made answer: models whose forward runs model_forward_maybe_qbo, and the rest
RUNS_FORWARD = ["alpha", "beta", "gamma"]
HELPER_ONLY = ["delta", "epsilon", "zeta"]

ARGS = """
import argparse
import dataclasses


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    enable_quad_batch_overlap: bool = False

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", type=str, required=True, help="Weights.")
        parser.add_argument("--enable-quad-batch-overlap", action="store_true", help="Qbo.")
"""

MOE_UTILS = """
from typing import Optional

IS_QBO_ENABLED: Optional[bool] = None


def initialize_moe_config(server_args):
    global IS_QBO_ENABLED
    IS_QBO_ENABLED = server_args.enable_quad_batch_overlap


def is_qbo_enabled() -> bool:
    return IS_QBO_ENABLED
"""

QBO = """
from sglang.srt.layers.moe.utils import is_qbo_enabled


class QboGraphPlugin:
    def capture(self, batch):
        if not is_qbo_enabled():
            return
        batch.split = True


def model_forward_maybe_qbo(layers, enable_qbo):
    if enable_qbo:
        return [layer for layer in layers]
    return layers
"""

# As SGLang's: the helper reads the flag for a dense layer followed by a sparse one only.
COMMUNICATOR = """
from dataclasses import dataclass

from sglang.srt.server_args import get_global_server_args


@dataclass
class _LayerModeComputationContext:
    layer_id: int
    is_layer_sparse: bool
    is_next_layer_sparse: bool


@dataclass
class LayerScatterModes:
    layer_output_mode: str

    @classmethod
    def init_new(cls, **kwargs):
        context = _LayerModeComputationContext(**kwargs)
        return cls(
            layer_output_mode=cls._compute_layer_output_mode(context),
        )

    @classmethod
    def _should_gather_for_qbo(cls, context):
        return (
            not context.is_layer_sparse
            and context.is_next_layer_sparse
            and get_global_server_args().enable_quad_batch_overlap
        )

    @classmethod
    def _compute_layer_output_mode(cls, context):
        if context.layer_id == 0:
            return "input"
        if cls._should_gather_for_qbo(context):
            return "full"
        return "scattered"
"""

ALPHA = """
from sglang.srt.layers.communicator import LayerScatterModes
from sglang.srt.overlap.qbo_overlap import model_forward_maybe_qbo


class AlphaDecoderLayer:
    def __init__(self, config, layer_id):
        self.layer_scatter_modes = LayerScatterModes.init_new(
            layer_id=layer_id,
            is_layer_sparse=layer_id % 2 == 1,
            is_next_layer_sparse=layer_id % 2 == 0,
        )


class AlphaModel:
    def __init__(self, config):
        self.layers = [AlphaDecoderLayer(config, i) for i in range(config.n)]

    def forward(self, batch):
        if batch.can_run_qbo:
            return model_forward_maybe_qbo(self.layers, enable_qbo=True)
        return self.layers


class AlphaForCausalLM:
    def __init__(self, config):
        self.model = AlphaModel(config)

    def forward(self, batch):
        return self.model(batch)


EntryClass = AlphaForCausalLM
"""

BETA = """
from sglang.srt.models.alpha import AlphaModel


class BetaModel(AlphaModel):
    def warm_up(self):
        return None


class BetaForCausalLM:
    def __init__(self, config):
        self.model = BetaModel(config)

    def forward(self, batch):
        return self.model(batch)


EntryClass = BetaForCausalLM
"""

GAMMA = """
from sglang.srt.models.alpha import AlphaForCausalLM


class GammaVLForConditionalGeneration:
    def __init__(self, config):
        self.language_model = AlphaForCausalLM(config.text_config)

    def forward(self, batch):
        return self.language_model(batch)


EntryClass = GammaVLForConditionalGeneration
"""

DELTA = """
from sglang.srt.layers.communicator import LayerScatterModes


class DeltaDecoderLayer:
    def __init__(self, config, layer_id):
        self.layer_scatter_modes = LayerScatterModes.init_new(
            layer_id=layer_id,
            is_layer_sparse=layer_id % 2 == 1,
            is_next_layer_sparse=layer_id % 2 == 0,
        )


class DeltaForCausalLM:
    def __init__(self, config):
        self.layers = [DeltaDecoderLayer(config, i) for i in range(config.n)]

    def forward(self, batch):
        return self.layers


EntryClass = DeltaForCausalLM
"""

EPSILON = """
from sglang.srt.models.alpha import AlphaDecoderLayer


class EpsilonModelNextN:
    def __init__(self, config):
        self.decoder = AlphaDecoderLayer(config, config.num_hidden_layers)

    def forward(self, batch):
        return self.decoder(batch)


EntryClass = EpsilonModelNextN
"""

ZETA = """
from sglang.srt.models.alpha import AlphaModel


class ZetaModel(AlphaModel):
    def forward(self, batch):
        return self.layers


class ZetaForCausalLM:
    def __init__(self, config):
        self.model = ZetaModel(config)


EntryClass = ZetaForCausalLM
"""


def build_entry_repo(root: Path) -> Path:
    repo = root / "entries"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    write(repo, SERVER_ARGS, ARGS)
    write(repo, SRT + "layers/moe/utils.py", MOE_UTILS)
    write(repo, SRT + "layers/communicator.py", COMMUNICATOR)
    write(repo, SRT + "overlap/qbo_overlap.py", QBO)
    for name, text in [
        ("alpha", ALPHA),
        ("beta", BETA),
        ("gamma", GAMMA),
        ("delta", DELTA),
        ("epsilon", EPSILON),
        ("zeta", ZETA),
    ]:
        write(repo, SRT + f"models/{name}.py", text)
    commit(repo, "entries", "2025-09-01T12:00:00Z", "v0.5.0")
    return repo
