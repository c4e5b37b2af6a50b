"""Version diff and flag history on a small knowledge base where every kind of change is
planted by hand through the schema models (names and texts are synthetic)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from planted_kb import build_kb, flag
from sqlmodel import Session, select

from kb.diff import (
    clause_root,
    condition_change,
    diff_versions,
    flag_history,
    group_condition_changes,
    word_diff,
)
from kb.schema import Version, make_engine

# Per version: flags, constraints (key, kind, function, message, line), enums.
V1 = {
    "flags": [
        flag("--alpha", type="str", default="a", choices=["x", "y"], help="Pick the alpha path"),
        flag("--beta", type="int", default=1),
        flag("--old-name", type="int"),
        flag("--tp", dest="tp_size", type="int", default=1),
        flag("--gone"),
        flag("--gamma", action="store_true", default=False),
        flag("--delta", choices=["p", "q"]),
        flag("--order", choices=["a", "b", "c"]),
        flag("--long-option", aliases=["--lo"]),
    ],
    "constraints": [
        ("k-moved", "raise", "check", "alpha needs beta", 10),
        ("k-removed", "assert", "check", "gone must be set", 20),
        ("", "override", "post_init", "", 30),  # no key: matched by kind+function+condition
        ("k-cond-1", "raise", "check", "beta too big", 60, {"condition": "beta > 1"}),
    ],
    "enums": {
        "Backend": [("A", "a"), ("B", "b")],
        "OldEnum": [("ONE", 1)],
        "Stable": [("S", "s")],
    },
}
V2 = {
    "flags": [
        flag(
            "--alpha", type="str", default="b", choices=["x", "z"], help="Pick the alpha path now"
        ),
        flag("--beta", type="float", default=1),
        flag("--new-name", type="int", aliases=["--old-name"]),
        flag("--tensor-parallel-size", dest="tp_size", type="int", default=1),
        flag("--fresh"),
        flag("--gamma", action="store_true", default=False, deprecated=True),
        flag("--delta", choices=["p", "q"], deprecated=True, replacement="--delta2"),
        flag("--delta2", choices=["p", "q"]),
        flag("--order", choices=["c", "a", "b"]),  # reordered only: not a change
        flag("--lo"),  # the alias became the option
    ],
    "constraints": [
        ("k-moved", "raise", "check", "alpha needs beta", 90),  # same site, moved lines
        ("k-added", "raise", "check", "fresh conflicts with beta", 40),
        ("", "override", "post_init", "", 70),
        ("k-cond-2", "raise", "check", "beta too big", 65, {"condition": "beta > 2 and gamma"}),
    ],
    "enums": {
        "Backend": [("A", "a"), ("C", "c")],
        "NewEnum": [("TWO", 2)],
        "Stable": [("S", "s")],
    },
}
V3 = {
    "flags": [
        flag("--beta", type="float", default=2),
        flag("--new-name", type="int", aliases=["--old-name"]),
    ],
    "constraints": [],
    "enums": {},
}


@pytest.fixture()
def planted(tmp_path: Path) -> str:
    return build_kb(tmp_path / "kb.db", [("v1", V1), ("v2", V2), ("v3", V3)])


def _diff(url: str, a: str, b: str) -> dict[str, Any]:
    engine = make_engine(url, readonly=True)
    with Session(engine) as session:
        va = session.exec(select(Version).where(Version.name == a)).one()
        vb = session.exec(select(Version).where(Version.name == b)).one()
        return diff_versions(session, va, vb)


def _changes(d: dict[str, Any], name: str) -> dict[str, dict[str, Any]]:
    return {c["field"]: c for c in d["changed"] if c["name"] == name}


def test_added_removed_and_renamed(planted: str) -> None:
    d = _diff(planted, "v1", "v2")
    assert d["added"] == ["--fresh"]
    assert d["removed"] == ["--gone"]
    renames = {(r["from"], r["to"], r["via"]) for r in d["renamed"]}
    assert renames == {
        ("--old-name", "--new-name", "alias"),
        ("--tp", "--tensor-parallel-size", "dest"),
        ("--delta", "--delta2", "deprecated"),
        ("--long-option", "--lo", "alias"),
    }
    assert d["summary"]["added"] == 1 and d["summary"]["renamed"] == 4


def test_field_changes(planted: str) -> None:
    d = _diff(planted, "v1", "v2")
    alpha = _changes(d, "--alpha")
    assert alpha["default"]["from"] == "a" and alpha["default"]["to"] == "b"
    assert alpha["choices"]["added"] == ["z"] and alpha["choices"]["removed"] == ["y"]
    assert alpha["help"]["words"] == [["=", "Pick the alpha path"], ["+", "now"]]
    assert _changes(d, "--beta")["type"] == {
        "name": "--beta",
        "field": "type",
        "from": "int",
        "to": "float",
    }
    gamma = _changes(d, "--gamma")
    assert gamma["deprecated"]["from"] is False and gamma["deprecated"]["to"] is True
    assert set(_changes(d, "--delta")) == {"deprecated"}
    # Unchanged flags are not reported (nor reordered choices), and a rename alone is not a
    # field change.
    assert not _changes(d, "--order")
    assert not _changes(d, "--new-name") and not _changes(d, "--tensor-parallel-size")


def test_constraints_matched_by_what_they_check_not_by_line(planted: str) -> None:
    d = _diff(planted, "v1", "v2")
    assert [c.message for c in d["constraints_added"]] == ["fresh conflicts with beta"]
    assert [c.message for c in d["constraints_removed"]] == ["gone must be set"]


def test_constraint_with_a_new_condition_is_one_change(planted: str) -> None:
    d = _diff(planted, "v1", "v2")
    ((old, new),) = d["constraints_changed"]
    assert (old.condition, new.condition) == ("beta > 1", "beta > 2 and gamma")
    assert d["summary"]["constraints_changed"] == 1
    assert "beta too big" not in {c.message for c in d["constraints_added"]}


def test_enums(planted: str) -> None:
    d = _diff(planted, "v1", "v2")
    assert [e.name for e in d["enums_added"]] == ["NewEnum"]
    assert [e.name for e in d["enums_removed"]] == ["OldEnum"]
    (backend,) = d["enums_changed"]
    assert backend["name"] == "Backend"
    assert backend["added"] == ["C"] and backend["removed"] == ["B"]


def test_reverse_order_mirrors(planted: str) -> None:
    fwd, back = _diff(planted, "v1", "v2"), _diff(planted, "v2", "v1")
    assert "--gone" in back["added"] and "--fresh" in back["removed"]
    assert [c.message for c in back["constraints_removed"]] == ["fresh conflicts with beta"]
    assert back["summary"]["constraints_added"] == fwd["summary"]["constraints_removed"]
    assert _changes(back, "--alpha")["default"]["to"] == "a"


def test_same_version_is_empty(planted: str) -> None:
    d = _diff(planted, "v2", "v2")
    assert not any(d[k] for k in ("added", "removed", "renamed", "changed", "constraints_added"))


def test_history_follows_a_flag_through_changes_and_removal(planted: str) -> None:
    engine = make_engine(planted, readonly=True)
    with Session(engine) as session:
        events = [(e["version"], e["field"]) for e in flag_history(session, "--alpha")]
        assert events[0] == ("v1", "added")
        assert ("v2", "default") in events and ("v2", "choices") in events
        assert events[-1] == ("v3", "removed")
        # A dest or bare name finds the same flag.
        assert flag_history(session, "alpha") == flag_history(session, "--alpha")
        beta = flag_history(session, "--beta")
        assert [(e["version"], e["field"], e["to"]) for e in beta] == [
            ("v1", "added", "--beta"),
            ("v2", "type", "float"),
            ("v3", "default", 2),
        ]
        assert flag_history(session, "--no-such-flag") == []


def test_history_follows_a_rename(planted: str) -> None:
    engine = make_engine(planted, readonly=True)
    with Session(engine) as session:
        events = flag_history(session, "--new-name")
    assert events[0] == {
        "version": "v1",
        "name": "--old-name",
        "field": "added",
        "from": None,
        "to": "--old-name",
    }
    renamed = {"version": "v2", "field": "renamed", "from": "--old-name", "to": "--new-name"}
    assert {**renamed, "name": "--new-name"} in events
    assert not any(e["field"] == "removed" for e in events)


def test_word_diff() -> None:
    assert word_diff("use the fast path", "use the slow path") == [
        ["=", "use the"],
        ["-", "fast"],
        ["+", "slow"],
        ["=", "path"],
    ]
    assert word_diff("", "new text") == [["+", "new text"]]


# --- pages and API --------------------------------------------------------------------------


@pytest.fixture()
def client(planted: str) -> Any:
    from fastapi.testclient import TestClient

    from app.main import create_app

    return TestClient(create_app(planted))


def test_api_diff_contract(client: Any) -> None:
    body = client.get("/api/diff/v1/v2").json()
    assert (body["from"], body["to"]) == ("v1", "v2")
    assert body["added"] == ["--fresh"] and body["removed"] == ["--gone"]
    change = next(c for c in body["changed"] if c["name"] == "--beta")
    assert {"name", "field", "from", "to"} <= set(change)
    (added,) = body["constraints_added"]
    assert added["message"] == "fresh conflicts with beta"
    assert added["source"]["line"] == 40 and added["source"]["permalink"].startswith("/v/v2/")
    assert body["constraints_removed"][0]["source"]["permalink"].startswith("/v/v1/")
    assert body["enums_changed"][0]["name"] == "Backend"
    (changed,) = body["constraints_changed"]
    assert changed["from"]["source"]["line"] == 60 and changed["to"]["source"]["line"] == 65
    assert ["+", "2 and gamma"] in changed["condition"]


def test_diff_page_links_both_versions(client: Any) -> None:
    html = client.get("/diff/v1...v2").text
    counts = re.sub(r"<[^>]+>", "", html.split('id="summary"')[1].split("</nav>")[0])
    assert "1 added" in counts and "1 removed" in counts and "4 renamed" in counts
    # each section's heading counts what it lists, as the summary does
    s = client.get("/api/diff/v1/v2").json()["summary"]
    flags = s["added"] + s["removed"] + s["renamed"] + s.get("respelled", 0) + s["changed"]
    assert f'<h2>Flags <span class="count">{flags}</span></h2>' in html and flags >= 6
    assert 'href="/v/v2/flags/--fresh"' in html and 'href="/v/v1/flags/--gone"' in html
    # A changed flag links to its page at both ends; a renamed one under each name.
    assert 'href="/v/v1/flags/--alpha"' in html and 'href="/v/v2/flags/--alpha"' in html
    assert 'href="/v/v1/flags/--old-name"' in html and 'href="/v/v2/flags/--new-name"' in html
    assert "<ins>now</ins>" in html  # help as a word diff
    assert 'href="/diff/v2...v1"' in html  # swap


def test_diff_any_order_and_pickers(client: Any) -> None:
    back = client.get("/diff/v3...v1")
    assert back.status_code == 200 and "Going back in time" in back.text
    r = client.get("/diff", params={"from": "v1", "to": "v3"}, follow_redirects=False)
    assert (r.status_code, r.headers["location"]) == (302, "/diff/v1...v3")
    r = client.get("/diff", follow_redirects=False)
    assert r.headers["location"] == "/diff/v2...v3"  # the two newest


def test_unknown_versions_are_404_with_suggestions(client: Any) -> None:
    r = client.get("/api/diff/v1/v22")
    assert r.status_code == 404
    assert {"name": "v2", "url": "/api/diff/v1/v2"} in r.json()["suggestions"]
    page = client.get("/diff/vv1...v2")
    assert page.status_code == 404 and 'href="/diff/v1...v2"' in page.text
    assert client.get("/diff/just-one-version").status_code == 404
    # GitHub's two-dot spelling goes to the permalink
    two = client.get("/diff/v1..v2", follow_redirects=False)
    assert (two.status_code, two.headers["location"]) == (308, "/diff/v1...v2")
    assert client.get("/diff/" + "x" * 5000 + "...v1").status_code == 404


def test_flag_page_history_uses_the_diff_comparison(client: Any) -> None:
    history = client.get("/api/v/v2/flags/--new-name").json()["history"]
    assert {
        "version": "v2",
        "field": "renamed",
        "from": "--old-name",
        "to": "--new-name",
        "name": "--new-name",  # its name at that version
    } in history


def test_ingested_three_era_kb(request: pytest.FixtureRequest) -> None:
    """Diffs over the KB ingested from the synthetic three-era repository."""
    try:
        db = request.getfixturevalue("kb_db")
    except pytest.FixtureLookupError:
        pytest.skip("tests/conftest.py has no kb_db fixture")
    from fastapi.testclient import TestClient

    from app.main import create_app

    client = TestClient(create_app(f"sqlite:///{db}"))
    d = client.get("/api/diff/v0.1.0/v0.2.0").json()
    # Era 1's --tensor-parallel-size had --tp-size as an alias, which era 2 made the option.
    rename = {
        "from": "--tensor-parallel-size",
        "to": "--tp-size",
        "via": "alias",
        "dest": "tp_size",
    }
    assert rename in d["renamed"]
    assert "--moe-runner-backend" in d["added"] and "--port" in d["removed"]
    assert any(
        c["kind"] == "raise" and "--moe-a2a-backend" in c["flags"] for c in d["constraints_added"]
    )
    d = client.get("/api/diff/v0.2.0/v0.3.0").json()
    tp = next(c for c in d["changed"] if c["name"] == "--tp-size" and c["field"] == "aliases")
    assert tp["added"] == ["--tp"]
    assert any("Speculative" in c["message"] for c in d["constraints_added"])
    assert "Fp4GemmRunnerBackend" in {e["name"] for e in d["enums_removed"]}
    back = client.get("/api/diff/v0.3.0/v0.1.0").json()
    assert back["summary"]["added"] >= 1 and back["from"] == "v0.3.0"


def test_clause_root_drops_the_outer_not_only() -> None:
    assert clause_root("not (arch in ['A'] and (not sparse(cfg)))") == (
        "arch in ['A'] and (not sparse(cfg))"
    )
    assert clause_root("not is_npu()") == "is_npu()"
    assert clause_root("  arch in  ['A']") == "arch in ['A']"
    assert clause_root("not (a) and b") == "not a and b"  # the `not` binds to `(a)` only
    assert clause_root("not (unbalanced") == "(unbalanced"  # not Python: text only


def test_condition_changes_grouped_by_root_cause() -> None:
    """One split `if`: the sites under it gain the model test, those in its `elif` branches
    gain it negated; an unrelated rewrite and a reworded site stay apart."""
    old_if = "arch in ['A'] and (not sparse(cfg))"
    changes = [
        condition_change([old_if, "x is None"], ["arch in ['A']", "not sparse(cfg)", "x is None"]),
        condition_change(
            [f"not ({old_if})", "arch in ['B']"], ["not (arch in ['A'])", "arch in ['B']"]
        ),
        condition_change(["topk > 1 and b != 'f'"], ["topk > 1 and b not in ['f', 'g']"]),
        condition_change([old_if, "y"], ["arch in ['A']", "not sparse(cfg)", "y"]),
        condition_change(["same"], ["same"]),
    ]
    assert changes[1] == {"gained": ["not (arch in ['A'])"], "lost": [f"not ({old_if})"]}
    groups = group_condition_changes(changes)
    assert groups == [
        {"change": "gained", "condition": "arch in ['A']", "items": [0, 1, 3]},
        {"change": "gained", "condition": "topk > 1 and b not in ['f', 'g']", "items": [2]},
        {"change": "reworded", "condition": "", "items": [4]},
    ]
    assert group_condition_changes([]) == []


def test_diff_summary_counts_condition_causes(planted: str) -> None:
    d = _diff(planted, "v1", "v2")
    assert d["summary"]["constraints_changed"] == 1 and d["summary"]["condition_groups"] == 1
