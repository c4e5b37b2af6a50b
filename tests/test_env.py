"""Environment variables and docs drift: each extraction shape on synthetic text, then the
pages and JSON over a repository ingested from tests/env_fixtures.py."""

from __future__ import annotations

import ast
import json
import re
import sqlite3
import textwrap
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.main import create_app
from ingest.docs import doc_kind, parse_docs, split_row
from ingest.env import scan_env
from ingest.environ_decls import extract_declarations
from kb.docsdrift import _flag_replacement, suggestion
from kb.env import conversion_short, conversion_words
from kb.schema import Flag
from tests.conftest import ingest_into
from tests.env_fixtures import (
    ENV_DOC,
    ENVIRON,
    ENVIRON_PY,
    NEW_FLAGS_DOC,
    NEW_RUNNER,
    NEW_SERVER_ARGS,
    OLD_DOCS,
    OLD_RUNNER,
    OLD_TABLE_FLAGS_DOC,
    build_env_repo,
)


def text(src: str) -> bytes:
    return textwrap.dedent(src).lstrip().encode()


def by_name(sites: list[list[Any]]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for site in sites:
        out.setdefault(site[0], site)
    return out


# --- extraction shapes -----------------------------------------------------------------------


def test_direct_reads_types_defaults_and_writes() -> None:
    sites, lines = scan_env(text(OLD_RUNNER))
    s = by_name(sites)
    # name, line, end_line, access, how, default, cast, function, dests
    assert s["SGL_CHUNK_SIZE"][3:7] == ["read", "environ.get", "512", "int"]
    assert s["SGL_DEBUG_WIDGET"][3:7] == ["read", "get_bool_env_var", "false", "bool"]
    assert s["SGL_WIDGET_WORKERS"][3:7] == ["read", "get_int_env_var", 4, "int"]
    assert s["WIDGET_HOME"][3:6] == ["read", "getenv", "/tmp"]
    assert "SGL_IN_A_COMMENT" not in s  # a mention in a comment is not a read
    nccl = [x for x in sites if x[0] == "NCCL_WIDGET"]
    assert [x[3] for x in nccl] == ["check", "write"]
    assert all(x[7] == "_set_envs_and_config" and x[8] == ["enable_widget"] for x in nccl)
    assert s["CUDA_WIDGET_CONNECTIONS"][3] == "write" and s["CUDA_WIDGET_CONNECTIONS"][8] == []
    assert lines[str(s["SGL_CHUNK_SIZE"][1])].startswith("CHUNK = int(")


def test_envs_reads_writes_and_flag_conditions() -> None:
    sites, _ = scan_env(text(NEW_SERVER_ARGS), flags_file=True)
    s = by_name(sites)
    compile_ = s["SGLANG_WIDGET_COMPILE"]
    assert compile_[3] == "write" and compile_[2] == compile_[1] + 2  # a 3-line statement
    assert compile_[7] == "_handle_environment_variables" and compile_[8] == ["enable_widget"]
    assert s["SGLANG_WIDGET_CHECK"][3:5] == ["read", "envs.get"]
    assert s["SGLANG_WIDGET_CHECK"][8] == ["tp_size"]  # read under `if self.tp_size > 1`
    assert s["SGLANG_WIDGET_LEVEL"][3:5] == ["write", "envs.set"]
    assert s["SGLANG_WIDGET_LEVEL"][8] == ["tp_size"]
    # Outside server_args.py, `self.x` is some other object's attribute, not a flag.
    assert by_name(scan_env(text(NEW_SERVER_ARGS))[0])["SGLANG_WIDGET_COMPILE"][8] == []


def test_envs_value_and_bare_strings() -> None:
    s = by_name(scan_env(text(NEW_RUNNER))[0])
    assert s["SGLANG_CHUNK_SIZE"][4] == "envs.get"
    assert s["SGLANG_WIDGET_RATIO"][4] == "envs.value"
    assert s["SGLANG_WIDGET_FAST"][4] == "literal"  # _lazy_bool("SGLANG_WIDGET_FAST", False)


def test_declarations_fold_defaults_and_deprecated_names() -> None:
    src = textwrap.dedent(ENVIRON_PY).lstrip()
    decl = extract_declarations(ast.parse(src), src, ENVIRON)
    v = {d["name"]: d for d in decl["vars"]}
    assert len(v) == 15
    assert (v["SGLANG_WIDGET_COMPILE"]["type"], v["SGLANG_WIDGET_COMPILE"]["default"]) == (
        "bool",
        False,
    )
    assert v["SGLANG_WIDGET_LEVEL"]["default"] == 0  # Level.OFF, a constant of the module
    assert v["SGLANG_WIDGET_WORKSPACE"]["default"] == 64 * 1024 * 1024
    assert v["SGLANG_WIDGET_RATIO"]["type"] == "float"
    assert v["SGLANG_WIDGET_DIR"]["default"] is None
    assert v["SGLANG_WIDGET_DIR"]["default_expr"] == "os.path.expanduser('~/.cache/widget')"
    assert v["SGLANG_WIDGET_DIR"]["fallback"] is None
    assert v["SGLANG_WIDGET_CACHE"]["fallback"] == {
        "env": "XDG_WIDGET_HOME", "default": "/var/widget", "reads": True
    }  # fmt: skip
    assert (v["SGLANG_WIDGET_TAGS"]["type"], v["SGLANG_WIDGET_TAGS"]["default"]) == ("tuple", [])
    fuse = v["SGLANG_WIDGET_FUSE"]
    assert (fuse["type"], fuse["default"], fuse["deprecated_names"]) == (
        "bool",
        True,
        ["SGLANG_GADGET_FUSE"],
    )
    assert fuse["comment"] == "Reads the old name when the new one is unset."
    assert v["SGLANG_CHUNK_SIZE"]["comment"] == "tokens per chunk"
    assert v["SGLANG_WIDGET_COMPILE"]["section"] == "Widgets"
    assert (
        src.split("\n")[v["SGLANG_CHUNK_SIZE"]["line"] - 1].strip().startswith("SGLANG_CHUNK_SIZE")
    )
    assert [(a["from"], a["to"]) for a in decl["prefix_aliases"]] == [("SGL_", "SGLANG_")]


def test_deprecations_declared_by_helper_calls() -> None:
    src = textwrap.dedent(ENVIRON_PY).lstrip()
    lines = src.split("\n")
    found = extract_declarations(ast.parse(src), src, ENVIRON)["deprecations"]
    got = {d["name"]: (d["replacement"], d["note"]) for d in found}
    assert got == {
        "SGLANG_WIDGET_LOG": (
            "SGLANG_LOG_WIDGET",
            "SGLANG_WIDGET_LOG is deprecated, set SGLANG_LOG_WIDGET instead",
        ),
        # One argument: the branch for `new_name is None`, no replacement.
        "SGLANG_WIDGET_LEGACY": (None, "SGLANG_WIDGET_LEGACY is deprecated and ignored now."),
        # A loop over a dict literal; the warning says the unit changed.
        "SGLANG_WIDGET_WAIT_MS": (
            "SGLANG_WIDGET_WAIT",
            "SGLANG_WIDGET_WAIT_MS (in ms) is deprecated, SGLANG_WIDGET_WAIT is in seconds",
        ),
        # Deprecated in favour of a flag its warning names.
        "SGLANG_WIDGET_TURBO": (
            "--widget-mode",
            "SGLANG_WIDGET_TURBO is deprecated: Pass '--widget-mode' instead.",
        ),
        "SGLANG_WIDGET_GIZMO": (
            "--widget-gizmo",
            "SGLANG_WIDGET_GIZMO is deprecated: Pass '--widget-gizmo' instead.",
        ),
        # The value the warning names stays with the flag.
        "SGLANG_WIDGET_SAFE": (
            "--widget-mode=safe",
            "SGLANG_WIDGET_SAFE is deprecated: Pass '--widget-mode=safe' instead.",
        ),
        "SGLANG_WIDGET_POLL_S": (
            "SGLANG_WIDGET_POLL_MS",
            "SGLANG_WIDGET_POLL_S (in s) is deprecated, SGLANG_WIDGET_POLL_MS is in ms",
        ),
        "SGLANG_WIDGET_GRACE_MS": (
            "SGLANG_WIDGET_GRACE",
            "SGLANG_WIDGET_GRACE_MS (in ms) is deprecated, SGLANG_WIDGET_GRACE is in seconds",
        ),
        "SGLANG_WIDGET_IDLE_S": (
            "SGLANG_WIDGET_IDLE_MIN",
            "SGLANG_WIDGET_IDLE_S (in s) is deprecated, SGLANG_WIDGET_IDLE_MIN is in minutes",
        ),
    }  # (the call with a name read from os.environ is not resolvable: skipped)
    # How the new name is given the old value: as it is (None), a cast then a factor, or a
    # shape not worked out (its text only).
    conversion = {d["name"]: d["conversion"] for d in found}
    assert conversion["SGLANG_WIDGET_LOG"] is None
    assert conversion["SGLANG_WIDGET_SAFE"] is None
    assert conversion["SGLANG_WIDGET_WAIT_MS"] == {
        "expr": "str(float(os.environ[old_name]) / 1000)", "cast": "float", "op": "/", "by": 1000
    }  # fmt: skip
    assert conversion["SGLANG_WIDGET_POLL_S"] == {  # through a local, the factor first
        "expr": "str(1000 * int(s_val))", "cast": "int", "op": "*", "by": 1000
    }  # fmt: skip
    assert conversion["SGLANG_WIDGET_GRACE_MS"] == {  # the whole new value in a local
        "expr": "str(float(os.environ[old_name]) / 1000)", "cast": "float", "op": "/", "by": 1000
    }  # fmt: skip
    assert conversion["SGLANG_WIDGET_IDLE_S"] == {
        "expr": "str(round(float(os.environ[old_name]) / 60))"
    }
    at = {d["name"]: lines[d["line"] - 1].strip() for d in found}
    assert at["SGLANG_WIDGET_LOG"].startswith('_note_renamed("SGLANG_WIDGET_LOG"')
    assert at["SGLANG_WIDGET_WAIT_MS"].startswith('"SGLANG_WIDGET_WAIT_MS":')
    assert at["SGLANG_WIDGET_TURBO"].startswith('_note_now_a_flag("SGLANG_WIDGET_TURBO"')


def test_deprecation_helper_roles_come_from_its_body() -> None:
    # The new name first: which parameter is which is read from what the body does with it.
    src = textwrap.dedent(
        """
        import os
        import warnings


        def _renamed(new, old):
            if old in os.environ:
                warnings.warn(f"{old} is deprecated; {new} replaces it")
                os.environ[new] = os.environ[old]


        def _copy(src, dst):  # copies without a deprecation warning: not a helper
            if src in os.environ:
                os.environ[dst] = os.environ[src]


        _renamed("SGLANG_NEW_NAME", "SGLANG_OLD_NAME")
        _renamed(new="SGLANG_KW_NEW", old="SGLANG_KW_OLD")
        _renamed("SGLANG_X_NEW", "SGLANG_" + "X_OLD")
        _copy("SGLANG_FROM", "SGLANG_TO")
        """
    )
    found = extract_declarations(ast.parse(src), src, ENVIRON)["deprecations"]
    assert [(d["name"], d["replacement"]) for d in found] == [
        ("SGLANG_OLD_NAME", "SGLANG_NEW_NAME"),
        ("SGLANG_KW_OLD", "SGLANG_KW_NEW"),
    ]


def test_names_in_messages_are_not_variables() -> None:
    src = text(
        """
        def check(x):
            raise TypeError("Call `envs.SOME_SETTING.get()`, not `envs.SOME_SETTING`")

        print(f"level {envs.SGLANG_WIDGET_LEVEL.get()}")
        say('see envs.SGLANG_IN_TEXT'); envs.SGLANG_AFTER_TEXT.set(1)
        """
    )
    s = by_name(scan_env(src)[0])
    assert "SOME_SETTING" not in s and "SGLANG_IN_TEXT" not in s
    assert s["SGLANG_WIDGET_LEVEL"][4] == "envs.get"  # an f-string's field is code
    assert s["SGLANG_AFTER_TEXT"][3:5] == ["write", "envs.set"]
    assert "SOME_SETTING" not in by_name(scan_env(text(ENVIRON_PY))[0])


def test_docstrings_dict_keys_and_split_calls() -> None:
    src = text(
        """
        class Fallback:
            \"\"\"Reads the old name, as in

                SGLANG_NEW_FUSE = EnvBoolWithAlias(True, deprecated_name="SGLANG_OLD_FUSE")
                os.environ.get("SGLANG_DOC_ONLY", "1")
            \"\"\"

        REPORT = f\"\"\"fuse: {os.environ.get("SGLANG_IN_FSTRING")}\"\"\"
        KERNEL = \"\"\"int v = atoi(getenv("SGLANG_IN_C")); // "SGLANG_C_TEXT" \"\"\"
        env = {**os.environ, "SGLANG_CHILD_A": "1",
               "SGLANG_CHILD_B" : "24"}
        os.environ.update({"SGLANG_CHILD_C": "0"})
        POOL_ENV: dict[str, str] = {
            "SGLANG_CHILD_D": "1",
        }
        MODE = {"mode": "SGLANG_AS_VALUE"}
        self.fused = get_bool_env_var(
            "SGLANG_SPLIT", "true"
        )
        X = os.environ.get(
            "SGLANG_SPLIT_GET"
        )
        """
    )
    sites, _ = scan_env(src)
    s = by_name(sites)
    # A docstring's text reads nothing; an f-string's field is code.
    assert "SGLANG_OLD_FUSE" not in s and "SGLANG_DOC_ONLY" not in s
    assert s["SGLANG_IN_FSTRING"][3:5] == ["read", "environ.get"]
    # Other triple-quoted text: a call is code run elsewhere (C source), a bare name is not.
    assert s["SGLANG_IN_C"][3:5] == ["read", "getenv"] and "SGLANG_C_TEXT" not in s
    # Keys of a dict literal are values given (to a child process, to os.environ).
    for name in ("SGLANG_CHILD_A", "SGLANG_CHILD_B", "SGLANG_CHILD_C", "SGLANG_CHILD_D"):
        assert s[name][3:5] == ["write", "dict key"], name
    assert s["SGLANG_AS_VALUE"][3:5] == ["read", "literal"]
    # A call over three lines: one read, at the call's first line, spanning the statement.
    split = [x for x in sites if x[0] == "SGLANG_SPLIT"]
    assert [x[1:5] for x in split] == [[17, 19, "read", "get_bool_env_var"]]
    assert split[0][5] == "true"
    assert [x[1:5] for x in sites if x[0] == "SGLANG_SPLIT_GET"] == [
        [20, 22, "read", "environ.get"]
    ]


def test_docs_shapes() -> None:
    bullets = parse_docs(textwrap.dedent(OLD_DOCS), "flags")
    assert [(e["names"], e["form"]) for e in bullets] == [
        (["model_path"], "dest"),
        (["tp_size"], "dest"),
        (["widget_size"], "dest"),
    ]
    # One bullet naming two flags documents both (v0.4.2-v0.4.6: "`port` and `host`: ...").
    pair = parse_docs("* `port` and `host`: Setup the HTTP server.\n* `a_b`, `c`: x\n", "flags")
    assert [(e["names"], e["line"]) for e in pair] == [
        (["port"], 1),
        (["host"], 1),
        (["a_b"], 2),
        (["c"], 2),
    ]
    old = parse_docs(textwrap.dedent(OLD_TABLE_FLAGS_DOC), "flags")
    assert [(e["names"], e["default"], e["choices"]) for e in old] == [
        (["--model-path"], "None", None),
        (["--enable-widget"], "False", None),
    ]
    new = parse_docs(textwrap.dedent(NEW_FLAGS_DOC).lstrip(), "flags")
    assert new[0]["names"] == ["--model-path", "--model"] and new[0]["type"] == "str"
    assert new[2]["choices"] == ["fast", "safe", "turbo"] and new[2]["default"] == "fast"
    assert (
        textwrap.dedent(NEW_FLAGS_DOC)
        .lstrip()
        .split("\n")[new[1]["line"] - 1]
        .startswith("| `--tp-size`")
    )
    env = parse_docs(textwrap.dedent(ENV_DOC), "env")
    assert [e["names"][0] for e in env][:2] == ["SGLANG_WIDGET_COMPILE", "SGL_CHUNK_SIZE"]
    assert env[-1]["description"] == "Ratio | fraction" and env[-1]["default"] == "0.5"
    assert split_row("| `a|b` | c \\| d |") == ["`a|b`", "c | d"]
    assert doc_kind("docs/references/environment_variables.md") == "env"
    assert doc_kind("docs/diffusion/environment_variables.md") is None
    assert doc_kind("docs/backend/server_arguments.md") == "flags"


# --- ingested ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def env_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("env")
    db = root / "kb.db"
    ingest_into(build_env_repo(root), db, jobs=1)
    return db


@pytest.fixture(scope="module")
def client(env_db: Path) -> TestClient:
    return TestClient(create_app(f"sqlite:///{env_db}"), follow_redirects=False)


def get(client: TestClient, url: str, status: int = 200) -> Any:
    r = client.get(url)
    assert r.status_code == status, (url, r.text[:400])
    return r.json()


def test_ingested_rows(env_db: Path) -> None:
    conn = sqlite3.connect(env_db)
    rows = conn.execute(
        "select v.name, e.name, e.declared, e.type, e.replacement, e.flags from envvar e "
        "join version v on v.id = e.version_id"
    ).fetchall()
    at = {(v, n): (d, t, r, f) for v, n, d, t, r, f in rows}
    assert at[("v0.4.0", "SGL_CHUNK_SIZE")] == (0, "int", None, "[]")
    assert at[("v0.4.0", "NCCL_WIDGET")][3] == '["--enable-widget"]'
    assert at[("v0.5.0", "SGL_CHUNK_SIZE")][2] == "SGLANG_CHUNK_SIZE"  # SGL_ -> SGLANG_
    assert at[("v0.5.0", "SGLANG_WIDGET_COMPILE")] == (1, "bool", None, '["--enable-widget"]')
    assert ("v0.5.0", "SGL_WIDGET_FORCE") not in at  # no longer read
    # Deprecated through helper calls: the old name names its replacement (a variable or a
    # flag), with no type or default made up from the call's arguments.
    assert at[("v0.5.0", "SGLANG_WIDGET_LOG")] == (0, None, "SGLANG_LOG_WIDGET", "[]")
    assert at[("v0.5.0", "SGLANG_WIDGET_WAIT_MS")][2] == "SGLANG_WIDGET_WAIT"
    assert at[("v0.5.0", "SGLANG_WIDGET_TURBO")][:3] == (1, "bool", "--widget-mode")
    assert at[("v0.5.0", "SGLANG_WIDGET_GIZMO")][2] is None  # no such flag in the version
    assert at[("v0.5.0", "SGLANG_WIDGET_SAFE")][2] == "--widget-mode=safe"  # a flag and value
    conversion = dict(
        conn.execute(
            "select e.name, e.conversion from envvar e join version v on v.id = e.version_id "
            "where v.name = 'v0.5.0' and e.conversion is not null"
        ).fetchall()
    )
    assert {k: json.loads(v).get("op") for k, v in conversion.items()} == {
        "SGLANG_WIDGET_WAIT_MS": "/", "SGLANG_WIDGET_POLL_S": "*", "SGLANG_WIDGET_IDLE_S": None,
        "SGLANG_WIDGET_GRACE_MS": "/",
    }  # fmt: skip
    assert ("v0.5.0", "SOME_SETTING") not in at  # named in an error message only
    # Read by sgl-kernel's package (not by its benchmarks), cited there.
    assert at[("v0.5.0", "SGLANG_WIDGET_WARMUP_OFF")][:3] == (0, None, None)
    assert ("v0.5.0", "SGLANG_WIDGET_BENCH_MODE") not in at
    assert conn.execute(
        "select e.path, e.line from envsite e join version v on v.id = e.version_id "
        "where v.name = 'v0.5.0' and e.name = 'SGLANG_WIDGET_WARMUP_OFF'"
    ).fetchall() == [("sgl-kernel/python/sgl_kernel/warmup.py", 5)]
    cite = dict(
        conn.execute(
            "select e.name, e.line || ':' || e.reads || ':' || e.comment from envvar e "
            "join version v on v.id = e.version_id where v.name = 'v0.5.0'"
        ).fetchall()
    )
    lines = ENVIRON_PY.lstrip().split("\n")

    def line_of(name: str) -> str:
        return lines[int(cite[name].split(":")[0]) - 1].strip()

    # An alias's old name is cited at the declaration, not at a docstring quoting it.
    assert line_of("SGLANG_GADGET_FUSE").startswith("SGLANG_WIDGET_FUSE = EnvBoolWithAlias(")
    # It is a variable because the declaration reads it, not because a docstring quotes it:
    # no read counted there, and the declaration's type and default.
    assert cite["SGLANG_GADGET_FUSE"].split(":")[1] == "0"
    assert at[("v0.5.0", "SGLANG_GADGET_FUSE")][:3] == (0, "bool", "SGLANG_WIDGET_FUSE")
    assert line_of("SGLANG_WIDGET_LOG").startswith('_note_renamed("SGLANG_WIDGET_LOG"')
    # The helper call is neither a read of the old name nor of the new one.
    assert cite["SGLANG_WIDGET_LOG"].split(":")[1] == "0"
    assert cite["SGLANG_LOG_WIDGET"].split(":")[1] == "0"
    assert cite["SGLANG_WIDGET_WAIT_MS"].endswith(
        "(in ms) is deprecated, SGLANG_WIDGET_WAIT is in seconds"
    )
    cited = {p for (p,) in conn.execute("select path from versionfile where path like 'docs/%'")}
    assert cited == {
        "docs/backend/server_arguments.md",
        "docs/advanced_features/server_arguments.md",
        "docs/references/environment_variables.md",
    }


def test_env_api_and_pages(client: TestClient) -> None:
    listing = get(client, "/api/v/v0.5.0/env")
    assert listing["version"] == "v0.5.0"
    names = [v["name"] for v in listing["env"]]
    assert "SGLANG_WIDGET_FUSE" in names and "WIDGET_HOME" in names
    var = next(v for v in listing["env"] if v["name"] == "SGLANG_WIDGET_FUSE")
    assert {"name", "type", "default", "deprecated_names", "source"} <= set(var)
    assert var["deprecated_names"] == ["SGLANG_GADGET_FUSE"]
    assert var["source"]["path"] == ENVIRON
    # The old name has a row of its own too: a docstring in environ.py quotes it.
    assert [v["name"] for v in get(client, "/api/v/v0.5.0/env?q=gadget")["env"]] == [
        "SGLANG_GADGET_FUSE",
        "SGLANG_WIDGET_FUSE",
    ]
    one = get(client, "/api/v/v0.5.0/env/SGLANG_WIDGET_COMPILE")
    assert one["type"] == "bool" and one["default"] is False and one["flags"] == ["--enable-widget"]
    write = next(r for r in one["reads"] if r["access"] == "write")
    assert write["path"] == "python/sglang/srt/server_args.py" and write["flags"] == [
        "--enable-widget"
    ]
    assert write["text"].startswith('os.environ["SGLANG_WIDGET_COMPILE"]')
    assert one["history"] == [
        {
            "version": "v0.5.0",
            "name": "SGLANG_WIDGET_COMPILE",
            "field": "added",
            "from": None,
            "to": "SGLANG_WIDGET_COMPILE",
        }
    ]
    chunk = get(client, "/api/v/v0.5.0/env/SGLANG_CHUNK_SIZE")["history"]
    assert chunk[0]["version"] == "v0.5.0"
    old = get(client, "/api/v/v0.4.0/env/SGL_CHUNK_SIZE")
    assert old["default"] == "512" and old["declared"] is False
    missing = get(client, "/api/v/v0.5.0/env/SGLANG_WIDGET_COMPIL", 404)
    assert missing["kind"] == "env"
    assert missing["suggestions"][0]["name"] == "SGLANG_WIDGET_COMPILE"
    assert missing["suggestions"][0]["url"] == "/api/v/v0.5.0/env/SGLANG_WIDGET_COMPILE"
    page = client.get("/v/v0.5.0/env/SGLANG_WIDGET_FUSE")
    assert page.status_code == 200 and "SGLANG_GADGET_FUSE" in page.text
    assert "/v/v0.5.0/env" in client.get("/v/v0.5.0/flags").text  # in the navigation
    fragment = client.get("/v/v0.5.0/env?q=ratio", headers={"HX-Request": "true"})
    assert "SGLANG_WIDGET_RATIO" in fragment.text and "<html" not in fragment.text
    assert client.get("/v/v0.5.0/env/NOPE_NOPE").status_code == 404
    renamed = client.get("/v/v0.5.0/env/SGLANG_WIDGET_LOG").text
    assert "Deprecated name." in renamed and 'href="/v/v0.5.0/env/SGLANG_LOG_WIDGET"' in renamed
    assert "<dt>Deprecated at</dt>" in renamed and "First read at" not in renamed
    assert "deprecated name, not declared" in renamed and "read directly" not in renamed
    # The new name lists the old one, as it lists an EnvBoolWithAlias's deprecated names.
    new = client.get("/api/v/v0.5.0/env/SGLANG_LOG_WIDGET").json()
    assert "SGLANG_WIDGET_LOG" in new["deprecated_names"]
    # A name deprecated by the SGL_ prefix rule is still cited at its first read.
    assert "<dt>First read at</dt>" in client.get("/v/v0.5.0/env/SGL_CHUNK_SIZE").text
    to_flag = client.get("/v/v0.5.0/env/SGLANG_WIDGET_TURBO").text
    assert "Deprecated name." in to_flag and 'href="/v/v0.5.0/flags/--widget-mode"' in to_flag
    # A flag and the value to give it: the link goes to the flag, the value is shown.
    to_value = client.get("/v/v0.5.0/env/SGLANG_WIDGET_SAFE").text
    assert 'href="/v/v0.5.0/flags/--widget-mode"><code>--widget-mode=safe</code>' in to_value


def test_conversion_of_a_deprecated_name_in_api_and_page(client: TestClient) -> None:
    # The ms -> s conversion environ.py applies when it copies the old name's value over.
    wait = get(client, "/api/v/v0.5.0/env/SGLANG_WIDGET_WAIT_MS")
    assert wait["conversion"] == {
        "expr": "str(float(os.environ[old_name]) / 1000)", "cast": "float", "op": "/", "by": 1000
    }  # fmt: skip
    listed = {v["name"]: v for v in get(client, "/api/v/v0.5.0/env?q=widget")["env"]}
    assert listed["SGLANG_WIDGET_WAIT_MS"]["conversion"] == wait["conversion"]
    assert listed["SGLANG_WIDGET_IDLE_S"]["conversion"] == {  # not worked out: its text only
        "expr": "str(round(float(os.environ[old_name]) / 60))", "cast": None, "op": None, "by": None
    }  # fmt: skip
    assert listed["SGLANG_WIDGET_LOG"]["conversion"] is None  # copied as it is
    assert listed["SGLANG_WIDGET_WAIT"]["conversion"] is None
    # The old name's page says it in plain words, with an example.
    page = client.get("/v/v0.5.0/env/SGLANG_WIDGET_WAIT_MS").text
    assert "SGLang converts the value: 5000 → 5.0, divided by 1000." in page
    poll = client.get("/v/v0.5.0/env/SGLANG_WIDGET_POLL_S").text
    assert "SGLang converts the value: 5 → 5000, multiplied by 1000." in poll
    idle = client.get("/v/v0.5.0/env/SGLANG_WIDGET_IDLE_S").text
    assert "SGLang converts the value with str(round(float(os.environ[old_name]) / 60))." in idle
    assert "converts" not in client.get("/v/v0.5.0/env/SGLANG_WIDGET_LOG").text


def test_a_default_read_from_another_variable(client: TestClient) -> None:
    listed = {v["name"]: v for v in get(client, "/api/v/v0.5.0/env?q=widget")["env"]}
    url = "/v/v0.5.0/env/"
    # It was "unset": the default is the other variable's value, then its default.
    scratch = listed["WIDGET_SCRATCH"]
    assert scratch["default"] is None
    assert scratch["fallback"] == {
        "name": "WIDGET_TMPDIR", "default": "/tmp", "reads": True, "url": url + "WIDGET_TMPDIR"
    }  # fmt: skip
    assert listed["WIDGET_TMPDIR"]["fallback"] is None  # the inner read: a literal default
    assert listed["WIDGET_TMPDIR"]["default"] == "/tmp"
    # A helper's own default when the inner read gives none (get_int_env_var: 0).
    assert listed["WIDGET_BATCH"]["fallback"]["name"] == "WIDGET_BATCH_OLD"
    assert listed["WIDGET_BATCH"]["fallback"]["default"] == 0
    # Another variable's declared default (not its value): the declaration's.
    host = listed["WIDGET_HOSTNAME"]["fallback"]
    assert host["name"] == "SGLANG_CHUNK_SIZE" and host["default"] == 512
    assert host["reads"] is False
    # A declaration in environ.py whose default reads another variable, which it reads.
    cache = get(client, "/api/v/v0.5.0/env/SGLANG_WIDGET_CACHE")
    assert cache["fallback"]["name"] == "XDG_WIDGET_HOME"
    assert cache["fallback"]["default"] == "/var/widget"
    xdg = get(client, "/api/v/v0.5.0/env/XDG_WIDGET_HOME")
    assert [r["path"] for r in xdg["reads"]] == [ENVIRON]
    assert listed["WIDGET_HOME"]["fallback"] is None
    # The list filtered as one types (an htmx fragment) shows a fallback as the page does.
    fragment = client.get("/v/v0.5.0/env?q=widget", headers={"HX-Request": "true"})
    assert fragment.status_code == 200 and "<html" not in fragment.text
    assert f'falls back to <a href="{url}WIDGET_TMPDIR">' in fragment.text
    # The pages say so and link the other variable.
    page = client.get("/v/v0.5.0/env/WIDGET_SCRATCH").text
    assert (
        'falls back to <a href="/v/v0.5.0/env/WIDGET_TMPDIR"><code>$WIDGET_TMPDIR</code></a>'
        in page
    )
    assert (
        "(default <code>&#34;/tmp&#34;</code>)" in page or '(default <code>"/tmp"</code>)' in page
    )
    listing = client.get("/v/v0.5.0/env?q=widget_scratch").text
    assert 'href="/v/v0.5.0/env/WIDGET_TMPDIR"' in listing
    host_page = client.get("/v/v0.5.0/env/WIDGET_HOSTNAME").text
    assert 'the declared default of <a href="/v/v0.5.0/env/SGLANG_CHUNK_SIZE">' in host_page


def test_conversion_words() -> None:
    conv = {"expr": "e", "cast": "float", "op": "/", "by": 1000.0}
    assert conversion_words(conv) == "SGLang converts the value: 5000 → 5.0, divided by 1000"
    assert conversion_words({**conv, "cast": "int", "op": "//", "by": 60}) == (
        "SGLang converts the value: 300 → 5, divided (rounding down) by 60"
    )
    assert conversion_words({**conv, "by": 0.5, "op": "*"}) == (
        "SGLang converts the value: 5 → 2.5, multiplied by 0.5"
    )
    assert conversion_words(None) is None


def test_diff_covers_env(client: TestClient) -> None:
    d = get(client, "/api/diff/v0.4.0/v0.5.0")
    assert "SGLANG_WIDGET_COMPILE" in d["env_added"]
    assert "SGL_WIDGET_FORCE" in d["env_removed"]
    assert {"name": "WIDGET_HOME", "field": "default", "from": "/tmp", "to": "/var/tmp"} in d[
        "env_changed"
    ]
    assert "Environment variables" in client.get("/diff/v0.4.0...v0.5.0").text


def test_docs_drift(client: TestClient) -> None:
    d = get(client, "/api/v/v0.5.0/docs-drift")
    flags, env = d["flags"], d["env"]
    assert flags["missing_from_docs"] == ["--enable-widget"]
    assert flags["not_in_code"] == ["--widget-size"]
    # `--widget-mode` shares a word: no likeness worth a suggestion in a pull request
    assert flags["details"]["not_in_code"][0]["suggestion"] is None
    differs = {(r["name"], r["field"]): r for r in flags["differs"]}
    assert differs[("--tp-size", "default")]["docs"] == "2"
    assert differs[("--tp-size", "default")]["code"] == 1
    assert differs[("--tp-size", "aliases")]["docs"] == ["--tp"]  # not an option of the parser
    choices = differs[("--widget-mode", "choices")]
    assert choices["not_in_code"] == ["turbo"]
    row = differs[("--tp-size", "default")]
    assert row["docs_source"]["path"] == "docs/advanced_features/server_arguments.md"
    assert row["code_source"]["path"] == "python/sglang/srt/server_args.py"
    missing = flags["details"]["missing_from_docs"][0]
    assert missing["after"] == "--tp-size"  # where its row would go
    assert env["not_in_code"] == ["SGLANG_WIDGET_GONE"]
    fields = {(r["name"], r["field"], r["docs"]) for r in env["differs"]}
    assert ("SGLANG_WIDGET_COMPILE", "default", "true") in fields
    assert ("SGLANG_CHUNK_SIZE", "name", "SGL_CHUNK_SIZE") in fields
    assert ("SGLANG_WIDGET_FUSE", "name", "SGLANG_GADGET_FUSE") in fields
    assert "SGLANG_WIDGET_CHECK" in env["missing_from_docs"]
    # Deprecated names need no docs of their own, whatever replaces them.
    deprecated = {"SGLANG_WIDGET_LOG", "SGLANG_WIDGET_WAIT_MS", "SGLANG_WIDGET_TURBO"}
    assert not (deprecated | {"SGLANG_WIDGET_LEGACY"}) & set(env["missing_from_docs"])
    assert "SGLANG_LOG_WIDGET" in env["missing_from_docs"]
    assert "WIDGET_HOME" not in env["missing_from_docs"]  # not SGLang's own
    old = get(client, "/api/v/v0.4.0/docs-drift")
    assert old["flags"]["not_in_code"] == ["widget_size"]
    assert old["flags"]["missing_from_docs"] == ["--enable-widget", "--widget-mode"]
    assert old["env"]["missing_from_docs"] == [] and old["docs_files"]["env"] == []
    md = client.get("/v/v0.5.0/docs-drift.md")
    assert md.status_code == 200 and md.headers["content-type"].startswith("text/markdown")
    assert "| `--widget-size` | [`docs/advanced_features/server_arguments.md#L" in md.text
    assert client.get("/v/v0.5.0/docs-drift?format=md").text == md.text
    page = client.get("/v/v0.5.0/docs-drift")
    assert page.status_code == 200 and "SGLANG_WIDGET_GONE" in page.text
    source = client.get("/v/v0.5.0/source/docs/references/environment_variables.md")
    assert source.status_code == 200  # docs files are stored, so citations open


def test_docs_drift_suggests_only_what_the_row_means() -> None:
    known = {
        n: n
        for n in [
            "--otlp-traces-endpoint", "--enable-trace", "--moe-runner-backend", "--ep-size",
            "--enable-lora", "--tp-size", "--nsa-prefill-backend", "--nsa-prefill-cp-mode",
            "--dsa-prefill-backend", "--enable-flashinfer-cutlass-moe",
            "--enable-flashinfer-trtllm-moe", "--expert-parallel-size",
        ]
    }  # fmt: skip
    old = {"--nsa-prefill-backend": "--dsa-prefill-backend"}

    def said(name: str, text: str = "") -> str | None:
        return suggestion("flag", name, text, known, old.get)

    # the row names the flag that replaced it; a flag it names otherwise is no replacement
    deprecated = "NOTE: --enable-x-moe is deprecated. Please set `--moe-runner-backend` to 'x'."
    assert said("--enable-x-moe", deprecated) == "--moe-runner-backend"
    assert said("--enable-ep-moe", "Deprecated. Set `--ep-size` like `--tp-size`.") == ("--ep-size")
    assert said("--oltp-traces-endpoint", "Endpoint if --enable-trace is set.") == (
        "--otlp-traces-endpoint"  # a slip of spelling
    )
    # nothing close: nothing, not the best of bad matches
    assert said("--enable-triton-kernel-moe") is None
    assert said("--crash-on-nan") is None
    assert said("--enable-widget-lora") is None
    # words left out: the one name with them, a tie broken by the row's words, else nothing
    assert said("--nsa-prefill", "Choose the NSA backend for prefill.") == "--dsa-prefill-backend"
    old.clear()
    assert said("--nsa-prefill", "Choose the NSA backend for prefill.") == "--nsa-prefill-backend"
    assert said("--nsa-prefill", "Prefill.") is None  # -backend or -cp-mode: a tie
    assert said("--enable-flashinfer-moe", "Flashinfer MoE.") is None
    # a deprecated alias is followed to what replaces it
    old["--nsa-prefill-backend"] = "--dsa-prefill-backend"
    assert said("--nsa-prefill", "Deprecated alias for `--nsa-prefill-backend`.") == (
        "--dsa-prefill-backend"
    )
    env = {"SGLANG_RECV_SKIPPER_WEIGHT_TARGET_VERIFY": 1, "SGLANG_DISABLE_STATIC_WATERFILL": 2}
    assert suggestion("env", "SGLANG_RECV_SKIPPER_WEIGHT_VERIFY", "", env, lambda v: None) == (
        "SGLANG_RECV_SKIPPER_WEIGHT_TARGET_VERIFY"
    )
    assert suggestion("env", "SGLANG_DISABLE_FA4_WARMUP", "", env, lambda v: None) is None


def test_search_finds_variables(client: TestClient) -> None:
    hits = get(client, "/api/search?q=SGLANG_WIDGET_COMPILE&version=v0.5.0")["results"]
    assert (hits[0]["kind"], hits[0]["name"]) == ("env", "SGLANG_WIDGET_COMPILE")
    assert hits[0]["url"] == "/v/v0.5.0/env/SGLANG_WIDGET_COMPILE"
    by_old_name = get(client, "/api/search?q=SGLANG_GADGET_FUSE&version=v0.5.0")["results"]
    # The old name's own row (deprecated, naming its replacement), then the variable.
    assert [h["name"] for h in by_old_name[:2]] == ["SGLANG_GADGET_FUSE", "SGLANG_WIDGET_FUSE"]
    assert "(deprecated, use SGLANG_WIDGET_FUSE)" in by_old_name[0]["snippet"]
    by_words = get(client, "/api/search?q=tokens per chunk&version=v0.5.0")["results"]
    assert by_words[0]["name"] == "SGLANG_CHUNK_SIZE"
    # The page and the header's dropdown group them (an env hit was a 500 there).
    page = client.get("/search?q=SGLANG_WIDGET_COMPILE&version=v0.5.0")
    assert page.status_code == 200, page.text[:300]
    assert "<h2>Environment variables</h2>" in page.text
    assert 'href="/v/v0.5.0/env/SGLANG_WIDGET_COMPILE"' in page.text
    drop = client.get(
        "/search?q=SGLANG_WIDGET&version=v0.5.0",
        headers={"HX-Request": "true", "HX-Target": "search-results"},
    )
    assert drop.status_code == 200 and 'role="listbox"' in drop.text
    assert "/v/v0.5.0/env/SGLANG_WIDGET_COMPILE" in drop.text


# --- explain ----------------------------------------------------------------------------------

LAUNCH = "python -m sglang.launch_server --model-path m"


def explain(client: TestClient, command: str, version: str = "v0.5.0") -> dict[str, Any]:
    r = client.post("/api/explain", json={"version": version, "command": command})
    assert r.status_code == 200, r.text[:400]
    return r.json()


def env_findings(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in result["findings"] if f.get("kind") == "env"]


def test_where_commands_set_variables() -> None:
    from kb.explain.envvars import assignments

    def seen(text: str) -> list[tuple[str, str | None, str]]:
        return [(a.name, a.value, a.how) for a in assignments(text)]

    assert seen(f"A=1 B='x y' {LAUNCH} --tp 2") == [("A", "1", "prefix"), ("B", "x y", "prefix")]
    assert seen(f"export A=1\n{LAUNCH}") == [("A", "1", "export")]
    assert seen(f"env A=1 {LAUNCH}") == [("A", "1", "env")]
    assert seen(f"sudo A=1 {LAUNCH} --x=Y=2") == [("A", "1", "prefix")]
    # env's options: -u removes a variable (set before or inherited), -i drops what came
    # before it; the assignments after the options still count.
    assert seen(f"env -u HOME A=1 {LAUNCH}") == [("A", "1", "env")]
    assert seen(f"A=1 B=2 env --unset=A -uB C=3 {LAUNCH}") == [("C", "3", "env")]
    assert seen(f"A=1 env -u A A=4 {LAUNCH}") == [("A", "4", "env")]
    assert seen(f"A=1 env -i B=2 {LAUNCH}") == [("B", "2", "env")]
    assert seen(f"env -C /srv --null B=2 {LAUNCH}") == [("B", "2", "env")]
    assert seen(f"export A=1 B=2\nunset A\n{LAUNCH}") == [("B", "2", "export")]
    # GNU env: `--` ends the options, short ones combine (`-iu NAME`, `-C/dir`), the first
    # assignment ends them too (`-u` after it would be the command), -S splits a string.
    assert seen(f"env -- A=1 {LAUNCH}") == [("A", "1", "env")]
    assert seen(f"B=2 env -iu HOME A=1 {LAUNCH}") == [("A", "1", "env")]
    assert seen(f"env -C/tmp A=1 {LAUNCH}") == [("A", "1", "env")]
    assert seen(f"env A=1 -u A {LAUNCH}") == [("A", "1", "env")]
    assert seen(f"env -S 'A=1 B=2' {LAUNCH}") == [("A", "1", "env"), ("B", "2", "env")]
    # bash: `unset -v` unsets variables, `unset -f` functions.
    assert seen(f"export A=1; unset -v A; {LAUNCH}") == []
    assert seen(f"export A=1; unset -f A; {LAUNCH}") == [("A", "1", "export")]
    # No command after it and not exported: the shell's own variable, until `export A`.
    assert seen(f"A=1; {LAUNCH}") == [("A", "1", "shell")]
    assert seen(f"A=1; export A; {LAUNCH}") == [("A", "1", "export")]
    assert seen(f"export A=1; A=2; {LAUNCH}") == [("A", "2", "export")]  # still exported
    docker = f"docker run --gpus all -e A=1 --env B=2 --env=C=3 -e HOST_ONLY img {LAUNCH}"
    assert seen(docker) == [
        ("A", "1", "docker -e"),
        ("B", "2", "docker -e"),
        ("C", "3", "docker -e"),
        ("HOST_ONLY", None, "docker -e"),
    ]
    compose = textwrap.dedent(
        """
        services:
          sglang:
            environment:
              - A=1
              - "B=two"
            command: python3 -m sglang.launch_server --model-path m
          other:
            environment:
              C: "3"
              D: four
        """
    )
    assert seen(compose) == [
        ("A", "1", "compose"),
        ("B", "two", "compose"),
        ("C", "3", "compose"),
        ("D", "four", "compose"),
    ]
    k8s = textwrap.dedent(
        """
        containers:
          - name: sglang
            env:
              - name: A
                value: "1"
              - name: SECRET
                valueFrom:
                  secretKeyRef: {name: s, key: k}
              - name: B
                value: two
            args: ["--model-path", "m"]
        """
    )
    assert seen(k8s) == [("A", "1", "kubernetes"), ("SECRET", None, "kubernetes"),
                         ("B", "two", "kubernetes")]  # fmt: skip


def test_explain_checks_variables(client: TestClient) -> None:
    typo = explain(client, f"SGLANG_WIDGET_COMPIL=1 CUDA_VISIBLE_DEVICES=0 {LAUNCH}")
    found = env_findings(typo)
    assert len(found) == 1  # CUDA_VISIBLE_DEVICES is not SGLang's and not close to a name
    assert found[0]["severity"] == "warning" and found[0]["suggestions"] == [
        "SGLANG_WIDGET_COMPILE"
    ]
    assert "did you mean SGLANG_WIDGET_COMPILE" in found[0]["message"]
    assert found[0]["source"]["path"] == ENVIRON
    rows = {r["name"]: r for r in typo["env"]}
    assert rows["SGLANG_WIDGET_COMPIL"]["known"] is False
    # A variable only sgl-kernel's package reads is known, not "silently ignored".
    kernel = explain(client, f"SGLANG_WIDGET_WARMUP_OFF=1 {LAUNCH}")
    assert env_findings(kernel) == []
    assert kernel["env"][0]["source"]["path"] == "sgl-kernel/python/sgl_kernel/warmup.py"
    old = env_findings(explain(client, f"SGLANG_GADGET_FUSE=0 {LAUNCH}"))
    assert "use SGLANG_WIDGET_FUSE" in old[0]["message"] and old[0]["replacement"] == (
        "SGLANG_WIDGET_FUSE"
    )
    renamed = env_findings(explain(client, f"SGLANG_WIDGET_LOG=1 {LAUNCH}"))
    assert [(f["severity"], f["replacement"]) for f in renamed] == [
        ("warning", "SGLANG_LOG_WIDGET")
    ]
    assert (
        "SGLANG_WIDGET_LOG is deprecated at v0.5.0: use SGLANG_LOG_WIDGET"
        in (renamed[0]["message"])
    )
    # Cited where it is deprecated (the helper's call), not at the new name's declaration.
    src = textwrap.dedent(ENVIRON_PY).lstrip().splitlines()
    call = next(i for i, line in enumerate(src, 1) if '_note_renamed("SGLANG_WIDGET_LOG"' in line)
    assert renamed[0]["source"]["line"] == call
    to_flag = env_findings(explain(client, f"SGLANG_WIDGET_TURBO=1 {LAUNCH}"))
    assert [(f["severity"], f["replacement"]) for f in to_flag] == [("warning", "--widget-mode")]
    assert "use --widget-mode" in to_flag[0]["message"]
    # SGLang's warning is quoted: here it says the unit changed.
    ms = env_findings(explain(client, f"SGLANG_WIDGET_WAIT_MS=1500 {LAUNCH}"))
    assert [f["replacement"] for f in ms] == ["SGLANG_WIDGET_WAIT"]
    assert "(in ms) is deprecated, SGLANG_WIDGET_WAIT is in seconds" in ms[0]["message"]
    gone = env_findings(explain(client, f"SGLANG_WIDGET_LEGACY=1 {LAUNCH}"))
    assert [f["severity"] for f in gone] == ["warning"]
    assert gone[0]["message"].startswith("SGLANG_WIDGET_LEGACY is deprecated at v0.5.0")
    prefix = env_findings(explain(client, f"SGL_WIDGET_COMPILE=1 {LAUNCH}"))
    assert prefix[0]["replacement"] == "SGLANG_WIDGET_COMPILE"  # the SGL_ -> SGLANG_ rule
    bad = explain(
        client,
        f"docker run -e SGLANG_WIDGET_LEVEL=high -e SGLANG_WIDGET_COMPILE=maybe img {LAUNCH}",
    )
    messages = " ".join(f["message"] for f in env_findings(bad))
    assert "`high` is not an integer" in messages and "`maybe` is not a boolean" in messages
    # At v0.4.0 SGL_CHUNK_SIZE is only read (`int(os.environ.get(...))`): a guessed type, no
    # warning; a declared type warns (above).
    assert env_findings(explain(client, f"SGL_CHUNK_SIZE=abc {LAUNCH}", "v0.4.0")) == []
    # Both names set: a helper-deprecated name is copied over the new one at import (the
    # old value wins); an alias is read only while the new name is unset (the new wins).
    both = env_findings(explain(client, f"SGLANG_WIDGET_LOG=1 SGLANG_LOG_WIDGET=0 {LAUNCH}"))
    assert any("SGLang uses SGLANG_WIDGET_LOG=1 (it copies" in f["message"] for f in both)
    both = env_findings(explain(client, f"SGLANG_GADGET_FUSE=0 SGLANG_WIDGET_FUSE=1 {LAUNCH}"))
    assert any("SGLang uses SGLANG_WIDGET_FUSE=1 (SGLANG_GADGET_FUSE is read only" in f["message"]
               for f in both)  # fmt: skip
    shell = env_findings(explain(client, f"SGLANG_WIDGET_COMPILE=1; {LAUNCH}"))
    assert [f["severity"] for f in shell] == ["warning"]
    assert "SGLang does not see it" in shell[0]["message"]
    ok = explain(client, f"SGLANG_WIDGET_COMPILE=true SGLANG_WIDGET_RATIO=0.25 {LAUNCH}")
    assert env_findings(ok) == []
    assert {r["name"]: r["parsed"] for r in ok["env"]} == {
        "SGLANG_WIDGET_COMPILE": True,
        "SGLANG_WIDGET_RATIO": 0.25,
    }


def test_a_deprecated_variable_in_another_unit_is_converted(client: TestClient) -> None:
    """SGLang copies SGLANG_WIDGET_WAIT_MS / 1000 to SGLANG_WIDGET_WAIT (seconds): the
    warning, the row and the simulation see the converted value."""
    ms = explain(client, f"SGLANG_WIDGET_WAIT_MS=1500 {LAUNCH}")
    warning = env_findings(ms)[0]["message"]
    assert "it converts the value: SGLANG_WIDGET_WAIT_MS=1500 → SGLANG_WIDGET_WAIT=1.5" in warning
    assert [(r["variable"], r["parsed"]) for r in ms["env"]] == [("SGLANG_WIDGET_WAIT", 1.5)]
    # A site reads SGLANG_WIDGET_WAIT > 60 (seconds): 1500 ms is not over a minute, 120000 is.
    errors = [
        f["message"]
        for wait in (1500, 120000)
        for f in explain(client, f"SGLANG_WIDGET_WAIT_MS={wait} {LAUNCH} --widget-mode fast")[
            "findings"
        ]
        if f["severity"] == "error"
    ]
    assert len(errors) == 1 and "a wait over a minute needs the safe mode" in errors[0]
    # Both names set: the old one is converted and copied over the new one.
    both = env_findings(
        explain(client, f"SGLANG_WIDGET_WAIT_MS=1500 SGLANG_WIDGET_WAIT=9 {LAUNCH}")
    )
    assert any("at import, as SGLANG_WIDGET_WAIT=1.5)" in f["message"] for f in both)
    # int(s) * 1000, through a local; a value the cast refuses stops SGLang at import.
    poll = explain(client, f"SGLANG_WIDGET_POLL_S=2 {LAUNCH}")
    assert "SGLANG_WIDGET_POLL_S=2 → SGLANG_WIDGET_POLL_MS=2000" in env_findings(poll)[0]["message"]
    assert poll["env"][0]["parsed"] == 2000
    bad = env_findings(explain(client, f"SGLANG_WIDGET_POLL_S=1.5 {LAUNCH}"))
    assert [f["severity"] for f in bad] == ["error", "warning"]
    assert "`1.5` is not an integer: SGLang's `str(1000 * int(s_val))` raises" in bad[0]["message"]
    # A conversion not worked out is said, and nothing is guessed for the new name.
    idle = explain(client, f"SGLANG_WIDGET_IDLE_S=90 {LAUNCH}")
    warning = env_findings(idle)[0]["message"]
    assert "converts the value with `str(round(float(os.environ[old_name]) / 60))`" in warning
    assert "→" not in warning
    # ... nor is the raw value checked against the new name's type, nor named as its value.
    raw = env_findings(explain(client, f"SGLANG_WIDGET_IDLE_S=abc {LAUNCH}"))
    assert [f["severity"] for f in raw] == ["warning"] and "abc" not in raw[0]["message"]
    both_idle = env_findings(
        explain(client, f"SGLANG_WIDGET_IDLE_S=90 SGLANG_WIDGET_IDLE_MIN=2 {LAUNCH}")
    )
    assert both_idle and not any("=None" in f["message"] for f in both_idle)
    from kb.explain.envvars import environ_of
    from kb.explain.load import load_facts
    from kb.queries import get_version

    with Session(client.app.state.engine) as session:  # type: ignore[attr-defined]
        facts = load_facts(session, get_version(session, "v0.5.0"))
    seen = environ_of(facts, f"SGLANG_WIDGET_WAIT_MS=1500 SGLANG_WIDGET_IDLE_S=90 {LAUNCH}")
    assert seen["SGLANG_WIDGET_WAIT"] == "1.5" and "SGLANG_WIDGET_IDLE_MIN" not in seen
    # A replacement flag with the value SGLang's warning names.
    safe = env_findings(explain(client, f"SGLANG_WIDGET_SAFE=1 {LAUNCH}"))
    assert [f["replacement"] for f in safe] == ["--widget-mode=safe"]
    assert "use --widget-mode=safe;" in safe[0]["message"]


def test_constraint_sites_read_the_variables(client: TestClient) -> None:
    strict = explain(client, f"SGLANG_WIDGET_STRICT=1 {LAUNCH} --widget-mode fast")
    errors = [f for f in strict["findings"] if f["severity"] == "error"]
    assert errors and "strict widgets need the safe mode" in errors[0]["message"]
    safe = explain(client, f"SGLANG_WIDGET_STRICT=1 {LAUNCH} --widget-mode safe")
    assert not [f for f in safe["findings"] if f["severity"] == "error"]
    unset = explain(client, f"SGLANG_WIDGET_STRICT=0 {LAUNCH} --widget-mode fast")
    assert not [f for f in unset["findings"] if f["severity"] == "error"]


def test_a_variable_whose_default_reads_another_takes_its_value(client: TestClient) -> None:
    """SGLANG_WIDGET_CACHE's default is $XDG_WIDGET_HOME (else "/var/widget"): setting only
    XDG_WIDGET_HOME sets it, for the site evaluator and the simulation alike."""

    def errors(command: str) -> list[str]:
        found = explain(client, f"{command} {LAUNCH} --widget-mode fast")
        return [f["message"] for f in found["findings"] if f["severity"] == "error"]

    shared = errors("XDG_WIDGET_HOME=/srv/widget")
    assert shared and all("a shared widget cache needs the safe mode" in m for m in shared)
    assert errors("XDG_WIDGET_HOME=/home/w") == []
    # Neither set: the simulation takes the fallback's default, and says so.
    unset = explain(client, f"{LAUNCH} --widget-mode fast")
    assert unset["simulated"]
    assert "environment variable SGLANG_WIDGET_CACHE is not set" in json.dumps(unset["assumptions"])
    assert "SGLANG_WIDGET_CACHE" not in json.dumps(unset["findings"])
    # Its own value wins over the other variable's.
    assert errors("SGLANG_WIDGET_CACHE=/home/w XDG_WIDGET_HOME=/srv/widget") == []
    from kb.explain.envvars import environ_of
    from kb.explain.load import load_facts
    from kb.queries import get_version

    with Session(client.app.state.engine) as session:  # type: ignore[attr-defined]
        facts = load_facts(session, get_version(session, "v0.5.0"))
    seen = environ_of(facts, f"XDG_WIDGET_HOME=/srv/widget WIDGET_TMPDIR=/scratch {LAUNCH}")
    assert seen["SGLANG_WIDGET_CACHE"] == "/srv/widget"
    assert seen["WIDGET_SCRATCH"] == "/scratch"
    # Another variable's declared default only: setting that variable changes nothing.
    assert "WIDGET_HOSTNAME" not in environ_of(facts, f"SGLANG_CHUNK_SIZE=64 {LAUNCH}")


def test_upgrade_check_tells_variables_findings_apart(client: TestClient) -> None:
    # Each variable's finding is its own: SGLANG_WIDGET_RATIO, unread at v0.4.0 and declared
    # at v0.5.0, is a finding gone; a name read nowhere persists (both were one key).
    command = f"SGLANG_WIDGET_RATIO=1.5 SGLANG_NOPE_AT_ALL=1 {LAUNCH}"
    r = client.post(
        "/api/explain", json={"version": "v0.4.0", "compare": "v0.5.0", "command": command}
    )
    upgrade = r.json()["compare"]
    gone = [f["env"] for f in upgrade["findings_gone"]]
    assert gone == ["SGLANG_WIDGET_RATIO"]
    assert [f["env"] for f in upgrade["persisting"]] == ["SGLANG_NOPE_AT_ALL"]
    assert upgrade["findings_new"] == []


def test_explain_page_lists_variables(client: TestClient) -> None:
    page = client.get(
        "/explain", params={"version": "v0.5.0", "command": f"SGLANG_WIDGET_COMPIL=1 {LAUNCH}"}
    )
    assert page.status_code == 200
    assert "Environment variables" in page.text and "SGLANG_WIDGET_COMPIL" in page.text
    assert "did you mean SGLANG_WIDGET_COMPILE" in page.text


def test_the_list_page_shows_each_conversion(client: TestClient) -> None:
    """A deprecated name's row says how its value is converted for the replacement."""
    page = client.get("/v/v0.5.0/env?q=widget").text
    rows = {
        m.group(1): m.group(0)
        for m in re.finditer(r"<tr>\s*<td><a [^>]*><code>(\w+)</code>.*?</tr>", page, re.S)
    }
    assert "deprecated → SGLANG_WIDGET_WAIT" in rows["SGLANG_WIDGET_WAIT_MS"]
    assert ", value ÷ 1000</span>" in rows["SGLANG_WIDGET_WAIT_MS"]
    assert (
        'title="SGLang converts the value: 5000 → 5.0, divided by 1000"'
        in rows["SGLANG_WIDGET_WAIT_MS"]
    )
    assert ", value × 1000</span>" in rows["SGLANG_WIDGET_POLL_S"]
    assert ", value converted</span>" in rows["SGLANG_WIDGET_IDLE_S"]  # its text only
    log = rows["SGLANG_WIDGET_LOG"]  # deprecated too, its value copied as it is
    assert "deprecated →" in log and 'class="conversion"' not in log


def test_conversion_short() -> None:
    conv = {"expr": "e", "cast": "float", "op": "/", "by": 1000.0}
    assert conversion_short(conv) == "÷ 1000"
    assert conversion_short({**conv, "op": "//", "by": 60}) == "÷ 60, rounded down"
    assert conversion_short({**conv, "op": "*", "by": 0.5}) == "× 0.5"
    assert conversion_short({"expr": "e", "cast": None, "op": None, "by": None}) == "converted"
    assert conversion_short(None) is None


def test_a_missing_variable_links_the_json_twins_where_it_exists(client: TestClient) -> None:
    body = client.get("/api/v/v0.5.0/env/SGL_WIDGET_FORCE")
    assert body.status_code == 404
    elsewhere = body.json()["elsewhere"]
    assert [e["url"] for e in elsewhere] == [
        f"/api/v/{v}/env/SGL_WIDGET_FORCE" for v in ("v0.4.1", "v0.4.0")
    ]
    for e in elsewhere:
        assert get(client, e["url"])["name"] == "SGL_WIDGET_FORCE"
    page = client.get("/v/v0.5.0/env/SGL_WIDGET_FORCE").text
    assert 'href="/v/v0.4.1/env/SGL_WIDGET_FORCE"' in page


def test_docs_drift_follows_a_deprecated_flag_to_the_one_flag_it_names() -> None:
    def gone(replacement: str) -> Flag:
        return Flag(name="--old", dest="old", deprecated=True, replacement=replacement)

    assert _flag_replacement(gone("--fuse-backend=auto")) == "--fuse-backend"
    assert _flag_replacement(gone("--graph-{decode,prefill}=off")) is None  # two: no one
    assert _flag_replacement(Flag(name="--x", dest="x", replacement="--y")) is None  # live


def test_banner_of_a_variable_gone_in_the_newest_links_its_variables(client: TestClient) -> None:
    gone = [
        e["name"]
        for e in get(client, "/api/v/v0.4.0/env")["env"]
        if client.get(f"/api/v/v0.5.0/env/{e['name']}").status_code == 404
    ]
    assert gone, "the fixture reads a variable in v0.4.0 only"
    html = client.get(f"/v/v0.4.0/env/{gone[0]}").text
    notice = html[html.index('class="notice old-version"') :].split("</div>")[0]
    # the variables of the newest version, not its flags
    assert 'This page does not exist in <code>v0.5.0</code>: <a href="/v/v0.5.0/env">' in notice


def test_a_flag_page_says_which_variables_it_sets(client: TestClient) -> None:
    """--enable-widget decides SGLANG_WIDGET_COMPILE (its write reads the flag): the flag's
    page says so, linking the variable's page and the write."""
    flag = get(client, "/api/v/v0.5.0/flags/--enable-widget")
    sets = {e["name"]: e for e in flag["sets_env"]}
    assert "SGLANG_WIDGET_COMPILE" in sets and "SGLANG_WIDGET_LEVEL" not in sets
    compile_ = sets["SGLANG_WIDGET_COMPILE"]
    assert compile_["url"] == "/v/v0.5.0/env/SGLANG_WIDGET_COMPILE"
    assert compile_["sites"][0]["text"].startswith('os.environ["SGLANG_WIDGET_COMPILE"]')
    html = client.get("/v/v0.5.0/flags/--enable-widget").text
    assert '<p id="sets-env"' in html and 'href="/v/v0.5.0/env/SGLANG_WIDGET_COMPILE"' in html
    # a write under a condition on a flag is set by that flag
    tp = [e["name"] for e in get(client, "/api/v/v0.5.0/flags/--tp-size")["sets_env"]]
    assert "SGLANG_WIDGET_LEVEL" in tp and "SGLANG_WIDGET_COMPILE" not in tp
    old = [e["name"] for e in get(client, "/api/v/v0.4.0/flags/--enable-widget")["sets_env"]]
    assert old == ["NCCL_WIDGET"]
