"""More shapes of choice handling in one file, found by literal-led scans like ingest/sites.py:

- registries: `@register_attention_backend("fa3")`, `register_x("name", ...)`, each of the
  leading string arguments with its position (`@register_fused_func("none", "triton")`), and
  the file's own `def register_x(...)`: its positional parameters, each with the classes the
  file says it holds (`MoeRunnerBackend(runner_backend_name)`, or a key tuple stored in a
  dict typed `dict[Tuple[A, B], ...]`), for the assembler to tell which flag each position
  is about;
- dispatch dicts whose keys are strings, one entry a line (`"fa3": FlashAttentionBackend,`);
- containment in a named constant: `x in SUPPORTED_BACKENDS` (the constant is resolved to its
  values by the assembler, in this file or through its imports), with this file's constants;
- the type a receiver has, for `.is_x()` calls: `backend: MoeRunnerBackend`,
  `backend = get_moe_runner_backend()`, `backend = MoeRunnerBackend(...)`.

Version-independent like every blob fact; the assembler attributes them per version.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any, NamedTuple

from ingest.sites import (
    CONST_IN_AFTER,
    IN_PLACES_RE,
    VALUE,
    LineIndex,
    _in_comment,
    _Lines,
    _string_items,
    continued,
    finditer_at,
    stored,
    subject_tail,
    unread,
)

REGISTRY_RE = re.compile(rb"register\w*\(\s*([\"'])(" + VALUE + rb")\1")
# A further string argument of a registry call, only while the call goes on with one (`,`
# or `)` after it).
ARG_RE = re.compile(rb"\s*,\s*([\"'])(" + VALUE + rb")\1(?=\s*[,)])")
# A top-level registering function, its positional parameters, and what says a parameter's
# class: a conversion `Enum(param)`, or a key tuple `key = (a, b)` stored as `d[key] = ...` in
# a dict annotated `d: dict[Tuple[A, B], ...]`.
# (found from each `register` (bytes.find) or `ict[` (a literal-led pattern): a pattern led by
# a name or by `^` tries every position; what comes before is checked after)
DEF_NAME_RE = re.compile(rb"register\w*\(")  # matched at each `register`
DEF_LINE_RE = re.compile(rb"def \w*")  # the line up to the name's `register`
PARAM_NAME_RE = re.compile(r"\s*([A-Za-z_]\w*)")
CONVERSION_ARG = rb"\(\s*(%s)\s*\)"  # the parameters' names joined by `|`: led by `(`
CLASS_BEFORE_RE = re.compile(rb"(?<!\w)([A-Z]\w*)$")  # what comes before that `(`
TUPLE_DICT_RE = re.compile(rb"ict\[\s*[Tt]uple\[([\w\s,.]+)\]")
ANNOTATED_RE = re.compile(rb"(\w+)\s*:\s*[Dd]$")  # what comes before a TUPLE_DICT_RE match
TUPLE_STORE = rb"\b%s\[\s*(\w+|\([\w\s,]+\))\s*\]\s*=(?!=)"  # led by the dict's name
TUPLE_ASSIGN = rb"\b%s\s*=\s*\(([\w\s]+(?:,[\w\s]+)+),?\s*\)"  # led by the key's name
MAX_PARAMS_TEXT = 2000  # how far a def's parameters are looked for
NAME_BEFORE_RE = re.compile(r"([A-Za-z_][\w.]*)$")
# A key that starts its line, matched at a line start found from a `":`.
LINE_KEY_RE = re.compile(rb"[ \t]*\{?[ \t]*([\"'])(" + VALUE + rb")\1:[ \t]*[\w(\[{\"'.-]")
# The `":` and `':` of a file in one pass, led by the colon: the engine skips to a single
# literal byte fastest (a bytes.find of each two-byte needle costs 4x, a character class
# first 7x), the quote before it checked by the look-behind.
QUOTE_COLON_RE = re.compile(rb":(?<=[\"']:)")
# ` in NAME` not followed by `[`, `.` or `(`, matched from its `in` (the engine skips to an
# `in` much faster than to a space): the space before and what follows are checked after.
CONST_IN_RE = re.compile(rb"in" + CONST_IN_AFTER)  # (matched where IN_PLACES_RE is)
NOT_AFTER_CONST_RE = re.compile(rb"\s*[\[.(]")
# `NAME = [` / `(` / `{`, checked at the start of the line where ` = [` was found (matched
# from its `=`, the space before checked after).
CONST_LINE_RE = re.compile(rb"[ \t]*([A-Z_][A-Z0-9_]{2,})[ \t]*(?::[^=\n]*)?=[ \t]*([\[\(\{])")
CONST_OPEN_RE = re.compile(rb"= [\[\(\{]")
OPENERS = {ord("["): 0, ord("("): 1, ord("{"): 2}
SPACE = ord(" ")
ASSIGN_BEFORE_RE = re.compile(r"(?:self\.)?([A-Za-z_]\w*)\s*(?::[^=]*)?=\s*(?:\w+\()?\{?\s*$")
UPDATE_RE = re.compile(r"(?:self\.)?([A-Za-z_]\w*)\.update\(\s*\{?")
OUTER_RE = re.compile(r"\{|[\"']\w+[\"']:\s*\{")  # lines between a dict in a dict and its outer one
MAX_ABOVE = 8  # lines looked at above a dict's first entry
REGISTRY_WORDS = {"register", "registry", "factory", "registered", "self", "cls"}
MAX_TYPED = 20  # receivers looked up per file


def scan_choice_shapes(
    data: bytes, choices: list[list[Any]], index: LineIndex | None = None
) -> dict[str, Any]:
    """The shapes of one blob."""
    lines = _Lines(data, index)
    found = _found(data, lines)
    out: dict[str, Any] = {}
    if found.registry:
        out["registry"] = stored(found.registry)
    dispatch = _dispatch_groups(found.keys, data)
    if dispatch:
        out["dispatch"] = [[stored(g.entries), g.line, g.subject, g.lookups] for g in dispatch]
    if found.named:
        out["named_contains"] = stored(found.named)
    if found.consts:
        out["consts"] = dict(found.consts)
    receivers = {tail for _value, _line, tail, how in choices if how == "is_call" and tail}
    names = sorted(receivers)[:MAX_TYPED]
    if names:
        types = _receiver_types(data, names)
        if types:
            out["types"] = types
    if found.defines_registering:
        defs = registry_defs(data)
        if defs:
            out["registry_defs"] = defs
    out["lines"] = {str(k): v for k, v in lines.texts.items()}
    if lines.above:
        out["spans"] = {str(k): v for k, v in lines.above.items()}
    return out


def registry_defs(data: bytes) -> dict[str, list[list[Any]]]:
    """name -> [[parameter, [classes the file says it holds]], ...] for each top-level
    `def register_x(...)` (positional parameters only, in order)."""
    params: dict[str, list[str]] = {}
    at = data.find(b"register")
    while at >= 0:
        start = data.rfind(b"\n", 0, at) + 1
        m = DEF_NAME_RE.match(data, at) if DEF_LINE_RE.fullmatch(data, start, at) else None
        if m is not None and (names := _positional(data, m.end())) is not None:
            params[data[start + 4 : m.end() - 1].decode()] = names
        at = data.find(b"register", at + 1)
    wanted = {p for names in params.values() for p in names}
    if not wanted:
        return {}
    classes: dict[str, set[str]] = {p: set() for p in wanted}
    wanted_re = CONVERSION_ARG % b"|".join(re.escape(p.encode()) for p in sorted(wanted))
    for c in re.finditer(wanted_re, data):
        before = CLASS_BEFORE_RE.search(data, max(0, c.start() - 80), c.start())
        if before is not None:
            classes[c.group(1).decode()].add(before.group(1).decode())
    for param, cls in _key_tuple_classes(data):
        if param in classes:
            classes[param].add(cls)
    return {func: [[p, sorted(classes[p])] for p in names] for func, names in params.items()}


def _positional(data: bytes, start: int) -> list[str] | None:
    """The positional parameters of the def whose `(` ends at `start` (up to a `*`, past a
    `/`); None when its `)` is not found near."""
    depth, end = 0, start
    stop = min(len(data), start + MAX_PARAMS_TEXT)
    while end < stop:
        ch = data[end]
        if ch in b"([{":
            depth += 1
        elif ch in b")]}":
            if depth == 0:
                break
            depth -= 1
        end += 1
    else:
        return None
    text = re.sub(r"#[^\n]*", "", data[start:end].decode("utf-8", "replace"))
    names: list[str] = []
    for part in _top_level_split(text):
        part = part.strip()
        if part.startswith("*"):
            break  # keyword-only or variadic from here
        m = PARAM_NAME_RE.match(part)
        if m is not None and m.group(1) not in ("self", "cls"):
            names.append(m.group(1))
    return names


def _top_level_split(text: str) -> list[str]:
    parts, depth, begin = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[begin:i])
            begin = i + 1
    parts.append(text[begin:])
    return parts


def _key_tuple_classes(data: bytes) -> list[tuple[str, str]]:
    """(name, class) for the names of a key tuple stored in a dict annotated with a tuple
    key type: `key = (a, b)` then `table[key] = f`, with `table: dict[Tuple[A, B], ...]`."""
    typed = {}
    for m in TUPLE_DICT_RE.finditer(data):
        name = ANNOTATED_RE.search(data, max(0, m.start() - 80), m.start())
        if name is not None:
            typed[name.group(1)] = [t.strip().rsplit(b".", 1)[-1] for t in m.group(1).split(b",")]
    if not typed:
        return []
    out = []
    for table, types in typed.items():
        for store in re.finditer(TUPLE_STORE % re.escape(table), data):
            key = store.group(1)
            if not key.startswith(b"("):  # the tuple last assigned to the name before it
                assigned = re.findall(TUPLE_ASSIGN % re.escape(key), data[: store.start()])
                if not assigned:
                    continue
                key = assigned[-1]
            names = [n.strip() for n in key.strip(b"()").split(b",") if n.strip()]
            if len(names) == len(types):
                out += [(n.decode(), t.decode()) for n, t in zip(names, types, strict=True)]
    return out


def _inside(spans: list[tuple[int, int]], offset: int) -> bool:
    k = bisect.bisect_right(spans, (offset, 1 << 62)) - 1
    return k >= 0 and spans[k][0] < offset < spans[k][1]


def registry_subject(func: str) -> str:
    """AttentionBackendRegistry.register -> attention_backend; register_lora_backend ->
    lora_backend; StorageBackendFactory.register_backend -> storage_backend."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", func.replace(".", "_")).lower()
    words = [w for w in spaced.split("_") if w and w not in REGISTRY_WORDS]
    return "_".join(dict.fromkeys(words))


