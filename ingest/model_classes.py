"""Model classes: the classes of model files that get a flag's reads from another class, by
deriving from it or by holding an instance of it, each with the chain that reaches it.

A model file often reads no flag itself: `class Qwen3MoeModel(Qwen2MoeModel)` inherits the
reads in its base's methods, and `self.model = Glm4MoeModel(...)` in a class's `__init__`
runs those of the class it holds. The resolver (ingest/indirect.py) finds the use sites in
model files; `ModelClasses.inherit` then goes from the class holding each site to the classes
deriving from it or holding an instance of it, in its own file and in the model files
importing it, one link of the chain per step (MAX_CLASS_HOPS steps into other files).

A file's classes come from Python's `ast`, one top-level class at a time: the file is cut at
the lines starting a top-level statement (a significant first column; no parse), and a class
is parsed only when a question needs it (it names the class followed, it holds a site, it is
a base), each class text once while a blob holding it lives. Parsing the whole of every
model blob the versions ask about would cost about as much CPU as the rest of the resolver.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, NamedTuple, Protocol

from ingest.pyfile import MAX_ACCESSOR_LINES
from kb.pyast import PARSE_FAILURES, gc_paused

MODELS_DIR = "python/sglang/srt/models/"
# Steps into another model file from a class holding a use: Qwen2MoeModel <- Qwen3MoeModel
# (qwen3_moe) <- a subclass of that; DeepseekV3ForCausalLM <- MistralLarge3ForCausalLM
# (mistral_large_3) <- held by PixtralForConditionalGeneration (pixtral); no further.
MAX_CLASS_HOPS = 2
MAX_BASES = 4  # classes up a holder's bases looked at for the `__init__` calling a factory
# The keyword and name of a line starting a top-level `def` or `class`: the one match of
# text; everything said of a class's block comes from its parse.
TOP_DEF_RE = re.compile(r"(?:async[ \t]+)?(def|class)[ \t]+(\w+)")

Target = tuple[str, str]  # (module, name)
# (dest, path, line) -> a use site: {"dest", "path", "line", "text", "via", "rank", "conds"}
Sites = dict[tuple[str, str, int], dict[str, Any]]


class Arg(NamedTuple):
    """An argument of a call as written: `X(config, 0, is_nextn=True)` has ("0", "config"),
    ("1", "0"), ("is_nextn", "True"); a spread (`*a`, `**kw`) adds ("*", "")."""

    key: str  # its position, or its keyword
    source: str


Args = tuple[Arg, ...]


class Relation(NamedTuple):
    """A class of a file taking the reads of the class followed (named `ref` there)."""

    kind: str  # inherit | hold | make (a factory method `m` of it returns an instance)
    line: int  # of the `class` line | the `self.x = ...` assignment | the `return`
    name: str  # the class deriving, holding or making
    # inherit: the methods it defines without calling the base's (`replaced`): it does not
    # inherit them; hold: the methods it calls on the instance it holds (`runs_on`)
    methods: frozenset[str]
    text: str  # of that line
    link: str  # of the chain: the base's name | `self.model = X(…)` | `self.m(…) → X(…)`
    args: Args  # of the call building the instance (hold, make)
    # the method holding the instance: `__init__`, or `__init__ m` once `_made` finds the
    # `self.x = self.m(...)` in `__init__` that makes a `make` a hold; make: `m`
    via: str


class Way(NamedTuple):
    """The shortest chain reaching a method of a class, with the steps into other model
    files it took (MAX_CLASS_HOPS at most)."""

    chain: list[str]
    hops: int


Chains = dict[str, Way]  # method -> the way through it


class Guard(NamedTuple):
    """A way to a class's uses in its `__init__` that a condition on what the call there
    passes decides: the resolver checks it against the arguments a holder builds the class
    with (`ImportGraph.holder_reaches`)."""

    line: int  # of the call
    carrier: tuple[str, str | None]  # (name, member) called
    cond: tuple[tuple[str, bool], ...]  # (name, truthy) it must pass: indirect.Cond


# --- a file's classes ------------------------------------------------------------------------


class Built(NamedTuple):
    """A call of a name as written (`Glm4MoeModel(...)`, `glm4_moe.Glm4MoeModel(...)`)
    building an instance a class keeps: in a `self.x = ...` statement of its `__init__`
    (held), or returned by a short method each of whose returns calls the same name
    (made). Lines are relative to the `class` line (1)."""

    callee: str
    line: int  # of the statement (held) or the `return` (made)
    attr: str  # held: the `x` of `self.x = ...`; made: the factory method
    direct: bool  # held: the value assigned starts with the call (`self.model = X(...)`)
    # the call's first line and column, last line and end column (columns in UTF-8 bytes,
    # as ast gives them): its arguments are read from its text when a relation needs them
    span: tuple[int, int, int, int]


def call_args(source: str) -> Args:
    """The arguments of the call written in `source` (`X(config, 0, is_nextn=True)`)."""
    call = ast.parse(source, mode="eval").body
    assert isinstance(call, ast.Call)
    out = [Arg(str(i), ast.unparse(a)) for i, a in enumerate(call.args)]
    out += [Arg(k.arg or "*", ast.unparse(k.value)) for k in call.keywords]
    if any(isinstance(a, ast.Starred) for a in call.args):
        out.append(Arg("*", ""))
    return tuple(out)


@dataclass(frozen=True, eq=False)
class ClassFacts:
    """What a top-level class's block says, lines relative to its `class` line (1): it
    depends on the block's text alone, so a text is parsed once (`ClassIndex.memo`) while a blob
    holding it lives."""

    bases: tuple[str, ...] = ()  # as written: `Qwen2MoeModel`, `qwen2_moe.Qwen2MoeModel`
    methods: tuple[tuple[int, str], ...] = ()  # (line, name) of its own defs, in order
    replaced: frozenset[str] = frozenset()  # its methods not calling the base's: `super().m(`
    self_calls: dict[str, frozenset[str]] = field(default_factory=dict)  # method -> `self.x(`
    runs_on: dict[str, frozenset[str]] = field(default_factory=dict)  # x -> `self.x.m(`
    has_init: bool = False
    init_calls_base: bool = False  # its `__init__` calls `super().__init__(`
    # (x, m) of each `self.x = self.m(...)` in its `__init__`, in the order of the lines
    init_assigns: tuple[tuple[str, str], ...] = ()
    held: tuple[Built, ...] = ()
    made: tuple[Built, ...] = ()

    def init_assign(self, method: str) -> tuple[str | None, bool]:
        """The `x` of the first `self.x = self.method(...)` in its own `__init__` (None if
        none), and whether the base's `__init__` runs too (it has none, or calls it)."""
        if not self.has_init:
            return None, True
        attr = next((x for x, m in self.init_assigns if m == method), None)
        return attr, self.init_calls_base


