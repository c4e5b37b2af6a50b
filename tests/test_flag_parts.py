"""The flag page's arrangement: conditions in plain words, the values a condition tests,
grouping by effect and value, and the timeline replayed from the history."""

from __future__ import annotations

from typing import Any

import pytest

from app.views import flag_parts as parts
from kb.pyast import and_all

NAMES = {"moe_runner_backend": "--moe-runner-backend", "quantization": "--quantization"}


def test_plain_words_name_flags_and_spell_out_comparisons() -> None:
    path = [
        "self.moe_runner_backend == 'flashinfer_cutlass'",
        "not (self.quantization in ['fp8', None])",
        "self.tp_size > 1",
    ]
    assert parts.plain_condition(path, NAMES) == (
        "--moe-runner-backend is flashinfer_cutlass and --quantization is none of fp8, None"
        " and self.tp_size > 1"
    )
    assert parts.plain_condition(["not self.quantization"], NAMES) == "--quantization is off"
    assert parts.plain_condition(["self.quantization is None"], NAMES) == "--quantization is unset"
    assert parts.plain_condition(["get_bool_env_var('X')"], NAMES) == "environment X is true"
    assert parts.plain_condition(["a ==("], NAMES) == "a ==("  # unparsable stays as written


def test_plain_words_keep_the_grouping_of_an_or_inside_an_and() -> None:
    names = {**NAMES, "kv": "--kv"}
    either = "self.moe_runner_backend == 'a' or self.quantization == 'a'"
    # an `if (A or B):` with a nested `if C:`: the path's parts are ANDed
    assert parts.plain_condition([either, "self.kv not in ['x', 'y']"], names) == (
        "(--moe-runner-backend is a or --quantization is a) and --kv is none of x, y"
    )
    assert parts.plain_condition([either], names) == (
        "--moe-runner-backend is a or --quantization is a"
    )
    assert parts.plain_condition([f"self.kv and ({either})"], names) == (
        "--kv is on and (--moe-runner-backend is a or --quantization is a)"
    )
    assert parts.plain_condition([f"not (self.kv and ({either}))"], names) == (
        "not (--kv is on and (--moe-runner-backend is a or --quantization is a))"
    )
    assert parts.plain_condition(["a or b", "c ==("], names) == "(a or b) and c ==("
    assert parts.plain_condition(["a or f(", "c"], names) == "(a or f() and c"


def test_conditions_anded_as_python_keep_their_meaning() -> None:
    assert and_all(["a or b", "c"]) == "(a or b) and c"
    assert and_all(["a or b"]) == "a or b"
    assert and_all(["x if y else z", "not (a or b)", "a and b"]) == (
        "(x if y else z) and not (a or b) and a and b"
    )
    assert and_all([]) == ""


def test_tested_values_of_the_flag_only() -> None:
    dest = "moe_runner_backend"
    assert parts.tested_values(["self.moe_runner_backend in ['a', 'b']"], dest) == ["a", "b"]
    assert parts.tested_values(["not (self.moe_runner_backend == 'a')"], dest) == ["≠ a"]
    assert parts.tested_values(["self.moe_runner_backend not in ['a']"], dest) == ["≠ a"]
    assert parts.tested_values(["self.quantization == 'fp8'"], dest) == []


def test_groups_by_effect_then_value_in_choice_order() -> None:
    sites = [
        {"effect": "warns", "values": []},
        {"effect": "requires", "values": ["b"]},
        {"effect": "requires", "values": ["a"]},
        {"effect": "requires", "values": ["≠ a"]},
        {"effect": "requires", "values": ["a"]},
    ]
    groups = parts.constraint_groups(sites, "--x", ["a", "b"])
    assert [g["effect"] for g in groups] == ["requires", "warns"]
    req = groups[0]
    assert req["count"] == 4
    assert [(v["label"], v["sites"]) for v in req["values"]] == [
        ("When --x = a", [2, 4]),
        ("When --x = b", [1]),
        ("When --x ≠ a", [3]),
    ]
    assert groups[1]["values"][0]["label"] == "Other conditions"


def test_timeline_replays_history_with_links_only_where_the_flag_exists() -> None:
    history = [
        {"version": "v2", "field": "added", "from": None, "to": "--x"},
        {"version": "v3", "field": "choices", "from": ["a"], "to": ["a", "b"], "added": ["b"]},
        {"version": "v3", "field": "help", "from": "h", "to": "i"},
        {"version": "v5", "field": "removed", "from": "--x", "to": None},
    ]
    marks = parts.timeline(["v1", "v2", "v3", "v4", "v5"], history, "--x")
    assert [m["state"] for m in marks] == ["absent", "added", "choices", "present", "removed"]
    assert [m["url"] is not None for m in marks] == [False, True, True, True, False]
    assert marks[2]["title"] == "v3: choices +b; help text changed"


