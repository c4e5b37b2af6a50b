"""Known values of a flag without choices from the enum named exactly after its dest: a str
enum whose string members hold the flag's default (the values), or an enum the code looks
up by name with a subscript after the class (the names, and the default the code handles
before the lookup). Negative cases: a same-named str enum without the default among its
values, two enums of the flag's name. A synthetic repository; made-up flags, enums, code."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from ingest.sites import scan, scan_enums
from tests.conftest import ingest_into
from tests.fixture_repos import SERVER_ARGS, commit, git, write
from tests.test_known_values import get

SRT = "python/sglang/srt/"

ARGS = """
import argparse
import dataclasses


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    impl_mode: str = "auto"
    balance_algorithm: str = "auto"
    layout_kind: str = "packed"
    cache_tier: str = "auto"
    pool_kind: str = None

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", type=str, required=True, help="Weights.")
        parser.add_argument("--impl-mode", type=str, default=ServerArgs.impl_mode, help="Impl.")
        parser.add_argument(
            "--balance-algorithm", type=str, default=ServerArgs.balance_algorithm, help="Algo."
        )
        parser.add_argument("--layout-kind", type=str, default="packed", help="Layout.")
        parser.add_argument("--cache-tier", type=str, default="auto", help="Tier.")
        parser.add_argument("--pool-kind", type=str, default=None, help="Pool.")

    def __post_init__(self):
        if self.balance_algorithm == "auto":
            self.balance_algorithm = "greedy"
        if self.impl_mode == "native":
            self.model_path = self.model_path
"""

# A str enum with string members, the default among them: the values are the flag's.
IMPL = """
from enum import Enum


class ImplMode(str, Enum):
    AUTO = "auto"
    NATIVE = "native"
    BRIDGE = "bridge"


def load(config):
    if config.impl_mode == ImplMode.BRIDGE:
        return "bridge"
    return None
"""

# Looked up by name after the class, unless the flag holds "auto".
BALANCE = '''
from enum import Enum, auto


class BalanceAlgorithm(Enum):
    greedy = auto()
    greedy_grouped = auto()


def pick(raw_algorithm: str) -> BalanceAlgorithm:
    """Not a lookup: BalanceAlgorithm[name] in a docstring."""
    if raw_algorithm != "auto":
        return BalanceAlgorithm[raw_algorithm]
    return BalanceAlgorithm.greedy


def rebalance(algorithm: BalanceAlgorithm, counts):
    """BalanceAlgorithm.greedy_grouped in a docstring is no reference."""
    # nor in a comment: BalanceAlgorithm.greedy_grouped
    if algorithm == BalanceAlgorithm.greedy_grouped:
        return sorted(counts)
    return counts
'''

# A str enum named after --layout-kind whose values do not hold its default "packed".
LAYOUT = """
from enum import Enum


class LayoutKind(str, Enum):
    ROW = "row"
    COLUMN = "column"
"""

# Two str enums named after --cache-tier, both holding its default: which one is unknown.
TIER_A = """
from enum import Enum


class CacheTier(str, Enum):
    AUTO = "auto"
    HOST = "host"
"""
TIER_B = """
from enum import Enum


class CacheTier(str, Enum):
    AUTO = "auto"
    DISK = "disk"
"""


# A str enum named after --pool-kind, whose default is None: nothing says the flag holds them.
POOL = """
from enum import Enum


class PoolKind(str, Enum):
    SHARED = "shared"
    PRIVATE = "private"
"""

# Another file dispatching on the by-name enum's lower-case members: the members of an enum
# defined elsewhere are unknown to this file's scan, so these are no sites (a known limit).
REBALANCE_ELSEWHERE = """
from sglang.srt.balance import BalanceAlgorithm


def run(algorithm, counts):
    if algorithm == BalanceAlgorithm.greedy_grouped:
        return counts
