"""Carriers: what holds a flag's value after a file reads it, found per blob.

SGLang often reads a flag once and passes the value on through a name other modules import:
`IS_TBO_ENABLED = server_args.enable_two_batch_overlap` (a global assigned from a read, also
inside a function declaring `global`), `is_tbo_enabled()` returning it (an *accessor*: a
short function or property whose `return` is a small expression of a flag or of such a
global), `SboFlags.enable_...()` methods returning another accessor of the same file. Each of
those is a *carrier*: a use of it is a read of the flag, one link further down the chain.

`scan_structure` runs in the analysis workers on each blob alone (its result is cached with
the blob's facts): the file's `from X import ...` lines and its `EntryClass`, which the
resolver (ingest/indirect.py) follows between files, and the carriers the file defines from
its own direct reads. What decides whether a use makes its function a carrier
(`decides_return`), where the uses of a carrier are (`file_uses`) and what a call passes to
a carrier deciding only under a test of its callers' arguments (`passed_cond`) are shared
with the resolver, which asks the same of the files importing a carrier.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any, NamedTuple

from ingest.pyfile import MAX_ACCESSOR_LINES, Def, PyFile
from ingest.sites import LineIndex, in_spans, server_args_aliases
from kb.pyast import ARGS_RECEIVERS

# Led by the literal "from " and only sglang's or relative modules, the only ones followed.
IMPORT_RE = re.compile(rb"from (\.+[\w.]*|sglang[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)")
COMMENT_RE = re.compile(rb"#[^\n]*")
IMPORT_AS_RE = re.compile(rb"import[ \t]+(sglang(?:\.\w+)+)[ \t]+as[ \t]+(\w+)[ \t]*(?:#|\n|$)")
# `b"EntryClass" in data` and `b"global " in data`
# (the engine's search skips to the word's first byte, rarer in code than the last one
# bytes' `in` skips by: half the cost)
ENTRY_WORD_RE = re.compile(rb"EntryClass")
GLOBAL_WORD_RE = re.compile(rb"global ")
ENTRY_RE = re.compile(rb"^EntryClass\s*=\s*(\[[^\]]*\]|\([^)]*\)|[\w.]+)", re.M)
GLOBAL_ASSIGN_RE = re.compile(r"^([A-Z_][A-Z0-9_]*)\s*(?::[^=]*)?=[^=]")
NAME_RE = re.compile(r"[A-Za-z_]\w*")
ATTR_AFTER_RE = re.compile(r"(?!\w)(?:\s*\.\s*(\w+))?")
MAX_CHAIN = 4  # links after the direct read: global, accessor, two more hops (`hops`)
# An accessor returns a flag or a simple expression of one or two; a function returning
# `ModelConfig(model_path=server_args.model_path, ...)` is a factory, not an accessor.
MAX_DESTS = 2
MAX_RETURN_NODES = 40
# Words that do not name a feature on their own (is_tbo_enabled -> "tbo").
STOP_WORDS = {
    "is", "get", "set", "enable", "enabled", "disable", "disabled", "use", "flag", "flags",
    "global", "server", "args", "config", "the", "maybe", "should", "can", "has", "mode",
    "backend", "value", "init", "initialize",
}  # fmt: skip


# What a carrier's callers must pass for it to carry the flag: (name, truthy) pairs, all of
# them; () always. `(("is_layer_sparse", True),)`: its flags decide only under
# `if context.is_layer_sparse:` (a sparse layer), so a call passing `is_layer_sparse=False`
# reaches none of them.
Cond = tuple[tuple[str, bool], ...]


def cond_and(a: Cond, b: Cond) -> Cond:
    """Both conditions at once: every (name, truthy) test of either (a use under a tested
    branch of an accessor whose callers must already pass a test)."""
    return a if not b else b if not a else tuple(sorted({*a, *b}))


def stored_cond(raw: dict[str, Any]) -> Cond:
    """The condition of a carrier as scan_structure stores it (only when it has one)."""
    return tuple((str(name), bool(want)) for name, want in raw.get("cond", ()))


class CarrierId(NamedTuple):
    """A carrier as a file names it: a module-level name, and the method or property of that
    class it is (None for the name itself)."""

    name: str
    member: str | None


class UsePattern(NamedTuple):
    """What a use of a carrier looks like in a file: `receiver` or `receiver.member`
    (`cls.x`, `self.x` in the carrier's own class), and the carrier it stands for."""

    receiver: str
    member: str | None
    carrier: CarrierId


class ImportItem(NamedTuple):
    """One name of a `from module import name as alias` (alias = name without `as`)."""

    module: str
    name: str
    alias: str


class AssignedGlobal(NamedTuple):
    """A global a function declaring `global` assigns from flag reads."""

    name: str
    dests: list[str]
    line: int  # relative to the function's `def` line (0: the `def` itself)


class ReturnedFlags(NamedTuple):
    """The flags an accessor's `return` reads, and what its callers must pass for them to
    decide it."""

    dests: list[str]
    cond: Cond


class Decision(NamedTuple):
    """What a line decides of what a short function returns (decides_return)."""

    cond: Cond  # what the function's callers must pass for it to decide, () for nothing
    passes_on: bool  # it only passes the function's parameters on to a carrier (Use.passes_on)
    returned: bool  # it is in the `return` itself (Use.returned)


class Branch(NamedTuple):
    """A branch of a top-level `if` testing a parameter, with what callers must pass for it
    to run."""

    body: list[ast.stmt]
    cond: Cond


class ParameterTest(NamedTuple):
    """What an `if` tests of a parameter: the name tested (None: the server args, whatever
    the caller passes) and whether the test wants it truthy."""

    name: str | None
    truthy: bool


def scan_structure(
    data: bytes, reads: list[list[Any]], index: LineIndex | None = None
) -> dict[str, Any]:
    """A file's imports, its `EntryClass` and the carriers it defines from its `reads`
    (`index`: the one the scans numbered the reads' lines with, which finds them again)."""
    out: dict[str, Any] = {"imports": _imports(data)}
    if ENTRY_WORD_RE.search(data):
        out["entry"] = _entry_classes(data)
    read_lines = {line for _name, line, access in reads if access == "read"}
    if read_lines and _may_carry(data, read_lines, index or LineIndex(data)):
        out["carriers"] = find_carriers(data.decode("utf-8", "replace"), read_lines)
    return out


def _may_carry(data: bytes, read_lines: set[int], index: LineIndex) -> bool:
    """Cheap test before any parsing: a carrier needs a `global` statement, a read at module
    level, or a `return` on or just above a read. (Each read's line found from the offsets
    the index numbered, the lines above it by rfind: no split of the file's lines.)"""
    if GLOBAL_WORD_RE.search(data):
        return True
    for no in read_lines:
        start = index.line_start(no)
        if start is None:  # (no read is past the last line)
            continue
        if not _line_from(data, start)[:1].isspace():
            return True
        for above in range(no - max(1, no - 6) + 1):  # the line, then up to 6 above it
            if above:
                start = data.rfind(b"\n", 0, start - 1) + 1
            if _line_from(data, start).lstrip().startswith(b"return"):
                return True
    return False


def _line_from(data: bytes, start: int) -> bytes:
    end = data.find(b"\n", start)
    return data[start : end if end >= 0 else len(data)]


def _imports(data: bytes) -> list[list[Any]]:
    """[module, name, alias, line] of `from M import a, b as c` where M is sglang's or
    relative."""
    froms, others = _import_lists(data)
    out = [[item.module, item.name, item.alias, line] for m, line in froms for item in _items(m)]
    return out + others


def _import_lists(data: bytes) -> tuple[list[tuple[re.Match[bytes], int]], list[list[Any]]]:
    """_imports as ((IMPORT_RE's match, line) of each `from` import, the `import sglang.x as
    y` ones)."""
    froms: list[tuple[re.Match[bytes], int]] = []
    others: list[list[Any]] = []
    if b"import" not in data:
        return froms, others
    line, pos = 1, 0
    for m in IMPORT_RE.finditer(data):
        at = m.start()
        start = data.rfind(b"\n", 0, at) + 1
        if start != at and data[start:at].strip(b" \t"):
            continue  # not at the start of a line
        line += data.count(b"\n", pos, at)
        pos = at
        froms.append((m, line))
    # `import sglang.srt.models.deepseek_v2 as deepseek_v2` is `from sglang.srt.models import
    # deepseek_v2` (its classes are then named `deepseek_v2.X`); str.find first: it is rare.
    at = data.find(b"import sglang.")
    while at >= 0:
        start = data.rfind(b"\n", 0, at) + 1
        found = IMPORT_AS_RE.match(data, at)
        if found and not data[start:at].strip(b" \t"):
            module, name = found.group(1).decode().rsplit(".", 1)
            others.append([module, name, found.group(2).decode(), data.count(b"\n", 0, at) + 1])
        at = data.find(b"import sglang.", at + 1)
    return froms, others


def _items(m: re.Match[bytes]) -> list[ImportItem]:
    """The names of the `from` import IMPORT_RE matched."""
    text = m.group(0)
    items = _IMPORT_ITEMS.get(text)
    if items is None:
        if len(_IMPORT_ITEMS) >= MAX_IMPORT_ITEMS:
            _IMPORT_ITEMS.clear()
        items = _IMPORT_ITEMS[text] = _import_items(m)
    return items


# An import statement's text -> its names: the same statements recur in every version of a
# path. The 124 real tags have 8,918 distinct ones, ~950 bytes each with their items (8.2 MiB
# in all); the 2,048 last seen (~1.9 MiB, emptied when full) catch as many recurrences.
_IMPORT_ITEMS: dict[bytes, list[ImportItem]] = {}
MAX_IMPORT_ITEMS = 2048


def _import_items(m: re.Match[bytes]) -> list[ImportItem]:
    module = m.group(1).decode()
    if not (module.startswith(".") or module.startswith("sglang")):
        return []
    body = m.group(2)
    if b"#" in body:
        body = COMMENT_RE.sub(b"", body)
    body = body.strip(b"()\\ \t\n")
    out = []
    for item in body.split(b","):
        parts = item.split()
        if len(parts) == 1 and parts[0] != b"*":
            out.append(ImportItem(module, parts[0].decode(), parts[0].decode()))
        elif len(parts) == 3 and parts[1] == b"as":
            out.append(ImportItem(module, parts[0].decode(), parts[2].decode()))
    return out


def _entry_classes(data: bytes) -> list[str]:
    # The first `EntryClass` at a line start that matches (bytes.find, then the regex: a
    # `^` under re.M would make the engine try every position).
    m = None
    pos = data.find(b"EntryClass")
    while pos >= 0 and m is None:
        if pos == 0 or data[pos - 1] == 10:
            m = ENTRY_RE.match(data, pos)
        pos = data.find(b"EntryClass", pos + 1)
    if not m:
        return []
    return [n for n in NAME_RE.findall(m.group(1).decode()) if n[0].isupper()]


def flag_reads(node: ast.AST, aliases: frozenset[str] = frozenset()) -> list[str]:
    """Dests read in an expression: `server_args.x`, `self.server_args.x`,
    `get_global_server_args().x`, `global_server_args_dict["x"]`, and `sa.x` where the
    file binds `sa = get_global_server_args()` (`aliases`)."""
    out: list[str] = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and (
            _is_args(sub.value) or (isinstance(sub.value, ast.Name) and sub.value.id in aliases)
        ):
            out.append(sub.attr)
        elif (
            isinstance(sub, ast.Subscript)
            and isinstance(sub.slice, ast.Constant)
            and isinstance(sub.slice.value, str)
            and _tail(sub.value).endswith("server_args_dict")
        ):
            out.append(sub.slice.value)
    return list(dict.fromkeys(out))


def _size(node: ast.AST) -> int:
    return sum(1 for _ in ast.walk(node))


def _tail(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return _tail(node.func) + "()"
    return ""


def _is_args(node: ast.AST) -> bool:
    tail = _tail(node)
    return tail in ("server_args", "_server_args", "server_args()") or (
        tail.endswith("_server_args()") and tail.startswith("get_")
    )


def _carrier_id(f: PyFile, d: Def) -> CarrierId | None:
    """(exported name, member) of a module-level function or a method of a module-level
    class; None for nested functions."""
    if d.parent is None:
        return CarrierId(d.name, None)
    if d.parent.kind == "class" and d.parent.parent is None:
        return CarrierId(d.parent.name, d.name)
    return None


def display(name: str, member: str | None, kind: str) -> str:
    """A carrier as its chain shows it: a function or method called (`is_tbo_enabled()`), a
    global, a property (read as an attribute) or a definition named for the feature not."""
    if kind in ("global", "named", "property"):
        return name if member is None else f"{name}.{member}"
    return f"{name}()" if member is None else f"{name}.{member}()"


PROPERTY_RE = re.compile(r"[ \t]*@(?:functools\.)?(?:cached_)?property[ \t]*(?:#.*)?$")


def accessor_kind(f: PyFile, def_line: int) -> str:
    """ "property" for a def decorated `@property` (or a cached one), else "function"."""
    no = def_line - 1
    while no >= 1 and f.lines[no - 1].lstrip().startswith("@"):
        if PROPERTY_RE.match(f.lines[no - 1]):
            return "property"
        no -= 1
    return "function"


class DefByName(str):
    """A chain step reached because its name spells the feature (`model_forward_maybe_tbo`
    for tbo), not through a call or an import: stored as {"name", "by_name": true}."""

    __slots__ = ()


class DefByRead(str):
    """A definition named for the feature that also reads the carrier itself (a class whose
    `__init__` tests `is_tbo_enabled()`): reached through that read, not by its name; stored
    as {"name", "by_name": false}, a definition (unlike a model class step) all the same."""

    __slots__ = ()


class ModelStep(str):
    """A step in a model file's code: a model class deriving from or holding the one before
    (`DeepseekV2Model`, `self.model = Glm4MoeModel(…)`: ingest/model_classes.py), or a
    function or method of a model file carrying the value on. Stored as {"name", "model":
    true}, so that a reader finds the shared code a model reaches the flag through: the last
    step before them (kb.schema.chain_entry)."""

    __slots__ = ()


def stored_chain(chain: list[str] | tuple[str, ...]) -> list[Any]:
    """A chain as stored: each step its name, a DefByName one {"name", "by_name": true}, a
    DefByRead one {"name", "by_name": false}, a ModelStep {"name", "model": true}."""
    return [
        {"name": str(s), "by_name": isinstance(s, DefByName)}
        if isinstance(s, (DefByName, DefByRead))
        else {"name": str(s), "model": True}
        if isinstance(s, ModelStep)
        else s
        for s in chain
    ]


def find_carriers(text: str, read_lines: set[int]) -> list[dict[str, Any]]:
    """Globals assigned from a flag read and short functions returning one, in one file."""
    f = PyFile(text)
    aliases: frozenset[str] = frozenset()
    if "= get_global_server_args()" in text:
        aliases = frozenset(n.decode() for n in server_args_aliases(text.encode()))
    # By name and dests: an accessor of two carriers (`return not A and get_b().is_x()`)
    # carries each one's flags with its own chain.
    # (and by condition: one carrying a flag always and under a test of what callers pass)
    found: dict[tuple[str, str | None, tuple[str, ...], Cond], dict[str, Any]] = {}

    def add(
        name: str,
        member: str | None,
        kind: str,
        dests: list[str],
        chain: list[str],
        line: int,
        cond: Cond = (),
    ):
        key = (name, member, tuple(dests), cond)
        if key in found or not dests:
            return
        found[key] = {
            "name": name,
            "member": member,
            "kind": kind,
            "dests": list(dests),  # (a list _BLOCKS keeps may be another blob's too)
            "chain": [*chain, display(name, member, kind)],
            "line": line,
        }
        if cond:
            found[key]["cond"] = [list(c) for c in cond]

    done: set[int] = set()  # the def lines whose globals were looked for
    has_global = "global " in text
    declares = has_global and _declares_global(text)
    for line in sorted(read_lines):
        # A line gives a carrier only through a function declaring `global`, a `return`
        # near it or a module-level assignment: the others need no outline.
        if not declares and (not f.maybe_return(line) or not f.def_near(line)):
            if line > len(f.lines) or not GLOBAL_ASSIGN_RE.match(f.lines[line - 1]):
                continue
        d = f.enclosing(line)
        if d is None:
            m = GLOBAL_ASSIGN_RE.match(f.lines[line - 1]) if line <= len(f.lines) else None
            if m:
                try:
                    stmt = ast.parse(f.lines[line - 1]).body[0]
                except (SyntaxError, ValueError, RecursionError, IndexError):
                    continue
                if isinstance(getattr(stmt, "value", None), ast.Dict):
                    continue  # flags by key: its reads name the key (READ_RES of sites.py)
                add(m.group(1), None, "global", flag_reads(stmt, aliases), [], line)
            continue
        if d.kind != "def":
            continue
        # Only two kinds of function can make a carrier: one declaring `global`, and one short
        # enough to be an accessor. The others (most reads) are never parsed.
        # (no line can start with `global ` in a file without the word)
        if has_global and d.line not in done:  # the first read in this function
            done.add(d.line)
            block = f.lines[d.line - 1 : f.end_of(d)]
            key = ("globals", "\n".join(block), aliases)
            for g in _BLOCKS.get(key, partial(_globals, f, d, block, aliases)):
                add(g.name, None, "global", g.dests, [], d.line + g.line)
        returned = None
        if f.may_return_at(d, line):  # (the cheap test before any parse)
            at = ("returned", block_text(f, d), line - d.line, aliases)
            returned = _BLOCKS.get(at, partial(_return_dests, f, d, line, aliases))
        ident = _carrier_id(f, d)
        if returned is not None and ident is not None:
            kind = accessor_kind(f, d.line)
            add(ident.name, ident.member, kind, returned.dests, [], d.line, returned.cond)
    # Accessors of those carriers in the same file (is_tbo_enabled returns IS_TBO_ENABLED),
    # three deep: LayerScatterModes' _should_gather_for_tbo -> _compute_layer_output_mode
    # -> _compute_layer_input_mode -> init_new.
    for _round in range(3):
        before = len(found)
        patterns = _local_patterns(list(found.values()))
        for use in file_uses(f, patterns, accessors=True, blocks=_BLOCKS):
            if use.accessor is None:
                continue
            name, member = use.accessor
            for c in [c for c in found.values() if (c["name"], c["member"]) == use.carrier]:
                kind = "property" if use.prop else "function"
                if use.passes_on and not c.get("cond"):
                    continue
                if hops((*c["chain"], display(name, member, kind))) > MAX_CHAIN:
                    continue  # (as between files)
                passed = passed_cond(f, use, stored_cond(c))
                if passed is not None:
                    cond = cond_and(passed, use.cond)
                    add(name, member, kind, c["dests"], c["chain"], use.def_line, cond)
        if len(found) == before:
            break
    return list(found.values())


def _declares_global(text: str) -> bool:
    """Whether a line starts (after its indentation) with `global `."""
    at = text.find("global ")
    while at >= 0:
        start = text.rfind("\n", 0, at) + 1
        if start == at or text[start:at].isspace():
            return True
        at = text.find("global ", at + 1)
    return False


def _globals(f: PyFile, d: Def, block: list[str], aliases: frozenset[str]) -> list[AssignedGlobal]:
    """The globals a function declaring `global` assigns; none when no line of its block
    starts with `global `."""
    out: list[AssignedGlobal] = []
    if not any(b.lstrip().startswith("global ") for b in block):
        return out
    node = f.node(d)
    subs = list(ast.walk(node)) if node is not None else []  # one walk, used twice
    declared = {n for sub in subs if isinstance(sub, ast.Global) for n in sub.names}
    # Locals assigned from a flag (`enable = server_args.enable_x`, then `_FLAG = enable`):
    # a global assigned one of them carries its flag too. A local assigned from one flag
    # and otherwise only from no flag (`backend = env_backend`, a deprecated variable's
    # override) still holds that flag's value; changed from itself (`size = size * n`,
    # `size += 1`), it holds something else and is not followed.
    bound: dict[str, list[list[str]]] = defaultdict(list)
    for sub in subs:
        if isinstance(sub, ast.Assign) and len(sub.targets) == 1:
            t = sub.targets[0]
            if isinstance(t, ast.Name) and t.id not in declared:
                itself = any(isinstance(n, ast.Name) and n.id == t.id for n in ast.walk(sub.value))
                bound[t.id].append(["+"] if itself else flag_reads(sub.value, aliases))
        elif isinstance(sub, (ast.AugAssign, ast.AnnAssign)) and isinstance(sub.target, ast.Name):
            bound[sub.target.id].append(["+"])  # changed again: not followed
    local: dict[str, list[str]] = {}
    for name, assigned in bound.items():
        reading = [dests for dests in assigned if dests]
        if reading and "+" not in reading[0] and all(d == reading[0] for d in reading):
            local[name] = reading[0]
    for sub in subs:
        if isinstance(sub, (ast.Assign, ast.AnnAssign)) and sub.value is not None:
            if isinstance(sub.value, ast.Dict):
                continue  # flags by key (`global_server_args_dict`): its reads name the key
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id in declared:
                    dests = flag_reads(sub.value, aliases)
                    held = _held(sub.value)
                    if held is not None and held in local:
                        dests = local[held]
                    out.append(AssignedGlobal(target.id, dests, sub.lineno - 1))
    return out


def _held(value: ast.expr) -> str | None:
    """The local a value is, as is or converted (`Backend(backend)`, one argument to a
    named class or function): `X = Backend(backend)` holds what `backend` holds."""
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, (ast.Name, ast.Attribute))
        and len(value.args) == 1
        and not value.keywords
    ):
        value = value.args[0]
    return value.id if isinstance(value, ast.Name) else None


