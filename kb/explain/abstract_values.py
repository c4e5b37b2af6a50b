"""The simulator's abstract values and the three-valued arithmetic over them.

Besides plain Python constants, a run handles names it does not interpret (`Symbol`),
functions whose AST it holds (`Func`), names from outside (`ExternalName`), the model's
configs (`Obj`), the ServerArgs instance (`SELF`) and bound methods (`Method`). Operations on
values some of which are `Unknown` are lifted (`lift`): the result is known when every
combination of the few known options agrees, else Unknown naming the facts that would decide
it. (Not to be confused with kb.explain.values, which converts a command's flag values.)
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kb.explain.predicates import NO_LIKELY, Unknown, unknown
from kb.explain.safe_eval import ARITHMETIC, COMPARISONS
from kb.explain.source_modules import Module

MAX_OPTIONS = 4  # possible values kept for a tainted assignment


# torch's dtype aliases: `torch.half is torch.float16`, so a model loaded as float16 passes
# a check against `[torch.bfloat16, torch.half]`
TORCH_DTYPE_ALIASES = {
    "torch.half": "torch.float16",
    "torch.float": "torch.float32",
    "torch.double": "torch.float64",
    "torch.short": "torch.int16",
    "torch.int": "torch.int32",
    "torch.long": "torch.int64",
    "torch.cfloat": "torch.complex64",
    "torch.cdouble": "torch.complex128",
}
TORCH_DTYPES = frozenset(
    {"bfloat16", "float16", "float32", "float64", "int8", "uint8", "int16", "int32", "int64"}
    | {"float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "bool"}
    | {"complex64", "complex128"}
)


@dataclass(frozen=True)
class Symbol:
    """A name we do not interpret (an enum member, a module attribute): compared by name,
    each torch dtype by its one name."""

    dotted: str

    def __post_init__(self) -> None:
        if self.dotted in TORCH_DTYPE_ALIASES:
            object.__setattr__(self, "dotted", TORCH_DTYPE_ALIASES[self.dotted])


def torch_dtype(value: Any) -> Any:
    """A config.json dtype ("bfloat16") as transformers holds it: the torch dtype."""
    if isinstance(value, str) and value.removeprefix("torch.") in TORCH_DTYPES:
        return Symbol("torch." + value.removeprefix("torch."))
    return value


@dataclass(frozen=True)
class Func:
    module: Module = field(compare=False)
    node: ast.FunctionDef | ast.AsyncFunctionDef = field(compare=False)
    bound: Any = None  # the Self for methods
    owner: Any = field(default=None, compare=False)  # the ClassRef defining a method


@dataclass(frozen=True)
class ClassRef:
    """A class defined in a module we hold, used as a value (`return DeepEPMoE`): compared
    by where it is defined; called, it builds an instance (kb.explain.classes)."""

    module: Module = field(compare=False)
    node: ast.ClassDef = field(compare=False)
    path: str = ""
    name: str = ""

    def __str__(self) -> str:
        return self.name


class EnumMember:
    """A member of an Enum class we hold (`MoeA2ABackend.DEEPEP`): equal to itself, to the
    Symbol of its dotted name (what the simulator used before it read Enum classes) and,
    for a `str` or `int` mixin, to its value."""

    def __init__(self, cls: ClassRef, name: str, value: Any, mixin: bool = False) -> None:
        self.cls, self.name, self.value, self.mixin = cls, name, value, mixin

    @property
    def dotted(self) -> str:
        return f"{self.cls.name}.{self.name}"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EnumMember):
            return other.cls == self.cls and other.name == self.name
        if isinstance(other, Symbol):
            return other.dotted == self.dotted
        if self.mixin and isinstance(other, str | int) and not isinstance(other, bool):
            return bool(other == self.value)
        return False

    def __hash__(self) -> int:
        return hash(self.value) if self.mixin else hash(self.dotted)

    def __repr__(self) -> str:
        return self.dotted

    __str__ = __repr__


class Instance:
    """An object of a class we hold, built by the run (`DeepEPMoE(...)`): the fields its
    constructor set; the rest is read from its class (kb.explain.classes). Compared by
    identity, like Python's objects."""

    def __init__(self, cls: ClassRef, note: str = "") -> None:
        self.cls = cls
        self.fields: dict[str, Any] = {}
        self.marks: dict[str, frozenset[str]] = {}  # field -> the inputs it was set from
        self.note = note  # why fields not set are unknown ("its constructor is not run")

    def __repr__(self) -> str:
        return f"<{self.cls.name} object>"


@dataclass(frozen=True)
class Super:
    """`super()` in a method of `owner`, on `obj`: attributes from the classes after it."""

    owner: ClassRef
    obj: Any


@dataclass(frozen=True)
class ExternalName:
    """A name defined outside the code we interpret: imported from a module we do not hold
    (or do not follow), or a builtin."""

    name: str
    module: str


@dataclass(frozen=True)
class Obj:
    """The model's hf_config or ModelConfig (attributes from the profile), or the ModelRunner
    that loads the model (attributes derived from its class: kb.explain.derived)."""

    kind: str  # "hf_config" | "model_config" | "runner" | "draft_runner" | "draft_model_config"
    # | "parallel" (get_parallel(), kb.explain.parallel_state)


class Registry:
    """A module-level dict that a decorator fills with functions by name
    (`ATTENTION_BACKENDS`): looking a known name up gives the function registered."""

    def __init__(self, module: Any, table: str, functions: dict[str, Any]) -> None:
        self.module, self.table, self.functions = module, table, functions

    def __contains__(self, name: object) -> bool:
        return name in self.functions


