"""Flag facts exactly as argparse sees them (issue 9), one test per class, in three eras.

The last test is differential: it runs the fixture's own add_cli_args (our synthetic code,
never SGLang's) in a subprocess to get argparse's actions and compares every extracted row
with them: option strings, dest, nargs, whether a value is taken, const, default, choices.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import tarfile
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest

from kb.search import SearchIndex
from tests.conftest import ingest_into
from tests.flag_facts_repo import build_flag_facts_repo

ERAS = ["v1.0.0", "v2.0.0", "v3.0.0"]


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_flag_facts_repo(tmp_path_factory.mktemp("facts-repo"))


@pytest.fixture(scope="module")
def db(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("facts-kb") / "kb.db"
    ingest_into(repo, path, tags="*", jobs=1)
    return path


def flag(db: Path, version: str, name: str) -> dict[str, Any]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        row = conn.execute(
            "select f.* from flag f join version v on v.id = f.version_id "
            "where v.name = ? and f.name = ?",
            (version, name),
        ).fetchone()
    finally:
        conn.close()
    assert row is not None, f"{name} missing at {version}"
    out = dict(row)
    for key in ("default", "choices", "const", "aliases"):
        out[key] = json.loads(out[key]) if out[key] is not None else None
    return out


def warnings(db: Path, version: str) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        (report,) = conn.execute("select report from version where name = ?", (version,)).fetchone()
    finally:
        conn.close()
    return [w["what"] for w in json.loads(report)["warnings"]]


# 1. nargs=0 set by a custom Action's __init__ (signature default or kwargs["nargs"] = 0).
@pytest.mark.parametrize("version", ERAS)
def test_class_nargs_zero_from_action_init(db: Path, version: str) -> None:
    old = flag(db, version, "--enable-old-schedule")
    assert (old["nargs"], old["takes_value"]) == ("0", 0)
    removed = flag(db, version, "--removed-option")
    assert (removed["nargs"], removed["takes_value"]) == ("0", 0)


# 2. choices=CONST + [extra], local (era 1) or imported through a star re-export (2, 3).
@pytest.mark.parametrize("version", ERAS)
def test_class_choices_constant_plus_extra(db: Path, version: str) -> None:
    modules = flag(db, version, "--target-modules")
    assert modules["choices"][-1] == "all"
    assert "q_proj" in modules["choices"] and not modules["choices_dynamic"]
    if version != "v1.0.0":
        assert modules["choices"] == ["q_proj", "k_proj", "v_proj", "all"]


# 3. BooleanOptionalAction adds --no-x; the action stays BooleanOptionalAction.
@pytest.mark.parametrize("version", ERAS)
def test_class_boolean_optional_negation(db: Path, version: str) -> None:
    strict = flag(db, version, "--strict-loading")
    assert strict["negation"] == "--no-strict-loading"
    assert strict["action"].endswith("BooleanOptionalAction")
    assert strict["takes_value"] == 0 and strict["default"] is False


# 4. Era 3 Arg(action=..., action_kwargs={...}) is merged into the flag.
def test_class_action_kwargs_merged(db: Path) -> None:
    paths = flag(db, "v3.0.0", "--adapter-paths")
    assert (paths["action"], paths["nargs"], paths["type"]) == ("PathListAction", "*", "str")
    assert paths["takes_value"] == 1
    assert paths["action_path"] == "python/sglang/srt/arg_groups/argparse_actions.py"


# 5. Era 3 Arg(choices=...) wins over the annotation's Literal (as arg_utils does).
def test_class_arg_choices_override_literal(db: Path) -> None:
    graph = flag(db, "v3.0.0", "--graph-backend")
    assert graph["choices"] == ["full", "breakable", "disabled"]
    assert graph["type"] == "str" and not graph["choices_dynamic"]


# 6. Store-true style custom actions: no value, default False, const True.
@pytest.mark.parametrize("version", ERAS)
def test_class_store_true_custom_action(db: Path, version: str) -> None:
    old = flag(db, version, "--old-store-true")
    assert (old["takes_value"], old["nargs"], old["default"], old["const"]) == (0, "0", False, True)
    assert old["deprecated_kind"] == "warns"


# 7. Alias-store actions take a value (argparse's default nargs of a custom Action).
@pytest.mark.parametrize("version", ERAS)
def test_class_alias_store_takes_value(db: Path, version: str) -> None:
    alias = flag(db, version, "--old-window")
    assert alias["takes_value"] == 1 and alias["nargs"] is None
    assert alias["dest"] == alias["argparse_dest"] == "window"
    assert alias["deprecated_kind"] == "warns"


# 8. Actions that raise: the server refuses the flag; the message and where it is raised.
@pytest.mark.parametrize("version", ERAS)
def test_class_action_raises(db: Path, version: str) -> None:
    removed = flag(db, version, "--removed-option")
    assert removed["deprecated_kind"] == "raises"
    assert removed["action_error"] == "This option was removed; drop it from the command."
    assert removed["action_path"] and removed["action_line"]
    old = flag(db, version, "--enable-old-schedule")
    if version == "v1.0.0":  # `raise ValueError(self.help)`: the message is the help text
        assert old["deprecated_kind"] == "raises"
        assert old["action_error"] == "'--enable-old-schedule' is deprecated. Please drop it."
        assert old["action_path"] == "python/sglang/srt/server_args.py"
    else:
        assert old["deprecated_kind"] == "warns" and old["action_error"] is None


# 9. Constant defaults are folded; the expression stays beside the value.
@pytest.mark.parametrize("version", ERAS)
def test_class_folded_defaults(db: Path, version: str) -> None:
    capacity = flag(db, version, "--ngram-capacity")
    assert (capacity["default"], capacity["default_expr"]) == (10_000_000, "10 * 1000 * 1000")
    queued = flag(db, version, "--max-queued")
    assert (queued["default"], queued["default_expr"]) == (2**63 - 1, "sys.maxsize")
    policy = flag(db, version, "--eviction-policy")
    assert (policy["default"], policy["default_expr"]) == ("lru", "DEFAULT_EVICTION_POLICY")
    if version == "v2.0.0":
        backend = flag(db, version, "--transfer-backend")
        assert backend["default"] == "zmq"


# 10. argparse's dest and the ServerArgs field the value lands in.
@pytest.mark.parametrize("version", ERAS)
def test_class_argparse_dest(db: Path, version: str) -> None:
    tp = flag(db, version, "--tensor-parallel-size")
    assert tp["dest"] == "tp_size"
    # from_cli_args copies tensor_parallel_size (eras 1, 2); arg_utils anchors dest (era 3).
    assert tp["argparse_dest"] == ("tp_size" if version == "v3.0.0" else "tensor_parallel_size")


def test_class_search_by_argparse_dest(db: Path) -> None:
    url = f"sqlite:///{db}"
    index = SearchIndex(Path(f"{db}.search"), url)
    dp = flag(db, "v1.0.0", "--dp")
    assert (dp["dest"], dp["argparse_dest"]) == ("dp_size", "data_parallel_size")
    for query in ("data_parallel_size", "dp_size"):
        hit = index.search(query, version="v1.0.0")["results"][0]
        assert (hit["name"], hit["match"]) == ("--dp", "exact"), query


# 11. "(Deprecated)" in the help of a plain store_true: a soft deprecation.
@pytest.mark.parametrize("version", ERAS)
def test_class_soft_deprecation(db: Path, version: str) -> None:
    legacy = flag(db, version, "--use-legacy-kernel")
    assert legacy["deprecated"] == 1 and legacy["deprecated_kind"] == "soft"
    assert legacy["action_error"] is None and legacy["takes_value"] == 0


# 13. Custom type functions are recorded by name.
@pytest.mark.parametrize("version", ERAS)
def test_class_type_function(db: Path, version: str) -> None:
    assert flag(db, version, "--max-prefill")["type"] == "human_readable_int"


def test_class_literal_led_by_none_converts_as_str(db: Path) -> None:
    """arg_utils takes the type of a Literal's first value, and what is not str/int/float
    (None's NoneType, a bool) converts as str."""
    assert flag(db, "v3.0.0", "--exchange-backend")["type"] == "str"


# 14. Choices from comprehensions over an enum (local or imported) and list(Enum).
@pytest.mark.parametrize("version", ["v2.0.0", "v3.0.0"])
def test_class_choices_from_enum_comprehension(db: Path, version: str) -> None:
    mode = flag(db, version, "--hash-mode")
    assert mode["choices"] == ["none", "partial", "all"] and not mode["choices_dynamic"]
    assert not any("--hash-mode" in w for w in warnings(db, version))


def test_class_choices_from_list_of_enum(db: Path) -> None:
    assert flag(db, "v2.0.0", "--color")["choices"] == ["red", "blue"]


def test_every_flag_says_whether_it_takes_a_value(db: Path) -> None:
    conn = sqlite3.connect(db)
    try:
        missing = conn.execute("select count(*) from flag where takes_value is null").fetchone()
    finally:
        conn.close()
    assert missing == (0,)


# --- differential: argparse's own actions against the extracted rows --------------------

DUMP = r"""
import argparse, json, sys
sys.path.insert(0, sys.argv[1])
from sglang.srt.server_args import ServerArgs
parser = argparse.ArgumentParser()
ServerArgs.add_cli_args(parser)
out = []
for a in parser._actions:
    if isinstance(a, argparse._HelpAction):
        continue
    choices = list(a.choices) if a.choices is not None else None
    out.append({
        "options": a.option_strings, "dest": a.dest, "nargs": a.nargs,
        "const": a.const, "default": a.default if a.default != argparse.SUPPRESS else "SUPPRESS",
        "type": getattr(a.type, "__name__", None),
        "choices": [getattr(c, "value", c) for c in choices] if choices is not None else None,
    })
print(json.dumps(out, default=str))
"""


def argparse_view(repo: Path, tag: str, tmp: Path) -> list[dict[str, Any]]:
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", tag], check=True, capture_output=True
    ).stdout
    dest = tmp / tag
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    result = subprocess.run(
        [sys.executable, "-c", DUMP, str(dest / "python")],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(result.stdout)


@pytest.mark.parametrize("version", ERAS)
def test_rows_match_argparse(db: Path, repo: Path, tmp_path: Path, version: str) -> None:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    names = [
        r["name"]
        for r in conn.execute(
            "select f.name from flag f join version v on v.id = f.version_id where v.name = ?",
            (version,),
        )
    ]
    conn.close()
    actions = argparse_view(repo, version, tmp_path)
    assert sorted(a["options"][0] for a in actions) == sorted(names)
    for action in actions:
        row = flag(db, version, action["options"][0])
        spelled = {row["name"], *row["aliases"]} | ({row["negation"]} if row["negation"] else set())
        where = f"{version} {row['name']}"
        assert spelled == set(action["options"]), where
        assert row["argparse_dest"] == action["dest"], where
        assert bool(row["takes_value"]) == (action["nargs"] != 0), where
        if row["takes_value"]:
            assert row["nargs"] == (None if action["nargs"] is None else str(action["nargs"])), (
                where
            )
        assert row["choices"] == action["choices"], where
        if action["type"] in ("str", "int", "float") or row["type"] in ("str", "int", "float"):
            assert row["type"] == action["type"], where
        assert row["default"] == action["default"], where
        if action["const"] is not None and row["action"] not in ("store_true", "store_false"):
            assert row["const"] == action["const"], where


# --- last round's notes ------------------------------------------------------------------


def test_nested_def_in_validator_is_walked_for_raises(db: Path) -> None:
    conn = sqlite3.connect(db)
    try:
        found = conn.execute(
            "select c.function, c.message from constraintsite c join version v "
            "on v.id = c.version_id where v.name = 'v2.0.0' and c.kind = 'raise'"
        ).fetchall()
    finally:
        conn.close()
    assert ("ServerArgs.__post_init__._check_window", "ValueError: window is too large") in found


def test_reads_seen_by_the_site_scan() -> None:
    from ingest.sites import scan

    source = b'''def f(server_args):
    """Mentions server_args.in_docstring only in text."""
    label = "#" + server_args.after_hash_in_string
    x = global_server_args_dict.get("via_get")
    y = global_server_args_dict["via_subscript"]
    z = f"""{server_args.in_fstring}"""
    # server_args.in_comment
'''
    reads = {name for name, _line, _access in scan(source)["reads"]}
    assert reads == {"after_hash_in_string", "via_get", "via_subscript", "in_fstring"}


def test_since_past_newest_and_latest_zero_are_errors() -> None:
    from datetime import UTC, datetime

    from ingest.git_source import Ref
    from ingest.versions import select

    tags = [Ref(f"v0.{i}.0", "0" * 40, datetime(2025, 1, i + 1, tzinfo=UTC)) for i in range(3)]
    with pytest.raises(ValueError, match="past the newest release"):
        select(tags, None, [], "v0.9.0", None)
    for latest in (0, -2):
        with pytest.raises(ValueError, match="--latest must be a positive"):
            select(tags, None, [], None, latest)
    assert [r.label for r in select(tags, None, [], "v0.1.0", 1)] == ["v0.2.0"]


def test_cli_reports_since_error_in_one_line(repo: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "cli", "ingest", "--repo", str(repo), "--tags", "*",
         "--since", "v9.0.0", "--db", str(tmp_path / "x.db")],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "flagatlas ingest: --since v9.0.0 is past the newest release selected (3.0.0)"
    ]
