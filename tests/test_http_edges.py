"""HTTP at the edges: every reply carries the security headers (errors, redirects, the
limits' early replies and the 500 page too), redirects are relative and stay on this site,
`Vary` names every request header a body depends on, and the OpenAPI description answers at
/openapi.json as well as /api/openapi.json."""

from __future__ import annotations

from pathlib import Path

import pytest
from dashboard_kb import build_kb
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from app.main import SECURITY_HEADERS, create_app, slash_twin

PAGE = "/v/v0.3.0/flags/--moe-runner-backend"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_kb(tmp_path_factory.mktemp("kb") / "kb.db")


@pytest.fixture(scope="module")
def client(db: Path) -> TestClient:
    app = create_app(f"sqlite:///{db}")

    @app.get("/boom", include_in_schema=False)
    def boom() -> None:
        raise RuntimeError("a bug")

    return TestClient(app, follow_redirects=False, raise_server_exceptions=False)


# (method, URL, extra request arguments, the status it answers)
ERRORS = [
    ("GET", "/boom", {}, 500),
    ("GET", "/api/nothing-here", {}, 404),
    ("GET", "/nothing-here", {}, 404),
    ("GET", "/v/nope/flags", {}, 404),
    ("GET", "/api/v/nope/flags", {}, 404),
    ("GET", "/static/nope.css", {}, 404),
    ("DELETE", "/", {}, 405),
    ("GET", "/v/v0.3.0/flags?q=" + "a" * 40_000, {}, 414),
    ("GET", "/v/a%00b/flags", {}, 400),
    ("POST", "/api/explain", {"content": b"x" * 300_000}, 413),
    ("GET", "/api/search?q=moe&limit=many", {}, 400),
    ("GET", "/latest", {}, 302),
    ("GET", "/v/v0.3.0/flags/", {}, 307),
    ("GET", PAGE, {"headers": {"If-None-Match": "*"}}, 304),
    ("HEAD", "/nothing-here", {}, 404),
]


@pytest.mark.parametrize(("method", "url", "extra", "status"), ERRORS)
def test_every_reply_has_the_security_headers(
    client: TestClient, method: str, url: str, extra: dict[str, object], status: int
) -> None:
    page = client.get(PAGE).headers
    response = client.request(method, url, **extra)  # type: ignore[arg-type]
    assert response.status_code == status, response.text[:200]
    for name, value in SECURITY_HEADERS:
        key = name.decode()
        assert response.headers.get_list(key) == [value.decode()] == page.get_list(key), key


def test_trailing_slash_redirect_is_relative_whatever_the_host(client: TestClient) -> None:
    for url, location in [
        ("/v/v0.3.0/flags/?q=moe", "/v/v0.3.0/flags?q=moe"),
        ("/api/v/v0.3.0/flags/", "/api/v/v0.3.0/flags"),
        ("/api/versions/", "/api/versions"),
    ]:
        response = client.get(url, headers={"Host": "evil.example"})
        assert (response.status_code, response.headers["location"]) == (307, location), url
    # A path that no route answers either way, or a missing static file, is a 404.
    for url in ["/nothing-here/", "/static/nope.css/", "/static/nope.css"]:
        assert client.get(url).status_code == 404, url


def test_no_slash_redirect_leaves_the_site() -> None:
    """`//evil.example/x` is another site's URL: a route that matched `//evil.example/x`
    (none of ours starts with a parameter, so a made-up one) gets no redirect there."""
    app = FastAPI()

    @app.get("/{anything:path}/x")
    def x(anything: str) -> str:
        return anything

    def request(path: str) -> Request:
        scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode()}
        return Request({**scope, "query_string": b"", "headers": [], "app": app})

    assert slash_twin(request("/a/x/")) == "/a/x"
    assert slash_twin(request("//evil.example/x/")) is None
    assert slash_twin(request("/\\evil.example/x/")) is None


def test_latest_redirects_stay_under_v(client: TestClient) -> None:
    assert client.get("/latest/flags/--tp-size").headers["location"] == (
        "/v/v0.3.0/flags/--tp-size"
    )
    for url in [
        "/latest/..%2F..%2Fstatic%2Fapp.js",
        "/latest/flags%2F..%2F..%2F..%2Fnope",
        "/latest/.%2F..",
        "/api/latest/..%2F..%2Fstatic%2Fapp.js",
        "/latest/%2E%2E/x",
    ]:
        response = client.get(url)
        assert response.status_code == 404 and "location" not in response.headers, url
    assert client.get("/api/latest/..%2Fx").json()["kind"] == "page"


def test_vary_names_the_history_restore_header(client: TestClient) -> None:
    """The body depends on HX-History-Restore-Request (a history restore is a whole page
    where a plain htmx request gets a fragment), so a cache must key on it too."""
    fragment = {"HX-Request": "true"}
    restore = {"HX-Request": "true", "HX-History-Restore-Request": "true"}
    for url in [PAGE, "/v/v0.3.0/flags", "/search?q=moe", "/"]:  # cached and uncached
        vary = client.get(url, headers=fragment).headers["vary"]
        assert "HX-History-Restore-Request" in vary and "HX-Request" in vary, (url, vary)
    flags = "/v/v0.3.0/flags"  # a fragment for htmx, the whole page for a restore
    whole, part = client.get(flags, headers=restore), client.get(flags, headers=fragment)
    assert "<html" in whole.text and "<html" not in part.text


def test_openapi_answers_at_both_urls(client: TestClient) -> None:
    described = client.get("/api/openapi.json")
    assert described.status_code == 200
    at_root = client.get("/openapi.json")
    assert at_root.status_code == 200 and at_root.json() == described.json()
    assert "/openapi.json" not in described.json()["paths"]
