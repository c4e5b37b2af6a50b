"""The parts of the flag page that arrange its facts for reading: constraint sites grouped by
what they do and by the value they test, conditions in plain words, reads grouped by
directory, a timeline over every version, and the "On this page" sections. Pure functions
over the builder's dicts, so the HTML page and its JSON twin carry the same arrangement."""

from __future__ import annotations

import ast
import posixpath
import re
from functools import lru_cache
from typing import Any
from urllib.parse import quote

from app.fragments import series, show_value
from kb.pyast import and_term
from kb.queries import quoted

EFFECTS = {"raise": "requires", "assert": "requires", "override": "overrides", "warning": "warns"}
EFFECT_TITLES = {
    "requires": "Requires (raises or asserts)",
    "overrides": "Overrides (sets flags)",
    "warns": "Warns",
}
OWNERS = ("self", "server_args", "args")  # how the code names the parsed arguments
MAX_LISTED = 4  # values spelled out in a plain-words list before "… (+N more)"

# Which change a version's mark shows when several fields changed there (first wins).
MARK_ORDER = ("removed", "added", "renamed", "deprecated", "default", "choices")


@lru_cache(maxsize=16384)
def _parsed(condition: str) -> ast.expr:
    """A condition's expression, parsed once per text: the same conditions come back on
    every flag page that cites them, and parsing was most of the page's word-building time.
    The tree is shared, so the readers below never change it. SyntaxError is not cached
    and is raised again."""
    return ast.parse(condition.strip(), mode="eval").body


