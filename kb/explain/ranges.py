"""Across versions: where each option of the command resolves, and where the whole command
parses (every flag exists and every value is one argparse accepts)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kb.explain.analysis import Analysis, analyze
from kb.explain.facts import FlagSpec, VersionFacts
from kb.explain.memo import by_identity
from kb.explain.parsing import OptionTable, classify
from kb.explain.shell import tokenize

# Findings that mean argparse stops on the command: a flag it does not know, or a value or
# arity it rejects. Constraint findings are SGLang's checks after parsing: not counted here.
PARSE_ERRORS = {
    "unknown_flag": "missing",
    "ambiguous": "ambiguous",
    "unplaced": "unplaced",
    "attached_text": "attached_text",
    "arguments": "arguments",
    "wrong_type": "wrong_type",
    "invalid_choice": "invalid_choice",
    "action_raises": "action_raises",
}


@dataclass(frozen=True)
class VersionOptions:
    """The option strings of one version, mapped to their canonical flag name, and its flags
    with what parsing a command needs (no help, defaults or citations)."""

    name: str
    options: dict[str, str]
    sorted: tuple[str, ...] = ()
    flags: tuple[FlagSpec, ...] = ()
    table: OptionTable | None = None

    @classmethod
    def build(
        cls, name: str, options: dict[str, str], flags: Sequence[FlagSpec] = ()
    ) -> VersionOptions:
        return cls(name, options, tuple(sorted(options)), tuple(flags), OptionTable(flags))

    @classmethod
    def of_flags(cls, name: str, flags: Sequence[FlagSpec]) -> VersionOptions:
        options: dict[str, str] = {}
        for flag in flags:
            for option in flag.options:
                options.setdefault(option, flag.name)
        return cls.build(name, options, flags)

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


def _problems(facts: VersionFacts, table: OptionTable, command: str) -> list[dict[str, str]]:
    """What makes argparse stop on the command at this version, as explain judges it there."""
    out = []
    for f in analyze(facts, command, evaluate=False, table=table).findings:
        problem = PARSE_ERRORS.get(f["kind"])
        if problem is not None and f["severity"] == "error":
            out.append({"flag": f["flag"] or "", "problem": problem, "message": f["message"]})
    return out


@by_identity
def _facts(version: VersionOptions) -> VersionFacts:
    """The version's flags as facts (one object per version: what the parse derives from
    them is kept against it)."""
    return VersionFacts(version.name, list(version.flags))


def judge(command: str, versions: Sequence[VersionOptions]) -> list[list[dict[str, str]]]:
    """For each version, what makes the command fail to parse there (empty: it parses).

    The parse depends on a version only through how each word of the command matches its
    option table and through the matched flags, so versions that agree on those share one
    analysis: a few analyses for the ~100 versions of a history, not one each. A flag is
    told by identity: the loader makes one spec of a flag unchanged between versions.
    """
    argv = tokenize(command).argv
    memo: dict[tuple[object, ...], list[dict[str, str]]] = {}
    out = []
    for v in versions:
        table = v.table or OptionTable(v.flags)
        key = tuple(
            (m.kind, m.option, m.resolved, m.explicit, m.candidates, id(m.flag))
            for m in classify(argv, table)
        )
        if key not in memo:
            memo[key] = _problems(_facts(v), table, command)
        out.append(memo[key])
    return out


def valid_in(command: str, versions: Sequence[VersionOptions]) -> list[dict[str, Any]]:
    """Ranges of versions (oldest first) where the command parses, and what limits each end.

    `limited_from` lists what fails in the version just before the range, `limited_to` what
    fails just after it, each as {"flag", "problem", "message"} (problem: missing, ambiguous,
    invalid_choice, wrong_type, ...: see PARSE_ERRORS); both are empty at the ends of the
    ingested history. Required flags the command lacks are not counted: the range is about
    what the command gives.
    """
    table = judge(command, versions)

    def at(i: int) -> list[dict[str, str]]:
        # judge's shared analysis says what fails; its messages name the version analyzed
        # (and suggest from its options): the version just outside the range says its own
        v = versions[i]
        return _problems(
            VersionFacts(v.name, list(v.flags)), v.table or OptionTable(v.flags), command
        )

    out = []
    for a, b in _ranges([not problems for problems in table]):
        after = b + 1 < len(versions)
        out.append(
            {
                "from": versions[a].name,
                "to": versions[b].name,
                "versions": b - a + 1,
                "limited_from": at(a - 1) if a else [],
                "before": versions[a - 1].name if a else None,
                "limited_to": at(b + 1) if after else [],
                "after": versions[b + 1].name if after else None,
            }
        )
    return out
