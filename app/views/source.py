"""The source view: a cited file at a version, from the stored blobs, highlighted, with line
anchors and the cited sites marked in the gutter."""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from markupsafe import Markup
from sqlmodel import Session, select

from app.deps import SessionDep
from app.highlight import blob_lines, source_table
from app.templating import render
from app.views.common import errors, page_context
from kb.contract import SourceFile
from kb.queries import (
    NotFound,
    backend_url,
    did_you_mean,
    flag_url,
    get_version,
    version_file_sha,
    version_paths,
)
from kb.schema import ChoiceSite, ConstraintSite, Flag, UsageSite, Version

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
    for value, flag, line in session.exec(
        select(ChoiceSite.value, ChoiceSite.flag, ChoiceSite.line).where(
            ChoiceSite.version_id == version.id, ChoiceSite.path == path
        )
    ):
        marks.append(
            {
                "line": line,
                "end_line": line,
                "what": "choice",
                "label": f"handles {value!r}" + (f" of {flag}" if flag else " (ambiguous)"),
                "url": backend_url(version, flag, value) if flag else "",
            }
        )
    # A total order (the database returns ties in any order; PostgreSQL and SQLite differ).
    return sorted(marks, key=lambda m: (m["line"], m["what"], m["label"], m["end_line"], m["url"]))


def source_file(session: Session, version: Version, path: str) -> SourceFile:
    sha = check_path(session, version, path)
    return SourceFile.model_validate(
        {
            "version": version.name,
            "path": path,
            "sha": sha,
            "url": f"{version.web_url}/blob/{version.commit}/{path}",
            "text": "\n".join(blob_lines(session, sha) or []),
            "marks": file_marks(session, version, path),
        }
    )


@router.get("/v/{version}/source/{path:path}", include_in_schema=False)
def source_page(request: Request, session: SessionDep, version: str, path: str) -> Response:
    found = get_version(session, version)
    data = source_file(session, found, path)
    labels: dict[int, list[str]] = {}
    for mark in data.marks:
        for n in range(mark.line, max(mark.line, mark.end_line) + 1):
            labels.setdefault(n, []).append(mark.label)
    # The highlighted rows of `data.text` (cached per blob: presentation only).
    rows, count = source_table(session, data.sha, path, labels) or (Markup(""), 0)
    context = {
        **page_context(session, found, f"source/{path}"),
        "data": data,
        "rows": rows,
        "line_count": count,
    }
    return render(request, "source.html", context)


@router.get("/api/v/{version}/source/{path:path}", responses=errors(404))
def api_source(session: SessionDep, version: str, path: str) -> SourceFile:
    """A stored file of a version (only files the knowledge base cites), with what it cites
    on each line."""
    return source_file(session, get_version(session, version), path)
