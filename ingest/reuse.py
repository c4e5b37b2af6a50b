"""server_args.py version after version: parse only the methods that changed.

Consecutive versions of server_args.py share most ServerArgs methods (`__post_init__`'s
helpers, `check_*`), and a method's constraint sites depend on its text alone. A worker keeps,
per path, the sites of the methods of the last version it analyzed (relative to each
method's first line); in the next version an unchanged method's sites are reused, shifted,
and the method's lines are blanked before parsing (the parser skips blank lines at C speed,
line numbers stay absolute). What else reads the tree (flags, action classes, `_self_reads`)
never needs those methods: methods holding `add_argument` and `from_cli_args` are never
blanked, nor the class's last statement (its span stays the same).

Why a blanked method cannot change the rest: its text was seen before as exactly one
statement of ServerArgs's body (node from its first to its last line), so started at the
start of a line of that body it is one complete statement again, and the line after it is
indented no deeper (its block ends there). The parse of the blanked text is checked: every
statement of the class body must lie wholly before or after each blanked range, with one on
either side; anything else (or a syntax error) parses the whole text instead.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from typing import Any, NamedTuple

from ingest.constraints import (
    SKIP_METHODS,
    function_sites,
    helpers_key,
    scan_functions,
    warning_helpers,
)
from ingest.pyfile import Def, PyFile
from kb.pyast import PARSE_FAILURES

CLASS = "ServerArgs"
# path -> method text -> its sites, lines relative to the method's first line (0-based).
# One version per path (replaced by each version's): a few hundred kB.
_MEMO: dict[str, dict[str, list[dict[str, Any]]]] = {}
# path -> the warning helpers (constraints.helpers_key) the memo's sites were made with: a
# method's sites depend on them too (a call of a helper is a warning site).
_HELPERS: dict[str, str] = {}


@dataclass(frozen=True)
class Member:
    """A method of ServerArgs as the text shows it: its lines, decorators included."""

    name: str
    start: int
    end: int
    text: str


def members(f: PyFile) -> tuple[Def, list[Member]] | None:
    """The first top-level ServerArgs class of the outline and its methods."""
    cls = next(
        (d for d in f.defs if d.parent is None and d.kind == "class" and d.name == CLASS), None
    )
    if cls is None:
        return None
    out = []
    for d in f.defs:
        if d.parent is not cls or d.kind != "def":
            continue
        start = d.line
        head = f.lines[d.line - 1]
        indent = head[: len(head) - len(head.lstrip(" \t"))]
        while start > 1 and f.lines[start - 2].startswith(indent + "@"):
            start -= 1
        end = f.end_of(d)
        out.append(Member(d.name, start, end, "\n".join(f.lines[start - 1 : end])))
    return cls, out


def _blankable(m: Member) -> bool:
    """Whether nothing but the constraint extractor needs the method's tree."""
    return "add_argument" not in m.text and m.name != "from_cli_args"


def _first_line(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", None) or []
    return min([node.lineno, *(d.lineno for d in decorators)])


def _class_node(tree: ast.Module) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == CLASS), None)


def _holds(tree: ast.Module, cls: Def, blanked: list[Member]) -> bool:
    """The blanked parse is the real one less the blanked methods (see the module doc)."""
    node = _class_node(tree)
    if node is None or node.lineno != cls.line:
        return False
    spans = [(_first_line(n), n.end_lineno or n.lineno) for n in node.body]
    for m in blanked:
        if any(not (b < m.start or a > m.end) for a, b in spans):
            return False
        if not any(b < m.start for _a, b in spans) or not any(a > m.end for a, _b in spans):
            return False
    return True


def _shift(sites: list[dict[str, Any]], by: int) -> list[dict[str, Any]]:
    return [{**s, "line": s["line"] + by, "end_line": s["end_line"] + by} for s in sites]


class ServerArgsParse(NamedTuple):
    tree: ast.Module
    sites: list[dict[str, Any]]
    accessors: dict[str, list[str]]  # see accessor_dests


