"""environ.py's declarations: the `Envs` class of declared variables and the deprecations.

Declarations (`class Envs: SGLANG_X = EnvBool(False)`, `EnvBoolWithAlias(..,
deprecated_name=..)`) and the prefix aliases (`.replace("SGL_", "SGLANG_")`) are read with
`ast` from environ.py only; so are the old names its helpers deprecate
(`_print_deprecated_env("OLD", "NEW")`). Where the code reads and writes the variables is
ingest/env.py's scan.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from ingest.env import fallback_after
from kb.pyast import NOT_LITERAL, kwarg, literal
from kb.threeval import binary, is_unknown

ENVIRON_PATH = "python/sglang/srt/environ.py"

TYPES = {
    "EnvBool": "bool",
    "EnvInt": "int",
    "EnvFloat": "float",
    "EnvStr": "str",
    "EnvTuple": "tuple",
}
PREFIX_ALIAS_RE = re.compile(r"""\.replace\(\s*["'](\w+_)["']\s*,\s*["'](\w+_)["']""")


def _env_type(class_name: str, bases: dict[str, str]) -> str | None:
    """EnvBool -> bool, EnvBoolWithAlias -> bool, a subclass defined in the file -> its base's."""
    seen = set()
    name = class_name
    while name not in TYPES and name in bases and name not in seen:
        seen.add(name)
        name = bases[name]
    if name in TYPES:
        return TYPES[name]
    for prefix, t in TYPES.items():
        if class_name.startswith(prefix):
            return t
    return None


def extract_declarations(tree: ast.Module, text: str, path: str) -> dict[str, Any]:
    """{"vars": [{"name", "type", "default", "default_expr", "deprecated_names", "comment",
    "section", "line", "end_line", "path"}], "prefix_aliases": [{"from", "to", "line"}],
    "deprecations": (see `deprecations`)}."""
    # Class -> the Env* class it derives from (EnvBoolWithAlias(_DeprecatedEnvFallback, EnvBool)).
    bases: dict[str, str] = {}
    consts: dict[str, Any] = {}  # "ToolStrictLevel.OFF" -> 0
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
                    value = literal(stmt.value)
                    if value is not NOT_LITERAL and not isinstance(stmt.value, ast.Call):
                        consts[f"{node.name}.{stmt.targets[0].id}"] = value
            for b in node.bases:
                if isinstance(b, ast.Name) and (b.id in TYPES or b.id in bases):
                    bases[node.name] = b.id
    lines = text.split("\n")
    out: list[dict[str, Any]] = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        section = None
        prev_end = node.lineno
        for stmt in node.body:
            # The last `# Heading` comment line before the statement, after a blank line.
            for k in range(prev_end, stmt.lineno - 1):
                s = lines[k].strip()
                if s.startswith("#") and k > 0 and not lines[k - 1].strip():
                    section = s.lstrip("# ").strip() or section
            prev_end = stmt.end_lineno or stmt.lineno
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
                continue
            target, call = stmt.targets[0], stmt.value
            if not (isinstance(target, ast.Name) and isinstance(call, ast.Call)):
                continue
            if not isinstance(call.func, ast.Name):
                continue
            env_type = _env_type(call.func.id, bases)
            if env_type is None or not call.func.id.startswith("Env") and call.func.id not in bases:
                continue
            default: Any = None
            default_expr = None
            if call.args:
                value = fold(call.args[0], consts)
                if value is NOT_LITERAL:
                    default_expr = ast.unparse(call.args[0])
                else:
                    default = list(value) if isinstance(value, tuple) else value
            deprecated = [
                kw.value.value
                for kw in call.keywords
                if kw.arg in ("deprecated_name", "deprecated_names", "alias")
                and isinstance(kw.value, ast.Constant)
                and isinstance(kw.value.value, str)
            ]
            for kw in call.keywords:
                if kw.arg in ("deprecated_names", "aliases") and isinstance(
                    kw.value, (ast.List, ast.Tuple)
                ):
                    deprecated += [
                        e.value
                        for e in kw.value.elts
                        if isinstance(e, ast.Constant) and isinstance(e.value, str)
                    ]
                if kw.arg == "default" and default is None and default_expr is None:
                    value = fold(kw.value, consts)
                    if value is NOT_LITERAL:
                        default_expr = ast.unparse(kw.value)
                    else:
                        default = value
            end = stmt.end_lineno or stmt.lineno
            given = call.args[0] if call.args else kwarg(call, "default")
            out.append(
                {
                    "name": target.id,
                    "type": env_type,
                    "default": default,
                    "default_expr": default_expr,
                    "fallback": _fallback_of(given) if default_expr else None,
                    "deprecated_names": deprecated,
                    "comment": _comment(lines, stmt.lineno, end),
                    "section": section,
                    "path": path,
                    "line": stmt.lineno,
                    "end_line": end,
                }
            )
    aliases = []
    for no, line in enumerate(lines, 1):
        m = PREFIX_ALIAS_RE.search(line)
        if m and m.group(1) != m.group(2):
            aliases.append({"from": m.group(1), "to": m.group(2), "line": no, "path": path})
    return {"vars": out, "prefix_aliases": aliases, "deprecations": deprecations(tree, path)}


def _fallback_of(node: ast.expr | None) -> dict[str, Any] | None:
    """A declaration's default that reads another variable (`EnvStr(os.environ.get("B",
    "x"))`, `EnvInt(get_int_env_var("B", 3))`, `envs.B.get()`), as fallback_after says it:
    the declaration's source text, read by the same patterns as a read's default."""
    if node is None:
        return None
    return fallback_after(", " + ast.unparse(node) + ")")


# --- deprecations declared by calls: `_print_deprecated_env("OLD", "NEW")` ------------------

# A message of warnings.warn(..) / logger.warning(..) saying "deprecat..." marks a helper.
WARN_CALLS = ("warn", "warning")
# `--fp8-gemm-backend=cutlass`: the value stays with the flag (no trailing full stop).
FLAG_IN_TEXT = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9-]*(?:=[\w-]+(?:\.[\w-]+)*)?")


