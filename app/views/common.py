"""Shared by the view modules: the context of version-pinned pages (the version, the
switcher's list, the page) and the error replies (one body shape for HTML and JSON)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import parse_qsl, quote, urlencode

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from markupsafe import Markup
from pydantic import BeforeValidator
from sqlmodel import Session, select

from app.fragments import flag_link
from app.templating import render
from kb.contract import ErrorBody
from kb.queries import (
    find_flag,
    flag_name_candidates,
    version_names,
    versions_with_flag,
)
from kb.replacements import expand_braces
from kb.schema import Version

# What each error status means in this API (the OpenAPI `responses` of the routes).
ERROR_STATUSES = {
    400: "A query or path parameter is not valid.",
    403: "The profile's model is gated or private on the Hugging Face Hub.",
    404: "Unknown version, flag, value, path or model; `suggestions` lists the nearest names.",
    413: "The launch command is longer than the server accepts.",
    422: "The JSON body does not match the request model.",
    503: "A service the answer needs is unavailable: the search index is not built yet, or "
    "the Hugging Face Hub is unreachable from the server.",
}


def _integer_text(value: Any) -> Any:
    """An integer query parameter as the description's `integer` says: digits, perhaps a
    minus (pydantic alone reads "+0.0", "1_0" and " 1" as integers too)."""
    if isinstance(value, str) and not re.fullmatch(r"-?[0-9]+", value):
        raise ValueError("must be an integer")
    return value


QueryInt = Annotated[int, BeforeValidator(_integer_text)]


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The `responses=` of a JSON route: the error statuses it can answer, all ErrorBody."""
    return {s: {"model": ErrorBody, "description": ERROR_STATUSES[s]} for s in statuses}


def page_context(
    session: Session,
    version: Version,
    page: str,
    absent: set[str] | None = None,
    names: list[str] | None = None,
) -> dict[str, Any]:
    """`page` is the URL tail after /v/{version}/ that the version switcher keeps;
    `absent` names versions where that page does not exist (marked in the switcher)."""
    return {
        "version": version,
        "versions": names if names is not None else version_names(session),
        "page": page,
        "absent": absent or set(),
    }


def replacement_links(session: Session, version: Version, replacement: str) -> Markup:
    """A deprecated name's replacement flag(s), each linked to its page: a brace pair names
    two (`--x-{decode,prefill}=off`: `--x-decode=off` and `--x-prefill=off`), and a name
    that is no flag of the version is shown without a link (its page would be a 404)."""
    return Markup(" and ").join(
        flag_link(version, name)
        if find_flag(session, version, name.partition("=")[0]) is not None
        else Markup("<code>{}</code>").format(name)
        for name in expand_braces(replacement)
    )


def wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/") or request.url.path == "/api"


def suggestion_url(
    path: str,
    kind: str,
    name: str,
    query: str = "",
    values: list[str] | None = None,
    page: str | None = None,
) -> str | None:
    """The same URL with the wrong segment (version, flag, value or file path) replaced, its
    query kept (a list's filters). On a compare page the link compares `values`
    (NotFound.values: every wrong value corrected, or those a suggested flag has; none:
    that flag's page); with no values named at all, a value's suggestion is its own page.
    With a `page` (NotFound.pages: the URL tail after the version, query included), the
    link goes there instead: the same page may not exist for a suggested version or flag."""
    segments = path.split("/")
    try:
        i = segments.index("v")
    except ValueError:
        return f"/v/{quote(name, safe='')}/flags" if kind == "version" else None
    if page is not None and i + 1 < len(segments):
        version = quote(name, safe="") if kind == "version" else segments[i + 1]
        return "/".join([*segments[: i + 1], version, page])
    slot = {
        "version": i + 1, "flag": i + 3, "env": i + 3, "value": i + 4, "path": i + 3,
        "model": i + 3,
    }.get(kind)  # fmt: skip
    if slot is None or slot >= len(segments):
        return None
    if values is not None and segments[-1] == "compare" and kind in ("flag", "value"):
        if kind == "flag":
            segments[slot] = name
        if values:
            query = with_values(query, ",".join(values))
        else:  # nothing the flag has to compare: its page
            segments, query = [*segments[: i + 2], "flags", name], ""
    elif kind == "value" and segments[slot] == "compare" and slot == len(segments) - 1:
        segments[slot] = name  # no value named to correct: the value's own page
        query = ""
    elif kind == "path":
        segments = segments[:slot] + name.split("/")
    else:
        segments[slot] = name
    url = "/".join(quote(segment, safe="") for segment in segments)
    return f"{url}?{query}" if query else url


def same_page_elsewhere(request: Request, found: dict[str, str]) -> dict[str, str]:
    """A version that has the flag a backend page asked for: its link goes to the same
    backend page (value, or compare with its query) there, not to the flag page. A compare
    page's values there (NotFound.elsewhere's "values", comma-joined) are those that
    version has; with none ("", also a value page's version without the value), the link
    stays on the flag's page."""
    values = found.pop("values", None)
    segments = request.url.path.split("/")
    if "v" not in segments:
        return found
    i = segments.index("v")
    if segments[i + 2 : i + 3] != ["backends"] or len(segments) < i + 5:
        return found
    if values == "":  # the flag's page there
        return found
    flag = found["url"].rsplit("/", 1)[1]  # the flag's name in that version
    segments[i + 1], segments[i + 3] = quote(found["version"], safe=""), flag
    url = "/".join(segments)
    query = request.url.query
    if values is not None:
        query = with_values(query, values)
    return {**found, "url": f"{url}?{query}" if query else url}


def json_twin(request: Request, link: dict[str, str]) -> dict[str, str]:
    """On a JSON reply, a link to a page as its JSON twin (`/api` in front), as the
    suggestions are: every page that "elsewhere" links (flag, env, backend) has one."""
    if wants_json(request) and link["url"].startswith("/v/"):
        return {**link, "url": "/api" + link["url"]}
    return link


def with_values(query: str, values: str) -> str:
    """`query` with its `values` (a compare page's, comma-joined) replaced by `values`."""
    pairs = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != "values"]
    return urlencode([*pairs, ("values", values)], safe=",")


def error_response(
    request: Request,
    status: int,
    detail: str,
    suggestions: list[dict[str, str]] | None = None,
    elsewhere: list[dict[str, str]] | None = None,
    kind: str = "page",
    name: str = "",
    context: dict[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    error = ErrorBody.model_validate(
        {
            "detail": detail,
            "kind": kind,
            "name": name,
            "suggestions": suggestions or [],
            "elsewhere": elsewhere or [],
        }
    )
    response: Response
    if wants_json(request):
        response = JSONResponse(error.model_dump(mode="json"), status_code=status)
    else:
        page = {"status": status, **dict(error), **(context or {})}
        response = render(request, "error.html", page, status_code=status)
    response.headers.update(headers or {})
    return response


def pinned_context(request: Request, version_name: str, flag: str | None = None) -> dict[str, Any]:
    """The version switcher for an error inside an existing version: it keeps the page, so
    a flag missing here is one click from a version that has it. For a missing `flag`, the
    versions without it are marked, so the banner does not send to another 404."""
    segments = request.url.path.split("/")
    tail = "/".join(segments[3:]) if segments[1:2] == ["v"] else "flags"
    with Session(request.app.state.engine) as session:
        version = session.exec(select(Version).where(Version.name == version_name)).first()
        if version is None:
            return {}
        absent = None
        if flag is not None:
            having = {v.name for v in versions_with_flag(session, flag_name_candidates(flag))}
            absent = set(version_names(session)) - having
        return page_context(session, version, tail, absent)
