"""Choice sites are attributed by what the code says (issue 11): synthetic shapes modelled on
the false positives a real-data audit found."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ingest import sites
from ingest.analyze import SERVER_ARGS_PATH, analyze, facts_key, kind_of
from ingest.assemble import Attributor, assemble
from ingest.choices import scan_choice_shapes
from kb.queries import choice_site_dict
from kb.schema import ChoiceSite, Version

FLAGS: list[tuple[str, str, list[str] | None]] = [
    ("--attention-backend", "attention_backend", ["fa3", "triton", "flashinfer"]),
    ("--prefill-attention-backend", "prefill_attention_backend", ["fa3", "triton"]),
    ("--mm-attention-backend", "mm_attention_backend", ["fa3", "sdpa"]),
    ("--dsa-prefill-backend", "dsa_prefill_backend", ["fa3", "flashmla"]),
    ("--dsa-decode-backend", "dsa_decode_backend", ["fa3", "flashmla"]),
    ("--transfer-backend", "disaggregation_transfer_backend", ["mooncake", "nixl"]),
    ("--storage-backend", "hicache_storage_backend", ["mooncake", "file"]),
    ("--kv-cache-dtype", "kv_cache_dtype", ["auto", "fp8_e4m3"]),
    ("--dtype", "dtype", ["auto", "float32"]),
    ("--draft-dtype", "speculative_draft_dtype", ["auto", "float32"]),
    ("--log-format", "log_requests_format", ["text", "json"]),
    ("--prefetch-policy", "hicache_storage_prefetch_policy", ["best_effort", "timeout"]),
    ("--lora-target-modules", "lora_target_modules", ["embed_tokens", "q_proj"]),
    ("--quantization", "quantization", ["fp9", "awq"]),
    ("--draft-quantization", "speculative_draft_model_quantization", ["fp9", "awq"]),
]


def _who() -> Attributor:
    flags: list[dict[str, Any]] = [
        {"name": n, "dest": d, "choices": c, "choices_dynamic": False, "deprecated": None}
        for n, d, c in FLAGS
    ]
    return Attributor(flags, {f["dest"]: f["name"] for f in flags})


def _attributed(src: str) -> dict[int, list[Any]]:
    who = _who()
    got: dict[int, list[Any]] = {}
    for value, line, tail, _how in sites.scan(src.encode())["choices"]:
        got.setdefault(line, []).append(who.attribute(value, tail, "python/sglang/srt/x.py"))
    return got


OTHER_NAMES = """
def f(args, config, request, weight_quant, input_dtype, dsa_impl, quant_config):
    if args.dataset_name == "mooncake":
        return 1
    if config.rounter_params_dtype == "float32":
        return 2
    if request.response_format == "text":
        return 3
    if weight_quant.get("dtype") == "fp8_e4m3":
        return 4
    if input_dtype in ("fp8_e4m3", "fp8_e4m3fn"):
        return 5
    if dsa_impl == "fa3":
        return 6
    if self.prefetch_stop_policy == "timeout":
        return 7
    if target_module == "embed_tokens":
        return 8
    if quant_config.get_name() == "awq":
        return 9
    if prefill_backend == "fa3":
        return 10
"""


def test_a_name_that_names_something_else_is_no_site_of_the_flag() -> None:
    got = _attributed(OTHER_NAMES)
    # a benchmark's dataset, a model config's dtype, a request's format: no site at all
    assert got[3] == [None]
    assert got[5] == [None]
    assert got[7] == [None]
    # `d.get("dtype")` is that dict's dtype (another flag's dest), not no name at all
    assert got[9] == [None]
    assert got[11] == [None, None]  # one word in common (dtype), one more (input)
    # the DSA impl is one of the DSA flags, never --attention-backend or --mm-attention-backend
    assert got[13] == [(None, ["--dsa-decode-backend", "--dsa-prefill-backend"], "")]
    # two words in common, or a plural's: still the flag's
    assert got[15] == [("--prefetch-policy", [], "only-flag")]
    assert got[17] == [("--lora-target-modules", [], "only-flag")]
    # the quantization's name on a config object: the value says it, as before
    assert got[19] == [("--quantization", [], "family")]
    # only the flags the name fits: not --mm-attention-backend, --dsa-decode-backend
    assert got[21] == [(None, ["--dsa-prefill-backend", "--prefill-attention-backend"], "")]


CONTINUED = """
class Scheduler:
    def __init__(self, enc):
        if (
            self.server_args.language_only
            and self.server_args.disaggregation_transfer_backend
            in ["nixl", "mooncake"]
        ):
            pass
        if (
            self.storage_backend_type  # a comment
            not in ["mooncake"]
        ):
            pass