def deprecations(tree: ast.Module, path: str) -> list[dict[str, Any]]:
    """Old names deprecated by calls of the module's own helper functions, or by a loop over a
    literal dict (`for old, new in {"OLD": "NEW"}.items()`): [{"name", "replacement", "note",
    "line", "end_line", "path"}]. A helper is read, not guessed from its name or its
    parameters' order: the parameter it checks in `os.environ` is the old name, the one it
    assigns to `os.environ[..]` the new one, and its deprecation warning (rendered with the
    call's arguments) is the note; a note naming exactly one `--flag` (or `--flag=value`) and
    no new variable makes that flag the replacement. Calls whose arguments are not literals
    are skipped. "conversion" (see `_conversion`) is what the new name is given: None for
    the old value as it is."""
    helpers = {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and not node.args.vararg and not node.args.kwarg
    }
    dicts: dict[str, ast.Dict | None] = {}  # name -> the dict literal assigned to it once
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            t = node.targets[0]
            if isinstance(t, ast.Name):
                once = t.id not in dicts and isinstance(node.value, ast.Dict)
                dicts[t.id] = node.value if once and isinstance(node.value, ast.Dict) else None
    out: dict[str, dict[str, Any]] = {}

    def add(bound: dict[str, Any], body: list[ast.stmt], line: int, end: int) -> None:
        found = _Deprecation(bound)
        for stmt in body:
            found.visit(stmt)
        note = next((m for m in found.messages if "deprecat" in m.lower()), None)
        old = [bound[p] for p in found.old if isinstance(bound.get(p), str)]
        if note is None or len(set(old)) != 1:
            return
        new = [bound[p] for p in found.new if isinstance(bound.get(p), str) and bound[p] != old[0]]
        flags = set(FLAG_IN_TEXT.findall(note))
        replacement = new[0] if len(set(new)) == 1 else None
        if not new and len(flags) == 1:
            replacement = flags.pop()
        given = [e for p, e in found.assigned if bound.get(p) == replacement and replacement]
        out.setdefault(
            old[0],
            {"name": old[0], "replacement": replacement, "note": note, "line": line,
             "end_line": end, "path": path,
             "conversion": found.conversion(given[0]) if len(given) == 1 else None},
        )  # fmt: skip

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            helper = helpers.get(node.func.id)
            bound = _bind(helper, node) if helper is not None else None
            if helper is not None and bound is not None:
                add(bound, helper.body, node.lineno, node.end_lineno or node.lineno)
        elif isinstance(node, ast.For) and not node.orelse:
            entries = _dict_items(node, dicts)
            if entries is None:
                continue
            names = [e.id for e in node.target.elts]  # type: ignore[attr-defined]
            for k, v in entries:
                add(dict(zip(names, (k.value, v.value), strict=True)), node.body, k.lineno,
                    v.end_lineno or v.lineno)  # fmt: skip
    return sorted(out.values(), key=lambda d: d["line"])


