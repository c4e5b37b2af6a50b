"""Search: the shareable /search page, the as-you-type dropdown fragment, /api/search."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response

from app.deps import SessionDep
from app.templating import VARY, render, templates
from app.views.common import QueryInt, error_response, errors
from kb.contract import SearchPage
from kb.queries import NotFound, did_you_mean, get_version, version_names
from kb.search import SearchError, UnknownVersion, get_index, highlight

router = APIRouter()

GROUPS = {
    "flag": "Flags",
    "choice": "Values",
    "member": "Enum members",
    "enum": "Enums",
    "env": "Environment variables",
    "carrier": "Carriers",
    "model": "Models",
    "constraint": "Constraints",
}
DROPDOWN_LIMIT = 8


def db_url_of(app: FastAPI) -> str:
    """The database URL behind the app's read-only engine (where the index lives beside)."""
    explicit = getattr(app.state, "db_url", None)
    if explicit:
        return str(explicit)
    url = app.state.engine.url
    database = url.database or ""
    if url.drivername.startswith("sqlite") and database.startswith("file:"):
        return "sqlite:///" + database.removeprefix("file:")  # the read-only URI form
    return str(url.render_as_string(hide_password=False))


def run_search(
    request: Request, session: SessionDep, q: str, version: str | None, limit: int
) -> SearchPage:
    """Search, raising NotFound (with suggestions) for an unknown version and SearchError
    when the index cannot be opened."""
    if version and version != "all":
        get_version(session, version[:200])
    # The index directory is fixed when the app is created (app.state.index_dir).
    index = get_index(db_url_of(request.app), getattr(request.app.state, "index_dir", None))
    try:
        return SearchPage.model_validate(index.search(q, version or None, max(1, min(limit, 100))))
    except UnknownVersion as exc:  # in the database but not yet in the index
        raise NotFound(
            "version",
            exc.name,
            f"{exc.name!r} is not in the search index yet: run `flagatlas reindex`.",
            did_you_mean(exc.name, exc.known),
        ) from exc


def _grouped(out: SearchPage) -> list[dict[str, Any]]:
    """Results grouped by kind, groups in the order of their best hit (so the first link on
    the page is the top hit), with highlight parts for the template."""
    groups: dict[str, dict[str, Any]] = {}
    for rank, hit in enumerate(out.results):
        r = {
            "hit": hit,
            "rank": rank,
            "name_parts": highlight(hit.name, out.terms),
            "snippet_parts": highlight(hit.snippet, out.terms),
        }
        group = groups.setdefault(hit.kind, {"kind": hit.kind, "label": GROUPS[hit.kind]})
        group.setdefault("results", []).append(r)
    return list(groups.values())


def _unknown_version(request: Request, exc: NotFound, q: str) -> Response:

    links = [
        {"name": name, "url": "/search?" + urlencode({"q": q, "version": name})}
        for name in exc.suggestions
    ] + [{"name": "all versions", "url": "/search?" + urlencode({"q": q, "version": "all"})}]
    return error_response(request, 404, exc.detail, links, kind="version", name=exc.name)


@router.get("/api/search", response_model=SearchPage, responses=errors(400, 404, 503))
def api_search(
    request: Request, session: SessionDep, q: str = "", version: str = "", limit: QueryInt = 20
) -> SearchPage | Response:
    """Flags, values, enums, members and constraint messages matching `q`, best first.
    `version`: a name, "all" (hits grouped across versions), or empty for the newest;
    `limit` is clamped to 1..100."""
    try:
        return run_search(request, session, q, version, limit)
    except NotFound as exc:
        return _unknown_version(request, exc, q)
    except SearchError as exc:
        return error_response(request, 503, str(exc), kind="search_index")


@router.get("/search", include_in_schema=False)
def search_page(
    request: Request, session: SessionDep, q: str = "", version: str = "", limit: int = 50
) -> Response:
    dropdown = request.headers.get("HX-Request") and request.headers.get("HX-Target") == (
        "search-results"
    )
    try:
        out = run_search(request, session, q, version, DROPDOWN_LIMIT if dropdown else limit)
    except NotFound as exc:
        if dropdown:
            out = SearchPage(query=q, version=version, results=[], message=exc.detail)
        else:
            return _unknown_version(request, exc, q)
    except SearchError as exc:
        out = SearchPage(query=q, version=version, results=[], message=str(exc))
    context: dict[str, Any] = {
        "q": q[:200],
        "out": out,
        "groups": _grouped(out),
        "scope": version,
        "all_url": "/search?"
        + urlencode({"q": q[:200], **({"version": version} if version else {})}),
    }
    if dropdown:
        response = templates.TemplateResponse(request, "search_dropdown.html", context)
        response.headers["Vary"] = f"{VARY}, HX-Target"  # the dropdown reads HX-Target too
        return response
    context.update(
        search_q=q[:200],
        version=None,
        version_list=version_names(session),
        page="search",
    )
    return render(request, "search.html", context)
