"""Rendered responses of version-pinned pages, cached by the knowledge base's stamp.

The knowledge base changes only when an ingest runs, and `kb_stamp` changes with every
ingest. So the bytes of a version-pinned page (HTML or JSON) are a function of
(stamp, URL, htmx headers): they are rendered once, compressed once, and then served from
memory with a strong ETag; `If-None-Match` gets a 304. Memory is bounded by an LRU that
counts bytes. A plain ASGI middleware (no BaseHTTPMiddleware): a hit costs a dict lookup.

Cache-Control: the content of a pinned URL is immutable *per stamp*, but the URL itself
outlives a re-ingest (`ingest --force`, a new extractor), so it is not `immutable`: browsers
and proxies may reuse it for `max_age` seconds (default 60: an ingest shows within a
minute) and then revalidate with the ETag, which costs a 304 without a body.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import os
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from threading import Lock
from typing import Generic, Protocol, TypeVar

import zstandard
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.compression import ZSTD_LEVEL, accepts
from app.templating import PAGE_HEADERS
from app.templating import VARY as TEMPLATE_VARY

# URL prefixes whose answer depends only on the knowledge base (and the URL). An explain
# permalink (the page, GET /api/explain) names its question whole; without a version it asks
# the newest, which a new stamp may change, as it may any page.
PINNED = ("/v/", "/api/v/", "/diff/", "/api/diff/", "/explain", "/api/explain")
# Bodies below this are sent as they are: compression would not pay for its header.
MIN_GZIP = 1024
COMPRESSIBLE = (b"text/", b"application/json", b"application/javascript")
# The request headers an entry is kept under (besides the URL): those the pages read
# (app/templating.py), and so the Vary of every cached reply.
KEY_HEADERS = tuple(name.lower().encode() for name in PAGE_HEADERS)
VARY = f"{TEMPLATE_VARY}, Accept-Encoding".encode()


# Encodings a cached entry is sent in, in order of preference, with their ETag suffixes.
# Each is made the first time a client asks for it (once per entry), not with the entry:
# a first view pays for the one encoding its client takes (zstd: ~0.3 ms for the heavy flag
# page; gzip at level 6: ~2.4 ms).
CODINGS = (("zstd", b"-zst"), ("gzip", b"-gz"))


def _encode(coding: str, body: bytes) -> bytes:
    if coding == "zstd":
        return zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(body)
    return gzip.compress(body, compresslevel=6, mtime=0)


@dataclass
class Entry:
    status: int
    headers: list[tuple[bytes, bytes]]  # without content-length / content-encoding / etag
    body: bytes
    etag: bytes
    compressible: bool = False
    encoded: dict[str, bytes] = field(default_factory=dict)  # coding -> body, made on demand
    # A reply that holds for `max-age` seconds only (Cache-Control from the app: an explain
    # answer noting a hub failure holds while the failure is remembered): its time.monotonic()
    # end, and the Cache-Control it is sent with.
    expires: float | None = None
    cache_control: bytes | None = None

    @property
    def size(self) -> int:
        return len(self.body) + sum(map(len, self.encoded.values())) + 512


class Sized(Protocol):
    @property
    def size(self) -> int: ...  # bytes it holds, roughly


S = TypeVar("S", bound=Sized)


class ByteLRU(Generic[S]):
    """An LRU bounded by the total size of its entries, safe across threads."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.items: OrderedDict[tuple[str, ...], tuple[S, int]] = OrderedDict()
        self.lock = Lock()

    def get(self, key: tuple[str, ...]) -> S | None:
        with self.lock:
            found = self.items.get(key)
            if found is not None:
                self.items.move_to_end(key)
            return found[0] if found is not None else None

    def put(self, key: tuple[str, ...], entry: S) -> None:
        """Keep `entry` under `key`, or count its new size if it is already there (an
        encoding was added)."""
        size = entry.size
        if size > self.max_bytes // 4:  # one huge page must not flush all the others
            return
        with self.lock:
            old = self.items.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            self.items[key] = (entry, size)
            self.bytes += size
            while self.bytes > self.max_bytes:
                _key, (_evicted, evicted_size) = self.items.popitem(last=False)
                self.bytes -= evicted_size


