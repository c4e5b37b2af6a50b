"""Bounded requests: a URL over MAX_URL bytes gets 414, a body over MAX_BODY gets 413, both as
an ErrorBody (FastAPI's own `max_body_size` answered 413 in plain text, and from outside every
middleware of ours, so it could not be replaced there).

The largest legitimate input is an explain command (20,000 characters, kb.explain's
MAX_COMMAND), which fits in either with room to spare. The server must let such URLs reach
the app at all: `flagatlas serve` raises uvicorn's h11 buffer (SERVER_HEADER_LIMIT) above the
largest URL we answer with 414, so a 1 MB URL gets that answer rather than a reset.
"""

from __future__ import annotations

import json

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_URL = 32 * 1024  # path + query string, bytes (a 20,000-character command, %-encoded)
MAX_BODY = 256 * 1024  # request body, bytes
# Request line + headers that uvicorn's h11 parser buffers before giving up (its default,
# 16 KiB, resets the connection on a long URL instead of letting us answer 414).
SERVER_HEADER_LIMIT = 4 * 1024 * 1024
BODY_TOO_LARGE = f"The request body is larger than {MAX_BODY} bytes."


class BodyTooLarge(HTTPException):
    """Raised from `receive` once a body without a declared length passes the limit: the
    view reading it stops there, and the app's HTTPException handler answers 413."""

    def __init__(self) -> None:
        super().__init__(status_code=413, detail=BODY_TOO_LARGE)


async def _reply(send: Send, status: int, detail: str, kind: str = "page") -> None:
    body = json.dumps(
        {"detail": detail, "kind": kind, "name": "", "suggestions": [], "elsewhere": []}
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the HTTP server itself rejects a malformed length
    return None


class Limits:
    """ASGI middleware, outermost: 414 for long URLs, 400 for a NUL character in the path or
    query, 413 for a declared body length over `max_body` (all before routing, so no view
    sees them), and a body sent in chunks counted as the app reads it (BodyTooLarge past
    `max_body`). No name in the knowledge base contains NUL, and PostgreSQL rejects it in a
    text parameter (a 500 there, where SQLite found nothing)."""

    def __init__(self, app: ASGIApp, max_url: int = MAX_URL, max_body: int = MAX_BODY) -> None:
        self.app = app
        self.max_url = max_url
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        url_size = len(scope.get("raw_path") or scope["path"].encode()) + len(
            scope.get("query_string", b"")
        )
        if url_size > self.max_url:
            await _reply(send, 414, f"The URL is longer than {self.max_url} bytes.")
            return
        if "\x00" in scope["path"] or b"%00" in scope.get("query_string", b""):
            await _reply(send, 400, "Bad request: the URL contains a NUL character.")
            return
        declared = _declared_length(scope)
        if declared is not None and declared > self.max_body:
            await _reply(send, 413, BODY_TOO_LARGE, kind="body")
            return
        if declared is not None:  # the server delivers no more than the declared length
            await self.app(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_body:
                raise BodyTooLarge
            return message

        await self.app(scope, counted, send)
