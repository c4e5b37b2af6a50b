"""Past ServerArgs, the loader hands the model it built the checkpoint's weights
(`model.load_weights(weights)`), the main model's and, with speculative decoding whose draft
is the target's own checkpoint, the draft model's (kb/explain/model_weights.py). Followed
in the version's own code on a synthetic repository shaped like SGLang's DeepSeek MTP (none
of its code):

- ServerArgs points the draft at the model itself for EAGLE; ModelConfig's
  `_config_draft_model` renames the architecture to the draft's NextN class;
- the NextN class's load_weights goes through a weight-loader mixin that asserts
  `num_nextn_predict_layers == 1` before it iterates the weights (the Kimi-K2 shape:
  config.json has 0);
- inside and past that loop, checks the weights decide: never reported.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from sqlmodel import Session

from kb.explain import explain
from kb.explain.predicates import Profile
from tests import test_weight_loader_stage as loading
from tests.conftest import one_release_session
from tests.fixture_repos import SERVER_ARGS
from tests.sim_repos import UTILS, UTILS_TEXT

SRT = "python/sglang/srt/"
MIXIN = SRT + "models/toy_common/toy_weight_loader.py"

ARGS = """
import argparse
import dataclasses


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    load_format: str = "auto"
    model_loader_extra_config: str = "{}"
    tp_size: int = 1
    attention_backend: str = "fa3"
    speculative_algorithm: str = None
    speculative_draft_model_path: str = None

    def __post_init__(self):
        if self.speculative_algorithm == "EAGLE" and self.speculative_draft_model_path is None:
            self.speculative_draft_model_path = self.model_path

    def check_server_args(self):
        pass

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", type=str, required=True, help="Model weights.")
        parser.add_argument(
            "--load-format", type=str, choices=["auto", "dummy", "bitsandbytes"],
            default=ServerArgs.load_format, help="The format of the weights.",
        )
        parser.add_argument(
            "--model-loader-extra-config", type=str,
            default=ServerArgs.model_loader_extra_config, help="Extra config (JSON).",
        )
        parser.add_argument("--tp-size", type=int, default=1, help="Tensor parallel size.")
        parser.add_argument(
            "--attention-backend", type=str, default="fa3", help="Attention backend."
        )
        parser.add_argument("--speculative-algorithm", type=str, help="Speculative algorithm.")
        parser.add_argument("--speculative-draft-model-path", type=str, help="Draft model.")
"""

RUNNER = (
    loading.RUNNER
    + """
    def _get_attention_backend(self):
        return None
"""
)

MODEL_CONFIG = """
class ModelConfig:
    def __init__(self, model_path, is_draft_model=False):
        self.model_path = model_path
        self.quantization = None
        self.is_draft_model = is_draft_model
        self.hf_config = None
        self._config_draft_model()

    def _config_draft_model(self):
        is_draft_model = self.is_draft_model

        if is_draft_model and self.hf_config.architectures[0] == "ToyV3ForCausalLM":
            self.hf_config.architectures[0] = "ToyV3ForCausalLMNextN"

        if is_draft_model and self.hf_config.architectures[0] == "ToyQwenForCausalLM":
            self.hf_config.architectures[0] = "ToyQwenForCausalLMNextN"
            self.hf_config.num_nextn_predict_layers = 1

    @staticmethod
    def from_server_args(server_args, **kwargs):
        return ModelConfig(model_path=server_args.model_path)
"""

WEIGHT_LOADER_MIXIN = """
from sglang.srt.distributed import get_tensor_model_parallel_world_size


