"""/explain: paste a launch command, get each flag explained and the constraints it trips.

The page is a GET form, so its URL (version, command, compare and the deployment profile)
is the permalink of the analysis; htmx swaps only the results block. `POST /api/explain` is
the JSON twin from the contract (`"profile": {...}` in the body), and `GET /api/explain`
answers the same query string as the page (the profile as query parameters).
"""

from __future__ import annotations

import json
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
from kb.explain.orchestrate import profile_choices
from kb.explain.predicates import MAX_CONFIG, PLATFORMS, SM_NAMES, Profile, ProfileError
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


PROFILE_KEYS = ("arch", "quant", "platform", "sm", "gpus", "nodes", "packages", "env", "config")


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
    against `compare` and, with a profile, the simulated deployment; NotFound for an
    unknown version."""
    if len(command) > MAX_COMMAND:
        raise CommandTooLong(f"The command is longer than {MAX_COMMAND} characters.")
    return ExplainResult.model_validate(
        bounded(explain(session, version, command, compare, profile))
    )


def _too_long(request: Request, exc: CommandTooLong) -> Response:
    return error_response(request, 413, str(exc), kind="command")


def explain_url(
    version: str, command: str, compare: str = "", profile: dict[str, Any] | None = None
) -> str:
    query = {"version": version, "command": command}
    if compare:
        query["compare"] = compare
    for key, value in (profile or {}).items():
        if key in PROFILE_KEYS and value not in (None, "", "assume-ok", "assume-unset"):
            if isinstance(value, str):
                query[key] = value
            else:
                query[key] = json.dumps(value) if isinstance(value, dict) else str(value)
    return "/explain?" + urlencode(query)


@router.post("/api/explain", response_model=ExplainResult, responses=errors(400, 404, 413, 422))
def api_explain(
    request: Request, body: ExplainRequest, session: SessionDep
) -> ExplainResult | Response:
    """Parse a launch command the way SGLang's argparse would at `version` (default: the
    newest) and report its flags, findings, compatibility range and, with `compare`, what
    an upgrade changes. Commands over 20,000 characters are refused with 413."""
    try:
        profile = parse_profile(body.profile.model_dump() if body.profile else None)
        return explain_result(session, body.version, body.command, body.compare, profile)
    except CommandTooLong as exc:
        return _too_long(request, exc)
    except BadProfile as exc:
        return error_response(request, 400, str(exc), kind="profile")


@router.get("/api/explain", response_model=ExplainResult, responses=errors(400, 404, 413))
def api_explain_get(
    request: Request,
    session: SessionDep,
    command: str,
    version: Annotated[str, Query(max_length=200)] = "",
    compare: Annotated[str, Query(max_length=200)] = "",
    arch: Annotated[str, Query(max_length=200)] = "",
    quant: Annotated[str, Query(max_length=100)] = "",
    platform: Annotated[str, Query(max_length=20)] = "",
    sm: Annotated[str, Query(max_length=10)] = "",
    gpus: Annotated[str, Query(max_length=10)] = "",
    nodes: Annotated[str, Query(max_length=10)] = "",
    packages: Annotated[str, Query(max_length=20)] = "",
    env: Annotated[str, Query(max_length=20)] = "",
    config: Annotated[str, Query(max_length=MAX_CONFIG)] = "",
) -> ExplainResult | Response:
    """The same as POST, from the query string of the /explain page (a permalink); the
    profile's fields are query parameters of the same names."""
    raw = dict(arch=arch, quant=quant, platform=platform, sm=sm, gpus=gpus, nodes=nodes)
    raw.update(packages=packages, env=env, config=config)
    try:
        profile = parse_profile(raw)
        return explain_result(session, version or None, command, compare or None, profile)
    except CommandTooLong as exc:
        return _too_long(request, exc)
    except BadProfile as exc:
        return error_response(request, 400, str(exc), kind="profile")


@router.get("/explain", include_in_schema=False)
def explain_page(
    request: Request,
    session: SessionDep,
    version: str = "",
    command: str = "",
    compare: str = "",
    arch: str = "",
    quant: str = "",
    platform: str = "",
    sm: str = "",
    gpus: str = "",
    nodes: str = "",
    packages: str = "",
    env: str = "",
    config: str = "",
) -> Response:
    form = dict(arch=arch, quant=quant, platform=platform, sm=sm, gpus=gpus, nodes=nodes)
    form.update(packages=packages, env=env, config=config)
    form = {k: v[:MAX_CONFIG] for k, v in form.items()}
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
        "archs": profile_choices(session, version or None)["archs"],
        "platforms": PLATFORMS,
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
        except CommandTooLong as exc:
            status = 413
            context["error"] = str(exc)
        except BadProfile as exc:
            status = 400
            context["error"] = str(exc)
    return render(request, "explain.html", context, status_code=status, block="results")
