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
- then model classes (`_inherit`): from the classes of model files holding a use, to the
  classes deriving from them or holding an instance of them (`self.model = X(...)`).

Only files that import a carrier are read in the second phase, and only the blocks around
the uses are parsed.
"""

from __future__ import annotations

import ast
import re
import textwrap
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations, groupby, product
from typing import Any

from ingest.carriers import (
    MAX_CHAIN,
    NAME_RE,
    ByBlock,
    CarrierId,
    Cond,
    DefByName,
    DefByRead,
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

# (the model-class section at the end of this module names these two privately)
from ingest.carriers import parse_call as _parse_call
from ingest.carriers import target_key as _target_key
from ingest.pyfile import MAX_ACCESSOR_LINES, Def, PyFile

MODELS_DIR = "python/sglang/srt/models/"


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


Target = tuple[str, str]  # (module, name)
Sites = dict[tuple[str, str, int], dict[str, Any]]


class Resolver:
    """Resolves the indirect reads of versions one after another, oldest first.

    Consecutive versions share almost all their blobs, so what depends on a blob alone is
    kept between versions and dropped once no version has the blob any more: each file's
    import bindings (and the import graph built from them, updated for the changed files
    only), its carriers, the uses found in it for a set of names, its top-level definitions,
    and the model classes' outlines `_inherit` needs. Only following the carriers is done
    per version, from those pieces; its results are the same as resolving from scratch.
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
        self.outline: dict[str, dict[int, tuple[str, str, str] | None]] = {}  # sha -> line ->
        self.relations: dict[tuple[str, str, bool], list[Relation]] = {}  # (sha, ref, local)
        self.classes: dict[str, list[_Class]] = {}  # sha -> its top-level classes
        # (sha, class line) -> its methods (line, name) and the `self.x(` each calls
        self.members: dict[tuple[str, int], tuple[list[tuple[int, str]], dict[str, set[str]]]]
        self.members = {}
        # (sha, class line, method) -> `_init_assign`: the `self.x = self.method(` in __init__
        self.inits: dict[tuple[str, int, str], tuple[str | None, bool]] = {}
        # (sha, line, carrier, condition) -> whether the call there can make it true
        self.reaches: dict[tuple[str, int, tuple[str, str | None], Cond], bool] = {}
        # (sha, a class's guards there, a holder's arguments) -> _reached: versions ask again
        self.reached: dict[tuple[str, tuple[Any, ...], Args], bool] = {}
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
        self.relations = {k: v for k, v in self.relations.items() if k[0] in shas}
        self.classes = {k: v for k, v in self.classes.items() if k in shas}
        self.members = {k: v for k, v in self.members.items() if k[0] in shas}
        self.inits = {k: v for k, v in self.inits.items() if k[0] in shas}
        self.defs = {k: v for k, v in self.defs.items() if k in shas}
        self.outline = {k: v for k, v in self.outline.items() if k in shas}
        self.reaches = {k: v for k, v in self.reaches.items() if k[0] in shas}
        self.reached = {k: v for k, v in self.reached.items() if k[0] in shas}

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
        self._inherit(files, read_text, sites)
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

    def _inherit(self, files: dict[str, str], read_text: Callable[[str], str], sites: Sites):
        """Model classes reached from a class of a model file holding a use site get the
        site's flags, the chain extended by one link per step, in two ways:
        - inheritance: `class Qwen3MoeModel(Qwen2MoeModel)` (or `(qwen2_moe.Qwen2MoeModel)`
          through a module import): the link is the base's name; a subclass that overrides
          every method holding a flag's uses without calling `super()` does not get it;
        - composition: `self.model = Glm4MoeModel(...)` in a class's `__init__` (also inside
          `make_layers(lambda ...: X(...))` or a list): the link is `self.model = X(…)`,
          and the method holding the uses is `__init__`; not when every way to the
          uses there is a conditional carrier's call its literal arguments make false
          (`_reached`: `DecoderLayer(config, 0, is_nextn=True)`).
        A step into another model file records a site there (the class line, or the
        assignment line); a step inside one file (DeepseekV2ForCausalLM holding
        DeepseekV2Model) records none (the file has one) but is followed on. Names resolve
        through the file's imports like any carrier (a name also defined in the importing
        file is two things: not followed). MAX_CLASS_HOPS steps into other files at most; only
        model files that import such a class (or its module) are read."""
        users: dict[Target, _User] = {}  # (module, class) ->
        for site in sorted(sites.values(), key=lambda s: (s["path"], s["line"], s["dest"])):
            if site["path"].startswith(MODELS_DIR):
                where = self._class_method(files[site["path"]], site["line"], read_text)
                if where is not None:
                    key = (module_of(site["path"]) or "", where[0])
                    user = users.setdefault(key, _User(site["path"]))
                    held = user.chains.setdefault(site["dest"], {})
                    old = held.get(where[1])
                    if old is None or len(old[0]) > len(site["via"]):
                        held[where[1]] = (site["via"], 0)
                    if where[1] == "__init__":
                        user.guard(site["dest"], site["line"], site.get("conds"))
        # Breadth first, so the shortest chain wins. A class is followed again for a dest
        # when a later way adds a method holding its uses (a subclass overriding the first
        # ones may still inherit it); methods only grow, so this ends.
        todo = {key: set(user.chains) for key, user in users.items()}
        while todo:
            new: dict[Target, set[str]] = defaultdict(set)
            for (module, cls), dests in sorted(todo.items()):
                user = users[(module, cls)]
                found = [(user.path, cls, True)]  # other classes of its own file
                if min(h for d in dests for _c, h in user.chains[d].values()) < MAX_CLASS_HOPS:
                    for path, ref in self._class_refs(module, cls):
                        if path.startswith(MODELS_DIR) and module_of(path) != module:
                            found.append((path, ref, False))
                for path, ref, local in found:
                    rels = self._relations(files[path], ref, cls, local, read_text)
                    for rel in self._made(path, rels, read_text):
                        kind, line, name, own, text, link, args, via = rel
                        key = (module_of(path) or "", name)
                        for dest in sorted(dests):
                            held = user.chains[dest]
                            # (a holder building it with arguments that make every way to
                            # its `__init__`'s uses false: not through `__init__`)
                            guards = user.guards.get(dest)
                            if kind == "hold" and guards and "__init__" in held:
                                sha = files[user.path]
                                rkey = (sha, tuple(guards), args)
                                if rkey not in self.reached:
                                    f = _pyfile(sha, read_text)
                                    self.reached[rkey] = _reached(f, guards, args)
                                if not self.reached[rkey]:
                                    held = {m: ch for m, ch in held.items() if m != "__init__"}
                            passed = _passed(kind, held, own, local, via)
                            if not passed:
                                continue
                            chains = {m: ([*c, link], h + (not local)) for m, (c, h) in passed}
                            # cited even where the class reads the flag another way too,
                            # through the shortest chain of a method that runs there
                            if not local and (dest, path, line) not in sites:
                                chain = min((c for c, _h in chains.values()), key=len)
                                sites[(dest, path, line)] = {
                                    "dest": dest, "path": path, "line": line, "text": text,
                                    "via": chain, "rank": (1, len(chain)),
                                }  # fmt: skip
                            reached = users.setdefault(key, _User(path))
                            there = reached.chains.setdefault(dest, {})
                            for method, chain_hops in chains.items():
                                # reached without conditions: followed again if it was
                                # with them
                                if method.split()[0] == "__init__" and reached.guards.get(dest):
                                    reached.guards[dest] = None
                                    new[key].add(dest)
                                if method not in there:
                                    there[method] = chain_hops
                                    new[key].add(dest)
            todo = new

    def _class_refs(self, module: str, cls: str) -> list[tuple[str, str]]:
        """(path, how the file names the class) of the files importing it: its alias, or
        `alias.Class` where the file imports the class's module."""
        out = list(self.importers((module, cls)))
        parent, _, last = module.rpartition(".")
        if parent:
            out.extend((path, f"{alias}.{cls}") for path, alias in self.importers((parent, last)))
        return out

    def _relations(
        self, sha: str, ref: str, cls: str, local: bool, read_text: Callable[[str], str]
    ) -> list[Relation]:
        """The top-level classes of a file deriving from `ref` or holding an instance of it
        (`ref` is how the file names class `cls`; `local`: the file defining it)."""
        key = (sha, ref, local)
        found = self.relations.get(key)
        if found is not None:
            return found
        text = read_text(sha)
        out: list[Relation] = []
        # A name also defined here is two things: not followed.
        if ref in text and (local or not _defines("\n" + text, ref.split(".")[0])):
            classes = self._index(sha, text)
            for c in classes:
                if ref in c.bases and c.name != cls:
                    own = _own(text, c)
                    out.append(("inherit", c.line, c.name, own, c.text, cls, (), "__init__"))
            out.extend(_holders(text, classes, ref, cls))
        self.relations[key] = out
        return out

    def _made(
        self, path: str, rels: list[Relation], read_text: Callable[[str], str]
    ) -> list[Relation]:
        """`rels` with each `make` (a factory method returning the class) made a hold where
        the `__init__` the holder runs assigns `self.x = self.method(...)`: its own, or
        (through `super().__init__()`, or having none) its first base's, in its file or
        imported (Llama4ForCausalLM overrides `_init_model`, LlamaForCausalLM's `__init__`
        calls it); dropped where none does. The factory is the holder's own method, so
        it is the one `self.method` resolves to."""
        if all(r[0] != "make" for r in rels):
            return rels
        out: list[Relation] = []
        for rel in rels:
            if rel[0] != "make":
                out.append(rel)
                continue
            _kind, line, name, _own, text, link, args, method = rel
            sha = self.files[path]
            owner = next(c for c in self._index(sha, read_text(sha)) if c.name == name)
            where: tuple[str, _Class] | None = (path, owner)
            blocks: list[str] = []  # of the classes passed: the holder runs their methods
            for _ in range(MAX_BASES):
                if where is None:
                    break
                at, c = where
                body = read_text(self.files[at])
                blocks.append(body[c.span[0] : c.span[1]])
                key = (self.files[at], c.line, method)
                if key not in self.inits:
                    self.inits[key] = _init_assign(body, c, method)
                attr, goes_on = self.inits[key]
                if attr is not None:
                    ran = frozenset(m for b in blocks for m in _run_by_holder(b, attr))
                    link = f"self.{attr} = {link}"
                    # (held by `__init__` through the factory: a subclass replacing
                    # either without `super()` does not hold it)
                    via = f"__init__ {method}"
                    out.append(("hold", line, name, ran, text, link, args, via))
                    break
                where = self._base(at, c, read_text) if goes_on else None
        return sorted(set(out))

    def _base(
        self, path: str, c: _Class, read_text: Callable[[str], str]
    ) -> tuple[str, _Class] | None:
        """(path, class) of a class's first base: defined in its file, or imported from
        the module defining it (`from ...llama import LlamaForCausalLM`, `llama.X`); None
        when it is neither, or both (two things)."""
        if not c.bases:
            return None
        sha = self.files[path]
        base = c.bases[0]
        bound = self.bound.get(path, {})
        mod, _, name = base.rpartition(".")
        target = bound.get(mod or name)
        if mod:  # `llama.X`: `llama` is a module
            module = ".".join(target) if target is not None and "." not in mod else None
        else:
            local = [k for k in self._index(sha, read_text(sha)) if k.name == name]
            if local:
                return (path, local[0]) if len(local) == 1 and target is None else None
            module, name = target if target is not None else (None, name)
        there = f"python/{module.replace('.', '/')}.py" if module else ""
        other = self.files.get(there)
        if other is None:
            return None
        found = [k for k in self._index(other, read_text(other)) if k.name == name]
        return (there, found[0]) if len(found) == 1 else None

    def _class_method(
        self, sha: str, line: int, read_text: Callable[[str], str]
    ) -> tuple[str, str] | None:
        """(top-level class, its method) holding `line`; None outside a class. The method is
        the last one of the class's own defs starting at or above the line (the class
        itself above the first), or the weight loader that alone calls it (`_loader_of`)."""
        by_line = self.outline.setdefault(sha, {})
        if line not in by_line:
            text = read_text(sha)
            found = None
            for c in self._index(sha, text):
                if c.line <= line <= c.last:
                    method = c.name
                    found_members = self.members.get((sha, c.line))
                    if found_members is None:
                        members = _methods(text, c)
                        found_members = (members, _self_calls(text, c, members))
                        self.members[(sha, c.line)] = found_members
                    members, calls = found_members
                    for no, name in members:
                        if no <= line:
                            method = name
                    if "load_weights" not in method and method in calls:
                        method = _loader_of(calls, method) or method
                    found = ("class", c.name, method)
            by_line[line] = found
        where = by_line[line]
        return None if where is None else (where[1], where[2])

    def _index(self, sha: str, text: str) -> list[_Class]:
        found = self.classes.get(sha)
        if found is None:
            found = self.classes[sha] = class_index(text)
        return found

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


