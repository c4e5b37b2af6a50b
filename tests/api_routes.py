"""Every JSON route of a knowledge base, for tests that compare two of them answer by answer
(SQLite against PostgreSQL, one ingest path against another): each version's lists with
every sort and filter they offer, each thing in them, diffs, search and explain."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, urlencode

from fastapi.testclient import TestClient

CONSTRAINT_SORTS = ("path", "line", "kind", "function")  # app/views/constraints.py's SORTS
CONSTRAINT_KINDS = ("raise", "assert", "override", "warning")
SEARCHES = ("moe", "backend", "tp", "must", "size", "pipeline parallelism", "knob", "widget")


def json_routes(client: TestClient) -> list[str]:
    urls = ["/api/versions"]
    versions = [v["name"] for v in client.get("/api/versions").json()["versions"]]
    for v in versions:
        base = f"/api/v/{quote(v, safe='')}"
        urls += [base, f"{base}/flags", f"{base}/enums", f"{base}/backends", f"{base}/env"]
        urls += [f"{base}/models", f"{base}/report", f"{base}/docs-drift"]
        urls += _constraint_routes(client, base)
        flags = client.get(f"{base}/flags").json()
        for facet in flags["facets"]:
            for value in facet["values"][:3]:
                urls.append(f"{base}/flags?{urlencode({facet['name']: value['value']})}")
        urls.append(f"{base}/flags?q=backend")
        cited: set[str] = set()
        for flag in flags["flags"]:
            urls.append(f"{base}/flags/{quote(flag['name'], safe='')}")
            cited.add(flag["source"]["path"])
        for backend in client.get(f"{base}/backends").json()["backends"]:
            name = quote(backend["flag"], safe="")
            values = [_value(x) for x in backend["values"]]
            urls += [f"{base}/backends/{name}/{quote(x, safe='')}" for x in values]
            urls.append(f"{base}/backends/{name}/compare?values={quote(','.join(values[:3]))}")
        for var in client.get(f"{base}/env").json()["env"]:
            urls.append(f"{base}/env/{quote(var['name'], safe='')}")
            cited.add(var["source"]["path"])
        for model in client.get(f"{base}/models").json()["models"]:
            urls.append(f"{base}/models/{quote(model['name'])}")
        urls += [f"{base}/source/{quote(path)}" for path in sorted(cited)]
        urls += [f"/api/search?{urlencode({'q': q, 'version': v})}" for q in SEARCHES]
        command = "--tp-size 2 --pp-size 2 --moe-runner-backend triton"
        urls.append(f"/api/explain?{urlencode({'version': v, 'command': command})}")
    for a in versions:
        urls += [f"/api/diff/{quote(a, safe='')}/{quote(b, safe='')}" for b in versions if a != b]
    urls += [f"/api/search?{urlencode({'q': q, 'version': 'all'})}" for q in SEARCHES]
    return sorted(set(urls))


def _constraint_routes(client: TestClient, base: str) -> list[str]:
    """The constraints list whole and by page, in every sort, by each kind, and filtered by
    each function, file and flag its facets name."""
    urls = []
    for sort in CONSTRAINT_SORTS:
        urls += [f"{base}/constraints?sort={sort}&per_page=0", f"{base}/constraints?sort={sort}"]
        urls.append(f"{base}/constraints?sort={sort}&per_page=3&page=2")
    urls += [f"{base}/constraints?kind={kind}&per_page=0" for kind in CONSTRAINT_KINDS]
    whole = client.get(f"{base}/constraints?per_page=0").json()
    for facet in whole["facets"]:
        if facet["name"] != "kind":
            for value in facet["values"]:
                query = urlencode({facet["name"]: value["value"], "per_page": 0})
                urls.append(f"{base}/constraints?{query}")
    flags = sorted({f for c in whole["constraints"] for f in c["flags"]})
    urls += [f"{base}/constraints?{urlencode({'flag': f, 'per_page': 0})}" for f in flags]
    return urls


def _value(value: Any) -> str:
    return str(value["value"] if isinstance(value, dict) else value)


def normalized(body: bytes) -> str:
    """An answer's JSON with its keys sorted and the time an ingest took left out (the only
    thing two ingests of the same versions need not agree on)."""
    return json.dumps(_timeless(json.loads(body)), sort_keys=True)


def _timeless(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _timeless(v) for k, v in data.items() if k != "seconds"}
    if isinstance(data, list):
        return [_timeless(v) for v in data]
    return data
