"""Accessibility and phones in a real browser (Debian's chromium through Playwright):
axe-core (from npm, injected by the test, never served by the app) on every page kind in
light and dark, the header search box as an ARIA combobox, the grouped version picker with
type-to-filter, search results that say which version they searched, and a compact phone
header. Screenshots at 1440×900 and 390×844, light and dark, land in test-output/browser/."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_support import LAPTOP, MARKS, PHONE, live_server, page_width, shot
from dashboard_kb import ARGS, build_kb

from kb.search import default_index_dir
from kb.search_build import build_index

pytestmark = MARKS

AXE = Path(__file__).resolve().parent.parent / "test-output" / "axe.min.js"

# One URL per page kind, on the fixture knowledge base (v0.3.0 is the newest).
PAGES = {
    "home": "/",
    "flags": "/v/v0.3.0/flags",
    "flag": "/v/v0.3.0/flags/--moe-runner-backend",
    "old-flag": "/v/v0.1.0/flags/--pp-size",
    "backends": "/v/v0.3.0/backends",
    "backend-value": "/v/v0.3.0/backends/--moe-runner-backend/flashinfer_cutlass",
    "compare": "/v/v0.3.0/backends/--moe-runner-backend/compare?values=triton,flashinfer_cutlass",
    "constraints": "/v/v0.3.0/constraints",
    # a deprecated flag followed to its replacement's sites, with a note linking it
    "constraints-replaced": "/v/v0.2.0/constraints?flag=--old-cache",
    "enums": "/v/v0.3.0/enums",
    "source": f"/v/v0.3.0/source/{ARGS}",
    "diff": "/diff/v0.1.0...v0.3.0",
    "search": "/search?q=moe",
    "explain": "/explain?command=--tp-size+2",
    "explain-deprecated": "/explain?version=v0.2.0&command=--old-cache+4",  # "Use instead"
    "env-list": "/v/v0.3.0/env",
    "env-var": "/v/v0.3.0/env/SGLANG_FAKE_SWITCH",
    "docs-drift": "/v/v0.3.0/docs-drift",
    "docs-commands": "/v/v0.3.0/docs-commands",
    "models": "/v/v0.3.0/models",
    "model": "/v/v0.3.0/models/runner",
    "report": "/v/v0.3.0/report",
    "404": "/v/v0.3.0/flags/--no-such-flag",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = f"sqlite:///{build_kb(tmp_path_factory.mktemp('kb') / 'kb.db')}"
    build_index(url, default_index_dir(url))
    with live_server(url) as base:
        yield base


@pytest.fixture
def context(browser: Any, server: str) -> Iterator[Any]:
    """A context factory: (width, height, dark) -> page collecting console errors."""
    made: list[Any] = []

    def make(size: tuple[int, int] = LAPTOP, dark: bool = False) -> Any:
        ctx = browser.new_context(
            viewport={"width": size[0], "height": size[1]},
            base_url=server,
            color_scheme="dark" if dark else "light",
            bypass_csp=True,  # lets the test inject axe; the app's own pages stay inline-free
        )
        made.append(ctx)
        pg = ctx.new_page()
        pg.errors = []
        pg.on("console", lambda m: pg.errors.append(m.text) if m.type == "error" else None)
        pg.on("pageerror", lambda e: pg.errors.append(str(e)))
        return pg

    yield make
    for ctx in made:
        ctx.close()


def axe_violations(pg: Any) -> list[str]:
    """Serious and critical axe-core violations on the page, one line per node, with every
    fold (<details>) opened: axe skips hidden content, and readers open them."""
    if not AXE.exists():
        pytest.fail(f"{AXE} missing: run `make install` (copies axe-core from node_modules)")
    pg.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")
    pg.add_script_tag(path=str(AXE))
    result = pg.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    return [
        f"{v['id']} ({v['impact']}): {node['target']} {node.get('failureSummary', '')[:160]}"
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
        for node in v["nodes"]
    ]


def test_axe_is_not_served_by_the_app(context: Any) -> None:
    pg = context()
    for path in ("/static/axe.min.js", "/static/vendor/axe.min.js", "/test-output/axe.min.js"):
        assert pg.request.get(path).status == 404


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_axe_no_serious_or_critical_violations(context: Any, dark: bool) -> None:
    pg = context(LAPTOP, dark)
    found: dict[str, list[str]] = {}
    for kind, url in PAGES.items():
        response = pg.goto(url)
        assert response.status == (404 if kind == "404" else 200), (kind, url)
        bad = axe_violations(pg)
        if bad:
            found[kind] = bad
    assert not found, "\n".join(f"{k}: {line}" for k, lines in found.items() for line in lines)


def test_axe_catches_a_planted_violation(context: Any) -> None:
    """The check can fail: an unlabelled input and low-contrast text are reported."""
    pg = context()
    pg.goto("/v/v0.3.0/flags")
    pg.evaluate(
        """() => { const m = document.querySelector('main');
                   m.insertAdjacentHTML('beforeend',
                     '<p style="color:#ccc;background:#fff">faint</p><input type="text">'); }"""
    )
    ids = {line.split(" ", 1)[0] for line in axe_violations(pg)}
    assert {"color-contrast", "label"} <= ids


def test_search_box_is_a_combobox(context: Any) -> None:
    from playwright.sync_api import expect

    pg = context()
    pg.goto("/v/v0.3.0/flags")
    box = pg.locator("#search")
    assert box.get_attribute("role") == "combobox"
    assert box.get_attribute("aria-expanded") == "false"
    controls = box.get_attribute("aria-controls")
    box.press_sequentially("backend", delay=20)
    pg.locator('#search-results .search-hits[data-q="backend"] [role=option]').first.wait_for()
    expect(box).to_have_attribute("aria-expanded", "true")
    listbox = pg.locator(f"#{controls} [role=listbox]")
    assert listbox.count() == 1
    options = listbox.locator("[role=option]")
    assert options.count() >= 2
    # The arrow keys move the active descendant; focus stays in the box.
    box.press("ArrowDown")
    first = options.nth(0).get_attribute("id")
    assert box.get_attribute("aria-activedescendant") == first
    assert options.nth(0).get_attribute("aria-selected") == "true"
    box.press("ArrowDown")
    second = options.nth(1).get_attribute("id")
    assert box.get_attribute("aria-activedescendant") == second
    assert options.nth(0).get_attribute("aria-selected") == "false"
    assert pg.evaluate("document.activeElement.id") == "search"
    box.press("ArrowUp")
    assert box.get_attribute("aria-activedescendant") == first
    shot(pg, "a11y-combobox")
    # Enter opens the active option, not necessarily the top hit.
    box.press("ArrowDown")
    href = options.nth(1).get_attribute("href")
    box.press("Enter")
    pg.wait_for_url(f"**{href}")
    # Escape closes the list and collapses the box.
    box = pg.locator("#search")
    box.press_sequentially("backend", delay=20)
    pg.locator('#search-results .search-hits[data-q="backend"] [role=option]').first.wait_for()
    box.press("Escape")
    assert box.get_attribute("aria-expanded") == "false"
    assert box.get_attribute("aria-activedescendant") is None
    assert pg.errors == []


def test_search_says_which_version_with_all_versions_link(context: Any) -> None:
    pg = context()
    pg.goto("/")  # no version pinned: the dropdown searches the newest and says so
    pg.locator("#search").press_sequentially("backend", delay=20)
    scope = pg.locator("#search-results p.scope")
    scope.wait_for()
    assert "v0.3.0" in scope.inner_text()
    scope.get_by_role("link", name="all versions").click()
    pg.wait_for_url("**/search?q=backend&version=all")
    assert "across all versions" in pg.locator("p.count").inner_text()
    pg.goto("/search?q=backend&version=v0.1.0")
    assert "in v0.1.0" in pg.locator("p.count").inner_text()
    pg.locator("p.count").get_by_role("link", name="search all versions").click()
    pg.wait_for_url("**version=all")
    assert pg.errors == []


def test_version_picker_grouped_with_type_to_filter(context: Any) -> None:
    pg = context()
    pg.goto("/v/v0.3.0/flags/--pp-size")
    groups = pg.locator("#switch-version optgroup")
    assert groups.evaluate_all("gs => gs.map(g => g.label)") == ["v0.3", "v0.2", "v0.1"]
    visible = (
        "() => [...document.querySelectorAll('#switch-version option')]"
        ".filter(o => !o.hidden).map(o => o.value)"
    )
    pg.locator("#version-filter").press_sequentially("0.1", delay=20)
    assert pg.evaluate(visible) == ["v0.1.0"]
    assert (
        pg.evaluate(
            "[...document.querySelectorAll('#switch-version optgroup')]"
            ".filter(g => !g.hidden).length"
        )
        == 1
    )
    pg.locator("#version-filter").press("Enter")
    pg.wait_for_url("**/v/v0.1.0/flags/--pp-size")
    assert pg.errors == []


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
@pytest.mark.parametrize("size", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_screens_and_compact_phone_header(context: Any, size: tuple[int, int], dark: bool) -> None:
    pg = context(size, dark)
    name = f"{'laptop' if size == LAPTOP else 'phone'}-{'dark' if dark else 'light'}"
    for kind in ("home", "flag", "old-flag", "search"):
        pg.goto(PAGES[kind])
        shot(pg, f"a11y-{kind}-{name}")
        header = pg.locator("header.site").bounding_box()
        select = pg.locator("#switch-version")
        if size == PHONE:
            assert header["height"] < 100, (kind, header)
            if select.count():
                box = select.bounding_box()
                assert box["x"] >= 0 and box["x"] + box["width"] <= size[0], (kind, box)
            assert page_width(pg) <= size[0], kind
    assert pg.errors == []