def _etag_matches(header: bytes, etag: bytes) -> bool:
    """If-None-Match uses the weak comparison (RFC 9110 13.1.2): W/ prefixes are ignored."""
    for candidate in header.split(b","):
        candidate = candidate.strip()
        if candidate == b"*" or candidate.removeprefix(b"W/") == etag:
            return True
    return False


class CheapStamp:
    """The KB stamp without a query per request.

    `query()` (kb_stamp) costs a round trip. For SQLite, any commit changes the size or
    mtime of the database or its WAL file, so two stat calls tell whether to ask again and a
    new ingest is seen at the next request. For a server database (PostgreSQL) the stamp is
    asked at most once per `ttl` seconds, so an ingest is seen within that time.
    """

    def __init__(self, query: Callable[[], str], sqlite_path: str | None, ttl: float = 1.0):
        self.query = query
        self.files = [sqlite_path, sqlite_path + "-wal"] if sqlite_path else []
        self.ttl = ttl
        self._seen: tuple[object, str] | None = None

    def _signature(self) -> object:
        if not self.files:
            return int(time.monotonic() / self.ttl)
        out: list[tuple[int, int, int] | None] = []
        for name in self.files:
            try:
                st = os.stat(name)
                out.append((st.st_mtime_ns, st.st_size, st.st_ino))
            except OSError:
                out.append(None)
        return tuple(out)

    def __call__(self) -> str:
        signature = self._signature()
        seen = self._seen
        if seen is not None and seen[0] == signature:
            return seen[1]
        value = self.query()
        self._seen = (signature, value)
        return value