class RegistryArg(NamedTuple):
    """A string passed to a registering call (`register("fa3", ...)`); stored as a list in
    the facts' "registry"."""

    value: str
    line: int
    func: str  # the call: `AttentionBackendRegistry.register`
    position: int  # the argument's


class NamedContains(NamedTuple):
    """`x in NAMED_CONSTANT`; stored as a list in the facts' "named_contains"."""

    const: str
    line: int
    tail: str  # the name tested (ingest.sites.subject_tail)


class DictKey(NamedTuple):
    """A `"key": value` entry that starts its line."""

    line: int
    key: str
    start: int  # offset of its line


class DispatchEntry(NamedTuple):
    key: str
    line: int


class DispatchGroup(NamedTuple):
    """A run of dict entries, one a line; stored as [[[key, line], ...], line, subject,
    lookups] in the facts' "dispatch"."""

    entries: list[DispatchEntry]
    line: int  # the first entry's
    subject: str  # the name the dict is assigned to (_assigned_name)
    lookups: list[str]  # the names the file looks it up with (_lookups)


class _Found(NamedTuple):
    """What a blob holds, found line by line."""

    registry: list[RegistryArg]
    keys: list[DictKey]
    named: list[NamedContains]
    consts: list[tuple[str, list[str]]]  # (name, values), in the order they are taken
    defines_registering: bool  # whether a line defines a registering function (`def register_x(`)


