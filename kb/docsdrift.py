"""Docs drift: a version's hand-written docs against its code, for flags and env variables.

Three lists per kind: named in the code but missing from the docs, named in the docs but
absent from the code, and stated differently (default, choices, a deprecated spelling).
Every row cites both sides: the docs line and the code line (for a missing flag, the docs
row of the documented flag just before it in the code, where its row would go).

A version may have several flag tables (the docs site's, a new docs site's, a cookbook's):
each gets the three lists of its own, and where the tables disagree with each other (a flag
one names and another leaves out, a default stated two ways) is listed too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from rapidfuzz import fuzz
from sqlmodel import Session

from kb.dests import dest_rank
from kb.env import all_env, is_deprecated
from kb.queries import all_flags, citation, sites_in_order, version_paths
from kb.replacements import replacement_names
from kb.schema import DocEntry, EnvVar, Flag, Version, loads

ENV_DOC = "environment_variables.md"
# A docs file is a flag table of the server when at least this share of its rows name the
# server's flags (the router's tables share `--host`, `--port` and little else) ...
SERVER_SHARE = 0.5
# ... and a reference of them all when it names at least this share of the flags.
REFERENCE_SHARE = 0.5
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
Row = dict[str, Any]  # a row of the report
Entry = Any  # a docs row: a plain row with DocEntry's columns (kb.queries.sites_in_order)


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


def docs_files(session: Session, version: Version, flags: dict[str, Any]) -> dict[str, list[str]]:
    """{"flags": [paths], "env": [paths]}: the version's docs pages that list them (the
    flag tables of its flags section, `flags`)."""
    env = [
        p
        for p in sorted(version_paths(session, version))
        if p.startswith("docs/") and p.rsplit("/", 1)[-1] == ENV_DOC
    ]
    return {"flags": [t["path"] for t in flags["tables"]], "env": env}


def _entries(session: Session, version: Version, kind: str) -> list[Entry]:
    return sites_in_order(session, DocEntry, version, DocEntry.kind == kind)


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
    """The flags section: the union of the version's flag tables (a flag is missing when no
    table names it) with each table's own lists under "tables" and where the tables
    disagree with each other under "disagreements"."""
    flags = all_flags(session, version)
    by_name: dict[str, Flag] = {}
    for f in flags:
        for n in [f.name, *(loads(f.aliases) or [])]:
            by_name.setdefault(n, f)
    ranked = sorted(flags, key=lambda f: dest_rank(f.name, f.dest, f.deprecated))
    by_dest = {f.dest: f for f in ranked}

    resolved: dict[tuple[str, str], Flag | None] = {}  # the tables repeat their rows' names
    suggested: dict[tuple[str, str], str | None] = {}

    def flag_of(entry: Entry) -> Flag | None:
        key = (entry.form, entry.names)
        if key not in resolved:
            resolved[key] = _resolve(entry.form, loads(entry.names) or [], by_dest, by_name)
        return resolved[key]

    def stated(e: Entry, flag: Flag, docs: dict[str, Any], code: dict[str, Any]) -> list[Row]:
        rows = []
        options = [flag.name, *(loads(flag.aliases) or [])]
        stray = [n for n in loads(e.names) or [] if e.form == "option" and n not in options]
        if stray:  # a row naming the flag and a spelling the parser does not accept
            rows.append(_differ(flag.name, "aliases", stray, options, docs, code))
        rows += _default_differs(e, flag, docs, code)
        choices = loads(flag.choices)
        if e.choices is not None and choices is not None:
            docs_choices = loads(e.choices) or []
            if sorted(map(str, docs_choices)) != sorted(map(str, choices)):
                row = _differ(flag.name, "choices", docs_choices, choices, docs, code)
                row["missing_from_docs"] = [str(c) for c in choices if str(c) not in docs_choices]
                row["not_in_code"] = [c for c in docs_choices if c not in map(str, choices)]
                rows.append(row)
        return rows

    def drift(entries: list[Entry], scope: set[str] | None) -> dict[str, Any]:
        """The section of these docs rows; a flag outside `scope` (names; None: every
        flag) is not missing from them."""
        documented, not_in_code, differs = _against_code(
            version, "flag", entries, by_name, flag_of, _flag_replacement, stated, suggested
        )
        missing = []
        previous: Entry | None = None
        for flag in flags:  # source order: a missing flag's row goes after the previous one
            if flag.name in documented:
                previous = documented[flag.name]
                continue
            if flag.hidden or flag.deprecated or not entries:
                continue
            if scope is not None and flag.name not in scope:
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

    tables = flag_tables(_entries(session, version, "flag"), flag_of)
    out = drift([e for rows in tables.values() for e in rows], None)
    documentable = [f for f in flags if not f.hidden and not f.deprecated]
    out["tables"] = []
    for path, rows in tables.items():
        named = {hit.name: hit for e in rows if (hit := flag_of(e)) is not None}
        scope, sections = table_scope(named.values(), documentable)
        table = {
            "path": path,
            "docs": citation(version, path, 1),
            "rows": len(rows),
            "named": len({n for e in rows for n in loads(e.names) or []}),
            "scope": "all" if scope is None else "sections",
            "sections": sections,
        }
        out["tables"].append({**table, **drift(rows, scope)})
    out["disagreements"] = table_disagreements(version, tables, out["tables"], flag_of)
    return out


def _resolve(
    form: str, names: list[str], by_dest: dict[str, Flag], by_name: dict[str, Flag]
) -> Flag | None:
    """The flag a docs row names: its first name the code has (a dest, or an option)."""
    for n in names:
        found = by_dest.get(n) if form == "dest" else by_name.get(n)
        if found is not None:
            return found
    return None


def flag_tables(entries: list[Entry], flag_of: Callable[[Entry], Any]) -> dict[str, list[Entry]]:
    """{path: its rows} of the docs files that document the version's server: those whose
    rows mostly (SERVER_SHARE) name its flags. A table of the router's or a benchmark
    script's options names a few of the same (`--host`, `--port`), not most."""
    by_path: dict[str, list[Entry]] = {}
    for e in entries:
        by_path.setdefault(e.path, []).append(e)
    return {
        path: rows
        for path, rows in by_path.items()
        if sum(flag_of(e) is not None for e in rows) >= SERVER_SHARE * len(rows)
    }


