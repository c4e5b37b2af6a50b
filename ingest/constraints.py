"""Find constraint sites: the raises, asserts, overrides and warnings that tie flags together.

Scanned functions: every method of ServerArgs (`__post_init__`, `_handle_*`, `check_*`, ...)
and every module-level function that takes the server args as a parameter (the third era's
`arg_groups/*_hook.py`). Each site records the path of enclosing `if` conditions (an `else`
branch as `not (cond)`), so a reader, or the explain evaluator, sees when it fires.
"""

from __future__ import annotations

import ast
import hashlib
import re
from typing import Any

from kb.pyast import args_attr, call_name, names_read, render_text, source

WARNING_CALLS = re.compile(r"(^|\.)(warning|warn|warning_once|print_warning|warn_once)$")
OPTION_RE = re.compile(r"(?<![\w-])--([a-z0-9][a-z0-9-]*[a-z0-9])")
SKIP_METHODS = {"add_cli_args", "from_cli_args", "__repr__", "__str__", "url"}


def scan_functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualified name, function) of every function whose body may constrain server args."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ServerArgs":
            for stmt in node.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    if stmt.name not in SKIP_METHODS:
                        found.append((f"ServerArgs.{stmt.name}", stmt))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _takes_server_args(node):
            found.append((node.name, node))
    return found


def _takes_server_args(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for arg in func.args.args + func.args.kwonlyargs:
        annotation = source(arg.annotation) if arg.annotation else ""
        if arg.arg in ("server_args", "args") and (
            arg.arg == "server_args" or "ServerArgs" in annotation
        ):
            return True
        if "ServerArgs" in annotation:
            return True
    return False


def extract_constraints(tree: ast.Module, path: str) -> list[dict[str, Any]]:
    sites: list[dict[str, Any]] = []
    for qualname, func in scan_functions(tree):
        sites.extend(function_sites(qualname, func, path))
    return sites


def function_sites(
    qualname: str, func: ast.FunctionDef | ast.AsyncFunctionDef, path: str
) -> list[dict[str, Any]]:
    """The sites of one function: they depend on its text alone (ingest.reuse relies on it)."""
    sites: list[dict[str, Any]] = []
    _walk(func.body, [], qualname, path, sites)
    return sites


def _walk(
    body: list[ast.stmt],
    conds: list[str],
    func: str,
    path: str,
    out: list[dict[str, Any]],
    cond_nodes: list[list[str]] | None = None,
) -> None:
    # cond_nodes: the server-args names each enclosing condition reads (computed once per if).
    cond_nodes = cond_nodes or []
    for stmt in body:
        if isinstance(stmt, ast.If):
            text = source(stmt.test)
            reads = [*cond_nodes, names_read(stmt.test)]
            _walk(stmt.body, [*conds, text], func, path, out, reads)
            if stmt.orelse:
                _walk(stmt.orelse, [*conds, f"not ({text})"], func, path, out, reads)
            elif _leaves(stmt.body):
                # `if G: return` guards everything after it in this block: it runs under not G.
                conds = [*conds, f"not ({text})"]
                cond_nodes = reads
        elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith)):
            _walk(stmt.body, conds, func, path, out, cond_nodes)
            _walk(getattr(stmt, "orelse", []), conds, func, path, out, cond_nodes)
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            _walk(stmt.body, conds, func, path, out, cond_nodes)  # type: ignore[attr-defined]
            for handler in stmt.handlers:  # type: ignore[attr-defined]
                _walk(handler.body, conds, func, path, out, cond_nodes)
            _walk(stmt.orelse + stmt.finalbody, conds, func, path, out, cond_nodes)  # type: ignore[attr-defined]
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # A helper defined inside a validator (`def _check(): raise ...`) runs under
            # the validator's conditions when called: its raises are the validator's too.
            _walk(stmt.body, conds, f"{func}.{stmt.name}", path, out, cond_nodes)
        elif isinstance(stmt, ast.Match):
            for case in stmt.cases:
                text = f"{source(stmt.subject)} matches {source(case.pattern)}"
                _walk(case.body, [*conds, text], func, path, out, cond_nodes)
        elif isinstance(stmt, ast.Raise):
            out.append(_site("raise", stmt, conds, cond_nodes, func, path, _raise_message(stmt)))
        elif isinstance(stmt, ast.Assert):
            test = source(stmt.test)
            fail = f"not ({test})"
            site = _site(
                "assert",
                stmt,
                [*conds, fail],
                [*cond_nodes, names_read(stmt.test)],
                func,
                path,
                _text(stmt.msg),
            )
            site["affects"] = _merge(site["affects"], names_read(stmt.test))
            out.append(site)
        elif isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and conds:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            value = stmt.value
            written = {
                t.attr: source(value) if value is not None else ""
                for t in targets
                if (args_attr(t) and isinstance(t, ast.Attribute))
            }
            if written and stmt.value is not None:
                if isinstance(stmt, ast.AugAssign):
                    op = source(ast.BinOp(left=ast.Name("x"), op=stmt.op, right=stmt.value))
                    written = {k: f"{k} {op[2:]}" for k in written}
                site = _site("override", stmt, conds, cond_nodes, func, path, "")
                site["writes"] = written
                site["affects"] = _merge(list(written), site["affects"])
                out.append(site)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            name = call_name(call)
            if (
                WARNING_CALLS.search(name)
                and not name.startswith("self.")
                or name == "warnings.warn"
            ):
                message = _text(call.args[0]) if call.args else ""
                out.append(_site("warning", stmt, conds, cond_nodes, func, path, message))
            elif name == "setattr" and conds and len(call.args) == 3:
                target = call.args[0]
                attr = call.args[1]
                if (
                    isinstance(target, ast.Name)
                    and target.id in ("self", "server_args")
                    and isinstance(attr, ast.Constant)
                    and isinstance(attr.value, str)
                ):
                    site = _site("override", stmt, conds, cond_nodes, func, path, "")
                    site["writes"] = {attr.value: source(call.args[2])}
                    site["affects"] = _merge([attr.value], site["affects"])
                    out.append(site)


