"""The version's own classes as values of a simulation run (kb.explain.simulate).

A class defined in a module we hold is a `ClassRef`: its attributes are read through its
bases (each found by the names its module imports, a few hops at most): methods, class
methods, static methods, properties and class-level values. Called, it builds an
`Instance` by interpreting the `__init__` its classes define (`super().__init__(...)` goes
on to the next class); a class in `skip_init` is built without its constructor, whose fields
are then unknown. An Enum class (`class MoeA2ABackend(Enum)`, `(str, Enum)` too) has members
(`EnumMember`): `E("deepep")` finds the member of that value, or asks the class's
`_missing_`, or is unknown (Enum's own ValueError cites no line of SGLang's).

Everything interpreted runs through the simulator, so the run's budget bounds it; what is
not decided (a base class from outside the code we hold, a field no constructor set) is
unknown, naming the attribute.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from typing import Any

from kb.explain.abstract_values import (
    SCALARS,
    ClassRef,
    EnumMember,
    ExternalName,
    Func,
    Instance,
    Obj,
    Super,
    Symbol,
    is_known,
    merge_needs,
    options_of,
)
from kb.explain.abstract_values import Method as BoundMethod
from kb.explain.frames import Ctx, Frame
from kb.explain.known_names import BUILTIN_TYPES, TORCH_MODULE_ATTRS, TORCH_SETTERS
from kb.explain.predicates import MISSING, Unknown, unknown
from kb.explain.source_modules import Module, class_defaults
from kb.pyast import NOT_LITERAL, literal
from kb.threeval import lift

# the interpreter (kb.explain.simulate.Simulator), which imports this module: what is used
# of it is its `eval`, `call_function` and per-run caches
Simulator = Any

MAX_BASES = 6  # classes above one class followed (SGLang's deepest: ~4)
ENUM_BASES = {"Enum", "IntEnum", "StrEnum", "Flag", "IntFlag"}
TYPE = ExternalName("type", "builtins")

Method = ast.FunctionDef | ast.AsyncFunctionDef


def class_ref(mod: Module, name: str) -> ClassRef:
    return ClassRef(mod, mod.classes[name], mod.path, name)


@lru_cache(maxsize=512)
def _body(node: ast.ClassDef) -> dict[str, ast.stmt]:
    """A class body's names: methods, nested classes, `NAME = value` (last one wins)."""
    out: dict[str, ast.stmt] = {}
    for stmt in node.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out[stmt.name] = stmt
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = stmt
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            if stmt.value is not None:
                out[stmt.target.id] = stmt
    return out


def bases(sim: Simulator, cls: ClassRef) -> list[Any]:
    """The class's bases as values: ClassRefs for classes we hold, else what they are
    (an ExternalName such as enum's Enum, a Symbol)."""
    key = ("bases", cls.path, cls.name)
    if key not in sim.class_cache:
        frame = Frame(cls.module, "<class>", {})
        out = []
        for base in cls.node.bases:
            if isinstance(base, ast.Name | ast.Attribute):
                out.append(sim.eval(base, frame, _ctx()))
            else:
                out.append(unknown("a base class"))
        sim.class_cache[key] = out
    return list(sim.class_cache[key])


def mro(sim: Simulator, cls: ClassRef) -> tuple[list[ClassRef], bool]:
    """The classes we hold that `cls` inherits from, nearest first (depth-first, each once),
    and whether every base was one we hold (else an attribute not found may be defined by
    a class from outside)."""
    out: list[ClassRef] = []
    complete = True

    def walk(c: ClassRef, depth: int) -> None:
        nonlocal complete
        if c in out:
            return
        out.append(c)
        if depth >= MAX_BASES:
            complete = complete and not c.node.bases
            return
        for base in bases(sim, c):
            if isinstance(base, ClassRef):
                walk(base, depth + 1)
            elif not _is_plain_base(base):
                complete = False

    walk(cls, 0)
    return out, complete