TOP_CLASS_RE = re.compile(r"\nclass[ \t]+(\w+)[ \t]*(?:\(([^)]*)\))?[ \t]*:")
METHOD_RE = re.compile(r"\n([ \t]+)(?:async[ \t]+)?def[ \t]+(\w+)")
# The next significant line indented no deeper than N (closing brackets do not end a block)
SHALLOW_RE = {0: re.compile(r"\n(?=[^ \t\n#)\]}])")}
# Steps into another model file from a class holding a use: Qwen2MoeModel <- Qwen3MoeModel
# (qwen3_moe) <- a subclass of that; DeepseekV3ForCausalLM <- MistralLarge3ForCausalLM
# (mistral_large_3) <- held by PixtralForConditionalGeneration (pixtral); no further.
MAX_CLASS_HOPS = 2
# (inherit | hold | make, line, class name, methods it defines without calling the base's
# (inherit) or the methods it calls on the instance it holds (hold), text of the line, link
# of the chain, the arguments of the call building the instance (hold: `_call_args`), the
# method holding it: `__init__`, or (make: the factory method `m` returning it; a hold,
# "__init__ m", once `_made` finds the `self.x = self.m(...)` in `__init__`)
Relation = tuple[str, int, str, frozenset[str], str, str, "Args", str]
Args = tuple[tuple[str, str], ...]  # (position or keyword, source) of each argument
# `self.x =`, `self.x: T =`, `self.x, self.y, self.z =` at the start of a line
CALL_AFTER_RE = re.compile(r"[ \t]*\(")
SELF_ASSIGN_RE = re.compile(
    r"[ \t]*self\.(\w+)(?:[ \t]*,[ \t]*self\.\w+)*[ \t]*(?::[^=\n]*)?=(?!=)(.*)"
)


