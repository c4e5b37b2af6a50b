"""Values the simulator computes itself (kb.explain.simulate and its value modules), on a
synthetic ServerArgs (none of SGLang's code): globs on layer names, the class of an object
the run built, a config.json dict changed through another that holds it, a dict spread
from one an undecided branch may have extended, and the GPU's ROCm version and LLVM target
from the catalog."""

from __future__ import annotations

from typing import Any

from kb.explain.predicates import Profile
from kb.explain.simulate import Simulator
from tests import sim_repos
from tests.test_simulate import ARGS, modules

SERVER_ARGS = """
import fnmatch
from dataclasses import dataclass

import torch
from transformers import AutoConfig

from sglang.srt.utils.common import is_hip

BASE = {"fp8": "Fp8Config"}
if is_hip():
    BASE.update({"mxfp4": "Mxfp4Config"})
METHODS = {**BASE}


class Layer:
    pass


def get_config(model, trust_remote_code, revision=None, **kwargs):
    return AutoConfig.from_pretrained(model)


@dataclass
class ServerArgs:
    model_path: str
    glob: object = None
    kind: object = None
    cleared: object = None
    method: object = None
    hip: object = None
    target: object = None

    def __post_init__(self):
        self.glob = fnmatch.fnmatch("model.layers.0.self_attn.q_proj", "*q_proj")
        self.kind = type(Layer()).__name__
        config = get_config(self.model_path, trust_remote_code=False)
        quant = config.quantization_config
        kv = quant["layer_quant_config"]["*k_proj"]
        kv["output_tensors"] = None
        self.cleared = quant["layer_quant_config"]["*k_proj"]["output_tensors"] is None
        self.method = METHODS["fp8"]
        self.hip = torch.version.hip
        if torch.version.hip:
            self.target = torch.cuda.get_device_properties(0).gcnArchName
"""

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "quantization_config": {
        "quant_method": "quark",
        "layer_quant_config": {"*k_proj": {"output_tensors": {"dtype": "fp8_e4m3"}}},
    },
}


def fields(profile: dict[str, Any]) -> dict[str, Any]:
    mods = modules({ARGS: SERVER_ARGS, sim_repos.UTILS: sim_repos.UTILS_TEXT})
    given = {"model_path": "m"}
    sim = Simulator(mods.get, mods[ARGS], given, Profile.parse(profile), given=set(given))
    return sim.run().fields


def test_values_the_interpreter_computes_itself() -> None:
    out = fields({"gpu": "MI300X", "config": CONFIG})
    assert out["glob"] is True  # fnmatch on known texts
    assert out["kind"] == "Layer"  # type() of an object the run built
    # config.json's dict, changed through a local holding it: the config sees it
    assert out["cleared"] is True
    assert out["method"] == "Fp8Config"
    assert out["hip"] == "7.2"  # the catalog GPU's ROCm version
    assert out["target"] == "gfx942"


def test_an_undecided_extension_leaves_the_keys_both_paths_have() -> None:
    """No GPU: whether the dict was extended is undecided, its other key is not."""
    out = fields({"config": CONFIG})
    assert out["method"] == "Fp8Config"


def test_a_cuda_gpu_has_no_rocm_version() -> None:
    out = fields({"gpu": "H100 80GB", "config": CONFIG})
    assert out["hip"] is None and out["target"] is None