PARAMETER_NAMES = ("torch.nn.Parameter", "nn.Parameter", "torch.nn.parameter.Parameter")


def _is_plain_base(base: Any) -> bool:
    """`object`, `str`/`int` (an Enum's mixin), `Enum` itself: they add no attribute that
    SGLang's code reads besides those handled here; torch's nn.Module, whose attributes
    are known (TORCH_MODULE_ATTRS: _from_classes leaves those unknown)."""
    if isinstance(base, ExternalName):
        return base.module in ("builtins", "enum", "abc") or base.name in ("ABC", "object")
    return _is_torch_module(base)


def _is_torch_module(base: Any) -> bool:
    if isinstance(base, ExternalName):
        return (base.module, base.name) == ("torch.nn", "Module")
    return isinstance(base, Symbol) and base.dotted in ("nn.Module", "torch.nn.Module")


def is_parameter_class(sim: Simulator, cls: ClassRef) -> bool:
    """Whether the class derives from torch's Parameter (SGLang's `ModelWeightParameter`
    and its kin, whose `__new__` makes the parameter of the `data` they are given)."""
    key = ("parameter", cls.path, cls.name)
    if key not in sim.class_cache:  # (asked at every construction of the class)
        sim.class_cache[key] = any(
            (
                isinstance(base, ExternalName)
                and base.module.startswith("torch")
                and base.name == "Parameter"
            )
            or (isinstance(base, Symbol) and base.dotted in PARAMETER_NAMES)
            for held in mro(sim, cls)[0]
            for base in bases(sim, held)
        )
    return bool(sim.class_cache[key])


def is_enum(sim: Simulator, cls: ClassRef) -> bool:
    """Whether the class derives from enum's Enum (or its kin), imported by name or reached
    through the module (`import enum` ... `class LoadFormat(str, enum.Enum)`)."""
    classes, _ = mro(sim, cls)
    return any(
        (isinstance(b, ExternalName) and b.name in ENUM_BASES)
        or (isinstance(b, Symbol) and b.dotted.startswith("enum.") and b.dotted[5:] in ENUM_BASES)
        for c in classes
        for b in bases(sim, c)
    )


def _mixin(sim: Simulator, cls: ClassRef) -> bool:
    classes, _ = mro(sim, cls)
    return any(
        isinstance(b, ExternalName) and (b.name in ("str", "int", "StrEnum", "IntEnum"))
        for c in classes
        for b in bases(sim, c)
    )


def members(sim: Simulator, cls: ClassRef) -> dict[str, EnumMember]:
    """An Enum class's members, in order: `NAME = <literal>` in its body (a value not
    literal, such as `auto()`, makes the member's value unknown)."""
    key = ("members", cls.path, cls.name)
    if key not in sim.class_cache:
        mixin = _mixin(sim, cls)
        found: dict[str, EnumMember] = {}
        for stmt in cls.node.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0]
                if isinstance(target, ast.Name) and not target.id.startswith("_"):
                    value = literal(stmt.value)
                    shown = unknown(f"the value of {cls.name}.{target.id}")
                    found[target.id] = EnumMember(
                        cls, target.id, shown if value is NOT_LITERAL else value, mixin
                    )
        sim.class_cache[key] = found
    return dict(sim.class_cache[key])


def _ctx() -> Ctx:
    return Ctx()


# --- attributes --------------------------------------------------------------------------


def class_attr(sim: Simulator, cls: ClassRef, attr: str, allow_missing: bool = False) -> Any:
    """`C.attr`: a member of an Enum, a method (unbound; a classmethod bound to C), a
    class-level value, a nested class."""
    if attr == "__name__":
        return cls.name
    if is_enum(sim, cls):
        found = members(sim, cls).get(attr)
        if found is not None:
            return found
    return _from_classes(sim, cls, attr, None, allow_missing, start=None)


