"""Indirect reads: where a flag's value travels after its first read, with the chain.

SGLang often reads a flag once into something else and uses that elsewhere:
`IS_TBO_ENABLED = server_args.enable_two_batch_overlap` (a module global), `is_tbo_enabled()`
returning it (an accessor), `SboFlags.enable_...()` class methods returning an expression of
it, then functions named for the feature (`model_forward_maybe_tbo`) that model files call.

Two phases, like the rest of the ingest:
- per blob (`scan_structure`, in the workers, cached): the file's `from X import ...` lines,
  its `EntryClass`, and the *carriers* it defines from its own direct reads (globals assigned
  from a read, short functions whose `return` reads a flag or such a global).
- per version (`resolve`): carriers are followed through the imports of every module (a name
  bound to two different things in one file is not followed) to the files that use them, up
  to MAX_CHAIN links (`hops`). A use deciding what a short function returns (in its
  `return`, in an `if` returning at once, in a local used there) makes that function a
  carrier too; in a module that uses a carrier whose name spells a feature (`tbo`), the
  module's top-level definitions named for that feature (`model_forward_maybe_tbo`) are
  followed as well. Everything else is a use site, recorded with its chain, never followed.
  A carrier deciding only under a test of what its callers pass (`if
  context.is_layer_sparse:`, or `and`-ed with one in its return: `not
  context.is_layer_sparse and context.is_next_layer_sparse and ...`) carries that
  condition on, through a test passing the context on whole (`if
  cls._should_gather_for_tbo(context):`) and through a method of the file building another
  context from this one's fields (`context.previous_layer()`: the previous layer's
  `is_layer_sparse` is this one's `is_previous_layer_sparse`); a call of it is a use site
  only if it passes the tested names without making a test false (`is_layer_sparse=False`),
  nor two of them true only in branches that never both run.
- then model classes (ingest/model_classes.py): from the classes of model files holding a
  use, to the classes deriving from them or holding an instance of them (`self.model =
  X(...)`).

Only files that import a carrier are read in the second phase, and only the blocks around
the uses are parsed.
"""

from __future__ import annotations

import ast
import re
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations, groupby, product
from typing import Any

from ingest.chunks import Piece, marker
from ingest.model_classes import Args, Guard, ModelClasses, Sites, Target
from ingest.pyfile import MAX_ACCESSOR_LINES, Def, Outline, PyFile, outline
from ingest.sites import in_spans, server_args_aliases
from kb.pyast import ARGS_RECEIVERS

# Led by the literal "from " and only sglang's or relative modules, the only ones followed.
IMPORT_RE = re.compile(rb"from (\.+[\w.]*|sglang[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)")
COMMENT_RE = re.compile(rb"#[^\n]*")
IMPORT_AS_RE = re.compile(rb"import[ \t]+(sglang(?:\.\w+)+)[ \t]+as[ \t]+(\w+)[ \t]*(?:#|\n|$)")
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


def both(a: Cond, b: Cond) -> Cond:
    return a if not b else b if not a else tuple(sorted({*a, *b}))


def stored_cond(raw: dict[str, Any]) -> Cond:
    """The condition of a carrier as scan_structure stores it (only when it has one)."""
    return tuple((str(name), bool(want)) for name, want in raw.get("cond", ()))


# --- per blob ------------------------------------------------------------------------------


def scan_structure(
    data: bytes,
    reads: list[list[Any]],
    path: str | None = None,
    pieces: Callable[[], list[Piece] | None] | None = None,
) -> dict[str, Any]:
    """`path` keeps what the file's functions gave for the next version of the path (a
    worker analyzes the versions of a path oldest first); `pieces` gives the blob's pieces
    (ingest/chunks.py) if they are cut, whose outlines are kept with them."""
    cut = pieces() if pieces is not None else None
    found = _piece_imports(cut) if cut is not None else None
    out: dict[str, Any] = {"imports": _imports(data) if found is None else found}
    if b"EntryClass" in data:
        out["entry"] = _entry_classes(data)
    read_lines = {line for _name, line, access in reads if access == "read"}
    if read_lines and _may_carry(data, read_lines):
        memo = None if path is None else BlockMemo(_BLOCKS.pop(path, {}))
        lines = None if cut is None else lambda: piece_outline(cut)
        out["carriers"] = find_carriers(data.decode("utf-8", "replace"), read_lines, memo, lines)
        if memo is not None and memo.new:
            _BLOCKS[path] = memo.new  # type: ignore[index]
            while len(_BLOCKS) > MEMO_PATHS:
                _BLOCKS.pop(next(iter(_BLOCKS)))
    return out


@dataclass
class _Block:
    """What one function gave find_carriers, lines relative to its `def` line: the
    globals it assigns from flags (name, dests, line), and per read line the dests of the
    short `return` holding it (None: no such return)."""

    globals: list[tuple[str, list[str], int]] | None = None
    returns: dict[int, tuple[list[str], Cond] | None] = field(default_factory=dict)


@dataclass
class BlockMemo:
    """The functions of the last version of a path (by the text of their block) and those
    of this one. A block's results depend on its text (keyed with the file's local names
    of the server args) alone; what depends on where it stands (the class holding it, its
    line) is applied on reuse."""

    old: dict[str, _Block]
    new: dict[str, _Block] = field(default_factory=dict)

    def block(self, text: str) -> _Block:
        found = self.new.get(text)
        if found is None:
            found = self.new[text] = self.old.get(text) or _Block()
        return found


# path -> block text -> results: the paths analyzed last in this worker, one version each.
_BLOCKS: dict[str, dict[str, _Block]] = {}
MEMO_PATHS = 512


def piece_outline(pieces: list[Piece]) -> Outline:
    """The outline of a blob (pyfile.outline) from its pieces', each found once per text."""
    out: Outline = []
    for first, text, results in pieces:
        found = results.get(OUTLINE)
        if found is None:
            has = b"def" in text or b"class" in text
            found = results[OUTLINE] = outline(text.decode("utf-8", "replace")) if has else []
        if found:
            by = first - 1
            out += [(line + by, indent, kind, name) for line, indent, kind, name in found]
    return out


OUTLINE = "indirect.outline"  # a piece's outline, lines relative to the piece


def _may_carry(data: bytes, read_lines: set[int]) -> bool:
    """Cheap test before any parsing: a carrier needs a `global` statement, a read at module
    level, or a `return` on or just above a read."""
    if b"global " in data:
        return True
    lines = data.split(b"\n", max(read_lines))  # the lines up to the last read (and the rest)
    for no in read_lines:
        if no <= len(lines) and not lines[no - 1][:1].isspace():
            return True
        if any(lines[i - 1].lstrip().startswith(b"return") for i in range(max(1, no - 6), no + 1)):
            return True
    return False


