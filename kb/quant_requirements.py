"""What a quantization method needs when the model loads, read from the version's source.

SGLang maps each method's name to its config class in a module-level dict
(`QUANTIZATION_METHODS = {"modelopt_fp4": ModelOptFp4Config, ...}` in
layers/quantization/__init__.py, extended by `.update({...})`). The model loader builds that
class for the checkpoint and raises when the GPU's compute capability is below the class's
`get_min_capability()` or the model's dtype is not in its `get_supported_act_dtypes()`
(`_get_quantization_config` in model_loader/loader.py). Both are stated here for a method,
each only when the loader's check is found in the version and the class's answer is a
literal (or another class's, delegated): otherwise nothing is said.
"""

from __future__ import annotations

import ast
import posixpath
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kb.explain.source_modules import Module, module_path

QUANTIZATION_PACKAGE = "python/sglang/srt/layers/quantization/__init__.py"
MODEL_LOADER_DIR = "python/sglang/srt/model_loader/"
MAX_HOPS = 4  # bases and delegations followed (SGLang's deepest is 2)

Modules = Callable[[str], Module | None]


@dataclass(frozen=True)
class ClassRef:
    module: Module
    node: ast.ClassDef


@dataclass(frozen=True)
class LoaderCheck:
    """The loader's raise for one of the class's answers: where, and in which function."""

    path: str
    line: int
    end: int
    function: str


@dataclass(frozen=True)
class Requirement:
    text: str
    path: str  # the loader's raise, cited
    line: int
    end: int


def method_classes(modules: Modules) -> dict[str, ClassRef]:
    """The quantization methods' names -> their config classes, as the version maps them."""
    mod = modules(QUANTIZATION_PACKAGE)
    if mod is None:
        return {}
    names: dict[str, str] = {}
    for table in _tables(mod):
        for key, value in zip(table.keys, table.values, strict=True):
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                if isinstance(value, ast.Name):
                    names.setdefault(key.value, value.id)
    out = {}
    for method, class_name in names.items():
        found = resolve_class(modules, mod, class_name)
        if found is not None:
            out[method] = found
    return out


def _tables(mod: Module) -> Iterator[ast.Dict]:
    """The module's name -> class dicts: those assigned at module level, and the dict
    literals passed to their `.update()` (under `if is_cuda():` too)."""
    dicts = {name for name, value in mod.assigns.items() if isinstance(value, ast.Dict)}
    for name in sorted(dicts):
        value = mod.assigns[name]
        assert isinstance(value, ast.Dict)
        yield value
    for call in _module_level_calls(mod):
        func = call.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "update"
            and isinstance(func.value, ast.Name)
            and func.value.id in dicts
            and call.args
            and isinstance(call.args[0], ast.Dict)
        ):
            yield call.args[0]


def _module_level_calls(mod: Module) -> Iterator[ast.Call]:
    stack: list[ast.stmt] = list(mod.body)
    while stack:
        stmt = stack.pop(0)
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            yield stmt.value
        elif isinstance(stmt, ast.If | ast.Try):
            stack.extend(stmt.body + stmt.orelse)


def resolve_class(modules: Modules, mod: Module, name: str, hops: int = 0) -> ClassRef | None:
    """The class `name` means in `mod`: defined there or imported (through re-exports)."""
    if hops > MAX_HOPS:
        return None
    if name in mod.classes:
        return ClassRef(mod, mod.classes[name])
    if name in mod.imports:
        dotted, attr = mod.imports[name]
        if attr is None:
            return None
        for path in module_path(dotted):
            source = modules(path)
            if source is not None:
                return resolve_class(modules, source, attr, hops + 1)
    return None


def method_of(
    modules: Modules, ref: ClassRef, name: str, hops: int = 0
) -> tuple[ClassRef, ast.FunctionDef] | None:
    """The class's own `name`, or the nearest base's that defines it."""
    for node in ref.node.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return ref, node
    if hops >= MAX_HOPS:
        return None
    for base in ref.node.bases:
        if isinstance(base, ast.Name):
            parent = resolve_class(modules, ref.module, base.id)
            if parent is not None and (found := method_of(modules, parent, name, hops + 1)):
                return found
    return None


def _answer(
    modules: Modules, ref: ClassRef, name: str, hops: int = 0
) -> tuple[ast.expr, ClassRef, ast.Return] | None:
    """What the class's argument-free method `name` returns when its body is that one
    `return` (a literal, or another class's answer to the same method: followed)."""
    found = method_of(modules, ref, name)
    if found is None or hops > MAX_HOPS:
        return None
    owner, fn = found
    body = [
        s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    ]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return None
    value = body[0].value
    if (
        isinstance(value, ast.Call)
        and not value.args
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == name
        and isinstance(value.func.value, ast.Name)
    ):
        other = resolve_class(modules, owner.module, value.func.value.id)
        return _answer(modules, other, name, hops + 1) if other is not None else None
    return value, owner, body[0]


