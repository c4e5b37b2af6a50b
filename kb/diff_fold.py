"""What the version diff folds away or pairs up, so that what changed for people leads:
a constraint site whose condition was only restructured (the same meaning), one whose
condition changed only because an earlier branch of its `if`/`elif` chain did (its own test
the same), and a site that moved or was reworded (one entry, not "removed" + "added").
Pure functions over ConstraintSite rows."""

from __future__ import annotations

import ast
import difflib
import re
from typing import Any, Literal

from kb.schema import ConstraintSite, loads

Meaning = Literal["changed", "same", "earlier_branch"]

# Hook modules (era 3) read `server_args.x` where ServerArgs' methods read `self.x`.
_RECEIVER = re.compile(r"\bserver_args\.")


def clause_root(clause: str) -> str:
    """A condition clause without its outer `not`: a site under an `elif` carries the earlier
    branch's test negated, so one upstream change shows up in both spellings."""
    try:
        node = ast.parse(clause.strip(), mode="eval").body
    except SyntaxError:
        text = " ".join(clause.split())
        return text[4:] if text.startswith("not ") else text
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        node = node.operand
    return ast.unparse(node)


def condition_path(site: ConstraintSite) -> list[str]:
    """A site's condition path (its whole condition when no path was recorded)."""
    return loads(site.conditions) or ([site.condition] if site.condition else [])


def _spelled(text: str) -> str:
    return _RECEIVER.sub("self.", " ".join(text.split()))


def conjuncts(clauses: list[str]) -> set[str]:
    """The tests a condition path ANDs, each `a and b` split and written one way (`if a and
    b:` and `if a:` / `if b:` give the same set)."""
    out: set[str] = set()

    def walk(node: ast.expr) -> None:
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            for value in node.values:
                walk(value)
        else:
            out.add(ast.unparse(node))

    for clause in clauses:
        try:
            walk(ast.parse(_spelled(clause), mode="eval").body)
        except SyntaxError:
            out.add(_spelled(clause))
    return out


def condition_meanings(pairs: list[tuple[list[str], list[str]]]) -> list[Meaning]:
    """For each (old, new) condition path of a site with a new condition: "same" when both
    AND the same tests (a refactor); "earlier_branch" when the site's own test (the last
    clause of its path) reads the same and every test that differs is negated, that is an
    earlier branch of its `if`/`elif` chain (a branch added, widened or reworded before it:
    what the site itself checks did not change); else "changed"."""
    out: list[Meaning] = []
    for old, new in pairs:
        tests = conjuncts(old) ^ conjuncts(new)
        own = bool(old and new) and conjuncts(old[-1:]) == conjuncts(new[-1:])
        # Ingest writes a branch not taken `not (...)`; a test of the site's own written
        # `not x` (`not is_npu()`) is no earlier branch.
        branches = conjuncts([c for c in old[:-1] + new[:-1] if c.startswith("not (")])
        if not tests:
            out.append("same")
        elif own and tests <= branches:
            out.append("earlier_branch")
        else:
            out.append("changed")
    return out


def _similar(a: str, b: str) -> float:
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    if matcher.real_quick_ratio() < MOVED_SIMILARITY or matcher.quick_ratio() < MOVED_SIMILARITY:
        return 0.0
    return matcher.ratio()


# How alike two messages (or two override conditions) must read to be one site moved or
# reworded: one changed word in a sentence of ten passes, another sentence does not.
MOVED_SIMILARITY = 0.8


# A word that names something (a backend, a model class, a field): ALLCAPS, CamelCase, or
# with an underscore or a digit.
_NAME = re.compile(r"[A-Z]{2,}|[a-z][A-Z]|_|[A-Za-z]\d|\d[A-Za-z]")


def _same_subject(old: str, new: str) -> bool:
    """Whether two messages that read alike speak of the same thing: no name was swapped for
    one that reads otherwise ("TRTLLM MHA backend ..." and "CuteDSL MLA backend ..." are two
    checks; "NSA backends" and "DSA backends" one check after a rename)."""
    a, b = old.split(), new.split()
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "replace":
            continue
        was, now = " ".join(a[i1:i2]), " ".join(b[j1:j2])
        if _NAME.search(was) and _NAME.search(now):
            if difflib.SequenceMatcher(a=was, b=now).ratio() < SAME_NAME:
                return False
    return True


