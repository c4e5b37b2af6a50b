"""The house rule, checked: ingest/ and app/ meet only in kb/, and nothing imports in a cycle.

The contracts live in pyproject.toml ([tool.importlinter]); this runs them, and proves the
check can fail by feeding it a planted violation.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).with_name("lint-imports")


def lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT), "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_layer_contracts_hold() -> None:
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout


def test_an_app_import_in_ingest_breaks_the_contract(tmp_path: Path) -> None:
    for name in ("app", "cli", "ingest", "kb"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    planted = tmp_path / "ingest" / "planted.py"
    planted.write_text("from app.views import common  # noqa\n")
    result = subprocess.run(
        [str(LINT), "--no-cache"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode != 0
    assert "BROKEN" in result.stdout
