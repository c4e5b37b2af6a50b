"""The condition evaluator: decides what it can, and says Unknown (why) for everything else."""

from __future__ import annotations

import pytest

from kb.explain.safe_eval import Evaluator, evaluate, flag_names, truth
from kb.threeval import Unknown, unknown

ENV = {
    "pp_size": 2,
    "tp_size": 8,
    "disable_overlap_schedule": False,
    "moe_a2a_backend": "none",
    "enable_two_batch_overlap": True,
    "speculative_algorithm": None,
    "mem_fraction_static": unknown("computed at run time"),
    "attention_backend": "fa3",
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("self.pp_size > 1", True),
        ("server_args.pp_size > 1", True),
        ("pp_size > 2", False),
        ("self.server_args.tp_size == 8", True),
        ("get_global_server_args().tp_size == 8", True),
        ('self.enable_two_batch_overlap and self.moe_a2a_backend == "none"', True),
        ("not (self.pp_size > 1)", False),
        ("self.speculative_algorithm is None", True),
        ("self.speculative_algorithm is not None", False),
        ("self.disable_overlap_schedule is False", True),
        ('self.moe_a2a_backend in ["deepep", "mooncake"]', False),
        ('self.moe_a2a_backend not in ("deepep", "mooncake")', True),
        ('"fa" in self.attention_backend', True),
        ("1 < self.pp_size < 4", True),
        ("1 < self.pp_size < 2", False),
        ("self.tp_size % self.pp_size == 0 and self.tp_size // 4 == 2", True),
        ("self.tp_size * 2 - 1 >= 15.0", True),
        ("-self.pp_size < 0", True),
        ("self.tp_size if self.pp_size > 1 else 0", True),
        ('getattr(self, "pp_size", 1) > 1', True),
        ('hasattr(server_args, "tp_size")', True),
        ("self.disable_overlap_schedule\n    and self.speculative_algorithm is None", False),
        ("not ((x := self.speculative_algorithm) is not None)", True),
        ("True", True),
        ("0", False),
    ],
)
def test_decides_whitelisted_expressions(text: str, expected: bool) -> None:
    assert truth(text, ENV) is expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("is_cuda()", "calls is_cuda()"),
        ("self.get_model_config().is_multimodal", "get_model_config"),
        ("self.model_config.hf_config", "reads self.model_config"),
        ("self.unknown_attr > 1", "not a flag"),
        ("self.mem_fraction_static > 0.9", "computed at run time"),
        ("self.tp_size[0]", "subscript"),
        ("lambda: 1", "lambda"),
        ("[x for x in self.tp_size]", "listcomp"),
        ("self.pp_size > None", "compares int with NoneType"),
        ("self.tp_size is 8", "identity"),
        ("self.tp_size / 0 > 1", "arithmetic fails"),
        ("2 ** 10 ** 9 > 1", "power too large"),
        ('"x" * 10 ** 9', "mixes str and int"),
        ("self.pp_size > 1 and (", "does not parse"),
        ("x matches None", "does not parse"),
        ('__import__("os").system("true")', "calls"),
        ('f"{self.tp_size}" == "8"', "joinedstr"),
    ],
)
def test_everything_else_is_unknown_with_a_reason(text: str, reason: str) -> None:
    result = evaluate(text, ENV)
    assert isinstance(result, Unknown), result
    assert reason in result.reason


def test_three_valued_logic_still_decides_when_one_side_settles_it() -> None:
    assert truth("is_hip() and self.pp_size > 5", ENV) is False
    assert truth("is_hip() or self.pp_size > 1", ENV) is True
    assert isinstance(truth("is_hip() and self.pp_size > 1", ENV), Unknown)
    assert isinstance(truth("is_hip() or self.pp_size > 5", ENV), Unknown)
    assert isinstance(truth("not is_hip()", ENV), Unknown)
    # A chained comparison is false as soon as one decidable link is.
    assert truth("self.mem_fraction_static < 1 < self.pp_size < 2", ENV) is False


def test_unknown_refuses_to_be_used_as_a_boolean() -> None:
    with pytest.raises(TypeError):
        bool(unknown("x"))


def test_records_which_flags_were_read() -> None:
    ev = Evaluator(ENV)
    ev.truth("self.pp_size > 1 and server_args.tp_size == 8 and self.model_config")
    assert ev.names_read == {"pp_size", "tp_size"}


def test_values_of_override_right_hand_sides() -> None:
    assert evaluate("True", ENV) is True
    assert evaluate("self.tp_size // 2", ENV) == 4
    assert evaluate('"fa3" + "_x"', ENV) == "fa3_x"
    assert evaluate("(1, 2)", ENV) == (1, 2)
    assert isinstance(evaluate("min(self.tp_size, 4)", ENV), Unknown)


def test_never_executes_code(tmp_path) -> None:
    marker = tmp_path / "ran"
    text = f"open({str(marker)!r}, 'w').write('x') > 0"
    assert isinstance(truth(text, ENV), Unknown)
    assert not marker.exists()


def test_pathological_inputs_stay_unknown() -> None:
    assert truth("(" * 50 + "1" + ")" * 50, ENV) is True
    assert isinstance(truth("(" * 500 + "1" + ")" * 500, ENV), Unknown)
    assert isinstance(truth("not " * 5000 + "True", ENV), Unknown)
    assert isinstance(truth("x" * 10_000, ENV), Unknown)


def test_flag_names_lists_receiver_attributes_only() -> None:
    text = 'self.pp_size > 1 and server_args.tp_size and getattr(self, "dp_size", 1) and x.y and z'
    assert flag_names(text) == {"pp_size", "tp_size", "dp_size"}
    assert flag_names("not valid (") == frozenset()