@dataclass(frozen=True)
class _Class:
    name: str
    line: int
    last: int  # its last line
    bases: tuple[str, ...]  # as written: `Qwen2MoeModel`, `qwen2_moe.Qwen2MoeModel`
    span: tuple[int, int]  # offsets of its block in the text
    init: tuple[int, int, int] | None  # its `__init__`: offsets of start and end, first line
    text: str  # of the `class` line


def class_index(text: str) -> list[_Class]:
    """A file's top-level classes, by literal-led searches over the text (no outline of
    every def: a model file has hundreds); blocks end, as in PyFile, at the next significant
    line indented no deeper."""
    padded = "\n" + text
    out: list[_Class] = []
    line, last = 0, 0
    for m in TOP_CLASS_RE.finditer(padded):
        line += padded.count("\n", last, m.start() + 1)
        last = m.start() + 1
        stop = SHALLOW_RE[0].search(padded, m.end())
        end = stop.start() if stop else len(padded)  # offsets in `padded`: text's + 1
        init = None
        at = padded.find("def __init__", m.end(), end)
        while at >= 0 and init is None:
            start = padded.rfind("\n", 0, at) + 1
            prefix = padded[start:at]
            indent = len(prefix.expandtabs())
            if indent and not prefix.strip(" \t") or prefix.strip() == "async":
                rx = SHALLOW_RE.get(indent) or SHALLOW_RE.setdefault(
                    indent, re.compile(rf"\n[ \t]{{0,{indent}}}(?=[^ \t\n#)\]}}])")
                )
                stop = rx.search(padded, at, end)
                first = line + padded.count("\n", m.start() + 1, start)
                init = (start - 1, (stop.start() if stop else end) - 1, first)
            at = padded.find("def __init__", at + 1, end)
        bases = tuple(b.strip() for b in (m.group(2) or "").split(",") if b.strip())
        head = padded[m.start() + 1 : padded.find("\n", m.start() + 1, end) % (end + 1)]
        last_line = line + padded.count("\n", m.start() + 1, end)
        span = (m.start(), end - 1)
        out.append(_Class(m.group(1), line, last_line, bases, span, init, head.strip()[:240]))
    return out