def _found(data: bytes, lines: _Lines) -> _Found:
    """Everything found line by line in `data`, its lines cited in `lines`."""
    registry: list[RegistryArg] = []
    defs: list[int] = []  # where a line `def ...register...(` is
    if b"register" in data:
        # (a call quoted in a docstring registers nothing)
        quoted: list[tuple[int, int]] | None = None  # found at the first match
        for m in _registry_matches(data, defs):
            prefix = lines.prefix(m.start())
            if _in_comment(prefix):
                continue
            if quoted is None:  # (f-strings too, an unclosed one to the end)
                quoted = lines.index.quoted().spans
            if _inside(quoted, m.start()):
                continue
            name = NAME_BEFORE_RE.search(prefix)
            token = data[m.start() : data.index(b"(", m.start())].decode("utf-8", "replace")
            func = (name.group(1) if name else "") + token  # AttentionBackendRegistry.register
            registry.append(RegistryArg(m.group(2).decode(), lines.at(m.start()), func, 0))
            end, pos = m.end(), 0
            while True:  # the string arguments that follow, each with its position
                a = ARG_RE.match(data, end)
                if a is None:
                    break
                pos += 1
                at = a.start(2)
                registry.append(RegistryArg(a.group(2).decode(), lines.at(at), func, pos))
                end = a.end()
    keys = [DictKey(lines.at(offset), key, start) for offset, start, key in _dict_keys(data)]
    named: list[NamedContains] = []
    if b" in " in data:
        for m in finditer_at(CONST_IN_RE, data, lines.index.places(IN_PLACES_RE)):
            at = m.start() - 1  # where ` in` starts
            if at < 0 or data[at] != SPACE:
                continue
            if NOT_AFTER_CONST_RE.match(data, m.end()):
                continue
            if _registers(data, m.end(), m.group(1)):
                continue  # `if name not in NAMES: NAMES.append(name)`: adds any name
            prefix = lines.prefix(at)
            if _in_comment(prefix):
                continue
            subject, before = continued(data, at, prefix)
            if unread(subject):
                continue  # (as ingest.sites' comparisons)
            const = m.group(1).decode()
            named.append(NamedContains(const, lines.cite(at, before), subject_tail(subject)))
    consts: list[tuple[str, list[str]]] = []
    # One literal-led pass for the three openers; the constants are taken opener by opener
    # (a later one of a name wins, in the place of the first).
    opens = [m.start() - 1 for m in CONST_OPEN_RE.finditer(data)]  # where ` = [` starts
    for _opener, pos in sorted(
        [(OPENERS[data[at + 3]], at) for at in opens if data[at] == SPACE and at >= 0]
    ):
        start = data.rfind(b"\n", 0, pos) + 1
        c = CONST_LINE_RE.match(data, start) if pos - start < 60 else None
        if c is not None and c.end() == pos + 4:
            values = _string_items(data, pos + 3)
            if values:
                consts.append((c.group(1).decode(), values))
    return _Found(registry, keys, named, consts, bool(defs))


