"""Tensors and parameters a layer's quantization method creates and registers on the layer
(`w = torch.nn.Parameter(torch.empty(..., dtype=params_dtype)); w.format_ue8m0 = False;
layer.register_parameter("w13_weight_scale_inv", w)`): what the code after it reads of them
is their dtype, their shape and the attributes SGLang sets on them (`getattr(scale,
"format_ue8m0", False)` decides whether the DeepGEMM scales are requantized; the NVFP4 MoE
methods pad the per-rank weights' rows to the swizzled scales' 128 and refuse the padding a
gated activation would need).

The shape follows the calls that make and reshape tensors (`torch.empty(E, 2 * n, k)`,
`.unsqueeze`, `.reshape`, `.permute`, `torch.cat`, `F.pad`...); a dimension the inputs do not
decide is unknown, and so is the shape of anything else (an indexed tensor, another torch
function's result). Data is never known, and neither is an attribute nobody was seen setting
(SGLang's set_weight_attrs and the weight loaders set others this does not follow), so a
`getattr` default is never taken for a tensor. The parameter classes SGLang derives from
torch's (`ModelWeightParameter(data=torch.empty(...), ...)`) are the tensor they wrap.
"""

from __future__ import annotations

from typing import Any

from kb.explain.abstract_values import TORCH_DTYPES, Instance, Method, Symbol, is_known, lift
from kb.explain.classes import set_attr
from kb.explain.frames import Ctx
from kb.explain.predicates import Unknown, unknown

# torch's functions creating a tensor whose dtype is their `dtype=` (else torch's default
# dtype, which SGLang sets to the model's while it builds the model: not known here)
FACTORIES = frozenset({"empty", "zeros", "ones", "full", "randn", "rand", "empty_strided"})
LIKE_FACTORIES = frozenset({"empty_like", "zeros_like", "ones_like", "full_like"})
REGISTER = "register_parameter"
PARAMETER_HOMES = (["torch", "nn"], ["nn"], ["torch", "nn", "parameter"])  # torch.nn.Parameter
FUNCTIONAL_HOMES = ("torch.nn.functional", "F", "nn.functional")
# methods returning the same tensor's shape (a copy, a view, another device)
SAME_SHAPE = frozenset({"contiguous", "cuda", "cpu", "clone", "detach", "abs", "float", "half"})
SAME_SHAPE |= {"bfloat16", "requires_grad_", "pin_memory", "fill_", "zero_", "copy_"}
DTYPE_METHODS = {"float": "torch.float32", "half": "torch.float16", "bfloat16": "torch.bfloat16"}
SHAPE_METHODS = frozenset({"size", "dim", "numel", "unsqueeze", "squeeze", "reshape", "view"})
SHAPE_METHODS |= {"permute", "transpose", "narrow", "to", "flatten", "repeat", "expand"}
SHAPE_METHODS |= SAME_SHAPE

Shape = tuple[Any, ...] | None  # each dimension an int or Unknown; None: not even the rank


class Tensor:
    """A tensor or parameter the run created: its dtype, shape and the attributes set on
    it. Compared by identity, like the objects it stands for."""

    def __init__(self, dtype: Any, parameter: bool, shape: Shape = None) -> None:
        self.dtype = dtype
        self.parameter = parameter  # a torch.nn.Parameter (else a plain tensor)
        self.shape = shape
        self.fields: dict[str, Any] = {}

    def __repr__(self) -> str:
        return "<tensor>"


def _dims(args: list[Any], kwargs: dict[str, Any]) -> Shape:
    """`torch.empty(a, b)` / `torch.empty((a, b))` / `size=(a, b)`: the dimensions."""
    given = args[0] if len(args) == 1 and isinstance(args[0], list | tuple) else args
    given = kwargs.get("size", given)
    if not isinstance(given, list | tuple) or not given:
        return None
    return tuple(d if isinstance(d, int | Unknown) and d is not True else unknown() for d in given)