def table_scope(
    named: Iterable[Flag], documentable: list[Flag]
) -> tuple[set[str] | None, list[str]]:
    """(the flags a table means to cover, or None for all; the sections that are): a table
    naming at least REFERENCE_SHARE of the flags is a reference of them all; a smaller one
    (the speculative decoding page's) covers the sections of the code its flags are in, so
    what it leaves out is their neighbours rather than every other flag."""
    named = list(named)
    if len(named) >= REFERENCE_SHARE * len(documentable):
        return None, []
    sections = sorted({f.section for f in named if f.section and not f.deprecated})
    in_scope = {f.name for f in documentable if f.section in sections}
    return in_scope, sections


def table_disagreements(
    version: Version,
    tables: dict[str, list[Entry]],
    sections: list[dict[str, Any]],
    flag_of: Callable[[Entry], Any],
) -> list[Row]:
    """Where the tables disagree with each other, by flag: a flag one names that a reference
    of every flag leaves out ("named"), or a default, choices or type stated differently
    by two tables. Rows {"name", "field", "tables": [{"path", "value",
    "docs"}]}."""
    rows_of: dict[str, dict[str, Entry]] = {}  # flag -> path -> its first row there
    for path, rows in tables.items():
        for e in rows:
            flag = flag_of(e)
            if flag is not None:
                rows_of.setdefault(flag.name, {}).setdefault(path, e)
    missing_from: dict[str, list[str]] = {}
    for table in sections:  # what a partial table leaves out is in its own lists
        if table["scope"] != "all":
            continue
        for name in table["missing_from_docs"]:
            missing_from.setdefault(name, []).append(table["path"])
    out: list[Row] = []
    for name in sorted(rows_of, key=lambda n: (n not in missing_from, n)):
        at = rows_of[name]
        if len(at) + len(missing_from.get(name, [])) < 2:
            continue
        if name in missing_from:
            absent = [{"path": p, "value": "missing", "docs": None} for p in missing_from[name]]
            said = _said(version, at, lambda e: "named")
            out.append({"name": name, "field": "named", "tables": said + absent})
        for field, value in STATED_FIELDS:
            said = _said(version, at, value)
            if len({_as_said(s["value"]) for s in said}) > 1:
                out.append({"name": name, "field": field, "tables": said})
    return out


