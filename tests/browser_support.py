"""Shared scaffolding of the browser tests: a live server on a free port, Debian's chromium
through Playwright (never a downloaded browser), pages that collect console errors (CSP
violations surface there), and screenshots under test-output/browser/."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from app.main import create_app

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = Path(__file__).resolve().parent.parent / "test-output" / "browser"

MARKS = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin"),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def live_server(db_url: str) -> Iterator[str]:
    """The app over `db_url`, served by uvicorn in a thread; yields its base URL."""
    port = free_port()
    config = uvicorn.Config(create_app(db_url), host="127.0.0.1", port=port, log_level="warning")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=5)


@contextmanager
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield browser
        browser.close()


@contextmanager
def new_page(
    browser: Any, base_url: str, height: int = 800, width: int = 1280, dark: bool = False
) -> Iterator[Any]:
    """A page whose `errors` list collects console errors and uncaught exceptions."""
    context = browser.new_context(
        viewport={"width": width, "height": height},
        base_url=base_url,
        color_scheme="dark" if dark else "light",
    )
    pg = context.new_page()
    errors: list[str] = []

    def on_console(message: Any) -> None:
        # htmx logs a request it cancels as an error: the search box's hx-sync="this:replace"
        # cancels the previous keystroke's request on purpose when answers are slow.
        if message.type == "error" and "htmx:sendAbort" not in message.text:
            errors.append(message.text)

    pg.on("console", on_console)
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.errors = errors
    yield pg
    context.close()


# The sizes people read on: a laptop and a phone.
LAPTOP = (1440, 900)
PHONE = (390, 844)


def shot(pg: Any, name: str, full_page: bool = False) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(SHOTS / f"{name}.png"), full_page=full_page)


def page_width(pg: Any) -> int:
    """The document's scroll width: more than the viewport means it scrolls sideways."""
    return int(pg.evaluate("document.documentElement.scrollWidth"))
