"""Doc commands end to end: extracted at ingest, checked with explain's pipeline on request,
served as JSON and as a page, in the version diff and as flag examples."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import Session, select

from kb.schema import DocCommand, Version, loads, make_engine
from tests.conftest import ingest_into
from tests.doc_command_repos import COOKBOOK, GUIDE, build_doc_command_repo


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("docs")
    path = root / "kb.db"
    ingest_into(build_doc_command_repo(root), path, jobs=1)
    return path


@pytest.fixture(scope="module")
def session(db: Path) -> Iterator[Session]:
    engine = make_engine(f"sqlite:///{db}", readonly=True)
    with Session(engine) as s:
        yield s
    engine.dispose()


def test_ingest_stores_each_command_with_its_file_and_line(session: Session) -> None:
    version = session.exec(select(Version).where(Version.name == "v1.0.0")).one()
    rows = session.exec(select(DocCommand).where(DocCommand.version_id == version.id)).all()
    found = {(r.path, r.line, r.command) for r in rows}
    assert found == {
        (GUIDE, 4, "python -m sglang.launch_server --model-path org/plain --tp-size 2"),
        (GUIDE, 10, "python -m sglang.launch_server --model-path org/plain --no-such-flag"),
        (
            GUIDE,
            16,
            "python -m sglang.launch_server --model-path org/plain --enable-two-batch-overlap",
        ),
        (GUIDE, 17, "python -m sglang.launch_server --model-path org/plain --tp-size 8"),
        (GUIDE, 20, "python -m sglang.launch_server --model-path org/plain --enable-mixed-chunk"),
        (
            COOKBOOK,
            4,
            "SGLANG_X=1 python3 -m sglang.launch_server --model-path org/plain --tp-size 2",
        ),
    }
    assert loads(version.report)["counts"]["doc_commands_skipped"] == 1
