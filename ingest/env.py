"""Environment variables: where the code of every file reads and writes them.

Reads and writes are found by literal-led scans like ingest/sites.py (this runs over every
Python file of every version): `os.environ.get("X", d)`, `os.getenv`, `os.environ["X"]`
(a write when assigned or deleted), `"X" in os.environ`, `os.environ.setdefault/pop`,
helpers whose name says env (`get_bool_env_var("X")`, `get_int_env_var`, `_get_env`),
`envs.X.get()`/`.value`/`.is_set()` (reads) and `.set()`/`.override()`/`.clear()` (writes),
and any other `"SGLANG_X"`/`"SGL_X"` string (`_lazy_bool("SGLANG_X", False)`; a dict key,
`env={"SGLANG_X": "1"}`, is a write). A name is counted once per call, at the call's first
line, however the call is split over lines; docstrings are skipped.

Each site keeps the flag dests its statement and enclosing `if`s read (`self.x` in
server_args.py, `server_args.x` anywhere), so the assembler can say which flags' handling
reads or writes the variable (`_handle_environment_variables`, `--enable-nccl-nvls` ->
`NCCL_NVLS_ENABLE`). Conditions come from indentation, not a parse: a full `ast` pass over
every file would cost several times the scan.

environ.py's own declarations are read by ingest/environ_decls.py.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Iterator
from typing import Any, NamedTuple

from ingest.sites import LineIndex, finditer_at, line_state, stored
from kb.pyast import NOT_LITERAL, literal

_Q = rb"(?P<q>[\"'])(?P<n>[A-Za-z_][A-Za-z0-9_]*)(?P=q)"
# Every pattern starts with a literal, so the regex engine skips ahead to it (a leading
# \b or character class would make it try every position: 10x slower over SGLang).
ENVIRON_RE = re.compile(rb"environ(\.get\(|\[|\.setdefault\(|\.pop\()\s*" + _Q)
ENVIRON_HOW = {b".get(": "environ.get", b"[": "environ[]", b".setdefault(": "environ.setdefault",
               b".pop(": "environ.pop"}  # fmt: skip
GETENV_RE = re.compile(rb"getenv\(\s*" + _Q)
# get_bool_env_var("X"), _get_env("X"), envFlag("X"): "nv" then the rest of the name.
# Helpers name the environment with "env_" (get_bool_env_var) or end in "_env" (_get_env).
HELPER_RES = [
    (b"env_", re.compile(rb"env_(\w*)\(\s*" + _Q)),
    (b"_env(", re.compile(rb"_env()\(\s*" + _Q)),
]
ENVS_RE = re.compile(rb"envs\.([A-Z][A-Z0-9_]*)\b(?:\.([a-z_]+))?")
# Literal-led: the regex engine skips to "SGL" / " in ", then the quotes are checked.
LITERAL_RE = re.compile(rb"SGL(?:ANG)?_[A-Z0-9][A-Z0-9_]*")
IN_ENVIRON = (b" in os.environ", b" in environ")
# Each pattern and needle above holds "env" (environ, getenv, env_, _env(, envs.): one pass
# finds every "env" of a file, led by its rarest byte (the engine skips to a single literal
# byte fastest; a test of each lead `in` the file cost a pass each), and each is then matched
# only where its literal stands around one (`_led`).
ENV_WORD_RE = re.compile(rb"v(?<=env)")
QUOTED_BEFORE = re.compile(r"([\"'])([A-Za-z_][A-Za-z0-9_]*)\1\s*(?:not\s*)?$")
DEFAULT_RE = re.compile(
    r"\s*,\s*(?:default\s*=\s*)?(\"[^\"\n]{0,200}\"|'[^'\n]{0,200}'|-?[0-9][0-9_.eE+-]*|True|False|None)\s*[,)]"
)
_LIT = r"(\"[^\"\n]{0,200}\"|'[^'\n]{0,200}'|-?[0-9][0-9_.eE+-]*|True|False|None)"
# A default that reads another variable: `os.environ.get("A", os.environ.get("B", "x"))`,
# `get_int_env_var("A", get_int_env_var("B", 3))`, `os.getenv("A", envs.B.get())`; or that
# is another variable's declared default (`envs.B.default`: B's default, not its value).
FALLBACK_RE = re.compile(
    r"\s*,\s*(?:default\s*=\s*)?(?:os\.)?(?P<call>environ\.get|getenv|\w*env\w*)\(\s*"
    r"(?P<q>[\"'])(?P<n>[A-Za-z_][A-Za-z0-9_]*)(?P=q)\s*(?:,\s*(?:default\s*=\s*)?" + _LIT + r")?"
    r"\s*\)\s*[,)]"
)
ENVS_FALLBACK_RE = re.compile(
    r"\s*,\s*(?:default\s*=\s*)?envs\.(?P<n>[A-Z][A-Z0-9_]*)\.(?P<how>get\(\)|value|default)"
    r"\s*[,)]"
)
WRITE_AFTER = re.compile(rb"\s*\]?\s*=(?!=)")
# `{"SGLANG_X": "1"}`, `env={..}`, `os.environ.update({..})`: a name as a dict key is a value
# given (to a child process, to os.environ), not a read.
DICT_KEY_AFTER = re.compile(rb"\s*:")
FLAG_READ_RE = re.compile(r"\bserver_args\.([a-z_][a-z0-9_]*)")
SELF_READ_RE = re.compile(r"\bself\.([a-z_][a-z0-9_]*)")
ENVS_WRITES = {"set", "override", "clear"}
# Helpers with a default of their own (sglang.srt.utils): get_bool_env_var(name,
# default="false"), get_int_env_var(name, default=0).
HELPER_DEFAULTS = {"get_bool_env_var": "false", "get_int_env_var": 0}
MAX_LINE = 240


class EnvSite(NamedTuple):
    """A read, write or check of an environment variable; stored as a list in the facts'
    "env" (see ingest.sites.stored)."""

    name: str
    line: int
    end_line: int  # the statement's last line
    access: str  # "read", "write" or "check"
    how: str  # "environ.get", "getenv", the helper's name, "envs.get", "literal", ...
    default: Any  # a literal, a fallback to another variable (fallback_after) or None
    cast: str | None  # "int", "float", "bool": what the read converts to
    function: str  # the enclosing function, when the site is tied to flags
    dests: list[str]  # the flag dests its statement and enclosing `if`s read


class _Found(NamedTuple):
    """A site as found, before its statement and context are read."""

    name: str
    line: int
    start: int  # offset of the line
    access: str
    how: str
    default: Any
    cast: str | None


def env_name_ok(name: str) -> bool:
    return len(name) > 1 and name[0].isalpha() or name.startswith("_") and len(name) > 2


def _cast_of(prefix: str, helper: str = "") -> str | None:
    """The type a read converts to: `int(os.environ.get(..))`, `get_bool_env_var(..)`."""
    words = {w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", helper)}
    for t in ("bool", "int", "float"):
        if t in words:  # a word of the name: not the "int" of `_print_deprecated_env`
            return t
    tail = prefix.rstrip().removesuffix("os.")
    for t in ("int", "float", "bool"):
        if re.search(rf"\b{t}\($", tail):
            return t
    return None


class _Text:
    """Line access over one file by byte offsets: only the lines a site needs are decoded
    (decoding and splitting every file would cost more than the scan itself)."""

    def __init__(self, data: bytes, index: LineIndex | None = None) -> None:
        self.data = data
        self.index = index or LineIndex(data)
        self.number = self.index.number

    def start(self, offset: int) -> int:
        """Offset of the start of the line holding `offset`."""
        return self.data.rfind(b"\n", 0, offset) + 1

    def line(self, start: int) -> str:
        end = self.data.find(b"\n", start)
        return self.data[start : end if end >= 0 else len(self.data)].decode("utf-8", "replace")

    def prefix(self, offset: int) -> str:
        return self.data[self.start(offset) : offset].decode("utf-8", "replace")

    def statement(self, start: int) -> list[str]:
        """The lines of the statement starting at `start` (brackets balanced, max 12)."""
        first = self.line(start)
        out = [first]
        if not any(c in first for c in "([{"):
            return out
        depth, pos, text = 0, start, first
        for _ in range(12):
            code = re.sub(r"#.*", "", _strip_strings(text))
            depth += sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}")
            nxt = self.data.find(b"\n", pos)
            if depth <= 0 or nxt < 0:
                break
            pos = nxt + 1
            text = self.line(pos)
            out.append(text)
        return out

    def context(self, start: int) -> tuple[str, list[str]]:
        """(enclosing function, headers of the enclosing if/elif/while blocks, innermost first).

        Walks up by indentation; after an `else`/`elif` the `if` chain above it at the same
        indentation is collected too, since the branch depends on those conditions."""
        line = self.line(start)
        indent = len(line) - len(line.lstrip())
        headers: list[str] = []
        sibling_indent = -1
        pos = start
        while pos > 0 and indent > 0:  # nothing encloses a line at column 0
            limit = indent if sibling_indent < 0 else sibling_indent + 1
            pos = self._shallower_before(pos, limit)
            if pos < 0:
                break
            text = self.line(pos)
            stripped = text.strip()
            if stripped.startswith(("#", ")", "]", "}")):
                continue
            ind = len(text) - len(text.lstrip())
            if ind == sibling_indent and stripped.startswith(("if ", "elif ", "if(")):
                headers.append(self._header(pos))
                if stripped.startswith(("if ", "if(")):
                    sibling_indent = -1
                continue
            indent = ind
            sibling_indent = -1
            if stripped.startswith(("def ", "async def ")):
                return re.split(r"[\s(]", stripped.removeprefix("async ").split()[1])[0], headers
            if stripped.startswith("class "):
                break
            if stripped.startswith(("if ", "elif ", "while ", "if(")):
                headers.append(self._header(pos))
                if stripped.startswith("elif "):
                    sibling_indent = ind  # the `if`/`elif`s above at this indent matter
            elif stripped.startswith("else"):
                sibling_indent = ind
        return "", headers

    def _shallower_before(self, pos: int, limit: int) -> int:
        """Start of the last non-blank line before `pos` indented less than `limit`, or -1.

        A regex over a growing window behind `pos` (the lines in between are nested deeper
        and never looked at one by one)."""
        # Led by the literal newline, so the engine skips from line to line (a leading `^|`
        # would make it try every offset); the file's first line is checked on its own.
        rx = _shallow(limit)
        end = pos - 1 if pos > 0 else 0
        window = 512
        while True:
            lo = max(0, pos - window)
            matches = list(rx.finditer(self.data, lo, end))
            if matches:
                return matches[-1].start() + 1
            if lo == 0:
                return 0 if rx.match(b"\n" + self.data[:end], 0) else -1
            window *= 4

    def _header(self, start: int) -> str:
        return " ".join(t.strip() for t in self.statement(start))[:600]


_SHALLOW: dict[int, re.Pattern[bytes]] = {}


def _shallow(limit: int) -> re.Pattern[bytes]:
    rx = _SHALLOW.get(limit)
    if rx is None:
        rx = _SHALLOW[limit] = re.compile(rb"\n {0,%d}(?=[^ \n])" % (limit - 1))
    return rx


def _opening(spans: list[tuple[int, int]], offset: int) -> int:
    """Where the triple-quoted string holding `offset` opens, or -1."""
    i = bisect.bisect_right(spans, (offset, 1 << 62)) - 1
    return spans[i][0] if i >= 0 and spans[i][0] <= offset < spans[i][1] else -1


def _strip_strings(text: str) -> str:
    return re.sub(r"\"[^\"]*\"|'[^']*'", '""', text)


def scan_env(
    data: bytes, flags_file: bool = False, index: LineIndex | None = None
) -> tuple[list[list[Any]], dict[str, str]]:
    """The sites (EnvSite, stored as lists) and the texts of their lines. `flags_file`:
    `self.x` reads are flag reads (server_args.py)."""
    envs = [m.start() - 2 for m in ENV_WORD_RE.finditer(data)]
    if not envs and LITERAL_RE.search(data) is None:  # (no site to find)
        return [], {}
    return _scan_blob(data, flags_file, _Text(data, index), envs)


def _led(
    rx: re.Pattern[bytes], data: bytes, envs: list[int], lead: bytes
) -> Iterator[re.Match[bytes]]:
    """rx.finditer(data), `rx` led by the literal `lead` that holds "env": matched where the
    lead stands around each "env" (at the offsets `envs`)."""
    shift = lead.index(b"env")
    starts = (at - shift for at in envs if at >= shift)
    return finditer_at(rx, data, (at for at in starts if data.startswith(lead, at)))


def _find(data: bytes, text: _Text, envs: list[int]) -> list[_Found]:
    """The sites of `data`, by line then name (`envs`: the offset of each "env" in it)."""
    found: dict[tuple[str, int], _Found] = {}
    # Offsets of the quoted names the call patterns took: the literal pass skips them, or a
    # call split over lines (`get_bool_env_var(\n "X"`) would count once more on the name's.
    taken: set[int] = set()
    strings: list[tuple[int, int]] | None = None  # triple-quoted spans, when first needed

    def add(name: str, offset: int, access: str, how: str, default: Any, cast: str | None) -> None:
        nonlocal strings
        if not env_name_ok(name):
            return
        no = text.number(offset)
        if "#" in text.prefix(offset):
            return  # a mention in a comment
        if strings is None:
            strings = text.index.docstrings()
        opening = _opening(strings, offset)
        # A docstring ("Usage: X = EnvBool(..)") reads nothing, nor does a quoted name in other
        # triple-quoted text; a call there is code run elsewhere (C source given to a compiler:
        # `getenv("SGLANG_X")`) and stays a read.
        if opening >= 0 and (
            how in ("literal", "dict key") or not text.prefix(opening).strip(" \trRuUbB")
        ):
            return
        key = (name, no)
        if key in found:
            if access == "write":
                found[key] = found[key]._replace(access="write")
            return
        found[key] = _Found(name, no, text.start(offset), access, how, default, cast)

    for m in _led(ENVIRON_RE, data, envs, b"environ"):
        how = ENVIRON_HOW[m.group(1)]
        name = m.group("n").decode()
        access = "read"
        if how in ("environ.setdefault", "environ.pop"):
            access = "write"
        elif how == "environ[]":
            if WRITE_AFTER.match(data, m.end()) or text.prefix(m.start()).rstrip().endswith(
                "del os."
            ):
                access = "write"
        default = _default_after(data, m.end()) if how == "environ.get" else None
        taken.add(m.start("q"))
        add(name, m.start(), access, how, default, _cast_of(text.prefix(m.start())))
    for m in _led(GETENV_RE, data, envs, b"getenv("):
        prefix = text.prefix(m.start())
        default = _default_after(data, m.end())
        taken.add(m.start("q"))
        add(m.group("n").decode(), m.start(), "read", "getenv", default, _cast_of(prefix))
    for lead, rx in HELPER_RES:
        for m in _led(rx, data, envs, lead):
            word = re.search(r"\w*$", text.prefix(m.start()))
            assert word is not None  # \w* matches the empty string
            helper = word.group(0) + lead.rstrip(b"(").decode() + m.group(1).decode()
            if helper in ("getenv", "environ"):
                continue
            default = _default_after(data, m.end())
            if default is None and helper in HELPER_DEFAULTS:
                default = HELPER_DEFAULTS[helper]
            taken.add(m.start("q"))
            add(m.group("n").decode(), m.start() - len(word.group(0)), "read", helper, default,
                _cast_of("", helper))  # fmt: skip
    for needle in IN_ENVIRON:
        shift = needle.index(b"env")
        for at in (at - shift for at in envs if at >= shift):
            if not data.startswith(needle, at):
                continue
            after = data[at + len(needle) : at + len(needle) + 1]
            if not (after.isalnum() or after in (b"_", b".")):
                q = QUOTED_BEFORE.search(text.prefix(at + 1))
                if q:
                    add(q.group(2), at + 1, "check", "in environ", None, None)
    for m in _led(ENVS_RE, data, envs, b"envs."):
        if m.start() and (data[m.start() - 1 : m.start()].isalnum() or data[m.start() - 1] == 95):
            continue  # "myenvs.X", "_envs.X"
        if line_state(text.prefix(m.start())) == "string":  # not `f"{envs.X.get()}"`
            continue  # "use `envs.YOUR_FLAG.get()`" in a message names no variable
        method = (m.group(2) or b"").decode()
        access = "write" if method in ENVS_WRITES else "read"
        add(m.group(1).decode(), m.start(), access, f"envs.{method or 'X'}", None, None)
    for m in LITERAL_RE.finditer(data):
        before, after = data[m.start() - 1 : m.start()], data[m.end() : m.end() + 1]
        if before in (b'"', b"'") and after == before and m.start() - 1 not in taken:
            if DICT_KEY_AFTER.match(data, m.end() + 1):
                add(m.group(0).decode(), m.start(), "write", "dict key", None, None)
            else:
                add(m.group(0).decode(), m.start(), "read", "literal", None, None)
    return sorted(found.values(), key=lambda s: (s.line, s.name))


def _scan_blob(
    data: bytes, flags_file: bool, text: _Text, envs: list[int]
) -> tuple[list[list[Any]], dict[str, str]]:
    found = _find(data, text, envs)
    sites: list[EnvSite] = []
    texts: dict[str, str] = {}
    reads_rx = _reads_rx(flags_file)
    # Only a file that reads server args can tie a variable to a flag; elsewhere the block
    # context (the costly part of this scan) is skipped.
    linked = flags_file or bool(text.index.words(b"server_args"))
    for f in found:
        statement = text.statement(f.start)
        function, dests = "", []
        if linked and _conditions_read_args(data, f.start, flags_file):
            function, headers = text.context(f.start)
            dests = _dests(reads_rx, statement, headers)
        end_line = f.line + len(statement) - 1
        sites.append(
            EnvSite(f.name, f.line, end_line, f.access, f.how, f.default, f.cast, function, dests)
        )
        texts[str(f.line)] = statement[0].strip()[:MAX_LINE]
    return stored(sites), texts


def _reads_rx(flags_file: bool) -> list[re.Pattern[str]]:
    return [FLAG_READ_RE, SELF_READ_RE] if flags_file else [FLAG_READ_RE]


def _conditions_read_args(data: bytes, start: int, flags_file: bool) -> bool:
    """Whether the block walk can tie the site at `start` to a flag: it is skipped when
    nothing between the enclosing `def` and the site reads server args."""
    if flags_file:
        return True
    def_at = data.rfind(b"def ", 0, start)
    return data.find(b"server_args", max(def_at, 0), start + 2000) >= 0


def _dests(reads_rx: list[re.Pattern[str]], statement: list[str], headers: list[str]) -> list[str]:
    body = " ".join(statement)
    return sorted(
        {m.group(1) for rx in reads_rx for part in [body, *headers] for m in rx.finditer(part)}
    )


def _default_after(data: bytes, end: int) -> Any:
    """The literal second argument after a name at `end`, or a fallback to another
    variable ({"env": name, "default": its literal default or None, "reads": False when it
    is only that variable's declared default}), or None."""
    text = data[end : end + 260].decode("utf-8", "replace")
    m = DEFAULT_RE.match(text)
    if not m:
        return fallback_after(text)
    value = literal(ast.parse(m.group(1), mode="eval").body) if m.group(1) else NOT_LITERAL
    return None if value is NOT_LITERAL else value


def fallback_after(text: str) -> dict[str, Any] | None:
    m = FALLBACK_RE.match(text)
    if m:
        call = m.group("call")
        default = literal(ast.parse(m.group(4), mode="eval").body) if m.group(4) else None
        if default is None:
            default = HELPER_DEFAULTS.get(call)  # get_int_env_var("B") reads 0 when unset
        return {"env": m.group("n"), "default": default, "reads": True}
    m = ENVS_FALLBACK_RE.match(text)
    if m:  # the default is the declaration's (filled in by ingest/env_rows.py)
        return {"env": m.group("n"), "default": None, "reads": m.group("how") != "default"}
    return None
