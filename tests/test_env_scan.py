"""The environment scan where a call, a default, a statement or a block is cut by a blank
line, and the block contexts of its sites, on synthetic sources in SGLang's shapes."""

from __future__ import annotations

from typing import Any

from ingest.env import scan_env


def both(*versions: str, flags_file: bool = False) -> list[Any]:
    """Each text's sites and line texts."""
    return [scan_env(version.encode(), flags_file) for version in versions]


def site(found: Any, name: str) -> list[Any]:
    return next(s for s in found[0] if s[0] == name)


def test_a_call_cut_by_a_blank_line() -> None:
    # environ.get( ... blank line ... "NAME": the name alone would be a bare literal.
    (found,) = both('import os\nX = os.environ.get(\n\n    "SGLANG_CUT", "1")\n')
    assert site(found, "SGLANG_CUT")[3:6] == ["read", "environ.get", "1"]


def test_a_default_after_a_blank_line() -> None:
    (found,) = both('import os\nX = os.getenv("SGLANG_D",\n\n    "fast")\n')
    assert site(found, "SGLANG_D")[4:6] == ["getenv", "fast"]
    (found,) = both('import os\nX = get_int_env_var("SGLANG_N",\n\n    7)\n')
    assert site(found, "SGLANG_N")[4:6] == ["get_int_env_var", 7]


def test_a_subscript_closed_after_a_blank_line_is_a_write() -> None:
    (found,) = both('import os\nos.environ[\n    "SGLANG_W"\n\n] = "1"\n')
    assert site(found, "SGLANG_W")[3] == "write"


def test_a_statement_cut_by_a_blank_line_keeps_its_end() -> None:
    (found,) = both('import os\nX = int(os.environ.get("SGLANG_S", "2")\n\n    + 1)\nY = 2\n')
    assert site(found, "SGLANG_S")[1:3] == [2, 4]


RUNNER_V1 = """import os


def setup(server_args):
    if server_args.enable_alpha:
        x = 1

        os.environ["NCCL_ALPHA"] = "1"
    return x
"""


def test_a_block_header_above_a_blank_line() -> None:
    v2 = RUNNER_V1.replace("enable_alpha", "enable_beta")
    first, second = both(RUNNER_V1, v2)
    assert site(first, "NCCL_ALPHA")[7:] == ["setup", ["enable_alpha"]]
    assert site(second, "NCCL_ALPHA")[7:] == ["setup", ["enable_beta"]]
    # and a def put between
    third = v2.replace(
        "def setup(server_args):", "def setup(server_args):\n    pass\n\ndef other():"
    )
    assert site(both(v2, third)[1], "NCCL_ALPHA")[7] == "other"


def test_a_text_repeated_in_a_file_has_each_places_context() -> None:
    body = '        os.environ["NCCL_REPEAT"] = "1"\n'
    text = (
        "import os\n\n\ndef a(server_args):\n    if server_args.one:\n        pass\n\n"
        + body
        + "\n\ndef b(server_args):\n    if server_args.two:\n        pass\n\n"
        + body
    )
    (found,) = both(text)
    assert [s[7:] for s in found[0]] == [["a", ["one"]], ["b", ["two"]]]


def test_a_context_that_reached_the_start_of_the_blob() -> None:
    # At the start the walk finds nothing above; with a def put above, the site lies under
    # it.
    line = '    os.environ["SGLANG_TOP"] = server_args.top\n'
    first, second = both(line, "def f(server_args):\n\n" + line)
    assert site(first, "SGLANG_TOP")[7:] == ["", ["top"]]
    assert site(second, "SGLANG_TOP")[7:] == ["f", ["top"]]
    # The walk up searched every line above for a shallower one and found none.
    first, second = both("    x = 1\n\n" + line, "def f(server_args):\n    x = 1\n\n" + line)
    assert site(first, "SGLANG_TOP")[7] == ""
    assert site(second, "SGLANG_TOP")[7] == "f"


def test_a_statement_that_reached_the_end_of_the_blob() -> None:
    head = 'def f(server_args):\n    x = os.environ.get("SGLANG_END", g(server_args.a,'
    first, second = both(head, head + "\n\n        server_args.b))\n")
    assert site(first, "SGLANG_END")[8] == ["a"]
    assert site(second, "SGLANG_END")[8] == ["a", "b"]


def test_self_reads_are_flag_reads_in_the_flags_file_only() -> None:
    data = b"def f(self, server_args):\n    if self.tp_size:\n        envs.SGLANG_FLAG.set(1)\n"
    for flags_file, dests in ((True, ["tp_size"]), (False, [])):
        assert site(scan_env(data, flags_file), "SGLANG_FLAG")[8] == dests


def test_docstrings_dict_keys_and_split_calls() -> None:
    # A docstring with blank lines reads nothing; a call split over lines counts once.
    old = 'class A:\n    """Usage:\n\n        X = get_bool_env_var("SGLANG_DOC")\n    """\n'
    new = (
        old + '\n\nENV = {\n    "SGLANG_KID": "1",\n}\nY = get_int_env_var(\n    "SGLANG_Y", 3\n)\n'
    )
    first, second = both(old, new)
    assert first == ([], {})
    assert [s[:5] for s in second[0]] == [
        ["SGLANG_KID", 9, 9, "write", "dict key"],
        ["SGLANG_Y", 11, 13, "read", "get_int_env_var"],
    ]


def test_each_call_shape_at_the_very_start_and_end_of_a_blob() -> None:
    # Every pattern is matched where its literal stands around an "env" of the file: the
    # first bytes and the last hold one each, and a call right after another's name.
    for text, name, how in [
        ('getenv("SGLANG_A")', "SGLANG_A", "getenv"),
        ('environ["SGLANG_B"]', "SGLANG_B", "environ[]"),
        ('_env("SGLANG_C")', "SGLANG_C", "_env"),
        ('env_flag("SGLANG_D")', "SGLANG_D", "env_flag"),
        ("envs.SGLANG_E.get()", "SGLANG_E", "envs.get"),
        ('"SGLANG_F" in environ', "SGLANG_F", "in environ"),
    ]:
        for source in (text, "x = 1\n" + text, f'y = os.getenv("SGLANG_Z")\n{text}'):
            (found,) = both(source)
            assert site(found, name)[4] == how, source
