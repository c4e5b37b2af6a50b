"""A light index of one Python file's text: its def/class outline by indentation, and the
`ast` of single function blocks parsed on demand.

Parsing every file of every version costs several times the whole ingest, so the indirect-read
analysis never parses a whole file: it finds the enclosing `def` of a line by indentation and
parses just that block.
"""

from __future__ import annotations

import ast
import re
import textwrap
from bisect import bisect_left
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from ingest.sites import docstring_spans
from kb.pyast import PARSE_FAILURES

# `(def|class)[ \t]+(\w+)` as four literal-led scans (the engine skips to "def " and the
# like; an alternation would make it try every position, and a bare "def" stops at every
# "default"); the line's prefix is checked after.
DEF_RES = [
    re.compile(rf"({word}){ws}[ \t]*(\w+)") for word in ("def", "class") for ws in (" ", "\t")
]
# Led by a literal newline (matched in "\n" + text): 30x faster than a look-behind for
# the start of a line, which the engine tries at every offset.
TOP_DEF_RE = re.compile(r"\n(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)")
# A function longer than this is not an accessor, whatever it returns.
MAX_ACCESSOR_LINES = 40


@dataclass(frozen=True)
class Def:
    line: int  # 1-based line of `def` / `class`
    indent: int
    kind: str  # "def" | "class"
    name: str
    parent: Def | None  # the enclosing def or class


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def significant(line: str) -> bool:
    """Whether a line holds code: not blank, not only a comment."""
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


_SHALLOW: dict[int, re.Pattern[str]] = {}


def _def_matches(text: str) -> list[re.Match[str]]:
    r"""The matches of `(def|class)[ \t]+(\w+)` in order, as one scan would give them: the
    two literal-led scans merged, dropping a match inside the one before (`class def x`)."""
    rxs = DEF_RES if "\t" in text else DEF_RES[::2]  # (a tab's two need one: most have none)
    found = sorted((m for rx in rxs for m in rx.finditer(text)), key=lambda m: m.start())
    out: list[re.Match[str]] = []
    for m in found:
        if not out or m.start() >= out[-1].end():
            out.append(m)
    return out


# (line, indent, "def" | "class", name) of each def and class line, in order.
Outline = list[tuple[int, int, str, str]]


def outline(text: str) -> Outline:
    """The def and class lines of `text` (what PyFile.defs builds on)."""
    out: Outline = []
    pos, line = 0, 1
    for m in _def_matches(text):
        start = text.rfind("\n", 0, m.start()) + 1
        prefix = text[start : m.start()]
        if prefix.strip() not in ("", "async"):
            continue
        line += text.count("\n", pos, start)
        pos = start
        indent = len(prefix.expandtabs()) - len(prefix.lstrip())
        out.append((line, indent, m.group(1), m.group(2)))
    return out


