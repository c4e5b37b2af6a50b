"""Every flag table of a version, not one: found by what the docs files hold (Markdown, JSX
in MDX, Markdown in MDX), each against the code and against each other."""

from __future__ import annotations

from flag_tables_repo import (
    COOKBOOK_MDX,
    GUIDE,
    JSX_TABLE,
    MDX_MARKDOWN_TABLE,
    REFERENCE_MDX,
    ROUTER,
)

from ingest.analyze import kind_of
from ingest.docs import parse_docs


def test_a_jsx_table_in_mdx() -> None:
    rows = parse_docs(JSX_TABLE, "flags", bullets=False)
    assert [r["names"] for r in rows] == [
        ["--model-path"],
        ["--dtype"],
        ["--tp-size", "--tensor-parallel-size"],  # aliases after <br/>
        ["--port"],
        ["--mem-fraction-static"],  # a name broken over two backticked parts is one
        ["--disable-cuda-graph"],
        ["--schedule-policy"],
        ["--phantom-flag"],
    ]  # and no row for `--tp 2` in the prose
    dtype = rows[1]
    assert (dtype["default"], dtype["choices"]) == ("half", ["auto", "half"])
    assert dtype["description"] == "Weights' type."  # tags dropped, text kept
    assert rows[0]["type"] == "str" and rows[0]["default"] == "None"
    lines = JSX_TABLE.split("\n")
    assert all(lines[r["line"] - 1].strip().startswith("<tr") for r in rows)


def test_a_markdown_table_in_mdx_with_the_option_in_another_column() -> None:
    rows = parse_docs(MDX_MARKDOWN_TABLE, "flags", bullets=False)
    assert [r["names"] for r in rows] == [["--tp-size", "--tensor-parallel-size"], ["--port"]]
    assert rows[0]["description"] == "Tensor parallel degree."
    # A cell of prose that mentions an option names none.
    prose = "| A | B |\n| --- | --- |\n| x | Add `--port` to listen |\n| y | `--port` |\n"
    assert [r["names"] for r in parse_docs(prose, "flags", bullets=False)] == [["--port"]]


def test_a_guide_mentioning_an_option_has_no_flag_table() -> None:
    assert parse_docs(GUIDE, "flags", bullets=False) == []
    # The router's table is a flag table by its shape; kb/docsdrift.py leaves it out
    # because most of its options are not the server's.
    assert len(parse_docs(ROUTER, "flags", bullets=False)) == 3


def test_every_markdown_file_is_read_for_flag_tables() -> None:
    assert kind_of(REFERENCE_MDX) == kind_of(COOKBOOK_MDX) == "docs_flags"
    assert kind_of("python/sglang/srt/arg_groups/README.md") == "docs_flags"  # not a hook
    assert kind_of("docs/references/environment_variables.md") == "docs_env"
    assert kind_of("docs/diffusion/cli.md") == "plain"  # another program's docs
