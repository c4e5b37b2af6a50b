"""Do two search indexes answer alike? Every prefix of typical queries, at the newest
version, the middle one and across all versions, compared answer by answer.

    .venv/bin/python bench/compare_search.py A.db B.db [--against OTHER_CHECKOUT]

Each database's index is the one beside it. With `--against`, A's answers come from the
other checkout's code (its own index format), run in a subprocess. Prints the queries whose
answers differ (at most 10) and their count.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

QUERIES = [
    "nvls", "--enable-nccl-nvls", "enable_nccl_nvls", "two batch overlap", "moe runnr backend",
    "fp4 gemm", "flashinfer_cutlass", "pp size", "chunked prefill size", "speculative algorithm",
    "disable overlap schedule", "attention backend", "mem fraction static", "deepep mode",
    "triton", "fa3", "cuda graph", "lora", "tp", "dp attention", "quantization fp8", "eagle",
    "SGLANG_", "sglang_enable", "hicache", "torch compile", "log level", "kv cache dtype",
    "ForwardMode", "decode", "must be", "not supported", "page size", "radix", "deprecated",
]  # fmt: skip


def answers(db: Path) -> dict[str, object]:
    from kb.search import SearchIndex, default_index_dir

    url = f"sqlite:///{db}"
    search = SearchIndex(default_index_dir(url))
    names = search.versions()
    out: dict[str, object] = {}
    for q in QUERIES:
        for i in range(1, len(q) + 1):
            for v in (None, names[len(names) // 2], "all"):
                out[f"{q[:i]!r} @ {v}"] = search.search(q[:i], v, 20)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path, nargs="?")
    parser.add_argument("--against", type=Path, help="the checkout whose code reads A")
    parser.add_argument("--dump", action="store_true", help="print A's answers as JSON")
    opts = parser.parse_args()
    if opts.dump:
        json.dump(answers(opts.a), sys.stdout)
        return
    root = (opts.against or Path(__file__).resolve().parent.parent).resolve()
    python = root / ".venv/bin/python" if opts.against else Path(sys.executable)
    dumped = subprocess.run(
        [str(python), "-c", f"import sys; sys.path.insert(0, {str(root)!r}); "
         f"sys.argv = ['', {str(opts.a.resolve())!r}, '--dump']; "
         f"exec(open({__file__!r}).read())"],
        cwd=root, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    a = json.loads(dumped)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    b = answers(opts.b)
    differ = [k for k in a if json.dumps(a[k], sort_keys=True) != json.dumps(b[k], sort_keys=True)]
    for key in differ[:10]:
        print("differs:", key)
    print(f"{len(a)} answers compared, {len(differ)} differ")


if __name__ == "__main__":
    main()