def _return_dests(f: PyFile, d: Def, line: int, aliases: frozenset[str]) -> ReturnedFlags | None:
    """The flags of the short function's `return` that holds `line`, if it makes `d` an
    accessor (a few flags, a small expression), with what its callers must pass for them
    to decide it (`_and_cond`)."""
    ret = f.returns_at(d, line)
    if ret is None or ret.value is None:
        return None
    dests = flag_reads(ret.value, aliases)
    if len(dests) <= MAX_DESTS and _size(ret.value) <= MAX_RETURN_NODES:
        node = f.node(d)
        params = set() if node is None else _parameters(node)
        return ReturnedFlags(dests, _and_cond(ret.value, params))
    return None


def _and_cond(value: ast.expr, params: set[str]) -> Cond:
    """The tests of what callers pass among the `and` terms of a returned value: `not
    ctx.is_layer_sparse and ctx.is_next_layer_sparse and server_args.x` decides by x only
    for a dense layer followed by a sparse one. (Such a term holds no use: it reads a
    parameter alone.)"""
    if not isinstance(value, ast.BoolOp) or not isinstance(value.op, ast.And):
        return ()
    tested = [_parameter_test(t, params) for t in value.values]
    return tuple(sorted({(t.name, t.truthy) for t in tested if t is not None and t.name}))


