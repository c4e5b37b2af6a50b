"""The flags of a version (grouped, filterable) and the flag page."""

from __future__ import annotations

import json
from collections.abc import Hashable
from functools import lru_cache
from itertools import groupby
from operator import itemgetter
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response
from markupsafe import Markup
from pydantic import BaseModel
from sqlmodel import Session

from app import fragments
from app.deps import SessionDep
from app.highlight import excerpt
from app.templating import render
from app.views import flag_parts as parts
from app.views import listing
from app.views.common import errors, page_context, replacement_links, suggestion_url
from app.views.listing import csv_text, facet
from kb.cache import Cache
from kb.contract import FlagList, FlagPage
from kb.doc_commands import examples as doc_examples
from kb.env import flag_env_writes
from kb.explain.load import load_options
from kb.flagsites import chain_reads, version_sites
from kb.help_claims import contradictions
from kb.load_requirements import layer_selections, load_requirements, stage_counts
from kb.queries import (
    MAX_NAME,
    NotFound,
    backend_url,
    citation,
    constraint_counts,
    deprecation_note,
    dest_names,
    enum_dict,
    flag_dict,
    flag_enum,
    flag_history,
    flag_name_set,
    flag_url,
    get_flag_row,
    get_version,
    numbered_anchors,
    per_stamp,
    read_version,
    session_stamp,
    version_file_sha,
    version_flag_dicts,
    version_names,
)
from kb.reach import MODELS_DIR, flag_models, model_groups
from kb.schema import Flag, Version, blob_text, loads

router = APIRouter()


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


def flag_list(session: Session, version: Version, query: str, section: str = "") -> FlagList:
    """The flags of a version in source order, filtered by `query` and a `section` ("Other"
    for flags in none), with their badges and a facet counting the matches per section."""
    return FlagList.model_validate(flag_list_dict(session, version, query, section))


def flag_list_dict(
    session: Session, version: Version, query: str, section: str = ""
) -> dict[str, Any]:
    """`flag_list` as the plain dict the HTML page renders (the JSON twin validates it)."""
    counts = constraint_counts(session, version)
    matched = []
    for flag in version_flag_dicts(session, version):
        if matches(flag, query[:MAX_NAME]):
            matched.append({**flag, "constraint_count": counts.get(flag["name"], 0)})
    section = section[:MAX_NAME]
    params = {"q": query[:MAX_NAME], "section": section}
    in_section = [f for f in matched if not section or (f["section"] or "Other") == section]
    return {
        "version": version.name,
        "q": query[:MAX_NAME],
        "section": section,
        "flags": in_section,
        "facets": [facet("section", (f["section"] or "Other" for f in matched), params, limit=100)],
    }


def _item_key(flag: dict[str, Any]) -> tuple[str, str]:
    return flag["name"], flag["source"]["permalink"]


def flag_items(session: Session, version: Version, flags: list[dict[str, Any]]) -> Markup:
    """The <li>s of `flags` (items of `flag_list_dict`): each flag's is made once per stamp
    for every flag of the version (a pre-escaped fragment: synopsis, badges, help's first
    line), which every variant of the list (filters, sections) then joins."""

    def make() -> dict[tuple[str, str], str]:
        counts = constraint_counts(session, version)
        items: dict[tuple[str, str], str] = {}
        for flag in version_flag_dicts(session, version):
            item = {**flag, "constraint_count": counts.get(flag["name"], 0)}
            items[_item_key(item)] = str(fragments.flag_items([item]))
        return items

    made = per_stamp(("flag-items", version.id), make, session)
    return Markup("".join(made.get(_item_key(f)) or str(fragments.flag_items([f])) for f in flags))


def flags_csv(data: FlagList) -> str:
    return csv_text(
        [
            "name",
            "aliases",
            "dest",
            "type",
            "default",
            "choices",
            "section",
            "deprecated",
            "constraint_count",
            "help",
            "path",
            "line",
            "url",
        ],
        (
            [
                f.name,
                " ".join(f.aliases),
                f.dest,
                f.type or "",
                "" if f.default is None else json.dumps(f.default, ensure_ascii=False),
                "" if f.choices is None else json.dumps(f.choices, ensure_ascii=False),
                f.section or "",
                f.deprecated,
                f.constraint_count,
                f.help or "",
                f.source.path,
                f.source.line,
                f.source.url,
            ]
            for f in data.flags
        ),
    )


class FlagQuery(BaseModel):
    """The list's filters: text in a flag's names or help, and a section."""

    q: str = ""
    section: str = ""