class ToyWeightLoaderMixin:
    def do_load_weights(self, weights, is_nextn=False):
        nextn_conf = self._initialize_nextn_conf(is_nextn)
        if self.config.tie_word_embeddings and get_tensor_model_parallel_world_size() > 1:
            raise ValueError("tied embeddings are not split across ranks")
        params_dict = dict(self.named_parameters())
        loaded = []
        for name, loaded_weight in weights:
            if nextn_conf is not None and not name.startswith("model.layers.61"):
                continue
            if name.endswith(".g_idx"):
                raise ValueError(f"act-order weights are not supported: {name}")
            loaded.append(name)
        if not loaded:
            raise ValueError("the checkpoint has no weight for this model")

    def _initialize_nextn_conf(self, is_nextn):
        if not is_nextn:
            return None
        if not hasattr(self.config, "num_nextn_predict_layers"):
            raise ValueError("num_nextn_predict_layers is not in the config")
        num_nextn_layers = self.config.num_nextn_predict_layers
        assert num_nextn_layers == 1, "Only 1 nextn layer is supported"
        return num_nextn_layers
"""

MODEL = """
from torch import nn

from sglang.srt.models.toy_common.toy_weight_loader import ToyWeightLoaderMixin


class ToyV3ForCausalLM(nn.Module, ToyWeightLoaderMixin):
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__()
        self.config = config
        self.quant_config = quant_config

    def load_weights(self, weights, is_nextn=False):
        self.do_load_weights(weights, is_nextn)


class ToyQwenForCausalLM(ToyV3ForCausalLM):
    pass


EntryClass = [ToyV3ForCausalLM, ToyQwenForCausalLM]
"""

NEXTN = """
from torch import nn

from sglang.srt.models.toy_v3 import ToyV3ForCausalLM


class ToyV3ForCausalLMNextN(ToyV3ForCausalLM):
    def __init__(self, config, quant_config=None, prefix=""):
        nn.Module.__init__(self)
        self.config = config
        self.quant_config = quant_config

    def load_weights(self, weights):
        super().load_weights(weights, is_nextn=True)


class ToyQwenForCausalLMNextN(ToyV3ForCausalLMNextN):
    pass


