"""API fuzzing: schemathesis generates requests from the served /api/openapi.json and checks
every answer against it (status documented, body valid for the declared model, JSON content
type, never a 5xx), over the knowledge base ingested from the synthetic three-era repository.

Generated names are mixed with names that exist in that knowledge base (versions, flags by
any spelling, values, stored paths, launch commands), so most cases reach the 200 bodies
rather than only the 404s; the routes with parameters that can be malformed also get
invalid input (their 400/422 must be documented). Bounded: about 100 examples per operation,
at least 1,000 cases in all; the count and the time land in test-output/schemathesis.txt.
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
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app.main import create_app

EXAMPLES_PER_OPERATION = 100
MIN_CASES = 1_000
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "docs" / "openapi.json"
OUTPUT = ROOT / "test-output" / "schemathesis.txt"


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


def some(known: list[str], generated: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a name that exists, sometimes whatever schemathesis made up."""
    if not known:
        return generated
    return st.one_of(st.sampled_from(known), st.sampled_from(known), generated)


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


@pytest.fixture(scope="module")
def fuzz_stats() -> Iterator[dict[str, Any]]:
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
    OUTPUT.parent.mkdir(exist_ok=True)
    OUTPUT.write_text(
        f"schemathesis: {stats['cases']} cases ({stats['negative']} with invalid input) over "
        f"{len(stats['operations'])} operations in {seconds:.1f} s ({statuses})\n"
    )
    if len(stats["operations"]) == len(OPERATIONS):  # not when -k picked a few
        assert stats["cases"] >= MIN_CASES, f"only {stats['cases']} cases were generated"


@pytest.fixture(scope="module")
def api_schema(kb_db: Path) -> Any:
    names = known_names(kb_db)
    app = create_app(f"sqlite:///{kb_db}")
    schema = schemathesis.openapi.from_asgi("/api/openapi.json", app)

    @schema.hook
    def flatmap_path_parameters(context: Any, path_parameters: dict[str, Any] | None) -> Any:
        if not path_parameters:
            return st.just(path_parameters)
        keys = {"a": "version", "b": "version"}
        parts = {
            key: some(names.get(keys.get(key, key), []), st.just(value))
            for key, value in path_parameters.items()
        }
        return st.fixed_dictionaries(parts)

    @schema.hook
    def flatmap_query(context: Any, query: dict[str, Any] | None) -> Any:
        query = dict(query or {})
        parts = {key: st.just(value) for key, value in query.items()}
        for key in ("version", "compare"):
            if key in query:
                parts[key] = some(names["version"] + ["all", ""], st.just(query[key]))
        if "command" in query:
            parts["command"] = some([], st.just(query["command"])) | commands(names)
        if "q" in query:
            parts["q"] = st.one_of(st.just(query["q"]), st.sampled_from(names["flag"]))
        return st.fixed_dictionaries(parts)

    @schema.hook
    def flatmap_body(context: Any, body: Any) -> Any:
        if not isinstance(body, dict) or "command" not in body:
            return st.just(body)
        return st.fixed_dictionaries(
            {
                **{key: st.just(value) for key, value in body.items()},
                "command": st.one_of(st.just(body["command"]), commands(names)),
                **(
                    {"version": some(names["version"], st.just(body["version"]))}
                    if "version" in body
                    else {}
                ),
            }
        )

    return schema


# One test per operation of the committed description (tests/test_contract.py keeps it equal
# to the served one). schemathesis's own pytest plugin (`from_fixture`) does not run on
# pytest 9, so each test drives the operation's Hypothesis strategy itself.
OPERATIONS = [
    (method.upper(), path)
    for path, methods in json.loads(SPEC.read_text())["paths"].items()
    for method in methods
]


# Operations with inputs that can be malformed (an integer, a required parameter, a body):
# also fed invalid ones, whose 400/422 answers must be documented ErrorBody replies.
NEGATIVE = [
    op
    for op in OPERATIONS
    if op[1] in ("/api/search", "/api/explain", "/api/v/{version}/constraints")
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
    examples = EXAMPLES_PER_OPERATION if mode == GenerationMode.POSITIVE else 50

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
        response = case.call_and_validate(checks=CHECKS)
        fuzz_stats["statuses"][response.status_code] += 1

    conforms()