class ModelClass(NamedTuple):
    """A top-level class of a blob, parsed."""

    name: str
    line: int  # of the `class` line
    last: int  # the last line of its block (up to the next top-level statement)
    start: int  # the offset of its `class` line in the text
    facts: ClassFacts


class _Block(NamedTuple):
    """A top-level block starting with a `class` line: a class once it parses."""

    name: str
    line: int
    last: int
    start: int  # offsets of the block in the text
    end: int


class ClassIndex:
    """One blob's top-level classes and the names it defines at the top level, each class
    parsed on first use. A block ends, as in PyFile, before the next line that starts at the
    first column (blank lines, comments and closing brackets do not); when a class's block
    does not parse (a line of a string at the first column cut it, or one looks like a
    class), the whole file's parse places the blocks instead. A class that does not parse
    either way is none."""

    def __init__(self, text: str, memo: dict[str, ClassFacts] | None = None) -> None:
        """`memo`: class texts -> their facts, shared with other blobs' indexes."""
        self.text = text
        self.memo = {} if memo is None else memo
        lines = text.split("\n")
        starts = [i for i, line in enumerate(lines) if line and line[0] not in " \t#)]}"]
        self._place(lines, list(zip(starts, [*starts[1:], len(lines)], strict=True)))
        self._whole_file_tried = False
        self.texts: dict[str, ClassFacts] = {}  # of its classes parsed: for the next blobs'

    def _place(self, lines: list[str], spans: list[tuple[int, int]]) -> None:
        """The top-level statements' (first line, line past the last) as indexes of `lines`."""
        offsets = [0, *accumulate(map((1).__add__, map(len, lines)))]
        self._blocks: list[_Block] = []
        self.declared: set[str] = set()  # the names of its top-level defs and classes
        # name -> the blocks of the top-level statements starting with it (maybe assignments)
        self._assigned: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for i, end in spans:
            head = lines[i]
            span = (offsets[i], offsets[end] - 1)
            m = TOP_DEF_RE.match(head)
            if m is not None:
                self.declared.add(m.group(2))
                if m.group(1) == "class" and not head.startswith("async"):
                    self._blocks.append(_Block(m.group(2), i + 1, end, *span))
                continue
            word = head.split("=", 1)[0].split(":", 1)[0].strip()
            if word.isidentifier():
                self._assigned[word].append(span)
        self._classes: dict[int, ModelClass | None] = {}  # by line, once parsed

    def _place_by_parse(self) -> bool:
        """Place the blocks by the whole file's parse (once); False if it fails."""
        if self._whole_file_tried:
            return False
        self._whole_file_tried = True
        try:
            with gc_paused():
                body = ast.parse(self.text.removeprefix("\ufeff")).body
        except (SyntaxError, *PARSE_FAILURES):
            return False
        # (a block starts at its `def`/`class` line and ends before the next statement's
        # first decorator)
        leads = [
            min([n.lineno, *(d.lineno for d in getattr(n, "decorator_list", ()))]) for n in body
        ]
        lines = self.text.split("\n")
        ends = [lead - 1 for lead in leads[1:]] + [len(lines)]
        self._place(lines, [(n.lineno - 1, end) for n, end in zip(body, ends, strict=True)])
        return True

    def lines(self, c: ModelClass, first: int, last: int) -> list[str]:
        """Lines `first` to `last` of class `c` (numbered in the file)."""
        pos = c.start
        for _ in range(first - c.line):
            pos = self.text.index("\n", pos) + 1
        out = []
        for _ in range(last - first + 1):
            end = self.text.find("\n", pos)
            out.append(self.text[pos:] if end < 0 else self.text[pos:end])
            pos = end + 1
        return out

    def text_of(self, c: ModelClass, line: int) -> str:
        return self.lines(c, line, line)[0].strip()[:240]

    def source(self, c: ModelClass, span: tuple[int, int, int, int]) -> str:
        """The text of a node of class `c` from its span (Built.span)."""
        first, col, last, end_col = span
        lines = [line.encode() for line in self.lines(c, c.line + first - 1, c.line + last - 1)]
        lines[-1] = lines[-1][:end_col]
        lines[0] = lines[0][col:]
        return b"\n".join(lines).decode()

    def named(self, name: str) -> list[ModelClass]:
        return self._parsed_where(lambda b: b.name == name)

    def at(self, line: int) -> ModelClass | None:
        """The class whose block holds `line`."""
        found = self._parsed_where(lambda b: b.line <= line <= b.last)
        return found[0] if found else None

    def mentioning(self, ref: str) -> list[ModelClass]:
        """The classes whose text has `ref`, in the order of the file."""
        return self._parsed_where(lambda b: self.text.find(ref, b.start, b.end) >= 0)

    def _parsed_where(self, wanted: Callable[[_Block], bool]) -> list[ModelClass]:
        """The classes of the blocks `wanted`; again if parsing one placed them anew."""
        while True:
            blocks = self._blocks
            found = [self._parsed(b) for b in blocks if wanted(b)]
            if self._blocks is blocks:
                return [c for c in found if c is not None]

    def _parsed(self, b: _Block) -> ModelClass | None:
        if b.line not in self._classes:
            text = self.text[b.start : b.end]
            facts = self.memo.get(text)
            if facts is None:
                with gc_paused():  # (a parse makes many objects and no cycles)
                    facts = _block_facts(text)
                if facts is None and self._place_by_parse():
                    again = [c for c in self._blocks if c.line == b.line]
                    return self._parsed(again[0]) if again else None
                if facts is not None:
                    self.memo[text] = facts
            if facts is not None:
                self.texts[text] = facts
            found = None if facts is None else ModelClass(b.name, b.line, b.last, b.start, facts)
            self._classes[b.line] = found
        return self._classes[b.line]

    def defines(self, name: str) -> bool:
        """Whether the file defines `name` at the top level: a def, a class or an
        assignment (`name = ...`, `name: T = ...`)."""
        if name in self.declared:
            return True
        for start, end in self._assigned.get(name, ()):
            try:
                body = ast.parse(self.text[start:end]).body
            except (SyntaxError, *PARSE_FAILURES):
                continue
            st = body[0] if body else None
            if isinstance(st, ast.Assign):
                target: ast.expr | None = st.targets[0]
            else:
                target = st.target if isinstance(st, ast.AnnAssign) and st.value else None
            if isinstance(target, ast.Name) and target.id == name:
                return True
        return False


