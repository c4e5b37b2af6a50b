"""A synthetic SGLang-shaped repository for what the diff should fold or pair (no SGLang
code): two era 2 releases where, going from v2.0.0 to v2.1.0,
- a check moves to another method (its test respelled), and another is reworded (its message
  and its test);
- one check's `if a and b` is split into `if a:` / `if b:` (a refactor: the same meaning);
- the first branch of an `if`/`elif` chain widens its test, so the sites in its `elif`
  branches carry a new negated clause (the change is told once, by the first branch);
- a default `None` becomes `argparse.SUPPRESS` (no change for users);
- `--enable-fast-sampler` becomes `--disable-fast-sampler` (a rename, inverted), and
  `--widget-timeout` becomes `--widget-deadline` with the same help (a rename);
- flags in two help sections change, for the filter."""

from __future__ import annotations

from pathlib import Path

from tests.fixture_repos import SERVER_ARGS, commit, git, write

MOVED = "Pages over 256 tokens are not supported."
OLD_WORDS = "Tensor parallelism over 16 GPUs is not supported."
NEW_WORDS = "Tensor parallelism over 16 GPUs is not supported yet."


def server_args(new: bool) -> str:
    """The release's server_args.py (`new`: v2.1.0)."""
    first = '["alpha", "beta"]' if new else '["alpha"]'
    # Reworded: a new message, and a narrower test.
    tp_check = (
        "        if self.tp_size > 16"
        + (" and self.pp_size == 1" if new else "")
        + f':\n            raise ValueError("{NEW_WORDS if new else OLD_WORDS}")\n'
    )
    # Moved to another method, its test spelled differently on the way.
    paging = (
        "        if "
        + ("self.page_size is not None and " if new else "")
        + f'self.page_size > 256:\n            raise ValueError("{MOVED}")\n'
    )
    if new:
        refactored = (
            "        if self.enable_overlap:\n"
            "            if self.pp_size > 1:\n"
            '                raise ValueError("Overlap does not run with pipelines.")\n'
        )
    else:
        refactored = (
            "        if self.enable_overlap and self.pp_size > 1:\n"
            '            raise ValueError("Overlap does not run with pipelines.")\n'
        )
    chain = (
        f"        if self.moe_backend in {first}:\n"
        "            self.chunk_size = 1024\n"
        '        elif self.moe_backend == "gamma":\n'
        "            if self.tp_size > 4:\n"
        '                raise ValueError("gamma runs on at most 4 GPUs.")\n'
        "            self.page_size = 16\n"
        "        else:\n"
        '            logger.warning("The default MoE backend is slow.")\n'
    )
    sampler = "disable-fast-sampler" if new else "enable-fast-sampler"
    sampler_help = "Disable the fast sampler." if new else "Enable the fast sampler."
    timeout = "widget-deadline" if new else "widget-timeout"
    mode_default = "argparse.SUPPRESS" if new else "None"
    return (
        '"""Server arguments (era 2 shape, moves fixture)."""\n\n'
        "import argparse\nimport dataclasses\nimport logging\nfrom typing import Optional\n\n"
        "logger = logging.getLogger(__name__)\n\n\n"
        "@dataclasses.dataclass\nclass ServerArgs:\n    model_path: str\n"
        "    tp_size: int = 1\n    pp_size: int = 1\n    page_size: int = 1\n"
        "    chunk_size: int = 8192\n    enable_overlap: bool = False\n"
        '    moe_backend: str = "auto"\n    sampler_mode: Optional[str] = None\n'
        f"    {sampler.replace('-', '_')}: bool = False\n"
        f"    {timeout.replace('-', '_')}: int = 30\n"
        "\n    def __post_init__(self):\n"
        "        self._handle_parallelism()\n"
        "        self._handle_memory()\n"
        "        self._handle_moe()\n\n"
        "    def _handle_parallelism(self):\n"
        + tp_check
        + refactored
        + ("" if new else paging)
        + "\n    def _handle_memory(self):\n"
        + (paging if new else "        pass\n")
        + "\n    def _handle_moe(self):\n"
        + chain
        + "\n    @staticmethod\n    def add_cli_args(parser: argparse.ArgumentParser):\n"
        "        # Model and tokenizer\n"
        '        parser.add_argument("--model-path", type=str, help="Model weights.")\n'
        '        parser.add_argument("--sampler-mode", type=str,'
        f' default={mode_default}, help="How tokens are sampled.")\n'
        f'        parser.add_argument("--{sampler}", action="store_true",'
        f' help="{sampler_help}")\n'
        "\n        # Parallelism\n"
        '        parser.add_argument("--tp-size", type=int, default=1, help="Tensor parallel.")\n'
        '        parser.add_argument("--pp-size", type=int, default=1, help="Pipeline stages.")\n'
        '        parser.add_argument("--enable-overlap", action="store_true", help="Overlap.")\n'
        f'        parser.add_argument("--{timeout}", type=int, default=30,'
        ' help="Seconds a widget waits for its peers before it gives up.")\n'
        "\n        # Memory\n"
        '        parser.add_argument("--page-size", type=int, default=1, help="Tokens a page.")\n'
        '        parser.add_argument("--chunk-size", type=int,'
        f' default={4096 if new else 8192}, help="Chunked prefill size.")\n'
        '        parser.add_argument("--moe-backend", type=str, default="auto", help="MoE.")\n'
    )


def build_moves_repo(root: Path) -> Path:
    """v2.0.0 and v2.1.0."""
    repo = root / "movesrepo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    write(repo, SERVER_ARGS, server_args(new=False))
    commit(repo, "one", "2025-05-01T12:00:00Z", "v2.0.0")
    write(repo, SERVER_ARGS, server_args(new=True))
    commit(repo, "two", "2025-06-01T12:00:00Z", "v2.1.0")
    return repo


def build_moves_kb(root: Path) -> Path:
    """The knowledge base ingested from `build_moves_repo` (both releases)."""
    from tests.conftest import ingest_into

    db = root / "moves.db"
    ingest_into(build_moves_repo(root), db, jobs=1)
    return db
