"""A constraint site as one short sentence for one value of a flag, built from the structure
of its conditions; and a value's requirements summed up by topic.

A site's conditions are stored as source texts, outermost first: an elif chain's earlier
branches as `not (...)`, an assert's test as `not (test)`. Read whole they are code
(`not ('Llama4' in model_arch and ...) and not ... and not (x in ['a', None])`). For one
value of one flag the tests of that flag are decided (`backend == 'a'` is true on a's page),
negations are pushed in (`not (not x)` is x, `not (x in s)` is `x ∉ s`), `x == a or x == b`
becomes `x ∈ {a, b}`, and the rest reads as "Requires R when C, unless U": R the negation
of the innermost test (what must hold), C the conditions that must hold for the check to
run, U the earlier branches (`not (compound)`) that exempt it. Nothing is dropped but the
tests this value decides: the sentence is the condition, reworded.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kb.pyast import PARSE_FAILURES, args_attr

MAX_STATEMENT = 240  # a sentence longer than this folds its `unless`, then its `when`

TOPICS = ("quantization", "gpu", "model", "flags", "other")

# Hardware checks (the functions SGLang's server arguments call) and the device flag.
HARDWARE_RE = re.compile(
    r"\b(?:is_sm\d+\w*|is_blackwell\w*|is_hopper\w*|is_hip|is_npu|is_cuda\w*|is_cpu|is_xpu|"
    r"is_musa|is_mps|get_device_capability|get_device_sm|is_flashinfer_available)\b"
)
MODEL_RE = re.compile(r"\b(?:model_arch|architectures|hf_config|model_config|is_\w+_model)\b")

_NEGATED: dict[type[ast.cmpop], ast.cmpop] = {
    ast.Eq: ast.NotEq(),
    ast.NotEq: ast.Eq(),
    ast.In: ast.NotIn(),
    ast.NotIn: ast.In(),
    ast.Is: ast.IsNot(),
    ast.IsNot: ast.Is(),
    ast.Lt: ast.GtE(),
    ast.GtE: ast.Lt(),
    ast.Gt: ast.LtE(),
    ast.LtE: ast.Gt(),
}
_OP_TEXT: dict[type[ast.cmpop], str] = {
    ast.Eq: "=",
    ast.NotEq: "≠",
    ast.In: "∈",
    ast.NotIn: "∉",
    ast.Lt: "<",
    ast.LtE: "≤",
    ast.Gt: ">",
    ast.GtE: "≥",
}
TRUE = ast.Constant(True)
FALSE = ast.Constant(False)


@dataclass(frozen=True)
class Statement:
    text: str  # "Requires --quantization ∈ {fp8, unset} when ..., unless ..."
    requirement: str  # R alone ("--quantization ∈ {fp8, unset}"); "" when phrased "Fails when"
    topic: str  # what R is about: one of TOPICS
    conditional: bool  # it holds only under other conditions (a `when` or an `unless`)


@dataclass(frozen=True)
class Subject:
    """The flag whose value is decided: its attribute, its value, the values it may take
    (an `is_<value>()` call names one of them)."""

    dest: str
    value: str
    values: frozenset[str] = field(default_factory=frozenset)
    # other expressions (by ast.dump) whose value a condition pins (`model_arch in ['A']`)
    known: tuple[tuple[str, tuple[str, ...]], ...] = ()


def _is_const(node: ast.expr, value: bool) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def _flag_attr(node: ast.AST, dest: str) -> bool:
    """`self.x` (also `self.x.lower()`) for the flag x."""
    if (
        isinstance(node, ast.Call)
        and not node.args
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("lower", "upper", "strip")
    ):
        node = node.func.value
    return args_attr(node) == dest


def _constants(node: ast.expr) -> list[object] | None:
    """The constants of `'a'`, `None`, `['a', None]` (None when any element is no constant)."""
    if isinstance(node, ast.Constant):
        return [node.value]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        if all(isinstance(e, ast.Constant) for e in node.elts):
            return [e.value for e in node.elts if isinstance(e, ast.Constant)]
    return None


def _decide(node: ast.expr, subject: Subject) -> bool | None:
    """True/False when `node` tests the flag against constants; None when it does not, or
    its answer does not follow from the value alone."""
    if (
        isinstance(node, ast.Call)
        and not node.args
        and isinstance(node.func, ast.Attribute)
        and node.func.attr.startswith("is_")
        and any(_flag_attr(n, subject.dest) for n in ast.walk(node.func.value))
    ):
        method = node.func.attr[3:]
        spelled = {v.lower().replace("-", "_"): v for v in subject.values | {subject.value}}
        if method in spelled:
            return spelled[method] == subject.value
        return None
    if not isinstance(node, ast.Compare) or len(node.ops) != 1:
        return None
    op, left, right = node.ops[0], node.left, node.comparators[0]
    known = dict(subject.known)
    if _key(left) in known or _key(right) in known:
        return _decide_known(op, left, right, known)
    if not _flag_attr(left, subject.dest):
        if isinstance(op, (ast.Eq, ast.NotEq)) and _flag_attr(right, subject.dest):
            left, right = right, left
        else:
            return None
    consts = _constants(right)
    value: object = subject.value
    if isinstance(left, ast.Call):  # .lower(): compared in lower case
        value = subject.value.lower()
    if isinstance(op, (ast.Is, ast.IsNot)):
        if consts != [None]:
            return None
        return isinstance(op, ast.IsNot)  # a value given is never None
    if isinstance(op, (ast.Eq, ast.NotEq)):
        if consts is None or len(consts) != 1:
            return None
        return (consts[0] == value) == isinstance(op, ast.Eq)
    if isinstance(op, (ast.In, ast.NotIn)):
        if consts is None:
            # `x in [1, self.tp_size]`-like lists of a flag are not strings; a list naming
            # the value among other names still holds it
            elts = getattr(right, "elts", None)
            if elts and any(isinstance(e, ast.Constant) and e.value == value for e in elts):
                return isinstance(op, ast.In)
            return None
        return (value in consts) == isinstance(op, ast.In)
    return None


def _decide_known(
    op: ast.cmpop, left: ast.expr, right: ast.expr, known: dict[str, tuple[str, ...]]
) -> bool | None:
    """A test of an expression another condition pins to a few strings: decided when it has
    one answer for each of them."""
    if isinstance(op, (ast.In, ast.NotIn)) and _key(right) in known:
        part = _constants(left)  # 'Llama4' in model_arch
        if part is None or len(part) != 1 or not isinstance(part[0], str):
            return None
        answers = {(part[0] in v) == isinstance(op, ast.In) for v in known[_key(right)]}
        return answers.pop() if len(answers) == 1 else None
    if _key(left) not in known:
        left, right = right, left
    if _key(left) not in known or not isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
        return None
    consts = _constants(right)
    if consts is None or not all(isinstance(c, str) for c in consts):
        return None
    if isinstance(op, (ast.Eq, ast.NotEq)) and len(consts) != 1:
        return None
    positive = isinstance(op, (ast.Eq, ast.In))
    answers = {(v in consts) == positive for v in known[_key(left)]}
    return answers.pop() if len(answers) == 1 else None


def _pinned(tests: list[ast.expr]) -> list[tuple[str, tuple[str, ...]]]:
    """The expressions `x == 'a'`, `x in ['a', 'b']` pin to a few strings (not flags)."""
    out: list[tuple[str, tuple[str, ...]]] = []
    for t in tests:
        if not isinstance(t, ast.Compare) or len(t.ops) != 1:
            continue
        if isinstance(t.ops[0], (ast.Eq, ast.In)) and args_attr(t.left) is None:
            consts = _constants(t.comparators[0])
            if consts and all(isinstance(c, str) for c in consts):
                out.append((_key(t.left), tuple(str(c) for c in consts)))
    return out


def _key(node: ast.expr) -> str:
    return ast.dump(node)


def _set_of(node: ast.expr) -> tuple[str, type[ast.cmpop], list[ast.expr]] | None:
    """(subject key, Eq/In or NotEq/NotIn, the elements) of `x == a`, `x in [a, b]`, ..."""
    if not isinstance(node, ast.Compare) or len(node.ops) != 1:
        return None
    op, right = node.ops[0], node.comparators[0]
    if isinstance(op, (ast.Eq, ast.NotEq)) and _constants(right) is not None:
        positive = isinstance(op, ast.Eq)
        return _key(node.left), (ast.In if positive else ast.NotIn), [right]
    if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.List, ast.Tuple, ast.Set)):
        return _key(node.left), type(op), list(right.elts)
    if isinstance(op, (ast.Is, ast.IsNot)) and _is_none(right):  # `x is None`: x in [None]
        return _key(node.left), (ast.In if isinstance(op, ast.Is) else ast.NotIn), [right]
    return None


def _collect(op: ast.boolop, parts: list[ast.expr]) -> list[ast.expr]:
    """`x == a or x == b` -> `x in [a, b]`; `x != a and x != b` -> `x not in [a, b]`."""
    want = ast.In if isinstance(op, ast.Or) else ast.NotIn
    groups: dict[str, tuple[ast.expr, list[ast.expr], list[ast.expr]]] = {}
    out: list[ast.expr | str] = []
    for p in parts:
        found = _set_of(p)
        if found is None or found[1] is not want:
            out.append(p)
            continue
        key, _op, elts = found
        if key not in groups:
            assert isinstance(p, ast.Compare)
            groups[key] = (p.left, [], [])
            out.append(key)
        known = {_key(e) for e in groups[key][1]}
        groups[key][1].extend(e for e in elts if _key(e) not in known)
        groups[key][2].append(p)
    result: list[ast.expr] = []
    for item in out:
        if isinstance(item, str):
            left, elts, tests = groups[item]
            if len(tests) == 1:  # nothing to collect: the test as it was
                result.append(tests[0])
            else:
                result.append(ast.Compare(left, [want()], [ast.List(elts, ast.Load())]))
        else:
            result.append(item)
    return result


def simplify(node: ast.expr, subject: Subject | None, negate: bool = False) -> ast.expr:
    """`node` (negated when `negate`) in negation normal form, the flag's tests decided for
    its value, constants folded, `==`/`in` tests of one subject collected into sets."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return simplify(node.operand, subject, not negate)
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return ast.Constant(node.value != negate)
    if isinstance(node, ast.BoolOp):
        is_and = isinstance(node.op, ast.And) != negate
        absorbing, neutral = (FALSE, TRUE) if is_and else (TRUE, FALSE)
        parts: list[ast.expr] = []
        seen: set[str] = set()
        for v in node.values:
            s = simplify(v, subject, negate)
            if _is_const(s, bool(absorbing.value)):
                return absorbing
            if _is_const(s, bool(neutral.value)):
                continue
            inner = (
                s.values
                if isinstance(s, ast.BoolOp) and isinstance(s.op, ast.And) == is_and
                else [s]
            )
            for p in inner:
                if _key(p) not in seen:
                    seen.add(_key(p))
                    parts.append(p)
        op: ast.boolop = ast.And() if is_and else ast.Or()
        parts = _collect(op, parts)
        if not parts:
            return neutral
        return parts[0] if len(parts) == 1 else ast.BoolOp(op, parts)
    decided = _decide(node, subject) if subject is not None else None
    if decided is not None:
        return ast.Constant(decided != negate)
    if not negate:
        return node
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        return ast.Compare(node.left, [_NEGATED[type(node.ops[0])]], node.comparators)
    return ast.UnaryOp(ast.Not(), node)


