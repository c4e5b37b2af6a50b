"""The enums of a version: members, values, linked flags and citation."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.deps import SessionDep
from app.templating import render
from app.views.common import page_context
from kb.queries import all_enums, enum_dict, get_version

router = APIRouter()


@router.get("/v/{version}/enums", include_in_schema=False)
def enums_page(request: Request, session: SessionDep, version: str) -> Response:
    found = get_version(session, version)
    enums = [enum_dict(found, e) for e in all_enums(session, found)]
    return render(request, "enums.html", {**page_context(session, found, "enums"), "enums": enums})


@router.get("/api/v/{version}/enums")
def api_enums(session: SessionDep, version: str) -> dict[str, Any]:
    found = get_version(session, version)
    return {
        "version": found.name,
        "enums": [enum_dict(found, e) for e in all_enums(session, found)],
    }
