"""Source text of cited files, highlighted with pygments, cached per blob sha.

A blob sha names immutable content, so the decompressed text and its highlighted lines can be
cached forever (bounded by an LRU). Pygments' HTML formatter closes its spans at each line end,
so the output splits into self-contained lines that can be shown one by one as excerpts.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer, TextLexer, get_lexer_for_filename
from pygments.util import ClassNotFound
from sqlmodel import Session

from kb.cache import Cache
from kb.queries import version_file_sha
from kb.schema import Blob, Version, unpack_text

# Files this big are shown as plain text: highlighting them would stall the page.
MAX_HIGHLIGHT = 2_000_000


_text_cache: Cache[list[str]] = Cache(128)  # blob sha -> lines
_html_cache: Cache[list[Markup]] = Cache(64)  # blob sha + file kind -> highlighted lines


def _lexer(path: str) -> Any:
    if path.endswith(".py"):
        return PythonLexer(stripnl=False, ensurenl=False)
    try:
        return get_lexer_for_filename(path, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return TextLexer(stripnl=False, ensurenl=False)


def blob_lines(session: Session, sha: str) -> list[str] | None:
    """The blob's text as lines (index 0 = line 1), or None when the blob is missing."""
    cached = _text_cache.get(sha)
    if cached is not None:
        return cached
    blob = session.get(Blob, sha)
    if blob is None:
        return None
    lines = unpack_text(blob.text).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    _text_cache.put(sha, lines)
    return lines


def highlighted_lines(session: Session, sha: str, path: str) -> list[Markup] | None:
    """The blob's lines as safe HTML (pygments output escapes the source text)."""
    key = f"{sha}:{path.rsplit('.', 1)[-1]}"
    cached = _html_cache.get(key)
    if cached is not None:
        return cached
    lines = blob_lines(session, sha)
    if lines is None:
        return None
    text = "\n".join(lines)
    if len(text) > MAX_HIGHLIGHT:
        out = [Markup.escape(line) for line in lines]
    else:
        html = highlight(text + "\n", _lexer(path), HtmlFormatter(nowrap=True))
        out = [Markup(line) for line in html.split("\n")[: len(lines)]]
        out += [Markup("")] * (len(lines) - len(out))
    _html_cache.put(key, out)
    return out


_rows_cache: Cache[list[str]] = Cache(32)  # blob sha + file kind -> unmarked <tr> rows


def _row(n: int, html: str, mark: str = "") -> str:
    cited = ' class="cited"' if mark else ""
    return (
        f'<tr id="L{n}"{cited}><td class="ln"><a href="#L{n}">{n}</a></td>'
        f'<td class="mk">{mark}</td><td class="src">{html}</td></tr>\n'
    )


def source_table(
    session: Session, sha: str, path: str, labels: dict[int, list[str]]
) -> tuple[Markup, int] | None:
    """The <tbody> rows of the source view as one safe string, and the number of lines.

    The rows without a mark are built once per blob and reused; only the marked rows (a few
    dozen of a file's thousands) are built per request. A per-line template loop spent
    most of a 1.6 MB page's time in Jinja; this is a list copy and a join.
    """
    key = f"{sha}:{path.rsplit('.', 1)[-1]}"
    rows = _rows_cache.get(key)
    if rows is None:
        lines = highlighted_lines(session, sha, path)
        if lines is None:
            return None
        rows = [_row(n, html) for n, html in enumerate(lines, 1)]
        _rows_cache.put(key, rows)
    out = list(rows)
    html = highlighted_lines(session, sha, path) or [] if labels else []
    for n, names in labels.items():
        if 1 <= n <= len(html):
            title = Markup.escape("; ".join(names))
            out[n - 1] = _row(n, html[n - 1], f'<span class="mark" title="{title}">●</span>')
    return Markup("".join(out)), len(rows)


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
