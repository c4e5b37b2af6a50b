"""The dashboard in a real browser (Debian's chromium through Playwright): flag page, list
filter, choice -> backend page, citation -> highlighted source line, version switch, copy.
Screenshots land in test-output/browser/ for a human to look at."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from browser_support import MARKS, live_server, new_page, shot
from dashboard_kb import ARGS, RUNNER, build_kb

pytestmark = MARKS


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with live_server(f"sqlite:///{build_kb(tmp_path_factory.mktemp('kb') / 'kb.db')}") as url:
        yield url


@pytest.fixture
def page(browser: Any, server: str) -> Iterator[Any]:
    with new_page(browser, server) as pg:
        yield pg


def in_view(pg: Any, selector: str) -> bool:
    """The element is inside the viewport and not under a sticky header (the site's, or the
    source view's file header)."""
    return bool(
        pg.eval_on_selector(
            selector,
            """el => { const r = el.getBoundingClientRect();
                       let top = 0;
                       for (const h of document.querySelectorAll('header.site, .source-head'))
                         if (getComputedStyle(h).position === 'sticky')
                           top = Math.max(top, h.getBoundingClientRect().bottom);
                       return r.top >= top && r.bottom <= window.innerHeight; }""",
        )
    )


def test_flag_page(page: Any) -> None:
    page.goto("/v/v0.3.0/flags/--moe-runner-backend")
    assert page.locator("h1").inner_text() == "--moe-runner-backend"
    assert page.locator("#choices tbody tr").count() == 4
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


def test_switch_versions_keeps_a_filter_typed_in_the_list(page: Any) -> None:
    """The filter is swapped in by htmx (the header is not re-rendered): the switcher takes
    the pushed URL's query all the same."""
    from playwright.sync_api import expect

    page.goto("/v/v0.3.0/flags")
    page.locator("#flag-filter").press_sequentially("batch", delay=20)
    page.wait_for_url("**/v/v0.3.0/flags?q=batch")
    page.select_option("#switch-version", "v0.1.0")
    page.wait_for_url("**/v/v0.1.0/flags?q=batch")
    expect(page.locator("#flag-filter")).to_have_value("batch")
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
    row = f"li#L{line}"
    page.wait_for_selector(f"{row}.hl")
    assert "raise ValueError" in page.locator(row).inner_text()
    assert in_view(page, row)
    shot(page, "source-cited-line")
    # A range deep in the file: every line highlighted, the first scrolled into view.
    page.set_viewport_size({"width": 1280, "height": 300})
    page.goto(f"/v/v0.3.0/source/{ARGS}#L58-L60")
    page.wait_for_selector("li#L60.hl")
    assert page.locator("li.hl").count() == 3
    assert in_view(page, "li#L58")
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
    page.locator("main").get_by_role("link", name="v0.3.0", exact=True).click()
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
