"""Sharing and length in a real browser (Debian's chromium through Playwright): "Copy as
Markdown" of a constraint and of an explain finding gives the message, the version and a
permalink whose anchor is on its page (with the clipboard API and without it); a link to a
folded constraint opens its fold; long lists fold with a count and a filter; the
constraints, flag and value pages never scroll sideways at 1366 and 390 px."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from browser_support import MARKS, PHONE, live_server, new_page, page_width, shot
from dashboard_kb import build_kb

pytestmark = MARKS

V3 = "/v/v0.3.0"
LAPTOP_1366 = (1366, 768)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with live_server(f"sqlite:///{build_kb(tmp_path_factory.mktemp('kb') / 'kb.db')}") as base:
        yield base


def check_markdown(pg: Any, md: str, message: str, version: str) -> str:
    """`md` quotes `message`, names `version` and links Flag Atlas absolutely; the link."""
    origin = pg.evaluate("location.origin")
    assert f"> {' '.join(message.split())}" in md
    assert f"SGLang `{version}`" in md
    link = md.split("[Flag Atlas](", 1)[1].split(")", 1)[0]
    assert link.startswith(origin + "/")
    return str(link)


def test_copy_a_constraint_as_markdown(browser: Any, server: str) -> None:
    """The card's Markdown has the message, the version and the card's permalink; opened,
    the permalink shows that card (its fold opened), marked as the target."""
    with new_page(browser, server, height=LAPTOP_1366[1], width=LAPTOP_1366[0]) as pg:
        pg.context.grant_permissions(["clipboard-read", "clipboard-write"])
        pg.goto(f"{V3}/flags/--enable-two-batch-overlap")
        card = pg.locator(".constraint[id^='c-']").first
        message = card.locator(".message").inner_text().strip("“”")
        card.get_by_role("button", name="Copy as Markdown").click()
        md = pg.evaluate("navigator.clipboard.readText()")
        assert md.startswith("`--enable-two-batch-overlap` raises when `")
        link = check_markdown(pg, md, message, "v0.3.0")
        assert link.endswith("#" + (card.get_attribute("id") or "-"))
        # the permalink, opened, lands on the card with its fold opened
        pg.goto("about:blank")
        pg.goto(link)
        target = pg.locator(":target")
        assert target.count() == 1 and target.get_attribute("id") == link.rsplit("#", 1)[1]
        assert (
            target.is_visible() and target.locator(".message").inner_text().strip("“”") == message
        )
        assert pg.errors == []


def test_copy_a_constraint_row_without_the_clipboard_api(browser: Any, server: str) -> None:
    from playwright.sync_api import expect

    """On the constraints list, with no clipboard API (an insecure origin), the button still
    copies (execCommand fallback) and says so."""
    with new_page(browser, server, height=LAPTOP_1366[1], width=LAPTOP_1366[0]) as pg:
        pg.add_init_script(
            """Object.defineProperty(Navigator.prototype, 'clipboard', {get: () => undefined});
               window.commands = [];
               const run = document.execCommand.bind(document);
               document.execCommand = (c, ...rest) => {
                 window.commands.push(c);
                 return run(c, ...rest);
               };"""
        )
        pg.goto(f"{V3}/constraints")
        row = pg.locator("table.constraints tr[id^='c-']").filter(has=pg.locator(".message")).first
        message = row.locator(".message").inner_text().strip("“”")
        button = row.locator("button[data-links]")  # its name changes to "Copied"
        assert button.inner_text() == "Copy as Markdown"
        button.click()
        expect(button).to_have_text("Copied")
        assert pg.evaluate("window.commands") == ["copy"]
        md = button.get_attribute("data-copied") or ""
        link = check_markdown(pg, md, message, "v0.3.0")
        page, anchor = link.split("#", 1)
        assert anchor == row.get_attribute("id")
        pg.goto(page)
        assert pg.locator(f"#{anchor}").count() == 1
        assert pg.errors == []


def test_copy_an_explain_finding_as_markdown(browser: Any, server: str) -> None:
    with new_page(browser, server) as pg:
        pg.context.grant_permissions(["clipboard-read", "clipboard-write"])
        pg.goto("/explain?command=--tp-size+2+--moe-runner-backend+tritn")
        finding = pg.locator("li.finding.sev-error").first
        message = finding.locator(".msg").inner_text()
        finding.get_by_role("button", name="Copy as Markdown").click()
        md = pg.evaluate("navigator.clipboard.readText()")
        assert md.startswith("**error**")
        link = check_markdown(pg, md, message, "v0.3.0")
        assert link == pg.evaluate("location.href")  # the analysis's own permalink
        assert pg.errors == []


def test_long_lists_fold_with_a_count_and_a_filter(browser: Any, server: str) -> None:
    with new_page(browser, server) as pg:
        pg.goto(f"{V3}/flags/--moe-runner-backend")
        folds = pg.locator("details.fold")
        assert folds.count() >= 2
        for i in range(folds.count()):
            fold = folds.nth(i)
            count = int(fold.locator("> summary").inner_text().split()[0])
            # limits are 4 to 12 items: a longer list starts folded, a shorter one open
            if count > 12 or count <= 4:
                assert fold.evaluate("d => d.open") == (count <= 4), count
        # A fold with a filter: typing keeps the matching items, and says how many.
        fold = pg.locator("details.fold[data-items]").first
        if not fold.evaluate("d => d.open"):
            fold.locator("> summary").click()
        box = fold.locator("p.list-filter input")
        if box.count():
            items = fold.locator(fold.get_attribute("data-items") or "li")
            total = items.count()
            word = items.first.inner_text().split()[0]
            box.fill(word)
            shown = items.evaluate_all("els => els.filter(e => !e.hidden).length")
            assert 1 <= shown <= total
            assert f"{shown} of {total} shown" == fold.locator("output").inner_text()
            box.fill("")
            assert items.evaluate_all("els => els.filter(e => !e.hidden).length") == total
        assert pg.errors == []


def test_filters_are_hidden_without_javascript(browser: Any, server: str) -> None:
    context = browser.new_context(base_url=server, java_script_enabled=False)
    pg = context.new_page()
    pg.goto(f"{V3}/flags/--moe-runner-backend")
    assert pg.locator("p.list-filter:visible").count() == 0
    assert pg.locator("details.fold > summary").count() >= 2
    context.close()


PAGES = [
    f"{V3}/constraints",
    f"{V3}/constraints?per_page=0",
    f"{V3}/flags/--moe-runner-backend",
    f"{V3}/flags/--enable-two-batch-overlap",
    f"{V3}/backends/--moe-runner-backend/flashinfer_cutlass",
]


@pytest.mark.parametrize("size", [LAPTOP_1366, PHONE], ids=["1366", "390"])
def test_no_sideways_scroll(browser: Any, server: str, size: tuple[int, int]) -> None:
    width, height = size
    with new_page(browser, server, height=height, width=width) as pg:
        for path in PAGES:
            pg.goto(path)
            pg.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
            assert page_width(pg) <= width, path
        shot(pg, f"value-page-{width}")
        assert pg.errors == []
