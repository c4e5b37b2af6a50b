"""Candidate usage and choice sites of one source file, found by fast literal-led scans.

This runs over every Python file under python/ at every version, so it must cost about what
`git grep` costs: each pattern starts with a literal that the regex engine can skip to, and a
file is only searched when a cheap byte test says it can match. The results are independent
of any version's flags (all `server_args.<name>` reads, all string comparisons, ...), so a
blob is scanned once and its facts are filtered per version by the assembler.

Enum classes are parsed with `ast` from their class block alone (not the whole file).
"""

from __future__ import annotations

import ast
import bisect
import copy
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache
from typing import Any, AnyStr, NamedTuple

from kb.pyast import NOT_LITERAL, PARSE_FAILURES, literal

READ_RES = [
    re.compile(rb"server_args(?:\(\))?\.([a-z_][a-z0-9_]*)"),
    # global_server_args_dict["x"] and global_server_args_dict.get("x"), in one pass
    re.compile(
        rb"server_args_dict(?:\[\s*[\"']([a-z_][a-z0-9_]*)[\"']\s*\]"
        rb"|\.get\(\s*[\"']([a-z_][a-z0-9_]*)[\"'])"
    ),
    re.compile(rb"getattr\(\s*(?:self\.)?server_args\s*,\s*[\"']([a-z_][a-z0-9_]*)[\"']"),
]
READ_LEADS = [b"server_args", b"server_args_dict", b"getattr("]  # what each match holds
WRITE_AFTER = re.compile(rb"\s*(?:[+\-*/|&]?=)(?!=)")
VALUE = rb"[A-Za-z0-9_][\w.\-/:+]{0,63}"
# `==` and `!=` in one pass led by their last byte, the look-behind checking the first: the
# engine skips to a single literal byte fastest (a leading [=!] would make it test every
# byte against the class, 6x slower; two passes led by `==` and `!=` cost twice this one).
# A match starts one byte after its operator.
COMPARE_RE = re.compile(rb"=(?<=[=!]=)\s*\(?\s*([\"'])(" + VALUE + rb")\1")
# ` in (`: led by `in`, the space before it checked by hand (a leading space would stop the
# engine at every space of the file)
CONTAINS_AFTER = rb"\s*[\(\[\{]"
CONTAINS_RE = re.compile(rb"in" + CONTAINS_AFTER)
# After the `in` of ingest/choices.py's CONST_IN_RE: a named constant.
CONST_IN_AFTER = rb"\s+(?:self\.|cls\.)?([A-Z_][A-Z0-9_]{2,})\b"
# Where either pattern may match, found in one pass for both scans (LineIndex.places) and
# each pattern matched there alone (finditer_at): the engine's search for `in` stops at every
# `i`, a pass of each cost twice this one.
IN_PLACES_RE = re.compile(rb"in(?=" + CONTAINS_AFTER + rb"|" + CONST_IN_AFTER + rb")")
STRING_ITEM_RE = re.compile(rb"\s*([\"'])(" + VALUE + rb")\1\s*\Z")
COMMENT_RE = re.compile(rb"#[^\n]*")
CLOSING = {ord("("): ord(")"), ord("["): ord("]"), ord("{"): ord("}")}
IS_CALL_RE = re.compile(rb"\.is_([a-z0-9_]+)\(\)")
ENUM_REF_RE = re.compile(rb"\.([A-Z][A-Z0-9_]*[A-Z0-9])\b")
ENUM_CLASS_RE = re.compile(rb"\nclass (\w+)\(([^)]*)\):")
# Whether a file may define an enum: `b"Enum" in data`
# (the engine's search skips to the word's first byte, rarer in code than the last one
# bytes' `in` skips by: half the cost)
ENUM_WORD_RE = re.compile(rb"Enum")
# The expression just before an operator: dotted names, calls without arguments,
# subscripts by a string (`["key"]`), a number or a name (`[0]`, `[i]`: an element).
SEGMENT = r"[A-Za-z_]\w*(?:\(\))?(?:\[(?:[\"']\w+[\"']|-?\w+)\])*"
SUBJECT_RE = re.compile(rf"((?:{SEGMENT}\.)*{SEGMENT})\s*(?:not)?\s*$")
INDEX_RE = re.compile(r"\[-?\w+\]")  # an element's subscript: `parts[0]` is about parts
# Both led by the dot; their matches hold no other dot, so one pass finds each one's.
DOT_RE = re.compile(
    rb"\.(?:is_([a-z0-9_]+)\(\)|" + ENUM_REF_RE.pattern.removeprefix(rb"\.") + rb")"
)
NAME_END_RE = re.compile(r"[A-Za-z0-9_]*")
UPPER_RE = re.compile(r"[A-Z]")
WORD_BYTES = {
    bytes([c]) for c in b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"
}
MAX_LINE = 240


