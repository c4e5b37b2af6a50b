"""The dashboard in a real browser (Debian's chromium through Playwright): flag page, list
filter, choice -> backend page, citation -> highlighted source line, version switch, copy.
Screenshots land in test-output/browser/ for a human to look at."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from dashboard_kb import ARGS, RUNNER, build_kb

from app.main import create_app

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = Path(__file__).resolve().parent.parent / "test-output" / "browser"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin"),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = build_kb(tmp_path_factory.mktemp("kb") / "kb.db")
    port = free_port()
    config = uvicorn.Config(create_app(f"sqlite:///{db}"), port=port, log_level="warning")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=5)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield b
        b.close()


@pytest.fixture
def page(browser: Any, server: str) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 800}, base_url=server)
    pg = context.new_page()
    errors: list[str] = []
    # CSP violations and script errors surface as console errors.
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.errors = errors
    yield pg
    context.close()


def shot(pg: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(SHOTS / f"{name}.png"))


def in_view(pg: Any, selector: str) -> bool:
    """The element is inside the viewport and not under the sticky header."""
    return bool(
        pg.eval_on_selector(
            selector,
            """el => { const r = el.getBoundingClientRect();
                       const h = document.querySelector('header.site').getBoundingClientRect();
                       const top = getComputedStyle(document.querySelector('header.site'))
                                     .position === 'sticky' ? h.bottom : 0;
                       return r.top >= top && r.bottom <= window.innerHeight; }""",
        )
    )


def test_flag_page(page: Any) -> None:
    page.goto("/v/v0.3.0/flags/--moe-runner-backend")
    assert page.locator("h1").inner_text() == "--moe-runner-backend"
    assert page.locator("#choices li").count() == 4
    assert page.locator("#enum").get_by_text("MoeRunnerBackend").is_visible()
    shot(page, "flag-page")
    assert page.errors == []


def test_filter_flag_list_without_reload(page: Any) -> None:
    from playwright.sync_api import expect

    page.goto("/v/v0.3.0/flags")
    total = page.locator("ul.flags li").count()
    page.evaluate("window.__sameDocument = true")
    page.locator("#flag-filter").press_sequentially("batch", delay=20)
    expect(page.locator("ul.flags li")).to_have_count(1)
    names = page.locator("ul.flags li a.syn").all_inner_texts()
    assert total > 1 and names == ["--enable-two-batch-overlap (default false)"]
    assert page.evaluate("window.__sameDocument") is True  # htmx swap, not a reload
    page.wait_for_url("**/v/v0.3.0/flags?q=batch")
    shot(page, "flags-filtered")
    assert page.errors == []


def test_choice_to_backend_page(page: Any) -> None:
    page.goto("/v/v0.3.0/flags/--moe-runner-backend")
    page.locator("#choices").get_by_role("link", name="flashinfer_cutlass").click()
    page.wait_for_url("**/v/v0.3.0/backends/--moe-runner-backend/flashinfer_cutlass")
    assert page.locator(".handler").count() == 1
    assert "flashinfer_cutlass" in page.locator(".handler tr.hit").inner_text()
    shot(page, "backend-value")


def test_citation_to_highlighted_source_line(page: Any) -> None:
    page.goto("/v/v0.3.0/flags/--enable-two-batch-overlap")
    link = page.locator(".constraint .cite a.src").first
    href = link.get_attribute("href")
    assert href is not None and href.startswith(f"/v/v0.3.0/source/{ARGS}#L")
    line = href.rsplit("#L", 1)[1].split("-")[0]
    link.click()
    page.wait_for_url(f"**/source/{ARGS}#L{line}*")
    row = f"tr#L{line}"
    page.wait_for_selector(f"{row}.hl")
    assert "raise ValueError" in page.locator(row).inner_text()
    assert in_view(page, row)
    shot(page, "source-cited-line")
    # A range deep in the file: every line highlighted, the first scrolled into view.
    page.set_viewport_size({"width": 1280, "height": 300})
    page.goto(f"/v/v0.3.0/source/{ARGS}#L58-L60")
    page.wait_for_selector("tr#L60.hl")
    assert page.locator("tr.hl").count() == 3
    assert in_view(page, "tr#L58")
    assert page.errors == []


def test_switch_versions_on_a_flag_page(page: Any) -> None:
    page.goto("/v/v0.3.0/flags/--pp-size")
    page.select_option("#switch-version", "v0.1.0")
    page.wait_for_url("**/v/v0.1.0/flags/--pp-size")
    assert page.locator("h1").inner_text() == "--pp-size"
    # A flag the other version lacks: said so, with a link to the nearest version having it.
    page.goto("/v/v0.3.0/flags/--fp4-gemm-backend")
    page.select_option("#switch-version", "v0.1.0")
    page.wait_for_url("**/v/v0.1.0/flags/--fp4-gemm-backend")
    assert "does not exist in v0.1.0" in page.locator("main").inner_text()
    shot(page, "switch-absent")
    page.locator("main").get_by_role("link", name="v0.3.0").click()
    page.wait_for_url("**/v/v0.3.0/flags/--fp4-gemm-backend")


def test_copy_buttons(page: Any) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto("/v/v0.3.0/flags/--enable-two-batch-overlap")
    button = page.locator(".constraint").get_by_role("button", name="Copy as Markdown")
    button.click()
    copied = button.get_attribute("data-copied") or ""
    assert copied.startswith("`--enable-two-batch-overlap` raises when `")
    assert "](https://github.com/example/sglang-like/blob/" in copied
    permalink = page.locator(".constraint").get_by_role("button", name="Copy permalink")
    permalink.click()
    assert (permalink.get_attribute("data-copied") or "").startswith(
        page.evaluate("location.origin") + "/v/v0.3.0/source/"
    )
    assert page.errors == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_phone_and_dark_screenshots(browser: Any, server: str, scheme: str) -> None:
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, base_url=server, color_scheme=scheme
    )
    pg = context.new_page()
    for name, url in [
        ("flag", "/v/v0.3.0/flags/--moe-runner-backend"),
        ("constraints", "/v/v0.3.0/constraints"),
        ("source", f"/v/v0.3.0/source/{RUNNER}#L4"),
    ]:
        pg.goto(url)
        # Nothing wider than the phone: no sideways scrolling of the page itself.
        assert pg.evaluate("document.documentElement.scrollWidth") <= 390
        shot(pg, f"phone-{scheme}-{name}")
    context.close()
