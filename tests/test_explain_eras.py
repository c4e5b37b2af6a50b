"""Explain on the knowledge base the real ingest builds from the synthetic three-era repo
(`kb_db` in conftest.py): era-1 argparse, era-2 argparse + choices hooks, era-3 dataclass
fields with constraint logic in `arg_groups/*_hook.py`. Skipped while that fixture is absent.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session

from kb.explain import explain
from kb.schema import make_engine


@pytest.fixture(scope="module")
def session(request: pytest.FixtureRequest) -> Iterator[Session]:
    try:
        db: Path = request.getfixturevalue("kb_db")
    except pytest.FixtureLookupError:
        pytest.skip("no kb_db fixture (tests/conftest.py) yet")
    engine = make_engine(f"sqlite:///{db}", readonly=True)
    with Session(engine) as s:
        yield s
    engine.dispose()


def messages(result: dict[str, Any], severity: str) -> list[str]:
    return [f["message"] for f in result["findings"] if f["severity"] == severity]


def test_era_1_does_not_know_later_flags(session: Session) -> None:
    result = explain(session, "v0.1.0", "--model-path m --pp-size 2")
    assert result["findings"][0]["kind"] == "unknown_flag"
    # The range says which release introduced it.
    assert result["valid_in"][0]["from"] == "v0.2.0"
    (limit,) = result["valid_in"][0]["limited_from"]
    assert (limit["flag"], limit["problem"]) == ("--pp-size", "missing")


def test_era_2_raise_override_and_choice(session: Session) -> None:
    tbo = explain(session, "v0.2.0", "--model-path m --enable-two-batch-overlap")
    assert any(m.startswith("raises at server_args.py:") for m in messages(tbo, "error"))
    pp = explain(session, "v0.2.0", "--model-path m --pp-size 2")
    assert any(
        m.startswith("overrides --disable-overlap-schedule to True at server_args.py:")
        for m in messages(pp, "warning")
    )
    typo = explain(session, "v0.2.0", "--model-path m --moe-runner-backend flashinfer_cutlas")
    choice = next(f for f in typo["findings"] if f["kind"] == "invalid_choice")
    assert choice["suggestions"] == ["flashinfer_cutlass"]


def test_era_3_hook_module_constraints(session: Session) -> None:
    result = explain(session, "v0.3.0", "--model-path m --pp-size 2 --speculative-algorithm EAGLE")
    raises = [m for m in messages(result, "error") if m.startswith("raises at ")]
    assert raises and raises[0].startswith("raises at speculative_hook.py:")
    assert next(f for f in result["findings"] if f["message"] == raises[0])["source"][
        "path"
    ].endswith("_hook.py")


def test_upgrade_across_eras(session: Session) -> None:
    result = explain(
        session, "v0.2.0", "--model-path m --enable-two-batch-overlap", compare_to="v0.3.0"
    )
    compare = result["compare"]
    assert [r["flag"] for r in compare["removed"]] == ["--enable-two-batch-overlap"]
    assert any(f["message"].startswith("raises at ") for f in compare["constraints_stopped"])
