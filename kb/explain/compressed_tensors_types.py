"""The compressed-tensors package's types that SGLang's compressed-tensors quantization
config reads (`from compressed_tensors.quantization import QuantizationArgs, ...`): the
package is not SGLang's, so its code is not in the knowledge base, and without it a
checkpoint's scheme (`QuantizationArgs.model_validate(config["weights"])`, then
`weight_quant.strategy == QuantizationStrategy.CHANNEL.value`) was never decided.

What is modelled is the package's public API, stable across its releases: the enums'
members and values, and a QuantizationArgs holding the keys config.json gives it (pydantic
turns "channel" into QuantizationStrategy.CHANNEL, a str enum equal to "channel"). A key
config.json leaves out takes the field's plain default, except where the package's
validators compute it (`strategy`, `observer`): those stay unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kb.explain.abstract_values import ExternalName
from kb.explain.predicates import unknown

PACKAGE = "compressed_tensors"
# str enums (a member equals its value) and plain ones (only `.value` is the text)
STR_ENUMS: dict[str, dict[str, str]] = {
    "QuantizationType": {"INT": "int", "FLOAT": "float"},
    "QuantizationStrategy": {
        "TENSOR": "tensor",
        "CHANNEL": "channel",
        "GROUP": "group",
        "BLOCK": "block",
        "TOKEN": "token",
        "TENSOR_GROUP": "tensor_group",
        "ATTN_HEAD": "attn_head",
    },
    "DynamicType": {"LOCAL": "local"},
}
PLAIN_ENUMS: dict[str, dict[str, str]] = {
    "CompressionFormat": {
        "dense": "dense",
        "sparse_bitmask": "sparse-bitmask",
        "sparse_24_bitmask": "sparse-24-bitmask",
        "int_quantized": "int-quantized",
        "float_quantized": "float-quantized",
        "naive_quantized": "naive-quantized",
        "pack_quantized": "pack-quantized",
        "marlin_24": "marlin-24",
        "mixed_precision": "mixed-precision",
        "nvfp4_pack_quantized": "nvfp4-pack-quantized",
        "mxfp4_pack_quantized": "mxfp4-pack-quantized",
    }
}
ARGS_CLASS = "QuantizationArgs"
# QuantizationArgs' fields whose default no validator changes
ARGS_DEFAULTS: dict[str, Any] = {
    "num_bits": 8,
    "type": "int",
    "symmetric": True,
    "group_size": None,
    "block_structure": None,
    "dynamic": False,
    "actorder": None,
}
VALIDATORS = ("model_validate", "parse_obj")


class EnumStr(str):
    """A member of one of the package's str enums: equal to its value."""

    enum: str
    member: str

    def __new__(cls, value: str, enum: str, member: str) -> EnumStr:
        made = super().__new__(cls, value)
        made.enum, made.member = enum, member
        return made


@dataclass(frozen=True)
class Member:
    """A member of one of the package's plain enums (equal only to itself)."""

    enum: str
    name: str
    value: str


@dataclass(frozen=True)
class Validator:
    """`QuantizationArgs.model_validate`, which builds the arguments from a dict."""

    cls: str


class Args:
    """A QuantizationArgs: the keys config.json gave it, else the plain defaults."""

    def __init__(self, given: dict[str, Any]) -> None:
        self.fields = {**ARGS_DEFAULTS, **given}

    def __repr__(self) -> str:
        return f"<QuantizationArgs {self.fields}>"


def _ours(name: ExternalName) -> bool:
    return name.module.split(".")[0] == PACKAGE


def class_attribute(cls: ExternalName, attr: str) -> Any:
    """`QuantizationStrategy.TENSOR`, `QuantizationArgs.model_validate`; None when the
    name is not one of these."""
    if not _ours(cls):
        return None
    if cls.name in STR_ENUMS and attr in STR_ENUMS[cls.name]:
        return EnumStr(STR_ENUMS[cls.name][attr], cls.name, attr)
    if cls.name in PLAIN_ENUMS and attr in PLAIN_ENUMS[cls.name]:
        return Member(cls.name, attr, PLAIN_ENUMS[cls.name][attr])
    if cls.name == ARGS_CLASS and attr in VALIDATORS:
        return Validator(cls.name)
    return unknown(f"{cls.name}.{attr} (the compressed-tensors package)")


def attribute(obj: EnumStr | Member | Args, attr: str) -> Any:
    if isinstance(obj, EnumStr):
        if attr == "value":
            return str(obj)
        return obj.member if attr == "name" else unknown(f"{obj.enum}.{attr}")
    if isinstance(obj, Member):
        return obj.value if attr == "value" else obj.name if attr == "name" else unknown(attr)
    if attr in obj.fields:
        return obj.fields[attr]
    return unknown(f"QuantizationArgs.{attr} (computed by the package's validators)")


def build(callee: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """`QuantizationArgs.model_validate(d)` or `QuantizationArgs(**d)`; None for any other
    call."""
    if isinstance(callee, Validator):
        given = args[0] if args else None
    elif isinstance(callee, ExternalName) and _ours(callee) and callee.name == ARGS_CLASS:
        given = kwargs if not args else None
    else:
        return None
    if not isinstance(given, dict) or not all(isinstance(k, str) for k in given):
        return unknown("the quantization arguments (config.json)")
    return Args(given)