class LineIndex:
    """Line numbers and texts of byte offsets in one file, shared by every scan of it.

    Each scan visits offsets in increasing order, one regex pass after another; newlines are
    counted from the nearest offset already numbered (a sorted list of checkpoints), so the
    file is counted through about once in all instead of once per pass."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._offsets = [0]
        self._numbers = [1]
        self._texts: dict[int, str] = {}
        self._quoted: TripleQuoted | None = None
        self._words: dict[bytes, list[int]] = {}
        self._places: dict[re.Pattern[bytes], list[int]] = {}
        self._docstrings: list[tuple[int, int]] | None = None

    def quoted(self) -> TripleQuoted:
        """triple_quoted(data), found once for every scan that needs it."""
        if self._quoted is None:
            self._quoted = triple_quoted(self.data)
        return self._quoted

    def words(self, word: bytes) -> list[int]:
        """offsets(data, word), found once for every scan that needs them."""
        found = self._words.get(word)
        if found is None:
            found = self._words[word] = offsets(self.data, word)
        return found

    def places(self, rx: re.Pattern[bytes]) -> list[int]:
        """Where the matches of `rx` start, found once for every scan that needs them."""
        found = self._places.get(rx)
        if found is None:
            found = self._places[rx] = [m.start() for m in rx.finditer(self.data)]
        return found

    def docstrings(self) -> list[tuple[int, int]]:
        """docstring_spans(data), found once for every scan that needs it."""
        if self._docstrings is None:
            self._docstrings = docstring_spans(self.data, self.quoted())
        return self._docstrings

    def number(self, offset: int) -> int:
        i = bisect.bisect_right(self._offsets, offset) - 1
        base = self._offsets[i]
        no = self._numbers[i] + self.data.count(b"\n", base, offset)
        if offset != base:
            self._offsets.insert(i + 1, offset)
            self._numbers.insert(i + 1, no)
        return no

    def line_start(self, no: int) -> int | None:
        """Offset of the first byte of line `no` (None past the last line), walked to from the
        nearest numbered offset on a line before it or on it."""
        i = bisect.bisect_right(self._numbers, no) - 1
        start = self.data.rfind(b"\n", 0, self._offsets[i]) + 1
        for _ in range(no - self._numbers[i]):
            start = self.data.find(b"\n", start) + 1
            if start == 0:
                return None
        return start

    def text(self, no: int, offset: int) -> str:
        """The stripped text of line `no`, which holds `offset`."""
        text = self._texts.get(no)
        if text is None:
            start = self.data.rfind(b"\n", 0, offset) + 1
            end = self.data.find(b"\n", offset)
            line = self.data[start : end if end >= 0 else len(self.data)]
            text = self._texts[no] = line.decode("utf-8", "replace").strip()[:MAX_LINE]
        return text


class _Lines:
    """One scan's view of a LineIndex: the texts of the lines it cited, in citing order, and
    for a text that joins lines above its own, how many (`above`: its citation spans them)."""

    def __init__(self, data: bytes, index: LineIndex | None = None) -> None:
        self.data = data
        self.index = index or LineIndex(data)
        self.number = self.index.number
        self.texts: dict[int, str] = {}
        self.above: dict[int, int] = {}

    def prefix(self, offset: int) -> str:
        """The text of the line from its start up to `offset`."""
        start = self.data.rfind(b"\n", 0, offset) + 1
        return self.data[start:offset].decode("utf-8", "replace")

    def record(self, no: int, offset: int) -> int:
        if no not in self.texts:
            self.texts[no] = self.index.text(no, offset)
        return no

    def at(self, offset: int) -> int:
        """Line number of `offset`, with that line's text recorded."""
        return self.record(self.number(offset), offset)

    def cite(self, offset: int, before: Joined) -> int:
        """`at`, the text recorded being `before` (the lines the compared expression starts
        on, sites.joined_before) joined to the line's: a site shows what it compares, and
        its citation spans the lines shown."""
        no = self.at(offset)
        if before.text:
            self.texts[no] = (before.text + self.index.text(no, offset))[:MAX_LINE]
            self.above[no] = before.lines
        return no


def offsets(data: bytes, word: bytes) -> list[int]:
    """Where `word` stands in `data`, in order (overlapping places too: `server_args` can)."""
    out = []
    at = data.find(word)
    while at >= 0:
        out.append(at)
        at = data.find(word, at + 1)
    return out


def finditer_at(
    rx: re.Pattern[bytes], data: bytes, starts: Iterable[int]
) -> Iterator[re.Match[bytes]]:
    """rx.finditer(data), every match of `rx` starting at one of `starts` (increasing): the
    pattern tried there alone, each match after the one before."""
    end = 0
    for at in starts:
        if at >= end:
            m = rx.match(data, at)
            if m is not None:
                end = m.end()
                yield m


class Read(NamedTuple):
    """A read (or write) of a server arg by name; stored as a list in the facts' "reads"."""

    name: str
    line: int
    access: str  # "read" or "write"


class Choice(NamedTuple):
    """A string the code compares something with (`x == "v"`, `x in ("v", ..)`) or an
    `is_<value>()` call; stored as a list in the facts' "choices"."""

    value: str
    line: int
    tail: str  # the name compared (compared_name, subject_tail): what says which flag
    how: str  # "compare", "contains" or "is_call"


class EnumRef(NamedTuple):
    """`Class.MEMBER` in code; stored as a list in the facts' "enum_refs"."""

    cls: str
    member: str
    line: int


def stored(records: list[Any]) -> list[list[Any]]:
    """Records as the facts keep them: JSON arrays in field order (orjson writes no
    NamedTuple, and the facts read back from the cache are lists)."""
    return [list(r) for r in records]


class Joined(NamedTuple):
    """The stripped lines before a site's that its text joins, each followed by a space, and
    how many they are ("", 0 when none)."""

    text: str
    lines: int


NOT_JOINED = Joined("", 0)


