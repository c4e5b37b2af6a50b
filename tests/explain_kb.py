"""A small synthetic knowledge base for the explain tests, written through the schema models.

Three versions of an SGLang-like `server_args.py` (synthetic text, no SGLang code): each
version's file is generated line by line, and every Flag / ConstraintSite row cites the
line it was generated at, so citations in the tests point at real lines of a stored blob.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlmodel import Session

from kb.relations import rebuild_relations
from kb.schema import (
    Blob,
    ConstraintSite,
    Flag,
    Version,
    VersionFile,
    create_schema,
    dumps,
    make_engine,
    pack_text,
)

WEB_URL = "https://github.com/example/sglang-like"
ARGS = "python/sglang/srt/server_args.py"
VERSIONS = ["v0.1.0", "v0.2.0", "v0.3.0"]


def flags_of(v: int) -> list[dict[str, Any]]:
    flags: list[dict[str, Any]] = [
        dict(
            name="--model-path",
            aliases=["--model"],
            type="str",
            required=True,
            help="Where the weights live. A folder or a hub id.",
        ),
        dict(
            name="--tp-size",
            aliases=["--tensor-parallel-size"],
            type="int",
            default=1,
            help="How many GPUs share each layer.",
        ),
        dict(name="--pp-size", type="int", default=1, help="How many pipeline stages."),
        dict(
            name="--mem-fraction-static",
            type="float",
            default=None,
            help="Share of memory for weights and cache.",
        ),
        dict(
            name="--enable-mixed-chunk",
            action="store_true",
            default=False,
            help="Mix prefill and decode in one batch.",
        ),
        dict(
            name="--moe-runner-backend",
            type="str",
            default="auto" if v < 2 else "triton",
            choices=["auto", "triton", "flashinfer_cutlass"],
            help="Kernel family for the expert layers.",
        ),
        dict(
            name="--chunked-prefill-size",
            type="int",
            default=8192,
            help="Tokens per prefill chunk.",
        ),
    ]
    if v <= 1:
        flags.append(
            dict(
                name="--enable-deepep-moe",
                action="DeprecatedAction" if v == 1 else "store_true",
                default=False,
                deprecated=v == 1,
                # As the ingest stores it: the value the message names, with the flag.
                replacement="--moe-a2a-backend=deepep" if v == 1 else None,
                deprecated_message="Use '--moe-a2a-backend deepep' instead." if v == 1 else None,
                help="Route experts through the deep all-to-all.",
            )
        )
    if v >= 1:
        flags += [
            dict(
                name="--enable-two-batch-overlap",
                action="store_true",
                default=False,
                help="Overlap two micro-batches.",
            ),
            dict(
                name="--moe-a2a-backend",
                type="str",
                default="none",
                choices=["none", "deepep"],
                help="All-to-all transport for experts.",
            ),
            dict(
                name="--disable-overlap-schedule",
                action="store_true",
                default=False,
                help="Turn off the overlapped scheduler.",
            ),
            dict(
                name="--speculative-algorithm",
                type="str",
                default=None,
                choices=["EAGLE", "NEXTN"],
                help="Draft-and-verify algorithm.",
            ),
            dict(
                name="--json-model-override-args",
                type="str",
                default="{}",
                help="JSON merged into the model config.",
            ),
            dict(
                name="--lora-paths", type="str", nargs="*", default=None, help="Adapters to load."
            ),
            dict(
                name="--enable-torch-compile",
                action="store_true",
                default=False,
                help="Compile the model with torch.compile.",
            ),
        ]
    if v >= 2:  # makes `--tp` ambiguous from this version on
        flags.append(
            dict(
                name="--tp-offload",
                action="store_true",
                default=False,
                help="Offload tensor-parallel shards.",
            )
        )
    return flags


def sites_of(v: int) -> list[dict[str, Any]]:
    if v == 0:
        return []
    return [
        dict(
            kind="raise",
            function="ServerArgs.check_server_args",
            conditions=['self.enable_two_batch_overlap and self.moe_a2a_backend == "none"'],
            message="ValueError: two batch overlap needs an all-to-all backend other than none",
            flags=["--enable-two-batch-overlap", "--moe-a2a-backend"],
            key="tbo-a2a",
        ),
        dict(
            kind="override",
            function="ServerArgs._handle_pipeline",
            conditions=["self.pp_size > 1"],
            writes={"disable_overlap_schedule": "True"},
            flags=["--pp-size"],
            affects=["--disable-overlap-schedule"],
            key="pp-overlap",
        ),
        dict(
            kind="assert",
            function="ServerArgs.check_server_args",
            conditions=[
                "self.pp_size > 1",
                "not (self.disable_overlap_schedule and self.speculative_algorithm is None)",
            ],
            message="pipeline stages need the plain scheduler and no speculation",
            flags=["--pp-size", "--disable-overlap-schedule", "--speculative-algorithm"],
            affects=["--disable-overlap-schedule", "--speculative-algorithm"],
            key="pp-assert",
        ),
        dict(
            kind="override",
            function="ServerArgs._handle_memory",
            conditions=["self.mem_fraction_static is None"],
            writes={"mem_fraction_static": "self.estimate_memory()"},
            flags=["--mem-fraction-static"],
            affects=["--mem-fraction-static"],
            key="mem",
        ),
        dict(
            kind="raise",
            function="ServerArgs.check_server_args",
            conditions=["self.enable_mixed_chunk", "self.mem_fraction_static > 0.9"],
            message="ValueError: mixed chunks need memory headroom",
            flags=["--enable-mixed-chunk", "--mem-fraction-static"],
            key="mixed-mem",
        ),
        dict(
            kind="warning",
            function="ServerArgs._handle_compile",
            conditions=["self.enable_torch_compile and is_hip()"],
            message="torch.compile is slow to warm up on this platform",
            flags=["--enable-torch-compile"],
            key="compile-hip",
        ),
        dict(
            kind="override",
            function="ServerArgs._handle_chunking",
            conditions=["self.chunked_prefill_size < 0"],
            writes={"chunked_prefill_size": "-1"},
            flags=["--chunked-prefill-size"],
            affects=["--chunked-prefill-size"],
            key="chunk",
        ),
    ]


def _render(v: int) -> tuple[str, dict[str, int], dict[str, int]]:
    """Synthetic source text, the line of each flag and the line of each site."""
    lines = [f"# synthetic server args, version {v}", "def add_cli_args(parser):"]
    flag_lines: dict[str, int] = {}
    for spec in flags_of(v):
        lines.append(f'    parser.add_argument("{spec["name"]}")  # {spec["help"]}')
        flag_lines[spec["name"]] = len(lines)
    lines.append("class ServerArgs:")
    site_lines: dict[str, int] = {}
    for site in sites_of(v):
        lines.append(f"    if {' and '.join(site['conditions'])}:")
        lines.append(f"        pass  # {site['kind']}: {site.get('message', '')}")
        site_lines[site["key"]] = len(lines)
    return "\n".join(lines) + "\n", flag_lines, site_lines


def build(path: Path) -> str:
    """Write the knowledge base at `path`; returns its SQLAlchemy URL."""
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    create_schema(engine)
    start = datetime(2025, 1, 1, tzinfo=UTC)
    with Session(engine) as session:
        for v, name in enumerate(VERSIONS):
            text, flag_lines, site_lines = _render(v)
            sha = hashlib.sha1(text.encode()).hexdigest()
            commit = hashlib.sha1(name.encode()).hexdigest()
            version = Version(
                name=name,
                commit=commit,
                date=start + timedelta(days=30 * v),
                sort_key=name,
                position=v,
                era=2,
                extractor_version=1,
                web_url=WEB_URL,
                ingested_at=start,
            )
            session.add(version)
            session.flush()
            assert version.id is not None
            session.add(Blob(sha=sha, text=pack_text(text)))
            session.add(VersionFile(version_id=version.id, path=ARGS, sha=sha))
            for spec in flags_of(v):
                line = flag_lines[spec["name"]]
                session.add(
                    Flag(
                        version_id=version.id,
                        name=spec["name"],
                        dest=spec["name"].lstrip("-").replace("-", "_"),
                        aliases=dumps(spec.get("aliases", [])),
                        type=spec.get("type"),
                        default=dumps(spec.get("default")),
                        choices=(dumps(spec["choices"]) if "choices" in spec else None),
                        help=spec["help"],
                        action=spec.get("action"),
                        nargs=spec.get("nargs"),
                        required=spec.get("required", False),
                        deprecated=spec.get("deprecated", False),
                        replacement=spec.get("replacement"),
                        deprecated_message=spec.get("deprecated_message"),
                        path=ARGS,
                        line=line,
                        end_line=line,
                    )
                )
            for site in sites_of(v):
                line = site_lines[site["key"]]
                session.add(
                    ConstraintSite(
                        version_id=version.id,
                        kind=site["kind"],
                        function=site["function"],
                        condition=" and ".join(site["conditions"]),
                        conditions=dumps(site["conditions"]),
                        message=site.get("message", ""),
                        flags=dumps(site["flags"]),
                        affects=dumps(site.get("affects", [])),
                        writes=dumps(site.get("writes", {})),
                        key=site["key"],
                        path=ARGS,
                        line=line,
                        end_line=line,
                    )
                )
        session.commit()
    rebuild_relations(engine)
    engine.dispose()
    return url
