"""Environment variables: where the code reads and writes them, and environ.py's declarations.

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

Declarations (`class Envs: SGLANG_X = EnvBool(False)`, `EnvBoolWithAlias(..,
deprecated_name=..)`) are read with `ast` from environ.py only.
"""

from __future__ import annotations

import ast
import bisect
import re
from typing import Any

from ingest.sites import LineIndex, docstring_spans, line_state
from kb.pyast import NOT_LITERAL, kwarg, literal

ENVIRON_PATH = "python/sglang/srt/environ.py"

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
        self.number = (index or LineIndex(data)).number

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
        # made it try every offset); the file's first line is checked on its own.
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
    """Sites [name, line, end_line, access, how, default, cast, function, dests] and the
    texts of their lines. `flags_file`: `self.x` reads are flag reads (server_args.py)."""
    if b"env" not in data and b"SGL" not in data:
        return [], {}
    return _scan_blob(data, flags_file, _Text(data, index))


def _find(data: bytes, text: _Text) -> list[list[Any]]:
    """The sites of `data` [name, line, offset of the line, access, how, default, cast], by
    line then name."""
    found: dict[tuple[str, int], list[Any]] = {}
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
            strings = docstring_spans(data)
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
                found[key][3] = "write"
            return
        found[key] = [name, no, text.start(offset), access, how, default, cast]

    if b"environ" in data:
        for m in ENVIRON_RE.finditer(data):
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
    if b"getenv" in data:
        for m in GETENV_RE.finditer(data):
            prefix = text.prefix(m.start())
            default = _default_after(data, m.end())
            taken.add(m.start("q"))
            add(m.group("n").decode(), m.start(), "read", "getenv", default, _cast_of(prefix))
    for lead, rx in HELPER_RES:
        if lead not in data:
            continue
        for m in rx.finditer(data):
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
        at = data.find(needle)
        while at >= 0:
            after = data[at + len(needle) : at + len(needle) + 1]
            if not (after.isalnum() or after in (b"_", b".")):
                q = QUOTED_BEFORE.search(text.prefix(at + 1))
                if q:
                    add(q.group(2), at + 1, "check", "in environ", None, None)
            at = data.find(needle, at + 1)
    if b"envs." in data:
        for m in ENVS_RE.finditer(data):
            if m.start() and (
                data[m.start() - 1 : m.start()].isalnum() or data[m.start() - 1] == 95
            ):
                continue  # "myenvs.X", "_envs.X"
            if line_state(text.prefix(m.start())) == "string":  # not `f"{envs.X.get()}"`
                continue  # "use `envs.YOUR_FLAG.get()`" in a message names no variable
            method = (m.group(2) or b"").decode()
            access = "write" if method in ENVS_WRITES else "read"
            add(m.group(1).decode(), m.start(), access, f"envs.{method or 'X'}", None, None)
    if b"SGL" in data:
        for m in LITERAL_RE.finditer(data):
            before, after = data[m.start() - 1 : m.start()], data[m.end() : m.end() + 1]
            if before in (b'"', b"'") and after == before and m.start() - 1 not in taken:
                if DICT_KEY_AFTER.match(data, m.end() + 1):
                    add(m.group(0).decode(), m.start(), "write", "dict key", None, None)
                else:
                    add(m.group(0).decode(), m.start(), "read", "literal", None, None)
    return sorted(found.values(), key=lambda s: (s[1], s[0]))


def _scan_blob(
    data: bytes, flags_file: bool, text: _Text
) -> tuple[list[list[Any]], dict[str, str]]:
    found = _find(data, text)
    sites: list[list[Any]] = []
    texts: dict[str, str] = {}
    reads_rx = _reads_rx(flags_file)
    # Only a file that reads server args can tie a variable to a flag; elsewhere the block
    # context (the costly part of this scan) is skipped.
    linked = flags_file or b"server_args" in data
    for site in found:
        no, start = site[1], site[2]
        statement = text.statement(start)
        function, dests = "", []
        if linked and _conditions_read_args(data, start, flags_file):
            function, headers = text.context(start)
            dests = _dests(reads_rx, statement, headers)
        sites.append([site[0], no, no + len(statement) - 1, *site[3:7], function, dests])
        texts[str(no)] = statement[0].strip()[:MAX_LINE]
    return sites, texts


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
        return _fallback_after(text)
    value = literal(ast.parse(m.group(1), mode="eval").body) if m.group(1) else NOT_LITERAL
    return None if value is NOT_LITERAL else value


