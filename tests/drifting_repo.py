"""A repository whose facts drift between versions in the ways that once made the search
index, and the order of lists, depend on how the versions were ingested or on the database
(tests/test_ingest_paths.py, tests/test_postgres.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.fixture_repos import ERA2_SERVER_ARGS, SERVER_ARGS, commit, git

# Files whose paths sort otherwise by code point (SQLite, Python) and by a language's rules
# (PostgreSQL's en_US collation): each reads --chunk-size.
READERS = ["python/sglang/srt/a_b/reader.py", "python/sglang/srt/ab/reader.py"]
READERS += ["python/sglang/srt/aB.py", "python/sglang/srt/A_c.py"]
# An action that warns with the flag it is given, used by two flags: two constraint sites on
# one line, alike but for their message.
WARNED_ACTION = """class WarnedAction(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        logger.warning(f"The command line argument '{option_string}' is going away.")
        setattr(namespace, self.dest, values)


@dataclasses.dataclass
class ServerArgs:
"""
WARNED = "".join(
    f'        parser.add_argument("--old-knob-{x}", action=WarnedAction, help="Old {x}.")\n'
    for x in "ba"
)
KNOB = (
    '        parser.add_argument("--knob-{:02d}", type=int, default=0, help="Tunes the widget.")\n'
)


def build_drifting_repo(root: Path) -> Path:
    """v1.0.0 … v1.0.3, where what the index keeps of a fact drifts between versions: a
    check moves to a renamed method in v1.0.2 (two variants held as long), and so do two in
    v1.0.3 (a variant of three versions, one of one); --tp-size's help is reworded after
    two versions; 30 more knobs of one help arrive in v1.0.2 beside the 30 there from the
    start (60 text matches of equal score); every line moves down by one in each version.
    And in every version: files whose paths sort otherwise by code point and in en_US,
    two constraint sites on one line (their order was left to the database)."""
    repo = root / "drifting"
    (repo / SERVER_ARGS).parent.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    for path in READERS:
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text("chunk = server_args.chunk_size\n")
    for i in range(4):
        text = textwrap.dedent(ERA2_SERVER_ARGS).lstrip()
        text = text.replace("@dataclasses.dataclass\nclass ServerArgs:\n", WARNED_ACTION)
        if i >= 2:
            text = text.replace("check_server_args", "validate_server_args")
            text = text.replace('help="Tensor parallel degree."', 'help="Tensor parallel size."')
        if i >= 3:
            text = text.replace("_handle_pipeline_parallelism", "_handle_pp")
        # (the new knobs written first, last to first: an index numbers them otherwise
        # when it meets v1.0.2 first, and 50 hits of equal score must not cut among them)
        knobs = [*(range(29, -1, -1) if i >= 2 else []), *range(30, 60)]
        knobs_text = WARNED + "".join(KNOB.format(k) for k in knobs)
        (repo / SERVER_ARGS).write_text(f"# release {i}\n" * (i + 1) + text + knobs_text)
        commit(repo, f"release {i}", f"2025-01-{i + 1:02d}T12:00:00Z", f"v1.0.{i}")
    return repo
