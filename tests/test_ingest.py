"""Ingest on synthetic repositories shaped like SGLang's three eras of flag code."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ingest.git_source import list_tags, web_url_for
from ingest.versions import order, select
from tests.conftest import ingest_into
from tests.fixture_repos import (
    PWNED_ENV,
    SERVER_ARGS,
    build_many_versions_repo,
    build_three_era_repo,
    commit,
    write,
)
from tests.stalled_ingest import start_stalled_ingest


def rows(db: Path, sql: str, *args: Any) -> list[dict[str, Any]]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(sql, args)]
    finally:
        conn.close()


def flag(db: Path, version: str, name: str) -> dict[str, Any]:
    found = rows(
        db,
        "select f.* from flag f join version v on v.id = f.version_id where v.name = ? "
        "and f.name = ?",
        version,
        name,
    )
    assert found, f"{name} missing at {version}"
    return found[0]


def sites(db: Path, table: str, version: str, where: str = "1", *args: Any) -> list[dict]:
    return rows(
        db,
        f"select s.* from {table} s join version v on v.id = s.version_id "
        f"where v.name = ? and {where}",
        version,
        *args,
    )


def test_versions_eras_and_order(kb_db: Path) -> None:
    versions = rows(kb_db, "select name, era, position from version order by position")
    assert [(v["name"], v["era"]) for v in versions] == [
        ("v0.1.0", 1),
        ("v0.2.0", 2),
        ("v0.3.0", 3),
        ("dev", 3),
    ]


def test_era1_argparse_flags(kb_db: Path) -> None:
    tp = flag(kb_db, "v0.1.0", "--tensor-parallel-size")
    assert json.loads(tp["aliases"]) == ["--tp-size"]
    assert tp["dest"] == "tp_size"  # from_cli_args copies tensor_parallel_size into tp_size
    assert tp["type"] == "int" and json.loads(tp["default"]) == 1
    assert tp["section"] == "Parallelism"
    dtype = flag(kb_db, "v0.1.0", "--dtype")
    assert json.loads(dtype["choices"]) == ["auto", "half", "bfloat16"]
    assert dtype["help"] == "Data type of the weights. 'auto' picks the type from the config."
    assert dtype["section"] == "Model and tokenizer"
    assert json.loads(dtype["default"]) == "auto"  # default=ServerArgs.dtype resolved
    model = flag(kb_db, "v0.1.0", "--model-path")
    assert model["required"] and model["default"] is None
    graph = flag(kb_db, "v0.1.0", "--disable-cuda-graph")
    assert graph["action"] == "store_true" and json.loads(graph["default"]) is False
    assert (graph["path"], graph["line"]) == (SERVER_ARGS, 62)
    assert graph["end_line"] == 66
    # a short phrase right after the previous call is a header; a sentence is not
    assert flag(kb_db, "v0.1.0", "--schedule-policy")["section"] == "Scheduling"
    assert flag(kb_db, "v0.1.0", "--port")["section"] == "Parallelism"


def test_era2_constants_hooks_fstrings_deprecation(kb_db: Path) -> None:
    moe = flag(kb_db, "v0.2.0", "--moe-runner-backend")
    assert moe["choices_const"] == "MOE_RUNNER_BACKEND_CHOICES"
    assert moe["choices_extensible"]  # add_moe_runner_backend_choices() extends it
    assert "flashinfer_cutlass" in json.loads(moe["choices"])
    # an f-string's list that hooks extend is not printed as the module spells it
    assert moe["help"] == (
        "MoE runner backend, one of (computed at run time: MOE_RUNNER_BACKEND_CHOICES)."
    )
    fp4 = flag(kb_db, "v0.2.0", "--fp4-gemm-backend")
    assert fp4["dest"] == "fp4_gemm_runner_backend" and not fp4["choices_extensible"]
    a2a = flag(kb_db, "v0.2.0", "--moe-a2a-backend")
    assert a2a["help"] == "All-to-all backend for expert parallelism."
    lora = flag(kb_db, "v0.2.0", "--lora-target-modules")
    # `TARGET_MODULES + ["all"]`, TARGET_MODULES imported from another module
    assert set(json.loads(lora["choices"])) == {"q_proj", "k_proj", "v_proj", "all"}
    assert lora["nargs"] == "*" and not lora["choices_dynamic"]
    old = flag(kb_db, "v0.2.0", "--enable-old-overlap")
    assert old["deprecated"] and old["replacement"] == "--enable-two-batch-overlap"
    assert old["section"] == "Deprecated arguments"


def test_era3_annotated_fields(kb_db: Path) -> None:
    names = {f["name"] for f in sites(kb_db, "flag", "v0.3.0")}
    assert "--internal-cache" not in names  # no_cli=True
    assert "--plain-field" not in names  # not annotated: not on the CLI
    tp = flag(kb_db, "v0.3.0", "--tp-size")
    assert json.loads(tp["aliases"]) == ["--tp"] and tp["dest"] == "tp_size"
    model = flag(kb_db, "v0.3.0", "--model-path")
    assert json.loads(model["aliases"]) == ["--model"] and model["required"]
    assert model["section"] == "Model and tokenizer"
    mode = flag(kb_db, "v0.3.0", "--load-mode")
    assert json.loads(mode["choices"]) == ["eager", "lazy"]  # Literal[...]
    # declared twice: like the dataclass, the last declaration wins, and the report says so
    assert json.loads(mode["default"]) == "lazy" and mode["help"].endswith("(again).")
    (report,) = rows(kb_db, "select report from version where name = 'v0.3.0'")
    assert any("load_mode" in w["what"] for w in json.loads(report["report"])["warnings"])
    # choices= computed at run time, but the Literal spells the values
    graph = flag(kb_db, "v0.3.0", "--graph-backend")
    assert json.loads(graph["choices"]) == ["full", "disabled"]
    bs = flag(kb_db, "v0.3.0", "--cuda-graph-bs")
    assert bs["nargs"] == "+" and bs["type"] == "int"  # Optional[List[int]]
    overlap = flag(kb_db, "v0.3.0", "--disable-overlap-schedule")
    assert overlap["action"] == "store_true"
    moe = flag(kb_db, "v0.3.0", "--moe-runner-backend")
    assert moe["help"] == "MoE runner backend. Pick 'auto' unless you know better."
    assert moe["section"] == "Kernel backend"
    alias = flag(kb_db, "v0.3.0", "--moe-backend")
    assert alias["deprecated"] and alias["replacement"] == "--moe-runner-backend"
    assert alias["section"] == "Deprecated argument registrations"


def test_constraint_sites(kb_db: Path) -> None:
    raises = sites(kb_db, "constraintsite", "v0.2.0", "kind = 'raise'")
    (tbo,) = [r for r in raises if "two_batch" in r["condition"]]
    assert json.loads(tbo["flags"]) == ["--enable-two-batch-overlap", "--moe-a2a-backend"]
    assert tbo["condition"] == "self.enable_two_batch_overlap and self.moe_a2a_backend == 'none'"
    assert "{self.moe_a2a_backend}" in tbo["message"]
    assert tbo["function"] == "ServerArgs.check_server_args"
    # the raise before it in the same validator is a site of its own, not a guard of this one
    (chunk,) = [r for r in raises if r is not tbo]
    assert chunk["condition"] == "self.chunk_size < 0"
    (pp,) = sites(
        kb_db, "constraintsite", "v0.2.0", "kind = 'override' and function like '%pipeline%'"
    )
    assert json.loads(pp["writes"]) == {"disable_overlap_schedule": "True"}
    assert json.loads(pp["affects"]) == ["--disable-overlap-schedule"]
    nested = sites(kb_db, "constraintsite", "v0.2.0", "writes like '%chunk_size%'")
    assert json.loads(nested[0]["conditions"]) == [
        "self.moe_runner_backend == 'flashinfer_trtllm'",
        "self.tp_size > 1",
        "self.chunk_size > 4096",
    ]
    # an else branch is recorded as the negated condition
    else_site = sites(kb_db, "constraintsite", "v0.1.0", "writes like '%0.9%'")
    assert else_site[0]["condition"] == (
        "self.mem_fraction_static is None and not (self.tp_size >= 4)"
    )
    (check,) = sites(kb_db, "constraintsite", "v0.1.0", "kind = 'assert'")
    assert (
        check["condition"] == "not (self.port > 0)" and check["message"] == "port must be positive"
    )
    warning = sites(kb_db, "constraintsite", "v0.2.0", "kind = 'warning'")
    assert warning[0]["message"].startswith("Pipeline parallelism turns")
    # internal attributes (enable_fast_path is no flag) are not overrides of flags
    assert not sites(kb_db, "constraintsite", "v0.2.0", "writes like '%enable_fast_path%'")


def test_early_return_guards_the_rest_of_the_block(kb_db: Path) -> None:
    (site,) = sites(kb_db, "constraintsite", "v0.3.0", "function like '%speculative_defaults'")
    assert site["condition"] == "not (self.speculative_algorithm is None)"
    assert json.loads(site["flags"]) == ["--speculative-algorithm"]


def test_hook_module_constraints_through_server_args(kb_db: Path) -> None:
    hook = sites(kb_db, "constraintsite", "v0.3.0", "path like '%speculative_hook.py'")
    kinds = sorted(s["kind"] for s in hook)
    assert kinds == ["override", "raise"]
    override = next(s for s in hook if s["kind"] == "override")
    assert json.loads(override["writes"]) == {"speculative_num_steps": "3"}
    assert override["function"] == "handle_speculative"


def test_usage_sites(kb_db: Path) -> None:
    found = {
        (u["dest"], u["path"].rsplit("/", 1)[-1], u["line"])
        for u in sites(kb_db, "usagesite", "v0.1.0", "path not like '%server_args.py'")
    }
    assert ("disable_cuda_graph", "model_runner.py", 7) in found  # self.server_args.x
    assert ("dtype", "model_runner.py", 10) in found  # global_server_args_dict["x"]
    assert ("schedule_policy", "model_runner.py", 12) in found  # server_args.x
    assert not any(dest == "port" for dest, _file, _line in found)  # only in a comment
    write_site = sites(kb_db, "usagesite", "v0.3.0", "access = 'write' and path like '%hook%'")
    assert write_site[0]["text"] == "server_args.speculative_num_steps = 3"


def test_other_programs_server_args_are_not_these_flags(kb_db: Path, three_era_repo: Path) -> None:
    from ingest.git_source import list_files

    for table in ("usagesite", "choicesite"):
        assert not sites(kb_db, table, "v0.2.0", "path like '%multimodal_gen%'")
    assert sites(kb_db, "usagesite", "v0.2.0", "path like '%srt/layers/moe/layer.py'")
    # not even read: the same file under the server's own tree is listed
    listed = list_files(three_era_repo, "v0.2.0")
    assert "python/sglang/srt/layers/moe/layer.py" in listed
    assert not [p for p in listed if "multimodal_gen" in p]


def test_enums_linked_and_choice_sites_attributed(kb_db: Path) -> None:
    enums = {e["name"]: json.loads(e["flags"]) for e in sites(kb_db, "enum", "v0.2.0")}
    assert enums == {
        "MoeRunnerBackend": ["--moe-runner-backend"],
        "Fp4GemmRunnerBackend": ["--fp4-gemm-backend"],
    }
    layer = {
        (s["line"], s["value"], s["flag"], s["how"]): json.loads(s["candidates"])
        for s in sites(kb_db, "choicesite", "v0.2.0", "path like '%moe/layer.py'")
    }
    # get_moe_runner_backend().is_flashinfer_cutlass() belongs to the MoE runner
    assert layer[(6, "flashinfer_cutlass", "--moe-runner-backend", "is_call")] == []
    # backend.is_flashinfer_cutlass() could be either enum: ambiguous, not guessed
    assert layer[(8, "flashinfer_cutlass", None, "is_call")] == [
        "--fp4-gemm-backend",
        "--moe-runner-backend",
    ]
    assert (10, "flashinfer_cudnn", "--fp4-gemm-backend", "enum") in layer
    assert (12, "flashinfer_trtllm", "--moe-runner-backend", "compare") in layer
    contains = sites(kb_db, "choicesite", "v0.1.0", "how = 'contains'")
    assert all(c["line"] == 12 for c in contains)
    assert {(c["value"], c["flag"]) for c in contains} == {
        ("fcfs", "--schedule-policy"),
        ("random", "--schedule-policy"),
    }


def test_cited_blobs_are_stored(kb_db: Path) -> None:
    from sqlalchemy import create_engine

    from kb.schema import blob_text

    files = sites(kb_db, "versionfile", "v0.2.0")
    paths = {f["path"] for f in files}
    assert SERVER_ARGS in paths and "python/sglang/srt/layers/moe/layer.py" in paths
    sha = next(f["sha"] for f in files if f["path"] == SERVER_ARGS)
    with create_engine(f"sqlite:///{kb_db}").connect() as conn:
        text = blob_text(conn, sha)
    assert text is not None and "def check_server_args" in text


def test_every_stored_text_is_gits(kb_db: Path, three_era_repo: Path) -> None:
    # Every blob row, whole or a chain of deltas, decodes to the blob's bytes in git.
    from sqlalchemy import create_engine

    from kb.schema import blob_text

    stored = rows(kb_db, "select sha, base, depth from blob")
    assert any(r["base"] for r in stored)
    with create_engine(f"sqlite:///{kb_db}").connect() as conn:
        for row in stored:
            data = subprocess.run(
                ["git", "-C", str(three_era_repo), "cat-file", "blob", row["sha"]],
                capture_output=True,
                check=True,
            ).stdout
            assert blob_text(conn, row["sha"]) == data.decode("utf-8", "replace")


def test_default_tags_are_releases_only(three_era_repo: Path) -> None:
    tags = list_tags(three_era_repo)
    assert {t.label for t in tags} >= {"gateway-v1.0.0", "sgl-kernel-v0.2.0"}
    assert [r.label for r in select(tags, None, [], None, None)] == ["v0.1.0", "v0.2.0", "v0.3.0"]
    assert [r.label for r in select(tags, None, [], "0.2", None)] == ["v0.2.0", "v0.3.0"]
    assert [r.label for r in select(tags, "v0.*", [], None, 1)] == ["v0.3.0"]
    assert len(select(tags, "*", [], None, None)) == 5


def test_order_merges_labels_by_date() -> None:
    from datetime import UTC, datetime

    def d(month: int) -> datetime:
        return datetime(2025, month, 1, tzinfo=UTC)

    items = [("v1.10.0", d(5)), ("snapshot", d(4)), ("v1.9.0", d(3)), ("v1.10.0rc1", d(4))]
    assert order(items) == ["v1.9.0", "v1.10.0rc1", "snapshot", "v1.10.0"]


def test_web_url() -> None:
    assert web_url_for("https://github.com/foo/sglang.git") == "https://github.com/foo/sglang"
    assert web_url_for("git@github.com:foo/bar.git") == "https://github.com/foo/bar"
    assert web_url_for("/srv/mirror") == "https://github.com/sgl-project/sglang"


def test_nothing_is_executed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "pwned"
    monkeypatch.setenv(PWNED_ENV, str(marker))
    repo = build_three_era_repo(tmp_path / "src")
    summary = ingest_into(repo, tmp_path / "kb.db", tags="nothing", refs=[("dev", "dev")])
    assert [v.version for v in summary.versions] == ["dev"]
    assert summary.versions[0].flags == 11
    assert not marker.exists()
    # The ingested repository is read in place and never modified (no checkout, no writes).
    status = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True
    )
    assert status.stdout == ""


def test_rerun_is_idempotent_and_force_reextracts(tmp_path: Path) -> None:
    repo = build_many_versions_repo(tmp_path, 3)
    db = tmp_path / "kb.db"
    first = ingest_into(repo, db)
    assert [v.version for v in first.versions] == ["v1.0.0", "v1.0.1", "v1.0.2"]
    before = rows(db, "select count(*) n from flag")[0]["n"]
    second = ingest_into(repo, db)
    assert second.versions == [] and second.skipped == ["v1.0.0", "v1.0.1", "v1.0.2"]
    third = ingest_into(repo, db, force=True, tags="v1.0.1")
    assert [v.version for v in third.versions] == ["v1.0.1"]
    assert third.blobs_analyzed == 0  # blob facts come from the cache
    assert rows(db, "select count(*) n from flag")[0]["n"] == before
    assert len(rows(db, "select * from version")) == 3


def test_new_tag_only_ingests_the_new_version(tmp_path: Path) -> None:
    repo = build_many_versions_repo(tmp_path, 2)
    db = tmp_path / "kb.db"
    ingest_into(repo, db)
    write(repo, SERVER_ARGS, (repo / SERVER_ARGS).read_text() + "\n# changed\n")
    commit(repo, "next", "2025-02-01T12:00:00Z", "v1.1.0")
    summary = ingest_into(repo, db)
    assert [v.version for v in summary.versions] == ["v1.1.0"]
    assert summary.blobs_analyzed == 1
    positions = rows(db, "select name from version order by position")
    assert [p["name"] for p in positions] == ["v1.0.0", "v1.0.1", "v1.1.0"]


def _ingest_cmd(repo: Path, db: Path) -> list[str]:
    return [sys.executable, "-m", "cli", "ingest", "--repo", str(repo), "--db", str(db)]


def test_kill_9_mid_version_leaves_no_partial_version(tmp_path: Path) -> None:
    repo = build_many_versions_repo(tmp_path, 4)
    db = tmp_path / "kb.db"
    proc = start_stalled_ingest(repo, db, at="v1.0.2")  # v1.0.2's rows are written
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert _committed(db) == ["v1.0.0", "v1.0.1"]
    orphans = rows(
        db, "select count(*) n from flag where version_id not in (select id from version)"
    )
    assert orphans[0]["n"] == 0
    # and a re-run continues where it stopped
    summary = ingest_into(repo, db)
    assert [v.version for v in summary.versions] == ["v1.0.2", "v1.0.3"]
    counts = {
        r["name"]: r["n"]
        for r in rows(
            db,
            "select v.name, count(*) n from flag f "
            "join version v on v.id = f.version_id group by 1",
        )
    }
    assert counts["v1.0.3"] == counts["v1.0.0"] + 3


def _committed(db: Path) -> list[str]:
    try:
        return [r["name"] for r in rows(db, "select name from version order by position")]
    except sqlite3.OperationalError:
        return []


def test_cli_reports_unreachable_repo(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "ingest",
            "--repo",
            "https://127.0.0.1:9/sglang.git",
            "--db",
            str(tmp_path / "kb.db"),
        ],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent.parent,
        timeout=120,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "SGLANG_REPO" in lines[0] and "cannot reach" in lines[0]


def test_cli_json_summary(tmp_path: Path) -> None:
    repo = build_many_versions_repo(tmp_path, 2)
    result = subprocess.run(
        [*_ingest_cmd(repo, tmp_path / "kb.db"), "--json"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent.parent,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert [v["version"] for v in data["versions"]] == ["v1.0.0", "v1.0.1"]
    assert data["versions"][1]["flags"] == data["versions"][0]["flags"] + 1


def test_url_is_cloned_once_then_fetched(tmp_path: Path) -> None:
    repo = build_many_versions_repo(tmp_path, 1)
    db = tmp_path / "kb.db"
    url = f"file://{repo}"
    from ingest.runner import IngestOptions, run

    def ingest() -> list[str]:
        opts = IngestOptions(
            repo=url,
            db_url=f"sqlite:///{db}",
            web_url="https://github.com/sgl-project/sglang",
            cache_dir=tmp_path / "cache",
        )
        return [v.version for v in run(opts).versions]

    assert ingest() == ["v1.0.0"]
    clones = list((tmp_path / "cache").iterdir())
    assert len(clones) == 1 and (clones[0] / "HEAD").exists()  # a bare clone in the cache
    write(repo, SERVER_ARGS, (repo / SERVER_ARGS).read_text() + "\n# next\n")
    commit(repo, "next", "2025-03-01T12:00:00Z", "v1.0.1")
    assert ingest() == ["v1.0.1"]  # the new tag arrived through a fetch of the cached clone
    assert list((tmp_path / "cache").iterdir()) == clones


def test_git_inherits_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Proxies, HOME and SSH agents reach git: here a url.insteadOf given only through the
    environment maps an unreachable URL onto the fixture, so the clone works only if git
    sees the caller's environment."""
    from ingest.git_source import _git, list_tags, open_repo

    repo = build_many_versions_repo(tmp_path, 1)
    monkeypatch.setenv("GIT_CONFIG_COUNT", "2")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", f"url.file://{repo}.insteadOf")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "https://mirror.invalid/sglang.git")
    monkeypatch.setenv("GIT_CONFIG_KEY_1", "flagatlas.probe")
    monkeypatch.setenv("GIT_CONFIG_VALUE_1", "seen")
    gitdir = open_repo("https://mirror.invalid/sglang.git", tmp_path / "cache")
    assert [ref.label for ref in list_tags(gitdir)] == ["v1.0.0"]
    # the plumbing run without GitPython (ls-tree, cat-file) gets the same environment
    assert _git(gitdir, "config", "--get", "flagatlas.probe").strip() == "seen"