def _block_facts(block: str) -> ClassFacts | None:
    try:
        body = ast.parse(block).body
    except (SyntaxError, *PARSE_FAILURES):
        return None
    return _class_facts(body[0]) if len(body) == 1 and isinstance(body[0], ast.ClassDef) else None


def _class_facts(node: ast.ClassDef) -> ClassFacts:
    """What one walk of each statement of the class's body finds."""
    first = node.lineno - 1  # (a line minus `first`: relative to the `class` line)
    methods: list[tuple[int, str]] = []
    self_calls: dict[str, frozenset[str]] = {}
    runs_on: dict[str, set[str]] = defaultdict(set)
    base_calls: set[str] = set()
    made: list[Built] = []
    init: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    init_calls_base = False
    held: list[Built] = []
    assigns: list[tuple[int, str, str]] = []  # (line, x, m) of `self.x = self.m(...)`
    for st in node.body:
        is_init = (
            init is None
            and isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef))
            and st.name == "__init__"
        )
        calls: set[str] = set()  # `self.x(`
        supers: set[str] = set()  # `super().m(`
        returns: list[ast.Return] = []
        for sub in _walk(st):
            kind = type(sub)
            if kind is ast.Call:
                func = sub.func  # type: ignore[attr-defined]
                if type(func) is ast.Attribute:
                    owner = func.value
                    if type(owner) is ast.Name:
                        if owner.id == "self":
                            calls.add(func.attr)
                    elif type(owner) is ast.Attribute:
                        if _is_self(owner.value):
                            runs_on[owner.attr].add(func.attr)
                    elif _is_super(owner):
                        supers.add(func.attr)
            elif kind is ast.Return:
                returns.append(sub)  # type: ignore[arg-type]
            elif is_init and (kind is ast.Assign or kind is ast.AnnAssign):
                _in_init(sub, first, held, assigns)  # type: ignore[arg-type]
        base_calls |= supers
        if not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        methods.append((st.lineno - first, st.name))
        self_calls[st.name] = frozenset(calls)
        made += _factory(st, returns, first)
        if is_init:
            init, init_calls_base = st, "__init__" in supers
    return ClassFacts(
        bases=tuple(ast.unparse(b) for b in node.bases),
        methods=tuple(methods),
        replaced=frozenset(name for _line, name in methods if name not in base_calls),
        self_calls=self_calls,
        runs_on={attr: frozenset(names) for attr, names in runs_on.items()},
        has_init=init is not None,
        init_calls_base=init_calls_base,
        init_assigns=tuple((attr, method) for _line, attr, method in sorted(assigns)),
        held=tuple(held),
        made=tuple(made),
    )


