"""Compare two knowledge bases version by version: rows per table and the file sizes.

    .venv/bin/python bench/compare_kb.py BEFORE.db AFTER.db

Prints the versions whose flag, constraint, enum, usage or choice-site counts differ (none
when a change of the schema kept the extraction), the totals, and both files' sizes. Reads
the files with sqlite3 directly, so databases of any schema version compare.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

TABLES = ["flag", "constraintsite", "enum", "usagesite", "choicesite", "versionfile"]


def counts(db: Path) -> dict[str, dict[str, int]]:
    """version name -> table -> rows."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    out: dict[str, dict[str, int]] = {}
    names = dict(conn.execute("SELECT id, name FROM version"))
    for table in TABLES:
        for vid, n in conn.execute(f"SELECT version_id, count(*) FROM {table} GROUP BY 1"):
            out.setdefault(names[vid], {})[table] = n
    for name in names.values():
        out.setdefault(name, {})
    conn.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    opts = parser.parse_args()
    a, b = counts(opts.before), counts(opts.after)
    differ = 0
    for name in sorted(set(a) | set(b)):
        if a.get(name) != b.get(name):
            differ += 1
            print(f"{name:<24} before {a.get(name)}  after {b.get(name)}")
    print(f"versions: before {len(a)}, after {len(b)}; differing: {differ}")
    for table in TABLES:
        ta = sum(v.get(table, 0) for v in a.values())
        tb = sum(v.get(table, 0) for v in b.values())
        print(f"{table:<16} before {ta:8d}  after {tb:8d}")
    for label, path in (("before", opts.before), ("after", opts.after)):
        print(f"size {label:<6} {path.stat().st_size / 2**20:8.1f} MiB")
    sys.exit(1 if differ or set(a) != set(b) else 0)


if __name__ == "__main__":
    main()