class ResponseCache:
    """ASGI middleware: serve GET/HEAD of pinned URLs from memory, keyed by the KB stamp.

    `stamp()` runs on every pinned request, so it must be cheap (see CheapStamp). Put this
    outside any gzip middleware: it asks the app for identity bytes and compresses them
    itself, once per entry.
    """

    def __init__(
        self,
        app: ASGIApp,
        stamp: Callable[[], str],
        max_bytes: int = 64 * 1024 * 1024,
        max_age: int = 60,
    ) -> None:
        self.app = app
        self.current_stamp = stamp
        self.lru: ByteLRU[Entry] = ByteLRU(max_bytes)
        self.cache_control = f"public, max-age={max_age}".encode()
        # Renders in flight, so that 32 clients asking for the same cold page wait for one
        # render instead of running 32 at once (each worker has one event loop).
        self.pending: dict[tuple[str, ...], asyncio.Future[Entry | None]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] not in ("GET", "HEAD")
            or not scope["path"].startswith(PINNED)
        ):
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])  # lower-case names; the last one of a name wins
        key = (
            self.current_stamp(),
            scope["path"],
            scope.get("query_string", b"").decode("latin-1"),
            *(headers.get(name, b"").decode("latin-1") for name in KEY_HEADERS),
        )
        entry = self.lru.get(key)
        if entry is not None and entry.expires is not None and time.monotonic() >= entry.expires:
            entry = None  # (a new render replaces it)
        if entry is None:
            waiting = self.pending.get(key)
            if waiting is not None:
                entry = await asyncio.shield(waiting)
            if entry is None:
                entry = await self._render_once(key, scope, receive, send)
                if entry is None:  # not cacheable: already sent as it came
                    return
        await self._send(key, entry, headers, scope["method"] == "HEAD", send)

    async def _render_once(
        self, key: tuple[str, ...], scope: Scope, receive: Receive, send: Send
    ) -> Entry | None:
        future: asyncio.Future[Entry | None] = asyncio.get_running_loop().create_future()
        self.pending.setdefault(key, future)
        entry = None
        try:
            entry = await self._render(scope, receive, send)
            if entry is not None:
                self.lru.put(key, entry)
        finally:
            if self.pending.get(key) is future:
                del self.pending[key]
            future.set_result(entry)  # waiters with None render for themselves
        return entry

    async def _render(self, scope: Scope, receive: Receive, send: Send) -> Entry | None:
        """Run the app for identity bytes; a 200 becomes an Entry, anything else (or a
        reply marked `Cache-Control: no-store`) is sent."""
        inner = dict(scope)
        inner["headers"] = [(k, v) for k, v in scope["headers"] if k != b"accept-encoding"]
        # HEAD is rendered as GET: same headers and ETag as the GET, and a reusable entry.
        head = scope["method"] == "HEAD"
        inner["method"] = "GET"
        messages: list[Message] = []

        async def capture(message: Message) -> None:
            messages.append(message)

        await self.app(inner, receive, capture)
        start = messages[0] if messages else None
        ok = start is not None and start["type"] == "http.response.start" and start["status"] == 200
        given = [(k.lower(), v) for k, v in start.get("headers", [])] if ok and start else []
        control = next((v for k, v in given if k == b"cache-control"), b"")
        # (no-store: a reply that depends on more than the knowledge base, e.g. a directory)
        if not ok or b"no-store" in control:
            for message in messages:
                if head and message["type"] == "http.response.body":
                    message = {"type": "http.response.body", "body": b""}
                await send(message)
            return None
        body = b"".join(m.get("body", b"") for m in messages[1:])
        kept = [
            (k, v)
            for k, v in given
            if k not in (b"content-length", b"content-encoding", b"etag", b"vary", b"cache-control")
        ]
        age = re.search(rb"max-age=(\d+)", control)
        expires = time.monotonic() + int(age.group(1)) if age else None
        ctype = next((v for k, v in kept if k == b"content-type"), b"")
        compressible = len(body) >= MIN_GZIP and ctype.startswith(COMPRESSIBLE)
        digest = hashlib.blake2b(body, digest_size=12).hexdigest().encode()
        return Entry(
            200, kept, body, b'"' + digest + b'"', compressible, {}, expires, control or None
        )

    def _control(self, entry: Entry) -> bytes:
        if entry.expires is None:
            return entry.cache_control or self.cache_control
        return b"private, max-age=%d" % max(0, int(entry.expires - time.monotonic()))

    def _coding(self, key: tuple[str, ...], entry: Entry, accept: str) -> str | None:
        """The encoding to send `entry` in (made now if it is the first to ask for it)."""
        if not entry.compressible:
            return None
        for coding, _suffix in CODINGS:
            if accepts(accept, coding):
                if coding not in entry.encoded:
                    entry.encoded[coding] = _encode(coding, entry.body)
                    self.lru.put(key, entry)  # count the new bytes
                return coding
        return None

    async def _send(
        self,
        key: tuple[str, ...],
        entry: Entry,
        headers: dict[bytes, bytes],
        head: bool,
        send: Send,
    ) -> None:
        coding = self._coding(key, entry, headers.get(b"accept-encoding", b"").decode("latin-1"))
        body = entry.encoded[coding] if coding else entry.body
        suffix = dict(CODINGS)[coding] if coding else b""
        etag = entry.etag[:-1] + suffix + b'"' if suffix else entry.etag
        common = [
            (b"etag", etag),
            (b"cache-control", self._control(entry)),
            (b"vary", VARY),
        ]
        match = headers.get(b"if-none-match")
        if match is not None and _etag_matches(match, etag):
            await send({"type": "http.response.start", "status": 304, "headers": common})
            await send({"type": "http.response.body", "body": b""})
            return
        out = entry.headers + common + [(b"content-length", str(len(body)).encode())]
        if coding:
            out.append((b"content-encoding", coding.encode()))
        await send({"type": "http.response.start", "status": entry.status, "headers": out})
        await send({"type": "http.response.body", "body": b"" if head else body})
