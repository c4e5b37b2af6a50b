"""How SGLang names a deprecated flag's replacement: `--x`, `--x=v`, or flags in pairs with
shell braces (`--x-{decode,prefill}=off`). A module of its own, below kb.queries and
kb.diff, so the diff, the pages and the ingest read a replacement alike."""

from __future__ import annotations

import re

_BRACES = re.compile(r"\{([^{}]*,[^{}]*)\}")


def expand_braces(text: str) -> list[str]:
    """Shell brace expansion, as SGLang names flags in pairs: `--x-{decode,prefill}=off` is
    [`--x-decode=off`, `--x-prefill=off`]; text without a `{a,b}` group stays as it is."""
    m = _BRACES.search(text)
    if m is None:
        return [text]
    head, tail = text[: m.start()], text[m.end() :]
    return [e for part in m.group(1).split(",") for e in expand_braces(head + part + tail)]


def replacement_names(replacement: str | None) -> list[str]:
    """The option names a replacement gives, braces expanded and a `=value` dropped:
    `--x-{decode,prefill}=off` -> [--x-decode, --x-prefill]."""
    names = (n.partition("=")[0] for n in expand_braces(replacement or ""))
    return [n for n in dict.fromkeys(names) if n]
