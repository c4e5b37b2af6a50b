"""A flag page's models in a browser, grouped by the entry point they reach the flag through
(tests/entry_fixtures.py): the feature's own code path (`model_forward_maybe_qbo`) apart from
the shared layer helper that reads the flag, each group listing its models with their chains;
axe-core finds no serious violation there. With FLAGATLAS_REAL_DB, the page the issue
measured: --enable-two-batch-overlap at snapshot-2026-02-01. Screenshots in
test-output/browser/."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from browser_support import LAPTOP, MARKS, PHONE, live_server, new_page, page_width, shot
from entry_fixtures import FLAG, FORWARD, HELPER, HELPER_ONLY, RUNS_FORWARD, build_entry_repo
from test_browser_a11y import axe_violations

from tests.conftest import ingest_into

pytestmark = MARKS

REAL = os.environ.get("FLAGATLAS_REAL_DB")
if REAL:
    PAGE = "/v/snapshot-2026-02-01/flags/--enable-two-batch-overlap"
    FIRST, SECOND = "model_forward_maybe_tbo", "LayerScatterModes"
    # reach the flag only through shared layer code, not the overlapped forward
    NOT_FIRST = ["llama4", "step3_vl", "bailing_moe"]
else:
    PAGE = f"/v/v0.5.0/flags/{FLAG}"
    FIRST, SECOND, NOT_FIRST = FORWARD, HELPER, HELPER_ONLY


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if REAL:
        url = f"sqlite:///{REAL}"
    else:
        root = tmp_path_factory.mktemp("entries")
        db = root / "kb.db"
        ingest_into(build_entry_repo(root), db, jobs=1)
        url = f"sqlite:///{db}"
    with live_server(url) as base:
        yield base


def groups(pg: Any) -> dict[str, list[str]]:
    """Each group's entry point (its heading's code) -> the model names it lists."""
    return pg.eval_on_selector_all(
        "#models section.model-group",
        """els => Object.fromEntries(els.map(s => [
            s.querySelector('h3 code') ? s.querySelector('h3 code').textContent : '',
            [...s.querySelectorAll('li > a > code')].map(c => c.textContent)]))""",
    )


def test_models_are_grouped_by_entry_point(browser: Any, server: str) -> None:
    with new_page(browser, server, height=LAPTOP[1], width=LAPTOP[0]) as pg:
        pg.goto(PAGE)
        found = groups(pg)
        # the feature's own code path first, then the shared helper
        assert list(found)[:2] == [FIRST, SECOND]
        assert not set(NOT_FIRST) & set(found[FIRST])
        assert set(NOT_FIRST) <= set(found[SECOND])
        if not REAL:
            assert found[FIRST] == RUNS_FORWARD
            assert found[SECOND] == sorted(RUNS_FORWARD + HELPER_ONLY)
        first = pg.locator("#models section.model-group").first
        assert str(len(found[FIRST])) in first.locator("h3").inner_text()
        assert "Named like the feature" in first.locator("h3 + p").inner_text()
        # every listed model links to its page and cites where its chain reaches it
        item = first.locator("li").first
        assert item.locator("a code").first.is_visible()
        assert item.locator("span.via").count() == 1
        assert "#L" in item.locator("a.src").inner_text()
        shot(pg, "flag-models-laptop")
        assert pg.errors == []


def test_grouped_models_fit_a_phone_and_pass_axe(browser: Any, server: str) -> None:
    with new_page(browser, server, height=PHONE[1], width=PHONE[0]) as pg:
        pg.goto(PAGE)
        pg.locator("#models").scroll_into_view_if_needed()
        shot(pg, "flag-models-phone")
        assert page_width(pg) <= PHONE[0]
    ctx = browser.new_context(
        viewport={"width": LAPTOP[0], "height": LAPTOP[1]}, base_url=server, bypass_csp=True
    )
    try:
        pg = ctx.new_page()
        pg.goto(PAGE)
        assert axe_violations(pg) == []
    finally:
        ctx.close()
