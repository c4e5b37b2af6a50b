"""A synthetic SGLang-shaped repository for the diff page (no SGLang code): two era 2
releases where one upstream `if` is split in two, so every site under it and under its
`elif` branches gets a new condition path, the way real releases rewrite
`_handle_model_specific_adjustments`; the newer release also adds many flags in several
help sections (a list long enough to fold), adds and removes constraint sites, and rewrites
one unrelated condition."""

from __future__ import annotations

from pathlib import Path

from tests.fixture_repos import SERVER_ARGS, commit, git, write

# Sites under each branch of the model `if`: (kind, statement) written at the branch's indent.
FIRST = [
    'if self.attention_backend is None:\n    self.attention_backend = "fa3"',
    "if self.tp_size > 8:\n    self.chunk_size = 4096",
    'if self.kv_dtype == "fp8":\n    logger.warning("DeepNet with an fp8 cache is slower.")',
    'if self.moe_runner_backend == "auto":\n    self.moe_runner_backend = "deep_gemm"',
    'assert self.page_size in (1, 64), "DeepNet needs page size 1 or 64"',
    "if self.enable_overlap:\n    self.disable_radix = True",
]
SECOND = [
    'if self.attention_backend is None:\n    self.attention_backend = "triton"',
    'if self.kv_dtype == "fp8":\n    raise ValueError("GptLike does not support an fp8 cache.")',
    'if self.page_size > 1:\n    logger.warning("GptLike pages are slower.")',
    "if self.tp_size > 4:\n    self.chunk_size = 2048",
]
THIRD = [
    'if self.attention_backend is None:\n    self.attention_backend = "flashinfer"',
    'if self.moe_runner_backend == "auto":\n    self.moe_runner_backend = "triton"',
]

# Checks on --attention-backend in the newer release: several flags, several kinds each,
# each triggered by some of its values (for the constraint graph's labelled edges).
GRAPH_CHECKS = """\
        if self.attention_backend == "fa3" and self.page_size > 64:
            raise ValueError("fa3 supports pages of at most 64 tokens.")
        if self.attention_backend == "fa4":
            self.page_size = 128
        if self.attention_backend in ["fa3", "fa4"] and self.kv_dtype == "fp8":
            logger.warning("An fp8 cache with fa3 or fa4 is experimental.")
        if self.attention_backend == "flashinfer" and self.tp_size > 8:
            raise ValueError("flashinfer supports tensor parallelism up to 8.")
        assert self.attention_backend != "triton" or self.chunk_size <= 8192, "triton chunks"
        if self.attention_backend == "fa4" and self.enable_overlap:
            self.enable_overlap = False
            logger.warning("fa4 turns overlap off.")
        if self.attention_backend == "triton" and self.moe_runner_backend == "auto":
            self.moe_runner_backend = "triton"
"""

SECTIONS = {
    "Model and tokenizer": ["tokenizer-mode", "trust-remote-code", "revision", "load-format"],
    "Parallelism": ["dp-size", "ep-size", "nnodes", "node-rank", "dist-init-addr"],
    "Kernel backend": ["sampling-backend", "grammar-backend", "mm-attention-backend"],
    "Memory and scheduling": [
        "max-running-requests",
        "max-total-tokens",
        "schedule-conservativeness",
        "cpu-offload-gb",
        "page-size-hint",
    ],
    "Optimization/debug options": [
        "enable-torch-compile",
        "torch-compile-max-bs",
        "enable-nan-detection",
        "enable-p2p-check",
        "triton-attention-reduce-in-fp32",
        "enable-deterministic-inference",
        "enable-layerwise-markers",
        "enable-memory-saver",
    ],
}


def _block(sites: list[str], indent: int) -> str:
    pad = " " * indent
    return "\n".join(pad + line for site in sites for line in site.splitlines())


