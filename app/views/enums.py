"""The enums of a version: members, values, linked flags and citation."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlmodel import Session

from app.deps import SessionDep
from app.templating import render
from app.views.common import errors, page_context
from kb.contract import EnumList
from kb.queries import all_enums, enum_dict, get_version
from kb.schema import Version

router = APIRouter()


def enum_list(session: Session, version: Version) -> EnumList:
    enums = [enum_dict(version, e) for e in all_enums(session, version)]
    return EnumList.model_validate({"version": version.name, "enums": enums})


@router.get("/v/{version}/enums", include_in_schema=False)
def enums_page(request: Request, session: SessionDep, version: str) -> Response:
    found = get_version(session, version)
    context = {**page_context(session, found, "enums"), "data": enum_list(session, found)}
    return render(request, "enums.html", context)


@router.get("/api/v/{version}/enums", responses=errors(404))
def api_enums(session: SessionDep, version: str) -> EnumList:
    """The enum classes of a version, with members and the flags whose choices they spell."""
    return enum_list(session, get_version(session, version))