def parse_server_args(text: str, path: str) -> ServerArgsParse:
    """The tree of server_args.py (unchanged ServerArgs methods left out when the last
    version of `path` had them), its constraint sites, as `extract_constraints` gives them
    on the whole tree, and its accessor methods. Raises what `ast.parse` raises on the
    whole text."""
    f = PyFile(text)
    found = members(f)
    memo = _MEMO.get(path, {})
    blanked: list[Member] = []
    tree = None
    if found is not None and memo:
        # Never the class's last statement: the class keeps its span (and _holds checks a
        # statement before and after every blanked method).
        end = f.end_of(found[0])
        blanked = [m for m in found[1] if m.end < end and m.text in memo and _blankable(m)]
    if found is not None and blanked:
        lines = list(f.lines)
        for m in blanked:
            lines[m.start - 1 : m.end] = [""] * (m.end - m.start + 1)
        try:
            tree = ast.parse("\n".join(lines))
        except (SyntaxError, *PARSE_FAILURES):
            tree = None  # parsed whole below, which raises what the text raises
        if tree is not None and not _holds(tree, found[0], blanked):
            tree = None
    # Helpers are module-level functions, never blanked: the blanked tree has them all.
    helpers = warning_helpers(tree) if tree is not None else {}
    if tree is not None and helpers_key(helpers) != _HELPERS.get(path):
        tree = None  # the memo's sites were made with other helpers
    if tree is None:
        blanked = []
        tree = ast.parse(text)
        helpers = warning_helpers(tree)
    _HELPERS[path] = helpers_key(helpers)
    # Sites per function in the order of the file: the parsed ones and the reused ones.
    parts = [
        (_first_line(func), function_sites(qual, func, path, helpers))
        for qual, func in scan_functions(tree)
    ]
    parts += [(m.start, _shift(memo[m.text], m.start - 1)) for m in blanked]
    parts.sort(key=lambda p: p[0])
    sites = [s for _line, part in parts for s in part]
    _remember(path, tree, found, memo, blanked, dict(parts))
    accessors = {}
    for m in found[1] if found is not None else []:
        if m.text not in _ACCESSORS:
            _ACCESSORS[m.text] = accessor_dests(m.text)
        if _ACCESSORS[m.text]:
            accessors[m.name] = _ACCESSORS[m.text]
    if len(_ACCESSORS) > 4096:  # (method texts of many versions: bounded)
        _ACCESSORS.clear()
    return ServerArgsParse(tree, sites, accessors)


_ACCESSORS: dict[str, list[str]] = {}  # method text -> accessor_dests, across versions


def accessor_dests(method: str) -> list[str]:
    """The fields a ServerArgs method returns, when it is a plain accessor: `self` its only
    parameter, no call, no assignment to `self`, a `return` (`get_attention_backends()`
    returning `self.prefill_attention_backend or self.attention_backend`, ...); [] for any
    other method. Code calling `server_args.get_attention_backends()` reads those flags."""
    # Without the word `return` there is no `return`, and a decorator (the text starts with
    # its line) rules the method out: most new method texts of a version are one or the
    # other (`add_cli_args`, a staticmethod, or a `_handle_*` step), and their parse was
    # ~90% of this function's time.
    if "return" not in method or method.lstrip().startswith("@"):
        return []
    try:
        tree = ast.parse(textwrap.dedent(method))
    except (SyntaxError, *PARSE_FAILURES):
        return []
    func = tree.body[0] if len(tree.body) == 1 else None
    if not isinstance(func, ast.FunctionDef) or func.decorator_list:
        return []
    a = func.args
    if [p.arg for p in a.args] != ["self"] or a.posonlyargs or a.kwonlyargs or a.vararg or a.kwarg:
        return []
    nodes = list(ast.walk(func))
    if any(isinstance(n, (ast.Call, ast.Lambda, ast.Yield, ast.Await)) for n in nodes):
        return []
    if not any(isinstance(n, ast.Return) and n.value is not None for n in nodes):
        return []
    read: set[str] = set()
    for n in nodes:
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self":
            if not isinstance(n.ctx, ast.Load):
                return []
            read.add(n.attr)
    return sorted(read)


def _remember(
    path: str,
    tree: ast.Module,
    found: tuple[Def, list[Member]] | None,
    memo: dict[str, list[dict[str, Any]]],
    blanked: list[Member],
    by_start: dict[int, list[dict[str, Any]]],
) -> None:
    """Keep this version's methods for the next version of the path: the reused ones, and
    each parsed method that is exactly one statement of the class body."""
    new: dict[str, list[dict[str, Any]]] = {m.text: memo[m.text] for m in blanked}
    node = _class_node(tree)
    if found is not None and node is not None and node.lineno == found[0].line:
        spans = {
            (_first_line(n), n.end_lineno): n
            for n in node.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        for m in found[1]:
            n = spans.get((m.start, m.end))
            if n is None or n.name != m.name or not _blankable(m) or m.text in new:
                continue
            sites = by_start.get(m.start, []) if n.name not in SKIP_METHODS else []
            new[m.text] = _shift(sites, 1 - m.start)
    _MEMO[path] = new
