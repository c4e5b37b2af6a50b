"""The web app: `create_app()` wires the read-only engine, static files, security headers,
error pages and the routers of the view modules (one module per page kind)."""

from __future__ import annotations

import gc
import logging
import os
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from sqlmodel import Session
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.compression import Compression
from app.limits import BODY_TOO_LARGE, Limits
from app.respcache import CheapStamp, ResponseCache
from app.templating import STATIC
from app.views import (
    backends,
    compare,
    constraints,
    diff,
    doc_commands,
    docsdrift,
    enums,
    env,
    explain,
    flags,
    gpus,
    home,
    models,
    search,
    source,
)
from app.views.common import (
    error_response,
    json_twin,
    pinned_context,
    same_page_elsewhere,
    suggestion_url,
)
from kb.queries import MAX_NAME, NotFound, kb_stamp
from kb.schema import check_schema, database_url, make_engine
from kb.search import default_index_dir

log = logging.getLogger("flagatlas")

# The version of the JSON contract (kb/contract.py): fields may be added, never renamed.
API_VERSION = "1.0"
API_DESCRIPTION = (
    "The JSON twins of Flag Atlas's pages: SGLang's server flags at every ingested version, "
    "with citations. Every error is an ErrorBody. Human-readable: docs/API.md."
)

SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
        b"frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
]


class SecurityHeaders:
    """Plain ASGI middleware (cheaper than BaseHTTPMiddleware): adds headers to every reply."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", [])) + SECURITY_HEADERS
            await send(message)

        await self.app(scope, receive, send_with_headers)


class FlagAtlas(FastAPI):
    """FastAPI with the security headers outermost: FastAPI puts its own error middleware,
    which sends the 500 page, outside every middleware `add_middleware` adds, and the 400,
    413 and 414 replies of `Limits` are sent before the app runs."""

    def build_middleware_stack(self) -> ASGIApp:
        return SecurityHeaders(super().build_middleware_stack())


class HeadAsGet:
    """GET routes answer HEAD: the GET reply's status and headers, without its body (FastAPI
    routes declared with GET alone would answer 405)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def send_headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, send_headers_only)


def patch_openapi(app: FastAPI) -> None:
    """The description as the app answers:

    - FastAPI documents a 422 `HTTPValidationError` on every route with parameters; this
      app answers bad parameters with 400 and bad bodies with 422, both as ErrorBody, and
      each route lists the statuses it really answers (`responses=errors(...)`): the 422s
      and their schemas go;
    - every route may also answer 414 and 400 (app/limits.py, before routing: a URL over
      MAX_URL bytes, a NUL character in the URL), so no text parameter of the URL takes a
      NUL (its `pattern`)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            for operations in schema.get("paths", {}).values():
                for operation in operations.values():
                    replies = operation.get("responses", {})
                    reply = replies.get("422", {})
                    ref = reply.get("content", {}).get("application/json", {}).get("schema", {})
                    if ref.get("$ref", "").endswith("/HTTPValidationError"):
                        del replies["422"]
                    for parameter in operation.get("parameters", []):
                        text = parameter.get("schema", {})
                        if text.get("type") == "string" and not {"enum", "pattern"} & set(text):
                            text["pattern"] = NO_NUL
                    replies.setdefault("400", NUL_IN_URL)
                    replies["414"] = URL_TOO_LONG
            schemas = schema.get("components", {}).get("schemas", {})
            for name in ("HTTPValidationError", "ValidationError"):
                schemas.pop(name, None)
        return app.openapi_schema or {}

    app.openapi = openapi  # type: ignore[method-assign]


ERROR_BODY = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
URL_TOO_LONG = {"description": "The URL is too long.", "content": ERROR_BODY}
NO_NUL = "^[^\\u0000]*$"
NUL_IN_URL = {"description": "The URL contains a NUL character.", "content": ERROR_BODY}


def allowed_methods(request: Request, router_allow: str) -> str:
    """The methods of every route on the path: the router's `Allow` names only the first
    route it met (e.g. POST for /api/explain, which answers GET too)."""
    methods = {m.strip() for m in router_allow.split(",") if m.strip()}
    for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
        scope = {**request.scope, "method": method}
        routes = [r for r in request.app.router.routes if not isinstance(r, Mount)]
        if any(route.matches(scope)[0] == Match.FULL for route in routes):
            methods.add(method)
    if "GET" in methods:
        methods.add("HEAD")
    return ", ".join(sorted(methods))


def slash_twin(request: Request) -> str | None:
    """Where a path that no route answers is answered with its trailing slash added or
    removed, as a relative URL (the query kept), or None. Starlette's own redirect named the
    Host header's host (`Host: evil.com` -> `location: http://evil.com/...`)."""
    scope = request.scope
    routes = request.app.router.routes
    path = scope["path"]
    if path == "/" or any(route.matches(scope)[0] != Match.NONE for route in routes):
        return None  # a route was found and answered 404 itself (a missing static file)
    twin = {**scope, "path": path.rstrip("/") if path.endswith("/") else path + "/"}
    if not any(route.matches(twin)[0] != Match.NONE for route in routes):
        return None
    raw = (scope.get("raw_path") or path.encode()).decode("latin-1")
    location = raw.rstrip("/") if raw.endswith("/") else raw + "/"
    if location.startswith(("//", "/\\")) or not location.startswith("/"):
        return None  # `//host/...` would be another site's URL
    query = scope.get("query_string", b"").decode("latin-1")
    return location + (f"?{query}" if query else "")


