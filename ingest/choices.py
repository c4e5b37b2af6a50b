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

Given the blob's pieces (ingest/chunks.py), only the pieces the last version of the path did
not have are scanned, all at once (joined by blank lines, findings sent back to their piece);
each piece keeps its findings with piece-relative lines, and the blob's facts are put
together from them in the order the whole-blob scan gives. What is not local to a piece is
computed over the whole blob: grouping dispatch entries (a run may go on past a blank line),
the name a run is assigned to when its lines are in an earlier piece, and the registering
functions' parameters (when a piece has a `def register_x(` line). A piece that could
hold a match going on past its end (`register_x(` or ` in` last, a lookahead that sees only
blanks, a bracket the piece does not close, a receiver's name last) is marked NONLOCAL, and
blobs with one are scanned whole.
"""

from __future__ import annotations

import bisect
import operator
import re
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from itertools import accumulate
from typing import Any, cast

from ingest.chunks import CUT, TRIPLE_QUOTES, Piece, PieceSource, marker, string_spans
from ingest.sites import (
    CLOSING,
    VALUE,
    LineIndex,
    _in_comment,
    _Lines,
    _string_items,
    continued,
    subject_tail,
    unread,
)

REGISTRY_RE = re.compile(rb"register\w*\(\s*([\"'])(" + VALUE + rb")\1")
# A further string argument of a registry call, only while the call goes on with one (`,`
# or `)` after it), and what a piece's end may leave of one (its match could go on past it).
ARG_RE = re.compile(rb"\s*,\s*([\"'])(" + VALUE + rb")\1(?=\s*[,)])")
ARG_PREFIX_RE = re.compile(rb"\s*(?:,\s*(?:([\"'])" + VALUE + rb"\1\s*)?)?")
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
# A key that starts its line, matched at a line start found from a `":` (bytes.find is fast).
LINE_KEY_RE = re.compile(rb"[ \t]*\{?[ \t]*([\"'])(" + VALUE + rb")\1:[ \t]*[\w(\[{\"'.-]")
# ` in NAME` not followed by `[`, `.` or `(`, matched from its `in` (the engine skips to an
# `in` much faster than to a space): the space before and what follows are checked after
# (what follows may be in the next piece). The second branch finds a piece that ends in
# ` in` (blanks aside), whose match could go on past the blank line that follows.
CONST_IN_RE = re.compile(rb"in(?:\s+(?:self\.|cls\.)?([A-Z_][A-Z0-9_]{2,})\b|\s*\n\n)")
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
STRING_WINDOW = 800  # how far ingest.sites._string_items looks for the closing bracket

# In a piece's results (ingest/chunks.py): this scan's findings, and the receivers' types.
SHAPES = "choice_shapes"
TYPES = "choice_types:"  # + the names looked up
EMPTY: tuple[()] = marker(())  # a piece that holds nothing (most do): one shared marker
NONLOCAL = "nonlocal"  # a piece whose findings may depend on the text past its end
# What REGISTRY_RE could match past a blank line (`\s` takes it): `register_x(` ending a
# piece (blanks aside).
REGISTRY_OPEN_RE = re.compile(rb"register\w*\(\s*\n\n")
# What a piece must start with (blanks aside) to continue a receiver's getter or typed
# pattern that the piece before leaves open: `= `, `: `, `self.`, `get_`, `Optional[`, a type.
TYPE_GOES_ON = ("=", ":", "self.", "get_", *"ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def scan_choice_shapes(
    data: bytes,
    choices: list[list[Any]],
    index: LineIndex | None = None,
    pieces: PieceSource | None = None,
) -> dict[str, Any]:
    """The shapes of one blob. With `pieces`, each piece the last version of the path had
    keeps what it gave then and only new pieces are scanned; without, the whole blob is
    scanned. Both give the same facts."""
    receivers = {tail for _v, _l, tail, how in choices if how == "is_call" and tail}
    names = sorted(receivers)[:MAX_TYPED]
    parts = pieces.get() if pieces is not None else None
    found = _from_pieces(parts) if parts is not None else None
    if found is None:  # no pieces, or one of them is not local: the whole blob
        lines = _Lines(data, index)
        whole = _found(data, lines, None)
        assert whole is not None  # (only pieces can be cut short)
        texts, spans = lines.texts, lines.above
        found = [(0, 0, cast(_Found, whole[0]))]
        out = _assembled(found, data, None, texts, spans)
    else:
        texts, spans = {}, {}
        out = _assembled(found, data, parts, texts, spans)
    if names:
        types = _types_from_pieces(data, parts, names) if parts else None
        if types is None:
            types = _receiver_types(data, names)
        if types:
            out["types"] = types
    if any(f[5] for _i, _s, f in found):
        # over the whole blob: a def's parameters and what says their classes may lie in
        # several pieces
        defs = registry_defs(data)
        if defs:
            out["registry_defs"] = defs
    out["lines"] = {str(k): v for k, v in texts.items()}
    if spans:
        out["spans"] = {str(k): v for k, v in spans.items()}
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


def _quoted(data: bytes) -> list[tuple[int, int]]:
    if TRIPLE_QUOTES[0] in data or TRIPLE_QUOTES[1] in data:
        return string_spans(data)
    return []


def _inside(spans: list[tuple[int, int]], offset: int) -> bool:
    k = bisect.bisect_right(spans, (offset, 1 << 62)) - 1
    return k >= 0 and spans[k][0] < offset < spans[k][1]


def registry_subject(func: str) -> str:
    """AttentionBackendRegistry.register -> attention_backend; register_lora_backend ->
    lora_backend; StorageBackendFactory.register_backend -> storage_backend."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", func.replace(".", "_")).lower()
    words = [w for w in spaced.split("_") if w and w not in REGISTRY_WORDS]
    return "_".join(dict.fromkeys(words))


