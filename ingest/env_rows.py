"""One version's environment variables and docs entries, from its files' cached facts.

A variable is every name environ.py declares plus every name the code reads or writes
(`declared` tells them apart). A declared variable's type and default come from its
declaration; another's from its reads (`get_int_env_var` -> int, `os.environ.get("X", "1")`
-> "1"). Sites are tied to the flags their statement or enclosing conditions read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, NamedTuple

from ingest.docs import doc_kind
from ingest.env import EnvSite
from ingest.environ_decls import ENVIRON_PATH

TEST_PATHS = ("python/sglang/test/", "test/")


class _FileSites(NamedTuple):
    """One file's sites as one version gave them (env_rows' cache): reused while the file
    keeps its blob and the dests its sites read keep their options."""

    sha: str
    dests: tuple[str, ...]
    options: tuple[str | None, ...] | None
    sites: list[dict[str, Any]]


def env_rows(
    files: dict[str, str],
    facts_of: Callable[[str], dict[str, Any]],
    option_of: dict[str, str],
    cited: dict[str, str],
    cache: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(variables, sites, prefix aliases); cites the files they come from in `cited`.

    `cache` (path -> what one blob gave) carries a file's sites over to the next version
    while its blob and the options of the dests it reads stay the same."""
    decl: dict[str, Any] = {"vars": [], "prefix_aliases": []}
    if ENVIRON_PATH in files:
        decl = facts_of(ENVIRON_PATH).get("env_decl") or decl
        if decl["vars"]:
            cited[ENVIRON_PATH] = files[ENVIRON_PATH]
    cache = {} if cache is None else cache
    sites: list[dict[str, Any]] = []
    for path, sha in files.items():
        if not path.endswith(".py"):
            continue
        facts = facts_of(path)
        found = facts.get("env") or []
        if not found:
            continue
        entry = cache.get(path)
        if entry is None or entry.sha != sha:
            dests = dict.fromkeys(d for site in found for d in EnvSite._make(site).dests)
            entry = _FileSites(sha, tuple(dests), None, [])
        options = tuple(option_of.get(d) for d in entry.dests)
        if entry.options != options:
            entry = _FileSites(sha, entry.dests, options, _file_sites(path, facts, decl, option_of))
        cache[path] = entry
        sites.extend(dict(site) for site in entry.sites)
        cited[path] = sha

    by_name: dict[str, list[dict[str, Any]]] = {}
    for site in sites:
        by_name.setdefault(site["name"], []).append(site)
    declared = {v["name"]: v for v in decl["vars"]}
    replacement: dict[str, str] = {}
    # A deprecated name is cited where it is deprecated (a declaration's deprecated_name=, a
    # helper call), not where a docstring happens to quote it.
    deprecated_at: dict[str, dict[str, Any]] = {}
    # An old name a declaration still reads (`deprecated_name=`) is a variable of its own,
    # parsed by the same Env class with the same default when neither name is set.
    alias_of: dict[str, dict[str, Any]] = {}
    for v in decl["vars"]:
        for old in v["deprecated_names"]:
            replacement[old] = v["name"]
            deprecated_at.setdefault(old, v)
            alias_of.setdefault(old, v)
    notes: dict[str, str] = {}
    conversion: dict[str, Any] = {}
    version_options = set(option_of.values())
    for d in decl.get("deprecations", []):
        new = d["replacement"]
        # A flag of this version (`--fp8-gemm-backend=cutlass` keeps the value it names).
        if new and (not new.startswith("--") or new.partition("=")[0] in version_options):
            replacement.setdefault(d["name"], new)
            if d.get("conversion") is not None:
                conversion.setdefault(d["name"], d["conversion"])
        notes.setdefault(d["name"], d["note"])
        deprecated_at.setdefault(d["name"], d)
    for alias in decl["prefix_aliases"]:
        for name in by_name:
            if name.startswith(alias["from"]):
                new = alias["to"] + name.removeprefix(alias["from"])
                if new in declared or new in by_name:
                    replacement.setdefault(name, new)

    variables: list[dict[str, Any]] = []
    for name in sorted(set(declared) | set(by_name) | set(notes) | set(alias_of)):
        reads = by_name.get(name, [])
        if name in declared:
            v = declared[name]
            var = {
                "name": name,
                "declared": True,
                "type": v["type"],
                "default": v["default"],
                "default_expr": v["default_expr"],
                "fallback": v.get("fallback"),
                "deprecated_names": v["deprecated_names"],
                "comment": v["comment"],
                "section": v["section"],
                "path": v["path"],
                "line": v["line"],
                "end_line": v["end_line"],
            }
        else:
            first = deprecated_at.get(name) or min(reads, key=_source_rank)
            casts = Counter(s["cast"] for s in reads if s["cast"])
            # The best cited read giving a default: a literal, or another variable's.
            given = [
                s
                for s in sorted(reads, key=_source_rank)
                if (s["default"], s["fallback"]) != (None, None)
            ]
            var = {
                "name": name,
                "declared": False,
                "type": casts.most_common(1)[0][0] if casts else None,
                "default": given[0]["default"] if given else None,
                "default_expr": None,
                "fallback": given[0]["fallback"] if given else None,
                "deprecated_names": [],
                "comment": "",
                "section": None,
                "path": first["path"],
                "line": first["line"],
                "end_line": first["end_line"],
            }
            alias = alias_of.get(name)
            if alias is not None:
                var.update(
                    {k: alias.get(k) for k in ("type", "default", "default_expr", "fallback")}
                )
        if name in notes:  # the deprecation warning, e.g. "X (in ms) ... Y (in seconds)"
            comment = var["comment"]
            if comment and not comment.endswith((".", "!", "?")):
                comment += "."
            var["comment"] = f"{comment} {notes[name]}".strip()
        var["fallback"] = _fallback(var["fallback"], declared)
        var["replacement"] = replacement.get(name)
        var["conversion"] = conversion.get(name) if var["replacement"] else None
        var["reads"] = sum(1 for s in reads if s["access"] != "write")
        var["writes"] = sum(1 for s in reads if s["access"] == "write")
        var["flags"] = sorted({f for s in reads for f in s["flags"]})
        variables.append(var)
    return variables, sites, decl["prefix_aliases"]


