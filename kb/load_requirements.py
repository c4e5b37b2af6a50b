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

from kb import layer_sites, quant_requirements
from kb.explain.load import version_modules, version_paths
from kb.explain.source_modules import Module, raise_message, registered
from kb.pyast import render_text
from kb.queries import all_flags, citation, flag_values, per_stamp
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


def _is_quantization_method(
    session: Session, version: Version, choices: list[str], value: str
) -> bool:
    """Whether `value` names a quantization method of the version, for a flag whose choices
    are mostly such names (not another flag that merely shares one)."""
    modules = version_modules(session, version)
    methods = per_stamp(
        ("quantization-methods", version.id),
        lambda: set(quant_requirements.method_classes(modules)),
        session,
    )
    return value in methods and len(methods & set(choices)) * 2 >= len(choices)


def _quantization_checks(
    session: Session, version: Version, choices: list[str], value: str
) -> list[dict[str, Any]]:
    if not _is_quantization_method(session, version, choices, value):
        return []
    modules = version_modules(session, version)
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


# --- what the value selects past ServerArgs, and their checks (kb/layer_sites.py) ----------


def layer_selections(
    session: Session, version: Version, dest: str, choices: list[str], value: str
) -> list[layer_sites.Selection]:
    """The classes `--dest value` selects when the model is built (a quantization method's
    per layer type, the MoE layer class), each with its checks at load and at first
    forward; once per version and state of the knowledge base."""

    def make() -> list[layer_sites.Selection]:
        modules = version_modules(session, version)
        flags = _flags(session, version)
        if _is_quantization_method(session, version, choices, value):
            return layer_sites.quant_selections(modules, value, flags, dest)
        paths = version_paths(session, version)
        if value not in choices or dest not in _moe_dests(session, version):
            return []
        return layer_sites.moe_selections(modules, paths, dest, value, flags)

    return per_stamp(("layer-selections", version.id, dest, value, tuple(choices)), make, session)


def _moe_dests(session: Session, version: Version) -> frozenset[str]:
    """The flags `get_moe_impl_class` tests (found once per version: a flag page asks for
    each of its values)."""
    return per_stamp(
        ("moe-selector-dests", version.id),
        lambda: layer_sites.moe_selector_dests(
            version_modules(session, version),
            version_paths(session, version),
            _flags(session, version),
        ),
        session,
    )


def _flags(session: Session, version: Version) -> layer_sites.Flags:
    def make() -> layer_sites.Flags:
        rows = all_flags(session, version)
        return layer_sites.Flags(
            {f.dest: f.name for f in rows},
            {f.dest: tuple(str(c) for c in flag_values(f)) for f in rows},
        )

    return per_stamp(("layer-flags", version.id), make, session)


def layer_checks(
    session: Session, version: Version, dest: str, choices: list[str], value: str
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """`layer_selections` as the value page's JSON states them, and their checks by stage
    (made once per version, value and state of the knowledge base)."""

    def make() -> tuple[list[dict[str, Any]], dict[str, int]]:
        selected = layer_selections(session, version, dest, choices, value)
        return selection_dicts(version, selected), stage_counts(selected)

    return per_stamp(("layer-checks", version.id, dest, value, tuple(choices)), make, session)


def selection_dicts(
    version: Version, selections: list[layer_sites.Selection]
) -> list[dict[str, Any]]:
    """The selections as the value page's JSON states them (kb.contract.LayerSelection)."""
    return [
        {
            "selector": s.selector,
            "selected": s.selected,
            "layer": s.layer,
            "when": s.when,
            "words": s.words,
            "source": citation(version, s.path, s.line, s.line),
            "checks": [
                {
                    "stage": c.stage,
                    "owner": c.owner,
                    "function": c.function,
                    "via": list(c.via),
                    "kind": c.kind,
                    "condition": c.condition,
                    "requires": c.requires,
                    "message": c.message,
                    "flags": list(c.flags),
                    "source": citation(version, c.path, c.line, c.end),
                }
                for c in s.checks
            ],
        }
        for s in selections
    ]


def stage_counts(selections: list[layer_sites.Selection]) -> dict[str, int]:
    """Checks by stage over the selected classes (one check counted once)."""
    seen: dict[tuple[str, int], str] = {}
    for s in selections:
        for c in s.checks:
            seen.setdefault((c.path, c.line), c.stage)
    stages = list(seen.values())
    return {stage: stages.count(stage) for stage in (layer_sites.LOAD, layer_sites.FIRST_FORWARD)}
