"""The source view: a cited file at a version, from the stored blobs, highlighted, with line
anchors, the cited sites marked in the gutter, and flag dests, option strings and choice
values linked to their pages (Elixir-style)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response
from markupsafe import Markup
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from app.deps import SessionDep
from app.highlight import Ref, blob_lines, refs, source_body, source_lines
from app.templating import render
from app.views.common import errors, page_context
from kb.cache import Cache
from kb.contract import SourceFile
from kb.queries import (
    NotFound,
    backend_url,
    did_you_mean,
    flag_url,
    get_version,
    session_stamp,
    version_file_sha,
    version_paths,
)
from kb.schema import ChoiceSite, ConstraintSite, Flag, UsageSite, Version, loads

router = APIRouter()

# Whitelist: repository-relative paths of ordinary characters, no "..", no leading "/".
PATH_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+@-]*(/[A-Za-z0-9_][A-Za-z0-9_.+@-]*)*$")
MAX_PATH = 400


def check_path(session: Session, version: Version, path: str) -> str:
    """The blob sha of a stored path, or a 404 naming the closest stored paths."""
    ok = len(path) <= MAX_PATH and PATH_RE.match(path) and ".." not in path.split("/")
    sha = version_file_sha(session, version, path) if ok else None
    if sha is None:
        raise NotFound(
            "path",
            path,
            f"{path[:200]!r} is not a stored file of {version.name}.",
            did_you_mean(path, version_paths(session, version)),
            version=version.name,
        )
    return sha


def file_marks(session: Session, version: Version, path: str) -> list[dict[str, Any]]:
    """What the knowledge base cites in a file: [{"line", "end_line", "what", "label", "url"}]."""
    marks: list[dict[str, Any]] = []
    where_flag = (Flag.version_id == version.id, Flag.path == path)
    for name, line, end in session.exec(
        select(Flag.name, Flag.line, Flag.end_line).where(*where_flag)
    ):
        marks.append(
            {
                "line": line,
                "end_line": end,
                "what": "flag",
                "label": f"defines {name}",
                "url": flag_url(version, name),
            }
        )
    for kind, function, line, end in session.exec(
        select(
            ConstraintSite.kind,
            ConstraintSite.function,
            ConstraintSite.line,
            ConstraintSite.end_line,
        ).where(ConstraintSite.version_id == version.id, ConstraintSite.path == path)
    ):
        marks.append(
            {
                "line": line,
                "end_line": end,
                "what": "constraint",
                "label": f"{kind} in {function}",
                "url": "",
            }
        )
    for dest, access, line in session.exec(
        select(UsageSite.dest, UsageSite.access, UsageSite.line).where(
            UsageSite.version_id == version.id, UsageSite.path == path
        )
    ):
        marks.append(
            {
                "line": line,
                "end_line": line,
                "what": "usage",
                "label": f"{access}s {dest}",
                "url": "",
            }
        )
    for value, flag, line, above in session.exec(
        select(ChoiceSite.value, ChoiceSite.flag, ChoiceSite.line, ChoiceSite.above).where(
            ChoiceSite.version_id == version.id, ChoiceSite.path == path
        )
    ):
        marks.append(
            {  # from where the compared expression starts, as the site is cited
                "line": line - above,
                "end_line": line,
                "what": "choice",
                "label": f"handles {value!r}" + (f" of {flag}" if flag else " (ambiguous)"),
                "url": backend_url(version, flag, value) if flag else "",
            }
        )
    # A total order (the database returns ties in any order; PostgreSQL and SQLite differ).
    return sorted(marks, key=lambda m: (m["line"], m["what"], m["label"], m["end_line"], m["url"]))


def link_maps(session: Session, version: Version) -> LinkMaps:
    """What an identifier or a string literal of the version's code may link to."""
    return _maps_cache.get_or_make(
        version.id, lambda: _link_maps(session, version), session_stamp(session)
    )


