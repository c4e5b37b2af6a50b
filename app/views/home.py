"""Home (versions), /latest redirects, the version switcher's redirect, /api/versions.

The pattern of every page kind: one builder (`version_list`) makes the typed model of
kb/contract.py; the JSON twin returns it, the HTML page renders the same object."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from sqlmodel import Session

from app.deps import SessionDep
from app.templating import render
from app.views.common import errors
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
    newest = newest_version(session)
    if newest is None:
        raise NotFound("version", "latest", "No version has been ingested yet.")
    url = f"{prefix}/v/{quote(newest.name, safe='')}/{quote(rest or 'flags')}"
    return RedirectResponse(url + (f"?{query}" if query else ""), status_code=302)


@router.get("/latest", include_in_schema=False)
@router.get("/latest/{rest:path}", include_in_schema=False)
def latest(request: Request, session: SessionDep, rest: str = "") -> Response:
    """Copied links must stay pinned: /latest/... redirects to the concrete newest version."""
    return _latest(session, "", rest, request.url.query)


@router.get("/api/latest/{rest:path}", include_in_schema=False)
def api_latest(request: Request, session: SessionDep, rest: str = "") -> Response:
    return _latest(session, "/api", rest, request.url.query)


@router.get("/switch", include_in_schema=False)
def switch(session: SessionDep, to: str = "", page: str = "flags") -> Response:
    """The version switcher's form target: the same page at another version."""
    version = get_version(session, to)
    page = page.lstrip("/") or "flags"
    return RedirectResponse(f"/v/{quote(version.name, safe='')}/{quote(page)}", status_code=302)


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
