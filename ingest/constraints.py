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
from dataclasses import dataclass
from typing import Any

from kb.pyast import args_attr, call_name, fill_names, names_read, render_text, source, strip_ansi

WARNING_CALLS = re.compile(r"(^|\.)(warning|warn|warning_once|print_warning|warn_once)$")
OPTION_RE = re.compile(r"(?<![\w-])--([a-z0-9][a-z0-9-]*[a-z0-9])")
SKIP_METHODS = {"add_cli_args", "from_cli_args", "__repr__", "__str__", "url"}
ACTION_CALL = ".__call__"  # the qualified name of an argparse action's __call__ ends so


@dataclass(frozen=True)
class Helper:
    """A function of the file (module-level, or local to a scanned one) that logs a warning
    made of one of its parameters
    (`def print_deprecated_warning(message): logger.warning(f"...{message}...")`): a call of
    it is a warning site at the call."""

    param: str
    index: int  # the parameter's position
    template: ast.expr  # the warning call's message, rendered with the call's argument


def warning_helpers(tree: ast.Module) -> dict[str, Helper]:
    """The file's module-level warning helpers by name (the first warning call of each that
    uses a parameter in its message). A helper defined in a scanned function is known to the
    statements after it (_walk)."""
    found: dict[str, Helper] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            helper = _helper(node)
            if helper is not None:
                found[node.name] = helper
    return found


def _helper(func: ast.FunctionDef | ast.AsyncFunctionDef) -> Helper | None:
    params = [a.arg for a in func.args.posonlyargs + func.args.args]
    for sub in ast.walk(func):
        if isinstance(sub, ast.Call) and sub.args and _is_warning(call_name(sub)):
            used = {n.id for n in ast.walk(sub.args[0]) if isinstance(n, ast.Name)}
            param = next((p for p in params if p in used), None)
            if param is not None:
                return Helper(param, params.index(param), sub.args[0])
    return None


def helpers_key(helpers: dict[str, Helper]) -> str:
    """What the helpers make of a call's message: function sites depend on it as well."""
    return repr(sorted((n, h.param, h.index, ast.dump(h.template)) for n, h in helpers.items()))


def _is_warning(name: str) -> bool:
    return (
        bool(WARNING_CALLS.search(name))
        and not name.startswith("self.")
        or (name == "warnings.warn")
    )


def scan_functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualified name, function) of every function whose body may constrain server args,
    and the `__call__` of every argparse action class (`Name.__call__`: ACTION_CALL)."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and any(source(b).endswith("Action") for b in node.bases):
            calls = [
                f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__call__"
            ]
            found += [(f"{node.name}{ACTION_CALL}", f) for f in calls]
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
    helpers = warning_helpers(tree)
    for qualname, func in scan_functions(tree):
        sites.extend(function_sites(qualname, func, path, helpers))
    return sites


def function_sites(
    qualname: str,
    func: ast.FunctionDef | ast.AsyncFunctionDef,
    path: str,
    helpers: dict[str, Helper] | None = None,
) -> list[dict[str, Any]]:
    """The sites of one function: they depend on its text and the file's warning helpers
    alone."""
    sites: list[dict[str, Any]] = []
    _walk(func.body, [], qualname, path, sites, None, helpers or {})
    if qualname.endswith(ACTION_CALL):
        # An action warns whenever its flag is used, with the flag it is given: the
        # assembler makes a site of each use (assemble._action_warnings). Its raises are
        # the flag's action_error already.
        binds = _action_binds(func)
        sites = [{**s, "binds": binds} for s in sites if s["kind"] == "warning"]
    return sites


def _action_binds(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, dict[str, str]]:
    """The texts `__call__` binds to local names its warning uses: `{"text": ...}`, or
    `{"if": attr, "then": ..., "else": ...}` for `x = f"..{self.new_flag}.." if
    self.new_flag else ""` (`self.attr` is what the flag's add_argument passes). Any other
    value (`if self.new_flag is not None`, a call) is `{"run_time": its source}`, shown as a
    help's unknown placeholder is, not as a literal `{x}`."""
    out: dict[str, dict[str, str]] = {}
    for stmt in func.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            continue
        target, value = stmt.targets[0], stmt.value
        if not isinstance(target, ast.Name):
            continue
        attr = _self_attr(value.test) if isinstance(value, ast.IfExp) else None
        if isinstance(value, ast.IfExp) and attr:
            then, other = render_text(value.body), render_text(value.orelse)
            if then is not None and other is not None:
                out[target.id] = {"if": attr, "then": then, "else": other}
                continue
        elif not isinstance(value, ast.IfExp) and (text := render_text(value)) is not None:
            out[target.id] = {"text": text}
            continue
        out[target.id] = {"run_time": source(value)}
    return out


