"""SGLang's source as the simulator reads it: parsed modules and what their names refer to.

`parse_module` turns one file's text into a `Module` (its functions, classes, imports and
module-level assignments, looking inside `if TYPE_CHECKING:` and try-imports); the helpers
after it read facts straight off the AST that the simulator needs and does not interpret: a
dataclass's literal field defaults, whether a function loads the model's hf_config, a raise's
message, sglang.srt.environ's declarations and which architectures ModelConfig treats as MLA.
Nothing here is eval'ed or imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from kb.pyast import NOT_LITERAL, literal, render_text


@dataclass(frozen=True)
class ImportFlag:
    """A try-import's flag: `imported` when every package it imports unconditionally
    imports and one of those it imports under an `if` does (DeepEP's `if _is_npu: from
    zbal ... else: from deep_ep ...`), else `failed`. SGLang's own modules are not counted."""

    required: tuple[str, ...]
    alternatives: tuple[str, ...]
    imported: ast.expr
    failed: ast.expr


@dataclass
class Module:
    path: str
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
    classes: dict[str, ast.ClassDef]
    imports: dict[str, tuple[str, str | None]]  # local name -> (module, attribute)
    assigns: dict[str, ast.expr]  # module-level NAME = expr
    lines: dict[str, int]  # where each module-level name is defined
    constants: dict[str, Any] = field(default_factory=dict)  # literal assigns, evaluated once
    registries: dict[str, dict[str, Any]] = field(default_factory=dict)  # (registered())
    # module-level names a function rebinds (`global _server_args`): set at run time, so
    # their assigned value (`_server_args = None`) says nothing of what the code sees
    rebound: set[str] = field(default_factory=set)
    # module-level names the module's functions add to (`_REGISTRY.append(spec)`): registries
    # whose run-time value is their source's plus whatever callers register
    appended: set[str] = field(default_factory=set)
    star_imports: list[str] = field(default_factory=list)  # `from x import *`: x
    body: list[ast.stmt] = field(default_factory=list)  # the module's top-level statements
    # a flag a try-import sets (`try: from flashinfer.comm import ...; use_flashinfer = True
    # except ImportError: use_flashinfer = False`): name -> the packages the try imports
    # (ImportFlag)
    import_flags: dict[str, ImportFlag] = field(default_factory=dict)


_MUTATORS = frozenset({"append", "extend", "insert", "add", "update", "setdefault"})


def _added_to(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The names a function adds to: `_REGISTRY.append(spec)`, `_REGISTRY[name] = cls`."""
    return {
        n.func.value.id
        for n in ast.walk(fn)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in _MUTATORS
        and isinstance(n.func.value, ast.Name)
    } | {
        n.value.id
        for n in ast.walk(fn)
        if isinstance(n, ast.Subscript)
        and isinstance(n.ctx, ast.Store)
        and isinstance(n.value, ast.Name)
    }


def module_path(dotted: str) -> list[str]:
    base = "python/" + dotted.replace(".", "/")
    return [base + ".py", base + "/__init__.py"]


def package_of(path: str) -> str:
    """The dotted package a file's relative imports start from."""
    parts = path.removeprefix("python/").removesuffix(".py").split("/")
    return ".".join(parts[:-1])


def imported_module(node: ast.ImportFrom, package: str) -> str | None:
    """`from .common import x` in package `a.b` -> `a.b.common`; absolute ones as written."""
    if not node.level:
        return node.module
    parts = package.split(".") if package else []
    if node.level - 1 > len(parts) or not parts:
        return None
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base) or None


def import_names(
    node: ast.Import | ast.ImportFrom, package: str = ""
) -> Iterable[tuple[str, tuple[str, str | None]]]:
    if isinstance(node, ast.ImportFrom):
        module = imported_module(node, package)
        if not module:
            return
        for alias in node.names:
            if alias.name != "*":
                yield alias.asname or alias.name, (module, alias.name)
    else:
        for alias in node.names:
            yield (alias.asname or alias.name.split(".")[0]), (alias.name, None)


def parse_module(path: str, text: str) -> Module | None:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    mod = Module(path, {}, {}, {}, {}, {}, body=tree.body)

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                mod.functions[node.name] = node
                mod.lines[node.name] = node.lineno
                mod.appended |= _added_to(node)
            elif isinstance(node, ast.ClassDef):
                mod.classes[node.name] = node
                mod.lines[node.name] = node.lineno
            elif isinstance(node, ast.Import | ast.ImportFrom):
                for name, imported in import_names(node, package_of(path)):
                    mod.imports.setdefault(name, imported)
                if isinstance(node, ast.ImportFrom) and node.names[0].name == "*":
                    module = imported_module(node, package_of(path))
                    if module:
                        mod.star_imports.append(module)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    for name in target_names(target):
                        mod.assigns[name] = node.value
                        mod.lines[name] = node.lineno
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                if node.value is not None:
                    mod.assigns[node.target.id] = node.value
                    mod.lines[node.target.id] = node.lineno
            elif isinstance(node, ast.If | ast.Try):  # `if TYPE_CHECKING:` / try-imports
                if isinstance(node, ast.Try):
                    mod.import_flags.update(_import_flags(node))
                visit(node.body)
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
                visit(node.orelse)

    visit(tree.body)
    for fn in ast.walk(tree):
        if isinstance(fn, ast.Global):
            mod.rebound.update(fn.names)
    mod.rebound -= _memos(tree, mod)
    mod.appended &= set(mod.assigns)  # (a local list of the same name is not one)
    return mod


_IMPORT_ERRORS = ("ImportError", "ModuleNotFoundError")


def _packages(stmts: list[ast.stmt], nested: bool) -> tuple[str, ...]:
    """The packages the statements import, at their top level or (`nested`) under them."""
    nodes = [n for s in stmts for n in (ast.walk(s) if nested else [s])]
    names = [
        name.split(".")[0]
        for n in nodes
        if isinstance(n, ast.Import | ast.ImportFrom)
        and not (isinstance(n, ast.ImportFrom) and n.level)
        for name in ([a.name for a in n.names] if isinstance(n, ast.Import) else [n.module])
        if name
    ]
    return tuple(n for n in dict.fromkeys(names) if n != "sglang")


def _import_flags(node: ast.Try) -> dict[str, ImportFlag]:
    """The names a try-import assigns a constant in its body and another in its
    ImportError handler (Module.import_flags)."""
    required = _packages(node.body, nested=False)
    alternatives = tuple(
        p
        for p in _packages([s for s in node.body if isinstance(s, ast.If)], True)
        if p not in required
    )
    if not required and not alternatives:
        return {}

    def constants(body: list[ast.stmt]) -> dict[str, ast.expr]:
        return {
            t.id: stmt.value
            for stmt in body
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant)
            for t in stmt.targets
            if isinstance(t, ast.Name)
        }

    imported = constants(node.body) | constants(node.orelse)
    out = {}
    for handler in node.handlers:
        names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if not any(isinstance(n, ast.Name) and n.id in _IMPORT_ERRORS for n in names):
            continue
        for name, value in constants(handler.body).items():
            if name in imported:
                out[name] = ImportFlag(required, alternatives, imported[name], value)
    return out