def server_args(split: bool) -> str:
    """The release's server_args.py; `split` puts the sparse-attention test in its own `if`
    inside the model test (the newer release)."""
    if split:
        model_if = (
            '        if model_arch in ["DeepNetV3ForCausalLM"]:\n'
            "            if not is_sparse_attn(self):\n" + _block(FIRST, 16) + "\n"
        )
    else:
        model_if = (
            '        if model_arch in ["DeepNetV3ForCausalLM"] and not is_sparse_attn(self):\n'
            + _block(FIRST, 12)
            + "\n"
        )
    model_if += (
        '        elif model_arch in ["GptLikeForCausalLM"]:\n' + _block(SECOND, 12) + "\n"
        '        elif model_arch in ["OtherNetForCausalLM"]:\n' + _block(THIRD, 12) + "\n"
    )
    checks = (
        # The one unrelated rewrite: a wider test for the same error.
        "        if self.speculative_topk > 1 and self.attention_backend"
        + (' not in ["flashinfer", "fa3"]' if split else ' != "flashinfer"')
        + ':\n            raise ValueError("topk > 1 needs the flashinfer backend.")\n'
    )
    if split:
        checks += GRAPH_CHECKS
        checks += (
            "        if self.max_running_requests is not None and self.max_running_requests < 1:\n"
            '            raise ValueError("--max-running-requests must be positive.")\n'
            "        if self.enable_torch_compile and self.torch_compile_max_bs > 512:\n"
            '            logger.warning("Compiling for batches over 512 takes long.")\n'
        )
    else:
        checks += (
            "        if self.tp_size > 1 and self.enable_legacy_path:\n"
            '            raise ValueError("The legacy path runs on one GPU only.")\n'
        )
    fields = ["tp_size: int = 1", "chunk_size: int = 8192", "page_size: int = 1"]
    fields += [
        "attention_backend: Optional[str] = None",
        'moe_runner_backend: str = "auto"',
        'kv_dtype: str = "auto"',
        "enable_overlap: bool = False",
        "disable_radix: bool = False",
        "speculative_topk: int = 1",
        "enable_legacy_path: bool = False",
    ]
    args = [
        "",
        "        # Model and tokenizer",
        '        parser.add_argument("--model-path", type=str, help="Model weights.")',
        "",
        "        # Parallelism",
        '        parser.add_argument("--tp-size", type=int, default=1, help="Tensor parallel.")',
        "",
        "        # Kernel backend",
        '        parser.add_argument("--attention-backend", type=str, choices='
        + ('["triton", "fa3", "flashinfer", "fa4"]' if split else '["triton", "fa3", "flashinfer"]')
        + ', help="Attention kernels.")',
        '        parser.add_argument("--moe-runner-backend", type=str, default="auto", help="M.")',
        '        parser.add_argument("--kv-dtype", type=str, default="auto", help="KV cache.")',
        "",
        "        # Optimization/debug options",
        '        parser.add_argument("--chunk-size", type=int, default=8192, help="Chunked prefill'
        + (' size in tokens.")' if split else ' size.")'),
        '        parser.add_argument("--page-size", type=int, default=1, help="Tokens a page.")',
        '        parser.add_argument("--enable-overlap", action="store_true", help="Overlap.")',
        '        parser.add_argument("--disable-radix", action="store_true", help="No radix.")',
        '        parser.add_argument("--speculative-topk", type=int, default=1, help="Top k.")',
    ]
    if not split:
        args.append(
            '        parser.add_argument("--enable-legacy-path", action="store_true",'
            ' help="The old path.")'
        )
    else:
        for section, names in SECTIONS.items():
            args += ["", f"        # {section}"]
            for name in names:
                dest = name.replace("-", "_")
                fields.append(f"{dest}: Optional[int] = None")
                args.append(
                    f'        parser.add_argument("--{name}", type=int, default=None,'
                    f' help="Synthetic {name.replace("-", " ")} setting.")'
                )
    return (
        '"""Server arguments (era 2 shape, diff fixture)."""\n\n'
        "import argparse\nimport dataclasses\nimport logging\nfrom typing import Optional\n\n"
        "logger = logging.getLogger(__name__)\n\n\n"
        "def is_sparse_attn(server_args):\n    return False\n\n\n"
        "@dataclasses.dataclass\nclass ServerArgs:\n    model_path: str\n"
        + "".join(f"    {f}\n" for f in fields)
        + "\n    def __post_init__(self):\n"
        "        self._handle_model_specific_adjustments()\n"
        "        self.check_server_args()\n\n"
        "    def _handle_model_specific_adjustments(self):\n"
        "        model_arch = self.get_model_arch()\n" + model_if + "\n"
        "    def check_server_args(self):\n" + checks + "\n"
        "    @staticmethod\n    def add_cli_args(parser: argparse.ArgumentParser):\n"
        + "\n".join(args)
        + "\n"
    )


def build_diff_repo(root: Path) -> Path:
    """v1.0.0 and v1.1.0 (the split `if`, 25 more flags in five sections)."""
    repo = root / "diffrepo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    write(repo, SERVER_ARGS, server_args(split=False))
    commit(repo, "one", "2025-03-01T12:00:00Z", "v1.0.0")
    write(repo, SERVER_ARGS, server_args(split=True))
    commit(repo, "two", "2025-04-01T12:00:00Z", "v1.1.0")
    return repo


# Sites whose condition changes with the split `if` (all of FIRST, SECOND and THIRD).
SPLIT_SITES = len(FIRST) + len(SECOND) + len(THIRD)
ADDED_FLAGS = sum(len(names) for names in SECTIONS.values())


def build_diff_kb(root: Path) -> Path:
    """The knowledge base ingested from `build_diff_repo` (both releases)."""
    from tests.conftest import ingest_into

    db = root / "diff.db"
    ingest_into(build_diff_repo(root), db, jobs=1)
    return db
