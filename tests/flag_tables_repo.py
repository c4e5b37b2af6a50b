"""A synthetic repository whose docs have several flag tables: Markdown, JSX in MDX and a
Markdown table inside MDX, found by what they hold wherever they live. Made-up text; the
code is era 1 of fixture_repos (--model-path, --dtype, --tp-size/--tensor-parallel-size,
--port, --mem-fraction-static, --disable-cuda-graph, --schedule-policy)."""

from __future__ import annotations

from pathlib import Path

from fixture_repos import ERA1_SERVER_ARGS, SERVER_ARGS, commit, git, write

REFERENCE_MD = "docs/advanced_features/server_arguments.md"
REFERENCE_MDX = "docs_new/docs/advanced_features/server_arguments.mdx"
COOKBOOK_MDX = "docs_new/cookbook/reference/parallelism.mdx"

# The docs site's reference: leaves out --schedule-policy, names a flag that never was.
MARKDOWN_TABLE = """
# Server Arguments

| Argument | Description | Defaults | Options |
| --- | --- | --- | --- |
| `--model-path` | The model. | `None` | Type: str |
| `--dtype` | Weights' type. | `auto` | `auto`, `half`, `bfloat16` |
| `--tp-size`<br>`--tensor-parallel-size` | TP degree. | `1` | Type: int |
| `--port` | HTTP port. | `30000` | Type: int |
| `--mem-fraction-static` | Memory share. | `None` | Type: float |
| `--disable-cuda-graph` | No graphs. | `False` | bool flag (set to enable) |
| `--gone-flag` | Removed long ago. | `0` | Type: int |
"""


def _jsx_row(name: str, description: str, default: str, options: str) -> str:
    cell = '<td style={{padding: "9px 12px", fontWeight: 500}}>'
    return (
        "    <tr>\n"
        f"      {cell}{name}</td>\n"
        f"      {cell}{description}</td>\n"
        f"      {cell}{default}</td>\n"
        f"      {cell}{options}</td>\n"
        "    </tr>\n"
    )


# The new docs site's reference, as JSX: names every flag, states --dtype's default as
# `half` and its choices without `bfloat16`, and names --phantom-flag.
JSX_TABLE = (
    '---\ntitle: "Server Arguments"\n---\n\n'
    "Launch with `--tp 2` to use two GPUs (prose: no table row).\n\n"
    "## Model\n"
    '<table style={{width: "100%", borderCollapse: "collapse"}}>\n'
    "  <thead>\n"
    '    <tr style={{borderBottom: "2px solid #d55816"}}>\n'
    '      <th style={{textAlign: "left"}}>Argument</th>\n'
    '      <th style={{textAlign: "left"}}>Description</th>\n'
    '      <th style={{textAlign: "left"}}>Defaults</th>\n'
    '      <th style={{textAlign: "left"}}>Options</th>\n'
    "    </tr>\n"
    "  </thead>\n"
    "  <tbody>\n"
    + _jsx_row("`--model-path`", "The model.", "` None`", "Type: str")
    + _jsx_row(
        "`--dtype`",
        'Weights\' <a href="/t">type</a>.',
        "`half`",
        "<code>auto</code>, <code>half</code>",
    )  # fmt: skip
    + _jsx_row("`--tp-size`<br/>`--tensor-parallel-size`", "TP degree.", "`1`", "Type: int")
    + "  </tbody>\n</table>\n\n## Runtime\n"
    '<table style={{width: "100%"}}>\n  <thead>\n    <tr>\n'
    "      <th>Argument</th><th>Description</th><th>Defaults</th><th>Options</th>\n"
    "    </tr>\n  </thead>\n  <tbody>\n"
    + _jsx_row("`--port`", "HTTP port.", "`30000`", "Type: int")
    + _jsx_row("`--mem-fraction-`<br/>`static`", "Memory share.", "`None`", "Type: float")
    + _jsx_row("`--disable-cuda-graph`", "No graphs.", "`False`", "bool flag (set to enable)")
    + _jsx_row(
        "`--schedule-policy`",
        "Policy.",
        "`lpm`",
        "<code>lpm</code>, <code>fcfs</code>, <code>random</code>",
    )  # fmt: skip
    + _jsx_row("`--phantom-flag`", "Never existed.", "`1`", "Type: int")
    + "  </tbody>\n</table>\n"
)

# A cookbook page: a Markdown table inside MDX, the option in its second column.
MDX_MARKDOWN_TABLE = """
---
title: Parallelism
---

import { Note } from "/snippets/note.mdx";

<Note>Fields of the model configs and the arguments they become.</Note>

| Config field | CLI argument | Description |
| --- | --- | --- |
| `tp` | `--tp-size`, `--tensor-parallel-size` | Tensor parallel degree. |
| `port` | `--port` | The port. |
"""

# Not flag tables of the server: a guide whose tables mention one option among other rows,
# and the router's options (most of them not the server's).
GUIDE = """
| Step | What | How |
| --- | --- | --- |
| 1 | Install | pip |
| 2 | Pick a type | `--dtype` |
| 3 | Run | launch |
"""
ROUTER = """
| Parameter | Default | Description |
| --- | --- | --- |
| `--worker-urls` | `[]` | Workers. |
| `--policy` | `cache_aware` | Policy. |
| `--port` | `30000` | Port. |
"""


def build_flag_tables_repo(root: Path) -> Path:
    """v1.0.0: one flag table (Markdown); v2.0.0: three (Markdown, JSX in MDX, Markdown in
    MDX) and two files that are not flag tables of the server."""
    repo = root / "tables"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    write(repo, SERVER_ARGS, ERA1_SERVER_ARGS)
    write(repo, REFERENCE_MD, MARKDOWN_TABLE)
    write(repo, "README.md", "synthetic fixture\n")
    commit(repo, "one table", "2025-01-01T12:00:00Z", "v1.0.0")
    (repo / REFERENCE_MDX).parent.mkdir(parents=True)
    (repo / REFERENCE_MDX).write_text(JSX_TABLE)
    write(repo, COOKBOOK_MDX, MDX_MARKDOWN_TABLE)
    write(repo, "docs/guide.md", GUIDE)
    write(repo, "router/README.md", ROUTER)
    commit(repo, "three tables", "2025-06-01T12:00:00Z", "v2.0.0")
    return repo
