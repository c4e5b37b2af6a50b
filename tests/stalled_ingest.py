"""An ingest in a subprocess that stalls inside one version's transaction, for the tests that
kill it there (kill -9 leaves no partial version, no process, no temporary file; a resumed
ingest gives the same knowledge base and search index)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Same web_url and clone cache as tests.conftest.ingest_into, so a resumed ingest's answers
# compare with a clean one's.
SCRIPT = """
import sys, time
from pathlib import Path
from ingest.runner import IngestOptions, run

repo, db, marker, at, jobs = sys.argv[1:6]


def stall(label):
    if label == at:  # the version's rows are written, its transaction is open
        Path(marker).touch()
        time.sleep(3600)


opts = IngestOptions(repo=repo, db_url=f"sqlite:///{db}", web_url="https://github.com/sgl-project/sglang",
                     cache_dir=Path(db).parent / "repos", jobs=int(jobs), before_commit=stall)
run(opts)
"""


def start_stalled_ingest(
    repo: Path, db: Path, at: str, jobs: int = 1, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """The ingest of `repo` into `db`, returned once it stalls in `at`'s transaction."""
    marker = db.parent / f"stalled-{at}"
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(repo), str(db), str(marker), at, str(jobs)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    while not marker.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    if not marker.exists():
        proc.kill()
        proc.wait(10)
        raise AssertionError(f"the ingest never reached {at}'s transaction")
    return proc
