"""/explain: paste a launch command, get each flag explained and the constraints it trips.

The page is a GET form, so its URL (version, command, compare) is the permalink of the
analysis; htmx swaps only the results block. `POST /api/explain` is the JSON twin from the
contract, and `GET /api/explain` answers the same query string as the page.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from sqlmodel import Session

from app.deps import SessionDep
from app.templating import render
from app.views.common import error_response, errors
from kb.contract import ExplainRequest, ExplainResult
from kb.explain import MAX_COMMAND, explain
from kb.queries import NotFound, version_names

router = APIRouter()

EXAMPLE = (
    "python -m sglang.launch_server \\\n"
    "  --model-path deepseek-ai/DeepSeek-V3 \\\n"
    "  --tp 8 --enable-two-batch-overlap \\\n"
    "  --moe-runner-backend flashinfer_cutlass"
)


class CommandTooLong(Exception):
    """A command over MAX_COMMAND characters: answered with 413."""


def explain_result(
    session: Session, version: str | None, command: str, compare: str | None
) -> ExplainResult:
    """The analysis of `command` at `version` (default: the newest), with the upgrade check
    against `compare`; NotFound for an unknown version."""
    if len(command) > MAX_COMMAND:
        raise CommandTooLong(f"The command is longer than {MAX_COMMAND} characters.")
    return ExplainResult.model_validate(explain(session, version, command, compare))


def _too_long(request: Request, exc: CommandTooLong) -> Response:
    return error_response(request, 413, str(exc), kind="command")


def explain_url(version: str, command: str, compare: str = "") -> str:
    query = {"version": version, "command": command}
    if compare:
        query["compare"] = compare
    return "/explain?" + urlencode(query)


@router.post("/api/explain", response_model=ExplainResult, responses=errors(400, 404, 413, 422))
def api_explain(
    request: Request, body: ExplainRequest, session: SessionDep
) -> ExplainResult | Response:
    """Parse a launch command the way SGLang's argparse would at `version` (default: the
    newest) and report its flags, findings, compatibility range and, with `compare`, what
    an upgrade changes. Commands over 20,000 characters are refused with 413."""
    try:
        return explain_result(session, body.version, body.command, body.compare)
    except CommandTooLong as exc:
        return _too_long(request, exc)


@router.get("/api/explain", response_model=ExplainResult, responses=errors(400, 404, 413))
def api_explain_get(
    request: Request,
    session: SessionDep,
    command: str,
    version: Annotated[str, Query(max_length=200)] = "",
    compare: Annotated[str, Query(max_length=200)] = "",
) -> ExplainResult | Response:
    """The same as POST, from the query string of the /explain page (a permalink)."""
    try:
        return explain_result(session, version or None, command, compare or None)
    except CommandTooLong as exc:
        return _too_long(request, exc)


@router.get("/explain", include_in_schema=False)
def explain_page(
    request: Request, session: SessionDep, version: str = "", command: str = "", compare: str = ""
) -> Response:
    names = version_names(session)
    context: dict[str, Any] = {
        "version": None,  # the page is not pinned through the header: its form pins it
        "page": "explain",
        "versions": names,
        "selected": version or (names[0] if names else ""),
        "command": command,
        "compare_to": compare,
        "example": EXAMPLE,
        "result": None,
        "error": None,
        "suggestions": [],
        "permalink": explain_url(version or (names[0] if names else ""), command, compare),
    }
    status = 200
    if command.strip():
        try:
            context["result"] = explain_result(session, version or None, command, compare or None)
        except NotFound as exc:
            status = 404
            context["error"] = exc.detail
            for name in exc.suggestions:
                fixed = (
                    (name, compare)
                    if exc.name == version[:200]
                    else (version, name)  # the compare version was the wrong one
                )
                context["suggestions"].append(
                    {"name": name, "url": explain_url(fixed[0], command, fixed[1])}
                )
        except CommandTooLong as exc:
            status = 413
            context["error"] = str(exc)
    return render(request, "explain.html", context, status_code=status, block="results")
