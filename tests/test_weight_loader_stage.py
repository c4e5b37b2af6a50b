"""Past ServerArgs, the ModelRunner builds a LoadConfig from the server args and asks
`get_model_loader` for the loader of its load format, whose constructor checks the load
config; the loader then checks the model and config.json before it reads a weight file
(kb/explain/weight_loader.py). Followed in the version's own code on a synthetic repository
modelled on SGLang's shapes (no SGLang code):

- LoadConfig is a dataclass whose `__post_init__` parses the extra config's JSON text with
  orjson and turns the format's text into a LoadFormat member;
- the dummy loader refuses any extra config; the default loader accepts two keys;
- the bitsandbytes loader refuses a pre-quantized checkpoint under tensor parallelism and a
  checkpoint of another method, then reads the weight files (a raise there, on what the
  files hold, is never claimed).
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

ARGS = """
import argparse
import dataclasses


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    load_format: str = "auto"
    model_loader_extra_config: str = "{}"
    tp_size: int = 1

    def __post_init__(self):
        pass

    def check_server_args(self):
        pass

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", type=str, required=True, help="Model weights.")
        parser.add_argument(
            "--load-format", type=str, choices=["auto", "dummy", "bitsandbytes", "layered"],
            default=ServerArgs.load_format, help="The format of the weights.",
        )
        parser.add_argument(
            "--model-loader-extra-config", type=str,
            default=ServerArgs.model_loader_extra_config, help="Extra config (JSON).",
        )
        parser.add_argument("--tp-size", type=int, default=1, help="Tensor parallel size.")
"""

LOAD_CONFIG = """
import enum
from dataclasses import dataclass, field

import orjson


class LoadFormat(str, enum.Enum):
    AUTO = "auto"
    DUMMY = "dummy"
    BITSANDBYTES = "bitsandbytes"
    LAYERED = "layered"


@dataclass
class LoadConfig:
    load_format: str = LoadFormat.AUTO
    model_loader_extra_config: dict = field(default_factory=dict)
    tp_rank: int = None

    def __post_init__(self):
        model_loader_extra_config = self.model_loader_extra_config or {}
        if isinstance(model_loader_extra_config, str):
            self.model_loader_extra_config = orjson.loads(model_loader_extra_config)
        self.load_format = LoadFormat(self.load_format.lower())
"""

RUNNER = """
from sglang.srt.configs.load_config import LoadConfig
from sglang.srt.model_loader.loader import get_model_loader


class ModelRunner:
    def __init__(self, server_args, model_config, tp_rank):
        self.server_args = server_args
        self.model_config = model_config
        self.tp_rank = tp_rank

    def load_model(self):
        self.load_config = LoadConfig(
            load_format=self.server_args.load_format,
            model_loader_extra_config=self.server_args.model_loader_extra_config,
            tp_rank=self.tp_rank,
        )
        self.loader = get_model_loader(load_config=self.load_config, model_config=self.model_config)
        self.model = self.loader.load_model(model_config=self.model_config)
"""

LOADER = """
import torch

from sglang.srt.configs.load_config import LoadConfig, LoadFormat
from sglang.srt.distributed import get_tensor_model_parallel_world_size


def _initialize_model(model_config, load_config):
    return None


class BaseModelLoader:
    def __init__(self, load_config):
        self.load_config = load_config


class DefaultModelLoader(BaseModelLoader):
    def __init__(self, load_config):
        super().__init__(load_config)
        extra_config = load_config.model_loader_extra_config
        allowed_keys = {"enable_multithread_load", "num_threads"}
        unexpected_keys = set(extra_config.keys()) - allowed_keys
        if unexpected_keys:
            raise ValueError(f"Unexpected extra config keys for load format: {unexpected_keys}")

    def load_model(self, *, model_config):
        model = _initialize_model(model_config, self.load_config)
        self.load_weights_and_postprocess(model, [])
        return model

    @staticmethod
    def load_weights_and_postprocess(model, weights):
        model.load_weights(weights)


class DummyModelLoader(BaseModelLoader):
    def __init__(self, load_config):
        super().__init__(load_config)
        if load_config.model_loader_extra_config:
            raise ValueError(
                f"Model loader extra config is not supported for "
                f"load format {load_config.load_format}"
            )