def _flag_of(node: ast.AST, names: dict[str, str]) -> str | None:
    """`self.tp_size` -> "--tp-size" when tp_size is a flag's dest."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        if node.value.id in OWNERS and node.attr in names:
            return names[node.attr]
    return None


def _literal(node: ast.AST, names: dict[str, str] | None = None) -> str:
    if isinstance(node, ast.Constant):
        return "None" if node.value is None else str(node.value)
    return _flag_of(node, names or {}) or ast.unparse(node)


def _listing(node: ast.AST, names: dict[str, str] | None = None) -> list[str] | None:
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return [_literal(e, names) for e in node.elts]
    return None


def _some(values: list[str]) -> str:
    if len(values) <= MAX_LISTED:
        return ", ".join(values)
    return ", ".join(values[:MAX_LISTED]) + f", … (+{len(values) - MAX_LISTED} more)"


def _compare(node: ast.Compare, names: dict[str, str], negate: bool) -> str | None:
    """One comparison in words ("--x is one of a, b"), or None when it is not a simple one."""
    if len(node.ops) != 1:
        return None
    flag = _literal(node.left, names)
    op, right = node.ops[0], node.comparators[0]
    values = _listing(right, names)
    if isinstance(op, ast.In | ast.NotIn) and values is not None:
        inside = isinstance(op, ast.In) != negate
        return f"{flag} is {'one' if inside else 'none'} of {_some(values)}"
    if isinstance(op, ast.Is | ast.IsNot) and _literal(right) == "None":
        unset = isinstance(op, ast.Is) != negate
        return f"{flag} is {'unset' if unset else 'set'}"
    words = {ast.Eq: ("is", "is not"), ast.NotEq: ("is not", "is")}
    for kind, (yes, no) in words.items():
        if isinstance(op, kind):
            return f"{flag} {no if negate else yes} {_literal(right, names)}"
    if isinstance(op, ast.Is | ast.IsNot):
        same = isinstance(op, ast.Is) != negate
        return f"{flag} is {'' if same else 'not '}{_literal(right, names)}"
    return None


def _words(node: ast.AST, names: dict[str, str], negate: bool = False) -> str:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _words(node.operand, names, not negate)
    if isinstance(node, ast.BoolOp):
        joiner = " and " if isinstance(node.op, ast.And) else " or "
        inner = joiner.join(_grouped(v, names, node.op) for v in node.values)
        return f"not ({inner})" if negate else inner
    flag = _flag_of(node, names)
    if flag is not None:
        return f"{flag} is {'off' if negate else 'on'}"
    if isinstance(node, ast.Compare):
        said = _compare(node, names, negate)
        if said is not None:
            return said
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "get_bool_env_var"
        and node.args
    ):
        return f"environment {_literal(node.args[0])} is {'false' if negate else 'true'}"
    text = ast.unparse(node)
    simple = isinstance(node, ast.Name | ast.Attribute | ast.Call)
    return (f"not {text}" if simple else f"not ({text})") if negate else text


def _grouped(node: ast.AST, names: dict[str, str], within: ast.boolop) -> str:
    """A term of an and/or in words, in parentheses when it is the other kind of and/or:
    "(A or B) and C" must not read as "A or (B and C)"."""
    said = _words(node, names)
    nested = isinstance(node, ast.BoolOp) and type(node.op) is not type(within)
    return f"({said})" if nested else said


def plain_condition(conditions: list[str], names: dict[str, str]) -> str:
    """A condition path (its parts are ANDed) in words: flags by their option names,
    comparisons as "is", "is one of", "is unset"; what cannot be parsed stays as written."""
    if len(conditions) == 1:
        try:
            return _words(_parsed(conditions[0]), names)
        except SyntaxError:
            return conditions[0]
    said = []
    for part in conditions:
        try:
            said.append(_grouped(_parsed(part), names, ast.And()))
        except SyntaxError:
            said.append(and_term(part))
    return " and ".join(said)


def tested_values(conditions: list[str], dest: str) -> list[str]:
    """The values of the flag `dest` that a condition path compares it with; a negated test
    ("!=", "not in", `not (x == v)`) gives "≠ v"."""
    found: list[str] = []

    def visit(node: ast.AST, negate: bool) -> None:
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            visit(node.operand, not negate)
        elif isinstance(node, ast.BoolOp):
            for value in node.values:
                visit(value, negate)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1:
            if _flag_of(node.left, {dest: dest}) is None:
                return
            op, right = node.ops[0], node.comparators[0]
            listed = _listing(right)
            if isinstance(op, ast.Eq | ast.NotEq) and isinstance(right, ast.Constant):
                values = [_literal(right)]
            elif isinstance(op, ast.In | ast.NotIn) and listed is not None:
                values = listed
            else:
                return
            negated = negate != isinstance(op, ast.NotEq | ast.NotIn)
            found.extend(f"≠ {v}" if negated else v for v in values)

    for part in conditions:
        try:
            visit(_parsed(part), False)
        except SyntaxError:
            continue
    return list(dict.fromkeys(found))


def constraint_groups(
    constraints: list[dict[str, Any]], flag: str, choices: list[str]
) -> list[dict[str, Any]]:
    """The sites by effect (requires, overrides, warns), then by the values they test, in
    choice order; sites that test no value of the flag come last as "other conditions"."""
    order = {c: i for i, c in enumerate(choices)}

    def rank(key: str | None) -> tuple[int, int, str]:
        if key is None:
            return (2, 0, "")
        first = key.split(", ")[0]
        negated = first.startswith("≠ ")
        return (int(negated), order.get(first.removeprefix("≠ "), len(order)), key)

    groups = []
    for effect, title in EFFECT_TITLES.items():
        by_value: dict[str | None, list[int]] = {}
        for i, c in enumerate(constraints):
            if c["effect"] == effect:
                by_value.setdefault(", ".join(c["values"]) or None, []).append(i)
        if not by_value:
            continue
        values = [
            {"value": key, "label": _value_label(flag, key), "sites": by_value[key]}
            for key in sorted(by_value, key=rank)
        ]
        count = sum(len(v) for v in by_value.values())
        groups.append({"effect": effect, "title": title, "count": count, "values": values})
    return groups


def _value_label(flag: str, key: str | None) -> str:
    if key is None:
        return "Other conditions"
    values = key.split(", ")
    negated = [v.removeprefix("≠ ") for v in values if v.startswith("≠ ")]
    plain = [v for v in values if not v.startswith("≠ ")]
    said = []
    if plain:
        said.append(f"{flag} = {plain[0]}" if len(plain) == 1 else f"{flag} ∈ {{{_some(plain)}}}")
    if negated:
        said.append(
            f"{flag} ∉ {{{_some(negated)}}}" if len(negated) > 1 else f"{flag} ≠ {negated[0]}"
        )
    return "When " + " and ".join(said)


def usage_areas(version: str, usages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Reads by directory, then file, in path order (indexes into `usages`)."""
    areas: dict[str, dict[str, list[int]]] = {}
    for i, u in enumerate(usages):
        area = posixpath.dirname(u["path"]) or "."
        areas.setdefault(area, {}).setdefault(u["path"], []).append(i)
    return [
        {
            "area": area,
            "count": sum(len(s) for s in files.values()),
            "files": [
                {"path": path, "url": f"/v/{quote(version, safe='')}/source/{path}", "sites": sites}
                for path, sites in files.items()
            ],
        }
        for area, files in areas.items()
    ]