# --- words ----------------------------------------------------------------------------------


class _Words:
    def __init__(self, option_of: Mapping[str, str], max_set: int = 0) -> None:
        self.option_of = option_of
        self.max_set = max_set  # a set of more elements shows its first ones and a count

    def name(self, node: ast.expr) -> str | None:
        """The option standing for a flag's attribute; `x` for another `self.x`."""
        attr = args_attr(node)
        if attr is None:
            return None
        return self.option_of.get(attr, attr)

    def expr(self, node: ast.expr) -> str:
        spelled = self.name(node)
        if spelled is not None:
            return spelled
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) == 3
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _is_none(node.args[2])
        ):  # getattr(config, 'x', None): config.x, None when it has none
            return f"{self.expr(node.args[0])}.{node.args[1].value}"
        if isinstance(node, ast.BoolOp):
            joined = f" {'and' if isinstance(node.op, ast.And) else 'or'} "
            return joined.join(self.operand(v, node.op) for v in node.values)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self.expr(node.operand)
            return f"not ({inner})" if isinstance(node.operand, ast.BoolOp) else f"not {inner}"
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return self.compare(node)
        return ast.unparse(_Renamer(self).visit(_copy(node)))

    def operand(self, node: ast.expr, op: ast.boolop) -> str:
        text = self.expr(node)
        if isinstance(node, ast.BoolOp) and type(node.op) is not type(op):
            return f"({text})"
        return text

    def constant(self, node: ast.expr, flag: bool) -> str:
        if isinstance(node, ast.Constant):
            if node.value is None:
                return "unset" if flag else "None"
            if isinstance(node.value, str):
                return node.value or "''"
        return self.expr(node)

    def compare(self, node: ast.Compare) -> str:
        op, right = node.ops[0], node.comparators[0]
        flag = self.name(node.left) is not None
        left = self.expr(node.left)
        if isinstance(op, (ast.Is, ast.IsNot)) and _is_none(right):
            if flag:
                return f"{left} {'unset' if isinstance(op, ast.Is) else 'set'}"
            return f"{left} is {'' if isinstance(op, ast.Is) else 'not '}None"
        if (
            isinstance(op, (ast.In, ast.NotIn))
            and isinstance(node.left, ast.Constant)
            and isinstance(node.left.value, str)
        ):  # 'Llama4' in model_arch: a part of the name
            verb = "contains" if isinstance(op, ast.In) else "does not contain"
            return f"{self.expr(right)} {verb} {node.left.value}"
        if isinstance(op, (ast.In, ast.NotIn)) and isinstance(
            right, (ast.List, ast.Tuple, ast.Set)
        ):
            elts = [self.constant(e, flag) for e in right.elts]
            if self.max_set and len(elts) > self.max_set + 1:
                elts = [*elts[: self.max_set], f"{len(elts) - self.max_set} more"]
            if len(elts) == 1:
                return f"{left} {'=' if isinstance(op, ast.In) else '≠'} {elts[0]}"
            return f"{left} {_OP_TEXT[type(op)]} {{{', '.join(elts)}}}"
        if type(op) in _OP_TEXT:
            return f"{left} {_OP_TEXT[type(op)]} {self.constant(right, flag)}"
        return ast.unparse(_Renamer(self).visit(_copy(node)))


