"""Hostile input over every route, HTML and JSON, on SQLite and on PostgreSQL: a short list
of payloads (markup, path traversal plain and %-encoded, NUL, lone surrogates, bad UTF-8,
CRLF, huge values, deep nesting) put in each path parameter, each free-text query
parameter and each header that a page may echo, and bodies that are not what POST
/api/explain takes (bad JSON, wrong content types, deep nesting), and unknown methods.

Each reply: no 5xx, the security headers (app/main.py SECURITY_HEADERS) on it, and no
payload markup echoed unescaped into an HTML page. The requests go to the ASGI app as raw
bytes (a path, a query string, headers), as a server would pass them on: no client library
cleans them first.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote, unquote

import pytest

from app.main import SECURITY_HEADERS, create_app
from tests.pg import BACKENDS, index_at
from tests.test_postgres import ingest_pg

MARKUP = ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>', "'><svg onload=alert(1)>"]
# Each payload as text; the cases %-encode it (as UTF-8, a lone surrogate as its bad bytes).
PAYLOADS = [
    *MARKUP,
    "javascript:alert(1)",
    "{{7*7}}${7*7}",
    "' OR 1=1 --",
    "../../../../etc/passwd",
    "..\\..\\..\\windows\\win.ini",
    "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "..%2F..%2F..%2Fetc%2Fpasswd",
    "/etc/passwd",
    "a\x00b",
    "\x00",
    "\ud800",
    "x\udfffy",
    "\r\nSet-Cookie: owned=1",
    "\u202e\ufeff\u200b",
    "🏳️‍🌈" * 50,
    "9" * 400,
    "-1",
    "1e309",
    "NaN",
    "%",
    "%ZZ",
    " ",
    "A" * 20_000,
]
# Raw (not %-encoded) path tails: traversal as a client could send it.
RAW_PATHS = [
    "../../../etc/passwd",
    "%2e%2e/%2e%2e/etc/passwd",
    "..%2F..%2Fetc",
    "..\\..\\x",
    "%ff%fe",
]

V = "v0.3.0"
FLAG = "--tp-size"
PATH_ROUTES = [
    "/v/{x}",
    "/v/{x}/flags",
    "/api/v/{x}",
    f"/v/{V}/flags/{{x}}",
    f"/api/v/{V}/flags/{{x}}",
    f"/v/{V}/source/{{x}}",
    f"/api/v/{V}/source/{{x}}",
    f"/v/{V}/models/{{x}}",
    f"/api/v/{V}/models/{{x}}",
    f"/v/{V}/env/{{x}}",
    f"/api/v/{V}/env/{{x}}",
    f"/v/{V}/backends/{{x}}/x",
    f"/api/v/{V}/backends/{FLAG}/{{x}}",
    f"/api/v/{V}/backends/{{x}}/compare",
    f"/api/diff/{{x}}/{V}",
    "/diff/{x}",
    "/latest/{x}",
    "/api/latest/{x}",
    "/static/{x}",
    "/{x}",
]
QUERY_ROUTES = [
    ("/search", "q", ""),
    ("/api/search", "q", ""),
    ("/api/search", "version", "q=tp&"),
    ("/explain", "command", ""),
    ("/explain", "config", "command=--tp+2&"),
    ("/explain", "arch", "command=--tp+2&"),
    ("/api/explain", "command", ""),
    ("/api/explain", "compare", "command=--tp+2&"),
    (f"/v/{V}/flags", "q", ""),
    (f"/api/v/{V}/flags", "q", ""),
    (f"/v/{V}/constraints", "flag", ""),
    (f"/api/v/{V}/constraints", "function", ""),
    (f"/v/{V}/env", "q", ""),
    (f"/v/{V}/backends/{FLAG}/compare", "values", ""),
    ("/diff", "from", f"to={V}&"),
    ("/switch", "page", f"to={V}&"),
    ("/switch", "query", f"to={V}&page=flags&"),
]
HEADERS = ["host", "accept", "user-agent", "referer", "cookie", "accept-language"]
HEADER_ROUTES = ["/", "/api/versions", f"/v/{V}/flagz", "/search?q=tp"]
DEEP = 100_000
BODIES = {
    "not-json": (b"application/json", b"{"),
    "bad-utf8": (b"application/json", b'{"command": "\xff\xfe"}'),
    "array": (b"application/json", b"[]"),
    "null": (b"application/json", b"null"),
    "deep-array": (b"application/json", b"[" * DEEP + b"]" * DEEP),
    "deep-profile-config": (
        b"application/json",
        b'{"command": "--tp 2", "profile": {"config": '
        + b'{"a": ' * DEEP
        + b"1"
        + b"}" * DEEP
        + b"}}",
    ),
    "deep-profile-config-900": (
        b"application/json",
        b'{"command": "--tp 2", "profile": {"config": {"a": '
        + b'{"a": ' * 900
        + b"1"
        + b"}" * 900
        + b"}}}",
    ),
    "deep-config-text": (
        b"application/json",
        json.dumps({"command": "--tp 2", "profile": {"config": "[" * 10_000}}).encode(),
    ),
    "text-plain": (b"text/plain", b"--tp 2"),
    "form": (b"application/x-www-form-urlencoded", b"command=--tp+2"),
    "xml": (b"application/xml", b"<command>--tp 2</command>"),
    "no-type": (b"", b'{"command": "--tp 2"}'),
    "huge": (b"application/json", json.dumps({"command": "--tp " + "9" * 2_000_000}).encode()),
    "surrogate-escape": (b"application/json", b'{"command": "--tp \\ud800"}'),
    "nul-escape": (b"application/json", b'{"command": "--tp\\u0000 2"}'),
}
METHODS = ["PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "PROPFIND", "FOO"]


class Request(NamedTuple):
    method: str
    raw_path: bytes
    query: bytes = b""
    headers: tuple[tuple[bytes, bytes], ...] = ()
    body: bytes = b""
    payload: str = ""  # what must not come back unescaped in HTML


def encoded(text: str) -> str:
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


def cases() -> Iterator[Any]:
    for k, payload in enumerate(PAYLOADS):
        for route in PATH_ROUTES:
            path = route.replace("{x}", encoded(payload))
            yield pytest.param(
                Request("GET", path.encode(), payload=payload), id=f"path{k}:{route}"
            )
        for route, name, rest in QUERY_ROUTES:
            query = f"{rest}{name}={encoded(payload)}".encode()
            request = Request("GET", route.encode(), query, payload=payload)
            yield pytest.param(request, id=f"query{k}:{route}?{name}")
    for k, tail in enumerate(RAW_PATHS):
        for route in PATH_ROUTES:
            yield pytest.param(
                Request("GET", route.replace("{x}", tail).encode()), id=f"raw{k}:{route}"
            )
    for k, payload in enumerate(MARKUP + ["\r\nX-Injected: 1", "\udcff", "A" * 20_000]):
        value = payload.encode("utf-8", "surrogateescape")
        for header in HEADERS:
            for route in HEADER_ROUTES:
                path, _, query = route.partition("?")
                request = Request("GET", path.encode(), query.encode(), ((header.encode(), value),))
                yield pytest.param(request, id=f"header{k}:{header}:{route}")
    for name, (kind, body) in BODIES.items():
        headers = ((b"content-type", kind),) if kind else ()
        yield pytest.param(Request("POST", b"/api/explain", b"", headers, body), id=f"body:{name}")
    for method in METHODS:
        for route in ("/", "/api/versions", "/api/explain", f"/v/{V}/flags", "/static/app.css"):
            yield pytest.param(Request(method, route.encode()), id=f"method:{method}:{route}")
    long_query = b"q=" + b"%41" * 20_000
    for route in ("/search", "/api/search", f"/v/{V}/flags", "/explain"):
        yield pytest.param(Request("GET", route.encode(), long_query), id=f"overlong:{route}")


CASES = list(cases())


def test_the_suite_is_large() -> None:
    assert len(CASES) >= 300, len(CASES)


async def send(app: Any, request: Request) -> tuple[int, dict[bytes, bytes], bytes]:
    raw_path = request.raw_path
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": "http",
        # As uvicorn decodes it: %-escapes undone, bad UTF-8 replaced.
        "path": unquote(raw_path.decode("latin-1")),
        "raw_path": raw_path,
        "query_string": request.query,
        "root_path": "",
        "headers": [(b"host", b"testserver"), *request.headers]
        if not any(h == b"host" for h, _ in request.headers)
        else list(request.headers),
        "client": ("127.0.0.1", 1234),
        "server": ("testserver", 80),
        "state": {},
    }
    sent = False
    status = 0
    headers: dict[bytes, bytes] = {}
    body = bytearray()

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": request.body, "more_body": False}

    async def reply(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            headers.update((k.lower(), v) for k, v in message.get("headers", []))
        elif message["type"] == "http.response.body":
            body.extend(message.get("body", b""))

    try:
        await app(scope, receive, reply)
    except Exception:  # the server would answer 500
        return 500, headers, bytes(body)
    return status, headers, bytes(body)


@pytest.fixture(scope="module", params=BACKENDS)
def backend(
    request: pytest.FixtureRequest, kb_db: Path, three_era_repo: Path, tmp_path_factory: Any
) -> Iterator[tuple[str, Any]]:
    if request.param == "sqlite":
        yield "sqlite", create_app(f"sqlite:///{kb_db}")
        return
    index = tmp_path_factory.mktemp("hostile-pg") / "index"
    url = ingest_pg(three_era_repo, index, refs=[("dev", "dev")])
    with index_at(index):
        yield "postgres", create_app(url)


@pytest.mark.parametrize("hostile", CASES)
def test_hostile_input(
    request: pytest.FixtureRequest, backend: tuple[str, Any], hostile: Request
) -> None:
    name, app = backend
    status, headers, body = asyncio.run(send(app, hostile))
    assert 100 <= status < 500, (status, body[:300])
    for header, value in SECURITY_HEADERS:
        assert headers.get(header) == value, (header, status)
    if headers.get(b"content-type", b"").startswith(b"text/html"):
        page = body.decode("utf-8", "replace")
        for markup in MARKUP:
            if markup in hostile.payload or any(markup.encode() in v for _, v in hostile.headers):
                assert markup not in page, f"{markup!r} echoed unescaped"
