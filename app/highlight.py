"""Source text of cited files, highlighted compactly, cached per blob sha.

A blob sha names immutable content, so its text and its highlighted lines are cached forever
(bounded LRUs). The markup is small on purpose: the source view of a 5,600-line file is one
`<li id=L…>` per line and one `<span class="…">` per coloured token, in the few colours
the page shows (comment, string, number, keyword, builtin, function, class, decorator);
whitespace, operators and plain names are bare text. Python is split by one compiled regular
expression (the scan runs in C; pygments' lexer took 10x as long on `server_args.py`), other
files by pygments with its token types folded into the same classes. Spans never cross a
line end, so each line is self-contained (excerpts show a few lines on their own).

Identifiers the page may link (Elixir-style) stay open in the cached lines: a flag dest read
from `server_args.x`, `args.x` (or `self.x` in the file that defines the flags) and a string
literal that may be an option or a choice value. Which of them are links depends on the
version, so `source_body` resolves them per version (and caches the result per version).
"""

from __future__ import annotations

import builtins
import html
import keyword
import re
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from markupsafe import Markup
from pygments.lexers import get_lexer_for_filename
from pygments.token import Comment, Generic, Keyword, Name, Number, Operator, String, _TokenType
from pygments.util import ClassNotFound
from sqlmodel import Session

from kb.cache import Cache
from kb.queries import version_file_sha
from kb.schema import Version, blob_text

# Files this big are shown as plain text: highlighting them would stall the page.
MAX_HIGHLIGHT = 2_000_000


class Ref(NamedTuple):
    """A token that may become a link: `kind` "dest" (an attribute name) or "str" (a string
    literal whose unquoted text is `key`); `text` is its escaped text, `cls` its class.
    `scope` is the name a string is assigned to, or inside the brackets of
    (`FOO_CHOICES = ["a", "b"]`, `field: A[Literal["a"], ...] = "a"`)."""

    kind: str
    key: str
    text: str
    cls: str = ""
    scope: str = ""

    @property
    def html(self) -> str:
        return f"<span class={self.cls}>{self.text}</span>" if self.cls else self.text


Line = str | tuple[str | Ref, ...]  # a line's HTML, or its pieces when it holds refs


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


def _attr(text: str) -> str:
    """Text for a double-quoted attribute value."""
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def _span(cls: str, text: str) -> str:
    # Unquoted: a class is one short word, and 2 bytes a token are 15 KB of a big file.
    return f"<span class={cls}>{_esc(text)}</span>" if cls else _esc(text)


# --- Python ------------------------------------------------------------------------------

_PY = re.compile(
    r"""
    (?P<c>\#[^\n]*)
  | (?P<s>(?:\b[rRbBuUfF]{1,2})?
      (?: \"\"\"(?:[^"\\]|\\[\s\S]|"(?!""))*(?:\"\"\"|\Z)
        | '''(?:[^'\\]|\\[\s\S]|'(?!''))*(?:'''|\Z)
        | "(?:[^"\\\n]|\\[\s\S])*"?
        | '(?:[^'\\\n]|\\[\s\S])*'? ))
  | (?P<d>^[ \t]*@[^\W\d][\w.]*)
  | (?P<m>(?<![\w.])\.?\d(?:[\w.]|(?<=[eE])[+-])*)
  | (?P<n>[^\W\d]\w*)
    """,
    re.VERBOSE | re.MULTILINE,
)
_KEYWORDS = frozenset(keyword.kwlist)
_BUILTINS = frozenset(n for n in dir(builtins) if not n.startswith("_")) - _KEYWORDS
# A string literal worth resolving: one plain word, no escapes ("fa3", "--tp-size").
_REF_STR = re.compile(r"""^(["'])([\w.:+/-]{1,80})\1$""")
# What in the text between tokens moves the statement tracking: brackets, line ends, and an
# `=` (not `==`, `<=`...) or `:` that makes the statement's first name a target.
_GAP_EVENTS = re.compile(r"[()\[\]{}\n]|(?<![=!<>;])=(?!=)|:")  # `;=`: the end of `&lt;=`
# Objects whose attributes are flag dests wherever they are read.
RECEIVERS = frozenset({"server_args", "args"})


