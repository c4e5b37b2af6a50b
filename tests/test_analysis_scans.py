"""The per-blob scans' faster paths give what the plain walks they replace give (synthetic
sources modelled on SGLang's shapes)."""

from __future__ import annotations

from ingest import sites
from ingest.carriers import find_carriers
from ingest.choices import scan_choice_shapes
from ingest.env import _Text, scan_env
from ingest.pyfile import Def, PyFile

NESTED = """\
import os


class Scheduler:
    def __init__(self, server_args):
        self.a = server_args.alpha

        def helper():
            if server_args.beta:
                return server_args.gamma
            return None

        self.b = helper()

    @property
    def mode(self):
        return self.a

    def other(self):
        pass


def module_level(server_args):
    x = 1
    return server_args.delta


if True:
    def under_if():
        return 2
y = 3
"""


def _enclosing_by_walk(f: PyFile, line: int) -> Def | None:
    """The rule enclosing() implements, walking back through every def above the line."""
    text = f.lines[line - 1]
    limit = len(text) - len(text.lstrip(" \t")) if text.strip() else 1 << 30
    for d in reversed([d for d in f.defs if d.line < line]):
        if d.indent >= limit:
            continue
        if f.end_of(d) >= line:
            return d
        limit = d.indent
    return None


def test_enclosing_follows_parents_as_the_walk_back_does() -> None:
    f = PyFile(NESTED)
    found = {line: f.enclosing(line) for line in range(1, len(f.lines) + 1)}
    assert found == {line: _enclosing_by_walk(f, line) for line in found}
    assert found[10] is not None and found[10].name == "helper"
    assert found[13] is not None and found[13].name == "__init__"
    assert found[25] is not None and found[25].name == "module_level"
    assert found[31] is None  # `y = 3` at module level after a def nested in an `if`


def test_carriers_with_global_and_accessors() -> None:
    text = (
        "IS_X = None\n\n\ndef init(server_args):\n    global IS_X\n"
        "    IS_X = server_args.enable_x\n\n\ndef is_x_enabled():\n    return IS_X\n"
    )
    carriers = find_carriers(text, {6})
    assert [(c["name"], c["kind"], c["dests"]) for c in carriers] == [
        ("IS_X", "global", ["enable_x"]),
        ("is_x_enabled", "function", ["enable_x"]),
    ]
    # Without the word `global` in the file, a function's assignment carries nothing.
    assert find_carriers(text.replace("global IS_X", "pass"), {6}) == []


def test_a_global_assigned_a_local_holding_a_flag() -> None:
    """`enable = server_args.enable_dp` then `_FLAG = enable` in a function declaring the
    global: `_FLAG` carries the flag (and so does its accessor); a local assigned twice is
    not followed."""
    text = (
        "_FLAG = None\n_OTHER = None\n\n\ndef init(server_args, n):\n"
        "    global _FLAG, _OTHER\n    enable = server_args.enable_dp\n"
        "    size = server_args.dp_size\n    size = size * n\n"
        "    _FLAG = enable\n    _OTHER = size\n\n\n"
        "def is_dp_enabled():\n    return _FLAG\n"
    )
    carriers = find_carriers(text, {7, 8})
    assert [(c["name"], c["dests"]) for c in carriers] == [
        ("_FLAG", ["enable_dp"]),
        ("is_dp_enabled", ["enable_dp"]),
    ]


def test_a_dict_of_flags_by_key_is_no_carrier() -> None:
    """`D = {"a": server_args.a, "b": server_args.b}`: its uses read one key each (`D["a"]`,
    found as reads by the site scan); as a carrier every use would carry both flags."""
    text = (
        "D = None\n\n\ndef init(server_args):\n    global D\n    D = {\n"
        '        "enable_a": server_args.enable_a,\n        "enable_b": server_args.enable_b,\n'
        "    }\n"
    )
    assert find_carriers(text, {7, 8}) == []


def test_a_local_name_of_the_server_args_carries() -> None:
    """`sa = get_global_server_args()` then `return sa.enable_cp and ...`: an accessor, as
    `return get_global_server_args().enable_cp` is (the reads come from the site scan)."""
    text = (
        "from sglang.srt.server_args import get_global_server_args\n\n\n"
        "def is_cp_enabled():\n    sa = get_global_server_args()\n"
        "    return sa.enable_cp and sa.cp_size > 1\n"
    )
    reads = {line for _n, line, _a in sites.scan(text.encode())["reads"]}
    assert reads == {6}
    want = [("is_cp_enabled", "function", ["enable_cp", "cp_size"])]
    assert [(c["name"], c["kind"], c["dests"]) for c in find_carriers(text, reads)] == want
    # bound otherwise elsewhere in the file, the same block carries nothing
    other = text + "\n\ndef f():\n    sa = make()\n    return sa\n"
    assert find_carriers(other, reads) == []


