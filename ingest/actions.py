"""What a flag's argparse action does: how many values it takes, what it stores, whether it
warns or raises. Read statically from argparse's built-in actions and from the custom
`argparse.Action` classes SGLang defines (in server_args.py or an imported module).

SGLang's DeprecatedAction sets `nargs=0` in its `__init__` (so it takes no value), and in
2024 its `__call__` raised (the server refused to start); DeprecatedStoreTrueAction implies
`const=True, default=False`; DeprecatedAliasStoreAction takes a value like a plain store.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from kb.pyast import NOT_LITERAL, call_name, literal, render_text, source

# Built-in actions that never consume a value.
NO_VALUE_ACTIONS = {
    "store_true", "store_false", "store_const", "append_const", "count", "help", "version",
    "BooleanOptionalAction", "argparse.BooleanOptionalAction",
}  # fmt: skip
BUILTIN_ACTIONS = {"store", "append", "extend", *NO_VALUE_ACTIONS}
WARN_CALL = re.compile(r"warn", re.I)
SIGNATURE_KEYS = ("nargs", "const", "default")


def class_facts(tree: ast.Module, path: str) -> dict[str, dict[str, Any]]:
    """name -> facts of every top-level class that looks like an argparse Action."""
    out: dict[str, dict[str, Any]] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        bases = [source(b) for b in node.bases]
        if not any(b.endswith("Action") for b in bases):
            continue
        out[node.name] = _one_class(node, bases, path)
    return out


def facts_of_class(node: ast.ClassDef, path: str) -> dict[str, Any]:
    return _one_class(node, [source(b) for b in node.bases], path)


def _one_class(node: ast.ClassDef, bases: list[str], path: str) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "name": node.name,
        "bases": bases,
        "path": path,
        "line": node.lineno,
        "set": {},  # keyword -> value the class passes to argparse.Action.__init__
        "behaviour": None,  # "raises" | "warns" | "stores" (of __call__)
        "error": None,  # message of the raise in __call__ ("{help}" = the flag's help)
        "error_line": None,
    }
    for stmt in node.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
            facts["set"] = _init_settings(stmt)
        elif isinstance(stmt, ast.FunctionDef) and stmt.name == "__call__":
            _call_behaviour(stmt, facts)
    return facts


def _init_settings(func: ast.FunctionDef) -> dict[str, Any]:
    """nargs/const/default as the class hands them to argparse: a literal in the super call
    wins; a parameter passed through keeps its signature default."""
    params = func.args.args + func.args.kwonlyargs
    defaults: dict[str, Any] = {}
    positional = func.args.args[len(func.args.args) - len(func.args.defaults) :]
    for arg, d in [*zip(positional, func.args.defaults, strict=False),
                   *zip(func.args.kwonlyargs, func.args.kw_defaults, strict=False)]:  # fmt: skip
        if d is not None and (value := literal(d)) is not NOT_LITERAL:
            defaults[arg.arg] = value
    settings: dict[str, Any] = {}
    names = {p.arg for p in params}
    for sub in ast.walk(func):
        if isinstance(sub, ast.Call) and call_name(sub).endswith("__init__"):
            for kw in sub.keywords:
                if kw.arg not in SIGNATURE_KEYS:
                    continue
                value = literal(kw.value)
                if value is not NOT_LITERAL:
                    settings[kw.arg] = value
                elif isinstance(kw.value, ast.Name) and kw.value.id in defaults:
                    settings[kw.arg] = defaults[kw.value.id]
        # kwargs["nargs"] = 0 / kwargs.setdefault("nargs", 0)
        elif isinstance(sub, ast.Assign) and isinstance(sub.targets[0], ast.Subscript):
            key = literal(sub.targets[0].slice)
            if key in SIGNATURE_KEYS and (value := literal(sub.value)) is not NOT_LITERAL:
                settings[key] = value
        elif (
            isinstance(sub, ast.Call)
            and call_name(sub).endswith(".setdefault")
            and len(sub.args) == 2
            and literal(sub.args[0]) in SIGNATURE_KEYS
            and (value := literal(sub.args[1])) is not NOT_LITERAL
        ):
            settings.setdefault(literal(sub.args[0]), value)
    for key in SIGNATURE_KEYS:  # a signature default that reaches argparse through **kwargs
        if key in defaults and key in names and key not in settings:
            settings[key] = defaults[key]
    return settings


def _call_behaviour(func: ast.FunctionDef, facts: dict[str, Any]) -> None:
    """`__call__` that raises on every path (a top-level raise) refuses the flag; one that
    calls a warning function warns; otherwise it stores."""
    for stmt in func.body:
        if isinstance(stmt, ast.Raise):
            facts["behaviour"] = "raises"
            facts["error"] = _raise_text(stmt)
            facts["error_line"] = stmt.lineno
            return
    for sub in ast.walk(func):
        if isinstance(sub, ast.Call) and WARN_CALL.search(call_name(sub)):
            facts["behaviour"] = "warns"
            return
    facts["behaviour"] = "stores"


def _raise_text(stmt: ast.Raise) -> str:
    exc = stmt.exc
    arg = exc.args[0] if isinstance(exc, ast.Call) and exc.args else None
    if arg is None:
        return source(exc) if exc is not None else "re-raise"
    if source(arg) == "self.help":
        return "{help}"
    text = render_text(arg)
    return text if text is not None else source(arg)


def resolve(name: str, classes: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """A class's facts with what it inherits from action classes of the same module."""
    cls = classes.get(name)
    if cls is None:
        return None
    merged = dict(cls)
    for base in cls["bases"]:
        parent = resolve(base.split(".")[-1], {k: v for k, v in classes.items() if k != name})
        if parent is not None:
            merged["set"] = {**parent["set"], **cls["set"]}
            if merged["behaviour"] in (None, "stores") and parent["behaviour"] != "stores":
                for key in ("behaviour", "error", "error_line", "path"):
                    merged[key] = parent[key]
    return merged