def instance_attr(sim: Simulator, obj: Instance, attr: str, allow_missing: bool = False) -> Any:
    if attr in obj.fields:
        sim.reads |= obj.marks.get(attr, frozenset())
        return obj.fields[attr]
    if attr == "__class__":
        return obj.cls
    value = _from_classes(sim, obj.cls, attr, obj, True, start=None)
    if attr == "forward" and (value is MISSING or isinstance(value, Unknown)):
        # (not in the classes held: a platform op's comes from its base, not held)
        op = _platform_forward(sim, obj)
        value = value if op is MISSING else op
    if value is MISSING:
        rest = obj.unfollowed
        if allow_missing and rest is not None and attr not in rest.names:
            sim.result.assumptions[rest.key] = rest.words
            return MISSING  # (getattr's default, hasattr False: as in SGLang)
        absent = allow_missing and not obj.unseen and never_assigned(sim, obj.cls, attr)
        if obj.note and not absent:
            return unknown(f"{obj.cls.name}.{attr} ({obj.note})")
        return MISSING if allow_missing else unknown(f"{obj.cls.name}.{attr}")
    return value


# SGLang's ops with a method per platform (MultiPlatformOp, CustomOp before 2026), whose
# module is not held: their `forward` calls the method `dispatch_forward` chose in their
# constructor (on CUDA `forward_cuda`, on ROCm `forward_hip`, whose default is
# `forward_cuda`); torch.compile swaps in `forward_native` for some batch sizes
PLATFORM_OPS = ("MultiPlatformOp", "CustomOp")
PLATFORM_FORWARD = {"cuda": ("forward_cuda",), "rocm": ("forward_hip", "forward_cuda")}


def _platform_forward(sim: Simulator, obj: Instance) -> Any:
    """`obj.forward` of a platform op: the platform's method, bound; unknown when the
    platform or torch.compile's mode leaves it open; MISSING when `obj` is no such op."""
    found, _ = mro(sim, obj.cls)
    if not any(
        isinstance(b, ExternalName) and b.name in PLATFORM_OPS for c in found for b in bases(sim, c)
    ):
        return MISSING
    names = PLATFORM_FORWARD.get(sim.profile.platform if sim.profile is not None else "")
    if names is None or sim.fields.get("enable_torch_compile") is not False:
        return unknown(f"{obj.cls.name}.forward (the method its platform dispatch picks)")
    for name in names:
        # (not in the classes held: the op's base has it, whose forward_hip is forward_cuda)
        method = _from_classes(sim, obj.cls, name, obj, True, start=None)
        if method is not MISSING and not isinstance(method, Unknown):
            return method
    return unknown(f"{obj.cls.name}.forward (its {names[-1]} not held)")


def never_assigned(sim: Simulator, cls: ClassRef, attr: str) -> bool:
    """Whether no constructor or method of `cls` and the classes it inherits from (all held
    here, or torch's Module) sets `self.<attr>`, nor sets attributes generically
    (`setattr(self, ...)`, `self.__dict__`): an instance whose constructor did not run here
    has no such attribute then (`hasattr(model, "load_weights_to_module")` is False)."""
    found, complete = mro(sim, cls)
    if not complete:
        return False
    for c in found:
        names = _self_attrs(c.node)
        if names is None or attr in names:
            return False
    return True


@lru_cache(maxsize=256)
def _self_attrs(node: ast.ClassDef) -> frozenset[str] | None:
    """The attributes the class's methods set on `self`; None when it sets them by name or
    hands `self` to other code."""
    names: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self":
            if n.attr == "__dict__":
                return None
            if not isinstance(n.ctx, ast.Load):
                names.add(n.attr)
        elif (
            isinstance(n, ast.Call)
            and not (isinstance(n.func, ast.Name) and n.func.id in _READERS)
            and any(
                isinstance(a, ast.Name) and a.id == "self"
                for a in (*n.args, *(k.value for k in n.keywords))
            )
        ):
            return None  # (self handed to other code, setattr too: it may set anything)
        elif isinstance(n, ast.Call) and ast.unparse(n.func) in _REGISTERS:
            # (torch's Module keeps what these name as attributes)
            first = n.args[0] if n.args else None
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                return None
            names.add(first.value)
    return frozenset(names)


