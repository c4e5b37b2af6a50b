"""The launch commands of a version's docs, each checked with explain at that version: page
and JSON twin (kb/doc_commands.py builds the data)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlmodel import Session

from app.deps import SessionDep
from app.templating import render
from app.views.common import errors, page_context
from kb.contract import DocCommands
from kb.doc_commands import docs_commands
from kb.model_source import default_cache_dir
from kb.queries import get_version
from kb.schema import Version

router = APIRouter()


def model_cache(request: Request) -> Path:
    """Where explain's fetched models are (read from disk only, never fetched here)."""
    return default_cache_dir(request.app.state.db_url)


def doc_commands_data(
    session: Session, version: Version, cache: Path | None, status: str = ""
) -> DocCommands:
    """Every launch command of the version's docs with its verdict (those of `status`)."""
    return DocCommands.model_validate(docs_commands(session, version, cache, status))


@router.get("/v/{version}/docs-commands", include_in_schema=False)
def doc_commands_page(
    request: Request, session: SessionDep, version: str, status: str = ""
) -> Response:
    found = get_version(session, version)
    data = doc_commands_data(session, found, model_cache(request), status)
    files: dict[str, list[object]] = {}
    for row in data.commands:
        files.setdefault(row.path, []).append(row)
    context = {
        **page_context(session, found, "docs-commands"),
        "data": data,
        "files": list(files.items()),
    }
    return render(request, "doc_commands.html", context)


@router.get("/api/v/{version}/docs-commands", responses=errors(404))
def api_doc_commands(
    request: Request, session: SessionDep, version: str, status: str = ""
) -> DocCommands:
    """The launch commands the version's Markdown/MDX files show, each with explain's
    verdict at that version: `ok`, `rejected` (argparse would refuse it), `fails` (a decided
    constraint raises) or `undecided` (it needs inputs: a model, a GPU), with the findings.
    `status` keeps the commands of one status; `counts` is over all of them."""
    return doc_commands_data(session, get_version(session, version), model_cache(request), status)
