"""The hand-written docs of a version: which flags and environment variables they name.

Every Markdown or MDX file is read for flag tables: a file is a flag table by what it holds
(rows whose name cell is `--options`), wherever it lives, so a new docs site is found without
a list of paths. Which of them document SGLang's server (rather than the router or a
benchmark script) is decided against the code of each version, in kb/docsdrift.py.

Shapes found in SGLang's history:
- flags, table: `| `--x`<br>`--alias` | Description | Defaults | Options |` (the Options
  cell is `` `a`, `b` `` choices, `Type: int` or `bool flag (set to enable)`), or the older
  `| Arguments | Description | Defaults |`;
- the same as JSX in MDX: `<table>`, `<tr>`, `<th>`/`<td style={{...}}>` cells holding
  backticks or `<code>`, `<br/>` between aliases;
- a name cell in another column (`| `tp` | `--tp-size`, `--tensor-parallel-size` | ... |`);
- flags, bullets (2024, server_arguments.md only): `* `model_path`: description` (dests);
- environment variables, table: `| `SGLANG_X` | Description | Default Value |`.
Files are read as text; nothing else in them is interpreted.
"""

from __future__ import annotations

import re
from typing import Any

FLAGS_DOC = "server_arguments.md"  # the one home of the 2024 bullet shape
ENV_DOC = "environment_variables.md"
DOC_SUFFIXES = (".md", ".mdx")
# Docs of other programs or platforms with their own variables, not SGLang's server.
OTHER_DOCS = ("docs/diffusion/",)

BACKTICKED = re.compile(r"`([^`]+)`")
OPTION_RE = re.compile(r"^--?[A-Za-z0-9][\w-]*$")
ENV_RE = re.compile(r"^[A-Z][A-Z0-9_]*_[A-Z0-9_]+$")
# A bullet naming a dest ("* `tp_size`: ..."), or several ("* `port` and `host`: ...").
DEST = r"`[a-z][a-z0-9_]*`"
BULLET_RE = re.compile(rf"^\s*[*-]\s+({DEST}(?:\s*(?:,|and|or)\s*{DEST})*)\s*:\s*(.*)$")


def doc_kind(path: str) -> str | None:
    """ "env" for the environment variables page, "flags" for every other Markdown or MDX
    file (read for flag tables), else None."""
    if not path.endswith(DOC_SUFFIXES) or path.startswith(OTHER_DOCS):
        return None
    if path.startswith("docs/") and path.rsplit("/", 1)[-1] == ENV_DOC:
        return "env"
    return "flags"


def split_row(line: str) -> list[str]:
    """Cells of a Markdown table row; `|` inside backticks or escaped as `\\|` stays."""
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    cells: list[str] = []
    for part in re.split(r"(?<!\\)\|", body):
        # A cell with an odd number of backticks continues past a `|` inside code.
        if cells and cells[-1].count("`") % 2 == 1:
            cells[-1] += "|" + part
        else:
            cells.append(part)
    out = [c.replace("\\|", "|").strip() for c in cells]
    return out[:-1] if out and not out[-1] else out


def _column(header: list[str], *words: str) -> int | None:
    for i, cell in enumerate(header):
        low = cell.lower()
        if any(w in low for w in words):
            return i
    return None


def plain(cell: str) -> str:
    """A cell's text without backticks, surrounding quotes and <br>."""
    text = cell.replace("<br>", " ").replace("`", "").strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1]
    return text


def _columns(
    header: list[str], seen: dict[tuple[str, ...], tuple[int | None, ...]]
) -> tuple[int | None, ...]:
    """The description, default and options columns of a table's header (`seen`: those of
    the headers met before, as every row of a table asks)."""
    key = tuple(header)
    if key not in seen:
        seen[key] = (
            _column(header, "description"),
            _column(header, "default"),
            _column(header, "option", "choice"),
        )
    return seen[key]


def _options(cell: str) -> tuple[list[str] | None, str | None]:
    """(choices, type) from an Options cell: "`a`, `b`" / "Type: int" / "bool flag ..."."""
    text = cell.strip()
    low = text.lower()
    if low.startswith("type:"):
        return None, text.split(":", 1)[1].strip() or None
    if low.startswith("bool flag"):
        return None, "bool"
    values = BACKTICKED.findall(text)
    if values and not BACKTICKED.sub("", text).replace(",", "").strip():
        return values, None
    return None, None


# JSX tables: a row, and its cells (attributes may hold `style={{...}}`).
HTML_ROW = re.compile(r"<tr\b[^>]*>(.*?)</tr>", re.S)
HTML_CELL = re.compile(r"<(t[dh])\b(?:[^>{]|\{[^}]*\}+)*>(.*?)</\1>", re.S)
HTML_CODE = re.compile(r"<code>(.*?)</code>", re.S)
HTML_BR = re.compile(r"<br\s*/?>")
HTML_TAG = re.compile(r"<[^>]+>")
# A file's tables are flag tables when at least this share of their rows name options (a
# reference, a feature's parameters), not when a guide's tables mention one or two.
FLAG_TABLE_SHARE = 0.5
# What may stand between the names of a name cell: `--tp-size`, `--tp` / `<br>`.
NAME_SEPARATORS = re.compile(r"<br>|[,/\s]")
TableRow = tuple[int, list[str], list[str]]  # (line, header cells, cells)