# builtins that read an object and set nothing on it
_READERS = frozenset({"hasattr", "getattr", "isinstance", "type", "id", "len", "repr", "str"})
_REGISTERS = frozenset(
    f"self.{m}" for m in ("register_buffer", "register_parameter", "add_module", "register_module")
)


def member_attr(sim: Simulator, member: EnumMember, attr: str, allow_missing: bool) -> Any:
    if attr in ("value", "_value_"):
        return member.value
    if attr in ("name", "_name_"):
        return member.name
    return _from_classes(sim, member.cls, attr, member, allow_missing, start=None)


def super_attr(sim: Simulator, sup: Super, attr: str) -> Any:
    cls = sup.obj.cls if isinstance(sup.obj, Instance | EnumMember) else sup.obj
    if not isinstance(cls, ClassRef):
        return unknown(f"super().{attr}")
    return _from_classes(sim, cls, attr, sup.obj, False, start=sup.owner)


def _from_classes(
    sim: Simulator,
    cls: ClassRef,
    attr: str,
    obj: Any,
    allow_missing: bool,
    start: ClassRef | None,
) -> Any:
    """`attr` looked up in `cls` and the classes it inherits from (after `start`, for
    super()), bound to `obj` (an Instance or member; None for the class itself)."""
    classes, complete = mro(sim, cls)
    if start is not None:
        if start not in classes:
            return unknown(f"super().{attr}")
        classes = classes[classes.index(start) + 1 :]
    for owner in classes:
        if attr == "__init__" and owner in sim.skip_init:
            return None  # built without its constructor (super().__init__ does nothing)
        stmt = _body(owner.node).get(attr)
        if stmt is None:
            continue
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            return _method(sim, owner, stmt, cls, obj)
        if isinstance(stmt, ast.ClassDef):
            return ClassRef(owner.module, stmt, owner.path, stmt.name)
        value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
        return _class_value(sim, owner, attr, value)
    if attr == "__init__":
        return None  # no constructor of ours: object's (or one from outside)
    if not complete:
        return unknown(f"{cls.name}.{attr} (it may come from a base class not held here)")
    torch_module = any(_is_torch_module(b) for c in classes for b in bases(sim, c))
    if attr == "register_parameter" and torch_module and isinstance(obj, Instance):
        return BoundMethod(obj, attr)  # (the parameter becomes its attribute: kb.explain.tensors)
    if (attr in TORCH_MODULE_ATTRS or attr.startswith("_")) and torch_module:
        if attr in TORCH_SETTERS and isinstance(obj, Instance):
            obj.unseen, obj.unfollowed = True, None  # (torch sets one of it: not followed)
        return unknown(f"{cls.name}.{attr} (torch's nn.Module)")
    return MISSING if allow_missing else unknown(f"{cls.name}.{attr}")


def _method(sim: Simulator, owner: ClassRef, node: Method, cls: ClassRef, obj: Any) -> Any:
    decorators = {_decorator(d) for d in node.decorator_list}
    if "staticmethod" in decorators:
        return Func(owner.module, node, None, owner)
    if "classmethod" in decorators:
        return Func(owner.module, node, cls, owner)
    bound = Func(owner.module, node, obj, owner) if obj is not None else None
    if "property" in decorators or "cached_property" in decorators:
        if bound is None:
            return unknown(f"the property {cls.name}.{node.name}")
        return sim.call_function(bound, [], {}, _ctx())
    return bound if bound is not None else Func(owner.module, node, None, owner)


def _decorator(node: ast.expr) -> str:
    return ast.unparse(node).split(".")[-1]


