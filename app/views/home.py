"""Home (versions), /latest redirects, the version switcher's redirect, /api/versions."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from app.deps import SessionDep
from app.templating import render
from kb.queries import (
    NotFound,
    flag_counts,
    get_version,
    newest_version,
    ordered_versions,
    version_dict,
)

router = APIRouter()


def _versions(session: SessionDep) -> list[dict[str, Any]]:
    counts = flag_counts(session)
    return [version_dict(v, counts.get(v.id or 0, 0)) for v in ordered_versions(session)]


@router.get("/", include_in_schema=False)
def home(request: Request, session: SessionDep) -> Response:
    versions = _versions(session)
    return render(request, "home.html", {"versions": versions, "newest": versions[:1]})


@router.get("/api/versions")
def api_versions(session: SessionDep) -> dict[str, Any]:
    return {"versions": _versions(session)}


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


@router.get("/api/v/{version}")
def api_version(session: SessionDep, version: str) -> dict[str, Any]:
    found = get_version(session, version)
    counts = flag_counts(session)
    return version_dict(found, counts.get(found.id or 0, 0))