class LinkMaps(NamedTuple):
    dests: dict[str, str]  # ServerArgs field or argparse dest -> flag page
    options: dict[str, str]  # every option string (aliases, --no-x) -> flag page
    choices: dict[str, list[str]]  # choice value -> the flags accepting it
    owner: dict[str, str]  # choices constant or dest -> its flag ("FOO_CHOICES" -> "--foo")


_maps_cache: Cache[LinkMaps] = Cache(16)  # version id -> its link maps, under the KB stamp


def _link_maps(session: Session, version: Version) -> LinkMaps:
    maps = LinkMaps({}, {}, {}, {})
    cols: list[Any] = [Flag.name, Flag.dest, Flag.argparse_dest, Flag.aliases]
    cols += [Flag.negation, Flag.choices, Flag.choices_const]
    query = sa_select(*cols).where(col(Flag.version_id) == version.id)
    # By name, in Python: the first flag of a shared dest wins, whatever the database's
    # collation (kb/order.py).
    rows = sorted(session.connection().execute(query), key=lambda r: r[0])
    for name, dest, argparse_dest, aliases, negation, choices, const in rows:
        url = flag_url(version, name)
        for key in (dest, argparse_dest):
            if key:
                maps.dests.setdefault(key, url)
        for key in (const, dest):
            if key:
                maps.owner.setdefault(key, name)
        for option in [name, negation, *(loads(aliases) or [])]:
            if option:
                maps.options.setdefault(option, url)
        for value in loads(choices) or []:
            if isinstance(value, str):
                maps.choices.setdefault(value, []).append(name)
    return maps


def linker(session: Session, version: Version, path: str) -> Callable[[Ref, int], str | None]:
    """`link(ref, line)`: the page a ref of this file links to, if any. A string is an option
    (its flag page) or a choice value: the flag the knowledge base attributes the site on
    that line to, else the flag whose choices constant or field it is written in
    (`LORA_BACKEND_CHOICES = ["triton", ...]`), else the one flag that accepts the value (a
    value several flags accept, such as "auto", stays unlinked elsewhere)."""
    maps = link_maps(session, version)
    found = session.exec(
        select(ChoiceSite.value, ChoiceSite.flag, ChoiceSite.line).where(
            ChoiceSite.version_id == version.id,
            ChoiceSite.path == path,
            ChoiceSite.flag.is_not(None),  # type: ignore[union-attr]
        )
    )
    # (a value handled for two flags on one line links to the first by name, on any database)
    sites: dict[tuple[int, str], str | None] = {}
    for value, flag, line in sorted(found, key=lambda r: (r[2], r[0], r[1] or "")):
        sites.setdefault((line, value), flag)

    def link(ref: Ref, line: int) -> str | None:
        if ref.kind == "dest":
            return maps.dests.get(ref.key)
        if ref.key in maps.options:
            return maps.options[ref.key]
        flags = maps.choices.get(ref.key, [])
        flag = sites.get((line, ref.key))
        if flag is None and maps.owner.get(ref.scope) in flags:
            flag = maps.owner[ref.scope]
        if flag is None:
            flag = flags[0] if len(flags) == 1 else None
        return backend_url(version, flag, ref.key) if flag else None

    return link


def file_links(session: Session, version: Version, path: str, sha: str) -> list[dict[str, Any]]:
    """The identifiers of the file that link to a flag or value page: [{"line", "text", "url"}]."""
    lines = source_lines(session, sha, path) or []
    link = linker(session, version, path)
    out = []
    for n, ref in refs(lines):
        url = link(ref, n)
        if url:
            out.append({"line": n, "text": ref.key, "url": url})
    return out


# (version id, path) -> its marks / its answer, under the KB stamp (a re-ingest drops them).
_marks_cache: Cache[list[dict[str, Any]]] = Cache(32)
_file_cache: Cache[SourceFile] = Cache(8)


def cited(session: Session, version: Version, path: str) -> list[dict[str, Any]]:
    """`file_marks`, cached per version and file (the page and its JSON twin share them)."""
    return _marks_cache.get_or_make(
        (version.id, path), lambda: file_marks(session, version, path), session_stamp(session)
    )