def _methods(text: str, c: _Class) -> list[tuple[int, str]]:
    """(line, name) of the defs directly in a class's block (str.find of "def ", then the
    line's prefix: a regex led by the indentation would try every line)."""
    block = text[c.span[0] : c.span[1]]
    defs: list[tuple[int, int, str]] = []  # offset, indentation, name
    pos = block.find("def ")
    while pos >= 0:
        start = block.rfind("\n", 0, pos) + 1
        prefix = block[start:pos]
        if prefix and (not prefix.strip(" \t") or prefix.strip() == "async"):
            word = NAME_RE.match(block, pos + 4)
            if word:
                defs.append((start, len(prefix.expandtabs()) - len(prefix.strip()), word.group()))
        pos = block.find("def ", pos + 4)
    indent = min((i for _at, i, _n in defs), default=0)
    out, line, last = [], c.line, 0
    for at, i, name in defs:
        line += block.count("\n", last, at)
        last = at
        if i == indent:
            out.append((line, name))
    return out


# `super().m(`, or the two-argument form `super(Cls, self).m(` older model files use.
SUPER_CALL_RE = re.compile(r"\bsuper\((?:\s*\w+\s*,\s*\w+\s*)?\)\.(\w+)\(")


def _own(text: str, c: _Class) -> frozenset[str]:
    """The methods a class defines without calling the base's (`super().m()`): those it
    does not inherit."""
    block = text[c.span[0] : c.span[1]]
    called = set(SUPER_CALL_RE.findall(block)) if "super(" in block else set()
    return frozenset(n for _l, n in _methods(text, c) if n not in called)