def _fallback_after(text: str) -> dict[str, Any] | None:
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


# --- environ.py declarations ---------------------------------------------------------------

TYPES = {
    "EnvBool": "bool",
    "EnvInt": "int",
    "EnvFloat": "float",
    "EnvStr": "str",
    "EnvTuple": "tuple",
}
PREFIX_ALIAS_RE = re.compile(r"""\.replace\(\s*["'](\w+_)["']\s*,\s*["'](\w+_)["']""")


def _env_type(class_name: str, bases: dict[str, str]) -> str | None:
    """EnvBool -> bool, EnvBoolWithAlias -> bool, a subclass defined in the file -> its base's."""
    seen = set()
    name = class_name
    while name not in TYPES and name in bases and name not in seen:
        seen.add(name)
        name = bases[name]
    if name in TYPES:
        return TYPES[name]
    for prefix, t in TYPES.items():
        if class_name.startswith(prefix):
            return t
    return None


def extract_declarations(tree: ast.Module, text: str, path: str) -> dict[str, Any]:
    """{"vars": [{"name", "type", "default", "default_expr", "deprecated_names", "comment",
    "section", "line", "end_line", "path"}], "prefix_aliases": [{"from", "to", "line"}],
    "deprecations": (see `deprecations`)}."""
    # Class -> the Env* class it derives from (EnvBoolWithAlias(_DeprecatedEnvFallback, EnvBool)).
    bases: dict[str, str] = {}
    consts: dict[str, Any] = {}  # "ToolStrictLevel.OFF" -> 0
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
                    value = literal(stmt.value)
                    if value is not NOT_LITERAL and not isinstance(stmt.value, ast.Call):
                        consts[f"{node.name}.{stmt.targets[0].id}"] = value
            for b in node.bases:
                if isinstance(b, ast.Name) and (b.id in TYPES or b.id in bases):
                    bases[node.name] = b.id
    lines = text.split("\n")
    out: list[dict[str, Any]] = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        section = None
        prev_end = node.lineno
        for stmt in node.body:
            # The last `# Heading` comment line before the statement, after a blank line.
            for k in range(prev_end, stmt.lineno - 1):
                s = lines[k].strip()
                if s.startswith("#") and k > 0 and not lines[k - 1].strip():
                    section = s.lstrip("# ").strip() or section
            prev_end = stmt.end_lineno or stmt.lineno
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
                continue
            target, call = stmt.targets[0], stmt.value
            if not (isinstance(target, ast.Name) and isinstance(call, ast.Call)):
                continue
            if not isinstance(call.func, ast.Name):
                continue
            env_type = _env_type(call.func.id, bases)
            if env_type is None or not call.func.id.startswith("Env") and call.func.id not in bases:
                continue
            default: Any = None
            default_expr = None
            if call.args:
                value = fold(call.args[0], consts)
                if value is NOT_LITERAL:
                    default_expr = ast.unparse(call.args[0])
                else:
                    default = list(value) if isinstance(value, tuple) else value
            deprecated = [
                kw.value.value
                for kw in call.keywords
                if kw.arg in ("deprecated_name", "deprecated_names", "alias")
                and isinstance(kw.value, ast.Constant)
                and isinstance(kw.value.value, str)
            ]
            for kw in call.keywords:
                if kw.arg in ("deprecated_names", "aliases") and isinstance(
                    kw.value, (ast.List, ast.Tuple)
                ):
                    deprecated += [
                        e.value
                        for e in kw.value.elts
                        if isinstance(e, ast.Constant) and isinstance(e.value, str)
                    ]
                if kw.arg == "default" and default is None and default_expr is None:
                    value = fold(kw.value, consts)
                    if value is NOT_LITERAL:
                        default_expr = ast.unparse(kw.value)
                    else:
                        default = value
            end = stmt.end_lineno or stmt.lineno
            given = call.args[0] if call.args else kwarg(call, "default")
            out.append(
                {
                    "name": target.id,
                    "type": env_type,
                    "default": default,
                    "default_expr": default_expr,
                    "fallback": _fallback_of(given) if default_expr else None,
                    "deprecated_names": deprecated,
                    "comment": _comment(lines, stmt.lineno, end),
                    "section": section,
                    "path": path,
                    "line": stmt.lineno,
                    "end_line": end,
                }
            )
    aliases = []
    for no, line in enumerate(lines, 1):
        m = PREFIX_ALIAS_RE.search(line)
        if m and m.group(1) != m.group(2):
            aliases.append({"from": m.group(1), "to": m.group(2), "line": no, "path": path})
    return {"vars": out, "prefix_aliases": aliases, "deprecations": deprecations(tree, path)}


