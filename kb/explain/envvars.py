"""Environment variables in a pasted command: where they are set, and what SGLang makes of them.

Set by: assignments before the command (`SGLANG_X=1 python -m …`), `env X=1 …`,
`export X=1`, `docker run -e X=1` / `--env X=1` / `--env=X=1`, a compose `environment:`
list or mapping, a Kubernetes `env:` list (`- name: X` / `value: "1"`).

Checked against the version's variables: an unknown SGLANG_/SGL_ name, or one a letter
away from a known name, gets a did-you-mean (a typo is otherwise silently ignored); a
deprecated name names its replacement; a value is parsed the way its type parses it. The
typed values are handed to the constraint-site evaluator, so `get_bool_env_var("X")` and
`envs.X.get()` in a site's condition are decided when the command sets X.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kb.env import convert, is_deprecated, one_edit
from kb.explain.facts import EnvSpec, VersionFacts
from kb.explain.report import Finding, finding
from kb.explain.shell import COMMAND_SEPARATORS, ENV_ASSIGNMENT, WRAPPERS, shell_words

PREFIXES = ("SGLANG_", "SGL_")
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
YAML_KEY = re.compile(r"^(\s*)(?:-\s+)?(environment|env)\s*:\s*(.*)$")
TRUE_WORDS = ("true", "1", "yes", "y")
FALSE_WORDS = ("false", "0", "no", "n")


@dataclass
class Assignment:
    name: str
    value: str | None  # None: passed through from the host (`docker run -e X`)
    how: str  # prefix | env | export | docker -e | compose | kubernetes | shell | unset | clear


# `env`'s options that start from an empty environment (GNU coreutils).
ENV_CLEAR = ("-i", "-", "--ignore-environment")


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


def yaml_env(text: str) -> list[Assignment]:
    """`environment:` (compose: `- X=1` items or `X: 1` pairs) and `env:` (Kubernetes:
    `- name: X` then `value: "1"`) blocks, read line by line by indentation."""
    out: list[Assignment] = []
    lines = text.replace("\r\n", "\n").split("\n")
    i = 0
    while i < len(lines):
        m = YAML_KEY.match(lines[i])
        i += 1
        if not m or m.group(3).strip() not in ("", "|"):
            continue
        indent = len(m.group(1))
        pending: str | None = None  # a Kubernetes item's name, waiting for its value
        k8s_block = False  # a list of {name, value}: other keys are nested, not variables
        while i < len(lines):
            line = lines[i]
            if (
                line.strip()
                and len(line) - len(line.lstrip()) <= indent
                and not (line.lstrip().startswith("-") and len(line) - len(line.lstrip()) == indent)
            ):
                break
            i += 1
            body = line.strip()
            if not body or body.startswith("#"):
                continue
            item = body[1:].strip() if body.startswith("-") else body
            k8s = re.match(r"^name\s*:\s*(.+)$", item)
            if k8s:
                k8s_block = True
                if pending:
                    out.append(Assignment(pending, None, "kubernetes"))
                pending = _unquote(k8s.group(1))
                continue
            value = re.match(r"^value\s*:\s*(.*)$", item)
            if value and pending:
                out.append(Assignment(pending, _unquote(value.group(1)), "kubernetes"))
                pending = None
                continue
            if re.match(r"^valueFrom\s*:", item) and pending:
                out.append(Assignment(pending, None, "kubernetes"))
                pending = None
                continue
            pair = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", _unquote(item))
            if body.startswith("-") and pair:
                out.append(Assignment(pair.group(1), _unquote(pair.group(2)), "compose"))
                continue
            mapping = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.*)$", item)
            if mapping and not body.startswith("-") and not k8s_block:
                out.append(Assignment(mapping.group(1), _unquote(mapping.group(2)), "compose"))
        if pending:
            out.append(Assignment(pending, None, "kubernetes"))
    return out


def shell_env(text: str) -> list[Assignment]:
    """Assignments in shell words: before a command, after `env`/`export`, and the
    `-e`/`--env` options of `docker run` / `podman run`. Assignments with no command after
    them (`X=1; python …`) are the shell's own variables ("shell"): the command does not
    see them unless `export X` follows."""
    out: list[Assignment] = []
    words = shell_words(text)
    at_start = True  # the word begins a command (assignments allowed)
    container = False  # inside `docker run …` options
    pending: list[Assignment] = []  # assignments before what may be a command
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word in COMMAND_SEPARATORS:
            out.extend(Assignment(a.name, a.value, "shell") for a in pending)
            pending = []
            at_start, container = True, False
            continue
        if container and word in ("-e", "--env") and i < len(words):
            _pair(words[i], "docker -e", out)
            i += 1
            continue
        if container and word.startswith("--env="):
            _pair(word.removeprefix("--env="), "docker -e", out)
            continue
        if container and word.startswith("-e") and len(word) > 2 and "=" in word:
            _pair(word[2:], "docker -e", out)
            continue
        if at_start and ENV_ASSIGNMENT.match(word):
            _pair(word, "prefix", pending)
            continue
        out.extend(pending)  # a command follows them: they are its environment
        pending = []
        if word in ("docker", "podman", "nerdctl"):
            container = True
            at_start = False
            continue
        if word == "env":
            i = _env_words(words, i, out)
            at_start = True
            continue
        if word == "unset" and at_start:  # the shell builtin: `unset [-v] X Y; cmd`
            functions = False
            while i < len(words) and (NAME_RE.match(words[i]) or words[i] in ("-v", "-f")):
                functions = functions or words[i] == "-f"
                if not functions and NAME_RE.match(words[i]):
                    out.append(Assignment(words[i], None, "unset"))
                i += 1
            continue
        if word == "export":
            while i < len(words):
                if ENV_ASSIGNMENT.match(words[i]):
                    _pair(words[i], "export", out)
                else:  # `export X` of a shell variable set before (newlines join words:
                    # any other name may be the next command)
                    shell = [a for a in out if a.name == words[i] and a.how == "shell"]
                    if not shell:
                        break
                    out.append(Assignment(words[i], shell[-1].value, "export"))
                i += 1
            at_start = True  # what follows may be the command (or, unquoted, another one)
            continue
        if word in WRAPPERS:
            while i < len(words) and ENV_ASSIGNMENT.match(words[i]):
                _pair(words[i], "prefix", out)
                i += 1
            at_start = True
            continue
        # The first plain word is the command; a newline-joined `export` may follow later.
        at_start = False
    out.extend(Assignment(a.name, a.value, "shell") for a in pending)
    return out


def _env_words(words: list[str], i: int, out: list[Assignment]) -> int:
    """`env`'s options and assignments from words[i] (GNU coreutils: options until `--` or
    the first assignment, short ones combined as in `-iu NAME`; `-S` splits its string into
    more words); the index of the first word after."""
    options = True
    while i < len(words):
        word = words[i]
        if ENV_ASSIGNMENT.match(word):
            _pair(word, "env", out)
            options = False
        elif not options or not word.startswith("-"):
            break
        elif word == "--":
            options = False
        elif word in ENV_CLEAR:
            out.append(Assignment("", None, "clear"))
        elif word.startswith("--"):
            name, eq, value = word.partition("=")
            if name in ("--unset", "--chdir", "--split-string") and not eq:
                value = words[i + 1] if i + 1 < len(words) else ""
                i += 1
            if name == "--unset":
                out.append(Assignment(value, None, "unset"))
            elif name == "--split-string":
                words[i + 1 : i + 1] = shell_words(value)
            elif name not in ("--chdir", "--null", "--debug"):
                break
        else:
            for at, char in enumerate(word[1:], 2):
                if char == "i":
                    out.append(Assignment("", None, "clear"))
                elif char in "uCS":  # takes the rest of the word, or the next word
                    value = word[at:]
                    if not value and i + 1 < len(words):
                        i += 1
                        value = words[i]
                    if char == "u":
                        out.append(Assignment(value, None, "unset"))
                    elif char == "S":
                        words[i + 1 : i + 1] = shell_words(value)
                    break
                elif char not in "0v":
                    return i  # not an option env has: the command, as far as we can tell
        i += 1
    return i


def _pair(word: str, how: str, out: list[Assignment]) -> None:
    name, eq, value = word.partition("=")
    if NAME_RE.match(name):
        out.append(Assignment(name, value if eq else None, how))


def assignments(text: str) -> list[Assignment]:
    """Every variable the pasted text sets, last setting of a name wins (as in a shell);
    `env -u X` and `unset X` remove X, `env -i` what was set before it."""
    found: dict[str, Assignment] = {}
    for a in shell_env(text) + yaml_env(text):
        if a.how == "clear":
            found.clear()
            continue
        if a.how == "shell" and a.name in found and found[a.name].how != "shell":
            a = Assignment(a.name, a.value, found[a.name].how)  # exported before: still is
        found.pop(a.name, None)
        if a.how != "unset":
            found[a.name] = a
    return list(found.values())


# --- checks ------------------------------------------------------------------------------


def parse_value(spec: EnvSpec, raw: str) -> tuple[Any, str | None]:
    """(the value SGLang reads, a problem or None) for a string set in the environment."""
    low = raw.strip().lower()
    if spec.type == "bool":
        if spec.declared:  # EnvBool: anything else warns and falls back to the default
            if low in TRUE_WORDS:
                return True, None
            if low in FALSE_WORDS:
                return False, None
            return spec.default, (
                f"`{raw}` is not a boolean SGLang accepts ({', '.join(TRUE_WORDS)} / "
                f"{', '.join(FALSE_WORDS)}): it warns and uses the default {spec.default!r}"
            )
        # get_bool_env_var: "true" and "1" are true, anything else is false.
        if low in ("true", "1"):
            return True, None
        if low in ("false", "0", ""):
            return False, None
        return False, f"`{raw}` reads as false here: only `true` and `1` (any case) are true"
    if spec.type == "int":
        try:
            return int(raw.strip()), None
        except ValueError:
            return None, f"`{raw}` is not an integer: SGLang fails or falls back to the default"
    if spec.type == "float":
        try:
            return float(raw.strip()), None
        except ValueError:
            return None, f"`{raw}` is not a number: SGLang fails or falls back to the default"
    if spec.type == "tuple":
        return tuple(s.strip() for s in raw.split(",") if s.strip()), None
    return raw, None


def _close(name: str, known: list[str]) -> list[str]:
    from kb.explain.report import suggest

    near = [k for k in known if one_edit(name, k)]
    if name.startswith(PREFIXES):
        near += suggest(name, [k for k in known if k.startswith(PREFIXES)], limit=3, cutoff=85)
    return list(dict.fromkeys(near))[:3]


def replacement_of(facts: VersionFacts, name: str) -> str | None:
    """What SGLang reads instead of a deprecated `name` (a variable or a `--flag`): its own
    replacement, a variable listing it as a deprecated name, or an `SGL_` -> `SGLANG_` rule."""
    spec = facts.env.get(name)
    if spec is not None and spec.replacement:
        return spec.replacement
    found = next((s.name for s in facts.env.values() if name in s.deprecated_names), None)
    if found is None and spec is None:
        for old, new in facts.env_prefix_aliases:
            if name.startswith(old) and new + name.removeprefix(old) in facts.env:
                return new + name.removeprefix(old)
    return found


def copies_over(facts: VersionFacts, name: str) -> bool:
    """Whether SGLang copies deprecated `name`'s value over its replacement at import (its
    helper calls and the SGL_ -> SGLANG_ rule: the old name wins), rather than reading it
    only while the new name is unset (EnvBoolWithAlias: the new name wins)."""
    return not any(name in s.deprecated_names for s in facts.env.values())


def converted(spec: EnvSpec | None, raw: str) -> tuple[str | None, str | None]:
    """(what SGLang sets the replacement of deprecated `spec` to when `spec` is set to `raw`,
    or None with the reason): `raw` as it is, or converted the way environ.py states it
    (`str(float(v) / 1000.0)`: a cast, then one multiplication or division)."""
    conv = spec.conversion if spec is not None else None
    if conv is None:
        return raw, None
    if "op" not in conv:  # stated in a shape not worked out: no guess
        return None, (
            f"SGLang converts the value with `{conv['expr']}`, which is not worked out here: "
            "the simulation leaves the replacement unset"
        )
    try:
        return convert(conv, raw), None
    except ValueError:
        kind = "a number" if conv["cast"] == "float" else "an integer"
        return None, f"`{raw}` is not {kind}: SGLang's `{conv['expr']}` raises at import"


def fallen_back(facts: VersionFacts, environ: dict[str, str]) -> dict[str, str]:
    """{name: raw value} of the variables the command leaves unset whose default reads
    another variable it sets (`os.environ.get("RUNNER_TEMP", os.environ.get("TMPDIR",
    "/tmp"))`): SGLang reads that value as theirs. Not when the default is only the other
    variable's declared default (`reads` false): setting that variable changes nothing."""
    out: dict[str, str] = {}
    for spec in facts.env.values():
        fb = spec.fallback
        if fb and fb.get("reads") and spec.name not in environ and fb["name"] in environ:
            out[spec.name] = environ[fb["name"]]
    return out


