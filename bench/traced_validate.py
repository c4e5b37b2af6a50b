"""Check a hand-traced case file's shape, never its answers (docs/TRACING.md).

    python3 traced_validate.py CASES.json 'GPU NAME|GPU NAME|...'

Each case needs an id, a tag of the two snapshots, a command with --model-path, a catalog
GPU, a config.json with architectures, expect raise|pass, a why; a raise case a site whose
line (in $TRACED_SOURCES/<tag>, default /tmp/src) is within 2 lines of a raise or assert,
and a stage.
"""

import json
import os
import re
import sys
from pathlib import Path

GPUS = set(sys.argv[2].split("|")) if len(sys.argv) > 2 else None
TAGS = {"snapshot-2026-02-01", "snapshot-2026-07-01"}
# the two tags' trees (`git archive` of each): $TRACED_SOURCES/<tag>/python/sglang/...
SOURCES = Path(os.environ.get("TRACED_SOURCES", "/tmp/src"))
cases = json.loads(Path(sys.argv[1]).read_text())
bad = 0
ids = set()
for c in cases:
    p = []
    for k in ("id", "tag", "command", "gpu", "config", "expect", "why"):
        if k not in c:
            p.append(f"missing {k}")
    if c.get("id") in ids:
        p.append("duplicate id")
    ids.add(c.get("id"))
    if c.get("tag") not in TAGS:
        p.append("tag must be one of " + ", ".join(sorted(TAGS)))
    if GPUS and c.get("gpu") not in GPUS:
        p.append(f"gpu {c.get('gpu')!r} not in catalog")
    cfg = c.get("config")
    if not isinstance(cfg, dict) or not cfg.get("architectures"):
        p.append("config must be a config.json object with architectures")
    if c.get("expect") not in ("raise", "pass"):
        p.append("expect must be raise or pass")
    if c.get("expect") == "raise":
        s = c.get("site") or {}
        f = SOURCES / str(c.get("tag")) / str(s.get("path", ""))
        if not f.is_file():
            p.append(f"site path not found at the tag: {s.get('path')}")
        else:
            lines = f.read_text().splitlines()
            n = int(s.get("line", 0))
            if not 1 <= n <= len(lines):
                p.append("site line out of range")
            else:
                near = "\n".join(lines[max(0, n - 3) : n + 2])
                if not re.search(
                    r"\braise\b|\bassert\b|NotImplementedError|RuntimeError|ValueError", near
                ):
                    p.append(f"warning: no raise/assert within 2 lines of {s['path']}:{n}")
        if c.get("stage") not in ("load", "first_forward", "server_args", "startup"):
            p.append("stage should be load | first_forward | startup | server_args")
    if "--model-path" not in c.get("command", "") and "--model " not in c.get("command", ""):
        p.append("command has no --model-path")
    if p:
        bad += 1
        print(c.get("id"), "; ".join(p))
print(f"{len(cases)} cases, {bad} with problems")
