"""What a value needs when the model loads, read from the registry that builds it: a flag's
value that names a function in a decorator-filled registry (`@register_attention_backend
("fa3")` in attention_registry.py) runs that function at load, and its raises and asserts
are the value's load-time requirements; a quantization method's are what the model loader
checks of its config class (kb/quant_requirements.py). The value page's requirements
summary shows them, each cited; explain's load stage (kb.explain.deploy) evaluates them
for a deployment."""

from __future__ import annotations

import ast
import posixpath
from collections.abc import Iterator
from typing import Any

from sqlmodel import Session

from kb import quant_requirements
from kb.explain.load import version_modules, version_paths
from kb.explain.source_modules import Module, raise_message, registered
from kb.pyast import render_text
from kb.queries import citation, per_stamp
from kb.schema import Version

# Registries live in modules named for them (attention_registry.py); reading every stored
# module of a version to find decorators would cost a page hundreds of blob reads.
REGISTRY_FILE_WORD = "registry"


def load_requirements(
    session: Session, version: Version, choices: list[str], value: str
) -> list[dict[str, Any]]:
    """[{"text", "source"}] for each raise or assert of the function that the registry of
    the flag's choices (one whose names cover at least half of them) registers for `value`;
    for a quantization method's name, what the model loader checks of its config class."""
    return _registered_checks(session, version, choices, value) + _quantization_checks(
        session, version, choices, value
    )


def _quantization_checks(
    session: Session, version: Version, choices: list[str], value: str
) -> list[dict[str, Any]]:
    modules = version_modules(session, version)
    methods = per_stamp(
        ("quantization-methods", version.id),
        lambda: set(quant_requirements.method_classes(modules)),
        session,
    )
    if value not in methods or len(methods & set(choices)) * 2 < len(choices):
        return []
    found = per_stamp(
        ("quantization-requirements", version.id, value),
        lambda: quant_requirements.requirements(modules, version_paths(session, version), value),
        session,
    )
    return [{"text": r.text, "source": citation(version, r.path, r.line, r.end)} for r in found]


def _registered_checks(
    session: Session, version: Version, choices: list[str], value: str
) -> list[dict[str, Any]]:
    found = per_stamp(
        ("registry", version.id, tuple(choices)),
        lambda: _registry(session, version, choices),
        session,
    )
    if found is None:
        return []
    mod, functions = found
    fn = functions.get(value)
    return _checks(version, mod, fn) if fn is not None else []


def _registry(
    session: Session, version: Version, choices: list[str]
) -> tuple[Module, dict[str, ast.FunctionDef | ast.AsyncFunctionDef]] | None:
    """The registry serving the flag (once per version and state of the knowledge base: a
    page asks for each value it shows)."""
    modules = version_modules(session, version)
    for path in version_paths(session, version):
        if REGISTRY_FILE_WORD not in posixpath.basename(path) or not path.endswith(".py"):
            continue
        mod = modules(path)
        if mod is None:
            continue
        for table in mod.assigns:
            functions = registered(mod, table)
            if functions and len(set(functions) & set(choices)) * 2 >= len(choices):
                return mod, functions
    return None


def _checks(
    version: Version, mod: Module, fn: ast.FunctionDef | ast.AsyncFunctionDef
) -> list[dict[str, Any]]:
    out = []
    name = posixpath.basename(mod.path)
    for node, conds in _guarded(fn.body, ()):
        if isinstance(node, ast.Raise):
            said = raise_message(node)
        else:
            said = (render_text(node.msg) if node.msg is not None else None) or ast.unparse(
                node.test
            )
        when = f"when {' and '.join(conds)}: " if conds else ""
        end = getattr(node, "end_lineno", None) or node.lineno
        out.append(
            {
                "text": f"{when}{said} ({fn.name}, {name}:{node.lineno})",
                "source": citation(version, mod.path, node.lineno, end),
            }
        )
    return sorted(out, key=lambda c: c["source"]["line"])


def _guarded(
    body: list[ast.stmt], conds: tuple[str, ...]
) -> Iterator[tuple[ast.Raise | ast.Assert, tuple[str, ...]]]:
    """Each raise and assert of `body` with the tests of the `if`s around it (an `else`
    under the test negated), as the page states them."""
    for stmt in body:
        if isinstance(stmt, ast.Raise | ast.Assert):
            yield stmt, conds
        elif isinstance(stmt, ast.If):
            test = ast.unparse(stmt.test)
            negated = (
                ast.unparse(stmt.test.operand)
                if isinstance(stmt.test, ast.UnaryOp) and isinstance(stmt.test.op, ast.Not)
                else f"not ({test})"
            )
            yield from _guarded(stmt.body, (*conds, test))
            yield from _guarded(stmt.orelse, (*conds, negated))
        elif isinstance(stmt, ast.For | ast.While | ast.With | ast.Try):
            for inner in ("body", "orelse", "finalbody"):
                yield from _guarded(getattr(stmt, inner, []), conds)
            for handler in getattr(stmt, "handlers", []):
                yield from _guarded(handler.body, conds)
