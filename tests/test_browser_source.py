"""The source view in a real browser (Debian's chromium through Playwright): the file header
stays on screen while the code scrolls, identifiers link to their flag and value pages, #L
permalinks land on their line below the header, a click on a line number links to it, and a
phone never scrolls the page sideways (long lines scroll inside the code box, the line
numbers staying put). Screenshots at 1440×900 and 390×844, light and dark."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from browser_support import (
    LAPTOP,
    MARKS,
    PHONE,
    live_server,
    new_page,
    page_width,
    shot,
)
from dashboard_kb import ARGS, RUNNER, build_kb

pytestmark = MARKS


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = f"sqlite:///{build_kb(tmp_path_factory.mktemp('kb') / 'kb.db')}"
    with live_server(url) as base:
        yield base


@pytest.fixture
def context(browser: Any, server: str) -> Iterator[Any]:
    """(size, dark) -> a page that collects console errors."""
    with ExitStack() as stack:

        def make(size: tuple[int, int] = LAPTOP, dark: bool = False) -> Any:
            return stack.enter_context(new_page(browser, server, size[1], size[0], dark))

        yield make


def rect(pg: Any, selector: str) -> dict[str, float]:
    return dict(pg.eval_on_selector(selector, "el => el.getBoundingClientRect().toJSON()"))


def test_header_stays_and_permalinks_land_below_it(context: Any) -> None:
    pg = context(LAPTOP)
    pg.set_viewport_size({"width": 1440, "height": 300})  # the fixture file is short
    pg.goto(f"/v/v0.3.0/source/{ARGS}")
    pg.mouse.wheel(0, 2000)
    pg.wait_for_function("window.scrollY > 300")
    head = rect(pg, ".source-head")
    assert head["top"] == 0 and head["bottom"] > 0  # still on screen, at the top
    assert "server_args.py" in pg.locator(".source-head").inner_text()
    assert (
        pg.locator(".source-head a.gh")
        .get_attribute("href", timeout=1000)
        .startswith("https://github.com/example/sglang-like/blob/")
    )
    # A permalink deep in the file: the line is highlighted and shown below the header.
    pg.goto(f"/v/v0.3.0/source/{ARGS}#L40")
    pg.wait_for_selector("li#L40.hl")
    line, head = rect(pg, "li#L40"), rect(pg, ".source-head")
    assert line["top"] >= head["bottom"] and line["bottom"] <= 300
    assert pg.errors == []


def test_line_number_click_and_identifier_links(context: Any) -> None:
    pg = context(LAPTOP)
    pg.goto(f"/v/v0.3.0/source/{RUNNER}")
    # The number is drawn in the gutter (li::before): a click there links to the line.
    box = rect(pg, "li#L5")
    pg.mouse.click(box["left"] + 20, box["top"] + box["height"] / 2)
    pg.wait_for_function("location.hash === '#L5'")
    assert pg.locator("li.hl").count() == 1
    pg.keyboard.down("Shift")
    box = rect(pg, "li#L7")
    pg.mouse.click(box["left"] + 20, box["top"] + box["height"] / 2)
    pg.keyboard.up("Shift")
    pg.wait_for_function("location.hash === '#L5-L7'")
    assert pg.locator("li.hl").count() == 3
    # A click in the code itself is no permalink.
    pg.locator("li#L13").click(position={"x": 200, "y": 5})
    assert pg.evaluate("location.hash") == "#L5-L7"
    # The cited line says what it cites.
    assert "of --moe-runner-backend" in (pg.locator("li#L5").get_attribute("title") or "")
    shot(pg, "source-lines-selected")
    # server_args.moe_runner_backend goes to the flag page, 'triton' to its value page.
    pg.locator("li#L4").get_by_role("link", name="moe_runner_backend").click()
    pg.wait_for_url("**/v/v0.3.0/flags/--moe-runner-backend")
    pg.go_back()
    pg.locator("li#L5").get_by_role("link", name="'triton'").click()
    pg.wait_for_url("**/v/v0.3.0/backends/--moe-runner-backend/triton")
    assert pg.errors == []


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
@pytest.mark.parametrize("size", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_screens_and_no_sideways_page(context: Any, size: tuple[int, int], dark: bool) -> None:
    pg = context(size, dark)
    pg.goto(f"/v/v0.3.0/source/{RUNNER}#L4")
    pg.wait_for_selector("li#L4.hl")
    assert page_width(pg) <= size[0]
    name = f"source-{'phone' if size == PHONE else 'laptop'}-{'dark' if dark else 'light'}"
    shot(pg, name)
    if size == PHONE:  # line 4 is longer than a phone: the code box scrolls, not the page
        code = pg.locator(".source-box")
        assert code.evaluate("el => el.scrollWidth > el.clientWidth")
        before = rect(pg, "li#L4")
        box = rect(pg, ".source-box")
        gutter = {"x": box["left"] + 2, "y": box["top"] + 2, "width": 50, "height": 200}
        numbers = pg.screenshot(clip=gutter)
        code.evaluate("el => { el.scrollLeft = 400; }")
        pg.wait_for_function("document.querySelector('.source-box').scrollLeft > 0")
        assert rect(pg, "li#L4")["left"] < before["left"]  # the lines moved left...
        assert pg.screenshot(clip=gutter) == numbers  # ...their numbers did not
        assert page_width(pg) <= size[0]
        shot(pg, name + "-scrolled")
    assert pg.errors == []