def _fallback_of(node: ast.expr | None) -> dict[str, Any] | None:
    """A declaration's default that reads another variable (`EnvStr(os.environ.get("B",
    "x"))`, `EnvInt(get_int_env_var("B", 3))`, `envs.B.get()`), as _fallback_after says it:
    the declaration's source text, read by the same patterns as a read's default."""
    if node is None:
        return None
    return _fallback_after(", " + ast.unparse(node) + ")")


# --- deprecations declared by calls: `_print_deprecated_env("OLD", "NEW")` ------------------

# A message of warnings.warn(..) / logger.warning(..) saying "deprecat..." marks a helper.
WARN_CALLS = ("warn", "warning")
# `--fp8-gemm-backend=cutlass`: the value stays with the flag (no trailing full stop).
FLAG_IN_TEXT = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9-]*(?:=[\w-]+(?:\.[\w-]+)*)?")


def deprecations(tree: ast.Module, path: str) -> list[dict[str, Any]]:
    """Old names deprecated by calls of the module's own helper functions, or by a loop over a
    literal dict (`for old, new in {"OLD": "NEW"}.items()`): [{"name", "replacement", "note",
    "line", "end_line", "path"}]. A helper is read, not guessed from its name or its
    parameters' order: the parameter it checks in `os.environ` is the old name, the one it
    assigns to `os.environ[..]` the new one, and its deprecation warning (rendered with the
    call's arguments) is the note; a note naming exactly one `--flag` (or `--flag=value`) and
    no new variable makes that flag the replacement. Calls whose arguments are not literals
    are skipped. "conversion" (see `_conversion`) is what the new name is given: None for
    the old value as it is."""
    helpers = {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and not node.args.vararg and not node.args.kwarg
    }
    dicts: dict[str, ast.Dict | None] = {}  # name -> the dict literal assigned to it once
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            t = node.targets[0]
            if isinstance(t, ast.Name):
                once = t.id not in dicts and isinstance(node.value, ast.Dict)
                dicts[t.id] = node.value if once and isinstance(node.value, ast.Dict) else None
    out: dict[str, dict[str, Any]] = {}

    def add(bound: dict[str, Any], body: list[ast.stmt], line: int, end: int) -> None:
        found = _Deprecation(bound)
        for stmt in body:
            found.visit(stmt)
        note = next((m for m in found.messages if "deprecat" in m.lower()), None)
        old = [bound[p] for p in found.old if isinstance(bound.get(p), str)]
        if note is None or len(set(old)) != 1:
            return
        new = [bound[p] for p in found.new if isinstance(bound.get(p), str) and bound[p] != old[0]]
        flags = set(FLAG_IN_TEXT.findall(note))
        replacement = new[0] if len(set(new)) == 1 else None
        if not new and len(flags) == 1:
            replacement = flags.pop()
        given = [e for p, e in found.assigned if bound.get(p) == replacement and replacement]
        out.setdefault(
            old[0],
            {"name": old[0], "replacement": replacement, "note": note, "line": line,
             "end_line": end, "path": path,
             "conversion": found.conversion(given[0]) if len(given) == 1 else None},
        )  # fmt: skip

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            helper = helpers.get(node.func.id)
            bound = _bind(helper, node) if helper is not None else None
            if helper is not None and bound is not None:
                add(bound, helper.body, node.lineno, node.end_lineno or node.lineno)
        elif isinstance(node, ast.For) and not node.orelse:
            entries = _dict_items(node, dicts)
            if entries is None:
                continue
            names = [e.id for e in node.target.elts]  # type: ignore[attr-defined]
            for k, v in entries:
                add(dict(zip(names, (k.value, v.value), strict=True)), node.body, k.lineno,
                    v.end_lineno or v.lineno)  # fmt: skip
    return sorted(out.values(), key=lambda d: d["line"])


def _bind(fn: ast.FunctionDef, call: ast.Call) -> dict[str, Any] | None:
    """The helper's parameters -> the call's literal str/None arguments, defaults filled in."""
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    defaults = fn.args.defaults
    bound: dict[str, Any] = {}
    for p, d in zip(params[len(params) - len(defaults) :], defaults, strict=True):
        bound[p] = d.value if isinstance(d, ast.Constant) else NOT_LITERAL
    if len(call.args) > len(params):
        return None
    given = list(zip(params, call.args, strict=False))
    given += [(kw.arg, kw.value) for kw in call.keywords if kw.arg in params]
    if len(given) != len(call.args) + len(call.keywords):
        return None  # **kwargs, or a keyword the helper does not take
    for p, arg in given:
        if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str | None)):
            return None  # not resolvable statically
        bound[p] = arg.value
    if any(p not in bound or bound[p] is NOT_LITERAL for p in params):
        return None
    return bound


