"""A flag's help text contradicted by the code handling one of its values.

`--fp4-gemm-backend`'s help says "'auto' (default, selects between flashinfer_cudnn/
flashinfer_cutlass based on CUDA/cuDNN version)", while the code running the GEMM passes
`fp4_backend.get_flashinfer_backend() if not fp4_backend.is_auto() else "cutlass"`: auto is
always cutlass there. Read generally: the help's words for a value name two or more of the
flag's other choices it selects between; a site handling the value (an `x if test else y`,
or an `if` whose body only assigns or returns) maps it to one string naming exactly one of
those choices; and no handling site maps it to another of them. Anything less certain says
nothing: a contradiction that is not one is worse than none.

The sites' files are parsed here (only the few a claim points at, once per blob).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kb.pyast import PARSE_FAILURES

# "selects between a/b", "picks one of a, b", "chooses a or b by ...": a value choosing.
CHOOSING = re.compile(r"\b(?:auto-?)?(?:select|pick|choose|decide)s?\b|\bbetween\b", re.I)


@dataclass(frozen=True)
class Claim:
    value: str
    says: str  # the help's words for the value
    named: tuple[str, ...]  # the other choices they name


def help_claims(help_text: str, choices: Sequence[str]) -> list[Claim]:
    """The values whose help words (`'v' (words)` or `v: words`) choose among two or more
    of the flag's other choices."""
    out: list[Claim] = []
    for value in choices:
        v = re.escape(value)
        m = re.search(rf"['\"`]{v}['\"`]\s*\(([^()]*(?:\([^()]*\)[^()]*)*)\)", help_text)
        if m is None:
            m = re.search(rf"(?<![\w-]){v}\s*:\s*([^;.]*)", help_text)
        if m is None:
            continue
        says = m.group(1).strip()
        named = tuple(
            c
            for c in choices
            if c != value and re.search(rf"(?<![\w-]){re.escape(c)}(?![\w-])", says)
        )
        if len(named) >= 2 and CHOOSING.search(says):
            out.append(Claim(value, says, named))
    return out


def _tests_value(node: ast.expr, value: str) -> bool | None:
    """True: `node` holds when the flag has `value` (`x.is_v()`, `x == 'v'`); False: when
    it does not (`not ...`, `!=`); None: it is no such test."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _tests_value(node.operand, value)
        return None if inner is None else not inner
    method = "is_" + value.lower().replace("-", "_")
    if (
        isinstance(node, ast.Call)
        and not node.args
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == method
    ):
        return True
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        right = node.comparators[0]
        if isinstance(right, ast.Constant) and right.value == value:
            if isinstance(node.ops[0], ast.Eq):
                return True
            if isinstance(node.ops[0], ast.NotEq):
                return False
    return None


def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _only_string(body: list[ast.stmt]) -> str | None:
    """The string a branch of one `x = 'c'` or `return 'c'` gives."""
    if len(body) != 1:
        return None
    stmt = body[0]
    if isinstance(stmt, (ast.Assign, ast.Return)):
        return _string(stmt.value)
    return None


@lru_cache(maxsize=32)  # a claim points at a few files
def _parsed(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, *PARSE_FAILURES):
        return None


def mappings(text: str, line: int, value: str) -> list[tuple[str, int, int]]:
    """(the string the value maps to, the lines of the construct) for each `a if test else
    b` and `if test:` whose test on `line` tests the value and whose branch for it is one
    string."""
    tree = _parsed(text)
    if tree is None:
        return []
    out: list[tuple[str, int, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.IfExp):
            test, when_true, when_false = node.test, node.body, node.orelse
            branch_true, branch_false = _string(when_true), _string(when_false)
        elif isinstance(node, ast.If):
            test = node.test
            branch_true, branch_false = _only_string(node.body), _only_string(node.orelse)
        else:
            continue
        if not (test.lineno <= line <= (test.end_lineno or test.lineno)):
            continue
        holds = _tests_value(test, value)
        if holds is None:
            continue
        found = branch_true if holds else branch_false
        if found is not None:
            out.append((found, node.lineno, node.end_lineno or node.lineno))
    return out


def _choice_named(literal: str, choices: Iterable[str]) -> str | None:
    """The one choice a string spells (`cutlass` for `flashinfer_cutlass`), or None."""
    hits = [c for c in choices if c == literal or c.endswith("_" + literal)]
    return hits[0] if len(hits) == 1 else None


def contradictions(
    help_text: str,
    choices: Sequence[str],
    sites: Mapping[str, Sequence[Mapping[str, Any]]],
    text_of: Any,
) -> list[dict[str, Any]]:
    """For each claim of the help, the site mapping its value to one of the choices it says
    the value selects between: {"value", "help_says", "maps_to", "choice", "path", "line",
    "end_line"}.
    `sites`: value -> its handling sites (path, line: the line of the test); `text_of(path)`:
    that file's text at the version, or None."""
    out: list[dict[str, Any]] = []
    for claim in help_claims(help_text or "", choices):
        found: list[tuple[str, str, str, int, int]] = []  # (literal, choice, path, lines)
        for site in sites.get(claim.value, ()):
            text = text_of(site["path"])
            if text is None:
                continue
            at = int(site.get("end_line") or site["line"])  # the test's line
            for literal, line, end in mappings(text, at, claim.value):
                choice = _choice_named(literal, choices)
                if choice is not None and choice != claim.value:
                    found.append((literal, choice, site["path"], line, end))
        picked = {f[1] for f in found}
        # the code maps the value to one of the named choices, never to another
        if len(picked) == 1 and picked <= set(claim.named):
            literal, choice, path, line, end = found[0]
            out.append(
                {
                    "value": claim.value,
                    "help_says": claim.says,
                    "maps_to": literal,
                    "choice": choice,
                    "path": path,
                    "line": line,
                    "end_line": end,
                }
            )
    return out
