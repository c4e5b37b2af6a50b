"""The flags of a version (grouped, filterable) and the flag page."""

from __future__ import annotations

from collections import Counter
from itertools import groupby
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlmodel import Session, col, select

from app.deps import SessionDep
from app.highlight import excerpt
from app.templating import render
from app.views.common import page_context
from kb.queries import (
    MAX_NAME,
    choice_site_dict,
    choice_sites,
    constraint_dict,
    enum_dict,
    flag_constraints,
    flag_dict,
    flag_enum,
    flag_history,
    flag_url,
    flag_usages,
    get_flag,
    get_version,
    usage_site_dict,
    version_names,
)
from kb.schema import ConstraintSite, Flag, Version, loads

router = APIRouter()


def constraint_counts(session: Session, version: Version) -> Counter[str]:
    """How many constraint sites read or affect each flag (for the list's badges)."""
    counts: Counter[str] = Counter()
    rows = session.exec(
        select(ConstraintSite.flags, ConstraintSite.affects).where(
            ConstraintSite.version_id == version.id
        )
    )
    for flags, affects in rows:
        counts.update(set(loads(flags) or []) | set(loads(affects) or []))
    return counts


def matches(flag: dict[str, Any], query: str) -> bool:
    """Case-insensitive substring over name, aliases, dest and help; _ and - are the same."""
    q = query.strip().lower()
    if not q:
        return True
    dashed = q.replace("_", "-")
    names = [flag["name"], flag["dest"], *flag["aliases"]]
    if any(dashed in n.lower().replace("_", "-") for n in names):
        return True
    return q in (flag["help"] or "").lower()


def list_flags(session: Session, version: Version, query: str) -> list[dict[str, Any]]:
    rows = session.exec(
        select(Flag).where(Flag.version_id == version.id).order_by(col(Flag.path), col(Flag.line))
    )
    flags = [flag_dict(version, row) for row in rows]
    return [f for f in flags if matches(f, query[:MAX_NAME])]


@router.get("/v/{version}/flags", include_in_schema=False)
def flags_page(request: Request, session: SessionDep, version: str, q: str = "") -> Response:
    found = get_version(session, version)
    flags = list_flags(session, found, q)
    counts = constraint_counts(session, found)
    for flag in flags:
        flag["constraint_count"] = counts.get(flag["name"], 0)
    sections = [
        (section or "Other", list(group))
        for section, group in groupby(flags, key=lambda f: f["section"])
    ]
    context = {
        **page_context(session, found, "flags"),
        "sections": sections,
        "count": len(flags),
        "q": q[:MAX_NAME],
    }
    return render(request, "flags.html", context, block="flag_list")


@router.get("/api/v/{version}/flags")
def api_flags(session: SessionDep, version: str, q: str = "") -> dict[str, Any]:
    found = get_version(session, version)
    return {"version": found.name, "flags": list_flags(session, found, q)}


def flag_data(
    session: Session, version: Version, flag: Flag, site_details: bool = True
) -> dict[str, Any]:
    """The flag page's facts: the API twin's body (Flag + constraints, usages, ...)."""
    data = flag_dict(version, flag)
    choices = [str(c) for c in data["choices"] or []]
    sites = choice_sites(session, version, flag.name, choices)
    enum = flag_enum(session, version, flag.name)
    data["constraints"] = [
        constraint_dict(version, c) for c in flag_constraints(session, version, flag.name)
    ]
    data["usages"] = [usage_site_dict(version, u) for u in flag_usages(session, version, flag.dest)]
    data["choice_counts"] = {value: len(found) for value, found in sites.items()}
    if site_details:  # the HTML page shows counts only and links to the value pages
        data["choice_sites"] = {
            value: [choice_site_dict(version, s) for s in found] for value, found in sites.items()
        }
    data["enum"] = enum_dict(version, enum) if enum is not None else None
    data["history"] = flag_history(session, flag.name)
    return data


def related_flags(session: Session, version: Version, data: dict[str, Any]) -> list[dict[str, Any]]:
    """Other flags named in the flag's constraint sites, with whether this version has them."""
    names = sorted(
        {n for c in data["constraints"] for n in c["flags"] + c["affects"]} - {data["name"]}
    )
    known = set(
        session.exec(
            select(Flag.name).where(Flag.version_id == version.id, col(Flag.name).in_(names))
        )
    )
    return [{"name": n, "url": flag_url(version, n), "known": n in known} for n in names]


@router.get("/v/{version}/flags/{flag}", include_in_schema=False)
def flag_page(request: Request, session: SessionDep, version: str, flag: str) -> Response:
    found = get_version(session, version)
    row = get_flag(session, found, flag)
    data = flag_data(session, found, row, site_details=False)
    for constraint in data["constraints"]:
        src = constraint["source"]
        constraint["excerpt"] = excerpt(session, found, src["path"], src["line"], src["end_line"])
    src = data["source"]
    definition = excerpt(session, found, src["path"], src["line"], src["end_line"], context=1)
    names = version_names(session)
    absent = _absent_versions(names, data["history"])
    usages_by_file = [
        (path, list(group)) for path, group in groupby(data["usages"], key=lambda u: u["path"])
    ]
    context = {
        **page_context(session, found, f"flags/{row.name}", absent, names),
        "flag": data,
        "definition": definition,
        "related": related_flags(session, found, data),
        "usages_by_file": usages_by_file,
    }
    return render(request, "flag.html", context)


def _absent_versions(names: list[str], history: list[dict[str, Any]]) -> set[str]:
    """Versions (`names` newest first) where the flag does not exist, replayed from its
    added/removed history."""
    events = {c["version"]: c["field"] for c in history if c["field"] in ("added", "removed")}
    absent: set[str] = set()
    exists = False
    for name in reversed(names):
        if events.get(name) == "added":
            exists = True
        elif events.get(name) == "removed":
            exists = False
        if not exists:
            absent.add(name)
    return absent


@router.get("/api/v/{version}/flags/{flag}")
def api_flag(session: SessionDep, version: str, flag: str) -> dict[str, Any]:
    found = get_version(session, version)
    return flag_data(session, found, get_flag(session, found, flag))