def _dict_items(node: ast.For, dicts: dict[str, ast.Dict | None]) -> list[Any] | None:
    """The (key, value) constants of `for a, b in D.items()` over a dict literal, or None."""
    target, it = node.target, node.iter
    if not (
        isinstance(target, ast.Tuple)
        and len(target.elts) == 2
        and all(isinstance(e, ast.Name) for e in target.elts)
        and isinstance(it, ast.Call)
        and not it.args
        and isinstance(it.func, ast.Attribute)
        and it.func.attr == "items"
    ):
        return None
    named = it.func.value
    d = dicts.get(named.id) if isinstance(named, ast.Name) else named
    if not isinstance(d, ast.Dict):
        return None
    items = list(zip(d.keys, d.values, strict=True))
    strs = all(isinstance(x, ast.Constant) and isinstance(x.value, str) for kv in items for x in kv)
    return items if strs else None


def _call_of(node: ast.expr, names: tuple[str, ...]) -> bool:
    """`name(x)` with one positional argument, name one of `names`."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in names
        and len(node.args) == 1
        and not node.keywords
    )


def _is_environ(node: ast.expr) -> bool:
    """`os.environ` or `environ`."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ" and isinstance(node.value, ast.Name) and node.value.id == "os"
    return isinstance(node, ast.Name) and node.id == "environ"


class _Deprecation(ast.NodeVisitor):
    """What a helper body does with its bound parameters, on the branches the bindings take
    (`if new_name is None:` with new_name None): the parameters it checks or reads in the
    environment (`old`), those it assigns there (`new`), and its warnings rendered."""

    def __init__(self, bound: dict[str, Any]) -> None:
        self.bound = bound
        self.old: list[str] = []
        self.new: list[str] = []
        self.messages: list[str] = []
        self.assigned: list[tuple[str, ast.expr]] = []  # (parameter, the value it is given)
        self.locals: dict[str, ast.expr] = {}  # `ms_val = os.environ[old_name]`

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            p = self._param(t.slice) if isinstance(t, ast.Subscript) else None
            if p and _is_environ(t.value):  # type: ignore[attr-defined]
                self.assigned.append((p, node.value))
            elif isinstance(t, ast.Name) and t.id not in self.bound:
                self.locals[t.id] = node.value
        self.generic_visit(node)

    def _reads_old(self, node: ast.expr, depth: int = 0) -> bool:
        """`os.environ[old]`, `os.getenv(old)`, `os.environ.get(old)`, or a local holding it."""
        if isinstance(node, ast.Name) and node.id in self.locals and depth < 3:
            return self._reads_old(self.locals[node.id], depth + 1)
        if isinstance(node, ast.Subscript) and _is_environ(node.value):
            p = self._param(node.slice)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            get = (
                node.func.attr == "getenv"
                or node.func.attr == "get"
                and _is_environ(node.func.value)
            )
            p = self._param(node.args[0]) if get else None
        else:
            return False
        return p is not None and p in self.old

    def conversion(self, value: ast.expr) -> dict[str, Any] | None:
        """What the new name is given, in terms of the old name's value: None for the value as
        it is; {"expr", "cast", "op", "by"} for `str(float(old) / 1000.0)` (a cast, then one
        multiplication or division by a number: `op` "*", "/" or "//"); {"expr"} alone for
        anything else, which is not worked out. A local holding the whole value
        (`secs = str(...); os.environ[new] = secs`) is read through."""
        for _ in range(3):  # (locals assigned from locals, a few deep)
            if not isinstance(value, ast.Name) or value.id not in self.locals:
                break
            if self._reads_old(value):
                return None
            value = self.locals[value.id]
        if self._reads_old(value):
            return None
        out: dict[str, Any] = {"expr": ast.unparse(value)}
        inner = value.args[0] if _call_of(value, ("str",)) else None  # type: ignore[attr-defined]
        if not isinstance(inner, ast.BinOp):
            return out
        op = {ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//"}.get(type(inner.op))
        cast, number = inner.left, inner.right
        if op == "*" and isinstance(cast, ast.Constant):  # 1000 * int(old)
            cast, number = number, cast
        by = number.value if isinstance(number, ast.Constant) else None
        if (
            op is None
            or type(by) not in (int, float)
            or by == 0
            or not _call_of(cast, ("float", "int"))
            or not self._reads_old(cast.args[0])  # type: ignore[attr-defined]
        ):
            return out
        return {**out, "cast": cast.func.id, "op": op, "by": by}  # type: ignore[attr-defined]

    def _param(self, node: ast.expr) -> str | None:
        return node.id if isinstance(node, ast.Name) and node.id in self.bound else None

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        taken = self._taken(node.test)
        for stmt in node.body if taken is not False else []:
            self.visit(stmt)
        for stmt in node.orelse if taken is not True else []:
            self.visit(stmt)

    def _taken(self, test: ast.expr) -> bool | None:
        """The test's value under the bindings, or None when it depends on more."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self._taken(test.operand)
            return None if inner is None else not inner
        p = self._param(test)
        if p is not None:
            return bool(self.bound[p])
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            p = self._param(test.left)
            right = test.comparators[0]
            none = isinstance(right, ast.Constant) and right.value is None
            if p is not None and none and isinstance(test.ops[0], ast.Is | ast.IsNot):
                return (self.bound[p] is None) == isinstance(test.ops[0], ast.Is)
        return None

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        return  # a nested function runs only if called

    def visit_Compare(self, node: ast.Compare) -> None:
        p = self._param(node.left)
        if p and isinstance(node.ops[0], ast.In | ast.NotIn) and _is_environ(node.comparators[0]):
            self.old.append(p)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        p = self._param(node.slice)
        if p and _is_environ(node.value):
            (self.new if isinstance(node.ctx, ast.Store) else self.old).append(p)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and node.args:
            p = self._param(node.args[0])
            reads = func.attr == "getenv" or func.attr == "get" and _is_environ(func.value)
            if p and reads:
                self.old.append(p)
            if func.attr in WARN_CALLS:
                text = self._render(node.args[0])
                if text is not None:
                    self.messages.append(text)
        self.generic_visit(node)

    def _render(self, node: ast.expr) -> str | None:
        """A message with the bound parameters filled in, or None if it needs more."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self._render(node.left), self._render(node.right)
            return None if left is None or right is None else left + right
        if not isinstance(node, ast.JoinedStr):
            return None
        parts = []
        for v in node.values:
            if isinstance(v, ast.FormattedValue):
                p = self._param(v.value)
                if p is None or not isinstance(self.bound[p], str) or v.format_spec:
                    return None
                parts.append(self.bound[p])
            else:
                part = self._render(v)
                if part is None:
                    return None
                parts.append(part)
        return "".join(parts)


_OPS: dict[type, Any] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Div: lambda a, b: a / b,
}