IMPORTS = "indirect.imports"  # a piece's (_imports's two parts) or one of these markers:
NO_IMPORTS = marker(("no imports",))
OPEN_IMPORT = marker(("an import's brackets may close past the end",))


def _piece_imports(pieces: list[Piece]) -> list[list[Any]] | None:
    """_imports of the blob from its pieces', each found once per text in a path's history
    (lines relative to the piece); None when an import's `(` is not closed in its piece."""
    froms: list[list[Any]] = []
    others: list[list[Any]] = []
    for first, text, results in pieces:
        got = results.get(IMPORTS)
        if got is None:
            got = results[IMPORTS] = _import_parts(text) if b"import" in text else NO_IMPORTS
        if got is NO_IMPORTS:
            continue
        if got is OPEN_IMPORT:
            return None
        by = first - 1
        flat = got[0]
        for at, line in zip(flat[::2], flat[1::2], strict=True):
            froms += [[module, name, alias, line + by] for module, name, alias in _items(text, at)]
        others += [[module, name, alias, line + by] for module, name, alias, line in got[1]]
    return froms + others


def _import_parts(text: bytes) -> Any:
    """_imports of a piece alone as (offset, line, offset, line, ... of the `from` imports
    in an array, [module, name, alias, line] of each `import ... as` in tuples): a
    statement's items are read again from its offset (holding them, or a tuple each, cost
    a worker a few MB of memo); OPEN_IMPORT when a `(` of
    IMPORT_RE finds no `)` in the piece (in the blob it may find one in a later piece, and
    the match hide what lies between); NO_IMPORTS when none."""
    found = _import_lists(text, piece=True)
    if found is None:
        return OPEN_IMPORT
    froms, others = found
    if not froms and not others:
        return NO_IMPORTS
    return array("I", [n for pair in froms for n in pair]), tuple(map(tuple, others))


def _imports(data: bytes) -> list[list[Any]]:
    """[module, name, alias, line] of `from M import a, b as c` where M is sglang's or
    relative."""
    found = _import_lists(data)
    assert found is not None  # (only a piece's can be open)
    froms, others = found
    out = [
        [module, name, alias, line]
        for at, line in froms
        for module, name, alias in _items(data, at)
    ]
    return out + others


def _import_lists(data: bytes, piece: bool = False) -> tuple[list[Any], list[Any]] | None:
    """_imports as ((offset, line) of each `from` import, the `import sglang.x as y` ones);
    with `piece`, None when a `from` import's `(` is not closed in `data`."""
    froms: list[tuple[int, int]] = []
    others: list[list[Any]] = []
    if b"import" not in data:
        return froms, others
    line, pos = 1, 0
    for m in IMPORT_RE.finditer(data):
        if piece and m.group(2)[:1] == b"(" and b")" not in m.group(2):
            return None
        at = m.start()
        start = data.rfind(b"\n", 0, at) + 1
        if start != at and data[start:at].strip(b" \t"):
            continue  # not at the start of a line
        line += data.count(b"\n", pos, at)
        pos = at
        froms.append((at, line))
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


def _items(data: bytes, at: int) -> list[tuple[str, str, str]]:
    """The (module, name, alias) of the `from` import IMPORT_RE matches at `at`."""
    m = IMPORT_RE.match(data, at)
    assert m is not None
    text = m.group(0)
    items = _IMPORT_ITEMS.get(text)
    if items is None:
        if len(_IMPORT_ITEMS) >= MAX_IMPORT_ITEMS:
            _IMPORT_ITEMS.clear()
        items = _IMPORT_ITEMS[text] = _import_items(m)
    return items


# An import statement's text -> its (module, name, alias): the same statements recur in
# every version of a path (a worker sees a path's versions one after another). The 124 real
# tags have 8,918 distinct ones, ~950 bytes each with their items (8.2 MiB in all); 2,048 at
# most (~1.9 MiB) keeps the same speed (emptied when full).
_IMPORT_ITEMS: dict[bytes, list[tuple[str, str, str]]] = {}
MAX_IMPORT_ITEMS = 2048


def _import_items(m: re.Match[bytes]) -> list[tuple[str, str, str]]:
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
            out.append((module, parts[0].decode(), parts[0].decode()))
        elif len(parts) == 3 and parts[1] == b"as":
            out.append((module, parts[0].decode(), parts[2].decode()))
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


def _carrier_id(f: PyFile, d: Def) -> tuple[str, str | None] | None:
    """(exported name, member) of a module-level function or a method of a module-level
    class; None for nested functions."""
    if d.parent is None:
        return d.name, None
    if d.parent.kind == "class" and d.parent.parent is None:
        return d.parent.name, d.name
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


class Named(str):
    """A chain step reached because its name spells the feature (`model_forward_maybe_tbo`
    for tbo), not through a call or an import: stored as {"name", "by_name": true}."""

    __slots__ = ()


class NamedRead(str):
    """A definition named for the feature that also reads the carrier itself (a class whose
    `__init__` tests `is_tbo_enabled()`): reached through that read, not by its name; stored
    as {"name", "by_name": false}, a definition (unlike a model class step) all the same."""

    __slots__ = ()


def stored_chain(chain: list[str] | tuple[str, ...]) -> list[Any]:
    """A chain as stored: each step its name, a Named one {"name", "by_name": true}, a
    NamedRead one {"name", "by_name": false}."""
    return [
        {"name": str(s), "by_name": isinstance(s, Named)}
        if isinstance(s, (Named, NamedRead))
        else s
        for s in chain
    ]


def find_carriers(
    text: str,
    read_lines: set[int],
    memo: BlockMemo | None = None,
    lines: Callable[[], Outline] | None = None,
) -> list[dict[str, Any]]:
    """Globals assigned from a flag read and short functions returning one, in one file.
    With `memo`, a function whose block is unchanged since the last version is not parsed
    again; `lines` gives the text's outline when the caller has a cheaper way to it."""
    f = PyFile(text, lines)
    aliases: frozenset[str] = frozenset()
    if "= get_global_server_args()" in text:
        aliases = frozenset(n.decode() for n in server_args_aliases(text.encode()))
    alias_key = "\n#aliases " + " ".join(sorted(aliases)) if aliases else ""
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
            "dests": dests,
            "chain": [*chain, display(name, member, kind)],
            "line": line,
        }
        if cond:
            found[key]["cond"] = [list(c) for c in cond]

    done: dict[int, _Block] = {}  # def line -> what its block gives
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
        known = done.get(d.line)
        if known is None:  # the first read in this function
            block = f.lines[d.line - 1 : f.end_of(d)] if memo is not None or has_global else []
            key = "\n".join(block) + alias_key  # what a block gives depends on the aliases
            known = done[d.line] = memo.block(key) if memo is not None else _Block()
            if known.globals is None:
                known.globals = _globals(f, d, block, aliases) if has_global else []
            for name, assigned, at in known.globals:
                add(name, None, "global", assigned, [], d.line + at)
        rel = line - d.line
        if rel not in known.returns:
            known.returns[rel] = _return_dests(f, d, line, aliases)
        ident = _carrier_id(f, d)
        returned = known.returns[rel]
        if returned is not None and ident is not None:
            add(ident[0], ident[1], accessor_kind(f, d.line), returned[0], [], d.line, returned[1])
    # Accessors of those carriers in the same file (is_tbo_enabled returns IS_TBO_ENABLED),
    # three deep: LayerScatterModes' _should_gather_for_tbo -> _compute_layer_output_mode
    # -> _compute_layer_input_mode -> init_new.
    for _round in range(3):
        before = len(found)
        for use in file_uses(f, _local_patterns(list(found.values())), accessors=True):
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
                    cond = both(passed, use.cond)
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