@lru_cache(maxsize=1 << 16)  # the same lines recur in every version of a file
def line_state(prefix: str) -> str:
    """Where the end of `prefix` (a line up to a match) is: "code", "comment" (after a `#`
    outside strings), "string" (inside a literal opened on the line) or "fstring" (inside
    an f-string, whose `{...}` is code). A `#` inside a string starts no comment."""
    if "#" not in prefix and '"' not in prefix and "'" not in prefix:
        return "code"
    quote, fstring, i = "", False, 0
    while i < len(prefix):
        c = prefix[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if prefix.startswith(quote, i):
                i += len(quote)
                quote = ""
                continue
        elif c in "\"'":
            quote = prefix[i : i + 3] if prefix[i : i + 3] in ('"""', "'''") else c
            j = i
            while j > 0 and prefix[j - 1].isalpha():  # the prefix letters: f, rf, b ...
                j -= 1
            fstring = "f" in prefix[j:i].lower()
            i += len(quote)
            continue
        elif c == "#":
            return "comment"
        i += 1
    if not quote:
        return "code"
    return "fstring" if fstring else "string"


def _in_comment(prefix: str) -> bool:
    """Whether a match sits after a `#` on its line (a mention in a comment, not code)."""
    return "#" in prefix and line_state(prefix) == "comment"


# Where three quotes of a kind start, runs of more included (`""""` holds two), each kind in
# a pass led by the single quote: the engine skips to one literal byte fastest (bytes.find of
# `'''`, a run of one byte, costs twice the pass).
TRIPLE_RES = (re.compile(rb'"(?="")'), re.compile(rb"'(?='')"))
TRIPLE_RES_STR = (re.compile(r'"(?="")'), re.compile(r"'(?='')"))
TRIPLE_QUOTES = (b'"""', b"'''")


class TripleQuoted(NamedTuple):
    """The triple-quoted strings of a text, in order, each (start of its opening quotes, end
    of its closing ones); an unclosed last one runs to the end of the text."""

    spans: list[tuple[int, int]]
    unclosed: bool  # whether the last span is an unclosed string's


def triple_quoted(data: AnyStr) -> TripleQuoted:
    """Every triple-quoted string of `data` (bytes or str; offsets in it), f-strings too:
    from each opening to the next three quotes of its kind, the next opening after them."""
    rxs = TRIPLE_RES if isinstance(data, bytes) else TRIPLE_RES_STR
    starts = [[m.start() for m in rx.finditer(data)] for rx in rxs]  # type: ignore[call-overload]
    spans: list[tuple[int, int]] = []
    following = [kind[0] if kind else -1 for kind in starts]  # next opening of each kind
    while live := [(at, k) for k, at in enumerate(following) if at >= 0]:
        start, k = min(live)
        i = bisect.bisect_left(starts[k], start + 3)
        if i == len(starts[k]):
            spans.append((start, len(data)))
            return TripleQuoted(spans, True)
        end = starts[k][i] + 3
        spans.append((start, end))
        for other, at in enumerate(following):  # the next opening after it, for those passed
            if 0 <= at < end:
                j = bisect.bisect_left(starts[other], end)
                following[other] = starts[other][j] if j < len(starts[other]) else -1
    return TripleQuoted(spans, False)


def docstring_spans(data: AnyStr, quoted: TripleQuoted | None = None) -> list[tuple[int, int]]:
    """Spans of the closed triple-quoted strings that are not f-strings (docstrings and
    text, never code), from quote to matching quote; offsets in `data`, bytes or str.
    `quoted`: triple_quoted(data), when already found."""
    spans, unclosed = quoted or triple_quoted(data)
    f_prefixes: Sequence[AnyStr] = (b"f", b"F") if isinstance(data, bytes) else ("f", "F")
    closed = spans[:-1] if unclosed else spans
    return [(start, end) for start, end in closed if data[start - 1 : start] not in f_prefixes]


def in_spans(spans: list[tuple[int, int]], offset: int) -> bool:
    i = bisect.bisect_right(spans, (offset, 1 << 62)) - 1
    return i >= 0 and spans[i][0] <= offset < spans[i][1]


# Calls that change a string's case or blanks, not what it is: `x.lower() == "v"` is about x.
NORMALISING = (".lower()", ".upper()", ".strip()", ".casefold()")


# `d.get("key")` or `d.get("key", default)` compared: the key, like `d["key"]`
# (`quant.get("dtype") == "fp8"` is about that dict's dtype, not about no name at all); and
# `getattr(x, "name"[, default])`: `x.name`. (A default holds at most one level of brackets.)
DEFAULT = r"(?:,(?:[^()]|\([^()]*\))*)?"
AT_END = r"(?=(?:\.\w+\(\))*\s*(?:not)?\s*$)"  # then only normalising calls
GET_KEY_RE = re.compile(rf"""\.get\(\s*(["'])(\w+)\1\s*{DEFAULT}\){AT_END}""")
GETATTR_RE = re.compile(
    rf"""getattr\(\s*([A-Za-z_][\w.\[\]"'()-]*?)\s*,\s*(["'])(\w+)\2\s*{DEFAULT}\){AT_END}"""
)


def _subject(prefix: str) -> str | None:
    """The compared expression at the end of `prefix`, normalising calls and elements'
    subscripts taken off."""
    if ".get(" in prefix:
        prefix = GET_KEY_RE.sub(r'["\2"]', prefix)
    if "getattr(" in prefix:
        prefix = GETATTR_RE.sub(r"\1.\3", prefix)
    m = SUBJECT_RE.search(prefix.rstrip())
    if not m:
        return None
    expr = INDEX_RE.sub("", m.group(1))
    while expr.endswith(NORMALISING) and expr.rfind(".") > 0:
        expr = expr[: expr.rfind(".")]
    return expr


@lru_cache(maxsize=1 << 16)
def subject_tail(prefix: str) -> str:
    """The name a comparison is about: `self.moe_runner_backend` -> moe_runner_backend,
    `get_moe_runner_backend()` -> moe_runner_backend, `d["attention_backend"]` -> same,
    `self.model_path.lower()` -> model_path."""
    expr = _subject(prefix)
    if not expr:
        return ""
    if expr.endswith("]"):
        return re.findall(r"[\"'](\w+)[\"']\]$", expr)[0]
    last = expr.split(".")[-1]
    if last.endswith("()"):
        last = last[:-2]
        last = re.sub(r"^get_", "", last)
    return last


def continued(data: bytes, at: int, prefix: str) -> tuple[str, Joined]:
    """(the compared expression's text, the lines before it starts on): `prefix` (its line
    up to `at`, a trailing `not` taken off), or the lines before joined to it when the
    expression starts on them: when `prefix` holds no name, the line before (`and
    server_args.x` then `in [...]`); when it starts by closing brackets and no name can be
    read from it, the lines back to their opening (`getattr(` ... `) == "v"`, at most
    MAX_JOINED lines). The lines joined are code lines up to a blank one."""
    before = joined_before(data, at, prefix)
    text = before.text + prefix.strip() if before.text else prefix
    return text.removesuffix(" not"), before


MAX_JOINED = 4


def _opens_before(prefix: str) -> bool:
    """Whether the compared expression of `prefix` starts on a line before (and not only
    a part of the line: `) and self.x in`)."""
    stripped = prefix.strip()
    if stripped in ("", "not"):
        return True
    return stripped.startswith((")", "]", "}")) and not subject_tail(prefix)


def joined_before(data: bytes, at: int, prefix: str) -> Joined:
    """The stripped lines before the one holding `at`, joined by spaces and ending in one,
    that `continued` joins to `prefix`, and how many; NOT_JOINED when none."""
    if not _opens_before(prefix):
        return NOT_JOINED
    depth = _depth(prefix)
    start = data.rfind(b"\n", 0, at) + 1
    joined = ""
    for n in range(1, MAX_JOINED + 1):
        if start == 0:
            return NOT_JOINED
        begin = data.rfind(b"\n", 0, start - 1) + 1
        before = data[begin : start - 1].decode("utf-8", "replace")
        if not before.strip() or line_state(before) != "code":
            return NOT_JOINED
        joined = before.strip() + " " + joined
        depth += _depth(before)
        if depth >= 0:  # every bracket the prefix closes is opened
            return Joined(joined, n)
        start = begin
    return NOT_JOINED


# `getattr(self, attr[, d])` on what holds the flags, `attr` a variable; and the loop over
# string literals that binds it, the code lines just above (the text up to a blank line).
LOOP_GETATTR_RE = re.compile(
    r"getattr\(\s*(?:self|(?:self\.)?server_args)\s*,\s*([A-Za-z_]\w*)\s*(?:,[^()]*)?\)\s*$"
)
MAX_LOOP_ABOVE = 400  # bytes: a loop header of a few names


def _looped_getattr(data: bytes, at: int, subject: str) -> list[str]:
    """The names a `getattr(self, name) == "v"` compares, when `name` runs over a literal
    tuple or list just above: `for attr in ("a", "b"):`."""
    m = LOOP_GETATTR_RE.search(subject)
    if m is None:
        return []
    start = data.rfind(b"\n", 0, at) + 1
    above = data[max(0, start - MAX_LOOP_ABOVE) : start].decode("utf-8", "replace")
    above = above[above.rfind("\n\n") + 1 :]  # this block only
    loops = re.findall(
        rf"(?m)^([ \t]*)for\s+{m.group(1)}\s+in\s+[(\[]((?:\s*[\"']\w+[\"']\s*,?)+)\s*[)\]]\s*:",
        above,
    )
    if not loops:
        return []
    indent, names = loops[-1]  # the nearest; the compare in its body (indented more)
    line = data[start:at]
    if len(line) - len(line.lstrip()) <= len(indent):
        return []
    return re.findall(r"[\"'](\w+)[\"']", names)


def _depth(text: str) -> int:
    """Brackets opened minus closed in `text` (strings aside only roughly: enough here)."""
    return sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")


def unread(prefix: str) -> bool:
    """Whether an expression comes before the operator but no name can be read from it
    (`f(x) == "v"`, `getattr(self, attr) == "v"`): its value alone says nothing of which
    flag, if any, it is compared with (`parts[1] == "model"` is no --sampling-defaults)."""
    return not subject_tail(prefix) and prefix.strip() not in ("", "not")


@lru_cache(maxsize=1 << 14)  # as subject_tail: the same lines recur in every version of a file
def compared_name(prefix: str) -> str:
    """subject_tail, led by the receiver's last name when that receiver is not known to
    hold flags: `quant_info.quant_type` -> "quant_info.quant_type" (a kernel's input format
    that only shares words with --quantization), but `self.x`, `server_args.x`,
    `self.server_args.x`, `get_global_server_args().x`, `server_args_dict["x"]` or a bare
    name -> "x"."""
    tail = subject_tail(prefix)
    expr = _subject(prefix)
    if not tail or not expr:
        return tail
    receiver = expr[: expr.rfind("[")] if expr.endswith("]") else expr.rpartition(".")[0]
    last = receiver.rpartition(".")[2].partition("[")[0].removesuffix("()")
    if last in ("", "self", "cls", "args") or last.endswith(("server_args", "server_args_dict")):
        return tail
    return f"{last}.{tail}"


def scan(data: bytes, index: LineIndex | None = None) -> dict[str, Any]:
    """Reads of server args, choice sites (comparisons, `in` literals, `is_x()` calls), enum
    references and enum classes of one file, with the texts of the lines they cite."""
    lines = _Lines(data, index)
    found = _find(data, lines)
    facts = {
        "reads": stored([r for reads in found.reads for r in reads]),
        "choices": stored(found.compares + found.contains + found.is_calls),
        "enum_refs": stored(found.enum_refs),
        "enums": scan_enums(data) if ENUM_WORD_RE.search(data) else [],
        "lines": {str(k): v for k, v in lines.texts.items()},
    }
    if lines.above:
        facts["spans"] = {str(k): v for k, v in lines.above.items()}
    _lower_member_refs(data, facts, index)
    return _with_local_flags(data, _with_alias_reads(data, facts, lines.index), lines.index)


def _lower_member_refs(data: bytes, facts: dict[str, Any], index: LineIndex | None) -> None:
    """References to the members of an enum this file defines whose names are not upper
    case (`EplbAlgorithm.deepseek_vec`), which ENUM_REF_RE leaves out: added to the enum
    references. Only in the defining file: the members of an enum another file defines are
    not known to this blob's scan, and matching every `Name.attr` of every file would be a
    pass over all of them for a rare shape. So `DeepEPMode.normal` in the files importing
    DeepEPMode (v0.4.4.post4 – v0.4.10.post1, ~180 lines) is no site; once its members were
    upper case it is. Code only: an f-string's `{Name.member}` is left out too."""
    lower: dict[str, set[str]] = {}
    for e in facts["enums"]:  # (a class defined twice in the file: the members of both)
        lower.setdefault(e["name"], set()).update(
            m["name"] for m in e["members"] if not m["name"].isupper()
        )
    if not any(lower.values()):
        return
    index = index or LineIndex(data)
    found: list[EnumRef] = []
    for cls, members in lower.items():
        key = cls.encode() + b"."
        for at in _code_finds(data, key, index.docstrings):
            m = MEMBER_RE.match(data, at + len(key))
            if m and m.group().decode() in members:
                no = index.number(at)
                found.append(EnumRef(cls, m.group().decode(), no))
                facts["lines"].setdefault(str(no), index.text(no, at))
    known = {tuple(r) for r in facts["enum_refs"]}
    found.sort(key=lambda r: r.line)
    facts["enum_refs"].extend(list(r) for r in found if r not in known)


MEMBER_RE = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*\b")


# `sa = get_global_server_args()` then `sa.enable_x`: a local name for the server args. A
# name ending in `server_args` is READ_RES[0]'s already.
GLOBAL_ARGS = b"= get_global_server_args()"
ALIAS_RE = re.compile(rb"(?m)^[ \t]*([A-Za-z_]\w*)[ \t]*= get_global_server_args\(\)[ \t]*$")


def _with_alias_reads(data: bytes, facts: dict[str, Any], index: LineIndex) -> dict[str, Any]:
    """`facts` with the reads through local names of the server args, after the others. A
    name is followed only if every assignment to it in the file is such a binding and it is
    no parameter of a function (there it could be anything)."""
    if not index.words(b"server_args"):  # (no binding then: GLOBAL_ARGS holds the word)
        return facts
    names = {n for n in server_args_aliases(data) if not n.endswith(b"server_args")}
    if not names:
        return facts
    lines = _Lines(data, index)
    spans = lines.index.docstrings()
    found: list[Read] = []
    pattern = rb"(?<![\w.])(" + b"|".join(sorted(names)) + rb")\.([a-z_][a-z0-9_]*)\b(?!\()"
    for m in re.finditer(pattern, data):
        if _in_comment(lines.prefix(m.start())) or in_spans(spans, m.start()):
            continue
        write = bool(WRITE_AFTER.match(data, m.end()))
        found.append(Read(m.group(2).decode(), lines.at(m.start()), "write" if write else "read"))
    if not found:
        return facts
    texts = dict(facts["lines"])
    texts.update((str(k), v) for k, v in lines.texts.items())
    out = {**facts, "reads": facts["reads"] + stored(found), "lines": texts}
    if "spans" in facts:  # a line whose text is now its own spans no lines above
        kept = {k: v for k, v in facts["spans"].items() if int(k) not in lines.texts}
        out.pop("spans")
        if kept:
            out["spans"] = kept
    return out


def server_args_aliases(data: bytes) -> set[bytes]:
    """The names a file binds to `get_global_server_args()` and to nothing else."""
    names = set()
    # The lines holding the binding, by bytes.find: ALIAS_RE's `^` over the whole text made
    # the engine try every position of it.
    at = data.find(GLOBAL_ARGS)
    while at >= 0:
        m = ALIAS_RE.match(data, data.rfind(b"\n", 0, at) + 1)  # (`^` holds after a newline)
        if m is not None:
            names.add(m.group(1))
        at = data.find(GLOBAL_ARGS, at + 1)
    return {n for n in names if _only_bound_so(data, n)}


BOUND_TO_RE = re.compile(rb"[ \t]*=(?!=)[ \t]*(.*)$", re.M)  # after the name: what it is bound to


def _only_bound_so(data: bytes, name: bytes) -> bool:
    """Whether every `name = …` in `data` binds the server args and no `def` takes `name`."""
    # Each `name` at a line's start (after its indentation), by bytes.find: a regex led by
    # `^` would try every position of the text.
    at = data.find(name)
    while at >= 0:
        start = data.rfind(b"\n", 0, at) + 1
        if not data[start:at].strip(b" \t"):
            m = BOUND_TO_RE.match(data, at + len(name))
            if m is not None and m.group(1).strip() != b"get_global_server_args()":
                return False
        at = data.find(name, at + 1)
    # `\bdef \w+\([^)]*\bNAME\b` searched from each `def ` (a pattern led by `\b` has no
    # literal for the engine to skip to), the boundary before it checked by hand
    takes = re.compile(rb"def (?=\w+\([^)]*\b" + name + rb"\b)")
    return not any(
        m.start() == 0 or data[m.start() - 1 : m.start()] not in WORD_BYTES
        for m in takes.finditer(data)
    )


# `name = server_args.x` then `name == "v"` in the same function: the comparison is about x.
# (`= enc.server_args.x` too: the server args another object holds; and `= self.x`, whose
# comparisons are those of `self.x`: `backend = self.storage_backend_type`)
LOCAL_LEADS = (b"= server_args.", b".server_args.", b"= get_global_server_args().", b"= self.")
LOCAL_RE = re.compile(  # matched from a line's start: indented, so in some block
    rb"([ \t]+)([A-Za-z_]\w*)[ \t]*= (?:(?:(?:[A-Za-z_]\w*\.)?server_args"
    rb"|get_global_server_args\(\))\.|self\.)([a-z_][a-z0-9_]*)[ \t]*(?:#[^\n]*)?$",
    re.M,
)
# LOCAL_RE from its `= ` on, which stands once in a line LOCAL_RE matches (nothing before it
# holds a `=`): its matches find the lines to try LOCAL_RE on, once each (a match runs to the
# end of its line).
BINDING_RE = re.compile(LOCAL_RE.pattern[LOCAL_RE.pattern.index(b"= (?:") :], re.M)
# What binds a name again: `NAME =` (augmented, `:=`), `a, NAME, b =` and `NAME: int =` at a
# line's start, `for NAME in`, `as NAME`, `del NAME`, `global NAME`, a nested def's or lambda's
# parameter `NAME` (a keyword argument `f(NAME=1)` is taken for one too: precision first).
REBIND = (
    rb"(?<![\w.])NAME\b[ \t]*(?::=|(?:[-+*/%&|^@]|//|\*\*|>>|<<)?=(?!=))"
    rb"|(?m:^)[ \t]*\(?[\w, \t]*(?<![\w.])NAME\b[ \t]*[,:)][^\n=]*=(?!=)"
    rb"|\bfor\b[^\n=]*?(?<![\w.])NAME\b[^\n=]*?\bin\b"
    rb"|\b(?:as|del|global|nonlocal)[ \t]+\(?[\w, \t]*(?<![\w.])NAME\b"
    rb"|\b(?:def[ \t]+\w+|lambda)[ \t]*\(?[^)\n:]*(?<![\w.])NAME\b"
)
COMPARED_AFTER = r"(?:\.(?:lower|upper|strip|casefold)\(\))*[ \t]*(?:==|!=|(?:not[ \t]+)?in\b)"


def _with_local_flags(data: bytes, facts: dict[str, Any], index: LineIndex) -> dict[str, Any]:
    """`facts` with each comparison of a local name bound once in its function to a flag's
    read (`name = server_args.grammar_backend`) made a comparison of that flag's dest (or
    bound to `self.x`: of x)."""
    tails = {tail for _value, _line, tail, how in facts["choices"] if how != "is_call"}
    if not tails or not _has_local_lead(data, index):
        return facts
    scopes = local_flags(data, tails, index)
    if not scopes:
        return facts
    choices = [Choice._make(c) for c in facts["choices"]]
    for i, c in enumerate(choices):
        if c.how == "is_call":
            continue
        for name, dest, first, last in scopes:
            if c.tail == name and first < c.line <= last:
                if _compares(facts["lines"][str(c.line)], name):
                    choices[i] = c._replace(tail=dest)
                    break
    return {**facts, "choices": stored(choices)}


_LEADS_WITH_WORD = tuple(lead for lead in LOCAL_LEADS if b"server_args" in lead)
_LEADS_WITHOUT_WORD = tuple(lead for lead in LOCAL_LEADS if b"server_args" not in lead)


def _has_local_lead(data: bytes, index: LineIndex) -> bool:
    """`any(lead in data for lead in LOCAL_LEADS)`, the three leads holding `server_args`
    not searched when the text lacks the word (most files): each search is a pass over
    the whole text."""
    if any(lead in data for lead in _LEADS_WITHOUT_WORD):
        return True
    return bool(index.words(b"server_args")) and any(lead in data for lead in _LEADS_WITH_WORD)


def _compares(line: str, name: str) -> bool:
    """Whether `line` compares the bare `name` (and no attribute of that name)."""
    after = re.escape(name) + COMPARED_AFTER
    return bool(re.search(r"(?<![\w.])" + after, line)) and not re.search(r"\." + after, line)


def local_flags(
    data: bytes, names: set[str] | None = None, index: LineIndex | None = None
) -> list[tuple[str, str, int, int]]:
    """(name, dest, line of the binding, last line of its function) for each local name
    (of `names`, if given) bound to a flag's read, once in its function, and not used
    before in it (a parameter, a global, another binding: it could be anything)."""
    found = []
    spans: list[tuple[int, int]] | None = None
    wanted = None if names is None else {n.encode() for n in names}
    # LOCAL_RE from the start of each line where its part from `= ` on matches, the name
    # before it one of `names` (a regex led by `^` tries every position; a bytes.find of each
    # lead, `= self.` above all, stops at many more lines)
    for binding in BINDING_RE.finditer(data):
        line_start = data.rfind(b"\n", 0, binding.start()) + 1
        if wanted is not None and data[line_start : binding.start()].strip(b" \t") not in wanted:
            continue
        m = LOCAL_RE.match(data, line_start)
        if m is None:
            continue
        if spans is None:
            spans = index.docstrings() if index is not None else docstring_spans(data)
        scope = _function_of(data, m.start(), len(m.group(1)), spans)
        if scope is None:
            continue
        start, end = scope
        name = m.group(2)
        if next(_mentions(data, name, start, m.start()), None) is not None:
            continue
        # REBIND tried on the lines that name it only (over a whole body it costs more than
        # the rest of the scan)
        rebind = re.compile(REBIND.replace(b"NAME", name))
        lines = {data.rfind(b"\n", 0, at) + 1 for at in _mentions(data, name, m.end(), end)}
        if any(rebind.search(data, at, _line_end(data, at)) for at in lines):
            continue
        first = data.count(b"\n", 0, m.start()) + 1
        last = first + data.count(b"\n", m.start(), end)
        found.append((name.decode(), m.group(3).decode(), first, last))
    return found


def _line_end(data: bytes, at: int) -> int:
    end = data.find(b"\n", at)
    return end if end >= 0 else len(data)


def _mentions(data: bytes, name: bytes, start: int, end: int) -> Iterator[int]:
    """Offsets of `name` as a whole name (not an attribute) in data[start:end]."""
    at = data.find(name, start, end)
    while at >= 0:
        before, after = data[at - 1 : at], data[at + len(name) : at + len(name) + 1]
        if before not in WORD_BYTES and before != b"." and after not in WORD_BYTES:
            yield at
        at = data.find(name, at + 1, end)


def _function_of(
    data: bytes, at: int, indent: int, spans: list[tuple[int, int]]
) -> tuple[int, int] | None:
    """(start, end) of the function whose body holds the line at `at`, indented `indent`."""
    i = data.rfind(b"def ", 0, at)
    while i >= 0:
        start = data.rfind(b"\n", 0, i) + 1
        head = data[start:i]
        inner = len(head) - len(head.lstrip(b" \t"))
        if head.strip(b" \t") in (b"", b"async") and inner < indent and not in_spans(spans, i):
            break
        i = data.rfind(b"def ", 0, i)
    else:
        return None
    # Where the body ends: the first line at the def's indentation or less (`)` and `]`
    # close a signature or a call; blank lines, comments and docstrings say nothing).
    ends = re.compile(rb"\n(?=[ \t]{0,%d}[^ \t\r\n#)\]}])" % inner)
    for m in ends.finditer(data, data.find(b"\n", i)):
        if not in_spans(spans, m.start() + 1):
            return (start, m.start()) if m.start() > at else None  # (else a def before it)
    return start, len(data)


class Found(NamedTuple):
    """The facts of a text by kind, each kind in the order of a pass of its pattern."""

    reads: tuple[list[Read], ...]  # by each of READ_RES
    compares: list[Choice]
    contains: list[Choice]  # values of `in` literals
    is_calls: list[Choice]
    enum_refs: list[EnumRef]


def _find(data: bytes, lines: _Lines) -> Found:
    """The facts of `data` by kind, each kind in the order of a pass of its pattern."""
    reads: tuple[list[Read], ...] = ([], [], [])
    # The first two patterns matched at each `server_args` (bytes.find skips to a long word
    # fastest: the engine's own search stops at every `s`)
    words = lines.index.words(b"server_args")
    if words:
        spans: list[tuple[int, int]] | None = None
        for rx, lead, found in zip(READ_RES, READ_LEADS, reads, strict=True):
            if lead == b"getattr(":
                matches = rx.finditer(data) if lead in data else iter(())
            else:
                matches = finditer_at(rx, data, (at for at in words if data.startswith(lead, at)))
            for m in matches:
                if _in_comment(lines.prefix(m.start())):
                    continue
                if spans is None:
                    spans = lines.index.docstrings()
                if in_spans(spans, m.start()):
                    continue
                name = m.group(m.lastindex or 1).decode()
                write = rx is READ_RES[0] and bool(WRITE_AFTER.match(data, m.end()))
                found.append(Read(name, lines.at(m.start()), "write" if write else "read"))
    compares: list[Choice] = []
    for m in COMPARE_RE.finditer(data):
        op = m.start() - 1  # where the operator starts
        prefix = lines.prefix(op)
        if _in_comment(prefix):
            continue
        subject, before = continued(data, op, prefix)
        if unread(subject):
            # `for attr in ("attention_backend", ...): if getattr(self, attr) == "v"`: each
            # flag named; the site is cited once, for the first that accepts the value.
            for name in _looped_getattr(data, op, subject):
                no = lines.cite(op, before)
                compares.append(Choice(m.group(2).decode(), no, name, "compare"))
            continue
        no = lines.cite(op, before)
        compares.append(Choice(m.group(2).decode(), no, compared_name(subject), "compare"))
    contains: list[Choice] = []
    for m in finditer_at(CONTAINS_RE, data, lines.index.places(IN_PLACES_RE)):
        if data[m.start() - 1 : m.start()] != b" ":
            continue
        open_at = m.end() - 1
        values = _string_items(data, open_at)
        if not values:
            continue
        at = m.start() - 1  # the space
        subject, before = continued(data, at, lines.prefix(at))
        if unread(subject):
            continue
        tail = compared_name(subject)
        no = lines.cite(at, before)
        for value in values:
            contains.append(Choice(value, no, tail, "contains"))
    is_calls: list[Choice] = []
    enum_refs: list[EnumRef] = []
    if b"." in data:
        # `.is_x()` calls and `.MEMBER`s in one pass, then each as its own pass cited them
        calls: list[re.Match[bytes]] = []
        members: list[re.Match[bytes]] = []
        for m in DOT_RE.finditer(data):
            (calls if m.lastindex == 1 else members).append(m)
        for m in calls:
            tail = subject_tail(lines.prefix(m.start()))
            is_calls.append(Choice(m.group(1).decode(), lines.at(m.start()), tail, "is_call"))
        for m in members:
            if data[m.start() - 1 : m.start()] not in WORD_BYTES:
                continue  # `Class.MEMBER` needs a name just before the dot
            cls = _class_tail(lines.prefix(m.start()))
            if cls and not cls.isupper():
                enum_refs.append(EnumRef(cls, m.group(2).decode(), lines.at(m.start())))
    return Found(reads, compares, contains, is_calls, enum_refs)


def _class_tail(prefix: str) -> str:
    """What `([A-Z][A-Za-z0-9_]*)$` finds in `prefix` (or ""): from the first capital of
    the name that ends it. Found from the end: a search would try every offset of the line."""
    name = NAME_END_RE.match(prefix[::-1]).group()[::-1]  # type: ignore[union-attr]
    first = UPPER_RE.search(name)
    return name[first.start() :] if first else ""


def _string_items(data: bytes, open_at: int) -> list[str]:
    """The strings of a literal `("a", "b")` / `["a"]` / `{"a"}` at `open_at`, else []."""
    close = data.find(bytes([CLOSING[data[open_at]]]), open_at, open_at + 800)
    if close < 0:
        return []
    body = data[open_at + 1 : close]
    if b"#" in body:
        body = COMMENT_RE.sub(b"", body)
    items = [item for item in body.split(b",") if item.strip()]
    values = []
    for item in items:
        m = STRING_ITEM_RE.match(item)
        if not m:
            return []
        values.append(m.group(2).decode())
    return values


def scan_enums(data: bytes) -> list[dict[str, Any]]:
    """Enum classes (string or int valued) with members and `is_x()` helper methods."""
    enums = []
    padded = b"\n" + data
    for m in ENUM_CLASS_RE.finditer(padded):
        if b"Enum" not in m.group(2):
            continue
        start_line = padded.count(b"\n", 0, m.start() + 1)  # 1-based line of `class`
        end = BLOCK_END_RE.search(padded, m.end())
        parsed = _enum_block(padded[m.start() + 1 : end.start() if end else len(padded)])
        if parsed is None:
            continue
        name, members, methods, end_line, by_name, str_values = parsed
        enums.append(
            {
                "name": name,
                "line": start_line,
                "end_line": start_line + end_line - 1,
                "members": [
                    {"name": n, "value": _fresh(v), "line": start_line + no - 1}
                    | ({"auto": True} if auto else {})
                    for n, v, no, auto in members
                ],
                "is_methods": dict(methods),
                "by_name": by_name or _subscripted(padded, name),
                "str_values": str_values,
            }
        )
    return enums


def _subscripted(data: bytes, name: str) -> bool:
    """Whether code of the file looks a member of enum `name` up by name, `Name[x]`
    (`return EplbAlgorithm[raw_algorithm]` in a function after the class): a find of the
    name in the blobs that define it, not a pass over every blob. A comment or a string
    mentioning it is no lookup."""
    return next(_code_finds(data, name.encode() + b"["), None) is not None


def _code_finds(
    data: bytes, key: bytes, docstrings: Callable[[], list[tuple[int, int]]] | None = None
) -> Iterator[int]:
    """Offsets of `key` in code: not inside a longer name, a comment, a string, an f-string
    or a docstring (the docstrings found once, at the first offset that needs them, by
    `docstrings` when given: docstring_spans(data) kept for the file's other scans)."""
    spans: list[tuple[int, int]] | None = None
    at = data.find(key)
    while at >= 0:
        start = data.rfind(b"\n", 0, at) + 1
        prefix = data[start:at].decode("utf-8", "replace")
        if data[at - 1 : at] not in WORD_BYTES and line_state(prefix) == "code":
            if spans is None:
                spans = docstrings() if docstrings is not None else docstring_spans(data)
            if not in_spans(spans, at):
                yield at
        at = data.find(key, at + len(key))


BLOCK_END_RE = re.compile(rb"\n(?=[^\s#])")


def _fresh(value: Any) -> Any:
    """A copy of a cached member value that a caller could change (a list or dict)."""
    return value if isinstance(value, (str, int, float, type(None))) else copy.deepcopy(value)


@lru_cache(maxsize=512)  # an enum class block recurs unchanged in most versions of its file
def _enum_block(
    block: bytes,
) -> tuple[str, tuple[Any, ...], tuple[Any, ...], int, bool, bool] | None:
    """(name, ((member, value, line in block, auto()), ...), ((is_x, member), ...), end line in
    block, whether a method looks members up by name, whether it is a str enum whose members
    are all string literals) of an enum class block with members, else None."""
    try:
        tree = ast.parse(block.decode("utf-8", "replace"))
    except (SyntaxError, *PARSE_FAILURES):
        return None
    cls = tree.body[0]
    if not isinstance(cls, ast.ClassDef):
        return None
    members = []
    methods: dict[str, str] = {}
    by_name = False
    all_str = True  # every member's value a string literal
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            if isinstance(target, ast.Name) and not target.id.startswith("_"):
                value = literal(stmt.value)
                all_str = all_str and isinstance(value, str)
                auto = False
                if value is NOT_LITERAL:
                    src = ast.unparse(stmt.value)
                    # auto(): the member's lower-case name stands for its value when choices
                    # are matched (what a StrEnum gives; a plain Enum numbers them), marked
                    # so that pages say `auto()` rather than a value the code never wrote
                    auto = src in ("auto()", "enum.auto()")
                    value = target.id.lower() if auto else src
                members.append((target.id, value, stmt.lineno, auto))
        elif isinstance(stmt, ast.FunctionDef) and stmt.name.startswith("is_"):
            # `def is_x(self): return self == Cls.MEMBER` names the member it tests.
            for sub in ast.walk(stmt):
                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name):
                    if sub.value.id == cls.name:
                        methods[stmt.name[3:]] = sub.attr
                        break
        if isinstance(stmt, ast.FunctionDef) and not by_name:
            # `def from_string(cls, name): return cls[name.upper()]`: a user's string names
            # a member, so the member names are the values a flag holding it takes.
            by_name = any(
                isinstance(sub, ast.Subscript)
                and isinstance(sub.value, ast.Name)
                and sub.value.id in ("cls", cls.name)
                for sub in ast.walk(stmt)
            )
    if not members:
        return None
    # `class ModelImpl(str, Enum)` / StrEnum with `AUTO = "auto"`: the values are the strings
    # the code compares a flag with (an auto() value is a guess, so none may be one).
    str_values = all_str and any(ast.unparse(b) in STR_ENUM_BASES for b in cls.bases)
    return (
        cls.name,
        tuple(members),
        tuple(methods.items()),
        cls.end_lineno or 1,
        by_name,
        str_values,
    )


STR_ENUM_BASES = frozenset({"str", "StrEnum", "enum.StrEnum"})
