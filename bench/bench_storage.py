"""Two knowledge bases' storage: every table and index's size, whether every blob text and
facts JSON decodes the same (and, with --repo, every text to git's bytes), and the time of
reading a blob text through this checkout's kb.schema.blob_text.

    .venv/bin/python bench/bench_storage.py BEFORE.db AFTER.db [--repo SGLANG.git]

Both files are read with sqlite3 directly, so any schema since 3 decodes: zlib rows (3),
zstd deltas against a whole row (4, 5), or chains of deltas (6: a `depth` column). The read
time (CPU, the median and the worst over --rounds reads) is AFTER's: the newest
server_args.py, the longest text and the text at the end of the longest chain.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import subprocess
import sys
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import create_engine  # noqa: E402

from kb.schema import blob_text, unpack  # noqa: E402

SERVER_ARGS = "python/sglang/srt/server_args.py"


def sizes(conn: sqlite3.Connection) -> dict[str, int]:
    """Table or index -> bytes of its pages (sqlite's dbstat)."""
    return dict(conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"))


def decoded(conn: sqlite3.Connection, table: str, key: str, col: str) -> dict[str, bytes]:
    """Every row of `table` (blob or blobfacts) as the bytes it stores, deltas undone."""
    cols = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
    if "base" not in cols:  # schema 3: zlib
        return {k: zlib.decompress(v) for k, v in conn.execute(f"SELECT {key}, {col} FROM {table}")}
    rows = {k: (v, b) for k, v, b in conn.execute(f"SELECT {key}, {col}, base FROM {table}")}
    out: dict[str, bytes] = {}

    def get(k: str) -> bytes:
        chain = [k]
        while chain[-1] not in out and rows[chain[-1]][1] is not None:
            chain.append(rows[chain[-1]][1])  # type: ignore[arg-type]
        data = out.get(chain[-1])
        if data is None:
            data = out[chain[-1]] = unpack(rows[chain[-1]][0])
        for link in reversed(chain[:-1]):
            data = out[link] = unpack(rows[link][0], data)
        return data

    for k in rows:
        get(k)
    return out


def git_blobs(repo: Path, shas: list[str]) -> dict[str, bytes]:
    proc = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "--batch"],
        input="".join(f"{s}\n" for s in shas).encode(),
        capture_output=True,
        check=True,
    )
    out, data, pos = {}, proc.stdout, 0
    for sha in shas:
        end = data.index(b"\n", pos)
        size = int(data[pos:end].split()[2])
        out[sha] = data[end + 1 : end + 1 + size]
        pos = end + 1 + size + 1
    return out


def read_ms(conn, sha: str, rounds: int) -> tuple[float, float]:
    times = []
    for _ in range(rounds):
        t = time.process_time()
        blob_text(conn, sha)
        times.append(time.process_time() - t)
    return statistics.median(times) * 1e3, max(times) * 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    p.add_argument("--repo", type=Path, help="the git clone: every text must be its blob's")
    p.add_argument("--rounds", type=int, default=200)
    args = p.parse_args()
    old = sqlite3.connect(f"file:{args.before}?mode=ro", uri=True)
    new = sqlite3.connect(f"file:{args.after}?mode=ro", uri=True)

    a, b = sizes(old), sizes(new)
    print(f"{'table or index':44} {'before':>9} {'after':>9}  MiB")
    for name in sorted(set(a) | set(b), key=lambda n: -max(a.get(n, 0), b.get(n, 0))):
        print(f"{name:44} {a.get(name, 0) / 2**20:9.2f} {b.get(name, 0) / 2**20:9.2f}")
    print(f"{'total':44} {sum(a.values()) / 2**20:9.2f} {sum(b.values()) / 2**20:9.2f}")

    for table, key, col in (("blob", "sha", "text"), ("blobfacts", "key", "facts")):
        before, after = decoded(old, table, key, col), decoded(new, table, key, col)
        if table == "blobfacts":
            differ = sum(
                json.loads(after.get(k, b"null")) != json.loads(v) for k, v in before.items()
            )
        else:
            differ = sum(after.get(k) != v for k, v in before.items() if k in after)
        stats = new.execute(
            f"SELECT count(*), sum(base IS NULL), sum(length({col})) FROM {table}"
        ).fetchone()
        print(
            f"{table}: {stats[0]} rows ({stats[1]} whole), {stats[2] / 1e6:.2f} MB stored, "
            f"{sum(map(len, after.values())) / 1e6:.1f} MB decoded; "
            f"{differ} of {len(before)} before's rows decode otherwise"
        )
        if table == "blob" and args.repo:
            git = git_blobs(args.repo, sorted(after))
            wrong = [s for s, v in after.items() if git[s] != v]
            print(f"blob texts that are not git's bytes: {len(wrong)} of {len(after)}")

    cols = {r[1] for r in new.execute("PRAGMA table_info(blob)")}
    longest = new.execute("SELECT sha FROM blob ORDER BY length(text) DESC").fetchone()[0]
    picks = {"longest stored text": longest}
    if "depth" in cols:
        sha, depth = new.execute("SELECT sha, depth FROM blob ORDER BY depth DESC").fetchone()
        picks[f"deepest chain ({depth} deltas)"] = sha
    (newest,) = new.execute(
        "SELECT f.sha FROM versionfile f JOIN version v ON v.id = f.version_id "
        "WHERE f.path = ? ORDER BY v.position DESC",
        (SERVER_ARGS,),
    ).fetchone()
    picks["newest server_args.py"] = newest
    if "depth" in cols:
        (deep,) = new.execute(
            "SELECT b.sha FROM versionfile f JOIN blob b ON b.sha = f.sha "
            "WHERE f.path = ? ORDER BY b.depth DESC, length(b.text) DESC",
            (SERVER_ARGS,),
        ).fetchone()
        picks["server_args.py at its deepest"] = deep
    engine = create_engine(f"sqlite:///{args.after}")
    with engine.connect() as conn:
        for label, sha in picks.items():
            size = len(blob_text(conn, sha) or "")
            median, worst = read_ms(conn, sha, args.rounds)
            print(
                f"read {label:32} {size / 1e3:6.0f} kB: {median:.2f} ms median, {worst:.2f} worst"
            )


if __name__ == "__main__":
    main()
