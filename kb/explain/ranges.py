"""Across versions: where each option of the command resolves, and where all of them do."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kb.explain.analysis import Analysis


@dataclass(frozen=True)
class VersionOptions:
    """The option strings of one version, mapped to their canonical flag name."""

    name: str
    options: dict[str, str]
    sorted: tuple[str, ...] = ()

    @classmethod
    def build(cls, name: str, options: dict[str, str]) -> VersionOptions:
        return cls(name, options, tuple(sorted(options)))

    def resolves(self, option: str) -> bool:
        return self.status(option) == "ok"

    def status(self, option: str) -> str:
        """ "ok" (exact or unambiguous abbreviation), "ambiguous" or "missing". Like argparse,
        a prefix of two option strings is ambiguous even when both name one flag."""
        if option in self.options:
            return "ok"
        start = bisect.bisect_left(self.sorted, option)
        found = 0
        for candidate in self.sorted[start:]:
            if not candidate.startswith(option):
                break
            found += 1
            if found > 1:
                return "ambiguous"
        return "ok" if found else "missing"


def used_options(analysis: Analysis) -> list[str]:
    seen: dict[str, None] = {}
    for use in analysis.uses:
        if use.flag is not None and use.flag.builtin:
            continue
        seen[use.match.option] = None
    return list(seen)


def _ranges(flags: Sequence[bool]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    start = None
    for i, ok in enumerate([*flags, False]):
        if ok and start is None:
            start = i
        elif not ok and start is not None:
            out.append((start, i - 1))
            start = None
    return out


def presence(options: Sequence[str], versions: Sequence[VersionOptions]) -> dict[str, list[dict]]:
    """For each option, the ranges of versions (oldest first) where it resolves."""
    out = {}
    for option in options:
        marks = [v.resolves(option) for v in versions]
        out[option] = [
            {"from": versions[a].name, "to": versions[b].name} for a, b in _ranges(marks)
        ]
    return out


def valid_in(options: Sequence[str], versions: Sequence[VersionOptions]) -> list[dict[str, Any]]:
    """Ranges of versions (oldest first) where every option resolves, and what limits each end.

    `limited_from` lists the options that fail in the version just before the range,
    `limited_to` those failing just after it, each as {"flag", "problem": missing|ambiguous};
    both are empty at the ends of the ingested history.
    """
    table = [[v.status(o) for o in options] for v in versions]

    def failing(i: int) -> list[dict[str, str]]:
        return [
            {"flag": o, "problem": status}
            for o, status in zip(options, table[i], strict=True)
            if status != "ok"
        ]

    out = []
    for a, b in _ranges([all(s == "ok" for s in row) for row in table]):
        after = b + 1 < len(versions)
        out.append(
            {
                "from": versions[a].name,
                "to": versions[b].name,
                "versions": b - a + 1,
                "limited_from": failing(a - 1) if a else [],
                "before": versions[a - 1].name if a else None,
                "limited_to": failing(b + 1) if after else [],
                "after": versions[b + 1].name if after else None,
            }
        )
    return out
