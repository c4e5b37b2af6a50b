"""The header search box in a real browser (Debian's chromium through Playwright): `/`
focuses it, results appear as you type, Enter opens the top hit, and the diff page renders.
Screenshots land in test-output/browser/ for a human to look at."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from browser_support import MARKS, chromium, live_server, new_page
from browser_support import shot as full_shot
from planted_kb import SEARCH_NEW, SEARCH_OLD, build_kb
from playwright.sync_api import expect

from kb.search import default_index_dir
from kb.search_build import build_index

pytestmark = MARKS


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = build_kb(
        tmp_path_factory.mktemp("kb") / "kb.db", [("s1", SEARCH_OLD), ("s2", SEARCH_NEW)]
    )
    build_index(url, default_index_dir(url))
    with live_server(url) as base:
        yield base


@pytest.fixture(scope="module")
def page(server: str) -> Iterator[Any]:
    with chromium() as browser, new_page(browser, server) as pg:
        yield pg


def shot(pg: Any, name: str) -> None:
    full_shot(pg, name, full_page=True)


def test_slash_focuses_typing_shows_results_enter_opens_top_hit(page: Any) -> None:
    page.goto("/v/s2/flags")
    page.locator("body").click(position={"x": 5, "y": 400})
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "search"
    page.keyboard.type("moe runnr", delay=30)  # a typo, typed like a person
    top = page.locator("#search-results a[data-top-hit]")
    # Answers to the half-typed query ("moe") may arrive first: wait for the full query's.
    expect(top).to_contain_text("--moe-runner-backend", timeout=15_000)
    assert page.locator("#search-results mark").count() > 0
    shot(page, "search-dropdown")
    page.keyboard.press("Enter")
    page.wait_for_url("**/v/s2/flags/--moe-runner-backend")
    assert not page.errors, page.errors


def test_enter_before_results_arrive_still_opens_top_hit(page: Any) -> None:
    page.goto("/v/s1/flags")
    page.locator("#search").fill("nvls")  # no debounced request yet: search.js asks the API
    page.locator("#search").press("Enter")
    page.wait_for_url("**/v/s1/flags/--enable-nccl-nvls")
    assert not page.errors, page.errors


def test_search_page_and_diff_page_render(page: Any) -> None:
    page.goto("/search?q=flashinfer_cutlass")
    assert page.locator("mark", has_text="flashinfer_cutlass").count() >= 1
    shot(page, "search-page")
    page.goto("/diff/s1...s2")
    assert "1 removed" in page.locator("nav.diff-counts").inner_text()
    shot(page, "diff-page")
    page.select_option("select[name=from]", "s2")
    page.select_option("select[name=to]", "s1")
    page.get_by_role("button", name="Compare").click()
    page.wait_for_url("**/diff/s2...s1")
    assert "1 added" in page.locator("nav.diff-counts").inner_text()
    assert not page.errors, page.errors