STATED_FIELDS: list[tuple[str, Callable[[Entry], Any]]] = [
    ("default", lambda e: e.default),
    ("choices", lambda e: loads(e.choices)),
    ("type", lambda e: e.type),
]


def _said(
    version: Version, at: dict[str, Entry], value: Callable[[Entry], Any]
) -> list[dict[str, Any]]:
    """What each table's row (`at`: path -> row) states, where it states it."""
    return [
        {"path": p, "value": v, "docs": citation(version, p, e.line)}
        for p, e in at.items()
        if (v := value(e)) is not None
    ]


def _as_said(value: Any) -> str:
    """A docs cell's value as two tables can agree on it (`None` and `none`, `a`, `b` in
    either order)."""
    if isinstance(value, list):
        return ",".join(sorted(map(str, value)))
    text = str(value).strip().strip("`\"'").strip().lower()
    return "none" if text in NONE_WORDS else text


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


def _default_differs(
    e: Entry, item: Flag | EnvVar, docs: dict[str, Any], code: dict[str, Any]
) -> list[Row]:
    """The row where a docs default cell states another value than the code's literal one."""
    if item.default is None or e.default is None:
        return []
    default = loads(item.default)
    if same_value(e.default, default) is False:
        return [_differ(item.name, "default", e.default, default, docs, code)]
    return []


