"""The diff's pairing and folding read in a browser, on a knowledge base ingested from a
synthetic repository (tests/diff_moves_repos.py): a moved or reworded constraint site is one
entry whose inline diff marks what changed with a symbol or strike and a word, the
refactors are one click away, the filter works as a plain form, axe-core finds no serious
violation (light and dark, every fold open). Screenshot in test-output/browser/."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
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

from tests.diff_moves_repos import MOVED, NEW_WORDS, build_moves_kb

pytestmark = MARKS

URL = "/diff/v2.0.0...v2.1.0"
AXE = Path(__file__).resolve().parent.parent / "test-output" / "axe.min.js"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = build_moves_kb(tmp_path_factory.mktemp("moveskb"))
    with live_server(f"sqlite:///{db}") as base:
        yield base


def test_moved_site_is_one_entry_with_an_inline_diff(browser: Any, server: str) -> None:
    with new_page(browser, server, height=LAPTOP[1], width=LAPTOP[0]) as pg:
        pg.goto(URL)
        pg.locator("nav.diff-counts").get_by_role("link", name="moved or reworded").click()
        pg.wait_for_url("**#constraints-moved")
        moved = pg.locator("ol.moved > li")
        assert moved.count() == 2 and moved.first.is_visible()
        entry = moved.filter(has_text=MOVED)
        assert "moved" in entry.locator(".badge").nth(1).inner_text()
        # From one method to the other, both cited.
        assert entry.locator("code.fn").all_inner_texts() == [
            "ServerArgs._handle_parallelism",
            "ServerArgs._handle_memory",
        ]
        assert entry.locator("a.src").count() == 2
        # What the test gained, inserted in place (not colour alone: <ins> is read as such).
        assert entry.locator(".cond-diff ins").inner_text() == "self.page_size is not None and"
        reworded = moved.filter(has_text="Tensor parallelism")
        assert reworded.locator(".badge").nth(1).inner_text() == "reworded"
        assert reworded.locator(".message del").inner_text() == "supported."
        assert reworded.locator(".message ins").inner_text() == "supported yet."
        assert NEW_WORDS.split()[0] in reworded.inner_text()
        # Neither shows up as added or removed.
        assert "None." in pg.locator("#constraints-added + p").inner_text()
        SHOTS.mkdir(parents=True, exist_ok=True)
        pg.locator("#constraints").screenshot(path=str(SHOTS / "diff-moves.png"))
        assert pg.errors == []


def test_refactors_one_click_away_and_the_filter(browser: Any, server: str) -> None:
    with new_page(browser, server, height=PHONE[1], width=PHONE[0]) as pg:
        pg.goto(URL)
        folded = pg.locator("details.folded")
        sites = folded.locator("ol.csites > li")
        assert sites.count() == 4 and not sites.first.is_visible()
        folded.locator("> summary").click()
        for cause in folded.locator("details.cgroup").all():
            if not cause.evaluate("d => d.open"):  # a short one starts open
                cause.locator("> summary").click()
        assert sites.first.is_visible() and sites.last.is_visible()
        pg.get_by_label("Flag").fill("page-size")
        pg.get_by_role("button", name="Filter").click()
        pg.wait_for_url("**flag=page-size**")
        assert pg.locator("#filtered").is_visible()
        assert pg.locator("ol.moved > li").count() == 1
        assert page_width(pg) <= PHONE[0]
        shot(pg, "diff-moves-filtered-phone", full_page=True)
        assert pg.errors == []


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_axe_no_serious_or_critical_violations(browser: Any, server: str, dark: bool) -> None:
    if not AXE.exists():
        pytest.fail(f"{AXE} missing: run `make install` (copies axe-core from node_modules)")
    ctx = browser.new_context(
        viewport={"width": LAPTOP[0], "height": LAPTOP[1]},
        base_url=server,
        color_scheme="dark" if dark else "light",
        bypass_csp=True,  # lets the test inject axe
    )
    try:
        pg = ctx.new_page()
        for url in (URL, URL + "?topic=Memory"):
            pg.goto(url)
            pg.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
            pg.add_script_tag(path=str(AXE))
            result = pg.evaluate(
                "async () => await axe.run(document, {resultTypes: ['violations']})"
            )
            bad = [
                f"{v['id']} ({v['impact']}): {node['target']}"
                for v in result["violations"]
                if v["impact"] in ("serious", "critical")
                for node in v["nodes"]
            ]
            assert bad == [], url
    finally:
        ctx.close()
