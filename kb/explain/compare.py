"""Upgrade check: what changes for a command when moving from version A to version B."""

from __future__ import annotations

import json
from typing import Any

from kb.explain.analysis import Analysis
from kb.explain.facts import FlagSpec, VersionFacts
from kb.explain.report import Finding
from kb.explain.sites import dest_of


def _default_text(flag: FlagSpec) -> str:
    if flag.default_expr is not None and flag.default is None:
        return flag.default_expr
    return json.dumps(flag.default)


def compare(
    a: Analysis, b: Analysis, facts_a: VersionFacts, facts_b: VersionFacts
) -> dict[str, Any]:
    """What changes for this command when moving from version A to version B."""
    removed, meaning = [], []
    for ua, ub in zip(a.uses, b.uses, strict=False):
        if ua.match.option != ub.match.option or ua.flag is None or ua.flag.builtin:
            continue
        if ub.flag is None:
            # stated at A, else what SGLang said before B when it deprecated the flag
            hint = ua.flag.replacement or next(
                (
                    f.get("replacement")
                    for f in b.findings
                    if f["kind"] == "unknown_flag" and f["flag"] == ub.match.option
                ),
                None,
            )
            removed.append(
                {
                    "flag": ua.match.option,
                    "name": ua.flag.name,
                    "replacement": hint,
                    "replacements": facts_b.replacement_flags(hint),
                    "message": f"{ua.match.option} does not exist in {b.version}"
                    + (f"; use {hint}" if hint else ""),
                }
            )
        elif ub.flag.name != ua.flag.name and not _fields(ua.flag) & _fields(ub.flag):
            meaning.append(
                {
                    "flag": ua.match.option,
                    "from": ua.flag.name,
                    "to": ub.flag.name,
                    "message": f"{ua.match.option} meant {ua.flag.name} in {a.version} "
                    f"but {ub.flag.name} in {b.version}",
                }
            )
    given = {u.flag.name for u in a.uses if u.flag} | {u.flag.name for u in b.uses if u.flag}
    old = {f.name: f for f in facts_a.flags}
    defaults = []
    for flag in facts_b.flags:
        before = old.get(flag.name)
        if before is None or flag.name in given or flag.hidden:
            continue
        if _default_text(before) != _default_text(flag):
            defaults.append(
                {"flag": flag.name, "from": _default_text(before), "to": _default_text(flag)}
            )

    fields_a = {f.name: _fields(f) for f in facts_a.flags}
    fields_b = {f.name: _fields(f) for f in facts_b.flags}

    def key(f: Finding, fields: dict[str, frozenset[str]], version: str) -> tuple[Any, ...]:
        # by the field a flag sets: a flag renamed to its own alias is the same problem
        flag = f["flag"]
        if flag is None:  # an environment variable's: the same problem, said the same way
            return (f["kind"], f.get("env"), f["message"].replace(version, "…"))
        return (f["kind"], min(fields[flag]) if flag in fields else flag)

    skip = ("constraint", "undecidable")
    plain_a = {key(f, fields_a, a.version): f for f in a.findings if f["kind"] not in skip}
    plain_b = {key(f, fields_b, b.version): f for f in b.findings if f["kind"] not in skip}
    serious = ("error", "warning")
    # a problem at both versions is listed once, as persisting, not as both new and gone
    persisting = [f for k, f in b.fired.items() if k in a.fired and f["severity"] in serious]
    persisting += [f for k, f in plain_b.items() if k in plain_a and f["severity"] in serious]
    return {
        "from": a.version,
        "to": b.version,
        "removed": removed,
        "changed_meaning": meaning,
        "defaults_changed": defaults,
        "constraints_started": [f for k, f in b.fired.items() if k not in a.fired],
        "constraints_stopped": [f for k, f in a.fired.items() if k not in b.fired],
        "findings_new": [
            f for k, f in plain_b.items() if k not in plain_a and f["severity"] in serious
        ],
        "findings_gone": [
            f for k, f in plain_a.items() if k not in plain_b and f["severity"] in serious
        ],
        "persisting": persisting,
        "errors": b.errors,
    }


def _fields(flag: FlagSpec) -> frozenset[str]:
    """The fields a flag's spellings can name: its dest and the dests of its aliases
    (SGLang reads `self.tp_size` although argparse stores `tensor_parallel_size`)."""
    return frozenset({flag.dest, *(dest_of(o) for o in flag.options)})
