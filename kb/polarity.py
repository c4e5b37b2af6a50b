"""Which values a stored condition can hold for: the polarity of its tests.

A constraint site's conditions are stored as source texts, outermost first. The later
branch of an if/elif chain on the model architecture carries `not (model_arch in ['A'])`
then `model_arch in ['B']`: that site is B's, not A's. `assert backend in ['x']` is stored
as `not (backend in ['x'])`: it fails for every value but x. Naming a value is not testing
it positively, so the pages listing a model's or a value's constraints read the conditions'
syntax trees here rather than search their text.

Three-valued (kb.threeval): for a test read here we know the values it may be true for and
those it must be true for; any other expression is Unknown whatever the value. The universe
is the values the caller asks about plus OTHER (any value it does not name); a condition
reads as its truth for each of them.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kb.pyast import PARSE_FAILURES, args_attr
from kb.threeval import Unknown, all_of, any_of, not_, unknown

OTHER = "\x00other"

Values = frozenset[str]
# A test's (may be true for, must be true for, the values it names), or None: not a test
# of the subject.
Atom = Callable[[ast.expr], tuple[Values, Values, Values] | None]
# Whether a condition holds, for each value of the universe.
Truths = dict[str, bool | Unknown]
NOT_A_TEST = unknown("not a test of the subject")


@dataclass(frozen=True)
class Reading:
    may: Values  # the values for which all the conditions may hold
    named: Values  # the values a test names (either way); none: the subject is not tested


@dataclass(frozen=True)
class _Test:
    subject: ast.expr
    consts: tuple[str, ...]  # () for `x is None`: no string value
    negated: bool  # !=, not in, is not
    contains: bool  # `'Llama4' in model_arch`: the constant is part of the subject


def _strings(node: ast.expr) -> tuple[str, ...] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return (node.value,)
    if isinstance(node, ast.Constant) and node.value is None:
        return ()
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        # `x in ['a', None]`: None is no string value, so the test names a
        found = [e.value for e in node.elts if isinstance(e, ast.Constant)]
        strings = [v for v in found if isinstance(v, str)]
        if len(found) == len(node.elts) and all(v is None or isinstance(v, str) for v in found):
            return tuple(strings)
    return None


def _test(node: ast.expr) -> _Test | None:
    """`x == 'a'`, `'a' == x`, `x is None`, `x in ['a', 'b']`, `'a' in x` and their negated
    forms; one operator (a chain is not read)."""
    if not isinstance(node, ast.Compare) or len(node.ops) != 1:
        return None
    op, left, right = node.ops[0], node.left, node.comparators[0]
    negated = isinstance(op, (ast.NotEq, ast.NotIn, ast.IsNot))
    if isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)):
        for subject, other in ((left, right), (right, left)):
            consts = _strings(other)
            if consts is not None and len(consts) <= 1 and _strings(subject) is None:
                return _Test(subject, consts, negated, contains=False)
        return None
    if isinstance(op, (ast.In, ast.NotIn)):
        consts = _strings(right)
        if consts is not None and _strings(left) is None:
            return _Test(left, consts, negated, contains=False)
        consts = _strings(left)
        if consts and _strings(right) is None:
            return _Test(right, consts, negated, contains=True)
    return None


def _sets(
    universe: Values, hits: set[str], more: bool, negated: bool
) -> tuple[Values, Values, Values]:
    """A test true for `hits` (and, when `more`, maybe for values the universe does not name)."""
    may, must = frozenset(hits | ({OTHER} if more else set())), frozenset(hits)
    return (universe - must, universe - may, must) if negated else (may, must, must)


def _evaluate(node: ast.expr, universe: Values, atom: Atom) -> Truths:
    if isinstance(node, ast.BoolOp):
        parts = [_evaluate(v, universe, atom) for v in node.values]
        combine = all_of if isinstance(node.op, ast.And) else any_of
        return {value: combine(p[value] for p in parts) for value in universe}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return {value: not_(t) for value, t in _evaluate(node.operand, universe, atom).items()}
    found = atom(node)
    if found is None:
        return dict.fromkeys(universe, NOT_A_TEST)
    may, must = found[:2]
    return {v: True if v in must else (NOT_A_TEST if v in may else False) for v in universe}


def _read(conditions: list[str], universe: Values, atom: Atom) -> Reading | None:
    """None when a condition does not parse (the caller does what it did before)."""
    may = universe
    named: set[str] = set()

    def noting(node: ast.expr) -> tuple[Values, Values, Values] | None:
        found = atom(node)
        if found is not None:
            named.update(found[2])
        return found

    for text in conditions:
        try:
            tree = ast.parse(text.strip(), mode="eval").body
        except (SyntaxError, *PARSE_FAILURES):
            return None
        truths = _evaluate(tree, universe, noting)
        may &= frozenset(value for value, t in truths.items() if t is not False)
    return Reading(may=may, named=frozenset(named))


def _about_arch(node: ast.expr) -> bool:
    """`model_arch`, `hf_config.architectures[0]`: an expression naming an architecture."""
    return any(
        "arch" in (n.id if isinstance(n, ast.Name) else n.attr).lower()
        for n in ast.walk(node)
        if isinstance(n, (ast.Name, ast.Attribute))
    )


def arch_reading(conditions: list[str], archs: list[str]) -> Reading | None:
    """For one model's architecture names: those a condition tests (exactly, or as a part:
    `'Llama4' in model_arch`) and those the conditions allow. A test naming only other
    models' architectures rules this model out when it holds (`model_arch in ['B']`): the
    conditions test one architecture, the served model's."""
    universe = frozenset(archs) | {OTHER}

    def atom(node: ast.expr) -> tuple[Values, Values, Values] | None:
        test = _test(node)
        if test is None or not _about_arch(test.subject):
            return None
        if test.contains:
            hits = {a for a in archs if any(c in a for c in test.consts)}
        else:
            hits = {a for a in archs if a in test.consts}
        more = test.contains or len(test.consts) > len(hits)
        return _sets(universe, hits, more, test.negated)

    return _read(conditions, universe, atom)