def test_search_index_is_extended_incrementally(tmp_path: Path) -> None:
    from kb.search import SearchIndex

    repo = build_many_versions_repo(tmp_path, 2)
    db = tmp_path / "kb.db"
    assert ingest_into(repo, db).index["incremental"] is False  # first build: from scratch
    first = Path(os.path.realpath(f"{db}.search"))
    before = {p.name: p.read_bytes() for p in first.iterdir()}
    text = (repo / SERVER_ARGS).read_text()
    text += '        parser.add_argument("--brand-new-knob", type=int, help="A new knob.")\n'
    write(repo, SERVER_ARGS, text)
    commit(repo, "next", "2025-02-01T12:00:00Z", "v1.1.0")
    summary = ingest_into(repo, db)
    assert summary.index["incremental"] is True
    assert 1 <= summary.index["added"] < summary.index["docs"]
    index = SearchIndex(Path(f"{db}.search"))
    top = index.search("brand new knob", version="v1.1.0")["results"][0]
    assert top["name"] == "--brand-new-knob"
    # a fact indexed for the old versions now also holds for the new one
    assert index.search("--extra-0", version="v1.1.0")["results"][0]["name"] == "--extra-0"
    assert not index.search("brand new knob", version="v1.0.1")["results"]
    # The previous build, which running servers may still read, is left as it was; its
    # segments are shared with the new build (hard links), not copied.
    second = Path(os.path.realpath(f"{db}.search"))
    assert second != first and {p.name: p.read_bytes() for p in first.iterdir()} == before
    segments = [p for p in first.iterdir() if p.suffix == ".seg"]
    assert segments and all((second / p.name).stat().st_ino == p.stat().st_ino for p in segments)


