"""Analyze one blob: version-independent facts, cached by (blob sha, analyzer kind).

The kind depends on the path: server_args.py gets the flag and constraint extractors, hook
modules the constraint extractor, every file the fast site scan. A blob is analyzed once in
the whole history and its facts are reused by every version that contains it.
"""

from __future__ import annotations

import ast
import gc
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ingest.carriers import scan_structure
from ingest.choices import scan_choice_shapes
from ingest.constraints import extract_constraints
from ingest.doc_commands import extract_commands, is_markdown
from ingest.docs import FLAGS_DOC, doc_kind, parse_docs
from ingest.env import scan_env
from ingest.environ_decls import ENVIRON_PATH, extract_declarations
from ingest.flags import accessors, extract_flags
from ingest.git_source import KERNEL_PYTHON_DIR, BlobReader
from ingest.simulated import HOOK_DIR, simulated
from ingest.sites import LineIndex, scan
from kb.codec import WHOLE_LEVEL, pack, pack_fast
from kb.procs import die_with_parent, exit_with
from kb.pyast import PARSE_FAILURES, gc_paused

# Bumped when the facts' shape or content changes; the history is in CHANGELOG.md.
ANALYZER_VERSION = 49
SERVER_ARGS_PATH = "python/sglang/srt/server_args.py"


def kind_of(path: str) -> str:
    docs = doc_kind(path)  # first: a README among the modules below is no Python
    if docs is not None:
        return "docs_" + docs
    if path == SERVER_ARGS_PATH:
        return "server_args"
    if path.startswith(HOOK_DIR):
        return "hook"
    if path == ENVIRON_PATH:
        return "environ"
    if path.startswith(KERNEL_PYTHON_DIR):
        return "kernel"
    if is_markdown(path):
        return "markdown"  # only the launch commands it shows
    return "plain"


def empty_facts() -> dict[str, Any]:
    """The facts of a file with nothing in it (the shape every kind shares)."""
    return {"reads": [], "choices": [], "enum_refs": [], "enums": [], "lines": {}, "env": []}


def facts_key(sha: str, kind: str) -> str:
    return f"{sha}:{kind}"


def analyze(data: bytes, kind: str, path: str) -> dict[str, Any]:
    if kind == "markdown":  # read for its launch commands alone: the facts say only that
        return {"doc_commands": extract_commands(data.decode("utf-8", "replace"))}
    if kind.startswith("docs_"):
        facts = empty_facts()
        facts["warnings"] = []
        text = data.decode("utf-8", "replace")
        bullets = path.rsplit("/", 1)[-1] == FLAGS_DOC  # the 2024 shape's one home
        facts["docs"] = parse_docs(text, kind.removeprefix("docs_"), bullets)
        facts["doc_commands"] = extract_commands(text)
        return facts
    if kind == "kernel":  # another package: only the environment variables it reads
        facts = empty_facts()
        facts["warnings"] = []
        facts["env"], facts["lines"] = scan_env(data)
        return facts
    index = LineIndex(data)  # line numbers and texts, shared by the scans of this blob
    facts = scan(data, index)
    facts["warnings"] = []
    env_sites, env_lines = scan_env(data, kind == "server_args", index)
    facts["env"] = env_sites
    for no, line in env_lines.items():
        facts["lines"].setdefault(no, line)
    shapes = scan_choice_shapes(data, facts["choices"], index)
    shape_lines, shape_spans = shapes.pop("lines"), shapes.pop("spans", {})
    facts["lines"].update(shape_lines)
    spans = {k: v for k, v in facts.pop("spans", {}).items() if k not in shape_lines}
    spans.update(shape_spans)  # each line spans what its text (the last cited) joins
    if spans:
        facts["spans"] = spans
    facts.update(shapes)
    if kind != "server_args":
        facts.update(scan_structure(data, facts["reads"], index))
    if kind == "plain":
        return facts
    text = data.decode("utf-8", "replace")
    with gc_paused():
        _parsed(facts, text, kind, path)
    return facts


