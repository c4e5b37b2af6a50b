"""Diff of two versions: /diff (pickers), /diff/{from}...{to} (permalink), /api/diff/{from}/{to}."""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response
from sqlmodel import Session, select

from app.deps import SessionDep
from app.templating import render
from app.views.common import error_response, errors
from kb.contract import Diff
from kb.diff import clause_root, diff_versions, topics, value_change, word_diff
from kb.diff_fold import moved_change, own_tests
from kb.doc_commands import broken_commands
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
from kb.schema import EnvVar, Version

router = APIRouter()


def diff_url(a: str, b: str) -> str:
    return f"/diff/{quote(a, safe='')}...{quote(b, safe='')}"


def diff_model(session: Session, a: Version, b: Version, flag: str = "", topic: str = "") -> Diff:
    """The API contract's shape (plus renamed, enums, a summary, and the help of the flags
    added and removed); with `flag` or `topic`, narrowed to them (kb.diff.keep_only)."""
    d = diff_versions(session, a, b, flag, topic)

    def brief(v: Version, flags: dict[str, Any], name: str) -> dict[str, Any]:
        flag = flags[name]
        return {
            "name": name,
            "dest": flag.dest,
            "help": flag.help,
            "url": flag_url(v, name),
            "section": flag.section,
        }

    sections = {name: f.section for name, f in d["flags_to"].items()}

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
            "respelled": [{**r, "dest": d["flags_to"][r["to"]].dest} for r in d["respelled"]],
            "changed": [{**c, "section": sections.get(c["name"])} for c in d["changed"]],
            "constraints_added": [constraint_dict(b, c) for c in d["constraints_added"]],
            "constraints_removed": [constraint_dict(a, c) for c in d["constraints_removed"]],
            "constraints_changed": changed_constraints(d),
            "constraints_value_changed": [
                {
                    "from": constraint_dict(a, old),
                    "to": constraint_dict(b, new),
                    **value_change(old, new),
                }
                for old, new in d["constraints_value_changed"]
            ],
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
            "env_renamed": d["env_renamed"],
            "env_changed": d["env_changed"],
            "condition_groups": [{**g, "count": len(g["items"])} for g in d["condition_groups"]],
            "constraints_moved": [
                {
                    "from": constraint_dict(a, old),
                    "to": constraint_dict(b, new),
                    **moved_change(old, new),
                }
                for old, new in d["constraints_moved"]
            ],
            "flag": flag or None,
            "topic": topic or None,
            # stored verdicts only (None without them): a diff checks no command itself
            "doc_commands_broken": broken_commands(session, a, b, None),
        }
    )