# The line after a containment test, adding to the container tested: a helper registering
# a name (`add_mla_attention_backend`), no site handling each of the values listed.
ADDS_RE = rb"[ \t]*(?:self\.|cls\.)?%s\.(?:append|add|extend|insert)\("


def _registers(data: bytes, end: int, const: bytes) -> bool:
    """Whether the line after the one holding `end` adds to `const`."""
    start = data.find(b"\n", end) + 1
    return start > 0 and _adds_re(const).match(data[start : start + 200]) is not None


@lru_cache(maxsize=1024)  # (re's own cache of 512 patterns is shared, and thrashed, by all)
def _adds_re(const: bytes) -> re.Pattern[bytes]:
    return re.compile(ADDS_RE % re.escape(const))


def _registry_matches(data: bytes, defs: list[int]) -> Iterator[re.Match[bytes]]:
    """REGISTRY_RE's matches as finditer gives them, from each `register` (bytes.find: the
    engine's own search for the literal is slower); `defs` gets the offset of each one
    that names a function on a `def` line."""
    at = data.find(b"register")
    while at >= 0:
        start = data.rfind(b"\n", 0, at) + 1
        if DEF_LINE_RE.fullmatch(data, start, at):
            defs.append(at)
        m = REGISTRY_RE.match(data, at)
        if m is not None:
            yield m
        at = data.find(b"register", m.end() if m is not None else at + 1)


def _dict_keys(data: bytes) -> list[tuple[int, int, str]]:
    """(offset, offset of its line, key) of each `"key": value` entry that starts its line,
    in file order (a line holds one at most, found at the `":` closing it)."""
    keys: list[tuple[int, int, str]] = []
    for colon in QUOTE_COLON_RE.finditer(data):
        pos = colon.start() - 1  # the closing quote
        start = data.rfind(b"\n", 0, pos) + 1
        m = LINE_KEY_RE.match(data, start)
        if m and m.end(2) == pos:  # the `":` found closes this key
            keys.append((m.start(2), start, m.group(2).decode()))
    return keys


