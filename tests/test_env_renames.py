"""Environment variables across versions: a default that only changed its spelling is no
change, a name that became a deprecated name of another variable is renamed (not removed),
and a deprecated name's page redirects to the variable that still reads it. Synthetic rows
written through the schema models."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from kb.diff import read_as
from kb.schema import dumps
from tests.planted_kb import add_env_vars, build_kb

EMPTY: dict[str, Any] = {"flags": [], "constraints": [], "enums": {}}


def var(name: str, type_: str | None, default: Any, declared: bool, **kw: Any) -> dict[str, Any]:
    path = "pkg/environ.py" if declared else "pkg/worker.py"
    return {
        "name": name,
        "type": type_,
        "default": dumps(default) if default is not None else None,
        "declared": declared,
        "path": path,
        "line": 5,
        "end_line": 5,
        **kw,
    }


# v1: read directly with string defaults; v2: declared in environ.py with typed ones.
V1 = [
    var("WIDGET_TRACE", "bool", "false", False),  # get_bool_env_var(..., "false")
    var("WIDGET_FAST", "bool", "true", False),
    var("WIDGET_PAD", "int", "0", False),
    var("WIDGET_RATE", "float", 0, False),
    var("WIDGET_QUIET", None, "", False),  # an untyped read
    var("WIDGET_LOUD", "bool", "false", False),  # really flips
    var("WIDGET_BLOCK_MB", "int", "16", False),  # really changes
    var("WIDGET_PROFILE_OPS", "int", "0", False),  # becomes a deprecated name
]
V2 = [
    var("WIDGET_TRACE", "bool", False, True),
    var("WIDGET_FAST", "bool", True, True),
    var("WIDGET_PAD", "bool", False, True),  # now read as a bool: "0" is still off
    var("WIDGET_RATE", "float", "0", False),
    var("WIDGET_QUIET", "bool", False, True),
    var("WIDGET_LOUD", "bool", True, True),
    var("WIDGET_BLOCK_MB", "int", 32, True),
    var("WIDGET_NVTX_OPS", "bool", False, True, deprecated_names='["WIDGET_PROFILE_OPS"]'),
    var("WIDGET_NVTX_SCHED", "bool", False, True, deprecated_names='["WIDGET_NVTX"]'),
]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    path = tmp_path_factory.mktemp("envren") / "kb.db"
    url = build_kb(path, [("v1.0.0", EMPTY), ("v2.0.0", EMPTY)])
    add_env_vars(url, {"v1.0.0": V1, "v2.0.0": V2})
    return TestClient(create_app(url), follow_redirects=False)


def get(client: TestClient, url: str) -> Any:
    r = client.get(url)
    assert r.status_code == 200, (url, r.text[:300])
    return r.json()


def test_read_as() -> None:
    assert read_as("bool", "false") is False
    assert read_as("bool", "") is False
    assert read_as("bool", "1") is True
    assert read_as("bool", "Yes") is True
    assert read_as("bool", "maybe") == "maybe"  # refused: left as written
    assert read_as("int", " 16") == 16
    assert read_as("float", "0.5") == 0.5
    assert read_as("int", "unset") == "unset"
    assert read_as("str", "0") == "0"


def test_a_default_that_only_changed_its_spelling_is_no_change(client: TestClient) -> None:
    d = get(client, "/api/diff/v1.0.0/v2.0.0")
    defaults = {
        c["name"]: (c["from"], c["to"]) for c in d["env_changed"] if c["field"] == "default"
    }
    assert defaults == {"WIDGET_LOUD": ("false", True), "WIDGET_BLOCK_MB": ("16", 32)}
    fields = {(c["name"], c["field"]) for c in d["env_changed"]}
    # the move into environ.py and a new type are still reported
    assert ("WIDGET_TRACE", "declared") in fields
    assert ("WIDGET_PAD", "type") in fields
    page = client.get("/diff/v1.0.0...v2.0.0").text
    assert "now declared in environ.py" in page
    assert "default: <del>" in page  # WIDGET_LOUD's real change
    history = get(client, "/api/v/v2.0.0/env/WIDGET_TRACE")["history"]
    assert [(h["version"], h["field"]) for h in history] == [
        ("v1.0.0", "added"),
        ("v2.0.0", "declared"),
    ]


def test_a_name_that_became_a_deprecated_name_is_renamed(client: TestClient) -> None:
    d = get(client, "/api/diff/v1.0.0/v2.0.0")
    assert d["env_renamed"] == [{"from": "WIDGET_PROFILE_OPS", "to": "WIDGET_NVTX_OPS"}]
    assert "WIDGET_PROFILE_OPS" not in d["env_removed"]
    assert "WIDGET_NVTX_OPS" not in d["env_added"]
    assert "WIDGET_NVTX_SCHED" in d["env_added"]  # its old name was never a variable here
    assert d["summary"]["env_renamed"] == 1
    page = client.get("/diff/v1.0.0...v2.0.0").text
    assert 'id="env-renamed"' in page and "old name still read" in page
    # one history under either name, through the rename
    for url in ("/api/v/v1.0.0/env/WIDGET_PROFILE_OPS", "/api/v/v2.0.0/env/WIDGET_NVTX_OPS"):
        events = [
            (h["version"], h["field"], h["from"], h["to"]) for h in get(client, url)["history"]
        ]
        assert ("v2.0.0", "renamed", "WIDGET_PROFILE_OPS", "WIDGET_NVTX_OPS") in events, url
        assert ("v2.0.0", "type", "int", "bool") in events
        assert not any(e[1] in ("removed", "deprecated_names") for e in events)


@pytest.mark.parametrize("prefix", ["", "/api"])
def test_a_deprecated_name_redirects_to_its_variable(client: TestClient, prefix: str) -> None:
    r = client.get(f"{prefix}/v/v2.0.0/env/widget_nvtx?q=1")
    assert r.status_code == 307
    assert r.headers["location"] == f"{prefix}/v/v2.0.0/env/WIDGET_NVTX_SCHED?q=1&via=WIDGET_NVTX"
    assert client.get(f"{prefix}/v/v2.0.0/env/WIDGET_NVTX_SCHEDX").status_code == 404


def test_the_variable_page_says_it_was_reached_by_its_old_name(client: TestClient) -> None:
    r = client.get("/v/v2.0.0/env/WIDGET_NVTX", follow_redirects=True)
    assert r.status_code == 200
    assert "Reached by its deprecated name <code>WIDGET_NVTX</code>" in r.text
    # not on a plain visit, nor for a name the variable does not read
    assert "Reached by" not in client.get("/v/v2.0.0/env/WIDGET_NVTX_SCHED").text
    assert "Reached by" not in client.get("/v/v2.0.0/env/WIDGET_NVTX_SCHED?via=OTHER").text
