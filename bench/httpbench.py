"""A real uvicorn server on a free port for the bench scripts, and timing helpers."""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


def default_db() -> str:
    for candidate in (
        os.environ.get("FLAGATLAS_REAL_DB"),
        os.environ.get("FLAGATLAS_DB"),
        "data/flagatlas.db",
    ):
        if candidate and Path(candidate).exists():
            return candidate
    sys.exit("no knowledge base: pass --db PATH (or set FLAGATLAS_REAL_DB)")


def page_bench_options(doc: str, rounds: int) -> argparse.Namespace:
    """The options of a bench of pages, parsed: --db (default: `default_db()`), --version
    and --rounds (default `rounds`); `doc`'s first line describes the bench."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--db", default=None)
    parser.add_argument("--version", default="snapshot-2026-02-01")
    parser.add_argument("--rounds", type=int, default=rounds)
    args = parser.parse_args()
    args.db = args.db or default_db()
    return args


def served_versions(client: httpx.Client, wanted: str) -> tuple[list[str], str]:
    """The served versions' names (newest first) and `wanted` if it is one, else the newest."""
    names = [v["name"] for v in client.get("/api/versions").json()["versions"]]
    return names, wanted if wanted in names else names[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def server(
    db: str, pids: list[int] | None = None, root: Path = ROOT, port: int | None = None
) -> Iterator[httpx.Client]:
    """`uvicorn app.main:create_app --factory` on the knowledge base; yields a keep-alive
    client. One worker, like `flagatlas serve`. The server's pid is appended to `pids`;
    `root` is the checkout whose app is served (another one to compare against); `port`
    a fixed port (default: a free one)."""
    port = port or _free_port()
    env = {**os.environ, "FLAGATLAS_DB": db}
    env.pop("DATABASE_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "app.main:create_app", "--factory"]
        + ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=root,
        env=env,
    )
    if pids is not None:
        pids.append(proc.pid)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
    try:
        for _ in range(200):
            try:
                client.get("/static/search.css")
                break
            except httpx.TransportError:
                time.sleep(0.05)
        else:
            sys.exit("the server did not start")
        yield client
    finally:
        client.close()
        proc.terminate()
        proc.wait(timeout=10)


def timed(client: httpx.Client, url: str, headers: dict[str, str] | None = None) -> float:
    """Milliseconds for one request, body read; the response must be 200."""
    start = time.perf_counter()
    response = client.get(url, headers=headers)
    elapsed = (time.perf_counter() - start) * 1000
    if response.status_code != 200:
        sys.exit(f"{url}: HTTP {response.status_code}")
    return elapsed


def cpu_ms(pid: int) -> float:
    """CPU time (user + system) a process has used so far, in ms (Linux, 10 ms ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def describe(name: str, values: list[float]) -> str:
    return (
        f"{name:<28} n={len(values):<5} median {statistics.median(values):7.2f} ms"
        f"   p99 {percentile(values, 99):7.2f} ms   max {max(values):7.2f} ms"
    )


def verdict_median(label: str, values: list[float], baseline: list[float], target_ms: float) -> str:
    """The closing line of a latency bench judged at the median: the median, its ratio to
    the baseline's (the static file), OK or OVER TARGET."""
    median = statistics.median(values)
    ratio = median / statistics.median(baseline)
    verdict = "OK" if median < target_ms else "OVER TARGET"
    return (
        f"{label} median {median:.2f} ms = {ratio:.1f}x the static file "
        f"(target < {target_ms:.0f} ms): {verdict}"
    )


def verdict_p99(label: str, values: list[float], baseline: list[float], target_ms: float) -> str:
    """The closing line of a latency bench: p99, its ratio to the baseline's p99, pass/fail."""
    p99 = percentile(values, 99)
    ratio = p99 / percentile(baseline, 99)
    verdict = "PASS" if p99 < target_ms else "FAIL"
    return (
        f"{label} p99 {p99:.2f} ms = {ratio:.1f}x the static file's p99;"
        f" target < {target_ms:.0f} ms: {verdict}"
    )