class FlagPageQuery(FlagQuery):
    format: str = ""  # csv | json: the whole filtered list as a download


@router.get("/v/{version}/flags", include_in_schema=False)
def flags_page(
    request: Request, session: SessionDep, version: str, params: Annotated[FlagPageQuery, Query()]
) -> Response:
    found = get_version(session, version)
    if params.format in ("csv", "json"):  # the whole filtered list as a download
        data = flag_list(session, found, params.q, params.section)
        return listing.export(data, f"flags-{found.name}", params.format, flags_csv)
    listed = flag_list_dict(session, found, params.q, params.section)
    sections = [
        (name or "Other", flag_items(session, found, list(group)))
        for name, group in groupby(listed["flags"], key=itemgetter("section"))
    ]
    context = {
        **page_context(session, found, "flags"),
        "data": listed,
        "sections": sections,
        "export_query": listing.query({"q": listed["q"], "section": listed["section"]}),
    }
    return render(request, "flags.html", context, block="flag_list")


@router.get("/api/v/{version}/flags", responses=errors(404))
def api_flags(session: SessionDep, version: str, params: Annotated[FlagQuery, Query()]) -> FlagList:
    """The flags of a version in source order; `q` filters by name, alias, dest or help,
    `section` by section ("Other": flags in none); `facets` counts matches per section."""
    return flag_list(session, get_version(session, version), params.q, params.section)


def flag_page_data(session: Session, version: Version, flag: Flag) -> FlagPage:
    """The flag page: Flag + constraints, usages, choice sites, enum, history, related."""
    return FlagPage.model_validate(flag_page_dict(session, version, flag))


def help_contradictions(
    session: Session,
    version: Version,
    data: dict[str, Any],
    sites: dict[str, list[dict[str, Any]]],
) -> list[dict[str, Any]]:
    """Values whose handling code contradicts what the help says of them, both cited."""
    choices = [str(c) for c in data["choices"] or []]
    attributed = {v: [s for s in found if s["attributed"]] for v, found in sites.items()}

    def text_of(path: str) -> str | None:
        sha = version_file_sha(session, version, path)
        return blob_text(session, sha) if sha is not None else None

    return [
        {
            **found,
            "help": data["source"],
            "code": citation(version, found["path"], found["line"], found["end_line"]),
        }
        for found in contradictions(data["help"] or "", choices, attributed, text_of)
    ]


def flag_page_dict(session: Session, version: Version, flag: Flag) -> dict[str, Any]:
    """`flag_page_data` as the plain dict the HTML page renders (validating it into the
    contract's models cost the page 2 ms; the JSON twin validates the same dict). The sites
    come from the version's `VersionSites` (read once per stamp, kb/flagsites.py)."""
    data = flag_dict(version, flag)
    choices = [str(c) for c in data["choices"] or []]
    values = choices or data["known_values"] or []  # what the value pages are for
    shared = version_sites(session, version)
    sites = shared.choice_dicts(flag.name, values)
    enum = flag_enum(session, version, flag.name)
    data["version"] = version.name
    names = dest_names(session, version)
    data["constraints"] = [
        _flag_constraint({**c}, flag.dest, names, version.id)
        for c in numbered_anchors(shared.constraint_dicts(flag.name))
    ]
    data["usages"] = shared.usage_dicts(flag.dest)
    data["choice_counts"] = {value: len(found) for value, found in sites.items()}
    data["choice_sites"] = sites
    data["enum"] = enum_dict(version, enum) if enum is not None else None
    data["history"] = flag_history(session, flag.name)
    data["related"] = related_flags(session, version, data)
    # Uses past the first read, each with its chain (ingest/indirect.py), kept apart.
    indirect = shared.indirect.get(flag.dest, [])
    data["indirect_usages"] = chain_reads(session, version, flag.dest)
    data["help_contradictions"] = help_contradictions(session, version, data, sites)
    direct = [u for u in shared.usages.get(flag.dest, ()) if u.path.startswith(MODELS_DIR)]
    data["models"] = flag_models(session, version, flag.dest, indirect, direct)
    data["model_groups"] = model_groups(data["models"])
    members: dict[str, str] = {}  # a member's value, else its name (known values), folded
    for m in (data["enum"] or {}).get("members", []):
        members.setdefault(m["name"].lower(), m["name"])
    for m in (data["enum"] or {}).get("members", []):
        members[str(m.get("value", m["name"])).lower()] = m["name"]
    counts = load_time_counts(session, version, flag.dest, values)
    data["choice_rows"] = [
        {
            "value": value,
            "member": members.get(str(value).lower()),
            "sites": data["choice_counts"].get(str(value), 0),
            "url": backend_url(version, flag.name, str(value)),
            **counts.get(str(value), {}),
        }
        for value in data["choices"] or data["known_values"] or []
    ]
    data["constraint_groups"] = parts.constraint_groups(data["constraints"], flag.name, choices)
    data["usage_areas"] = parts.usage_areas(version.name, data["usages"])
    data["timeline"] = parts.timeline(version_names(session)[::-1], data["history"], flag.name)
    data["choice_grid"] = parts.choice_grid(data["history"], data["choices"], data["timeline"])
    data["graph"] = parts.constraint_graph(data["constraints"], flag.name, data["related"])
    data["sets_env"] = flag_env_writes(session, version, flag.name)
    options = [flag.name, *(loads(flag.aliases) or []), *([flag.negation] if flag.negation else [])]
    data["examples"] = doc_examples(session, version, options)
    data["sections"] = parts.sections(data)
    return data


