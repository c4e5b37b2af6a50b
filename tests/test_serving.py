"""Serving a team: the stamp-keyed response cache (ETag, 304, gzip, invalidation), bounded
inputs and answers (413, 414, 400 for long explain parameters, truncated explain lists),
`flagatlas serve --workers` (SO_REUSEPORT workers that die with the parent, connections
without Nagle's delay), and an ingest killed with SIGKILL leaving no worker, `git cat-file`
or temporary file behind."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
import zstandard
from dashboard_kb import build_kb
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.main import create_app
from app.respcache import ByteLRU, Entry
from cli.serve import bind_reuseport, uvicorn_config
from kb.explain import MAX_WORDS
from kb.schema import Flag, Version, make_engine
from tests.fixture_repos import ERA2_SERVER_ARGS, SERVER_ARGS, commit, git, write
from tests.stalled_ingest import start_stalled_ingest

ROOT = Path(__file__).resolve().parent.parent
PAGE = "/v/v0.3.0/flags/--moe-runner-backend"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_kb(tmp_path_factory.mktemp("kb") / "kb.db")


@pytest.fixture
def client(db: Path) -> TestClient:
    return TestClient(create_app(f"sqlite:///{db}"), follow_redirects=False)


# --- the response cache -----------------------------------------------------------------


def test_pinned_page_has_strong_etag_and_304(client: TestClient) -> None:
    first = client.get(PAGE)
    assert first.status_code == 200
    etag = first.headers["etag"]
    assert etag.startswith('"') and not etag.startswith("W/")
    assert "max-age=" in first.headers["cache-control"]
    assert "HX-Request" in first.headers["vary"]
    again = client.get(PAGE)
    assert again.content == first.content and again.headers["etag"] == etag
    revalidated = client.get(PAGE, headers={"If-None-Match": etag})
    assert revalidated.status_code == 304 and revalidated.content == b""
    assert revalidated.headers["etag"] == etag
    # The security headers still wrap cached answers.
    assert "default-src 'self'" in revalidated.headers["content-security-policy"]
    other = client.get(PAGE, headers={"If-None-Match": '"something-else"'})
    assert other.status_code == 200


def test_gzip_and_identity_are_distinct_representations(client: TestClient) -> None:
    zipped = client.get(PAGE, headers={"Accept-Encoding": "gzip"})
    plain = client.get(PAGE, headers={"Accept-Encoding": "identity"})
    assert zipped.headers["content-encoding"] == "gzip"
    assert "content-encoding" not in plain.headers
    assert zipped.content == plain.content  # httpx decodes the gzip body
    assert zipped.headers["etag"] != plain.headers["etag"]
    raw = client.get(PAGE, headers={"Accept-Encoding": "gzip"})
    assert int(raw.headers["content-length"]) < len(plain.content)


def test_zstd_first_then_gzip_then_identity(db: Path) -> None:
    """Cached and uncached alike: zstd to a client that accepts it, gzip to one that accepts
    only gzip (or refuses zstd with q=0), the bytes as they are otherwise; each its own ETag."""
    for cache_mb in (64, 0):
        client = TestClient(create_app(f"sqlite:///{db}", cache_mb=cache_mb))
        plain = client.get(PAGE, headers={"Accept-Encoding": "identity"})
        assert "content-encoding" not in plain.headers
        for accept, coding in [
            ("gzip, deflate, br, zstd", "zstd"),
            ("zstd;q=0, gzip", "gzip"),
            ("gzip", "gzip"),
        ]:
            with client.stream("GET", PAGE, headers={"Accept-Encoding": accept}) as response:
                raw = b"".join(response.iter_raw())
                headers = response.headers
            assert headers["content-encoding"] == coding, (cache_mb, accept)
            assert "Accept-Encoding" in headers["vary"]
            if coding == "zstd":
                body = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
            else:
                body = gzip.decompress(raw)
            assert body == plain.content, (cache_mb, accept)
            if cache_mb:
                assert int(headers["content-length"]) == len(raw)
                assert headers["etag"] not in (plain.headers["etag"], "")
        # Decoded here, not by the client: whether a test client decodes zstd itself depends
        # on which httpx the environment has (httpx2, pulled in by huggingface_hub, does not).
        with client.stream("GET", "/api" + PAGE, headers={"Accept-Encoding": "zstd"}) as api:
            raw = b"".join(api.iter_raw())
            assert api.headers["content-encoding"] == "zstd"
        body = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
        assert json.loads(body)["name"] == "--moe-runner-backend"
    with client.stream(
        "GET", "/static/vendor/htmx.min.js", headers={"Accept-Encoding": "zstd"}
    ) as r:
        raw = b"".join(r.iter_raw())
        assert r.headers["content-encoding"] == "zstd"
    expected = (ROOT / "static" / "vendor" / "htmx.min.js").read_bytes()
    assert zstandard.ZstdDecompressor().decompressobj().decompress(raw) == expected


def test_a_streamed_body_is_one_zstd_stream() -> None:
    """A reply sent in chunks is compressed as it goes (each chunk flushed, so the client
    can read it) into one zstd frame without a content-length."""
    from starlette.applications import Starlette
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    from app.compression import Compression

    parts = [f"<p>part {i} ".encode() * 400 for i in range(5)]

    def stream(request):  # type: ignore[no-untyped-def]
        return StreamingResponse(iter(parts), media_type="text/html")

    client = TestClient(Compression(Starlette(routes=[Route("/s", stream)])))
    with client.stream("GET", "/s", headers={"Accept-Encoding": "zstd"}) as r:
        raw = b"".join(r.iter_raw())
        assert r.headers["content-encoding"] == "zstd" and "content-length" not in r.headers
    assert zstandard.ZstdDecompressor().decompressobj().decompress(raw) == b"".join(parts)
    assert len(raw) < len(b"".join(parts)) // 10


def test_head_and_json_twin_and_htmx_variant(db: Path) -> None:
    client = TestClient(create_app(f"sqlite:///{db}"))  # a cold cache: HEAD comes first
    head = client.head(PAGE, headers={"Accept-Encoding": "identity"})
    get = client.get(PAGE, headers={"Accept-Encoding": "identity"})
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == str(len(get.content))
    assert head.headers["etag"] == get.headers["etag"]
    missing = client.head("/v/v0.3.0/flags/--nope")
    assert missing.status_code == 404 and missing.content == b""
    api = client.get("/api" + PAGE)
    assert (
        api.status_code == 200
        and api.headers["etag"]
        and api.json()["name"] == "--moe-runner-backend"
    )
    # An htmx swap of the flags list gets only its block: a separate cache entry.
    full = client.get("/v/v0.3.0/flags?q=moe")
    fragment = client.get("/v/v0.3.0/flags?q=moe", headers={"HX-Request": "true"})
    assert len(fragment.content) < len(full.content)
    assert fragment.headers["etag"] != full.headers["etag"]
    assert client.get("/v/v0.3.0/flags?q=moe").content == full.content


def test_errors_and_unpinned_pages_are_not_cached(client: TestClient) -> None:
    missing = client.get("/v/v0.3.0/flags/--no-such-flag")
    assert missing.status_code == 404 and "etag" not in missing.headers
    assert client.get("/v/v0.3.0/flags/--no-such-flag").status_code == 404
    assert "etag" not in client.get("/api/versions").headers
    assert client.get("/latest/flags").status_code == 302


def test_a_new_ingest_changes_the_answer(tmp_path: Path) -> None:
    db = build_kb(tmp_path / "kb.db")
    client = TestClient(create_app(f"sqlite:///{db}"))
    url = "/api/v/v0.3.0/flags/--pp-size"
    before = client.get(url)
    engine = make_engine(f"sqlite:///{db}")
    with Session(engine) as session:  # what a re-ingest does: new rows, new stamp
        version = session.exec(select(Version).where(Version.name == "v0.3.0")).one()
        flag = session.exec(
            select(Flag).where(Flag.name == "--pp-size", Flag.version_id == version.id)
        ).one()
        flag.help = "Changed by a new ingest."
        version.ingested_at = version.ingested_at.replace(year=2030)
        session.add(flag)
        session.add(version)
        session.commit()
    engine.dispose()
    after = client.get(url)
    assert after.json()["help"] == "Changed by a new ingest."
    assert after.headers["etag"] != before.headers["etag"]
    stale = client.get(url, headers={"If-None-Match": before.headers["etag"]})
    assert stale.status_code == 200


def test_lru_is_bounded_by_bytes() -> None:
    lru = ByteLRU(10_000)

    def entry(size: int) -> Entry:
        return Entry(200, [], b"x" * size, b'"a"')

    for i in range(20):
        lru.put(("s", str(i)), entry(1000))
    assert lru.bytes <= 10_000
    assert lru.get(("s", "19")) is not None and lru.get(("s", "0")) is None
    lru.put(("s", "huge"), entry(9000))  # over a quarter of the cache: not kept
    assert lru.get(("s", "huge")) is None
    # An encoding made later counts: putting the same entry again adds its bytes.
    grown = lru.get(("s", "19"))
    assert grown is not None
    before, count = lru.bytes, len(lru.items)
    grown.encoded["zstd"] = b"z" * 500
    lru.put(("s", "19"), grown)
    assert lru.bytes == before + 500 and len(lru.items) == count


# --- bounded inputs and answers ----------------------------------------------------------


def test_request_body_over_the_limit_is_413(client: TestClient) -> None:
    """413 as an ErrorBody (it was FastAPI's plain text), whether the body declares its
    length (answered before routing, on any path) or comes in chunks (counted as read)."""
    big = b'{"command": "' + b"x" * 10_000_000 + b'"}'
    for path in ("/api/explain", "/explain", "/v/v0.3.0/flags", "/nope"):
        response = client.post(path, content=big, headers={"content-type": "application/json"})
        assert response.status_code == 413, path
        assert response.headers["content-type"] == "application/json", path
        body = response.json()
        assert body["kind"] == "body" and "262144 bytes" in body["detail"], path

    def chunks() -> Iterator[bytes]:
        for _ in range(100):
            yield b"x" * 100_000

    streamed = client.post(
        "/api/explain", content=chunks(), headers={"content-type": "application/json"}
    )
    assert streamed.status_code == 413
    assert streamed.json()["kind"] == "body"
    # At the limit, the body is read and judged as usual (here: not an explain request).
    fits = client.post("/api/explain", content=b"x" * 262_144)
    assert fits.status_code in (400, 422)


def test_get_explain_validates_like_post(client: TestClient) -> None:
    long_command = client.get("/api/explain", params={"command": "x" * 20_001})
    assert long_command.status_code == 413  # like POST (kb.explain's MAX_COMMAND)
    long_version = client.get("/api/explain", params={"command": "--tp 1", "version": "v" * 201})
    assert long_version.status_code == 400
    page = client.get("/explain", params={"command": "--tp 1", "compare": "v" * 201})
    assert page.status_code in (400, 404)
    post = client.post("/api/explain", json={"command": "x" * 20_001})
    assert 400 <= post.status_code < 500


def test_explain_answer_is_bounded(client: TestClient) -> None:
    # as many flags as a command may have words (kb.explain's MAX_WORDS): the lists are cut
    command = "python -m sglang.launch_server " + "--tp-size=1 " * MAX_WORDS
    response = client.post("/api/explain", json={"version": "v0.3.0", "command": command})
    assert response.status_code == 200
    body = response.json()
    assert len(body["flags"]) == 200
    assert body["truncated"]["flags"] == MAX_WORDS
    assert len(response.content) < 40 * len(command)
    # one word more is refused, naming the limit
    over = client.post("/api/explain", json={"version": "v0.3.0", "command": command + "-x"})
    assert over.status_code == 413 and f"at most {MAX_WORDS}" in over.json()["detail"]
    short = client.post("/api/explain", json={"version": "v0.3.0", "command": "--tp-size 2"})
    assert short.json()["truncated"] is None


@pytest.fixture(scope="module")
def live_server(db: Path) -> Iterator[int]:
    """One uvicorn server with the settings `flagatlas serve` uses, on a free port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn_config(
        create_app(f"sqlite:///{db}"), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 20
    while not server.started and time.time() < deadline:
        time.sleep(0.05)
    yield port
    server.should_exit = True
    thread.join(10)


def raw_get(port: int, target: str) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
    return out


def test_megabyte_url_gets_414_not_a_reset(live_server: int) -> None:
    answer = raw_get(live_server, "/v/v0.3.0/flags?q=" + "a" * 1_000_000)
    assert answer.startswith(b"HTTP/1.1 414"), answer[:200]
    assert raw_get(live_server, PAGE).startswith(b"HTTP/1.1 200")


def test_oversized_body_over_http_is_json_413(live_server: int) -> None:
    """Through the real server (uvicorn + h11), where FastAPI's limit answered text/plain."""
    with socket.create_connection(("127.0.0.1", live_server), timeout=20) as sock:
        sock.sendall(
            b"POST /api/explain HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 400000\r\nConnection: close\r\n\r\n" + b"x" * 65536
        )
        answer = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), head[:200]
    assert b"content-type: application/json" in head.lower()
    assert b'"kind": "body"' in body


# --- workers ------------------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(entry.name))
    return out


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        kids = _children(todo.pop())
        found += kids
        todo += kids
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie is dead; no init reaps it in some containers


def _wait_gone(pids: list[int], seconds: float) -> list[int]:
    deadline = time.time() + seconds
    while time.time() < deadline:
        left = [p for p in pids if _alive(p)]
        if not left:
            return []
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_REUSEPORT, /proc")
def test_serve_workers_spread_and_die_with_the_parent(db: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", "serve", "--db", str(db), "--port", "0", "--workers", "2"],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        if line.startswith("Built the search index"):  # it was missing: built before forking
            line = proc.stderr.readline()
        assert "with 2 workers" in line, line
        port = int(line.split("http://127.0.0.1:")[1].split()[0])
        workers = _children(proc.pid)
        assert len(workers) == 2
        deadline = time.time() + 30
        # Each worker has its own listening socket on the port (SO_REUSEPORT).
        while time.time() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}{PAGE}", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        inodes = {w: _listening_inodes(w) for w in workers}
        assert all(inodes.values()) and len(set().union(*inodes.values())) == 2
        # 32 keep-alive clients land on both workers (counted by each worker's sockets).
        clients = [httpx.Client(base_url=f"http://127.0.0.1:{port}") for _ in range(32)]
        for c in clients:
            assert c.get(PAGE).status_code == 200
        counts = [_established(w, port) for w in workers]
        assert sum(counts) == 32 and min(counts) >= 4, counts
        for c in clients:
            c.close()
        proc.send_signal(signal.SIGKILL)
        assert _wait_gone(workers, 15) == []
    finally:
        proc.kill()
        proc.wait(10)


def test_worker_connections_have_nagle_off(db: Path) -> None:
    """A worker's accepted connections have TCP_NODELAY: asyncio sets it only on sockets
    made with IPPROTO_TCP, and with Nagle's algorithm on, a reply written in two parts (the
    headers, then a compressed body) waited ~40 ms for the client's delayed ACK on every
    keep-alive request."""
    sock = bind_reuseport("127.0.0.1", 0, 1)[0]
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn_config(create_app(f"sqlite:///{db}"), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.time() + 20
        while not server.started and time.time() < deadline:
            time.sleep(0.05)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            reply = client.get(PAGE, headers={"Accept-Encoding": "zstd"})
            assert reply.headers["content-encoding"] == "zstd"
            sockets = [
                c.transport.get_extra_info("socket") for c in server.server_state.connections
            ]
            nodelay = [s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for s in sockets]
            assert len(nodelay) == 1 and nodelay[0] != 0, nodelay
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def _socket_inodes(pid: int) -> set[str]:
    out = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(target[8:-1])
    return out


def _tcp_table() -> list[list[str]]:
    rows = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            rows += [line.split() for line in Path(name).read_text().splitlines()[1:]]
    return rows


def _listening_inodes(pid: int) -> set[str]:
    mine = _socket_inodes(pid)
    return {row[9] for row in _tcp_table() if row[3] == "0A" and row[9] in mine}


def _established(pid: int, port: int) -> int:
    mine = _socket_inodes(pid)
    local = f":{port:04X}"
    return sum(
        1 for row in _tcp_table() if row[3] == "01" and row[1].endswith(local) and row[9] in mine
    )


# --- a killed ingest leaves nothing behind ------------------------------------------------


def build_wide_repo(root: Path) -> Path:
    """Two releases of 300 modules each, all changed: more blobs than one worker batch."""
    repo = root / "wide"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    for release in range(2):
        write(repo, SERVER_ARGS, ERA2_SERVER_ARGS)
        for i in range(300):
            write(
                repo,
                f"python/sglang/srt/filler/mod_{i}.py",
                f"def f_{i}_{release}(server_args):\n    return server_args.tp_size + {i}\n",
            )
        commit(repo, f"release {release}", f"2025-01-0{release + 1}T12:00:00Z", f"v1.0.{release}")
    return repo


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG, /proc")
def test_kill_9_of_an_ingest_leaves_no_process_and_no_temporary_file(tmp_path: Path) -> None:
    """Nor multiprocessing's temporary directory (pymp-*, the fork server's socket in it),
    which only an atexit hook of the killed process removed."""
    repo = build_wide_repo(tmp_path)
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}
    # stalled in v1.0.0's transaction: the pool is still analyzing v1.0.1's blobs
    proc = start_stalled_ingest(repo, tmp_path / "kb.db", at="v1.0.0", jobs=2, env=env)
    try:
        family = _descendants(proc.pid)
        names = [Path(f"/proc/{p}/cmdline").read_bytes() for p in family]
        assert sum(b"cat-file" in n for n in names) >= 2, names  # one per pool worker
        assert len(family) >= 4
        assert list(temp.glob("pymp-*/listener-*")), list(temp.iterdir())
        proc.send_signal(signal.SIGKILL)
        assert _wait_gone(family, 15) == []
        assert list(temp.iterdir()) == []
    finally:
        proc.kill()
        proc.wait(10)


def test_gzip_body_is_real_gzip(db: Path) -> None:
    client = TestClient(create_app(f"sqlite:///{db}"))
    with client.stream("GET", PAGE, headers={"Accept-Encoding": "gzip"}) as response:
        raw = b"".join(response.iter_raw())
    assert gzip.decompress(raw).startswith(b"<!doctype html>")


def test_concurrent_misses_render_once() -> None:
    """32 clients asking for the same cold page wait for one render (no thundering herd)."""
    import asyncio

    from app.respcache import ResponseCache

    calls = 0

    async def slow_app(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)
        body = b"<p>" + b"x" * 2000 + b"</p>"
        headers = [(b"content-type", b"text/html")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    cache = ResponseCache(slow_app, stamp=lambda: "1")

    async def one() -> int:
        sent: list[dict] = []

        async def send(message) -> None:  # type: ignore[no-untyped-def]
            sent.append(message)

        async def receive() -> dict:
            return {"type": "http.request", "body": b""}

        scope = {"type": "http", "method": "GET", "path": "/v/x/flags", "headers": []}
        await cache(scope, receive, send)
        return int(sent[0]["status"])

    async def many() -> list[int]:
        return await asyncio.gather(*(one() for _ in range(32)))

    assert asyncio.run(many()) == [200] * 32
    assert calls == 1