# What one piece holds, line numbers relative to its first line: registry [(value, line,
# func, argument position)], dict keys [(line, key, offset of the key's line in the piece)],
# named_contains [(const, line, tail)], constants [(opener, name, values)] in the order they
# are taken, the texts of the lines cited, whether a registering function is defined, and
# the lines above a cited line that its text joins (sites._Lines.above).
_Found = tuple[
    Sequence[tuple[str, int, str, int]],
    Sequence[tuple[int, str, int]],
    Sequence[tuple[str, int, str]],
    Sequence[tuple[int, str, list[str]]],
    Mapping[int, str],
    Sequence[int],  # [1] when a line defines a registering function (`def register_x(`)
    Mapping[int, int],
]


def _from_pieces(parts: list[Piece]) -> list[tuple[int, int, _Found]] | None:
    """(piece number, line shift, findings) of each piece that holds something, after
    scanning the pieces without results; None when a piece is not local."""
    held, new = _held(parts, SHAPES)
    if new:
        texts = [parts[i][1] for i in new]
        each: list[Any] | None = _found(CUT.join(texts) + CUT, None, texts)
        if each is None:  # a match may cross a cut: each piece alone, to find which
            each = [_alone(text) for text in texts]
        for i, r in zip(new, each, strict=True):
            parts[i][2][SHAPES] = r
    found = []
    local = True
    for i in held:
        line, _text, results = parts[i]
        r = results[SHAPES]
        if r is EMPTY:
            continue
        if r is NONLOCAL:
            local = False  # (the other pieces' results are kept for the next version)
        else:
            found.append((i, line - 1, r))
    return found if local else None


def _held(parts: list[Piece], key: str) -> tuple[list[int], list[int]]:
    """The numbers of the pieces whose results under `key` are not EMPTY, and of those
    without results yet (a text repeated in the blob shares one results dict: it is
    scanned again, and gets the same results). One pass: most pieces hold nothing."""
    held = [i for i, piece in enumerate(parts) if piece[2].get(key) is not EMPTY]
    return held, [i for i in held if key not in parts[i][2]]


def _alone(text: bytes) -> _Found | tuple[()] | str:
    each = _found(text + CUT, None, [text])
    return NONLOCAL if each is None else each[0]


