"""Docs drift of a version: page, JSON twin and a Markdown export for pull requests."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response

from app.deps import SessionDep
from app.templating import render
from app.views.common import page_context
from kb.docsdrift import docs_drift, drift_markdown
from kb.queries import get_version

router = APIRouter()


@router.get("/v/{version}/docs-drift", include_in_schema=False)
def drift_page(request: Request, session: SessionDep, version: str, format: str = "") -> Response:
    found = get_version(session, version)
    drift = docs_drift(session, found)
    if format == "md":
        return _markdown(drift)
    context = {**page_context(session, found, "docs-drift"), "drift": drift}
    return render(request, "docs_drift.html", context)


@router.get("/v/{version}/docs-drift.md", include_in_schema=False)
def drift_markdown_page(session: SessionDep, version: str) -> Response:
    return _markdown(docs_drift(session, get_version(session, version)))


def _markdown(drift: dict[str, Any]) -> Response:
    return PlainTextResponse(drift_markdown(drift), media_type="text/markdown; charset=utf-8")


@router.get("/api/v/{version}/docs-drift")
def api_drift(session: SessionDep, version: str) -> dict[str, Any]:
    return docs_drift(session, get_version(session, version))