class Self:
    """The ServerArgs instance: its fields are the simulated state."""


SELF = Self()


@dataclass(frozen=True)
class Method:
    """A bound method of a known value: `"x".lower`, `{}.get`."""

    target: Any
    name: str


# safe_eval's operators, plus identity tests and bit operators; no `**` (safe_eval guards
# its size, this interpreter has no such guard).
COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    **COMPARISONS,
    ast.Is: lambda a, b: a is b if a is None or b is None or isinstance(a, bool) else a == b,
    ast.IsNot: lambda a, b: a is not b if a is None or b is None or isinstance(a, bool) else a != b,
}
MAX_VALUE = 100_000  # items or characters of a list or string the run builds
_SEQUENCES = (str, list, tuple)


# `+` and `*` refuse to build a sequence over MAX_VALUE long (`[0] * dp_size` with a huge
# value from the command): one statement costs a bounded amount of work. The ValueError
# makes the value unknown (lift).
def _add(a: Any, b: Any) -> Any:
    if isinstance(a, _SEQUENCES) and isinstance(b, _SEQUENCES) and len(a) + len(b) > MAX_VALUE:
        raise ValueError("value too large")
    return a + b


def _mul(a: Any, b: Any) -> Any:
    seq, times = (a, b) if isinstance(a, _SEQUENCES) else (b, a)
    if isinstance(seq, _SEQUENCES) and isinstance(times, int) and len(seq) * times > MAX_VALUE:
        raise ValueError("value too large")
    return a * b


def bounded_range(*args: int) -> list[int]:
    """`range(...)` as the list it yields (what SGLang builds from it: batch-size lists),
    refused past MAX_VALUE items like `+` and `*`."""
    items = range(*args)
    if len(items) > MAX_VALUE:
        raise ValueError("value too large")
    return list(items)


BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    **{op: fn for op, fn in ARITHMETIC.items() if op is not ast.Pow},
    ast.Add: _add,
    ast.Mult: _mul,
    ast.BitOr: operator.or_,
    ast.BitAnd: operator.and_,
}
SCALARS = (str, int, float, bool, type(None))


def is_unknown(value: Any) -> bool:
    return isinstance(value, Unknown)


def is_known(value: Any) -> bool:
    """A value we can compute with: scalars and containers of them."""
    if isinstance(value, (*SCALARS, Symbol, EnumMember, ClassRef)):
        return True
    if isinstance(value, list | tuple | set | frozenset):
        return len(value) <= 10_000 and all(is_known(v) for v in value)
    if isinstance(value, dict):
        return len(value) <= 10_000 and all(is_known(k) and is_known(v) for k, v in value.items())
    return False


def merge_needs(*values: Any) -> tuple[str, ...]:
    needs: dict[str, None] = {}
    for v in values:
        if isinstance(v, Unknown):
            needs.update(dict.fromkeys(v.needs))
    return tuple(needs)


def lift(fn: Callable[..., Any], *args: Any) -> Any:
    """Apply `fn` to values some of which may be Unknown with a few known options: the
    result is known when every combination agrees."""
    if not any(isinstance(a, Unknown) for a in args):
        try:
            return fn(*args)
        except Exception:  # noqa: BLE001 - a type error in SGLang's code under our values
            return unknown("a value this analysis cannot compute")
    combos: list[list[Any]] = [[]]
    for a in args:
        if isinstance(a, Unknown):
            if a.options is None:
                return Unknown(merge_needs(*args), None, likely_result(fn, args))
            combos = [c + [o] for c in combos for o in a.options]
        else:
            combos = [c + [a] for c in combos]
        if len(combos) > 16:
            return Unknown(merge_needs(*args), None, likely_result(fn, args))
    results = []
    for combo in combos:
        try:
            results.append(fn(*combo))
        except Exception:  # noqa: BLE001
            return Unknown(merge_needs(*args), None, likely_result(fn, args))
    first = results[0]
    if all(same_value(r, first) for r in results):
        return first
    return Unknown(merge_needs(*args), options_of(results), likely_result(fn, args))


def likely_of(value: Any) -> Any:
    return value.likely if isinstance(value, Unknown) else value


def likely_result(fn: Callable[..., Any], args: Sequence[Any]) -> Any:
    values = [a.likely if isinstance(a, Unknown) else a for a in args]
    if any(v is NO_LIKELY for v in values):
        return NO_LIKELY
    try:
        return fn(*values)
    except Exception:  # noqa: BLE001
        return NO_LIKELY


def same_value(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def options_of(values: Iterable[Any]) -> tuple[Any, ...] | None:
    out: list[Any] = []
    for v in values:
        if isinstance(v, Unknown):
            if v.options is None:
                return None
            candidates: Iterable[Any] = v.options
        else:
            if not is_known(v):
                return None
            candidates = [v]
        for c in candidates:
            if not any(same_value(c, o) for o in out):
                out.append(c)
    return tuple(out) if len(out) <= MAX_OPTIONS else None


def truth(value: Any) -> bool | Unknown:
    if isinstance(value, Unknown):
        return lift(bool, value)  # type: ignore[no-any-return]
    if isinstance(
        value, Obj | Func | ExternalName | Self | Method | Symbol | ClassRef | EnumMember | Instance
    ):
        return True
    try:
        return bool(value)
    except Exception:  # noqa: BLE001
        return unknown("a value this analysis cannot compute")