def _local_patterns(carriers: list[dict[str, Any]]) -> list[UsePattern]:
    """The patterns of the uses of a file's own carriers."""
    out: list[UsePattern] = []
    for c in carriers:
        cid = CarrierId(c["name"], c["member"])
        if c["member"] is None:
            out.append(UsePattern(c["name"], None, cid))
        else:
            for receiver in ("cls", "self", c["name"]):
                out.append(UsePattern(receiver, c["member"], cid))
    return list(dict.fromkeys(out))  # a name carrying two flags' values: one pattern


@dataclass(frozen=True)
class Use:
    carrier: CarrierId
    line: int
    text: str
    accessor: CarrierId | None  # the short function whose return it decides
    def_line: int
    prop: bool = False  # the accessor is a property
    returned: bool = True  # in that `return` itself (not in an `if` or a local deciding it)
    cond: Cond = ()  # what the accessor's callers must pass for the use to decide it
    # decides only by what the accessor passes on (`if cls._gather(context):`): only a
    # carrier conditional on what it is passed makes the accessor one (`passed_cond`)
    passes_on: bool = False


def file_uses(
    f: PyFile,
    patterns: list[UsePattern],
    accessors: bool = False,
    blocks: ByBlock | BlockMemo | None = None,
) -> list[Use]:
    """Uses of each pattern in code (not in imports, comments or
    triple-quoted strings). With `accessors`, only those in the `return` of a short
    function (`Use.accessor` set): the other hits are dropped before the costlier tests."""
    return [use for _pos, _name, use in file_hits(f, patterns, accessors, blocks)]


