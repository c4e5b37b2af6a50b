"""Small knowledge bases written by hand through the schema models, for the search and diff
tests (names and texts are synthetic)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlmodel import Session, select

from kb.relations import rebuild_relations
from kb.schema import (
    ConstraintSite,
    Enum,
    EnvVar,
    Flag,
    Version,
    create_schema,
    dumps,
    make_engine,
)


def flag(name: str, **kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": name,
        "dest": name.lstrip("-").replace("-", "_"),
        "help": "Synthetic help text.",
        "path": "pkg/server_args.py",
        "line": 10,
        "end_line": 12,
    }
    base.update(kw)
    for key in ("aliases", "choices", "known_values", "default"):  # JSON columns: Python values
        if base.get(key) is not None:
            base[key] = dumps(base[key])
    return base


def build_kb(path: Path, versions: list[tuple[str, dict[str, Any]]]) -> str:
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    create_schema(engine)
    with Session(engine) as session:
        for position, (name, spec) in enumerate(versions):
            version = Version(
                name=name,
                commit=f"{position:040x}",
                date=datetime(2025, 1, 1, tzinfo=UTC) + timedelta(days=position),
                ingested_at=datetime(2025, 2, 1, tzinfo=UTC),
                sort_key=name,
                position=position,
                era=2,
                extractor_version=1,
                web_url="https://example.invalid/repo",
            )
            session.add(version)
            session.flush()
            assert version.id is not None
            for f in spec["flags"]:
                session.add(Flag(version_id=version.id, **f))
            for key, kind, function, message, line, *extra in spec["constraints"]:
                site: dict[str, Any] = {
                    "condition": "server_args.beta > 1",
                    "flags": ["--beta"],
                    **(extra[0] if extra else {}),
                }
                site["flags"] = dumps(site["flags"])
                site["affects"] = dumps(site.get("affects", []))
                session.add(
                    ConstraintSite(
                        version_id=version.id,
                        kind=kind,
                        function=function,
                        message=message,
                        key=key,
                        path="pkg/server_args.py",
                        line=line,
                        end_line=line + 1,
                        **site,
                    )
                )
            for enum_name, members in spec["enums"].items():
                linked = spec.get("enum_flags", {}).get(enum_name, [])
                session.add(
                    Enum(
                        version_id=version.id,
                        name=enum_name,
                        path="pkg/enums.py",
                        line=1,
                        end_line=5,
                        flags=dumps(linked),
                        members=dumps(
                            [
                                {"name": m, "value": v, "line": i + 2}
                                for i, (m, v) in enumerate(members)
                            ]
                        ),
                    )
                )
        session.commit()
    rebuild_relations(engine)
    engine.dispose()
    return url


# For the search tests: names people type, synthetic help texts.
RUNNER = ["triton", "flashinfer_cutlass"]
SEARCH_OLD = {
    "flags": [
        flag("--enable-nccl-nvls", action="store_true", help="Turn on the multicast collective."),
        flag("--moe-runner-backend", choices=RUNNER, help="Kernel family for expert layers."),
        flag("--moe-a2a-backend", choices=["none", "deepep"], help="Expert all-to-all."),
        flag("--enable-two-batch-overlap", action="store_true", help="Split a batch in two."),
        flag("--enable-single-batch-overlap", action="store_true", help="Overlap in one batch."),
        flag("--fp4-gemm-backend", choices=["auto", "cutlass"], help="Kernel for fp4 matmul."),
        flag("--tp-size", aliases=["--tp"], type="int", help="Tensor parallel degree."),
        flag("--legacy-knob", help="Something only the old version had."),
        flag("--chunked-prefill-size", type="int", help="Tokens per prefill chunk."),
        # a help naming values with underscores ("fp9_e4m3") and one saying the words apart
        flag("--kv-store-dtype", choices=["auto", "fp9_e4m3"], help='"fp9_e4m3" halves it.'),
        flag("--store-scales-path", help="Scales of an FP9 KV store, a JSON file."),
    ],
    "constraints": [
        (
            "k-tbo",
            "raise",
            "ServerArgs.check",
            "the overlap of two batches needs an all-to-all backend",
            40,
            {
                "condition": "self.enable_two_batch_overlap and self.moe_a2a_backend == 'none'",
                "flags": ["--enable-two-batch-overlap", "--moe-a2a-backend"],
            },
        )
    ],
    "enums": {"MoeRunnerBackend": [("TRITON", "triton"), ("FLASHINFER_CUTLASS", RUNNER[1])]},
    "enum_flags": {"MoeRunnerBackend": ["--moe-runner-backend"]},
}
SEARCH_NEW = {
    **SEARCH_OLD,
    "flags": [f for f in SEARCH_OLD["flags"] if f["name"] != "--legacy-knob"]
    + [flag("--moe-runner-backend", choices=[*RUNNER, "flashinfer_trtllm"], line=99)],
}
SEARCH_NEW["flags"] = [
    f for f in SEARCH_NEW["flags"] if f["name"] != "--moe-runner-backend" or f["line"] == 99
]


def add_env_vars(url: str, rows: dict[str, list[dict[str, Any]]]) -> None:
    """EnvVar rows (field -> value) for versions `build_kb` planted, by version name."""
    engine = make_engine(url)
    with Session(engine) as session:
        ids = {v.name: v.id for v in session.exec(select(Version))}
        for version, variables in rows.items():
            for row in variables:
                session.add(EnvVar(version_id=ids[version], **row))
        session.commit()
    engine.dispose()
