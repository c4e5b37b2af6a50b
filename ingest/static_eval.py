"""Fold constant expressions without executing anything.

What SGLang writes as a default or a choices list is often not a literal: `10 * 1000 * 1000`,
`sys.maxsize`, a module constant, `Backend.ALL` (a tuple of class attributes),
`[m.name.lower() for m in RealKvHashMode]`, `list(SomeEnum)`. `fold` evaluates the small,
closed language these are written in (literals, arithmetic, names bound to module or class
constants, enum members, comprehensions, a few pure builtins and str methods) over the AST,
with kb.threeval's bounded operators. Anything outside it raises CannotFold, carrying the
Unknown that says why; a name imported from another module raises External so the caller
can resolve it against that module's text.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kb.pyast import NOT_LITERAL, literal
from kb.threeval import (
    Unknown,
    binary,
    compare,
    is_unknown,
    lift,
    sized,
    truth,
    unary,
    unknown,
)


class CannotFold(Exception):
    """The expression is not statically known: `unknown` says why."""

    def __init__(self, why: str | Unknown) -> None:
        self.unknown = why if isinstance(why, Unknown) else unknown(why)
        super().__init__(why if isinstance(why, str) else why.reason)


class External(CannotFold):
    """The expression needs `name`, imported from `module`."""

    def __init__(self, name: str, module: str) -> None:
        super().__init__(f"{name} from {module}")
        self.name, self.module = name, module


# Well-known stdlib constants, as on the 64-bit CPython SGLang runs on (never the host's).
STDLIB = {"sys.maxsize": 2**63 - 1, "math.pi": 3.141592653589793, "math.e": 2.718281828459045}
MAX_DEPTH = 24
ENUM_BASES = ("Enum", "IntEnum", "StrEnum", "Flag", "IntFlag")

# A dict value that is not a constant: the dict still folds (its keys are choices).
NOT_CONSTANT = unknown("a value that is not a constant")


@dataclass(frozen=True)
class Member:
    """An enum member: argparse compares values against it, so choices use `.value`."""

    cls: str
    name: str
    value: Any


@dataclass
class Scope:
    """Top-level bindings of one module: constants, classes and imported names."""

    names: dict[str, ast.expr] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    imports: dict[str, tuple[str, str]] = field(default_factory=dict)  # local -> (module, name)
    # Resolves an imported name (module, name) to a value; None: raise External instead.
    resolver: Callable[[str, str], Any] | None = None
    cache: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, body: list[ast.stmt], module: str = "") -> Scope:
        scope = cls()
        for node in body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                if isinstance(node.targets[0], ast.Name):
                    scope.names[node.targets[0].id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                if node.value is not None:
                    scope.names[node.target.id] = node.value
            elif isinstance(node, ast.ClassDef):
                scope.classes[node.name] = node
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(module, node.module or "", node.level)
                for alias in node.names:
                    if alias.name != "*":
                        scope.imports[alias.asname or alias.name] = (base, alias.name)
        return scope


def _absolute(module: str, name: str, level: int) -> str:
    """`from .common import x` inside package `a.b` -> a.b.common (module is the importer's
    package path, e.g. "sglang.srt.utils" for sglang/srt/utils/__init__.py)."""
    if not level:
        return name
    parts = module.split(".") if module else []
    parts = parts[: len(parts) - (level - 1)] if level > 1 else parts
    return ".".join([*parts, name] if name else parts)


CONVERSIONS: dict[str, Callable[[Any], Any]] = {"str": str, "int": int, "float": float, "len": len}
STR_METHODS = {"lower", "upper", "strip", "title", "capitalize"}


def fold(node: ast.AST, scope: Scope, local: dict[str, Any] | None = None, depth: int = 0) -> Any:
    """The value of `node`, or raise CannotFold / External."""
    if depth > MAX_DEPTH:
        raise CannotFold("too deep")
    if local is None:
        local = {}
    value = literal(node) if not isinstance(node, ast.Name) else NOT_LITERAL
    if value is not NOT_LITERAL:
        return value
    d = depth + 1
    if isinstance(node, ast.Name):
        return _name(node.id, scope, local, d)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        out: list[Any] = []
        for elt in node.elts:
            if isinstance(elt, ast.Starred):
                out.extend(_iterate(fold(elt.value, scope, local, d)))
            else:
                out.append(fold(elt, scope, local, d))
        return _sized(tuple(out) if isinstance(node, ast.Tuple) else out)
    if isinstance(node, ast.Dict):
        # Keys must be known; a value that is not (a class, a function) stays opaque, so
        # `list(Parser.DetectorMap.keys())` folds while `.values()` does not.
        out_dict: dict[Any, Any] = {}
        for k, v in zip(node.keys, node.values, strict=False):
            if k is None:
                raise CannotFold("**mapping")
            key = fold(k, scope, local, d)
            if isinstance(v, ast.Name) and v.id not in scope.names and v.id not in local:
                out_dict[key] = NOT_CONSTANT  # a class or an import: not worth another module
                continue
            try:
                out_dict[key] = fold(v, scope, local, d)
            except CannotFold:
                out_dict[key] = NOT_CONSTANT
        return out_dict
    if isinstance(node, ast.BinOp):
        left, right = fold(node.left, scope, local, d), fold(node.right, scope, local, d)
        return known(binary(node.op, left, right))
    if isinstance(node, ast.UnaryOp):
        return known(unary(node.op, fold(node.operand, scope, local, d)))
    if isinstance(node, ast.Attribute):
        return _attribute(node, scope, local, d)
    if isinstance(node, ast.Subscript):
        container = fold(node.value, scope, local, d)
        key = fold(node.slice, scope, local, d)
        try:
            return known(container[key])
        except CannotFold:
            raise
        except Exception as exc:
            raise CannotFold("subscript") from exc
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        return _comprehension(node, scope, local, d)
    if isinstance(node, ast.Call):
        return _call(node, scope, local, d)
    raise CannotFold(type(node).__name__)


def known(value: Any) -> Any:
    """`value`, or raise CannotFold when it is Unknown."""
    if is_unknown(value):
        raise CannotFold(value)
    return value


def _sized(value: Any) -> Any:
    return known(lift(sized, value))


def _name(name: str, scope: Scope, local: dict[str, Any], depth: int) -> Any:
    if name in local:
        return local[name]
    if name in scope.cache:
        return scope.cache[name]
    if name in scope.names:
        value = fold(scope.names[name], scope, None, depth)
    elif name in scope.classes:
        value = scope.classes[name]
    elif name in scope.imports:
        module, original = scope.imports[name]
        if scope.resolver is None:
            raise External(name, module)
        value = scope.resolver(module, original)
    elif name in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[name]
    else:
        raise CannotFold(name)
    scope.cache[name] = value
    return value


def _attribute(node: ast.Attribute, scope: Scope, local: dict[str, Any], depth: int) -> Any:
    dotted = ast.unparse(node)
    if dotted in STDLIB:
        return STDLIB[dotted]
    base = fold(node.value, scope, local, depth)
    if isinstance(base, ast.ClassDef):
        return class_attribute(base, node.attr, scope, depth)
    if isinstance(base, Member) and node.attr in ("name", "value"):
        return getattr(base, node.attr)
    raise CannotFold(dotted)


def is_enum(cls: ast.ClassDef) -> bool:
    return any(ast.unparse(b).split(".")[-1] in ENUM_BASES for b in cls.bases)


def _class_body(cls: ast.ClassDef) -> list[tuple[str, ast.expr]]:
    out = []
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            if isinstance(stmt.targets[0], ast.Name):
                out.append((stmt.targets[0].id, stmt.value))
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
            out.append((stmt.target.id, stmt.value))
    return out


def enum_members(cls: ast.ClassDef, scope: Scope, depth: int = 0) -> list[Member]:
    members = []
    str_enum = any("StrEnum" in ast.unparse(b) or ast.unparse(b) == "str" for b in cls.bases)
    for i, (name, value_node) in enumerate(_class_body(cls)):
        if name.startswith("_"):
            continue
        if isinstance(value_node, ast.Call) and ast.unparse(value_node.func) in (
            "auto",
            "enum.auto",
        ):
            value: Any = name.lower() if str_enum else i + 1
        else:
            value = fold(value_node, scope, None, depth + 1)
        members.append(Member(cls.name, name, value))
    return members


def class_attribute(cls: ast.ClassDef, attr: str, scope: Scope, depth: int) -> Any:
    if is_enum(cls):
        for member in enum_members(cls, scope, depth):
            if member.name == attr:
                return member
        raise CannotFold(f"{cls.name}.{attr}")
    # A plain class: its attributes see the class's earlier names, then the module's.
    body = dict(_class_body(cls))
    if attr not in body:
        raise CannotFold(f"{cls.name}.{attr}")
    class_local: dict[str, Any] = {}
    busy: set[str] = set()

    def bind(name: str) -> Any:
        if name not in class_local:
            if name in busy:
                raise CannotFold(f"{cls.name}.{name} refers to itself")
            busy.add(name)
            class_local[name] = fold(body[name], scope, _Lazy(bind, body), depth + 1)
        return class_local[name]

    return bind(attr)


class _Lazy(dict):  # type: ignore[type-arg]
    """Class-scope names, folded on first use."""

    def __init__(self, bind: Callable[[str], Any], body: dict[str, ast.expr]) -> None:
        super().__init__()
        self._bind, self._body = bind, body

    def __contains__(self, name: object) -> bool:
        return name in self._body

    def __getitem__(self, name: str) -> Any:
        return self._bind(name)


def _iterate(value: Any) -> list[Any]:
    if isinstance(value, ast.ClassDef):
        raise CannotFold(f"iterating {value.name}")  # replaced by members for enums in _call
    if isinstance(value, dict):
        return list(value)
    if isinstance(value, (list, tuple, set, frozenset, str)):
        return sorted(value, key=str) if isinstance(value, (set, frozenset)) else list(value)
    raise CannotFold("not iterable")


def _iterable(node: ast.expr, scope: Scope, local: dict[str, Any], depth: int) -> list[Any]:
    value = fold(node, scope, local, depth)
    if isinstance(value, ast.ClassDef) and is_enum(value):
        return list(enum_members(value, scope, depth))
    return _iterate(value)


def _comprehension(node: Any, scope: Scope, local: dict[str, Any], depth: int) -> Any:
    if len(node.generators) != 1 or not isinstance(node.generators[0].target, ast.Name):
        raise CannotFold("comprehension shape")
    gen = node.generators[0]
    out = []
    for item in _iterable(gen.iter, scope, local, depth):
        inner = {**local, gen.target.id: item}
        if all(_truth(cond, scope, inner, depth) for cond in gen.ifs):
            out.append(fold(node.elt, scope, inner, depth))
    return _sized(out)


def _truth(node: ast.expr, scope: Scope, local: dict[str, Any], depth: int) -> bool:
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left = fold(node.left, scope, local, depth)
        right = fold(node.comparators[0], scope, local, depth)
        return known(truth(compare(node.ops[0], left, right)))  # type: ignore[no-any-return]
    return known(truth(fold(node, scope, local, depth)))  # type: ignore[no-any-return]


def _call(node: ast.Call, scope: Scope, local: dict[str, Any], depth: int) -> Any:
    func = node.func
    if node.keywords:
        raise CannotFold("keywords")
    if isinstance(func, ast.Name) and func.id not in local and func.id not in scope.names:
        args = node.args
        if func.id in ("list", "tuple", "sorted", "set", "frozenset") and len(args) == 1:
            items = _iterable(args[0], scope, local, depth)
            if func.id == "sorted":
                return sorted(items, key=str)
            return tuple(items) if func.id == "tuple" else items
        if func.id in ("str", "int", "float", "len") and len(args) == 1:
            value = known(fold(args[0], scope, local, depth))
            if isinstance(value, Member):
                value = value.value
            convert = CONVERSIONS[func.id]
            try:
                return convert(value)
            except Exception as exc:
                raise CannotFold(func.id) from exc
    if isinstance(func, ast.Attribute) and not node.args:
        base = fold(func.value, scope, local, depth)
        if isinstance(base, str) and func.attr in STR_METHODS:
            return getattr(base, func.attr)()
        if isinstance(base, dict) and func.attr in ("keys", "values"):
            return list(getattr(base, func.attr)())
    raise CannotFold(ast.unparse(func))


def plain(value: Any) -> Any:
    """Enum members as their values, tuples and sets as lists: what a KB row stores."""
    if isinstance(value, Member):
        return plain(value.value)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((plain(v) for v in value), key=str)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, ast.AST) or is_unknown(value):
        raise CannotFold("not a constant value")
    return value
