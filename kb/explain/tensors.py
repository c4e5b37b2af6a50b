"""Tensors and parameters a layer's quantization method creates and registers on the layer
(`w = torch.nn.Parameter(torch.empty(..., dtype=params_dtype)); w.format_ue8m0 = False;
layer.register_parameter("w13_weight_scale_inv", w)`): what the code after it reads of them
is their dtype and the attributes SGLang sets on them (`getattr(scale, "format_ue8m0",
False)` decides whether the DeepGEMM scales are requantized).

Only that is known: shapes and data are unknown, and so is an attribute nobody was seen
setting (SGLang's set_weight_attrs and the weight loaders set others this does not follow),
so a `getattr` default is never taken for a tensor.
"""

from __future__ import annotations

from typing import Any

from kb.explain.abstract_values import Instance
from kb.explain.classes import set_attr
from kb.explain.frames import Ctx
from kb.explain.predicates import unknown

# torch's functions creating a tensor whose dtype is their `dtype=` (else torch's default
# dtype, which SGLang sets to the model's while it builds the model: not known here)
FACTORIES = frozenset({"empty", "zeros", "ones", "full", "randn", "rand", "empty_strided"})
REGISTER = "register_parameter"
PARAMETER_HOMES = (["torch", "nn"], ["nn"], ["torch", "nn", "parameter"])  # torch.nn.Parameter


class Tensor:
    """A tensor or parameter the run created: its dtype and the attributes set on it.
    Compared by identity, like the objects it stands for."""

    def __init__(self, dtype: Any, parameter: bool) -> None:
        self.dtype = dtype
        self.parameter = parameter  # a torch.nn.Parameter (else a plain tensor)
        self.fields: dict[str, Any] = {}

    def __repr__(self) -> str:
        return "<tensor>"


def created(dotted: str, args: list[Any], kwargs: dict[str, Any]) -> Tensor | None:
    """`torch.empty(..., dtype=d)` or `torch.nn.Parameter(t)` as a Tensor; None for any
    other call."""
    parts = dotted.split(".")
    if parts[-1] == "Parameter" and parts[:-1] in (
        ["torch", "nn"],
        ["nn"],
        ["torch", "nn", "parameter"],
    ):
        data = args[0] if args else kwargs.get("data")
        dtype = data.dtype if isinstance(data, Tensor) else unknown("the parameter's dtype")
        return Tensor(dtype, parameter=True)
    if len(parts) == 2 and parts[0] == "torch" and parts[1] in FACTORIES:
        dtype = kwargs.get("dtype")
        default = unknown("torch's default dtype at load")
        return Tensor(dtype if dtype is not None else default, parameter=False)
    return None


def attribute(tensor: Tensor, attr: str) -> Any:
    if attr == "dtype":
        return tensor.dtype
    if attr == "data":  # (the same tensor's storage: what is set on it stays)
        return tensor
    if attr in tensor.fields:
        return tensor.fields[attr]
    return unknown(f"the tensor's {attr}")


def isinstance_of(tensor: Tensor, kinds: tuple[Any, ...]) -> Any:
    """`isinstance(t, torch.nn.Parameter)` / `(t, torch.Tensor)`; unknown for another class."""
    answers: list[bool | None] = []
    for kind in kinds:
        dotted = (
            getattr(kind, "dotted", None)
            or f"{getattr(kind, 'module', '')}.{getattr(kind, 'name', '')}"
        )
        parts = dotted.split(".")
        if parts[-1] == "Parameter" and parts[:-1] in PARAMETER_HOMES:
            answers.append(tensor.parameter)
        elif dotted == "torch.Tensor":
            answers.append(True)
        elif dotted.startswith("builtins."):  # (no tensor is a tuple, a list, a number)
            answers.append(False)
        else:
            answers.append(None)
    if any(a is True for a in answers):
        return True
    return False if all(a is False for a in answers) else unknown("whether a tensor is that class")


def set_attribute(tensor: Tensor, attr: str, value: Any, ctx: Ctx) -> None:
    """`t.x = v`; on an undecided path, unknown (v or what it was)."""
    tensor.fields[attr] = unknown(*ctx.needs) if ctx.needs else value


def register(layer: Instance, args: list[Any], kwargs: dict[str, Any], ctx: Ctx) -> None:
    """`layer.register_parameter(name, parameter)`: the layer's attribute `name`."""
    name = args[0] if args else kwargs.get("name")
    value = args[1] if len(args) > 1 else kwargs.get("param")
    if isinstance(name, str):
        set_attr(layer, name, value, ctx)
    else:
        # (an attribute of a name not known: kb.explain.unfollowed)
        layer.unseen, layer.unfollowed = True, None
