"""Which refs to ingest, and in what order.

SGLang's release tags are `vX.Y.Z[...]` and parse as PEP 440 versions; other tag families
(`gateway-*`, `sgl-kernel-*`) do not belong to the server. PEP 440 labels sort by version;
labels that are not versions (snapshots, branches) are placed among them by commit date.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from datetime import datetime
from functools import lru_cache

from packaging.version import InvalidVersion, Version

from ingest.git_source import Ref

RELEASE_TAG = re.compile(r"^v\d+(\.\d+)+")


@lru_cache(maxsize=4096)  # order() runs after every version written, over all of them
def parse_version(label: str) -> Version | None:
    if not RELEASE_TAG.match(label):
        return None
    try:
        return Version(label)
    except InvalidVersion:
        return None


def order(items: Iterable[tuple[str, datetime]]) -> list[str]:
    """Oldest first: versions by PEP 440, other labels merged in by commit date."""
    items = list(items)
    releases = sorted(
        ((v, label, date) for label, date in items if (v := parse_version(label))),
        key=lambda t: t[0],
    )
    others = sorted(
        ((date, label) for label, date in items if parse_version(label) is None),
        key=lambda t: (t[0], t[1]),
    )
    out: list[str] = []
    i = 0
    for _v, label, date in releases:
        while i < len(others) and others[i][0] < date:
            out.append(others[i][1])
            i += 1
        out.append(label)
    out.extend(label for _d, label in others[i:])
    return out


def sort_key(label: str, date: datetime) -> str:
    """A readable key: the normalized PEP 440 version, else the commit date."""
    v = parse_version(label)
    return f"pep440:{v}" if v else f"date:{date.isoformat()}"


def select(
    tags: list[Ref],
    pattern: str | None,
    extra: list[Ref],
    since: str | None,
    latest: int | None,
) -> list[Ref]:
    """Tags matching `pattern` (default: release tags that parse as PEP 440) plus `extra`.

    Raises ValueError (a one-line error for the CLI) when --since or --latest would silently
    select nothing.
    """
    if latest is not None and latest <= 0:
        raise ValueError(f"--latest must be a positive number of versions, not {latest}")
    if pattern is None:
        chosen = [t for t in tags if parse_version(t.label)]
    else:
        chosen = [t for t in tags if fnmatch.fnmatchcase(t.label, pattern)]
    by_label = {r.label: r for r in chosen}
    by_label.update({r.label: r for r in extra})
    ordered = [by_label[label] for label in order((r.label, r.date) for r in by_label.values())]
    if since:
        floor = parse_version(since if since.startswith("v") else f"v{since}")
        labels = [r.label for r in ordered]
        if floor is None and since not in labels:
            raise ValueError(f"--since {since!r} is neither a version nor an ingested label")
        if floor is not None:
            newest = max((v for r in ordered if (v := parse_version(r.label))), default=None)
            if newest is not None and floor > newest:
                raise ValueError(f"--since {since} is past the newest release selected ({newest})")
            ordered = [
                r
                for r in ordered
                if (v := parse_version(r.label)) is None
                and _after_release(r, ordered, floor)
                or (v is not None and v >= floor)
            ]
        else:
            ordered = ordered[labels.index(since) :]
        if not ordered:
            raise ValueError(f"--since {since} selects no version")
    if latest is not None:
        ordered = ordered[-latest:]
    return ordered


def _after_release(ref: Ref, ordered: list[Ref], floor: Version) -> bool:
    """A non-version label counts as >= floor when it sorts after the first release >= floor."""
    for r in ordered:
        v = parse_version(r.label)
        if v is not None and v >= floor:
            return ordered.index(ref) > ordered.index(r)
    return False
