"""The hand-written docs of a version: which flags and environment variables they name.

Shapes found in SGLang's history:
- flags, table: `| `--x`<br>`--alias` | Description | Defaults | Options |` (the Options
  cell is `` `a`, `b` `` choices, `Type: int` or `bool flag (set to enable)`), or the older
  `| Arguments | Description | Defaults |`;
- flags, bullets (2024): `* `model_path`: description` (names are dests);
- environment variables, table: `| `SGLANG_X` | Description | Default Value |`.
Markdown is read as text, line by line; nothing else in the file is interpreted.
"""

from __future__ import annotations

import re
from typing import Any

FLAGS_DOC = "server_arguments.md"
ENV_DOC = "environment_variables.md"
# Docs of other programs or platforms with their own variables, not SGLang's server.
OTHER_DOCS = ("docs/diffusion/",)

BACKTICKED = re.compile(r"`([^`]+)`")
OPTION_RE = re.compile(r"^--?[A-Za-z0-9][\w-]*$")
ENV_RE = re.compile(r"^[A-Z][A-Z0-9_]*_[A-Z0-9_]+$")
# A bullet naming a dest ("* `tp_size`: ..."), or several ("* `port` and `host`: ...").
DEST = r"`[a-z][a-z0-9_]*`"
BULLET_RE = re.compile(rf"^\s*[*-]\s+({DEST}(?:\s*(?:,|and|or)\s*{DEST})*)\s*:\s*(.*)$")


def doc_kind(path: str) -> str | None:
    """ "flags" / "env" for the docs files this module reads, else None."""
    if not path.startswith("docs/") or path.startswith(OTHER_DOCS):
        return None
    name = path.rsplit("/", 1)[-1]
    if name == FLAGS_DOC:
        return "flags"
    if name == ENV_DOC:
        return "env"
    return None


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


def parse_docs(text: str, kind: str) -> list[dict[str, Any]]:
    """Entries {"kind": "flag"|"env", "names", "form": "option"|"dest"|"env", "description",
    "default", "choices", "type", "line"} in file order."""
    out: list[dict[str, Any]] = []
    header: list[str] | None = None
    for no, line in enumerate(text.split("\n"), 1):
        stripped = line.strip()
        if not stripped.startswith("|"):
            header = None
            if kind == "flags":
                m = BULLET_RE.match(line)
                if m:  # one entry per name: each is a flag of its own
                    for name in BACKTICKED.findall(m.group(1)):
                        out.append(_entry("flag", [name], "dest", m.group(2), None, None, no))
            continue
        cells = split_row(stripped)
        if header is None:
            header = cells
            continue
        if all(set(c) <= set("-: ") for c in cells):
            continue  # the |---|---| separator
        names = [n.strip() for n in BACKTICKED.findall(cells[0])] if cells else []
        if kind == "flags":
            names = [n for n in names if OPTION_RE.match(n)]
            form = "option"
        else:
            names = [n for n in names if ENV_RE.match(n)]
            form = "env"
        if not names:
            continue
        desc_col = _column(header, "description")
        default_col = _column(header, "default")
        options_col = _column(header, "option", "choice")
        choices, type_ = (None, None)
        if options_col is not None and options_col < len(cells):
            choices, type_ = _options(cells[options_col])
        default = (
            plain(cells[default_col])
            if default_col is not None and default_col < len(cells)
            else None
        )
        description = cells[desc_col] if desc_col is not None and desc_col < len(cells) else ""
        out.append(
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
    return out


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
