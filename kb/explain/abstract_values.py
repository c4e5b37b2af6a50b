"""The simulator's abstract values and the three-valued arithmetic over them.

Besides plain Python constants, a run handles names it does not interpret (`Symbol`),
functions whose AST it holds (`Func`), names from outside (`ExternalName`), the model's
configs (`Obj`), the ServerArgs instance (`SELF`) and bound methods (`Method`). Operations on
values some of which are `Unknown` are lifted (kb.threeval.lift): the result is known when
every combination of the few known options agrees, else Unknown naming the facts that would
decide it. (Not to be confused with kb.explain.values, which converts a command's flag values.)
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from kb.explain.source_modules import Module
from kb.threeval import MAX_SIZE, Named, Refused

# The three-valued arithmetic over these values is kb.threeval's; the simulator's modules
# import these names from here with the values.
from kb.threeval import SCALARS as SCALARS
from kb.threeval import is_known as is_known
from kb.threeval import lift as lift
from kb.threeval import likely_of as likely_of
from kb.threeval import merge_needs as merge_needs
from kb.threeval import options_of as options_of
from kb.threeval import same_value as same_value
from kb.threeval import truth as truth

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
class Symbol(Named):
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
class Sentinel(Named):
    """`object()`: a value that is only itself (`_UNSET = object()`), one per place that
    makes it (a module's global is made once)."""

    path: str
    line: int


@dataclass(frozen=True)
class Func:
    module: Module = field(compare=False)
    node: ast.FunctionDef | ast.AsyncFunctionDef = field(compare=False)
    bound: Any = None  # the Self for methods
    owner: Any = field(default=None, compare=False)  # the ClassRef defining a method
    # a function defined in a function: the enclosing function's locals, which it reads
    # (the live dict, as a Python closure reads the latest values)
    closure: dict[str, Any] | None = field(default=None, compare=False)


class RunDict(dict[Any, Any]):
    """A dict the run owns: config.json's, copied for the run when first read
    (kb.explain.model_attrs). Changed in place on a decided path, as Python does: SGLang's
    Quark config clears an item of a dict it reached through another, and the other sees
    it. Other dicts (a module's constants, kept across runs) are changed on a copy."""


def run_owned(value: Any) -> Any:
    """A copy of a config.json value with each dict a RunDict."""
    if isinstance(value, dict):
        return RunDict((k, run_owned(v)) for k, v in value.items())
    if isinstance(value, list):
        return [run_owned(v) for v in value]
    return value


@dataclass(frozen=True)
class ClassRef(Named):
    """A class defined in a module we hold, used as a value (`return DeepEPMoE`): compared
    by where it is defined; called, it builds an instance (kb.explain.classes)."""

    module: Module = field(compare=False)
    node: ast.ClassDef = field(compare=False)
    path: str = ""
    name: str = ""

    def __str__(self) -> str:
        return self.name

    # `A | B` of classes, as isinstance() takes it (`isinstance(c, Qwen3NextConfig |
    # JetNemotronConfig)`): the tuple of both
    def __or__(self, other: Any) -> tuple[Any, ...]:
        return (self, *(other if isinstance(other, tuple) else (other,)))

    def __ror__(self, other: Any) -> tuple[Any, ...]:
        return (*(other if isinstance(other, tuple) else (other,)), self)


class EnumMember(Named):
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
        # with a note: the attributes code the run did not follow may still set, when known
        # (kb.explain.unfollowed); `getattr(obj, other, default)` then finds none
        self.unfollowed: Unfollowed | None = None
        self.unseen = False  # handed to code the run did not follow (kb.explain.unfollowed)

    def __repr__(self) -> str:
        return f"<{self.cls.name} object>"


@dataclass(frozen=True)
class Unfollowed:
    """What code a run did not follow may set on an object it built (kb.explain.unfollowed):
    the attributes `names`; any other is absent, resting on the assumption `words` (stated
    under `key` in the run's assumptions when it decides something)."""

    names: frozenset[str]
    key: str
    words: str


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
    # | "parallel" (get_parallel(), kb.explain.parallel_state) | "forward_batch" (a forward's batch)


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


@dataclass(frozen=True, eq=False)
class Again:
    """What a method the run already called returns when called again: the object it
    built (the ModelRunner's `_get_attention_backend`, which two-batch overlap calls for
    its primary and each child: built once, kb.explain.deploy). `Method(Again(x), "call")`."""

    value: Any


def bounded_range(*args: int) -> list[int]:
    """`range(...)` as the list it yields (what SGLang builds from it: batch-size lists),
    refused past the bound of what one operation builds (kb.threeval.MAX_SIZE)."""
    items = range(*args)
    if len(items) > MAX_SIZE:
        raise Refused("value too large")
    return list(items)
