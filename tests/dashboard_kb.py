"""A small knowledge base written straight through the schema models, for the dashboard's
tests: three versions of a synthetic SGLang-like project (no SGLang text), with flags,
an enum, constraint/usage/choice sites and the blobs they cite. Line numbers are computed
from the synthetic files, so every citation points at the line it describes."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlmodel import Session

from kb.relations import rebuild_relations
from kb.schema import (
    Blob,
    ChoiceSite,
    ConstraintSite,
    Enum,
    EnvSite,
    EnvVar,
    Flag,
    ModelFile,
    UsageSite,
    Version,
    VersionFile,
    create_schema,
    dumps,
    make_engine,
    pack_text,
)

WEB_URL = "https://github.com/example/sglang-like"
ARGS = "python/sglang/srt/server_args.py"
RUNNER = "python/sglang/srt/moe/runner.py"
ENUMS = "python/sglang/srt/moe/utils.py"
VERSIONS = ["v0.1.0", "v0.2.0", "v0.3.0"]
XSS_HELP = "Shows <script>alert('x')</script> & friends."


@dataclass
class SourceFile:
    """Lines of a synthetic file; `mark` remembers where a named thing starts and ends."""

    lines: list[str] = field(default_factory=list)
    marks: dict[str, tuple[int, int]] = field(default_factory=dict)

    def add(self, *lines: str, mark: str | None = None) -> None:
        start = len(self.lines) + 1
        self.lines.extend(lines)
        if mark:
            self.marks[mark] = (start, len(self.lines))

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def flag_specs(v: int) -> list[dict[str, Any]]:
    """The flags of version index v (0, 1, 2)."""
    runner_choices = ["auto", "triton", "flashinfer_cutlass"] + (
        ["flashinfer_trtllm"] if v >= 2 else []
    )
    specs: list[dict[str, Any]] = [
        {
            "name": "--tp-size",
            "aliases": ["--tp"],
            "type": "int",
            "default": 1,
            "section": "Parallelism",
            "help": "Tensor parallel degree.",
        },
        {
            "name": "--pp-size",
            "type": "int",
            "default": 1,
            "section": "Parallelism",
            "help": "Pipeline parallel degree."
            + (" Turns off overlap scheduling." if v >= 1 else ""),
        },
        {
            "name": "--moe-runner-backend",
            "type": "str",
            "default": "auto",
            "choices": runner_choices,
            "choices_const": "MOE_RUNNER_BACKEND_CHOICES",
            "section": "MoE",
            "help": "Which kernel runs the MoE layers.",
        },
        {
            "name": "--moe-a2a-backend",
            "type": "str",
            "default": "none",
            "choices": ["none", "deepep"],
            "section": "MoE",
            "help": "All-to-all backend for expert parallelism.",
        },
        {
            "name": "--enable-two-batch-overlap",
            "type": None,
            "action": "store_true",
            "default": False,
            "section": "MoE",
            "help": "Overlap two micro-batches.",
        },
        {
            "name": "--disable-overlap-schedule",
            "type": None,
            "action": "store_true",
            "default": False,
            "section": "Scheduling",
            "help": "Turn off the overlap scheduler.",
        },
        {
            "name": "--show-banner",
            "type": "str",
            "default": None,
            "default_expr": "ServerArgs.banner",
            "section": "Scheduling",
            "help": XSS_HELP,
        },
    ]
    if v <= 1:
        specs.append(
            {
                "name": "--old-cache",
                "type": "int",
                "default": 8,
                "section": "Scheduling",
                "help": "Cache slots.",
                "deprecated": v == 1,
                "deprecated_message": "Superseded." if v == 1 else None,
                "replacement": "--tp-size" if v == 1 else None,
            }
        )
    if v >= 2:
        specs.append(
            {
                "name": "--fp4-gemm-backend",
                "type": "str",
                "default": "auto",
                "choices": ["auto", "cutlass"],
                "section": "MoE",
                "help": "FP4 GEMM kernel.",
            }
        )
    return specs


def server_args(v: int, specs: list[dict[str, Any]]) -> SourceFile:
    src = SourceFile()
    src.add("# Synthetic server arguments (test fixture).", "import argparse", "")
    src.add(
        "MOE_RUNNER_BACKEND_CHOICES = [",
        "    " + ", ".join(repr(c) for c in specs[2]["choices"]),
        "]",
        "",
    )
    src.add("class ServerArgs:", "    def __post_init__(self):")
    src.add(
        "        if self.enable_two_batch_overlap and self.moe_a2a_backend == 'none':",
        "            raise ValueError('two-batch overlap needs an all-to-all backend')",
        mark="tbo",
    )
    src.add(
        "        if self.pp_size > 1:",
        "            self.disable_overlap_schedule = True",
        mark="pp",
    )
    src.add("        assert self.tp_size >= 1, 'tp size must be positive'", mark="tp")
    src.add("", "", "def add_cli_args(parser):")
    for spec in specs:
        call = [f"    parser.add_argument({spec['name']!r},"]
        call += [f"        {alias!r}," for alias in spec.get("aliases", [])]
        if spec.get("type"):
            call.append(f"        type={spec['type']},")
        if spec.get("action"):
            call.append(f"        action={spec['action']!r},")
        call.append(f"        default={spec.get('default_expr') or repr(spec.get('default'))},")
        if spec.get("choices"):
            call.append(f"        choices={spec['choices']!r},")
        call.append(f"        help={spec['help']!r},")
        call.append("    )")
        src.add(*call, mark=spec["name"])
    return src


def runner_file(v: int) -> SourceFile:
    src = SourceFile()
    src.add("# Synthetic MoE runner (test fixture).", "", "def pick_runner(server_args):")
    # A long line: narrow screens must scroll code sideways, never the page.
    src.add(
        "    backend = server_args.moe_runner_backend  # "
        + "chosen_at_start_up_and_never_changed_while_the_server_runs_" * 2,
        mark="use-backend",
    )
    src.add("    if backend == 'triton':", "        return 'triton-kernel'", mark="triton")
    src.add(
        "    if backend == 'flashinfer_cutlass':", "        return 'cutlass-kernel'", mark="cutlass"
    )
    src.add("    if backend == 'auto':", "        return 'default-kernel'", mark="auto")
    src.add("    if server_args.pp_size > 1:", "        return 'pipelined'", mark="use-pp")
    src.add("    return None")
    return src


def enum_file() -> SourceFile:
    src = SourceFile()
    src.add("import enum", "", "")
    src.add(
        "class MoeRunnerBackend(enum.Enum):",
        "    AUTO = 'auto'",
        "    TRITON = 'triton'",
        "    FLASHINFER_CUTLASS = 'flashinfer_cutlass'",
        mark="enum",
    )
    return src


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


# Unbroken runs as real messages and comments have them (a formatted field, a banner rule):
# planted with `long_words` to check that pages wrap them on a phone.
LONG_TOKEN = "a2a_backend({server_args.moe_a2a_backend})_with_two_batch_overlap_needs_all_to_all"
LONG_RULE = "=" * 90


def build_kb(path: Path, url: str | None = None, long_words: bool = False) -> Path:
    """The knowledge base in SQLite at `path`, or in the database at `url` when given;
    `long_words` plants unbroken runs in a constraint's message and a variable's comment."""
    engine = make_engine(url or f"sqlite:///{path}")
    create_schema(engine)
    with Session(engine) as session:
        for position, name in enumerate(VERSIONS):
            v = position
            version = Version(
                name=name,
                commit=_sha(name),
                date=datetime(2024 + v, 3, 1, tzinfo=UTC),
                sort_key=name,
                position=position,
                era=1 if v == 0 else 2,
                extractor_version=1,
                web_url=WEB_URL,
                ingested_at=datetime(2026, 1, 1, tzinfo=UTC),
            )
            session.add(version)
            session.flush()
            vid = version.id
            assert vid is not None
            specs = flag_specs(v)
            args, runner, enums = server_args(v, specs), runner_file(v), enum_file()
            for file_path, src in ((ARGS, args), (RUNNER, runner), (ENUMS, enums)):
                text = src.text()
                sha = _sha(text)
                if session.get(Blob, sha) is None:
                    session.add(Blob(sha=sha, text=pack_text(text)))
                session.add(VersionFile(version_id=vid, path=file_path, sha=sha))
            # The runner file stands in for a model file (the models pages read this table).
            session.add(
                ModelFile(
                    version_id=vid,
                    name="runner",
                    path=RUNNER,
                    architectures=dumps(["RunnerForCausalLM"]),
                )
            )
            for spec in specs:
                start, end = args.marks[spec["name"]]
                session.add(
                    Flag(
                        version_id=vid,
                        name=spec["name"],
                        dest=spec["name"].lstrip("-").replace("-", "_"),
                        aliases=dumps(spec.get("aliases", [])),
                        type=spec.get("type"),
                        default=None if spec.get("default_expr") else dumps(spec.get("default")),
                        default_expr=spec.get("default_expr"),
                        choices=dumps(spec["choices"]) if spec.get("choices") else None,
                        choices_const=spec.get("choices_const"),
                        help=spec["help"],
                        action=spec.get("action"),
                        deprecated=bool(spec.get("deprecated")),
                        deprecated_message=spec.get("deprecated_message"),
                        replacement=spec.get("replacement"),
                        section=spec.get("section"),
                        path=ARGS,
                        line=start,
                        end_line=end,
                    )
                )
            # One environment variable read on the first line of server_args.py.
            session.add(
                EnvVar(
                    version_id=vid,
                    name="SGLANG_FAKE_SWITCH",
                    type="bool",
                    default=dumps("false"),
                    reads=1,
                    path=ARGS,
                    line=1,
                    end_line=1,
                )
            )
            # A deprecated name SGLang converts (ms -> s) when it copies it over its successor.
            session.add(
                EnvVar(
                    version_id=vid,
                    name="SGLANG_FAKE_SWITCH_MS",
                    replacement="SGLANG_FAKE_SWITCH",
                    conversion=dumps(
                        {"expr": "str(float(v) / 1000.0)", "cast": "float", "op": "/", "by": 1e3}
                    ),
                    comment=f"{LONG_RULE} SGLANG_FAKE_SWITCH_MS is deprecated"
                    if long_words
                    else "SGLANG_FAKE_SWITCH_MS is deprecated",
                    path=ARGS,
                    line=1,
                    end_line=1,
                )
            )
            session.add(
                EnvSite(
                    version_id=vid,
                    name="SGLANG_FAKE_SWITCH",
                    how="get_bool_env_var",
                    default=dumps("false"),
                    path=ARGS,
                    line=1,
                    end_line=1,
                    text=args.lines[0],
                )
            )
            tbo, pp, tp = args.marks["tbo"], args.marks["pp"], args.marks["tp"]
            session.add_all(
                [
                    ConstraintSite(
                        version_id=vid,
                        kind="raise",
                        function="ServerArgs.__post_init__",
                        condition=(
                            "self.enable_two_batch_overlap and self.moe_a2a_backend == 'none'"
                        ),
                        message="two-batch overlap needs an all-to-all backend"
                        + (f": {LONG_TOKEN}" if long_words else ""),
                        flags=dumps(["--enable-two-batch-overlap", "--moe-a2a-backend"]),
                        key="tbo",
                        path=ARGS,
                        line=tbo[1],
                        end_line=tbo[1],
                    ),
                    ConstraintSite(
                        version_id=vid,
                        kind="override",
                        function="ServerArgs.__post_init__",
                        condition="self.pp_size > 1",
                        flags=dumps(["--pp-size"]),
                        affects=dumps(["--disable-overlap-schedule"]),
                        writes=dumps({"disable_overlap_schedule": "True"}),
                        key="pp",
                        path=ARGS,
                        line=pp[1],
                        end_line=pp[1],
                    ),
                    ConstraintSite(
                        version_id=vid,
                        kind="assert",
                        function="ServerArgs.__post_init__",
                        condition="self.tp_size >= 1",
                        message="tp size must be positive",
                        flags=dumps(["--tp-size"]),
                        key="tp",
                        path=ARGS,
                        line=tp[0],
                        end_line=tp[1],
                    ),
                ]
            )
            use_backend, use_pp = runner.marks["use-backend"], runner.marks["use-pp"]
            session.add_all(
                [
                    UsageSite(
                        version_id=vid,
                        dest="moe_runner_backend",
                        path=RUNNER,
                        line=use_backend[0],
                        text=runner.lines[use_backend[0] - 1],
                    ),
                    UsageSite(
                        version_id=vid,
                        dest="pp_size",
                        path=RUNNER,
                        line=use_pp[0],
                        text=runner.lines[use_pp[0] - 1],
                    ),
                    UsageSite(
                        version_id=vid,
                        dest="pp_size",
                        path=ARGS,
                        line=pp[0],
                        text=args.lines[pp[0] - 1],
                    ),
                ]
            )
            for value in ("triton", "flashinfer_cutlass"):
                line = runner.marks["cutlass" if value != "triton" else "triton"][0]
                session.add(
                    ChoiceSite(
                        version_id=vid,
                        value=value,
                        flag="--moe-runner-backend",
                        how="compare",
                        path=RUNNER,
                        line=line,
                        text=runner.lines[line - 1],
                    )
                )
            line = runner.marks["auto"][0]
            candidates = ["--moe-runner-backend"] + (["--fp4-gemm-backend"] if v >= 2 else [])
            session.add(
                ChoiceSite(
                    version_id=vid,
                    value="auto",
                    flag=None,
                    candidates=dumps(candidates),
                    how="compare",
                    path=RUNNER,
                    line=line,
                    text=runner.lines[line - 1],
                )
            )
            start, end = enums.marks["enum"]
            session.add(
                Enum(
                    version_id=vid,
                    name="MoeRunnerBackend",
                    path=ENUMS,
                    line=start,
                    end_line=end,
                    members=dumps(
                        [
                            {"name": "AUTO", "value": "auto", "line": start + 1},
                            {"name": "TRITON", "value": "triton", "line": start + 2},
                            {
                                "name": "FLASHINFER_CUTLASS",
                                "value": "flashinfer_cutlass",
                                "line": start + 3,
                            },
                        ]
                    ),
                    flags=dumps(["--moe-runner-backend"]),
                )
            )
        session.commit()
    rebuild_relations(engine)
    engine.dispose()
    return path


def dashboard_client(backend: str, tmp: Path, name: str) -> Any:
    """A TestClient (no redirects followed) of the app over this knowledge base, in SQLite
    under `tmp`, or for backend "postgres" in a fresh database named after `name`."""
    from fastapi.testclient import TestClient

    from app.main import create_app
    from tests.pg import fresh_database, index_at

    if backend == "postgres":
        url = fresh_database(name)
        build_kb(tmp / "unused.db", url)
        with index_at(tmp / "index"):
            return TestClient(create_app(url), follow_redirects=False)
    return TestClient(create_app(f"sqlite:///{build_kb(tmp / 'kb.db')}"), follow_redirects=False)
