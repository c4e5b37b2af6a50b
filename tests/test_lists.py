"""Datasette-like lists: the constraints list pages, facets (kind, function, file) whose
links add combinable filters, sorts and exports the whole filtered result as CSV/JSON; the
flags list facets by section and exports CSV."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from urllib.parse import parse_qs

import pytest
from dashboard_kb import build_kb
from fastapi.testclient import TestClient

from app.main import create_app

API = "/api/v/v0.3.0/constraints"
HTML = "/v/v0.3.0/constraints"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    db = build_kb(tmp_path_factory.mktemp("kb") / "kb.db")
    return TestClient(create_app(f"sqlite:///{db}"), follow_redirects=False)


def facet(body: dict, name: str) -> dict[str, dict]:
    return {v["value"]: v for f in body["facets"] if f["name"] == name for v in f["values"]}


def test_pages_cover_the_result_once(client: TestClient) -> None:
    everything = client.get(API, params={"per_page": 0}).json()
    total = everything["total"]
    assert total == len(everything["constraints"]) >= 3
    keys = []
    for page in range(1, total + 1):
        body = client.get(API, params={"per_page": 1, "page": page}).json()
        assert (body["page"], body["pages"], body["total"]) == (page, total, total)
        keys += [c["key"] for c in body["constraints"]]
    assert keys == [c["key"] for c in everything["constraints"]]
    past = client.get(API, params={"per_page": 1, "page": 999}).json()
    assert past["page"] == total  # clamped, not empty
    html = client.get(HTML, params={"per_page": 1, "page": 2}).text
    assert 'rel="prev"' in html and 'rel="next"' in html and f"page 2 of {total}" in html


def test_facets_count_and_their_links_filter(client: TestClient) -> None:
    body = client.get(API, params={"per_page": 0}).json()
    kinds = facet(body, "kind")
    assert sum(v["count"] for v in kinds.values()) == body["total"]
    for kind, value in kinds.items():
        assert not value["selected"]
        filtered = client.get(f"{API}?{value['query']}&per_page=0").json()
        assert filtered["kind"] == kind and filtered["total"] == value["count"]
        assert {c["kind"] for c in filtered["constraints"]} == {kind}
        # The active value is marked and its link removes the filter again.
        active = facet(filtered, "kind")[kind]
        assert active["selected"] and "kind" not in parse_qs(active["query"])
    # Links combine: a function facet's link keeps the kind filter.
    raise_only = client.get(API, params={"kind": "raise"}).json()
    fn = next(iter(facet(raise_only, "function").values()))
    assert parse_qs(fn["query"]) == {"kind": ["raise"], "function": [fn["value"]]}
    both = client.get(f"{API}?{fn['query']}").json()
    assert both["total"] == fn["count"] and both["function"] == fn["value"]
    nothing = client.get(API, params={"kind": "raise", "path": "no/such.py"}).json()
    assert nothing["total"] == 0 and nothing["constraints"] == []
    page = client.get(HTML, params={"kind": "raise"}).text
    assert f'href="/v/v0.3.0/constraints?{fn["query"]}"'.replace("&", "&amp;") in page


@pytest.mark.parametrize("sort", ["line", "kind", "function", "path"])
def test_sorts(client: TestClient, sort: str) -> None:
    rows = client.get(API, params={"sort": sort, "per_page": 0}).json()["constraints"]
    key = {
        "line": lambda c: (c["source"]["line"], c["source"]["path"]),
        "kind": lambda c: (c["kind"], c["source"]["path"], c["source"]["line"]),
        "function": lambda c: (c["function"], c["source"]["path"], c["source"]["line"]),
        "path": lambda c: (c["source"]["path"], c["source"]["line"]),
    }[sort]
    assert rows == sorted(rows, key=key)
    assert client.get(API, params={"sort": "nope"}).json()["sort"] == "path"


def test_exports_are_the_whole_filtered_result(client: TestClient) -> None:
    api = client.get(API, params={"kind": "raise", "per_page": 0}).json()
    got = client.get(HTML, params={"kind": "raise", "per_page": 1, "format": "csv"})
    assert got.headers["content-type"].startswith("text/csv")
    assert "attachment" in got.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(got.text)))
    assert [(r["kind"], int(r["line"])) for r in rows] == [
        (c["kind"], c["source"]["line"]) for c in api["constraints"]
    ]
    whole = client.get(HTML, params={"kind": "raise", "format": "json"}).json()
    assert whole["constraints"] == api["constraints"] and whole["pages"] == 1


def test_unknown_version_is_404_for_lists_and_exports(client: TestClient) -> None:
    for url in ("/v/nope/constraints?format=csv", "/api/v/nope/constraints?page=2"):
        assert client.get(url).status_code == 404


def test_flags_facet_by_section_and_export_csv(client: TestClient) -> None:
    body = client.get("/api/v/v0.3.0/flags").json()
    sections = facet(body, "section")
    assert sum(v["count"] for v in sections.values()) == len(body["flags"])
    name, value = max(sections.items(), key=lambda item: item[1]["count"])
    narrowed = client.get(f"/api/v/v0.3.0/flags?{value['query']}").json()
    assert len(narrowed["flags"]) == value["count"] < len(body["flags"])
    assert {f["section"] or "Other" for f in narrowed["flags"]} == {name}
    got = client.get(f"/v/v0.3.0/flags?{value['query']}&format=csv")
    names = [r["name"] for r in csv.DictReader(io.StringIO(got.text))]
    assert names == [f["name"] for f in narrowed["flags"]]
    html = client.get("/v/v0.3.0/flags").text
    assert f"?{value['query']}" in html and "format=csv" in html


def test_a_page_of_the_list_makes_the_dicts_of_its_sites_only(tmp_path: Path) -> None:
    """A first view of the constraints list makes the dicts of the sites it shows (it made
    all of the version's), each kept for the stamp and the same as made alone."""
    from sqlmodel import Session

    from app.views.constraints import ConstraintQuery, constraint_list_dict
    from kb.queries import all_constraints, constraint_dict, per_stamp, read_version

    db = build_kb(tmp_path / "kb.db")
    app = create_app(f"sqlite:///{db}", cache_mb=0)
    with Session(app.state.engine) as session:
        version = read_version(session, "v0.3.0")
        sites = all_constraints(session, version)
        assert len(sites) >= 3
        first = constraint_list_dict(session, version, ConstraintQuery(per_page=1))
        made = per_stamp(("constraint-dicts", version.id), dict, session)
        assert list(made) == [sites[0].id]
        second = constraint_list_dict(session, version, ConstraintQuery(per_page=1, page=2))
        assert list(made) == [sites[0].id, sites[1].id]
        assert first["constraints"] == [constraint_dict(version, sites[0])]
        assert second["constraints"][0] is made[sites[1].id]
        again = constraint_list_dict(session, version, ConstraintQuery(per_page=1))
        assert again["constraints"][0] is first["constraints"][0]