SAME_NAME = 0.6  # how alike a swapped name must read to be the same one renamed


class _Facts:
    """What pairing compares of a site, read once (a diff weighs hundreds against hundreds)."""

    def __init__(self, site: ConstraintSite) -> None:
        self.kind = (site.kind, bool(site.message))
        self.about = {*(loads(site.flags) or []), *(loads(site.affects) or [])}
        self.message = " ".join(site.message.split())
        self.writes = loads(site.writes) or {}
        # An override's own test: the earlier branches not taken say little of what it is.
        self.test = _spelled(" and ".join(own_tests(condition_path(site))[0]))


def _score(old: _Facts, new: _Facts) -> float:
    """How surely `new` is `old` moved or reworded (0: not). Sites of one kind about a flag in
    common (or about none): with a message, by how alike the messages read; an override
    without one, by writing the same values to the same fields under a test that reads
    alike."""
    # About other flags, it is another check that reads alike (one deprecation warning
    # per flag, worded the same).
    if old.kind != new.kind or (old.about and new.about and not old.about & new.about):
        return 0.0
    if old.message:
        score = _similar(old.message, new.message)
        return score if score and _same_subject(old.message, new.message) else 0.0
    if not old.writes or old.writes != new.writes:
        return 0.0
    return _similar(old.test, new.test)


def pair_moved(
    removed: list[ConstraintSite], added: list[ConstraintSite]
) -> tuple[list[tuple[ConstraintSite, ConstraintSite]], list[ConstraintSite], list[ConstraintSite]]:
    """Removed and added sites that are one site moved (another function or file) or
    reworded (its message or its test), most alike first, each used once. Returns (pairs,
    removed left, added left)."""
    new_facts = [_Facts(site) for site in added]
    by_kind: dict[tuple[str, bool], list[int]] = {}
    for j, facts in enumerate(new_facts):
        by_kind.setdefault(facts.kind, []).append(j)
    scored = []
    for i, site in enumerate(removed):
        old = _Facts(site)
        for j in by_kind.get(old.kind, []):
            score = _score(old, new_facts[j])
            if score >= MOVED_SIMILARITY:
                scored.append((score, -i, -j))
    used_old: set[int] = set()
    used_new: set[int] = set()
    pairs: list[tuple[int, int]] = []
    for _, i, j in sorted(scored, reverse=True):
        if -i in used_old or -j in used_new:
            continue
        used_old.add(-i)
        used_new.add(-j)
        pairs.append((-i, -j))
    pairs.sort()
    return (
        [(removed[i], added[j]) for i, j in pairs],
        [s for i, s in enumerate(removed) if i not in used_old],
        [s for j, s in enumerate(added) if j not in used_new],
    )


def word_diff(old: str, new: str) -> list[list[str]]:
    """[[op, text]] with op in "=", "-", "+": a word-level diff of two texts."""
    a, b = old.split(), new.split()
    out: list[list[str]] = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out.append(["=", " ".join(a[i1:i2])])
            continue
        if i2 > i1:
            out.append(["-", " ".join(a[i1:i2])])
        if j2 > j1:
            out.append(["+", " ".join(b[j1:j2])])
    return out


def moved_change(old: ConstraintSite, new: ConstraintSite) -> dict[str, Any]:
    """What differs between a site and the site it moved or was reworded to: {"moved",
    "reworded": bool, "message", "condition": word diffs ([] when the same)}. The test is
    compared with `server_args.` read as `self.` (a move into a hook module)."""
    moved = (old.function, old.path) != (new.function, new.path)
    message = " ".join(old.message.split()) != " ".join(new.message.split())
    condition = _spelled(old.condition) != _spelled(new.condition)
    return {
        "moved": moved,
        "reworded": message or condition,
        "message": word_diff(old.message, new.message) if message else [],
        "condition": word_diff(old.condition, new.condition) if condition else [],
    }


def own_tests(conditions: list[str]) -> tuple[list[str], int]:
    """A condition path as a reader takes it in: the tests that select the site, without the
    earlier branches of its `if`/`elif` chains that were not taken (ingest writes those
    `not (...)`), and how many were left out. The last clause, the site's own test, stays
    even when it is an `else` (`not (...)`)."""
    earlier = [c for c in conditions[:-1] if c.startswith("not (")]
    kept = [c for c in conditions[:-1] if not c.startswith("not (")] + conditions[-1:]
    return kept, len(earlier)