def _change_words(change: dict[str, Any]) -> str:
    field = change["field"]
    if field in ("added", "removed"):
        return field
    if field == "renamed":
        return f"renamed {change['from']} → {change['to']}"
    if field == "respelled":
        return f"primary spelling {change['from']} → {change['to']}"
    if field == "split":
        return f"split from {change['from']}"
    if field == "choices" and change.get("known"):
        return "choices opened to any value (known: " + ", ".join(change["known"]) + ")"
    if field in ("choices", "known_values", "aliases"):
        plus = " ".join(f"+{v}" for v in change.get("added") or [])
        minus = " ".join(f"−{v}" for v in change.get("removed") or [])
        what = field.replace("_", " ")
        return f"{what} {plus} {minus}".strip() if plus or minus else f"{what} reordered"
    if field == "deprecated":
        return "deprecated" if change["to"] else "no longer deprecated"
    if field == "help":
        return "help text changed"
    # as the history list shows them (JSON: null, "x"), not as Python reprs (None, 'x')
    return f"{field} {show_value(change['from'])} → {show_value(change['to'])}"


def timeline(
    names_oldest_first: list[str], history: list[dict[str, Any]], flag: str
) -> list[dict[str, Any]]:
    """One mark per version: absent, present, or the change that happened there (the most
    telling one when several did), with the flag's page there and the changes in words."""
    by_version: dict[str, list[dict[str, Any]]] = {}
    for change in history:
        by_version.setdefault(change["version"], []).append(change)
    name, exists, marks = flag, False, []
    first = next((c for c in history if c["field"] in ("added", "split")), None)
    if first is not None:
        name = first["to"]
    for version in names_oldest_first:
        changes = by_version.get(version)
        if not changes:  # most versions: no change, the mark only says whether it exists
            plain = "present" if exists else "absent"
            url = f"/v/{quoted(version, '')}/flags/{quoted(name, '')}" if exists else None
            marks.append(
                {"version": version, "url": url, "state": plain, "title": f"{version}: {plain}"}
            )
            continue
        # A split is where the flag appears: marked as added.
        fields = ["added" if c["field"] == "split" else c["field"] for c in changes]
        for c in changes:
            if c["field"] in ("added", "renamed", "respelled", "split"):
                name, exists = c["to"], True
            elif c["field"] == "removed":
                exists = False
        state = next((f for f in MARK_ORDER if f in fields), None)
        if state == "renamed" or (state is None and changes):
            state = "changed"
        if state is None:
            state = "present" if exists else "absent"
        words = "; ".join(_change_words(c) for c in changes)
        title = f"{version}: {words}" if words else f"{version}: {state}"
        url = f"/v/{quoted(version, '')}/flags/{quoted(name, '')}" if exists else None
        marks.append({"version": version, "url": url, "state": state, "title": title})
    return marks


# The changes that start a new range of the timeline (a help text change does not).
RANGE_FIELDS = ("added", "removed", "renamed", "split", "deprecated", "default", "choices")


