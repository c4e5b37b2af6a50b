"""Explain's bounds: what it refuses with a 4xx naming the problem instead of answering a 500
(a deep or huge config.json, NUL, lone surrogates, commands past the size caps), on SQLite and
PostgreSQL; and its answers computed once per question and state of the knowledge base."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dashboard_kb import build_kb, dashboard_client
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import app.views.explain as view
from app.main import create_app
from cli import cli
from kb.explain import MAX_COMMAND, MAX_WORDS
from kb.profile import MAX_CONFIG_DEPTH, MAX_CONFIG_TEXT, MAX_CONFIG_VALUES
from tests.pg import BACKENDS

DEEP = f"config.json nests deeper than {MAX_CONFIG_DEPTH} levels"


@pytest.fixture(scope="module", params=BACKENDS)
def client(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    return dashboard_client(request.param, tmp_path_factory.mktemp("kb"), "bounds")


@pytest.fixture(scope="module")
def sqlite_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_kb(tmp_path_factory.mktemp("kb") / "kb.db")


def nested(lists: int) -> str:
    """A config.json whose "a" holds `lists` nested lists: lists + 1 levels deep."""
    return '{"a": ' + "[" * lists + "]" * lists + "}"


def error(response: Any, status: int, kind: str) -> str:
    assert response.status_code == status, response.text[:300]
    body = response.json()
    assert body["kind"] == kind
    return str(body["detail"])


# --- the profile's config.json ---------------------------------------------------------------


# Past our bound; past pydantic's serializer (~254 levels: the 500 of the echoed profile); past
# the json parser's recursion limit (the RecursionError).
@pytest.mark.parametrize("lists", [MAX_CONFIG_DEPTH, 300, 5000])
def test_a_deeply_nested_config_is_a_400_everywhere(client: TestClient, lists: int) -> None:
    text = nested(lists)
    pasted = client.post("/api/explain", json={"command": "--tp 2", "profile": {"config": text}})
    assert error(pasted, 400, "profile") == DEEP
    if lists < 900:  # deeper, FastAPI's parser refuses the body itself (a 400 too)
        body = '{"command": "--tp 2", "profile": {"config": ' + text + "}}"
        posted = client.post(
            "/api/explain", content=body, headers={"content-type": "application/json"}
        )
        assert error(posted, 400, "profile") == DEEP
    query = {"command": "--tp 2", "config": text}
    if len(text) <= MAX_CONFIG_TEXT:
        assert error(client.get("/api/explain", params=query), 400, "profile") == DEEP
    else:  # too long for a URL's config: refused as a parameter before it is parsed
        error(client.get("/api/explain", params=query), 400, "parameter")
    page = client.get("/explain", params=query)
    assert page.status_code == 400 and DEEP in page.text


def test_a_config_at_the_bounds_is_taken(client: TestClient) -> None:
    text = nested(MAX_CONFIG_DEPTH - 1)
    answer = client.post("/api/explain", json={"command": "--tp 2", "profile": {"config": text}})
    assert answer.status_code == 200
    assert answer.json()["profile"]["config"] == json.loads(text)
    many = {"a": [0] * (MAX_CONFIG_VALUES - 2)}  # with the object and the list: the bound
    body = {"command": "--tp 2", "profile": {"config": many}}
    assert client.post("/api/explain", json=body).status_code == 200
    many["a"].append(0)
    detail = error(client.post("/api/explain", json=body), 400, "profile")
    assert detail == f"config.json holds more than {MAX_CONFIG_VALUES:,} values"


def test_lone_surrogates_in_a_config_are_a_400(client: TestClient) -> None:
    for config in ('{"a": "\\ud800"}', '{"\\udfff": 1}', '{"a": ["x", "\\ud800"]}'):
        for profile in ('"' + config.replace("\\", "\\\\").replace('"', '\\"') + '"', config):
            body = '{"command": "--tp 2", "profile": {"config": ' + profile + "}}"
            response = client.post(
                "/api/explain", content=body, headers={"content-type": "application/json"}
            )
            assert "not valid Unicode" in error(response, 400, "profile"), body


def test_cli_refuses_a_deep_config_file(sqlite_db: Path, tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    for text in (nested(MAX_CONFIG_DEPTH), nested(5000)):
        config.write_text(text)
        args = ["explain", "--db", str(sqlite_db), "--config", str(config), "--", "--tp", "2"]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2 and f"Unusable profile: {DEEP}" in result.output
    deep_json = json.dumps({"config": "x"}).replace('"x"', "[" * 5000 + "]" * 5000)
    args = ["explain", "--db", str(sqlite_db), "--profile", deep_json, "--", "--tp", "2"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "--profile nests too deeply" in result.output


# --- the command --------------------------------------------------------------------------------


def test_a_lone_surrogate_in_the_command_is_a_400(client: TestClient) -> None:
    for command in ("--tp \\ud800", "--t\\udfffp 1"):
        response = client.post(
            "/api/explain",
            content=b'{"command": "' + command.encode() + b'"}',
            headers={"content-type": "application/json"},
        )
        assert "lone surrogate" in error(response, 400, "command")
    # a query string's bytes are decoded as UTF-8 with replacements: no surrogate gets through
    assert client.get("/api/explain?command=--tp%20%ED%A0%80").status_code == 200
    assert client.get("/explain?command=--tp%20%ED%A0%80").status_code == 200


def test_nul_in_the_command_is_a_400(client: TestClient) -> None:
    """PostgreSQL cannot take NUL in a text parameter (the flag lookups were a 500 there)."""
    for body in ({"command": "--t\x00p 1"}, {"command": "X\x00=1 python -m x --tp 1"}):
        response = client.post("/api/explain", json=body)
        assert error(response, 400, "command") == "The command contains a NUL character."
    # in a query string, the app's outer limits answer first
    assert client.get("/api/explain?command=--t%00p").status_code == 400


def test_nul_in_any_path_parameter_is_never_a_5xx(client: TestClient) -> None:
    """Every route with a path parameter, each parameter holding NUL (where a name cannot
    hold it, the URL names nothing)."""
    routes = {
        route.path
        for top in client.app.routes  # type: ignore[attr-defined]
        for route in getattr(getattr(top, "original_router", None), "routes", [top])
        if "{" in getattr(route, "path", "")
    }
    assert len(routes) > 20
    for path in sorted(routes):
        for fill in ("%00", "v0.3.0%00", "a%00b"):
            url = "/".join(fill if part.startswith("{") else part for part in path.split("/"))
            status = client.get(url).status_code
            assert status in (400, 404), (url, status)


def test_the_size_caps_name_their_limit_and_cost_no_explain(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_explain(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("a refused command must not be explained")

    monkeypatch.setattr(view, "explain", no_explain)
    long = " ".join(["--tp 1"] * 3990)  # 27,929 characters
    detail = error(client.post("/api/explain", json={"command": long}), 413, "command")
    assert detail == f"The command is longer than {MAX_COMMAND:,} characters."
    wordy = " ".join(["--tp 1"] * 2857)  # 19,998 characters, 5,714 words
    detail = error(client.post("/api/explain", json={"command": wordy}), 413, "command")
    assert detail == (
        f"The command has 5,714 words after the launcher; at most {MAX_WORDS} (flags and "
        "their values) are explained."
    )
    assert error(client.get("/api/explain", params={"command": wordy}), 413, "command")
    page = client.get("/explain", params={"command": wordy})
    assert page.status_code == 413 and f"at most {MAX_WORDS}" in page.text
    # the launcher and env assignments are not counted
    at_cap = "A=1 python -m sglang.launch_server " + " ".join(["--tp 1"] * (MAX_WORDS // 2))
    monkeypatch.undo()
    assert client.post("/api/explain", json={"command": at_cap}).status_code == 200


def test_the_api_description_names_the_limits(client: TestClient) -> None:
    post = client.get("/api/openapi.json").json()["paths"]["/api/explain"]["post"]
    assert f"{MAX_COMMAND:,} characters or {MAX_WORDS} words" in post["description"]
    assert f"more than {MAX_WORDS} words" in post["responses"]["413"]["description"]
    assert "NUL" in post["responses"]["400"]["description"]


# --- the answer cache ---------------------------------------------------------------------------


def spy_explain(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = view.explain

    def counted(session: Any, version: Any, command: str, *args: Any) -> Any:
        calls.append(command)
        return real(session, version, command, *args)

    monkeypatch.setattr(view, "explain", counted)
    return calls


def test_an_answer_is_computed_once_per_question(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = spy_explain(monkeypatch)
    command = "--model-path m --tp-size 2 --cache-test-1"
    post = client.post("/api/explain", json={"command": command})
    assert post.status_code == 200 and len(calls) == 1
    # the same question asked every other way (trailing blanks change nothing)
    again = [
        client.post("/api/explain", json={"command": command + " \n"}),
        client.post("/api/explain", json={"command": command, "version": None}),
        client.get("/api/explain", params={"command": command}),
        client.get("/api/explain", params={"command": command, "version": ""}),
        client.get("/explain", params={"command": command}),
        client.get("/explain", params={"command": command}, headers={"HX-Request": "true"}),
    ]
    assert [r.status_code for r in again] == [200] * 6 and len(calls) == 1
    assert again[0].content == again[2].content == post.content
    assert again[2].headers["content-type"] == "application/json"
    # another question is another answer; the profile as parsed (`sm90` is sm 90)
    profiled = {"command": command, "profile": {"gpus": 8, "sm": 90}}
    assert client.post("/api/explain", json=profiled).status_code == 200
    assert client.post("/api/explain", json={**profiled, "compare": "v0.1.0"}).status_code == 200
    query = {"command": command, "gpus": "8", "sm": "sm90"}
    assert client.get("/api/explain", params=query).status_code == 200
    assert client.post("/api/explain", json={"command": command, "version": "v0.3.0"}).is_success
    assert len(calls) == 4
    # a new state of the knowledge base (an ingest) asks again
    monkeypatch.setattr(view, "kb_state", lambda _request: "after an ingest")
    assert client.post("/api/explain", json={"command": command}).content == post.content
    assert len(calls) == 5


def test_a_page_is_rendered_once_per_url(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A permalink names its question whole: its bytes are kept by URL (app/respcache.py)."""
    rendered: list[str] = []
    real = view.render

    def counted(request: Any, name: str, context: dict[str, Any], **kw: Any) -> Any:
        rendered.append(name)
        return real(request, name, context, **kw)

    monkeypatch.setattr(view, "render", counted)
    params = {"command": "--model-path m --cache-test-2"}
    first = client.get("/explain", params=params)
    second = client.get("/explain", params=params)
    assert len(rendered) == 1
    assert (second.status_code, second.content) == (200, first.content)
    for header in ("content-type", "vary"):
        assert second.headers[header] == first.headers[header]
    fragment = client.get("/explain", params=params, headers={"HX-Request": "true"})
    assert len(rendered) == 2 and fragment.content != first.content
    # an error page is rendered each time (it costs no explain)
    for _ in range(2):
        assert client.get("/explain", params={**params, "version": "v9"}).status_code == 404
    assert len(rendered) == 4


def test_the_cache_is_bounded_by_bytes(sqlite_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(view, "CACHE_BYTES", 48_000)  # four answers of ~11 KB
    client = TestClient(create_app(f"sqlite:///{sqlite_db}"))
    calls = spy_explain(monkeypatch)
    commands = [f"--model-path m --tp-size {n}" for n in range(1, 9)]
    for command in commands:
        assert client.post("/api/explain", json={"command": command}).status_code == 200
    cache = client.app.state.explain_cache  # type: ignore[attr-defined]
    assert 0 < cache.bytes <= 48_000 and len(cache.items) < len(commands)
    client.post("/api/explain", json={"command": commands[-1]})
    assert len(calls) == len(commands)  # the newest is kept
    client.post("/api/explain", json={"command": commands[0]})
    assert len(calls) == len(commands) + 1  # the oldest was dropped: computed again