def _dispatch_groups(keys: list[DictKey], data: bytes) -> list[DispatchGroup]:
    """The runs of `"key": value` entries, one a line, of a file's dict keys in file order."""
    if len(keys) < 2:  # (a run has two entries at least; most files have none)
        return []
    runs: list[tuple[list[DispatchEntry], DictKey]] = []  # (entries, the first key)
    last_line, last = -10, 0
    for k in keys:
        if runs and _run_goes_on(data, last, k.start, k.line - last_line):
            runs[-1][0].append(DispatchEntry(k.key, k.line))
        else:
            runs.append(([DispatchEntry(k.key, k.line)], k))
        last_line, last = k.line, k.start
    groups = []
    looked: dict[str, list[str]] = {}  # by name: a file's dicts of one name share them
    for entries, first in runs:
        if len(entries) >= 2:
            name = _assigned_name(data, first.start)
            if name and name not in looked:
                looked[name] = _lookups(data, name)
            lookups = list(looked[name]) if name else []
            groups.append(DispatchGroup(entries, first.line, name, lookups))
    return groups


def _run_goes_on(data: bytes, last: int, at: int, gap: int) -> bool:
    """Whether an entry on the line at `at` goes on the run of the one at `last`: two lines
    between at most, comment lines not counted, and not the first of the next dict (`b = {`
    just above)."""
    if gap == 1:
        return True
    if gap > MAX_ABOVE:
        return False
    between = data[last:at].split(b"\n")[1:-1]
    other = [line for line in between if not line.lstrip().startswith(b"#")]
    return len(other) <= 2 and not _assigned_name(data, at)


# A lookup in a named dict, its key's expression maybe on the next line:
# `table[self.server_args.x]`, `table.get(\n    kv_cache_dtype, default)`.
LOOKUP_RE = re.compile(rb"(?:\[|\.get\()\s*((?:\w+(?:\(\))?\.)*\w+(?:\(\))?)\s*[\],)]")
# `envs.X.get()`, `os.environ["X"]` looked up with: an env var read, not a flag's name.
ENV_LOOKUP_RE = re.compile(rb"(?:\[|\.get\()\s*os\.(?:environ\b|getenv\()")


def _lookups(data: bytes, name: str) -> list[str]:
    """The names (subject_tail) the dict `name` is looked up with in the file, in order,
    once each: what says which flag's value a dict named for something else is keyed by.
    (The name followed by `[` or `.get(` found by a pattern led by it, then the patterns
    at each: one led by a lookbehind has no literal prefix, the engine would try it at
    every offset of the file.)"""
    out: list[str] = []
    key = name.encode()
    bound: dict[str, str] = {}  # _bound_from of each expression (a pass over the file each)
    for at in _looked_up_re(key).finditer(data):
        pos = at.start()
        lead = pos - 5 if data[max(0, pos - 5) : pos] == b"self." else pos
        before = data[lead - 1 : lead] if lead else b" "
        names: tuple[str, ...] = ()
        if not (before.isalnum() or before in b"_."):
            m = LOOKUP_RE.match(data, at.end())  # (the patterns after the name)
            expr = m.group(1).decode() if m is not None else ""
            # `envs.X.get()`, `os.environ["X"]`: an env var read, not a flag's name
            if expr.endswith(".get()") or (m is None and ENV_LOOKUP_RE.match(data, at.end())):
                names = (ENV_LOOKUP,)
            elif expr:
                if expr not in bound:
                    bound[expr] = _bound_from(data, expr)
                names = (subject_tail(expr), bound[expr])
        for found in names:
            if found and found not in out:
                out.append(found)
    return out


BOUND_RE = re.compile(rb" =\s*((?:\w+\.)*(?:get_global_)?server_args(?:\(\))?\.\w+)\b(?!\()")


def _bound_from(data: bytes, name: str) -> str:
    """The flag a local name is first bound to (`requested = server_args.mamba_backend
    or "triton"` -> mamba_backend): what the name looking a dict up holds. (Only server
    args: `config.mamba_ssm_dtype` is the model's, not --mamba-ssm-dtype.)"""
    if not name.isidentifier():
        return ""
    key = name.encode()
    pos = data.find(key + b" =")  # (bytes.find, then the pattern: see _lookups)
    while pos >= 0:
        before = data[pos - 1 : pos] if pos else b" "
        m = BOUND_RE.match(data, pos + len(key))
        if m is not None and not (before.isalnum() or before in b"_."):
            return subject_tail(m.group(1).decode())
        pos = data.find(key + b" =", pos + 1)
    return ""


