"""Values the simulator computes itself (kb.explain.simulate and its value modules), on a
synthetic ServerArgs (none of SGLang's code): globs on layer names, the class of an object
the run built, a config.json dict changed through another that holds it, a dict spread
from one an undecided branch may have extended, and the GPU's ROCm version and LLVM target
from the catalog."""

from __future__ import annotations

from typing import Any

from kb.explain import derived
from kb.explain.predicates import Profile, Unknown
from kb.explain.simulate import Simulator
from tests import sim_repos
from tests.test_simulate import ARGS, modules

SERVER_ARGS = """
import fnmatch
from dataclasses import dataclass

import torch
from transformers import AutoConfig

from sglang.srt.utils.common import is_hip

try:
    from flashinfer.comm import MoeAlltoAll

    use_flashinfer = True
except ImportError:
    use_flashinfer = False

try:
    if is_hip():
        from zbal.zbal_buffer import Buffer
    else:
        from deep_ep import Buffer
    use_deepep = True
except ImportError:
    use_deepep = False

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
    unresolved: object = None
    of_class: object = None
    a2a: object = None
    deepep: object = None
    copied: object = None
    sub_quant: object = 0

    def __post_init__(self):
        self.glob = fnmatch.fnmatch("model.layers.0.self_attn.q_proj", "*q_proj")
        self.kind = type(Layer()).__name__
        config = get_config(self.model_path, trust_remote_code=False)
        quant = config.quantization_config
        kv = quant["layer_quant_config"]["*k_proj"]
        kv["output_tensors"] = None
        self.cleared = quant["layer_quant_config"]["*k_proj"]["output_tensors"] is None
        self.method = METHODS["fp8"]
        # (a class a local import would bind, not run: whether None is one is not known)
        self.unresolved = isinstance(None, ImportedElsewhere)
        self.of_class = isinstance(None, Layer)
        self.a2a = use_flashinfer
        self.deepep = use_deepep
        self.copied = {"extra": 1}.copy()  # (a loader's extra config, copied)
        # (a sub-config without quantization_config has none: transformers sets it from
        # the JSON alone)
        self.sub_quant = getattr(config.text_config, "quantization_config", None)
        self.hip = torch.version.hip
        if torch.version.hip:
            self.target = torch.cuda.get_device_properties(0).gcnArchName
"""

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "text_config": {"hidden_size": 64},
    "quantization_config": {
        "quant_method": "quark",
        "layer_quant_config": {"*k_proj": {"output_tensors": {"dtype": "fp8_e4m3"}}},
    },
}


def fields(
    profile: dict[str, Any], server_args: str = SERVER_ARGS, model_path: str = "m"
) -> dict[str, Any]:
    """The server args the synthetic ServerArgs leaves, run for `profile`."""
    mods = modules({ARGS: server_args, sim_repos.UTILS: sim_repos.UTILS_TEXT})
    given = {"model_path": model_path}
    sim = Simulator(
        mods.get, mods[ARGS], given, Profile.parse(profile), given=set(given), derive=derived
    )
    return sim.run().fields


def test_values_the_interpreter_computes_itself() -> None:
    out = fields({"gpu": "MI300X", "config": CONFIG})
    assert out["glob"] is True  # fnmatch on known texts
    assert out["kind"] == "Layer"  # type() of an object the run built
    # config.json's dict, changed through a local holding it: the config sees it
    assert out["cleared"] is True
    assert out["method"] == "Fp8Config"
    assert isinstance(out["unresolved"], Unknown) and out["of_class"] is False
    assert out["copied"] == {"extra": 1}
    assert out["sub_quant"] is None
    assert out["hip"] == "7.2"  # the catalog GPU's ROCm version
    assert out["target"] == "gfx942"


def test_a_try_import_s_flag_is_whether_its_package_is_installed() -> None:
    # (flashinfer: CUDA's alone; installed as the profile assumes packages are)
    rocm, cuda = fields({"gpu": "MI300X", "config": CONFIG}), fields({"gpu": "H100 80GB"})
    assert (rocm["a2a"], cuda["a2a"]) == (False, True)
    # (one of the packages imported in the branches of an `if`: DeepEP's on CUDA)
    assert (rocm["deepep"], cuda["deepep"]) == (False, True)
    unsure = fields({"gpu": "H100 80GB", "config": CONFIG, "packages": "unknown"})["a2a"]
    assert isinstance(unsure, Unknown)


def test_an_undecided_extension_leaves_the_keys_both_paths_have() -> None:
    """No GPU: whether the dict was extended is undecided, its other key is not."""
    out = fields({"config": CONFIG})
    assert out["method"] == "Fp8Config"


def test_a_cuda_gpu_has_no_rocm_version() -> None:
    out = fields({"gpu": "H100 80GB", "config": CONFIG})
    assert out["hip"] is None and out["target"] is None


# A ModelOpt checkpoint keeps its quantization in hf_quant_config.json beside config.json:
# SGLang asks the Hub whether the file exists, downloads it, or globs a snapshot for it.
QUANT_FILES = """
import glob
import json
import os
from dataclasses import dataclass

from huggingface_hub import HfApi, hf_hub_download, snapshot_download


@dataclass
class ServerArgs:
    model_path: str
    exists: object = None
    algo: object = None
    found: object = None
    globbed: object = None

    def __post_init__(self):
        self.exists = HfApi().file_exists(self.model_path, "hf_quant_config.json")
        path = hf_hub_download(repo_id=self.model_path, filename="hf_quant_config.json")
        with open(path) as f:
            self.algo = json.load(f)["quantization"]["quant_algo"]
        folder = snapshot_download(self.model_path, allow_patterns="*.json")
        files = glob.glob(os.path.join(folder, "*.json"))
        self.found = len([f for f in files if f.endswith("hf_quant_config.json")])
        with open(files[-1]) as f:
            self.globbed = json.load(f)["quantization"]["quant_algo"]
"""

MODELOPT = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8"}}


def quant_fields(profile: dict[str, Any]) -> dict[str, Any]:
    return fields(profile, QUANT_FILES, "nvidia/Llama-3.1-8B-Instruct-FP8")


def test_the_checkpoint_s_hf_quant_config_json_is_the_profile_s() -> None:
    config = {"architectures": ["LlamaForCausalLM"]}
    out = quant_fields({"gpu": "A100 80GB", "config": config, "hf_quant_config": MODELOPT})
    assert (out["exists"], out["algo"], out["found"], out["globbed"]) == (True, "FP8", 1, "FP8")
    # without it, the checkpoint is its config.json alone
    alone = quant_fields({"gpu": "A100 80GB", "config": config})
    assert (alone["exists"], alone["found"]) == (False, 0)