def validation_error(exc: RequestValidationError) -> tuple[int, str, str, str]:
    """(status, kind, name, detail): a JSON body that parses but does not fit the request
    model is 422; a bad query or path parameter, or a body that is not JSON, is 400."""
    first = exc.errors()[0] if exc.errors() else {}
    loc = [str(part) for part in first.get("loc", ())]
    where = loc[0] if loc else "parameter"
    name = ".".join(loc[1:])[:MAX_NAME]
    message = str(first.get("msg", "not valid"))[:MAX_NAME]
    if where == "body" and first.get("type") != "json_invalid":
        return 422, "body", name, f"Request body: {name or 'body'}: {message}."
    if where == "body":
        return 400, "body", name, f"The request body is not valid JSON: {message}."
    return 400, "parameter", name, f"Bad request: {where} parameter {name!r}: {message}."


def create_app(db_url: str | None = None, cache_mb: int | None = None) -> FastAPI:
    """The app on a knowledge base; `cache_mb` (default FLAGATLAS_CACHE_MB or 64) bounds the
    cache of rendered pinned pages, 0 turns it off."""
    # No Swagger UI: it loads from a CDN with inline scripts; the schema itself is served.
    app = FlagAtlas(
        title="Flag Atlas",
        version=API_VERSION,
        description=API_DESCRIPTION,
        docs_url=None,
        redoc_url=None,
        openapi_url="/api/openapi.json",
        redirect_slashes=False,  # slash_twin's relative redirect instead, from the 404 handler
    )
    patch_openapi(app)
    url = db_url or database_url()
    engine = make_engine(url, readonly=True)
    app.state.engine = engine
    app.state.db_url = url
    # Fixed at start: FLAGATLAS_INDEX, else beside a SQLite file, else the user's data
    # directory (kb.search.default_index_dir).
    app.state.index_dir = default_index_dir(url)

    def query_stamp() -> str:
        with Session(engine) as session:
            return kb_stamp(session)

    sqlite_path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else None
    stamp = app.state.stamp = CheapStamp(query_stamp, sqlite_path)
    # SchemaMismatch: serving another schema would only answer 500s (an empty database,
    # e.g. the one `flagatlas openapi` describes the routes on, answers 404s).
    check_schema(engine, empty_ok=True)

    @app.exception_handler(NotFound)
    async def not_found(request: Request, exc: NotFound) -> Response:
        links = []
        for k, name in enumerate(exc.suggestions):
            values = exc.values[k] if exc.values is not None else None
            page = exc.pages[k] if exc.pages is not None else None
            url = suggestion_url(request.url.path, exc.kind, name, request.url.query, values, page)
            links.append({"name": name, "url": url or ""})
        flag = exc.name if exc.kind == "flag" else None
        context = pinned_context(request, exc.version, flag) if exc.version else {}
        elsewhere = [json_twin(request, same_page_elsewhere(request, e)) for e in exc.elsewhere]
        return error_response(
            request, 404, exc.detail, links, elsewhere, exc.kind, exc.name, context
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404:
            twin = slash_twin(request)
            if twin is not None:
                return RedirectResponse(twin, status_code=307)
            detail = f"Nothing here: {request.url.path[:MAX_NAME]}"
            links = [{"name": "Home", "url": "/"}, {"name": "Latest flags", "url": "/latest/flags"}]
            return error_response(request, 404, detail, links)
        if exc.status_code == 413:  # a chunked body past the limit (app/limits.py)
            return error_response(request, 413, BODY_TOO_LARGE, kind="body")
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = allowed_methods(request, headers.get("Allow", ""))
        return error_response(request, exc.status_code, str(exc.detail), headers=headers)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> Response:
        status, kind, name, detail = validation_error(exc)
        return error_response(request, status, detail, kind=kind, name=name)

    @app.exception_handler(Exception)
    async def server_error(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error on %s", request.url.path)
        return error_response(request, 500, "Internal error.")

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi_at_root() -> JSONResponse:
        """The description where tools look first, as well as at /api/openapi.json."""
        return JSONResponse(app.openapi())

    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    app.include_router(home.router)
    app.include_router(flags.router)
    app.include_router(compare.router)  # before backends: /backends/{flag}/compare is not a value
    app.include_router(backends.router)
    app.include_router(models.router)
    app.include_router(constraints.router)
    app.include_router(enums.router)
    app.include_router(source.router)
    # Other view modules (search, diff, explain) add one include_router line each below.
    app.include_router(search.router)
    app.include_router(diff.router)
    app.include_router(explain.router)
    app.include_router(env.router)
    app.include_router(docsdrift.router)
    app.include_router(doc_commands.router)
    app.include_router(gpus.router)
    # The source view of a big file is ~1.5 MB of HTML; compressed it is a tenth of that.
    # zstd when the client accepts it (the heavy flag page's 246 KB: 0.33 ms, 19.5 KB),
    # else gzip at level 3, not 5 (1.0 ms against 1.8 ms, 23 KB against 19 KB): this
    # compresses every uncached reply as it goes; cached replies are compressed once per
    # entry and encoding (app/respcache.py).
    # Outermost first (add_middleware wraps, so the last added is outermost): security
    # headers (FlagAtlas) -> limits -> HEAD as GET -> cached pinned pages -> compression ->
    # routes.
    app.add_middleware(Compression, minimum_size=4096, gzip_level=3)
    if cache_mb is None:
        cache_mb = int(os.environ.get("FLAGATLAS_CACHE_MB", "64"))
    if cache_mb > 0:
        app.add_middleware(ResponseCache, stamp=stamp, max_bytes=cache_mb * 1024 * 1024)
    app.add_middleware(HeadAsGet)
    app.add_middleware(Limits)
    # Start-up objects (modules, templates, routes) live for the whole process: move them out
    # of the collector's generations so collections during requests do not walk them again.
    gc.collect()
    gc.freeze()
    return app
