"""Known values of a flag without choices that takes any registered name (issue 11): its
help's "Builtins:" list and the members of the enum named after its dest that looks members
up by name. A synthetic repository modelled on an open speculative-algorithm registry: the
flag had choices first (v0.1.0), then none (v0.2.0). Made-up flag, enum and code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from ingest.sites import scan_enums
from tests.conftest import ingest_into
from tests.fixture_repos import SERVER_ARGS, commit, git, write

SRT = "python/sglang/srt/"

ARGS = """
import argparse
import dataclasses
from typing import Optional


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    draft_algorithm: Optional[str] = None
    decoy_mode: Optional[str] = None

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", type=str, required=True, help="Weights.")
        parser.add_argument(
            "--draft-algorithm",
            type=str,
            {choices}
            help={help!r},
        )
        parser.add_argument("--decoy-mode", type=str, help="A mode.")
"""

CLOSED = ARGS.format(choices='choices=["ALPHA", "BETA", "NEXTN"],', help="Draft algorithm.")
OPEN = ARGS.format(
    choices="",
    help="Draft algorithm. Builtins: ALPHA, BETA, NEXTN. Or any name registered via "
    "`DraftAlgorithm.register`.",
)

# auto() members; from_string looks the user's name up among them; NONE is what no flag gives.
DRAFT_INFO = """
from enum import Enum, auto


class DraftAlgorithm(Enum):
    ALPHA = auto()
    BETA = auto()
    GAMMA_MTP = auto()
    NONE = auto()

    @classmethod
    def from_string(cls, name):
        if name is None:
            return cls.NONE
        return cls[name.upper()]

    def is_alpha(self):
        return self in (DraftAlgorithm.ALPHA, DraftAlgorithm.GAMMA_MTP)

    def is_beta(self):
        return self == DraftAlgorithm.BETA

    def is_none(self):
        return self == DraftAlgorithm.NONE


class DecoyMode(Enum):
    FIRST = "first"
    SECOND = "second"
"""

WORKER = """
from sglang.srt.draft_info import DraftAlgorithm


class Worker:
    def __init__(self, server_args):
        self.draft_algorithm = DraftAlgorithm.from_string(server_args.draft_algorithm)
        if self.draft_algorithm.is_alpha():
            self.depth = 2
        if server_args.draft_algorithm == "BETA":
            self.depth = 3
        if server_args.draft_algorithm == "NEXTN":
            server_args.draft_algorithm = "ALPHA"
        if server_args.decoy_mode == "first":
            self.depth = 4
"""


def build_repo(root: Path) -> Path:
    repo = root / "sglang"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    write(repo, SERVER_ARGS, CLOSED)
    write(repo, SRT + "draft_info.py", DRAFT_INFO)
    write(repo, SRT + "worker.py", WORKER)
    commit(repo, "closed", "2025-09-01T12:00:00Z", "v0.1.0")
    write(repo, SERVER_ARGS, OPEN)
    commit(repo, "open", "2025-10-01T12:00:00Z", "v0.2.0")
    return repo


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    root = tmp_path_factory.mktemp("known")
    db = root / "kb.db"
    ingest_into(build_repo(root), db, jobs=1)
    return TestClient(create_app(f"sqlite:///{db}", cache_mb=0))


def get(client: TestClient, url: str, status: int = 200) -> Any:
    response = client.get(url)
    assert response.status_code == status, response.text
    return response.json()


def test_an_enum_looked_up_by_name_says_so() -> None:
    draft, decoy = scan_enums(DRAFT_INFO.encode())
    assert draft["by_name"] and not decoy["by_name"]


def test_the_flag_lists_its_builtins_and_members_as_open_known_values(
    client: TestClient,
) -> None:
    flag = get(client, "/api/v/v0.2.0/flags/--draft-algorithm")
    assert flag["choices"] is None  # still takes any registered name
    # the help's builtins first, then the members it lacks; NONE is what no flag gives
    assert flag["known_values"] == ["ALPHA", "BETA", "NEXTN", "GAMMA_MTP"]
    assert flag["enum"]["name"] == "DraftAlgorithm"
    rows = {r["value"]: (r["member"], r["sites"]) for r in flag["choice_rows"]}
    assert rows["ALPHA"][0] == "ALPHA" and rows["ALPHA"][1] >= 1
    assert rows["NEXTN"] == (None, 1)  # no member: the code maps it to ALPHA
    page = client.get("/v/v0.2.0/flags/--draft-algorithm").text
    assert "Known values" in page and "open set" in page


def test_each_known_value_has_a_page_with_its_handling_sites(client: TestClient) -> None:
    alpha = get(client, "/api/v/v0.2.0/backends/--draft-algorithm/alpha")
    assert alpha["value"] == "ALPHA" and alpha["known_values"]
    assert alpha["enum_member"]["name"] == "ALPHA"
    hows = {(s["how"], s["path"].rsplit("/", 1)[-1]) for s in alpha["sites"]}
    assert ("is_call", "worker.py") in hows  # `.is_alpha()` on the converted value
    beta = get(client, "/api/v/v0.2.0/backends/--draft-algorithm/BETA")
    assert any(s["how"] == "compare" and s["path"].endswith("worker.py") for s in beta["sites"])
    get(client, "/api/v/v0.2.0/backends/--draft-algorithm/NEXTN")
    get(client, "/api/v/v0.2.0/backends/--draft-algorithm/MY_ALGO", 404)
    listed = get(client, "/api/v/v0.2.0/backends")["backends"]
    entry = next(b for b in listed if b["flag"] == "--draft-algorithm")
    assert entry["values_open"] and entry["enum"] == "DraftAlgorithm"
    compare = get(client, "/api/v/v0.2.0/backends/--draft-algorithm/compare?values=ALPHA,BETA")
    assert compare["values"] == ["ALPHA", "BETA"] and compare["rows"]


def test_an_enum_not_looked_up_by_name_gives_no_known_values(client: TestClient) -> None:
    assert get(client, "/api/v/v0.2.0/flags/--decoy-mode")["known_values"] is None


def test_a_flag_with_choices_keeps_them_and_gets_its_is_calls(client: TestClient) -> None:
    flag = get(client, "/api/v/v0.1.0/flags/--draft-algorithm")
    assert flag["choices"] == ["ALPHA", "BETA", "NEXTN"] and flag["known_values"] is None
    # an auto() member's `.is_alpha()` site is spelled as the flag spells the value
    alpha = get(client, "/api/v/v0.1.0/backends/--draft-algorithm/ALPHA")
    assert any(s["how"] == "is_call" and s["value"] == "ALPHA" for s in alpha["sites"])


def test_explain_still_accepts_a_registered_name(client: TestClient) -> None:
    body = client.post(
        "/api/explain",
        json={
            "version": "v0.2.0",
            "command": "python -m sglang.launch_server --model-path m --draft-algorithm MY_ALGO",
        },
    ).json()
    assert not [f for f in body["findings"] if f["kind"] == "invalid_choice"]


def test_the_diff_names_the_values_a_registry_adds_to_the_choices(client: TestClient) -> None:
    changed = get(client, "/api/diff/v0.1.0/v0.2.0")["changed"]
    (opened,) = [c for c in changed if c["name"] == "--draft-algorithm" and c["field"] == "choices"]
    assert opened["known"] == ["ALPHA", "BETA", "NEXTN", "GAMMA_MTP"]
    assert opened["added"] == ["GAMMA_MTP"] and opened["removed"] == []
    page = client.get("/diff/v0.1.0...v0.2.0").text
    assert "opened to any value" in page and "new: <code>GAMMA_MTP</code>" in page
