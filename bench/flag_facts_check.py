"""Check the flag facts of a knowledge base against argparse, version by version.

For each version, build a real `argparse.ArgumentParser` from the extracted rows (option
strings, the `--no-x` of BooleanOptionalAction, argparse dest, nargs, choices, default,
const) and check that argparse accepts the definition and parses, for every flag, a command
that uses it the way its row says (a value from its choices, or none when it takes none).
With --base, count the rows whose facts changed against an older knowledge base, per class
of issue 9, and print the extraction warnings that remain.

    .venv/bin/python bench/flag_facts_check.py --db NEW.db [--base OLD.db]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections import Counter
from typing import Any

COLUMNS = (
    'name, aliases, dest, argparse_dest, type, "default", default_expr, choices,'
    " choices_dynamic, action, nargs, const, takes_value, negation, deprecated,"
    " deprecated_kind, action_error"
)


def rows(db: str, version: str) -> list[dict[str, Any]]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    cols = {r[1] for r in conn.execute("pragma table_info(flag)")}
    wanted = [c.strip().strip('"') for c in COLUMNS.split(",")]
    select = ", ".join(f'f."{c}"' if c in cols else f'NULL AS "{c}"' for c in wanted)
    out = [
        dict(r)
        for r in conn.execute(
            f"select {select} from flag f join version v on v.id = f.version_id where v.name = ?",
            (version,),
        )
    ]
    conn.close()
    for r in out:
        for key in ("aliases", "default", "choices", "const"):
            r[key] = json.loads(r[key]) if r[key] is not None else None
    return out


def versions(db: str) -> list[tuple[str, int, str]]:
    conn = sqlite3.connect(db)
    out = list(conn.execute("select name, era, report from version order by position"))
    conn.close()
    return out


class Refused(Exception):
    pass


def build_parser(flags: list[dict[str, Any]]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False, exit_on_error=False, allow_abbrev=False)
    for f in flags:
        kw: dict[str, Any] = {"dest": f["argparse_dest"] or f["dest"]}
        options = [f["name"], *f["aliases"]]
        if f["negation"]:
            kw["action"] = argparse.BooleanOptionalAction
        elif not f["takes_value"]:
            kw["action"] = "store_const"
            kw["const"] = f["const"] if f["const"] is not None else True
        else:
            if f["nargs"] is not None:
                nargs = f["nargs"].strip("'\"")
                kw["nargs"] = int(nargs) if nargs.isdigit() else nargs
            if f["choices"] is not None and not f["choices_dynamic"]:
                kw["choices"] = [str(c) for c in f["choices"]]
            if f["action"] in ("append", "extend"):
                kw["action"] = f["action"]
        if f["default"] is not None:
            kw["default"] = f["default"]
        parser.add_argument(*options, **kw)
    # BooleanOptionalAction generates the negation itself: check it is the one recorded.
    made = {o for a in parser._actions for o in a.option_strings}
    recorded = {o for f in flags for o in [f["name"], *f["aliases"], f["negation"]] if o}
    if made != recorded:
        raise Refused(f"option strings differ: {sorted(made ^ recorded)[:5]}")
    return parser


def use(f: dict[str, Any]) -> list[str]:
    if not f["takes_value"]:
        return [f["name"]]
    value = str(f["choices"][0]) if f["choices"] else "1"
    nargs = (f["nargs"] or "").strip("'\"")
    count = int(nargs) if nargs.isdigit() else 1
    return [f["name"], *([value] * count)]


def changed_classes(old: dict[str, Any], new: dict[str, Any], era: int) -> list[str]:
    """Which classes of issue 9 explain the differences between two rows of a flag."""
    out = []
    custom = (new["action"] or "") not in ("", "store_true", "store_false", "store_const")
    if old["nargs"] != new["nargs"] and new["nargs"] == "0":
        out.append("1 nargs=0 from the action class")
    if old["choices"] != new["choices"]:
        if era == 3 and new["action"] is None and old["choices"] and new["choices"]:
            out.append("5 Arg(choices) over Literal / 2 CONST + [extra]")
        elif old["choices"] and new["choices"] and set(old["choices"]) < set(new["choices"]):
            out.append("2 CONST + [extra]")
        else:
            out.append("14 choices resolved")
    if new["negation"]:
        out.append("3 --no-x negation")
    if era == 3 and custom and (old["type"], old["nargs"]) != (new["type"], new["nargs"]):
        out.append("4 action_kwargs merged")
    if custom and old["default"] is None and new["default"] is False:
        out.append("6 store-true custom action default")
    if custom and new["takes_value"] and (new["nargs"] or "").strip("'\"") != "0":
        out.append("7 custom action takes a value")
    if new["deprecated_kind"] == "raises":
        out.append("8 action raises")
    if new["default_expr"] and new["default"] is not None and old["default"] is None:
        out.append("9 default folded")
    if new["argparse_dest"] and new["argparse_dest"] != new["dest"]:
        out.append("10 argparse dest differs")
    if new["deprecated_kind"] == "soft":
        out.append("11 soft deprecation")
    if new["deprecated_kind"] == "warns":
        out.append("11 deprecation that warns")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--base")
    args = ap.parse_args()
    problems = 0
    classes: Counter[str] = Counter()
    changed_rows = 0
    warnings: Counter[str] = Counter()
    listed = versions(args.db)
    for name, era, report in listed:
        flags = rows(args.db, name)
        try:
            parser = build_parser(flags)
            for f in flags:
                parser.parse_args(use(f))
        except (Refused, argparse.ArgumentError, ValueError, TypeError) as exc:
            problems += 1
            print(f"{name}: argparse refuses the extracted flags: {exc}")
        for w in json.loads(report)["warnings"]:
            warnings[w["what"]] += 1
        if args.base:
            before = {r["name"]: r for r in rows(args.base, name)}
            for f in flags:
                old = before.get(f["name"])
                if old is None:
                    continue
                found = changed_classes(old, f, era)
                keys = ("nargs", "choices", "default", "type", "const")
                if any(old[k] != f[k] for k in keys) or f["negation"]:
                    changed_rows += 1
                classes.update(found)
    print(f"{len(listed)} versions, {problems} refused by argparse")
    if args.base:
        print(f"{changed_rows} flag rows with a changed nargs/choices/default/type/const or a "
              "negation; rows per class (a row may count in several):")  # fmt: skip
        for label, n in sorted(classes.items(), key=lambda kv: int(kv[0].split()[0])):
            print(f"  {n:6d}  {label}")
    print(f"{sum(warnings.values())} warnings in all version reports, {len(warnings)} distinct:")
    for what, n in warnings.most_common():
        print(f"  {n:4d}x {what}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
