"""A compressed-tensors checkpoint's scheme, read as SGLang's compressed-tensors config reads
it (kb.explain.compressed_tensors_types): `QuantizationArgs.model_validate` of config.json's
groups, the package's enums, and an ignore list of `re:` patterns, on a synthetic module
shaped like SGLang's (no SGLang code)."""

from __future__ import annotations

from typing import Any

from kb.explain import derived
from kb.explain.abstract_values import Func
from kb.explain.frames import Ctx
from kb.explain.predicates import Profile, Unknown
from kb.explain.simulate import Simulator
from tests import sim_repos

SRT = "python/sglang/srt/"
ARGS = SRT + "server_args.py"
CT = SRT + "layers/quantization/compressed_tensors/compressed_tensors.py"

SERVER_ARGS = """
from dataclasses import dataclass


@dataclass
class ServerArgs:
    model_path: str

    def __post_init__(self):
        pass
"""

COMPRESSED_TENSORS = """
import re
from typing import NamedTuple

import torch
from compressed_tensors.config import CompressionFormat
from compressed_tensors.quantization import (
    QuantizationArgs,
    QuantizationStrategy,
    QuantizationType,
)

ACTIVATION_FORMATS = [
    CompressionFormat.int_quantized.value,
    CompressionFormat.float_quantized.value,
]


def ignored(name, ignore):
    for target in ignore:
        if target.startswith("re:") and re.match(target[3:], name):
            return True
    return False


def moe_method(config, name):
    if ignored(name, config["ignore"]):
        return None
    group = config["config_groups"]["group_0"]
    weights = QuantizationArgs.model_validate(group["weights"])
    inputs = None
    if config["format"] in ACTIVATION_FORMATS:
        inputs = QuantizationArgs.model_validate(group["input_activations"])
    is_8_bits = weights.num_bits == inputs.num_bits == 8
    channel = weights.strategy == QuantizationStrategy.CHANNEL.value
    token = inputs.strategy == QuantizationStrategy.TOKEN.value
    if weights.type == QuantizationType.FLOAT:
        return "fp8"
    if is_8_bits and channel and token and inputs.dynamic and weights.symmetric:
        raise NotImplementedError("The W8A8Int8 Fused MoE scheme is implemented only for NPU")
    return "other"


class DeviceCapability(NamedTuple):
    major: int
    minor: int

    def to_int(self):
        return self.major * 10 + self.minor


def supported(min_capability):
    capability = DeviceCapability(*torch.cuda.get_device_capability())
    return capability.to_int() >= min_capability


def observer(config):
    return QuantizationArgs.model_validate(config["config_groups"]["group_0"]["weights"]).observer
"""


def int8(**weights: Any) -> dict[str, Any]:
    return {
        "format": "int-quantized",
        "ignore": ["lm_head", "re:.*mlp.gate$"],
        "config_groups": {
            "group_0": {
                "weights": {"num_bits": 8, "type": "int", "strategy": "channel", **weights},
                "input_activations": {"num_bits": 8, "strategy": "token", "dynamic": True},
            }
        },
    }


def call(name: str, *args: Any, sm: int | None = None) -> tuple[Any, list[tuple[str, str]]]:
    mods = sim_repos.parsed_modules({ARGS: SERVER_ARGS, CT: COMPRESSED_TENSORS})
    profile = Profile.parse({"sm": sm} if sm else {})
    sim = Simulator(mods.get, mods[ARGS], {"model_path": "m"}, profile, derive=derived)
    sim.run()
    fn = mods[CT].functions[name]
    out: list[Any] = []
    sim.run_after(lambda: out.append(sim.call_function(Func(mods[CT], fn), list(args), {}, Ctx())))
    fired = [(c.outcome, c.message) for c in sim.result.checks if c.outcome != "passed"]
    return (out[0] if out else None), fired


def test_an_int8_channel_token_scheme_is_decided_from_config_json() -> None:
    _, fired = call("moe_method", int8(), "model.layers.0.mlp.experts")
    assert fired == [
        ("fired", "NotImplementedError: The W8A8Int8 Fused MoE scheme is implemented only for NPU")
    ]
    # (`symmetric` is left out: the package's default, True, decided it)
    assert call("moe_method", int8(symmetric=False), "model.layers.0.mlp.experts") == ("other", [])


def test_a_float_scheme_and_an_ignored_layer_take_other_ways() -> None:
    fp8 = int8(type="float")
    assert call("moe_method", fp8, "model.layers.0.mlp.experts") == ("fp8", [])
    assert call("moe_method", int8(), "model.layers.0.mlp.gate") == (None, [])


def test_what_the_package_s_validators_compute_stays_unknown() -> None:
    observer, _ = call("observer", int8())
    assert isinstance(observer, Unknown)
    strategy_left_out = int8()
    del strategy_left_out["config_groups"]["group_0"]["weights"]["strategy"]
    _, fired = call("moe_method", strategy_left_out, "model.layers.0.mlp.experts")
    assert [outcome for outcome, _ in fired] == ["unknown"]


def test_a_named_tuple_holds_the_fields_it_was_built_with() -> None:
    # the scheme's capability check: DeviceCapability(*torch.cuda.get_device_capability())
    assert call("supported", 100, sm=90) == (False, [])
    assert call("supported", 100, sm=100) == (True, [])
