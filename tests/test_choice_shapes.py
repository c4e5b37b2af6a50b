"""scan_choice_shapes: registries, dispatch dicts, constants and containment in them,
receivers' types, including a literal or a match cut by a blank line, a lookahead past
one, a dispatch dict's name above one, a receiver's type split by one."""

from __future__ import annotations

import re
from typing import Any

from ingest import choices
from ingest.choices import scan_choice_shapes


def _is_call(tail: str) -> list[Any]:
    return ["x", 1, tail, "is_call"]


def _same(texts: list[str], choices: list[list[Any]] | None = None) -> list[dict[str, Any]]:
    """Each text's shapes."""
    return [scan_choice_shapes(text.encode(), choices or []) for text in texts]


REGISTRY = """\
import x


@register_attention_backend("fa3")
def fa3():
    pass


MODES = ["a", "b"]
OTHER = ("c", "d")


def pick(mode):
    if mode in SUPPORTED:
        return {
            "fa3": A,
            "triton": B,
        }[mode]
"""


def test_registries_dispatch_dicts_constants_and_containment() -> None:
    moved = "import y\n\n\n" + REGISTRY.replace('"triton": B', '"flashinfer": C')
    first, second = _same([REGISTRY, moved])
    assert first["registry"] == [["fa3", 4, "register_attention_backend", 0]]
    assert second["registry"] == [["fa3", 7, "register_attention_backend", 0]]  # shifted
    assert second["dispatch"][0][0] == [["fa3", 19], ["flashinfer", 20]]
    assert first["consts"] == second["consts"] == {"MODES": ["a", "b"], "OTHER": ["c", "d"]}
    assert second["named_contains"] == [["SUPPORTED", 17, "mode"]]


def test_a_test_whose_expression_starts_above_spans_those_lines() -> None:
    text = 'SUPPORTED = ["a"]\n\n\ndef f(mode):\n    if (\n        mode\n        in SUPPORTED\n'
    first, second = _same([text, "import y\n\n\n" + text])
    assert first["named_contains"] == [["SUPPORTED", 7, "mode"]]
    assert first["lines"]["7"] == "mode in SUPPORTED"
    assert first["spans"] == {"7": 1}  # cited from line 6
    assert second["spans"] == {"10": 1}


def test_a_text_repeated_in_a_file_is_cited_at_each_place() -> None:
    block = 'TABLE = {\n    "a": 1,\n    "b": 2,\n}\n'
    text = block + "\n\nx = 1\n\n\n" + block
    (found,) = _same([text])
    assert [group[0] for group in found["dispatch"]] == [
        [["a", 2], ["b", 3]],
        [["a", 11], ["b", 12]],
    ]


def test_a_literal_cut_by_a_blank_line_is_read_whole() -> None:
    # the bracket closes after a blank line
    first = 'NAMES = [\n    "a",\n\n    "b",\n]\n'
    second = 'NAMES = [\n    "a",\n\n    "c",\n]\n'
    found = _same([first, second])
    assert [f["consts"] for f in found] == [{"NAMES": ["a", "b"]}, {"NAMES": ["a", "c"]}]


def test_a_lookahead_past_a_blank_line() -> None:
    # ` in CHOICES` then `(` after a blank line: a call, not containment in a constant; then
    # a text where what follows is no bracket.
    first = "ok = mode in CHOICES\n\n(1, 2)\n"
    second = "ok = mode in CHOICES\n\nx = 1\n"
    first, second = "for a in b:\n    pass\n\n" + first, "for a in b:\n    pass\n\n" + second
    found = _same([first, second])
    assert "named_contains" not in found[0]
    assert found[1]["named_contains"] == [["CHOICES", 4, "mode"]]


def test_a_match_that_runs_past_a_blank_line_is_found() -> None:
    registry, named = _same(
        [
            'register_backend(\n\n    "fa3")\n',
            "ok = mode in\n\nCHOICES  # (and for a in b)\n",
        ]
    )
    assert registry["registry"] == [["fa3", 1, "register_backend", 0]]
    assert named["named_contains"] == [["CHOICES", 1, "mode"]]


def test_a_dispatch_dicts_name_above_a_blank_line() -> None:
    text = 'table = {\n\n    "a": 1,\n    "b": 2,\n}\n'
    (found,) = _same([text, text.replace('"b"', '"c"')])[:1]
    assert found["dispatch"] == [[[["a", 3], ["b", 4]], 3, "table", []]]


def test_a_dispatch_run_goes_on_past_a_blank_line() -> None:
    text = 'table = {\n    "a": 1,\n\n    "b": 2,\n}\n'
    found = _same([text, text.replace('"b"', '"c"')])
    assert found[1]["dispatch"] == [[[["a", 2], ["c", 4]], 2, "table", []]]