@lru_cache(maxsize=1024)
def _looked_up_re(key: bytes) -> re.Pattern[bytes]:
    """The name followed by `[` or `.get(`, where both lookup patterns start (such matches
    cannot overlap: the name is a word)."""
    return re.compile(re.escape(key) + rb"(?=\[|\.get\()")


ENV_LOOKUP = "environ"  # the lookup name of an env var read: fits no flag


def _assigned_name(data: bytes, start: int) -> str:
    """The name a dict is assigned to, from the code lines just above its first entry
    (comments and blank lines skipped): `mapping = {` -> "mapping", and an outer dict's for
    a dict in it (`mapping.update(`, `{`, `"visual": {` above)."""
    end = start - 1
    code = 0
    for _ in range(MAX_ABOVE):
        if end <= 0:
            return ""
        begin = data.rfind(b"\n", 0, end) + 1
        prev = data[begin:end].decode("utf-8", "replace").strip()
        end = begin - 1
        if not prev or prev.startswith("#"):
            continue
        found = ASSIGN_BEFORE_RE.search(prev) or UPDATE_RE.fullmatch(prev)
        if found:
            return found.group(1)
        code += 1
        if code > 2 or not OUTER_RE.fullmatch(prev):
            return ""
    return ""


# After the name; both start with blanks then `=` or `:` (where _receiver_type looks).
GETTER = r"\s*=\s*(?:self\.)?get_(\w+)\(\)"
TYPED = r"\s*(?::\s*(?:Optional\[)?|=\s*)([A-Z]\w+)\b(?!\.)"


def _receiver_types(data: bytes, names: list[str]) -> dict[str, str]:
    """name -> "get:<dest>" or "type:<Class>" for receivers of `.is_x()` calls: the first
    match of `name` + GETTER that starts a word, else the first of `name` + TYPED."""
    text = data.decode("utf-8", "replace")
    out: dict[str, str] = {}
    for name in names:
        found = _receiver_type(text, name)
        if found:
            out[name] = found
    return out


def _receiver_type(text: str, name: str) -> str:
    """_receiver_types of one name, from one pass over `text` instead of one per pattern:
    both start where the name stands before `=` or `:`, each such place tried with each
    pattern as its own pass would (after the end of that pattern's last match). A name
    that can overlap itself (`aa`) is searched pattern by pattern: one place of it would
    hide the next."""
    getter, typed, places = _receiver_res(name)
    if places is None:
        for rx, kind in ((getter, "get:"), (typed, "type:")):
            m = next((m for m in rx.finditer(text) if _word_start(text, m.start())), None)
            if m:
                return kind + m.group(1)
        return ""
    getter_end = typed_end = 0
    first_typed: re.Match[str] | None = None
    for place in places.finditer(text):
        at = place.start()
        if at >= getter_end and (m := getter.match(text, at)) is not None:
            getter_end = m.end()
            if _word_start(text, at):
                return "get:" + m.group(1)  # (the getter wins wherever the type is)
        if first_typed is None and at >= typed_end and (m := typed.match(text, at)) is not None:
            typed_end = m.end()
            if _word_start(text, at):
                first_typed = m
    return "" if first_typed is None else "type:" + first_typed.group(1)


@lru_cache(maxsize=1024)  # the same receivers in every version of a file: compiled once
def _receiver_res(
    name: str,
) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str] | None]:
    """(name + GETTER, name + TYPED, where both may start: None for a name that can overlap
    itself). Literal-led patterns (the name first): the engine skips to each occurrence (a
    str.find of the name, then a match at each, costs more: most names are common words)."""
    n = re.escape(name)
    overlaps = any(name[:k] == name[-k:] for k in range(1, len(name)))
    places = None if overlaps else re.compile(n + r"(?=\s*[=:])")
    return re.compile(n + GETTER), re.compile(n + TYPED), places


def _word_start(text: str, pos: int) -> bool:
    return pos == 0 or not (text[pos - 1].isalnum() or text[pos - 1] in "_.")
