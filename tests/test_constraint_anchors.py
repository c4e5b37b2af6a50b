"""Each constraint site's permalink (`url` in its JSON): a page that has an element with the
fragment as its id, once; the same anchor whatever line the site moved to; the constraints
list gives each row that id too. With FLAGATLAS_REAL_DB, the same at a few real versions."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from dashboard_kb import build_kb
from fastapi.testclient import TestClient

from app.main import create_app
from kb.queries import constraint_anchor, numbered_anchors
from kb.schema import ConstraintSite

REAL_DB = Path(os.environ.get("FLAGATLAS_REAL_DB", ""))
REAL_VERSIONS = ("v0.3.0", "v0.4.6.post3", "v0.5.6", "snapshot-2026-02-01", "snapshot-2026-07-01")
ID = re.compile(r'\sid="([^"]+)"')


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    db = build_kb(tmp_path_factory.mktemp("kb") / "kb.db")
    return TestClient(create_app(f"sqlite:///{db}"))


def check_version(client: TestClient, version: str) -> int:
    """Every constraint of `version` (the whole list) has a `url` whose page has its fragment
    as an id exactly once, and the flag page's JSON gives the site the same url."""
    answer = client.get(f"/api/v/{version}/constraints?per_page=0")
    assert answer.status_code == 200, answer.text[:300]
    constraints: list[dict[str, Any]] = answer.json()["constraints"]
    pages: dict[str, Counter[str]] = {}
    flag_urls: dict[str, set[str]] = {}
    for c in constraints:
        page, _, fragment = c["url"].partition("#")
        assert page.startswith(f"/v/{version}/") and re.fullmatch(
            r"c-[0-9a-f]{12}(-\d+)?", fragment
        )
        if page not in pages:
            html = client.get(page)
            assert html.status_code == 200, page
            pages[page] = Counter(ID.findall(html.text))
            twin = client.get("/api" + page).json()
            flag_urls[page] = {s["url"] for s in twin["constraints"]}
        assert pages[page][fragment] == 1, (c["url"], c["message"])
        assert c["url"] in flag_urls[page]
    listed = client.get(f"/v/{version}/constraints?per_page=0").text
    ids = Counter(ID.findall(listed))
    for c in constraints:
        assert ids[c["url"].partition("#")[2]] == 1
    return len(constraints)


def test_every_constraint_url_names_an_anchor_on_its_page(client: TestClient) -> None:
    versions = [v["name"] for v in client.get("/api/versions").json()["versions"]]
    assert sum(check_version(client, v) for v in versions) > 0


def test_a_flag_page_links_each_card_to_itself(client: TestClient) -> None:
    version = client.get("/api/versions").json()["versions"][0]["name"]
    c = client.get(f"/api/v/{version}/constraints?per_page=0").json()["constraints"][0]
    page, _, fragment = c["url"].partition("#")
    assert f'<a class="self" href="#{fragment}"' in client.get(page).text


def site(line: int, function: str = "f", path: str = "a.py") -> ConstraintSite:
    return ConstraintSite(
        version_id=1, kind="raise", function=function, condition="x", message="m",
        path=path, line=line, end_line=line, key="0123abcd",
    )  # fmt: skip


def test_an_anchor_is_the_sites_identity_not_its_line() -> None:
    assert constraint_anchor(site(10)) == constraint_anchor(site(400))
    assert constraint_anchor(site(10)) != constraint_anchor(site(10, function="g"))
    assert constraint_anchor(site(10)) != constraint_anchor(site(10, path="b.py"))
    same = [
        {"url": "/v/x/flags/--a#c-1"},
        {"url": "/v/x/flags/--a#c-2"},
        {"url": "/v/x/flags/--a#c-1"},
    ]
    assert [c["url"] for c in numbered_anchors(same)] == [
        "/v/x/flags/--a#c-1",
        "/v/x/flags/--a#c-2",
        "/v/x/flags/--a#c-1-2",
    ]


@pytest.mark.skipif(not REAL_DB.is_file(), reason="FLAGATLAS_REAL_DB does not name a KB")
def test_real_constraint_urls_name_anchors_on_their_pages() -> None:
    real = TestClient(create_app(f"sqlite:///{REAL_DB}"))
    known = {v["name"] for v in real.get("/api/versions").json()["versions"]}
    assert sum(check_version(real, v) for v in REAL_VERSIONS if v in known) > 1000
