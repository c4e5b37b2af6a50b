"""Write the bytes of a sample of pages (HTML, htmx fragments, JSON twins, exports, errors)
to a directory, one file per URL, so two checkouts can be compared byte for byte:

    .venv/bin/python bench/dump_pages.py --db KB.db OUT_BEFORE      # in the old checkout
    .venv/bin/python bench/dump_pages.py --db KB.db OUT_AFTER       # in the new one
    diff -r OUT_BEFORE OUT_AFTER

The sample: every `--every`th flag (HTML and JSON) of a version of each era, the flags and
constraints lists with filters, sorts, pages and exports, and the other page kinds once.
The response cache is off, so every page is rendered.
"""

from __future__ import annotations

import argparse
import hashlib
import sqlite3
import sys
import warnings
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.httpbench import default_db  # noqa: E402

VERSIONS = ("v0.4.9.post5", "v0.5.6", "snapshot-2026-02-01", "snapshot-2026-07-01")


def urls(db: str, every: int) -> list[tuple[str, dict[str, str]]]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    have = {name for (name,) in con.execute("SELECT name FROM version")}
    out: list[tuple[str, dict[str, str]]] = []
    hx = {"HX-Request": "true"}
    for version in (v for v in VERSIONS if v in have):
        base = f"/v/{quote(version, safe='')}"
        names = [
            n
            for (n,) in con.execute(
                "SELECT flag.name FROM flag JOIN version ON version.id = flag.version_id"
                " WHERE version.name = ? ORDER BY flag.path, flag.line, flag.id",
                (version,),
            )
        ]
        for name in names[::every] + ["--moe-runner-backend", "--no-such-flag"]:
            page = f"{base}/flags/{quote(name, safe='')}"
            out += [(page, {}), ("/api" + page, {})]
        for tail in (
            "flags",
            "flags?q=attention",
            "flags?section=Other",
            "flags?q=zzzz",
            "flags?format=csv",
            "flags?format=json",
            "constraints",
            "constraints?page=2",
            "constraints?kind=raise&sort=function",
            "constraints?flag=tp-size",
            "constraints?flag=moe",
            "constraints?per_page=0",
            "constraints?flag=zzzz&kind=raise",
            "constraints?format=csv",
            "backends",
            "enums",
            "env",
            "models",
        ):
            out.append((f"{base}/{tail}", {}))
            if not tail.startswith(("backends", "enums", "env", "models")):
                out.append(("/api" + f"{base}/{tail}".replace("?format=csv", ""), {}))
        out += [(f"{base}/flags?q=tp", hx), (f"{base}/constraints?kind=assert", hx)]
    out += [("/", {}), ("/api/versions", {}), ("/v/nope/flags", {}), ("/api/v/nope/flags", {})]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--db", default=None)
    parser.add_argument("--every", type=int, default=4, help="every Nth flag of a version")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

    from app.main import create_app

    db = args.db or default_db()
    client = TestClient(create_app(f"sqlite:///{Path(db).resolve()}", cache_mb=0))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    listed = urls(db, args.every)
    for url, headers in listed:
        response = client.get(url, headers=headers)
        name = hashlib.sha1(repr((url, sorted(headers.items()))).encode()).hexdigest()[:16]
        head = f"{url} {headers} -> {response.status_code} {response.headers.get('content-type')}"
        (out / name).write_bytes(head.encode() + b"\n" + response.content)
    print(f"{len(listed)} pages -> {out}")


if __name__ == "__main__":
    main()