def _bind(fn: ast.FunctionDef, call: ast.Call) -> dict[str, Any] | None:
    """The helper's parameters -> the call's literal str/None arguments, defaults filled in."""
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    defaults = fn.args.defaults
    bound: dict[str, Any] = {}
    for p, d in zip(params[len(params) - len(defaults) :], defaults, strict=True):
        bound[p] = d.value if isinstance(d, ast.Constant) else NOT_LITERAL
    if len(call.args) > len(params):
        return None
    given = list(zip(params, call.args, strict=False))
    given += [(kw.arg, kw.value) for kw in call.keywords if kw.arg in params]
    if len(given) != len(call.args) + len(call.keywords):
        return None  # **kwargs, or a keyword the helper does not take
    for p, arg in given:
        if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str | None)):
            return None  # not resolvable statically
        bound[p] = arg.value
    if any(p not in bound or bound[p] is NOT_LITERAL for p in params):
        return None
    return bound


def _dict_items(node: ast.For, dicts: dict[str, ast.Dict | None]) -> list[Any] | None:
    """The (key, value) constants of `for a, b in D.items()` over a dict literal, or None."""
    target, it = node.target, node.iter
    if not (
        isinstance(target, ast.Tuple)
        and len(target.elts) == 2
        and all(isinstance(e, ast.Name) for e in target.elts)
        and isinstance(it, ast.Call)
        and not it.args
        and isinstance(it.func, ast.Attribute)
        and it.func.attr == "items"
    ):
        return None
    named = it.func.value
    d = dicts.get(named.id) if isinstance(named, ast.Name) else named
    if not isinstance(d, ast.Dict):
        return None
    items = list(zip(d.keys, d.values, strict=True))
    strs = all(isinstance(x, ast.Constant) and isinstance(x.value, str) for kv in items for x in kv)
    return items if strs else None


def _call_of(node: ast.expr, names: tuple[str, ...]) -> bool:
    """`name(x)` with one positional argument, name one of `names`."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in names
        and len(node.args) == 1
        and not node.keywords
    )


def _is_environ(node: ast.expr) -> bool:
    """`os.environ` or `environ`."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ" and isinstance(node.value, ast.Name) and node.value.id == "os"
    return isinstance(node, ast.Name) and node.id == "environ"


