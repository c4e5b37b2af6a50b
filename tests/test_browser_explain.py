"""The explain page in a real browser (Debian's chromium through Playwright): paste a
command, read the findings swapped in by htmx, reopen the permalink, follow a citation to
the highlighted source line. Screenshots land in test-output/browser/."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlparse

import explain_kb
import pytest
from browser_support import MARKS, live_server, new_page
from browser_support import shot as full_shot

pytestmark = MARKS

COMMAND = (
    "CUDA_VISIBLE_DEVICES=0,1 python -m sglang.launch_server \\\n"
    "  --model-path /models/m \\\n"
    "  --tp 2 --enable-two-batch-overlap \\\n"
    "  --moe-runner-backend flashinfer_cutlas"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with live_server(explain_kb.build(tmp_path_factory.mktemp("kb") / "kb.db")) as url:
        yield url


@pytest.fixture
def page(browser: Any, server: str) -> Iterator[Any]:
    with new_page(browser, server, height=900) as pg:
        yield pg


def shot(pg: Any, name: str) -> None:
    full_shot(pg, name, full_page=True)


def test_paste_read_findings_and_follow_a_citation(page: Any) -> None:
    page.goto("/explain")
    page.select_option("#explain-version", "v0.2.0")
    page.fill("#explain-command", COMMAND)
    # A marker on window survives only if htmx swapped the results instead of reloading.
    page.evaluate("window.__kept = true")
    page.click("#explain-form button[type=submit]")
    finding = page.locator("li.finding.sev-error", has_text="raises at server_args.py:")
    finding.wait_for()
    assert page.evaluate("window.__kept === true")

    # The findings a reader came for.
    errors = page.locator("li.finding.sev-error .msg").all_inner_texts()
    assert any("two batch overlap needs" in text for text in errors)
    assert any("Did you mean flashinfer_cutlass?" in text for text in errors)
    warnings = page.locator("li.finding.sev-warning .msg").all_inner_texts()
    assert any("--tp is an abbreviation of --tp-size" in text for text in warnings)
    assert "2 errors" in page.locator(".summary").inner_text()
    # One line per flag, linking to its page at this version.
    link = page.locator("table.explain-flags a.flag", has_text="--tp")
    assert link.get_attribute("href") == "/v/v0.2.0/flags/--tp-size"

    # The URL is the permalink: version and command are in it, and it reopens the analysis.
    query = parse_qs(urlparse(page.url).query)
    assert query["version"] == ["v0.2.0"]
    assert query["command"] == [COMMAND]
    shot(page, "explain")
    again = page.context.new_page()
    again.goto(page.url)
    assert again.locator("li.finding.sev-error", has_text="raises at").count() == 1
    assert again.input_value("#explain-command") == COMMAND
    again.close()

    # Follow the citation of the raise to the in-app source view, line highlighted.
    cite = finding.locator(".cite a.src")
    href = cite.get_attribute("href")
    assert href.startswith("/v/v0.2.0/source/" + explain_kb.ARGS + "#L")
    line = href.rsplit("#L", 1)[1].split("-")[0]
    cite.click()
    page.wait_for_url(f"**/source/**#L{line}*")
    row = page.locator(f"li#L{line}")
    row.wait_for()
    assert "hl" in (row.get_attribute("class") or "")
    assert "raise" in row.inner_text()
    shot(page, "explain-citation")
    assert page.errors == []


def test_compare_and_unknown_version_in_the_page(page: Any) -> None:
    page.goto("/explain")
    page.select_option("#explain-version", "v0.1.0")
    page.select_option("#explain-compare", "v0.3.0")
    page.fill("#explain-command", "--model-path m --enable-deepep-moe")
    page.click("#explain-form button[type=submit]")
    page.locator(".compare").wait_for()
    assert "--enable-deepep-moe does not exist in v0.3.0" in page.locator(".compare").inner_text()
    assert "compare=v0.3.0" in page.url
    shot(page, "explain-compare")
    assert page.errors == []