def source_file(session: Session, version: Version, path: str) -> SourceFile:
    sha = check_path(session, version, path)

    def make() -> SourceFile:
        return SourceFile.model_validate(
            {
                "version": version.name,
                "path": path,
                "sha": sha,
                "url": f"{version.web_url}/blob/{version.commit}/{path}",
                "text": "\n".join(blob_lines(session, sha) or []),
                "marks": cited(session, version, path),
                "links": file_links(session, version, path, sha),
            }
        )

    return _file_cache.get_or_make((version.id, path), make, session_stamp(session))


def mark_titles(marks: list[dict[str, Any]]) -> dict[int, str]:
    """What is cited on each line where a citation starts, in few words: "defines --x (to
    L130)", "raise in f", "reads a, b", "handles 'x', 'y' of --z". One title a line."""
    parts: dict[int, dict[str, list[str]]] = {}
    for mark in marks:
        line, label = mark["line"], mark["label"]
        if mark["what"] == "usage":  # "reads x" -> group "reads": [x]
            verb, _, rest = label.partition(" ")
            group, item = verb, rest
        elif mark["what"] == "choice" and " of " in label:  # "handles 'x' of --f"
            value, _, flag = label.removeprefix("handles ").rpartition(" of ")
            group, item = f"of {flag}", value
        else:  # "raise in ServerArgs._handle_x" -> "raise in _handle_x (to L130)"
            end = mark["end_line"]
            verb, _, where = label.partition(" in ")
            label = f"{verb} in {where.rsplit('.', 1)[-1]}" if where else label
            group, item = label + (f" (to L{end})" if end > line else ""), ""
        items = parts.setdefault(line, {}).setdefault(group, [])
        if item and item not in items:
            items.append(item)
    titles = {}
    for line, groups in parts.items():
        words = []
        for group, items in groups.items():
            if group.startswith("of "):
                words.append(f"handles {', '.join(items)} {group}")
            else:
                words.append(f"{group} {', '.join(items)}" if items else group)
        titles[line] = "; ".join(words)
    return titles


class Body(NamedTuple):
    html: Markup
    lines: int
    cited: int  # lines where a citation starts


# version id + path -> the rendered lines, under the KB stamp. A big file's body is ~0.5 MB.
_body_cache: Cache[Body] = Cache(12)


def source_body_for(session: Session, version: Version, path: str, sha: str) -> Body:
    """The source view's lines, built once per version and file: highlighted lines (cached
    per blob) with this version's links and citation marks."""

    def make() -> Body:
        lines = source_lines(session, sha, path) or []
        marks = mark_titles(cited(session, version, path))
        link = linker(session, version, path)
        # Links relative to the page when shorter ("../../../flags/--x" from
        # /v/V/source/a/b/c.py): a thousand links on a big file.
        base = f"/v/{quote(version.name, safe='')}/"
        up = "../" * (path.count("/") + 1)

        def relative(ref: Ref, n: int) -> str | None:
            url = link(ref, n)
            if url and len(up) < len(base) and url.startswith(base):
                return up + url[len(base) :]
            return url

        html = source_body(lines, relative, marks)
        return Body(html, len(lines), len(marks))

    return _body_cache.get_or_make((version.id, path), make, session_stamp(session))


@router.get("/v/{version}/source/{path:path}", include_in_schema=False)
def source_page(request: Request, session: SessionDep, version: str, path: str) -> Response:
    found = get_version(session, version)
    data = source_file(session, found, path)  # cached: the JSON twin's facts
    context = {
        **page_context(session, found, f"source/{path}"),
        "data": data,
        "body": source_body_for(session, found, path, data.sha),
    }
    return render(request, "source.html", context)


@router.get("/api/v/{version}/source/{path:path}", responses=errors(404))
def api_source(session: SessionDep, version: str, path: str) -> SourceFile:
    """A stored file of a version (only files the knowledge base cites), with what it cites
    on each line and the identifiers that link to a flag or value page."""
    return source_file(session, get_version(session, version), path)
