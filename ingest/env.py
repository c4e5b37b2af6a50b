"""Environment variables: where the code reads and writes them, and environ.py's declarations.

Reads and writes are found by literal-led scans like ingest/sites.py (this runs over every
Python file of every version): `os.environ.get("X", d)`, `os.getenv`, `os.environ["X"]`
(a write when assigned or deleted), `"X" in os.environ`, `os.environ.setdefault/pop`,
helpers whose name says env (`get_bool_env_var("X")`, `get_int_env_var`, `_get_env`),
`envs.X.get()`/`.value`/`.is_set()` (reads) and `.set()`/`.override()`/`.clear()` (writes),
and any other `"SGLANG_X"`/`"SGL_X"` string (`_lazy_bool("SGLANG_X", False)`).

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
import re
from typing import Any

from ingest.sites import LineIndex
from kb.pyast import NOT_LITERAL, literal

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
WRITE_AFTER = re.compile(rb"\s*\]?\s*=(?!=)")
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
    low = helper.lower()
    for t in ("bool", "int", "float"):
        if t in low:
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
        rx = _SHALLOW.get(limit)
        if rx is None:
            rx = _SHALLOW[limit] = re.compile(rb"\n {0,%d}(?=[^ \n])" % (limit - 1))
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


def _strip_strings(text: str) -> str:
    return re.sub(r"\"[^\"]*\"|'[^']*'", '""', text)


def scan_env(
    data: bytes, flags_file: bool = False, index: LineIndex | None = None
) -> tuple[list[list[Any]], dict[str, str]]:
    """Sites [name, line, end_line, access, how, default, cast, function, dests] and the
    texts of their lines. `flags_file`: `self.x` reads are flag reads (server_args.py)."""
    if b"env" not in data and b"SGL" not in data:
        return [], {}
    text = _Text(data, index)
    found: dict[tuple[str, int], list[Any]] = {}

    def add(name: str, offset: int, access: str, how: str, default: Any, cast: str | None) -> None:
        if not env_name_ok(name):
            return
        no = text.number(offset)
        if "#" in text.prefix(offset):
            return  # a mention in a comment
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
            add(name, m.start(), access, how, default, _cast_of(text.prefix(m.start())))
    if b"getenv" in data:
        for m in GETENV_RE.finditer(data):
            prefix = text.prefix(m.start())
            add(m.group("n").decode(), m.start(), "read", "getenv", _default_after(data, m.end()),
                _cast_of(prefix))  # fmt: skip
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
            method = (m.group(2) or b"").decode()
            access = "write" if method in ENVS_WRITES else "read"
            add(m.group(1).decode(), m.start(), access, f"envs.{method or 'X'}", None, None)
    if b"SGL" in data:
        for m in LITERAL_RE.finditer(data):
            before, after = data[m.start() - 1 : m.start()], data[m.end() : m.end() + 1]
            if before in (b'"', b"'") and after == before:
                add(m.group(0).decode(), m.start(), "read", "literal", None, None)

    sites: list[list[Any]] = []
    texts: dict[str, str] = {}
    reads_rx = [FLAG_READ_RE, SELF_READ_RE] if flags_file else [FLAG_READ_RE]
    # Only a file that reads server args can tie a variable to a flag; elsewhere the block
    # context (the costly part of this scan) is skipped.
    linked = flags_file or b"server_args" in data
    for site in sorted(found.values(), key=lambda s: (s[1], s[0])):
        no, start = site[1], site[2]
        statement = text.statement(start)
        function, dests = "", []
        # The walk up to the enclosing `def` is skipped when nothing between it and the
        # site reads server args: then no condition there can tie the variable to a flag.
        def_at = data.rfind(b"def ", 0, start)
        if linked and (flags_file or b"server_args" in data[max(def_at, 0) : start + 2000]):
            function, headers = text.context(start)
            body = " ".join(statement)
            dests = sorted(
                {
                    m.group(1)
                    for rx in reads_rx
                    for part in [body, *headers]
                    for m in rx.finditer(part)
                }
            )
        site[2] = no + len(statement) - 1
        sites.append([*site, function, dests])
        texts[str(no)] = statement[0].strip()[:MAX_LINE]
    return sites, texts


def _default_after(data: bytes, end: int) -> Any:
    """The literal second argument after a name at `end`, or None."""
    m = DEFAULT_RE.match(data[end : end + 260].decode("utf-8", "replace"))
    if not m:
        return None
    value = literal(ast.parse(m.group(1), mode="eval").body) if m.group(1) else NOT_LITERAL
    return None if value is NOT_LITERAL else value


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
    "section", "line", "end_line", "path"}], "prefix_aliases": [{"from", "to", "line"}]}."""
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
            out.append(
                {
                    "name": target.id,
                    "type": env_type,
                    "default": default,
                    "default_expr": default_expr,
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
    return {"vars": out, "prefix_aliases": aliases}


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
