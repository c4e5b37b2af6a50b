"""/explain: paste a launch command, get each flag explained and the constraints it trips.

The page is a GET form, so its URL (version, command, compare and the deployment profile)
is the permalink of the analysis; htmx swaps only the results block. `POST /api/explain` is
the JSON twin from the contract (`"profile": {...}` in the body), and `GET /api/explain`
answers the same query string as the page (the profile as query parameters).
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
from kb.contract import ExplainQuery, ExplainRequest, ExplainResult
from kb.explain import MAX_COMMAND, MAX_WORDS, CommandRejected, explain
from kb.explain.orchestrate import check_command, profile_choices
from kb.explain.predicates import SM_NAMES, Profile, ProfileError
from kb.profile import (
    ENV_MODES,
    MAX_CONFIG,
    PACKAGES,
    PLATFORMS,
    ProfileFields,
    ProfileQuery,
    with_profile_text,
)
from kb.queries import NotFound, version_names

router = APIRouter()

EXAMPLE = (
    "python -m sglang.launch_server \\\n"
    "  --model-path deepseek-ai/DeepSeek-V3 \\\n"
    "  --tp 8 --enable-two-batch-overlap \\\n"
    "  --moe-runner-backend flashinfer_cutlass"
)


# The answer lists one entry per flag occurrence and per finding: a command of MAX_WORDS
# switches has that many. Real launch commands have a few dozen flags; longer lists are cut
# here and the cut is reported in "truncated": {"list": full length}.
MAX_ITEMS = 200


def bounded(result: dict[str, Any]) -> dict[str, Any]:
    """The answer with each list (top level and under "compare") cut to MAX_ITEMS."""
    truncated: dict[str, int] = {}

    def cut(where: dict[str, Any], prefix: str) -> dict[str, Any]:
        out = dict(where)
        for key, value in where.items():
            if isinstance(value, list) and len(value) > MAX_ITEMS:
                out[key] = value[:MAX_ITEMS]
                truncated[prefix + key] = len(value)
        return out

    out = cut(result, "")
    if isinstance(out.get("compare"), dict):
        out["compare"] = cut(out["compare"], "compare.")
    if truncated:
        out["truncated"] = truncated
    return out


class BadProfile(Exception):
    """A profile that cannot be used (unknown platform, config.json that is not JSON): 400."""


def parse_profile(data: dict[str, Any] | None) -> Profile | None:
    try:
        return Profile.parse(data)
    except ProfileError as exc:
        raise BadProfile(str(exc)) from None


def explain_result(
    session: Session,
    version: str | None,
    command: str,
    compare: str | None,
    profile: Profile | None = None,
) -> ExplainResult:
    """The analysis of `command` at `version` (default: the newest), with the upgrade check
    against `compare` and, with a profile, the simulated deployment. CommandRejected for a
    command over the bounds (refused before any work), NotFound for an unknown version."""
    check_command(command)
    return ExplainResult.model_validate(
        bounded(explain(session, version, command, compare, profile))
    )


def _rejected(request: Request, exc: CommandRejected) -> Response:
    return error_response(request, 413 if exc.too_large else 400, str(exc), kind="command")


def _responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The error statuses of an explain route, 400 and 413 told for explain."""
    out = errors(*statuses)
    out[400]["description"] = (
        "A profile that cannot be used, or a command no shell could pass (it holds NUL or a "
        "lone surrogate)."
    )
    if 413 in out:
        out[413]["description"] = (
            f"The command is longer than {MAX_COMMAND:,} characters, or has more than "
            f"{MAX_WORDS} words (flags and their values) after the launcher."
        )
    return out


def set_fields(form: dict[str, str]) -> dict[str, str]:
    """The profile form's fields that are set: neither empty nor at their default."""
    fields = ProfileFields.model_fields
    return {k: v for k, v in form.items() if v not in ("", fields[k].default)}


def explain_url(
    version: str, command: str, compare: str = "", form: dict[str, str] | None = None
) -> str:
    """The page's URL (the analysis' permalink), with the profile form's fields that are set."""
    query = {"version": version, "command": command}
    if compare:
        query["compare"] = compare
    query.update(set_fields(form or {}))
    return "/explain?" + urlencode(query)


@router.post("/api/explain", response_model=ExplainResult, responses=_responses(400, 404, 413, 422))
def api_explain(
    request: Request, body: ExplainRequest, session: SessionDep
) -> ExplainResult | Response:
    """Parse a launch command the way SGLang's argparse would at `version` (default: the
    newest) and report its flags, findings, compatibility range and, with `compare`, what
    an upgrade changes. Commands over 20,000 characters or 400 words after the launcher
    (flags and their values) are refused with 413; one that holds NUL or a lone surrogate
    with 400."""
    try:
        profile = parse_profile(body.profile.model_dump() if body.profile else None)
        return explain_result(session, body.version, body.command, body.compare, profile)
    except CommandRejected as exc:
        return _rejected(request, exc)
    except BadProfile as exc:
        return error_response(request, 400, str(exc), kind="profile")


@router.get("/api/explain", response_model=ExplainResult, responses=_responses(400, 404, 413))
def api_explain_get(
    request: Request, session: SessionDep, query: Annotated[ExplainQuery, Query()]
) -> ExplainResult | Response:
    """The same as POST, from the query string of the /explain page (a permalink); the
    profile's fields are query parameters of the same names."""
    try:
        profile = parse_profile(query.profile())
        return explain_result(
            session, query.version or None, query.command, query.compare or None, profile
        )
    except CommandRejected as exc:
        return _rejected(request, exc)
    except BadProfile as exc:
        return error_response(request, 400, str(exc), kind="profile")


@with_profile_text(bounded=False)
class PageQuery(ProfileQuery):
    """The page's query: GET /api/explain's, none required or bounded (a long value is cut
    below: the page shows what it can rather than a 422)."""

    version: str = ""
    command: str = ""
    compare: str = ""


@router.get("/explain", include_in_schema=False)
def explain_page(
    request: Request, session: SessionDep, query: Annotated[PageQuery, Query()]
) -> Response:
    version, command, compare = query.version, query.command, query.compare
    form = {k: v[:MAX_CONFIG] for k, v in query.profile().items()}
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
        "permalink": explain_url(version or (names[0] if names else ""), command, compare, form),
        "form": form,
        "profile_given": bool(set_fields(form)),
        # the fields the form offers choices for; "(unknown)" too where a field may be unset
        "choices": {"platform": PLATFORMS, "sm": SM_NAMES, "packages": PACKAGES, "env": ENV_MODES},
        "unset": [k for k, info in ProfileFields.model_fields.items() if info.default is None],
        "archs": profile_choices(session, version or None)["archs"],
        "sms": SM_NAMES,
        "fix_url": lambda fixed: explain_url(
            version or (names[0] if names else ""), fixed, compare, form
        ),
    }
    status = 200
    if command.strip():
        try:
            profile = parse_profile(form)
            context["result"] = explain_result(
                session, version or None, command, compare or None, profile
            )
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
                    {"name": name, "url": explain_url(fixed[0], command, fixed[1], form)}
                )
        except CommandRejected as exc:
            status = 413 if exc.too_large else 400
            context["error"] = str(exc)
        except BadProfile as exc:
            status = 400
            context["error"] = str(exc)
    return render(request, "explain.html", context, status_code=status, block="results")
