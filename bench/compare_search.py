"""Do two search indexes answer alike? Every prefix of typical queries, at the newest
version, the middle one and across all versions, compared answer by answer.

    .venv/bin/python bench/compare_search.py A.db B.db [--against OTHER_CHECKOUT]
    .venv/bin/python bench/compare_search.py --paths REPO DIR [--against OTHER_CHECKOUT]

Each database's index is the one beside it. With `--against`, A's answers come from the
other checkout's code (its own index format), run in a subprocess. Prints the queries whose
answers differ (at most 10) and their count.

With `--paths`, REPO's tags are ingested into DIR by several paths (by the code of
`--against`, else this checkout): at once (clean.db); the older ones first, then all
(older-first.db); the newest ones first (newer-first.db); and killed (SIGKILL) once half the
versions are in, then resumed (killed.db). Each is compared with clean.db.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

QUERIES = [
    "nvls", "--enable-nccl-nvls", "enable_nccl_nvls", "two batch overlap", "moe runnr backend",
    "fp4 gemm", "flashinfer_cutlass", "pp size", "chunked prefill size", "speculative algorithm",
    "disable overlap schedule", "attention backend", "mem fraction static", "deepep mode",
    "triton", "fa3", "cuda graph", "lora", "tp", "dp attention", "quantization fp8", "eagle",
    "SGLANG_", "sglang_enable", "hicache", "torch compile", "log level", "kv cache dtype",
    "ForwardMode", "decode", "must be", "not supported", "page size", "radix", "deprecated",
]  # fmt: skip


def answers(db: Path) -> dict[str, object]:
    from kb.search import SearchIndex, default_index_dir

    url = f"sqlite:///{db}"
    search = SearchIndex(default_index_dir(url))
    names = search.versions()
    out: dict[str, object] = {}
    for q in QUERIES:
        for i in range(1, len(q) + 1):
            for v in (None, names[len(names) // 2], "all"):
                out[f"{q[:i]!r} @ {v}"] = search.search(q[:i], v, 20)
    return out


def ingest_paths(repo: Path, out: Path, root: Path, python: Path) -> list[tuple[Path, Path]]:
    """The databases of each ingest path (see the module's docstring), paired with clean.db."""
    out.mkdir(parents=True, exist_ok=True)

    def ingest(db: Path, *args: str) -> subprocess.Popen[bytes]:
        cmd = [str(python), "-m", "cli", "ingest", "--repo", str(repo), "--db", str(db)]
        return subprocess.Popen([*cmd, "--tags", "*", *args], cwd=root, stdout=subprocess.DEVNULL)

    def versions(db: Path) -> int:
        try:
            with sqlite3.connect(db) as conn:
                return int(conn.execute("select count(*) from version").fetchone()[0])
        except sqlite3.Error:
            return 0

    dbs = {name: out / f"{name}.db" for name in ("clean", "older-first", "newer-first", "killed")}
    for db in dbs.values():
        for old in out.glob(f"{db.name}*"):
            subprocess.run(["rm", "-rf", str(old)], check=True)
    assert ingest(dbs["clean"]).wait() == 0
    total = versions(dbs["clean"])
    assert ingest(dbs["older-first"], "--tags", "v0.[1-3]*").wait() == 0
    assert ingest(dbs["newer-first"], "--latest", str(total // 2)).wait() == 0
    killed = ingest(dbs["killed"])
    while versions(dbs["killed"]) < total // 2 and killed.poll() is None:
        time.sleep(0.05)
    killed.kill()
    killed.wait()
    print(f"killed once {versions(dbs['killed'])} of {total} versions were in")
    for name in ("older-first", "newer-first", "killed"):
        assert ingest(dbs[name]).wait() == 0
    return [(dbs["clean"], dbs[name]) for name in ("older-first", "newer-first", "killed")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", type=Path, nargs="?")
    parser.add_argument("b", type=Path, nargs="?")
    parser.add_argument("--against", type=Path, help="the checkout whose code reads A")
    parser.add_argument("--dump", action="store_true", help="print A's answers as JSON")
    parser.add_argument("--paths", type=Path, nargs=2, metavar=("REPO", "DIR"))
    opts = parser.parse_args()
    if opts.dump:
        json.dump(answers(opts.a), sys.stdout)
        return
    here = (Path(__file__).resolve().parent.parent, Path(sys.executable))
    code = (
        (opts.against.resolve(), opts.against.resolve() / ".venv/bin/python")
        if opts.against
        else here
    )
    if opts.paths:
        for a, b in ingest_paths(*opts.paths, *code):
            print(f"{b.name}:", end=" ", flush=True)
            compare(dumped(a, *code), dumped(b, *code))
        return
    compare(dumped(opts.a, *code), dumped(opts.b, *here))


def dumped(db: Path, root: Path, python: Path) -> dict[str, object]:
    """The answers of the index beside `db`, read by the code of the checkout `root`."""
    out = subprocess.run(
        [str(python), "-c", f"import sys; sys.path.insert(0, {str(root)!r}); "
         f"sys.argv = ['', {str(db.resolve())!r}, '--dump']; "
         f"exec(open({__file__!r}).read())"],
        cwd=root, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return json.loads(out)  # type: ignore[no-any-return]


def compare(a: dict[str, object], b: dict[str, object]) -> None:
    differ = [k for k in a if json.dumps(a[k], sort_keys=True) != json.dumps(b[k], sort_keys=True)]
    for key in differ[:10]:
        print("differs:", key)
    print(f"{len(a)} answers compared, {len(differ)} differ")


if __name__ == "__main__":
    main()
