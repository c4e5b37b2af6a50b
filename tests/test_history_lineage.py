"""A flag's history followed back through a deprecation, a split into two replacements, and an
open registry's known values, on a small planted knowledge base (synthetic names modelled on
real shapes: `--graph-cap` deprecated for `--graph-cap-decode`, `--slab` deprecated for
`--slab-{decode,prefill}`, `--draft-algo` whose choices gave way to a registry)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi.testclient import TestClient
from planted_kb import build_kb, flag

from app.main import create_app

ALGOS = ["ALPHA", "BETA"]

V1 = {
    "flags": [
        flag("--graph-cap", type="int", help="Largest graph batch."),
        flag("--slab", type="int"),
        flag("--draft-algo", choices=ALGOS),
    ],
    "constraints": [],
    "enums": {},
}
V2 = {
    "flags": [
        flag("--graph-cap", type="int", help="Largest captured graph batch."),
        flag("--slab", type="int", default=8),
        flag("--draft-algo", choices=ALGOS),
    ],
    "constraints": [],
    "enums": {},
}
V3 = {
    "flags": [
        flag(
            "--graph-cap",
            dest="graph_cap_decode",
            type="int",
            deprecated=True,
            replacement="--graph-cap-decode",
        ),
        flag("--graph-cap-decode", type="int"),
        flag("--slab", type="int", deprecated=True, replacement="--slab-{decode,prefill}"),
        flag("--slab-decode", type="int"),
        flag("--slab-prefill", type="int"),
        flag("--draft-algo", known_values=[*ALGOS, "GAMMA"]),  # choices opened to a registry
    ],
    "constraints": [],
    "enums": {},
}
V4 = {
    "flags": [
        flag("--graph-cap-decode", type="int"),
        flag("--slab-decode", type="int"),
        flag("--slab-prefill", type="int"),
        flag("--draft-algo", known_values=[*ALGOS, "GAMMA", "DELTA"]),
    ],
    "constraints": [],
    "enums": {},
}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    path = tmp_path_factory.mktemp("lineage") / "kb.db"
    url = build_kb(path, [("v1", V1), ("v2", V2), ("v3", V3), ("v4", V4)])
    return TestClient(create_app(url), follow_redirects=False)


def get(client: TestClient, url: str) -> Any:
    r = client.get(url)
    assert r.status_code == 200, (url, r.text[:300])
    return r.json()


def steps(history: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    return [(h["version"], h["field"], h.get("name")) for h in history]


def test_a_replacement_takes_the_deprecated_flags_history(client: TestClient) -> None:
    history = get(client, "/api/v/v4/flags/--graph-cap-decode")["history"]
    assert steps(history) == [
        ("v1", "added", "--graph-cap"),
        ("v2", "help", "--graph-cap"),
        ("v3", "renamed", "--graph-cap-decode"),
    ]
    renamed = history[-1]
    assert renamed["from"] == "--graph-cap" and renamed["at"] == "v3"  # its last version
    # the diff calls the same step a rename, so the two pages agree
    d = get(client, "/api/diff/v2/v3")
    assert {"from": "--graph-cap", "to": "--graph-cap-decode"}.items() <= d["renamed"][0].items()
    html = client.get("/v/v4/flags/--graph-cap-decode").text
    section = html[html.index('id="history"') :]
    assert 'href="/v/v3/flags/--graph-cap"' in section  # the old flag, where it last exists
    assert 'href="/v/v2/flags/--graph-cap"' in section  # its change before the rename


def test_each_half_of_a_split_links_the_flag_it_came_from(client: TestClient) -> None:
    for half, other in (("--slab-decode", "--slab-prefill"), ("--slab-prefill", "--slab-decode")):
        history = get(client, f"/api/v/v4/flags/{half}")["history"]
        # a new flag with a parent, not the parent's own history (its default change at v2)
        assert steps(history) == [("v3", "split", half)]
        assert history[0]["from"] == "--slab" and history[0]["siblings"] == [other]
        assert history[0]["at"] == "v3"
        html = client.get(f"/v/v4/flags/{half}").text
        section = html[html.index('id="history"') :]
        assert re.search(r'split</span> from <a href="/v/v3/flags/--slab"', section)
    # not a rename in the diff: neither half is the old flag
    assert get(client, "/api/diff/v2/v3")["renamed"][0]["to"] == "--graph-cap-decode"
    assert len(get(client, "/api/diff/v2/v3")["renamed"]) == 1


def test_choices_opened_to_a_registry_read_as_such(client: TestClient) -> None:
    history = get(client, "/api/v/v4/flags/--draft-algo")["history"]
    (opened,) = [h for h in history if h["version"] == "v3"]  # one change, not two
    assert opened["field"] == "choices" and opened["to"] is None
    assert opened["known"] == ["ALPHA", "BETA", "GAMMA"]
    (grown,) = [h for h in history if h["version"] == "v4"]
    assert grown["field"] == "known_values" and grown["added"] == ["DELTA"]
    html = client.get("/v/v4/flags/--draft-algo").text
    section = html[html.index('id="history"') :]
    assert "choices opened to any value" in section and "<code>GAMMA</code>" in section
    assert re.search(r"known values\s*<span class=\"chg add\">\+<code>DELTA</code>", section)
    d = get(client, "/api/diff/v2/v3")
    (change,) = [c for c in d["changed"] if c["name"] == "--draft-algo"]
    assert change["field"] == "choices" and change["known"] == ["ALPHA", "BETA", "GAMMA"]
    assert "opened to any value" in client.get("/diff/v2...v3").text
    (later,) = [c for c in get(client, "/api/diff/v3/v4")["changed"] if c["name"] == "--draft-algo"]
    assert later["field"] == "known_values" and later["added"] == ["DELTA"]