async def handle(enc, request):
    backend = enc.server_args.hicache_storage_backend
    if backend == "mooncake":
        return 1


class Controller:
    def pick(self):
        backend = self.storage_backend_type
        if backend == "mooncake":
            return 1
"""


def test_the_compared_name_on_the_line_before_or_bound_from_another_object_s_args() -> None:
    got = {
        (line, value): (tail, how)
        for value, line, tail, how in sites.scan(CONTINUED.encode())["choices"]
    }
    assert got[(7, "mooncake")] == ("disaggregation_transfer_backend", "contains")
    assert got[(12, "mooncake")] == ("", "contains")  # a comment ends the line before
    assert got[(19, "mooncake")] == ("hicache_storage_backend", "compare")
    assert got[(26, "mooncake")] == ("storage_backend_type", "compare")
    # and a named container's test, the same way
    src = (
        b"NAMES = ['fa3', 'triton']\n\n\ndef f(self):\n    if (\n"
        b"        self.attention_backend\n        not in NAMES\n    ):\n        pass\n"
    )
    assert scan_choice_shapes(src, [])["named_contains"] == [["NAMES", 7, "attention_backend"]]


REGISTERING = b"""MLA_BACKENDS = ["fa3", "triton", "flashinfer"]


def add_mla_attention_backend(backend_name):
    if backend_name not in MLA_BACKENDS:
        MLA_BACKENDS.append(backend_name)


def is_mla(attention_backend):
    return attention_backend in MLA_BACKENDS
"""


def test_a_helper_adding_a_name_to_a_list_handles_none_of_its_values() -> None:
    found = scan_choice_shapes(REGISTERING, [])
    assert found["named_contains"] == [["MLA_BACKENDS", 10, "attention_backend"]]


SERVER_ARGS = """
import argparse


class ServerArgs:
    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument(
            "--disaggregation-transfer-backend", type=str, choices=["mooncake", "nixl"]
        )
"""
USE = """
def f(server_args):
    if server_args.disaggregation_transfer_backend == "mooncake":
        return 1
"""


def test_tests_and_benchmarks_are_no_handling_sites() -> None:
    files = {
        SERVER_ARGS_PATH: SERVER_ARGS,
        "python/sglang/srt/disaggregation/conn.py": USE,
        "python/sglang/test/kits/runner.py": USE,
        "python/sglang/benchmark/serving.py": USE,
        "python/sglang/bench_serving.py": USE,
        "python/sglang/srt/mem_cache/storage/test_store.py": USE,
    }
    facts = {}
    for path, text in files.items():
        facts[facts_key(path, kind_of(path))] = analyze(text.encode(), kind_of(path), path)
    rows = assemble({p: p for p in files}, facts)
    assert [(c["path"], c["flag"]) for c in rows.choice_sites] == [
        ("python/sglang/srt/disaggregation/conn.py", "--disaggregation-transfer-backend")
    ]


UNREADABLE = """
def f(self, rope_scaling, parts, block, message, attr, tool_parts):
    if parts[0]["type"] == "text":
        return 1
    if getattr(block, "type", None) == "text":
        return 2
    if getattr(message.content[0], "type", None) != "text":
        return 3
    if len(parts) >= 3 and parts[0] == "embed_tokens":
        return 4
    if rope_scaling.get("rope_type", None) == "nixl":
        return 5
    if len(parts) == 1 and f(parts) == "nixl":
        return 6
    if getattr(self, attr, None) == "nixl":
        return 7
    if getattr(self.server_args, "disaggregation_transfer_backend", None) == "nixl":
        return 8
    if config.get("log_requests_format", "json") == "text":
        return 9
    use = self.enable_x or getattr(
        self, "disaggregation_transfer_backend", None
    ) in ("nixl", "mooncake")
    if tool_parts[0]["type"] in ("text",):
        return 10
