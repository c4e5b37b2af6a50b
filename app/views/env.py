"""Environment variables of a version (filterable list) and one variable's page."""

from __future__ import annotations

from itertools import groupby
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from sqlmodel import Session, select

from app.deps import SessionDep
from app.highlight import excerpt
from app.templating import render
from app.views.common import errors, page_context, replacement_links, suggestion_url
from kb.contract import EnvList, EnvPage
from kb.env import (
    all_env,
    conversion_words,
    env_history,
    env_matches,
    env_site_dict,
    env_sites,
    env_var_dict,
    get_env,
    is_deprecated,
    readers_of,
    versions_with_env,
)
from kb.queries import MAX_NAME, NotFound, get_version, version_names
from kb.schema import EnvVar, Version

router = APIRouter()


def env_list(session: Session, version: Version, query: str) -> EnvList:
    """The variables of a version by name, filtered by `query`."""
    rows = [env_var_dict(version, v) for v in all_env(session, version)]
    found = [v for v in rows if env_matches(v, query[:MAX_NAME])]
    return EnvList.model_validate({"version": version.name, "env": found})


@router.get("/v/{version}/env", include_in_schema=False)
def env_list_page(request: Request, session: SessionDep, version: str, q: str = "") -> Response:
    found = get_version(session, version)
    data = env_list(session, found, q)
    context = {
        **page_context(session, found, "env"),
        "data": data,
        "declared": sum(1 for v in data.env if v.declared),
        "count": len(data.env),
        "q": q[:MAX_NAME],
    }
    return render(request, "env_list.html", context, block="env_list")


@router.get("/api/v/{version}/env", responses=errors(404))
def api_env(session: SessionDep, version: str, q: str = "") -> EnvList:
    """The environment variables of a version; `q` filters by name, comment or flag."""
    return env_list(session, get_version(session, version), q)


def env_data(session: Session, version: Version, var: EnvVar) -> EnvPage:
    """The variable page: EnvVar + reads (every read and write site) and history."""
    data = env_var_dict(version, var)
    # Names environ.py deprecates in its favour (their rows hold the replacement).
    older = session.exec(
        select(EnvVar.name).where(EnvVar.version_id == version.id, EnvVar.replacement == var.name)
    )
    data["deprecated_names"] = list(dict.fromkeys([*data["deprecated_names"], *sorted(older)]))
    data["version"] = version.name
    data["reads"] = [env_site_dict(version, s) for s in env_sites(session, version, var.name)]
    data["history"] = env_history(session, var.name)
    return EnvPage.model_validate(data)


def env_or_redirect(
    request: Request, session: Session, version: Version, raw: str
) -> EnvVar | Response:
    """The variable `raw` names, or a redirect to the variable that reads it when `raw` is
    one of its deprecated names (EnvBoolWithAlias: SGLang still reads the old name), as a
    flag alias answers on its flag's page. The query is kept, plus `via=OLD` for the note."""
    try:
        return get_env(session, version, raw)
    except NotFound:
        name = raw.strip()[:MAX_NAME]
        for candidate in dict.fromkeys([name, name.upper()]):
            readers = readers_of(session, candidate, [version.id or -1])
            if readers:
                query = "&".join(q for q in (request.url.query, urlencode({"via": candidate})) if q)
                url = suggestion_url(request.url.path, "env", readers[0].name, query)
                # 307: a later ingest may give the old name a row of its own again
                return RedirectResponse(url or "/", status_code=307)
        raise


@router.get("/v/{version}/env/{name}", include_in_schema=False)
def env_page(
    request: Request, session: SessionDep, version: str, name: str, via: str = ""
) -> Response:
    found = get_version(session, version)
    var = env_or_redirect(request, session, found, name)
    if isinstance(var, Response):
        return var
    data = env_data(session, found, var)
    src = data.source
    definition = excerpt(session, found, src.path, src.line, src.end_line, context=1)
    names = version_names(session)
    having = {v.name for v in versions_with_env(session, var.name)}
    flag_sites = [s for s in data.reads if s.flags]
    # An undeclared name is cited at its first read, or where environ.py deprecates it.
    read_there = any(s.path == src.path and s.line == src.line for s in data.reads)
    deprecated = is_deprecated(data.name, data.replacement, data.comment)
    cited_as = "Declared at" if data.declared else "First read at"
    if not data.declared and deprecated and not read_there:
        cited_as = "Deprecated at"
    by_file = [(p, list(g)) for p, g in groupby(data.reads, key=lambda s: s.path)]
    conversion = data.conversion.model_dump() if data.conversion is not None else None
    new = data.replacement or ""
    context = {
        **page_context(session, found, f"env/{var.name}", set(names) - having, names),
        "var": data,
        "definition": definition,
        "flag_sites": flag_sites,
        "cited_as": cited_as,
        "sites_by_file": by_file,
        "converts": conversion_words(conversion),  # in plain words, with an example
        "to_flags": replacement_links(session, found, new) if new.startswith("--") else None,
        # reached by a deprecated name (env_or_redirect): only one it really has
        "via": via if via in data.deprecated_names else None,
    }
    return render(request, "env.html", context)


@router.get(
    "/api/v/{version}/env/{name}",
    response_model=EnvPage,
    responses=errors(404),  # the 307 of a deprecated name is no answer, like a flag's
)
def api_env_var(request: Request, session: SessionDep, version: str, name: str) -> Any:
    """One environment variable (exact name, any case) with its reads and history; a
    deprecated name redirects (307) to the variable that still reads it."""
    found = get_version(session, version)
    var = env_or_redirect(request, session, found, name)
    return var if isinstance(var, Response) else env_data(session, found, var)