def _index_contents(link: Path) -> tuple[list[dict[str, Any]], str]:
    """The stored facts by id (their document numbers depend on the order they were met in,
    which the queries never let decide), and facts.json's text."""
    from whoosh import index as windex

    ix = windex.open_dir(os.path.realpath(link))
    with ix.searcher() as searcher:
        docs = [fields["data"] for _n, fields in searcher.reader().iter_docs()]
    facts = Path(os.path.realpath(link), "facts.json").read_text()
    return sorted(docs, key=lambda d: d["fid"]), facts


def test_index_built_as_versions_are_written_equals_one_built_from_scratch(
    tmp_path: Path,
) -> None:
    """Facts are collected version by version during the ingest, yet are those of a build
    from scratch, with the same data."""
    from kb.search_build import build_index

    repo = build_many_versions_repo(tmp_path, 3)
    db = tmp_path / "kb.db"
    assert ingest_into(repo, db).index["incremental"] is False
    build_index(f"sqlite:///{db}", tmp_path / "scratch")
    ingested, scratch = _index_contents(Path(f"{db}.search")), _index_contents(tmp_path / "scratch")
    assert ingested[0] and ingested == scratch


def test_failed_ingest_leaves_the_index_as_it_was(tmp_path: Path) -> None:
    repo = build_many_versions_repo(tmp_path, 3)
    db = tmp_path / "kb.db"
    ingest_into(repo, db, tags="v1.0.0")
    link = Path(f"{db}.search")
    before = os.path.realpath(link)

    def fail(label: str) -> None:
        if label == "v1.0.2":
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        ingest_into(repo, db, before_commit=fail)
    assert os.path.realpath(link) == before  # v1.0.1 is in the database, not yet searchable
    assert [p.name for p in Path(f"{db}.search.d").iterdir()] == [Path(before).name]
    summary = ingest_into(repo, db)  # the next ingest indexes what the failed one wrote
    assert summary.index["incremental"] is True and summary.index["versions"] == 3
    from kb.search import SearchIndex

    assert SearchIndex(link).versions() == ["v1.0.2", "v1.0.1", "v1.0.0"]


