"""The lists on a phone: facets, table and pager never scroll sideways at 390 px and flag
names are not broken mid-name; screenshots under test-output/browser/. With
FLAGATLAS_REAL_DB set, the same checks run on the real knowledge base's biggest list."""

from __future__ import annotations

import os
from typing import Any

import pytest
from browser_support import MARKS, PHONE, live_server, new_page, page_width, shot
from dashboard_kb import build_kb

pytestmark = MARKS

REAL = os.environ.get("FLAGATLAS_REAL_DB", "")
# A flag name wraps only where it is allowed to: one line box per <code> in a flag link.
NAMES = "a.flag code, .facet code, code.fn, .facet a"
ONE_LINE_NAMES = f"""() => [...document.querySelectorAll('{NAMES}')]
  .filter(el => el.getClientRects().length > 1).map(el => el.textContent)"""


def check(browser: Any, base: str, urls: list[str], tag: str) -> None:
    for dark in (False, True):
        with new_page(browser, base, width=PHONE[0], height=PHONE[1], dark=dark) as pg:
            for url in urls:
                pg.goto(url)
                assert pg.locator(".facet").count() >= 1, url
                assert page_width(pg) <= 390, url
                assert pg.evaluate(ONE_LINE_NAMES) == [], url
                name = url.split("/")[-1].split("?")[0]
                shot(pg, f"lists-{tag}-{name}-{'dark' if dark else 'light'}")
            assert pg.errors == []


def test_lists_fit_a_phone(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    db = build_kb(tmp_path_factory.mktemp("kb") / "kb.db")
    with live_server(f"sqlite:///{db}") as base:
        urls = [
            "/v/v0.3.0/constraints?per_page=2",
            "/v/v0.3.0/flags",
            "/v/v0.2.0/constraints?flag=--old-cache",  # the note on a deprecated flag
        ]
        check(browser, base, urls, "fixture")


@pytest.mark.skipif(not REAL, reason="set FLAGATLAS_REAL_DB to check the real lists")
def test_real_lists_fit_a_phone(browser: Any) -> None:
    with live_server(f"sqlite:///{REAL}") as base:
        urls = [
            "/v/snapshot-2026-02-01/constraints",
            "/v/snapshot-2026-02-01/flags",
            # a note naming the two flags a deprecated one is replaced by, and a site cited
            # by a long path (pd_disaggregation_hook.py#L77 made the page 468 px wide)
            "/v/snapshot-2026-07-01/constraints?flag=--disable-cuda-graph&kind=override",
        ]
        check(browser, base, urls, "real")


# Pages whose long conditions, messages and comments once pushed a phone page sideways; a
# table too wide for the phone scrolls inside its own .table-scroll box instead.
WIDE_ENOUGH = """() => [...document.querySelectorAll('.table-scroll > table')]
  .map(t => t.parentElement.clientWidth)"""


def check_pages(browser: Any, base: str, urls: list[str], tag: str) -> None:
    with new_page(browser, base, width=PHONE[0], height=PHONE[1]) as pg:
        for url in urls:
            pg.goto(url)
            assert page_width(pg) <= 390, url
            assert all(w <= 390 for w in pg.evaluate(WIDE_ENOUGH)), url
            name = url.split("/", 3)[-1].replace("/", "-").split("?")[0]
            shot(pg, f"phone-{tag}-{name}")
        assert pg.errors == []


def test_pages_with_long_words_fit_a_phone(
    browser: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    db = build_kb(tmp_path_factory.mktemp("kb") / "kb.db", long_words=True)
    with live_server(f"sqlite:///{db}") as base:
        urls = [
            "/v/v0.3.0/env",  # a comment opening with a 90-character rule
            "/v/v0.3.0/backends/--moe-a2a-backend/none",  # a message with a long token
            "/v/v0.3.0/backends/--moe-a2a-backend/compare?values=none,deepep",
        ]
        check_pages(browser, base, urls, "fixture")
        # The compare table keeps readable columns (it scrolls in its box, not the page).
        with new_page(browser, base, width=PHONE[0], height=PHONE[1]) as pg:
            pg.goto(urls[2])
            cells = pg.locator("table.compare td").evaluate_all(
                "tds => tds.map(td => td.getBoundingClientRect().width)"
            )
            assert cells and min(cells) >= 200, cells


@pytest.mark.skipif(not REAL, reason="set FLAGATLAS_REAL_DB to check the real pages")
def test_real_pages_fit_a_phone(browser: Any) -> None:
    with live_server(f"sqlite:///{REAL}") as base:
        # Before: 1191 px (a 917 px notes column), 462 px, 534 px and 1211 px wide.
        urls = [
            "/v/snapshot-2026-07-01/env",
            "/v/snapshot-2026-07-01/backends/--moe-a2a-backend/deepep",
            "/v/snapshot-2026-07-01/backends/--attention-backend/fa3",
            "/v/snapshot-2026-07-01/backends/--attention-backend/compare?values=fa3,triton",
        ]
        check_pages(browser, base, urls, "real")