def _globals(
    f: PyFile, d: Def, block: list[str], aliases: frozenset[str]
) -> list[tuple[str, list[str], int]]:
    """(name, dests, line relative to `def`) of each global a function declaring `global`
    assigns; none when no line of its block starts with `global `."""
    out: list[tuple[str, list[str], int]] = []
    if not any(b.lstrip().startswith("global ") for b in block):
        return out
    node = f.node(d)
    subs = list(ast.walk(node)) if node is not None else []  # one walk, used twice
    declared = {n for sub in subs if isinstance(sub, ast.Global) for n in sub.names}
    # Locals assigned once from a flag (`enable = server_args.enable_x`, then
    # `_FLAG = enable`): a global assigned one of them carries its flag too.
    bound: dict[str, list[list[str]]] = defaultdict(list)
    for sub in subs:
        if isinstance(sub, ast.Assign) and len(sub.targets) == 1:
            t = sub.targets[0]
            if isinstance(t, ast.Name) and t.id not in declared:
                bound[t.id].append(flag_reads(sub.value, aliases))
        elif isinstance(sub, (ast.AugAssign, ast.AnnAssign)) and isinstance(sub.target, ast.Name):
            bound[sub.target.id].append([])  # changed again: not followed
    local = {name: dests[0] for name, dests in bound.items() if len(dests) == 1 and dests[0]}
    for sub in subs:
        if isinstance(sub, (ast.Assign, ast.AnnAssign)) and sub.value is not None:
            if isinstance(sub.value, ast.Dict):
                continue  # flags by key (`global_server_args_dict`): its reads name the key
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id in declared:
                    dests = flag_reads(sub.value, aliases)
                    if isinstance(sub.value, ast.Name) and sub.value.id in local:
                        dests = local[sub.value.id]
                    out.append((target.id, dests, sub.lineno - 1))
    return out


def _return_dests(
    f: PyFile, d: Def, line: int, aliases: frozenset[str]
) -> tuple[list[str], Cond] | None:
    """The dests of the short function's `return` that holds `line`, if it makes `d` an
    accessor (a few flags, a small expression), with what its callers must pass for them
    to decide it (`_and_cond`)."""
    ret = f.returns_at(d, line)
    if ret is None or ret.value is None:
        return None
    dests = flag_reads(ret.value, aliases)
    if len(dests) <= MAX_DESTS and _size(ret.value) <= MAX_RETURN_NODES:
        node = f.node(d)
        params = set() if node is None else _parameters(node)
        return dests, _and_cond(ret.value, params)
    return None


def _and_cond(value: ast.expr, params: set[str]) -> Cond:
    """The tests of what callers pass among the `and` terms of a returned value: `not
    ctx.is_layer_sparse and ctx.is_next_layer_sparse and server_args.x` decides by x only
    for a dense layer followed by a sparse one. (Such a term holds no use: it reads a
    parameter alone.)"""
    if not isinstance(value, ast.BoolOp) or not isinstance(value.op, ast.And):
        return ()
    tested = [_parameter_test(t, params) for t in value.values]
    return tuple(sorted({(name, want) for name, want in filter(None, tested) if name}))


def _local_patterns(
    carriers: list[dict[str, Any]],
) -> list[tuple[str, str | None, tuple[str, str | None]]]:
    """Regex-ready (receiver, member, carrier id) triples for uses of a file's own carriers."""
    out: list[tuple[str, str | None, tuple[str, str | None]]] = []
    for c in carriers:
        cid = (c["name"], c["member"])
        if c["member"] is None:
            out.append((c["name"], None, cid))
        else:
            for receiver in ("cls", "self", c["name"]):
                out.append((receiver, c["member"], cid))
    return list(dict.fromkeys(out))  # a name carrying two flags' values: one pattern


@dataclass(frozen=True)
class Use:
    carrier: tuple[str, str | None]
    line: int
    text: str
    accessor: tuple[str, str | None] | None  # the short function whose return it decides
    def_line: int
    prop: bool = False  # the accessor is a property
    returned: bool = True  # in that `return` itself (not in an `if` or a local deciding it)
    cond: Cond = ()  # what the accessor's callers must pass for the use to decide it
    # decides only by what the accessor passes on (`if cls._gather(context):`): only a
    # carrier conditional on what it is passed makes the accessor one (`passed_cond`)
    passes_on: bool = False


def file_uses(
    f: PyFile,
    patterns: list[tuple[str, str | None, tuple[str, str | None]]],
    accessors: bool = False,
) -> list[Use]:
    """Uses of each (name, member) pattern in code (not in imports, comments or
    triple-quoted strings). With `accessors`, only those in the `return` of a short
    function (`Use.accessor` set): the other hits are dropped before the costlier tests."""
    return [use for _pos, _name, use in _file_hits(f, patterns, accessors)]


def _file_hits(
    f: PyFile,
    patterns: list[tuple[str, str | None, tuple[str, str | None]]],
    accessors: bool = False,
    blocks: ByBlock | None = None,
) -> list[tuple[int, str, Use]]:
    """file_uses, each use with the offset and name of the hit that found it, in order
    (`blocks`: what earlier blobs' functions of the same text gave)."""
    if not patterns:
        return []
    by_name: dict[str, list[tuple[str | None, tuple[str, str | None]]]] = defaultdict(list)
    for name, member, cid in patterns:
        by_name[name].append((member, cid))
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
    seen: set[tuple[int, tuple[str, str | None]]] = set()
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
                        accessor, def_line, (cond, passes_on, returned) = ident, d.line, decided
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


def block_text(f: PyFile, d: Def) -> str:
    return "\n".join(f.lines[d.line - 1 : f.end_of(d)])