def test_forced_reingest_rebuilds_the_index(tmp_path: Path) -> None:
    repo = build_many_versions_repo(tmp_path, 2)
    db = tmp_path / "kb.db"
    ingest_into(repo, db)
    summary = ingest_into(repo, db, force=True, tags="v1.0.0")
    assert summary.index["incremental"] is False and summary.index["versions"] == 2
    build_index_of = _index_contents(Path(f"{db}.search"))
    from kb.search_build import build_index

    build_index(f"sqlite:///{db}", tmp_path / "scratch")
    assert build_index_of == _index_contents(tmp_path / "scratch")


def test_pathological_sources_cost_a_warning_not_the_ingest(tmp_path: Path) -> None:
    repo = build_many_versions_repo(tmp_path, 1)
    deep = "X = " + "+".join(["1"] * 100_000) + "\n"  # too deep for the parser
    write(repo, "python/sglang/srt/arg_groups/deep_hook.py", deep)
    write(repo, "python/sglang/srt/broken.py", "def f(:\n")
    write(repo, "python/sglang/srt/latin1.py", "")
    (repo / "python/sglang/srt/latin1.py").write_bytes(b"# caf\xe9\nx = server_args.chunk_size\n")
    commit(repo, "odd files", "2025-03-01T12:00:00Z", "v1.1.0")
    summary = ingest_into(repo, tmp_path / "kb.db")
    assert [v.version for v in summary.versions] == ["v1.0.0", "v1.1.0"]
    assert summary.versions[1].flags == summary.versions[0].flags
    (report,) = rows(tmp_path / "kb.db", "select report from version where name = 'v1.1.0'")
    warnings = json.loads(report["report"])["warnings"]
    assert any("deep_hook.py" in w["path"] and "not parsed" in w["what"] for w in warnings)
    latin = sites(tmp_path / "kb.db", "usagesite", "v1.1.0", "path like '%latin1.py'")
    assert latin[0]["dest"] == "chunk_size"