def load_time_counts(
    session: Session, version: Version, dest: str, values: list[str]
) -> dict[str, dict[str, int]]:
    """Each value's load-time requirements (its builder's and the model loader's checks,
    and the load-stage checks of the classes it selects) and its first-forward checks;
    once per flag and state of the knowledge base."""

    def make() -> dict[str, dict[str, int]]:
        out = {}
        for value in values:
            stages = stage_counts(layer_selections(session, version, dest, values, value))
            at_load = len(load_requirements(session, version, values, value)) + stages["load"]
            out[value] = {"load_time": at_load, "first_forward": stages["first_forward"]}
        return out

    return per_stamp(("load-time-counts", version.id, dest, tuple(values)), make, session)


def _flag_constraint(
    site: dict[str, Any], dest: str, names: dict[str, str], version_id: int | None
) -> dict[str, Any]:
    """A constraint site with what it does, the values of `dest` it tests, and its words.
    `names` is the version's dest -> option map (`dest_names`, one object per version and
    stamp): the words of a condition are kept per (version, condition) while it lives."""
    conditions = tuple(site["conditions"] or ([site["condition"]] if site["condition"] else []))
    site["effect"] = parts.EFFECTS.get(site["kind"], "warns")
    site["values"] = list(_tested_values(conditions, dest))
    key = (version_id, conditions)
    said = _plain_words.get(key)
    if said is None or said[0] is not names:
        said = (names, parts.plain_condition(list(conditions), names))
        _plain_words.put(key, said)
    site["plain"] = said[1]
    return site


@lru_cache(maxsize=16384)
def _tested_values(conditions: tuple[str, ...], dest: str) -> tuple[str, ...]:
    return tuple(parts.tested_values(list(conditions), dest))


# (version id, condition path) -> (the names map it was worded with, the words): an entry
# counts only for the very map object it was made with, which changes with the KB stamp.
_plain_words: Cache[tuple[dict[str, str], str]] = Cache(16384)


def related_flags(session: Session, version: Version, data: dict[str, Any]) -> list[dict[str, Any]]:
    """Other flags named in the flag's constraint sites, with whether this version has them."""
    names = sorted(
        {n for c in data["constraints"] for n in c["flags"] + c["affects"]} - {data["name"]}
    )
    known = flag_name_set(session, version)
    return [{"name": n, "url": flag_url(version, n), "known": n in known} for n in names]


MAX_MEANT = 10  # flags an ambiguous abbreviation lists (`--enable` could mean 100)


def flag_or_redirect(request: Request, session: Session, version: Version, raw: str) -> Any:
    """The flag row `raw` names (any of its names: the page answers there), or a redirect
    to the flag's page when `raw` is a unique abbreviation of its option or an alias, as
    argparse takes it (allow_abbrev) and explain reads it (`--tp` -> `--tensor-parallel-size`
    at v0.5.6). An ambiguous one stays a 404 whose suggestions start with the flags it could
    mean."""
    try:
        row = get_flag_row(session, version, raw)
    except NotFound as exc:
        table = next(
            (v.table for v in load_options(session) if v.name == version.name and v.table), None
        )
        # (`--` alone ends argparse's options; `--tp=2` is an option with its value, no name)
        if table is None or not raw.startswith("--") or len(raw) < 3 or "=" in raw:
            raise
        m = table.match(raw)
        if m.kind not in ("abbreviation", "ambiguous"):
            raise
        if m.flag is not None:
            return _to_flag(request, m.flag.name)
        meant = list(dict.fromkeys(table.by_option[o].name for o in m.candidates))
        exc.suggestions = list(dict.fromkeys([*meant[:MAX_MEANT], *exc.suggestions]))
        more = f" and {len(meant) - MAX_MEANT} more" if len(meant) > MAX_MEANT else ""
        exc.detail = (
            f"{raw[:MAX_NAME]} is an ambiguous abbreviation in {version.name}: it could mean "
            + ", ".join(meant[:MAX_MEANT])
            + more
            + "."
        )
        raise
    return row