# Fields walked past: contexts, operators and names hold no call (and are a third of the
# nodes ast.walk visits).
SKIPPED_FIELDS = {"ctx", "op", "ops", "names", "kwd_attrs", "type_comment", "kind"}
_FIELDS: dict[type, tuple[str, ...]] = {}


def _walk(node: ast.AST) -> Iterator[ast.AST]:
    """`node` and the nodes under it that may hold a call, as ast.walk gives them (in
    another order) less the fields SKIPPED_FIELDS."""
    todo: list[Any] = [node]
    while todo:
        node = todo.pop()
        if node is None:  # (a `**x` in a dict display has no key)
            continue
        yield node
        kind = type(node)
        fields = _FIELDS.get(kind)
        if fields is None:
            fields = _FIELDS[kind] = tuple(f for f in kind._fields if f not in SKIPPED_FIELDS)
        for name in fields:
            value = getattr(node, name, None)
            if type(value) is list:
                todo += value
            elif isinstance(value, ast.AST):
                todo.append(value)


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _is_super(node: ast.expr) -> bool:
    """`super()`, or the two-argument `super(Cls, self)` older model files use."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "super"
        and not node.keywords
        and (
            not node.args or len(node.args) == 2 and all(isinstance(a, ast.Name) for a in node.args)
        )
    )


def _dotted(node: ast.expr) -> str | None:
    """`X` or `a.X` (any depth) as written; None for any other callee."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _leading(value: ast.expr) -> Iterator[ast.expr]:
    """The expressions the source of `value` starts with, outermost first: for
    `X(config).to(device)`, the call of `to`, its `.to`, `X(config)` and `X`."""
    node: ast.expr | None = value
    while node is not None:
        yield node
        node = (
            node.func
            if isinstance(node, ast.Call)
            else node.value
            if isinstance(node, (ast.Attribute, ast.Subscript))
            else None
        )


def _self_assignment(st: ast.Assign | ast.AnnAssign) -> tuple[str, ast.expr, bool] | None:
    """(x, value, one target) of `self.x = value`, `self.x: T = value` or `self.x, self.y
    = value` (x the first); None for any other assignment."""
    if isinstance(st, ast.Assign):
        targets, value = st.targets, st.value
    elif st.value is not None:
        targets, value = [st.target], st.value
    else:
        return None
    target = targets[0]
    elts = target.elts if isinstance(target, ast.Tuple) else [target]
    if not all(isinstance(e, ast.Attribute) and _is_self(e.value) for e in elts):
        return None
    return elts[0].attr, value, len(targets) == 1  # type: ignore[attr-defined]


