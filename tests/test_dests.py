"""Two live flags writing one dest: a condition on it names the flag spelled like the dest,
whatever the declaration order (it was the one declared last)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from fixture_repos import commit, git, write

from ingest.runner import IngestOptions, run
from kb.dests import dest_rank

SERVER_ARGS = """
import argparse
import dataclasses


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    draft_window_size: int = 4

    def __post_init__(self):
        if self.draft_window_size > 64:
            raise ValueError("the draft window is at most 64")

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", type=str, required=True, help="Model weights.")
        parser.add_argument(
            "--draft-window-size", type=int, default=ServerArgs.draft_window_size, help="Window."
        )
        parser.add_argument(
            "--dflash-draft-window-size",
            type=int,
            dest="draft_window_size",
            default=ServerArgs.draft_window_size,
            help="The same window, for DFlash.",
        )
"""


def test_dest_rank_orders_live_and_spelled_like_the_dest_last() -> None:
    names = [("--old-x", True), ("--x", False), ("--other-x", False)]
    best = sorted(names, key=lambda n: dest_rank(n[0], "x", n[1]))[-1]
    assert best[0] == "--x"
    # A live flag beats a deprecated one spelled like the dest.
    pair = [("--x", True), ("--y", False)]
    assert max(pair, key=lambda n: dest_rank(n[0], "x", n[1]))[0] == "--y"


def test_shared_dest_is_named_by_the_flag_spelled_like_it(tmp_path: Path) -> None:
    repo = tmp_path / "sglang"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write(repo, "python/sglang/srt/server_args.py", SERVER_ARGS)
    commit(repo, "one", "2025-06-01T12:00:00Z", "v0.5.0")
    db = tmp_path / "kb.db"
    run(IngestOptions(repo=str(repo), db_url=f"sqlite:///{db}", web_url="https://x.invalid",
                      cache_dir=tmp_path / "cache", jobs=1))  # fmt: skip
    conn = sqlite3.connect(db)
    names = sorted(r[0] for r in conn.execute("select name from flag"))
    assert names == ["--dflash-draft-window-size", "--draft-window-size", "--model-path"]
    (flags,) = conn.execute("select flags from constraintsite").fetchone()
    assert "--draft-window-size" in flags and "--dflash-draft-window-size" not in flags
