"""One Assembly over consecutive versions gives each version the rows `assemble()` gives it
on its own: what is kept between versions (per-blob derivations, the import graph, indirect
uses, folded module values) is never stale when files change, appear, vanish or come back."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from ingest.analyze import analyze, facts_key, kind_of
from ingest.assemble import Assembly, assemble
from ingest.git_source import list_files
from tests.fixture_repos import commit, write
from tests.reach_fixtures import ALPHA_MODEL, ARGS, DBO, SRT, build_reach_repo
from tests.reach_fixtures import SERVER_ARGS as ARGS_PATH

FIELDS = [
    "era", "flags", "enums", "constraints", "usages", "choice_sites", "env_vars", "env_sites",
    "docs", "indirect", "models", "cited", "warnings",
]  # fmt: skip


def _versions(root: Path) -> tuple[Path, list[str]]:
    """The reach fixture, then versions that change what the caches hold."""
    repo = build_reach_repo(root)
    tags = ["v0.4.0"]

    def step(tag: str, files: dict[str, str | None]) -> None:
        for path, text in files.items():
            if text is None:
                subprocess.run(["git", "-C", str(repo), "rm", "-q", path], check=True)
            else:
                write(repo, path, text)
        commit(repo, tag, f"2025-09-{len(tags) + 1:02d}T12:00:00Z", tag)
        tags.append(tag)

    # A new flag: every version-dependent filter changes, the blobs of other files do not.
    extra = '        parser.add_argument("--enable-extra-overlap", action="store_true")\n'
    step("v0.4.1", {ARGS_PATH: ARGS + extra})
    # A module rebinds the accessor's name to another carrier; a model file goes away.
    rebound = DBO.replace("import is_dbo_enabled", "import is_lbo_enabled as is_dbo_enabled")
    step(
        "v0.4.2",
        {SRT + "overlap/dbo_overlap.py": "\n" + rebound, SRT + "models/alpha_moe.py": None},
    )
    # Both come back unchanged: old blobs again.
    step("v0.4.3", {SRT + "overlap/dbo_overlap.py": DBO, SRT + "models/alpha_moe.py": ALPHA_MODEL})
    # A flag the indirect reads carry disappears.
    step("v0.4.4", {ARGS_PATH: ARGS.replace("--enable-dual-batch-overlap", "--enable-dbo-x")})
    return repo, tags


def _facts(repo: Path, files: dict[str, str]) -> dict[str, dict[str, Any]]:
    out = {}
    for path, sha in files.items():
        data = subprocess.run(
            ["git", "-C", str(repo), "cat-file", "blob", sha], capture_output=True, check=True
        ).stdout
        # Through JSON, as the facts cache gives them.
        out[facts_key(sha, kind_of(path))] = json.loads(
            json.dumps(analyze(data, kind_of(path), path))
        )
    return out


def test_assembly_over_versions_equals_each_version_alone(tmp_path: Path) -> None:
    repo, tags = _versions(tmp_path)

    def read_text(sha: str) -> str:
        return subprocess.run(
            ["git", "-C", str(repo), "cat-file", "blob", sha], capture_output=True, check=True
        ).stdout.decode("utf-8", "replace")

    assembly = Assembly()
    indirect = []
    for tag in tags:
        commit_sha = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", tag], capture_output=True, text=True, check=True
        ).stdout.strip()
        files = list_files(repo, commit_sha)
        facts = _facts(repo, files)
        alone = assemble(files, facts, read_text)
        together = assembly.version(files, facts, read_text)
        for name in FIELDS:
            assert getattr(together, name) == getattr(alone, name), (tag, name)
        assert list(together.cited) == list(alone.cited), tag  # same order of citation
        indirect.append({(u["dest"], u["path"], u["line"]) for u in together.indirect})
    # The steps did change what is found (else the test would prove nothing).
    assert indirect[0] and indirect[1] == indirect[0]
    assert indirect[2] != indirect[0] and indirect[3] == indirect[0]
    assert not any(d == "enable_dual_batch_overlap" for d, _p, _l in indirect[4])
