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
from kb.explain import MAX_COMMAND, explain
from kb.explain.orchestrate import profile_choices
from kb.explain.predicates import SM_NAMES, Profile, ProfileError
from kb.gpus import GPUS, gpu_text
from kb.model_source import ModelOrigin, ModelPlaces, ModelUnavailable, source_words, with_model
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


# The answer lists one entry per flag occurrence and per finding: a 20,000-character command
# of `--tp 1` repeated would be a 3 MB answer. Real launch commands have a few dozen flags;
# longer lists are cut here and the cut is reported in "truncated": {"list": full length}.
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


class CommandTooLong(Exception):
    """A command over MAX_COMMAND characters: answered with 413."""


class BadProfile(Exception):
    """A profile that cannot be used (unknown platform, config.json that is not JSON): 400."""


def parse_profile(
    request: Request, data: dict[str, Any] | None, command: str
) -> tuple[Profile | None, ModelOrigin]:
    """The profile, with the model's config.json its `model` or the command's --model-path
    names (kb.model_source: fetched, or read under FLAGATLAS_MODEL_DIRS); ModelUnavailable
    when the profile's own `model` cannot be read."""
    places = ModelPlaces.for_server(request.app.state.db_url)
    data, origin = with_model(data, command if len(command) <= MAX_COMMAND else "", places)
    try:
        return Profile.parse(data), origin
    except ProfileError as exc:
        raise BadProfile(str(exc)) from None


def explain_result(
    session: Session,
    version: str | None,
    command: str,
    compare: str | None,
    profile: Profile | None = None,
    origin: ModelOrigin | None = None,
) -> ExplainResult:
    """The analysis of `command` at `version` (default: the newest), with the upgrade check
    against `compare` and, with a profile, the simulated deployment; NotFound for an
    unknown version."""
    if len(command) > MAX_COMMAND:
        raise CommandTooLong(f"The command is longer than {MAX_COMMAND} characters.")
    result = explain(session, version, command, compare, profile)
    if origin is not None:
        result.update(model_source=origin.source, model_notes=origin.notes)
    return ExplainResult.model_validate(bounded(result))


def _too_long(request: Request, exc: CommandTooLong) -> Response:
    return error_response(request, 413, str(exc), kind="command")


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


@router.post(
    "/api/explain", response_model=ExplainResult, responses=errors(400, 403, 404, 413, 422, 503)
)
def api_explain(
    request: Request, body: ExplainRequest, session: SessionDep
) -> ExplainResult | Response:
    """Parse a launch command the way SGLang's argparse would at `version` (default: the
    newest) and report its flags, findings, compatibility range and, with `compare`, what
    an upgrade changes. Commands over 20,000 characters are refused with 413."""
    try:
        data = body.profile.model_dump() if body.profile else None
        profile, origin = parse_profile(request, data, body.command)
        return explain_result(session, body.version, body.command, body.compare, profile, origin)
    except CommandTooLong as exc:
        return _too_long(request, exc)
    except BadProfile as exc:
        return error_response(request, 400, str(exc), kind="profile")
    except ModelUnavailable as exc:
        return error_response(request, exc.status, str(exc), kind="model")


@router.get("/api/explain", response_model=ExplainResult, responses=errors(400, 403, 404, 413, 503))
def api_explain_get(
    request: Request, session: SessionDep, query: Annotated[ExplainQuery, Query()]
) -> ExplainResult | Response:
    """The same as POST, from the query string of the /explain page (a permalink); the
    profile's fields are query parameters of the same names."""
    try:
        profile, origin = parse_profile(request, query.profile(), query.command)
        return explain_result(
            session, query.version or None, query.command, query.compare or None, profile, origin
        )
    except CommandTooLong as exc:
        return _too_long(request, exc)
    except BadProfile as exc:
        return error_response(request, 400, str(exc), kind="profile")
    except ModelUnavailable as exc:
        return error_response(request, exc.status, str(exc), kind="model")


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
        "choices": {
            "gpu": [gpu.name for gpu in GPUS],
            "platform": PLATFORMS,
            "sm": SM_NAMES,
            "packages": PACKAGES,
            "env": ENV_MODES,
        },
        "gpu_texts": {gpu.name: gpu_text(gpu) for gpu in GPUS},
        "unset": [k for k, info in ProfileFields.model_fields.items() if info.default is None],
        "archs": profile_choices(session, version or None)["archs"],
        "sms": SM_NAMES,
        "source_words": source_words,
        "fix_url": lambda fixed: explain_url(
            version or (names[0] if names else ""), fixed, compare, form
        ),
    }
    status = 200
    if command.strip():
        try:
            profile, origin = parse_profile(request, form, command)
            context["result"] = explain_result(
                session, version or None, command, compare or None, profile, origin
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
        except CommandTooLong as exc:
            status = 413
            context["error"] = str(exc)
        except BadProfile as exc:
            status = 400
            context["error"] = str(exc)
        except ModelUnavailable as exc:
            status = exc.status
            context["error"] = str(exc)
    return render(request, "explain.html", context, status_code=status, block="results")
