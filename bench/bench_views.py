"""CPU per uncached view (response cache off) of a few heavy pages, in-process, in this
checkout; run it from two checkouts on their own databases to compare them.

    .venv/bin/python bench/bench_views.py KB.db [--calls 50] [--cold]

Each page is fetched a few times to warm up, then `--calls` times; the figure is
time.process_time per call. `--cold` empties every in-process cache (kb.cache.Cache: the
per-stamp data pages share) before each call, as on the first view after an ingest.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ["FLAGATLAS_CACHE_MB"] = "0"

from fastapi.testclient import TestClient  # noqa: E402

from app.main import create_app  # noqa: E402
from kb.cache import Cache  # noqa: E402

V = "snapshot-2026-02-01"
URLS = {
    "flag page": f"/v/{V}/flags/--moe-runner-backend",
    "flag json": f"/api/v/{V}/flags/--moe-runner-backend",
    "flags list": f"/v/{V}/flags",
    "constraints": f"/v/{V}/constraints",
    "env": f"/v/{V}/env",
    "home": "/",
    "diff": "/diff/v0.5.5...v0.5.6",
    "enums": f"/v/{V}/enums",
    "models": f"/v/{V}/models",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("db")
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--cold", action="store_true")
    args = parser.parse_args()
    client = TestClient(create_app(f"sqlite:///{args.db}", cache_mb=0))
    caches: list[Cache] = []

    def clear() -> None:
        if not args.cold:
            return
        if not caches:
            caches.extend(o for o in gc.get_objects() if isinstance(o, Cache))
        for cache in caches:
            cache._items.clear()
            cache._states.clear()

    out: dict[str, float | str] = {}
    for name, url in URLS.items():
        status = client.get(url).status_code
        if status != 200:
            out[name] = f"status {status}"
            continue
        for _ in range(3):
            client.get(url)
        start = time.process_time()
        for _ in range(args.calls):
            clear()
            client.get(url)
        out[name] = round((time.process_time() - start) / args.calls * 1000, 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
