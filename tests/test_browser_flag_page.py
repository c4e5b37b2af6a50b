"""The flag page read in a browser: summary, choices and the constraint groups' headings
above the fold (two laptop screens), an "On this page" navigation, collapsed code and
condition paths, the timeline's ranges, and no sideways scroll on a phone. Runs on the real
knowledge base when FLAGATLAS_REAL_DB is set (the page the issue measured), else on the
fixture. Screenshots at 1440x900 and 390x844, light and dark, in test-output/browser/."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from browser_support import (
    LAPTOP,
    MARKS,
    PHONE,
    SHOTS,
    live_server,
    new_page,
    page_width,
    shot,
)
from dashboard_kb import build_kb
from planted_kb import build_kb as build_planted
from planted_kb import flag

pytestmark = MARKS

REAL = os.environ.get("FLAGATLAS_REAL_DB")
VERSION = "snapshot-2026-02-01" if REAL else "v0.3.0"
# The fixture's flag with choices, an enum-free list and a constraint site to group.
FLAG = f"/v/{VERSION}/flags/" + ("--moe-runner-backend" if REAL else "--moe-a2a-backend")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = (
        f"sqlite:///{REAL}"
        if REAL
        else f"sqlite:///{build_kb(tmp_path_factory.mktemp('kb') / 'kb.db')}"
    )
    with live_server(url) as base:
        yield base


def page_bottom(pg: Any, selector: str) -> float:
    """The largest document y (px from the top of the page) of the elements' bottoms."""
    return float(
        pg.eval_on_selector_all(
            selector,
            "els => Math.max(...els.map(e => e.getBoundingClientRect().bottom + window.scrollY))",
        )
    )


def test_summary_choices_and_group_headings_fit_two_laptop_screens(
    browser: Any, server: str
) -> None:
    width, height = LAPTOP
    with new_page(browser, server, height=height, width=width) as pg:
        pg.goto(FLAG)
        headings = "#constraints h3, #constraints details.vgroup > summary"
        assert pg.locator("#constraints h3").count() >= (2 if REAL else 1)
        for selector in ("#summary", "#choices", "nav.toc", headings):
            bottom = page_bottom(pg, selector)
            assert bottom <= 2 * height, f"{selector} ends at {bottom:.0f} px"
        # Code and full condition paths are one click away, not on the page by default.
        assert not pg.locator("#constraints details.code-toggle table.code").first.is_visible()
        first = pg.locator("#constraints details.vgroup").first
        if not first.evaluate("d => d.open"):  # few sites: the groups start open
            first.locator("> summary").click()
        cond = first.locator("details.cond-path").first
        cond.locator("> summary").click()
        assert cond.locator("code.cond").first.is_visible()
        assert pg.errors == []


def test_on_this_page_links_to_every_section(browser: Any, server: str) -> None:
    with new_page(browser, server, height=LAPTOP[1], width=LAPTOP[0]) as pg:
        pg.goto(FLAG)
        hrefs = pg.locator("nav.toc a").evaluate_all("els => els.map(e => e.hash)")
        assert {"#summary", "#choices", "#constraints", "#usages", "#history"} <= set(hrefs)
        for anchor in hrefs:
            assert pg.locator(anchor).count() == 1, anchor
        pg.locator("nav.toc a[href='#history']").click()
        assert pg.locator("#history h2").is_visible()