def _parsed(facts: dict[str, Any], text: str, kind: str, path: str) -> None:
    """The facts read from the whole file's tree: flags, constraints, declarations."""
    try:
        tree = ast.parse(text)
        if kind == "environ":
            facts["env_decl"] = extract_declarations(tree, text, path)
            return
        facts["constraints"] = extract_constraints(tree, path)
        if kind == "server_args":
            facts["accessors"] = accessors(tree)
            extraction = extract_flags(tree, text, path)
            facts["flags"] = extraction.flags
            facts["era"] = extraction.era
            facts["action_classes"] = extraction.action_classes
            facts["warnings"].extend(extraction.warnings)
            facts["reads"].extend(_self_reads(tree, text, facts["lines"]))
    except SyntaxError as exc:
        facts["warnings"].append(
            {"path": path, "line": exc.lineno or 0, "what": f"syntax error: {exc.msg}"}
        )
    except PARSE_FAILURES as exc:  # too deeply nested for the parser: skip, don't abort
        facts["warnings"].append({"path": path, "line": 0, "what": f"not parsed: {exc!r}"[:200]})


SELF_ATTR_RE = re.compile(r"\bself\.([a-z_][a-z0-9_]*)\b(\s*(?:[+\-*/|&]?=)(?!=))?")


def _self_reads(tree: ast.Module, text: str, line_texts: dict[str, str]) -> list[list[Any]]:
    """`self.x` inside ServerArgs methods: how server_args.py itself reads each flag.

    A text scan over the class's line span (an AST walk of this 7,000-line class costs
    several times more); method calls are filtered out by the assembler, which keeps only
    names that are flag dests.
    """
    cls = next(
        (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs"), None
    )
    if cls is None:
        return []
    lines = text.splitlines()
    out: list[list[Any]] = []
    for no in range(cls.lineno, min(cls.end_lineno or cls.lineno, len(lines)) + 1):
        line = lines[no - 1]
        if "self." not in line or line.lstrip().startswith("#"):
            continue
        for m in SELF_ATTR_RE.finditer(line):
            out.append([m.group(1), no, "write" if m.group(2) else "read"])
            line_texts.setdefault(str(no), line.strip()[:240])
    return out


def likely_cited(kind: str, facts: dict[str, Any], path: str) -> bool:
    """Whether the blob will probably be stored, so its text is compressed in the worker.

    Reads of server args, enum classes and references are cited whatever the version, and
    the code the simulation reads is stored (ingest/simulated.py); a file with only string
    comparisons rarely is, and the parent reads those few itself.
    """
    if kind == "markdown":  # not cited: its commands link to the forge (kb/doc_commands.py)
        return False
    return (
        kind != "plain"
        or simulated(path)
        or bool(facts["reads"] or facts["enum_refs"] or facts["enums"] or facts["env"])
    )


_reader: BlobReader | None = None


def _worker_init(gitdir: str) -> None:
    global _reader
    _reader = BlobReader(Path(gitdir))


# The pool's entry points live here, not in ingest.runner: its workers start from a server
# that imported this module alone (no database layers, no GitPython), so each is ~25 MiB
# instead of a fork of the ingest (~85 MiB, counted again in every worker).


def pool_init(gitdir: str, ingest: int) -> None:
    # A `kill -9` of the ingest runs no clean-up: each worker watches the ingest itself (its
    # parent is the fork server, which lives while any worker does), and the kernel ends
    # the worker's `git cat-file` with it.
    die_with_parent()
    exit_with(ingest)
    _worker_init(gitdir)


@dataclass
class Analyzed:
    """One blob's result from a worker: its facts as JSON (the parent stores them along
    each path's chain: a worker sees only the batches it got, so half the links), and its
    text zstd'd whole when it is likely to be cited. The parent
    stores the text as a delta against the previous cited one of the path
    (kb.codec.Chains): only it knows which are cited, but that is mostly the path's blob
    before, so the worker makes that delta too (`text_delta`).
    The facts travel and wait as JSON bytes (decoded when a version first needs them):
    one orjson encoding here instead of json plus pickle."""

    key: str
    json: bytes  # the facts as stored (BlobFacts.facts once unpacked)
    # the blob's bytes zstd'd: pack_fast, or at WHOLE_LEVEL for a path's first blob (with no
    # blob before to make a delta against, it is the text the parent stores)
    text: bytes | None
    # With `text`, when the path had another blob before (Item's `before`): (that blob's
    # sha, pack(the blob's bytes, that blob's bytes)), the delta the parent stores when that
    # blob is the last of the path's text chain, as it mostly is.
    text_delta: tuple[str, bytes] | None = None


def dumps_facts(kind: str, facts: dict[str, Any]) -> bytes:
    """A blob's facts as stored: compact JSON (json.loads reads it back the same).

    orjson (5x faster than json's encoder) for the files scanned line by line, the 98% of
    them; but orjson writes a non-finite float as null, so json's encoder (which writes
    Infinity and NaN) takes the few whose facts may hold one: values evaluated from the
    code (flag defaults, environment declarations and defaults)."""
    if kind == "plain" and _finite(facts["env"]):
        try:
            return orjson.dumps(facts, option=orjson.OPT_NON_STR_KEYS)
        except orjson.JSONEncodeError:  # an integer over 64 bits, a lone surrogate
            pass
    return json.dumps(facts, separators=(",", ":")).encode()


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list | tuple):
        return all(_finite(v) for v in value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    return True


def loads_facts(data: bytes) -> dict[str, Any]:
    """The facts dumps_facts stored (orjson reads JSON 2x faster; json takes Infinity, NaN)."""
    try:
        return orjson.loads(data)  # type: ignore[no-any-return]
    except orjson.JSONDecodeError:
        return json.loads(data)  # type: ignore[no-any-return]


# (sha, kind, path, before): `before` is the blob the path had in the version before the
# first that has this one (None if it had none), the likely base of its stored text.
Item = tuple[str, str, str, str | None]


def analyze_batch(items: list[Item]) -> list[Analyzed]:
    """Worker entry: [(sha, kind, path, before)] -> their facts.

    The text is kept (compressed) for blobs likely to be cited, so the parent can store it
    without reading the blob again, with its delta against `before`: the parent's busy main
    thread would make the same (~1 s of its CPU in a full ingest).
    """
    assert _reader is not None
    blobs = _reader.read_many([sha for sha, _kind, _path, _before in items])  # pipelined
    done = [
        (item, data, analyze(data, item[1], item[2]))
        for item, data in zip(items, blobs, strict=True)
    ]
    # The blobs before, of those whose text goes along, read once the batch is read (the
    # reader answers one request at a time).
    bases = [
        item[3] for item, _data, facts in done if item[3] and likely_cited(item[1], facts, item[2])
    ]
    base_of = dict(zip(bases, _reader.read_many(bases), strict=True))
    out = []
    for (sha, kind, path, before), data, facts in done:
        base = (before, base_of[before]) if before in base_of else None
        out.append(packed(sha, kind, path, data, facts, base))
    # What the worker keeps for the next batches (carriers.py's import items, the scans'
    # caches) is left out of the collector's later scans, which find almost nothing to free.
    gc.freeze()
    return out


def packed(
    sha: str,
    kind: str,
    path: str,
    data: bytes,
    facts: dict[str, Any],
    before: tuple[str, bytes] | None = None,
) -> Analyzed:
    """A blob's result as it goes to the parent (what bench/bench_analyze.py times).
    `before`: (sha, bytes) of the path's blob before, to make the text's delta against."""
    key, json_ = facts_key(sha, kind), dumps_facts(kind, facts)
    if not likely_cited(kind, facts, path):
        return Analyzed(key, json_, None)
    if before is None:
        return Analyzed(key, json_, pack(data, level=WHOLE_LEVEL))
    return Analyzed(key, json_, pack_fast(data), (before[0], pack(data, before[1])))