def _class_value(sim: Simulator, owner: ClassRef, attr: str, value: ast.expr | None) -> Any:
    """A class-level `NAME = value`: a literal, else what the class body computes (in its
    module's names), once per run."""
    if value is None:
        return unknown(f"{owner.name}.{attr}")
    key = ("value", owner.path, owner.name, attr)
    if attr in filled_tables(owner.node):
        # `_fused_funcs = {}` that the class's registering methods fill when the modules
        # registering into it load: not its literal (what a stage found registered, when
        # it did: kb.explain.class_tables)
        found = sim.class_cache.get(key)
        return found if found is not None else unknown(f"{owner.name}.{attr} (filled at run time)")
    found = literal(value)
    if found is not NOT_LITERAL:
        return found
    if key not in sim.class_cache:
        sim.class_cache[key] = unknown(f"{owner.name}.{attr} (computed from itself)")
        sim.class_cache[key] = sim.eval(value, Frame(owner.module, "<class>", {}), _ctx())
    return sim.class_cache[key]


# the methods of a table that add to it (`cls.table.update(...)`, `.append`, ...)
ADDING = frozenset({"update", "append", "extend", "add", "insert", "setdefault"})


@lru_cache(maxsize=256)
def filled_tables(node: ast.ClassDef) -> frozenset[str]:
    """The class-level names the class's own methods add to (`cls.X[key] = v`,
    `cls.X.append(v)`, through `cls`, `self` or the class's name): registries."""
    owners = {"cls", "self", node.name}

    def table(expr: ast.expr) -> str | None:
        if (
            isinstance(expr, ast.Attribute)
            and isinstance(expr.value, ast.Name)
            and expr.value.id in owners
        ):
            return expr.attr
        return None

    found: set[str] = set()
    for fn in node.body:
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for n in ast.walk(fn):
            if isinstance(n, ast.Assign | ast.AugAssign):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                found.update(
                    name
                    for t in targets
                    if isinstance(t, ast.Subscript) and (name := table(t.value))
                )
            elif (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr in ADDING
                and (name := table(n.func.value))
            ):
                found.add(name)
    return frozenset(found)


def set_attr(
    obj: Instance, attr: str, value: Any, ctx: Ctx, marks: frozenset[str] = frozenset()
) -> None:
    """`self.x = v` on an instance: on an undecided path, it holds only there (the value
    before or this one: unknown which). `marks`: what the value was computed from (read
    again with it)."""
    obj.marks[attr] = marks
    if ctx.needs:
        before = obj.fields.get(attr)
        options = options_of([value, before]) if attr in obj.fields else None
        value = Unknown(tuple(dict.fromkeys((*ctx.needs, *merge_needs(value)))), options)
    obj.fields[attr] = value


# --- calls --------------------------------------------------------------------------------


def call_class(
    sim: Simulator, cls: ClassRef, args: list[Any], kwargs: dict[str, Any], ctx: Ctx, site: Any
) -> Any:
    """`C(...)`: an Enum's member by value, else a new instance with its constructor run."""
    if is_enum(sim, cls):
        return enum_lookup(sim, cls, args[0] if args else unknown("an Enum value"), ctx)
    obj = Instance(cls)
    if _is_named_tuple(cls.node):  # (fields only: built whatever the stage builds)
        _dataclass_init(sim, cls, obj, args, kwargs)
        return obj
    if cls in sim.skip_init or not (sim.construct or cls.path.startswith(sim.construct_under)):
        obj.note = "its constructor is not simulated"
        return obj
    init = _from_classes(sim, cls, "__init__", obj, True, start=None)
    if sim.built_under is not None and cls.path.startswith(sim.construct_under):
        sim.built_under.append(obj)
    if isinstance(init, Func):
        sim.call_function(init, list(args), dict(kwargs), ctx, site)
    elif init is None and _is_dataclass(cls.node):
        _dataclass_init(sim, cls, obj, args, kwargs)
        post_init = _from_classes(sim, cls, "__post_init__", obj, True, start=None)
        if isinstance(post_init, Func):  # (Python runs it after the generated __init__)
            sim.call_function(post_init, [], {}, ctx, site)
    elif isinstance(init, Unknown):
        obj.note = "its constructor is not held here"
    return obj


