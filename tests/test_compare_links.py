"""A backend page's 404 (compare, or one value): every suggestion (and 'it exists in') link
leads to a page that answers 200, in the HTML page and the JSON body alike (hand-built KB,
synthetic names)."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient
from planted_kb import build_kb, flag

from app.main import create_app

NO_SITES: dict[str, Any] = {"constraints": [], "enums": {}}
FLAGS = [
    flag("--runner-backend", choices=["triton", "cutlass", "trtllm"]),
    flag("--draft-runner-backend", choices=["triton", "aiter"], line=20),
    flag("--router-backend", choices=["none", "mesh"], line=30),
    flag("--runner-backends", line=40),  # takes any value: nothing to compare
]
# --kernel-backend is in p1 with one of the values compared below, not in p2, in p3 with both.
P1 = {**NO_SITES, "flags": [*FLAGS, flag("--kernel-backend", choices=["a", "b"], line=50)]}
P2 = {**NO_SITES, "flags": FLAGS}
P3 = {
    **NO_SITES,
    "flags": [
        *FLAGS,
        flag("--kernel-backend", choices=["a", "b", "c"], line=50),
        # Deprecated for --runner-backend, with values of its own (SGLang maps them).
        flag("--runner-mode", choices=["split", "triton"], deprecated=True, line=60),
    ],
}
P3["flags"][-1]["replacement"] = "--runner-backend"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    url = build_kb(tmp_path_factory.mktemp("cmp") / "kb.db", [("p1", P1), ("p2", P2), ("p3", P3)])
    return TestClient(create_app(url), follow_redirects=False)


def links(client: TestClient, url: str) -> tuple[dict[str, Any], list[str]]:
    """The JSON 404 body and its links; the HTML page must offer the same links."""
    body = client.get("/api" + url)
    assert body.status_code == 404, body.text[:300]
    data = body.json()
    found = [s["url"] for s in data["suggestions"]] + [e["url"] for e in data["elsewhere"]]
    page = client.get(url)
    assert page.status_code == 404
    hrefs = [html.unescape(h) for h in re.findall(r'href="(/v/[^"]*)"', page.text)]
    for link in found:
        assert link.removeprefix("/api") in hrefs
    return data, found


def test_a_misspelt_flag_suggests_flags_with_the_values_they_have(client: TestClient) -> None:
    data, found = links(client, "/v/p1/backends/--runner-backnd/compare?values=triton,cutlass")
    by_name = {s["name"]: s["url"] for s in data["suggestions"]}
    assert by_name["--runner-backend"] == (
        "/api/v/p1/backends/--runner-backend/compare?values=triton,cutlass"
    )
    # The draft flag has triton but no cutlass (and no look-alike is swapped in for it).
    assert by_name["--draft-runner-backend"] == (
        "/api/v/p1/backends/--draft-runner-backend/compare?values=triton"
    )
    # Neither value, or no choices at all: the flag's own page.
    assert by_name["--router-backend"] == "/api/v/p1/flags/--router-backend"
    assert by_name["--runner-backends"] == "/api/v/p1/flags/--runner-backends"
    for link in found:
        assert client.get(link).status_code == 200, link
        assert client.get(link.removeprefix("/api")).status_code == 200, link


def test_every_wrong_value_is_corrected(client: TestClient) -> None:
    url = "/v/p1/backends/--runner-backend/compare?values=trton,cutlas,trtllm"
    data, found = links(client, url)
    assert data["detail"] == "'trton', 'cutlas' are not values of --runner-backend in p1."
    assert found == ["/api/v/p1/backends/--runner-backend/compare?values=triton,cutlass,trtllm"]
    assert client.get(found[0]).json()["values"] == ["triton", "cutlass", "trtllm"]
    # A wrong value with no look-alike is dropped from the links.
    data, found = links(client, "/v/p1/backends/--runner-backend/compare?values=trton,zzzzzz")
    assert found == ["/api/v/p1/backends/--runner-backend/compare?values=triton"]


def test_the_versions_that_have_the_flag_compare_their_own_values(client: TestClient) -> None:
    data, found = links(client, "/v/p2/backends/--kernel-backend/compare?values=a,c")
    assert {e["version"]: e["url"] for e in data["elsewhere"]} == {
        "p1": "/api/v/p1/backends/--kernel-backend/compare?values=a",
        "p3": "/api/v/p3/backends/--kernel-backend/compare?values=a,c",
    }
    for link in found:
        assert client.get(link).status_code == 200, link


def answers(client: TestClient, found: list[str]) -> None:
    for link in found:
        assert client.get(link).status_code == 200, link
        assert client.get(link.removeprefix("/api")).status_code == 200, link


def test_a_misspelt_version_suggests_the_page_each_version_has(client: TestClient) -> None:
    data, found = links(client, "/v/pp/backends/--kernel-backend/compare?values=a,c")
    assert data["kind"] == "version"
    assert {s["name"]: s["url"] for s in data["suggestions"]} == {
        "p1": "/api/v/p1/backends/--kernel-backend/compare?values=a",  # no c there
        "p2": "/api/v/p2/flags",  # no such flag there
        "p3": "/api/v/p3/backends/--kernel-backend/compare?values=a,c",
    }
    answers(client, found)
    # None of the values: the flag's page.
    data, found = links(client, "/v/pp/backends/--kernel-backend/compare?values=c")
    assert {s["name"]: s["url"] for s in data["suggestions"]}["p1"] == (
        "/api/v/p1/flags/--kernel-backend"
    )
    answers(client, found)
    # A flag's list keeps its page and query in the suggested versions, as before.
    data, _ = links(client, "/v/pp/flags?q=runner")
    assert {s["url"] for s in data["suggestions"]} == {
        f"/api/v/{v}/flags?q=runner" for v in ("p1", "p2", "p3")
    }


def test_a_misspelt_version_of_a_value_page(client: TestClient) -> None:
    data, found = links(client, "/v/pp/backends/--kernel-backend/C")
    assert {s["name"]: s["url"] for s in data["suggestions"]} == {
        "p1": "/api/v/p1/flags/--kernel-backend",  # has the flag, not the value
        "p2": "/api/v/p2/flags",
        "p3": "/api/v/p3/backends/--kernel-backend/c",
    }
    answers(client, found)


def test_it_exists_in_links_a_value_page_only_where_the_value_is(client: TestClient) -> None:
    data, found = links(client, "/v/p2/backends/--kernel-backend/c")
    assert {e["version"]: e["url"] for e in data["elsewhere"]} == {
        "p1": "/api/v/p1/flags/--kernel-backend",  # the flag without the value (JSON twin)
        "p3": "/api/v/p3/backends/--kernel-backend/c",
    }
    answers(client, found)
    data, found = links(client, "/v/p2/backends/--kernel-backend/a")
    assert {e["version"]: e["url"] for e in data["elsewhere"]} == {
        "p1": "/api/v/p1/backends/--kernel-backend/a",
        "p3": "/api/v/p3/backends/--kernel-backend/a",
    }
    answers(client, found)


def test_a_misspelt_flag_of_a_value_page(client: TestClient) -> None:
    data, found = links(client, "/v/p1/backends/--runner-backnd/cutlass")
    by_name = {s["name"]: s["url"] for s in data["suggestions"]}
    assert by_name["--runner-backend"] == "/api/v/p1/backends/--runner-backend/cutlass"
    assert by_name["--draft-runner-backend"] == "/api/v/p1/flags/--draft-runner-backend"
    answers(client, found)


def test_a_deprecated_flag_s_own_value_has_its_page(client: TestClient) -> None:
    # A value the successor has: the successor's page (its code handles it).
    assert client.get("/api/v/p3/backends/--runner-mode/triton").json()["flag"] == (
        "--runner-backend"
    )
    # A value only the deprecated flag has: its own page, not a 404 naming the successor.
    page = client.get("/api/v/p3/backends/--runner-mode/split")
    assert page.status_code == 200, page.text[:300]
    assert (page.json()["flag"], page.json()["value"]) == ("--runner-mode", "split")
    assert client.get("/v/p3/backends/--runner-mode/split").status_code == 200
    data, found = links(client, "/v/pp/backends/--runner-mode/split")
    assert {s["name"]: s["url"] for s in data["suggestions"]}["p3"] == (
        "/api/v/p3/backends/--runner-mode/split"
    )
    answers(client, found)
