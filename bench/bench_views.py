"""CPU per uncached view (response cache off) of a few heavy pages, in-process, in this
checkout, or this checkout against another one in the same run:

    .venv/bin/python bench/bench_views.py KB.db [--calls 50] [--cold]
    .venv/bin/python bench/bench_views.py KB.db --against OTHER_CHECKOUT [--rounds 5]

With `--against`, each checkout's own bench_views.py runs (its own .venv) in a subprocess,
alternately, `--rounds` times each, so both see the same load; the figure per page is the
median over the rounds, and the ratio is this checkout's over the other's.

Each page is fetched a few times to warm up, then `--calls` times; the figure is
time.process_time per call. `--cold` empties every in-process cache (kb.cache.Cache: the
per-stamp data pages share) before each call, as on the first view after an ingest.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
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


ROOT = Path(__file__).resolve().parent.parent


def run_in(checkout: Path, db: str, calls: int, cold: bool) -> dict[str, float | str]:
    """One run of `checkout`'s bench_views.py with its own interpreter (a subprocess)."""
    python = checkout / ".venv" / "bin" / "python"
    cmd = [str(python), str(checkout / "bench" / "bench_views.py"), db, "--calls", str(calls)]
    out = subprocess.run(
        cmd + (["--cold"] if cold else []), cwd=checkout, capture_output=True, text=True
    )
    if out.returncode:
        sys.exit(f"{checkout}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def compare(args: argparse.Namespace) -> None:
    runs: dict[str, list[dict[str, float | str]]] = {"this": [], "against": []}
    for _ in range(args.rounds):
        runs["against"].append(run_in(Path(args.against).resolve(), args.db, args.calls, args.cold))
        runs["this"].append(run_in(ROOT, args.db, args.calls, args.cold))
    cold = " (--cold)" if args.cold else ""
    print(f"ms CPU per view{cold}, median of {args.rounds} alternating runs of {args.calls} calls")
    print(f"{'page':<14}{'against':>10}{'this':>10}{'ratio':>8}")
    for name in URLS:
        before = [float(v) for r in runs["against"] if isinstance(v := r.get(name), float | int)]
        after = [float(v) for r in runs["this"] if isinstance(v := r.get(name), float | int)]
        if not before or not after:
            print(f"{name:<14}{'-':>10}{'-':>10}")
            continue
        b, a = statistics.median(before), statistics.median(after)
        print(f"{name:<14}{b:>10.2f}{a:>10.2f}{a / b:>7.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("db")
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--cold", action="store_true")
    parser.add_argument("--against", help="another checkout of Flag Atlas (the before)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if args.against:
        compare(args)
        return
    client = TestClient(create_app(f"sqlite:///{args.db}", cache_mb=0))
    caches: list[Cache] = []

    def clear() -> None:
        if not args.cold:
            return
        if not caches:
            # create_app froze the start-up objects (gc.freeze): the caches are among them,
            # and gc.get_objects() lists no frozen object (--cold found none, emptied none).
            gc.unfreeze()
            caches.extend(o for o in gc.get_objects() if isinstance(o, Cache))
            gc.freeze()
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
