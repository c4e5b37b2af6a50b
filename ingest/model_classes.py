"""Model classes: the classes of model files that get a flag's reads from another class, by
deriving from it or by holding an instance of it, each with the chain that reaches it.

A model file often reads no flag itself: `class Qwen3MoeModel(Qwen2MoeModel)` inherits the
reads in its base's methods, and `self.model = Glm4MoeModel(...)` in a class's `__init__`
runs those of the class it holds. The resolver (ingest/indirect.py) finds the use sites in
model files; `ModelClasses.inherit` then goes from the class holding each site to the classes
deriving from it or holding an instance of it, in its own file and in the model files
importing it, one link of the chain per step (MAX_CLASS_HOPS steps into other files).

What is said of a class comes from Python's `ast`, read lazily: a file is cut at the lines
starting a top-level statement, a class's body at its indentation into members (a def with
its decorators, an assignment), and only the members a question needs are parsed (its
`__init__` for the instances it holds, the methods naming a method for who calls it), each
member once per blob (whose index is kept while a version has it). A cut that may fall
in a string is checked by parsing more around it. Over the 124 real tags the step takes
~1.0 s of CPU (0.75 s with the regexes this replaced); parsing each class it asks about
whole took ~1.9 s, each blob whole more.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, NamedTuple, Protocol

from ingest.carriers import ModelStep
from ingest.pyfile import MAX_ACCESSOR_LINES, significant
from kb.pyast import PARSE_FAILURES, gc_paused

MODELS_DIR = "python/sglang/srt/models/"
# Steps into another model file from a class holding a use: Qwen2MoeModel <- Qwen3MoeModel
# (qwen3_moe) <- a subclass of that; DeepseekV3ForCausalLM <- MistralLarge3ForCausalLM
# (mistral_large_3) <- held by PixtralForConditionalGeneration (pixtral); no further.
MAX_CLASS_HOPS = 2
MAX_BASES = 4  # classes up a holder's bases looked at for the `__init__` calling a factory
# A line starting a top-level statement (led by the newline before it: fast), and the
# keyword and name of one starting a `def` or `class`: what is read of the text without a
# parse, to cut it (everything said of a class comes from parsing its `class` line and
# members).
TOP_LINE_RE = re.compile(r"\n(?=[^ \t\n#)\]}])")
TOP_DEF_RE = re.compile(r"(?:async[ \t]+)?(def|class)[ \t]+(\w+)")

Target = tuple[str, str]  # (module, name)
# (dest, path, line, entry) -> a use site: {"dest", "path", "line", "text", "via", "rank",
# "conds"}; entry: "" for the resolver's sites (one per line), the entry point of a model
# class's site (one per entry point the class reaches the flag through: `entry_of`)
Sites = dict[tuple[str, str, int, str], dict[str, Any]]


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
    # inherit them; hold: the weight loading methods it calls on the instance it holds
    # (`loaders_run_on`: it runs the others when it builds or calls the instance)
    methods: frozenset[str]
    text: str  # of that line
    link: str  # of the chain: the base's name | `self.model = X(…)` | `self.m(…) → X(…)`
    args: Args  # of the call building the instance (hold, make)
    # the method holding the instance: `__init__`, or `__init__ m` once `_made` finds the
    # `self.x = self.m(...)` in `__init__` that makes a `make` a hold; make: `m`
    via: str


class Way(NamedTuple):
    """The shortest chain reaching a method of a class through one entry point, with the
    steps into other model files it took (MAX_CLASS_HOPS at most)."""

    chain: list[str]
    hops: int


# (method, entry point) -> the way through it: a class keeps a way per entry point, so that
# a model holding DeepseekV2ForCausalLM is cited through model_forward_maybe_tbo (its
# forward) and through LayerScatterModes (the layers its `__init__` builds) alike
Chains = dict[tuple[str, str], Way]


def entry_of(chain: list[str]) -> str:
    """The entry point of a chain: its last step in shared code (a function, a class's
    method: not a ModelStep), "" for none (a model file's own carrier)."""
    return next((str(s) for s in reversed(chain) if not isinstance(s, ModelStep)), "")


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
    (made). Lines are relative to the first line of the member holding it (1)."""

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


class Member(NamedTuple):
    """A statement of a class's body: a def with its decorators, a nested class, an
    assignment. Lines are relative to the `class` line (1)."""

    line: int  # its first line
    def_line: int  # a def's `def` line (its first line for another statement)
    name: str | None  # a def's name
    text: str  # its lines as in the file


class MemberFacts(NamedTuple):
    """What one member says, from its parse (lines relative to its first line, 1): it
    depends on the member's text alone, so a text is parsed once while a blob holding it
    (or the last version's) lives."""

    self_calls: frozenset[str] = frozenset()  # the `x` of each `self.x(`
    supers: frozenset[str] = frozenset()  # the `m` of each `super().m(`
    # x -> the weight loading methods (`runs`) of each `self.x.m(`: `self.model.load_weights(`
    loaders_run_on: dict[str, frozenset[str]] = {}
    made: tuple[Built, ...] = ()  # a short def's returns, when each calls the same name
    held: tuple[Built, ...] = ()  # an `__init__`'s calls in `self.x = ...` statements
    # an `__init__`'s (x, m) of each `self.x = self.m(...)`, in the order of the lines
    assigns: tuple[tuple[str, str], ...] = ()


SAYS_NOTHING = MemberFacts()  # a member that does not parse


class ModelClass:
    """A top-level class of a blob. Its members are cut at its body's indentation, each
    parsed when a question needs it: a question about a name reads only the members whose
    text has it as the code it looks for is written (`self.m(` has ".m(", `self.x.m(` has
    "self.x.", `super().m(` has "super("). A member that does not parse says nothing."""

    def __init__(
        self,
        block: _Block,
        bases: tuple[str, ...],
        members: tuple[Member, ...],
        index: ClassIndex,
        known: dict[Member, MemberFacts] | None = None,
    ) -> None:
        self.name, self.line, self.last = block.name, block.line, block.last
        self.header = index.text[block.start : block.end].split("\n", 1)[0]  # the `class` line
        self.bases = bases  # as written: `Qwen2MoeModel`, `qwen2_moe.Qwen2MoeModel`
        self.members = members
        self._known = {} if known is None else known  # member -> its facts, once read

    def text_of(self, line: int) -> str:
        """The text of a line of the class (numbered in the file), as cited."""
        return self._lines(line, line)[0].strip()[:240]

    def source(self, span: tuple[int, int, int, int]) -> str:
        """The text of a node from its span (Built.span: lines relative to the class)."""
        first, col, last, end_col = span
        lines = [line.encode() for line in self._lines(self.line + first - 1, self.line + last - 1)]
        lines[-1] = lines[-1][:end_col]
        lines[0] = lines[0][col:]
        return b"\n".join(lines).decode()

    def _lines(self, first: int, last: int) -> list[str]:
        """Lines `first` to `last` (numbered in the file), from the member holding them."""
        if first == self.line:
            return [self.header]
        m = next(m for m in reversed(self.members) if self.line + m.line - 1 <= first)
        at = first - (self.line + m.line - 1)
        return m.text.split("\n")[at : at + last - first + 1]

    @property
    def methods(self) -> list[tuple[int, str]]:
        """(line, name) of its own defs, in order."""
        return [(m.def_line, m.name) for m in self.members if m.name is not None]

    def facts(self, m: Member) -> MemberFacts:
        found = self._known.get(m)
        if found is None:
            found = self._known[m] = _facts_of_text(m.text)
        return found

    def _having(self, *texts: str) -> list[tuple[Member, MemberFacts]]:
        """The members whose text has each of `texts`, with their facts."""
        return [(m, self.facts(m)) for m in self.members if all(t in m.text for t in texts)]

    def calls(self, caller: str, callee: str) -> bool:
        """Whether its method `caller` (the last def of that name) calls `self.callee(`."""
        defs = [m for m in self.members if m.name == caller]
        m = defs[-1] if defs else None
        return m is not None and f".{callee}(" in m.text and callee in self.facts(m).self_calls

    @property
    def replaced(self) -> frozenset[str]:
        """The methods it defines without calling the base's (`super().m()`): it does not
        inherit them."""
        called = {name for _m, f in self._having("super(") for name in f.supers}
        return frozenset(name for _line, name in self.methods if name not in called)

    def loaders_run_on(self, attr: str) -> frozenset[str]:
        """The weight loading methods it calls on what it keeps in `self.attr`
        (`self.model.load_weights(`): of the methods it runs of the instance, those `runs`
        cannot tell without."""
        found = self._having(f"self.{attr}.", "load_weights")
        return frozenset(n for _m, f in found for n in f.loaders_run_on.get(attr, ()))

    def held(self, ref: str) -> list[Built]:
        """The calls of `ref` in its `__init__`'s `self.x = ...` statements (lines relative
        to the `class` line)."""
        init = self._init()
        if init is None or ref not in init.text:
            return []
        return [_shifted(b, init.line) for b in self.facts(init).held if b.callee == ref]

    def made(self, ref: str) -> list[Built]:
        """The returns of `ref` of its factory methods (lines relative to the `class` line)."""
        return [
            _shifted(b, m.line) for m, f in self._having(ref) for b in f.made if b.callee == ref
        ]

    def init_assign(self, method: str) -> tuple[str | None, bool]:
        """The `x` of the first `self.x = self.method(...)` in its own `__init__` (None if
        none), and whether the base's `__init__` runs too (it has none, or calls it)."""
        init = self._init()
        if init is None:
            return None, True
        read = f".{method}(" in init.text or "super(" in init.text
        facts = self.facts(init) if read else SAYS_NOTHING
        attr = next((x for x, m in facts.assigns if m == method), None)
        return attr, "__init__" in facts.supers

    def _init(self) -> Member | None:
        return next((m for m in self.members if m.name == "__init__"), None)


def _shifted(b: Built, line: int) -> Built:
    """`b` with its lines relative to the `class` line, from relative to a member's first."""
    first, col, last, end_col = b.span
    by = line - 1
    return b._replace(line=b.line + by, span=(first + by, col, last + by, end_col))


Cut = tuple[tuple[str, ...], tuple[Member, ...]]  # a class's bases and members (_cut)


class _Block(NamedTuple):
    """A top-level block starting with a `class` line."""

    name: str
    line: int
    last: int
    start: int  # offsets of the block in the text
    end: int


class ClassIndex:
    """One blob's top-level classes and the names it defines at the top level. A block ends,
    as in PyFile, before the next line that starts at the first column (blank lines,
    comments and closing brackets do not); a class is read when a question needs it: its
    `class` line parsed for its bases, its members cut (ModelClass). When a class's block
    does not read so (a line of a string at the first column cut it, or one looks like a
    class, or a header over several lines), the block is parsed whole, or the whole file's
    parse places the blocks. A class that does not parse either way is none."""

    def __init__(self, text: str) -> None:
        self.text = text
        starts, line, last = [], 1, 0
        for m in TOP_LINE_RE.finditer("\n" + text):  # (offsets in `text`: one more)
            line += text.count("\n", last, m.start())
            last = m.start()
            starts.append((line, m.start()))
        self._place(starts, [*starts[1:], self._past_end()])
        self._whole_file_tried = False

    def _past_end(self) -> tuple[int, int]:
        return self.text.count("\n") + 2, len(self.text) + 1

    def _place(self, starts: list[tuple[int, int]], ends: list[tuple[int, int]]) -> None:
        """The blocks from the (line, offset) where each top-level statement starts and
        those of the line past it."""
        self._blocks: list[_Block] = []
        self.declared: set[str] = set()  # the names of its top-level defs and classes
        # name -> the blocks of the top-level statements starting with it (maybe assignments)
        self._assigned: dict[str, list[tuple[int, int]]] = defaultdict(list)
        text = self.text
        for (line, start), (past, end) in zip(starts, ends, strict=True):
            head = text[start : text.find("\n", start) % (len(text) + 1)]
            m = TOP_DEF_RE.match(head)
            if m is not None:
                self.declared.add(m.group(2))
                if m.group(1) == "class" and not head.startswith("async"):
                    self._blocks.append(_Block(m.group(2), line, past - 1, start, end - 1))
                continue
            word = head.split("=", 1)[0].split(":", 1)[0].strip()
            if word.isidentifier():
                self._assigned[word].append((start, end - 1))
        self._classes: dict[int, ModelClass | None] = {}  # by line, once read

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
        offsets = [0, *accumulate(map((1).__add__, map(len, self.text.split("\n"))))]
        # (a block starts at its `def`/`class` line, ends before the next one's decorators)
        leads = [
            min([n.lineno, *(d.lineno for d in getattr(n, "decorator_list", ()))]) for n in body
        ]
        starts = [(n.lineno, offsets[n.lineno - 1]) for n in body]
        self._place(starts, [*((k, offsets[k - 1]) for k in leads[1:]), self._past_end()])
        return True

    def named(self, name: str) -> list[ModelClass]:
        return self._read_where(lambda b: b.name == name)

    def at(self, line: int) -> ModelClass | None:
        """The class whose block holds `line`."""
        found = self._read_where(lambda b: b.line <= line <= b.last)
        return found[0] if found else None

    def mentioning(self, ref: str) -> list[ModelClass]:
        """The classes whose text has `ref`, in the order of the file."""
        return self._read_where(lambda b: self.text.find(ref, b.start, b.end) >= 0)

    def _read_where(self, wanted: Callable[[_Block], bool]) -> list[ModelClass]:
        """The classes of the blocks `wanted`; again if reading one placed them anew."""
        while True:
            blocks = self._blocks
            found = [self._read(b) for b in blocks if wanted(b)]
            if self._blocks is blocks:
                return [c for c in found if c is not None]

    def _read(self, b: _Block) -> ModelClass | None:
        if b.line not in self._classes:
            text = self.text[b.start : b.end]
            # (a cut in a string or brackets: the whole file's parse places the blocks)
            if _maybe_cut(text) and self._place_by_parse():
                return None  # (this block is gone: asked again)
            cut = _cut(text.split("\n"))
            if cut is not None:
                c: ModelClass | None = ModelClass(b, *cut, self)
            else:  # (a header over several lines, a cut member)
                node = _class_node(text)
                if node is None and self._place_by_parse():
                    return None
                if node is None:
                    c = None
                else:
                    members, known = _parsed(node, text.split("\n"))
                    c = ModelClass(b, _bases(node), members, self, known)
            self._classes[b.line] = c
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


def _cut(lines: list[str]) -> Cut | None:
    """A class block's bases (its `class` line parsed) and members, cut at the body's
    indentation (a line there starts a member, but for a closing bracket; decorators start
    the def they decorate); None when its header spans lines or its body is on it."""
    try:
        body = ast.parse(lines[0] + "\n pass").body
    except (SyntaxError, *PARSE_FAILURES):
        return None
    if len(body) != 1 or not isinstance(body[0], ast.ClassDef):
        return None
    first = next((i for i in range(1, len(lines)) if significant(lines[i])), None)
    if first is None:
        return None
    line = lines[first]
    indent = line[: len(line) - len(line.lstrip(" \t"))]
    if not indent:
        return None
    n = len(indent)
    starts = [
        i
        for i in range(first, len(lines))
        if lines[i].startswith(indent)
        and lines[i][n : n + 1] not in ("", " ", "\t", "#", ")", "]", "}")
    ]
    members: list[Member] = []
    head = None  # the first line of the decorators above a def
    for k, i in enumerate(starts):
        if lines[i][n] == "@":
            head = i if head is None else head
            continue
        end = starts[k + 1] if k + 1 < len(starts) else len(lines)
        m = TOP_DEF_RE.match(lines[i], n)
        name = m.group(2) if m is not None and m.group(1) == "def" else None
        first_line = i if head is None else head
        text = "\n".join(lines[first_line:end])
        if _maybe_cut(text):  # (a cut in a string or brackets: the class is parsed whole)
            return None
        members.append(Member(first_line + 1, i + 1, name, text))
        head = None
    return _bases(body[0]), tuple(members)


def _maybe_cut(text: str) -> bool:
    """Whether `text` may end inside a triple-quoted string: an odd count of one kind of
    quotes (then it is parsed with more around it: a quote in another string costs a parse
    and changes nothing). A cut inside brackets (a line continuing at the first column, or
    at a class body's indentation) is not looked for: formatted code has none, and a member
    cut so says nothing."""
    return text.count('"""') % 2 == 1 or text.count("'''") % 2 == 1


def _bases(node: ast.ClassDef) -> tuple[str, ...]:
    return tuple(ast.unparse(b) for b in node.bases)


def _class_node(block: str) -> ast.ClassDef | None:
    try:
        with gc_paused():
            body = ast.parse(block).body
    except (SyntaxError, *PARSE_FAILURES):
        return None
    return body[0] if len(body) == 1 and isinstance(body[0], ast.ClassDef) else None


def _parsed(
    node: ast.ClassDef, lines: list[str]
) -> tuple[tuple[Member, ...], dict[Member, MemberFacts]]:
    """The members of a class parsed whole, with their facts (`lines`: its block's)."""
    first = node.lineno - 1  # (a line minus `first`: relative to the `class` line)
    leads = [
        min([s.lineno, *(d.lineno for d in getattr(s, "decorator_list", ()))]) for s in node.body
    ]
    ends = [lead - 1 for lead in leads[1:]] + [len(lines) + first]
    members, known = [], {}
    for st, lead, end in zip(node.body, leads, ends, strict=True):
        name = st.name if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
        text = "\n".join(lines[lead - first - 1 : end - first])
        m = Member(lead - first, st.lineno - first, name, text)
        members.append(m)
        known[m] = _statement_facts([st], lead - 1)
    return tuple(members), known


# A member's text -> its facts, across blobs: a file's next blob keeps most of its members'
# texts (of the members parsed in a full ingest of the 124 real tags, 2 in 3 had a text
# parsed before, in an earlier blob). The last MAX_MEMBER_TEXTS distinct texts are kept
# (emptied when full: a full ingest parses ~800).
_MEMBER_TEXTS: dict[str, MemberFacts] = {}
MAX_MEMBER_TEXTS = 2048


def _facts_of_text(text: str) -> MemberFacts:
    found = _MEMBER_TEXTS.get(text)
    if found is None:
        if len(_MEMBER_TEXTS) >= MAX_MEMBER_TEXTS:
            _MEMBER_TEXTS.clear()
        found = _MEMBER_TEXTS[text] = _member_facts(text) or SAYS_NOTHING
    return found


def _member_facts(text: str) -> MemberFacts | None:
    """A member's facts from its text (at the body's indentation); None if it does not
    parse."""
    with gc_paused():  # (a parse makes many objects and no cycles)
        try:
            body = ast.parse("class _:\n" + text).body
        except (SyntaxError, *PARSE_FAILURES):
            return None
        node = body[0] if len(body) == 1 else None
        return _statement_facts(node.body, 1) if isinstance(node, ast.ClassDef) else None


def _statement_facts(body: list[ast.stmt], first: int) -> MemberFacts:
    """What one walk of a member's statements finds; `first`: the line before its first."""
    calls: set[str] = set()  # `self.x(`
    supers: set[str] = set()  # `super().m(`
    loaders_run_on: dict[str, set[str]] = defaultdict(set)
    made: list[Built] = []
    held: list[Built] = []
    assigns: list[tuple[int, str, str]] = []  # (line, x, m) of `self.x = self.m(...)`
    for st in body:
        is_init = isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and st.name == "__init__"
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
                        if _is_self(owner.value) and "load_weights" in func.attr:
                            loaders_run_on[owner.attr].add(func.attr)
                    elif _is_super(owner):
                        supers.add(func.attr)
            elif kind is ast.Return:
                returns.append(sub)  # type: ignore[arg-type]
            elif is_init and (kind is ast.Assign or kind is ast.AnnAssign):
                _in_init(sub, first, held, assigns)  # type: ignore[arg-type]
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            made += _factory(st, returns, first)
    return MemberFacts(
        self_calls=frozenset(calls),
        supers=frozenset(supers),
        loaders_run_on={attr: frozenset(names) for attr, names in loaders_run_on.items()},
        made=tuple(made),
        held=tuple(held),
        assigns=tuple((attr, method) for _line, attr, method in sorted(assigns)),
    )


# Fields walked past: contexts, operators and imported names hold no call (and are a third
# of the nodes ast.walk visits); the others listed hold a string or a number, never a node.
SKIPPED_FIELDS = {
    "ctx", "op", "ops", "names", "kwd_attrs", "type_comment", "kind",
    "id", "attr", "arg", "name", "is_async", "conversion", "simple",
}  # fmt: skip
_FIELDS: dict[type, tuple[str, ...]] = {ast.Constant: ()}  # (its value is no node)


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
    found = [c for c in index.mentioning(ref) if c.name != cls]
    out = [
        Relation("inherit", c.line, c.name, c.replaced, c.text_of(c.line), cls, (), "__init__")
        for c in found
        if ref in c.bases
    ]
    built: list[Relation] = []
    for c in found:
        for b in c.held(ref):
            line = c.line + b.line - 1
            link = f"self.{b.attr} = {'' if b.direct else '…'}{cls}(…)"
            text = c.text_of(line)
            args = call_args(c.source(b.span))
            ran = c.loaders_run_on(b.attr)
            built.append(Relation("hold", line, c.name, ran, text, link, args, "__init__"))
        for b in c.made(ref):
            line = c.line + b.line - 1
            link = f"self.{b.attr}(…) → {cls}(…)"  # `self.x = ` once `_made` finds it
            text = c.text_of(line)
            args = call_args(c.source(b.span))
            built.append(Relation("make", line, c.name, frozenset(), text, link, args, b.attr))
    return out + sorted(set(built))


# --- from class to class -----------------------------------------------------------------


def loader_of(c: ModelClass, method: str) -> str | None:
    """The weight loading method (`runs`) of a class that a helper runs in: a method the
    class calls only from its weight loading (`do_load_weights` ->
    `_maybe_quant_weights_to_fp8_ue8m0`) runs only when the weights are loaded. None when
    another of its methods calls it, or none does."""
    return _loader(c, list(dict.fromkeys(name for _line, name in c.methods)), method, frozenset())


def _loader(c: ModelClass, names: list[str], name: str, seen: frozenset[str]) -> str | None:
    # (a function of the module, not one nested in loader_of: a nested function calling
    # itself is a reference cycle, which would keep the class until the cyclic collector
    # runs, seldom in the ingest)
    if "load_weights" in name:
        return name
    first = None
    for n in names:  # every caller must be (called from) weight loading: stop at one not
        if n != name and n not in seen and c.calls(n, name):
            found = _loader(c, names, n, seen | {name})
            if found is None:
                return None
            first = first or found
    return first


def runs(method: str, called: frozenset[str]) -> bool:
    """Whether a holder runs a method of the instance it holds: weight loading
    (`load_weights`, `do_load_weights`, ...) only if it calls it or the instance's
    `load_weights`, which runs the rest (models that hold a language model often load its
    weights themselves); the other methods run when the instance is built or called,
    directly or through the instance's own calls (forward -> forward_deepep)."""
    return "load_weights" not in method or method in called or "load_weights" in called


def ways_passed_on(rel: Relation, held: Chains, local: bool) -> list[tuple[tuple[str, str], Way]]:
    """The ((method, entry), way) a relation passes on from the class it relates to: a
    subclass keeps the methods it does not replace, each with its own ways; a holder holds
    the instance in `rel.via` (`__init__`, or "__init__ m" through a factory method m it
    calls: a subclass may replace either), reached through the shortest way of the methods
    it runs on it, per entry point. A step into another file takes ways of fewer than
    MAX_CLASS_HOPS such steps."""
    usable = [(k, way) for k, way in held.items() if local or way.hops < MAX_CLASS_HOPS]
    if rel.kind == "inherit":  # ("__init__ m": held by `__init__` through factory method m)
        return [(k, way) for k, way in usable if rel.methods.isdisjoint(k[0].split())]
    shortest: dict[str, Way] = {}
    for (method, entry), way in usable:
        if runs(method, rel.methods):
            if entry not in shortest or len(way.chain) < len(shortest[entry].chain):
                shortest[entry] = way
    return [((rel.via, entry), way) for entry, way in shortest.items()]


@dataclass
class ReachedClass:
    """A model class reached by flags: where it is and, per dest, per method holding the
    dest's uses and entry point, the shortest way through that method. A class reached
    from it cites the ways of the methods that run there: a subclass replacing a method
    without `super()` drops that method's ways (all of them: the dest), a holder cites
    methods it runs (`runs`), so a model holding DeepseekV2ForCausalLM without calling its
    weight loader is cited through the MoE layer its `__init__` builds, not through the
    loader's read."""

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
        self.relations: dict[tuple[str, str, bool], list[Relation]] = {}  # (sha, ref, local)
        self.holding: dict[str, dict[int, tuple[str, str] | None]] = {}  # sha -> line ->
        # (sha, a class's guards there, a holder's arguments) -> whether they reach a use
        self.reached: dict[tuple[str, tuple[Guard, ...], Args], bool] = {}

    def keep(self, shas: set[str]) -> None:
        """Drop what belongs to blobs no longer in the version."""
        self.indexes = {k: v for k, v in self.indexes.items() if k in shas}
        self.relations = {k: v for k, v in self.relations.items() if k[0] in shas}
        self.holding = {k: v for k, v in self.holding.items() if k in shas}
        self.reached = {k: v for k, v in self.reached.items() if k[0] in shas}

    def inherit(self, files: dict[str, str], read_text: Callable[[str], str], sites: Sites) -> None:
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
                    cls, method = where
                    key = (graph.module(site["path"]), cls)
                    user = users.setdefault(key, ReachedClass(site["path"]))
                    held = user.ways.setdefault(site["dest"], {})
                    through = (method, entry_of(site["via"]))
                    old = held.get(through)
                    if old is None or len(old.chain) > len(site["via"]):
                        held[through] = Way(site["via"], 0)
                    if method == "__init__":
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
                            at_init = any(m == "__init__" for m, _entry in held)
                            if rel.kind == "hold" and guards and at_init:
                                sha = files[user.path]
                                rkey = (sha, tuple(guards), rel.args)
                                if rkey not in self.reached:
                                    self.reached[rkey] = graph.holder_reaches(
                                        sha, rkey[1], rel.args, read_text
                                    )
                                if not self.reached[rkey]:
                                    held = {k: w for k, w in held.items() if k[0] != "__init__"}
                            passed = ways_passed_on(rel, held, local)
                            if not passed:
                                continue
                            link = ModelStep(rel.link)
                            ways = {
                                k: Way([*w.chain, link], w.hops + (not local)) for k, w in passed
                            }
                            if not local:
                                self._cite(sites, dest, path, rel, ways)
                            reached = users.setdefault(key, ReachedClass(path))
                            there = reached.ways.setdefault(dest, {})
                            for through, way in ways.items():
                                # reached without conditions: followed again if it was
                                # with them
                                init = through[0].split()[0] == "__init__"
                                if init and reached.guards.get(dest):
                                    reached.guards[dest] = None
                                    new[key].add(dest)
                                if through not in there:
                                    there[through] = way
                                    new[key].add(dest)
            todo = new

    @staticmethod
    def _cite(sites: Sites, dest: str, path: str, rel: Relation, ways: Chains) -> None:
        """A site on the relation's line per entry point its ways reach: cited even where
        the class reads the flag another way too, through the shortest chain of a method
        that runs there; not where the resolver cites that line through the same entry."""
        own = sites.get((dest, path, rel.line, ""))
        for entry in dict.fromkeys(e for _m, e in ways):
            key = (dest, path, rel.line, entry)
            if key in sites or (own is not None and entry_of(own["via"]) == entry):
                continue
            chain = min((w.chain for (_m, e), w in ways.items() if e == entry), key=len)
            sites[key] = {
                "dest": dest, "path": path, "line": rel.line,
                "text": rel.text, "via": chain, "rank": (1, len(chain)),
            }  # fmt: skip

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
            found = self.indexes[sha] = ClassIndex(read_text(sha))
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
            passed: list[ModelClass] = []  # the holder runs their methods
            for _ in range(MAX_BASES):
                if where is None:
                    break
                at, c = where
                passed.append(c)
                attr, goes_on = c.init_assign(method)
                if attr is not None:
                    # (held by `__init__` through the factory: a subclass replacing
                    # either without `super()` does not hold it)
                    out.append(
                        rel._replace(
                            kind="hold",
                            methods=frozenset(m for k in passed for m in k.loaders_run_on(attr)),
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
        if not c.bases:
            return None
        files = self.graph.files
        base = c.bases[0]
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
                for no, name in c.methods:
                    if c.line + no - 1 <= line:
                        method = name
                if "load_weights" not in method and method in {n for _l, n in c.methods}:
                    method = loader_of(c, method) or method
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