def _memos(tree: ast.Module, mod: Module) -> set[str]:
    """Globals a function fills on first use (`X = None` at module level, assigned only
    under `if X is None:`): whoever reads one first finds None and fills it, the same in
    every run, so a run reads the module's None and then what it assigned."""
    candidates = {
        name
        for name in mod.rebound
        if isinstance(value := mod.assigns.get(name), ast.Constant) and value.value is None
    }
    if not candidates:
        return set()
    top = {  # the module's own assignments
        id(t)
        for stmt in tree.body
        if isinstance(stmt, ast.Assign | ast.AnnAssign)
        for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
    }
    stores: dict[str, set[int]] = {}  # name -> its stores off the module level
    guarded: dict[str, set[int]] = {}  # name -> its stores under `if name is None:`
    for node in ast.walk(tree):  # (one walk of the module for all its names)
        if isinstance(node, ast.Name) and node.id in candidates and id(node) not in top:
            if isinstance(node.ctx, ast.Store):
                stores.setdefault(node.id, set()).add(id(node))
        elif isinstance(node, ast.If) and (name := _none_test(node.test)) in candidates:
            inner = {
                id(n)
                for stmt in node.body
                for n in ast.walk(stmt)
                if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
            }
            guarded.setdefault(name, set()).update(inner)
    return {n for n in candidates if stores.get(n, set()) <= guarded.get(n, set())}


def _none_test(test: ast.expr) -> str | None:
    """`name` of a test `name is None`."""
    if (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Is)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        return test.left.id
    return None