def created(dotted: str, args: list[Any], kwargs: dict[str, Any], default_dtype: Any = None) -> Any:
    """`torch.empty(..., dtype=d)`, `torch.nn.Parameter(t)`, `torch.cat`, `F.pad` and the
    like as a Tensor, `torch.get_default_dtype()` as the dtype; None for any other call.
    `default_dtype`: torch's default dtype, which SGLang's loader sets to the model's while
    it builds the model and loads its weights (None: not known here)."""
    parts = dotted.split(".")
    if parts[-1] == "Parameter" and parts[:-1] in PARAMETER_HOMES:
        return parameter_of(args[0] if args else kwargs.get("data"))
    module, _, name = dotted.rpartition(".")
    default = default_dtype if default_dtype is not None else unknown("torch's default dtype")
    if dotted == "torch.get_default_dtype":
        return default
    if module == "torch" and name in FACTORIES:
        dtype = kwargs.get("dtype")
        dims = _dims(args[:-1] if name == "full" else args, kwargs)
        return Tensor(dtype if dtype is not None else default, parameter=False, shape=dims)
    source = args[0] if args else None
    if module == "torch" and name in LIKE_FACTORIES and isinstance(source, Tensor):
        return Tensor(kwargs.get("dtype", source.dtype), parameter=False, shape=source.shape)
    if (
        module == "torch"
        and name in ("cat", "concat", "stack")
        and isinstance(source, list | tuple)
    ):
        return _joined(name, list(source), args[1] if len(args) > 1 else kwargs.get("dim", 0))
    if module in FUNCTIONAL_HOMES and name == "pad" and isinstance(source, Tensor):
        return _padded(source, args[1] if len(args) > 1 else kwargs.get("pad"))
    return None


def parameter_of(data: Any) -> Tensor:
    """`Parameter(data)` or a parameter class SGLang derives from it: the same tensor."""
    if isinstance(data, Tensor):
        return Tensor(data.dtype, parameter=True, shape=data.shape)
    return Tensor(unknown("the parameter's dtype"), parameter=True)


def _axis(dim: Any, rank: int) -> int | None:
    if isinstance(dim, int) and not isinstance(dim, bool) and -rank <= dim < rank:
        return dim % rank
    return None


def _joined(name: str, items: list[Any], dim: Any) -> Tensor | None:
    if not items or not all(isinstance(t, Tensor) for t in items):
        return None
    first: Tensor = items[0]
    shapes = [t.shape for t in items]
    if any(s is None for s in shapes) or len({len(s) for s in shapes if s is not None}) != 1:
        return Tensor(first.dtype, parameter=False)
    base = list(shapes[0] or ())
    if name == "stack":
        axis = _axis(dim, len(base) + 1)
        if axis is None:
            return Tensor(first.dtype, parameter=False)
        return Tensor(first.dtype, False, (*base[:axis], len(items), *base[axis:]))
    axis = _axis(dim, len(base))
    if axis is None:
        return Tensor(first.dtype, parameter=False)
    total: Any = 0
    for shape in shapes:
        total = lift(lambda a, b: a + b, total, (shape or ())[axis])
    base[axis] = total
    return Tensor(first.dtype, False, tuple(base))