def _found(
    data: bytes, lines: _Lines | None, texts: list[bytes] | None
) -> list[_Found | tuple[()]] | None:
    """Everything found line by line in `data`, split by piece when `data` is `texts` joined
    (each followed by CUT); None when a match may reach past a piece's end. Without `texts`,
    `data` is the whole blob and `lines` its lines: one result, never EMPTY."""
    if lines is None:
        lines = _Lines(data)
    cut = _Cuts(texts) if texts is not None else None
    registry = []
    defs: list[int] = []  # where a line `def ...register...(` is
    if b"register" in data:
        # (a match that crosses a cut has `register_x(` and blanks up to it: found here)
        if cut is not None and any(
            cut.crossed(data, m.start(), m.end()) for m in REGISTRY_OPEN_RE.finditer(data)
        ):
            return None
        # (a call quoted in a docstring registers nothing; pieces never cut such a string)
        quoted: list[tuple[int, int]] | None = None  # found at the first match
        for m in _registry_matches(data, defs):
            prefix = lines.prefix(m.start())
            if _in_comment(prefix):
                continue
            if quoted is None:
                quoted = _quoted(data)
            if _inside(quoted, m.start()):
                continue
            name = NAME_BEFORE_RE.search(prefix)
            token = data[m.start() : data.index(b"(", m.start())].decode("utf-8", "replace")
            func = (name.group(1) if name else "") + token  # AttentionBackendRegistry.register
            registry.append((m.start(), lines.at(m.start()), m.group(2).decode(), func, 0))
            end, pos = m.end(), 0
            while True:  # the string arguments that follow, each with its position
                if cut is not None and ARG_PREFIX_RE.fullmatch(data, end, cut.end(m.start())):
                    return None  # the piece ends where the call could go on with one
                a = ARG_RE.match(data, end)
                if a is None:
                    break
                pos += 1
                at = a.start(2)
                registry.append((at, lines.at(at), a.group(2).decode(), func, pos))
                end = a.end()
    keys = [(offset, lines.at(offset), key, start) for offset, start, key in _dict_keys(data)]
    named = []
    # Pieces hold matches without the whole blob's cheap test (b" in ") passing in them:
    # that test is made over the whole blob when the pieces are put together.
    if cut is not None or b" in " in data:
        for m in CONST_IN_RE.finditer(data):
            at = m.start() - 1  # where ` in` starts
            if at < 0 or data[at] != SPACE:
                continue
            if cut is not None and cut.crossed(data, at, m.end(), lookahead=True):
                return None  # (a piece's ` in` last, or a match it cannot decide alone)
            if m.group(1) is None or NOT_AFTER_CONST_RE.match(data, m.end()):
                continue
            if _registers(data, m.end(), m.group(1)):
                continue  # `if name not in NAMES: NAMES.append(name)`: adds any name
            prefix = lines.prefix(at)
            if _in_comment(prefix):
                continue
            subject, before = continued(data, at, prefix)
            if unread(subject):
                continue  # (as ingest.sites' comparisons)
            named.append((at, lines.cite(at, before), m.group(1).decode(), subject_tail(subject)))
    consts = []
    # One literal-led pass for the three openers; the constants are taken opener by opener
    # (a later one of a name wins, in the place of the first).
    opens = [m.start() - 1 for m in CONST_OPEN_RE.finditer(data)]  # where ` = [` starts
    for opener, pos in sorted(
        [(OPENERS[data[at + 3]], at) for at in opens if data[at] == SPACE and at >= 0]
    ):
        start = data.rfind(b"\n", 0, pos) + 1
        c = CONST_LINE_RE.match(data, start) if pos - start < 60 else None
        if c is not None and c.end() == pos + 4:
            if cut is not None:
                end = cut.end(pos)
                close = bytes([CLOSING[data[pos + 3]]])
                if pos + 3 + STRING_WINDOW > end and data.find(close, pos + 3, end) < 0:
                    return None  # the bracket may close in the next piece
            values = _string_items(data, pos + 3)
            if values:
                consts.append((pos, opener, c.group(1).decode(), values))
    if cut is None:
        return [
            (
                [(v, no, func, pos) for _o, no, v, func, pos in registry],
                [(no, key, start) for _o, no, key, start in keys],
                [(c, no, tail) for _o, no, c, tail in named],
                [(opener, name, values) for _o, opener, name, values in consts],
                lines.texts,
                [1] if defs else EMPTY,
                lines.above,
            )
        ]
    return cut.split(lines, registry, keys, named, consts, defs)


# The line after a containment test, adding to the container tested: a helper registering
# a name (`add_mla_attention_backend`), no site handling each of the values listed.
ADDS_RE = rb"[ \t]*(?:self\.|cls\.)?%s\.(?:append|add|extend|insert)\("


def _registers(data: bytes, end: int, const: bytes) -> bool:
    """Whether the line after the one holding `end` adds to `const` (the line after a
    piece's last is the blank CUT, as in the blob)."""
    start = data.find(b"\n", end) + 1
    return start > 0 and re.match(ADDS_RE % re.escape(const), data[start : start + 200]) is not None


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