def _to_flag(request: Request, name: str) -> RedirectResponse:
    # 307: another ingest may add a flag that makes an abbreviation ambiguous
    url = suggestion_url(request.url.path, "flag", name, request.url.query)
    return RedirectResponse(url or "/", status_code=307)


@router.get("/v/{version}/flags/{flag}", include_in_schema=False)
def flag_page(request: Request, session: SessionDep, version: str, flag: str) -> Response:
    found = read_version(session, version)
    row = flag_or_redirect(request, session, found, flag)
    if isinstance(row, Response):
        return row
    data = flag_page_dict(session, found, row)
    src = data["source"]
    definition = excerpt(session, found, src["path"], src["line"], src["end_line"], context=1)
    names = version_names(session)
    new = data["replacement"]
    context = {
        **page_context(session, found, f"flags/{data['name']}", _absent(names, data), names),
        "flag": data,
        "definition": definition,
        "cards": constraint_cards(session, found, data["constraints"], data["name"]),
        "replacement": replacement_links(session, found, new) if new else None,
        "deprecation_note": deprecation_note(data["deprecated_message"], new),
        "ranges": parts.timeline_ranges(
            data["timeline"], data["history"], data["default"], data["choices"], found.name
        ),
        "indirect_by_file": [
            (path, list(group))
            for path, group in groupby(data["indirect_usages"], key=itemgetter("path"))
        ],
    }
    return render(request, "flag.html", context)


# A constraint card up to its citation (fragments.constraint_card_body) by what it shows,
# per KB stamp: a site is cited on the page of every flag it reads or affects.
_card_bodies: Cache[str] = Cache(16384)


def _card_key(c: dict[str, Any]) -> Hashable:
    """Every field the body shows (fragments.CARD_FIELDS), hashable; falsy lists and dicts
    show alike. A value that cannot be hashed is keyed by its repr."""
    writes = c["writes"]
    key = (
        c["kind"], c["function"], c["plain"], c["message"],
        tuple(writes.items()) if writes else None, tuple(c["flags"] or ()),
        tuple(c["affects"] or ()), c["condition"], tuple(c["conditions"] or ()),
    )  # fmt: skip
    try:
        hash(key)
    except TypeError:
        return repr(key)
    return key


def constraint_cards(
    session: Session, version: Version, constraints: list[dict[str, Any]], flag: str
) -> list[Markup]:
    """The flag page's constraint cards, in `constraints` order, with the highlighted code
    of each site (presentation only: not in the JSON)."""
    stamp = session_stamp(session)
    cards = []
    for c in constraints:
        src = c["source"]
        key = (version.id, src["path"], src["line"], src["end_line"], _card_key(c))
        body = _card_bodies.get(key, stamp)
        if body is None:
            lines = excerpt(session, version, src["path"], src["line"], src["end_line"])
            body = fragments.constraint_card_body(c, lines, version)
            _card_bodies.put(key, body, stamp)
        card = body + fragments.constraint_card_tail(c, flag)
        cards.append(Markup(fragments.with_anchor(card, c)))
    return cards


def _absent(names: list[str], data: dict[str, Any]) -> set[str]:
    """Versions (`names` newest first) where the flag does not exist, replayed from its
    added/removed history."""
    history = data["history"]
    # (a split is where the flag appears, as an added one)
    events = {
        c["version"]: "added" if c["field"] == "split" else c["field"]
        for c in history
        if c["field"] in ("added", "removed", "split")
    }
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


@router.get(
    "/api/v/{version}/flags/{flag}",
    response_model=FlagPage,
    responses=errors(404),  # the 307 of an abbreviation is no answer: like /api/latest's 302
)
def api_flag(request: Request, session: SessionDep, version: str, flag: str) -> Any:
    """One flag (by option, alias or dest, any dashes or case) with everything about it; a
    unique abbreviation (`--tp`) redirects to the flag's URL."""
    found = get_version(session, version)
    row = flag_or_redirect(request, session, found, flag)
    return row if isinstance(row, Response) else flag_page_data(session, found, row)
