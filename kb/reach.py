"""Reads past the first hop: indirect uses of flags, model files, what a backend value
requires and switches, side-by-side comparison of values, and the extraction report.

Plain dicts in the API contract's shapes (docs/DESIGN.md); views render them or return them.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from sqlmodel import Session, col, select

from kb.dests import dest_rank
from kb.diff import condition_path
from kb.explain.load import version_modules
from kb.layer_sites import Flags
from kb.load_requirements import layer_selections, load_requirements, stage_counts
from kb.model_checks import architecture_checks
from kb.order import FLAG_ORDER, in_order
from kb.polarity import arch_reading, value_reading
from kb.queries import (
    MAX_NAME,
    NotFound,
    all_constraints,
    choice_site_dict,
    choice_sites,
    citation,
    constraint_dict,
    did_you_mean,
    flag_enum,
    flag_values,
    get_flag,
    get_version,
    per_stamp,
    read_version,
    rows,
    sites_in_order,
)
from kb.requirements import Subject, statement, summarize
from kb.schema import (
    ConstraintSite,
    Flag,
    IndirectUsage,
    ModelFile,
    UsageSite,
    Version,
    chain_entry,
    chain_names,
    chain_steps,
    loads,
)

MODELS_DIR = "python/sglang/srt/models/"


# --- indirect uses --------------------------------------------------------------------------


def indirect_site_dict(version: Version, row: IndirectUsage) -> dict[str, Any]:
    chain = loads(row.via)
    return {
        **citation(version, row.path, row.line),
        "text": row.text,
        "via": chain_names(chain),
        "steps": chain_steps(chain),
    }


def one_per_line(rows: Iterable[Any]) -> list[Any]:
    """Rows (IndirectUsage's columns) in source order, one per (path, line): the one with the
    shortest chain, the first of equals (rows at one line differ by entry point only)."""
    best: dict[tuple[str, int], Any] = {}
    for row in rows:
        key = (row.path, row.line)
        old = best.get(key)
        if old is None or len(loads(row.via) or []) < len(loads(old.via) or []):
            best[key] = row
    return list(best.values())


def indirect_usages(session: Session, version: Version, dest: str) -> list[Any]:
    """Uses of `dest` past the first hop, in source order (rows with IndirectUsage's columns)."""
    return sites_in_order(session, IndirectUsage, version, IndirectUsage.dest == dest)


# --- models ---------------------------------------------------------------------------------


def model_url(version: Version, name: str) -> str:
    from urllib.parse import quote

    return f"/v/{quote(version.name, safe='')}/models/{quote(name, safe='/')}"


def _models(session: Session, version: Version) -> list[ModelFile]:
    found = session.exec(select(ModelFile).where(ModelFile.version_id == version.id))
    return in_order(found, ModelFile, "name")


def _model_names(session: Session, version: Version) -> dict[str, str]:
    """path -> name of the version's model files, read once per stamp."""

    def make() -> dict[str, str]:
        found = rows(
            session,
            select(ModelFile.path, ModelFile.name).where(ModelFile.version_id == version.id),
        )
        return {path: name for path, name in found}

    return per_stamp(("model-names", version.id), make, session)


def flag_models(
    session: Session,
    version: Version,
    dest: str,
    indirect: list[Any] | None = None,
    direct: list[Any] | None = None,
) -> list[dict[str, Any]]:
    """Model files that read the flag, directly or through a chain: one entry per model,
    with its `entries`: each entry point it reaches the flag through (its own read, "";
    else the shared code its chain's model class steps start from: kb.schema.chain_entry),
    cited through the shortest chain, its own read first, then entry points named for the
    feature, then the shortest chains. The model's `via`, `steps`, `direct` and `site` are
    its first entry's. `indirect`: the flag's `indirect_usages`, `direct`: its reads under
    MODELS_DIR in source order, when the caller has them."""
    models = _model_names(session, version)
    found: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)  # path -> entry ->
    if direct is None:
        # The first read in the file is the one cited (without an order, SQLite's plan
        # picked one: the read whose fact was stored first).
        direct = sorted(
            rows(
                session,
                select(UsageSite.path, UsageSite.line).where(
                    UsageSite.version_id == version.id,
                    UsageSite.dest == dest,
                    col(UsageSite.path).startswith(MODELS_DIR),
                ),
            )
        )
    for u in direct:
        if u.path in models and "" not in found[u.path]:
            found[u.path][""] = {
                "entry": "",
                "by_name": False,
                "direct": True,
                "via": [],
                "steps": [],
                "site": citation(version, u.path, u.line),
            }
    if indirect is None:
        indirect = indirect_usages(session, version, dest)
    for row in indirect:
        if row.path not in models:
            continue
        chain = loads(row.via) or []
        entry, by_name = chain_entry(chain)
        old = found[row.path].get(entry)
        if old is None or len(old["via"]) > len(chain):
            found[row.path][entry] = {
                "entry": entry,
                "by_name": by_name,
                "direct": False,
                "via": chain_names(chain),
                "steps": chain_steps(chain),
                "site": citation(version, row.path, row.line),
            }
    out = []
    for path, by_entry in sorted(found.items()):
        # (a stable sort: among equals, the first found, in source order)
        entries = sorted(
            by_entry.values(), key=lambda e: (not e["direct"], not e["by_name"], len(e["via"]))
        )
        first = entries[0]
        out.append(
            {
                "name": models[path],
                "path": path,
                "url": model_url(version, models[path]),
                **{k: first[k] for k in ("via", "steps", "direct", "site")},
                "entries": entries,
            }
        )
    return out


def model_groups(models: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`flag_models`' models by entry point (a model is in one group per entry point it
    reaches the flag through): entry points named for the feature first (its own code path:
    `model_forward_maybe_tbo`), then the models' own reads, then the others, the most used
    first."""
    groups: dict[str, dict[str, Any]] = {}
    for m in models:
        for e in m["entries"]:
            group = groups.setdefault(
                e["entry"],
                {"entry": e["entry"], "by_name": False, "direct": e["direct"], "models": []},
            )
            group["by_name"] = group["by_name"] or e["by_name"]
            if m["name"] not in group["models"]:
                group["models"].append(m["name"])
    return sorted(
        groups.values(),
        key=lambda g: (not g["by_name"], not g["direct"], -len(g["models"]), g["entry"]),
    )


def _option_of(session: Session, version: Version) -> dict[str, str]:
    """dest -> the option standing for it (kb.dests: the best last, ties in source order)."""
    out: dict[str, str] = {}
    table = Flag.__table__  # type: ignore[attr-defined]
    found = rows(session, select(table).where(table.c.version_id == version.id))
    for flag in sorted(
        in_order(found, Flag, *FLAG_ORDER), key=lambda f: dest_rank(f.name, f.dest, f.deprecated)
    ):
        out[flag.dest] = flag.name
    return out


def models_list(session: Session, version: Version) -> list[dict[str, Any]]:
    dests: dict[str, set[str]] = defaultdict(set)
    for table in (UsageSite, IndirectUsage):
        rows = session.exec(
            select(table.path, table.dest).where(  # type: ignore[attr-defined]
                table.version_id == version.id,  # type: ignore[attr-defined]
                col(table.path).startswith(MODELS_DIR),  # type: ignore[attr-defined]
            )
        )
        for path, dest in rows:
            dests[path].add(dest)
    return [
        {
            "name": m.name,
            "path": m.path,
            "url": model_url(version, m.name),
            "architectures": loads(m.architectures) or [],
            "flags": len(dests.get(m.path, ())),
        }
        for m in _models(session, version)
    ]


def _mentions(text: str, names: list[str]) -> bool:
    return any(re.search(rf"(?<![\w]){re.escape(n)}(?![\w])", text) for n in names)


def _is_models(row: ConstraintSite, archs: list[str]) -> bool:
    """The site can apply to the model: its conditions test one of its architectures and
    allow it. Tested only under `not` (a later branch of an if/elif chain on the
    architecture) it is another model's. A site whose conditions test none of them but
    whose text names one (its message) is still listed."""
    reading = arch_reading(condition_path(row), archs)
    if reading is None or not reading.named:
        return _mentions(row.condition + " " + row.message, archs)
    return bool(reading.may & set(archs))


def model_detail(session: Session, version: Version, name: str) -> dict[str, Any]:
    name = name.strip().removesuffix(".py")[:MAX_NAME]
    models = _models(session, version)
    row = next((m for m in models if m.name == name), None)
    if row is None:
        by_arch = {a: m for m in models for a in loads(m.architectures) or []}
        row = by_arch.get(name)
    if row is None:
        raise NotFound(
            "model",
            name,
            f"No model file {name!r} in {version.name}.",
            did_you_mean(name, [m.name for m in models]),
            version=version.name,
        )
    option_of = _option_of(session, version)
    archs = loads(row.architectures) or []
    flags: dict[str, dict[str, Any]] = {}

    def entry(dest: str) -> dict[str, Any]:
        option = option_of.get(dest, dest)
        return flags.setdefault(
            option,
            {"name": option, "dest": dest, "reads": [], "indirect": []},
        )

    for u in in_order(
        session.exec(
            select(UsageSite).where(UsageSite.version_id == version.id, UsageSite.path == row.path)
        ),
        UsageSite,
        "line",
    ):
        entry(u.dest)["reads"].append(
            {**citation(version, u.path, u.line), "text": u.text, "access": u.access}
        )
    for ind in in_order(
        session.exec(
            select(IndirectUsage).where(
                IndirectUsage.version_id == version.id, IndirectUsage.path == row.path
            )
        ),
        IndirectUsage,
        "line",
    ):
        entry(ind.dest)["indirect"].append(indirect_site_dict(version, ind))
    constraints = [
        constraint_dict(version, c)
        for c in all_constraints(session, version)
        if archs and _is_models(c, archs)
    ]
    return {
        "name": row.name,
        "path": row.path,
        "source": citation(version, row.path, 1),
        "architectures": archs,
        "flags": sorted(flags.values(), key=lambda f: f["name"]),
        "constraints": constraints,
        "load_checks": per_stamp(
            ("model-checks", version.id, row.path),
            lambda: _load_checks(session, version, row.path, archs, option_of),
            session,
        ),
    }


def _load_checks(
    session: Session, version: Version, path: str, archs: list[str], option_of: dict[str, str]
) -> list[dict[str, Any]]:
    """What building each architecture of the model file checks (kb/model_checks.py)."""
    modules = version_modules(session, version)
    flags = Flags(option_of)

    def cite(p: str, line: int, end: int) -> dict[str, Any]:
        return citation(version, p, line, end)

    found = (architecture_checks(modules, path, arch, flags, cite) for arch in archs)
    return [f for f in found if f is not None]


# --- a backend value: requirements, side effects, sites by area -----------------------------


def area_of(path: str) -> str:
    """layers/quantization/fp8.py -> "quantization"; managers/scheduler.py -> "scheduler"."""
    rest = path.removeprefix("python/sglang/srt/").removeprefix("python/sglang/")
    parts = rest.split("/")
    if len(parts) == 1:
        return "core"
    head = parts[0]
    if head == "layers":
        sub = parts[1] if len(parts) > 2 else "layers"
        return {"quantization": "quantization", "moe": "moe", "attention": "attention"}.get(
            sub, "layers"
        )
    if head == "managers":
        return "scheduler" if "sched" in parts[-1] else "managers"
    return {"model_executor": "model executor", "mem_cache": "memory cache"}.get(head, head)


def _value_tests(value: str) -> re.Pattern[str]:
    """A condition that tests `value`: 'value' quoted, or an .is_value() call."""
    v = re.escape(value)
    return re.compile(rf"['\"]{v}['\"]|\.is_{re.escape(value.lower().replace('-', '_'))}\(\)")


def plain(c: dict[str, Any], option_of: dict[str, str], message: bool = True) -> str:
    """One sentence for a constraint, with `self.x` spelled as the flag (and its message)."""

    def flag_names(text: str) -> str:
        return re.sub(
            r"\b(?:self|server_args)\.([a-z_][a-z0-9_]*)",
            lambda m: option_of.get(m.group(1), m.group(0)),
            text,
        )

    cond = flag_names(c["condition"])
    if c["kind"] == "override":
        sets = ", ".join(f"{option_of.get(k, k)} = {flag_names(v)}" for k, v in c["writes"].items())
        return f"Sets {sets}" + (f" when {cond}" if cond else "")
    verb = {"raise": "Fails", "assert": "Fails", "warning": "Warns"}.get(c["kind"], c["kind"])
    msg = f": “{c['message']}”" if c["message"] and message else ""
    return f"{verb} when {cond}{msg}" if cond else f"{verb}{msg}"


def _context(condition: str) -> dict[str, list[str]]:
    """The model architectures and hardware checks a condition requires (its positive
    terms), e.g. {"models": ["DeepseekV3ForCausalLM"], "hardware": ["is_sm100_supported()"]}."""
    models: list[str] = []
    hardware: list[str] = []
    for term in _top_level_and(condition):
        if term.startswith("not ") or term.startswith("not("):
            continue
        if "model_arch" in term or "architectures" in term:
            models += re.findall(r"['\"]([A-Za-z0-9_]+)['\"]", term)
        for hw in re.findall(
            r"\b(is_sm\d+\w*\(\)|is_blackwell\w*\(\)|is_hopper\w*\(\)|is_hip\(\)|is_npu\(\)|"
            r"is_cuda\w*\(\)|is_cpu\(\)|is_xpu\(\)|self\.device\s*[!=]=\s*'\w+')",
            term,
        ):
            hardware.append(hw.replace("self.device", "--device"))
    return {"models": list(dict.fromkeys(models)), "hardware": list(dict.fromkeys(hardware))}


def _top_level_and(text: str) -> list[str]:
    out, depth, start, i = [], 0, 0, 0
    while i < len(text):
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and text.startswith(" and ", i):
            out.append(text[start:i].strip())
            start = i + 5
            i += 5
            continue
        i += 1
    out.append(text[start:].strip())
    return [t for t in out if t]


def value_effects(
    session: Session, version: Version, flag: Flag, values: list[str]
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """For each value: "requirements" (raise/assert sites whose conditions allow it and test
    the flag) and "side_effects" (overrides and warnings so triggered, overrides that switch
    the flag to it). A site testing the flag under `not`/`!=` (`assert x in ['a']` fails
    when x is not a) is every other value's: it is listed for those with `excluding`, the
    values it spares, and not for the values it names."""
    option_of = _option_of(session, version)
    universe = list(dict.fromkeys([*flag_values(flag), *values]))
    out: dict[str, dict[str, list[dict[str, Any]]]] = {
        v: {"requirements": [], "side_effects": []} for v in values
    }
    rows: list[ConstraintSite] = all_constraints(session, version)
    named = frozenset(v for v in universe if isinstance(v, str))
    for row in rows:
        reads = loads(row.flags) or []
        writes = loads(row.writes) or {}
        reading = (
            value_reading(condition_path(row), flag.dest, option_of, universe)
            if flag.name in reads
            else None
        )
        excluding = [v for v in universe if reading and v not in reading.may]
        for value in values:
            rx = _value_tests(value)
            if reading is not None:
                tests = value in reading.may and (value in reading.named or bool(excluding))
            else:  # the flag is not read, or a condition does not parse: its text decides
                tests = flag.name in reads and bool(rx.search(row.condition))
            switches = row.kind == "override" and bool(rx.search(writes.get(flag.dest, "")))
            if not (tests or switches):
                continue
            c = constraint_dict(version, row)
            c["summary"] = plain(c, option_of)
            # an override switching the flag to the value tests what it held before
            subject = None if switches else Subject(flag.dest, value, named)
            said = statement(condition_path(row), row.kind, option_of, subject, writes)
            c["statement"] = said.text if said is not None else c["summary"]
            c["full_condition"] = plain(c, option_of, message=False)
            c["requirement"] = said.requirement if said is not None else ""
            c["topic"] = said.topic if said is not None else "other"
            c["conditional"] = said.conditional if said is not None else True
            c["context"] = _context(row.condition)
            if tests and reading is not None and value not in reading.named:
                c["excluding"] = excluding
            if switches:
                c["effect"] = "switches_to"
                out[value]["side_effects"].append(c)
            elif row.kind in ("raise", "assert"):
                c["effect"] = "requires"
                out[value]["requirements"].append(c)
            else:
                c["effect"] = "triggers"
                out[value]["side_effects"].append(c)
    return out


def _fit(choices: list[str], raw: list[str]) -> tuple[list[str], list[str]]:
    """(the values as `choices` spell them, a wrong one replaced by its closest choice or
    dropped when none is close; the wrong ones)."""
    folded = {c.lower(): c for c in choices}
    out: list[str] = []
    wrong: list[str] = []
    for value in raw:
        value = value.strip()[:MAX_NAME]
        found = value if value in choices else folded.get(value.lower())
        if found is None:
            wrong.append(value)
            found = next(iter(did_you_mean(value, choices, limit=1)), None)
        if found is not None and found not in out:
            out.append(found)
    return out, wrong


def _choices_of(session: Session, version: Version, flag: str) -> list[str]:
    return flag_values(get_flag(session, version, flag))


def _shared(choices: list[str], raw: list[str]) -> list[str]:
    folded = {c.lower(): c for c in choices}
    return list(dict.fromkeys(folded[v] for v in (r.strip().lower() for r in raw) if v in folded))


def _resolve_values(flag: Flag, raw: list[str], version: Version) -> list[str]:
    """The values as the flag spells them; NotFound naming every wrong one, whose links
    each correct them all (the first by the suggestion, the others by their closest)."""
    choices = flag_values(flag)
    values, wrong = _fit(choices, raw)
    if not wrong:
        return values
    first = wrong[0]
    suggestions = did_you_mean(first, choices) or choices[:5]
    quoted = ", ".join(repr(w) for w in wrong)
    verb = "is not a value" if len(wrong) == 1 else "are not values"
    raise NotFound(
        "value",
        first,
        f"{quoted} {verb} of {flag.name} in {version.name}.",
        suggestions,
        version=version.name,
        values=[
            _fit(choices, [s if v.strip()[:MAX_NAME] == first else v for v in raw])[0]
            for s in suggestions
        ],
    )


def value_of(session: Session, version: Version, flag: Flag, raw: str) -> str | None:
    """`raw` as the flag spells it where its backend page exists: one of its choices or known
    values (any case), or a value some site handles though it is none; else None."""
    choices = flag_values(flag)
    folded = {c.lower(): c for c in choices}
    value = raw if raw in choices else folded.get(raw.strip().lower(), raw)
    if value in choices or choice_sites(session, version, flag.name, [value])[value]:
        return value
    return None


def flag_for_value(
    session: Session, version: Version, raw_flag: str, raw: str
) -> tuple[Flag, str | None]:
    """The flag whose backend page shows value `raw`, and the value as that flag spells it
    (None: no value of it): a deprecated flag gives way to its successor, whose code handles
    the values, unless only the deprecated flag has the value (`--dsa-prefill-cp-mode
    in-seq-split`, which SGLang maps to another value of `--cp-strategy`)."""
    row = get_flag(session, version, raw_flag, replaced=True)
    value = value_of(session, version, row, raw)
    if value is None:
        own = get_flag(session, version, raw_flag)
        if own.id != row.id and (found := value_of(session, version, own, raw)) is not None:
            return own, found
    return row, value


def backend_tail(
    session: Session, version: Version, raw_flag: str, raw_values: list[str], compare: bool
) -> str:
    """Where a link to a backend page (one value, or `raw_values` compared) goes in
    `version`, as the URL tail after /v/{version}/: that page with the values the version's
    flag has; none of them, the flag's page; no such flag, the version's flags."""
    try:
        flag = get_flag(session, version, raw_flag)
        if not compare and raw_values:
            flag, value = flag_for_value(session, version, raw_flag, raw_values[0])
    except NotFound:
        return "flags"
    name = quote(flag.name, safe="")
    if compare:
        shared = _shared(_choices_of(session, version, flag.name), raw_values)
        if shared:
            return f"backends/{name}/compare?values={','.join(quote(v, safe='') for v in shared)}"
    elif raw_values and value is not None:
        return f"backends/{name}/{quote(value, safe='')}"
    return f"flags/{name}"


def backend_version(
    session: Session, name: str, raw_flag: str, raw_values: list[str], compare: bool
) -> Version:
    """`get_version` for a backend page: a misspelt version's suggestions each link to the
    page the suggested version has (`backend_tail`), never one that answers 404."""
    try:
        return get_version(session, name)
    except NotFound as exc:
        exc.pages = [
            backend_tail(session, read_version(session, s), raw_flag, raw_values, compare)
            for s in exc.suggestions
        ]
        raise


def enum_member(
    session: Session, version: Version, flag: Flag, value: str
) -> dict[str, Any] | None:
    enum = flag_enum(session, version, flag.name)
    if enum is None:
        return None
    for m in loads(enum.members) or []:
        # an auto() member's value is its name in lower case; a name-looked-up enum's
        # known value is the member's name
        if value.lower() in (str(m.get("value")).lower(), str(m.get("name")).lower()):
            return {
                "enum": enum.name,
                "name": m["name"],
                "value": m.get("value"),
                "auto": bool(m.get("auto")),
                "source": citation(version, enum.path, m.get("line", enum.line)),
            }
    return None


def sites_by_area(sites: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in sites:
        groups[area_of(s["path"])].append(s)
    return [{"area": a, "sites": groups[a]} for a in sorted(groups)]


def compare_values(
    session: Session, version: Version, raw_flag: str, raw_values: list[str]
) -> dict[str, Any]:
    raw_values = [v for v in raw_values if v.strip()]
    try:
        flag = get_flag(session, version, raw_flag)
    except NotFound as exc:
        # A link compares only the values that flag (or that version's flag) has: they are
        # not typos of its own, so none is swapped for a look-alike; none left: its page.
        exc.values = [
            _shared(_choices_of(session, version, s), raw_values) for s in exc.suggestions
        ]
        for e in exc.elsewhere:
            other = get_version(session, e["version"])
            e["values"] = ",".join(_shared(_choices_of(session, other, raw_flag), raw_values))
        raise
    values = _resolve_values(flag, raw_values, version)
    if not values:
        choices = flag_values(flag)
        raise NotFound(
            "value",
            "",
            f"Name values of {flag.name} to compare.",
            choices[:5],
            version=version.name,
        )
    effects = value_effects(session, version, flag, values)
    sites = choice_sites(session, version, flag.name, values)
    choices = [str(c) for c in flag_values(flag)]
    cells: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
    for value in values:
        for s in sites[value]:
            d = choice_site_dict(version, s)
            key = (area_of(s.path), s.path)
            cells.setdefault(key, {v: [] for v in values})[value].append(d)
    return {
        "flag": flag.name,
        "dest": flag.dest,
        "values": values,
        "choices": [str(c) for c in loads(flag.choices) or []],
        "known_values": loads(flag.known_values),
        "requirements": {v: effects[v]["requirements"] for v in values},
        "requirement_summaries": {
            v: summarize(
                effects[v]["requirements"],
                load_requirements(session, version, choices, v),
                stage_counts(layer_selections(session, version, flag.dest, choices, v)),
            )
            for v in values
        },
        "side_effects": {v: effects[v]["side_effects"] for v in values},
        "enum_members": {v: enum_member(session, version, flag, v) for v in values},
        "rows": [
            {"area": area, "path": path, "cells": cells[(area, path)]}
            for area, path in sorted(cells)
        ],
    }


# --- the extraction report ------------------------------------------------------------------


def report(version: Version) -> dict[str, Any]:
    data = loads(version.report) or {}
    counts = data.get("counts", {})
    total = counts.get("choice_sites", 0)
    ambiguous = counts.get("ambiguous_choice_sites", 0)
    return {
        "version": version.name,
        "extractor_version": version.extractor_version,
        "counts": counts,
        "choice_sites": total,
        "ambiguous_choice_sites": ambiguous,
        "ambiguous_share": round(ambiguous / total, 4) if total else 0.0,
        "choice_sites_by_how": data.get("choice_sites_by_how", {}),
        "warnings": data.get("warnings", []),
        "seconds": data.get("seconds"),
    }
