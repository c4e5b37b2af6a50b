"""Compare two knowledge bases version by version: rows per table and the file sizes.

    .venv/bin/python bench/compare_kb.py BEFORE.db AFTER.db

Prints the versions whose flag, constraint, enum, usage or choice-site counts differ (none
when a change of the schema kept the extraction), the totals, and both files' sizes. Reads
the files with sqlite3 directly, so databases of any schema version compare.

Then the content: every per-version table's rows of each version, in id order, with every
column but the ids (rows that point at a flag or a constraint site name it by its content
instead), so a change of storage must give equal rows; the tables that differ are listed.
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


CONTENT_TABLES = [
    "flag", "enum", "constraintsite", "usagesite", "choicesite", "envvar", "envsite",
    "docentry", "indirectusage", "modelfile", "versionfile",
]  # fmt: skip
RELATIONS = {
    "option": "SELECT v.name, o.key, o.name, o.kind, f.name, f.line FROM option o "
    "JOIN version v ON v.id = o.version_id JOIN flag f ON f.id = o.flag_id ORDER BY o.id",
    "constraint_flag": "SELECT v.name, c.key, c.line, cf.option, cf.role, f.name "
    "FROM constraint_flag cf JOIN version v ON v.id = cf.version_id "
    "JOIN constraintsite c ON c.id = cf.constraint_id LEFT JOIN flag f ON f.id = cf.flag_id "
    "ORDER BY cf.id",
}


def content(db: Path) -> dict[str, dict[str, list[tuple]]]:
    """table -> version name -> its rows (no ids), in id order."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    out: dict[str, dict[str, list[tuple]]] = {}
    queries = dict(RELATIONS)
    for table in CONTENT_TABLES:
        cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        keep = ", ".join(f't."{c}"' for c in cols if c not in ("id", "version_id"))
        order = "t.id" if "id" in cols else "t.path"
        queries[table] = (
            f"SELECT v.name, {keep} FROM {table} t JOIN version v ON v.id = t.version_id "
            f"ORDER BY {order}"
        )
    for table, sql in queries.items():
        per: dict[str, list[tuple]] = out.setdefault(table, {})
        for row in conn.execute(sql):
            per.setdefault(row[0], []).append(row[1:])
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
    ca, cb = content(opts.before), content(opts.after)
    unequal = [t for t in ca if ca[t] != cb.get(t)]
    for table in unequal:
        versions = [
            v for v in set(ca[table]) | set(cb[table]) if ca[table].get(v) != cb[table].get(v)
        ]
        print(f"content differs: {table} in {len(versions)} versions, e.g. {sorted(versions)[:3]}")
    print(f"content: {len(ca) - len(unequal)} of {len(ca)} tables equal in every version")
    sys.exit(1 if differ or set(a) != set(b) or unequal else 0)


if __name__ == "__main__":
    main()
