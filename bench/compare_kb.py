"""Compare two knowledge bases version by version: rows per table and the file sizes.

    .venv/bin/python bench/compare_kb.py BEFORE.db AFTER.db

Prints the versions whose row counts differ in any per-version table (none when a change of
the schema kept the extraction), then the versions whose rows differ in content (each
table's rows of a version, sorted, without the id columns, over the columns both files
have), the totals, and both files' sizes. Reads the files with sqlite3 directly, so
databases of any schema version compare; a table one file lacks is left out. The rows that
point at a flag or a constraint site are also compared with it named by its content
(`option->flag`, `constraint_flag->site`), since ids may differ between files.
"""

from __future__ import annotations

import argparse
import hashlib
import sqlite3
import sys
from pathlib import Path

TABLES = [
    "flag", "option", "constraintsite", "constraint_flag", "enum", "usagesite", "choicesite",
    "envvar", "envsite", "docentry", "indirectusage", "modelfile", "versionfile",
]  # fmt: skip


# The id columns left out above, followed to what they name.
RELATIONS = {
    "option->flag": "SELECT o.version_id, o.key, o.name, f.name, f.line FROM option o "
    "JOIN flag f ON f.id = o.flag_id",
    "constraint_flag->site": "SELECT cf.version_id, c.key, c.line, cf.option, cf.role, f.name "
    "FROM constraint_flag cf JOIN constraintsite c ON c.id = cf.constraint_id "
    "LEFT JOIN flag f ON f.id = cf.flag_id",
}


def _tables(conn: sqlite3.Connection) -> dict[str, list[str]]:
    """Per-version tables of TABLES present in the file -> their columns."""
    out = {}
    for table in TABLES:
        cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
        if "version_id" in cols:
            out[table] = cols
    return out


def counts(db: Path) -> dict[str, dict[str, int]]:
    """version name -> table -> rows."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    out: dict[str, dict[str, int]] = {}
    names = dict(conn.execute("SELECT id, name FROM version"))
    for table in _tables(conn):
        for vid, n in conn.execute(f'SELECT version_id, count(*) FROM "{table}" GROUP BY 1'):
            out.setdefault(names[vid], {})[table] = n
    for name in names.values():
        out.setdefault(name, {})
    conn.close()
    return out


def contents(db: Path, columns: dict[str, list[str]]) -> dict[tuple[str, str], str]:
    """(version name, table) -> digest of its rows over `columns` (sorted, ids left out)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    names = dict(conn.execute("SELECT id, name FROM version"))
    rows: dict[tuple[str, str], list[str]] = {}
    for table, cols in columns.items():
        keep = [c for c in cols if c != "id" and not c.endswith("_id")]
        select = ", ".join(f'"{c}"' for c in keep)
        for vid, *values in conn.execute(f'SELECT version_id, {select} FROM "{table}"'):
            rows.setdefault((names[vid], table), []).append(repr(values))
    for table, sql in RELATIONS.items():
        for vid, *values in conn.execute(sql):
            rows.setdefault((names[vid], table), []).append(repr(values))
    conn.close()
    return {
        key: hashlib.sha1("\n".join(sorted(found)).encode()).hexdigest()
        for key, found in rows.items()
    }


def common_columns(a: Path, b: Path) -> dict[str, list[str]]:
    ca = _tables(sqlite3.connect(f"file:{a}?mode=ro", uri=True))
    cb = _tables(sqlite3.connect(f"file:{b}?mode=ro", uri=True))
    return {t: [c for c in ca[t] if c in cb[t]] for t in ca if t in cb}


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
    columns = common_columns(opts.before, opts.after)
    ca, cb = contents(opts.before, columns), contents(opts.after, columns)
    changed = sorted(k for k in set(ca) | set(cb) if ca.get(k) != cb.get(k))
    for name, table in changed[:40]:
        print(f"content differs: {name} {table}")
    print(
        f"(version, table) contents compared: {len(set(ca) | set(cb))}; differing: {len(changed)}"
    )
    differ += len(changed)
    for table in columns:
        ta = sum(v.get(table, 0) for v in a.values())
        tb = sum(v.get(table, 0) for v in b.values())
        print(f"{table:<16} before {ta:8d}  after {tb:8d}")
    for label, path in (("before", opts.before), ("after", opts.after)):
        print(f"size {label:<6} {path.stat().st_size / 2**20:8.1f} MiB")
    sys.exit(1 if differ or set(a) != set(b) else 0)


if __name__ == "__main__":
    main()