class _Deprecation(ast.NodeVisitor):
    """What a helper body does with its bound parameters, on the branches the bindings take
    (`if new_name is None:` with new_name None): the parameters it checks or reads in the
    environment (`old`), those it assigns there (`new`), and its warnings rendered."""

    def __init__(self, bound: dict[str, Any]) -> None:
        self.bound = bound
        self.old: list[str] = []
        self.new: list[str] = []
        self.messages: list[str] = []
        self.assigned: list[tuple[str, ast.expr]] = []  # (parameter, the value it is given)
        self.locals: dict[str, ast.expr] = {}  # `ms_val = os.environ[old_name]`

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            p = self._param(t.slice) if isinstance(t, ast.Subscript) else None
            if p and _is_environ(t.value):  # type: ignore[attr-defined]
                self.assigned.append((p, node.value))
            elif isinstance(t, ast.Name) and t.id not in self.bound:
                self.locals[t.id] = node.value
        self.generic_visit(node)

    def _reads_old(self, node: ast.expr, depth: int = 0) -> bool:
        """`os.environ[old]`, `os.getenv(old)`, `os.environ.get(old)`, or a local holding it."""
        if isinstance(node, ast.Name) and node.id in self.locals and depth < 3:
            return self._reads_old(self.locals[node.id], depth + 1)
        if isinstance(node, ast.Subscript) and _is_environ(node.value):
            p = self._param(node.slice)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            get = (
                node.func.attr == "getenv"
                or node.func.attr == "get"
                and _is_environ(node.func.value)
            )
            p = self._param(node.args[0]) if get else None
        else:
            return False
        return p is not None and p in self.old

    def conversion(self, value: ast.expr) -> dict[str, Any] | None:
        """What the new name is given, in terms of the old name's value: None for the value as
        it is; {"expr", "cast", "op", "by"} for `str(float(old) / 1000.0)` (a cast, then one
        multiplication or division by a number: `op` "*", "/" or "//"); {"expr"} alone for
        anything else, which is not worked out. A local holding the whole value
        (`secs = str(...); os.environ[new] = secs`) is read through."""
        for _ in range(3):  # (locals assigned from locals, a few deep)
            if not isinstance(value, ast.Name) or value.id not in self.locals:
                break
            if self._reads_old(value):
                return None
            value = self.locals[value.id]
        if self._reads_old(value):
            return None
        out: dict[str, Any] = {"expr": ast.unparse(value)}
        inner = value.args[0] if _call_of(value, ("str",)) else None  # type: ignore[attr-defined]
        if not isinstance(inner, ast.BinOp):
            return out
        op = {ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//"}.get(type(inner.op))
        cast, number = inner.left, inner.right
        if op == "*" and isinstance(cast, ast.Constant):  # 1000 * int(old)
            cast, number = number, cast
        by = number.value if isinstance(number, ast.Constant) else None
        if (
            op is None
            or type(by) not in (int, float)
            or by == 0
            or not _call_of(cast, ("float", "int"))
            or not self._reads_old(cast.args[0])  # type: ignore[attr-defined]
        ):
            return out
        return {**out, "cast": cast.func.id, "op": op, "by": by}  # type: ignore[attr-defined]

    def _param(self, node: ast.expr) -> str | None:
        return node.id if isinstance(node, ast.Name) and node.id in self.bound else None

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        taken = self._taken(node.test)
        for stmt in node.body if taken is not False else []:
            self.visit(stmt)
        for stmt in node.orelse if taken is not True else []:
            self.visit(stmt)

    def _taken(self, test: ast.expr) -> bool | None:
        """The test's value under the bindings, or None when it depends on more."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self._taken(test.operand)
            return None if inner is None else not inner
        p = self._param(test)
        if p is not None:
            return bool(self.bound[p])
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            p = self._param(test.left)
            right = test.comparators[0]
            none = isinstance(right, ast.Constant) and right.value is None
            if p is not None and none and isinstance(test.ops[0], ast.Is | ast.IsNot):
                return (self.bound[p] is None) == isinstance(test.ops[0], ast.Is)
        return None

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        return  # a nested function runs only if called

    def visit_Compare(self, node: ast.Compare) -> None:
        p = self._param(node.left)
        if p and isinstance(node.ops[0], ast.In | ast.NotIn) and _is_environ(node.comparators[0]):
            self.old.append(p)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        p = self._param(node.slice)
        if p and _is_environ(node.value):
            (self.new if isinstance(node.ctx, ast.Store) else self.old).append(p)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and node.args:
            p = self._param(node.args[0])
            reads = func.attr == "getenv" or func.attr == "get" and _is_environ(func.value)
            if p and reads:
                self.old.append(p)
            if func.attr in WARN_CALLS:
                text = self._render(node.args[0])
                if text is not None:
                    self.messages.append(text)
        self.generic_visit(node)

    def _render(self, node: ast.expr) -> str | None:
        """A message with the bound parameters filled in, or None if it needs more."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self._render(node.left), self._render(node.right)
            return None if left is None or right is None else left + right
        if not isinstance(node, ast.JoinedStr):
            return None
        parts = []
        for v in node.values:
            if isinstance(v, ast.FormattedValue):
                p = self._param(v.value)
                if p is None or not isinstance(self.bound[p], str) or v.format_spec:
                    return None
                parts.append(self.bound[p])
            else:
                part = self._render(v)
                if part is None:
                    return None
                parts.append(part)
        return "".join(parts)


# The arithmetic a declared default is written in, on numbers (kb.threeval's bounded operators).
ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Div, ast.Pow)


def fold(node: ast.expr, consts: dict[str, Any] | None = None) -> Any:
    """A literal, or arithmetic over numeric literals (`384 * 1024 * 1024`, `2 ** 31`), an
    empty `tuple()`/`list()`, or a `Class.MEMBER` constant of the same module (`consts`);
    else NOT_LITERAL."""
    value = literal(node)
    if value is not NOT_LITERAL:
        return value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and consts:
        return consts.get(f"{node.value.id}.{node.attr}", NOT_LITERAL)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args:
        if node.func.id in ("tuple", "list") and not node.keywords:
            return []
    if isinstance(node, ast.BinOp) and isinstance(node.op, ARITHMETIC):
        left, right = fold(node.left, consts), fold(node.right, consts)
        if all(type(v) in (int, float) for v in (left, right)):
            value = binary(node.op, left, right)
            return NOT_LITERAL if is_unknown(value) else value
    return NOT_LITERAL


def _comment(lines: list[str], line: int, end: int) -> str:
    """A trailing `# ...` on the declaration, else the comment lines right above it."""
    tail = lines[end - 1]
    m = re.search(r"\)\s*#\s*(.+)$", tail)
    if m:
        return m.group(1).strip()
    above: list[str] = []
    k = line - 2
    while k >= 0 and lines[k].strip().startswith("#"):
        above.append(lines[k].strip().lstrip("#").strip())
        k -= 1
    # The first line of a block under a blank line is the section heading, not a description.
    if above and (k < 0 or not lines[k].strip()):
        above.pop()
    return " ".join(reversed(above))
