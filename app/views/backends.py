"""Backends: flags whose choices name backends (or map to an enum), and the page of one
backend value listing every site that handles it."""

from __future__ import annotations

from collections import Counter
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlmodel import Session, select

from app.deps import SessionDep
from app.highlight import excerpt
from app.templating import render
from app.views.common import errors, page_context
from kb.contract import BackendList, BackendValue
from kb.doc_commands import examples as doc_examples
from kb.load_requirements import layer_checks, load_requirements
from kb.queries import (
    NotFound,
    all_enums,
    all_flags,
    backend_url,
    choice_site_dict,
    choice_sites,
    did_you_mean,
    flag_enum,
    flag_url,
    flag_values,
    get_version,
)
from kb.reach import (
    area_of,
    backend_tail,
    backend_version,
    enum_member,
    flag_for_value,
    sites_by_area,
    value_effects,
)
from kb.requirements import summarize
from kb.schema import ChoiceSite, Flag, Version, loads

router = APIRouter()


def backend_list(session: Session, version: Version) -> BackendList:
    """Flags with choices (or known values) whose name says backend, or that an enum is
    linked to."""
    enum_of: dict[str, str] = {}
    for enum in all_enums(session, version):
        for name in loads(enum.flags) or []:
            enum_of.setdefault(name, enum.name)
    counts: Counter[tuple[str, str]] = Counter()
    rows = session.exec(
        select(ChoiceSite.value, ChoiceSite.flag, ChoiceSite.candidates).where(
            ChoiceSite.version_id == version.id
        )
    )
    for value, owner, candidates in rows:
        for name in [owner] if owner else loads(candidates) or []:
            counts[(name, value)] += 1
    out = []
    for flag in all_flags(session, version):
        choices = flag_values(flag)
        if not choices or ("backend" not in flag.name and flag.name not in enum_of):
            continue
        values = [
            {
                "value": str(value),
                "sites": counts.get((flag.name, str(value)), 0),
                "url": backend_url(version, flag.name, str(value)),
            }
            for value in choices
        ]
        out.append(
            {
                "flag": flag.name,
                "url": flag_url(version, flag.name),
                "help": flag.help,
                "enum": enum_of.get(flag.name),
                "choices_const": flag.choices_const,
                "values": values,
                "values_open": flag.choices is None,
            }
        )
    return BackendList.model_validate({"version": version.name, "backends": out})


@router.get("/v/{version}/backends", include_in_schema=False)
def backends_page(request: Request, session: SessionDep, version: str) -> Response:
    found = get_version(session, version)
    context = {**page_context(session, found, "backends"), "data": backend_list(session, found)}
    return render(request, "backends.html", context)


@router.get("/api/v/{version}/backends", responses=errors(404))
def api_backends(session: SessionDep, version: str) -> BackendList:
    """Flags whose choices name backends (or map to an enum), with each value's site count."""
    return backend_list(session, get_version(session, version))


def derived_from(
    session: Session, version: Version, row: Flag, value: str
) -> dict[str, Any] | None:
    """The flag `row` is a variant of, when it accepts `value`: the one whose dest ends
    `row`'s (`attention_backend` in `decode_attention_backend`; the closest, the longest).
    Ingest attributes to it the sites that could be about either ("family")."""
    bases = [
        f
        for f in all_flags(session, version)
        if f.name != row.name
        and row.dest.endswith("_" + f.dest)
        and value in [str(v) for v in flag_values(f)]
    ]
    if not bases:
        return None
    base = max(bases, key=lambda f: len(f.dest))
    return {
        "flag": base.name,
        "sites": len(choice_sites(session, version, base.name, [value])[value]),
        "url": backend_url(version, base.name, value),
    }


def backend_value(session: Session, version: Version, flag: str, value: str) -> BackendValue:
    """Every site handling one value of a flag (a case-insensitive match of a choice)."""
    try:
        row, spelled = flag_for_value(session, version, flag, value)  # --old: its successor
    except NotFound as exc:
        # A suggested flag, or a version with the flag, that lacks the value: the flag's page.
        exc.pages = [backend_tail(session, version, s, [value], False) for s in exc.suggestions]
        for e in exc.elsewhere:
            other = get_version(session, e["version"])
            if backend_tail(session, other, flag, [value], compare=False).startswith("flags"):
                e["values"] = ""
        raise
    choices = flag_values(row)
    if spelled is None:
        raise NotFound(
            "value",
            value,
            f"{value[:200]!r} is not a value of {row.name} in {version.name}.",
            did_you_mean(value, choices) or choices[:5],
            version=version.name,
        )
    value = spelled
    sites = choice_sites(session, version, row.name, [value])[value]
    enum = flag_enum(session, version, row.name)
    effects = value_effects(session, version, row, [value])[value]
    site_dicts = [choice_site_dict(version, site) for site in sites]
    others = [c for c in choices if c != value]
    names = [row.name, *(loads(row.aliases) or [])]
    selected, stages = layer_checks(session, version, row.dest, [str(c) for c in choices], value)
    return BackendValue.model_validate(
        {
            "version": version.name,
            "flag": row.name,
            "flag_url": flag_url(version, row.name),
            "value": value,
            "choices": [str(c) for c in loads(row.choices) or []],
            "known_values": loads(row.known_values),
            "enum": enum.name if enum is not None else None,
            "sites": site_dicts,
            "enum_member": enum_member(session, version, row, value),
            "requirements": effects["requirements"],
            "requirement_summary": summarize(
                effects["requirements"],
                load_requirements(session, version, choices, value),
                stages,
            ),
            "layer_checks": selected,
            "side_effects": effects["side_effects"],
            "examples": doc_examples(session, version, names, value),
            "areas": [
                {"area": g["area"], "count": len(g["sites"])} for g in sites_by_area(site_dicts)
            ],
            "compare_url": (
                f"{backend_url(version, row.name, 'compare')}"
                f"?values={quote(value)},{quote(others[0])}"
                if others
                else None
            ),
            "derives_from": derived_from(session, version, row, value),
        }
    )


@router.get("/v/{version}/backends/{flag}/{value}", include_in_schema=False)
def backend_value_page(
    request: Request, session: SessionDep, version: str, flag: str, value: str
) -> Response:
    found = backend_version(session, version, flag, [value], compare=False)
    data = backend_value(session, found, flag, value)
    groups: dict[str, list[tuple[Any, Any]]] = {}
    for s in data.sites:  # sites grouped by area, each with its highlighted excerpt
        groups.setdefault(area_of(s.path), []).append(
            (s, excerpt(session, found, s.path, s.line, s.end_line))
        )
    context = {
        **page_context(session, found, f"backends/{data.flag}/{data.value}"),
        "data": data,
        "groups": sorted(groups.items()),
    }
    return render(request, "backend_value.html", context)


@router.get("/api/v/{version}/backends/{flag}/{value}", responses=errors(404))
def api_backend_value(session: SessionDep, version: str, flag: str, value: str) -> BackendValue:
    """Every code site that handles one value of a flag, attributed or ambiguous."""
    found = backend_version(session, version, flag, [value], compare=False)
    return backend_value(session, found, flag, value)