def test_a_receivers_type_split_by_a_blank_line() -> None:
    choices = [_is_call("backend")]
    first = "backend\n\n= get_moe_runner_backend()\n\nif backend.is_x():\n    pass\n"
    second = first.replace("get_moe_runner_backend", "get_other_backend")
    found = _same([first, second], choices)
    assert found[0]["types"] == {"backend": "get:moe_runner_backend"}
    assert found[1]["types"] == {"backend": "get:other_backend"}


def test_receivers_types_take_the_first_getter_then_the_first_type() -> None:
    choices = [_is_call("backend"), _is_call("mode")]
    text = (
        "backend: AttentionBackend = x\n\n"
        "mode = Mode.A\n\n"
        "backend = get_attention_backend()\n\n"
        "xbackend = get_wrong()\n"
    )
    found = _same([text, text.replace("Mode.A", "Mode.B"), text.replace("x\n", "y\n")], choices)
    assert found[0]["types"] == {"backend": "get:attention_backend"}  # `Mode.` is no type
    assert found[2]["types"] == {"backend": "get:attention_backend"}


def _types_pattern_by_pattern(text: str, name: str) -> str:
    """What _receiver_types gives a name: a pass of each pattern in turn, its first match
    that starts a word."""
    for tail, kind in ((choices.GETTER, "get:"), (choices.TYPED, "type:")):
        for m in re.finditer(re.escape(name) + tail, text):
            if m.start() == 0 or not (text[m.start() - 1].isalnum() or text[m.start() - 1] in "_."):
                return kind + m.group(1)
    return ""


def test_receivers_types_in_one_pass_as_in_one_pass_per_pattern() -> None:
    texts = [
        "xt = get_a()\nt = get_b()\n",  # a getter inside a word, then one at a word's start
        "t: T\nu = 1\nt = get_c()\n",  # the first getter wins over an earlier type
        "xFoo: Foo = get_d()\n",  # a type inside a word hides no getter in it
        "xFoo: Foo = Bar\nFoo: Baz\n",  # nor a type, its own pass going on after it
        "aaa = get_e()\naa = get_f()\naa: G\n",  # a name that overlaps itself
        "t  \n= get_g()\n",  # blanks, a line's end, before the `=`
        "t.x = get_h()\nt: Optional[K]\n",  # no getter: the type
    ]
    for text in texts:
        for name in ("t", "Foo", "aa", "u"):
            want = _types_pattern_by_pattern(text, name)
            assert choices._receiver_types(text.encode(), [name]) == ({name: want} if want else {})


def test_containment_needs_the_whole_blobs_cheap_test() -> None:
    # `in` then a tab: the regex matches, but the scan only looks when the blob has ` in `
    # somewhere.
    text = "ok = mode in\tCHOICES or x\n"
    found = _same([text, text + "for a in b:\n    pass\n"])
    assert "named_contains" not in found[0]
    assert found[1]["named_contains"] == [["CHOICES", 1, "mode"]]


def test_each_string_argument_of_a_registry_call_keeps_its_position() -> None:
    text = (
        '@register_pair("none", "triton")\ndef f():\n    pass\n\n\n'
        'register_pair("a",\n    "b", make)\n\n'
        'register_pair("c", other, "d")\n\n'
        'register_pair("e" + x, "f")\n'
    )
    (found,) = _same([text])
    assert found["registry"] == [
        ["none", 1, "register_pair", 0],
        ["triton", 1, "register_pair", 1],
        ["a", 6, "register_pair", 0],
        ["b", 7, "register_pair", 1],
        ["c", 9, "register_pair", 0],  # not past an argument that is no string
        ["e", 11, "register_pair", 0],
    ]


def test_a_registry_call_going_on_past_a_blank_line() -> None:
    first = 'register_pair("a",\n\n    "b")\n'
    second = 'register_pair("a",\n\n    "c")\n'
    found = _same([first, second])
    assert [f["registry"][1][0] for f in found] == ["b", "c"]
    assert found[1]["registry"][1][1] == 3


def test_a_registry_call_quoted_in_a_docstring_registers_nothing() -> None:
    text = 'def f():\n    """Uses\n\n    @register_pair("none", "triton")."""\n'
    (found,) = _same([text, text + '\n\n@register_pair("a", "b")\ndef g():\n    pass\n'])[:1]
    assert "registry" not in found


def test_a_registry_call_in_any_triple_quoted_string_registers_nothing() -> None:
    # single-quoted triple strings too, and an unclosed one runs to the end of the blob
    text = (
        "a = '''\n@register_pair(\"x\")\n'''\n@register_pair(\"y\")\n"
        's = """\nregister_pair("z")\n'
    )
    (found,) = _same([text])
    assert found["registry"] == [["y", 4, "register_pair", 0]]
