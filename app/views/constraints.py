"""Every constraint site of a version in one table: filters, facets with counts (kind,
function, file), sort, pages, and CSV/JSON exports of the whole filtered result."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field
from sqlmodel import Session

from app.deps import SessionDep
from app.templating import render
from app.views.common import QueryInt, error_response, errors, page_context
from app.views.listing import PER_PAGE, clamp_page, csv_text, export, facet, query
from kb.contract import ConstraintList
from kb.queries import (
    MAX_NAME,
    constraint_dict,
    filter_constraints,
    get_version,
    numbered_anchors,
    per_stamp,
    replaced_by,
)
from kb.schema import ConstraintSite, Version

router = APIRouter()

KINDS = ("raise", "assert", "override", "warning")
SORTS = {
    "path": lambda s: (s.path, s.line),
    "line": lambda s: (s.line, s.path),
    "kind": lambda s: (s.kind, s.path, s.line),
    "function": lambda s: (s.function, s.path, s.line),
}


class ConstraintQuery(BaseModel):
    """The list's query: which sites (filters), in which order, which page."""

    flag: str = ""
    # A kind that is none of KINDS is a 400 with the kinds as suggestions (unknown_kind).
    kind: Annotated[str, Field(json_schema_extra={"enum": ["", *KINDS]})] = ""
    function: str = ""
    path: str = ""
    sort: Annotated[str, Field(description="path, line, kind or function (another: path)")] = "path"
    page: QueryInt = 1
    per_page: QueryInt = PER_PAGE


class ConstraintPageQuery(ConstraintQuery):
    format: str = ""  # csv | json: the whole filtered result as a download


def constraint_list(
    session: Session, version: Version, query: ConstraintQuery = ConstraintQuery()
) -> ConstraintList:
    """Constraints that read or affect the flag named by `flag` (any of its names; text that
    names no flag matches as a substring of flag names), of one `kind` when it is one of
    KINDS (another kind matches nothing), in one `function` and one file `path`; facets
    count the whole filtered result, `page` of `per_page` rows (0: all) are listed. The
    routes answer another kind with a 400 naming these (`unknown_kind`)."""
    return ConstraintList.model_validate(constraint_list_dict(session, version, query))


def constraint_list_dict(
    session: Session, version: Version, query: ConstraintQuery = ConstraintQuery()
) -> dict[str, Any]:
    """`constraint_list` as the plain dict the HTML page renders (the JSON twin validates
    it); each shown site's dict is made once per stamp (`constraint_dicts`) and shared."""
    flag, kind, function, path = query.flag, query.kind, query.function, query.path
    replacing = replaced_by(session, version, flag) if flag else {}
    sites: list[ConstraintSite] = [
        s
        for s in filter_constraints(session, version, flag, kind, replacing)
        if (not function or s.function == function) and (not path or s.path == path)
    ]
    sort = query.sort if query.sort in SORTS else "path"
    sites.sort(key=SORTS[sort])
    page, per_page, pages = clamp_page(query.page, query.per_page, len(sites))
    shown = sites[(page - 1) * per_page : page * per_page] if per_page else sites
    filters = {
        "flag": flag[:MAX_NAME],
        "kind": kind if kind in KINDS else "",
        "function": function[:MAX_NAME],
        "path": path[:MAX_NAME],
        "sort": sort,
    }
    params = link_params(filters)
    return {
        "version": version.name,
        **filters,
        "page": page,
        "per_page": per_page,
        "pages": pages,
        "total": len(sites),
        "constraints": numbered_anchors(constraint_dicts(session, version, shown)),
        "replacements": {old: [f.name for f in new] for old, new in replacing.items()},
        "facets": [
            facet("kind", (s.kind for s in sites), params),
            facet("function", (s.function for s in sites), params),
            facet("path", (s.path for s in sites), params),
        ],
    }


def link_params(data: dict[str, Any]) -> dict[str, str]:
    """The list's filters and sort as its links' queries keep them (the default sort, path,
    left out)."""
    params = {name: data[name] for name in ("flag", "kind", "function", "path")}
    return {**params, "sort": "" if data["sort"] == "path" else data["sort"]}


