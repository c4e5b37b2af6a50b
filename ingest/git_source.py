"""Read an SGLang git repository without checking it out: refs, trees and blobs.

Blobs come from a long-lived `git cat-file --batch` (GitPython's persistent command), so
reading thousands of files costs one process, not thousands. A local path is read in place
and never modified; a URL is cloned once (without large blobs) into the data directory.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import git

DEFAULT_REPO = "https://github.com/sgl-project/sglang.git"
DEFAULT_WEB_URL = "https://github.com/sgl-project/sglang"
# Python sources are small; the multi-MB binaries (images, wheels) are what make a full clone
# of SGLang large, and we never read them.
CLONE_BLOB_LIMIT = "blob:limit=1m"


class RepoUnavailable(RuntimeError):
    """The repository cannot be reached or opened; the message says what to do."""


@dataclass(frozen=True)
class Ref:
    label: str
    commit: str
    date: datetime


def is_url(repo: str) -> bool:
    return bool(re.match(r"^[a-z][a-z0-9+.-]*://|^git@", repo))


def web_url_for(repo: str) -> str:
    """Where citations link: the repo itself when it is on GitHub, else upstream SGLang."""
    m = re.match(r"^(?:https?://|git@)github\.com[/:]([^/]+/[^/]+?)(?:\.git)?/?$", repo)
    return f"https://github.com/{m.group(1)}" if m else DEFAULT_WEB_URL


def open_repo(repo: str, cache_dir: Path) -> Path:
    """Return a local git directory for `repo`, cloning or fetching a URL into `cache_dir`."""
    if not is_url(repo):
        path = Path(repo).expanduser()
        try:
            git.Repo(path)
        except (git.NoSuchPathError, git.InvalidGitRepositoryError) as exc:
            raise RepoUnavailable(f"{repo} is not a git repository") from exc
        return path
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", repo.rstrip("/").split("://")[-1])
    dest = cache_dir / f"{name}.git"
    hint = f"set SGLANG_REPO (or --repo) to a local SGLang clone to ingest without {repo}"
    try:
        if dest.exists():
            _git(dest, "fetch", "--quiet", "--tags", "--force", "--prune", "origin")
        else:
            cache_dir.mkdir(parents=True, exist_ok=True)
            subprocess.run(
                ["git", "clone", "--quiet", "--bare", f"--filter={CLONE_BLOB_LIMIT}", repo, dest],
                check=True,
                capture_output=True,
                text=True,
                timeout=3600,
                env={"GIT_TERMINAL_PROMPT": "0", "PATH": _path_env()},
            )
    except subprocess.CalledProcessError as exc:
        reason = (exc.stderr or "").strip().splitlines()[-1:] or ["git failed"]
        raise RepoUnavailable(f"cannot reach {repo} ({reason[0]}); {hint}") from exc
    except subprocess.TimeoutExpired as exc:
        raise RepoUnavailable(f"timed out reaching {repo}; {hint}") from exc
    return dest


def _path_env() -> str:
    import os

    return os.environ.get("PATH", "/usr/bin:/bin")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=3600,
        env={"GIT_TERMINAL_PROMPT": "0", "PATH": _path_env()},
    ).stdout


def list_tags(repo: Path) -> list[Ref]:
    """Every tag with the commit it points to (annotated tags peeled) and its commit date."""
    out = _git(
        repo,
        "for-each-ref",
        "--format=%(refname:short)%00%(*objectname)%00%(objectname)%00"
        "%(*committerdate:unix)%00%(committerdate:unix)",
        "refs/tags",
    )
    refs = []
    for line in out.splitlines():
        label, peeled, obj, peeled_date, date = line.split("\0")
        commit, stamp = (peeled, peeled_date) if peeled else (obj, date)
        if not stamp:  # a tag of a tree or blob: not a release point
            continue
        refs.append(Ref(label, commit, datetime.fromtimestamp(int(stamp), UTC)))
    return refs


def resolve_ref(repo: Path, ref: str, label: str | None = None) -> Ref:
    try:
        commit, stamp = _git(repo, "log", "-1", "--format=%H %ct", ref, "--").split()
    except subprocess.CalledProcessError as exc:
        raise RepoUnavailable(f"unknown ref {ref!r} in {repo}") from exc
    return Ref(label or ref, commit, datetime.fromtimestamp(int(stamp), UTC))


def list_python_files(repo: Path, commit: str) -> dict[str, str]:
    """path -> blob sha of every .py file under python/ at `commit` (no checkout)."""
    out = _git(repo, "ls-tree", "-r", "--full-tree", commit, "--", "python")
    files = {}
    for line in out.splitlines():
        meta, path = line.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind == "blob" and path.endswith(".py") and mode != "120000":
            files[path] = sha
    return files


class BlobReader:
    """Reads blob contents through one long-lived `git cat-file --batch` process.

    Plain pipes rather than GitPython's wrapper: this is the ingest's hottest loop (14,000
    blobs for SGLang's history) and the thin protocol below reads them twice as fast.
    """

    def __init__(self, repo: Path) -> None:
        self._proc = subprocess.Popen(
            ["git", "-C", str(repo), "cat-file", "--batch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={"GIT_TERMINAL_PROMPT": "0", "PATH": _path_env()},
        )

    def read(self, sha: str) -> bytes:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(sha.encode() + b"\n")
        self._proc.stdin.flush()
        header = self._proc.stdout.readline().split()
        if len(header) != 3:
            raise RepoUnavailable(f"blob {sha} is missing: {b' '.join(header).decode()}")
        data = self._proc.stdout.read(int(header[2]))
        self._proc.stdout.read(1)  # the newline after each object
        return data

    def close(self) -> None:
        if self._proc.stdin:
            self._proc.stdin.close()
        self._proc.wait()