def _decision(
    f: PyFile, d: Def, line: int, blocks: ByBlock | None
) -> tuple[Cond, bool, bool] | None:
    """decides_return, with whether `line` is in the `return` itself (`Use.returned`)."""

    def make() -> tuple[Cond, bool, bool] | None:
        decided = decides_return(f, d, line)
        return None if decided is None else (*decided, f.returns_at(d, line) is not None)

    if blocks is None:
        return make()
    # (decides_return and returns_at read the block's lines, its kind and parse alone)
    key = ("decides", block_text(f, d), d.kind, line - d.line)
    return blocks.get(key, make)  # type: ignore[no-any-return]


def decides_return(f: PyFile, d: Def, line: int) -> tuple[Cond, bool] | None:
    """What `line` decides of what the short function `d` returns: None if nothing, else
    (the condition on what its callers pass, () for none; whether it only passes its
    parameters on to a carrier, `Use.passes_on`). It decides when it is in a `return`,
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
        inside = (cond for body, cond in branches if any(ret in ast.walk(s) for s in body))
        return both(next(inside, ()), _and_cond(ret.value, params)), False
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
            inside = (c for body, c in branches if any(s in ast.walk(b) for b in body))
            return next(inside, ()), True
    top: dict[ast.stmt, Cond] = {s: () for s in _top_statements(getattr(node, "body", []))}
    for body, cond in branches:
        for inner in _top_statements(body):
            top.setdefault(inner, cond)
    # each returned value with the condition of the branch holding its `return`
    values = [
        (r.value, next((c for body, c in branches if any(r in ast.walk(b) for b in body)), ()))
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
            return cond, False
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
            return both(top[s], min(conds, key=len)), False
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


def _parameter_branches(node: ast.AST, params: set[str]) -> list[tuple[list[ast.stmt], Cond]]:
    """The branches of the top-level `if`s of a function testing a parameter, each with
    what its callers must pass for it to run: `if context.is_layer_sparse:` gives its body
    `is_layer_sparse` truthy and its `else:` falsy; a test of the server args, no condition."""
    out: list[tuple[list[ast.stmt], Cond]] = []
    body = getattr(node, "body", [])
    for s in _top_statements(body):
        tested = _parameter_test(s.test, params) if isinstance(s, ast.If) else None
        if tested is None or not isinstance(s, ast.If):
            continue
        name, truthy = tested
        branches = [(s.body, truthy)]
        if not (len(s.orelse) == 1 and isinstance(s.orelse[0], ast.If)):  # (elif: top)
            branches.append((s.orelse, not truthy))
        # An early return (`if context.layer_id == 0: return X`): what follows it runs only
        # for the callers making the test false.
        if s in body and not s.orelse and isinstance(s.body[-1], ast.Return):
            branches.append((body[body.index(s) + 1 :], not truthy))
        out.extend((b, () if name is None else ((name, want),)) for b, want in branches)
    return out


def _parameter_test(test: ast.expr, params: set[str]) -> tuple[str | None, bool] | None:
    """(tested name, truthy) of an `if` testing a parameter: `ctx.x`, `ctx["x"]`, `x` (its
    name), `not` one of them (false); a test of the server args names none. None for any
    other test."""
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
        return (test.id, truthy) if test.id in params else None
    base = getattr(test, "value", None)
    if not isinstance(base, ast.Name) or base.id not in params:
        return None
    if isinstance(test, ast.Attribute):  # (`args.x`: a parameter holding the server args)
        return (None if _is_args(base) or base.id in ARGS_RECEIVERS else test.attr, truthy)
    if isinstance(test, ast.Subscript) and isinstance(test.slice, ast.Constant):
        key = test.slice.value
        return (key, truthy) if isinstance(key, str) else None
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
    words = [w for w in _words(name) if w not in STOP_WORDS]
    return words[0] if len(words) == 1 and len(words[0]) >= 3 else None


@lru_cache(maxsize=65536)
def _words(name: str) -> tuple[str, ...]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    spaced = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", spaced)
    return tuple(w.lower() for w in spaced.split("_") if w)


# --- per version ---------------------------------------------------------------------------


@lru_cache(maxsize=65536)
def module_of(path: str) -> str | None:
    if not path.startswith("python/") or not path.endswith(".py"):
        return None
    mod = path[len("python/") : -3].replace("/", ".")
    return mod[: -len(".__init__")] if mod.endswith(".__init__") else mod


@lru_cache(maxsize=65536)
def absolute(module: str, importer: str, is_package: bool) -> str:
    """`from .utils import x` in sglang.srt.layers.moe.foo -> sglang.srt.layers.moe.utils."""
    if not module.startswith("."):
        return module
    level = len(module) - len(module.lstrip("."))
    parts = importer.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    rest = module.lstrip(".")
    return ".".join([*base, rest] if rest else base)


@dataclass(frozen=True)
class Carrier:
    module: str
    name: str  # the module-level name other modules import
    member: str | None  # method name when the carrier is a method of class `name`
    kind: str  # global | function | property | named
    dests: tuple[str, ...]
    chain: tuple[str, ...]
    path: str
    line: int
    lazy: bool = False  # found while following uses (its own module's uses count too)
    cond: Cond = ()  # what a call must pass to reach its flags (decides_return)


def _bindings(path: str, imports: list[list[Any]]) -> dict[str, tuple[str, str]]:
    """alias -> (absolute module, name) of a file's imports; an alias imported from two
    places is left out."""
    mod = module_of(path)
    if mod is None:
        return {}
    is_pkg = path.endswith("/__init__.py")
    out: dict[str, tuple[str, str]] = {}
    twice: set[str] = set()
    for module, name, alias, _line in imports:
        target = (absolute(module, mod, is_pkg), name)
        old = out.setdefault(alias, target)
        if old != target:
            twice.add(alias)
    for alias in twice:
        del out[alias]
    return out


class Resolver:
    """Resolves the indirect reads of versions one after another, oldest first.

    Consecutive versions share almost all their blobs, so what depends on a blob alone is
    kept between versions and dropped once no version has the blob any more: each file's
    import bindings (and the import graph built from them, updated for the changed files
    only), its carriers, the uses found in it for a set of names, its top-level definitions,
    and what the model classes' step needs (ingest/model_classes.py, which asks this
    resolver for the version's import graph: ImportGraph). Only following the carriers is
    done per version, from those pieces; its results are the same as resolving from scratch.
    """

    def __init__(self) -> None:
        self.files: dict[str, str] = {}  # the previous version's files (skipped ones left out)
        self.bound: dict[str, dict[str, Target]] = {}  # path -> its unique bindings
        # target -> path -> aliases bound to it there (in the file's order)
        self.graph: dict[Target, dict[str, list[str]]] = defaultdict(dict)
        self.carriers: dict[str, list[dict[str, Any]]] = {}  # path -> its own carriers
        # (sha, one name's patterns) -> its uses with their hits' (offset, name)
        self.uses: dict[tuple[str, tuple[Any, ...]], list[tuple[int, str, Use]]] = {}
        self.defs: dict[str, list[tuple[str, int]]] = {}  # sha -> top-level (name, line)
        # (sha, line, carrier, condition) -> whether the call there can make it true
        self.reaches: dict[tuple[str, int, tuple[str, str | None], Cond], bool] = {}
        self.models = ModelClasses(self)  # the model classes' step, with its own tables
        self.position: dict[str, int] = {}  # path -> its place in the version's listing
        self._importers: dict[Target, list[tuple[str, str]]] = {}  # per version, memo
        # path -> (its blob, what the blob's functions gave by their text): its next blob
        # starts from those
        self.blocks: dict[str, tuple[str, ByBlock]] = {}
        self._reexports: dict[Target, list[tuple[str, str]]] = {}

    def _update(self, files: dict[str, str], facts_of: Callable[[str], dict[str, Any]]) -> None:
        """Bring the import graph and the carriers up to this version's files."""
        old = self.files
        for path in old.keys() - files.keys():
            self._unbind(path)
        for path, sha in files.items():
            if old.get(path) == sha:
                continue
            f = facts_of(path)
            unique = _bindings(path, f.get("imports") or [])
            # Most changes keep a file's imports: its place in the graph stays as it is.
            if list(unique.items()) != list(self.bound.get(path, {}).items()):
                self._unbind(path)
                self.bound[path] = unique
                for alias, target in unique.items():
                    self.graph[target].setdefault(path, []).append(alias)
            self.carriers.pop(path, None)
            if f.get("carriers"):
                self.carriers[path] = f["carriers"]
        self.files = files
        self.position = {path: i for i, path in enumerate(files)}
        self._importers, self._reexports = {}, {}
        self.blocks = {p: b for p, b in self.blocks.items() if p in files}
        shas = set(files.values())  # a blob no longer in the version: its entries go
        self.uses = {k: v for k, v in self.uses.items() if k[0] in shas}
        self.defs = {k: v for k, v in self.defs.items() if k in shas}
        self.reaches = {k: v for k, v in self.reaches.items() if k[0] in shas}
        self.models.keep(shas)

    def _unbind(self, path: str) -> None:
        for target in self.bound.pop(path, {}).values():
            by_path = self.graph[target]
            by_path.pop(path, None)
            if not by_path:
                del self.graph[target]
        self.carriers.pop(path, None)

    def importers(self, target: Target) -> list[tuple[str, str]]:
        """(path, alias) of every binding of `target`, in the order the files are listed."""
        found = self._importers.get(target)
        if found is None:
            by_path = self.graph.get(target, {})
            paths = sorted(by_path, key=self.position.__getitem__)
            found = [(p, a) for p in paths for a in by_path[p]]
            self._importers[target] = found
        return found

    def reexports(self, target: Target) -> list[tuple[str, str]]:
        """(module, alias) of every binding of `target`: where it is also importable from."""
        found = self._reexports.get(target)
        if found is None:
            found = [(module_of(p) or "", a) for p, a in self.importers(target)]
            self._reexports[target] = found
        return found

    def resolve(
        self,
        files: dict[str, str],
        facts_of: Callable[[str], dict[str, Any]],
        option_of: dict[str, str] | Any,
        read_text: Callable[[str], str],
        skip: Callable[[str], bool],
    ) -> list[dict[str, Any]]:
        """Indirect use sites of one version: [{"dest", "path", "line", "text", "via"}]."""
        self._update({p: s for p, s in files.items() if not skip(p)}, facts_of)
        frontier: list[Carrier] = []
        known: set[tuple[str, str, str | None, tuple[str, ...], Cond]] = set()

        def add(c: Carrier) -> None:
            # By dests too: an accessor of two carriers carries both flags (the first
            # carrier's alone before), each with its own chain; by condition too, so that
            # one found under a test of what callers pass does not hide one found without.
            key = (c.module, c.name, c.member, c.dests, c.cond)
            if key not in known and c.dests:
                known.add(key)
                frontier.append(c)

        for path in sorted(self.carriers, key=self.position.__getitem__):
            mod = module_of(path)
            for raw in self.carriers[path]:
                dests = tuple(d for d in raw["dests"] if d in option_of)
                if mod is not None and dests:
                    add(
                        Carrier(
                            mod,
                            raw["name"],
                            raw["member"],
                            raw["kind"],
                            dests,
                            tuple(raw["chain"]),
                            path,
                            raw["line"],
                            cond=stored_cond(raw),
                        )
                    )

        sites: Sites = {}
        while frontier:
            current, frontier[:] = list(frontier), []
            users: dict[str, dict[str, list[Carrier]]] = defaultdict(lambda: defaultdict(list))
            for c in current:
                for target in self._targets(c):
                    for path, alias in self.importers(target):
                        if path != c.path:
                            users[path][alias].append(c)
                if c.lazy:  # SboFlags.a() returning cls.b(): uses inside its own module
                    for alias in [c.name] if c.member is None else ["cls", "self", c.name]:
                        users[c.path][alias].append(c)
            for path, by_alias in users.items():
                self._follow(path, files[path], by_alias, read_text, sites, add)
        self.models.inherit(files, read_text, sites)
        out = [
            {
                **{k: v for k, v in site.items() if k not in ("rank", "conds")},
                "via": stored_chain(site["via"]),
            }
            for site in sites.values()
        ]
        return sorted(out, key=lambda s: (s["dest"], s["path"], s["line"]))

    def _reaches(
        self, sha: str, use: Use, cond: Cond, read_text: Callable[[str], str], blocks: ByBlock
    ) -> bool:
        """_call_reaches, once per blob: it parses the call and walks its function, and the
        next versions mostly ask the same of the same blob."""
        key = (sha, use.line, use.carrier, cond)
        found = self.reaches.get(key)
        if found is None:
            f = _pyfile(sha, read_text)
            found = self.reaches[key] = _call_reaches(f, use, cond, blocks)
        return found

    def _blocks(self, path: str, sha: str) -> ByBlock:
        """The ByBlock of the file's blob, from the previous blob's if the file changed."""
        old = self.blocks.get(path)
        if old is None or old[0] != sha:
            self.blocks[path] = (sha, ByBlock(None if old is None else old[1].now))
        return self.blocks[path][1]

    def _targets(self, c: Carrier) -> list[Target]:
        out, todo = [(c.module, c.name)], [(c.module, c.name)]
        for _ in range(3):
            todo = [t for target in todo for t in self.reexports(target)]
            out.extend(todo)
        return out

    def module(self, path: str) -> str:
        return module_of(path) or ""

    def holder_reaches(
        self, sha: str, guards: tuple[Guard, ...], args: Args, read_text: Callable[[str], str]
    ) -> bool:
        return _reached(_pyfile(sha, read_text), guards, args)

    def _follow(
        self,
        path: str,
        sha: str,
        by_alias: dict[str, list[Carrier]],
        read_text: Callable[[str], str],
        sites: Sites,
        add: Callable[[Carrier], None],
    ) -> None:
        """Record the uses of `by_alias`'s carriers in one file and add the carriers it
        makes."""
        mod = module_of(path) or ""
        patterns = tuple(
            sorted(
                {
                    (alias, c.member if c.kind != "named" else None, (alias, c.member))
                    for alias, cs in by_alias.items()
                    for c in cs
                },
                key=lambda p: (p[0], p[1] or "", p[2][1] or ""),
            )
        )
        # Found per name: a file asked again with one more carrier's name (another version,
        # another importer's carriers) looks for that name only. Each pattern's carrier id
        # holds its name, so one name's uses do not depend on the others'; merged in the
        # order of the hits, as one scan for all of them gives them.
        hits: list[tuple[int, str, Use]] = []
        for _name, group in groupby(patterns, key=lambda p: p[0]):
            key = (sha, tuple(group))
            found = self.uses.get(key)
            if found is None:
                f = _pyfile(sha, read_text)
                blocks = self._blocks(path, sha)
                found = self.uses[key] = _file_hits(f, list(key[1]), blocks=blocks)
            hits += found
        hits.sort(key=lambda h: (h[0], h[1]))  # stable: a hit's uses keep their order
        cached = [use for _pos, _name, use in hits]
        if sha not in self.defs:
            self.defs[sha] = _pyfile(sha, read_text).module_defs()
        defs = self.defs[sha]
        local_defs = {name for name, _line in defs}
        for use in cached:
            alias, member = use.carrier
            for c in by_alias[alias]:
                if c.path != path and alias in local_defs:
                    continue  # the name is also defined here: two things, not followed
                if c.kind != "named" and c.member is not None and member != c.member:
                    continue
                # A use that names the method (SboFlags.x()) is cited through it rather than
                # through the class; then the shortest chain wins.
                rank = (0 if member is not None and member == c.member else 1, len(c.chain))
                # (a call in the carrier's own file passes its caller's context on: a fact
                # of that file, whatever the condition)
                reaches = (
                    not c.cond
                    or c.path == path
                    or self._reaches(sha, use, c.cond, read_text, self._blocks(path, sha))
                )
                # the conditions a site is reached under, one per way (None: some way has
                # none), for a class holding its class to check with its arguments
                alt = None if not c.cond or c.path == path else (use.carrier, c.cond)
                for dest in c.dests if reaches else ():
                    skey = (dest, path, use.line)
                    old = sites.get(skey)
                    before = [] if old is None else old.get("conds", [])
                    alts = None if alt is None or before is None else [*before, alt]
                    if old is None or old["rank"] > rank:
                        sites[skey] = {
                            "dest": dest, "path": path, "line": use.line, "text": use.text,
                            "via": list(c.chain), "rank": rank, "conds": alts,
                        }  # fmt: skip
                    else:
                        old["conds"] = alts
                # A definition named for a feature holds no value of the flag: a test of it
                # (`if TboPreparer._is_all_same(...)`) decides nothing about the flag.
                if use.accessor is not None and (use.returned or c.kind != "named"):
                    name, acc_member = use.accessor
                    kind = "property" if use.prop else "function"
                    chain = (*c.chain, display(name, acc_member, kind))
                    if hops(chain) > MAX_CHAIN or (use.passes_on and not c.cond):
                        continue
                    passed = passed_cond(_pyfile(sha, read_text), use, c.cond) if c.cond else ()
                    if passed is None:
                        continue
                    add(
                        Carrier(
                            mod,
                            name,
                            acc_member,
                            kind,
                            c.dests,
                            chain,
                            path,
                            use.def_line,
                            True,
                            both(passed, use.cond),
                        )
                    )
        # Definitions named for the feature, in a module that uses the feature's carrier
        # (one carrying it only for some callers' arguments: not).
        carriers = [
            c
            for alias, cs in by_alias.items()
            for c in cs
            if hops(c.chain) < MAX_CHAIN
            and (c.path == path or alias not in local_defs)
            and not c.cond
        ]
        used = {u.carrier[0] for u in cached}
        named: list[tuple[bool, Carrier]] = []
        for c in carriers:
            word = _chain_topic(c.chain)
            aliases = {a for a, cs in by_alias.items() if c in cs}
            if word is None or not aliases & used:
                continue
            dests = tuple(d for d in c.dests if names_feature(word, d))
            if not dests:
                continue
            # The lines using `c` itself: a definition holding one reads it, not a name.
            lines = [
                u.line
                for u in cached
                if u.carrier[0] in aliases and (c.member is None or u.carrier[1] == c.member)
            ]
            for name, line in defs:
                if not name.startswith("_") and word in _words(name):
                    end = _pyfile(sha, read_text).end_of(Def(line, 0, "def", name, None))
                    reads = any(line <= no <= end for no in lines)
                    step = NamedRead(name) if reads else Named(name)
                    c2 = Carrier(
                        mod, name, None, "named", dests, (*c.chain, step), path, line, True
                    )
                    named.append((not reads, c2))
        # (a definition reached by a read of one carrier and by the name of another: the read)
        for _by_name, c2 in sorted(named, key=lambda n: n[0]):
            add(c2)


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
        elif isinstance(value, ast.Attribute) and _target_key(value) == f"self.{value.attr}":
            out.append((value.attr, want))
        else:
            return None
    return tuple(sorted(set(out)))