def _in_init(
    st: ast.Assign | ast.AnnAssign,
    first: int,
    held: list[Built],
    assigns: list[tuple[int, str, str]],
) -> None:
    """An assignment in `__init__`: each call of a name in the value of `self.x = ...`
    (`self.model = Glm4MoeModel(...)`, or inside it: `make_layers(..., lambda i, p:
    DecoderLayer(...))`, a list of them) to `held`; `self.x = self.m(...)` (the value led by
    the call) to `assigns`."""
    found = _self_assignment(st)
    if found is None:
        return
    attr, value, single = found
    lead = list(_leading(value)) if single else []
    for n in lead:
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            if _is_self(n.func.value):
                assigns.append((st.lineno, attr, n.func.attr))
                break
    leading = {id(n) for n in lead}
    for sub in _walk(value):
        if isinstance(sub, ast.Call) and (callee := _dotted(sub.func)) is not None:
            line = st.lineno - first
            held.append(Built(callee, line, attr, id(sub) in leading, _span(sub, first)))


def _span(node: ast.expr, first: int) -> tuple[int, int, int, int]:
    end = node.end_lineno or node.lineno
    return node.lineno - first, node.col_offset, end - first, node.end_col_offset or 0


def _factory(
    fn: ast.FunctionDef | ast.AsyncFunctionDef, returns: list[ast.Return], first: int
) -> list[Built]:
    """A short method whose every `return` calls the same name: a factory (`def
    _init_model(...): return Llama4Model(...)`) whose instance `__init__` may hold."""
    if not returns or (fn.end_lineno or fn.lineno) - fn.lineno >= MAX_ACCESSOR_LINES:
        return []
    callees = {_dotted(r.value.func) if isinstance(r.value, ast.Call) else None for r in returns}
    callee = callees.pop() if len(callees) == 1 else None
    if callee is None:
        return []
    made = [
        Built(callee, r.lineno - first, fn.name, True, _span(r.value, first))
        for r in returns
        if isinstance(r.value, ast.Call)
    ]
    return sorted(made, key=lambda b: b.line)


def relations(index: ClassIndex, ref: str, cls: str, local: bool) -> list[Relation]:
    """The top-level classes of a file deriving from `ref` or holding an instance of it
    (`ref` is how the file names class `cls`; `local`: the file defining it). A name also
    defined in the file otherwise is two things: not followed."""
    if ref not in index.text or (not local and index.defines(ref.split(".")[0])):
        return []
    found = index.mentioning(ref)
    out = [
        Relation(
            "inherit",
            c.line,
            c.name,
            c.facts.replaced,
            index.text_of(c, c.line),
            cls,
            (),
            "__init__",
        )
        for c in found
        if ref in c.facts.bases and c.name != cls
    ]
    built: list[Relation] = []
    for c in found:
        if c.name == cls:
            continue
        for b in c.facts.held:
            if b.callee == ref:
                line = c.line + b.line - 1
                link = f"self.{b.attr} = {'' if b.direct else '…'}{cls}(…)"
                ran = c.facts.runs_on.get(b.attr, frozenset())
                text = index.text_of(c, line)
                args = call_args(index.source(c, b.span))
                built.append(Relation("hold", line, c.name, ran, text, link, args, "__init__"))
        for b in c.facts.made:
            if b.callee == ref:
                line = c.line + b.line - 1
                link = f"self.{b.attr}(…) → {cls}(…)"  # `self.x = ` once `_made` finds it
                text = index.text_of(c, line)
                args = call_args(index.source(c, b.span))
                built.append(Relation("make", line, c.name, frozenset(), text, link, args, b.attr))
    return out + sorted(set(built))


# --- from class to class -----------------------------------------------------------------


def loader_of(calls: dict[str, frozenset[str]], method: str) -> str | None:
    """The weight loading method (`runs`) of a class that a helper runs in: a method the
    class calls only from its weight loading (`do_load_weights` ->
    `_maybe_quant_weights_to_fp8_ue8m0`) runs only when the weights are loaded. None when
    another of its methods calls it, or none does. `calls`: the class's `self_calls`."""

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


def runs(method: str, called: frozenset[str]) -> bool:
    """Whether a holder runs a method of the instance it holds: weight loading
    (`load_weights`, `do_load_weights`, ...) only if it calls it or the instance's
    `load_weights`, which runs the rest (models that hold a language model often load its
    weights themselves); the other methods run when the instance is built or called,
    directly or through the instance's own calls (forward -> forward_deepep)."""
    return "load_weights" not in method or method in called or "load_weights" in called