class _Cuts:
    """Where each piece lies in the text of pieces joined by CUT (each followed by one)."""

    def __init__(self, texts: list[bytes]) -> None:
        lengths = list(map(len, texts))  # (map and accumulate: no Python loop a piece)
        self.starts = list(accumulate(map(len(CUT).__add__, lengths[:-1]), initial=0))
        self.ends = list(map(operator.add, self.starts, lengths))

    def piece(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset) - 1

    def end(self, offset: int) -> int:
        return self.ends[self.piece(offset)]

    def crossed(self, data: bytes, start: int, end: int, lookahead: bool = False) -> bool:
        """Whether a match runs past its piece's end, or (`lookahead`) is followed by
        nothing but blanks up to it, so that its lookahead saw the next piece."""
        stop = self.end(start)
        return end > stop or (lookahead and (end == stop or data[end:stop].isspace()))

    def split(
        self,
        lines: _Lines,
        registry: list[tuple[int, int, str, str, int]],
        keys: list[tuple[int, int, str, int]],
        named: list[tuple[int, int, str, str]],
        consts: list[tuple[int, int, str, list[str]]],
        defs: list[int],
    ) -> list[_Found | tuple[()]]:
        """Each piece's findings, with line numbers (and key offsets) relative to it."""
        each: list[Any] = [EMPTY] * len(self.starts)
        first: dict[int, int] = {}

        def home(offset: int, no: int) -> tuple[Any, int]:
            k = self.piece(offset)
            if each[k] is EMPTY:
                each[k] = ([], [], [], [], {}, [], {})
                first[k] = lines.number(self.starts[k]) - 1
            rel = no - first[k]
            each[k][4][rel] = lines.texts[no]
            if no in lines.above:  # (a join stops at a blank line: inside the piece)
                each[k][6][rel] = lines.above[no]
            return each[k], rel

        for offset, no, value, func, pos in registry:
            f, rel = home(offset, no)
            f[0].append((value, rel, func, pos))
        for offset, no, key, start in keys:
            f, rel = home(offset, no)
            f[1].append((rel, key, start - self.starts[self.piece(offset)]))
        for offset, no, const, tail in named:
            f, rel = home(offset, no)
            f[2].append((const, rel, tail))
        for pos, opener, name, values in consts:
            k = self.piece(pos)
            if each[k] is EMPTY:
                each[k] = ([], [], [], [], {}, [], {})
            each[k][3].append((opener, name, values))
        for offset in defs:
            k = self.piece(offset)
            if each[k] is EMPTY:
                each[k] = ([], [], [], [], {}, [], {})
            each[k][5][:] = [1]
        # (kept in the memo: empty sections as the shared EMPTY)
        return [f if f is EMPTY else cast(_Found, tuple(s or EMPTY for s in f)) for f in each]


def _assembled(
    found: list[tuple[int, int, _Found]],
    data: bytes,
    parts: list[Piece] | None,
    texts: dict[int, str],
    spans: dict[int, int],
) -> dict[str, Any]:
    """The blob's facts from its pieces' findings (lines shifted by each piece's), in the
    whole-blob scan's order: section by section, each in file order. `texts` gets the cited
    lines' texts in citing order and `spans` their lines above, unless it has them already
    (the whole-blob scan)."""
    out: dict[str, Any] = {}
    cite = not texts

    def cited(no: int, shift: int, f: _Found) -> int:
        if cite and no + shift not in texts:
            texts[no + shift] = f[4][no]
            if no in f[6]:
                spans[no + shift] = f[6][no]
        return no + shift

    registry = [
        [v, cited(no, shift, f), func, pos] for _i, shift, f in found for v, no, func, pos in f[0]
    ]
    if registry:
        out["registry"] = registry
    keys = [(cited(no, shift, f), key, i, at) for i, shift, f in found for no, key, at in f[1]]
    dispatch = _dispatch_groups(keys, data, parts)
    if dispatch:
        out["dispatch"] = dispatch
    if any(f[2] for _i, _s, f in found) and b" in " in data:
        out["named_contains"] = [
            [c, cited(no, shift, f), tail] for _i, shift, f in found for c, no, tail in f[2]
        ]
    # Opener by opener, each in file order (a stable sort keeps each piece's order).
    taken = sorted((c for _i, _s, f in found for c in f[3]), key=lambda c: c[0])
    if taken:
        out["consts"] = {name: list(values) for _o, name, values in taken}
    return out