def _file_sites(
    path: str, facts: dict[str, Any], decl: dict[str, Any], option_of: dict[str, str]
) -> list[dict[str, Any]]:
    # The deprecated_name="X" string of a declaration is not a read of X, nor are the names
    # given to a deprecation helper (`_print_deprecated_env("OLD", "NEW")`).
    spans = (
        {
            line
            for v in decl["vars"] + decl.get("deprecations", [])
            for line in range(v["line"], v["end_line"] + 1)
        }
        if path == ENVIRON_PATH
        else set()
    )
    # (a declaration's default reading another variable reads it there)
    fallbacks = {(v["fallback"] or {}).get("env") for v in decl["vars"] if v.get("fallback")}
    lines = facts["lines"]
    sites = []
    for site in map(EnvSite._make, facts["env"]):
        if site.line in spans and site.name not in fallbacks:
            continue
        flags = list(dict.fromkeys(option_of[d] for d in site.dests if d in option_of))
        default = site.default
        fallback = default if isinstance(default, dict) else None  # ingest/env.py fallback_after
        sites.append(
            {
                "name": site.name,
                "access": site.access,
                "how": site.how,
                "default": None if fallback else default,
                "fallback": fallback,
                "cast": site.cast,
                "function": site.function,
                "flags": flags,
                "path": path,
                "line": site.line,
                "end_line": site.end_line,
                "text": lines.get(str(site.line), ""),
            }
        )
    return sites


def _fallback(found: dict[str, Any] | None, declared: dict[str, Any]) -> dict[str, Any] | None:
    """{"name", "default", "reads"} of a default taken from another variable: "reads" false
    when it is only that variable's declared default (`envs.B.default`), which is also the
    default when the read gave none (`envs.B.get()`)."""
    if found is None:
        return None
    other = declared.get(found["env"])
    default = found["default"]
    if default is None and other is not None:
        default = other["default"]
    return {"name": found["env"], "default": default, "reads": found["reads"]}


def _source_rank(site: dict[str, Any]) -> tuple[bool, bool, bool, str, int]:
    """Where an undeclared variable is best cited: a real read (not a bare string or a
    write), outside tests, with a default (a literal or another variable's), then the
    earliest path."""
    return (
        site["how"] in ("literal", "in environ") or site["access"] != "read",
        site["path"].startswith(TEST_PATHS),
        site["default"] is None and site["fallback"] is None,
        site["path"],
        site["line"],
    )


def docs_rows(
    files: dict[str, str], facts_of: Callable[[str], dict[str, Any]], cited: dict[str, str]
) -> list[dict[str, Any]]:
    """The docs rows of every docs file; a file is cited when it has rows, or is the
    environment variables page (the drift report names it even empty)."""
    out: list[dict[str, Any]] = []
    for path in sorted(p for p in files if doc_kind(p) is not None):
        entries = facts_of(path).get("docs")
        if entries is None or not (entries or doc_kind(path) == "env"):
            continue
        cited[path] = files[path]
        out.extend({**e, "path": path} for e in entries)
    return out