class BitsAndBytesModelLoader(BaseModelLoader):
    def __init__(self, load_config):
        super().__init__(load_config)
        self.target_modules = []

    def _read_quant_states(self, model_config):
        return {}

    def _load_weights(self, model_config, model):
        if not hasattr(model, "load_weights"):
            raise AttributeError("The required method 'load_weights' is not defined")
        quant_config = getattr(model_config.hf_config, "quantization_config", None)
        pre_quant = False
        if quant_config is not None:
            quant_method = quant_config.get("quant_method")
            if quant_method == "bitsandbytes":
                pre_quant = True
            else:
                raise ValueError(f"BitsAndBytes loader does not support {quant_method}")
        if pre_quant and get_tensor_model_parallel_world_size() > 1:
            raise ValueError("Prequant BitsAndBytes models with TP is not supported.")
        quant_state_dict = self._read_quant_states(model_config)
        if len(quant_state_dict) == 0:
            raise ValueError("No quant state found in the weight files.")

    def load_model(self, *, model_config):
        model = _initialize_model(model_config, self.load_config)
        self._load_weights(model_config, model)
        return model


class ModelOptModelLoader(DefaultModelLoader):
    def load_model(self, *, model_config):
        if model_config.quantization is not None:  # (pre-quantized: its base class loads it)
            return super().load_model(model_config=model_config)
        raise NotImplementedError("quantizing on the fly is not simulated")


class LayeredModelLoader(DefaultModelLoader):
    def __init__(self, load_config):
        load_config.load_format = LoadFormat.AUTO
        super().__init__(load_config)

    def load_model(self, *, model_config):
        with torch.device("meta"):
            model = _initialize_model(model_config, self.load_config)

        if not hasattr(model, "load_weights_to_module"):
            raise ValueError("LayeredModelLoader requires a `load_weights_to_module` method")
        weights = self._get_all_weights(model_config, model)
        if not weights:
            raise ValueError("no weights: decided by the files, never claimed")
        return model


def get_model_loader(load_config, model_config=None):
    if load_config.load_format == LoadFormat.DUMMY:
        return DummyModelLoader(load_config)
    if model_config and (
        (hasattr(model_config, "modelopt_quant") and model_config.modelopt_quant)
        or model_config.quantization in ["modelopt_fp8", "modelopt_fp4"]
    ):
        return ModelOptModelLoader(load_config)
    if isinstance(load_config.load_format, type):
        return load_config.load_format(load_config)
    if load_config.load_format == LoadFormat.BITSANDBYTES:
        return BitsAndBytesModelLoader(load_config)
    if load_config.load_format == LoadFormat.LAYERED:
        return LayeredModelLoader(load_config)
    return DefaultModelLoader(load_config)
"""

PARALLEL_STATE = """
_TP = None


def get_tensor_model_parallel_world_size():
    return _TP.world_size
"""

DISTRIBUTED_INIT = """
from sglang.srt.distributed.parallel_state import get_tensor_model_parallel_world_size
"""

MODEL = """
from torch import nn


class ToyForCausalLM(nn.Module):
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__()
        self.config = config

    def load_weights(self, weights):
        if not hasattr(self, "_params"):  # (reads self: sets nothing on it by name)
            self._params = dict(self.named_parameters())


class ToyLayeredForCausalLM(ToyForCausalLM):
    def load_weights_to_module(self, module, weights):
        pass


class ToyDynamicForCausalLM(ToyForCausalLM):
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__(config)
        for name in config.loaders:
            setattr(self, name, None)  # (attributes by name: which ones is not known here)


EntryClass = [ToyForCausalLM, ToyLayeredForCausalLM, ToyDynamicForCausalLM]
"""

# (no `modelopt_quant`: get_model_loader's hasattr finds none; the setattr sets another
# object's attribute)
MODEL_CONFIG = """
class ModelConfig:
    def __init__(self, model_path, quantization=None):
        self.model_path = model_path
        self.quantization = quantization
        self.hf_config = None
        setattr(self.hf_config, "head_dim", 128)

    @staticmethod
    def from_server_args(server_args, **kwargs):
        return ModelConfig(model_path=server_args.model_path, quantization=None)
"""

FILES = {
    SRT + "configs/model_config.py": MODEL_CONFIG,
    SERVER_ARGS: ARGS,
    UTILS: UTILS_TEXT,
    SRT + "configs/load_config.py": LOAD_CONFIG,
    SRT + "model_executor/model_runner.py": RUNNER,
    SRT + "model_loader/loader.py": LOADER,
    SRT + "distributed/__init__.py": DISTRIBUTED_INIT,
    SRT + "distributed/parallel_state.py": PARALLEL_STATE,
    SRT + "models/toy.py": MODEL,
}
TOY = {"architectures": ["ToyForCausalLM"], "torch_dtype": "bfloat16"}
BNB = {**TOY, "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True}}
EXTRA = "--model-loader-extra-config '{\"enable_multithread_load\": true}'"


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    yield from one_release_session(
        tmp_path_factory, "weightloader", {p: textwrap.dedent(t) for p, t in FILES.items()}
    )


def load_errors(session: Session, flags: str, config: dict[str, Any] | None = TOY) -> list[str]:
    fields: dict[str, Any] = {"sm": 90, "platform": "cuda", "gpus": 2}
    if config is not None:
        fields["config"] = config
    result = explain(
        session, "v0.1.0", f"--model-path org/model {flags}", profile=Profile.parse(fields)
    )
    return [
        f["message"]
        for f in result["findings"]
        if f["severity"] == "error" and f.get("stage") == "load"
    ]


def test_the_dummy_loader_refuses_an_extra_config(session: Session) -> None:
    """The extra config's JSON text is parsed as LoadConfig does (orjson): a non-empty
    object is refused by the dummy loader's constructor, which get_model_loader picks."""
    (error,) = load_errors(session, f"--load-format dummy {EXTRA}")
    assert error.startswith("raises at loader.py:")
    assert "Model loader extra config is not supported for load format" in error
    # an empty object parses to {}: nothing to refuse (the text "{}" itself is not empty)
    assert load_errors(session, "--load-format dummy") == []
    # the default loader accepts the key; without config.json the choice is the command's
    assert load_errors(session, EXTRA) == []
    assert load_errors(session, f"--load-format dummy {EXTRA}", None) != []


