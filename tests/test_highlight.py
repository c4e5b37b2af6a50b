"""The compact highlighter of the source view: every character of the file comes back, each
line is self-contained, and the identifiers the page may link are found."""

from __future__ import annotations

import html
import re

from app.highlight import RECEIVERS, Ref, lexed_lines, linked_html, plain_html, python_lines

TRICKY = '''\
"""Module doc with "quotes" and a # hash,
spanning lines."""
import os  # a comment with 'quotes' and <tags> & ampersands

@dataclasses.dataclass
class ServerArgs:
    x: int = 0x1F + 1e-5 + .5
    def check(self, server_args, args):
        if server_args.tp_size > 1 and args.pp_size and self.dp_size:
            s = f"{self.tp_size!r} and {'nested'}" + r'\\d+' + b"\\x00"
            t = """second
 block""" if isinstance(x, str) else 'fa3'
        return server_args.moe_runner_backend == "flashinfer_cutlass" or "a b" == '--tp-size'
unterminated = "no closing quote
'''


def text_of(line: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", line))


def test_every_character_comes_back_line_by_line() -> None:
    lines = python_lines(TRICKY)
    expected = TRICKY.split("\n")
    assert [text_of(plain_html(line)) for line in lines] == expected
    for line in lines:  # spans open and close on the same line
        markup = plain_html(line)
        assert markup.count("<span") == markup.count("</span>")
    assert "&lt;tags&gt; &amp;" in plain_html(lines[2])


def test_token_classes() -> None:
    lines = [plain_html(line) for line in python_lines(TRICKY)]
    assert lines[0] == '<span class=s>"""Module doc with "quotes" and a # hash,</span>'
    assert lines[1] == '<span class=s>spanning lines."""</span>'  # reopened on the next line
    assert "<span class=c># a comment with 'quotes'" in lines[2]
    assert lines[4] == "<span class=nd>@dataclasses.dataclass</span>"
    assert "<span class=k>class</span> <span class=nc>ServerArgs</span>" in lines[5]
    assert "<span class=m>0x1F</span>" in lines[6] and "<span class=m>1e-5</span>" in lines[6]
    assert "<span class=nf>check</span>" in lines[7]
    assert "<span class=nb>isinstance</span>(" in lines[11]
    assert "x: int" in lines[6]  # `int` as an annotation is not called: no colour


def refs_of(lines: list) -> list[tuple[str, str]]:  # type: ignore[type-arg]
    return [
        (p.kind, p.key)
        for line in lines
        if not isinstance(line, str)
        for p in line
        if isinstance(p, Ref)
    ]


def test_refs_dests_and_plain_strings() -> None:
    found = refs_of(python_lines(TRICKY))
    assert ("dest", "tp_size") in found and ("dest", "pp_size") in found
    assert ("dest", "moe_runner_backend") in found
    assert ("dest", "dp_size") not in found  # `self.x` reads a flag only in server_args.py
    assert ("str", "fa3") in found and ("str", "flashinfer_cutlass") in found
    assert ("str", "--tp-size") in found
    assert ("str", "a b") not in found  # one plain word only
    assert ("str", "nested") not in found  # inside an f-string: part of its token
    assert ("dest", "dp_size") in refs_of(python_lines(TRICKY, RECEIVERS | {"self"}))


def test_strings_know_the_name_they_are_assigned_to() -> None:
    source = """\
FOO_CHOICES = [
    "a",  # in the brackets of FOO_CHOICES, over lines
    ("b", "c"),
]
BAR: List[str] = ["d"]
if x == "e":
    y = {"f": g("h")}
class C:
    mode: A[Literal["eager", "lazy"], Arg(help="x")] = "eager"
"""
    scopes = {
        p.key: p.scope
        for line in python_lines(source)
        if not isinstance(line, str)
        for p in line
        if isinstance(p, Ref)
    }
    assert scopes["a"] == scopes["b"] == scopes["c"] == "FOO_CHOICES"
    assert scopes["d"] == "BAR"  # after the annotation's own brackets
    assert scopes["e"] == ""  # a comparison assigns nothing
    assert scopes["f"] == scopes["h"] == "y"
    assert scopes["lazy"] == "mode" and scopes["eager"] == "mode"


def test_links_are_resolved_per_call() -> None:
    (line,) = python_lines("if server_args.tp_size == 'fa3': pass")
    urls = {"tp_size": "/v/x/flags/--tp-size"}
    out = linked_html(line, lambda ref, n: urls.get(ref.key), 1)
    assert 'server_args.<a href="/v/x/flags/--tp-size">tp_size</a>' in out
    assert "<span class=s>'fa3'</span>" in out  # no URL: the token as it was
    out = linked_html(line, lambda ref, n: "/b?a=1&c=2" if ref.kind == "str" else None, 1)
    assert "<a class=s href=\"/b?a=1&amp;c=2\">'fa3'</a>" in out


def test_other_files_through_pygments() -> None:
    lines = lexed_lines("# Title\n\nSome `code` & <b>.\n", "README.md")
    assert [text_of(line) for line in lines] == ["# Title", "", "Some `code` & <b>.", ""]
    assert lines[0].startswith("<span class=")
    assert lexed_lines("a <b>\n", "noext.unknownkind") == ["a &lt;b&gt;", ""]
