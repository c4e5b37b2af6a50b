"""A flag gone at a version after SGLang deprecated it: the flags its last deprecation names
come first (flag page 404, explain, upgrade check), not fuzzy look-alikes of its name."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import explain_kb
import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.main import create_app
from kb.explain import explain
from kb.schema import make_engine

SERVE = "python -m sglang.launch_server --model-path m"
# Synthetic, shaped like SGLang's notes: the replacement only in the message, not extracted.
NOTE = "NOTE: --enable-deepep-moe is deprecated. Please set `--moe-a2a-backend` to 'deepep'."


def _flags_of(v: int) -> list[dict[str, Any]]:
    """explain_kb's flags, --enable-deepep-moe deprecated in v0.2.0 by NOTE alone."""
    flags = ORIGINAL(v)
    for spec in flags:
        if spec["name"] == "--enable-deepep-moe" and spec.get("deprecated"):
            spec.update(replacement=None, deprecated_message=NOTE)
    return flags


ORIGINAL = explain_kb.flags_of


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(explain_kb, "flags_of", _flags_of)
        return explain_kb.build(tmp_path_factory.mktemp("gone") / "kb.db")


@pytest.fixture(scope="module")
def session(db_url: str) -> Iterator[Session]:
    engine = make_engine(db_url, readonly=True)
    with Session(engine) as s:
        yield s
    engine.dispose()


def test_flag_page_404_suggests_the_flag_the_deprecation_names(db_url: str) -> None:
    client = TestClient(create_app(db_url))
    r = client.get("/api/v/v0.3.0/flags/--enable-deepep-moe")
    assert r.status_code == 404
    body = r.json()
    assert [s["name"] for s in body["suggestions"]][0] == "--moe-a2a-backend"
    assert "In v0.2.0 it was deprecated: NOTE:" in body["detail"]
    # never deprecated: fuzzy suggestions only, no deprecation said
    r = client.get("/api/v/v0.3.0/flags/--enable-deepep-mo")
    assert r.status_code == 404 and "deprecated" not in r.json()["detail"]


def test_explain_unknown_flag_says_what_replaced_it(session: Session) -> None:
    result = explain(session, "v0.3.0", f"{SERVE} --enable-deepep-moe")
    (unknown,) = [f for f in result["findings"] if f["kind"] == "unknown_flag"]
    assert unknown["suggestions"][0] == "--moe-a2a-backend"
    assert unknown["replacement"] == "--moe-a2a-backend"
    assert "deprecated in v0.2.0" in unknown["message"]
    assert unknown["message"].endswith(": use --moe-a2a-backend")


def test_upgrade_check_names_the_replacement_stated_after_the_old_version(
    session: Session,
) -> None:
    """At v0.1.0 the flag was not deprecated yet: the replacement comes from v0.2.0."""
    result = explain(session, "v0.1.0", f"{SERVE} --enable-deepep-moe", compare_to="v0.3.0")
    (removed,) = result["compare"]["removed"]
    assert removed["replacement"] == "--moe-a2a-backend"
    assert removed["message"].endswith("; use --moe-a2a-backend")


def test_explain_links_the_replacement_and_not_flags_named_in_passing(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A stated replacement names the flags to use; other flags its message names in
    passing ("as --chunked-prefill-size") are no replacement. Both say the same."""
    note = f"{NOTE} Keep --chunked-prefill-size as it is."

    def flags_of(v: int) -> list[dict[str, Any]]:
        flags = ORIGINAL(v)
        for spec in flags:
            if spec["name"] == "--enable-deepep-moe" and spec.get("deprecated"):
                spec.update(replacement="--moe-a2a-backend=deepep", deprecated_message=note)
        return flags

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(explain_kb, "flags_of", flags_of)
        url = explain_kb.build(tmp_path_factory.mktemp("stated") / "kb.db")
    engine = make_engine(url, readonly=True)
    with Session(engine) as s:
        result = explain(s, "v0.3.0", f"{SERVE} --enable-deepep-moe")
    engine.dispose()
    (unknown,) = [f for f in result["findings"] if f["kind"] == "unknown_flag"]
    assert unknown["replacement"] == "--moe-a2a-backend=deepep"
    assert unknown["replacements"] == ["--moe-a2a-backend"]
    assert unknown["message"].endswith(": use --moe-a2a-backend")