def _is_named_tuple(node: ast.ClassDef) -> bool:
    """`class DeviceCapability(NamedTuple): major: int; minor: int`."""
    return any(ast.unparse(b) in ("NamedTuple", "typing.NamedTuple") for b in node.bases)


def _is_dataclass(node: ast.ClassDef) -> bool:
    return any("dataclass" in ast.unparse(d) for d in node.decorator_list)


def _dataclass_init(
    sim: Simulator, cls: ClassRef, obj: Instance, args: list[Any], kwargs: dict[str, Any]
) -> None:
    names = [
        s.target.id
        for s in cls.node.body
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
    ]
    obj.fields.update(class_defaults(cls.node))
    for name, value in zip(names, args, strict=False):
        obj.fields[name] = value
    obj.fields.update((k, v) for k, v in kwargs.items() if k in names)


def enum_lookup(sim: Simulator, cls: ClassRef, value: Any, ctx: Ctx) -> Any:
    """`E(value)`: the member whose value it is; else what the class's `_missing_` returns
    (and raises: its checks are the run's); unknown for a value not decided."""
    if isinstance(value, Unknown):
        if value.options is None:
            return Unknown(value.needs or (f"which {cls.name} member",))
        found = [enum_lookup(sim, cls, option, ctx) for option in value.options]
        if all(isinstance(f, EnumMember) for f in found):
            return Unknown(value.needs, options_of(found), value.likely)
        return Unknown(merge_needs(value, *found) or (f"which {cls.name} member",))
    if isinstance(value, EnumMember) and value.cls == cls:
        return value
    for member in members(sim, cls).values():
        if is_known(value) and not isinstance(member.value, Unknown) and member.value == value:
            return member
    missing = _from_classes(sim, cls, "_missing_", None, True, start=None)
    if isinstance(missing, Func):
        found = sim.call_function(missing, [value], {}, ctx)
        return found if found is not None else unknown(f"{cls.name}({value!r})")
    return unknown(f"{cls.name}({value!r}): no member has that value (Enum raises ValueError)")


def enum_by_name(sim: Simulator, cls: ClassRef, name: Any) -> Any:
    """`E[name]`: the member of that name; unknown for a name not decided or not a member
    (Enum's own KeyError cites no line of SGLang's)."""
    if isinstance(name, str) and (found := members(sim, cls).get(name)) is not None:
        return found
    if isinstance(name, Unknown):
        return Unknown(name.needs or (f"which {cls.name} member",))
    return unknown(f"{cls.name}[{name!r}]: no member of that name (Enum raises KeyError)")


def enum_members(sim: Simulator, cls: ClassRef) -> list[EnumMember] | None:
    """`for m in E`: its members; None when E is no Enum class."""
    return list(members(sim, cls).values()) if is_enum(sim, cls) else None


def isinstance_call(sim: Simulator, args: list[Any]) -> Any:
    """`isinstance(x, C)`: decided for our objects and classes (isinstance_of), with builtin
    types (or a tuple of them) named; any other class: a known value is one of SGLang's own
    objects only if not a plain value."""
    if len(args) < 2:
        return unknown("isinstance() with its arguments")
    kinds = args[1] if isinstance(args[1], tuple) else (args[1],)
    decided = isinstance_of(sim, args[0], kinds)
    if decided is not None:
        return decided
    types = []
    for kind in kinds:
        if isinstance(kind, Symbol) and "." not in kind.dotted:
            # (a name the run did not bind: a local import not run, a global set at run time)
            return unknown(f"whether the value is a {kind.dotted} (the name is not resolved here)")
        builtin = BUILTIN_TYPES.get(kind.name) if isinstance(kind, ExternalName) else None
        if builtin is None or kind.module != "builtins":  # a class: as before, scalars
            return lift(lambda v: isinstance(v, SCALARS), args[0])
        types.append(builtin)
    return lift(lambda v: isinstance(v, tuple(types)), args[0])


