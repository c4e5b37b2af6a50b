"""What a file says of its registering functions' parameters (ingest/choices.py
registry_defs): the positional parameters of each top-level `def register_x(...)`, and the
classes each is converted to or keyed as. Made-up code modelled on registry shapes."""

from __future__ import annotations

from ingest.choices import registry_defs, scan_choice_shapes

POOL = b"""from typing import Dict, Tuple


class Pool:
    _table: Dict[
        Tuple[kinds.FirstKind, SecondKind], object
    ] = {}
    _plain: dict[str, object] = {}

    @classmethod
    def add(cls, left_name, right_name, fn):
        key = (left_name, right_name)
        cls._table[key] = fn

    def register_inner(self, ignored_name):
        pass


def register_pair(
    left_name: str,  # (a FirstKind)
    right_name: "Optional[str]" = None,
    /,
    other=(1, 2),
    *rest,
    extra=None,
):
    assert ThirdKind(
        other
    ), f"bad {other}"
    raise ValueError(left_name)


def register_one(name, *, strict=False):
    return name
"""


def test_positional_parameters_and_the_classes_they_hold() -> None:
    assert registry_defs(POOL) == {
        # the key tuple's annotated types, a conversion, and any call on the name
        "register_pair": [
            ["left_name", ["FirstKind", "ValueError"]],
            ["right_name", ["SecondKind"]],
            ["other", ["ThirdKind"]],
        ],
        "register_one": [["name", []]],
    }


def test_a_def_whose_parameters_do_not_close_near_is_left_out() -> None:
    assert registry_defs(b"def register_x(a,\n" + b" " * 3000 + b"b):\n    pass\n") == {}


def test_the_blob_facts_carry_them_only_when_a_line_defines_one() -> None:
    assert scan_choice_shapes(POOL, [])["registry_defs"]["register_one"] == [["name", []]]
    assert "registry_defs" not in scan_choice_shapes(b"x.register_one('a')\n", [])