def _call_reaches(f: PyFile, use: Use, cond: Cond, blocks: ByBlock | None = None) -> bool:
    """Whether the call of a conditional carrier at a use passes every keyword its condition
    names, none as a literal making the test false (`is_layer_sparse=False` where the carrier
    decides under `if context.is_layer_sparse:`). A call leaving one out, or one not
    parsed, reaches nothing (the caller's choice is not known: as before the condition)."""
    call = call_of(f, use.line, use.carrier)
    if call is None:
        return False
    keywords = {k.arg: k.value for k in call.keywords if k.arg is not None}
    fitting: list[list[Block]] = []  # per tested name set from literals: where one fits
    for name, want in cond:
        value = keywords.get(name)
        if value is None:
            # passed by position (`mlp_mode(config.num_experts > 0)`), maybe: which
            # parameter each argument binds is not read here, so the call reaches, as any
            # call did before conditions
            if call.args:
                continue
            return False
        literals = _literals(f, use.line, value, blocks)
        if literals is not None:
            fitting.append([where for v, where in literals if bool(v) == want])
            if not fitting[-1]:
                return False
    # Literals set in branches that never both run (`if moe: sparse = nxt = True` / `else:
    # sparse = nxt = False`) cannot make two tests true together: one set of blocks must
    # nest (one inside the other).
    return any(
        all(a[: len(b)] == b or b[: len(a)] == a for a, b in combinations(chosen, 2))
        for chosen in product(*fitting)
    )