def unknown_kind(request: Request, kind: str) -> Response | None:
    """A 400 for a `kind` that is none of KINDS (it would list nothing, as if the version
    had no such sites), suggesting each valid kind with the rest of the query kept."""
    if not kind or kind in KINDS:
        return None
    params = dict(request.query_params)
    links = [{"name": k, "url": f"{request.url.path}?{query(params, kind=k)}"} for k in KINDS]
    detail = f"Unknown constraint kind {kind[:MAX_NAME]!r}: the kinds are {', '.join(KINDS)}."
    return error_response(request, 400, detail, links, kind="parameter", name="kind")


def constraint_dicts(
    session: Session, version: Version, sites: list[ConstraintSite]
) -> list[dict[str, Any]]:
    """`constraint_dict` of each of `sites`, each made on its first use and then kept for
    the stamp (shared: read, never changed). Made for the page shown, not for every site of
    the version: a first view of the list built all 408 of snapshot-2026-02-01's dicts
    (~10 ms) to show 50 (~1 ms)."""
    made: dict[int, dict[str, Any]] = per_stamp(("constraint-dicts", version.id), dict, session)
    out = []
    for site in sites:
        shaped = made.get(site.id or 0)
        if shaped is None:
            shaped = made[site.id or 0] = constraint_dict(version, site)
        out.append(shaped)
    return out


def constraints_csv(data: ConstraintList) -> str:
    return csv_text(
        [
            "kind",
            "function",
            "path",
            "line",
            "condition",
            "message",
            "flags",
            "affects",
            "writes",
            "url",
        ],
        (
            [
                c.kind,
                c.function,
                c.source.path,
                c.source.line,
                c.condition,
                c.message,
                " ".join(c.flags),
                " ".join(c.affects),
                json.dumps(c.writes) if c.writes else "",
                c.source.url,
            ]
            for c in data.constraints
        ),
    )


@router.get("/v/{version}/constraints", include_in_schema=False)
def constraints_page(
    request: Request,
    session: SessionDep,
    version: str,
    params: Annotated[ConstraintPageQuery, Query()],
) -> Response:
    found = get_version(session, version)
    if (bad := unknown_kind(request, params.kind)) is not None:
        return bad
    if params.format in ("csv", "json"):  # the whole filtered result, every page
        whole = constraint_list(
            session, found, params.model_copy(update={"page": 1, "per_page": 0})
        )
        return export(whole, f"constraints-{found.name}", params.format, constraints_csv)
    data = constraint_list_dict(session, found, params)
    links = link_params(data)
    context = {
        **page_context(session, found, "constraints"),
        "data": data,
        "kinds": KINDS,
        "sorts": list(SORTS),
        "prev_query": query(links, page=str(data["page"] - 1)) if data["page"] > 1 else None,
        "next_query": (
            query(links, page=str(data["page"] + 1)) if data["page"] < data["pages"] else None
        ),
        "sort_queries": {s: query(links, sort="" if s == "path" else s) for s in SORTS},
        "export_query": query(links),
    }
    return render(request, "constraints.html", context, block="constraint_rows")


@router.get("/api/v/{version}/constraints", responses=errors(400, 404))
def api_constraints(
    request: Request,
    session: SessionDep,
    version: str,
    params: Annotated[ConstraintQuery, Query()],
) -> ConstraintList:
    """Constraint sites of a version (raise, assert, override, warning), filtered by a flag
    (any of its names; text naming no flag matches part of a name), a kind, a function and
    a file, sorted (path | line | kind | function), one page of `per_page` (0: all) with
    facets counting the whole filtered result. A kind that is none of the four is a 400
    whose `suggestions` are the four."""
    found = get_version(session, version)
    if (bad := unknown_kind(request, params.kind)) is not None:
        return bad  # type: ignore[return-value]
    return constraint_list(session, found, params)