def _dict_keys(data: bytes) -> list[tuple[int, int, str]]:
    """(offset, offset of its line, key) of each `"key": value` entry that starts its line,
    in file order."""
    keys: list[tuple[int, int, str]] = []
    for quote in (b'":', b"':"):
        pos = data.find(quote)
        while pos >= 0:
            start = data.rfind(b"\n", 0, pos) + 1
            m = LINE_KEY_RE.match(data, start)
            if m and m.end(2) == pos:  # the `":` found closes this key
                keys.append((m.start(2), start, m.group(2).decode()))
            pos = data.find(quote, pos + 2)
    keys.sort()
    return keys


def _dispatch_groups(
    keys: list[tuple[int, str, int, int]], data: bytes, parts: list[Piece] | None
) -> list[list[Any]]:
    """[[[key, line], ...], first line, subject, indexes]: runs of `"key": value` entries,
    one a line, from (line, key, piece number, offset of its line in the piece) in file order
    (without pieces, the offset is in `data`); `indexes`, the names the file looks the
    subject up with (_lookups)."""
    if len(keys) < 2:  # (a run has two entries at least; most files have none)
        return []
    bases = (
        list(accumulate((len(t) + len(CUT) for _l, t, _r in parts), initial=0)) if parts else [0]
    )
    groups: list[list[Any]] = []
    last_line, last = -10, 0
    for no, key, i, start in keys:
        at = bases[i] + start  # in `data`, the pieces joined by CUT
        if groups and _run_goes_on(data, last, at, no - last_line):
            groups[-1][0].append([key, no])
        else:
            groups.append([[[key, no]], no, at])
        last_line, last = no, at
    kept = [g for g in groups if len(g[0]) >= 2]
    for g in kept:
        g[2] = name = _assigned_name(data, g[2])
        g.append(_lookups(data, name) if name else [])
    return kept


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
LOOKUP_RE = rb"(?:\[|\.get\()\s*((?:\w+(?:\(\))?\.)*\w+(?:\(\))?)\s*[\],)]"


def _lookups(data: bytes, name: str) -> list[str]:
    """The names (subject_tail) the dict `name` is looked up with in the file, in order,
    once each: what says which flag's value a dict named for something else is keyed by.
    (bytes.find for the name, then the pattern at each hit: a pattern led by a lookbehind
    has no literal prefix, and the engine tried it at every offset of the file.)"""
    out: list[str] = []
    key = name.encode()
    if key + b"[" not in data and key + b".get(" not in data:
        return out
    lookup, lookup_env = _lookup_re(key), _lookup_env_re(key)
    pos = data.find(key)
    while pos >= 0:
        lead = pos - 5 if data[max(0, pos - 5) : pos] == b"self." else pos
        before = data[lead - 1 : lead] if lead else b" "
        names: tuple[str, ...] = ()
        if not (before.isalnum() or before in b"_."):
            m = lookup.match(data, pos)
            expr = m.group(1).decode() if m is not None else ""
            # `envs.X.get()`, `os.environ["X"]`: an env var read, not a flag's name
            if expr.endswith(".get()") or (m is None and lookup_env.match(data, pos)):
                names = (ENV_LOOKUP,)
            elif expr:
                names = (subject_tail(expr), _bound_from(data, expr))
        for found in names:
            if found and found not in out:
                out.append(found)
        pos = data.find(key, pos + 1)
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
def _lookup_re(key: bytes) -> re.Pattern[bytes]:
    return re.compile(re.escape(key) + LOOKUP_RE)


ENV_LOOKUP = "environ"  # the lookup name of an env var read: fits no flag


@lru_cache(maxsize=1024)
def _lookup_env_re(key: bytes) -> re.Pattern[bytes]:
    return re.compile(re.escape(key) + rb"(?:\[|\.get\()\s*os\.(?:environ\b|getenv\()")


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


def _types_from_pieces(data: bytes, parts: list[Piece], names: list[str]) -> dict[str, str] | None:
    """_receiver_types from the pieces: each name's first getter in file order, else its
    first typed one. None when a piece leaves a pattern open and the next one may go on."""
    key = TYPES + ",".join(names)
    held, new = _held(parts, key)
    if new:
        texts = [parts[i][1].decode("utf-8", "replace") for i in new]
        each: list[Any] | None = _types_found(texts, names)
        if each is None:  # a match crossed from one new piece to the next: each alone
            each = [_types_alone(text, names) for text in texts]
        for i, r in zip(new, each, strict=True):
            parts[i][2][key] = r
    found = []
    for i in held:
        r = parts[i][2][key]
        if r is EMPTY:
            continue
        hits, open_end = r
        if open_end and i + 1 < len(parts) and _goes_on(parts[i + 1][1]):
            return None
        if hits:
            found.append(hits)
    out: dict[str, str] = {}
    for n, name in enumerate(names):
        for k, kind in enumerate(("get:", "type:")):
            hit = next((r[n][k] for r in found if r[n] and r[n][k]), None)
            if hit:
                out[name] = kind + hit
                break
    return out