def file_hits(
    f: PyFile,
    patterns: list[UsePattern],
    accessors: bool = False,
    blocks: ByBlock | BlockMemo | None = None,
) -> list[tuple[int, str, Use]]:
    """file_uses, each use as (offset of the hit that found it, the receiver there, the
    use), in order (`blocks`: what earlier blobs' functions of the same text gave)."""
    if not patterns:
        return []
    by_name: dict[str, list[tuple[str | None, CarrierId]]] = defaultdict(list)
    for p in patterns:
        by_name[p.receiver].append((p.member, p.carrier))
    # str.find per name (C speed), then a small regex at each hit: an alternation of names
    # would make the regex engine try every position of the file.
    hits: list[tuple[int, str]] = []
    for name in by_name:
        pos = f.text.find(name)
        while pos >= 0:
            hits.append((pos, name))
            pos = f.text.find(name, pos + len(name))
    hits.sort()
    # The members looked for after a receiver that only has member patterns (`self`): a hit
    # followed by another attribute matches none of them, whatever its line.
    members_only = {
        name: {member for member, _cid in entries}
        for name, entries in by_name.items()
        if all(member is not None for member, _cid in entries)
    }
    out: list[tuple[int, str, Use]] = []
    seen: set[tuple[int, CarrierId]] = set()
    for pos, name in hits:
        before = f.text[pos - 1] if pos else " "
        m = ATTR_AFTER_RE.match(f.text, pos + len(name))
        if before.isalnum() or before in "_.\"'" or m is None:
            continue
        wanted = members_only.get(name)
        if wanted is not None and m.group(1) not in wanted:
            continue
        line = f.line_at(pos)
        if accessors and not _may_decide(f, line):
            continue  # (the same for every hit on the line)
        raw = f.lines[line - 1]
        stripped = raw.lstrip()
        if "#" in raw[: pos - (f.text.rfind("\n", 0, pos) + 1)]:
            continue
        if stripped.startswith(("from ", "import ", "global ")) or _in_import_block(f, line):
            continue
        if in_spans(f.strings, pos):
            continue  # `- experts: get_moe_impl_class(...)` in a docstring
        if re.match(r"(?:async\s+)?(?:def|class)\s", stripped):
            continue  # the definition itself
        for member, cid in by_name[name]:
            if member is not None and m.group(1) != member:
                continue
            if (line, cid) in seen:
                continue
            seen.add((line, cid))
            accessor, def_line, prop, returned, passes_on = None, line, False, True, False
            cond: Cond = ()
            if _may_decide(f, line):  # cheap test before finding the enclosing function
                d = f.enclosing(line)
                decided = None if d is None else _decision(f, d, line, blocks)
                if d is not None and decided is not None:
                    ident = _carrier_id(f, d)
                    if ident is not None and ident != cid:
                        accessor, def_line, cond = ident, d.line, decided.cond
                        passes_on, returned = decided.passes_on, decided.returned
                        prop = accessor_kind(f, d.line) == "property"
            if accessor is not None or not accessors:
                text = f.text_of(line)
                use = Use(cid, line, text, accessor, def_line, prop, returned, cond, passes_on)
                out.append((pos, name, use))
    return out