def test_timeline_ranges_cover_every_version_and_link_there(browser: Any, server: str) -> None:
    with new_page(browser, server) as pg:
        pg.goto(FLAG)
        versions = pg.locator("#switch-version option").count()
        assert f"{versions} versions" in pg.locator("#timeline h2").inner_text()
        ranges = pg.locator("#timeline .tl-list li")
        counts = ranges.locator("span.muted").all_text_contents()
        assert sum(int(c.strip("()").split()[0]) for c in counts) == versions
        # the drawing is a picture of the list (hidden from screen readers), this version marked
        assert pg.locator("#timeline .tl-lanes").get_attribute("aria-hidden") == "true"
        assert pg.locator("#timeline .tl-lanes .tl-here").count() >= 2
        assert pg.locator("#timeline .tl-list li.here").count() == 1
        # A range links to the flag at its first version.
        if not pg.locator("#timeline .tl-list").evaluate("d => d.open"):  # many ranges: folded
            pg.locator("#timeline .tl-list > summary").click()
        link = ranges.locator("a").first
        first = link.inner_text()
        link.click()
        pg.wait_for_url(f"**/v/{first}/flags/**")
        assert pg.errors == []


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
@pytest.mark.parametrize("size", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_flag_page_screens(browser: Any, server: str, size: tuple[int, int], dark: bool) -> None:
    width, height = size
    with new_page(browser, server, height=height, width=width, dark=dark) as pg:
        pg.goto(FLAG)
        name = f"flag-page-{'laptop' if width > 800 else 'phone'}-{'dark' if dark else 'light'}"
        shot(pg, name)
        shot(pg, name + "-full", full_page=True)
        for part in ("choices", "constraints", "history"):
            pg.locator(f"#{part}").screenshot(path=str(SHOTS / f"{name}-{part}.png"))
        assert page_width(pg) <= width  # never scrolls sideways
        assert pg.errors == []


def test_constraint_graph_links_flags_and_sites(browser: Any, server: str) -> None:
    with new_page(browser, server, height=LAPTOP[1], width=LAPTOP[0]) as pg:
        pg.goto(FLAG)
        graph = pg.locator("#related figure.cgraph")
        nodes = graph.locator("svg a.node")
        assert nodes.count() >= (2 if REAL else 1)
        edges = graph.locator("svg a.edge")
        kinds = set(edges.evaluate_all("els => els.map(e => e.getAttribute('class'))"))
        assert {"edge k-raise", "edge k-assert", "edge k-override"} & kinds
        # Each edge says in words what it is (not colour alone) and opens its site.
        title = edges.first.locator("title").text_content() or ""
        assert title.startswith(FLAG.rsplit("/", 1)[1] + " – ")
        assert graph.locator("ul.edge-list li").count() == edges.count()
        href = edges.first.get_attribute("href") or ""
        assert "/source/" in href and "#L" in href
        pg.locator("#related").screenshot(path=str(SHOTS / "flag-graph-laptop.png"))
        assert pg.errors == []


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
@pytest.mark.parametrize("size", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_skip_link_and_old_version_banner(
    browser: Any, server: str, size: tuple[int, int], dark: bool
) -> None:
    width, height = size
    with new_page(browser, server, height=height, width=width, dark=dark) as pg:
        pg.goto("/v/v0.1.0/flags" if not REAL else "/v/v0.5.1/flags")
        pg.keyboard.press("Tab")
        skip = pg.locator("a.skip-link")
        assert skip.evaluate("e => e === document.activeElement") and skip.is_visible()
        name = f"old-version-{'laptop' if width > 800 else 'phone'}-{'dark' if dark else 'light'}"
        shot(pg, name)
        pg.keyboard.press("Enter")
        assert pg.evaluate("document.activeElement.id") == "main"
        banner = pg.locator(".notice.old-version")
        assert "not the newest version" in banner.inner_text()
        banner.get_by_role("link").click()
        pg.wait_for_url("**/flags")
        assert pg.locator(".notice.old-version").count() == 0
        assert page_width(pg) <= width
        assert pg.errors == []


# A flag in 100 versions that changed at three of them (synthetic).
STRIP = [f"v1.{i}" for i in range(100)]


@pytest.fixture(scope="module")
def strip_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    def version(i: int) -> dict[str, Any]:
        default = 1 if i < 40 else 2
        knob = flag("--knob", type="int", default=default, choices=None if i < 70 else [1, 2])
        return {"flags": [knob] if i >= 5 else [], "constraints": [], "enums": {}}

    path = tmp_path_factory.mktemp("strip") / "kb.db"
    with live_server(build_planted(path, [(v, version(i)) for i, v in enumerate(STRIP)])) as base:
        yield base


def test_timeline_reads_as_ranges_on_a_phone(browser: Any, strip_server: str) -> None:
    """100 versions, three changes: four ranges, listed in words (no hovering), drawn
    across the phone's width with labels at their own size, one tab stop per range."""
    width, height = PHONE
    with new_page(browser, strip_server, height=height, width=width) as pg:
        pg.goto(f"/v/{STRIP[-1]}/flags/--knob")
        items = pg.locator("#timeline .tl-list li")
        assert items.count() == 4 and pg.locator("#timeline .tl-list").evaluate("d => d.open")
        words = [" ".join(t.split()) for t in items.all_inner_texts()]
        assert words[0].startswith("v1.0 – v1.4 (5 versions): absent")
        assert words[1].startswith("v1.5 – v1.39 (35 versions): default 1") and "added" in words[1]
        assert words[2].startswith("v1.40 – v1.69 (30 versions): default 2")
        assert "default 1 → 2" in words[2]
        assert (
            words[3].startswith("v1.70 – v1.99 (30 versions): default 2") and "choices" in words[3]
        )
        lanes = pg.locator("#timeline .tl-lanes svg.tl-lane")
        for box in lanes.evaluate_all("els => els.map(e => e.getBoundingClientRect().width)"):
            assert box >= width * 0.6  # the lanes take the phone's width
        size = pg.locator("#timeline .tl-axis text").first.evaluate(
            "e => parseFloat(getComputedStyle(e).fontSize)"
        )
        assert size >= 11
        assert pg.locator("#timeline a").count() == 3  # the absent range has no page
        pg.locator("#timeline").screenshot(path=str(SHOTS / "flag-timeline-phone.png"))
        items.nth(2).locator("a").click()
        pg.wait_for_url("**/v/v1.40/flags/--knob")
        assert page_width(pg) <= width
        assert pg.errors == []


def test_choices_across_versions_grid(browser: Any, server: str) -> None:
    with new_page(browser, server, height=PHONE[1], width=PHONE[0]) as pg:
        pg.goto(f"/v/{VERSION}/flags/--moe-runner-backend")
        grid = pg.locator("table.choice-grid")
        columns = grid.locator("thead th").count() - 1
        assert columns >= 2
        # A value added later: absent (in words, not colour alone) in the first column.
        newest = grid.locator("tbody tr").last
        assert "not a choice" in newest.locator("td").first.inner_text() or (
            newest.locator("td").first.text_content() or ""
        ).endswith("not a choice")
        assert "a choice" in (newest.locator("td").last.text_content() or "")
        grid.locator("thead a").first.click()
        pg.wait_for_url("**/flags/--moe-runner-backend")
        assert page_width(pg) <= PHONE[0]
        pg.go_back()
        pg.locator("#choice-grid").screenshot(path=str(SHOTS / "choice-grid-phone.png"))
        assert pg.errors == []
