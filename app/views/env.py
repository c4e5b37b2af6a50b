"""Environment variables of a version (filterable list) and one variable's page."""

from __future__ import annotations

from itertools import groupby
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlmodel import Session

from app.deps import SessionDep
from app.highlight import excerpt
from app.templating import render
from app.views.common import page_context
from kb.env import (
    all_env,
    env_history,
    env_matches,
    env_site_dict,
    env_sites,
    env_var_dict,
    get_env,
    versions_with_env,
)
from kb.queries import MAX_NAME, get_version, version_names
from kb.schema import EnvVar, Version

router = APIRouter()


def list_env(session: Session, version: Version, query: str) -> list[dict[str, Any]]:
    rows = [env_var_dict(version, v) for v in all_env(session, version)]
    return [v for v in rows if env_matches(v, query[:MAX_NAME])]


@router.get("/v/{version}/env", include_in_schema=False)
def env_list_page(request: Request, session: SessionDep, version: str, q: str = "") -> Response:
    found = get_version(session, version)
    variables = list_env(session, found, q)
    context = {
        **page_context(session, found, "env"),
        "variables": variables,
        "declared": sum(1 for v in variables if v["declared"]),
        "count": len(variables),
        "q": q[:MAX_NAME],
    }
    return render(request, "env_list.html", context, block="env_list")


@router.get("/api/v/{version}/env")
def api_env(session: SessionDep, version: str, q: str = "") -> dict[str, Any]:
    found = get_version(session, version)
    return {"version": found.name, "env": list_env(session, found, q)}


def env_data(session: Session, version: Version, var: EnvVar) -> dict[str, Any]:
    """The variable page's facts: EnvVar + reads (every site) and history."""
    data = env_var_dict(version, var)
    data["reads"] = [env_site_dict(version, s) for s in env_sites(session, version, var.name)]
    data["history"] = env_history(session, var.name)
    return data


@router.get("/v/{version}/env/{name}", include_in_schema=False)
def env_page(request: Request, session: SessionDep, version: str, name: str) -> Response:
    found = get_version(session, version)
    var = get_env(session, found, name)
    data = env_data(session, found, var)
    src = data["source"]
    definition = excerpt(session, found, src["path"], src["line"], src["end_line"], context=1)
    names = version_names(session)
    having = {v.name for v in versions_with_env(session, var.name)}
    flag_sites = [s for s in data["reads"] if s["flags"]]
    by_file = [(p, list(g)) for p, g in groupby(data["reads"], key=lambda s: s["path"])]
    context = {
        **page_context(session, found, f"env/{var.name}", set(names) - having, names),
        "var": data,
        "definition": definition,
        "flag_sites": flag_sites,
        "sites_by_file": by_file,
    }
    return render(request, "env.html", context)


@router.get("/api/v/{version}/env/{name}")
def api_env_var(session: SessionDep, version: str, name: str) -> dict[str, Any]:
    found = get_version(session, version)
    return env_data(session, found, get_env(session, found, name))
