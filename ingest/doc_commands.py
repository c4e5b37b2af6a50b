"""The launch commands a Markdown/MDX file shows: `python -m sglang.launch_server ...`,
`python3 -m ...`, `sglang serve ...`, with environment-variable prefixes and `docker run`
wrappers kept, as an engineer would copy them.

Where they are looked for: fenced code blocks (any language: shell, Python strings, YAML),
indented code blocks (a command at the start of the block's line) and inline code spans of
the prose. A backslash at the end of a line continues the command on the next line of the
same block. A command ends at a shell separator (`;`, `&&`, `||`, `|`, `&`), a redirection
or a `#` comment outside quotes; a command inside a quoted string ends with the string. A
comment line that is a command (`# python -m sglang.launch_server ...`, as Python examples
show the server they need) is one.
Templates (`<model>`, `[model]`, `$VAR`, `${VAR}`, `{name}`, `...`) from the launcher on
are not commands SGLang could be given as they stand: they are counted as skipped. Text
only: nothing is run or parsed as a whole document.
"""

from __future__ import annotations

import re
from typing import Any

MARKDOWN_SUFFIXES = (".md", ".mdx")

# The launcher, from a path to the interpreter if there is one; not `sglang_router.…`, not
# inside a longer word or a grep pattern (`'sglang.launch_server\\|sglang serve'`).
LAUNCHER_RE = re.compile(
    r"(?<![\w.\-/\\|])(?:(?:[\w.\-/]*/)?python[0-9.]*\s+-m\s+sglang\.launch_server(?![\w.])"
    r"|sglang\s+serve(?![\w\-]))"
)
QUICK = ("launch_server", "serve")  # a line without either holds no command
HINT_RE = re.compile(r"launch_server|sglang\s+serve")  # a file without it holds none
FENCE_RE = re.compile(r"^\s*(`{3,}|~{3,})")
FENCES = ("```", "~~~")
INLINE_RE = re.compile(r"`([^`\n]+)`")
PLACEHOLDER_RE = re.compile(r"<[A-Za-z_][^<>\n]{0,80}>")
# `[model_path]`, `[xgrammar|outlines]` as a word of its own (not a JSON list in quotes)
BRACKETED_RE = re.compile(r"\[[A-Za-z_][^\[\]\n'\"]{0,80}\]")
TEMPLATE_RES = (
    PLACEHOLDER_RE,
    re.compile(r"\$\{?[A-Za-z_]"),  # $VAR, ${VAR}
    re.compile(r"\{\s*[A-Za-z_][\w.\-]*\s*\}"),  # {model_path}
    re.compile(r"\.\.\.|…"),
)
LEAD_RE = re.compile(r"^(?:[$>!]\s*|(?:command|args|entrypoint)\s*:\s*|-\s+)+")
SEPARATORS = ";|&"
TRIPLE_QUOTES = ('"""', "'''")
CONTINUED_RE = re.compile(r"\\[ \t]*$")


# The diffusion server's docs: `sglang serve` starts that other program (its own ServerArgs,
# `--num-gpus`, `--ulysses-degree`) for a diffusion model, so its commands are not this one's.
OTHER_PROGRAM_DOCS = re.compile(r"(^|/)(sglang-)?diffusion/")


def is_markdown(path: str) -> bool:
    """A Markdown/MDX file whose commands start SGLang's language-model server."""
    return path.endswith(MARKDOWN_SUFFIXES) and not OTHER_PROGRAM_DOCS.search(path)


def extract_commands(text: str) -> dict[str, Any]:
    """{"commands": [[line, command]], "skipped": templates left out}, in line order."""
    commands: list[list[Any]] = []
    skipped = 0
    if not HINT_RE.search(text):
        return {"commands": commands, "skipped": 0}
    for block, anchored in _blocks(text.splitlines()):
        for line, command, template in _block_commands(block, anchored):
            if template:
                skipped += 1
            else:
                commands.append([line, command])
    commands.sort(key=lambda c: c[0])
    return {"commands": commands, "skipped": skipped}


Block = list[tuple[int, str]]  # (line number, text) of consecutive lines


def _blocks(lines: list[str]) -> list[tuple[Block, bool]]:
    """The code of the file as blocks: (lines, whether a command must start a line)."""
    out: list[tuple[Block, bool]] = []
    fence: str | None = None
    fenced: Block = []
    indented: Block = []
    for no, line in enumerate(lines, 1):
        mark = FENCE_RE.match(line) if line.lstrip()[:3] in FENCES else None
        if fence is not None:
            if mark and mark.group(1)[0] == fence[0] and len(mark.group(1)) >= len(fence):
                out.append((fenced, False))
                fence, fenced = None, []
            else:
                fenced.append((no, line))
            continue
        if mark:
            if indented:
                out.append((indented, True))
                indented = []
            fence = mark.group(1)
            continue
        if line.startswith(("    ", "\t")) and line.strip():
            indented.append((no, line))
        elif indented:
            out.append((indented, True))
            indented = []
        if "`" in line and ("launch_server" in line or "serve" in line):
            out.extend(([(no, m.group(1))], False) for m in INLINE_RE.finditer(line))
    if fenced:  # an unclosed fence runs to the end of the file
        out.append((fenced, False))
    if indented:
        out.append((indented, True))
    return [(b, anchored) for b, anchored in out if any(q in t for _n, t in b for q in QUICK)]