class _Renamer(ast.NodeTransformer):
    """Flags' attributes as their options (a Name node holding the text), inside code kept."""

    def __init__(self, words: _Words) -> None:
        self.words = words

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        spelled = self.words.name(node)
        if spelled is not None:
            return ast.Name(spelled, ast.Load())
        return self.generic_visit(node)  # type: ignore[return-value]


def _copy(node: ast.expr) -> ast.expr:
    return ast.parse(ast.unparse(node), mode="eval").body


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _conjuncts(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        return list(node.values)
    return [node]


def topic_of(node: ast.expr, option_of: Mapping[str, str]) -> str:
    """What a requirement is about: the quantization, the GPU, the model, other flags."""
    text = ast.unparse(node)
    attrs = {a for n in ast.walk(node) if (a := args_attr(n)) is not None}
    if any("quant" in a for a in attrs):
        return "quantization"
    if HARDWARE_RE.search(text) or "device" in attrs:
        return "gpu"
    if MODEL_RE.search(text):
        return "model"
    if attrs & set(option_of):
        return "flags"
    return "other"


def _parse(text: str) -> ast.expr | None:
    try:
        return ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, *PARSE_FAILURES):
        return None


def statement(
    conditions: list[str],
    kind: str,
    option_of: Mapping[str, str],
    subject: Subject | None = None,
    writes: Mapping[str, str] | None = None,
) -> Statement | None:
    """The sentence for a site whose `conditions` (outermost first) all hold when it fires,
    on the page of `subject`'s value (None: no value decided). None when a condition does
    not parse, or the value makes one false (the site is not this value's)."""
    parsed = [_parse(c) for c in conditions]
    if any(node is None for node in parsed):
        return None
    nodes = [node for node in parsed if node is not None]
    kept = _kept(nodes, subject)
    if kept is None:
        return None
    # A test pinning an expression (`model_arch in ['B']`) decides the other tests of it:
    # the earlier branches `not (model_arch in ['A'])` say nothing more.
    pins = _pinned([t for _w, s in kept for t in _conjuncts(s)])
    if pins and subject is not None:
        pinned = Subject(subject.dest, subject.value, subject.values, tuple(pins))
        again = _kept(nodes, pinned, keep=frozenset(k for k, _v in pins))
        if again is not None:
            kept = again
    # The site's own test is the last condition; when the value decides it (`backend ==
    # 'a'`), what is left is only context: the value fails under it.
    own = kept.pop() if kept and kept[-1][0] is parsed[-1] else None
    words = _Words(option_of)
    when: list[ast.expr] = []
    unless: list[ast.expr] = []
    for written, simplified in kept:
        # an earlier branch not taken (`not (a and b)`) exempts the check; a negated test
        # is a plain condition (`not (x != 'a')`: x = a; `not f()`)
        if (
            isinstance(written, ast.UnaryOp)
            and isinstance(written.op, ast.Not)
            and isinstance(written.operand, ast.BoolOp)
        ):
            unless.append(simplify(written.operand, subject))
        else:
            when.extend(_conjuncts(simplified))
    when = _collect(ast.And(), when)
    requirement = ""
    topic = "other"
    checks = kind in ("raise", "assert")
    if checks and own is None and len(when) == 1 and not unless:
        own, when = (when[0], when[0]), []  # one test left: its negation is what is required
    if checks and own is not None:
        required = simplify(own[1], None, negate=True)
        # one test, or a choice between two, reads as a requirement; `not (a and b and c)`
        # reads better as "Fails when a and b and c"
        if not (isinstance(required, ast.BoolOp) and isinstance(required.op, ast.Or)) or (
            len(required.values) <= 2
        ):
            requirement = words.expr(required)
            topic = topic_of(required, option_of)
        else:
            when.extend(_conjuncts(own[1]))
    elif own is not None:
        when.extend(_conjuncts(own[1]))
    if checks:
        head = f"Requires {requirement}" if requirement else "Fails"
        if not requirement and not when and not unless:
            head = "Fails with this value" if subject is not None else "Fails"
        if not requirement and when:
            topic = topic_of(ast.BoolOp(ast.And(), when) if len(when) > 1 else when[0], option_of)
    elif kind == "override":
        sets = ", ".join(
            f"{option_of.get(k, k)} = {_short_code(v, words)}" for k, v in (writes or {}).items()
        )
        head = f"Sets {sets}" if sets else "Sets"
    else:
        head = "Warns" if when or unless or subject is None else "Warns with this value"
    full, short = _Words(option_of), _Words(option_of, max_set=2)
    text = _sentence(
        head,
        [(w.operand(c, ast.And()) for c in when) for w in (full, short)],
        # (one `unless` alone needs no parentheses: they are joined with "or")
        [
            [w.operand(u, ast.Or() if len(unless) > 1 else ast.And()) for u in unless]
            for w in (full, short)
        ],
    )
    return Statement(text, requirement, topic, conditional=bool(when or unless))