def test_shallower_line_on_the_first_line_and_far_above() -> None:
    body = "".join(f"        x{i} = {i}\n" for i in range(400))  # a deep block of 5 KB
    data = ("if cond:\n    def f():\n" + body + '        os.environ["SGLANG_A"] = "1"\n').encode()
    text = _Text(data)
    site = data.index(b'        os.environ["SGLANG_A"]')
    assert text._shallower_before(site, 8) == data.index(b"    def f")
    assert text._shallower_before(data.index(b"    def f"), 4) == 0  # the first line
    assert text.context(site) == ("f", [])


def test_env_site_conditions_read_through_the_shallower_walk() -> None:
    data = (
        "def setup(server_args):\n"
        + "".join(f"    y{i} = {i}\n" for i in range(300))
        + "    if server_args.enable_nvls:\n"
        + '        os.environ["NCCL_NVLS_ENABLE"] = "1"\n'
    ).encode()
    (site,) = scan_env(data)[0]
    assert site[0] == "NCCL_NVLS_ENABLE" and site[3] == "write"
    assert site[7:] == ["setup", ["enable_nvls"]]


def test_constants_keep_their_first_place_and_last_value() -> None:
    data = b'B_CHOICES = ("x", "y")\nA_CHOICES = ["a", "b"]\nC_CHOICES = {"c"}\nB_CHOICES = ["z"]\n'
    consts = scan_choice_shapes(data, [])["consts"]
    # Taken opener by opener ("[", then "(", then "{"), each in file order.
    assert list(consts.items()) == [
        ("A_CHOICES", ["a", "b"]),
        ("B_CHOICES", ["x", "y"]),
        ("C_CHOICES", ["c"]),
    ]


ENUM_BLOCK = b"""class AttentionBackend(str, Enum):
    FA3 = "fa3"
    TRITON = "triton"
    OPTIONS = ["a", "b"]

    def is_fa3(self):
        return self == AttentionBackend.FA3
"""


def test_enum_blocks_parsed_once_keep_each_files_lines() -> None:
    from ingest.sites import scan_enums

    first = scan_enums(b"import enum\n\n" + ENUM_BLOCK)
    # The same block further down another file: its lines are that file's (the block's
    # parse is shared, its numbering is not).
    second = scan_enums(b"import enum\n" + b"x = 1\n" * 10 + b"\n" + ENUM_BLOCK + b"y = 2\n")
    for enums, at in ((first, 3), (second, 13)):
        (enum,) = enums
        assert (enum["name"], enum["line"], enum["end_line"]) == ("AttentionBackend", at, at + 6)
        assert [(m["name"], m["value"], m["line"]) for m in enum["members"]] == [
            ("FA3", "fa3", at + 1),
            ("TRITON", "triton", at + 2),
            ("OPTIONS", ["a", "b"], at + 3),
        ]
        assert enum["is_methods"] == {"fa3": "FA3"}
    # A caller changing what it got changes nothing for the next file with the block.
    first[0]["members"][2]["value"].append("c")
    first[0]["is_methods"].clear()
    (again,) = scan_enums(ENUM_BLOCK)
    assert again["members"][2]["value"] == ["a", "b"] and again["is_methods"] == {"fa3": "FA3"}


def test_line_state_tells_code_comments_and_strings_apart() -> None:
    line_state = sites.line_state
    assert line_state("x = server_args.") == "code"
    assert line_state("x = 1  # server_args.") == "comment"
    assert line_state('s = "#" + server_args.') == "code"  # a `#` in a string
    assert line_state('s = "use envs.') == "string"
    assert line_state('s = f"{envs.') == "fstring"  # `{...}` of an f-string is code
    assert line_state('s = rf"{envs.') == "fstring"
    assert line_state('s = "a \\" # b') == "string"  # an escaped quote closes nothing
    assert line_state('s = """a " # b') == "string"  # one `"` ends no triple quote
    assert line_state('s = """a""" # b') == "comment"


def test_local_lead_test_is_any_lead_in_the_text() -> None:
    texts = [b"", b"x = server_args.y", b"a.server_args.b", b"= get_global_server_args().z",
             b"v = self.w", b"server_args", b"get_global_server_args()", b"= self"]  # fmt: skip
    for text in texts:
        want = any(lead in text for lead in sites.LOCAL_LEADS)
        assert sites._has_local_lead(text, sites.LineIndex(text)) is want, text