def _padded(tensor: Tensor, pad: Any) -> Tensor:
    """`F.pad(t, (left, right, top, bottom, ...))`: pairs from the last dimension back."""
    if tensor.shape is None or not isinstance(pad, list | tuple) or len(pad) % 2:
        return Tensor(tensor.dtype, parameter=False)
    dims = list(tensor.shape)
    for i in range(len(pad) // 2):
        if i >= len(dims):
            return Tensor(tensor.dtype, parameter=False)
        axis = len(dims) - 1 - i
        dims[axis] = lift(lambda d, a, b: d + a + b, dims[axis], pad[2 * i], pad[2 * i + 1])
    return Tensor(tensor.dtype, False, tuple(dims))


def attribute(tensor: Tensor, attr: str) -> Any:
    if attr == "dtype":
        return tensor.dtype
    if attr == "data":  # (the same tensor's storage: what is set on it stays)
        return tensor
    if attr == "shape":
        return tensor.shape if tensor.shape is not None else unknown("the tensor's shape")
    if attr == "ndim":
        return len(tensor.shape) if tensor.shape is not None else unknown("the tensor's rank")
    if attr in tensor.fields:
        return tensor.fields[attr]
    if attr in SHAPE_METHODS:
        return Method(tensor, attr)
    return unknown(f"the tensor's {attr}")


def method(tensor: Tensor, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """A tensor's method that reads or changes its shape: its result."""
    shape = tensor.shape
    if name == "size":
        if shape is None:
            return unknown("the tensor's shape")
        if not args:
            return shape
        axis = _axis(args[0], len(shape))
        return shape[axis] if axis is not None else unknown("the tensor's size")
    if name == "dim":
        return len(shape) if shape is not None else unknown("the tensor's rank")
    if name == "numel":
        return _product(shape) if shape is not None else unknown("the tensor's size")
    if name in SAME_SHAPE:
        return Tensor(DTYPE_METHODS.get(name, tensor.dtype), False, shape)
    if name == "to":
        return Tensor(_converted_dtype(tensor, args, kwargs), False, shape)
    if name == "view" and len(args) == 1 and not isinstance(args[0], int | list | tuple):
        # `.view(torch.int16)`: the same bytes as another dtype (its last dimension scales)
        dtype = args[0] if _is_dtype(args[0]) else unknown("the tensor's dtype")
        return Tensor(dtype, False, None)
    return Tensor(tensor.dtype, False, _reshaped(shape, name, args) if shape is not None else None)


def _is_dtype(value: Any) -> bool:
    return isinstance(value, Symbol) and value.dotted.startswith("torch.")


def _converted_dtype(tensor: Tensor, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """The dtype after `.to(dtype)`, `.to(device, dtype)`, `.to(other)`, `.to("cuda")`: a
    dtype argument not decided leaves it unknown, never the tensor's own."""
    if "dtype" in kwargs:
        return kwargs["dtype"]
    for arg in args:
        if _is_dtype(arg) and arg.dotted.removeprefix("torch.") in TORCH_DTYPES:
            return arg
        if isinstance(arg, Tensor):
            return arg.dtype
        if not isinstance(arg, str | bool):  # a device is a text or torch.device("cuda")
            if not (isinstance(arg, Symbol) and "device" in arg.dotted):
                return unknown("the dtype the tensor is converted to")
    return tensor.dtype


def _product(dims: tuple[Any, ...]) -> Any:
    total: Any = 1
    for d in dims:
        total = lift(lambda a, b: a * b, total, d)
    return total


def _reshaped(shape: tuple[Any, ...], name: str, args: list[Any]) -> Shape:
    """The shape after `.unsqueeze(d)`, `.reshape(...)`, `.permute(...)`, `.narrow(...)`..."""
    dims = list(shape)
    rank = len(dims)
    given = list(args[0]) if len(args) == 1 and isinstance(args[0], list | tuple) else args
    if name == "unsqueeze" and args:
        axis = _axis(args[0], rank + 1)
        return None if axis is None else (*dims[:axis], 1, *dims[axis:])
    if name == "squeeze":
        if not args:
            return None if not all(is_known(d) for d in dims) else tuple(d for d in dims if d != 1)
        axis = _axis(args[0], rank)
        if axis is None or not is_known(dims[axis]):
            return None
        return tuple(d for i, d in enumerate(dims) if i != axis or d != 1)
    if name in ("reshape", "view", "expand"):
        return _with_inferred(shape, given) if name != "expand" else tuple(given)
    if name == "permute":
        axes = [_axis(a, rank) for a in given]
        if len(axes) != rank or None in axes or len(set(axes)) != rank:
            return None
        return tuple(dims[a] for a in axes if a is not None)
    if name == "transpose" and len(args) == 2:
        a, b = _axis(args[0], rank), _axis(args[1], rank)
        if a is None or b is None:
            return None
        dims[a], dims[b] = dims[b], dims[a]
        return tuple(dims)
    if name == "narrow" and len(args) == 3:
        axis = _axis(args[0], rank)
        if axis is None:
            return None
        dims[axis] = args[2]
        return tuple(dims)
    if name == "flatten" and not args:
        return (_product(shape),)
    return None


def _with_inferred(shape: tuple[Any, ...], given: list[Any]) -> Shape:
    """`reshape(a, -1, b)`: the -1 is what the other dimensions leave of the size."""
    if not given or not all(isinstance(d, int | Unknown) for d in given):
        return None
    if given.count(-1) > 1:
        return None
    if -1 not in given:
        return tuple(given)
    rest = _product(tuple(d for d in given if d != -1))
    total = _product(shape)
    if is_known(rest) and is_known(total) and rest and total % rest == 0:
        inferred: Any = total // rest
    else:
        inferred = unknown("the tensor's size")
    return tuple(inferred if d == -1 else d for d in given)


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
    """`t.x = v`; on an undecided path, unknown (v or what it was). `t.data = other` makes
    it hold the other tensor's data: its dtype and shape (SGLang's online quantization
    swaps a weight's data for the quantized one)."""
    if attr == "data":
        known = isinstance(value, Tensor) and not ctx.needs
        tensor.dtype = value.dtype if known else unknown("the dtype of the data it was given")
        tensor.shape = value.shape if known else None
        return
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