def _markdown_rows(text: str) -> list[TableRow]:
    """The rows of the Markdown tables, each with its table's header (its first row)."""
    out: list[TableRow] = []
    header: list[str] | None = None
    for no, line in enumerate(text.split("\n"), 1):
        stripped = line.strip()
        if not stripped.startswith("|"):
            header = None
            continue
        cells = split_row(stripped)
        if header is None:
            header = cells
        elif not all(set(c) <= set("-: ") for c in cells):  # not the |---|---| separator
            out.append((no, header, cells))
    return out


def _html_cell(cell: str) -> str:
    """A JSX cell as Markdown cell text: `<code>x</code>` as backticks, `<br/>` as <br>."""
    text = HTML_BR.sub("<br>", HTML_CODE.sub(r"`\1`", cell))
    return " ".join(HTML_TAG.sub(lambda m: m[0] if m[0] == "<br>" else "", text).split())


def _html_rows(text: str) -> list[TableRow]:
    """The rows of the JSX tables, each with the last header row (of `<th>` cells) before."""
    if "<tr" not in text:
        return []
    out: list[TableRow] = []
    header: list[str] = []
    line, counted = 1, 0  # line numbers counted on from the previous row's
    for row in HTML_ROW.finditer(text):
        found = HTML_CELL.findall(row.group(1))
        cells = [_html_cell(c) for _, c in found]
        if found and all(tag == "th" for tag, _ in found):
            header = cells
            continue
        line += text.count("\n", counted, row.start())
        counted = row.start()
        out.append((line, header, cells))
    return out


def _option_names(cell: str) -> list[str]:
    """The options a cell names in backticks; a name broken over two (`--model-loader-`
    <br/> `extra-config`) is one."""
    names: list[str] = []
    for part in (n.strip() for n in BACKTICKED.findall(cell)):
        if names and names[-1].endswith("-") and re.fullmatch(r"[A-Za-z0-9][\w-]*", part):
            names[-1] += part
        elif OPTION_RE.match(part):
            names.append(part)
    return names


def _flag_names(cells: list[str]) -> tuple[int, list[str]]:
    """(column, options) a table row documents: those of its first cell (the name column
    of SGLang's references), else of the first cell holding only option names (`| `tp` |
    `--tp-size` | ...`); a cell of prose that mentions options names none."""
    for i, cell in enumerate(cells):
        names = _option_names(cell)
        if names and (i == 0 or not NAME_SEPARATORS.sub("", BACKTICKED.sub("", cell))):
            return i, names
    return -1, []


def parse_docs(text: str, kind: str, bullets: bool = True) -> list[dict[str, Any]]:
    """Entries {"kind": "flag"|"env", "names", "form": "option"|"dest"|"env", "description",
    "default", "choices", "type", "line"} in file order, from its Markdown and JSX tables
    (and, for flags with `bullets`, the 2024 bullets). Flag rows count only in a file of
    flag tables: most of its table rows (FLAG_TABLE_SHARE) name options."""
    out: list[dict[str, Any]] = []
    if kind == "flags" and bullets:
        for no, line in enumerate(text.split("\n"), 1):
            m = BULLET_RE.match(line)
            if m:  # one entry per name: each is a flag of its own
                for name in BACKTICKED.findall(m.group(1)):
                    out.append(_entry("flag", [name], "dest", m.group(2), None, None, no))
    if kind == "flags" and "--" not in text:
        return out  # most docs files: no option named anywhere
    rows = sorted(_markdown_rows(text) + _html_rows(text), key=lambda r: r[0])
    tables: list[dict[str, Any]] = []
    columns: dict[tuple[str, ...], tuple[int | None, ...]] = {}  # by header
    for no, header, cells in rows:
        if kind == "flags":
            name_col, names = _flag_names(cells)
            form = "option"
        else:
            names = [n.strip() for n in BACKTICKED.findall(cells[0])] if cells else []
            name_col, names = 0, [n for n in names if ENV_RE.match(n)]
            form = "env"
        if not names:
            continue
        desc_col, default_col, options_col = (
            None if col == name_col else col for col in _columns(header, columns)
        )
        choices, type_ = (None, None)
        if options_col is not None and options_col < len(cells):
            choices, type_ = _options(cells[options_col])
        default = (
            plain(cells[default_col])
            if default_col is not None and default_col < len(cells)
            else None
        )
        description = cells[desc_col] if desc_col is not None and desc_col < len(cells) else ""
        tables.append(
            _entry(
                "flag" if kind == "flags" else "env",
                names,
                form,
                description,
                default,
                choices,
                no,
                type_,
            )  # fmt: skip
        )
    if kind == "flags" and len(tables) < FLAG_TABLE_SHARE * len(rows):
        tables = []  # a few options among the rows of a guide's tables: no flag table
    return sorted(out + tables, key=lambda e: e["line"])


def _entry(
    kind: str,
    names: list[str],
    form: str,
    description: str,
    default: str | None,
    choices: list[str] | None,
    line: int,
    type_: str | None = None,
) -> dict[str, Any]:
    return {
        "kind": kind,
        "names": names,
        "form": form,
        "description": description.strip()[:400],
        "default": default,
        "choices": choices,
        "type": type_,
        "line": line,
    }