def _against_code(
    version: Version,
    kind: str,
    entries: list[Entry],
    known: dict[str, Any],
    resolve: Callable[[Entry], Any],
    replacement: Callable[[Any], str | None],
    stated: Callable[[Entry, Any, dict[str, Any], dict[str, Any]], list[Row]],
    suggested: dict[tuple[str, str], str | None] | None = None,
) -> tuple[dict[str, Entry], list[Row], list[Row]]:
    """The docs rows of one `kind` ("flag" or "env") against the code, whose flags or
    variables by name are `known` and the one a row names is `resolve(row)` (None: none):
    ({code name: its first docs row}, the rows naming nothing in the code with the name
    they likely mean, the differs rows `stated(row, item, docs citation, code citation)`).
    `suggested` keeps the suggestions made, by (name, text), for the next call."""
    suggested = {} if suggested is None else suggested
    documented: dict[str, Entry] = {}
    not_in_code, differs = [], []
    for e in entries:
        docs_cite = citation(version, e.path, e.line)
        item = resolve(e)
        if item is None:
            key = (e.name, e.description)
            if key not in suggested:
                suggested[key] = suggestion(kind, e.name, e.description, known, replacement)
            guess = suggested[key]
            near = known[guess] if guess else None
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
        documented.setdefault(item.name, e)
        code_cite = citation(version, item.path, item.line, item.end_line)
        differs += stated(e, item, docs_cite, code_cite)
    return documented, not_in_code, differs


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

    def resolve(entry: Entry) -> EnvVar | None:
        """The variable a docs row names: by its name, a deprecated name or prefix."""
        name = entry.name
        if name in variables:
            var = variables[name]
            if var.replacement and var.replacement in variables:
                return variables[var.replacement]
            return var
        if name in deprecated:
            return deprecated[name]
        for alias in prefix_aliases:
            if name.startswith(alias["from"]):
                new = alias["to"] + name.removeprefix(alias["from"])
                if new in variables:
                    return variables[new]
        return None

    def stated(e: Entry, var: EnvVar, docs: dict[str, Any], code: dict[str, Any]) -> list[Row]:
        rows = []
        if e.name != var.name:  # a deprecated name or prefix
            rows.append(_differ(var.name, "name", e.name, var.name, docs, code))
        return rows + _default_differs(e, var, docs, code)

    documented, not_in_code, differs = _against_code(
        version, "env", entries, variables, resolve, _env_replacement, stated
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

    flags = _flag_drift(session, version)
    files = docs_files(session, version, flags)
    report = json.loads(version.report or "{}")
    return {
        "version": version.name,
        "docs_files": {k: [citation(version, p, 1) for p in paths] for k, paths in files.items()},
        "flags": flags,
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
        out += _md_table(
            "In the code, missing from the docs",
            ["Name", "Code", "Docs (would go after)"],
            [
                [
                    f"`{r['name']}`",
                    _md_cite(r["code"]),
                    (_md_cite(r["docs"]) + " `" + r["after"] + "`") if r.get("after") else "—",
                ]
                for r in section["details"]["missing_from_docs"]
            ],
        )
        out += _md_table(
            "In the docs, not in the code",
            ["Name", "Docs", "Closest in the code"],
            [
                [
                    f"`{r['name']}`",
                    _md_cite(r["docs"]),
                    f"`{r['suggestion']}` {_md_cite(r['code'])}" if r["suggestion"] else "—",
                ]
                for r in section["details"]["not_in_code"]
            ],
        )
        out += _md_table(
            "Stated differently",
            ["Name", "Field", "Docs", "Code", "Docs line", "Code line"],
            [
                [
                    f"`{r['name']}`",
                    r["field"],
                    _md_value(r["docs"]),
                    _md_value(r["code"]),
                    _md_cite(r["docs_source"]),
                    _md_cite(r["code_source"]),
                ]
                for r in section["differs"]
            ],
        )
        if kind == "flags":
            out += _md_tables(section)
    return "\n".join(out).rstrip() + "\n"


def _md_tables(section: dict[str, Any]) -> list[str]:
    """Each flag table's counts, then where the tables disagree with each other."""
    out = _md_table(
        "Flag tables",
        ["Table", "Rows", "Covers", "Missing from it", "Not in the code", "Stated differently"],
        [
            [
                f"[`{t['path']}`]({t['docs']['url'].split('#')[0]})",
                str(t["rows"]),
                "every flag" if t["scope"] == "all" else ", ".join(t["sections"]),
                ", ".join(f"`{n}`" for n in t["missing_from_docs"]) or "—",
                ", ".join(f"`{n}`" for n in t["not_in_code"]) or "—",
                str(len(t["differs"])),
            ]
            for t in section["tables"]
        ],
    )
    return out + _md_table(
        "Where the tables disagree",
        ["Name", "Field", "What each table says"],
        [
            [
                f"`{r['name']}`",
                r["field"],
                "<br>".join(
                    f"{_md_value(s['value'])} in "
                    + (_md_cite(s["docs"]) if s["docs"] else f"`{s['path']}`")
                    for s in r["tables"]
                ),
            ]
            for r in section["disagreements"]
        ],
    )


def _md_table(title: str, header: list[str], rows: list[list[str]]) -> list[str]:
    """One list of a kind's section: its title with how many rows, then their table."""
    out = [f"**{title} ({len(rows)})**", ""]
    if rows:
        out += [_md_row(header), _md_row(["---"] * len(header)), *map(_md_row, rows)]
    return [*out, ""]


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _md_value(value: Any) -> str:
    text = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
    text = text.replace("|", "\\|").replace("`", "'")
    return f"`{text[:120]}`"