def apply_class(flag: dict[str, Any], cls: dict[str, Any]) -> None:
    """Fold what the action class implies into the flag: the class's nargs/const/default
    unless the add_argument call passed its own, and what using the flag does."""
    explicit = set(flag.get("explicit") or [])
    for key in SIGNATURE_KEYS:
        if key in cls["set"] and key not in explicit:
            value = cls["set"][key]
            if key == "nargs":
                flag["nargs"] = None if value is None else str(value)
            elif key == "default":
                flag["default"], flag["default_expr"] = value, None
            else:
                flag["const"] = value
    behaviour = cls["behaviour"]
    flag["action_path"], flag["action_line"] = cls["path"], cls["line"]
    if behaviour == "raises":
        flag["deprecated_kind"] = "raises"
        error = cls["error"] or ""
        flag["action_error"] = error.replace("{help}", flag.get("help") or "")
        flag["action_line"] = cls["error_line"]
    elif behaviour == "warns":
        flag["deprecated_kind"] = "warns"


def takes_value(flag: dict[str, Any], cls: dict[str, Any] | None) -> bool:
    """Whether the option consumes argument(s) from the command line (argparse's own rule:
    nargs=0 and the store_const family take none; every other action takes what nargs says,
    one value by default)."""
    nargs = flag.get("nargs")
    if nargs is not None and str(nargs).strip("'\"") == "0":
        return False
    action = flag.get("action")
    if action is None or action in ("store", "append", "extend"):
        return True
    if action in NO_VALUE_ACTIONS:
        return False
    if cls is not None:
        return True  # a custom class without nargs=0 takes argparse's default: one value
    # An action we could not read: trust its name rather than guess a value.
    return not re.search(r"StoreTrue|StoreFalse|StoreConst|Count|BooleanOptional", action)
