"""Serving a team, on a full knowledge base, every figure a ratio within one run:

1. warm repeat views of version-pinned pages (the stamp-keyed response cache) against a
   static file from the same server (target: within 2x), and a 304 on If-None-Match;
2. uncached views (response cache off, `FLAGATLAS_CACHE_MB=0`) of the heavy flag page
   (target < 8 ms median), the flags list and the constraints page (< 15 ms);
3. throughput with wrk at 32 keep-alive connections on the flag page, asking for compressed
   replies as a browser does (`Accept-Encoding: gzip, deflate, br, zstd`: the server sends
   zstd), `--workers 2` against `--workers 1` (target >= 1.6x), uncached and cached; each
   configuration `--repeat` times, alternately, and the medians compared (the machine is
   shared: one run moves with the others' load);
4. Datasette (installed from PyPI into a scratch venv) serving the same file: its row page's
   throughput against the flag page's, in the same run.

    .venv/bin/python bench/bench_serving.py [--db PATH] [--seconds 8] [--repeat 3]
        [--only warm|uncached|wrk|datasette ...] [--no-datasette] [--against OTHER_CHECKOUT]
        [--port-base N]

With `--against`, the uncached views (2.) and the uncached one-worker wrk run (3.) are also
measured on another checkout's server (its own .venv), alternately with this one's, and
printed as ratios: on a loaded machine the absolute figures move, the ratios much less.

Needs `wrk` (apt-get install wrk). The database is copied first (the servers never write it,
Datasette is run with -i, but the copy keeps the original out of any doubt).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import re
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.httpbench import ROOT, default_db, describe  # noqa: E402

VERSION = "snapshot-2026-02-01"
FLAG = f"/v/{VERSION}/flags/--moe-runner-backend"
FLAGS = f"/v/{VERSION}/flags"
CONSTRAINTS = f"/v/{VERSION}/constraints"
SOURCE = f"/v/{VERSION}/source/python/sglang/srt/server_args.py"
STATIC = "/static/style.css"


PORT_BASE = 0  # --port-base: the servers' ports are taken from here on, in turn
_ports = itertools.count()


def free_port() -> int:
    if PORT_BASE:
        return PORT_BASE + next(_ports) % 100
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_up(url: str, seconds: float = 120) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if httpx.get(url, timeout=5).status_code < 500:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    sys.exit(f"{url} did not come up")


def worker_pids(pid: int) -> list[int]:
    """The server's worker processes (its children), or the server itself with one worker."""
    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        children += [int(p) for p in task.read_text().split()]
    return children or [pid]


def cpu_seconds(pid: int) -> float:
    """user + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_ns(pid: int) -> int:
    """Nanoseconds on a CPU of every thread of a process so far (schedstat: exact, where the
    clock ticks of /proc/PID/stat count 10 ms at a time)."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        with contextlib.suppress(OSError, ValueError, IndexError):  # a thread that ended
            total += int(stat.read_text().split()[0])
    return total


def busy_cores() -> float:
    """Cores busy machine-wide over the next 0.5 s (every process, not only ours)."""

    def sample() -> tuple[int, int]:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        idle = values[3] + values[4]
        return sum(values) - idle, sum(values)

    busy0, total0 = sample()
    time.sleep(0.5)
    busy1, total1 = sample()
    return (os.cpu_count() or 1) * (busy1 - busy0) / max(total1 - total0, 1)