def _self_attr(node: ast.expr) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.attr if node.value.id == "self" else None
    return None


def _walk(
    body: list[ast.stmt],
    conds: list[str],
    func: str,
    path: str,
    out: list[dict[str, Any]],
    cond_nodes: list[list[str]] | None = None,
    helpers: dict[str, Helper] | None = None,
) -> None:
    # cond_nodes: the server-args names each enclosing condition reads (computed once per if).
    cond_nodes = cond_nodes or []
    helpers = helpers or {}
    for stmt in body:
        if isinstance(stmt, ast.If):
            text = source(stmt.test)
            reads = [*cond_nodes, names_read(stmt.test)]
            _walk(stmt.body, [*conds, text], func, path, out, reads, helpers)
            if stmt.orelse:
                _walk(stmt.orelse, [*conds, _negated(stmt.test)], func, path, out, reads, helpers)
            elif _leaves(stmt.body):
                # `if G: return` guards everything after it in this block: it runs under not G.
                conds = [*conds, _negated(stmt.test)]
                cond_nodes = reads
        elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith)):
            _walk(stmt.body, conds, func, path, out, cond_nodes, helpers)
            _walk(getattr(stmt, "orelse", []), conds, func, path, out, cond_nodes, helpers)
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            _walk(stmt.body, conds, func, path, out, cond_nodes, helpers)  # type: ignore[attr-defined]
            for handler in stmt.handlers:  # type: ignore[attr-defined]
                _walk(handler.body, conds, func, path, out, cond_nodes, helpers)
            _walk(stmt.orelse + stmt.finalbody, conds, func, path, out, cond_nodes, helpers)  # type: ignore[attr-defined]
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # A helper defined inside a validator (`def _check(): raise ...`) runs under
            # the validator's conditions when called: its raises are the validator's too.
            _walk(stmt.body, conds, f"{func}.{stmt.name}", path, out, cond_nodes, helpers)
            helper = _helper(stmt)  # a local warning helper: its calls below are sites too
            if helper is not None:
                helpers = {**helpers, stmt.name: helper}
        elif isinstance(stmt, ast.Match):
            for case in stmt.cases:
                text = f"{source(stmt.subject)} matches {source(case.pattern)}"
                _walk(case.body, [*conds, text], func, path, out, cond_nodes, helpers)
        elif isinstance(stmt, ast.Raise):
            out.append(_site("raise", stmt, conds, cond_nodes, func, path, _raise_message(stmt)))
        elif isinstance(stmt, ast.Assert):
            site = _site(
                "assert",
                stmt,
                [*conds, _negated(stmt.test)],
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
            if _is_warning(name):
                message = _text(call.args[0]) if call.args else ""
                out.append(_site("warning", stmt, conds, cond_nodes, func, path, message))
            elif name in helpers:
                message = _helper_message(call, helpers[name])
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


def _negated(test: ast.expr) -> str:
    """The condition under which `test` is false: `not (x)`, or `x` for `not x` (a reader
    trips on `not (not self.use_mla_backend())`)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return source(test.operand)
    return f"not ({source(test)})"


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


def _helper_message(call: ast.Call, helper: Helper) -> str:
    """The helper's warning with the call's argument in place of its parameter."""
    given = {k.arg: k.value for k in call.keywords if k.arg}
    arg = call.args[helper.index] if helper.index < len(call.args) else given.get(helper.param)
    given_text = _text(arg)
    if isinstance(helper.template, ast.Name):  # logger.warning(message)
        return given_text
    text = render_text(helper.template, fill=fill_names({helper.param: given_text}))
    return strip_ansi(text) if text is not None else given_text


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