def _types_alone(text: str, names: list[str]) -> Any:
    each = _types_found([text], names)
    assert each is not None  # (no match ends in the blanks that follow the last text)
    return each[0]


def _goes_on(text: bytes) -> bool:
    return text.decode("utf-8", "replace").lstrip().startswith(TYPE_GOES_ON)


def _types_found(texts: list[str], names: list[str]) -> list[Any] | None:
    """For each text, EMPTY or (hits, open end): hits EMPTY or, for each name, EMPTY or
    [getter's dest or "", type or ""] first in the text; open end when a name, maybe `:`
    or `=`, and only blanks end the text. One pass a name over the texts joined; None when
    a match crosses from one text to the next."""
    joined = "\n\n".join(texts) + "\n\n"
    starts = list(accumulate(map((2).__add__, map(len, texts[:-1])), initial=0))
    hits: list[Any] = [EMPTY] * len(texts)
    open_end = [False] * len(texts)
    for n, name in enumerate(names):
        # Both patterns start where the candidate pattern matches (the name before `:`,
        # `=` or a blank line), which says what each would match there: taking them
        # candidate by candidate, from where the last match of each ended, is finditer's.
        resume = [0, 0]
        for at, c in _candidates(joined, name):
            k = bisect.bisect_right(starts, at) - 1
            end = starts[k] + len(texts[k])
            if c.group(1) is not None and c.end(1) > end:
                open_end[k] = True
            for g in (0, 1):
                if c.group(2 + 2 * g) is None or at < resume[g]:
                    continue
                if c.end(2 + 2 * g) > end:
                    return None
                resume[g] = c.end(2 + 2 * g)
                if not _word_start(joined, at):
                    continue
                if hits[k] is EMPTY:
                    hits[k] = [EMPTY] * len(names)
                if hits[k][n] is EMPTY:
                    hits[k][n] = ["", ""]
                if not hits[k][n][g]:
                    hits[k][n][g] = c.group(3 + 2 * g)
    return [(h, o) if h is not EMPTY or o else EMPTY for h, o in zip(hits, open_end, strict=True)]


GETTER = r"\s*=\s*(?:self\.)?get_(\w+)\(\)"  # after the name
TYPED = r"\s*(?::\s*(?:Optional\[)?|=\s*)([A-Z]\w+)\b(?!\.)"
OPEN_TAIL = r"\s*[:=]?\s*\n\n"  # what either could continue past a blank line


# Where a receiver's patterns can start, just after its name (a `:`, `=` or blank line),
# with what each would match there in lookaheads: (open tail)(getter (dest))(typed (type)).
# One pattern for every name (compiling three a name cost more than the scan).
AFTER_NAME_RE = re.compile(rf"(?=\s*[:=]|\s*\n\n)(?=({OPEN_TAIL})?)(?=({GETTER})?)(?=({TYPED})?)")


def _candidates(text: str, name: str) -> Iterator[tuple[int, re.Match[str]]]:
    """Each occurrence of `name` followed by a candidate, as finditer would give them for
    the name then AFTER_NAME_RE."""
    at = text.find(name)
    while at >= 0:
        c = AFTER_NAME_RE.match(text, at + len(name))
        if c is None:
            at = text.find(name, at + 1)
        else:
            yield at, c
            at = text.find(name, at + len(name))


def _receiver_types(data: bytes, names: list[str]) -> dict[str, str]:
    """name -> "get:<dest>" or "type:<Class>" for receivers of `.is_x()` calls."""
    text = data.decode("utf-8", "replace")
    out: dict[str, str] = {}
    for name in names:
        # Literal-led patterns (the name first): the engine skips to each occurrence.
        n = re.escape(name)
        getter = re.compile(n + GETTER)
        typed = re.compile(n + TYPED)
        for rx, kind in ((getter, "get:"), (typed, "type:")):
            m = next((m for m in rx.finditer(text) if _word_start(text, m.start())), None)
            if m:
                out[name] = kind + m.group(1)
                break
    return out


def _word_start(text: str, pos: int) -> bool:
    return pos == 0 or not (text[pos - 1].isalnum() or text[pos - 1] in "_.")
