"""Version comparison: pure functions over the knowledge base.

`diff_versions` compares two versions in either order (from -> to); `flag_history` walks
one flag through every ingested version with the same field comparison, so the flag page's
history and the diff page can never disagree.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlmodel import Session, col, select

from kb.diff_fold import (
    clause_root,
    condition_meanings,
    condition_path,
    pair_moved,
    word_diff,
)
from kb.order import FLAG_ORDER, in_order
from kb.replacements import replacement_names
from kb.schema import (
    ConstraintSite,
    Enum,
    EnvVar,
    Flag,
    Option,
    Version,
    loads,
    name_key,
    option_to_dest,
)

# Fields compared between two rows of the same flag, in the order they are reported.
FIELDS = (
    "dest",
    "type",
    "default",
    "choices",
    "known_values",
    "aliases",
    "action",
    "nargs",
    "help",
    "deprecated",
)
LISTS = ("choices", "known_values", "aliases")  # compared as sets of values


# A default of argparse.SUPPRESS leaves the attribute unset, as a default of None leaves it
# None: for a user both mean "not given", so a move between them is no default change.
SUPPRESS = "argparse.SUPPRESS"


def _no_default(value: Any) -> bool:
    return value is None or value == SUPPRESS


def _default(flag: Flag) -> Any:
    """The default as users read it: the literal value, else the source expression."""
    if flag.default is not None:
        return loads(flag.default)
    return flag.default_expr


def _help(text: str) -> str:
    return " ".join(text.split())


def compare_flags(old: Flag, new: Flag) -> list[dict[str, Any]]:
    """Field changes between two rows of one flag: [{"field", "from", "to", ...}]."""
    changes: list[dict[str, Any]] = []
    # Choices dropped for an open set (a registry, an enum) whose known values the flag now
    # lists: one change, "opened to any value", not "choices became null".
    known = loads(new.known_values)
    opened = bool(loads(old.choices)) and loads(new.choices) is None and bool(known)
    for field in FIELDS:
        if field == "default":
            a, b = _default(old), _default(new)
        elif field in LISTS:
            a, b = loads(getattr(old, field)), loads(getattr(new, field))
        elif field == "help":
            a, b = _help(old.help), _help(new.help)
        else:
            a, b = getattr(old, field), getattr(new, field)
        if a == b or (field == "default" and _no_default(a) and _no_default(b)):
            continue
        if field == "known_values" and a is None and opened:
            continue  # told by the choices change: it opened to these known values
        if field in LISTS and a and b and sorted(map(str, a)) == sorted(map(str, b)):
            continue  # the same values listed in another order
        change: dict[str, Any] = {"field": field, "from": a, "to": b}
        if field in LISTS:
            before, after = a or [], b or []
            if field == "choices" and opened:  # what the registry now knows, against the choices
                after = known
            # (as text: a registry's names against choices that may have been numbers)
            was, now = set(map(str, before)), set(map(str, after))
            change["added"] = [v for v in after if str(v) not in was]
            change["removed"] = [v for v in before if str(v) not in now]
        if field == "choices" and opened:
            change["known"] = known
        elif field == "help":
            change["words"] = word_diff(a, b)
        elif field == "deprecated":
            change["message"] = new.deprecated_message if b else old.deprecated_message
            change["replacement"] = new.replacement if b else None
        changes.append(change)
    return changes


def constraint_fingerprint(site: ConstraintSite) -> str:
    """What a site checks, independent of line numbers (ingest's key when it wrote one)."""
    if site.key:
        return site.key
    return "\x1f".join((site.kind, site.function, " ".join(site.condition.split()), site.message))


def _multiset_minus(
    rows: Iterable[ConstraintSite], other: Iterable[ConstraintSite]
) -> list[ConstraintSite]:
    """Rows whose fingerprint occurs more often here than in `other` (moved code matches)."""
    budget = Counter(constraint_fingerprint(c) for c in other)
    out = []
    for row in rows:
        fp = constraint_fingerprint(row)
        if budget[fp] > 0:
            budget[fp] -= 1
        else:
            out.append(row)
    return out


def _same_check(site: ConstraintSite) -> tuple[str, ...]:
    """What a site does, without its condition: kind, function, and message (or, for a
    silent override, what it writes)."""
    return (site.kind, site.function, site.message, "" if site.message else site.writes)


def pair_constraints(
    removed: list[ConstraintSite], added: list[ConstraintSite]
) -> dict[str, list[Any]]:
    """Pair a removed and an added site that do the same thing under a changed condition,
    so the diff shows one "condition changed" entry instead of an unrelated add and remove.
    Returns {"constraints_added", "constraints_removed", "constraints_changed": [(old, new)],
    "constraints_value_changed": [(old, new)]}."""
    waiting: dict[tuple[str, ...], list[ConstraintSite]] = {}
    for site in added:
        waiting.setdefault(_same_check(site), []).append(site)
    changed: list[tuple[ConstraintSite, ConstraintSite]] = []
    gone: list[ConstraintSite] = []
    for site in removed:
        match = waiting.get(_same_check(site))
        if match:
            changed.append((site, match.pop(0)))
        else:
            gone.append(site)
    paired = {id(new) for _old, new in changed}
    added = [s for s in added if id(s) not in paired]
    # Then a site that does the same kind of thing under the same condition but writes
    # another value (or says it in other words): one "value changed" entry.
    same_place: dict[tuple[Any, ...], list[ConstraintSite]] = {}
    for site in added:
        same_place.setdefault(_same_place(site), []).append(site)
    revalued: list[tuple[ConstraintSite, ConstraintSite]] = []
    removed_left: list[ConstraintSite] = []
    for site in gone:
        match = same_place.get(_same_place(site))
        if match:
            revalued.append((site, match.pop(0)))
        else:
            removed_left.append(site)
    paired = {id(new) for _old, new in revalued}
    return {
        "constraints_added": [s for s in added if id(s) not in paired],
        "constraints_removed": removed_left,
        "constraints_changed": changed,
        "constraints_value_changed": revalued,
    }


def _same_place(site: ConstraintSite) -> tuple[Any, ...]:
    """Where a site is and what it touches, without the values it writes or its message."""
    return (
        site.kind,
        site.function,
        # (the flags it is about: every argparse action's warning is `X.__call__` with no
        # condition, one flag's from another's told apart by these alone)
        tuple(sorted(loads(site.flags) or [])),
        tuple(" ".join(c.split()) for c in condition_path(site)),
        tuple(sorted(loads(site.writes) or {})),
        bool(site.message),
    )


def value_change(old: ConstraintSite, new: ConstraintSite) -> dict[str, Any]:
    """What a site writes or says differently: {"writes": [{"dest", "from", "to"}],
    "message": word diff ([] when the message is the same)}."""
    a, b = loads(old.writes) or {}, loads(new.writes) or {}
    return {
        "writes": [{"dest": k, "from": a[k], "to": b[k]} for k in a if a[k] != b.get(k)],
        "message": word_diff(old.message, new.message) if old.message != new.message else [],
    }


def condition_change(old: list[str], new: list[str]) -> dict[str, list[str]]:
    """The clauses of a site's condition path only at the new end ("gained") and only at the
    old end ("lost"), as written."""
    return {
        "gained": [c for c in new if c not in old],
        "lost": [c for c in old if c not in new],
    }


def group_condition_changes(changes: list[dict[str, list[str]]]) -> list[dict[str, Any]]:
    """Condition changes with one root cause as one group. The clause gained (or lost) by the
    most sites, negated or not, takes every site that has it; the rest are grouped again the
    same way. Returns [{"change": "gained" | "lost" | "reworded", "condition", "items": [index
    into `changes`]}], biggest first; "reworded" holds sites whose clauses read the same."""
    events: list[list[tuple[str, str]]] = [
        list(
            dict.fromkeys(
                [("gained", clause_root(c)) for c in ch["gained"]]
                + [("lost", clause_root(c)) for c in ch["lost"]]
            )
        )
        for ch in changes
    ]
    left = set(range(len(changes)))
    groups: list[dict[str, Any]] = []
    while left:
        counts: Counter[tuple[str, str]] = Counter(e for i in sorted(left) for e in events[i])
        if not counts:
            groups.append({"change": "reworded", "condition": "", "items": sorted(left)})
            break
        # Most sites first; a gained clause before a lost one; then the first seen.
        best = max(counts, key=lambda e: (counts[e], e[0] == "gained"))
        items = [i for i in sorted(left) if best in events[i]]
        groups.append({"change": best[0], "condition": best[1], "items": items})
        left -= set(items)
    return groups


def _members(enum: Enum) -> dict[str, Any]:
    return {m["name"]: m.get("value") for m in loads(enum.members) or []}


def compare_enums(old: list[Enum], new: list[Enum]) -> dict[str, Any]:
    """Enums added, removed, and those whose members changed (matched by class name)."""
    a = {e.name: e for e in old}
    b = {e.name: e for e in new}
    changed = []
    for name in sorted(a.keys() & b.keys()):
        ma, mb = _members(a[name]), _members(b[name])
        if ma == mb:
            continue
        changed.append(
            {
                "name": name,
                "added": [m for m in mb if m not in ma],
                "removed": [m for m in ma if m not in mb],
                "changed": [
                    {"name": m, "from": ma[m], "to": mb[m]}
                    for m in mb
                    if m in ma and ma[m] != mb[m]
                ],
                "enum": b[name],
            }
        )
    return {
        "added": [b[n] for n in sorted(b.keys() - a.keys())],
        "removed": [a[n] for n in sorted(a.keys() - b.keys())],
        "changed": changed,
    }


def find_renames(old: dict[str, Flag], new: dict[str, Flag]) -> list[dict[str, str]]:
    """Options that now lead to another option: as its alias, through its dest, or deprecated
    with a replacement. [{"from", "to", "via"}]"""
    renames: list[dict[str, str]] = []
    removed = [n for n in old if n not in new]
    added = {n for n in new if n not in old}
    alias_owner = {a: f.name for f in new.values() for a in loads(f.aliases) or []}
    dest_owner: dict[str, str] = {}
    for f in new.values():
        if f.name in added:
            dest_owner.setdefault(f.dest, f.name)
    taken: set[str] = set()
    for name in removed:
        # The old option is now an alias of another, or one of its aliases became the option.
        promoted = [a for a in loads(old[name].aliases) or [] if a in added and a not in taken]
        if name in alias_owner:
            renames.append({"from": name, "to": alias_owner[name], "via": "alias"})
        elif promoted:
            renames.append({"from": name, "to": promoted[0], "via": "alias"})
        elif old[name].dest in dest_owner and dest_owner[old[name].dest] not in taken:
            renames.append({"from": name, "to": dest_owner[old[name].dest], "via": "dest"})
        else:
            continue
        taken.add(renames[-1]["to"])
    for name, flag in new.items():
        # Still accepted but deprecated in favour of an option that did not exist before
        # (one: `--x=v` names --x; `--x-{decode,prefill}` is a split, not a rename).
        names = replacement_names(flag.replacement)
        target = names[0] if len(names) == 1 else None
        if (
            name in old
            and flag.deprecated
            and not old[name].deprecated
            and target in added
            and target not in taken
        ):
            value = (flag.replacement or "").partition("=")[2]
            renames.append({"from": name, "to": target, "via": "deprecated"})
            if value:
                renames[-1]["value"] = value
            taken.add(target)
    gone = [n for n in removed if n not in {r["from"] for r in renames}]
    renames += _renamed_in_words(old, new, gone, [n for n in new if n in added - taken])
    return renames


# Flag name words that say which way a switch points, not what it is about.
_POLARITY = {"enable": "disable", "disable": "enable", "use": "no", "no": "use"}
_SAME_HELP_NAMES = 0.5  # how alike two names with the same help must read (difflib ratio)


def _inverted(name: str) -> list[str]:
    """The option that switches the same thing the other way: --enable-x <-> --disable-x,
    --x <-> --no-x."""
    stem = name[2:]
    word, _, rest = stem.partition("-")
    if word in _POLARITY and rest:
        flipped = _POLARITY[word]
        return [f"--{flipped}-{rest}"] + ([f"--{rest}"] if word == "no" else [])
    return [f"--no-{stem}"]


def _renamed_in_words(
    old: dict[str, Flag], new: dict[str, Flag], gone: list[str], arrived: list[str]
) -> list[dict[str, str]]:
    """Renames that leave no alias, dest or deprecation behind: a removed option whose
    deprecation named an added one, the same switch turned the other way (`--enable-x` ->
    `--disable-x`, via "inverted"), or an added option with the removed one's help, word for
    word, and a name that reads alike (via "help")."""
    found: list[dict[str, str]] = []
    left = list(arrived)

    def take(name: str, target: str, via: str) -> None:
        found.append({"from": name, "to": target, "via": via})
        left.remove(target)

    helps: dict[str, list[str]] = {}
    for n in left:
        helps.setdefault(_help(new[n].help), []).append(n)
    for name in gone:
        flag = old[name]
        named = [n for n in replacement_names(flag.replacement) if n in left]
        inverted = [n for n in _inverted(name) if n in left]
        text = _help(flag.help)
        same_help = [
            n
            for n in helps.get(text, [])
            if n in left
            and difflib.SequenceMatcher(a=name, b=n).ratio() >= _SAME_HELP_NAMES
            and sum(_help(old[o].help) == text for o in gone) == 1
        ]
        if flag.deprecated and len(named) == 1:
            take(name, named[0], "deprecated")
        elif len(inverted) == 1:
            take(name, inverted[0], "inverted")
        elif len(text) >= 20 and len(same_help) == 1:
            take(name, same_help[0], "help")
    return found


def _spellings(flag: Flag) -> set[str]:
    return {flag.name, *(loads(flag.aliases) or [])}


def _respelled(old: Flag, new: Flag) -> bool:
    """Each side's name is a spelling on the other side too, only the primary one changed
    (`--tp-size` with alias `--tensor-parallel-size`, then the other way round): a command
    line that worked still works, so the flag was not renamed."""
    return old.name != new.name and old.name in _spellings(new) and new.name in _spellings(old)


def _besides_rename(changes: list[dict[str, Any]], rename: dict[str, Any]) -> list[dict[str, Any]]:
    """A renamed flag's changes without the two names the rename itself moves in its aliases
    (the old name kept as an alias, or an alias promoted): other alias changes stay."""
    moved = {rename["from"], rename["to"]}
    out = []
    for change in changes:
        if change["field"] == "aliases":
            added = [v for v in change["added"] if v not in moved]
            removed = [v for v in change["removed"] if v not in moved]
            if not added and not removed:
                continue
            change = {**change, "added": added, "removed": removed}
        out.append(change)
    return out


def _flags(session: Session, version: Version) -> dict[str, Flag]:
    """The version's flags by name, in source order."""
    rows = session.exec(select(Flag).where(Flag.version_id == version.id))
    return {f.name: f for f in in_order(rows, Flag, *FLAG_ORDER)}


def diff_versions(
    session: Session, old: Version, new: Version, flag: str = "", topic: str = ""
) -> dict[str, Any]:
    """Everything that changed going from `old` to `new` (either may be the newer one);
    with `flag` or `topic`, only what concerns the flags whose name holds `flag` or that are
    listed under the help section `topic` (see `keep_only`).

    Flags and enums are returned as rows so callers can cite them; changes are plain dicts.
    """
    a, b = _flags(session, old), _flags(session, new)
    # Renames are found in time order (a deprecation points forward) and turned around for
    # a diff back in time, so both directions list the same renames.
    if old.position <= new.position:
        pairs = find_renames(a, b)
    else:
        pairs = [{**r, "from": r["to"], "to": r["from"]} for r in find_renames(b, a)]
    # Both spellings accepted on both sides: only which one is primary changed.
    respelled = [r for r in pairs if _respelled(a[r["from"]], b[r["to"]])]
    renamed = [r for r in pairs if r not in respelled]
    for r in respelled:
        r["via"] = "primary"
    renamed_from = {r["from"] for r in pairs}
    renamed_to = {r["to"] for r in pairs}
    added = sorted(n for n in b if n not in a and n not in renamed_to)
    removed = sorted(n for n in a if n not in b and n not in renamed_from)
    changed: list[dict[str, Any]] = []
    for name in sorted(a.keys() & b.keys()):
        for change in compare_flags(a[name], b[name]):
            changed.append({"name": name, **change})
    for r in renamed + respelled:
        if r["via"] != "deprecated":
            # The option lives on under a new name: report what else changed with it.
            for change in _besides_rename(compare_flags(a[r["from"]], b[r["to"]]), r):
                if change["field"] != "dest":
                    changed.append({"name": r["to"], **change})

    def sites(v: Version) -> list[ConstraintSite]:
        stmt = select(ConstraintSite).where(ConstraintSite.version_id == v.id)
        return in_order(session.exec(stmt), ConstraintSite, "path", "line")

    ca, cb = sites(old), sites(new)
    enum_rows = {
        v.id: in_order(session.exec(select(Enum).where(Enum.version_id == v.id)), Enum, "name")
        for v in (old, new)
    }
    enums = compare_enums(enum_rows[old.id], enum_rows[new.id])
    result: dict[str, Any] = {
        "from": old,
        "to": new,
        "added": added,
        "removed": removed,
        "renamed": renamed,
        "respelled": respelled,
        "changed": changed,
        **pair_constraints(_multiset_minus(ca, cb), _multiset_minus(cb, ca)),
        "constraints_moved": [],
        "enums_added": enums["added"],
        "enums_removed": enums["removed"],
        "enums_changed": enums["changed"],
        "flags_from": a,
        "flags_to": b,
        **diff_env(session, old, new),
    }
    # A site that moved or was reworded is one entry, not a removal and an addition.
    moved, result["constraints_removed"], result["constraints_added"] = pair_moved(
        result["constraints_removed"], result["constraints_added"]
    )
    result["constraints_moved"] = moved
    if flag or topic:
        keep_only(result, flag, topic)
    added, removed, renamed, respelled, changed = (
        result[k] for k in ("added", "removed", "renamed", "respelled", "changed")
    )
    # One entry per root cause of the condition changes (an upstream `elif` rewrites many).
    clauses = [
        condition_change(condition_path(o), condition_path(n))
        for o, n in result["constraints_changed"]
    ]
    result["condition_changes"] = clauses
    result["condition_groups"] = group_condition_changes(clauses)
    # Restructured with the same meaning, or changed only through an earlier branch: folded.
    result["condition_meanings"] = condition_meanings(
        [(condition_path(o), condition_path(n)) for o, n in result["constraints_changed"]]
    )
    folded = sum(m != "changed" for m in result["condition_meanings"])
    result["summary"] = {
        "added": len(added),
        "removed": len(removed),
        "renamed": len(renamed),
        "respelled": len(respelled),
        "changed": len({c["name"] for c in changed}),
        "changes": len(changed),
        "constraints_added": len(result["constraints_added"]),
        "constraints_removed": len(result["constraints_removed"]),
        "constraints_changed": len(result["constraints_changed"]),
        "constraints_value_changed": len(result["constraints_value_changed"]),
        "condition_groups": len(result["condition_groups"]),
        "constraints_moved": len(result["constraints_moved"]),
        "constraints_folded": folded,
        "enums_changed": len(result["enums_added"])
        + len(result["enums_removed"])
        + len(result["enums_changed"]),
        "env_added": len(result["env_added"]),
        "env_removed": len(result["env_removed"]),
        "env_renamed": len(result["env_renamed"]),
        "env_changed": len({c["name"] for c in result["env_changed"]}),
    }
    return result


def _option_match(text: str) -> Callable[[str], bool]:
    """A test of an option name against what a reader typed: `moe-runner`, `--tp`, `tp_size`."""
    needle = text.strip().lower().lstrip("-").replace("_", "-")
    return lambda name: needle in name.lower().lstrip("-")


def keep_only(result: dict[str, Any], flag: str, topic: str) -> None:
    """Narrow a diff (in place) to the flags whose name holds `flag` and that are listed
    under the help section `topic` (either may be empty), the constraint sites that read or
    affect one of them, the enums behind one of them, and (for `flag`) the environment
    variables whose name holds it."""
    a, b = result["flags_from"], result["flags_to"]
    named = _option_match(flag) if flag else (lambda _name: True)
    wanted = topic.strip().lower()

    def keep(flags: dict[str, Flag], name: str) -> bool:
        row = flags.get(name)
        if row is None or not named(name):
            return False
        return not wanted or (row.section or "").strip().lower() == wanted

    kept_a = {n for n in a if keep(a, n)}
    kept_b = {n for n in b if keep(b, n)}
    renames = [r for r in result["renamed"] if r["from"] in kept_a or r["to"] in kept_b]
    respelled = [r for r in result["respelled"] if r["from"] in kept_a or r["to"] in kept_b]
    for r in renames + respelled:
        kept_a.add(r["from"])
        kept_b.add(r["to"])
    result["renamed"], result["respelled"] = renames, respelled
    result["added"] = [n for n in result["added"] if n in kept_b]
    result["removed"] = [n for n in result["removed"] if n in kept_a]
    result["changed"] = [c for c in result["changed"] if c["name"] in kept_b]

    def about(site: ConstraintSite, kept: set[str]) -> bool:
        return any(f in kept for f in (loads(site.flags) or []) + (loads(site.affects) or []))

    result["constraints_added"] = [c for c in result["constraints_added"] if about(c, kept_b)]
    result["constraints_removed"] = [c for c in result["constraints_removed"] if about(c, kept_a)]
    for key in ("constraints_changed", "constraints_value_changed", "constraints_moved"):
        result[key] = [(o, n) for o, n in result[key] if about(o, kept_a) or about(n, kept_b)]

    def behind(enum: Enum, kept: set[str]) -> bool:
        return any(f in kept for f in loads(enum.flags) or [])

    result["enums_added"] = [e for e in result["enums_added"] if behind(e, kept_b)]
    result["enums_removed"] = [e for e in result["enums_removed"] if behind(e, kept_a)]
    result["enums_changed"] = [e for e in result["enums_changed"] if behind(e["enum"], kept_b)]
    # Variables have no help sections of their own: a topic keeps none of them.
    needle = flag.strip().lstrip("-").replace("-", "_").upper()
    env_kept = (lambda name: needle in name.upper()) if flag and not wanted else (lambda _n: False)
    result["env_added"] = [n for n in result["env_added"] if env_kept(n)]
    result["env_removed"] = [n for n in result["env_removed"] if env_kept(n)]
    result["env_renamed"] = [
        r for r in result["env_renamed"] if env_kept(r["from"]) or env_kept(r["to"])
    ]
    result["env_changed"] = [c for c in result["env_changed"] if env_kept(c["name"])]


def topics(session: Session, *versions: Version) -> list[str]:
    """The help sections the versions list flags under, for the diff's topic filter."""
    ids = [v.id for v in versions]
    rows = session.exec(select(Flag.section).where(col(Flag.version_id).in_(ids))).all()
    return sorted({r for r in rows if r}, key=str.lower)


def flag_history(session: Session, flag_name: str) -> list[dict[str, Any]]:
    """Change events of one flag across all versions, oldest first:
    [{"version", "name", "field", "from", "to"}] with field "added", "removed", "renamed",
    "respelled" (only the primary spelling changed, see `_respelled`), "split" or a FIELDS
    name, and "name" the flag's name at that version (not on "removed"). The flag is followed
    by its canonical option, its aliases and its dest, so a flag renamed with an alias keeps
    one history; a flag that first appears as the replacement of a deprecated one (the
    diff's rename "via deprecated") takes that flag's history before it. One of several
    replacements named at once (`--x-{decode,prefill}`) was "split" from it: linked, with
    "at" the last version the old flag exists, its history not taken (it was not this flag).
    """
    return _history(session, flag_name.strip(), set())


def _predecessor(
    conn: Any, table: Any, before: int, at: int, name: str
) -> tuple[str, str, list[str]] | None:
    """The flag `name` continues when it first appears at version `at` (the one before is
    `before`): ("renamed", old name, []) for a rename find_renames sees, or ("split", old
    name, the other replacements) for one of several replacements of a newly deprecated
    flag."""
    # Cheap test first (most flags are simply new): a deprecated flag here names this one.
    # Alias and dest renames need none: the history follows those by the option table.
    deprecated = select(table.c.replacement).where(
        table.c.version_id == at, table.c.deprecated, table.c.replacement.is_not(None)
    )
    if not any(name in replacement_names(r) for r in conn.execute(deprecated).scalars()):
        return None
    old = {f.name: f for f in conn.execute(select(table).where(table.c.version_id == before))}
    new = {f.name: f for f in conn.execute(select(table).where(table.c.version_id == at))}
    for r in find_renames(old, new):
        # (`--enable-breakable-cuda-graph` -> `--cuda-graph-backend-prefill=breakable`: the
        # old flag was one value of the new one, whose own history starts here)
        if r["to"] == name and "value" not in r:
            return ("renamed", r["from"], [])
    for f in new.values():
        names = replacement_names(f.replacement)
        if (
            f.deprecated
            and len(names) > 1
            and name in names
            and f.name in old
            and not old[f.name].deprecated
        ):
            return ("split", f.name, [n for n in names if n != name])
    return None


def _history(session: Session, name: str, seen: set[str]) -> list[dict[str, Any]]:
    seen.add(name)
    dest = option_to_dest(name)
    option = "--" + dest.replace("_", "-") if not name.startswith("-") else name

    # Plain rows (Core), not ORM objects: building those was half of a history's time, and
    # a flag page's first view waits for its history.
    conn = session.connection()
    vtable = Version.__table__  # type: ignore[attr-defined]
    versions = conn.execute(select(vtable.c.id, vtable.c.name).order_by(vtable.c.position)).all()
    ids = [v.id for v in versions]
    table = Flag.__table__  # type: ignore[attr-defined]

    def rows(version_ids: list[int | None], *conds: Any) -> list[Any]:
        # version_id IN (...) lets SQLite probe the (version_id, name) index per version.
        stmt = select(table).where(table.c.version_id.in_(version_ids), *conds)
        return list(conn.execute(stmt).all())

    found = rows(ids, table.c.name == option)
    # Names the flag had before a rename: its own aliases (e.g. a deprecated old spelling).
    former = {a for f in found if f.name == option for a in loads(f.aliases) or []}
    former.discard(option)
    if former:
        found += rows(ids, table.c.name.in_(former))
    # Where neither name exists, the option may be another flag's alias, or its dest may
    # belong to an option under another name (scans only those versions' flags).
    present = {f.version_id for f in found}
    missing = [i for i in ids if i not in present]
    if missing:
        other = select(Option.flag_id).where(
            col(Option.version_id).in_(missing),
            Option.key == name_key(option),
            col(Option.kind).in_(["option", "alias", "dest", "argparse_dest"]),
        )
        found += rows(missing, table.c.id.in_(other))
    per_version: dict[int, list[Any]] = {}
    for flag in found:
        per_version.setdefault(flag.version_id, []).append(flag)
    if not per_version:
        return []

    def best(candidates: list[Any]) -> Any:
        # The option itself, then a former name, then the option as an alias, then the dest.
        for test in (
            lambda f: f.name == option,
            lambda f: f.name in former,
            lambda f: option in (loads(f.aliases) or []),
            lambda f: f.dest == dest,
        ):
            for f in candidates:
                if test(f):
                    return f
        return None

    def continued(i: int, row: Any, at: dict[str, Any]) -> list[dict[str, Any]] | None:
        source = (
            _predecessor(conn, table, versions[i - 1].id, versions[i].id, row.name) if i else None
        )
        if source is None or source[1] in seen:
            return None
        field, old, siblings = source
        last = conn.execute(
            select(vtable.c.name)
            .join(table, table.c.version_id == vtable.c.id)
            .where(table.c.name == old)
            .order_by(vtable.c.position.desc())
            .limit(1)
        ).scalar_one()
        if field == "split":
            split = {"field": "split", "from": old, "to": row.name, "at": last}
            return [{**at, **split, "siblings": siblings}]
        # The same option under a new name: its story before this version is ours.
        earlier = {v.name for v in versions[:i]}
        events = [e for e in _history(session, old, seen) if e["version"] in earlier]
        return [*events, {**at, "field": "renamed", "from": old, "to": row.name, "at": last}]

    def changed(prev: Any, row: Any, at: dict[str, Any]) -> list[dict[str, Any]]:
        events = []
        if row.name != prev.name:
            # A swap of the primary spelling is no rename, as in the diff.
            field = "respelled" if _respelled(prev, row) else "renamed"
            events.append({**at, "field": field, "from": prev.name, "to": row.name})
        rename = {"from": prev.name, "to": row.name}
        return events + [{**at, **c} for c in _besides_rename(compare_flags(prev, row), rename)]

    def row_at(version: Any) -> Any:
        candidates = per_version.get(version.id or -1)
        return best(candidates) if candidates else None

    return history_events(versions, row_at, changed, continued)


def history_events(
    versions: Sequence[Any],
    row_at: Callable[[Any], Any],
    changed: Callable[[Any, Any, dict[str, Any]], list[dict[str, Any]]],
    continued: Callable[[int, Any, dict[str, Any]], list[dict[str, Any]] | None] | None = None,
) -> list[dict[str, Any]]:
    """The change events of one flag or variable across `versions` (oldest first), whose
    row at a version is `row_at(version)` (None: it is absent there): "removed" where it is
    absent after a row; where it appears, what `continued(i, row, at)` says it continues (a
    rename: the events of the name it had), else "added"; between two rows, `changed(prev,
    row, at)`. `at` = {"version", "name"}: where an event is and what the flag or variable
    was called there, for a link to it there."""
    events: list[dict[str, Any]] = []
    prev: Any = None
    for i, version in enumerate(versions):
        row = row_at(version)
        if row is None:
            if prev is not None:
                events.append(
                    {"version": version.name, "field": "removed", "from": prev.name, "to": None}
                )
            prev = None
            continue
        at = {"version": version.name, "name": row.name}
        if prev is not None:
            events += changed(prev, row, at)
        else:
            arrival = continued(i, row, at) if continued else None
            events += arrival or [{**at, "field": "added", "from": None, "to": row.name}]
        prev = row
    return events


# --- environment variables ------------------------------------------------------------------

# Fields compared between two rows of one variable (history and diff), in report order.
ENV_FIELDS = ("type", "default", "deprecated_names", "declared")

# What SGLang's bool readers take as true or false (environ.py EnvBool.parse; the older
# get_bool_env_var takes anything but "true"/"1" as false, "" included).
_TRUE = {"true", "1", "yes", "y"}
_FALSE = {"false", "0", "no", "n", ""}


def read_as(type_: str | None, value: Any) -> Any:
    """A default as SGLang reads it for a variable of `type_`: `"false"` read by a bool
    helper is False, `"16"` read by an int one is 16. A string it would refuse, or one of
    another type, stays as it is."""
    if not isinstance(value, str):
        return value
    text = value.strip().lower()
    if type_ == "bool":
        return True if text in _TRUE else False if text in _FALSE else value
    if type_ in ("int", "float"):
        try:
            return int(text) if type_ == "int" else float(text)
        except ValueError:
            return value
    return value


def _values(var: EnvVar) -> dict[str, Any]:
    return {
        "type": var.type,
        "default": loads(var.default) if var.default is not None else var.default_expr,
        "deprecated_names": loads(var.deprecated_names) or [],
        "declared": var.declared,
    }


def _same_default(old: EnvVar, new: EnvVar) -> bool:
    """Both static defaults read the same: `"false"` read with get_bool_env_var before the
    variable moved into environ.py and EnvBool(False) after it are one value in two spellings.
    Each side is read by its own type, or by the other's where its own is unknown."""
    if old.default is None or new.default is None:
        return False
    a = read_as(old.type or new.type, loads(old.default))
    b = read_as(new.type or old.type, loads(new.default))
    # bool is an int in Python: "0" read as an int equals False, as it should for a move
    # from an int read to a bool one (the type change is reported on its own).
    return bool(a == b)


def compare_env(old: EnvVar, new: EnvVar) -> list[dict[str, Any]]:
    """Changed fields; a default that only changed its spelling is not a change (the move
    into environ.py shows as the `declared` change)."""
    a, b = _values(old), _values(new)
    return [
        {"field": f, "from": a[f], "to": b[f]}
        for f in ENV_FIELDS
        if a[f] != b[f] and not (f == "default" and _same_default(old, new))
    ]


def _env(session: Session, version: Version) -> list[EnvVar]:
    return in_order(
        session.exec(select(EnvVar).where(EnvVar.version_id == version.id)), EnvVar, "name"
    )


def _readers(rows: Iterable[EnvVar]) -> dict[str, str]:
    """Deprecated name -> the variable that still reads it in its place (EnvBoolWithAlias)."""
    return {old: v.name for v in rows for old in loads(v.deprecated_names) or []}


def diff_env(session: Session, old: Version, new: Version) -> dict[str, Any]:
    """{"env_added": [name], "env_removed": [name], "env_renamed": [{"from", "to"}],
    "env_changed": [{"name", "field", "from", "to"}]} going from `old` to `new`. A name that
    becomes a deprecated name of another variable is renamed, not removed: SGLang still reads
    it (and the new name is not counted as added)."""
    a = {v.name: v for v in _env(session, old)}
    b = {v.name: v for v in _env(session, new)}
    readers = _readers(b.values())
    renamed = [
        {"from": name, "to": readers[name]}
        for name in sorted(a.keys() - b.keys())
        if name in readers
    ]
    changed = [
        {"name": name, **change}
        for name in sorted(a.keys() & b.keys())
        for change in compare_env(a[name], b[name])
    ]
    gone = {r["from"] for r in renamed}
    new_names = {r["to"] for r in renamed} - a.keys()
    return {
        "env_added": sorted(b.keys() - a.keys() - new_names),
        "env_removed": sorted(a.keys() - b.keys() - gone),
        "env_renamed": renamed,
        "env_changed": changed,
    }
