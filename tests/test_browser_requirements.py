"""A value's requirements in a real browser (Debian's chromium through Playwright): the
summary in the first screen of its page and in the compare page's first row, each
requirement a short sentence with the whole condition one click away, no serious axe-core
violation on either page, light or dark, and nothing scrolling sideways on a phone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from browser_support import LAPTOP, MARKS, PHONE, chromium, live_server, new_page, page_width, shot
from test_browser_a11y import axe_violations

from tests.requirements_repo import build_requirements_repo

pytestmark = MARKS

VALUE = "/v/v1.0.0/backends/--moe-runner-backend/fast_cutlass"
COMPARE = "/v/v1.0.0/backends/--moe-runner-backend/compare?values=fast_cutlass,fast_trt"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from tests.conftest import ingest_into

    root = tmp_path_factory.mktemp("requirements")
    ingest_into(build_requirements_repo(root), root / "kb.db", jobs=1)
    with live_server(f"sqlite:///{root / 'kb.db'}") as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as b:
        yield b


def test_the_summary_opens_the_value_page(browser: Any, server: str) -> None:
    with new_page(browser, server, width=LAPTOP[0], height=LAPTOP[1]) as pg:
        pg.goto(VALUE)
        summary = pg.locator("#requirement-summary")
        box = summary.bounding_box()
        assert box is not None and box["y"] + box["height"] <= LAPTOP[1]  # the first screen
        assert summary.locator("dt").all_inner_texts() == ["Quantization", "Under conditions"]
        assert summary.locator("dd code").first.inner_text() == "--quantization ∈ {fp4, fp8, unset}"
        # a requirement reads as a sentence; its whole condition opens on a click
        card = pg.locator("#requirements .constraint").first
        assert (
            card.locator(".head")
            .inner_text()
            .endswith(
                "Requires --ep-size ∈ {1, --tp-size} when model_arch ≠ AlphaForCausalLM, "
                "unless model_arch contains Llama9 and --device ≠ cpu"
            )
        )
        full = card.locator("details.full-condition code")
        assert not full.is_visible()
        card.locator("details.full-condition summary").click()
        assert full.is_visible() and "not (model_arch in ['AlphaForCausalLM'])" in full.inner_text()
        # the "under conditions" link goes to the sentences
        summary.locator("a[href='#requirements']").click()
        assert pg.evaluate("location.hash") == "#requirements"
        shot(pg, "requirements-value")
        assert not pg.errors


def test_the_compare_page_opens_with_each_values_summary(browser: Any, server: str) -> None:
    with new_page(browser, server, width=LAPTOP[0], height=LAPTOP[1]) as pg:
        pg.goto(COMPARE)
        first = pg.locator("table.compare tbody tr").first
        assert first.get_attribute("class") == "req-summary-row"
        cells = first.locator("td")
        assert "is_sm100_supported()" in cells.nth(1).inner_text()
        assert "--quantization ∈ {fp4, fp8, unset}" in cells.nth(0).inner_text()
        shot(pg, "requirements-compare")
        assert not pg.errors


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_no_serious_axe_violation(browser: Any, server: str, dark: bool) -> None:
    ctx = browser.new_context(
        viewport={"width": LAPTOP[0], "height": LAPTOP[1]},
        base_url=server,
        color_scheme="dark" if dark else "light",
        bypass_csp=True,  # lets the test inject axe
    )
    try:
        pg = ctx.new_page()
        found = {}
        for url in (VALUE, COMPARE, "/v/v1.0.0/flags/--fp4-gemm-backend"):
            pg.goto(url)
            bad = axe_violations(pg)
            if bad:
                found[url] = bad
        assert not found, found
    finally:
        ctx.close()


def test_nothing_scrolls_sideways_on_a_phone(browser: Any, server: str) -> None:
    with new_page(browser, server, width=PHONE[0], height=PHONE[1]) as pg:
        pg.goto(VALUE)
        assert page_width(pg) <= PHONE[0]
        shot(pg, "requirements-value-phone")
