"""Every constraint site of a version in one table, filterable by flag and kind."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlmodel import Session

from app.deps import SessionDep
from app.templating import render
from app.views.common import page_context
from kb.queries import MAX_NAME, all_constraints, constraint_dict, get_version
from kb.schema import Version

router = APIRouter()

KINDS = ("raise", "assert", "override", "warning")


def list_constraints(
    session: Session, version: Version, flag: str = "", kind: str = ""
) -> list[dict[str, Any]]:
    """Constraints whose flags or affects contain `flag` (substring, - and _ alike)."""
    needle = flag.strip().lower().replace("_", "-").lstrip("-")[:MAX_NAME]
    out = []
    for site in all_constraints(session, version):
        if kind and site.kind != kind:
            continue
        data = constraint_dict(version, site)
        if needle and not any(needle in n.lower() for n in data["flags"] + data["affects"]):
            continue
        out.append(data)
    return out


@router.get("/v/{version}/constraints", include_in_schema=False)
def constraints_page(
    request: Request, session: SessionDep, version: str, flag: str = "", kind: str = ""
) -> Response:
    found = get_version(session, version)
    rows = list_constraints(session, found, flag, kind)
    context = {
        **page_context(session, found, "constraints"),
        "constraints": rows,
        "flag": flag[:MAX_NAME],
        "kind": kind if kind in KINDS else "",
        "kinds": KINDS,
    }
    return render(request, "constraints.html", context, block="constraint_rows")


@router.get("/api/v/{version}/constraints")
def api_constraints(
    session: SessionDep, version: str, flag: str = "", kind: str = ""
) -> dict[str, Any]:
    found = get_version(session, version)
    return {"version": found.name, "constraints": list_constraints(session, found, flag, kind)}