def _run_by_holder(block: str, attr: str) -> frozenset[str]:
    """The methods the holder's class calls by name on the instance held in `self.attr`
    (`self.model.load_weights(...)`)."""
    return frozenset(re.findall(r"self\." + re.escape(attr) + r"\.(\w+)\(", block))


SELF_CALL_RE = re.compile(r"\bself\.(\w+)\(")


def _self_calls(text: str, c: _Class, members: list[tuple[int, str]]) -> dict[str, set[str]]:
    """Each method of class `c` -> the `self.x(` it calls."""
    lines = text[c.span[0] : c.span[1]].split("\n")  # from the class line
    starts = [no - c.line for no, _n in members] + [len(lines)]
    return {
        name: set(SELF_CALL_RE.findall("\n".join(lines[starts[i] : starts[i + 1]])))
        for i, (_no, name) in enumerate(members)
    }


def _loader_of(calls: dict[str, set[str]], method: str) -> str | None:
    """The weight loading method (`_runs`) of a class that a helper runs in: a method the
    class calls only from its weight loading (`do_load_weights` ->
    `_maybe_quant_weights_to_fp8_ue8m0`) runs only when the weights are loaded. None when
    another of its methods calls it, or none does. `calls`: _self_calls of the class."""

    def loader(name: str, seen: frozenset[str]) -> str | None:
        if "load_weights" in name:
            return name
        first = None
        for n in calls:  # every caller must be (called from) weight loading: stop at one not
            if n != name and n not in seen and name in calls[n]:
                found = loader(n, seen | {name})
                if found is None:
                    return None
                first = first or found
        return first

    return loader(method, frozenset())


def _runs(method: str, called: frozenset[str]) -> bool:
    """Whether a holder runs a method of the instance it holds: weight loading
    (`load_weights`, `do_load_weights`, ...) only if it calls it or the instance's
    `load_weights`, which runs the rest (models that hold a language model often load its
    weights themselves); the other methods run when the instance is built or called,
    directly or through the instance's own calls (forward -> forward_deepep)."""
    return "load_weights" not in method or method in called or "load_weights" in called


