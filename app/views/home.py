"""Home (versions), /latest redirects, the version switcher's redirect, /api/versions.

The pattern of every page kind: one builder (`version_list`) makes the typed model of
kb/contract.py; the JSON twin returns it, the HTML page renders the same object."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from sqlmodel import Session
from starlette.exceptions import HTTPException

from app.deps import SessionDep
from app.templating import render
from app.views.common import error_response, errors
from kb.contract import VersionInfo, VersionList
from kb.queries import (
    NotFound,
    flag_counts,
    get_version,
    newest_version,
    ordered_versions,
    version_dict,
)

router = APIRouter()


def version_list(session: Session) -> VersionList:
    counts = flag_counts(session)
    versions = [version_dict(v, counts.get(v.id or 0, 0)) for v in ordered_versions(session)]
    return VersionList.model_validate({"versions": versions})


@router.get("/", include_in_schema=False)
def home(request: Request, session: SessionDep) -> Response:
    data = version_list(session)
    return render(request, "home.html", {"data": data, "newest": data.versions[:1]})


@router.get("/api/versions")
def api_versions(session: SessionDep) -> VersionList:
    """Every ingested version, newest first, with its commit, date and flag count."""
    return version_list(session)


def _latest(session: SessionDep, prefix: str, rest: str, query: str) -> Response:
    page = rest.rstrip("/") or "flags"  # one hop, not a redirect to a trailing-slash URL
    if bad_page(page, query):  # `..%2F..%2Fstatic` arrives decoded: it would leave /v/
        raise HTTPException(404)
    newest = newest_version(session)
    if newest is None:
        raise NotFound("version", "latest", "No version has been ingested yet.")
    url = f"{prefix}/v/{quote(newest.name, safe='')}/{quote(page)}"
    return RedirectResponse(url + (f"?{query}" if query else ""), status_code=302)


@router.get("/latest", include_in_schema=False)
@router.get("/latest/{rest:path}", include_in_schema=False)
def latest(request: Request, session: SessionDep, rest: str = "") -> Response:
    """Copied links must stay pinned: /latest/... redirects to the concrete newest version."""
    return _latest(session, "", rest, request.url.query)


@router.get("/api/latest/{rest:path}", include_in_schema=False)
def api_latest(request: Request, session: SessionDep, rest: str = "") -> Response:
    return _latest(session, "/api", rest, request.url.query)


# A page tail as the pages name it: relative, no dot segments, no scheme, no backslash or
# control character. The redirect stays on this site under /v/ (no open redirect).
MAX_PAGE = 1000
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\\]")


def bad_page(page: str, query: str) -> str | None:
    """Why `page` (and its query) is no page inside a version, or None."""
    if len(page) > MAX_PAGE or len(query) > MAX_PAGE:
        return f"is longer than {MAX_PAGE} characters"
    if page.startswith("/") or _SCHEME.match(page) or _CONTROL.search(page):
        return "is not a relative path"
    if any(segment in ("", ".", "..") for segment in page.split("/")):
        return "has an empty, . or .. segment"
    return None


@router.get("/switch", include_in_schema=False)
def switch(
    request: Request, session: SessionDep, to: str = "", page: str = "flags", query: str = ""
) -> Response:
    """The version switcher's form target: the same page (path, then query) at another
    version. `page` is the path after /v/{version}/; its query (filters, compared values)
    comes apart in `query`, or after a `?` in `page` as links made before `query` had it."""
    version = get_version(session, to)
    page, _, inline = (page or "flags").partition("?")
    query = query or inline
    why = bad_page(page, query)
    if why is not None:
        detail = f"The switcher's page must be a path inside a version (flags/--tp-size): it {why}."
        home = f"/v/{quote(version.name, safe='')}/flags"
        links = [{"name": f"{version.name} flags", "url": home}]
        return error_response(request, 400, detail, links, kind="parameter", name="page")
    # Re-encoded from its pairs: a well-formed query that cannot end the URL early (#);
    # commas stay readable (compare's values=a,b).
    query = urlencode(parse_qsl(query, keep_blank_values=True), safe=",")
    url = f"/v/{quote(version.name, safe='')}/{quote(page)}"
    return RedirectResponse(url + (f"?{query}" if query else ""), status_code=302)


@router.get("/v/{version}", include_in_schema=False)
def version_home(session: SessionDep, version: str) -> Response:
    found = get_version(session, version)
    return RedirectResponse(f"/v/{quote(found.name, safe='')}/flags", status_code=302)


@router.get("/api/v/{version}", responses=errors(404))
def api_version(session: SessionDep, version: str) -> VersionInfo:
    """One version."""
    found = get_version(session, version)
    counts = flag_counts(session)
    return VersionInfo.model_validate(version_dict(found, counts.get(found.id or 0, 0)))
