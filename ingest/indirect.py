"""Indirect reads: where a flag's value travels after its first read, with the chain.

SGLang often reads a flag once into something else and uses that elsewhere:
`IS_TBO_ENABLED = server_args.enable_two_batch_overlap` (a module global), `is_tbo_enabled()`
returning it (an accessor), `SboFlags.enable_...()` class methods returning an expression of
it, then functions named for the feature (`model_forward_maybe_tbo`) that model files call.

Two phases, like the rest of the ingest:
- per blob (ingest/carriers.py, in the workers, cached): the file's imports, its
  `EntryClass` and the *carriers* it defines from its own direct reads.
- per version (`Resolver`, here): carriers are followed through the imports of every module
  (a name bound to two different things in one file is not followed) to the files that use
  them, up to MAX_CHAIN links (`hops`). A use deciding what a short function returns (in
  its `return`, in an `if` returning at once, in a local used there) makes that function a
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
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations, groupby, product
from typing import Any

from ingest.carriers import (
    MAX_CHAIN,
    ByBlock,
    CarrierId,
    Cond,
    DefByName,
    DefByRead,
    ModelStep,
    Use,
    UsePattern,
    block_text,
    call_of,
    cond_and,
    display,
    file_hits,
    hops,
    name_words,
    names_feature,
    passed_cond,
    stored_chain,
    stored_cond,
    target_key,
    topic,
)
from ingest.model_classes import MODELS_DIR, Args, Guard, ModelClasses, Sites, Target
from ingest.pyfile import Def, PyFile
from kb.threeval import binary, compare, is_unknown, truth, unary, unknown

# --- per version ---------------------------------------------------------------------------


def in_code_of(path: str, steps: Sequence[str]) -> tuple[str, ...]:
    """Chain steps defined in the file at `path`: a model file's are ModelSteps (the
    shared code a model reaches a flag through comes before them)."""
    if path.startswith(MODELS_DIR):
        return tuple(ModelStep(s) for s in steps)
    return tuple(steps)


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
            # By dests too: an accessor of two carriers carries both flags, each with its
            # own chain; by condition too, so that one found under a test of what callers
            # pass does not hide one found without.
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
                            in_code_of(path, raw["chain"]),
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
                    UsePattern(
                        alias, c.member if c.kind != "named" else None, CarrierId(alias, c.member)
                    )
                    for alias, cs in by_alias.items()
                    for c in cs
                },
                key=lambda p: (p.receiver, p.member or "", p.carrier.member or ""),
            )
        )
        # Found per name: a file asked again with one more carrier's name (another version,
        # another importer's carriers) looks for that name only. Each pattern's carrier id
        # holds its name, so one name's uses do not depend on the others'; merged in the
        # order of the hits, as one scan for all of them gives them.
        hits: list[tuple[int, str, Use]] = []
        for _name, group in groupby(patterns, key=lambda p: p.receiver):
            key = (sha, tuple(group))
            found = self.uses.get(key)
            if found is None:
                f = _pyfile(sha, read_text)
                blocks = self._blocks(path, sha)
                found = self.uses[key] = file_hits(f, list(key[1]), blocks=blocks)
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
                    skey = (dest, path, use.line, "")
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
                    chain = (*c.chain, *in_code_of(path, [display(name, acc_member, kind)]))
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
                            cond_and(passed, use.cond),
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
        used = {u.carrier.name for u in cached}
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
                if u.carrier.name in aliases and (c.member is None or u.carrier.member == c.member)
            ]
            for name, line in defs:
                if not name.startswith("_") and word in name_words(name):
                    end = _pyfile(sha, read_text).end_of(Def(line, 0, "def", name, None))
                    reads = any(line <= no <= end for no in lines)
                    step = DefByRead(name) if reads else DefByName(name)
                    c2 = Carrier(
                        mod, name, None, "named", dests, (*c.chain, step), path, line, True
                    )
                    named.append((not reads, c2))
        # (a definition reached by a read of one carrier and by the name of another: the read)
        for _by_name, c2 in sorted(named, key=lambda n: n[0]):
            add(c2)


def _call_reaches(f: PyFile, use: Use, cond: Cond, blocks: ByBlock | None = None) -> bool:
    """Whether the call of a conditional carrier at a use passes every keyword its condition
    names, none as a literal making the test false (`is_layer_sparse=False` where the carrier
    decides under `if context.is_layer_sparse:`). A call leaving one out, or one not
    parsed, reaches nothing (what the caller passes is not known)."""
    call = call_of(f, use.line, use.carrier)
    if call is None:
        return False
    keywords = {k.arg: k.value for k in call.keywords if k.arg is not None}
    fitting: list[list[Block]] = []  # per tested name set from literals: where one fits
    for name, want in cond:
        value = keywords.get(name)
        if value is None:
            # passed by position (`mlp_mode(config.num_experts > 0)`), maybe: which
            # parameter each argument binds is not read here, so the call reaches, as a
            # call of an unconditional carrier does
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
    key = target_key(value)
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
                and target_key(sub.targets[0]) == key
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
        yield sub, {k for b in bound for t in ast.walk(b) if (k := target_key(t)) is not None}


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


_RECENT: dict[str, PyFile] = {}
# Model files and their bases (~10 MB of text and outlines): a version of 2026 asks about
# up to ~150 files, several times each. With 32 kept, 2,000 PyFiles were built in a full
# ingest, 1,500 with 96 (1,450 are distinct blobs); 128 saved little more for more memory.
RECENT_FILES = 96


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


NOT_KNOWN = unknown("a value not known without running the code")


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
        if not any(truth(v) is (not want) for v, want in values):
            return True
    return False


def _bind(node: ast.AST, args: Iterable[tuple[str, str]]) -> dict[str, Any] | None:
    """A function's parameters bound to the literals a call passes (`args`), or to their
    literal defaults when it passes none; NOT_KNOWN otherwise. None for a spread."""
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
            env[p.arg] = default.value if isinstance(default, ast.Constant) else NOT_KNOWN
    return env


def _literal(src: str) -> Any:
    """The value of an argument's source when it is a constant (`0`, `True`, `-1`, `"x"`),
    else NOT_KNOWN. Not ast.literal_eval: each call makes closures that refer to one another,
    garbage only the cyclic collector frees, which the ingest runs seldom (~4 MiB held at
    the end of a full ingest)."""
    try:
        node = ast.parse(src, mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return NOT_KNOWN
    negated = isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
    inner = node.operand if negated else node  # type: ignore[attr-defined]
    if not isinstance(inner, ast.Constant):
        return NOT_KNOWN
    return unary(node.op, inner.value) if negated else inner.value  # type: ignore[attr-defined]


def _known_value(f: PyFile, fn: ast.AST, e: ast.expr, env: dict[str, Any], depth: int = 0) -> Any:
    """What `e` is in function `fn` given its parameters' `env` (`_reached`), or Unknown."""
    if depth > MAX_VALUE_DEPTH:
        return NOT_KNOWN
    if isinstance(e, ast.Constant):
        return e.value
    key = target_key(e)
    if key is not None:
        bindings = _bound_once_in(f, fn)
        if key in env:  # a parameter, unless the function binds it again (maybe: not known)
            return NOT_KNOWN if key in bindings else env[key]
        bound = bindings.get(key)
        return NOT_KNOWN if bound is None else _known_value(f, fn, bound, env, depth + 1)

    def of(x: ast.expr) -> Any:
        return _known_value(f, fn, x, env, depth + 1)

    if isinstance(e, ast.BoolOp):  # as Python: `a or b` is the first true operand, or b
        value: Any = NOT_KNOWN
        for x in e.values:
            value = of(x)
            t = truth(value)
            if is_unknown(t) or t is isinstance(e.op, ast.Or):
                return value  # (an unknown operand before the deciding one: not known)
        return value
    if isinstance(e, ast.IfExp):
        test = truth(of(e.test))
        return test if is_unknown(test) else of(e.body if test else e.orelse)
    if isinstance(e, ast.Call):
        return _method_value(f, e, env, depth)
    if isinstance(e, ast.UnaryOp):
        return unary(e.op, of(e.operand))
    if isinstance(e, ast.BinOp):
        return binary(e.op, of(e.left), of(e.right))
    if isinstance(e, ast.Compare) and len(e.ops) == 1:
        return compare(e.ops[0], of(e.left), of(e.comparators[0]))
    return NOT_KNOWN


MAX_VALUE_DEPTH = 6


def _method_value(f: PyFile, call: ast.Call, env: dict[str, Any], depth: int) -> Any:
    """`self.m(...)` (or `cls.m`) of a method defined once in the file whose body is one
    `return`: its value with the call's arguments bound."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and target_key(func.value) in ("self", "cls")):
        return NOT_KNOWN
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return NOT_KNOWN
    defs = [x for x in f.defs if x.name == func.attr and x.kind == "def"]
    node = f.node(defs[0]) if len(defs) == 1 else None
    body = [s for s in getattr(node, "body", []) if not _is_docstring(s)]
    if node is None or len(body) != 1 or not isinstance(body[0], ast.Return):
        return NOT_KNOWN
    value = body[0].value
    if value is None:
        return None
    given: list[tuple[str, Any]] = [
        *((str(i), _known_value(f, node, a, env, depth + 1)) for i, a in enumerate(call.args)),
        *((str(k.arg), _known_value(f, node, k.value, env, depth + 1)) for k in call.keywords),
    ]
    inner = _bind(node, tuple((k, "...") for k, _v in given))
    if inner is None:
        return NOT_KNOWN
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
                and target_key(sub.targets[0]) == key
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