"""


def build_repo(root: Path) -> Path:
    repo = root / "sglang"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    write(repo, SERVER_ARGS, ARGS)
    write(repo, SRT + "impl.py", IMPL)
    write(repo, SRT + "balance.py", BALANCE)
    write(repo, SRT + "layout.py", LAYOUT)
    write(repo, SRT + "tier_a.py", TIER_A)
    write(repo, SRT + "tier_b.py", TIER_B)
    write(repo, SRT + "pool.py", POOL)
    write(repo, SRT + "rebalance.py", REBALANCE_ELSEWHERE)
    commit(repo, "enums", "2025-09-01T12:00:00Z", "v0.1.0")
    return repo


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    root = tmp_path_factory.mktemp("known_enums")
    db = root / "kb.db"
    ingest_into(build_repo(root), db, jobs=1)
    return TestClient(create_app(f"sqlite:///{db}", cache_mb=0))


def test_the_scan_tells_str_enums_and_lookups_by_name_outside_the_class() -> None:
    (impl,) = scan_enums(IMPL.encode())
    assert impl["str_values"] and not impl["by_name"]
    (balance,) = scan_enums(BALANCE.encode())
    assert balance["by_name"] and not balance["str_values"]  # auto() members: no literals
    # an auto() member's value stands in as its lower-case name, marked as auto()
    assert [(m["name"], m["value"], m.get("auto")) for m in balance["members"]] == [
        ("greedy", "greedy", True),
        ("greedy_grouped", "greedy_grouped", True),
    ]
    assert not any("auto" in m for m in impl["members"])
    # mentions in a comment or a docstring, or of a longer name, are no lookup
    quiet = BALANCE.replace(
        "return BalanceAlgorithm[raw_algorithm]", "return MyBalanceAlgorithm[raw_algorithm]"
    ).replace("if raw_algorithm", "# BalanceAlgorithm[x]\n    if raw_algorithm")
    (balance,) = scan_enums(quiet.encode())
    assert not balance["by_name"]
    mixed = IMPL.replace('BRIDGE = "bridge"', "BRIDGE = auto()")
    assert not scan_enums(mixed.encode())[0]["str_values"]
    plain = IMPL.replace("(str, Enum)", "(Enum)")
    assert not scan_enums(plain.encode())[0]["str_values"]


def test_a_str_enum_holding_the_default_gives_its_values(client: TestClient) -> None:
    flag = get(client, "/api/v/v0.1.0/flags/--impl-mode")
    assert flag["choices"] is None
    assert flag["known_values"] == ["auto", "native", "bridge"]
    assert flag["enum"]["name"] == "ImplMode"
    (enum,) = [e for e in get(client, "/api/v/v0.1.0/enums")["enums"] if e["name"] == "ImplMode"]
    assert enum["flags"] == ["--impl-mode"]
    bridge = get(client, "/api/v/v0.1.0/backends/--impl-mode/bridge")
    assert bridge["enum_member"]["name"] == "BRIDGE"
    assert [(s["how"], s["path"].rsplit("/", 1)[-1]) for s in bridge["sites"]] == [
        ("enum", "impl.py")
    ]
    native = get(client, "/api/v/v0.1.0/backends/--impl-mode/native")
    assert [(s["how"], s["path"].rsplit("/", 1)[-1]) for s in native["sites"]] == [
        ("compare", "server_args.py")
    ]


def test_an_enum_looked_up_by_name_gives_its_names_and_the_default(client: TestClient) -> None:
    flag = get(client, "/api/v/v0.1.0/flags/--balance-algorithm")
    # "auto" is no member: the code handles it before the lookup
    assert flag["known_values"] == ["auto", "greedy", "greedy_grouped"]
    assert flag["enum"]["name"] == "BalanceAlgorithm"
    auto = get(client, "/api/v/v0.1.0/backends/--balance-algorithm/auto")
    assert [s["how"] for s in auto["sites"]] == ["compare"]
    # members named in lower case, referenced in the enum's own file, are handling sites
    grouped = get(client, "/api/v/v0.1.0/backends/--balance-algorithm/greedy_grouped")
    assert [(s["how"], s["line"]) for s in grouped["sites"]] == [
        (
            "enum",
            BALANCE.lstrip()
            .splitlines()
            .index("    if algorithm == BalanceAlgorithm.greedy_grouped:")
            + 1,
        )
    ]
    greedy = get(client, "/api/v/v0.1.0/backends/--balance-algorithm/greedy")
    assert [s["text"] for s in greedy["sites"]] == ["return BalanceAlgorithm.greedy"]
    get(client, "/api/v/v0.1.0/backends/--balance-algorithm/other", 404)
    page = client.get("/v/v0.1.0/flags/--balance-algorithm").text
    assert "Known values" in page and "greedy_grouped" in page
    # the enums page says auto() where the code does, not the name standing in for it
    enums = client.get("/v/v0.1.0/enums").text
    assert "<code>auto()</code>" in enums and "<code>&#34;greedy&#34;</code>" not in enums
    assert grouped["enum_member"]["auto"] is True


def test_a_str_enum_without_the_default_gives_no_values(client: TestClient) -> None:
    flag = get(client, "/api/v/v0.1.0/flags/--layout-kind")
    assert flag["known_values"] is None and flag["enum"] is None


def test_two_enums_of_the_flags_name_give_no_values(client: TestClient) -> None:
    flag = get(client, "/api/v/v0.1.0/flags/--cache-tier")
    assert flag["known_values"] is None and flag["enum"] is None


def test_a_str_enum_and_a_flag_defaulting_to_none_give_no_values(client: TestClient) -> None:
    flag = get(client, "/api/v/v0.1.0/flags/--pool-kind")
    assert flag["known_values"] is None and flag["enum"] is None


def test_lower_case_member_references_in_code_of_the_defining_file_only() -> None:
    refs = scan(BALANCE.encode())["enum_refs"]
    assert [r[:2] for r in refs] == [
        ["BalanceAlgorithm", "greedy"],
        ["BalanceAlgorithm", "greedy_grouped"],
    ]
    quiet = BALANCE.replace(
        "return BalanceAlgorithm.greedy\n", "return MyBalanceAlgorithm.greedy\n"
    )
    quiet = quiet.replace(
        "if algorithm == BalanceAlgorithm.greedy_grouped:",
        'if algorithm == "BalanceAlgorithm.greedy_grouped":',
    )
    assert scan(quiet.encode())["enum_refs"] == []  # a longer name, a string
    assert scan(REBALANCE_ELSEWHERE.encode())["enum_refs"] == []
    # a class defined twice in the file: the members of both are known
    twice = (
        "from enum import Enum\n\n\nclass Algo(Enum):\n    one = 'one'\n\n\n"
        "class Algo(Enum):\n    three = 'three'\n\n\nx = Algo.one\ny = Algo.three\n"
    )
    assert [r[:2] for r in scan(twice.encode())["enum_refs"]] == [
        ["Algo", "one"],
        ["Algo", "three"],
    ]


def test_an_f_string_naming_a_subscript_is_no_lookup_by_name() -> None:
    text = BALANCE.replace(
        "return BalanceAlgorithm[raw_algorithm]",
        'raise ValueError(f"BalanceAlgorithm[{raw_algorithm}] is unknown")',
    )
    (balance,) = scan_enums(text.encode())
    assert not balance["by_name"]