def _kept(
    nodes: list[ast.expr], subject: Subject | None, keep: frozenset[str] = frozenset()
) -> list[tuple[ast.expr, ast.expr]] | None:
    """(as written, simplified) for each condition the value leaves undecided; None when it
    makes one false. The tests pinning an expression in `keep` stay as written."""
    out: list[tuple[ast.expr, ast.expr]] = []
    for node in nodes:
        if keep and _pins(node, keep):
            out.append((node, simplify(node, _unpinned(subject))))
            continue
        s = simplify(node, subject)
        if _is_const(s, False):
            return None
        if not _is_const(s, True):
            out.append((node, s))
    return out


def _pins(node: ast.expr, keep: frozenset[str]) -> bool:
    return any(
        isinstance(t, ast.Compare)
        and _key(t.left) in keep
        and isinstance(t.ops[0], (ast.Eq, ast.In))
        for t in _conjuncts(node)
    )


def _unpinned(subject: Subject | None) -> Subject | None:
    return None if subject is None else Subject(subject.dest, subject.value, subject.values)


def _short_code(text: str, words: _Words) -> str:
    node = _parse(text)
    return words.expr(node) if node is not None else text


def _sentence(head: str, whens: list[Iterable[str]], unlesses: list[list[str]]) -> str:
    """`head when a and b, unless c or d`, the conditions as each rendering spells them (the
    last shortest). Over MAX_STATEMENT in each, the `unless` folds into a count, then
    conditions of `when` do, the negative then the outermost first (the nearest the check
    kept): the whole condition is one click away."""

    def joined(w: list[str], folded: int, u: list[str]) -> str:
        text = head
        if w:
            text += " when " + " and ".join(w)
        if folded:
            text += f" (and {folded} more condition{'s' if folded > 1 else ''})"
        if u:
            text += ", unless " + " or ".join(u)
        return text

    for when_it, unless in zip(whens, unlesses, strict=True):
        when = list(when_it)
        text = joined(when, 0, unless)
        if len(text) <= MAX_STATEMENT:
            return text
    if unless:
        n = len(unless)
        unless = [f"one of {n} earlier branches holds" if n > 1 else "an earlier branch holds"]
        text = joined(when, 0, unless)
    # negative tests (≠, ∉, not) are mostly an elif chain's exclusions: they fold first
    order = sorted(range(len(when)), key=lambda i: (not _negative(when[i]), i))
    folded: set[int] = set()
    for i in order[:-1]:
        if len(text) <= MAX_STATEMENT:
            break
        folded.add(i)
        kept = [w for j, w in enumerate(when) if j not in folded]
        text = joined(kept, len(folded), unless)
    return text