Chains = dict[str, tuple[list[str], int]]  # method -> shortest chain through it, its hops


def _passed(
    kind: str, held: Chains, own: frozenset[str], local: bool, via: str = "__init__"
) -> list[tuple[str, Any]]:
    """The (method, (chain, hops)) a relation passes on: a subclass keeps the methods it does
    not override, each with its own chain; a holder holds the instance in `via` (`__init__`,
    or "__init__ m" through a factory method m it calls: a subclass may override either),
    reached through the shortest chain of the methods it runs (`own`: those it calls on
    it). A step into another file takes chains of fewer than MAX_CLASS_HOPS such steps."""
    usable = [(m, ch) for m, ch in held.items() if local or ch[1] < MAX_CLASS_HOPS]
    if kind == "inherit":  # ("__init__ m": held by `__init__` through factory method m)
        return [(m, ch) for m, ch in usable if own.isdisjoint(m.split())]
    run = [ch for m, ch in usable if _runs(m, own)]
    return [(via, min(run, key=lambda ch: len(ch[0])))] if run else []


def _holders(text: str, classes: list[_Class], ref: str, cls: str) -> list[Relation]:
    """Top-level classes whose `__init__` assigns `self.x` a value built by calling `ref`:
    `self.model = Glm4MoeModel(...)`, or inside it (`make_layers(..., lambda i, p:
    DecoderLayer(...))`, a list of them): the statement holding the call starts with
    `self.x =`. Each with the held instance's methods the holder calls (`_run_by_holder`)."""
    out: list[Relation] = []
    inits = [(c.init, c.name) for c in classes if c.init is not None and c.name != cls]
    spans = {c.name: c.span for c in classes}
    blocks: dict[int, tuple[list[str], list[int]]] = {}  # __init__'s offset -> lines, starts
    pos = text.find(ref)
    while pos >= 0:
        end = pos + len(ref)
        before = text[pos - 1] if pos else " "
        # A call: the name then "(" (`Cls (` too); in a comment (`# as in Cls load()`) the
        # name is no call, and its line would count as the statement above it.
        call = CALL_AFTER_RE.match(text, end) is not None
        if call and "#" in text[text.rfind("\n", 0, pos) + 1 : pos]:
            call = False
        if not (before.isalnum() or before in "_.") and call:
            line_start = text.rfind("\n", 0, pos) + 1
            if text[line_start:pos].strip() == "return":
                made = _factory(text, classes, ref, cls, pos)
                if made is not None:
                    c, method, no = made
                    args = _call_args(text, pos, end)
                    line_text = text[line_start : text.find("\n", pos) % (len(text) + 1)]
                    link = f"self.{method}(…) → {cls}(…)"  # `self.x = ` once found
                    line_text = line_text.strip()[:240]
                    out.append(("make", no, c.name, frozenset(), line_text, link, args, method))
            for (a, b, first_line), owner in inits:
                if not a < pos < b:
                    continue
                if a not in blocks:
                    lines = text[a:b].split("\n")
                    blocks[a] = (lines, _statements(lines))
                lines, starts = blocks[a]
                at = text.count("\n", a, pos)  # the call's line in the block
                first = starts[bisect_right(starts, at) - 1]
                m = SELF_ASSIGN_RE.match(lines[first])
                if m:
                    direct = m.group(2).lstrip().startswith(ref)
                    link = f"self.{m.group(1)} = {'' if direct else '…'}{cls}(…)"
                    text_of = lines[first].strip()[:240]
                    start, stop = spans[owner]
                    ran = _run_by_holder(text[start:stop], m.group(1))
                    args = _call_args(text, pos, end)
                    out.append(
                        ("hold", first_line + first, owner, ran, text_of, link, args, "__init__")
                    )
        pos = text.find(ref, end)
    return sorted(set(out))


MAX_BASES = 4  # classes up a holder's bases looked at for the `__init__` calling a factory
SUPER_INIT_RE = re.compile(r"\bsuper\((?:\s*\w+\s*,\s*\w+\s*)?\)\.__init__\(")