def python_lines(text: str, receivers: frozenset[str] = RECEIVERS) -> list[Line]:
    """The highlighted lines of Python source. An attribute read `recv.name` with `recv` in
    `receivers` and a plain string literal become `Ref`s.

    The text is escaped once, before the scan (one C-level pass instead of one call a
    token): `&`, `<`, `>` become entities the scan treats as plain text."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    lines: list[Line] = []
    cur: list[str | Ref] = []
    has_ref = False

    def end_line() -> None:
        nonlocal cur, has_ref
        lines.append(tuple(cur) if has_ref else "".join(cur))  # type: ignore[arg-type]
        cur, has_ref = [], False

    def plain(chunk: str) -> None:
        if "\n" not in chunk:
            cur.append(chunk)
            return
        parts = chunk.split("\n")
        for part in parts[:-1]:
            cur.append(part)
            end_line()
        cur.append(parts[-1])

    def colored(cls: str, chunk: str) -> None:
        parts = chunk.split("\n")
        for i, part in enumerate(parts):
            if i:
                end_line()
            if part:
                cur.append(f"<span class={cls}>{part}</span>")

    pos = 0
    prev = ""  # the previous name, when only spaces (or one ".") lie between
    prev_end = -1
    # The statement: its first name (`head`), whether it is assigned or annotated, bracket
    # depth, and `scope` (the head, while inside brackets opened after its `=` or `:`).
    head, head_open, assigned, depth, scope = "", True, False, 0, ""
    for match in _PY.finditer(text):
        start, end = match.span()
        gap = text[pos:start]
        if gap:
            plain(gap)
        if gap and gap != " " and gap != ".":  # the commonest gaps move nothing
            for event in _GAP_EVENTS.findall(gap):
                if event == "\n":
                    if depth == 0:
                        head, head_open, assigned = "", True, False
                elif event in "=:":
                    assigned = assigned or (depth == 0 and bool(head))
                elif event in "([{":
                    if depth == 0:
                        scope = head if assigned else ""
                    depth += 1
                else:
                    depth = max(0, depth - 1)
                    scope = scope if depth else ""
        kind = match.lastgroup
        token = match.group()
        if kind == "n" and head_open:
            head, head_open = token, False
        if kind == "n":
            if token in _KEYWORDS:
                cls = "k"
            elif prev in ("def", "class") and not gap.strip():
                cls = "nf" if prev == "def" else "nc"
            elif prev in receivers and gap == "." and prev_end == start - 1:
                cur.append(Ref("dest", token, token))  # a name needs no escaping
                has_ref = True
                prev, prev_end, pos = token, end, end
                continue
            else:  # a builtin when called: `type=str` in a call is no builtin worth colour
                cls = "nb" if token in _BUILTINS and text[end : end + 1] == "(" else ""
            cur.append(f"<span class={cls}>{token}</span>" if cls else token)
            prev, prev_end = token, end
        else:
            prev = ""
            if kind == "s" and (ref := _REF_STR.match(token)):
                where = scope if depth else (head if assigned else "")
                cur.append(Ref("str", ref.group(2), token, "s", where))
                has_ref = True
            else:
                colored({"c": "c", "s": "s", "d": "nd", "m": "m"}[kind or ""], token)
        pos = end
    if pos < len(text):
        plain(text[pos:])
    if cur:
        end_line()
    return lines


# --- other files: pygments, folded into the same classes ----------------------------------

_FOLD: list[tuple[_TokenType, str]] = [
    (Comment, "c"),
    (String, "s"),
    (Number, "m"),
    (Keyword, "k"),
    (Operator.Word, "k"),
    (Name.Builtin, "nb"),
    (Name.Function, "nf"),
    (Name.Class, "nc"),
    (Name.Decorator, "nd"),
    (Name.Tag, "nt"),
    (Name.Attribute, "na"),
    (Generic.Heading, "gh"),  # Markdown
    (Generic.Subheading, "gu"),
    (Generic.Emph, "ge"),
    (Generic.Strong, "gs"),
]


def _fold(ttype: _TokenType) -> str:
    for parent, cls in _FOLD:
        if ttype in parent:
            return cls
    return ""


def lexed_lines(text: str, path: str) -> list[Line]:
    """Highlighted lines of a file that is not Python (Markdown, YAML, shell...)."""
    try:
        lexer = get_lexer_for_filename(path, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return [_esc(line) for line in text.split("\n")]
    lines: list[Line] = []
    cur: list[str] = []
    for ttype, value in lexer.get_tokens(text):
        cls = _fold(ttype)
        parts = value.split("\n")
        for i, part in enumerate(parts):
            if i:
                lines.append("".join(cur))
                cur = []
            if part:
                cur.append(_span(cls, part))
    lines.append("".join(cur))
    return lines


# --- caches ------------------------------------------------------------------------------

_text_cache: Cache[list[str]] = Cache(128)  # blob sha -> lines
_lines_cache: Cache[list[Line]] = Cache(32)  # blob sha + path -> highlighted lines


def blob_lines(session: Session, sha: str) -> list[str] | None:
    """The blob's text as lines (index 0 = line 1), or None when the blob is missing."""

    def read() -> list[str] | None:
        text = blob_text(session, sha)
        if text is None:
            return None
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return lines

    return _text_cache.get_or_find(sha, read)


