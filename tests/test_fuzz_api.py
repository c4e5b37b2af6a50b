"""API fuzzing: schemathesis generates requests from the served /api/openapi.json and checks
every answer against it (status documented, body valid for the declared model, JSON content
type, never a 5xx), over the knowledge base ingested from the synthetic three-era repository.

Every check schemathesis has runs on every case (statuses, content types, bodies and headers
as documented, valid input accepted, invalid input refused, ...), on SQLite and, when
FLAGATLAS_TEST_PG_URL names a server, on PostgreSQL. Generated names are mixed with names
that exist in that knowledge base (versions, flags by any spelling, values, stored paths,
launch commands), so most cases reach the 200 bodies rather than only the 404s; the routes
with a query or a body also get invalid input. Bounded: 200 examples per operation and 150
invalid ones, at least 5,000 cases per database; the count and the time land in
test-output/schemathesis-{sqlite,postgresql}.txt.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import CHECKS, load_all_checks

from app.main import create_app
from kb.profile import MAX_CONFIG_TEXT
from tests.pg import BACKENDS, index_at
from tests.test_postgres import ingest_pg

POSITIVE_PER_OPERATION = 220
NEGATIVE_PER_OPERATION = 150
MIN_CASES = 5_000
load_all_checks()
# Every check schemathesis has, not a chosen few: the description must say what the server
# does (statuses, content types, bodies, headers; valid input accepted, invalid refused).
ALL_CHECKS = CHECKS.get_all()
ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "docs" / "openapi.json"
OUTPUT = ROOT / "test-output"


# Profile text whose meaning no schema can say: a model that exists (a Hugging Face id or a
# model directory), a GPU of the catalog (in any spelling) and a config.json (the model's,
# the draft model's) that is a JSON object. Made up, either is a 400 (its
# ErrorBody documented); these parameters get valid values, and tests/test_explain.py
# covers the refusals.
# Only text that the description allows is replaced: invalid input (the negative cases: too
# long, a NUL, not text) stays invalid.
CONFIG = '{"architectures": ["Glm4MoeForCausalLM"]}'


def meaningful(key: str, value: Any) -> Any:
    """`value` of profile field `key`, a model or config.json that exists if it is text the
    description allows."""
    limits = {"model": 500, "gpu": 100, "config": MAX_CONFIG_TEXT, "draft_config": MAX_CONFIG_TEXT}
    limit = limits.get(key)
    if limit is None or not valid_text(value, limit):
        return value
    return {"model": "", "gpu": "h100"}.get(key, CONFIG if value else "")


def known_names(db: Path) -> dict[str, list[str]]:
    """What exists in the knowledge base, for the generators to pick from."""
    con = sqlite3.connect(db)
    try:

        def column(sql: str) -> list[str]:
            return sorted({str(row[0]) for row in con.execute(sql) if row[0]})

        flags = column("select name from flag") + column("select dest from flag")
        return {
            "version": column("select name from version"),
            "flag": flags + [f.lstrip("-") for f in flags[:20]],
            "value": column("select value from choicesite"),
            "path": column("select path from versionfile"),
        }
    finally:
        con.close()


def valid_text(value: Any, limit: int | None) -> bool:
    """Whether `value` is text the description allows (what a hook may replace: an invalid
    value, a negative case's point, must stay)."""
    return isinstance(value, str) and len(value) <= (limit or len(value)) and "\0" not in value


def some(known: list[str], value: Any, limit: int | None = 200) -> st.SearchStrategy[Any]:
    """Mostly a name that exists, sometimes what schemathesis made up (always when that is
    not valid text)."""
    if not known or not valid_text(value, limit):
        return st.just(value)
    return st.one_of(st.sampled_from(known), st.sampled_from(known), st.just(value))


def commands(names: dict[str, list[str]]) -> st.SearchStrategy[str]:
    words = st.lists(
        st.one_of(
            st.sampled_from([n for n in names["flag"] if n.startswith("--")] or ["--x"]),
            st.sampled_from(names["value"] or ["1"]),
            st.sampled_from(["1", "2", "true", "'a b'", "\\", "$HOME", "|", "--"]),
        ),
        max_size=8,
    )
    return words.map(lambda w: "python -m sglang.launch_server " + " ".join(w))


@pytest.fixture(scope="module", params=BACKENDS)
def backend_url(
    request: pytest.FixtureRequest, kb_db: Path, three_era_repo: Path, tmp_path_factory: Any
) -> Iterator[str]:
    """The same three-era knowledge base on SQLite, and on PostgreSQL when there is one."""
    if request.param == "sqlite":
        yield f"sqlite:///{kb_db}"
        return
    index = tmp_path_factory.mktemp("fuzz-pg") / "index"
    url = ingest_pg(three_era_repo, index, refs=[("dev", "dev")])
    with index_at(index):
        yield url


@pytest.fixture(scope="module")
def fuzz_stats(backend_url: str) -> Iterator[dict[str, Any]]:
    backend = backend_url.split(":", 1)[0].split("+", 1)[0]
    stats: dict[str, Any] = {
        "cases": 0,
        "start": time.monotonic(),
        "operations": set(),
        "statuses": Counter(),
        "negative": 0,
    }
    yield stats
    seconds = time.monotonic() - stats["start"]
    statuses = ", ".join(f"{n} x {code}" for code, n in sorted(stats["statuses"].items()))
    OUTPUT.mkdir(exist_ok=True)
    (OUTPUT / f"schemathesis-{backend}.txt").write_text(
        f"schemathesis on {backend}, {len(ALL_CHECKS)} checks: {stats['cases']} cases "
        f"({stats['negative']} with invalid input) over {len(stats['operations'])} "
        f"operations in {seconds:.1f} s ({statuses})\n"
    )
    if len(stats["operations"]) == len(OPERATIONS):  # not when -k picked a few
        assert stats["cases"] >= MIN_CASES, f"only {stats['cases']} cases were generated"


@pytest.fixture(scope="module")
def api_schema(kb_db: Path, backend_url: str) -> Any:
    names = known_names(kb_db)  # the same repository is in both databases
    app = create_app(backend_url)
    schema = schemathesis.openapi.from_asgi("/api/openapi.json", app)

    @schema.hook
    def flatmap_path_parameters(context: Any, path_parameters: dict[str, Any] | None) -> Any:
        if not path_parameters:
            return st.just(path_parameters)
        keys = {"a": "version", "b": "version"}
        parts = {
            key: some(names.get(keys.get(key, key), []), value, None)
            for key, value in path_parameters.items()
        }
        return st.fixed_dictionaries(parts)

    @schema.hook
    def flatmap_query(context: Any, query: dict[str, Any] | None) -> Any:
        query = dict(query or {})
        parts = {key: st.just(value) for key, value in query.items()}
        for key in ("version", "compare"):
            if key in query:
                parts[key] = some(names["version"] + ["all", ""], query[key])
        if "command" in query and valid_text(query["command"], 2_000):
            parts["command"] = st.just(query["command"]) | commands(names)
        for key in ("model", "gpu", "config", "draft_config"):
            if key in query:
                parts[key] = st.just(meaningful(key, query[key]))
        if "q" in query:
            parts["q"] = some(names["flag"], query["q"], None)
        return st.fixed_dictionaries(parts)

    @schema.hook
    def flatmap_body(context: Any, body: Any) -> Any:
        if not isinstance(body, dict) or "command" not in body:
            return st.just(body)
        parts = {key: st.just(value) for key, value in body.items()}
        if isinstance(body.get("profile"), dict):
            parts["profile"] = st.just({k: meaningful(k, v) for k, v in body["profile"].items()})
        if valid_text(body["command"], None):
            parts["command"] = st.just(body["command"]) | commands(names)
        if "version" in body:
            parts["version"] = some(names["version"], body["version"])
        return st.fixed_dictionaries(parts)

    return schema


# One test per operation of the committed description (tests/test_contract.py keeps it equal
# to the served one). schemathesis's own pytest plugin (`from_fixture`) does not run on
# pytest 9, so each test drives the operation's Hypothesis strategy itself.
DESCRIPTION = json.loads(SPEC.read_text())["paths"]
OPERATIONS = [(method.upper(), path) for path, methods in DESCRIPTION.items() for method in methods]


# Operations with a query or a body are also fed invalid input (a wrong type, a value out of
# its pattern, enum or range, a NUL, a missing required parameter): it must be refused with
# a documented 4xx. (A path parameter takes any text but a NUL, which a path cannot carry.)
NEGATIVE = [
    (method, path)
    for method, path in OPERATIONS
    if "requestBody" in DESCRIPTION[path][method.lower()]
    or any(p["in"] == "query" for p in DESCRIPTION[path][method.lower()].get("parameters", []))
]


@pytest.mark.parametrize(
    ("method", "path", "mode"),
    [(*op, GenerationMode.POSITIVE) for op in OPERATIONS]
    + [(*op, GenerationMode.NEGATIVE) for op in NEGATIVE],
)
def test_api_conforms_to_its_openapi(
    api_schema: Any, fuzz_stats: dict[str, Any], method: str, path: str, mode: GenerationMode
) -> None:
    operation = api_schema[path][method]
    positive = mode == GenerationMode.POSITIVE
    examples = POSITIVE_PER_OPERATION if positive else NEGATIVE_PER_OPERATION

    @given(case=operation.as_strategy(mode, hooks=api_schema.hooks))
    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,  # the same cases on every run: CI stays reproducible
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def conforms(case: Any) -> None:
        fuzz_stats["cases"] += 1
        fuzz_stats["operations"].add(f"{method} {path}")
        fuzz_stats["negative"] += mode == GenerationMode.NEGATIVE
        response = case.call_and_validate(checks=ALL_CHECKS)
        fuzz_stats["statuses"][response.status_code] += 1

    conforms()