def registered(mod: Module, table: str) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions `mod` registers in its module-level dict `table` through a decorator
    factory (`@register_attention_backend("fa3")`, whose inner function does
    `table[name] = fn`): name -> function; {} when `table` is no such registry."""
    if table not in mod.registries:
        found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        if isinstance(mod.assigns.get(table), ast.Dict):
            registrars = {name for name, fn in mod.functions.items() if _stores_into(fn, table)}
            for fn in mod.functions.values():
                for d in fn.decorator_list:
                    if (
                        isinstance(d, ast.Call)
                        and isinstance(d.func, ast.Name)
                        and d.func.id in registrars
                        and d.args
                        and isinstance(d.args[0], ast.Constant)
                        and isinstance(d.args[0].value, str)
                    ):
                        found.setdefault(d.args[0].value, fn)
        mod.registries[table] = found
    return mod.registries[table]


def _stores_into(fn: ast.FunctionDef | ast.AsyncFunctionDef, table: str) -> bool:
    return any(
        isinstance(node, ast.Assign)
        and any(
            isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == table
            for t in node.targets
        )
        for node in ast.walk(fn)
    )


def target_names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Tuple | ast.List):
        return [n for elt in target.elts for n in target_names(elt)]
    return []


# transformers' loader of a model's config.json: what it returns is the profile's hf_config
HF_CONFIG_LOADER = ["AutoConfig", "from_pretrained"]


@lru_cache(maxsize=64)
def class_defaults(cls: ast.ClassDef) -> dict[str, Any]:
    """Cached per class node (parsed modules are cached per blob sha); callers copy.
    Literal defaults of a dataclass's fields: `x: int = 1`, `field(default=...)`,
    `field(default_factory=list)`, era 3's `x: A[int, Arg(...)] = 1`."""
    out: dict[str, Any] = {}
    for node in cls.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        value = node.value
        if value is None:
            continue
        if isinstance(value, ast.Call) and ast.unparse(value.func).endswith("field"):
            kw = {k.arg: k.value for k in value.keywords if k.arg}
            if "default" in kw:
                value = kw["default"]
            elif "default_factory" in kw:
                factory = ast.unparse(kw["default_factory"])
                if factory in ("list", "dict", "set"):
                    out[node.target.id] = {"list": [], "dict": {}, "set": set()}[factory]
                continue
        lit = literal(value)
        if lit is not NOT_LITERAL:
            out[node.target.id] = lit
    return out


@lru_cache(maxsize=256)
def loads_hf_config(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A function that ends `return config` where `config = AutoConfig.from_pretrained(..)`
    (or a config parser's `parse(..)`) in its body (SGLang's get_config in every era):
    calling it loads a model's hf_config (model_files.loaded_config: which model's)."""
    last = fn.body[-1] if fn.body else None
    if not (isinstance(last, ast.Return) and isinstance(last.value, ast.Name)):
        return False
    name = last.value.id
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
            and (
                ast.unparse(node.value.func).split(".")[-2:] == HF_CONFIG_LOADER
                # (2026-07: `config = parser.parse(model, ...)`, the parser a registry's)
                or (fn.name == "get_config" and ast.unparse(node.value.func).endswith(".parse"))
            )
        ):
            return True
    return False


def raise_message(node: ast.Raise) -> str:
    exc = node.exc
    if isinstance(exc, ast.Call):
        name = ast.unparse(exc.func)
        text = render_text(exc.args[0]) if exc.args else ""
        return f"{name}: {text}" if text else name
    return ast.unparse(exc) if exc is not None else "re-raise"


_env_cache: dict[int, dict[str, ast.expr]] = {}


def env_fields(mod: Module) -> dict[str, ast.expr]:
    """`NAME = EnvBool(default)` in the classes of sglang.srt.environ, by name."""
    key = id(mod)
    if key not in _env_cache:
        found: dict[str, ast.expr] = {}
        for cls in mod.classes.values():
            for stmt in cls.body:
                if isinstance(stmt, ast.Assign):
                    for t in stmt.targets:
                        if isinstance(t, ast.Name):
                            found[t.id] = stmt.value
        if len(_env_cache) > 32:
            _env_cache.clear()
        _env_cache[key] = found
    return _env_cache[key]


_mla_cache: dict[int, frozenset[str]] = {}


def mla_archs(mod: Module) -> frozenset[str]:
    key = id(mod)
    if key in _mla_cache:
        return _mla_cache[key]
    names: set[str] = set()
    for cls in mod.classes.values():
        for node in ast.walk(cls):
            if isinstance(node, ast.If) and any(_sets_mla(s) for s in node.body):
                names.update(
                    c.value
                    for c in ast.walk(node.test)
                    if isinstance(c, ast.Constant) and isinstance(c.value, str)
                )
    _mla_cache[key] = frozenset(names)
    return _mla_cache[key]


def _sets_mla(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Assign)
        and any(isinstance(t, ast.Attribute) and t.attr == "attention_arch" for t in stmt.targets)
        and ast.unparse(stmt.value).endswith("MLA")
    )


def computed_at_import(mod: Module, name: str, depth: int = 0) -> bool:
    """Whether a module-level name holds what the module computed when imported from its
    own functions or a test (`ENABLE_JIT_DEEPGEMM = _compute_enable_deep_gemm()`, `_ok = a
    and b`), or another such name (`DEEPGEMM_SCALE_UE8M0 = DEEPGEMM_BLACKWELL`), which an
    importer reads as that value; an object a class builds (`envs = Envs()`) stays a name."""
    value = mod.assigns.get(name) if name not in mod.imports else None
    if isinstance(value, ast.BoolOp | ast.UnaryOp | ast.Compare):
        return True
    if isinstance(value, ast.Name) and depth < 8:
        return computed_at_import(mod, value.id, depth + 1)
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id in mod.functions
    )


def defines(mod: Module, name: str) -> bool:
    """Whether `from <mod> import *` gives `name` (a public name the module binds)."""
    bound = name in mod.functions or name in mod.classes or name in mod.imports
    return not name.startswith("_") and (bound or name in mod.assigns)
