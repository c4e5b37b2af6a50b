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
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from pydantic import PrivateAttr
from sqlmodel import Session

from app.deps import SessionDep
from app.respcache import ByteLRU, CheapStamp
from app.templating import render
from app.views.common import error_response, errors
from kb.contract import ExplainQuery, ExplainRequest, ExplainResult
from kb.explain import MAX_COMMAND, MAX_WORDS, CommandRejected, explain
from kb.explain.orchestrate import check_command, profile_choices
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


# --- answers computed once per state of the knowledge base ---------------------------------
# An answer is a function of the knowledge base's state and of the question: the versions
# as named, the command (trailing blanks change nothing) and the profile as parsed. Answers
# are kept in an LRU bounded by bytes, per app, which every form shares (POST, GET, the
# page). A new ingest changes the stamp in the keys: older entries are no longer asked for
# and age out. The bytes of a GET permalink, JSON or page, are also kept by URL
# (app/respcache.py), so a repeated POST is the one form that reaches this view again.
CACHE_BYTES = 32 * 1024 * 1024


class Answer(ExplainResult):
    """An answer as the cache keeps it: the model (the page renders it) and the bytes
    FastAPI would send for it (its serializer: by alias, nothing left out), made once."""

    _json: bytes = PrivateAttr(b"")

    @property
    def size(self) -> int:
        return 5 * len(self._json)  # the model's objects take ~4x its JSON


def answer_cache(request: Request) -> ByteLRU[Answer]:
    """The app's cache (made by the first explain: create_app does not know this view)."""
    cache: ByteLRU[Answer] | None = getattr(request.app.state, "explain_cache", None)
    if cache is None:
        cache = request.app.state.explain_cache = ByteLRU(CACHE_BYTES)
    return cache


def kb_state(request: Request) -> str:
    """The knowledge base's stamp, without a query per request (create_app's CheapStamp)."""
    stamp: CheapStamp = request.app.state.stamp
    return stamp()


def answer_key(
    request: Request,
    version: str | None,
    command: str,
    compare: str | None,
    profile: Profile | None,
    origin: ModelOrigin | None = None,
) -> tuple[str, ...]:
    """The question as the cache knows it (no query: a repeated question costs a lookup).
    Where the model's config came from is part of it: the same command asked once offline
    and once with the model fetched gets two answers."""
    return (
        kb_state(request),
        version or "",
        compare or "",
        command.rstrip(),
        profile.model_dump_json() if profile is not None else "",
        repr((origin.source, origin.draft_source, origin.notes)) if origin is not None else "",
    )


def explain_result(
    request: Request,
    session: Session,
    version: str | None,
    command: str,
    compare: str | None,
    profile: Profile | None = None,
    origin: ModelOrigin | None = None,
) -> Answer:
    """The analysis of `command` at `version` (default: the newest), with the upgrade check
    against `compare` and, with a profile, the simulated deployment; computed once per
    question and state of the knowledge base. CommandRejected for a command over the
    bounds (refused before any work), NotFound for an unknown version."""
    key = answer_key(request, version, command, compare, profile, origin)
    cache = answer_cache(request)
    found = cache.get(key)
    if found is not None:
        return found
    result = explain(session, version, command, compare, profile)
    if origin is not None:
        result.update(
            model_source=origin.source,
            model_notes=origin.notes,
            draft_model_source=origin.draft_source,
        )
    answer = Answer.model_validate(bounded(result))
    answer._json = answer.model_dump_json(by_alias=True).encode()
    cache.put(key, answer)
    return answer


def json_answer(answer: Answer, origin: ModelOrigin | None) -> Response:
    response = Response(content=answer._json, media_type="application/json")
    hold(response, origin)
    return response


def hold(response: Response, origin: ModelOrigin | None) -> None:
    """How long the URL cache (app/respcache.py), keyed by the knowledge base's state, may
    keep an answer whose model came from elsewhere: not at all from a directory, which may
    change; while the hub failure it notes is remembered (the failure is transient). This
    view's own answer cache keys answers by where the model came from."""
    if origin is None or origin.holds_for is None:
        return
    if origin.holds_for <= 0:
        response.headers["Cache-Control"] = "no-store"
    else:
        response.headers["Cache-Control"] = f"private, max-age={int(origin.holds_for)}"


REFUSED = (CommandRejected, BadProfile, ModelUnavailable)


def refusal(exc: Exception) -> tuple[int, str]:
    """The status and error kind of a REFUSED question."""
    if isinstance(exc, CommandRejected):
        return (413 if exc.too_large else 400), "command"
    if isinstance(exc, ModelUnavailable):
        return exc.status, "model"
    return 400, "profile"


def _refused(request: Request, exc: Exception) -> Response:
    status, kind = refusal(exc)
    return error_response(request, status, str(exc), kind=kind)


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


@router.post(
    "/api/explain", response_model=ExplainResult, responses=_responses(400, 403, 404, 413, 422, 503)
)
async def api_explain(request: Request, body: ExplainRequest, session: SessionDep) -> Response:
    """Parse a launch command the way SGLang's argparse would at `version` (default: the
    newest) and report its flags, findings, compatibility range and, with `compare`, what
    an upgrade changes. Commands over 20,000 characters or 400 words after the launcher
    (flags and their values) are refused with 413; one that holds NUL or a lone surrogate
    with 400. An answer is computed once per state of the knowledge base."""
    # In the thread pool: bounding a hostile command takes milliseconds of CPU, and naming
    # a model may fetch its config from the hub.
    question = (body.version, body.command, body.compare)
    try:

        def answer() -> Response:
            check_command(body.command)  # before the model is looked up
            data = body.profile.model_dump() if body.profile else None
            profile, origin = parse_profile(request, data, body.command)
            return json_answer(explain_result(request, session, *question, profile, origin), origin)

        return await run_in_threadpool(answer)
    except REFUSED as exc:
        return _refused(request, exc)


@router.get(
    "/api/explain", response_model=ExplainResult, responses=_responses(400, 403, 404, 413, 503)
)
def api_explain_get(
    request: Request, session: SessionDep, query: Annotated[ExplainQuery, Query()]
) -> Response:
    """The same as POST, from the query string of the /explain page (a permalink); the
    profile's fields are query parameters of the same names."""
    try:
        check_command(query.command)
        profile, origin = parse_profile(request, query.profile(), query.command)
        answer = explain_result(
            request,
            session,
            query.version or None,
            query.command,
            query.compare or None,
            profile,
            origin,
        )
        return json_answer(answer, origin)
    except REFUSED as exc:
        return _refused(request, exc)


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
            check_command(command)  # before the model is looked up
            profile, origin = parse_profile(request, form, command)
            context["origin"] = origin
            context["result"] = explain_result(
                request, session, version or None, command, compare or None, profile, origin
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
        except REFUSED as exc:
            status = refusal(exc)[0]
            context["error"] = str(exc)
    response = render(request, "explain.html", context, status_code=status, block="results")
    hold(response, context.get("origin"))
    return response