def ways_passed_on(rel: Relation, held: Chains, local: bool) -> list[tuple[str, Way]]:
    """The (method, way) a relation passes on from the class it relates to: a subclass keeps
    the methods it does not replace, each with its own way; a holder holds the instance in
    `rel.via` (`__init__`, or "__init__ m" through a factory method m it calls: a subclass
    may replace either), reached through the shortest way of the methods it runs on it. A
    step into another file takes ways of fewer than MAX_CLASS_HOPS such steps."""
    usable = [(m, way) for m, way in held.items() if local or way.hops < MAX_CLASS_HOPS]
    if rel.kind == "inherit":  # ("__init__ m": held by `__init__` through factory method m)
        return [(m, way) for m, way in usable if rel.methods.isdisjoint(m.split())]
    run = [way for m, way in usable if runs(m, rel.methods)]
    return [(rel.via, min(run, key=lambda way: len(way.chain)))] if run else []


@dataclass
class ReachedClass:
    """A model class reached by flags: where it is and, per dest, per method holding the
    dest's uses, the shortest way through that method. A class reached from it cites the
    way of a method that runs there: a subclass replacing a method without `super()` drops
    that method's way (all of them: the dest), a holder cites a method it runs (`runs`), so a
    model holding DeepseekV2ForCausalLM without calling its weight loader is cited through
    the MoE layer its `__init__` builds, not through the loader's read."""

    path: str
    ways: dict[str, Chains] = field(default_factory=dict)
    # per dest: the ways its uses in `__init__` are reached under conditions on what the
    # call there passes; None: one is reached without
    guards: dict[str, list[Guard] | None] = field(default_factory=dict)

    def guard(self, dest: str, line: int, conds: list[Any] | None) -> None:
        """`conds`: the (carrier, condition) of each way to the site at `line` (the
        resolver's), None when one has none."""
        before = self.guards.get(dest, [])
        if conds is None or before is None:
            self.guards[dest] = None
        else:
            self.guards[dest] = [*before, *(Guard(line, carrier, c) for carrier, c in conds)]


class ImportGraph(Protocol):
    """What the walk asks of the resolver of the version (ingest/indirect.py's Resolver)."""

    files: dict[str, str]  # path -> blob, the files it follows
    bound: dict[str, dict[str, Target]]  # path -> alias -> what the file's import binds it to

    def importers(self, target: Target) -> list[tuple[str, str]]:
        """(path, alias) of every binding of `target`, in the order of the files."""
        ...

    def module(self, path: str) -> str:
        """The module a file is ("" for none)."""
        ...

    def holder_reaches(
        self, sha: str, guards: tuple[Guard, ...], args: Args, read_text: Callable[[str], str]
    ) -> bool:
        """Whether an instance of a class of blob `sha`, built with `args`, can make one of
        its guards' conditions true."""
        ...


