"""Diff of the two most distant versions, end to end over HTTP (HTML page and JSON), against
a static file served by the same server in the same run. Target: under 300 ms.

    .venv/bin/python bench/bench_diff.py [--db data/flagatlas.db] [--runs 20]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.httpbench import default_db, describe, server, timed, verdict_p99  # noqa: E402

TARGET_MS = 300.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", default=None)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    db = args.db or default_db()
    with server(db) as client:
        versions = client.get("/api/versions").json()["versions"]
        if len(versions) < 2:
            sys.exit("need two versions")
        oldest, newest = quote(versions[-1]["name"], safe=""), quote(versions[0]["name"], safe="")
        page, api = f"/diff/{oldest}...{newest}", f"/api/diff/{oldest}/{newest}"
        summary = client.get(api).json()["summary"]
        print(f"{versions[-1]['name']} -> {versions[0]['name']}: {summary}")
        for _ in range(3):  # warm up
            timed(client, page)
            timed(client, api)
        base_ms, page_ms, api_ms = [], [], []
        for _ in range(args.runs):
            base_ms.append(timed(client, "/static/search.css"))
            page_ms.append(timed(client, page))
            api_ms.append(timed(client, api))
    print(describe("baseline: static file", base_ms))
    print(describe("diff page (HTML)", page_ms))
    print(describe("diff JSON", api_ms))
    print(verdict_p99("diff page", page_ms, base_ms, TARGET_MS))


if __name__ == "__main__":
    main()