def isinstance_of(sim: Simulator, value: Any, kinds: tuple[Any, ...]) -> Any:
    """`isinstance(value, C)` for classes we hold: decided for an object of ours (its class
    inherits from C, by the classes we hold: unknown when one of its bases is not) and for a
    plain value (no object of ours is a str); None when this does not decide it."""
    if isinstance(value, Instance | EnumMember):
        classes, complete = mro(sim, value.cls)
        if any(k in classes for k in kinds):
            return True
        if all(k == TYPE for k in kinds) and not any(
            b == TYPE or (isinstance(b, ExternalName) and b.name.endswith("Meta"))
            for c in classes
            for b in bases(sim, c)
        ):
            return False  # an object of SGLang's is no class (its class is no metaclass)
        held = all(
            isinstance(k, ClassRef) or (isinstance(k, ExternalName) and k.module == "builtins")
            for k in kinds
        )  # (a class we do not hold may be one of its bases)
        if complete and held:
            return False
        names = {c.name for c in classes}
        if all(
            isinstance(k, ClassRef)
            or (isinstance(k, ExternalName) and _from_sglang(k.module) and k.name not in names)
            for k in kinds
        ) and _foreign_bases_only(sim, classes):
            # one of SGLang's classes (held, or by a name none of these has) and bases from
            # outside SGLang only (`torch.nn.Module`), which inherit from none of SGLang's
            return False
        return unknown(f"whether a {value.cls.name} is a {_name(kinds[0])}")
    if isinstance(value, Obj) and value.kind == "hf_config":
        return _hf_config_is(sim, kinds)
    if not all(isinstance(k, ClassRef) for k in kinds):
        return None
    if value is None or isinstance(value, str | int | float | bool | list | dict | tuple):
        return False
    return None


def _hf_config_is(sim: Simulator, kinds: tuple[Any, ...]) -> Any:
    """`isinstance(hf_config, Qwen3NextConfig)`: SGLang's get_config builds the config class
    registered for config.json's `model_type`, the one whose `model_type` it is (`isinstance(
    config, FalconH1Config | NemotronHConfig | Lfm2Config)` is true of a Nemotron-H whatever
    Lfm2Config's is); a class whose `model_type` is not known here (inherited from
    transformers) is decided by the class SGLang registers for the model's model_type, else
    unknown. None for no class of SGLang's (`dict`: the caller's builtin types decide)."""
    if not any(isinstance(k, ClassRef) for k in kinds):
        return None
    model_type = sim.profile.hf_attr("model_type") if sim.profile is not None else None
    types = [
        class_attr(sim, k, "model_type", allow_missing=True) if isinstance(k, ClassRef) else None
        for k in kinds
    ]
    if not isinstance(model_type, str):
        return None
    sim.reads.add("<model>")
    if model_type in types:
        return True
    if all(isinstance(t, str) for t in types):
        return False
    # (a class whose model_type is inherited from transformers: the config's is the class
    # SGLang registers for config.json's model_type, whose bases say)
    registered = _registered_config(sim, model_type)
    if registered is not None and all(isinstance(k, ClassRef) for k in kinds):
        held, _complete = mro(sim, registered)
        if any(k in held for k in kinds):
            return True
        if _foreign_bases_only(sim, held):
            return False
    elif registered is None and all(
        isinstance(k, ClassRef) and _named_for(k.name) != _named_for(model_type)
        for k, t in zip(kinds, types, strict=True)
        if not isinstance(t, str)
    ):
        # none registered for it: transformers' own class, none of SGLang's (a class of
        # SGLang's registered under the model_type it inherits is named for it: Lfm2Config)
        return False
    return unknown(f"whether the model's config is a {_name(kinds[0])}")


