"""Findings, and how values and texts are written in them."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from rapidfuzz import fuzz, process

from kb.explain.facts import Citation
from kb.threeval import Unknown

Finding = dict[str, Any]

SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}


def finding(
    severity: str,
    flag: str | None,
    message: str,
    kind: str,
    source: Citation | None = None,
    **extra: Any,
) -> Finding:
    return {
        "severity": severity,
        "flag": flag,
        "message": message,
        "source": source,
        "kind": kind,
        **extra,
    }


def display(value: Any) -> str:
    """A value as the Python reader of SGLang's code writes it: True, None, 0.8, fa3."""
    if isinstance(value, Unknown):
        return "(unknown)"
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, bool):
        return repr(value)
    return json.dumps(value, default=_json_default)


def _json_default(value: Any) -> Any:
    """What JSON has no type for: a set as its sorted texts (a simulated field may hold one),
    anything else as its text."""
    if isinstance(value, set | frozenset):
        return sorted(map(str, value))
    return str(value)


def suggest(word: str, options: Iterable[str], limit: int = 3, cutoff: float = 70) -> list[str]:
    found = process.extract(word, list(options), scorer=fuzz.ratio, limit=limit)
    return [choice for choice, score, _ in found if score >= cutoff]


def clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def one_line(help_text: str, limit: int = 160) -> str:
    text = " ".join(help_text.split())
    match = re.match(r"(.+?[.!?])(\s|$)", text)
    if match and len(match.group(1)) <= limit:
        return match.group(1)
    return clip(text, limit)
