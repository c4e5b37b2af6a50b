"""Shared read queries over the knowledge base, and the JSON shapes of the API contract.

Every function here takes a Session and returns plain dicts or schema rows; views turn them
into HTML or JSON. Lookups go through indexed columns (version name, (version_id, name),
(version_id, dest), (version_id, value), the `option` table's (version_id, key), and
`constraint_flag`'s flag_id) so one page costs a handful of index probes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any, NamedTuple, TypeVar
from urllib.parse import quote

from rapidfuzz import fuzz, process
from sqlalchemy import Executable, bindparam, func
from sqlalchemy.orm import make_transient_to_detached
from sqlmodel import Session, col, or_, select

from kb.cache import Cache, Stamp
from kb.factored import tables
from kb.order import FLAG_ORDER, in_order, total_order
from kb.relations import RANK
from kb.replacements import replacement_names
from kb.schema import (
    ChoiceSite,
    ConstraintFlag,
    ConstraintSite,
    Enum,
    Flag,
    Option,
    UsageSite,
    Version,
    VersionFile,
    loads,
    name_key,
)

# Inputs longer than this are never names; cut them before fuzzy matching.
MAX_NAME = 200


class NotFound(Exception):
    """An unknown version, flag, value or path: rendered as a 404 with suggestions.

    `kind` says which URL segment was wrong ("version", "flag", "value", "path", "page");
    the error handler turns `suggestions` (names) into links by replacing that segment.
    `elsewhere` lists versions where the thing exists: [{"version", "url"}]; `version` names
    the (existing) version the page is pinned to, so the error page keeps its switcher.
    `values` (a compare page's 404): per suggestion, the values its link compares, each one
    the suggested flag has; empty when it has none (the link goes to the flag's page).
    `pages`: per suggestion, the URL tail after `/v/{version}/` its link goes to, when the
    same page may not exist for it (a backend page: kb.reach.backend_tail).
    """

    def __init__(
        self,
        kind: str,
        name: str,
        detail: str,
        suggestions: Sequence[str] = (),
        elsewhere: Sequence[dict[str, str]] = (),
        version: str | None = None,
        values: Sequence[Sequence[str]] | None = None,
    ) -> None:
        super().__init__(detail)
        self.kind = kind
        self.name = name[:MAX_NAME]
        self.detail = detail
        self.suggestions = list(suggestions)
        self.elsewhere = list(elsewhere)
        self.version = version  # set when the version exists and only the thing in it is missing
        self.values = [list(v) for v in values] if values is not None else None
        self.pages: list[str] | None = None


def did_you_mean(name: str, choices: Iterable[str], limit: int = 5) -> list[str]:
    """Closest names by fuzzy ratio, best first; empty when nothing is close."""
    query = name[:MAX_NAME].lower()
    pool = list(dict.fromkeys(choices))
    if not query or not pool:
        return []
    found = process.extract(
        query, pool, scorer=fuzz.WRatio, processor=str.lower, limit=limit, score_cutoff=60
    )
    return [match for match, _score, _idx in found]


# --- plain rows and per-stamp data ----------------------------------------------------------

T = TypeVar("T")


def rows(
    session: Session, statement: Executable, params: dict[str, Any] | None = None
) -> Sequence[Any]:
    """A SELECT through SQLAlchemy Core on the session's connection (same transaction, so the
    same snapshot): plain rows, read by attribute like the ORM objects (`row.path`), without
    building and tracking an ORM instance per row, which cost most of a list page's time.
    `params` fill a statement's bindparams (a statement built once, see _option_probe)."""
    return session.connection().execute(statement, params).all()


def sites_in_order(session: Session, model: Any, version: Version, *where: Any) -> list[Any]:
    """The version's rows of a table of places in the code (`model`: a table with path and
    line, e.g. UsageSite) that meet `where`, in source order (ties by their other columns,
    kb.order: the same on every database and after --force), as plain rows."""
    table = model.__table__
    found = rows(session, select(table).where(table.c.version_id == version.id, *where))
    return in_order(found, model, "path", "line")


def per_stamp(key: Any, make: Callable[[], T], session: Session) -> T:
    """`make()` once per state of the knowledge base (kb/cache.py): data that many pages
    share (the versions, a version's flag names and model files) is read once per ingest."""
    return _stamped.get_or_make(key, make, session_stamp(session))  # type: ignore[return-value]


_stamped: Cache[Any] = Cache(1024)


# --- versions ---------------------------------------------------------------------------


class _Versions(NamedTuple):
    newest_first: list[Version]
    by_name: dict[str, Version]
    names: tuple[str, ...]  # newest first (read on every page: no ORM attribute per name)


def _versions(session: Session) -> _Versions:
    """Every version, newest first, read once per stamp: detached instances (in no session)
    shared by every request until the next ingest, so callers only read them;
    `get_version` hands out a copy attached to the caller's session."""

    def make() -> _Versions:
        table = Version.__table__  # type: ignore[attr-defined]
        found = rows(session, select(table).order_by(table.c.position.desc()))
        newest_first = [Version(**row._mapping) for row in found]
        for version in newest_first:
            make_transient_to_detached(version)  # a database row, just not in a session
        by_name = {v.name: v for v in newest_first}
        return _Versions(newest_first, by_name, tuple(by_name))

    return per_stamp("versions", make, session)


def ordered_versions(session: Session) -> list[Version]:
    """All versions, newest first."""
    return list(_versions(session).newest_first)


def version_names(session: Session) -> list[str]:
    """Version names, newest first (cheap: for switchers and suggestions)."""
    return list(_versions(session).names)


def newest_version(session: Session) -> Version | None:
    versions = _versions(session).newest_first
    return session.merge(versions[0], load=False) if versions else None


def get_version(session: Session, name: str) -> Version:
    """The version named `name`, in the session (a writer may change and commit it), taken
    from the per-stamp copy without a query (`merge(load=False)`: 0.07 ms against 0.65 ms
    for the SELECT)."""
    return session.merge(read_version(session, name), load=False)


def read_version(session: Session, name: str) -> Version:
    """`get_version` for pages that only read it: the per-stamp instance itself (detached,
    shared by every request: never change it), without the merge into the session."""
    version = _versions(session).by_name.get(name)
    if version is None:
        names = version_names(session)
        raise NotFound(
            "version",
            name,
            f"No version named {name[:MAX_NAME]!r} has been ingested.",
            did_you_mean(name, names) or names[:3],
        )
    return version


def flag_counts(session: Session) -> dict[int, int]:
    # From the flag view's location table: SQLite would join every fact to count them.
    loc = tables()["flag"].loc
    found = rows(session, select(loc.c.version_id, func.count()).group_by(loc.c.version_id))
    return {version_id: count for version_id, count in found}


def version_dict(version: Version, flags: int) -> dict[str, Any]:
    return {
        "name": version.name,
        "commit": version.commit,
        "date": version.date.isoformat(),
        "flags": flags,
        "position": version.position,
        "era": version.era,
        "url": f"/v/{quote(version.name, safe='')}/flags",
    }


# --- citations ----------------------------------------------------------------------------


@lru_cache(maxsize=65536)
def quoted(text: str, safe: str = "/") -> str:
    """`urllib.parse.quote`, remembered: a page quotes the same few paths and names hundreds
    of times (every citation)."""
    return quote(text, safe=safe)


def source_url(version: Version, path: str, line: int | None = None, end: int | None = None) -> str:
    """The in-app source view of a file, with an optional line anchor."""
    url = f"/v/{quoted(version.name, '')}/source/{quoted(path)}"
    if line is not None:
        url += f"#L{line}" if end is None or end == line else f"#L{line}-L{end}"
    return url


def citation(version: Version, path: str, line: int, end_line: int | None = None) -> dict[str, Any]:
    end = end_line if end_line is not None and end_line >= line else line
    return {
        "path": path,
        "line": line,
        "end_line": end,
        "url": f"{version.web_url}/blob/{version.commit}/{quoted(path)}#L{line}-L{end}",
        "permalink": source_url(version, path, line, end),
    }


# --- flags --------------------------------------------------------------------------------


def flag_url(version: Version, name: str) -> str:
    return f"/v/{quoted(version.name, '')}/flags/{quoted(name, '')}"


_DEPRECATED_MARK = re.compile(r"^\s*(?:\[deprecated\]|\(deprecated\)|deprecated\s*[.:])\s*", re.I)


def deprecation_note(message: str | None, replacement: str | None) -> str:
    """A deprecation message less what a notice "Deprecated. Use <replacement> instead."
    already says: its leading "Deprecated."/"[Deprecated]" and a sentence that only names the
    replacement ("Use X instead.", "Deprecated alias for X."), which the notice gives with
    each flag expanded and linked. What else the message says is kept as written."""
    text = _DEPRECATED_MARK.sub("", message or "", count=1)
    if replacement:
        name, eq, value = replacement.partition("=")
        # `--x=v` is written so or as `'--x v'` (ingest.flags.REPLACEMENT_RE)
        r = re.escape(name) + (rf"(?:=|\s+){re.escape(value)}" if eq else "")
        use = rf"(?:please\s+)?use\s+[`'\"]?{r}[`'\"]?(?:\s+\{{[^{{}}]*\}})?\s+instead"
        said = rf"(?:{use}|deprecated alias for\s+{r})\.?"
        text = re.sub(rf"(?:^|(?<=[.!?]))\s*{said}(?=\s|$)", "", text, flags=re.I)
    return text.strip()


def backend_url(version: Version, flag: str, value: str) -> str:
    return (
        f"/v/{quote(version.name, safe='')}/backends/{quote(flag, safe='')}/{quote(value, safe='')}"
    )


def flag_values(flag: Flag) -> list[str]:
    """The values a flag's value pages are for: its choices, else its known values."""
    return [str(c) for c in loads(flag.choices) or loads(flag.known_values) or []]


def default_value(flag: Flag) -> Any:
    """The literal default, else the default's source text (e.g. "ServerArgs.port")."""
    return loads(flag.default) if flag.default is not None else flag.default_expr


def flag_dict(version: Version, flag: Flag) -> dict[str, Any]:
    return {
        "name": flag.name,
        "dest": flag.dest,
        "aliases": loads(flag.aliases) or [],
        "type": flag.type,
        "default": loads(flag.default),
        "default_expr": flag.default_expr,
        "choices": loads(flag.choices),
        "choices_const": flag.choices_const,
        "choices_extensible": flag.choices_extensible,
        "choices_dynamic": flag.choices_dynamic,
        "known_values": loads(flag.known_values),
        "help": flag.help,
        "hidden": flag.hidden,
        "action": flag.action,
        "nargs": flag.nargs,
        "required": flag.required,
        "deprecated": flag.deprecated,
        "deprecated_message": flag.deprecated_message,
        "replacement": flag.replacement,
        # Issue 9: argparse's own dest beside `dest`; arity; what using the flag does.
        "argparse_dest": flag.argparse_dest or flag.dest,
        "takes_value": flag.takes_value,
        "negation": flag.negation,
        "deprecated_kind": flag.deprecated_kind,
        "action_error": flag.action_error,
        "action_source": citation(version, flag.action_path, flag.action_line, flag.action_line)
        if flag.action_path and flag.action_line
        else None,
        "section": flag.section,
        "url": flag_url(version, flag.name),
        "source": citation(version, flag.path, flag.line, flag.end_line),
    }


def flag_name_candidates(raw: str) -> list[str]:
    """Option spellings a user may mean: "pp_size", "PP-SIZE", "--pp_size" -> "--pp-size"."""
    raw = raw.strip()[:MAX_NAME]
    bare = raw.lstrip("-")
    out = [raw, "--" + bare.replace("_", "-").lower(), "--" + bare, "-" + bare]
    return [name for name in dict.fromkeys(out) if name.strip("-")]


def flags_named(session: Session, version: Version, raw: str) -> list[Flag]:
    """Every flag that answers to `raw` in the version (option, alias, dest, deprecated alias,
    `--no-x`; any dashes, underscores or case), the best match first: one indexed query."""
    key = name_key(raw[:MAX_NAME])
    if not key:
        return []
    rows = session.exec(
        select(Flag, Option.kind, Option.name)
        .join(Option, col(Option.flag_id) == Flag.id)
        .where(Option.version_id == version.id, Option.key == key)
    ).all()
    spelled = raw.strip()
    ranked = sorted(rows, key=lambda r: _match_order(r[1], r[2], r[0], spelled))
    return list({flag.id: flag for flag, _kind, _name in ranked}.values())


def _match_order(kind: str, name: str, flag: Any, spelled: str) -> tuple[Any, ...]:
    """Which flag a name means, best first: the kind of name it is (RANK), then the exact
    spelling, then the flag's place in the source (a total order: kb/order.py)."""
    return (RANK[kind], name != spelled, total_order(Flag, *FLAG_ORDER)(flag))


def find_flag(session: Session, version: Version, raw: str) -> Flag | None:
    """Resolve an option, alias or dest (any dashes, underscores or case) in a version."""
    found = flags_named(session, version, raw)
    return found[0] if found else None


def flag_names(session: Session, version: Version) -> list[str]:
    """The option names of the version, sorted (suggestions that tie come in this order)."""
    return sorted(session.exec(select(Flag.name).where(Flag.version_id == version.id)))


def versions_with_flag(session: Session, names: Sequence[str]) -> list[Version]:
    """Versions (newest first) where one of `names` names a flag (any kind of name)."""
    keys = list({name_key(n) for n in names} - {""})
    versions = ordered_versions(session)
    # version_id IN (...) lets SQLite probe the (version_id, key) index once per version.
    present = set(
        session.exec(
            select(Option.version_id).where(
                col(Option.version_id).in_([v.id for v in versions]), col(Option.key).in_(keys)
            )
        )
    )
    return [v for v in versions if v.id in present]


def nearest_versions(
    session: Session, version: Version, names: Sequence[str]
) -> list[dict[str, str]]:
    """The closest older and newer versions that define the flag: [{"version", "url"}]."""
    having = versions_with_flag(session, names)
    older = [v for v in having if v.position < version.position][:1]
    newer = [v for v in reversed(having) if v.position > version.position][:1]
    out = []
    for v in newer + older:
        found = find_flag(session, v, names[0])
        out.append({"version": v.name, "url": flag_url(v, found.name if found else names[0])})
    return out


_FLAG_WORD = re.compile(r"(?<![\w-])--[A-Za-z0-9][\w-]*")


class Deprecation(NamedTuple):
    """What SGLang last said of a flag that is gone: at `version`, its deprecation `message`
    and `replacement`, and `flags`, the flags they name that exist at the asked version."""

    version: str
    message: str | None
    replacement: str | None
    flags: list[str]


def last_deprecation(session: Session, version: Version, raw: str) -> Deprecation | None:
    """For a flag absent at `version`: its newest deprecation before `version` (message or
    replacement), which names the flags that replace it better than any fuzzy match."""
    keys = list({name_key(n) for n in flag_name_candidates(raw)} - {""})
    older = [v for v in ordered_versions(session) if v.position < version.position]
    if not keys or not older:
        return None
    said = or_(col(Flag.deprecated_message).is_not(None), col(Flag.replacement).is_not(None))
    # version_id IN (...) lets SQLite probe the (version_id, key) index once per version.
    where = [col(Option.version_id).in_([v.id for v in older]), col(Option.key).in_(keys), said]
    newest = session.exec(
        select(func.max(Version.position))
        .select_from(Flag)
        .join(Option, col(Option.flag_id) == Flag.id)
        .join(Version, col(Version.id) == Flag.version_id)
        .where(*where)
    ).one()
    if newest is None:
        return None
    found = session.exec(
        select(Flag, Version.name)
        .join(Option, col(Option.flag_id) == Flag.id)
        .join(Version, col(Version.id) == Flag.version_id)
        .where(*where, Version.position == newest)
    ).all()
    # (the names may be several flags' there: the first in source order)
    flag, at = min(found, key=lambda r: total_order(Flag, *FLAG_ORDER)(r[0]))
    own = {flag.name, *(loads(flag.aliases) or ())}

    def present(named: list[str]) -> list[str]:
        return [
            n for n in dict.fromkeys(named) if n and n not in own and find_flag(session, version, n)
        ]

    # the stated replacement when it names a flag here; else every flag the message names
    # (which may name others in passing: "set --ep-size to the value of --tp-size")
    stated = present(replacement_names(flag.replacement))
    named = stated or present(_FLAG_WORD.findall(flag.deprecated_message or ""))
    return Deprecation(at, flag.deprecated_message, flag.replacement, named)


def get_flag(session: Session, version: Version, raw: str, replaced: bool = False) -> Flag:
    """The flag named `raw` (NotFound with suggestions). With `replaced`, a deprecated flag
    gives way to the flag that replaces it (whose code handles the values)."""
    named = flags_named(session, version, raw)
    if named:
        live = [f for f in named if not f.deprecated] if replaced else []
        return live[0] if live and named[0].deprecated else named[0]
    names = flag_name_candidates(raw)
    detail = f"{raw[:MAX_NAME]} does not exist in {version.name}."
    gone = last_deprecation(session, version, raw)
    replacing = gone.flags if gone else []
    if gone and gone.message:
        detail += f" In {gone.version} it was deprecated: {' '.join(gone.message.split())[:300]}"
    fuzzy = did_you_mean(raw, flag_names(session, version))
    raise NotFound(
        "flag",
        raw,
        detail,
        list(dict.fromkeys([*replacing, *fuzzy]))[: max(5, len(replacing))],
        nearest_versions(session, version, names) if names else [],
        version=version.name,
    )


def get_flag_row(session: Session, version: Version, raw: str) -> Any:
    """`get_flag` as a plain row with Flag's columns (attribute access like a Flag), for
    pages that only read it: the option probe is a Core query and the row comes from the
    version's per-stamp rows, without the ORM join of the flag view (0.8 ms a page)."""
    key = name_key(raw[:MAX_NAME])
    if key:
        found = rows(session, _option_probe(), {"version_id": version.id, "key": key})
        by_id = _flag_rows_by_id(session, version) if found else {}
        named = [(by_id[r[0]], r[1], r[2]) for r in found if r[0] in by_id]
        if named:
            spelled = raw.strip()
            return min(named, key=lambda n: _match_order(n[1], n[2], n[0], spelled))[0]
    return get_flag(session, version, raw)  # NotFound with suggestions (or the ORM's answer)


@lru_cache(maxsize=1)
def _option_probe() -> Executable:
    """get_flag_row's option lookup, built once: building the statement and its comparisons
    cost as much as running it (~0.15 ms of a flag page)."""
    opt = Option.__table__  # type: ignore[attr-defined]
    return select(opt.c.flag_id, opt.c.kind, opt.c.name).where(
        opt.c.version_id == bindparam("version_id"), opt.c.key == bindparam("key")
    )


def _flag_rows_by_id(session: Session, version: Version) -> dict[int, Any]:
    return per_stamp(
        ("flags-by-id", version.id),
        lambda: {row.id: row for row in _flag_rows(session, version)},
        session,
    )


def _flag_rows(session: Session, version: Version) -> list[Any]:
    """The version's flags in source order (rows with Flag's columns), once per stamp."""

    def make() -> list[Any]:
        table = Flag.__table__  # type: ignore[attr-defined]
        query = select(table).where(table.c.version_id == version.id)
        return in_order(rows(session, query), Flag, *FLAG_ORDER)

    return per_stamp(("flags", version.id), make, session)


def version_flag_dicts(session: Session, version: Version) -> list[dict[str, Any]]:
    """`flag_dict` of every flag of the version in source order, built once per stamp and
    shared: callers copy a dict before changing it."""
    return per_stamp(
        ("flag-dicts", version.id),
        lambda: [flag_dict(version, row) for row in _flag_rows(session, version)],
        session,
    )


def dest_names(session: Session, version: Version) -> dict[str, str]:
    """dest -> option name of the version's flags; when two share a dest, the greater name
    (the order the (version_id, name) index gave this map before it was cached)."""

    def make() -> dict[str, str]:
        ranked = sorted(_flag_rows(session, version), key=lambda r: r.name)
        return {r.dest: r.name for r in ranked}

    return per_stamp(("dest-names", version.id), make, session)


def flag_name_set(session: Session, version: Version) -> frozenset[str]:
    """The option names of the version's flags."""
    return per_stamp(
        ("flag-names", version.id),
        lambda: frozenset(r.name for r in _flag_rows(session, version)),
        session,
    )


def all_flags(session: Session, version: Version) -> list[Flag]:
    """The flags of a version in source order."""
    return in_order(
        session.exec(select(Flag).where(Flag.version_id == version.id)), Flag, *FLAG_ORDER
    )


# --- constraints, enums, sites ------------------------------------------------------------


def constraint_anchor(site: ConstraintSite) -> str:
    """The id of a constraint site on its pages ("c-" and 12 hex digits): a hash of what it
    checks (ingest's line-independent key), its function and its file, so a link to it
    survives lines moving and lists reordering. Two identical checks in one function of one
    file share it; `numbered_anchors` tells them apart on a page."""
    what = site.key or "\x1f".join((site.kind, " ".join(site.condition.split()), site.message))
    basis = "\x1f".join((what, site.function, site.path))
    return "c-" + hashlib.sha1(basis.encode()).hexdigest()[:12]


def constraint_home(version: Version, flags: list[str], affects: list[str]) -> str:
    """A constraint site's page: the page of the first flag it reads (else affects), which
    lists every site linked to that flag; the version's constraints list when it names none."""
    names = flags or affects
    if names:
        return flag_url(version, names[0])
    return f"/v/{quoted(version.name, '')}/constraints"


def numbered_anchors(constraints: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`constraints` (dicts, in source order, as one page lists them) with the second and
    later of identical checks (same anchor) numbered "-2", "-3": ids stay unique on the
    page, and identical checks are linked to the same flags, so every page listing one
    lists all and numbers them alike. The dicts are shared: a renumbered one is a copy."""
    seen: dict[str, int] = {}
    out = []
    for c in constraints:
        url = c["url"]
        n = seen[url] = seen.get(url, 0) + 1
        out.append(c if n == 1 else {**c, "url": f"{url}-{n}"})
    return out


def constraint_dict(version: Version, site: ConstraintSite) -> dict[str, Any]:
    flags = loads(site.flags) or []
    affects = loads(site.affects) or []
    return {
        "kind": site.kind,
        "function": site.function,
        "condition": site.condition,
        "conditions": loads(site.conditions) or [],
        "message": site.message,
        "flags": flags,
        "affects": affects,
        "writes": loads(site.writes) or {},
        "key": site.key,
        "source": citation(version, site.path, site.line, site.end_line),
        "url": f"{constraint_home(version, flags, affects)}#{constraint_anchor(site)}",
    }


def all_constraints(session: Session, version: Version) -> list[Any]:
    """The version's constraint sites in source order, read once per stamp (every variant
    of the constraints list filters and counts this one list)."""
    found = per_stamp(
        ("constraints", version.id), lambda: _sites_of(session, version, None), session
    )
    return list(found)


def flag_constraints(session: Session, version: Version, name: str) -> list[Any]:
    """Constraint sites that read or affect the flag whose canonical option is `name`."""
    flag_ids = select(Flag.id).where(Flag.version_id == version.id, Flag.name == name)
    return _sites_of(
        session,
        version,
        select(ConstraintFlag.constraint_id).where(col(ConstraintFlag.flag_id).in_(flag_ids)),
    )


def filter_constraints(
    session: Session,
    version: Version,
    flag: str = "",
    kind: str = "",
    replaced: dict[str, list[Flag]] | None = None,
) -> list[Any]:
    """The version's constraint sites of a kind that read or affect a flag. `flag` is any
    name of a flag (option, alias, dest, deprecated alias; any dashes or case): all the
    flags it names count. Text that names no flag matches as a substring of flag names (the
    filter runs as the user types). `replaced`: `replaced_by` of `flag`, when the caller
    has it already."""
    sites = all_constraints(session, version)
    if kind:
        sites = [s for s in sites if s.kind == kind]
    key = name_key(flag[:MAX_NAME])
    if not key:
        return sites
    named = select(Option.flag_id).where(Option.version_id == version.id, Option.key == key)
    replacing: list[int | None] = []
    if rows(session, named.limit(1)):  # a deprecated flag counts the flags replacing it too
        if replaced is None:
            replaced = replaced_by(session, version, flag)
        replacing = [f.id for new in replaced.values() for f in new]
    else:
        named = select(Option.flag_id).where(
            Option.version_id == version.id, col(Option.key).contains(key, autoescape=True)
        )
    reads = col(ConstraintFlag.flag_id)
    found = select(ConstraintFlag.constraint_id).where(or_(reads.in_(named), reads.in_(replacing)))
    wanted = {site_id for (site_id,) in rows(session, found)}
    return [s for s in sites if s.id in wanted]


def replaced_by(session: Session, version: Version, raw: str) -> dict[str, list[Flag]]:
    """The deprecated flags that `raw` names, each with the flags of the version its
    replacement names: `--disable-x` replaced by `--x-{decode,prefill}=disabled` is
    {"--disable-x": [--x-decode, --x-prefill]}. The constraints filter follows a deprecated
    flag to all of them (the option table links a deprecated name to one flag at most)."""
    out: dict[str, list[Flag]] = {}
    for old in flags_named(session, version, raw):
        if not old.deprecated or not old.replacement:
            continue
        new = (find_flag(session, version, n) for n in replacement_names(old.replacement))
        found = {f.id: f for f in new if f is not None and f.id != old.id}
        if found:
            out[old.name] = list(found.values())
    return out


def _sites_of(session: Session, version: Version, ids: Any, *where: Any) -> list[Any]:
    """The version's constraint sites (with ids in the subquery `ids`), in source order, as
    plain rows with the columns of ConstraintSite."""
    table = ConstraintSite.__table__  # type: ignore[attr-defined]
    query = select(table).where(ConstraintSite.version_id == version.id, *where)
    if ids is not None:
        query = query.where(col(ConstraintSite.id).in_(ids))
    return in_order(rows(session, query), ConstraintSite, "path", "line")


def constraint_counts(session: Session, version: Version) -> dict[str, int]:
    """How many constraint sites read or affect each option (for the flags list's badges),
    once per stamp."""

    def make() -> dict[str, int]:
        sites = select(ConstraintSite.id).where(ConstraintSite.version_id == version.id)
        # The flag's name by a correlated lookup, not a LEFT JOIN: SQLite materializes a view
        # (flag is one, kb/factored.py) on the right of a LEFT JOIN, every version's rows.
        name = select(Flag.name).where(col(Flag.id) == ConstraintFlag.flag_id).scalar_subquery()
        option = func.coalesce(name, ConstraintFlag.option)
        found = rows(
            session,
            select(option, func.count(func.distinct(ConstraintFlag.constraint_id)))
            .select_from(ConstraintFlag)
            .where(col(ConstraintFlag.constraint_id).in_(sites))
            .group_by(option),
        )
        return {name: count for name, count in found}

    return per_stamp(("constraint-counts", version.id), make, session)


def enum_dict(version: Version, enum: Enum) -> dict[str, Any]:
    members = loads(enum.members) or []
    return {
        "name": enum.name,
        "values": [m.get("value", m.get("name")) for m in members],
        "members": members,
        "flags": loads(enum.flags) or [],
        "source": citation(version, enum.path, enum.line, enum.end_line),
    }


def all_enums(session: Session, version: Version) -> list[Enum]:
    return in_order(session.exec(select(Enum).where(Enum.version_id == version.id)), Enum, "name")


def flag_enum(session: Session, version: Version, name: str) -> Any | None:
    """The enum whose members spell the flag's choices (a row with Enum's columns): the
    first in source order of those that name the flag. The version's map is built once per
    stamp."""

    def make() -> dict[str, Any]:
        table = Enum.__table__  # type: ignore[attr-defined]
        found = rows(session, select(table).where(table.c.version_id == version.id))
        first: dict[str, Any] = {}
        for enum in in_order(found, Enum, "path", "line"):
            for flag in loads(enum.flags) or []:
                first.setdefault(flag, enum)
        return first

    return per_stamp(("enum-of-flag", version.id), make, session).get(name)


def usage_site_dict(version: Version, site: UsageSite) -> dict[str, Any]:
    return {
        **citation(version, site.path, site.line),
        "text": site.text,
        "access": site.access,
    }


def flag_usages(session: Session, version: Version, dest: str) -> list[Any]:
    """The reads of `dest`, in source order (rows with UsageSite's columns)."""
    return sites_in_order(session, UsageSite, version, UsageSite.dest == dest)


def choice_site_dict(version: Version, site: ChoiceSite) -> dict[str, Any]:
    return {
        # from the first line its text joins (`if (` / `getattr(...)` / `) == "v"`)
        **citation(version, site.path, site.line - site.above, site.line),
        "text": site.text,
        "value": site.value,
        "flag": site.flag,
        "attributed": site.flag is not None,
        # Most sites are attributed: skip the JSON decoder for their empty list.
        "candidates": [] if site.candidates == "[]" else loads(site.candidates) or [],
        "how": site.how,
        "basis": site.basis,
    }


def choice_sites(
    session: Session, version: Version, flag: str, values: Sequence[str]
) -> dict[str, list[Any]]:
    """Sites handling each value of the flag: attributed to it, or ambiguous among candidates
    that include it (rows with ChoiceSite's columns). One indexed query for all values."""
    out: dict[str, list[Any]] = {str(value): [] for value in values}
    if not out:
        return out
    found = rows(
        session,
        select(ChoiceSite.__table__).where(  # type: ignore[attr-defined]
            ChoiceSite.version_id == version.id,
            col(ChoiceSite.value).in_(list(out)),
            or_(
                ChoiceSite.flag == flag,
                col(ChoiceSite.flag).is_(None)
                & col(ChoiceSite.candidates).contains(f'"{flag}"', autoescape=True),
            ),
        ),
    )
    for site in in_order(found, ChoiceSite, "path", "line"):
        if site.flag == flag or (site.flag is None and flag in (loads(site.candidates) or [])):
            out[site.value].append(site)
    return out


def version_file_sha(session: Session, version: Version, path: str) -> str | None:
    # A commit's tree never changes, so (commit, path) -> blob sha holds in every database.
    key = (version.commit, path)
    sha = _sha_cache.get(key)
    if sha is None:
        row = session.get(VersionFile, (version.id, path))
        if row is None:
            return None
        sha = row.sha
        _sha_cache.put(key, sha)
    return sha


_sha_cache: Cache[str] = Cache(50_000)


def version_paths(session: Session, version: Version) -> list[str]:
    return sorted(
        session.exec(select(VersionFile.path).where(VersionFile.version_id == version.id))
    )


# --- history ------------------------------------------------------------------------------


def flag_history(session: Session, flag_name: str) -> list[dict[str, Any]]:
    """The flag across every version, oldest first, as Change dicts
    {"version", "name", "field", "from", "to"}: "added", "renamed", "respelled", "split",
    each changed field, "removed" (see kb.diff.flag_history).

    Delegates to kb/diff.py so the history and the version diff compare fields the same way.
    """
    from kb.diff import flag_history as history  # diff.py owns the field comparison

    # History walks every version (a scan of the flag table), yet only changes when a
    # version is ingested: cache it per state of the version table.
    cached = _history_cache.get_or_make(
        flag_name, lambda: history(session, flag_name), session_stamp(session)
    )
    return list(cached)  # shared change dicts: callers read them, never mutate


_history_cache: Cache[list[dict[str, Any]]] = Cache(2048)


def kb_stamp(session: Session) -> str:
    """Changes whenever a version is added, re-ingested or removed, or its doc commands'
    verdicts are stored (`flagatlas check-docs`, kb/doc_commands.py) (one tiny query)."""
    # Plain SQL: it runs on every request, and SQLAlchemy's statement machinery cost more
    # than SQLite answering it. The stamp is opaque: ingested_at as the database stores it.
    count, last_id, last_ingest, last_check = (
        session.connection()
        .exec_driver_sql(
            "SELECT count(*), max(id), max(ingested_at), (SELECT max(id) FROM doccheck) "
            "FROM version"
        )
        .one()
    )
    return f"{count}:{last_id}:{last_ingest}:{last_check}"


def session_stamp(session: Session) -> Stamp:
    """The cache stamp of the session's database: which database, and its `kb_stamp`.
    Asked once per transaction (one snapshot: a web request), however many caches ask."""
    memo = session.info.get("kb_stamp")
    if memo is not None and memo[0] is session.get_transaction():
        return memo[1]  # type: ignore[no-any-return]
    stamp = Stamp(str(session.get_bind().engine.url), kb_stamp(session))
    session.info["kb_stamp"] = (session.get_transaction(), stamp)
    return stamp