def fold(node: ast.expr, consts: dict[str, Any] | None = None) -> Any:
    """A literal, or arithmetic over numeric literals (`384 * 1024 * 1024`, `2 ** 31`), an
    empty `tuple()`/`list()`, or a `Class.MEMBER` constant of the same module (`consts`);
    else NOT_LITERAL."""
    value = literal(node)
    if value is not NOT_LITERAL:
        return value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and consts:
        return consts.get(f"{node.value.id}.{node.attr}", NOT_LITERAL)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args:
        if node.func.id in ("tuple", "list") and not node.keywords:
            return []
    if isinstance(node, ast.BinOp):
        left, right = fold(node.left, consts), fold(node.right, consts)
        numbers = all(type(v) in (int, float) for v in (left, right))
        if numbers and isinstance(node.op, ast.Pow) and abs(right) <= 64:
            return left**right
        op = _OPS.get(type(node.op))
        if (
            numbers
            and op is not None
            and not (isinstance(node.op, (ast.Div, ast.FloorDiv)) and right == 0)
        ):
            return op(left, right)
    return NOT_LITERAL


def _comment(lines: list[str], line: int, end: int) -> str:
    """A trailing `# ...` on the declaration, else the comment lines right above it."""
    tail = lines[end - 1]
    m = re.search(r"\)\s*#\s*(.+)$", tail)
    if m:
        return m.group(1).strip()
    above: list[str] = []
    k = line - 2
    while k >= 0 and lines[k].strip().startswith("#"):
        above.append(lines[k].strip().lstrip("#").strip())
        k -= 1
    # The first line of a block under a blank line is the section heading, not a description.
    if above and (k < 0 or not lines[k].strip()):
        above.pop()
    return " ".join(reversed(above))
