"""Docs drift of a version: page, JSON twin and a Markdown export for pull requests."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response
from sqlmodel import Session

from app.deps import SessionDep
from app.templating import render
from app.views.common import errors, page_context
from kb.contract import DocsDrift
from kb.docsdrift import docs_drift, drift_markdown
from kb.queries import get_version
from kb.schema import Version

router = APIRouter()


def drift_data(session: Session, version: Version) -> DocsDrift:
    """The docs drift of a version (flags and environment variables)."""
    return DocsDrift.model_validate(docs_drift(session, version))


@router.get("/v/{version}/docs-drift", include_in_schema=False)
def drift_page(request: Request, session: SessionDep, version: str, format: str = "") -> Response:
    found = get_version(session, version)
    drift = drift_data(session, found)
    if format == "md":
        return _markdown(drift)
    context = {**page_context(session, found, "docs-drift"), "drift": drift}
    return render(request, "docs_drift.html", context)


@router.get("/v/{version}/docs-drift.md", include_in_schema=False)
def drift_markdown_page(session: SessionDep, version: str) -> Response:
    return _markdown(docs_drift(session, get_version(session, version)))


def _markdown(drift: DocsDrift | dict[str, Any]) -> Response:
    data = drift.model_dump(by_alias=True) if isinstance(drift, DocsDrift) else drift
    return PlainTextResponse(drift_markdown(data), media_type="text/markdown; charset=utf-8")


@router.get("/api/v/{version}/docs-drift", responses=errors(404))
def api_drift(session: SessionDep, version: str) -> DocsDrift:
    """Flags and environment variables the docs omit, name without the code having them, or
    state differently, each cited on both sides; for flags, each flag table's own lists and
    where the tables disagree with each other."""
    return drift_data(session, get_version(session, version))
