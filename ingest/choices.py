"""More shapes of choice handling in one file, found by literal-led scans like ingest/sites.py:

- registries: `@register_attention_backend("fa3")`, `register_x("name", ...)`;
- dispatch dicts whose keys are strings, one entry a line (`"fa3": FlashAttentionBackend,`);
- containment in a named constant: `x in SUPPORTED_BACKENDS` (the constant is resolved to its
  values by the assembler, in this file or through its imports), with this file's constants;
- the type a receiver has, for `.is_x()` calls: `backend: MoeRunnerBackend`,
  `backend = get_moe_runner_backend()`, `backend = MoeRunnerBackend(...)`.

Version-independent like every blob fact; the assembler attributes them per version.
"""

from __future__ import annotations

import re
from typing import Any

from ingest.sites import VALUE, LineIndex, _in_comment, _Lines, _string_items, subject_tail

REGISTRY_RE = re.compile(rb"register\w*\(\s*([\"'])(" + VALUE + rb")\1")
NAME_BEFORE_RE = re.compile(r"([A-Za-z_][\w.]*)$")
# A key that starts its line, matched at a line start found from a `":` (bytes.find is fast).
LINE_KEY_RE = re.compile(rb"[ \t]*\{?[ \t]*([\"'])(" + VALUE + rb")\1:[ \t]*[\w(\[{\"'.-]")
CONST_IN_RE = re.compile(rb" in\s+(?:self\.|cls\.)?([A-Z_][A-Z0-9_]{2,})\b(?!\s*[\[.(])")
# `NAME = [` / `(` / `{`, checked at the start of the line where ` = [` was found.
CONST_LINE_RE = re.compile(rb"[ \t]*([A-Z_][A-Z0-9_]{2,})[ \t]*(?::[^=\n]*)?=[ \t]*([\[\(\{])")
CONST_OPEN_RE = re.compile(rb" = [\[\(\{]")
OPENERS = {b" = [": 0, b" = (": 1, b" = {": 2}
ASSIGN_BEFORE_RE = re.compile(r"(?:self\.)?([A-Za-z_]\w*)\s*(?::[^=]*)?=\s*(?:\w+\()?\{?\s*$")
REGISTRY_WORDS = {"register", "registry", "factory", "registered", "self", "cls"}
MAX_TYPED = 20  # receivers looked up per file


def scan_choice_shapes(
    data: bytes, choices: list[list[Any]], index: LineIndex | None = None
) -> dict[str, Any]:
    lines = _Lines(data, index)
    out: dict[str, Any] = {}
    if b"register" in data:
        registry = []
        for m in REGISTRY_RE.finditer(data):
            prefix = lines.prefix(m.start())
            if _in_comment(prefix):
                continue
            name = NAME_BEFORE_RE.search(prefix)
            token = data[m.start() : data.index(b"(", m.start())].decode("utf-8", "replace")
            func = (name.group(1) if name else "") + token  # AttentionBackendRegistry.register
            registry.append([m.group(2).decode(), lines.at(m.start()), func])
        if registry:
            out["registry"] = registry
    dispatch = _dispatch_dicts(data, lines)
    if dispatch:
        out["dispatch"] = dispatch
    if b" in " in data:
        named = []
        for m in CONST_IN_RE.finditer(data):
            prefix = lines.prefix(m.start())
            if _in_comment(prefix):
                continue
            tail = subject_tail(prefix.removesuffix(" not"))
            named.append([m.group(1).decode(), lines.at(m.start()), tail])
        if named:
            out["named_contains"] = named
    consts = {}
    # One literal-led pass for the three openers; the constants are taken opener by opener
    # (a later one of a name wins, in the place of the first).
    for _opener, pos in sorted((OPENERS[m[0]], m.start()) for m in CONST_OPEN_RE.finditer(data)):
        start = data.rfind(b"\n", 0, pos) + 1
        c = CONST_LINE_RE.match(data, start) if pos - start < 60 else None
        if c is not None and c.end() == pos + 4:
            values = _string_items(data, pos + 3)
            if values:
                consts[c.group(1).decode()] = values
    if consts:
        out["consts"] = consts
    receivers = {tail for _v, _l, tail, how in choices if how == "is_call" and tail}
    if receivers:
        types = _receiver_types(data, sorted(receivers)[:MAX_TYPED])
        if types:
            out["types"] = types
    out["lines"] = {str(k): v for k, v in lines.texts.items()}
    return out


def registry_subject(func: str) -> str:
    """AttentionBackendRegistry.register -> attention_backend; register_lora_backend ->
    lora_backend; StorageBackendFactory.register_backend -> storage_backend."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", func.replace(".", "_")).lower()
    words = [w for w in spaced.split("_") if w and w not in REGISTRY_WORDS]
    return "_".join(dict.fromkeys(words))


def _dispatch_dicts(data: bytes, lines: _Lines) -> list[list[Any]]:
    """[[[key, line], ...], first line, subject]: runs of `"key": value` entries, one a
    line."""
    keys: list[tuple[int, int, str]] = []  # (offset, line start, key)
    for quote in (b'":', b"':"):
        pos = data.find(quote)
        while pos >= 0:
            start = data.rfind(b"\n", 0, pos) + 1
            m = LINE_KEY_RE.match(data, start)
            if m and m.end(2) == pos:  # the `":` found closes this key
                keys.append((m.start(2), start, m.group(2).decode()))
            pos = data.find(quote, pos + 2)
    keys.sort()
    groups: list[list[Any]] = []
    last_line = -10
    for offset, start, key in keys:
        no = lines.at(offset)
        if groups and no - last_line <= 3:
            groups[-1][0].append([key, no])
        else:
            groups.append([[[key, no]], no, _assigned_name(data, start)])
        last_line = no
    return [g for g in groups if len(g[0]) >= 2]


def _assigned_name(data: bytes, start: int) -> str:
    """The name a dict is assigned to, from the lines just above its first entry (comment
    lines skipped): `mapping = {` -> "mapping"."""
    end = start - 1
    for _ in range(3):
        if end <= 0:
            return ""
        begin = data.rfind(b"\n", 0, end) + 1
        prev = data[begin:end].decode("utf-8", "replace").strip()
        if prev and not prev.startswith("#"):
            found = ASSIGN_BEFORE_RE.search(prev)
            return found.group(1) if found else ""
        end = begin - 1
    return ""


def _receiver_types(data: bytes, names: list[str]) -> dict[str, str]:
    """name -> "get:<dest>" or "type:<Class>" for receivers of `.is_x()` calls."""
    text = data.decode("utf-8", "replace")
    out: dict[str, str] = {}
    for name in names:
        # Literal-led patterns (the name first): the engine skips to each occurrence.
        n = re.escape(name)
        getter = re.compile(rf"{n}\s*=\s*(?:self\.)?get_(\w+)\(\)")
        typed = re.compile(rf"{n}\s*(?::\s*(?:Optional\[)?|=\s*)([A-Z]\w+)\b(?!\.)")
        for rx, kind in ((getter, "get:"), (typed, "type:")):
            m = next((m for m in rx.finditer(text) if _word_start(text, m.start())), None)
            if m:
                out[name] = kind + m.group(1)
                break
    return out


def _word_start(text: str, pos: int) -> bool:
    return pos == 0 or not (text[pos - 1].isalnum() or text[pos - 1] in "_.")
