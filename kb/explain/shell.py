"""Shell text -> the argv a launch command hands to SGLang's parser.

People paste commands from shell scripts, READMEs, docker-compose files and Kubernetes
manifests: `\\` continuations (with stray trailing blanks), env assignments, `docker run …`,
`bash -c "…"`, pipes, redirections, YAML `command:`/`args:` lists. This module undoes those
and strips the launcher (`python -m sglang.launch_server`, `sglang serve`), reporting what it
could not make sense of as findings.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Finding = dict[str, Any]

ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
PYTHON_EXE = re.compile(r"^(.*/)?python[0-9.]*$")
LAUNCH_MODULE = re.compile(r"(^|[./])launch_server(\.py)?$")
WRAPPERS = {"env", "sudo", "nohup", "exec", "time", "nice", "stdbuf", "command"}
COMMAND_SEPARATORS = {";", "&&", "||", "|", "&", "|&", ";;"}
REDIRECTIONS = {">", ">>", "<", ">&", "&>", "<&", ">|", "&>>", "<<", "<<<"}


def finding(severity: str, flag: str | None, message: str, kind: str, **extra: Any) -> Finding:
    """The Finding shape of the API contract (plus `kind`)."""
    return {
        "severity": severity,
        "flag": flag,
        "message": message,
        "source": None,
        "kind": kind,
        **extra,
    }


@dataclass
class Tokens:
    argv: list[str]  # what argparse would receive
    launcher: str  # the part stripped in front of it, for display
    findings: list[Finding]


def _yaml_flow(line: str) -> str:
    """`["--tp", "8"]` (a Kubernetes/compose list) -> shell words."""
    body = line.strip()
    try:
        items = json.loads(body)
    except ValueError:
        try:
            items = [w.strip().strip(",") for w in shlex.split(body[1:-1].replace(",", " "))]
        except ValueError:
            return line
    if isinstance(items, list) and all(isinstance(i, str | int | float) for i in items):
        return " ".join(shlex.quote(str(i)) for i in items)
    return line


def _preprocess(text: str) -> str:
    """Undo the ways commands are pasted: continuations, manifests, `bash -c` wrappers."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    # `\` + newline is a continuation; tolerate the invisible trailing blanks editors leave.
    text = re.sub(r"\\[ \t]*\n", " ", text)
    lines = []
    for line in text.split("\n"):
        line = re.sub(r"^\s*(command|args|entrypoint)\s*:\s*", "", line, flags=re.I)
        item = re.match(r"^\s*-\s+(.*)$", line)  # a YAML block-sequence item
        if item:
            line = item.group(1)
        if line.strip() in ("|", ">", "|-", ">-", "|+", ">+"):
            continue  # YAML block scalar marker
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            line = _yaml_flow(stripped)
        lines.append(line)
    return "\n".join(lines)


def _split(text: str) -> tuple[list[str], list[Finding]]:
    findings: list[Finding] = []
    # The fd of `2>&1` is only an fd when glued to the operator; shlex would lose that.
    text = re.sub(r"(^|\s)\d+(?=[<>])", r"\1", text)
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer), findings
    except ValueError as exc:
        findings.append(
            finding("error", None, f"the command does not parse as shell text ({exc})", "parse")
        )
    # Unbalanced quote: split what we can so the rest is still explained.
    for closer in ('"', "'"):
        try:
            return shlex.split(text + closer, comments=True), findings
        except ValueError:
            continue
    return text.split(), findings


def shell_words(text: str) -> list[str]:
    """The shell words of pasted text (continuations and manifests undone, nothing dropped)."""
    return _split(_preprocess(text))[0]


def _is_launch_module(token: str) -> bool:
    return bool(LAUNCH_MODULE.search(token))


def tokenize(text: str) -> Tokens:
    """Shell text -> argv after the launcher; junk before the first flag becomes findings."""
    words, findings = _split(_preprocess(text))
    # `bash -c "python -m sglang.launch_server ..."`: the command is one quoted word.
    expanded: list[str] = []
    for word in words:
        if " " in word.strip() and ("launch_server" in word or "sglang serve" in word):
            inner = tokenize(word)
            findings.extend(inner.findings)
            launcher = shlex.split(inner.launcher) or ["python", "-m", "sglang.launch_server"]
            expanded.extend([*launcher, *inner.argv])
        else:
            expanded.append(word)
    # Split into shell commands and keep the one that launches the server.
    commands: list[list[str]] = [[]]
    for word in expanded:
        if word in COMMAND_SEPARATORS:
            commands.append([])
        else:
            commands[-1].append(word)
    chosen = next(
        (c for c in reversed(commands) if _anchor(c) is not None),
        next((c for c in commands if c), []),
    )
    if len([c for c in commands if c]) > 1:
        findings.append(
            finding(
                "info",
                None,
                "the text holds several shell commands: explaining the one that starts the server",
                "parse",
            )
        )
    argv = _drop_redirections(chosen)
    anchor = _anchor(argv)
    if anchor is not None:
        launcher, argv = argv[: anchor + 1], argv[anchor + 1 :]
    else:
        launcher, argv = _strip_launcher(argv, findings)
    return Tokens(argv=argv, launcher=shlex.join(launcher), findings=findings)


def _anchor(words: Sequence[str]) -> int | None:
    """Index of the last word naming the server entry point."""
    found = None
    for i, word in enumerate(words):
        serve = word == "serve" and i > 0 and posixpath.basename(words[i - 1]) == "sglang"
        if serve or _is_launch_module(word):
            found = i
    return found


def _drop_redirections(words: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word in REDIRECTIONS:
            skip = True
            continue
        out.append(word)
    return out


def _strip_launcher(words: list[str], findings: list[Finding]) -> tuple[list[str], list[str]]:
    """No known entry point: drop env assignments, wrappers and `python -m module`."""
    i = 0
    while i < len(words):
        word = words[i]
        if ENV_ASSIGNMENT.match(word) or word in WRAPPERS or word == "export":
            i += 1
        elif PYTHON_EXE.match(word):
            i += 1
            if i + 1 < len(words) and words[i] == "-m":
                findings.append(
                    finding(
                        "warning",
                        None,
                        f"`{words[i + 1]}` is not sglang.launch_server: the flags below are "
                        "checked against the server's flags, so its own options show as unknown",
                        "parse",
                    )
                )
                i += 2
        else:
            break
    return words[:i], words[i:]