def test_the_default_loader_checks_the_extra_config_s_keys(session: Session) -> None:
    (error,) = load_errors(session, "--model-loader-extra-config '{\"threads\": 8}'")
    assert "Unexpected extra config keys for load format" in error
    # both keys it knows: accepted
    both = '{"enable_multithread_load": true, "num_threads": 8}'
    assert load_errors(session, f"--model-loader-extra-config '{both}'") == []


def test_a_pre_quantized_bitsandbytes_checkpoint_refuses_tensor_parallelism(
    session: Session,
) -> None:
    (error,) = load_errors(session, "--load-format bitsandbytes --tp-size 2", BNB)
    assert "Prequant BitsAndBytes models with TP is not supported." in error
    # one rank: the loader goes on to the weight files, whose quant states decide the next
    # raise: not claimed
    assert load_errors(session, "--load-format bitsandbytes", BNB) == []
    # an unquantized checkpoint is quantized by the loader: tp is no problem
    assert load_errors(session, "--load-format bitsandbytes --tp-size 2", TOY) == []


def test_the_bitsandbytes_loader_refuses_another_method_s_checkpoint(session: Session) -> None:
    fp8 = {**TOY, "quantization_config": {"quant_method": "fp8"}}
    (error,) = load_errors(session, "--load-format bitsandbytes", fp8)
    assert "BitsAndBytes loader does not support fp8" in error


def test_a_loader_s_raise_names_the_flags_it_reads(session: Session) -> None:
    """The load config's fields carry the server args they came from: the dummy loader's
    raise reads --load-format and --model-loader-extra-config (what a fix changes)."""
    profile = Profile.parse({"sm": 90, "platform": "cuda", "config": TOY})
    result = explain(
        session, "v0.1.0", f"--model-path org/model --load-format dummy {EXTRA}", profile=profile
    )
    (error,) = [f for f in result["findings"] if f["severity"] == "error"]
    assert set(error["reads"]) == {"load_format", "model_loader_extra_config"}
    assert error["flag"] in ("--load-format", "--model-loader-extra-config")


def test_the_layered_loader_needs_the_model_s_layered_method(session: Session) -> None:
    """The layered loader's own load_model checks the model it built (its constructor not
    run here): a class that defines no `load_weights_to_module` and sets no such attribute
    has none; the weight files' own check after it is never claimed."""
    (error,) = load_errors(session, "--load-format layered")
    assert error.startswith("raises at loader.py:")
    assert "LayeredModelLoader requires a `load_weights_to_module` method" in error
    layered = {**TOY, "architectures": ["ToyLayeredForCausalLM"]}
    assert load_errors(session, "--load-format layered", layered) == []
    # a class setting attributes by name may have it: undecided, not an error
    dynamic = {**TOY, "architectures": ["ToyDynamicForCausalLM"], "loaders": ["x"]}
    assert load_errors(session, "--load-format layered", dynamic) == []
    assert load_errors(session, "") == []


def test_a_loader_loading_through_its_base_class_calls_load_weights() -> None:
    """`super().load_model(...)` is followed to the base class's method, which hands the
    model its weights (what the draft model's load stage needs to know)."""
    from kb.explain import derived, model_weights
    from kb.explain.abstract_values import Instance
    from kb.explain.classes import class_ref
    from kb.explain.simulate import Simulator
    from tests.sim_repos import parsed_modules

    mods = parsed_modules(FILES)
    path = SRT + "model_loader/loader.py"
    sim = Simulator(mods.get, mods[SERVER_ARGS], {"model_path": "m"}, None, derive=derived)
    for name, calls in (("ModelOptModelLoader", True), ("DummyModelLoader", False)):
        loader = Instance(class_ref(mods[path], name))
        assert model_weights.calls_load_weights(sim, loader) is calls, name
