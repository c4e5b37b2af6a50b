"""Every constraint site of a version in one table, filterable by flag and kind."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlmodel import Session

from app.deps import SessionDep
from app.templating import render
from app.views.common import errors, page_context
from kb.contract import ConstraintList
from kb.queries import MAX_NAME, constraint_dict, filter_constraints, get_version
from kb.schema import Version

router = APIRouter()

KINDS = ("raise", "assert", "override", "warning")


def constraint_list(
    session: Session, version: Version, flag: str = "", kind: str = ""
) -> ConstraintList:
    """Constraints that read or affect the flag named by `flag` (any of its names; text that
    names no flag matches as a substring of flag names), of one `kind` when it is one of
    KINDS (another kind matches nothing)."""
    out = [
        constraint_dict(version, site) for site in filter_constraints(session, version, flag, kind)
    ]
    return ConstraintList.model_validate(
        {
            "version": version.name,
            "flag": flag[:MAX_NAME],
            "kind": kind if kind in KINDS else "",
            "constraints": out,
        }
    )


@router.get("/v/{version}/constraints", include_in_schema=False)
def constraints_page(
    request: Request, session: SessionDep, version: str, flag: str = "", kind: str = ""
) -> Response:
    found = get_version(session, version)
    context = {
        **page_context(session, found, "constraints"),
        "data": constraint_list(session, found, flag, kind),
        "kinds": KINDS,
    }
    return render(request, "constraints.html", context, block="constraint_rows")


@router.get("/api/v/{version}/constraints", responses=errors(404))
def api_constraints(
    session: SessionDep, version: str, flag: str = "", kind: str = ""
) -> ConstraintList:
    """Every constraint site of a version (raise, assert, override, warning), filtered by a
    flag (any of its names; text naming no flag matches part of a name) and a kind."""
    return constraint_list(session, get_version(session, version), flag, kind)