def environ_of(facts: VersionFacts, text: str) -> dict[str, str]:
    """The variables SGLang sees when the command runs: those the command sets, and for a
    deprecated name its replacement variable too (copied over it, or read while it is
    unset: `copies_over`), converted as SGLang converts it (`converted`)."""
    out = {a.name: a.value for a in assignments(text) if a.value is not None and a.how != "shell"}
    for name, value in list(out.items()):
        replacement = replacement_of(facts, name)
        if replacement is not None and replacement in facts.env:
            copied = converted(facts.env.get(name), value)[0]
            if copied is not None and (copies_over(facts, name) or replacement not in out):
                out[replacement] = copied
    return out | fallen_back(facts, out)


def check_env(
    facts: VersionFacts, text: str
) -> tuple[list[dict[str, Any]], dict[str, tuple[Any, str]], list[Finding]]:
    """(rows for the answer, {name: (typed value, raw string)} for the evaluator, findings)."""
    rows: list[dict[str, Any]] = []
    values: dict[str, tuple[Any, str]] = {}
    findings: list[Finding] = []
    if not facts.env:
        return rows, values, findings  # a version ingested before variables were extracted
    known = sorted(facts.env)
    given = assignments(text)
    set_here = {a.name: a.value for a in given if a.how != "shell"}
    late: list[tuple[str, tuple[Any, str], bool]] = []  # deprecated names' values, applied last
    for a in given:
        spec = facts.env.get(a.name)
        if a.how == "shell" and (spec is not None or a.name.startswith(PREFIXES)):
            findings.append(
                finding(
                    "warning",
                    None,
                    f"{a.name}={a.value} sets a shell variable, not the server's environment "
                    "(no command follows it, and it is not exported): SGLang does not see "
                    f"it; write `export {a.name}={a.value}` or put it before the command",
                    "env",
                    spec.source if spec is not None else None,
                    env=a.name,
                )
            )
            continue
        target = spec
        message: str | None = None
        replacement = replacement_of(facts, a.name)
        # SGLang's own deprecation warning names the old name (and a unit change, if any).
        said = f'; SGLang warns: "{spec.comment}"' if spec and a.name in spec.comment else ""
        copy: str | None = a.value  # what SGLang gives the replacement variable
        why: str | None = None  # why nothing: its conversion fails, or is not worked out
        conversion = ""  # said in the deprecation warning
        if replacement is not None and replacement in facts.env:
            target = facts.env[replacement]
            if spec is not None and spec.conversion is not None and a.value is not None:
                copy, why = converted(spec, a.value)
                if copy is not None:
                    conversion = (
                        f"; it converts the value: {a.name}={a.value} → {replacement}={copy}"
                    )
                elif "op" not in spec.conversion:  # (a failing one is an error of its own)
                    conversion = f"; {why}"
            findings.append(
                finding(
                    "warning",
                    None,
                    f"{a.name} is deprecated at {facts.name}: use {replacement} "
                    f"(SGLang still reads the old name for now{conversion}){said}",
                    "env",
                    spec.source if spec is not None else target.source,  # where it is deprecated
                    env=a.name,
                    replacement=replacement,
                )
            )
        elif replacement is not None and replacement.startswith("--") and spec is not None:
            findings.append(
                finding(
                    "warning",
                    None,
                    f"{a.name} is deprecated at {facts.name}: use {replacement}{said}",
                    "env",
                    spec.source,
                    env=a.name,
                    replacement=replacement,
                    replacements=facts.replacement_flags(replacement),
                )
            )
        elif spec is not None and is_deprecated(a.name, None, spec.comment):
            findings.append(
                finding(
                    "warning",
                    None,
                    f"{a.name} is deprecated at {facts.name}{said}",
                    "env",
                    spec.source,
                    env=a.name,
                )
            )
        elif spec is None:
            near = _close(a.name, known)
            if a.name.startswith(PREFIXES) or near:
                message = f"{a.name} is not read by SGLang at {facts.name}: it is silently ignored"
                if near:
                    message += f"; did you mean {' or '.join(near)}?"
                findings.append(
                    finding(
                        "warning",
                        None,
                        message,
                        "env",
                        facts.env[near[0]].source if near else None,
                        env=a.name,
                        suggestions=near,
                    )
                )
        value: Any = a.value
        if target is not None and a.value is not None:
            own = parse_value(target, a.value)[0]  # the old name keeps its value as set
            value, problem = parse_value(target, a.value if copy is None else copy)
            if copy is None:  # converted, but not here: the raw value says nothing of its type
                problem = None
                if spec is not None and "op" in (spec.conversion or {}):
                    # SGLang's conversion (`float(v) / 1000.0`) raises: it does not start.
                    findings.append(
                        finding("error", None, f"{a.name}: {why}", "env", spec.source, env=a.name)
                    )
            if problem and not target.declared and target.type in ("int", "float"):
                # An undeclared variable's type is a guess from one `int(...)` read (the
                # CUDA_VISIBLE_DEVICES of a single-GPU path): not enough to warn.
                problem = None
            if problem:
                findings.append(
                    finding(
                        "warning", None, f"{a.name}: {problem}", "env", target.source, env=a.name
                    )
                )
            if target is spec:
                values[target.name] = (value, a.value)
            else:
                copied = copies_over(facts, a.name)
                if copy is not None:
                    late.append((target.name, (value, copy), copied))
                new_value = set_here.get(target.name)
                if new_value is not None:  # both names set: say which one SGLang keeps
                    how = (
                        f"{a.name}={a.value} (it copies {a.name} over {target.name} at import"
                        + (f", as {target.name}={copy})" if copy not in (None, a.value) else ")")
                        if copied
                        else f"{target.name}={new_value} ({a.name} is read only while "
                        f"{target.name} is unset)"
                    )
                    findings.append(
                        finding(
                            "warning",
                            None,
                            f"{a.name} and {target.name} are both set: SGLang uses {how}",
                            "env",
                            spec.source if spec is not None else target.source,
                            env=a.name,
                        )
                    )
            values.setdefault(a.name, (own, a.value))
        rows.append(
            {
                "name": a.name,
                "value": a.value,
                "how": a.how,
                "known": target is not None,
                "variable": target.name if target else None,
                "type": target.type if target else None,
                "parsed": value if target is not None else None,
                "default": target.default if target else None,
                "url": facts.env_url(target.name) if target else None,
                "source": target.source if target else None,
            }
        )
    for name, typed, copied in late:
        if copied:
            values[name] = typed
        else:
            values.setdefault(name, typed)
    raw = {name: value[1] for name, value in values.items()}
    for name, value in fallen_back(facts, raw).items():
        values[name] = (parse_value(facts.env[name], value)[0], value)
    return rows, values, findings
