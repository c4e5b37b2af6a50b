"""Blob texts and blob facts of two knowledge bases: sizes, equality, and decode time.

    .venv/bin/python bench/bench_storage.py BEFORE.db AFTER.db

BEFORE may be of schema 3 (zlib rows, no base column); AFTER is read through this
checkout's kb.schema (blob_text, unpack). Every blob text and facts JSON that BEFORE holds
must decode to the same in AFTER. Prints both tables' sizes (payload bytes and the pages
sqlite's dbstat counts) and the CPU time of decoding server_args.py (the
source view's largest file) at the newest version, per read, in each.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import create_engine  # noqa: E402

from kb.schema import blob_text, unpack  # noqa: E402


def table_bytes(conn: sqlite3.Connection, table: str) -> int:
    try:
        return conn.execute(
            "SELECT sum(pgsize) FROM dbstat WHERE name = ? OR name LIKE ?",
            (table, f"sqlite_autoindex_{table}%"),
        ).fetchone()[0]
    except sqlite3.OperationalError:  # no dbstat in this sqlite build
        return 0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    args = p.parse_args()
    old = sqlite3.connect(f"file:{args.before}?mode=ro", uri=True)
    new = sqlite3.connect(f"file:{args.after}?mode=ro", uri=True)
    for table, col in (("blob", "text"), ("blobfacts", "facts")):
        for label, db in (("before", old), ("after", new)):
            n, payload = db.execute(f"SELECT count(*), sum(length({col})) FROM {table}").fetchone()
            pages = table_bytes(db, table)
            print(f"{table:9} {label:6} {n:6} rows, {payload / 1e6:6.1f} MB payload, "
                  f"{pages / 1e6:6.1f} MB on disk")  # fmt: skip

    engine = create_engine(f"sqlite:///{args.after}")
    differ = 0
    with engine.connect() as conn:
        shas = [sha for (sha,) in old.execute("SELECT sha FROM blob")]
        for sha in shas:
            (text,) = old.execute("SELECT text FROM blob WHERE sha = ?", (sha,)).fetchone()
            if blob_text(conn, sha) != zlib.decompress(text).decode("utf-8", "replace"):
                differ += 1
        print(f"blob texts that differ: {differ} of {len(shas)}")
        rows = {k: (f, b) for k, f, b in new.execute("SELECT key, facts, base FROM blobfacts")}
        differ = 0
        for key, facts in old.execute("SELECT key, facts FROM blobfacts"):
            packed, base = rows.get(key, (None, None))
            got = None
            if packed is not None:
                whole = unpack(rows[base][0]) if base is not None else None
                got = json.loads(unpack(packed, whole))
            if got != json.loads(zlib.decompress(facts)):
                differ += 1
        print(f"blob facts that differ: {differ} of {len(rows)}")

        (sha,) = old.execute(
            "SELECT f.sha FROM versionfile f JOIN version v ON v.id = f.version_id "
            "WHERE f.path = 'python/sglang/srt/server_args.py' ORDER BY v.position DESC"
        ).fetchone()
        (text,) = old.execute("SELECT text FROM blob WHERE sha = ?", (sha,)).fetchone()
        rounds = 200
        t = time.process_time()
        for _ in range(rounds):
            zlib.decompress(text).decode("utf-8", "replace")
        before = (time.process_time() - t) / rounds
        t = time.process_time()
        for _ in range(rounds):
            decoded = blob_text(conn, sha)
        after = (time.process_time() - t) / rounds
        base = new.execute("SELECT base FROM blob WHERE sha = ?", (sha,)).fetchone()[0]
        print(
            f"newest server_args.py {sha[:10]} ({len(decoded or '') / 1e3:.0f} kB, "
            f"{'a delta' if base else 'whole'}): decode {before * 1e3:.2f} ms before "
            f"(zlib, no query), {after * 1e3:.2f} ms after (zstd, with its queries)"
        )


if __name__ == "__main__":
    main()