Block = tuple[int, ...]  # the statement lists holding a statement, outermost first


def _literals(
    f: PyFile, line: int, value: ast.expr, blocks: ByBlock | None = None
) -> list[tuple[Any, Block]] | None:
    """The literals a value passed at `line` can be, each with where it is set: itself, or
    what every assignment in the enclosing function gives the local or `self.x` it names (a
    dense layer's `self.is_layer_sparse = False` above its call). None when one is no
    literal, or when the function assigns it nowhere (a parameter, set elsewhere: not
    known)."""
    if isinstance(value, ast.Constant):
        return [(value.value, ())]
    key = _target_key(value)
    d = f.enclosing(line) if key is not None else None
    if key is None or d is None or d.kind != "def":
        return None
    table = f.memo.get(("literals", d.line))
    if table is None:  # (one walk a function: its calls are checked once per use)

        def make() -> dict[str, list[tuple[Any, Block]] | None]:
            node = f.node(d)
            return {} if node is None else _assigned_literals(node)

        # (a table is read only against itself: its blocks are ids of one parse's statement
        # lists, and the same text gives the same table)
        found = make() if blocks is None else blocks.get(("literals", block_text(f, d)), make)
        table = f.memo[("literals", d.line)] = found
    return table.get(key)


def _assigned_literals(node: ast.AST) -> dict[str, list[tuple[Any, Block]] | None]:
    """For each local or `self.x` a function binds: the literals its assignments give it
    (with the blocks holding each), or None when one binds it otherwise (a call, a loop, a
    tuple, several targets)."""
    table: dict[str, list[tuple[Any, Block]] | None] = {}
    blocks: dict[int, Block] = {}  # id of a statement -> the blocks holding it
    todo: list[tuple[list[Any], Block]] = [(getattr(node, "body", []), ())]
    while todo:
        body, where = todo.pop()
        inner = (*where, id(body))
        for st in body:
            blocks[id(st)] = inner
            for sub_body in (
                *(getattr(st, b, None) for b in ("body", "orelse", "finalbody")),
                *(h.body for h in [*getattr(st, "handlers", []), *getattr(st, "cases", [])]),
            ):
                if isinstance(sub_body, list):
                    todo.append((sub_body, inner))
    for sub, keys in _binding_statements(node):
        for key in keys:
            known = table.get(key, [])
            if known is None:
                continue
            plain = (
                isinstance(sub, ast.Assign)
                and len(sub.targets) == 1
                and isinstance(sub.value, ast.Constant)
                and _target_key(sub.targets[0]) == key
            )
            if not plain:
                table[key] = None
                continue
            table[key] = [*known, (sub.value.value, blocks.get(id(sub), ()))]  # type: ignore[attr-defined]
    return table


