"""Docs drift: a version's hand-written docs against its code, for flags and env variables.

Three lists per kind: named in the code but missing from the docs, named in the docs but
absent from the code, and stated differently (default, choices, a deprecated spelling).
Every row cites both sides: the docs line and the code line (for a missing flag, the docs
row of the documented flag just before it in the code, where its row would go).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from rapidfuzz import fuzz
from sqlmodel import Session, select

from kb.dests import dest_rank
from kb.env import all_env, is_deprecated
from kb.order import in_order
from kb.queries import all_flags, citation, version_paths
from kb.replacements import replacement_names
from kb.schema import DocEntry, EnvVar, Flag, Version, loads

FLAGS_DOC = "server_arguments.md"
ENV_DOC = "environment_variables.md"
TEST_PATHS = ("python/sglang/test/", "test/")
NONE_WORDS = {"none", "null", "not set", "unset", "", "-", "—", "n/a"}
TRUE_WORDS = {"true", "1", "yes", "y", "on", "enabled"}
FALSE_WORDS = {"false", "0", "no", "n", "off", "disabled"}
# A docs row saying its name gave way to another (which it then names).
GAVE_WAY = re.compile(r"deprecat|instead|\balias\b|renamed|replaced", re.I)
NAMED = {
    "flag": re.compile(r"--[A-Za-z0-9][\w-]*"),
    "env": re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+"),
}
TYPO = 90  # fuzz.ratio of two names that differ by a slip (`--oltp-…` for `--otlp-…`)
MAX_EXTRA_WORDS = 2  # `--nsa-prefill` for `--nsa-prefill-backend`: words left out
GENERIC = {"enable", "disable", "sglang", "sgl"}  # words too common to make names alike


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[-_]+", name.lower()) if w]


def _close(a: str, b: str) -> float | None:
    """Whether two names are alike, or None: a slip of spelling (fuzz.ratio ≥ TYPO, which
    is returned), or one name's words all in the other's, in order, with at most
    MAX_EXTRA_WORDS more and at least two telling ones in common (0: how many more does not
    rank them).
    Sharing a word or two (`--enable-…`) is no likeness: a suggestion must be worth
    following."""
    score = fuzz.ratio(a.lstrip("-").lower(), b.lstrip("-").lower())
    if score >= TYPO:
        return score
    short, long = sorted((_words(a), _words(b)), key=len)
    if len(set(short) - GENERIC) < 2 or len(long) - len(short) > MAX_EXTRA_WORDS:
        return None
    rest = iter(long)
    return 0.0 if all(w in rest for w in short) else None


def suggestion(
    kind: str,
    name: str,
    text: str,
    known: dict[str, Any],
    replacement: Callable[[Any], str | None],
) -> str | None:
    """The name in the code a docs row naming `name` (absent there) means, or None: the
    name its own text gives as the new one ("deprecated. Please set `--moe-runner-backend`
    …"), else the one closest match (a tie says nothing), then what that has been
    deprecated for. Nothing rather than a guess: these go into pull requests."""
    found: str | None = None
    if GAVE_WAY.search(text):
        named = [n for n in NAMED[kind].findall(text) if n != name and n in known]
        found = named[0] if named else None
    if found is None:  # ties broken by the words of the row's text a name has ("backend")
        said = set(re.findall(r"[a-z0-9]+", text.lower()))
        scored = sorted(
            ((score, len(said.intersection(_words(n)))), n)
            for n in known
            if (score := _close(name, n)) is not None
        )[::-1]
        if scored and (len(scored) == 1 or scored[0][0] > scored[1][0]):
            found = scored[0][1]
    seen = set()
    while found is not None and found not in seen:  # a deprecated name: where it leads
        seen.add(found)
        new = replacement(known[found])
        if new is None or new not in known:
            break
        found = new
    return found


def docs_files(session: Session, version: Version) -> dict[str, list[str]]:
    """{"flags": [paths], "env": [paths]}: the version's docs pages that list them."""
    out: dict[str, list[str]] = {"flags": [], "env": []}
    for path in sorted(version_paths(session, version)):
        if not path.startswith("docs/"):
            continue
        name = path.rsplit("/", 1)[-1]
        if name == FLAGS_DOC:
            out["flags"].append(path)
        elif name == ENV_DOC:
            out["env"].append(path)
    return out


def _entries(session: Session, version: Version, kind: str) -> list[DocEntry]:
    found = session.exec(
        select(DocEntry).where(DocEntry.version_id == version.id, DocEntry.kind == kind)
    )
    return in_order(found, DocEntry, "path", "line")


def same_value(docs: str | None, code: Any) -> bool | None:
    """Whether a docs default cell states the code's literal default; None when the cell is
    prose ("auto-detected", "Defaults to the model path") rather than a value."""
    if docs is None:
        return None
    text = docs.strip().strip("`\"'").strip()
    low = text.lower()
    words = TRUE_WORDS | FALSE_WORDS
    if isinstance(code, str) and code.lower() in words and low in words:
        return (code.lower() in TRUE_WORDS) == (low in TRUE_WORDS)  # "0" reads as false
    if code is None:
        return low in NONE_WORDS or None
    if isinstance(code, bool):
        if low in TRUE_WORDS:
            return code is True
        if low in FALSE_WORDS:
            return code is False
        return None
    if isinstance(code, (int, float)):
        try:
            return float(text.replace("_", "")) == float(code)
        except ValueError:
            return None if " " in text else False
    if isinstance(code, (list, tuple)):
        return low in NONE_WORDS | {"[]", "()", "empty"} if not code else None
    if isinstance(code, str):
        if low in NONE_WORDS and code == "":
            return True
        return text == code or (None if len(text.split()) > 3 else False)
    return None


def _flag_drift(session: Session, version: Version) -> dict[str, Any]:
    flags = all_flags(session, version)
    entries = _entries(session, version, "flag")
    by_name: dict[str, Flag] = {}
    for f in flags:
        for n in [f.name, *(loads(f.aliases) or [])]:
            by_name.setdefault(n, f)
    ranked = sorted(flags, key=lambda f: dest_rank(f.name, f.dest, f.deprecated))
    by_dest = {f.dest: f for f in ranked}

    def flag_of(entry: DocEntry) -> Flag | None:
        for n in loads(entry.names) or []:
            if entry.form == "dest":
                if n in by_dest:
                    return by_dest[n]
            elif n in by_name:
                return by_name[n]
        return None

    documented: dict[str, DocEntry] = {}
    not_in_code, differs = [], []
    for e in entries:
        flag = flag_of(e)
        docs_cite = citation(version, e.path, e.line)
        if flag is None:
            guess = suggestion("flag", e.name, e.description, by_name, _flag_replacement)
            near = by_name[guess] if guess else None
            not_in_code.append(
                {
                    "name": e.name,
                    "docs": docs_cite,
                    "suggestion": guess,
                    "code": citation(version, near.path, near.line, near.end_line)
                    if near
                    else None,
                }
            )
            continue
        documented.setdefault(flag.name, e)
        code_cite = citation(version, flag.path, flag.line, flag.end_line)
        options = [flag.name, *(loads(flag.aliases) or [])]
        stray = [n for n in loads(e.names) or [] if e.form == "option" and n not in options]
        if stray:  # a row naming the flag and a spelling the parser does not accept
            differs.append(_differ(flag.name, "aliases", stray, options, docs_cite, code_cite))
        if flag.default is not None and e.default is not None:
            default = loads(flag.default)
            if same_value(e.default, default) is False:
                differs.append(
                    _differ(flag.name, "default", e.default, default, docs_cite, code_cite)
                )
        choices = loads(flag.choices)
        if e.choices is not None and choices is not None:
            docs_choices = loads(e.choices) or []
            if sorted(map(str, docs_choices)) != sorted(map(str, choices)):
                row = _differ(flag.name, "choices", docs_choices, choices, docs_cite, code_cite)
                row["missing_from_docs"] = [str(c) for c in choices if str(c) not in docs_choices]
                row["not_in_code"] = [c for c in docs_choices if c not in map(str, choices)]
                differs.append(row)
    missing = []
    previous: DocEntry | None = None
    for flag in flags:  # source order: a missing flag's row goes after the previous documented
        if flag.name in documented:
            previous = documented[flag.name]
            continue
        if flag.hidden or flag.deprecated or not entries:
            continue
        missing.append(
            {
                "name": flag.name,
                "code": citation(version, flag.path, flag.line, flag.end_line),
                "docs": citation(version, previous.path, previous.line) if previous else None,
                "after": previous.name if previous else None,
                "section": flag.section,
            }
        )
    return _section(missing, not_in_code, differs)


def _flag_replacement(flag: Flag) -> str | None:
    """The one flag a deprecated flag leads to (`--x=v`: --x; a pair in braces: none)."""
    names = replacement_names(flag.replacement) if flag.deprecated else []
    return names[0] if len(names) == 1 else None


def _env_replacement(var: EnvVar) -> str | None:
    return var.replacement


def _differ(
    name: str,
    field: str,
    docs: Any,
    code: Any,
    docs_cite: dict[str, Any],
    code_cite: dict[str, Any],
) -> dict[str, Any]:
    return {"name": name, "field": field, "docs": docs, "code": code,
            "docs_source": docs_cite, "code_source": code_cite}  # fmt: skip


def _section(
    missing: list[dict[str, Any]], not_in_code: list[dict[str, Any]], differs: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "missing_from_docs": [r["name"] for r in missing],
        "not_in_code": [r["name"] for r in not_in_code],
        "differs": differs,
        "details": {"missing_from_docs": missing, "not_in_code": not_in_code},
    }


def _env_drift(
    session: Session, version: Version, prefix_aliases: list[dict[str, Any]]
) -> dict[str, Any]:
    variables = {v.name: v for v in all_env(session, version)}
    entries = _entries(session, version, "env")
    deprecated: dict[str, EnvVar] = {}
    for v in variables.values():
        for old in loads(v.deprecated_names) or []:
            deprecated[old] = v

    def resolve(name: str) -> tuple[EnvVar | None, str | None]:
        """(variable, how the docs spelling differs) for a docs name."""
        if name in variables:
            var = variables[name]
            if var.replacement and var.replacement in variables:
                return variables[var.replacement], "deprecated name"
            return var, None
        if name in deprecated:
            return deprecated[name], "deprecated name"
        for alias in prefix_aliases:
            if name.startswith(alias["from"]):
                new = alias["to"] + name.removeprefix(alias["from"])
                if new in variables:
                    return variables[new], "deprecated prefix"
        return None, None

    documented: set[str] = set()
    not_in_code, differs = [], []
    for e in entries:
        docs_cite = citation(version, e.path, e.line)
        var, spelling = resolve(e.name)
        if var is None:
            guess = suggestion("env", e.name, e.description, variables, _env_replacement)
            near = variables[guess] if guess else None
            not_in_code.append(
                {
                    "name": e.name,
                    "docs": docs_cite,
                    "suggestion": guess,
                    "code": citation(version, near.path, near.line, near.end_line)
                    if near
                    else None,
                }
            )
            continue
        documented.add(var.name)
        code_cite = citation(version, var.path, var.line, var.end_line)
        if spelling:
            differs.append(_differ(var.name, "name", e.name, var.name, docs_cite, code_cite))
        if var.default is not None and e.default is not None:
            default = loads(var.default)
            if same_value(e.default, default) is False:
                differs.append(
                    _differ(var.name, "default", e.default, default, docs_cite, code_cite)
                )
    missing = []
    if entries:
        for v in variables.values():
            if v.name in documented or is_deprecated(v.name, v.replacement, v.comment):
                continue
            ours = v.declared or v.name.startswith(("SGLANG_", "SGL_"))
            if not ours or (not v.declared and v.path.startswith(TEST_PATHS)):
                continue
            missing.append(
                {
                    "name": v.name,
                    "code": citation(version, v.path, v.line, v.end_line),
                    "docs": None,
                    "declared": v.declared,
                    "section": v.section,
                }
            )
    return _section(missing, not_in_code, differs)


def docs_drift(session: Session, version: Version) -> dict[str, Any]:
    """{"version", "docs_files": {"flags": [Citation], "env": [Citation]}, "flags": {...},
    "env": {...}} with each kind's missing_from_docs / not_in_code names, differs rows and
    the cited rows under "details"."""
    import json

    files = docs_files(session, version)
    report = json.loads(version.report or "{}")
    return {
        "version": version.name,
        "docs_files": {k: [citation(version, p, 1) for p in paths] for k, paths in files.items()},
        "flags": _flag_drift(session, version),
        "env": _env_drift(session, version, report.get("env_prefix_aliases") or []),
    }


def _md_cite(c: dict[str, Any] | None) -> str:
    if not c:
        return "—"
    return f"[`{c['path']}#L{c['line']}`]({c['url']})"


def drift_markdown(drift: dict[str, Any]) -> str:
    """The report as Markdown a maintainer can paste into a pull request."""
    out = [f"## Docs drift at `{drift['version']}`", ""]
    titles = {"flags": "Server arguments", "env": "Environment variables"}
    for kind in ("flags", "env"):
        section = drift[kind]
        files = drift["docs_files"][kind]
        out.append(f"### {titles[kind]}")
        out.append("")
        if not files:
            out += ["No docs page for these in this version.", ""]
            continue
        out.append("Docs: " + ", ".join(_md_cite(c) for c in files))
        out.append("")
        missing = section["details"]["missing_from_docs"]
        out.append(f"**In the code, missing from the docs ({len(missing)})**")
        out.append("")
        if missing:
            out += ["| Name | Code | Docs (would go after) |", "| --- | --- | --- |"]
            out += [
                f"| `{r['name']}` | {_md_cite(r['code'])} | "
                f"{(_md_cite(r['docs']) + ' `' + r['after'] + '`') if r.get('after') else '—'} |"
                for r in missing
            ]
        out.append("")
        absent = section["details"]["not_in_code"]
        out.append(f"**In the docs, not in the code ({len(absent)})**")
        out.append("")
        if absent:
            out += ["| Name | Docs | Closest in the code |", "| --- | --- | --- |"]
            for r in absent:
                near = f"`{r['suggestion']}` {_md_cite(r['code'])}" if r["suggestion"] else "—"
                out.append(f"| `{r['name']}` | {_md_cite(r['docs'])} | {near} |")
        out.append("")
        differs = section["differs"]
        out.append(f"**Stated differently ({len(differs)})**")
        out.append("")
        if differs:
            out += ["| Name | Field | Docs | Code | Docs line | Code line |",
                    "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip
            out += [
                f"| `{r['name']}` | {r['field']} | {_md_value(r['docs'])} | {_md_value(r['code'])} "
                f"| {_md_cite(r['docs_source'])} | {_md_cite(r['code_source'])} |"
                for r in differs
            ]
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _md_value(value: Any) -> str:
    text = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
    text = text.replace("|", "\\|").replace("`", "'")
    return f"`{text[:120]}`"