def timeline_ranges(
    marks: list[dict[str, Any]],
    history: list[dict[str, Any]],
    default: Any,
    choices: Any,
    current: str,
) -> dict[str, Any]:
    """The timeline as ranges of versions (`marks`, oldest first) over which the flag's
    presence, default and choices stay the same, each with the changes that start it; and
    the release series for the axis. Positions are percentages of the whole (`x`, `w`), so
    the drawing takes any width and its labels keep their size. `default` and `choices` are
    the page's: the values before the first change are that change's `from`. `shade` and
    `cshade` flip where the default and the choices change (the lanes' alternate shades);
    `here` is the `current` version's position."""
    n = len(marks) or 1
    by_version: dict[str, list[dict[str, Any]]] = {}
    for change in history:
        by_version.setdefault(change["version"], []).append(change)

    def before(field: str, now: Any) -> Any:
        first = next((c for c in history if c["field"] == field), None)
        return first["from"] if first is not None else now

    value, listed = before("default", default), before("choices", choices)
    ranges: list[dict[str, Any]] = []
    for i, m in enumerate(marks):
        changes = [c for c in by_version.get(m["version"], ()) if c["field"] in RANGE_FIELDS]
        for c in changes:
            if c["field"] == "default":
                value = c["to"]
            elif c["field"] == "choices":
                listed = c["to"]
        exists = m["state"] not in ("absent", "removed")
        if ranges and not changes and ranges[-1]["exists"] == exists:
            ranges[-1].update(last=m["version"], count=ranges[-1]["count"] + 1)
            ranges[-1]["w"] = ranges[-1]["count"] * 100 / n
            continue
        ranges.append(
            {
                "first": m["version"], "last": m["version"], "count": 1, "url": m["url"],
                "exists": exists, "default": show_value(value),
                "choices": None if listed is None else len(listed),
                "changes": [_change_words(c) for c in changes], "x": i * 100 / n, "w": 100 / n,
            }
        )  # fmt: skip
    shade = cshade = 0
    for before_, r in zip([None, *ranges], ranges, strict=False):
        if before_ is not None and r["default"] != before_["default"]:
            shade ^= 1
        if before_ is not None and r["choices"] != before_["choices"]:
            cshade ^= 1
        r["shade"], r["cshade"] = shade, cshade
    here = next((i for i, m in enumerate(marks) if m["version"] == current), None)
    axis, start = [], 0
    for label, names in series([m["version"] for m in marks]):
        text = label
        if label == "Snapshots":  # short enough for a phone: the years they were taken
            years = sorted({y for name in names for y in re.findall(r"\b(20\d\d)\b", name)})
            text = (years[0] if len(years) == 1 else f"{years[0]}–{years[-1]}") if years else "snap"
        axis.append({"label": label, "text": text, "x": start * 100 / n, "w": len(names) * 100 / n})
        start += len(names)
    at = None if here is None else {"x": here * 100 / n, "w": 100 / n}
    return {"ranges": ranges, "axis": axis, "here": at, "versions": len(marks)}


