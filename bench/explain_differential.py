"""Explain's accept/reject verdicts against a real argparse parser, on a real knowledge base.

For each era, commands are generated (tests/argparse_oracle.py: names, aliases, negations,
abbreviations, `=` forms, single-dash typos, wrong values, `--`) over the versions of that
era in turn; each is judged by an `argparse.ArgumentParser` built from the version's flag
rows and by explain. Prints the agreement rate per era and a few disagreements.

    .venv/bin/python bench/explain_differential.py [--db PATH] [--per-era 3000] [--seed 1]
        [--dump cases.json]

`--dump` writes the cases (version, argv, argparse's verdict) so another checkout of explain
can be scored on the very same commands.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import argparse_oracle as oracle  # noqa: E402
from sqlmodel import Session, col, select  # noqa: E402

from bench.httpbench import default_db  # noqa: E402
from kb.explain.load import load_facts  # noqa: E402
from kb.explain.parsing import OptionTable  # noqa: E402
from kb.schema import Flag, Version, make_engine  # noqa: E402


def rows_of(session: Session, version: Version) -> list[dict[str, Any]]:
    query = select(Flag).where(Flag.version_id == version.id).order_by(col(Flag.line))
    return [flag.model_dump() for flag in session.exec(query)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", default=None)
    parser.add_argument("--per-era", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dump", default=None)
    parser.add_argument("--era", type=int, action="append", help="only these eras (repeatable)")
    args = parser.parse_args()
    db = args.db or default_db()
    engine = make_engine(f"sqlite:///{db}", readonly=True)
    rng = random.Random(args.seed)
    cases: list[dict[str, Any]] = []
    with Session(engine) as session:
        versions = list(session.exec(select(Version).order_by(col(Version.position))))
        eras: dict[int, list[Version]] = defaultdict(list)
        for v in versions:
            eras[v.era].append(v)
        for era, members in sorted(eras.items()):
            if args.era and era not in args.era:
                continue
            tally: Counter[str] = Counter()
            shown = 0
            prepared = []
            for v in members:
                facts = load_facts(session, v)
                prepared.append(
                    (v, facts, oracle.build_parser(rows_of(session, v)), OptionTable(facts.flags))
                )
            for i in range(args.per_era):
                v, facts, argp, table = prepared[i % len(prepared)]
                argv = oracle.command(rng, facts.flags, table)
                truth, why = oracle.argparse_accepts(argp, argv)
                verdict, found = oracle.explain_accepts(facts, argv)
                tally["agree" if truth == verdict else "disagree"] += 1
                tally["argparse accepts" if truth else "argparse rejects"] += 1
                cases.append({"version": v.name, "argv": argv, "accepts": truth})
                if truth != verdict and shown < 8:
                    shown += 1
                    said = "; ".join(f["message"] for f in found) or "(no error)"
                    print(f"  era {era} {v.name}: {argv}\n    argparse: {why or 'accepts'}")
                    print(f"    explain: {said}")
            rate = 100 * tally["agree"] / max(1, args.per_era)
            print(
                f"era {era}: {len(members)} versions, {args.per_era} commands, agreement "
                f"{rate:.2f}% ({tally['disagree']} disagree; argparse accepts "
                f"{tally['argparse accepts']}, rejects {tally['argparse rejects']})"
            )
    if args.dump:
        Path(args.dump).write_text(json.dumps(cases))


if __name__ == "__main__":
    main()