class PyFile:
    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.split("\n")
        self._pos, self._no = 0, 1  # incremental line counting: offsets mostly increase
        self._defs: list[Def] | None = None  # the outline, built on first use
        self._def_lines: list[int] = []
        self._ends: dict[int, int] = {}
        self._starts: list[int] | None = None  # offset of each line, for end_of
        self._nodes: dict[int, ast.AST | None] = {}
        self._return_nodes: dict[int, list[ast.Return]] = {}
        self._strings: list[tuple[int, int]] | None = None
        # tables other modules derive from a def's node, by (what, def line): kept with the
        # file, which the resolver keeps while versions share it
        self.memo: dict[tuple[str, int], Any] = {}

    @property
    def defs(self) -> list[Def]:
        if self._defs is None:
            defs: list[Def] = []
            stack: list[Def] = []
            for line, indent, kind, name in outline(self.text):
                while stack and stack[-1].indent >= indent:
                    stack.pop()
                d = Def(line, indent, kind, name, stack[-1] if stack else None)
                defs.append(d)
                stack.append(d)
            self._defs = defs
            self._def_lines = [d.line for d in defs]
        return self._defs

    @property
    def strings(self) -> list[tuple[int, int]]:
        """Spans of the triple-quoted strings (docstrings and text), found on first use."""
        if self._strings is None:
            self._strings = docstring_spans(self.text)
        return self._strings

    def maybe_return(self, line: int) -> bool:
        """A `return` on the line or a few lines above it (before any outline is built)."""
        return any(
            self.lines[no - 1].lstrip().startswith("return")
            for no in range(max(1, line - 6), min(line, len(self.lines)) + 1)
        )

    def def_near(self, line: int) -> bool:
        """Whether `def` stands in the MAX_ACCESSOR_LINES lines above `line` (if not, no
        function short enough to be an accessor holds it: returns_at is None there)."""
        if self._starts is None:
            # (line length + 1) summed, by C-level callables: no Python call per line
            self._starts = [0, *accumulate(map((1).__add__, map(len, self.lines)))]
        if not 0 < line <= len(self.lines):
            return True
        lo = self._starts[max(0, line - 1 - MAX_ACCESSOR_LINES)]
        hi = self._starts[line - 1]
        return self.text.find("def ", lo, hi) >= 0 or self.text.find("def\t", lo, hi) >= 0

    def line_at(self, offset: int) -> int:
        if offset < self._pos:
            self._pos, self._no = 0, 1
        self._no += self.text.count("\n", self._pos, offset)
        self._pos = offset
        return self._no

    def text_of(self, line: int) -> str:
        return self.lines[line - 1].strip()[:240] if 0 < line <= len(self.lines) else ""

    def end_of(self, d: Def) -> int:
        """Last line of the block of `d`: before the next significant line indented no deeper
        (closing brackets of a multi-line signature do not end it)."""
        if d.line not in self._ends:
            self._ends[d.line] = self._end_of(d)
        return self._ends[d.line]

    def _end_of(self, d: Def) -> int:
        # A regex finds the lines indented no deeper (the lines between, nested deeper, are
        # never looked at one by one); each is then checked as the line-by-line rule would.
        if self._starts is None:
            # (line length + 1) summed, by C-level callables: no Python call per line
            self._starts = [0, *accumulate(map((1).__add__, map(len, self.lines)))]
        rx = _SHALLOW.get(d.indent)
        if rx is None:
            rx = _SHALLOW[d.indent] = re.compile(rf"\n[ \t]{{0,{d.indent}}}(?=[^ \t\n])")
        stop = len(self.lines) + 1  # the line that ends the block
        if d.line < len(self.lines):
            pos = self._starts[d.line] - 1  # the newline before line d.line + 1
            while m := rx.search(self.text, pos):
                no = bisect_left(self._starts, m.start() + 1) + 1
                line = self.lines[no - 1]
                if significant(line) and line.lstrip()[:1] not in (")", "]", "}"):
                    stop = no
                    break
                pos = m.start() + 1
        end = stop - 1
        while end > d.line and not significant(self.lines[end - 1]):
            end -= 1
        return end

    def enclosing(self, line: int) -> Def | None:
        """The innermost def/class whose block holds `line`: walk back through the defs
        above it, each less indented than the last."""
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        limit = _indent(text) if significant(text) else 1 << 30
        defs = self.defs
        i = bisect_left(self._def_lines, line) - 1
        d: Def | None = defs[i] if i >= 0 else None
        # The nearest def above a def `d` that is indented less than `d` is its parent (the
        # defs between are nested deeper), so the parent chain visits, in order, the defs
        # the walk back through all of them would check.
        while d is not None:
            if d.indent < limit:
                if self.end_of(d) >= line:
                    return d
                limit = d.indent
            d = d.parent
        return None

    def top(self, d: Def) -> Def:
        while d.parent is not None:
            d = d.parent
        return d

    def node(self, d: Def) -> ast.AST | None:
        """The parsed block of `d` (line numbers relative to `d.line`), None if it fails."""
        if d.line not in self._nodes:
            block = "\n".join(self.lines[d.line - 1 : self.end_of(d)])
            try:
                tree = ast.parse(textwrap.dedent(block))
                self._nodes[d.line] = tree.body[0] if tree.body else None
            except (SyntaxError, *PARSE_FAILURES):
                self._nodes[d.line] = None
        return self._nodes[d.line]

    def _returns(self, d: Def) -> list[ast.Return]:
        """The `return <value>` statements of `d`'s block in walk order, found once per def
        (a function reads flags on many lines)."""
        found = self._return_nodes.get(d.line)
        if found is None:
            node = self.node(d)
            found = self._return_nodes[d.line] = [
                sub
                for sub in (ast.walk(node) if node is not None else ())
                if isinstance(sub, ast.Return) and sub.value is not None
            ]
        return found

    def may_return_at(self, d: Def, line: int) -> bool:
        """Cheap test (no parse) before returns_at: `d` is a function short enough to be an
        accessor, with a `return` on the line or a few lines above it."""
        if d.kind != "def" or self.end_of(d) - d.line > MAX_ACCESSOR_LINES:
            return False
        return any(
            self.lines[no - 1].lstrip().startswith("return")
            for no in range(max(d.line, line - 6), line + 1)
        )

    def returns_at(self, d: Def, line: int) -> ast.Return | None:
        """The `return` statement of function `d` that spans `line`, when `d` is short
        enough to be an accessor."""
        if not self.may_return_at(d, line):
            return None
        rel = line - d.line + 1
        for sub in self._returns(d):
            if sub.lineno <= rel <= (sub.end_lineno or sub.lineno):
                return sub
        return None

    def module_defs(self) -> list[tuple[str, int]]:
        """(name, line) of the top-level defs and classes, without building the outline."""
        padded = "\n" + self.text
        out, pos, line = [], 0, 0
        for m in TOP_DEF_RE.finditer(padded):  # lines counted on from the last match
            line += padded.count("\n", pos, m.start() + 1)
            pos = m.start() + 1
            out.append((m.group(1), line))
        return out
