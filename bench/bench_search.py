"""Search as you type, end to end over HTTP: p99 latency of the header dropdown's requests
(every prefix of queries people type) against a static file served by the same server in
the same run. Target: p99 under 30 ms.

    .venv/bin/python bench/bench_search.py [--db data/flagatlas.db] [--rounds 5]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.httpbench import default_db, describe, server, timed, verdict_p99  # noqa: E402
from kb.schema import database_url  # noqa: E402
from kb.search import default_index_dir  # noqa: E402
from kb.search_build import build_index  # noqa: E402

TYPED = [
    "nvls",
    "--enable-nccl-nvls",
    "enable_nccl_nvls",
    "two batch overlap",
    "moe runnr backend",
    "fp4 gemm",
    "flashinfer_cutlass",
    "pp size",
    "chunked prefill size",
    "speculative algorithm",
    "disable overlap schedule",
    "attention backend",
    "mem fraction static",
    "deepep mode",
    'junk "(*:',
]
# Acceptance: the right flag first at the newest version.
EXPECTED = {
    "nvls": "--enable-nccl-nvls",
    "two batch overlap": "--enable-two-batch-overlap",
    "moe runnr backend": "--moe-runner-backend",
    "fp4 gemm": "--fp4-gemm-backend",
}
TARGET_MS = 30.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", default=None)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    db = args.db or default_db()
    info = build_index(database_url(db), default_index_dir(database_url(db)))
    print(f"index: {info['docs']} distinct facts, {info['versions']} versions, {info['seconds']}s")

    prefixes = [q[:i] for q in TYPED for i in range(1, len(q) + 1)]
    dropdown = {"HX-Request": "true", "HX-Target": "search-results"}
    with server(db) as client:
        for q, want in EXPECTED.items():
            top = client.get("/api/search", params={"q": q}).json()["results"][:1]
            got = top[0]["name"] if top else None
            mark = "ok " if got == want else "BAD"
            print(f"{mark} {q!r:22} -> {got}  (want {want})")
        for p in prefixes[:50]:  # warm up
            timed(client, "/search?" + urlencode({"q": p}), dropdown)
            timed(client, "/static/search.css")
        search_ms: list[float] = []
        api_ms: list[float] = []
        base_ms: list[float] = []
        rng = random.Random(4)
        for _ in range(args.rounds):
            order = prefixes[:]
            rng.shuffle(order)
            for p in order:
                # Interleaved so both see the same machine load.
                base_ms.append(timed(client, "/static/search.css"))
                search_ms.append(timed(client, "/search?" + urlencode({"q": p}), dropdown))
                api_ms.append(timed(client, "/api/search?" + urlencode({"q": p})))
    print(describe("baseline: static file", base_ms))
    print(describe("dropdown /search (htmx)", search_ms))
    print(describe("/api/search", api_ms))
    print(verdict_p99("dropdown", search_ms, base_ms, TARGET_MS))


if __name__ == "__main__":
    main()
