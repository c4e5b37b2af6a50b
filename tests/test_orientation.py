"""Orientation: a banner on any version that is not the newest links to the same page
there (or says the page does not exist there), and every page starts with a skip link."""

from __future__ import annotations

import pytest
from dashboard_kb import build_kb
from fastapi.testclient import TestClient

from app.main import create_app


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    db = build_kb(tmp_path_factory.mktemp("kb") / "kb.db")
    return TestClient(create_app(f"sqlite:///{db}"))


def test_old_version_banner_links_to_the_same_page_in_the_newest(client: TestClient) -> None:
    html = client.get("/v/v0.2.0/flags/--moe-runner-backend").text
    assert "not the newest version" in html
    link = "/switch?to=v0.3.0&amp;page=flags/--moe-runner-backend"
    assert link in html
    landed = client.get(link.replace("&amp;", "&"))
    assert landed.status_code == 200
    assert str(landed.url).endswith("/v/v0.3.0/flags/--moe-runner-backend")


def test_newest_version_has_no_banner(client: TestClient) -> None:
    html = client.get("/v/v0.3.0/flags/--moe-runner-backend").text
    assert "not the newest version" not in html


def test_banner_says_when_the_page_is_gone_in_the_newest(client: TestClient) -> None:
    gone = [
        f["name"]
        for f in client.get("/api/v/v0.1.0/flags").json()["flags"]
        if client.get(f"/api/v/v0.3.0/flags/{f['name']}").status_code == 404
    ]
    assert gone, "the fixture removes a flag by v0.3.0"
    html = client.get(f"/v/v0.1.0/flags/{gone[0]}").text
    assert "This page does not exist in <code>v0.3.0</code>" in html


def test_every_page_starts_with_a_skip_link_to_main(client: TestClient) -> None:
    for url in ("/", "/v/v0.3.0/flags", "/v/v0.3.0/constraints", "/diff", "/explain"):
        html = client.get(url).text
        body = html[html.index("<body>") :]
        assert body.split("\n")[1] == '<a class="skip-link" href="#main">Skip to content</a>'
        assert '<main id="main"' in html
