"""Renames in the version diff and in histories, on a small planted knowledge base (synthetic
names modelled on real shapes): history rows link the name the flag or variable had at that
version, a diff back in time shows renames turned around, a swap of the primary spelling is
not a rename, and an override that writes a new value under the same condition is one change.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from planted_kb import add_env_vars, build_kb, flag

from app.main import create_app
from kb.schema import dumps

MEM = "ServerArgs._handle_memory"
COND = {"condition": "self.mem < 20", "conditions": '["self.mem < 20"]', "flags": ["--mem"]}


def override(value: str, line: int) -> tuple[Any, ...]:
    writes = dumps({"graph_max_bs": value})
    return ("k-bs-" + value, "override", MEM, "", line, {**COND, "writes": writes})


V1 = {
    "flags": [
        flag("--widget-addr", help="Where widgets meet."),
        flag("--par-size", aliases=["--ps"], type="int"),
        flag("--batch-cap", type="int"),
        flag("--mem", type="int"),
    ],
    "constraints": [override("16", 10)],
    "enums": {},
}
V2 = {
    "flags": [
        flag("--widget-addr", help="Where the widgets meet."),  # a change before the rename
        flag("--par-size", aliases=["--ps"], type="int"),
        flag("--batch-cap", type="int"),
        flag("--mem", type="int"),
    ],
    "constraints": [override("24", 12)],  # same condition, a new value
    "enums": {},
}
V3 = {
    "flags": [
        # renamed, and given one more spelling besides the old name
        flag(
            "--meet-addr", aliases=["--widget-addr", "--rendezvous"], help="Where the widgets meet."
        ),
        flag("--ps", dest="par_size", aliases=["--par-size"], type="int"),  # primary swapped
        flag("--batch-cap", type="int", deprecated=True, replacement="--batch-cap-decode"),
        flag("--batch-cap-decode", type="int"),
        flag("--mem", type="int"),
    ],
    "constraints": [override("24", 12)],
    "enums": {},
}


def var(name: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, "type": "bool", "declared": True, "path": "pkg/environ.py"} | {
        "line": 5,
        "end_line": 5,
        **kw,
    }


ENV = {
    "v1": [var("WIDGET_NSA_TOPK", default=dumps(False))],
    "v2": [var("WIDGET_NSA_TOPK", default=dumps(True))],  # a change before the rename
    "v3": [var("WIDGET_DSA_TOPK", default=dumps(True), deprecated_names='["WIDGET_NSA_TOPK"]')],
}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    path = tmp_path_factory.mktemp("renames") / "kb.db"
    url = build_kb(path, [("v1", V1), ("v2", V2), ("v3", V3)])
    add_env_vars(url, ENV)
    return TestClient(create_app(url), follow_redirects=False)


def get(client: TestClient, url: str) -> Any:
    r = client.get(url)
    assert r.status_code == 200, (url, r.text[:300])
    return r.json()


def history_links(client: TestClient, url: str, kind: str) -> list[str]:
    html = client.get(url).text
    section = html[html.index('id="history"') :]
    return re.findall(rf'href="(/v/[^"]+/{kind}/[^"#]+)"', section)


@pytest.mark.parametrize(
    ("page", "kind", "old_link"),
    [
        ("/v/v3/flags/--meet-addr", "flags", "/v/v2/flags/--widget-addr"),
        ("/v/v3/env/WIDGET_DSA_TOPK", "env", "/v/v2/env/WIDGET_NSA_TOPK"),
    ],
)
def test_history_rows_link_the_name_at_their_version(
    client: TestClient, page: str, kind: str, old_link: str
) -> None:
    links = history_links(client, page, kind)
    assert old_link in links  # the change at v2, made before the rename at v3
    for link in links:
        assert client.get(link).status_code == 200, link


def test_history_json_says_the_name_at_each_version(client: TestClient) -> None:
    history = get(client, "/api/v/v3/flags/--meet-addr")["history"]
    names = {(h["version"], h["field"]): h.get("name") for h in history}
    assert names[("v1", "added")] == "--widget-addr"
    assert names[("v2", "help")] == "--widget-addr"
    assert names[("v3", "renamed")] == "--meet-addr"
    env = get(client, "/api/v/v3/env/WIDGET_DSA_TOPK")["history"]
    assert [(h["version"], h["field"], h["name"]) for h in env] == [
        ("v1", "added", "WIDGET_NSA_TOPK"),
        ("v2", "default", "WIDGET_NSA_TOPK"),
        ("v3", "renamed", "WIDGET_DSA_TOPK"),
    ]


def test_a_backwards_diff_shows_the_renames_turned_around(client: TestClient) -> None:
    fwd, back = get(client, "/api/diff/v2/v3"), get(client, "/api/diff/v3/v2")
    pairs = {(r["from"], r["to"], r["via"]) for r in fwd["renamed"]}
    assert pairs == {
        ("--widget-addr", "--meet-addr", "alias"),
        ("--batch-cap", "--batch-cap-decode", "deprecated"),
    }
    assert {(r["from"], r["to"], r["via"]) for r in back["renamed"]} == {
        (b, a, via) for a, b, via in pairs
    }
    assert back["summary"]["renamed"] == fwd["summary"]["renamed"] == 2
    # not an added and a removed flag
    assert "--batch-cap-decode" not in back["removed"] and back["removed"] == []
    assert back["added"] == fwd["removed"] == []
    page = client.get("/diff/v3...v2").text
    assert page.count("undoing a later deprecation") == 1
    assert page.count("undoing a later rename (the option became an alias)") == 1


def test_a_swap_of_the_primary_spelling_is_not_a_rename(client: TestClient) -> None:
    for a, b in (("v2", "v3"), ("v3", "v2")):
        d = get(client, f"/api/diff/{a}/{b}")
        assert "--ps" not in {r["to"] for r in d["renamed"]} | {r["from"] for r in d["renamed"]}
        (swap,) = d["respelled"]
        assert {swap["from"], swap["to"]} == {"--par-size", "--ps"}
        assert swap["via"] == "primary" and swap["dest"] == "par_size"
        assert d["summary"]["respelled"] == 1 and d["summary"]["renamed"] == 2
        assert "--ps" not in d["added"] and "--par-size" not in d["removed"]
    page = client.get("/diff/v2...v3").text
    section = page[page.index('id="respelled"') :]
    assert "/v/v2/flags/--par-size" in section and "/v/v3/flags/--ps" in section


def test_an_override_with_a_new_value_is_one_change(client: TestClient) -> None:
    d = get(client, "/api/diff/v1/v2")
    assert d["constraints_added"] == [] and d["constraints_removed"] == []
    (change,) = d["constraints_value_changed"]
    assert change["writes"] == [{"dest": "graph_max_bs", "from": "16", "to": "24"}]
    assert change["from"]["source"]["line"] == 10 and change["to"]["source"]["line"] == 12
    assert d["summary"]["constraints_value_changed"] == 1
    back = get(client, "/api/diff/v2/v1")
    assert back["constraints_value_changed"][0]["writes"][0]["to"] == "16"
    page = client.get("/diff/v1...v2").text
    section = page[page.index('id="constraints-value-changed"') :]
    assert re.search(r"<del><code>16</code></del> → <ins><code>24</code></ins>", section)
    assert 'href="#constraints-value-changed"' in page


def test_same_condition_new_dests_stay_added_and_removed(tmp_path: Path) -> None:
    other = ("k-x", "override", MEM, "", 10, {**COND, "writes": dumps({"chunk": "8"})})
    url = build_kb(
        tmp_path / "kb.db",
        [
            ("v1", {**V1, "constraints": [override("16", 10)]}),
            ("v2", {**V1, "constraints": [other]}),
        ],
    )
    d = get(TestClient(create_app(url)), "/api/diff/v1/v2")
    assert d["constraints_value_changed"] == []
    assert len(d["constraints_added"]) == len(d["constraints_removed"]) == 1


def test_history_calls_a_primary_spelling_swap_respelled(client: TestClient) -> None:
    history = get(client, "/api/v/v3/flags/--ps")["history"]
    assert [(h["version"], h["field"], h.get("name")) for h in history][:2] == [
        ("v1", "added", "--par-size"),
        ("v3", "respelled", "--ps"),
    ]
    assert not any(h["field"] == "renamed" for h in history)
    page = client.get("/v/v3/flags/--ps").text
    assert "primary spelling <code>--par-size</code> → <code>--ps</code>" in page
    assert 'href="/v/v3/flags/--ps"' in page[page.index('id="timeline"') :]


def action_warning(old: str) -> tuple[Any, ...]:
    """What an argparse action class's `__call__` warns: no condition, no writes; every
    such site has the same kind and function, only its flag tells them apart."""
    message = f"'{old}' is deprecated and will be removed in a future release."
    extra = {"condition": "", "conditions": "[]", "flags": [old]}
    return ("k-" + old, "warning", "DeprecatedStoreTrueAction.__call__", message, 64, extra)


def test_one_flags_action_warning_is_no_new_value_of_anothers(tmp_path: Path) -> None:
    both = [flag("--old-a", action="store_true"), flag("--old-b", action="store_true")]
    url = build_kb(
        tmp_path / "kb.db",
        [
            ("v1", {"flags": both, "constraints": [action_warning("--old-a")], "enums": {}}),
            ("v2", {"flags": both, "constraints": [action_warning("--old-b")], "enums": {}}),
        ],
    )
    d = get(TestClient(create_app(url)), "/api/diff/v1/v2")
    assert d["constraints_value_changed"] == []
    assert [s["flags"] for s in d["constraints_added"]] == [["--old-b"]]
    assert [s["flags"] for s in d["constraints_removed"]] == [["--old-a"]]


def test_a_replacement_with_a_value_is_a_rename_a_pair_in_braces_is_not(tmp_path: Path) -> None:
    old = {"flags": [flag("--fuse"), flag("--graph")], "constraints": [], "enums": {}}
    new = {
        "flags": [
            flag("--fuse", deprecated=True, replacement="--fuse-backend=auto"),
            flag("--fuse-backend", choices=["auto", "off"]),
            flag("--graph", deprecated=True, replacement="--graph-{decode,prefill}=off"),
            flag("--graph-decode"),
            flag("--graph-prefill"),
        ],
        "constraints": [],
        "enums": {},
    }
    url = build_kb(tmp_path / "kb.db", [("v1", old), ("v2", new)])
    client = TestClient(create_app(url))
    forward = get(client, "/api/diff/v1/v2")
    assert [(r["from"], r["to"], r["via"]) for r in forward["renamed"]] == [
        ("--fuse", "--fuse-backend", "deprecated")
    ]
    assert sorted(f["name"] for f in forward["added_flags"]) == [
        "--graph-decode",
        "--graph-prefill",
    ]
    backward = get(client, "/api/diff/v2/v1")
    assert [(r["from"], r["to"]) for r in backward["renamed"]] == [("--fuse-backend", "--fuse")]


def test_a_flag_replaced_by_a_value_of_another_does_not_lend_it_its_history(
    tmp_path: Path,
) -> None:
    old = {"flags": [flag("--enable-fast-graph"), flag("--graph")], "constraints": [], "enums": {}}
    new = {
        "flags": [
            flag("--enable-fast-graph", deprecated=True, replacement="--graph-backend=fast"),
            flag("--graph-backend", choices=["full", "fast"]),
            flag("--graph", deprecated=True, replacement="--graph-mode"),
            flag("--graph-mode"),
        ],
        "constraints": [],
        "enums": {},
    }
    client = TestClient(create_app(build_kb(tmp_path / "kb.db", [("v1", old), ("v2", new)])))
    renamed = get(client, "/api/diff/v1/v2")["renamed"]
    assert [(r["from"], r["to"], r.get("value")) for r in renamed] == [
        ("--enable-fast-graph", "--graph-backend", "fast"),
        ("--graph", "--graph-mode", None),
    ]
    assert "<code>=fast</code>" in client.get("/diff/v1...v2").text
    # a value's spelling is no earlier name of the flag; a plain replacement is
    history = get(client, "/api/v/v2/flags/--graph-backend")["history"]
    assert [(h["version"], h["field"]) for h in history] == [("v2", "added")]
    history = get(client, "/api/v/v2/flags/--graph-mode")["history"]
    assert [(h["version"], h["field"]) for h in history][:2] == [("v1", "added"), ("v2", "renamed")]


def test_a_renamed_flag_reports_its_other_alias_changes(client: TestClient) -> None:
    changed = get(client, "/api/diff/v2/v3")["changed"]
    aliases = [c for c in changed if c["field"] == "aliases"]
    # the old name kept as an alias is the rename itself; the new spelling is a change
    assert [(c["name"], c["added"], c["removed"]) for c in aliases] == [
        ("--meet-addr", ["--rendezvous"], [])
    ]
    back = [c for c in get(client, "/api/diff/v3/v2")["changed"] if c["field"] == "aliases"]
    assert [(c["name"], c["added"], c["removed"]) for c in back] == [
        ("--widget-addr", [], ["--rendezvous"])
    ]
