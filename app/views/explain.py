"""/explain: paste a launch command, get each flag explained and the constraints it trips.

The page is a GET form, so its URL (version, command, compare) is the permalink of the
analysis; htmx swaps only the results block. `POST /api/explain` is the JSON twin from the
contract, and `GET /api/explain` answers the same query string as the page.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from app.deps import SessionDep
from app.templating import render
from kb.explain import MAX_COMMAND, explain
from kb.queries import NotFound, version_names

router = APIRouter()

EXAMPLE = (
    "python -m sglang.launch_server \\\n"
    "  --model-path deepseek-ai/DeepSeek-V3 \\\n"
    "  --tp 8 --enable-two-batch-overlap \\\n"
    "  --moe-runner-backend flashinfer_cutlass"
)


class ExplainRequest(BaseModel):
    version: str | None = Field(None, max_length=200)
    command: str = Field(max_length=MAX_COMMAND)
    compare: str | None = Field(None, max_length=200)


def explain_url(version: str, command: str, compare: str = "") -> str:
    query = {"version": version, "command": command}
    if compare:
        query["compare"] = compare
    return "/explain?" + urlencode(query)


@router.post("/api/explain")
def api_explain(body: ExplainRequest, session: SessionDep) -> dict[str, Any]:
    return explain(session, body.version, body.command, body.compare)


@router.get("/api/explain")
def api_explain_get(
    session: SessionDep, command: str, version: str = "", compare: str = ""
) -> dict[str, Any]:
    body = ExplainRequest(version=version or None, command=command, compare=compare or None)
    return explain(session, body.version, body.command, body.compare)


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
            context["result"] = explain(session, version or None, command, compare or None)
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
        except ValueError as exc:
            status = 400
            context["error"] = str(exc)
    return render(request, "explain.html", context, status_code=status, block="results")