def flag_file(path: str) -> bool:
    """The file that defines the flags, where `self.x` reads a flag."""
    return path.endswith("server_args.py")


def source_lines(session: Session, sha: str, path: str) -> list[Line] | None:
    """The blob's highlighted lines (one per text line), with its refs left open."""

    def highlight() -> list[Line] | None:
        text_lines = blob_lines(session, sha)
        return None if text_lines is None else _highlighted(text_lines, path)

    return _lines_cache.get_or_find((sha, path), highlight)


def _highlighted(text_lines: list[str], path: str) -> list[Line]:
    text = "\n".join(text_lines)
    if len(text) > MAX_HIGHLIGHT:
        out: list[Line] = [_esc(line) for line in text_lines]
    elif path.endswith((".py", ".pyi")):
        receivers = RECEIVERS | {"self"} if flag_file(path) else RECEIVERS
        out = python_lines(text, receivers)
    else:
        out = lexed_lines(text, path)
    # One entry per text line, whatever the lexer did with a trailing newline.
    return out[: len(text_lines)] + [""] * (len(text_lines) - len(out))


def plain_html(line: Line) -> str:
    """A line's HTML with its refs shown unlinked."""
    if isinstance(line, str):
        return line
    return "".join(p if isinstance(p, str) else p.html for p in line)


def linked_html(line: Line, link: Callable[[Ref, int], str | None], n: int) -> str:
    """A line's HTML with each ref that `link(ref, line_number)` gives a URL for linked."""
    if isinstance(line, str):
        return line
    out = []
    for piece in line:
        if isinstance(piece, str):
            out.append(piece)
        else:
            url = link(piece, n)
            if url is None:
                out.append(piece.html)
            else:  # the token's class on the link itself: one element, not two
                cls = f" class={piece.cls}" if piece.cls else ""
                out.append(f'<a{cls} href="{_attr(url)}">{piece.text}</a>')
    return "".join(out)


_plain_cache: Cache[list[Markup]] = Cache(32)  # blob sha + path -> lines without links


def highlighted_lines(session: Session, sha: str, path: str) -> list[Markup] | None:
    """The blob's lines as safe HTML (the highlighter escapes the source text)."""

    def plain() -> list[Markup] | None:
        lines = source_lines(session, sha, path)
        return None if lines is None else [Markup(plain_html(line)) for line in lines]

    return _plain_cache.get_or_find((sha, path), plain)


def source_body(
    lines: list[Line], link: Callable[[Ref, int], str | None], marks: dict[int, str]
) -> Markup:
    """The lines of the source view as one safe string, the items of an `<ol>`:
    `<li id=L12>…` each (an `li` needs no end tag; its number is drawn by CSS). A line in
    `marks` is cited: its class marks it and its title says what is cited there."""
    out = []
    for n, line in enumerate(lines, 1):
        title = marks.get(n)
        head = f"<li id=L{n}>" if title is None else f'<li id=L{n} class=mk title="{_attr(title)}">'
        out.append(head + linked_html(line, link, n))
    return Markup("".join(out))


def file_lines(session: Session, version: Version, path: str) -> list[Markup] | None:
    sha = version_file_sha(session, version, path)
    return None if sha is None else highlighted_lines(session, sha, path)


def excerpt(
    session: Session, version: Version, path: str, line: int, end_line: int, context: int = 2
) -> list[dict[str, Any]]:
    """Lines around a citation: [{"line", "html", "hit"}]; empty when the file is not stored."""
    lines = file_lines(session, version, path)
    if not lines:
        return []
    end = max(line, end_line)
    first = max(1, line - context)
    last = min(len(lines), end + context)
    return [
        {"line": n, "html": lines[n - 1], "hit": line <= n <= end} for n in range(first, last + 1)
    ]


def cited_text(session: Session, version: Version, path: str, line: int, end_line: int) -> str:
    """The cited lines as plain text (for the JSON API); empty when the file is not stored."""
    sha = version_file_sha(session, version, path)
    lines = blob_lines(session, sha) if sha else None
    if not lines:
        return ""
    return "\n".join(lines[max(0, line - 1) : max(line, end_line)])


def refs(lines: Iterable[Line]) -> Iterable[tuple[int, Ref]]:
    """Every ref of the lines with its line number."""
    for n, line in enumerate(lines, 1):
        if not isinstance(line, str):
            for piece in line:
                if isinstance(piece, Ref):
                    yield n, piece
