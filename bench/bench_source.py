"""The source view of a big file over HTTP, against a static file in the same run.

Targets (issue 12): `server_args.py` at snapshot-2026-02-01 (about 5,600 lines) served in
under 50 ms at the median, warm, with under 600 KB of HTML; the first view fast too.

    .venv/bin/python bench/bench_source.py [--db PATH] [--version NAME] [--path P]
        [--rounds 40] [--against OTHER_CHECKOUT]

The server runs with the response cache off (`FLAGATLAS_CACHE_MB=0`), so "warm" means the
per-blob caches are filled but the page is rendered for every request; a cached response
(the default) costs what a static file costs. Requests alternate between the page and the
static file so both see the same machine state; the server's CPU time per request is printed
too (wall time on a shared machine swings with the load). `--against` serves another
checkout's app (e.g. `git archive main | tar -x -C /tmp/base`) on the same database in the
same run, for a before/after.
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.httpbench import ROOT, cpu_ms, default_db, describe, server, timed  # noqa: E402

STATIC = "/static/style.css"
TARGET_MS = 50.0
TARGET_KB = 600


def measure(db: str, version: str, url: str, rounds: int, root: Path) -> float:
    """Print one checkout's figures; return its median warm latency."""
    pids: list[int] = []
    cpu = {"page": 0.0, "static": 0.0}
    with server(db, pids, root) as client:
        # The server has served one other page, so the first view measures the source
        # view's own cold caches (blob, highlighting, marks, links), not start-up.
        client.get(f"/v/{version}/flags")
        pid = pids[0]
        before, start = cpu_ms(pid), time.perf_counter()
        response = client.get(url)
        first = (time.perf_counter() - start) * 1000
        first_cpu = cpu_ms(pid) - before
        if response.status_code != 200:
            sys.exit(f"{url}: HTTP {response.status_code}")
        body = response.content
        api_first = timed(client, "/api" + url)
        page: list[float] = []
        api: list[float] = []
        static: list[float] = []
        for _ in range(rounds):
            before = cpu_ms(pid)
            page.append(timed(client, url))
            cpu["page"] += cpu_ms(pid) - before
            before = cpu_ms(pid)
            static.append(timed(client, STATIC))
            cpu["static"] += cpu_ms(pid) - before
            api.append(timed(client, "/api" + url))
            static.append(timed(client, STATIC))
    size_kb = len(body) / 1024
    median = statistics.median(page)
    ratio = median / statistics.median(static)
    print(f"== {root}")
    print(
        f"HTML {size_kb:.0f} KB ({len(gzip.compress(body, 5)) / 1024:.0f} KB gzipped; "
        f"target < {TARGET_KB} KB): " + ("PASS" if size_kb < TARGET_KB else "FAIL")
    )
    print(describe("static file (baseline)", static))
    print(describe("source view (HTML)", page) + f"  {ratio:.1f}x the static file")
    print(describe("source view (JSON twin)", api))
    print(f"first view (cold caches): HTML {first:.1f} ms, then JSON {api_first:.1f} ms")
    print(
        f"server CPU per request: source view {cpu['page'] / rounds:.1f} ms, static file "
        f"{cpu['static'] / rounds:.1f} ms; first view {first_cpu:.0f} ms"
    )
    print(
        f"source view median {median:.2f} ms (target < {TARGET_MS:.0f} ms): "
        + ("PASS" if median < TARGET_MS else "FAIL")
    )
    return median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", default=None)
    parser.add_argument("--version", default="snapshot-2026-02-01")
    parser.add_argument("--path", default="python/sglang/srt/server_args.py")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--against", type=Path, default=None, help="another checkout")
    args = parser.parse_args()
    db = args.db or default_db()
    os.environ["FLAGATLAS_CACHE_MB"] = "0"  # render every request (the server inherits this)
    url = f"/v/{args.version}/source/{args.path}"
    print(f"{db}: {url}")
    mine = measure(db, args.version, url, args.rounds, ROOT)
    if args.against:
        other = measure(db, args.version, url, args.rounds, args.against.resolve())
        print(f"median warm: this checkout {mine / other:.2f}x the other")


if __name__ == "__main__":
    main()