def _init_assign(text: str, c: _Class, method: str) -> tuple[str | None, bool]:
    """The `x` of `self.x = self.method(` in class `c`'s own `__init__` (None if none), and
    whether the base's `__init__` runs too (it has none, or calls `super().__init__(`)."""
    if c.init is None:
        return None, True
    block = text[c.init[0] : c.init[1]]
    rx = rf"^[ \t]*self\.(\w+)[ \t]*(?::[^=\n]*)?=[ \t]*self\.{re.escape(method)}[ \t]*\("
    m = re.search(rx, block, re.M)
    return (m.group(1) if m else None), SUPER_INIT_RE.search(block) is not None


def _factory(
    text: str, classes: list[_Class], ref: str, cls: str, pos: int
) -> tuple[_Class, str, int] | None:
    """(class, method, line) when the `return ref(...)` at `pos` is in a short method of a
    top-level class (not `cls` itself) whose every `return` builds `ref`: a factory
    (`def _init_model(...): return Llama4Model(...)`) whose instance `__init__` may hold."""
    owner = next((c for c in classes if c.span[0] < pos < c.span[1]), None)
    if owner is None or owner.name == cls:
        return None
    no = text.count("\n", 0, pos) + 1
    members = _methods(text, owner)
    starts = [i for i, (line, _n) in enumerate(members) if line <= no]
    if not starts:
        return None
    i = starts[-1]
    first, method = members[i]
    last = members[i + 1][0] - 1 if i + 1 < len(members) else owner.last
    if last - first >= MAX_ACCESSOR_LINES:
        return None
    lines = text.split("\n")[first - 1 : last]
    # (the next method's decorators, blank lines and comments end the block, not it)
    while lines and (not lines[-1].strip() or lines[-1].lstrip().startswith(("@", "#"))):
        lines.pop()
    try:
        tree = ast.parse(textwrap.dedent("\n".join(lines)))
    except SyntaxError:
        return None
    fn = tree.body[0] if tree.body else None
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name != method:
        return None
    returns = [n for n in _nested_statements(fn) if isinstance(n, ast.Return)]
    built = [
        r for r in returns if isinstance(r.value, ast.Call) and ast.unparse(r.value.func) == ref
    ]
    # (several returns of one class: followed; any other return: not a factory of it)
    return (owner, method, no) if built and len(built) == len(returns) else None


def _call_args(text: str, pos: int, end: int) -> Args:
    """The arguments of the call of the name ending at `end` (`X(config, 0, is_nextn=True)`:
    ("0", "config"), ("1", "0"), ("is_nextn", "True")); one spread (`*a`, `**kw`) is "*"."""
    at = text.find("(", end)
    call = _parse_call(text[pos : pos + MAX_CALL_CHARS], 0, at - pos) if at >= 0 else None
    if call is None:
        return (("*", ""),)
    out = [(str(i), ast.unparse(a)) for i, a in enumerate(call.args)]
    out += [(k.arg or "*", ast.unparse(k.value)) for k in call.keywords]
    if any(isinstance(a, ast.Starred) for a in call.args):
        out.append(("*", ""))
    return tuple(out)


MAX_CALL_CHARS = 4000
UNKNOWN: Any = object()  # a value not known without running the code


def _reached(f: PyFile, guards: list[tuple[int, tuple[str, str | None], Cond]], args: Args) -> bool:
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
        values = [(_value(f, node, passed[n], env), want) for n, want in cond if n in passed]
        if not any(v is not UNKNOWN and bool(v) != want for v, want in values):
            return True
    return False


def _bind(node: ast.AST, args: Args) -> dict[str, Any] | None:
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


def _value(f: PyFile, fn: ast.AST, e: ast.expr, env: dict[str, Any], depth: int = 0) -> Any:
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
        return UNKNOWN if bound is None else _value(f, fn, bound, env, depth + 1)

    def of(x: ast.expr) -> Any:
        return _value(f, fn, x, env, depth + 1)

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
        *((str(i), _value(f, node, a, env, depth + 1)) for i, a in enumerate(call.args)),
        *((str(k.arg), _value(f, node, k.value, env, depth + 1)) for k in call.keywords),
    ]
    inner = _bind(node, tuple((k, "...") for k, _v in given))
    if inner is None:
        return UNKNOWN
    a = node.args  # type: ignore[attr-defined]
    positional = [p.arg for p in [*a.posonlyargs, *a.args] if p.arg not in ("self", "cls")]
    for k, v in given:
        inner[positional[int(k)] if k.isdigit() and int(k) < len(positional) else k] = v
    return _value(f, node, value, inner, depth + 1)