def _leaves(body: list[ast.stmt]) -> bool:
    """Whether a block ends in return/continue/break: an early-exit guard for what follows.

    A block ending in `raise` is a constraint site of its own, not a guard: treating it as
    one would make every later check in a validator "read" the flags of every earlier one.
    """
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Continue, ast.Break))


def _merge(a: list[str], b: list[str]) -> list[str]:
    return list(dict.fromkeys([*a, *b]))


def _text(node: ast.expr | None) -> str:
    if node is None:
        return ""
    text = render_text(node)
    return text if text is not None else source(node)


def _raise_message(stmt: ast.Raise) -> str:
    exc = stmt.exc
    if isinstance(exc, ast.Call):
        parts = [_text(a) for a in exc.args]
        name = call_name(exc)
        return f"{name}: " + " ".join(parts) if parts else name
    return source(exc) if exc is not None else "re-raise"


def _site(
    kind: str,
    stmt: ast.stmt,
    conds: list[str],
    cond_nodes: list[list[str]],
    func: str,
    path: str,
    message: str,
) -> dict[str, Any]:
    read: list[str] = []
    for names in cond_nodes:
        read = _merge(read, names)
    mentioned = [m.replace("-", "_") for m in OPTION_RE.findall(message)]
    if kind in ("raise", "warning"):
        exprs = [stmt.exc] if isinstance(stmt, ast.Raise) and stmt.exc else []
        if isinstance(stmt, ast.Expr):
            exprs = [stmt.value]
        for e in exprs:
            mentioned = _merge(mentioned, names_read(e))
    return {
        "kind": kind,
        "function": func,
        "conditions": conds,
        "message": message,
        "flags": read,  # dests; the assembler maps them to options of that version
        "affects": mentioned,
        "writes": {},
        "line": stmt.lineno,
        "end_line": stmt.end_lineno or stmt.lineno,
        "path": path,
    }


def site_key(site: dict[str, Any]) -> str:
    """Fingerprint of what a site checks, independent of line numbers and function names."""
    basis = "|".join(
        [
            site["kind"],
            " && ".join(site["conditions"]),
            re.sub(r"\s+", " ", site["message"]).strip(),
            ",".join(sorted(site["affects"])),
            ",".join(f"{k}={v}" for k, v in sorted(site["writes"].items())),
        ]
    )
    return hashlib.sha1(basis.encode()).hexdigest()[:16]
