"""A Hugging Face Hub stand-in for the tests: the file-resolve route huggingface_hub's
`get_hf_file_metadata` and `hf_hub_download` call, served over real HTTP on loopback.

What the installed client (huggingface_hub 2.x) does for a file: HEAD
`/{repo_id}/resolve/{revision}/{filename}` (it needs X-Repo-Commit, an ETag and the
Content-Length; redirects are not needed), then GET of the same URL for the content. Errors
are told apart by X-Error-Code (RepoNotFound, GatedRepo, EntryNotFound, RevisionNotFound),
and an EntryNotFound answer carries X-Repo-Commit (the client caches the file's absence at
that commit). Every request is recorded, to count what reached the hub.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote


@dataclass
class Repo:
    files: dict[str, Any]  # file name -> JSON value (served as its JSON text)
    commit: str = ""
    gated: bool = False

    def __post_init__(self) -> None:
        if not self.commit:
            text = json.dumps(self.files, sort_keys=True).encode()
            self.commit = hashlib.sha1(text).hexdigest()


@dataclass
class Hub:
    repos: dict[str, Repo]
    url: str = ""
    requests: list[tuple[str, str]] = field(default_factory=list)


def _handler(hub: Hub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def do_GET(self) -> None:
            self._answer(body=True)

        def _answer(self, body: bool) -> None:
            hub.requests.append((self.command, self.path))
            parts = unquote(self.path.split("?")[0]).strip("/").split("/")
            if len(parts) < 5 or parts[2] != "resolve":
                return self._error(404, "RepoNotFound")
            repo_id, revision, filename = "/".join(parts[:2]), parts[3], "/".join(parts[4:])
            repo = hub.repos.get(repo_id)
            if repo is None:
                return self._error(404, "RepoNotFound")
            if repo.gated:
                return self._error(401, "GatedRepo")
            if revision not in ("main", repo.commit):
                return self._error(404, "RevisionNotFound")
            if filename not in repo.files:
                return self._error(404, "EntryNotFound", repo.commit)
            data = json.dumps(repo.files[filename]).encode()
            self.send_response(200)
            self.send_header("ETag", '"' + hashlib.sha1(data).hexdigest() + '"')
            self.send_header("X-Repo-Commit", repo.commit)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            if body:
                self.wfile.write(data)

        def _error(self, status: int, code: str, commit: str | None = None) -> None:
            data = json.dumps({"error": code}).encode()
            self.send_response(status)
            self.send_header("X-Error-Code", code)
            if commit:
                self.send_header("X-Repo-Commit", commit)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

    return Handler


@contextmanager
def serve_hub(repos: dict[str, Repo], port: int = 0) -> Iterator[Hub]:
    """The hub stand-in on a loopback port (a free one by default), for the `with` block."""
    hub = Hub(repos)
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(hub))
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()


def closed_port() -> str:
    """The URL of a loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