def _logical_lines(block: Block) -> list[tuple[str, list[tuple[int, int]]]]:
    """Lines joined across `\\` continuations: (text, [(offset in text, line number)])."""
    out: list[tuple[str, list[tuple[int, int]]]] = []
    text, starts = "", []
    for no, line in block:
        starts.append((len(text), no))
        cont = CONTINUED_RE.search(line)
        if cont:
            text += line[: cont.start()] + " "
            continue
        out.append((text + line, starts))
        text, starts = "", []
    if starts:
        out.append((text, starts))
    return out


def _block_commands(block: Block, anchored: bool) -> list[tuple[int, str, bool]]:
    """(line, command, is a template) of each launcher in the block."""
    out = []
    for text, starts in _logical_lines(block):
        if "launch_server" not in text and "serve" not in text:
            continue
        for match in LAUNCHER_RE.finditer(text):
            found = _command_at(text, match.start(), match.end())
            if found is None:
                continue
            start, command, template = found
            if anchored and text[:start].strip():
                continue  # indented prose, not a command line
            line = next(no for offset, no in reversed(starts) if offset <= start)
            out.append((line, command, template))
    return out


def _command_at(text: str, at: int, launcher_end: int) -> tuple[int, str, bool] | None:
    """The simple command around the launcher at `at`: (start, text, is a template), or
    None when the launcher is commented out or given nothing."""
    boundary = 0  # where the simple command holding `at` starts
    quote: str | None = None
    outer = 0  # the boundary outside the open quote
    i = 0
    while i < at:
        ch = text[i]
        if quote is not None:
            if ch == quote:
                quote, boundary = None, outer
            elif ch == "\\" and quote == '"':
                i += 1
            elif ch in SEPARATORS:
                boundary = i + 1
        elif ch in "'\"":
            quote, outer, boundary = ch, boundary, i + 1
        elif ch == "\\":
            i += 1
        elif ch in SEPARATORS:
            boundary = i + 1
        elif ch == "#" and (i == 0 or text[i - 1].isspace()):
            if text[:i].strip() or text[i + 1 : at].strip(" \t$"):
                return None  # the launcher is in a comment after other text
            boundary = i + 1  # a comment that is the command: `# python -m ...` shows it
        i += 1
    end, template = _command_end(text, launcher_end, quote)
    head = text[boundary:at]
    lead = LEAD_RE.match(head.lstrip())
    start = boundary + (len(head) - len(head.lstrip())) + (lead.end() if lead else 0)
    command = " ".join(text[start:end].split())
    if not text[launcher_end:end].strip():
        return None
    # A template in a wrapper (`docker run -e "TOKEN=<secret>" <image>`) leaves SGLang's
    # arguments as they are: only the launcher and what follows it are judged.
    own = text[at:end]
    template = template or any(r.search(own) for r in TEMPLATE_RES)
    return start, command, template


# What can end a command or change how it is read; the text between is skipped in one search.
SPECIAL_RE = re.compile(r"[\"'\\<>\[;|&#]")
QUOTE_END_RE = {'"': re.compile(r'["\\]'), "'": re.compile("'")}


def _command_end(text: str, i: int, quote: str | None) -> tuple[int, bool]:
    """Where the command from `i` ends (inside the `quote` it started in, if any), and
    whether a `<placeholder>` or `[placeholder]` was passed on the way."""
    inner: str | None = None
    template = False
    while True:
        if inner is not None:  # inside a quoted word: to its closing quote
            found = QUOTE_END_RE[inner].search(text, i)
            if found is None:
                return len(text), template
            i = found.end() + (1 if found.group() == "\\" else 0)
            if found.group() == inner:
                inner = None
            continue
        found = SPECIAL_RE.search(text, i)
        if found is None:
            return len(text), template
        i = found.start()
        ch = text[i]
        if quote is not None and ch == quote:
            return i, template
        if ch in "'\"":
            if text.startswith(TRIPLE_QUOTES, i):
                return i, template  # the end of the Python string the command was written in
            inner, i = ch, i + 1
        elif ch == "\\":
            i += 2
        elif (ch == "<" and (hole := PLACEHOLDER_RE.match(text, i))) or (
            ch == "[" and text[i - 1].isspace() and (hole := BRACKETED_RE.match(text, i))
        ):
            template, i = True, hole.end()
        elif ch == "[" or (ch == "#" and not text[i - 1].isspace()):
            i += 1
        elif ch == "#":
            return i, template
        else:  # a separator or a redirection
            return _before_fd(text, i), template


def _before_fd(text: str, i: int) -> int:
    """The end of a command cut at a redirection: `2>&1` takes its digits with it."""
    j = i
    while j > 0 and text[j - 1].isdigit():
        j -= 1
    return j if j < i and (j == 0 or text[j - 1].isspace()) else i