class ModelClasses:
    """The model-class step of the resolver, over versions one after another: what depends
    on a blob alone (its class index, the relations of its classes to a class named some way,
    the class and method holding a line, whether a holder's arguments reach a guarded use) is
    kept while a version has the blob."""

    def __init__(self, graph: ImportGraph) -> None:
        self.graph = graph
        self.indexes: dict[str, ClassIndex] = {}  # sha ->
        # class text -> its facts, of the classes parsed in the blobs of this version and the
        # last: a file's next blob mostly keeps its classes' text
        self.facts: dict[str, ClassFacts] = {}
        self.relations: dict[tuple[str, str, bool], list[Relation]] = {}  # (sha, ref, local)
        self.holding: dict[str, dict[int, tuple[str, str] | None]] = {}  # sha -> line ->
        # (sha, a class's guards there, a holder's arguments) -> whether they reach a use
        self.reached: dict[tuple[str, tuple[Guard, ...], Args], bool] = {}

    def keep(self, shas: set[str]) -> None:
        """Drop what belongs to blobs no longer in the version (their classes' facts once
        the next blobs of their files had them)."""
        kept = {t: f for index in self.indexes.values() for t, f in index.texts.items()}
        self.facts.clear()  # (in place: the indexes kept share it)
        self.facts.update(kept)
        self.indexes = {k: v for k, v in self.indexes.items() if k in shas}
        self.relations = {k: v for k, v in self.relations.items() if k[0] in shas}
        self.holding = {k: v for k, v in self.holding.items() if k in shas}
        self.reached = {k: v for k, v in self.reached.items() if k[0] in shas}

    def inherit(self, files: dict[str, str], read_text: Callable[[str], str], sites: Sites):
        """Model classes reached from a class of a model file holding a use site get the
        site's flags, the chain extended by one link per step, in two ways:
        - inheritance: `class Qwen3MoeModel(Qwen2MoeModel)` (or `(qwen2_moe.Qwen2MoeModel)`
          through a module import): the link is the base's name; a subclass that replaces
          every method holding a flag's uses without calling `super()` does not get it;
        - composition: `self.model = Glm4MoeModel(...)` in a class's `__init__` (also inside
          `make_layers(lambda ...: X(...))` or a list): the link is `self.model = X(…)`,
          and the method holding the uses is `__init__`; not when every way to the
          uses there is a conditional carrier's call its literal arguments make false
          (`holder_reaches`: `DecoderLayer(config, 0, is_nextn=True)`).
        A step into another model file records a site there (the class line, or the
        assignment line); a step inside one file (DeepseekV2ForCausalLM holding
        DeepseekV2Model) records none (the file has one) but is followed on. Names resolve
        through the file's imports like any carrier (a name also defined in the importing
        file is two things: not followed). MAX_CLASS_HOPS steps into other files at most; only
        model files that import such a class (or its module) are read."""
        graph = self.graph
        users: dict[Target, ReachedClass] = {}  # (module, class) ->
        for site in sorted(sites.values(), key=lambda s: (s["path"], s["line"], s["dest"])):
            if site["path"].startswith(MODELS_DIR):
                where = self._class_method(files[site["path"]], site["line"], read_text)
                if where is not None:
                    key = (graph.module(site["path"]), where[0])
                    user = users.setdefault(key, ReachedClass(site["path"]))
                    held = user.ways.setdefault(site["dest"], {})
                    old = held.get(where[1])
                    if old is None or len(old.chain) > len(site["via"]):
                        held[where[1]] = Way(site["via"], 0)
                    if where[1] == "__init__":
                        user.guard(site["dest"], site["line"], site.get("conds"))
        # Breadth first, so the shortest chain wins. A class is followed again for a dest
        # when a later way adds a method holding its uses (a subclass replacing the first
        # ones may still inherit it); methods only grow, so this ends.
        todo = {key: set(user.ways) for key, user in users.items()}
        while todo:
            new: dict[Target, set[str]] = defaultdict(set)
            for (module, cls), dests in sorted(todo.items()):
                user = users[(module, cls)]
                found = [(user.path, cls, True)]  # other classes of its own file
                if min(w.hops for d in dests for w in user.ways[d].values()) < MAX_CLASS_HOPS:
                    for path, ref in self._class_refs(module, cls):
                        if path.startswith(MODELS_DIR) and graph.module(path) != module:
                            found.append((path, ref, False))
                for path, ref, local in found:
                    rels = self._relations(files[path], ref, cls, local, read_text)
                    for rel in self._made(path, rels, read_text):
                        key = (graph.module(path), rel.name)
                        for dest in sorted(dests):
                            held = user.ways[dest]
                            # (a holder building it with arguments that make every way to
                            # its `__init__`'s uses false: not through `__init__`)
                            guards = user.guards.get(dest)
                            if rel.kind == "hold" and guards and "__init__" in held:
                                sha = files[user.path]
                                rkey = (sha, tuple(guards), rel.args)
                                if rkey not in self.reached:
                                    self.reached[rkey] = graph.holder_reaches(
                                        sha, rkey[1], rel.args, read_text
                                    )
                                if not self.reached[rkey]:
                                    held = {m: w for m, w in held.items() if m != "__init__"}
                            passed = ways_passed_on(rel, held, local)
                            if not passed:
                                continue
                            ways = {
                                m: Way([*w.chain, rel.link], w.hops + (not local))
                                for m, w in passed
                            }
                            # cited even where the class reads the flag another way too,
                            # through the shortest chain of a method that runs there
                            if not local and (dest, path, rel.line) not in sites:
                                chain = min((w.chain for w in ways.values()), key=len)
                                sites[(dest, path, rel.line)] = {
                                    "dest": dest, "path": path, "line": rel.line,
                                    "text": rel.text, "via": chain, "rank": (1, len(chain)),
                                }  # fmt: skip
                            reached = users.setdefault(key, ReachedClass(path))
                            there = reached.ways.setdefault(dest, {})
                            for method, way in ways.items():
                                # reached without conditions: followed again if it was
                                # with them
                                if method.split()[0] == "__init__" and reached.guards.get(dest):
                                    reached.guards[dest] = None
                                    new[key].add(dest)
                                if method not in there:
                                    there[method] = way
                                    new[key].add(dest)
            todo = new

    def _class_refs(self, module: str, cls: str) -> list[tuple[str, str]]:
        """(path, how the file names the class) of the files importing it: its alias, or
        `alias.Class` where the file imports the class's module."""
        out = list(self.graph.importers((module, cls)))
        parent, _, last = module.rpartition(".")
        if parent:
            found = self.graph.importers((parent, last))
            out.extend((path, f"{alias}.{cls}") for path, alias in found)
        return out

    def _index(self, sha: str, read_text: Callable[[str], str]) -> ClassIndex:
        found = self.indexes.get(sha)
        if found is None:
            found = self.indexes[sha] = ClassIndex(read_text(sha), self.facts)
        return found

    def _relations(
        self, sha: str, ref: str, cls: str, local: bool, read_text: Callable[[str], str]
    ) -> list[Relation]:
        key = (sha, ref, local)
        found = self.relations.get(key)
        if found is None:
            text = read_text(sha)
            # (most files asked about do not name the class: no index for them)
            found = relations(self._index(sha, read_text), ref, cls, local) if ref in text else []
            self.relations[key] = found
        return found

    def _made(
        self, path: str, rels: list[Relation], read_text: Callable[[str], str]
    ) -> list[Relation]:
        """`rels` with each `make` (a factory method returning the class) made a hold where
        the `__init__` the holder runs assigns `self.x = self.method(...)`: its own, or
        (through `super().__init__()`, or having none) its first base's, in its file or
        imported (Llama4ForCausalLM replaces `_init_model`, LlamaForCausalLM's `__init__`
        calls it); dropped where none does. The factory is the holder's own method, so
        it is the one `self.method` resolves to."""
        if all(r.kind != "make" for r in rels):
            return rels
        files = self.graph.files
        out: list[Relation] = []
        for rel in rels:
            if rel.kind != "make":
                out.append(rel)
                continue
            method = rel.via
            owner = self._index(files[path], read_text).named(rel.name)[0]
            where: tuple[str, ModelClass] | None = (path, owner)
            ran: list[dict[str, frozenset[str]]] = []  # of the classes passed: the holder
            for _ in range(MAX_BASES):  # runs their methods
                if where is None:
                    break
                at, c = where
                ran.append(c.facts.runs_on)
                attr, goes_on = c.facts.init_assign(method)
                if attr is not None:
                    # (held by `__init__` through the factory: a subclass replacing
                    # either without `super()` does not hold it)
                    out.append(
                        rel._replace(
                            kind="hold",
                            methods=frozenset(m for r in ran for m in r.get(attr, ())),
                            link=f"self.{attr} = {rel.link}",
                            via=f"__init__ {method}",
                        )
                    )
                    break
                where = self._base(at, c, read_text) if goes_on else None
        return sorted(set(out))

    def _base(
        self, path: str, c: ModelClass, read_text: Callable[[str], str]
    ) -> tuple[str, ModelClass] | None:
        """(path, class) of a class's first base: defined in its file, or imported from
        the module defining it (`from ...llama import LlamaForCausalLM`, `llama.X`); None
        when it is neither, or both (two things)."""
        if not c.facts.bases:
            return None
        files = self.graph.files
        base = c.facts.bases[0]
        bound = self.graph.bound.get(path, {})
        mod, _, name = base.rpartition(".")
        target = bound.get(mod or name)
        if mod:  # `llama.X`: `llama` is a module
            module = ".".join(target) if target is not None and "." not in mod else None
        else:
            local = self._index(files[path], read_text).named(name)
            if local:
                return (path, local[0]) if len(local) == 1 and target is None else None
            module, name = target if target is not None else (None, name)
        there = f"python/{module.replace('.', '/')}.py" if module else ""
        other = files.get(there)
        if other is None:
            return None
        found = self._index(other, read_text).named(name)
        return (there, found[0]) if len(found) == 1 else None

    def _class_method(
        self, sha: str, line: int, read_text: Callable[[str], str]
    ) -> tuple[str, str] | None:
        """(top-level class, its method) holding `line`; None outside a class. The method is
        the last one of the class's own defs starting at or above the line (the class
        itself above the first), or the weight loader that alone calls it (`loader_of`)."""
        by_line = self.holding.setdefault(sha, {})
        if line not in by_line:
            c = self._index(sha, read_text).at(line)
            found = None
            if c is not None:
                method = c.name
                for no, name in c.facts.methods:
                    if c.line + no - 1 <= line:
                        method = name
                calls = c.facts.self_calls
                if "load_weights" not in method and method in calls:
                    method = loader_of(calls, method) or method
                found = (c.name, method)
            by_line[line] = found
        return by_line[line]


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
