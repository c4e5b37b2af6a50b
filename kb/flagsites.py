"""One version's sites grouped the way a flag page looks them up, read once per state of
the knowledge base and shared by every flag page of that version.

A flag page wants, for one flag, its reads, its uses through a chain, the constraint sites
that name it and the choice sites that handle its values. As one query per section per
page these cost little in SQLite but most of the page's data time in building statements
and shaping rows; a version holds only a few thousand such sites (snapshot-2026-02-01:
2,299 reads, 1,216 choice sites, 408 constraint sites, 253 uses through a chain), so four
queries read them all once and every flag page of the version is dictionary lookups. The
API shapes of the sites (`usage_site_dict`, ...) are built per key on first use and kept.

Everything handed out is shared between requests: callers read it, never change it (copy a
dict before adding to it).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from sqlmodel import Session, col, select

from kb.cache import Cache
from kb.order import in_order
from kb.queries import (
    _versions,
    all_constraints,
    choice_site_dict,
    constraint_dict,
    loads,
    rows,
    session_stamp,
    usage_site_dict,
)
from kb.reach import indirect_site_dict, one_per_line
from kb.schema import ChoiceSite, ConstraintFlag, Flag, IndirectUsage, UsageSite, Version


class VersionSites:
    """The sites of one version by flag (rows with the columns of the site tables, in
    source order), and their API dicts made on first use."""

    def __init__(self, session: Session, version: Version) -> None:
        self.version = version
        self.usages = _grouped(session, UsageSite, version, "dest", order=("path", "line"))
        self.indirect = _grouped(session, IndirectUsage, version, "dest", order=("path", "line"))
        self.choices = self._choice_sites(session, version)
        self.constraints = self._constraint_sites(session, version)
        self._shaped: dict[Hashable, Any] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _choice_sites(session: Session, version: Version) -> dict[str, list[Any]]:
        """option -> the sites attributed to it, or ambiguous among candidates that include
        it (what `kb.queries.choice_sites` selects), in source order."""
        table = ChoiceSite.__table__  # type: ignore[attr-defined]
        found = rows(session, select(table).where(table.c.version_id == version.id))
        out: dict[str, list[Any]] = defaultdict(list)
        for site in in_order(found, ChoiceSite, "path", "line"):
            if site.flag is not None:
                out[site.flag].append(site)
            elif site.candidates != "[]":
                for option in dict.fromkeys(loads(site.candidates) or []):
                    out[option].append(site)
        return dict(out)

    @staticmethod
    def _constraint_sites(session: Session, version: Version) -> dict[str, list[Any]]:
        """option -> the constraint sites that read or affect the flag of that name (what
        `kb.queries.flag_constraints` selects), in source order."""
        named = rows(
            session,
            select(ConstraintFlag.constraint_id, Flag.name)
            .join(Flag, col(Flag.id) == ConstraintFlag.flag_id)
            .where(Flag.version_id == version.id),
        )
        names: dict[int, dict[str, None]] = defaultdict(dict)  # constraint id -> options
        for constraint_id, name in named:
            names[constraint_id][name] = None
        out: dict[str, list[Any]] = defaultdict(list)
        for site in all_constraints(session, version):
            for name in names.get(site.id, ()):
                out[name].append(site)
        return dict(out)

    def shaped(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """`make()` once per key for this version (API dicts of one flag's sites)."""
        value = self._shaped.get(key)
        if value is None:
            value = make()
            with self._lock:
                value = self._shaped.setdefault(key, value)
        return value

    def usage_dicts(self, dest: str) -> list[dict[str, Any]]:
        return self.shaped(  # type: ignore[no-any-return]
            ("usages", dest),
            lambda: [usage_site_dict(self.version, u) for u in self.usages.get(dest, ())],
        )

    def indirect_dicts(self, dest: str) -> list[dict[str, Any]]:
        """The uses past the first read, one per line: a model class's line reaching the
        flag through several entry points (kb.reach.flag_models shows each) is cited
        through its shortest chain."""
        return self.shaped(  # type: ignore[no-any-return]
            ("indirect", dest),
            lambda: [
                indirect_site_dict(self.version, r)
                for r in one_per_line(self.indirect.get(dest, ()))
            ],
        )

    def choice_dicts(self, flag: str, values: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        """value -> the API dicts of the sites handling it (`values` in the caller's order)."""
        by_value: dict[str, list[dict[str, Any]]] = self.shaped(
            ("choices", flag), lambda: self._by_value(flag)
        )
        return {str(v): by_value.get(str(v), []) for v in values}

    def _by_value(self, flag: str) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for site in self.choices.get(flag, ()):
            out[site.value].append(choice_site_dict(self.version, site))
        return dict(out)

    def constraint_dicts(self, flag: str) -> list[dict[str, Any]]:
        return self.shaped(  # type: ignore[no-any-return]
            ("constraints", flag),
            lambda: [constraint_dict(self.version, c) for c in self.constraints.get(flag, ())],
        )


def version_sites(session: Session, version: Version) -> VersionSites:
    """The version's `VersionSites`, read once per stamp; a few versions are kept (each is
    a few MB of rows and dicts), the least recently used dropped first."""
    shared = _versions(session).by_name[version.name]  # not tied to the caller's session
    return _sites.get_or_make(
        version.id, lambda: VersionSites(session, shared), session_stamp(session)
    )


_sites: Cache[VersionSites] = Cache(8)


def _grouped(
    session: Session, model: Any, version: Version, key: str, order: Sequence[str]
) -> dict[str, list[Any]]:
    table = model.__table__
    found = rows(session, select(table).where(table.c.version_id == version.id))
    out: dict[str, list[Any]] = defaultdict(list)
    for row in in_order(found, model, *order):
        out[getattr(row, key)].append(row)
    return dict(out)


def chain_reads(session: Session, version: Version, dest: str) -> list[dict[str, Any]]:
    """The uses of a flag past its first read, each with its chain: the one list the flag
    page's "Read through a chain" and the compare page's sites (`via`) both show, so the
    two cannot disagree."""
    return version_sites(session, version).indirect_dicts(dest)
