"""A flag page by a unique abbreviation redirects to the flag, as argparse (allow_abbrev)
and explain read it; an ambiguous one is a 404 whose every link answers."""

from __future__ import annotations

import re
from html import unescape

import explain_kb
import pytest
from fastapi.testclient import TestClient

from app.main import create_app


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    return TestClient(create_app(explain_kb.build(tmp_path_factory.mktemp("abbrev") / "kb.db")))


@pytest.mark.parametrize("prefix", ["", "/api"])
def test_unique_abbreviation_redirects_to_the_flag(client: TestClient, prefix: str) -> None:
    r = client.get(f"{prefix}/v/v0.2.0/flags/--tp?q=1", follow_redirects=False)
    assert r.status_code == 307
    assert r.headers["location"] == f"{prefix}/v/v0.2.0/flags/--tp-size?q=1"
    # a prefix of the alias alone: the flag's page too
    r = client.get(f"{prefix}/v/v0.2.0/flags/--tens", follow_redirects=False)
    assert (r.status_code, r.headers["location"]) == (307, f"{prefix}/v/v0.2.0/flags/--tp-size")
    # the alias itself is a name of the flag: its page answers there
    assert client.get(f"{prefix}/v/v0.2.0/flags/--tensor-parallel-size").status_code == 200


def test_ambiguous_abbreviation_is_a_404_listing_what_it_could_mean(client: TestClient) -> None:
    """--tp-offload (v0.3.0) makes --tp ambiguous."""
    r = client.get("/api/v/v0.3.0/flags/--tp", follow_redirects=False)
    assert r.status_code == 404
    body = r.json()
    assert [s["name"] for s in body["suggestions"]][:2] == ["--tp-offload", "--tp-size"]
    assert "ambiguous abbreviation" in body["detail"]


@pytest.mark.parametrize("name", ["--", "--tp=2"])
def test_option_end_and_a_value_are_no_abbreviations(client: TestClient, name: str) -> None:
    """`--` ends argparse's options (it was "ambiguous" with every flag); `--tp=2` names a
    value, not a flag page."""
    r = client.get(f"/api/v/v0.2.0/flags/{name}", follow_redirects=False)
    assert r.status_code == 404
    assert "ambiguous abbreviation" not in r.json()["detail"]


def test_an_ambiguous_abbreviation_lists_a_few_flags_at_most(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--enable` could mean a hundred flags at a real version: the first MAX_MEANT, then a
    count (here the cap is made 1 for the fixture's few --enable-* flags)."""
    import app.views.flags as flags

    monkeypatch.setattr(flags, "MAX_MEANT", 1)
    detail = client.get("/api/v/v0.3.0/flags/--enable").json()["detail"]
    meant = detail.split("could mean ", 1)[1]
    assert meant.count("--") == 1 and " more." in meant, detail


@pytest.mark.parametrize("url", ["/v/v0.2.0/flags/--tp-off", "/v/v0.2.0/flags/--no-such-flag"])
def test_every_link_of_a_flag_404_answers(client: TestClient, url: str) -> None:
    """The old-version banner must not send to the same missing page in the newest version:
    --tp-off is an abbreviation only in v0.3.0, --no-such-flag is nowhere."""
    r = client.get(url)
    assert r.status_code == 404
    hrefs = {unescape(h) for h in re.findall(r'href="(/[^"#]*)"', r.text)}
    assert "/v/v0.3.0/flags" in hrefs  # the banner: the newest version's flags
    bad = [(h, s) for h in sorted(hrefs) if (s := client.get(h).status_code) != 200]
    assert bad == []