def config_method(sim: Simulator, attr: str) -> Any:
    """`hf_config.<attr>` for a method (or property) of the config class SGLang registers for
    config.json's `model_type` (NemotronHConfig.get_nemotron_h_config_for_layer): bound to
    the config (a property's value); None when the class defines no such function."""
    model_type = sim.profile.hf_attr("model_type") if sim.profile is not None else None
    cls = _registered_config(sim, model_type) if isinstance(model_type, str) else None
    if cls is None:
        return None
    for c in mro(sim, cls)[0]:
        for node in c.node.body:
            if isinstance(node, ast.FunctionDef) and node.name == attr:
                sim.reads.add("<model>")
                fn = Func(c.module, node, Obj("hf_config"), c)
                if any(ast.unparse(d) == "property" for d in node.decorator_list):
                    return sim.call_function(fn, [], {}, _ctx())
                if node.decorator_list:  # (a classmethod or staticmethod: not followed)
                    return None
                return fn
    return None


def _named_for(name: str) -> str:
    """`Lfm2Config` and `lfm2` alike: lowercase, without separators or "config"."""
    return name.lower().replace("_", "").replace("-", "").removesuffix("config")


# where SGLang registers its config classes by model_type (`_CONFIG_REGISTRY`, a list of the
# classes or a dict by their model_type), by version
CONFIG_REGISTRIES = (
    "sglang.srt.utils.hf_transformers.common",
    "sglang.srt.utils.hf_transformers_utils",
)
REGISTRY = "_CONFIG_REGISTRY"


def _registered_config(sim: Simulator, model_type: str) -> ClassRef | None:
    """The config class SGLang registers for `model_type` (its own `model_type`), when one
    of the classes its registry names has it; None otherwise. Kept per parsed registry."""
    for dotted in CONFIG_REGISTRIES:
        mod = sim.module(dotted)
        if mod is None:
            continue
        key = (mod.path, id(mod), model_type)
        if key not in _registered:
            _registered[key] = _registered_in(sim, mod, model_type)
            while len(_registered) > 256:
                del _registered[next(iter(_registered))]
        return _registered[key]
    return None


_registered: dict[tuple[str, int, str], ClassRef | None] = {}


def _registered_in(sim: Simulator, mod: Module, model_type: str) -> ClassRef | None:
    names = {  # (the names of the classes its assignments list)
        n.id
        for stmt in mod.body
        if isinstance(stmt, ast.Assign | ast.AnnAssign)
        and stmt.value is not None
        and any(isinstance(t, ast.Name) and t.id == REGISTRY for t in _targets_of(stmt))
        for n in ast.walk(stmt.value)
        if isinstance(n, ast.Name)
    }
    frame = Frame(mod, "<module>", {})
    for name in sorted(names):
        cls = sim.lookup(name, frame) if name in mod.imports or name in mod.classes else None
        if isinstance(cls, ClassRef):
            found = class_attr(sim, cls, "model_type", allow_missing=True)
            if found == model_type:
                return cls
    return None


def _targets_of(stmt: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return list(stmt.targets) if isinstance(stmt, ast.Assign) else [stmt.target]


def _foreign_bases_only(sim: Simulator, held: list[ClassRef]) -> bool:
    """Every base of these classes that is not held here comes from outside SGLang
    (`torch.nn.Module`): such a class cannot inherit from one of SGLang's, so an object
    of theirs is none of SGLang's other classes."""
    for cls in held:
        for base in bases(sim, cls):
            if isinstance(base, ClassRef) or _is_plain_base(base):
                continue
            if isinstance(base, ExternalName):
                source = base.module
            elif isinstance(base, Symbol):
                imported = cls.module.imports.get(base.dotted.split(".")[0])
                source = imported[0] if imported is not None else "sglang"
            else:
                return False
            if _from_sglang(source):
                return False
    return True


def _from_sglang(module: str) -> bool:
    return module.split(".")[0] == "sglang"


def _name(kind: Any) -> str:
    return str(getattr(kind, "name", None) or getattr(kind, "dotted", None) or "class")