def _binding_statements(node: ast.AST) -> Iterator[tuple[ast.stmt, set[str]]]:
    """Each statement in a function binding names (an assignment, `for`, `with ... as`),
    with the locals and `self.x` it binds (order-free: what callers build does not depend
    on which binding comes first)."""
    for sub in _nested_statements(node):
        if isinstance(sub, ast.Assign):
            bound = sub.targets
        elif isinstance(sub, (ast.AnnAssign, ast.AugAssign, ast.For)):
            bound = [sub.target]
        elif isinstance(sub, ast.With):
            bound = [i.optional_vars for i in sub.items if i.optional_vars is not None]
        else:
            continue
        yield sub, {k for b in bound for t in ast.walk(b) if (k := _target_key(t)) is not None}


def _nested_statements(node: ast.AST) -> Iterator[ast.AST]:
    """`node` and every statement inside it, nested blocks included: what ast.walk gives
    minus the expressions, which hold no statement and are most of a function's nodes."""
    todo = [node]
    while todo:
        sub = todo.pop()
        yield sub
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(sub, name, None)
            if isinstance(block, list):
                todo.extend(block)


def _target_key(node: ast.AST) -> str | None:
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
    return None if m is None else _parse_call(text, m.start(), m.end() - 1)


def _parse_call(text: str, start: int, i: int) -> ast.Call | None:
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


_RECENT: dict[str, PyFile] = {}
RECENT_FILES = 32  # model files and their bases: a few MB of text and outlines


def _pyfile(sha: str, read_text: Callable[[str], str]) -> PyFile:
    """A blob's text and outline, kept while it is among the last RECENT_FILES asked for
    (a version asks about the same files several times; the next version mostly too)."""
    f = _RECENT.pop(sha, None)
    if f is None:
        if len(_RECENT) >= RECENT_FILES:
            _RECENT.pop(next(iter(_RECENT)))
        f = PyFile(read_text(sha))
    _RECENT[sha] = f  # the most recently used last
    return f


def resolve(
    files: dict[str, str],
    facts_of: Callable[[str], dict[str, Any]],
    option_of: dict[str, str],
    read_text: Callable[[str], str],
    skip: Callable[[str], bool],
) -> list[dict[str, Any]]:
    """Indirect use sites of one version, resolved from scratch."""
    return Resolver().resolve(files, facts_of, option_of, read_text, skip)


UNKNOWN: Any = object()  # a value not known without running the code


def _reached(f: PyFile, guards: Sequence[Guard], args: Args) -> bool:
    """Whether an instance built with `args` can reach one of the ways to the uses of its
    class's `__init__`: each way a call there (`LayerScatterModes.init_new(...)`) must pass
    values making its condition true. A value is worked out from the literals the holder
    passes (or the parameters' defaults) through the locals and `self.x` `__init__` sets
    once and the one-`return` methods of the file it calls (`self._is_layer_sparse(
    layer_id, is_nextn=is_nextn)` returning `is_nextn or (...)`): a nextn layer built as
    `DecoderLayer(config, 0, is_nextn=True)` is sparse and layer 0, so it reads nothing
    through a dense layer before a sparse one. Anything else is not known: reached."""
    for line, carrier, cond in guards:
        call = call_of(f, line, carrier)
        d = f.enclosing(line)
        # (the holder's arguments are `__init__`'s: a guard in a function nested in it is
        # passed what that function's caller gives, not known here)
        in_init = (
            d is not None and d.name == "__init__" and getattr(d.parent, "kind", None) == "class"
        )
        node = f.node(d) if d is not None and in_init else None
        env = _bind(node, args) if node is not None else None
        if call is None or node is None or env is None:
            return True
        passed = {k.arg: k.value for k in call.keywords if k.arg is not None}
        values = [(_known_value(f, node, passed[n], env), want) for n, want in cond if n in passed]
        if not any(v is not UNKNOWN and bool(v) != want for v, want in values):
            return True
    return False


