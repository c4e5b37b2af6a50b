"""Flag page latency over HTTP on a full knowledge base, against a static file served by the
same server in the same run. Target: a flag page under 20 ms at the median.

    .venv/bin/python bench/bench_pages.py [--db PATH] [--version NAME] [--rounds 50]

Requests alternate between the pages and the static file so both see the same machine state.
"""

from __future__ import annotations

import sys
import time
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

FLAGS = ["--moe-runner-backend", "--enable-two-batch-overlap", "--pp-size", "--fp4-gemm-backend"]
STATIC = "/static/style.css"
TARGET_MS = 20.0


def main() -> None:
    args = page_bench_options(__doc__, rounds=50)
    db = args.db
    with server(db) as client:
        names, version = served_versions(client, args.version)
        urls = []
        first: list[float] = []  # first view: history and highlighted files not cached yet
        for flag in FLAGS:
            url = f"/v/{version}/flags/{flag}"
            start = time.perf_counter()
            if client.get(url).status_code == 200:
                first.append((time.perf_counter() - start) * 1000)
                urls.append(url)
        if not urls:
            sys.exit(f"none of {FLAGS} exists in {version}")
        print(f"{db}: {len(names)} versions; flag pages at {version}: {len(urls)}")
        per_url: dict[str, list[float]] = {url: [] for url in urls}
        pages: list[float] = []
        api: list[float] = []
        static: list[float] = []
        for _ in range(args.rounds):
            for url in urls:
                pages.append(timed(client, url))
                per_url[url].append(pages[-1])
                static.append(timed(client, STATIC))
                api.append(timed(client, url.replace("/v/", "/api/v/", 1)))
                static.append(timed(client, STATIC))
        print(describe("static file (baseline)", static))
        for url, values in per_url.items():
            print(describe("  " + url.rsplit("/", 1)[1], values))
        print(describe("flag page (HTML)", pages))
        print(describe("flag page (JSON twin)", api))
        print("first view of each page (cold caches): " + ", ".join(f"{t:.1f} ms" for t in first))
        print(verdict_median("flag page", pages, static, TARGET_MS))


if __name__ == "__main__":
    main()
