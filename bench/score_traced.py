"""Score explain on hand-traced deployments (issue 28's acceptance), on the real knowledge base.

    .venv/bin/python bench/score_traced.py KB --cases bench/traced/set14.json [--out OUT.json]
        [--tree OTHER_CHECKOUT] [--only ID,...]

A case (bench/traced/set*.json: development sets, each scored once while hidden): "id", "tag"
(snapshot-2026-02-01 or -07-01), "command", "gpu" (a catalog name), "gpus", "nodes",
"config" (the model's config.json), "draft_config", "hf_quant_config" (a ModelOpt
checkpoint's hf_quant_config.json, read beside config.json), "expect" ("raise" or "pass"),
for a raise "site" {"path", "line"} (the raise/assert SGLang hits first past ServerArgs)
and "stage".

Right: a raise case has an error finding citing the site's file within 6 lines of its line
(as its source, or as where SGLang re-raises it: `reraised_at`);
a pass case has no error. Wrong: an error on a pass case, or errors on a raise case none of
which cites the site. Every fix called verified is explained again with the same profile:
an error there is a violation. `--tree` scores another checkout's code (a frozen commit) on
the same knowledge base.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kb")
    parser.add_argument("--cases", required=True)
    parser.add_argument("--out")
    parser.add_argument("--tree")
    parser.add_argument("--only")
    args = parser.parse_args()
    sys.path.insert(0, args.tree or str(Path(__file__).resolve().parent.parent))
    from sqlmodel import Session

    from kb.explain import explain
    from kb.explain.predicates import Profile
    from kb.schema import make_engine

    with open(args.cases) as f:
        cases = json.load(f)
    if args.only:
        cases = [c for c in cases if c["id"] in set(args.only.split(","))]
    engine = make_engine(f"sqlite:///{args.kb}", readonly=True)
    records, started = [], time.time()
    for case in cases:
        fields = {"gpu": case.get("gpu"), "config": case.get("config")}
        fields |= {
            k: case[k] for k in ("gpus", "nodes", "draft_config", "hf_quant_config") if case.get(k)
        }
        profile = Profile.parse(fields)
        with Session(engine) as session:
            result = explain(session, case["tag"], case["command"], None, profile)
            record = score(case, result)
            fixes = verified_fixes(result)
            record["fixes"] = len(fixes)
            record["violations"] = [
                fix["command"]
                for fix in fixes
                if errors(explain(session, case["tag"], fix["command"], None, profile))
            ]
        records.append(record)
        verdict = "OK" if record["ok"] else "WRONG" if record["wrong"] else "miss"
        print(case["id"], case["expect"], verdict, record["errors"][:2], flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(records, f, indent=1)
    print(
        f"right {sum(r['ok'] for r in records)}/{len(records)}; "
        f"wrong {sum(r['wrong'] for r in records)}; "
        f"verified fixes {sum(r['fixes'] for r in records)}; "
        f"violations {sum(len(r['violations']) for r in records)}; {time.time() - started:.0f} s"
    )


def errors(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in result["findings"] if f["severity"] == "error"]


def cites(finding: dict[str, Any], site: dict[str, Any]) -> bool:
    """The finding cites the site: its raise, or where SGLang re-raises it as its own (the
    CUDA-graph runner's "Capture cuda graph failed"), which the finding names too."""
    return any(_near(finding.get(field) or {}, site) for field in ("source", "reraised_at"))


def _near(source: dict[str, Any], site: dict[str, Any]) -> bool:
    path, want = source.get("path") or "", site["path"]
    if not (path == want or path.endswith("/" + want) or want.endswith("/" + path)):
        return False
    return bool(source.get("line", 0) - 6 <= site["line"] <= source.get("end_line", 0) + 6)


def score(case: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    found = errors(result)
    shown = [
        f"{f.get('stage')} {(f.get('source') or {}).get('path')}:"
        f"{(f.get('source') or {}).get('line')} {f['message'][:120]}"
        for f in found
    ]
    if case["expect"] == "raise":
        hit = any(cites(f, case["site"]) for f in found)
        return {"id": case["id"], "ok": hit, "wrong": bool(found) and not hit, "errors": shown}
    return {"id": case["id"], "ok": not found, "wrong": bool(found), "errors": shown}


def verified_fixes(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        fix
        for f in errors(result)
        for fix in [f.get("fix"), *(f.get("alternatives") or [])]
        if fix and fix.get("verified")
    ]


if __name__ == "__main__":
    main()