ASKED = ("get_min_capability", "get_supported_act_dtypes")


def loader_checks(modules: Modules, paths: list[str]) -> dict[str, LoaderCheck]:
    """The model loader's raises guarded by a comparison with a quant config's answer
    (`capability < quant_config.get_min_capability()`, or `dtype not in supported` with
    `supported = quant_config.get_supported_act_dtypes()`): method name -> the raise."""
    out: dict[str, LoaderCheck] = {}
    for path in sorted(p for p in paths if p.startswith(MODEL_LOADER_DIR) and p.endswith(".py")):
        mod = modules(path)
        if mod is None:
            continue
        for fn in mod.functions.values():
            bound = {  # local name -> the method whose answer it holds
                t.id: call.func.attr
                for node in ast.walk(fn)
                if isinstance(node, ast.Assign)
                and isinstance(call := node.value, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr in ASKED
                for t in node.targets
                if isinstance(t, ast.Name)
            }
            for node in ast.walk(fn):
                if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
                    continue
                raised = next((s for s in node.body if isinstance(s, ast.Raise)), None)
                if raised is None:
                    continue
                for asked in _asked(node.test, bound):
                    if asked not in out:
                        end = getattr(raised, "end_lineno", None) or raised.lineno
                        out[asked] = LoaderCheck(path, raised.lineno, end, fn.name)
    return out


def _asked(test: ast.Compare, bound: dict[str, str]) -> set[str]:
    found = set()
    for node in ast.walk(test):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ASKED and not node.args:
                found.add(node.func.attr)
        elif isinstance(node, ast.Name) and node.id in bound:
            found.add(bound[node.id])
    return found


def requirements(modules: Modules, paths: list[str], method: str) -> list[Requirement]:
    """The loader's requirements of quantization method `method` at this version."""
    ref = method_classes(modules).get(method)
    if ref is None:
        return []
    checks = loader_checks(modules, paths)
    out = []
    capability = checks.get("get_min_capability")
    found = _answer(modules, ref, "get_min_capability")
    if capability is not None and found is not None:
        value, owner, ret = found
        needs = _capability(value)
        if needs:
            out.append(_requirement(needs, owner, "get_min_capability", ret, capability))
    dtypes = checks.get("get_supported_act_dtypes")
    found = _answer(modules, ref, "get_supported_act_dtypes")
    if dtypes is not None and found is not None:
        value, owner, ret = found
        names = _dtype_names(value)
        if names:
            out.append(
                _requirement(
                    f"the model's dtype is {_either(names)}",
                    owner,
                    "get_supported_act_dtypes",
                    ret,
                    dtypes,
                )
            )
    return out


def _capability(value: ast.expr) -> str | None:
    """`100` -> "GPU compute capability ≥ 100 (sm100)"; `100 if self.use_mxfp8 else 80`
    -> the same per case, the instance's field named; None for anything else."""
    if isinstance(value, ast.Constant) and type(value.value) is int:
        return f"GPU compute capability ≥ {value.value} (sm{value.value})"
    if (
        isinstance(value, ast.IfExp)
        and isinstance(value.body, ast.Constant)
        and type(value.body.value) is int
        and isinstance(value.orelse, ast.Constant)
        and type(value.orelse.value) is int
    ):
        when = ast.unparse(value.test).replace("self.", "")
        return (
            f"GPU compute capability ≥ {value.body.value} when {when}, else ≥ {value.orelse.value}"
        )
    return None


def _either(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _dtype_names(value: ast.expr) -> list[str]:
    """`[torch.bfloat16, torch.half]` -> ["bfloat16", "half"]; [] for anything else."""
    if not isinstance(value, ast.List | ast.Tuple) or not value.elts:
        return []
    names = [e.attr for e in value.elts if isinstance(e, ast.Attribute)]
    return names if len(names) == len(value.elts) else []


def _requirement(
    needs: str, owner: ClassRef, method: str, ret: ast.Return, check: LoaderCheck
) -> Requirement:
    here = f"{owner.node.name}.{method}, {posixpath.basename(owner.module.path)}:{ret.lineno}"
    loader = f"{check.function}, {posixpath.basename(check.path)}:{check.line}"
    return Requirement(
        f"{needs} ({here}); the model loader raises otherwise ({loader})",
        check.path,
        check.line,
        check.end,
    )
