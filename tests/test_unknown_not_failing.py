"""Unknown is not failing: what the simulation cannot read (a file, a data structure it
fills in a loop, a value after a return that may have happened) leaves a raise undecided,
never claimed. Synthetic modules in memory, written for these tests."""

from __future__ import annotations

import textwrap
from typing import Any

from kb.explain.predicates import Profile
from kb.explain.simulate import Result, Simulator
from kb.explain.source_modules import parse_module

ARGS = "python/sglang/srt/server_args.py"
TUNING = "python/sglang/srt/tuning.py"

TUNED_ARGS = """
import dataclasses
from sglang.srt.hub import read_card
from sglang.srt.tuning import check_tiers, load_tiers

@dataclasses.dataclass
class ServerArgs:
    model_path: str = None
    tuned: bool = False
    tuning_file: str = None
    tuned_by_card: bool = False

    def __post_init__(self):
        if self.tuned:
            load_tiers(self.tuning_file)
            check_tiers(self.model_path)
        if self.tuned_by_card and read_card(self.model_path).tiered:
            load_tiers(None)
"""

# A table read from a file unless none is named, then a built-in one; the tiers are
# collected item by item into a dict and list, and an empty collection raises.
TUNING_TEXT = """
import json
from sglang.srt.hub import read_card

BUILT_IN = {"1": {"steps": [1, 2]}, "8": {"steps": [0, 1]}, "note": {}}


def load_tiers(path):
    if path is not None:
        with open(path) as f:
            table = json.load(f)
    else:
        table = BUILT_IN
    tiers = {}
    sizes = []
    for key, entry in table.items():
        if not key.isdigit():
            continue
        tiers[int(key)] = entry
        sizes.append(int(key))
    if not tiers:
        raise ValueError("the tuning table has no numeric tier")
    if not sizes:
        raise ValueError("the tuning table has no size")
    return tiers


def heads_of(card):
    if card.single_head:
        return 1
    if card.kind == "grouped":
        raise ValueError("grouped heads are not counted")
    return card.heads


def check_tiers(model_path):
    heads_of(read_card(model_path))
"""


def run(**fields: Any) -> Result:
    mods = {}
    for path, text in {ARGS: TUNED_ARGS, TUNING: TUNING_TEXT}.items():
        mod = parse_module(path, textwrap.dedent(text))
        assert mod is not None
        mods[path] = mod
    values = {"model_path": "m", "tuned": True, "tuning_file": None, **fields}
    given = set(fields) | {"tuned"}
    sim = Simulator(mods.get, mods[ARGS], values, Profile.parse(None), given=given)
    return sim.run()


def outcome(result: Result, message: str) -> str:
    (check,) = [c for c in result.checks if message in c.message]
    return check.outcome


def test_a_collection_filled_in_a_loop_over_a_known_table_is_not_empty() -> None:
    result = run()
    assert outcome(result, "no numeric tier") == "passed"
    assert outcome(result, "no size") == "passed"


def test_a_collection_filled_from_a_file_the_simulation_cannot_read_is_unknown() -> None:
    result = run(tuning_file="tiers.json")
    assert outcome(result, "no numeric tier") == "unknown"
    assert outcome(result, "no size") == "unknown"
    assert result.errors == []


def test_after_a_return_that_may_have_happened_a_raise_is_not_likely() -> None:
    # the card is read from the hub: whether heads_of returns before the raise is unknown
    assert outcome(run(), "grouped heads") == "unknown"


def test_a_known_table_filled_on_an_undecided_path_is_known_on_that_path() -> None:
    # whether load_tiers runs depends on the hub; the tiers of the built-in table do not
    result = run(tuned=False, tuned_by_card=True)
    assert outcome(result, "no numeric tier") == "passed"