def _is_docstring(s: ast.stmt) -> bool:
    return isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)


def _bound_once_in(f: PyFile, fn: ast.AST) -> dict[str, ast.expr | None]:
    """`_bound_once(fn)` kept in `f.memo`: `_value` asks it for each name of each guard, and
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


def _statements(lines: list[str]) -> list[int]:
    """The indexes of the lines that start a statement: no bracket left open before them
    (brackets in comments left out; in strings, rare in `__init__`, not)."""
    out, depth = [], 0
    for no, text in enumerate(lines):
        if "#" in text:
            text = text[: text.index("#")]
        if depth <= 0 and text.strip():
            out.append(no)
            depth = 0
        depth += text.count("(") + text.count("[") + text.count("{")
        depth -= text.count(")") + text.count("]") + text.count("}")
    return out


def _defines(padded: str, name: str) -> bool:
    """Whether a file ("\n" + its text) defines `name` at the top level: def, class or an
    assignment (str.find for each form, then a check at the hit)."""
    for lead in ("\ndef ", "\nclass "):
        at = padded.find(lead + name)
        while at >= 0:
            after = padded[at + len(lead) + len(name) : at + len(lead) + len(name) + 1]
            if not (after.isalnum() or after == "_"):
                return True
            at = padded.find(lead + name, at + 1)
    at = padded.find(f"\n{name}")
    while at >= 0:
        rest = padded[at + 1 + len(name) : at + 1 + len(name) + 64].lstrip(" \t")
        if rest[:1] == "=" and rest[1:2] != "=":
            return True
        at = padded.find(f"\n{name}", at + 1)
    return False


@dataclass
class _User:
    """A model class reached by flags: where it is and, per dest, per method holding the
    dest's uses, the shortest chain through that method with the steps into other files it
    took. A class reached from it cites the chain of a method that runs there: a subclass
    overriding a method without `super()` drops that method's chain (all of them: the dest),
    a holder cites a method it runs (`_runs`), so a model holding DeepseekV2ForCausalLM
    without calling its weight loader is cited through the MoE layer its `__init__` builds,
    not through the loader's read."""

    path: str
    chains: dict[str, Chains] = field(default_factory=dict)
    # per dest: the ways its uses in `__init__` are reached under conditions on what the
    # call there passes, (line, carrier, condition) each; None: one is reached without
    guards: dict[str, list[tuple[int, tuple[str, str | None], Cond]] | None] = field(
        default_factory=dict
    )

    def guard(self, dest: str, line: int, conds: list[Any] | None) -> None:
        before = self.guards.get(dest, [])
        if conds is None or before is None:
            self.guards[dest] = None
        else:
            self.guards[dest] = [*before, *((line, carrier, cond) for carrier, cond in conds)]


@lru_cache(maxsize=65536)
def _chain_topic(chain: tuple[str, ...]) -> str | None:
    """The feature word of the nearest link that spells one."""
    for link in reversed(chain):
        word = topic(link.removesuffix("()").split(".")[0])
        if word:
            return word
    return None


# --- models --------------------------------------------------------------------------------


def model_rows(
    files: dict[str, str], facts_of: Callable[[str], dict[str, Any]]
) -> list[dict[str, Any]]:
    """Model files: python/sglang/srt/models/<name>.py with their EntryClass names."""
    out = []
    for path in sorted(files):
        if not path.startswith(MODELS_DIR) or path.endswith("__init__.py"):
            continue
        name = path[len(MODELS_DIR) : -3]
        entry = facts_of(path).get("entry", [])
        if "/" in name and not entry:
            continue  # a helper module in a subpackage (deepseek_common/...), not a model
        out.append({"name": name, "path": path, "architectures": entry})
    return out
