"""Facts from the knowledge base: one version's flags and constraint sites, and the option
strings of every version (for the compatibility range).

Both are cached per database and version: the facts of an ingested version never change
unless it is re-ingested, which changes its `ingested_at`.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from sqlmodel import Session, col, select

from kb.explain.facts import FlagSpec, SiteSpec, VersionFacts
from kb.explain.ranges import VersionOptions
from kb.queries import citation
from kb.schema import ConstraintSite, Flag, Version, loads

_facts_cache: OrderedDict[tuple[str, int | None, str], VersionFacts] = OrderedDict()
_options_cache: dict[str, tuple[tuple[Any, ...], list[VersionOptions]]] = {}


def _db_key(session: Session) -> str:
    return str(session.get_bind().engine.url)


def _json_or_none(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None  # source text (e.g. a const that is an expression)


def load_facts(session: Session, version: Version) -> VersionFacts:
    key = (_db_key(session), version.id, f"{version.commit}@{version.ingested_at}")
    if key in _facts_cache:
        _facts_cache.move_to_end(key)
        return _facts_cache[key]
    flags = [
        FlagSpec(
            name=row.name,
            dest=row.dest,
            aliases=tuple(loads(row.aliases) or ()),
            type=row.type,
            default=loads(row.default) if row.default is not None else None,
            default_expr=row.default_expr if row.default is None else None,
            choices=tuple(loads(row.choices)) if row.choices is not None else None,
            choices_dynamic=row.choices_dynamic,
            choices_extensible=row.choices_extensible,
            action=row.action,
            nargs=row.nargs,
            const=_json_or_none(row.const),
            required=row.required,
            deprecated=row.deprecated,
            deprecated_message=row.deprecated_message,
            replacement=row.replacement,
            help=row.help,
            hidden=row.hidden,
            source=citation(version, row.path, row.line, row.end_line),
        )
        for row in session.exec(
            select(Flag)
            .where(Flag.version_id == version.id)
            .order_by(col(Flag.path), col(Flag.line))
        )
    ]
    sites = [
        SiteSpec(
            kind=row.kind,
            function=row.function,
            conditions=tuple(loads(row.conditions) or ()),
            message=row.message,
            flags=tuple(loads(row.flags) or ()),
            affects=tuple(loads(row.affects) or ()),
            writes=tuple((loads(row.writes) or {}).items()),
            key=row.key,
            path=row.path,
            line=row.line,
            source=citation(version, row.path, row.line, row.end_line),
        )
        for row in session.exec(
            select(ConstraintSite)
            .where(ConstraintSite.version_id == version.id)
            .order_by(col(ConstraintSite.path), col(ConstraintSite.line))
        )
    ]
    facts = VersionFacts(version.name, flags, sites)
    _facts_cache[key] = facts
    while len(_facts_cache) > 8:
        _facts_cache.popitem(last=False)
    return facts


def load_options(session: Session) -> list[VersionOptions]:
    """Every version, oldest first, with its option strings -> canonical names."""
    versions = list(session.exec(select(Version).order_by(col(Version.position))))
    signature = tuple((v.id, v.name, v.commit, str(v.ingested_at)) for v in versions)
    cached = _options_cache.get(_db_key(session))
    if cached and cached[0] == signature:
        return cached[1]
    options: dict[int | None, dict[str, str]] = {v.id: {} for v in versions}
    for version_id, name, aliases in session.exec(select(Flag.version_id, Flag.name, Flag.aliases)):
        table = options.setdefault(version_id, {})
        for option in (name, *(loads(aliases) or ())):
            table.setdefault(option, name)
    result = [VersionOptions.build(v.name, options[v.id]) for v in versions]
    _options_cache[_db_key(session)] = (signature, result)
    return result