"""


def test_a_compared_expression_read_through_subscripts_get_and_getattr() -> None:
    got = _attributed(UNREADABLE)
    # an element's key, a block's or a message part's type, a list's element, a config's
    # key read with a default: each names something else, so no site of the flag whose
    # values happen to include the compared string
    assert got[3] == [None]
    assert got[5] == [None]
    assert got[7] == [None]
    assert got[9] == [None]
    assert got[11] == [None]
    assert got[24] == [None]
    # `getattr(x, "name", default)` and `.get("name", default)` read as `x.name`
    assert got[17] == [("--transfer-backend", [], "subject")]
    assert got[19] == [("--log-format", [], "subject")]
    # the expression starts on the lines before (a call's arguments): read from there
    assert got[23] == [("--transfer-backend", [], "subject")] * 2


def test_an_expression_that_cannot_be_read_is_no_site() -> None:
    """A call's result or an attribute named by a variable: the value alone would make a
    site of whichever flag takes it (only-flag). No site: most such comparisons are about
    something else, and one about a flag is also read elsewhere where its name is spelled."""
    lines = {line for _v, line, _t, _h in sites.scan(UNREADABLE.encode())["choices"]}
    assert 13 not in lines and 15 not in lines
    # nothing at all before the operator (a comment ends the line before): the value's
    assert [tail for _v, line, tail, _h in sites.scan(CONTINUED.encode())["choices"]
            if line == 12] == [""]  # fmt: skip


def test_a_site_whose_compared_name_ends_the_line_before_shows_both_lines() -> None:
    facts = sites.scan(CONTINUED.encode())
    assert facts["lines"]["7"] == (
        'and self.server_args.disaggregation_transfer_backend in ["nixl", "mooncake"]'
    )
    assert facts["lines"]["12"] == 'not in ["mooncake"]'  # a comment before: the line alone
    multi = sites.scan(UNREADABLE.encode())["lines"]["23"]
    assert multi == (
        'use = self.enable_x or getattr( self, "disaggregation_transfer_backend", None )'
        ' in ("nixl", "mooncake")'
    )
    # each joined text's lines above, for its citation to span them; none for a line alone
    assert facts["spans"] == {"7": 1}
    assert sites.scan(UNREADABLE.encode())["spans"]["23"] == 2
    # the same through the assembler's rows, and for a named container's test
    src = (
        "NAMES = ['fa3', 'triton']\n\n\ndef f(self):\n    if (\n"
        "        self.attention_backend\n        not in NAMES\n    ):\n        pass\n"
    )
    shapes = scan_choice_shapes(src.encode(), [])
    assert shapes["lines"]["7"] == "self.attention_backend not in NAMES"
    assert shapes["spans"] == {"7": 1}
    path = "python/sglang/srt/disaggregation/conn.py"
    files = {SERVER_ARGS_PATH: SERVER_ARGS, path: CONTINUED}
    facts = {facts_key(p, kind_of(p)): analyze(t.encode(), kind_of(p), p) for p, t in files.items()}
    rows = assemble({p: p for p in files}, facts)
    got = [(c["line"], c["above"], c["text"]) for c in rows.choice_sites if c["path"] == path]
    assert got[0] == (
        7,  # the operator's line, cited from the line above it
        1,
        'and self.server_args.disaggregation_transfer_backend in ["nixl", "mooncake"]',
    )
    assert (12, 0, 'not in ["mooncake"]') in got
    # cited (JSON `source`, pages, Markdown) from the first line its text shows
    row = next(c for c in rows.choice_sites if c["path"] == path)
    version = Version(
        name="v1", commit="c0ffee", date=datetime.now(UTC), sort_key="1", era=1,
        extractor_version=0, web_url="https://example.com/sglang",
    )  # fmt: skip
    fields = ("value", "flag", "how", "path", "line", "text", "above")
    cite = choice_site_dict(version, ChoiceSite(version_id=1, **{k: row[k] for k in fields}))
    assert (cite["line"], cite["end_line"], cite["text"]) == (6, 7, row["text"])
    assert cite["url"].endswith(f"/{path}#L6-L7") and cite["permalink"].endswith("#L6-L7")


# Audit of issue 11's open items: an enum's method on an object of another class, a dict
# named for a flag but keyed by env vars, a dict looked up through a local bound to a flag,
# a getattr over a loop of flag names.
ENUM_SERVER_ARGS = """
import argparse


class ServerArgs:
    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--moe-a2a-backend", type=str, choices=["none", "deepep", "mori"])
        parser.add_argument("--speculative-algorithm", type=str, choices=["EAGLE", "NGRAM"])
        parser.add_argument("--dtype", type=str, choices=["auto", "float16", "bfloat16"])
        parser.add_argument("--mamba-backend", type=str, choices=["triton", "flashinfer"])
        parser.add_argument("--lora-backend", type=str, choices=["triton", "csgmv"])
        parser.add_argument("--attention-backend", type=str, choices=["triton", "flashinfer"])
        parser.add_argument(
            "--attention-backend-alias", type=str, choices=["triton", "legacy"]
        )

    def _handle_aliases(self):
        for attr in (
            "attention_backend",
            "attention_backend_alias",
        ):
            if getattr(self, attr, None) == "legacy":
                setattr(self, attr, "triton")
        if getattr(self, attr, None) == "legacy":
            pass
"""
A2A_ENUM = """
from enum import Enum


class MoeA2ABackend(Enum):
    NONE = "none"
    DEEPEP = "deepep"
    MORI = "mori"