# A line that may decide a short function's return without holding it: an `if` guarding a
# `return`, or a local name assigned (`backend = get_moe_runner_backend()`).
GUARD_OR_LOCAL_RE = re.compile(r"\s*(?:(?:el)?if\s|[A-Za-z_]\w*\s*(?::[^=]*)?=[^=])")
# An `if (` whose test goes on over the next lines (`if (\n not get_a2a_backend().is_none()`)
OPEN_TEST_RE = re.compile(r"\s*(?:el)?if\s*\(\s*(?:#.*)?$")


def _may_decide(f: PyFile, line: int) -> bool:
    """Cheap test (no outline) for decides_return: a `return` at or just above the line, or
    a guard or local in the first lines of a function short enough to be an accessor."""
    if f.maybe_return(line):
        return True
    if not 0 < line <= len(f.lines):
        return False
    if GUARD_OR_LOCAL_RE.match(f.lines[line - 1]) is None and not any(
        OPEN_TEST_RE.match(f.lines[no - 1]) for no in range(max(1, line - 4), line)
    ):
        return False
    return f.def_near(line)


class ByBlock:
    """Results derived from a function's block alone (its text from the `def` line on,
    lines relative to it), for one file: the next blob of a file mostly keeps the text of
    its functions, whose blocks need not be parsed again. `before`: the previous blob's;
    a lookup keeps what it finds for the next one."""

    def __init__(self, before: dict[tuple[Any, ...], Any] | None = None) -> None:
        self.now: dict[tuple[Any, ...], Any] = {}
        self.before = before or {}

    def get(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        if key in self.now:
            return self.now[key]
        found = self.before[key] if key in self.before else make()
        self.now[key] = found
        return found


class BlockMemo:
    """Results derived from a function's block alone, as ByBlock keeps them for one file,
    kept for every blob a worker analyzes (find_carriers): the versions of a file mostly
    share the text of their functions, whose blocks need not be parsed again in each.
    A key's second item, the block's text, is kept as a 128-bit digest (the texts of a
    full memo would be ~3 MiB of the worker's memory); emptied when full."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.found: dict[tuple[Any, ...], Any] = {}

    def get(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        digest = hashlib.blake2b(key[1].encode(), digest_size=16).digest()
        kept = (key[0], digest, *key[2:])
        if kept in self.found:
            return self.found[kept]
        if len(self.found) >= self.size:
            self.found.clear()
        found = self.found[kept] = make()
        return found


# The 124 real tags' analysis finds ~1,200 blocks of functions with reads in each worker
# (~60% of them met before), a few results per block.
_BLOCKS = BlockMemo(2048)


def block_text(f: PyFile, d: Def) -> str:
    return "\n".join(f.lines[d.line - 1 : f.end_of(d)])


def _decision(f: PyFile, d: Def, line: int, blocks: ByBlock | BlockMemo | None) -> Decision | None:
    """decides_return, kept in `blocks` by the function's text."""

    def make() -> Decision | None:
        return decides_return(f, d, line)

    if blocks is None:
        return make()
    # (decides_return and returns_at read the block's lines, its kind and parse alone)
    key = ("decides", block_text(f, d), d.kind, line - d.line)
    return blocks.get(key, make)  # type: ignore[no-any-return]


def decides_return(f: PyFile, d: Def, line: int) -> Decision | None:
    """What `line` decides of what the short function `d` returns: None if nothing. It
    decides when it is in a `return`,
    or, where every `return` of the function is small, in the small test of an `if` that
    returns at once (`if backend.is_deep_gemm(): return True`) or in the value of a local
    name assigned once and used in one of those (`backend = get_moe_runner_backend()`).
    Such a test or local counts only at the top of the function's body, or at the top of a
    branch of a top-level `if` testing a parameter (`context.is_layer_sparse`, `not x`,
    `ctx["x"]`): the use then decides only for callers that make the test true, and the
    condition names the tested attribute or parameter (`is_layer_sparse` truthy), for the
    call sites to check (`init_new(is_layer_sparse=False, ...)` makes it false). A test of
    the server args (`if server_args.enable_dp_attention:`) is a flag's, whatever the caller
    passes: no condition. A test or local reading a parameter itself (`if
    cls._should_gather(context):`) decides nothing: what it depends on is not named; unless
    it passes the parameter on whole to the carrier (at any depth of the function), when
    it decides where the carrier's own condition says (True with the condition: only a
    conditional carrier names it, `passed_cond`)."""
    ret = f.returns_at(d, line)
    node = f.node(d)
    rel = line - d.line + 1
    if ret is not None:
        if ret.value is None:
            return None
        # a `return` under `if context.is_layer_sparse:` (or its `else:`) decides only for
        # the callers making that branch run, as a guard there does; one `and`-ed with
        # such tests, only for the callers making them true
        params = set() if node is None else _parameters(node)
        branches = [] if node is None else _parameter_branches(node, params)
        inside = (b.cond for b in branches if any(ret in ast.walk(s) for s in b.body))
        return Decision(cond_and(next(inside, ()), _and_cond(ret.value, params)), False, True)
    if d.kind != "def" or f.end_of(d) - d.line > MAX_ACCESSOR_LINES:
        return None
    if node is None:
        return None
    stmts = _own_statements(node)
    returns = [s for s in stmts if isinstance(s, ast.Return)]
    # (a bare `return` under `if not enabled:` decides what the function does, not a value)
    if not returns or any(r.value is None or _size(r.value) > MAX_RETURN_NODES for r in returns):
        return None
    params = _parameters(node)
    branches = _parameter_branches(node, params)
    # A test passing the parameters on whole (`if cls._should_gather(context): return X`),
    # at any depth: it decides under the callee's own condition, on names the call passes on
    # (`passed_cond`), that the carrier brings.
    for s in stmts:
        if (
            isinstance(s, ast.If)
            and _spans(s.test, rel)
            and isinstance(s.body[0], ast.Return)
            and _passes_on(s.test, params)
        ):
            inside = (b.cond for b in branches if any(s in ast.walk(x) for x in b.body))
            return Decision(next(inside, ()), True, False)
    top: dict[ast.stmt, Cond] = {s: () for s in _top_statements(getattr(node, "body", []))}
    for body, cond in branches:
        for inner in _top_statements(body):
            top.setdefault(inner, cond)
    # each returned value with the condition of the branch holding its `return`
    values = [
        (r.value, next((b.cond for b in branches if any(r in ast.walk(x) for x in b.body)), ()))
        for r in returns
        if r.value is not None
    ]
    # The tests of those `if`s whose body returns at once (a use in a returned value was
    # the `return` case above: a value on the line of `if ctx.x and y(): return True` is no
    # way around the test's parameter), then with the returned values, what a local feeds.
    tests = [
        (s.test, cond)
        for s, cond in top.items()
        if isinstance(s, ast.If) and isinstance(s.body[0], ast.Return)
        and _size(s.test) <= MAX_RETURN_NODES and not _reads(s.test, params)
    ]  # fmt: skip
    for e, cond in tests:
        if _spans(e, rel):
            return Decision(cond, False, False)
    deciding: list[tuple[ast.expr, Cond]] = [*values, *tests]
    assigned: dict[str, list[ast.stmt]] = defaultdict(list)
    for s in stmts:
        if isinstance(s, ast.Assign):
            targets = s.targets
        elif isinstance(s, (ast.AugAssign, ast.AnnAssign, ast.For)):
            targets = [s.target]
        else:
            continue
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name):
                    assigned[n.id].append(s)
    for name, where in assigned.items():
        s = where[0]
        if len(where) != 1 or s not in top or not isinstance(s, ast.Assign):
            continue
        if not _spans(s.value, rel) or _reads(s.value, params):
            continue
        if _size(s.value) > MAX_RETURN_NODES:
            continue
        # the condition of the use deciding the least
        conds = [
            cond for e, cond in deciding
            if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(e))
        ]  # fmt: skip
        if conds:
            return Decision(cond_and(top[s], min(conds, key=len)), False, False)
    return None


