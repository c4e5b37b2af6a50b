"""`flagatlas serve --workers N`: N server processes, each with its own listening socket.

Why not `uvicorn --workers`: it binds one socket and every worker accept()s on it. Whichever
worker wakes first takes the connection, and a keep-alive connection then stays with it for
good, so under a load of 32 keep-alive clients one worker held most of them (1.1x the
throughput of one worker, measured). Here each worker has its own socket bound to the same
address with SO_REUSEPORT: the kernel gives each socket its own accept queue and spreads
new connections over them by a hash of the client's address and port, whatever the workers
are doing. (The price: a connection is never moved to an idle worker; with many clients the
hash evens out.)

The parent binds the N sockets itself (so a taken port fails before any fork, and port 0
resolves to one port for all), forks the workers, closes its copies (a socket nobody
accepts on would swallow connections), and restarts a worker that dies. Workers ask the
kernel for SIGTERM when the parent goes (PR_SET_PDEATHSIG), so even a `kill -9` of the
parent leaves no worker serving behind; SIGTERM/SIGINT to the parent stops them cleanly.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

import uvicorn

from app.limits import SERVER_HEADER_LIMIT
from kb.procs import die_with_parent


def uvicorn_config(app: object, **kwargs: object) -> uvicorn.Config:
    """The one place the server's limits are set (used with one worker or many)."""
    return uvicorn.Config(
        app,  # type: ignore[arg-type]
        # h11 buffers at most this much request line + headers; past its default (16 KiB) a
        # long URL got a connection reset. Larger, the app answers 414 (app/limits.py).
        h11_max_incomplete_event_size=SERVER_HEADER_LIMIT,
        timeout_keep_alive=30,
        **kwargs,  # type: ignore[arg-type]
    )


def ensure_index(db_url: str, index_dir: Path | None = None) -> Path:
    """Build the search index before any worker starts if it is missing or was built for
    other versions than the database now holds.

    The index is a local directory (kb.search.default_index_dir): a replica
    pointed at a shared PostgreSQL builds its own from the database on start (and after an
    ingest elsewhere, on its next restart), rather than each worker on its first query.
    """
    import json

    from sqlmodel import Session

    from kb.queries import version_names
    from kb.schema import make_engine
    from kb.search import default_index_dir
    from kb.search_build import build_index

    link = Path(index_dir) if index_dir else default_index_dir(db_url)
    engine = make_engine(db_url, readonly=True)
    try:
        with Session(engine) as session:
            names = set(version_names(session))
    finally:
        engine.dispose()
    try:
        meta = json.loads((link / "meta.json").read_text())
        built = {v["name"] for v in meta["versions"]}
    except (OSError, ValueError, KeyError, TypeError):
        built = None
    if built != names:
        info = build_index(db_url, link, incremental=built is not None)
        print(
            f"Built the search index: {info['docs']} facts, {info['seconds']:.1f}s -> {link}",
            file=sys.stderr,
        )
    return link


def bind_reuseport(host: str, port: int, count: int) -> list[socket.socket]:
    """`count` listening sockets on one address, each with its own accept queue."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sockets: list[socket.socket] = []
    for _ in range(count):
        # IPPROTO_TCP, not 0: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on
        # connections accepted from a socket made with it. Without, a reply written in two
        # parts (headers, then a compressed body) waited for the client's delayed ACK, ~40 ms
        # on every keep-alive request.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        port = sock.getsockname()[1]  # port 0: the first bind picks it, the others follow
        sock.listen(2048)
        sock.set_inheritable(True)
        sockets.append(sock)
    return sockets


def _run_worker(make_app: Callable[[], object], sock: socket.socket, parent: int) -> None:
    die_with_parent(signal.SIGTERM, parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent; it stops us
    server = uvicorn.Server(uvicorn_config(make_app(), log_level="warning"))
    server.run(sockets=[sock])
    os._exit(0)


def serve_workers(
    make_app: Callable[[], object],
    host: str,
    port: int,
    workers: int,
    on_ready: Callable[[int], None] = lambda port: None,
) -> None:
    """Run `workers` forked servers on host:port until SIGTERM/SIGINT; restart dead ones."""
    sockets = bind_reuseport(host, port, workers)
    bound = sockets[0].getsockname()[1]
    parent = os.getpid()
    stopping = False
    children: dict[int, int] = {}  # pid -> worker slot
    started: dict[int, float] = {}  # slot -> when its current process started

    def spawn(slot: int, sock: socket.socket) -> None:
        pid = os.fork()
        if pid == 0:
            try:
                _run_worker(make_app, sock, parent)
            finally:
                os._exit(1)
        children[pid] = slot
        started[slot] = time.monotonic()
        sock.close()  # the worker owns it now

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for slot, sock in enumerate(sockets):
        spawn(slot, sock)
    print(f"Serving on http://{host}:{bound} with {workers} workers", file=sys.stderr, flush=True)
    on_ready(bound)
    while children:
        try:
            pid, _status = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        slot = children.pop(pid, -1)
        if slot < 0 or stopping:
            continue
        # A worker died on its own: start another on a fresh socket, not in a tight loop.
        if time.monotonic() - started[slot] < 1.0:
            time.sleep(1.0)
        spawn(slot, bind_reuseport(host, bound, 1)[0])
