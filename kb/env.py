"""Environment variables in the knowledge base: JSON shapes, lookups, history and diff.

EnvVar (API contract) = {"name", "type", "default", "deprecated_names", "source"} plus
declared, default_expr, fallback, replacement, conversion, comment, section, flags,
reads/writes counts, url.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from rapidfuzz.distance import Levenshtein
from sqlmodel import Session, col, select

from kb.diff import compare_env, history_events
from kb.order import in_order
from kb.queries import (
    MAX_NAME,
    NotFound,
    citation,
    did_you_mean,
    ordered_versions,
    per_stamp,
    sites_in_order,
)
from kb.schema import EnvSite, EnvVar, Version, loads

PREFIXES = ("SGLANG_", "SGL_")


def is_deprecated(name: str, replacement: str | None, comment: str) -> bool:
    """A deprecated name: one with a replacement (a variable or a flag), or one whose comment
    is SGLang's deprecation warning naming it (ingest/environ_decls.py `deprecations`: a name
    deprecated with nothing to use instead)."""
    return bool(replacement) or name in comment and "deprecat" in comment.lower()


def env_url(version: Version, name: str) -> str:
    return f"/v/{quote(version.name, safe='')}/env/{quote(name, safe='')}"


def env_default(var: EnvVar) -> Any:
    """The static default, else its source text (e.g. "os.path.expanduser('~/.cache')")."""
    return loads(var.default) if var.default is not None else var.default_expr


def convert(conv: dict[str, Any], raw: str) -> str:
    """What SGLang gives the replacement when the deprecated name is `raw`, for a conversion
    worked out (`str(float(raw) / 1000.0)`: a cast, then one `*`, `/` or `//` by a number);
    ValueError when the cast refuses `raw`, as SGLang's does at import."""
    number = (float if conv["cast"] == "float" else int)(raw)
    by, op = conv["by"], conv["op"]
    return str(number * by if op == "*" else number / by if op == "/" else number // by)


def conversion_words(conv: dict[str, Any] | None) -> str | None:
    """The conversion in plain words, with an example: "SGLang converts the value: 5000 →
    5.0, divided by 1000" (None when it copies the value as it is)."""
    if conv is None:
        return None
    if conv.get("op") is None:  # another shape: its text, not a guess
        return f"SGLang converts the value with {conv['expr']}"
    by = conv["by"]
    shown = f"{by:g}" if isinstance(by, float) else str(by)
    # An example whose result is round: 5000 for "/ 1000", 5 for "* 1000".
    example = 5 if conv["op"] == "*" or float(5 * by) != int(5 * by) else int(5 * by)
    how = {"*": "multiplied by", "/": "divided by", "//": "divided (rounding down) by"}
    return (
        f"SGLang converts the value: {example} → {convert(conv, str(example))}, "
        f"{how[conv['op']]} {shown}"
    )


def conversion_short(conv: dict[str, Any] | None) -> str | None:
    """The conversion in a few characters, for a list: "÷ 1000" (None when SGLang copies
    the value as it is; "converted" for a shape not worked out)."""
    if conv is None:
        return None
    if conv.get("op") is None:
        return "converted"
    by = conv["by"]
    shown = f"{by:g}" if isinstance(by, float) else str(by)
    short = {"*": "× {}", "/": "÷ {}", "//": "÷ {}, rounded down"}
    return short[conv["op"]].format(shown)


def env_fallback(version: Version, var: EnvVar) -> dict[str, Any] | None:
    """The variable a default is read from (EnvFallback), with its page."""
    found = loads(var.fallback)
    if not found:
        return None
    return {**found, "url": env_url(version, found["name"])}


def env_var_dict(version: Version, var: EnvVar) -> dict[str, Any]:
    return {
        "name": var.name,
        "type": var.type,
        "default": loads(var.default),
        "default_expr": var.default_expr,
        "fallback": env_fallback(version, var),
        "deprecated_names": loads(var.deprecated_names) or [],
        "replacement": var.replacement,
        "conversion": loads(var.conversion),
        "declared": var.declared,
        "comment": var.comment,
        "section": var.section,
        "flags": loads(var.flags) or [],
        "read_count": var.reads,
        "write_count": var.writes,
        "url": env_url(version, var.name),
        "source": citation(version, var.path, var.line, var.end_line),
    }


def env_site_dict(version: Version, site: EnvSite) -> dict[str, Any]:
    return {
        **citation(version, site.path, site.line, site.end_line),
        "text": site.text,
        "name": site.name,
        "access": site.access,
        "how": site.how,
        "default": loads(site.default),
        "function": site.function,
        "flags": loads(site.flags) or [],
    }


def all_env(session: Session, version: Version) -> list[EnvVar]:
    found = session.exec(select(EnvVar).where(EnvVar.version_id == version.id))
    return in_order(found, EnvVar, "name")


def env_names(session: Session, version: Version) -> list[str]:
    """The version's variable names, sorted (suggestions that tie come in this order)."""
    return sorted(session.exec(select(EnvVar.name).where(EnvVar.version_id == version.id)))


def env_matches(var: dict[str, Any], query: str) -> bool:
    """Case-insensitive substring over the name, deprecated names, comment and flags."""
    q = query.strip().lower()[:MAX_NAME]
    if not q:
        return True
    hay = [var["name"], *var["deprecated_names"], var["comment"] or "", *var["flags"]]
    return any(q in h.lower() for h in hay)


def find_env(session: Session, version: Version, raw: str) -> EnvVar | None:
    name = raw.strip()[:MAX_NAME]
    for candidate in dict.fromkeys([name, name.upper()]):
        row = session.exec(
            select(EnvVar).where(EnvVar.version_id == version.id, EnvVar.name == candidate)
        ).first()
        if row is not None:
            return row
    return None


def suggest_env(name: str, known: list[str], limit: int = 5) -> list[str]:
    """Close names: the fuzzy match, plus a one-edit neighbour of a long name (a one-letter
    typo in SGLANG_ENABLE_JIT_DEEPGEM scores under the fuzzy cut-off of short names)."""
    found = did_you_mean(name, known, limit)
    upper = name.upper()
    close = [k for k in known if one_edit(upper, k)]
    return list(dict.fromkeys(close + found))[:limit]


def one_edit(a: str, b: str) -> bool:
    """`a` and `b` differ by one letter replaced, added or dropped."""
    return Levenshtein.distance(a, b) == 1


def get_env(session: Session, version: Version, raw: str) -> EnvVar:
    row = find_env(session, version, raw)
    if row is not None:
        return row
    elsewhere = [
        {"version": v.name, "url": env_url(v, raw.strip().upper())}
        for v in versions_with_env(session, raw.strip().upper())[:2]
    ]
    raise NotFound(
        "env",
        raw,
        f"No environment variable {raw[:MAX_NAME]} in {version.name}.",
        suggest_env(raw, env_names(session, version)),
        elsewhere,
        version=version.name,
    )


def versions_with_env(session: Session, name: str) -> list[Version]:
    versions = ordered_versions(session)
    present = set(
        session.exec(
            select(EnvVar.version_id).where(
                col(EnvVar.version_id).in_([v.id for v in versions]), EnvVar.name == name
            )
        )
    )
    return [v for v in versions if v.id in present]


def env_sites(session: Session, version: Version, name: str) -> list[Any]:
    """The reads and writes of `name`, in source order (rows with EnvSite's columns)."""
    return sites_in_order(session, EnvSite, version, EnvSite.name == name)


def readers_of(session: Session, name: str, version_ids: list[int]) -> list[EnvVar]:
    """Variables of these versions that list `name` among their deprecated names (they still
    read it in their place), by name."""
    rows = session.exec(
        select(EnvVar).where(
            col(EnvVar.version_id).in_(version_ids),
            col(EnvVar.deprecated_names).contains(f'"{name}"'),  # narrows; checked below
        )
    )
    return in_order((r for r in rows if name in (loads(r.deprecated_names) or [])), EnvVar, "name")


def env_history(session: Session, name: str) -> list[dict[str, Any]]:
    """Change events of one variable across all versions, oldest first (Change dicts):
    "added", "removed", "renamed" and each changed field. The variable is followed through a
    rename to a deprecated name: where its name has no row, the variable that still reads it
    (its new name), or one of its own deprecated names (its old name) stands for it."""
    versions = list(reversed(ordered_versions(session)))
    ids = [v.id for v in versions if v.id is not None]
    rows = {
        r.version_id: r
        for r in session.exec(
            select(EnvVar).where(col(EnvVar.version_id).in_(ids), EnvVar.name == name)
        )
    }
    former = {d for r in rows.values() for d in loads(r.deprecated_names) or []}
    missing = [i for i in ids if i not in rows]
    if missing and former:
        older = select(EnvVar).where(
            col(EnvVar.version_id).in_(missing), col(EnvVar.name).in_(former)
        )
        for r in in_order(session.exec(older), EnvVar, "name"):
            rows.setdefault(r.version_id, r)
    missing = [i for i in ids if i not in rows]
    if missing:
        for r in readers_of(session, name, missing):
            rows.setdefault(r.version_id, r)

    def changed(prev: EnvVar, row: EnvVar, at: dict[str, Any]) -> list[dict[str, Any]]:
        changes = compare_env(prev, row)
        if row.name == prev.name:
            return [{**at, **c} for c in changes]
        # the old name entering or leaving the deprecated names is the rename itself
        renamed = {**at, "field": "renamed", "from": prev.name, "to": row.name}
        return [renamed, *({**at, **c} for c in changes if c["field"] != "deprecated_names")]

    return history_events(versions, lambda v: rows.get(v.id or -1), changed)


def flag_env_writes(session: Session, version: Version, flag: str) -> list[dict[str, Any]]:
    """The environment variables the code sets where it reads the flag `flag`: write sites
    whose statement or enclosing conditions read it (`os.environ["NCCL_NVLS_ENABLE"] =
    str(int(server_args.enable_nccl_nvls))`, or a write under `if server_args.x:`), one
    entry per variable in source order, with `url` its page (None when the version has no
    page for it)."""

    def by_option() -> dict[str, list[EnvSite]]:
        out: dict[str, list[EnvSite]] = {}
        writes = sites_in_order(session, EnvSite, version, EnvSite.access == "write")
        for site in writes:
            for option in dict.fromkeys(loads(site.flags) or []):
                out.setdefault(option, []).append(site)
        return out

    sites = per_stamp(("env-writes", version.id), by_option, session).get(flag, [])
    known = set(per_stamp(("env-names", version.id), lambda: env_names(session, version), session))
    grouped: dict[str, list[EnvSite]] = {}
    for site in sites:
        grouped.setdefault(site.name, []).append(site)
    return [
        {
            "name": name,
            "url": env_url(version, name) if name in known else None,
            "sites": [
                {**citation(version, s.path, s.line, s.end_line), "text": s.text} for s in found
            ],
        }
        for name, found in grouped.items()
    ]
