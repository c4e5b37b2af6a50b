"""A synthetic repository whose Markdown shows launch commands (no SGLang text): v1.0.0 is
tests/sim_repos.py's era 2 with docs; v1.1.0 drops `--enable-mixed-chunk`, so the doc
command using it stops parsing there."""

from __future__ import annotations

from pathlib import Path

from tests.fixture_repos import SERVER_ARGS, commit, git, write
from tests.sim_repos import (
    ENVIRON,
    ENVIRON_TEXT,
    ERA2,
    MODEL_CONFIG,
    MODEL_CONFIG_TEXT,
    UTILS,
    UTILS_TEXT,
)

GUIDE = "docs/guide/launch.md"
GUIDE_TEXT = """
# Launching

```bash
python -m sglang.launch_server --model-path org/plain --tp-size 2
```

A broken one:

```bash
python -m sglang.launch_server --model-path org/plain --no-such-flag
```

Overlap without all-to-all, and a large tensor-parallel degree:

```bash
python -m sglang.launch_server --model-path org/plain --enable-two-batch-overlap
python -m sglang.launch_server --model-path org/plain --tp-size 8
```

    python -m sglang.launch_server --model-path org/plain --enable-mixed-chunk

A template: `python -m sglang.launch_server --model-path <your-model>`.
"""

COOKBOOK = "cookbook/models/plain.mdx"
COOKBOOK_TEXT = """
# Plain

```shell
SGLANG_X=1 python3 -m sglang.launch_server \\
  --model-path org/plain \\
  --tp-size 2
```

```bash
python -m sglang.launch_server --model-path org/plain --moe-runner-backend=triton
```
"""


def build_doc_command_repo(root: Path) -> Path:
    repo = root / "docrepo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    write(repo, SERVER_ARGS, ERA2)
    write(repo, UTILS, UTILS_TEXT)
    write(repo, MODEL_CONFIG, MODEL_CONFIG_TEXT)
    write(repo, ENVIRON, ENVIRON_TEXT)
    write(repo, GUIDE, GUIDE_TEXT)
    write(repo, COOKBOOK, COOKBOOK_TEXT)
    commit(repo, "with docs", "2025-06-01T12:00:00Z", "v1.0.0")
    mixed = (
        '        parser.add_argument("--enable-mixed-chunk", action="store_true", '
        'help="Mixed chunks.")\n'
    )
    assert mixed in ERA2
    write(repo, SERVER_ARGS, ERA2.replace(mixed, ""))
    commit(repo, "no mixed chunks", "2025-07-01T12:00:00Z", "v1.1.0")
    return repo