def value_reading(
    conditions: list[str], dest: str, other_dests: Iterable[str], values: Iterable[str]
) -> Reading | None:
    """For one flag (`dest`, read by the conditions) and its `values`: whether a condition
    tests it against one of them and which the conditions allow. The subject is the flag's
    attribute (also through `.lower()` or an enum: `Backend(self.x).is_y()`); another flag's
    attribute is not; anything else (a local copy) is taken for the flag when it is compared
    with one of its values, as the text search this replaces did."""
    named = list(values)
    universe = frozenset(named) | {OTHER}
    others = set(other_dests) - {dest}
    by_method = {v.lower().replace("-", "_"): v for v in named}

    def whose(node: ast.expr) -> bool | None:
        attrs = {args_attr(n) for n in ast.walk(node)} - {None}
        return True if dest in attrs else (False if attrs & others else None)

    def atom(node: ast.expr) -> tuple[Values, Values, Values] | None:
        if (
            isinstance(node, ast.Call)
            and not node.args
            and isinstance(node.func, ast.Attribute)
            and node.func.attr.startswith("is_")
            and node.func.attr[3:] in by_method
            and whose(node.func.value) is not False
        ):
            return _sets(universe, {by_method[node.func.attr[3:]]}, False, False)
        test = _test(node)
        if test is None:
            return None
        hits = set(test.consts) & universe
        who = whose(test.subject)
        if who is False or (who is None and not hits):
            return None
        # `'all' in self.modules`: a list flag holding the value, maybe with others
        more = test.contains or len(test.consts) > len(hits)
        return _sets(universe, hits, more, test.negated)

    return _read(conditions, universe, atom)