"""
# The speculative algorithm is a registry class (no Enum) that also has `is_none()`.
SPEC_USE = """
def step(self, batch, speculative_algorithm, a2a_backend):
    if self.spec_algorithm.is_none():
        return 1
    if not batch.spec_algorithm.is_none():
        return 2
    if speculative_algorithm.is_none():
        return 3
    if a2a_backend.is_none():
        return 4
    if self._lora_runner_backend.is_deepep():
        return 5
"""
ENV_KEYED = """
import os

import envs


def state_dtype(config):
    dtype_map = {
        "float16": torch.float16,
        "bfloat16": torch.bfloat16,
    }
    conv = dtype_map.get(envs.SGLANG_CONV_DTYPE.get(), torch.bfloat16)
    ssm = dtype_map[config.ssm_dtype]
    return conv, ssm


def falcon_dtype():
    dtype_map = {
        "float16": torch.float16,
        "bfloat16": torch.bfloat16,
    }
    return dtype_map[os.environ["SGLANG_SSM_DTYPE"]]
"""
FLAG_KEYED = """
_DTYPES = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


def get_dtype(dtype):
    return _DTYPES[dtype]
"""
LOCAL_KEYED = """
_BACKEND_REGISTRY = {
    "triton": TritonBackend,
    "flashinfer": FlashInferBackend,
}


def init_backend(server_args):
    requested = server_args.mamba_backend or "triton"
    return _BACKEND_REGISTRY.get(requested)
"""


def _assembled(files: dict[str, str]) -> list[dict[str, Any]]:
    facts = {}
    for path, text in files.items():
        facts[facts_key(path, kind_of(path))] = analyze(text.encode(), kind_of(path), path)
    return assemble({p: p for p in files}, facts).choice_sites


def _sites_in(rows: list[dict[str, Any]], path: str) -> list[tuple[int, str, str | None]]:
    return sorted((c["line"], c["value"], c["flag"]) for c in rows if c["path"] == path)


def test_an_enum_method_on_an_object_named_for_another_flag_is_no_site() -> None:
    use = "python/sglang/srt/managers/scheduler.py"
    rows = _assembled(
        {
            SERVER_ARGS_PATH: ENUM_SERVER_ARGS,
            "python/sglang/srt/layers/moe/utils.py": A2A_ENUM,
            use: SPEC_USE,
        }
    )
    # `spec_algorithm.is_none()` holds a speculative algorithm, not MoeA2ABackend.NONE;
    # an untyped receiver whose name names no other flag still is the enum's, and so is
    # one that only shares a word with another flag (`_lora_runner_backend`).
    assert _sites_in(rows, use) == [
        (9, "none", "--moe-a2a-backend"),
        (11, "deepep", "--moe-a2a-backend"),
    ]


def test_a_dict_named_for_a_flag_but_keyed_by_env_vars_or_config_is_no_site() -> None:
    rows = _assembled(
        {
            SERVER_ARGS_PATH: ENUM_SERVER_ARGS,
            "python/sglang/srt/configs/state.py": ENV_KEYED,
            "python/sglang/srt/configs/model_config.py": FLAG_KEYED,
        }
    )
    assert _sites_in(rows, "python/sglang/srt/configs/state.py") == []
    # looked up with the flag's own name: the flag's
    assert _sites_in(rows, "python/sglang/srt/configs/model_config.py") == [
        (3, "float16", "--dtype"),
        (4, "bfloat16", "--dtype"),
    ]


def test_an_env_var_read_is_no_lookup_name() -> None:
    found = scan_choice_shapes(ENV_KEYED.encode(), [])
    assert [g[2:] for g in found["dispatch"]] == [
        ["dtype_map", ["environ", "ssm_dtype"]],
        ["dtype_map", ["environ", "ssm_dtype"]],
    ]


def test_a_dict_looked_up_with_a_local_bound_to_a_flag_is_that_flag_s() -> None:
    path = "python/sglang/srt/layers/attention/mamba/ops/dispatch.py"
    rows = _assembled({SERVER_ARGS_PATH: ENUM_SERVER_ARGS, path: LOCAL_KEYED})
    # both --mamba-backend and --attention-backend take triton and flashinfer
    assert _sites_in(rows, path) == [
        (3, "triton", "--mamba-backend"),
        (4, "flashinfer", "--mamba-backend"),
    ]


def test_a_getattr_over_a_loop_of_flag_names_is_a_site_of_the_first_taking_the_value() -> None:
    rows = _assembled({SERVER_ARGS_PATH: ENUM_SERVER_ARGS})
    # the first name's flag takes no "legacy": the next one's; out of the loop, no site
    assert [(c["line"], c["flag"]) for c in rows if c["value"] == "legacy"] == [
        (23, "--attention-backend-alias")
    ]