def _passes_on(test: ast.expr, params: set[str]) -> bool:
    """A test that is a call (or `not` one) of something not read from a parameter, given
    parameters whole (`context`) or a parameter's method's result (`context.previous_layer()`)
    and nothing else of them."""
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    if not isinstance(test, ast.Call) or _reads(test.func, params) or not params:
        return False
    passed = [*test.args, *(k.value for k in test.keywords)]
    whole = [a for a in passed if _passed_param(a, params)]
    return bool(whole) and not any(_reads(a, params) for a in passed if a not in whole)


def _passed_param(arg: ast.expr, params: set[str]) -> bool:
    """`context` or `context.previous_layer()`, `context` a parameter."""
    if isinstance(arg, ast.Call) and not arg.args and not arg.keywords:
        if not isinstance(arg.func, ast.Attribute):
            return False
        arg = arg.func.value
    return isinstance(arg, ast.Name) and arg.id in params


def _parameter_branches(node: ast.AST, params: set[str]) -> list[Branch]:
    """The branches of the top-level `if`s of a function testing a parameter, each with
    what its callers must pass for it to run: `if context.is_layer_sparse:` gives its body
    `is_layer_sparse` truthy and its `else:` falsy; a test of the server args, no condition."""
    out: list[Branch] = []
    body = getattr(node, "body", [])
    for s in _top_statements(body):
        tested = _parameter_test(s.test, params) if isinstance(s, ast.If) else None
        if tested is None or not isinstance(s, ast.If):
            continue
        name, truthy = tested.name, tested.truthy
        branches = [(s.body, truthy)]
        if not (len(s.orelse) == 1 and isinstance(s.orelse[0], ast.If)):  # (elif: top)
            branches.append((s.orelse, not truthy))
        # An early return (`if context.layer_id == 0: return X`): what follows it runs only
        # for the callers making the test false.
        if s in body and not s.orelse and isinstance(s.body[-1], ast.Return):
            branches.append((body[body.index(s) + 1 :], not truthy))
        out.extend(Branch(b, () if name is None else ((name, want),)) for b, want in branches)
    return out