def _bind(node: ast.AST, args: Iterable[tuple[str, str]]) -> dict[str, Any] | None:
    """A function's parameters bound to the literals a call passes (`args`), or to their
    literal defaults when it passes none; UNKNOWN otherwise. None for a spread."""
    given = dict(args)
    if "*" in given or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    a = node.args
    positional = [*a.posonlyargs, *a.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(a.defaults))
    defaults += a.defaults
    pairs = [
        *zip(positional, defaults, strict=True),
        *zip(a.kwonlyargs, a.kw_defaults, strict=True),
    ]
    skip = 1 if positional and positional[0].arg in ("self", "cls") else 0
    env: dict[str, Any] = {}
    for i, (p, default) in enumerate(pairs):
        src = given.get(str(i - skip)) if i < len(positional) else None
        src = given.get(p.arg, src)
        if src is not None:
            env[p.arg] = _literal(src)
        else:
            env[p.arg] = default.value if isinstance(default, ast.Constant) else UNKNOWN
    return env


def _literal(src: str) -> Any:
    """The value of an argument's source when it is a constant (`0`, `True`, `-1`, `"x"`),
    else UNKNOWN. Not ast.literal_eval: each call makes closures that refer to one another,
    garbage only the cyclic collector frees, which the ingest runs seldom (~4 MiB held at
    the end of a full ingest)."""
    try:
        node = ast.parse(src, mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return UNKNOWN
    negated = isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
    inner = node.operand if negated else node  # type: ignore[attr-defined]
    if not isinstance(inner, ast.Constant):
        return UNKNOWN
    if negated:
        return -inner.value if isinstance(inner.value, (int, float)) else UNKNOWN
    return inner.value


def _known_value(f: PyFile, fn: ast.AST, e: ast.expr, env: dict[str, Any], depth: int = 0) -> Any:
    """What `e` is in function `fn` given its parameters' `env` (`_reached`), or UNKNOWN."""
    if depth > MAX_VALUE_DEPTH:
        return UNKNOWN
    if isinstance(e, ast.Constant):
        return e.value
    key = _target_key(e)
    if key is not None:
        bindings = _bound_once_in(f, fn)
        if key in env:  # a parameter, unless the function binds it again (maybe: not known)
            return UNKNOWN if key in bindings else env[key]
        bound = bindings.get(key)
        return UNKNOWN if bound is None else _known_value(f, fn, bound, env, depth + 1)

    def of(x: ast.expr) -> Any:
        return _known_value(f, fn, x, env, depth + 1)

    if isinstance(e, ast.BoolOp):  # as Python: `a or b` is the first true operand, or b
        value: Any = UNKNOWN
        for x in e.values:
            value = of(x)
            if value is UNKNOWN or bool(value) == isinstance(e.op, ast.Or):
                return value  # (an unknown operand before the deciding one: not known)
        return value
    if isinstance(e, ast.IfExp):
        test = of(e.test)
        return UNKNOWN if test is UNKNOWN else of(e.body if test else e.orelse)
    if isinstance(e, ast.Call):
        return _method_value(f, e, env, depth)
    parts: list[ast.expr] = []
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.Not, ast.USub)):
        parts = [e.operand]
    elif isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
        parts = [e.left, e.right]
    elif isinstance(e, ast.Compare) and len(e.ops) == 1 and type(e.ops[0]) in COMPARE:
        parts = [e.left, e.comparators[0]]
    values = [of(x) for x in parts]
    if not values or UNKNOWN in values:
        return UNKNOWN
    try:
        if isinstance(e, ast.UnaryOp):
            return not values[0] if isinstance(e.op, ast.Not) else -values[0]
        if isinstance(e, ast.BinOp):
            return values[0] + values[1] if isinstance(e.op, ast.Add) else values[0] - values[1]
        return COMPARE[type(e.ops[0])](*values)  # type: ignore[attr-defined]
    except (TypeError, ArithmeticError):
        return UNKNOWN


MAX_VALUE_DEPTH = 6
COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.Is: lambda a, b: a is b,
    ast.IsNot: lambda a, b: a is not b,
}


def _method_value(f: PyFile, call: ast.Call, env: dict[str, Any], depth: int) -> Any:
    """`self.m(...)` (or `cls.m`) of a method defined once in the file whose body is one
    `return`: its value with the call's arguments bound."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and _target_key(func.value) in ("self", "cls")):
        return UNKNOWN
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return UNKNOWN
    defs = [x for x in f.defs if x.name == func.attr and x.kind == "def"]
    node = f.node(defs[0]) if len(defs) == 1 else None
    body = [s for s in getattr(node, "body", []) if not _is_docstring(s)]
    if node is None or len(body) != 1 or not isinstance(body[0], ast.Return):
        return UNKNOWN
    value = body[0].value
    if value is None:
        return None
    given: list[tuple[str, Any]] = [
        *((str(i), _known_value(f, node, a, env, depth + 1)) for i, a in enumerate(call.args)),
        *((str(k.arg), _known_value(f, node, k.value, env, depth + 1)) for k in call.keywords),
    ]
    inner = _bind(node, tuple((k, "...") for k, _v in given))
    if inner is None:
        return UNKNOWN
    a = node.args  # type: ignore[attr-defined]
    positional = [p.arg for p in [*a.posonlyargs, *a.args] if p.arg not in ("self", "cls")]
    for k, v in given:
        inner[positional[int(k)] if k.isdigit() and int(k) < len(positional) else k] = v
    return _known_value(f, node, value, inner, depth + 1)


def _is_docstring(s: ast.stmt) -> bool:
    return isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)


def _bound_once_in(f: PyFile, fn: ast.AST) -> dict[str, ast.expr | None]:
    """`_bound_once(fn)` kept in `f.memo`: `_known_value` asks it for each name of each guard, and
    a walk of a model's `__init__` is most of the resolver's time. `fn` is one of `f.node`'s
    parsed blocks, which `f` keeps, so its id names it while the memo lives."""
    key = ("bound once", id(fn))
    if key not in f.memo:
        f.memo[key] = _bound_once(fn)
    return f.memo[key]  # type: ignore[no-any-return]


def _bound_once(fn: ast.AST) -> dict[str, ast.expr | None]:
    """The local or `self.x` names a function binds, each with the value of its one plain
    assignment (None: bound more than once, or otherwise)."""
    out: dict[str, ast.expr | None] = {}
    for sub, keys in _binding_statements(fn):
        for key in keys:
            once = (
                isinstance(sub, ast.Assign)
                and len(sub.targets) == 1
                and key not in out
                and _target_key(sub.targets[0]) == key
            )
            out[key] = sub.value if once else None  # type: ignore[attr-defined]
    return out


@lru_cache(maxsize=65536)
def _chain_topic(chain: tuple[str, ...]) -> str | None:
    """The feature word of the nearest link that spells one."""
    for link in reversed(chain):
        word = topic(link.removesuffix("()").split(".")[0])
        if word:
            return word
    return None
