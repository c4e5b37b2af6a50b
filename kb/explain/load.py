"""Facts from the knowledge base: one version's flags and constraint sites, and the option
strings of every version (for the compatibility range).

Both are cached under the knowledge base's stamp (`kb.cache`): an ingest that adds, redoes or
removes a version changes the stamp, which drops them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from sqlalchemy import select as sa_select  # sqlmodel's select types 4 columns at most
from sqlmodel import Session, col, select

from kb.cache import Cache, Stamp
from kb.explain.deploy import cached_module
from kb.explain.facts import EnvSpec, FlagSpec, SiteSpec, VersionFacts, negations_of
from kb.explain.memo import by_identity
from kb.explain.ranges import VersionOptions
from kb.explain.source_modules import Module
from kb.explain.type_functions import find_function, suffixed_int
from kb.queries import citation, session_stamp
from kb.schema import (
    ConstraintSite,
    EnvVar,
    Flag,
    Version,
    VersionFile,
    blob_text,
    loads,
)

# type= names explain converts itself (kb.explain.values.convert)
BUILTIN_TYPES = {"str", "int", "float", "bool", "nullable_str", "json_list_type"}
_facts_cache: Cache[VersionFacts] = Cache(8)  # version id -> its facts
_options_cache: Cache[list[VersionOptions]] = Cache(4)  # one entry per database
_files_cache: Cache[dict[str, str]] = Cache(16)  # version id -> cited path -> blob sha


def _json_or_none(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None  # source text (e.g. a const that is an expression)


def load_facts(session: Session, version: Version, stamp: Stamp | None = None) -> VersionFacts:
    return _facts_cache.get_or_make(
        version.id, lambda: _read_facts(session, version), stamp or session_stamp(session)
    )


def flag_spec(version: Version, row: Flag) -> FlagSpec:
    """One flag row as explain sees it."""
    aliases = tuple(loads(row.aliases) or ())
    # Facts the ingest records since issue 9, read so that older knowledge bases still load.
    action_path, action_line = getattr(row, "action_path", None), getattr(row, "action_line", None)
    return FlagSpec(
        name=row.name,
        dest=row.dest,
        aliases=aliases,
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
        negations=negations_of((row.name, *aliases), row.action, getattr(row, "negation", None)),
        takes_value=getattr(row, "takes_value", None),
        deprecated_kind=getattr(row, "deprecated_kind", None),
        action_error=getattr(row, "action_error", None),
        action_source=(
            citation(version, action_path, action_line, action_line)
            if action_path and action_line
            else None
        ),
    )


def _read_facts(session: Session, version: Version) -> VersionFacts:
    rows = session.exec(
        select(Flag).where(Flag.version_id == version.id).order_by(col(Flag.path), col(Flag.line))
    ).all()
    converters = _type_functions(session, version, {(r.path, r.type) for r in rows if r.type})
    flags = [
        replace(spec, converter=converters.get((row.path, row.type)))
        if (row.path, row.type) in converters
        else spec
        for row in rows
        for spec in [flag_spec(version, row)]
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
    env = {
        row.name: EnvSpec(
            name=row.name,
            type=row.type,
            default=loads(row.default),
            declared=row.declared,
            deprecated_names=tuple(loads(row.deprecated_names) or ()),
            replacement=row.replacement,
            source=citation(version, row.path, row.line, row.end_line),
            comment=row.comment,
            conversion=_json_or_none(row.conversion),
            fallback=_json_or_none(row.fallback),
        )
        for row in session.exec(select(EnvVar).where(EnvVar.version_id == version.id))
    }
    aliases = [
        (a["from"], a["to"])
        for a in (_json_or_none(version.report) or {}).get("env_prefix_aliases") or []
    ]
    return VersionFacts(version.name, flags, sites, env, aliases)


def _type_functions(
    session: Session, version: Version, types: set[tuple[str, str | None]]
) -> dict[tuple[str, str | None], Callable[[str], Any]]:
    """(path, type) -> the type function explain can apply, for the type functions named by
    a plain name that a module of the version defines in a shape it recognises."""
    named = {(path, t) for path, t in types if t and t.isidentifier() and t not in BUILTIN_TYPES}
    if not named:
        return {}
    modules = version_modules(session, version)
    out: dict[tuple[str, str | None], Callable[[str], Any]] = {}
    for path, name in named:
        fn = find_function(modules, path, name)
        converter = suffixed_int(fn) if fn is not None else None
        if converter is not None:
            out[(path, name)] = converter
    return out


def load_options(session: Session, stamp: Stamp | None = None) -> list[VersionOptions]:
    """Every version, oldest first, with its option strings -> canonical names."""
    return _options_cache.get_or_make(
        "options", lambda: _read_options(session), stamp or session_stamp(session)
    )


def _read_options(session: Session) -> list[VersionOptions]:
    versions = list(session.exec(select(Version).order_by(col(Version.position))))
    flags: dict[int | None, list[FlagSpec]] = {v.id: [] for v in versions}
    # What parsing needs of every flag of every version: one query, no help texts.
    columns: list[Any] = [
        Flag.version_id,
        Flag.name,
        Flag.dest,
        Flag.aliases,
        Flag.type,
        Flag.choices,
        Flag.choices_dynamic,
        Flag.choices_extensible,
        Flag.action,
        Flag.nargs,
        Flag.const,
        Flag.takes_value,
        Flag.negation,
        Flag.deprecated_kind,
        Flag.action_error,
        Flag.path,  # last: where a type function named by `type` is looked up
    ]
    rows = session.connection().execute(
        sa_select(*columns).order_by(col(Flag.version_id), col(Flag.path), col(Flag.line))
    )
    made: dict[tuple[Any, ...], FlagSpec] = {}  # a flag unchanged across versions: one spec
    typed: dict[int | None, set[tuple[str, str | None]]] = {}  # type functions to look up
    for version_id, *fields, path in rows:
        key = tuple(fields)
        if key not in made:
            made[key] = _parse_spec(*fields)
        spec = made[key]
        flags.setdefault(version_id, []).append(spec)
        if spec.type and spec.type.isidentifier() and spec.type not in BUILTIN_TYPES:
            typed.setdefault(version_id, set()).add((path, spec.type))
    for version in versions:  # the few versions whose flags name a type function
        if version.id in typed:
            converters = _type_functions(session, version, typed[version.id])
            by_type = {t: c for (_path, t), c in converters.items()}
            flags[version.id] = [
                replace(f, converter=by_type[f.type]) if f.type in by_type else f
                for f in flags[version.id]
            ]
    return [VersionOptions.of_flags(v.name, flags[v.id]) for v in versions]


def _parse_spec(
    name: str,
    dest: str,
    aliases: str,
    type_: str | None,
    choices: str | None,
    dynamic: bool,
    extensible: bool,
    action: str | None,
    nargs: str | None,
    const: str | None,
    takes_value: bool | None,
    negation: str | None,
    deprecated_kind: str | None,
    action_error: str | None,
) -> FlagSpec:
    names = tuple(loads(aliases) or ())
    return FlagSpec(
        name=name,
        dest=dest,
        aliases=names,
        type=type_,
        choices=tuple(loads(choices)) if choices is not None else None,
        choices_dynamic=dynamic,
        choices_extensible=extensible,
        action=action,
        nargs=nargs,
        const=_json_or_none(const),
        takes_value=takes_value,
        negations=negations_of((name, *names), action, negation),
        deprecated_kind=deprecated_kind,
        action_error=action_error,
    )


def version_modules(session: Session, version: Version) -> Callable[[str], Module | None]:
    """path -> the parsed module of that file at the version, from the stored blobs (parsed
    once per blob sha); None for files the knowledge base does not hold."""
    files = _files_cache.get_or_make(
        version.id, lambda: _read_files(session, version), session_stamp(session)
    )

    return _loader(files, session)


@by_identity
def _loader(files: dict[str, str], session: Session) -> Callable[[str], Module | None]:
    """One loader per state of a version's files and session: the same object for every
    simulation of an explain (its fixes' too), so what is derived from the version's
    modules can be cached against it (kb.explain.memo)."""

    def load(path: str) -> Module | None:
        sha = files.get(path)
        if sha is None:
            return None
        return cached_module(sha, path, lambda: blob_text(session, sha))

    return load


def version_paths(session: Session, version: Version) -> list[str]:
    """The paths of the files the knowledge base holds at the version."""
    files = _files_cache.get_or_make(
        version.id, lambda: _read_files(session, version), session_stamp(session)
    )
    return sorted(files)


def _read_files(session: Session, version: Version) -> dict[str, str]:
    rows = session.exec(
        select(VersionFile.path, VersionFile.sha).where(VersionFile.version_id == version.id)
    )
    return {path: sha for path, sha in rows}