def _parameter_test(test: ast.expr, params: set[str]) -> ParameterTest | None:
    """What an `if` tests of a parameter: `ctx.x`, `ctx["x"]`, `x` (its name), `not` one
    of them (falsy); a test of the server args names none. None for any other test."""
    truthy = True
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, truthy = test.operand, not truthy
    # `ctx.layer_id == 0` is `not ctx.layer_id` (`!= 0`: itself)
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Eq, ast.NotEq))
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == 0
        and not isinstance(test.comparators[0].value, bool)
    ):
        truthy = truthy == isinstance(test.ops[0], ast.NotEq)
        test = test.left
    if isinstance(test, ast.Name):
        return ParameterTest(test.id, truthy) if test.id in params else None
    base = getattr(test, "value", None)
    if not isinstance(base, ast.Name) or base.id not in params:
        return None
    if isinstance(test, ast.Attribute):  # (`args.x`: a parameter holding the server args)
        args = _is_args(base) or base.id in ARGS_RECEIVERS
        return ParameterTest(None if args else test.attr, truthy)
    if isinstance(test, ast.Subscript) and isinstance(test.slice, ast.Constant):
        key = test.slice.value
        return ParameterTest(key, truthy) if isinstance(key, str) else None
    return None


def _parameters(node: ast.AST) -> set[str]:
    """A function's parameter names but `self` and `cls` (what its callers choose)."""
    a = getattr(node, "args", None)
    if a is None:
        return set()
    names = {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if p}
    return names - {"self", "cls"}


def _reads(expr: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(expr))