@contextmanager
def flagatlas(db: str, workers: int, cache_mb: int, root: Path = ROOT) -> Iterator[str]:
    """`flagatlas serve` of the checkout at `root` (with its own .venv unless it is this one)."""
    port = free_port()
    env = {**os.environ, "FLAGATLAS_CACHE_MB": str(cache_mb)}
    env.pop("DATABASE_URL", None)
    python = sys.executable if root == ROOT else str(root / ".venv" / "bin" / "python")
    cmd = [python, "-m", "cli", "serve", "--db", db, "--port", str(port)]
    proc = subprocess.Popen(
        [*cmd, "--workers", str(workers)],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_up(base + STATIC)
        SERVERS[base] = proc.pid
        yield base
    finally:
        proc.terminate()
        proc.wait(30)


SERVERS: dict[str, int] = {}  # base URL -> server pid


def timed(client: httpx.Client, url: str, headers: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    response = client.get(url, headers=headers)
    elapsed = (time.perf_counter() - start) * 1000
    if response.status_code not in (200, 304):
        sys.exit(f"{url}: HTTP {response.status_code}")
    return elapsed


# What browsers send (Chrome 123+, Firefox 126+): the server answers zstd.
BROWSER_ENCODINGS = "gzip, deflate, br, zstd"


def wrk(url: str, seconds: int, connections: int = 32) -> tuple[float, float]:
    """(requests/s, median latency in ms) of `connections` keep-alive clients (wrk's
    HTTP/1.1 connections are kept alive) asking for compressed replies."""
    out = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--timeout", "30s", "--latency"]
        + ["-H", f"Accept-Encoding: {BROWSER_ENCODINGS}", url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        sys.exit(f"wrk {url}: {errors.group(1)} error responses")
    p50 = re.search(r"50%\s+([\d.]+)(us|ms|s)\b", out)
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}
    median = float(p50.group(1)) * scale[p50.group(2)] if p50 else 0.0
    return (float(m.group(1)) if m else 0.0), median


def encoding_of(url: str) -> str:
    """The Content-Encoding the server answers wrk's requests with."""
    response = httpx.get(url, headers={"Accept-Encoding": BROWSER_ENCODINGS}, timeout=120)
    return response.headers.get("content-encoding", "identity")


def warm_views(base: str, rounds: int) -> None:
    urls = [FLAG, FLAGS, CONSTRAINTS, SOURCE, "/api" + FLAG]
    with httpx.Client(base_url=base, timeout=60, headers={"Accept-Encoding": "gzip"}) as c:
        for url in urls:
            c.get(url)  # fill the cache
        static: list[float] = []
        per: dict[str, list[float]] = {u: [] for u in urls}
        for _ in range(rounds):
            for url in urls:
                per[url].append(timed(c, url))
                static.append(timed(c, STATIC))
        etag = c.get(FLAG).headers.get("etag", "")
        status = c.get(FLAG, headers={"If-None-Match": etag}).status_code
    print(describe("static file (baseline)", static))
    s = statistics.median(static)
    worst = 0.0
    for url, values in per.items():
        ratio = statistics.median(values) / s
        worst = max(worst, ratio)
        print(describe("  warm " + url.replace(f"/v/{VERSION}", "…"), values) + f"  {ratio:.2f}x")
    print(f"warm pinned pages: worst median {worst:.2f}x the static file (target <= 2x): "
          + ("PASS" if worst <= 2 else "FAIL"))  # fmt: skip
    print(f"If-None-Match {etag} -> {status}: " + ("PASS" if status == 304 else "FAIL"))


def heavy_flags(db: str, count: int) -> list[str]:
    """The `count` flags of VERSION with the most constraint sites and reads (not FLAG)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    found = con.execute(
        "SELECT f.name, (SELECT count(*) FROM constraint_flag c WHERE c.flag_id = f.id)"
        " + (SELECT count(*) FROM usagesite u WHERE u.version_id = f.version_id"
        "    AND u.dest = f.dest) AS weight"
        " FROM flag f JOIN version v ON v.id = f.version_id WHERE v.name = ?"
        " ORDER BY weight DESC, f.name LIMIT ?",
        (VERSION, count + 1),
    ).fetchall()
    return [name for name, _weight in found if f"/v/{VERSION}/flags/{name}" != FLAG][:count]


def first_views(base: str, db: str, count: int) -> None:
    """Each of `count` heavy flag pages viewed once, after one other page warmed the
    process: a first view with nothing of that page in any cache (the medians above repeat
    one URL, whose per-flag history is then cached)."""
    with httpx.Client(base_url=base, timeout=60) as c:
        c.get(FLAG)
        times = [timed(c, f"/v/{VERSION}/flags/{name}") for name in heavy_flags(db, count)]
    print(describe(f"  first view of {len(times)} other heavy flag pages", times))


def uncached_views(base: str, rounds: int) -> dict[str, float]:
    """Median ms of each uncached page (and the static file's, under "static"), and the
    server's CPU ms per request of each (under "cpu " + URL): on a machine that others load,
    the latency moves with their load, the CPU a request costs much less."""
    targets = {FLAG: 8.0, FLAGS: 15.0, CONSTRAINTS: 15.0}
    pid = worker_pids(SERVERS[base])[0]
    with httpx.Client(base_url=base, timeout=60) as c:
        first = {url: timed(c, url) for url in targets}
        per: dict[str, list[float]] = {u: [] for u in [*targets, STATIC]}
        cpu: dict[str, int] = dict.fromkeys(per, 0)
        for _ in range(rounds):
            for url in [*targets, STATIC]:
                before = cpu_ns(pid)
                per[url].append(timed(c, url))
                cpu[url] += cpu_ns(pid) - before
    load = os.getloadavg()[0]
    print(
        describe("  static file (same server)", per[STATIC])
        + f"  CPU {cpu[STATIC] / rounds / 1e6:.2f} ms/request"
    )
    for url, target in targets.items():
        median = statistics.median(per[url])
        verdict = "PASS" if median < target else "FAIL"
        print(
            describe("  uncached " + url.replace(f"/v/{VERSION}", "…"), per[url])
            + f"  first {first[url]:.1f} ms; CPU {cpu[url] / rounds / 1e6:.2f} ms/request;"
            + f" target < {target:.0f} ms: {verdict} (load average {load:.2f})"
        )
    out = {url: statistics.median(values) for url, values in per.items()}
    out.update({"cpu " + url: used / rounds / 1e6 for url, used in cpu.items()})
    return out


@contextmanager
def datasette(db: str) -> Iterator[str]:
    venv = Path(tempfile.gettempdir()) / "flagatlas-bench-datasette"
    if not (venv / "bin" / "datasette").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", "datasette"],
            check=True,
        )
    port = free_port()
    proc = subprocess.Popen(
        [str(venv / "bin" / "datasette"), "serve", "-i", db, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_up(base + "/-/versions.json")
        yield base
    finally:
        proc.terminate()
        proc.wait(30)


def throughput(
    db: str, seconds: int, repeat: int, against: Path | None
) -> tuple[dict[tuple[int, int], float], float | None]:
    """Each configuration (cache off/on, 1/2 workers, and with `against` the other
    checkout's uncached single worker) `repeat` times, alternately; prints each run and the
    medians. Returns the median req/s of each (cache MB, workers) and the other checkout's."""
    runs = [(0, 1, ROOT), (0, 2, ROOT), (64, 1, ROOT), (64, 2, ROOT)]
    if against:
        runs.insert(1, (0, 1, against))
    measured: dict[tuple[int, int, Path], list[tuple[float, float]]] = {r: [] for r in runs}
    for turn in range(repeat):
        for cache, workers, root in runs:
            with flagatlas(db, workers, cache, root) as base:
                # One request first (fills the history cache), then every worker.
                coding = encoding_of(base + FLAG)
                wrk(base + FLAG, 2)
                idle = busy_cores()  # what the rest of the machine uses meanwhile
                pids = worker_pids(SERVERS[base])
                before = [cpu_seconds(p) for p in pids]
                start = time.perf_counter()
                rate, p50 = wrk(base + FLAG, seconds)
                wall = time.perf_counter() - start
                used = [cpu_seconds(p) - b for p, b in zip(pids, before, strict=True)]
            measured[(cache, workers, root)].append((rate, p50))
            label = ("cached" if cache else "uncached") + ("" if root == ROOT else " AGAINST")
            shares = " + ".join(f"{u / wall:.2f}" for u in used)
            print(
                f"  {turn + 1}. {label:<8} --workers {workers}: {rate:8.1f} req/s,"
                f" p50 {p50:6.2f} ms ({coding}); worker CPU {shares} cores;"
                f" other load before: {idle:.2f} of {os.cpu_count()} cores busy"
            )
    rates: dict[tuple[int, int], float] = {}
    other: float | None = None
    print(f"  medians of {repeat} rounds:")
    for (cache, workers, root), values in measured.items():
        rate = statistics.median(v[0] for v in values)
        p50 = statistics.median(v[1] for v in values)
        label = ("cached" if cache else "uncached") + ("" if root == ROOT else " AGAINST")
        print(f"  {label:<8} --workers {workers}: {rate:8.1f} req/s, p50 {p50:6.2f} ms")
        if root == ROOT:
            rates[(cache, workers)] = rate
        else:
            other = rate
    if other:
        ratio = rates[(0, 1)] / other
        print(f"  uncached --workers 1: this = {ratio:.2f}x the other checkout's throughput")
    for cache in (0, 64):
        ratio = rates[(cache, 2)] / max(rates[(cache, 1)], 1e-9)
        label = "cached" if cache else "uncached"
        verdict = "PASS" if ratio >= 1.6 else "FAIL"
        print(f"  {label}: --workers 2 = {ratio:.2f}x --workers 1 (target >= 1.6x): {verdict}")
    return rates, other


SECTIONS = ("warm", "uncached", "wrk", "datasette")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", default=None)
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3, help="rounds of the wrk runs (3.)")
    parser.add_argument("--only", action="append", choices=SECTIONS, help="sections to run")
    parser.add_argument("--no-datasette", action="store_true")
    parser.add_argument("--against", type=Path, help="another checkout (the before)")
    parser.add_argument(
        "--port-base", type=int, default=0, help="serve on ports N..N+99 (default: any free)"
    )
    args = parser.parse_args()
    global PORT_BASE
    PORT_BASE = args.port_base
    sections = set(args.only or SECTIONS) - ({"datasette"} if args.no_datasette else set())
    against = args.against.resolve() if args.against else None
    if not shutil.which("wrk"):
        sys.exit("wrk is missing: apt-get install wrk")
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "kb.db")
        shutil.copy(args.db or default_db(), db)
        print(f"{args.db or default_db()} (copied), {os.cpu_count()} cores")

        if "warm" in sections:
            print("\n1. warm repeat views (response cache on, 1 worker)")
            with flagatlas(db, 1, 64) as base:
                warm_views(base, args.rounds)

        medians: dict[str, list[dict[str, float]]] = {"this": [], "against": []}
        if "uncached" in sections:
            print("\n2. uncached views (FLAGATLAS_CACHE_MB=0, 1 worker)")
            for turn in range(2 if against else 1):
                for who, root in [("this", ROOT)] + ([("against", against)] if against else []):
                    with flagatlas(db, 1, 0, root) as base:
                        print(f" {who} ({root}), turn {turn + 1}")
                        if turn == 0:
                            first_views(base, db, 20)
                        medians[who].append(uncached_views(base, args.rounds))
            if against:
                print(" this / against, median of each turn's medians (ms), and server CPU:")
                for url in (FLAG, FLAGS, CONSTRAINTS, STATIC):
                    a = statistics.median(m[url] for m in medians["this"])
                    b = statistics.median(m[url] for m in medians["against"])
                    ca = statistics.median(m["cpu " + url] for m in medians["this"])
                    cb = statistics.median(m["cpu " + url] for m in medians["against"])
                    name = url.replace(f"/v/{VERSION}", "…")
                    print(
                        f"  {name:<34} {b:8.2f} -> {a:8.2f}  {a / b:.2f}x;"
                        f"  CPU {cb:6.2f} -> {ca:6.2f} ms/request  {ca / cb:.2f}x"
                    )

        rates: dict[tuple[int, int], float] = {}
        other: float | None = None
        if "wrk" in sections:
            print(
                f"\n3. wrk, 32 keep-alive connections, Accept-Encoding: {BROWSER_ENCODINGS},"
                f" {args.seconds}s each, {args.repeat} rounds, on {FLAG}"
            )
            rates, other = throughput(db, args.seconds, args.repeat, against)

        if "datasette" in sections:
            print("\n4. Datasette on the same file, wrk 32 connections")
            with datasette(db) as base:
                # A row page of a table (since schema 5 `flag` is a view, which has none).
                row = base + "/kb/flag/1"
                if httpx.get(row, timeout=120).status_code != 200:
                    row = base + "/kb/flag_fact/1"
                httpx.get(row, timeout=120)
                wrk(row, 2)
                rate, _p50 = wrk(row, args.seconds)
            print(f"  datasette row page {row.removeprefix(base)}: {rate:8.1f} req/s")
            for (cache, workers), ours in sorted(rates.items()):
                label = "cached" if cache else "uncached"
                print(
                    f"  flag page {label} --workers {workers}: {ours / rate:.2f}x Datasette's"
                    " row page (target >= 1x)"
                )
            if other:
                print(f"  the other checkout's flag page uncached --workers 1: {other / rate:.2f}x")


if __name__ == "__main__":
    main()