EntryClass = [ToyV3ForCausalLMNextN, ToyQwenForCausalLMNextN]
"""

FILES = {
    **loading.FILES,
    SERVER_ARGS: ARGS,
    UTILS: UTILS_TEXT,
    SRT + "configs/model_config.py": MODEL_CONFIG,
    SRT + "model_executor/model_runner.py": RUNNER,
    MIXIN: WEIGHT_LOADER_MIXIN,
    SRT + "models/toy_v3.py": MODEL,
    SRT + "models/toy_v3_nextn.py": NEXTN,
}
V3 = {
    "architectures": ["ToyV3ForCausalLM"],
    "torch_dtype": "bfloat16",
    "num_hidden_layers": 61,
    "tie_word_embeddings": False,
    "num_nextn_predict_layers": 0,
}
MTP = {**V3, "num_nextn_predict_layers": 1}
EAGLE = "--speculative-algorithm EAGLE"


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    yield from one_release_session(
        tmp_path_factory, "modelweights", {p: textwrap.dedent(t) for p, t in FILES.items()}
    )


def load_errors(session: Session, flags: str, config: dict[str, Any]) -> list[str]:
    profile = Profile.parse({"sm": 90, "platform": "cuda", "gpus": 8, "config": config})
    result = explain(session, "v0.1.0", f"--model-path org/model {flags}", profile=profile)
    return [
        f["message"]
        for f in result["findings"]
        if f["severity"] == "error" and f.get("stage") == "load"
    ]


def test_the_draft_model_s_load_weights_checks_its_config(session: Session) -> None:
    """EAGLE on the model itself: the draft is the NextN class, whose load_weights asserts
    one NextN layer before it reads a weight (config.json says 0)."""
    (error,) = load_errors(session, EAGLE, V3)
    assert error.startswith("assertion fails at toy_weight_loader.py:")
    assert "Only 1 nextn layer is supported" in error
    # one NextN layer: the draft loads; what the weights decide in and past the loop over
    # them (an act-order weight, no weight at all) is not claimed
    assert load_errors(session, EAGLE, MTP) == []
    # no speculative decoding: the main model's load_weights has no NextN layer to check
    assert load_errors(session, "", V3) == []


def test_the_draft_config_is_the_one_model_config_makes_for_a_draft(session: Session) -> None:
    """`_config_draft_model` sets `num_nextn_predict_layers = 1` for this architecture: the
    draft's config, not the target's config.json, is what its load_weights reads."""
    qwen = {**V3, "architectures": ["ToyQwenForCausalLM"]}
    assert load_errors(session, EAGLE, qwen) == []


def test_a_draft_of_its_own_or_a_loader_not_loading_weights_is_not_followed(
    session: Session,
) -> None:
    # another checkpoint's config.json is not known here
    assert load_errors(session, f"{EAGLE} --speculative-draft-model-path org/draft", V3) == []
    # the dummy loader never calls load_weights
    assert load_errors(session, f"{EAGLE} --load-format dummy", V3) == []


def test_the_main_model_s_load_weights_checks_the_config_and_parallel_sizes(
    session: Session,
) -> None:
    tied = {**V3, "tie_word_embeddings": True}
    (error,) = load_errors(session, "--tp-size 2", tied)
    assert "tied embeddings are not split across ranks" in error
    assert load_errors(session, "", tied) == []


def test_a_key_config_json_lacks_is_its_config_class_s_default_not_absent(
    session: Session,
) -> None:
    """The config's class may set what config.json leaves out (DeepSeek-V3's own code:
    `num_nextn_predict_layers=1`): the `hasattr` raise is not claimed."""
    lacking = {k: v for k, v in V3.items() if k != "num_nextn_predict_layers"}
    assert load_errors(session, EAGLE, lacking) == []


def test_the_draft_s_raise_names_the_draft_and_the_algorithm(session: Session) -> None:
    """The raise rests on the draft the speculative algorithm loads: its flag and reads are
    the algorithm's (what a fix changes), its condition names the draft's class."""
    profile = Profile.parse({"sm": 90, "platform": "cuda", "gpus": 8, "config": V3})
    result = explain(session, "v0.1.0", f"--model-path org/model {EAGLE}", profile=profile)
    (error,) = [f for f in result["findings"] if f["severity"] == "error"]
    assert error["flag"] == "--speculative-algorithm"
    assert "speculative_algorithm" in error["reads"]
    assert "the draft model (ToyV3ForCausalLMNextN) loads its weights" in error["condition"]


def test_a_draft_of_the_model_s_own_checkpoint_has_the_profile_model_config_makes() -> None:
    """What the draft model's runner derives (the use_mla_backend it copies onto the server
    args) is its config's: for MTP, config.json as `_config_draft_model` changes it."""
    from kb.explain import derived, model_weights
    from kb.explain.simulate import Simulator
    from tests.sim_repos import parsed_modules

    mods = parsed_modules(FILES)
    profile = Profile.parse({"sm": 90, "platform": "cuda", "config": V3})
    given = {"model_path": "org/model", "speculative_algorithm": "EAGLE"}
    sim = Simulator(mods.get, mods[SERVER_ARGS], given, profile, given=set(given), derive=derived)
    sim.run()
    draft = model_weights.draft_model(sim, profile)
    assert draft is not None and draft.arch == "ToyV3ForCausalLMNextN"
    # a draft checkpoint of its own: its config is not known here, unless the profile
    # gives it (its own config.json, as `_config_draft_model` changes it)
    sim.fields["speculative_draft_model_path"] = "org/draft"
    assert model_weights.draft_model(sim, profile) is None
    qwen = {**V3, "architectures": ["ToyQwenForCausalLM"], "num_nextn_predict_layers": 0}
    own = Profile.parse({"sm": 90, "platform": "cuda", "config": V3, "draft_config": qwen})
    draft = model_weights.draft_model(sim, own)
    assert draft is not None and draft.arch == "ToyQwenForCausalLMNextN"
    assert draft.config is not None and draft.config["num_nextn_predict_layers"] == 1