def test_worker_processes_give_the_same_knowledge_base(
    three_era_repo: Path, kb_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ingest.runner

    monkeypatch.setattr(ingest.runner, "BATCH", 2)  # many batches, so the pool is used
    db = tmp_path / "parallel.db"
    summary = ingest_into(three_era_repo, db, refs=[("dev", "dev")], jobs=2)
    assert summary.blobs_analyzed > 2 * 2
    query = (
        "select v.name, f.name, f.dest, f.choices, f.help, f.line from flag f "
        "join version v on v.id = f.version_id order by 1, 2"
    )
    assert rows(db, query) == rows(kb_db, query)
    for table in ("constraintsite", "usagesite", "choicesite"):
        count = f"select count(*) n from {table}"
        assert rows(db, count) == rows(kb_db, count)
    # What was packed along each path's chain reads back: every facts row (a row
    # whose chain is broken is dropped by load_facts and analyzed again) ...
    from sqlalchemy import create_engine

    from ingest.store import load_facts
    from kb.schema import blob_text

    with sqlite3.connect(db) as conn:
        keys = [k for (k,) in conn.execute("select key from blobfacts")]
        deltas = conn.execute("select count(*) from blobfacts where base is not null")
        assert deltas.fetchone()[0] > 0  # the chains were used, not only whole rows
        shas = [s for (s,) in conn.execute("select sha from blob")]
    engine = create_engine(f"sqlite:///{db}")
    assert len(load_facts(engine, keys)) == len(keys)
    # ... and every cited text is the blob's bytes in git
    assert len(shas) > 2
    with engine.connect() as conn:
        for sha in shas:
            want = subprocess.run(
                ["git", "-C", str(three_era_repo), "cat-file", "blob", sha],
                capture_output=True, check=True,
            ).stdout.decode("utf-8", "replace")  # fmt: skip
            assert blob_text(conn, sha) == want, sha
    again = ingest_into(three_era_repo, db, refs=[("dev", "dev")], jobs=2, force=True)
    assert again.blobs_analyzed == 0 and again.blobs_cached == summary.blobs_analyzed


def test_a_version_is_reported_complete_only_once_every_worker_gave_its_blobs(
    three_era_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ingest.runner
    from ingest.analyze import facts_key, kind_of
    from ingest.git_source import list_files

    monkeypatch.setattr(ingest.runner, "BATCH", 2)  # many batches in each worker
    first: dict[tuple[str, str, str, None], int] = {}
    for index, ref in enumerate(sorted(list_tags(three_era_repo), key=lambda r: r.date)):
        for path, sha in list_files(three_era_repo, ref.commit).items():
            first.setdefault((sha, kind_of(path), path, None), index)
    items = list(first)  # oldest version first, as the runner sends them
    seen: set[str] = set()
    complete = 0
    for batch, ready in ingest.runner._analyze(three_era_repo, items, 2, first.__getitem__):
        seen.update(a.key for a in batch)
        assert ready >= complete  # never goes back
        complete = ready
        needed = {facts_key(sha, kind) for (sha, kind, _p, _b), i in first.items() if i < ready}
        assert needed <= seen  # every blob of the versions said complete is in
    assert seen == {facts_key(sha, kind) for sha, kind, _p, _b in items}
    assert len(set(first.values())) > 1 and len(items) > 2 * 2
