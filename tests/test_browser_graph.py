"""The constraint graph on a flag page, in a browser: every edge carries its label (the
kind and the values of the flag that trigger it) drawn in the SVG, not only in a tooltip;
labels never overlap each other, sit on their own edge's straight part and end before the
flag names; each edge and each label link to its site. Runs on the real knowledge base when
FLAGATLAS_REAL_DB is set (`--moe-runner-backend` at snapshot-2026-02-01), else on the
synthetic repository of tests/diff_repos.py (`--attention-backend` at v1.1.0: seven flags,
nine edges). Screenshots at 1440x900 and 390x844, light and dark, in test-output/browser/."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from browser_support import LAPTOP, MARKS, PHONE, SHOTS, live_server, new_page, page_width

from tests.diff_repos import build_diff_kb

pytestmark = MARKS

REAL = os.environ.get("FLAGATLAS_REAL_DB")
FLAG = (
    "/v/snapshot-2026-02-01/flags/--moe-runner-backend"
    if REAL
    else "/v/v1.1.0/flags/--attention-backend"
)

BOXES = """svg => [...svg.querySelectorAll('a.edge')].map(a => {
  const t = a.querySelector('text.elabel').getBBox();
  const p = a.querySelector('path');
  const end = p.getPointAtLength(p.getTotalLength());
  return {label: a.querySelector('text.elabel').textContent, href: a.getAttribute('href'),
          x: t.x, y: t.y, w: t.width, h: t.height, lineY: end.y, lineX: end.x};
})"""


def open_graph(pg: Any) -> None:
    """Open the graph's fold (folded when the flag relates to more than six flags)."""
    fold = pg.locator("#related details.fold")
    if fold.count() and not fold.evaluate("d => d.open"):
        fold.locator("> summary").click()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = f"sqlite:///{REAL or build_diff_kb(tmp_path_factory.mktemp('graphkb'))}"
    with live_server(url) as base:
        yield base


def test_edges_are_labelled_in_the_picture_and_link_to_sites(browser: Any, server: str) -> None:
    with new_page(browser, server, height=LAPTOP[1], width=LAPTOP[0]) as pg:
        pg.goto(FLAG)
        open_graph(pg)
        svg = pg.locator("#related .graph-wrap > svg")
        edges = svg.evaluate(BOXES)
        assert len(edges) >= (10 if REAL else 7)
        listed = pg.locator("#related ul.edge-list li").all_inner_texts()
        for edge, item in zip(edges, listed, strict=True):
            # The label drawn is the one the text list gives, kind first ("assert when x").
            assert edge["label"] and edge["label"] in item
            assert edge["label"].split()[0] in ("raise", "assert", "override", "warning")
            assert "/source/" in edge["href"] and "#L" in edge["href"]
            # Above its own line, within its straight part, before the flag names.
            assert edge["lineY"] - 16 <= edge["y"] and edge["y"] + edge["h"] <= edge["lineY"]
            assert edge["x"] + edge["w"] <= edge["lineX"]
        for i, a in enumerate(edges):
            for b in edges[i + 1 :]:
                apart = (
                    a["y"] + a["h"] <= b["y"] + 0.5
                    or b["y"] + b["h"] <= a["y"] + 0.5
                    or a["x"] + a["w"] <= b["x"]
                    or b["x"] + b["w"] <= a["x"]
                )
                assert apart, (a["label"], b["label"])
        names = svg.locator("a.node text, text.node").evaluate_all(
            "els => els.map(e => e.getBBox().x)"
        )
        assert min(names) >= max(e["lineX"] for e in edges)
        # The label is part of the link: clicking it opens the site's source line.
        first = svg.locator("a.edge text.elabel").first
        first.click()
        pg.wait_for_url("**/source/**")
        assert pg.errors == []


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
@pytest.mark.parametrize("size", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_graph_screens(browser: Any, server: str, size: tuple[int, int], dark: bool) -> None:
    width, height = size
    with new_page(browser, server, height=height, width=width, dark=dark) as pg:
        pg.goto(FLAG)
        open_graph(pg)
        name = f"flag-graph-{'laptop' if width > 800 else 'phone'}-{'dark' if dark else 'light'}"
        pg.locator("#related").screenshot(path=str(SHOTS / f"{name}.png"))
        assert page_width(pg) <= width  # the picture scrolls in its own box on a phone
        assert pg.errors == []
