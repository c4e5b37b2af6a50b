"""The version switcher goes only on an explicit choice (WCAG 3.2.2 On Input): arrow keys on
the closed select move through versions without loading each one; Enter, Go, leaving the
select after a change, or a pick with the pointer goes. Without JS the select and its Go
button work alone."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from browser_support import MARKS, live_server, new_page
from dashboard_kb import WEB_URL, build_kb
from sqlmodel import Session

from kb.schema import Version, make_engine

pytestmark = MARKS

START = "/v/v0.3.0/flags"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = f"sqlite:///{build_kb(tmp_path_factory.mktemp('kb') / 'kb.db')}"
    # A fourth, older version: the options run v0.3.0, v0.2.0, v0.1.0, v0.0.9.
    with Session(make_engine(url)) as session:
        session.add(
            Version(
                name="v0.0.9",
                commit="9" * 40,
                date=datetime(2023, 3, 1, tzinfo=UTC),
                sort_key="v0.0.9",
                position=-1,
                era=1,
                extractor_version=1,
                web_url=WEB_URL,
                ingested_at=datetime(2026, 1, 1, tzinfo=UTC),
            )
        )
        session.commit()
    with live_server(url) as base:
        yield base


def options(pg: Any) -> list[str]:
    return pg.locator("#switch-version option").evaluate_all("os => os.map(o => o.value)")


def test_arrow_keys_then_enter(browser: Any, server: str) -> None:
    with new_page(browser, server) as pg:
        pg.goto(START)
        assert options(pg) == ["v0.3.0", "v0.2.0", "v0.1.0", "v0.0.9"]
        go = pg.locator("form.switcher .go")
        assert not go.is_visible()
        select = pg.locator("#switch-version")
        select.focus()
        for _ in range(3):
            select.press("ArrowDown")
        pg.wait_for_timeout(300)  # a navigation the keys started would have begun by now
        assert pg.url.endswith(START)
        assert select.input_value() == "v0.0.9"
        assert go.is_visible()  # the pending change says how to go
        select.press("Enter")
        pg.wait_for_url("**/v/v0.0.9/flags")
        assert pg.errors == []


def test_arrow_key_alone_stays_and_leaving_goes(browser: Any, server: str) -> None:
    with new_page(browser, server) as pg:
        pg.goto(START)
        select = pg.locator("#switch-version")
        select.focus()
        select.press("ArrowDown")
        pg.wait_for_timeout(500)
        assert pg.url.endswith(START)
        select.press("ArrowUp")  # back to the page's own version: nothing to go to
        select.press("Enter")
        pg.wait_for_timeout(300)
        assert pg.url.endswith(START)
        select.press("ArrowDown")
        pg.locator("#search").focus()  # leaving the select after a change is a choice
        pg.wait_for_url("**/v/v0.2.0/flags")
        assert pg.errors == []


def test_pointer_pick_goes(browser: Any, server: str) -> None:
    with new_page(browser, server) as pg:
        pg.goto(START)
        pg.locator("#switch-version").select_option("v0.1.0")
        pg.wait_for_url("**/v/v0.1.0/flags")


def test_without_js_the_go_button_goes(browser: Any, server: str) -> None:
    context = browser.new_context(java_script_enabled=False, base_url=server)
    try:
        pg = context.new_page()
        pg.goto(START)
        go = pg.locator("form.switcher .go")
        assert go.is_visible()
        select = pg.locator("#switch-version")
        select.focus()
        select.press("ArrowDown")
        assert pg.url.endswith(START)
        go.click()
        pg.wait_for_url("**/v/v0.2.0/flags")
    finally:
        context.close()
