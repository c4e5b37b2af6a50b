"""An f-string help as SGLang's --help prints it: what static reading can work out is
rendered (a literal, a docstring here or in an imported module, a list like choices), the
rest is a marked placeholder, never raw braces (synthetic modules, assembled in memory)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ingest.analyze import analyze, facts_key, kind_of
from ingest.assemble import assemble

SRT = "python/sglang/srt/"
SERVER_ARGS = '''
import argparse
import os
from sglang.srt.utils.common import human_readable_int
from sglang.srt.parser.reasoning_parser import ReasoningParser

BUCKET_RULE = "Rules: default or custom."


def size_of(text):
    """Sizes like 1k.

    Decimals are allowed."""


class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument(
            "--context-length", type=int,
            help="Max length." f"\\n\\n{human_readable_int.__doc__}",
        )
        parser.add_argument("--chunk", type=int, help="Chunk. " + f"{size_of.__doc__}")
        names = list(ReasoningParser.DetectorMap.keys())
        note = "local"
        parser.add_argument(
            "--reasoning-parser", choices=["auto"] + names, help=f"Parsers: {names}."
        )
        more = list(ReasoningParser.DetectorMap.keys()) + extra_parsers()
        parser.add_argument("--more", help=f"Also {more}; wide {names:>40}.")
        parser.add_argument("--buckets", help=f"Buckets. {BUCKET_RULE} {note!r}")
        parser.add_argument("--port", help=f"Port {os.getpid()}.")
        parser.add_argument("--gone", help=f"Doc: {elsewhere.__doc__} {note:>9}")
'''
COMMON = '''
def human_readable_int(value):
    """Supports SI suffixes (k, M).
    Examples: '1k' -> 1000"""
    return int(value)
'''
PARSERS = """
class DeepSeekR1Detector:
    pass


class Qwen3Detector:
    pass


class ReasoningParser:
    DetectorMap = {"deepseek-r1": DeepSeekR1Detector, "qwen3": Qwen3Detector}
"""


def helps(texts: dict[str, str]) -> dict[str, str]:
    files, facts, blobs = {}, {}, {}
    for path, text in texts.items():
        sha = hashlib.sha1(text.encode()).hexdigest()
        files[path], blobs[sha] = sha, text
        # Through JSON, as the facts cache gives them.
        facts[facts_key(sha, kind_of(path))] = json.loads(
            json.dumps(analyze(text.encode(), kind_of(path), path))
        )
    rows = assemble(files, facts, blobs.__getitem__)
    return {f["name"]: f["help"] for f in rows.flags}


def test_help_placeholders_are_rendered_or_marked() -> None:
    found: dict[str, Any] = helps(
        {
            SRT + "server_args.py": SERVER_ARGS,
            SRT + "utils/common.py": COMMON,
            SRT + "parser/reasoning_parser.py": PARSERS,
        }
    )
    assert found["--context-length"] == (
        "Max length.\n\nSupports SI suffixes (k, M).\nExamples: '1k' -> 1000"
    )
    assert found["--chunk"] == "Chunk. Sizes like 1k.\n\nDecimals are allowed."
    assert found["--reasoning-parser"] == "Parsers: ['deepseek-r1', 'qwen3']."
    assert found["--buckets"] == "Buckets. Rules: default or custom. 'local'"
    # a list a call extends, or one under a format spec, is not worked out here
    assert found["--more"] == (
        "Also (computed at run time: list(ReasoningParser.DetectorMap.keys()) + extra_parsers());"
        " wide (computed at run time: list(ReasoningParser.DetectorMap.keys()))."
    )
    assert found["--port"] == "Port (computed at run time: os.getpid())."
    assert found["--gone"] == ("Doc: (computed at run time: elsewhere.__doc__)     local")


def test_a_module_not_in_the_version_leaves_the_placeholder() -> None:
    found = helps({SRT + "server_args.py": SERVER_ARGS})
    assert found["--context-length"] == (
        "Max length.\n\n(computed at run time: human_readable_int.__doc__)"
    )
    assert found["--reasoning-parser"] == (
        "Parsers: (computed at run time: list(ReasoningParser.DetectorMap.keys()))."
    )
    assert "{" not in "".join(found.values())


ACCESSOR_ARGS = """
class ServerArgs:
    def get_backends(self):
        prefill = self.prefill_backend if self.prefill_backend else self.attention_backend
        return prefill, self.attention_backend

    def uses_more(self):
        return helper(self.attention_backend)

    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--attention-backend", choices=["fa3", "triton"])
        parser.add_argument("--prefill-backend", choices=["fa3", "triton"])
"""
RUNNER = """
def init_backend(server_args):
    prefill, decode = server_args.get_backends()
    other = server_args.uses_more()
"""


def test_a_server_args_accessor_method_is_read_where_it_is_called() -> None:
    """`server_args.get_backends()` reads the two flags the accessor returns (a method with
    a call in it is no accessor), as an indirect read through the method."""
    files, facts, blobs = {}, {}, {}
    for path, text in {SRT + "server_args.py": ACCESSOR_ARGS, SRT + "runner.py": RUNNER}.items():
        sha = hashlib.sha1(text.encode()).hexdigest()
        files[path], blobs[sha] = sha, text
        facts[facts_key(sha, kind_of(path))] = json.loads(
            json.dumps(analyze(text.encode(), kind_of(path), path))
        )
    rows = assemble(files, facts, blobs.__getitem__)
    got = sorted((r["dest"], r["path"], r["line"], r["via"]) for r in rows.indirect)
    via = ["ServerArgs.get_backends()"]
    assert got == [
        ("attention_backend", SRT + "runner.py", 3, via),
        ("prefill_backend", SRT + "runner.py", 3, via),
    ]