def changed_constraints(d: dict[str, Any]) -> list[dict[str, Any]]:
    """Sites that do the same thing under a new condition: both ends and a word diff."""
    return [
        {
            "from": constraint_dict(d["from"], old),
            "to": constraint_dict(d["to"], new),
            "condition": word_diff(old.condition, new.condition),
            **clauses,
            "meaning": meaning,
        }
        for (old, new), clauses, meaning in zip(
            d["constraints_changed"], d["condition_changes"], d["condition_meanings"], strict=True
        )
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


FlagFilter = Annotated[
    str, Query(max_length=200, description="only flags whose name holds this (and their sites)")
]
TopicFilter = Annotated[
    str, Query(max_length=200, description="only flags listed under this help section")
]


@router.get("/api/diff/{a}/{b}", response_model=Diff, responses=errors(404))
def api_diff(
    request: Request,
    session: SessionDep,
    a: str,
    b: str,
    flag: FlagFilter = "",
    topic: TopicFilter = "",
) -> Diff | Response:
    """Flags added, removed, renamed and changed, constraint sites added, removed, moved or
    reworded, enums changed, going from version `a` to version `b` (either order); `flag`
    and `topic` narrow it to some flags and what concerns them."""
    try:
        va, vb = _versions(request, session, a, b)
    except _Reply as reply:
        return reply.response
    return diff_model(session, va, vb, flag, topic)


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
    old_name = {r.to: r.from_ for r in d.renamed + d.respelled if r.via != "deprecated"}
    groups: dict[str, dict[str, Any]] = {}
    for c in d.changed:
        group = groups.setdefault(
            c.name,
            {"name": c.name, "from_name": old_name.get(c.name, c.name), "section": c.section},
        )
        group.setdefault("changes", []).append(c)
    return list(groups.values())


# A list longer than this starts folded (its groups closed); shorter lists start open.
FOLD = 20
OTHER = "Other"  # the group of flags (or variables) listed under no section


def _grouped(
    items: list[Any], key: Callable[[Any], str | None], fold: int = FOLD
) -> list[dict[str, Any]]:
    """Items grouped by `key` (None -> OTHER), groups by name with OTHER last; each group
    starts open when the whole list has at most `fold` items."""
    groups: dict[str, list[Any]] = {}
    for item in items:
        groups.setdefault(key(item) or OTHER, []).append(item)
    names = sorted(groups, key=lambda n: (n == OTHER, n.lower()))
    return [
        {
            "name": n,
            "items": groups[n],
            "total": len(groups[n]),
            "open": len(items) <= fold,
            "whole": False,
            "more_url": None,
        }
        for n in names
    ]


# A list of constraint sites longer than LONG shows the first FEW of each group; a link shows
# the rest of one group (the page with ?more=list:group), so the widest diffs stay readable.
LONG = 100
FEW = 4


def _capped(
    groups: list[dict[str, Any]], key: str, more: str, url: str, asked: dict[str, str]
) -> list[dict[str, Any]]:
    """Each group with at most FEW items (unless the list is short, or `more` asks for it
    whole), and the URL that shows it whole."""
    if sum(g["total"] for g in groups) <= LONG:
        return groups
    out = []
    for g in groups:
        whole = more == f"{key}:{g['name']}"
        link = url + "?" + urlencode({**asked, "more": f"{key}:{g['name']}"})
        out.append(
            {
                **g,
                "items": g["items"] if whole else g["items"][:FEW],
                "whole": whole,
                "more_url": None if whole or g["total"] <= FEW else link,
            }
        )
    return out


def _condition_groups(d: Diff, folded: bool) -> list[dict[str, Any]]:
    """Each root cause with its sites (those folded out of the headline, or the others), what
    kinds they are, and how many carry the clause negated (they sit in a later branch of the
    `if` that changed)."""
    out = []
    for g in d.condition_groups:
        sites = [
            d.constraints_changed[i]
            for i in g.items
            if (d.constraints_changed[i].meaning != "changed") == folded
        ]
        if not sites:
            continue
        clauses = [c for s in sites for c in (s.gained if g.change == "gained" else s.lost)]
        negated = sum(
            1
            for s in sites
            if any(
                c.strip().startswith("not") and clause_root(c) == g.condition
                for c in (s.gained if g.change == "gained" else s.lost)
            )
        )
        kinds = Counter(s.to.kind for s in sites)
        # Sites with the very same clause changes share one listing of them.
        variants: dict[tuple[tuple[str, ...], tuple[str, ...]], list[Any]] = {}
        for site in sites:
            variants.setdefault((tuple(site.lost), tuple(site.gained)), []).append(site)
        # The cause is written once, in the entry's summary, with what it replaced (the
        # clause the sites lost that reads most like it): each site under an upstream `if`
        # that changed would repeat both, as written or negated.
        was = _replaced(g.condition, g.change, sites) if len(sites) > 1 else ""
        cause = {g.condition, was} if len(sites) > 1 else set()
        out.append(
            {
                "group": g,
                "count": len(sites),
                "sites": sites,
                "was": was,
                "variants": [
                    {
                        "lost": [c for c in lost if clause_root(c) not in cause],
                        "gained": [c for c in gained if clause_root(c) not in cause],
                        "sites": group,
                    }
                    for (lost, gained), group in variants.items()
                ],
                "kinds": kinds.most_common(),
                "functions": sorted({s.to.function for s in sites}),
                "negated": negated,
                "written": next((c for c in clauses if clause_root(c) == g.condition), ""),
                "open": len(sites) <= 3,
            }
        )
    return out


def _replaced(condition: str, change: str, sites: list[Any]) -> str:
    """The clause a gained cause replaced (or a lost one was replaced by): of the clauses
    the sites lost (gained), the one most of them share that reads like the cause."""
    if change not in ("gained", "lost"):
        return ""
    other = Counter(
        root
        for s in sites
        for root in {clause_root(c) for c in (s.lost if change == "gained" else s.gained)}
        if difflib.SequenceMatcher(a=root, b=condition).ratio() >= 0.8
    )
    return other.most_common(1)[0][0] if other else ""


def _env_sections(session: Session, version: Version) -> dict[str, str | None]:
    rows = session.exec(
        select(EnvVar.name, EnvVar.section).where(EnvVar.version_id == version.id)
    ).all()
    # A heading comment of only rules ("# =====") names no section.
    return {name: sec if sec and any(ch.isalnum() for ch in sec) else None for name, sec in rows}


@router.get("/diff/{spec}", include_in_schema=False)
def diff_page(
    request: Request,
    session: SessionDep,
    spec: str,
    flag: FlagFilter = "",
    topic: TopicFilter = "",
    more: Annotated[str, Query(max_length=300)] = "",
) -> Response:
    if "..." not in spec and ".." in spec:  # GitHub's other compare spelling: A..B
        a, b = spec.split("..", 1)
        return RedirectResponse(diff_url(a, b), status_code=308)
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
    d = diff_model(session, va, vb, flag, topic)
    asked = {k: v for k, v in (("flag", flag), ("topic", topic)) if v}
    query = "?" + urlencode(asked) if asked else ""
    env_a, env_b = _env_sections(session, va), _env_sections(session, vb)
    changed = _changed_groups(d)
    context = {
        "d": d,
        "a": va,
        "b": vb,
        "names": version_names(session),
        "added_groups": _grouped(d.added_flags, lambda f: f.section),
        "removed_groups": _grouped(d.removed_flags, lambda f: f.section),
        "changed_groups": _grouped(changed, lambda g: g["section"]),
        "condition_groups": _condition_groups(d, folded=False),
        "folded_groups": _condition_groups(d, folded=True),
        "topics": topics(session, va, vb),
        "constraint_groups": {
            key: _capped(
                _grouped(sites, lambda c: c.function), key, more, diff_url(va.name, vb.name), asked
            )
            for key, sites in (("added", d.constraints_added), ("removed", d.constraints_removed))
        },
        "env_groups": {
            # Names alone wrap several to a line: a longer list stays readable open.
            "added": _grouped(d.env_added, env_b.get, 3 * FOLD),
            "removed": _grouped(d.env_removed, env_a.get, 3 * FOLD),
            "changed": _grouped(d.env_changed, lambda c: env_b.get(c.name)),
        },
        "fold": FOLD,
        "own_tests": own_tests,
        "flag_url": flag_url,
        "swap_url": diff_url(vb.name, va.name) + query,
        "api_url": f"/api/diff/{quote(va.name, safe='')}/{quote(vb.name, safe='')}" + query,
        "page_url": diff_url(va.name, vb.name),
        "version": None,
        "page": "diff",
    }
    return render(request, "diff.html", context)