def test_timeline_ranges_break_where_presence_default_or_choices_change() -> None:
    names = [f"v{i}" for i in range(1, 41)]
    history = [
        {"version": "v3", "field": "added", "from": None, "to": "--x"},
        {"version": "v5", "field": "default", "from": 1, "to": 2},
        {"version": "v20", "field": "help", "from": "h", "to": "i"},
        {"version": "v30", "field": "choices", "from": ["a"], "to": ["a", "b"], "added": ["b"]},
        {"version": "v38", "field": "removed", "from": "--x", "to": None},
    ]
    marks = parts.timeline(names, history, "--x")
    t = parts.timeline_ranges(marks, history, 2, ["a", "b"], "v12")
    got = [(r["first"], r["last"], r["exists"], r["default"], r["choices"]) for r in t["ranges"]]
    # a help change starts no range; the values before the first change are its `from`
    assert got == [
        ("v1", "v2", False, "1", 1),
        ("v3", "v4", True, "1", 1),
        ("v5", "v29", True, "2", 1),
        ("v30", "v37", True, "2", 2),
        ("v38", "v40", False, "2", 2),
    ]
    assert [r["changes"] for r in t["ranges"]][1:4] == [
        ["added"],
        ["default 1 → 2"],
        ["choices +b"],
    ]
    assert [r["url"] for r in t["ranges"]][:3] == [None, "/v/v3/flags/--x", "/v/v5/flags/--x"]
    # shades flip where the default (lane 2) and the choices (lane 3) change
    assert [(r["shade"], r["cshade"]) for r in t["ranges"]][1:4] == [(0, 0), (1, 0), (1, 1)]
    assert t["here"] == {"x": 11 * 100 / 40, "w": 100 / 40}
    assert sum(r["w"] for r in t["ranges"]) == pytest.approx(100)
    # names of no release series
    assert t["axis"] == [{"label": "Other", "text": "Other", "x": 0, "w": 100}]
    series = ["v0.4.1", "v0.4.2", "v0.5.0", "snapshot-2026-01-01"]
    axis = parts.timeline_ranges(parts.timeline(series, [], "--x"), [], 1, None, "v0.5.0")["axis"]
    assert [(a["label"], a["text"], a["x"], a["w"]) for a in axis] == [
        ("v0.4", "v0.4", 0, 50),
        ("v0.5", "v0.5", 50, 25),
        ("Snapshots", "2026", 75, 25),
    ]


def test_choice_grid_one_column_per_run_of_equal_lists() -> None:
    history = [
        {"version": "v2", "field": "added", "from": None, "to": "--x"},
        {"version": "v4", "field": "choices", "from": ["a"], "to": ["a", "b"], "added": ["b"]},
    ]
    marks = parts.timeline(["v1", "v2", "v3", "v4", "v5"], history, "--x")
    grid = parts.choice_grid(history, ["a", "b"], marks)
    assert grid is not None
    cols = [(c["version"], c["until"]) for c in grid["columns"]]
    assert cols == [("v2", "v3"), ("v4", "v5")]
    assert [(r["value"], r["cells"]) for r in grid["rows"]] == [
        ("a", [True, True]),
        ("b", [False, True]),
    ]
    assert parts.choice_grid(history[:1], None, marks) is None


def _site(kind: str, flags: list[str], values: list[str], line: int) -> dict[str, Any]:
    return {
        "kind": kind,
        "flags": flags,
        "affects": [],
        "values": values,
        "source": {"permalink": f"/v/x/source/server_args.py#L{line}"},
    }


def test_constraint_graph_gives_each_edge_a_row_and_every_site() -> None:
    related = [
        {"name": "--page-size", "url": "/p", "known": True},
        {"name": "--tp-size", "url": "/t", "known": False},
    ]
    sites = [
        _site("raise", ["--attention-backend", "--page-size"], ["fa3"], 10),
        _site("override", ["--attention-backend"], ["fa4"], 20) | {"affects": ["--page-size"]},
        _site("raise", ["--attention-backend", "--page-size"], ["fa4"], 30),
        _site("warning", ["--tp-size"], [], 40),
    ]
    g = parts.constraint_graph(sites, "--attention-backend", related)
    labels = [(e["flag"], e["label"], e["sites"]) for e in g["edges"]]
    assert labels == [
        (
            "--page-size",
            "raise ×2 when fa3, fa4",
            ["/v/x/source/server_args.py#L10", "/v/x/source/server_args.py#L30"],
        ),
        ("--page-size", "override when fa4", ["/v/x/source/server_args.py#L20"]),
        ("--tp-size", "warning", ["/v/x/source/server_args.py#L40"]),
    ]
    assert [e["url"] for e in g["edges"]] == [s[2][0] for s in labels]
    # One row per edge, a wider gap between flags; a flag's name sits between its rows.
    ys = [e["y2"] for e in g["edges"]]
    assert ys[1] - ys[0] == parts.GRAPH_ROW
    assert ys[2] - ys[1] == parts.GRAPH_ROW + parts.GRAPH_GAP
    page, tp = g["nodes"]
    assert (page["y_first"], page["y_last"]) == (ys[0], ys[1]) and page["y"] == sum(ys[:2]) // 2
    assert tp["y"] == ys[2]
    # The straight part is long enough for the longest label; the names come after it.
    longest = max(len(e["label"]) for e in g["edges"])
    assert g["x2"] - g["xm"] >= longest * 7
    assert g["width"] > g["x2"] + len("--tp-size") * 7
    assert all(e["y1"] == g["height"] // 2 for e in g["edges"])


def test_timeline_titles_show_values_as_the_history_list_does() -> None:
    # Were Python reprs: "aliases [] → ['--model']", "action None → 'DeprecatedAction'".
    history = [
        {"version": "v1", "field": "added", "from": None, "to": "--x"},
        {"version": "v2", "field": "aliases", "from": [], "to": ["--y"], "added": ["--y"]},
        {"version": "v3", "field": "action", "from": None, "to": "DeprecatedAction"},
        {"version": "v3", "field": "default", "from": False, "to": None},
    ]
    marks = parts.timeline(["v1", "v2", "v3"], history, "--x")
    assert marks[1]["title"] == "v2: aliases +--y"
    assert marks[2]["title"] == 'v3: action null → "DeprecatedAction"; default false → null'