def _negative(words: str) -> bool:
    return words.startswith("not ") or any(
        f" {op} " in words for op in ("≠", "∉", "does not contain")
    )


# --- a value's requirements summed up -------------------------------------------------------


def summarize(
    requirements: Iterable[Mapping[str, object]],
    at_load: Iterable[Mapping[str, object]] = (),
    layer_counts: Mapping[str, int] | None = None,
) -> dict[str, object]:
    """A value's requirements by topic (quantization, GPU, model, other flags, other): each
    one that holds whatever else is set, as its requirement alone; those holding only under
    other settings are counted (their sentences are below). `at_load`: what the value's
    own code checks when the model loads (kb/load_requirements.py), each cited;
    `layer_counts`: the checks of the classes it selects, by stage (kb/layer_sites.py)."""
    out: dict[str, object] = {t: [] for t in TOPICS}
    conditional = 0
    for r in requirements:
        said = str(r.get("requirement") or "")
        if r.get("conditional") or not said:
            conditional += 1
            continue
        topic = str(r.get("topic") or "other")
        listed = out[topic if topic in TOPICS else "other"]
        assert isinstance(listed, list)
        if said not in listed:
            listed.append(said)
    loaded = list(at_load)
    out["load_time"] = [str(c["text"]) for c in loaded]
    out["load_time_sources"] = [c["source"] for c in loaded]
    out["conditional"] = conditional
    out["layer_load"] = (layer_counts or {}).get("load", 0)
    out["layer_first_forward"] = (layer_counts or {}).get("first_forward", 0)
    return out