def sections(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The "On this page" entries for the parts the page has, in page order."""
    out: list[dict[str, Any]] = [{"id": "summary", "title": "Summary", "count": None}]
    if data["choices"] is not None:
        out.append({"id": "choices", "title": "Choices", "count": len(data["choices"])})
    elif data.get("known_values"):
        known = data["known_values"]
        out.append({"id": "choices", "title": "Known values", "count": len(known)})
    out.append({"id": "constraints", "title": "Constraints", "count": len(data["constraints"])})
    for group in data["constraint_groups"]:
        out.append({"id": f"c-{group['effect']}", "title": group["title"], "count": group["count"]})
    if data.get("examples"):
        out.append({"id": "examples", "title": "In the docs", "count": len(data["examples"])})
    grid = data.get("choice_grid")
    if grid and len(grid["columns"]) > 1:
        out.append({"id": "choice-grid", "title": "Choices across versions", "count": None})
    if data["related"]:
        out.append({"id": "related", "title": "Related flags", "count": len(data["related"])})
    if data.get("models"):
        out.append({"id": "models", "title": "Models", "count": len(data["models"])})
    out.append({"id": "usages", "title": "Reads", "count": len(data["usages"])})
    if data.get("indirect_usages"):
        count = len(data["indirect_usages"])
        out.append({"id": "indirect", "title": "Read through a chain", "count": count})
    out.append({"id": "history", "title": "History", "count": len(data["history"])})
    return out


GRAPH_ROW = 24  # px between two edges' rows in the constraint graph
GRAPH_GAP = 8  # more px between the rows of two different flags
LABEL_CHAR = 7.3  # px a character of the 12 px monospace edge labels takes (a little over)
NAME_CHAR = 7.9  # px a character of the 13 px flag names takes
KIND_ORDER = ("raise", "assert", "override", "warning")


def constraint_graph(
    constraints: list[dict[str, Any]], flag: str, related: list[dict[str, Any]]
) -> dict[str, Any]:
    """One edge per (other flag, kind), labelled in the picture with the values of `flag`
    its sites test and linking to the first of them (`sites` has them all). Each edge has a
    row of its own: it curves from `flag` to `xm`, then runs straight to the other flag at
    `x2`, its label written above the straight part, so labels never cross a line or each
    other; the rows of one flag are bracketed together at its name."""
    rows = {r["name"]: i for i, r in enumerate(related)}
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for c in constraints:
        for other in dict.fromkeys(c["flags"] + c["affects"]):
            if other not in rows:
                continue
            edge = seen.setdefault(
                (other, c["kind"]),
                {"flag": other, "kind": c["kind"], "count": 0, "values": [], "sites": []},
            )
            edge["count"] += 1
            edge["values"] += [v for v in c["values"] if v not in edge["values"]]
            edge["sites"].append(c["source"]["permalink"])
    ranked = sorted(
        seen.values(),
        key=lambda e: (
            rows[e["flag"]],
            KIND_ORDER.index(e["kind"]) if e["kind"] in KIND_ORDER else 9,
        ),
    )
    edges: list[dict[str, Any]] = []
    nodes: list[dict[str, Any]] = []
    y = 16
    for r in related:
        first = y
        for edge in (e for e in ranked if e["flag"] == r["name"]):
            values = edge.pop("values")
            times = f" ×{edge['count']}" if edge["count"] > 1 else ""
            edge["label"] = f"{edge['kind']}{times}" + (f" when {_some(values)}" if values else "")
            edge["url"] = edge["sites"][0]
            edge["y2"] = y
            edges.append(edge)
            y += GRAPH_ROW
        y = max(y, first + GRAPH_ROW)  # a row for its name even without an edge
        last = y - GRAPH_ROW
        nodes.append(
            {
                "name": r["name"],
                "url": r["url"],
                "known": r["known"],
                "y": (first + last) // 2,
                "y_first": first,
                "y_last": last,
            }
        )
        y += GRAPH_GAP
    height = max(y - GRAPH_ROW - GRAPH_GAP + 12, 32)
    for edge in edges:
        edge["y1"] = height // 2
    x1 = 8 + round(len(flag) * NAME_CHAR) + 10
    xm = x1 + 100
    x2 = xm + 12 + round(max((len(e["label"]) for e in edges), default=0) * LABEL_CHAR)
    longest = max((len(n["name"]) + (0 if n["known"] else 30) for n in nodes), default=0)
    width = x2 + 12 + round(longest * NAME_CHAR) + 8
    return {
        "width": width,
        "height": height,
        "x1": x1,
        "xm": xm,
        "x2": x2,
        "nodes": nodes,
        "edges": edges,
    }


def choice_grid(
    history: list[dict[str, Any]], choices: list[Any] | None, marks: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The choice list at each version where the flag exists, replayed from the history's
    choices changes (each carries the whole list before and after); consecutive versions
    with the same list share a column."""
    changes = {c["version"]: c for c in history if c["field"] == "choices"}
    if choices is None and not changes:
        return None
    first = next(iter(changes.values()), None)
    current = first["from"] if first is not None else choices
    columns: list[dict[str, Any]] = []
    lists: list[tuple[str, ...]] = []
    for mark in marks:
        if mark["version"] in changes:
            current = changes[mark["version"]]["to"]
        if mark["url"] is None:
            continue
        key = tuple(str(v) for v in current or [])
        if lists and key == lists[-1] and columns[-1]["open"]:
            columns[-1]["until"] = mark["version"]
            continue
        columns.append(
            {"version": mark["version"], "until": mark["version"], "url": mark["url"], "open": True}
        )
        lists.append(key)
    for column in columns:
        column.pop("open")
    values = list(dict.fromkeys(v for key in lists for v in key))
    rows = [{"value": v, "cells": [v in key for key in lists]} for v in values]
    return {"columns": columns, "rows": rows}
