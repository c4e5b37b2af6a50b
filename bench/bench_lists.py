"""The constraints list's first page with facets (HTML and JSON twin), a faceted page, and
the CSV export, over HTTP on a full knowledge base, against a static file served by the same
server in the same run. Target: the first page with facets under 100 ms at the median.

    .venv/bin/python bench/bench_lists.py [--db PATH] [--version NAME] [--rounds 30]

Requests alternate between each list URL and the static file so both see the same state.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.httpbench import (  # noqa: E402
    describe,
    page_bench_options,
    served_versions,
    server,
    timed,
    verdict_median,
)

STATIC = "/static/style.css"
TARGET_MS = 100.0


def main() -> None:
    args = page_bench_options(__doc__, rounds=30)
    db = args.db
    with server(db) as client:
        _, version = served_versions(client, args.version)
        base = f"/v/{version}"
        urls = {
            "constraints page 1 (HTML)": f"{base}/constraints",
            "constraints page 1 (JSON)": f"/api{base}/constraints",
            "kind=override page 2": f"{base}/constraints?kind=override&page=2",
            "constraints CSV export": f"{base}/constraints?format=csv",
            "flags list with facets": f"{base}/flags",
        }
        total = client.get(urls["constraints page 1 (JSON)"]).json()["total"]
        print(f"{db}: {version}, {total} constraint sites")
        results: dict[str, list[float]] = {name: [] for name in urls}
        static: list[float] = []
        # First view of each URL (nothing cached yet), then warm rounds.
        first_view = {name: timed(client, url) for name, url in urls.items()}
        for _ in range(args.rounds):
            for name, url in urls.items():
                results[name].append(timed(client, url))
                static.append(timed(client, STATIC))
        print(describe("static file (baseline)", static))
        for name, values in results.items():
            print(describe(name, values))
        print("first view (cold): " + ", ".join(f"{n} {t:.1f} ms" for n, t in first_view.items()))
        first = results["constraints page 1 (HTML)"]
        print(verdict_median("constraints first page with facets", first, static, TARGET_MS))


if __name__ == "__main__":
    main()