def _top_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of a block and of its top-level `elif`/`else` chains."""
    out: list[ast.stmt] = []
    todo: list[ast.stmt] = list(body)
    while todo:
        s = todo.pop(0)
        out.append(s)
        if isinstance(s, ast.If) and len(s.orelse) == 1 and isinstance(s.orelse[0], ast.If):
            todo.insert(0, s.orelse[0])  # elif: as much at the top as its `if`
    return out


def _spans(node: ast.AST, rel: int) -> bool:
    end = getattr(node, "end_lineno", None) or node.lineno  # type: ignore[attr-defined]
    return node.lineno <= rel <= end  # type: ignore[attr-defined]


def _own_statements(node: ast.AST) -> list[ast.stmt]:
    """The statements of a function's block, nested blocks included, nested functions and
    classes (whose returns are theirs) left out."""
    out: list[ast.stmt] = []
    todo: list[Any] = list(getattr(node, "body", []))
    while todo:
        s = todo.pop()
        if isinstance(s, ast.stmt):
            out.append(s)
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for block in ("body", "orelse", "finalbody", "handlers"):  # (handlers: their body)
            todo.extend(getattr(s, block, []))
    out.sort(key=lambda s: s.lineno)
    return out


def _in_import_block(f: PyFile, line: int) -> bool:
    """Inside the parentheses of a multi-line `from X import (...)`."""
    for back in range(line - 1, max(0, line - 60), -1):
        text = f.lines[back - 1]
        if ")" in text and "import" not in text:
            return False
        if re.match(r"\s*from\s+\S+\s+import\s*\(", text):
            return ")" not in text or back == line
        if not text.startswith((" ", "\t")) and text.strip():
            return False
    return False


def names_feature(word: str, dest: str) -> bool:
    """Whether a feature word stands for the flag: the acronym of three or more consecutive
    words of its dest (tbo: enable_two_batch_overlap), or the whole dest after enable_/
    disable_ (lora: enable_lora). Plain words (model, config, runner) never do."""
    words = [w for w in dest.split("_") if w]
    if words and words[0] in ("enable", "disable", "use"):
        words = words[1:]
    if words == [word]:
        return True
    for i in range(len(words)):
        for j in range(i + 3, len(words) + 1):
            if "".join(w[0] for w in words[i:j]) == word:
                return True
    return False


@lru_cache(maxsize=65536)
def topic(name: str) -> str | None:
    """The one feature word a carrier's name spells: is_tbo_enabled / IS_TBO_ENABLED /
    SboFlags -> "tbo" / "tbo" / "sbo"; None when it spells none or several."""
    words = [w for w in name_words(name) if w not in STOP_WORDS]
    return words[0] if len(words) == 1 and len(words[0]) >= 3 else None


@lru_cache(maxsize=65536)
def name_words(name: str) -> tuple[str, ...]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    spaced = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", spaced)
    return tuple(w.lower() for w in spaced.split("_") if w)


# --- the call of a carrier: what it passes on --------------------------------------------


def passed_cond(f: PyFile, use: Use, cond: Cond) -> Cond | None:
    """A conditional carrier's condition as the function calling it at `use` gets it: the
    same names where the call passes its parameter on whole (`cls._output_mode(context)`);
    where it passes `context.previous_layer()`, a method defined once in the file returning
    `Ctx(is_layer_sparse=self.is_previous_layer_sparse, is_next_layer_sparse=
    self.is_layer_sparse, ...)`, each name becomes the one it is built from (the previous
    layer's sparsity is the caller's `is_previous_layer_sparse`), a name built from a
    literal that makes its test true is dropped. None when the call cannot pass the
    condition on (a literal making a test false; a method not found, or defined twice; a
    name it does not build from `self.x`)."""
    if not cond:
        return cond
    name, member = use.carrier  # (a file's own method is called on `cls` or `self` too)
    receivers = [name] if member is None else [name, "cls", "self"]
    calls = (call_of(f, use.line, (r, member)) for r in receivers)
    call = next((c for c in calls if c is not None), None)
    d = f.enclosing(use.line)
    caller = f.node(d) if call is not None and d is not None else None
    params = set() if caller is None else _parameters(caller)
    passed = [] if call is None else [*call.args, *(k.value for k in call.keywords)]
    shifted = [a for a in passed if isinstance(a, ast.Call) and _passed_param(a, params)]
    if not shifted:
        return cond
    method = shifted[0].func.attr  # type: ignore[attr-defined]
    defs = [x for x in f.defs if x.name == method and x.kind == "def"]
    node = f.node(defs[0]) if len(defs) == 1 else None
    rets = [s for s in _own_statements(node) if isinstance(s, ast.Return)] if node else []
    built = rets[0].value if len(rets) == 1 else None
    if not isinstance(built, ast.Call):
        return None
    out: list[tuple[str, bool]] = []
    for name, want in cond:
        value = next((k.value for k in built.keywords if k.arg == name), None)
        if isinstance(value, ast.Constant):
            if bool(value.value) != want:
                return None
        elif isinstance(value, ast.Attribute) and target_key(value) == f"self.{value.attr}":
            out.append((value.attr, want))
        else:
            return None
    return tuple(sorted(set(out)))


def target_key(node: ast.AST) -> str | None:
    """`x` or `self.x` as written; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}" if node.value.id == "self" else None
    return None


def call_of(f: PyFile, line: int, carrier: tuple[str, str | None]) -> ast.Call | None:
    """The first call of `alias(` or `alias.member(` on `line` (over the lines it spans,
    MAX_ACCESSOR_LINES at most); None when there is none. Kept with the file: a call of
    `init_new` is checked once per conditional carrier of it (five in the layer modes)."""
    key = (f"call {carrier[0]}.{carrier[1]}", line)
    if key not in f.memo:
        f.memo[key] = _call_of(f, line, carrier)
    return f.memo[key]  # type: ignore[no-any-return]


def _call_of(f: PyFile, line: int, carrier: tuple[str, str | None]) -> ast.Call | None:
    alias, member = carrier
    ref = re.escape(alias) + ("" if member is None else rf"\s*\.\s*{re.escape(member)}")
    text = "\n".join(f.lines[line - 1 : line - 1 + MAX_ACCESSOR_LINES])
    m = re.search(rf"(?<![\w.]){ref}\s*\(", text)
    return None if m is None else parse_call(text, m.start(), m.end() - 1)


def parse_call(text: str, start: int, i: int) -> ast.Call | None:
    """The call written from `start`, its `(` at `i`, to the bracket closing it."""
    depth, end = 0, -1
    while i < len(text) and end < 0:
        char = text[i]
        if char == "#":  # a comment's brackets (a string's are taken: rare in a call)
            i = text.find("\n", i) % (len(text) + 1)
            continue
        depth += char in "([{"
        depth -= char in ")]}"
        i += 1
        if depth == 0:
            end = i
    try:
        call = ast.parse(text[start:end], mode="eval").body if end > 0 else None
    except (SyntaxError, ValueError, RecursionError):
        return None
    return call if isinstance(call, ast.Call) else None


MEMBER_STEP_RE = re.compile(r"\w+\.\w+(?:\(\))?")  # `Cls.method()`, `Cls.prop`


@lru_cache(maxsize=65536)
def hops(chain: tuple[str, ...]) -> int:
    """The links of a chain that MAX_CHAIN counts: a method or property returning another of
    its own class (`X._is_v2` returning `not self._is_v1`) is the class's own wording of
    the value, not a further hop."""
    out, last = 0, None
    for link in chain:
        owner = link.split(".")[0] if MEMBER_STEP_RE.fullmatch(link) else None
        out += owner is None or owner != last
        last = owner
    return out
