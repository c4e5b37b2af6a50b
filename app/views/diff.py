"""Diff of two versions: /diff (pickers), /diff/{from}...{to} (permalink), /api/diff/{from}/{to}."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response
from sqlmodel import Session

from app.deps import SessionDep
from app.templating import render
from app.views.common import error_response, errors
from kb.contract import Diff
from kb.diff import diff_versions, word_diff
from kb.queries import (
    NotFound,
    citation,
    constraint_dict,
    enum_dict,
    flag_url,
    get_version,
    ordered_versions,
    version_names,
)
from kb.schema import Version

router = APIRouter()


def diff_url(a: str, b: str) -> str:
    return f"/diff/{quote(a, safe='')}...{quote(b, safe='')}"


def diff_model(session: Session, a: Version, b: Version) -> Diff:
    """The API contract's shape (plus renamed, enums, a summary, and the help of the flags
    added and removed)."""
    d = diff_versions(session, a, b)

    def brief(v: Version, flags: dict[str, Any], name: str) -> dict[str, Any]:
        flag = flags[name]
        return {"name": name, "dest": flag.dest, "help": flag.help, "url": flag_url(v, name)}

    return Diff.model_validate(
        {
            "from": a.name,
            "to": b.name,
            "backwards": a.position > b.position,
            "summary": d["summary"],
            "added": d["added"],
            "removed": d["removed"],
            "added_flags": [brief(b, d["flags_to"], n) for n in d["added"]],
            "removed_flags": [brief(a, d["flags_from"], n) for n in d["removed"]],
            "renamed": [{**r, "dest": d["flags_to"][r["to"]].dest} for r in d["renamed"]],
            "changed": d["changed"],
            "constraints_added": [constraint_dict(b, c) for c in d["constraints_added"]],
            "constraints_removed": [constraint_dict(a, c) for c in d["constraints_removed"]],
            "constraints_changed": changed_constraints(d),
            "enums_added": [enum_dict(b, e) for e in d["enums_added"]],
            "enums_removed": [enum_dict(a, e) for e in d["enums_removed"]],
            "enums_changed": [
                {
                    "name": e["name"],
                    "added": e["added"],
                    "removed": e["removed"],
                    "changed": e["changed"],
                    "source": citation(b, e["enum"].path, e["enum"].line, e["enum"].end_line),
                }
                for e in d["enums_changed"]
            ],
            "env_added": d["env_added"],
            "env_removed": d["env_removed"],
            "env_changed": d["env_changed"],
        }
    )


def changed_constraints(d: dict[str, Any]) -> list[dict[str, Any]]:
    """Sites that do the same thing under a new condition: both ends and a word diff."""
    return [
        {
            "from": constraint_dict(d["from"], old),
            "to": constraint_dict(d["to"], new),
            "condition": word_diff(old.condition, new.condition),
        }
        for old, new in d["constraints_changed"]
    ]


def _versions(request: Request, session: SessionDep, a: str, b: str) -> tuple[Version, Version]:
    """Both versions, or a 404 whose suggestions keep the other side of the diff."""

    found: list[Version] = []
    for name, other, side in ((a, b, 0), (b, a, 1)):
        try:
            found.append(get_version(session, name))
        except NotFound as exc:
            api = request.url.path.startswith("/api/")
            links = []
            for s in exc.suggestions:
                pair = (s, other) if side == 0 else (other, s)
                url = f"/api/diff/{quote(pair[0], safe='')}/{quote(pair[1], safe='')}"
                links.append({"name": s, "url": url if api else diff_url(*pair)})
            raise _Reply(
                error_response(request, 404, exc.detail, links, kind="version", name=exc.name)
            ) from exc
    return found[0], found[1]


class _Reply(Exception):
    def __init__(self, response: Response) -> None:
        self.response = response


@router.get("/api/diff/{a}/{b}", response_model=Diff, responses=errors(404))
def api_diff(request: Request, session: SessionDep, a: str, b: str) -> Diff | Response:
    """Flags added, removed, renamed and changed, constraint sites added and removed, enums
    changed, going from version `a` to version `b` (either order)."""
    try:
        va, vb = _versions(request, session, a, b)
    except _Reply as reply:
        return reply.response
    return diff_model(session, va, vb)


@router.get("/diff", include_in_schema=False)
def diff_home(
    request: Request,
    session: SessionDep,
    a: Annotated[str, Query(alias="from", max_length=200)] = "",
    to: Annotated[str, Query(max_length=200)] = "",
) -> Response:
    """The pickers submit here (?from=&to=); without them, the two newest versions."""
    names = version_names(session)
    if a and to:
        return RedirectResponse(diff_url(a, to), status_code=302)
    if len(names) < 2:
        context = {"d": None, "names": names, "version": None, "page": "diff"}
        return render(request, "diff.html", context)
    return RedirectResponse(diff_url(a or names[1], to or names[0]), status_code=302)


def _changed_groups(d: Diff) -> list[dict[str, Any]]:
    """Field changes grouped by flag, with the flag's name at each side of the diff."""
    old_name = {r.to: r.from_ for r in d.renamed if r.via != "deprecated"}
    groups: dict[str, dict[str, Any]] = {}
    for c in d.changed:
        group = groups.setdefault(
            c.name, {"name": c.name, "from_name": old_name.get(c.name, c.name)}
        )
        group.setdefault("changes", []).append(c)
    return list(groups.values())


@router.get("/diff/{spec}", include_in_schema=False)
def diff_page(request: Request, session: SessionDep, spec: str) -> Response:
    if "..." not in spec:
        versions = ordered_versions(session)
        raise NotFound(
            "page",
            spec,
            "A diff URL names two versions: /diff/FROM...TO, e.g. "
            + (diff_url(versions[1].name, versions[0].name) if len(versions) > 1 else "")
            + ".",
        )
    a, b = spec.split("...", 1)
    try:
        va, vb = _versions(request, session, a, b)
    except _Reply as reply:
        return reply.response
    d = diff_model(session, va, vb)
    context = {
        "d": d,
        "a": va,
        "b": vb,
        "names": version_names(session),
        "changed_groups": _changed_groups(d),
        "flag_url": flag_url,
        "swap_url": diff_url(vb.name, va.name),
        "api_url": f"/api/diff/{quote(va.name, safe='')}/{quote(vb.name, safe='')}",
        "version": None,
        "page": "diff",
    }
    return render(request, "diff.html", context)
