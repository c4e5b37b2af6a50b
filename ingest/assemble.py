"""Turn the cached facts of one version's files into that version's knowledge-base rows.

Blob facts are version-independent (every `server_args.<name>` read, every string
comparison, ...); here they are filtered by the version's own flags and choices, enums are
linked to the flags whose choices they spell, and choice sites are attributed to a flag only
where the code says which (the compared attribute, the `get_<dest>()` receiver, a linked
enum); the rest is marked ambiguous with its candidate flags rather than guessed.
"""

from __future__ import annotations

import contextlib
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ingest import actions
from ingest.analyze import HOOK_DIR, SERVER_ARGS_PATH, kind_of
from ingest.constraints import site_key
from ingest.env_rows import docs_rows, env_rows
from ingest.indirect import model_rows, resolve
from ingest.modules import Modules
from ingest.static_eval import Unknown, plain

# Packages with a ServerArgs class of their own (the diffusion server): their
# `server_args.x` reads and backend checks are about that program's flags, not these.
OTHER_PROGRAMS = ("python/sglang/multimodal_gen/",)

# Values too common to say anything on their own: only attributed sites are kept for them.
GENERIC_VALUES = {
    "auto", "none", "default", "true", "false", "null", "", "disabled", "enabled", "on",
    "off", "all", "0", "1", "2", "yes", "no", "normal", "other", "unknown", "cpu", "cuda",
}  # fmt: skip


@dataclass
class VersionRows:
    era: int = 1
    flags: list[dict[str, Any]] = field(default_factory=list)
    enums: list[dict[str, Any]] = field(default_factory=list)
    constraints: list[dict[str, Any]] = field(default_factory=list)
    usages: list[dict[str, Any]] = field(default_factory=list)
    choice_sites: list[dict[str, Any]] = field(default_factory=list)
    env_vars: list[dict[str, Any]] = field(default_factory=list)
    env_sites: list[dict[str, Any]] = field(default_factory=list)
    env_prefix_aliases: list[dict[str, Any]] = field(default_factory=list)
    docs: list[dict[str, Any]] = field(default_factory=list)
    indirect: list[dict[str, Any]] = field(default_factory=list)  # see ingest/indirect.py
    models: list[dict[str, Any]] = field(default_factory=list)
    cited: dict[str, str] = field(default_factory=dict)  # path -> sha
    warnings: list[dict[str, Any]] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {
            "flags": len(self.flags),
            "enums": len(self.enums),
            "constraints": len(self.constraints),
            "usages": len(self.usages),
            "choice_sites": len(self.choice_sites),
            "ambiguous_choice_sites": sum(1 for c in self.choice_sites if c["flag"] is None),
            "env_vars": len(self.env_vars),
            "env_sites": len(self.env_sites),
            "docs_entries": len(self.docs),
            "indirect_usages": len(self.indirect),
            "models": len(self.models),
            "warnings": len(self.warnings),
        }

    def choice_sites_by_how(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for c in self.choice_sites:
            entry = out.setdefault(c["how"], {"attributed": 0, "ambiguous": 0})
            entry["ambiguous" if c["flag"] is None else "attributed"] += 1
        return dict(sorted(out.items()))


def _camel_to_snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def _names_flag(snake: str, dest: str) -> bool:
    """MoeRunnerBackend ~ moe_runner_backend, Fp4GemmRunnerBackend ~ fp4_gemm_runner_backend,
    TransferBackend ~ disaggregation_transfer_backend."""
    return dest == snake or dest.endswith("_" + snake) or dest == snake.replace("_runner", "")


def _link_enums(
    enums: list[tuple[str, dict[str, Any]]], flags: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Link each enum to the flags whose choices it spells; keep only linked enums.

    An enum links to a flag when most of its values are among the flag's choices (Jaccard
    >= 0.5), or at least two are and its name spells the flag's dest (MoeRunnerBackend ->
    moe_runner_backend). Each flag keeps only its best-matching enums.
    """
    scored: list[tuple[float, int, str]] = []  # (score, enum index, option)
    choice_sets = [
        (flag, {c.lower() for c in flag["choices"] if isinstance(c, str)})
        for flag in flags
        if flag["choices"] and not flag["deprecated"]
    ]
    for i, (_path, enum) in enumerate(enums):
        values = {m["value"].lower() for m in enum["members"] if isinstance(m["value"], str)}
        snake = _camel_to_snake(enum["name"])
        for flag, choices in choice_sets:
            common = len(values & choices)
            if common < 2:
                continue
            jaccard = common / len(values | choices)
            is_named = _names_flag(snake, flag["dest"])
            if (jaccard >= 0.5 and common >= 3) or is_named:
                scored.append((jaccard + (1.0 if is_named else 0.0), i, flag["name"]))
    dest_of = {f["name"]: f["dest"] for f in flags}
    best: dict[str, float] = defaultdict(float)
    for score, _i, option in scored:
        best[option] = max(best[option], score)
    linked: dict[int, list[str]] = defaultdict(list)
    for score, i, option in scored:
        if score >= best[option] - 1e-9:
            linked[i].append(option)
    out = []
    for i, options in sorted(linked.items()):
        path, enum = enums[i]
        snake = _camel_to_snake(enum["name"])
        exact = [o for o in set(options) if dest_of[o] in (snake, snake.replace("_runner", ""))]
        named = exact or sorted(o for o in set(options) if _names_flag(snake, dest_of[o]))
        # References to the enum are attributed to the one flag it is named after, or to its
        # only linked flag; otherwise they stay ambiguous between the linked flags.
        primary: str | None = None
        if len(named) == 1:
            primary = named[0]
        elif len(set(options)) == 1:
            primary = options[0]
        out.append({**enum, "path": path, "flags": sorted(set(options)), "primary": primary})
    return out


# Files the explain simulation parses (kb/explain/simulate.py): the predicates' definitions,
# environment variables' defaults, the model config's attention kinds; hooks are in HOOK_DIR.
SIMULATION_FILES = frozenset(
    {
        "python/sglang/srt/utils/common.py",
        "python/sglang/srt/utils.py",
        "python/sglang/srt/environ.py",
        "python/sglang/srt/configs/model_config.py",
        "python/sglang/srt/utils/hf_transformers_utils.py",
    }
)


def assemble(
    files: dict[str, str],
    facts: dict[str, dict[str, Any]],
    read_text: Callable[[str], str] | None = None,
) -> VersionRows:
    """`files`: path -> sha of the version; `facts`: facts key -> facts of every file;
    `read_text(sha)`: a blob's text, to resolve choices imported from other modules."""
    from ingest.analyze import facts_key

    rows = VersionRows()

    def facts_of(path: str) -> dict[str, Any]:
        return facts[facts_key(files[path], kind_of(path))]

    if SERVER_ARGS_PATH not in files:
        rows.warnings.append({"path": SERVER_ARGS_PATH, "line": 0, "what": "file not found"})
        return rows
    main = facts_of(SERVER_ARGS_PATH)
    rows.era = main.get("era", 1)
    rows.flags = [dict(f) for f in main.get("flags", [])]
    rows.cited[SERVER_ARGS_PATH] = files[SERVER_ARGS_PATH]
    for path, sha in files.items():  # what explain's simulation reads besides server_args
        if path in SIMULATION_FILES or (path.startswith(HOOK_DIR) and path.endswith(".py")):
            rows.cited[path] = sha
    modules = Modules(files, read_text)
    local_actions = main.get("action_classes", {})
    for flag in rows.flags:
        if flag.get("choices_external"):
            _resolve_external_choices(flag, modules, rows)
        if flag.get("const_external"):
            with contextlib.suppress(Unknown):  # else the source text stays
                flag["const"] = plain(modules.fold(*flag["const_external"]))
        _settle_action(flag, local_actions, modules, rows)
    rows.cited.update(modules.used)
    for path in files:
        rows.warnings.extend(facts_of(path).get("warnings", []))

    # dest -> option; a deprecated alias sharing a dest never wins over the live flag.
    option_of: dict[str, str] = {}
    for flag in sorted(rows.flags, key=lambda f: f["deprecated"], reverse=True):
        option_of[flag["dest"]] = flag["name"]
    by_option = {f["name"]: f for f in rows.flags}

    _constraints(rows, files, facts_of, option_of)
    _usages(rows, files, facts_of, option_of)
    rows.env_vars, rows.env_sites, rows.env_prefix_aliases = env_rows(
        files, facts_of, option_of, rows.cited
    )
    rows.docs = docs_rows(files, facts_of, rows.cited)
    rows.models = model_rows(files, facts_of)
    if read_text is not None:
        rows.indirect = resolve(
            files,
            facts_of,
            option_of,
            read_text,
            lambda p: p == SERVER_ARGS_PATH or p.startswith(OTHER_PROGRAMS),
        )
        for site in rows.indirect:
            rows.cited[site["path"]] = files[site["path"]]

    enums = [
        (path, e)
        for path in files
        if path.startswith("python/sglang/") and not path.startswith(OTHER_PROGRAMS)
        for e in facts_of(path)["enums"]
    ]
    rows.enums = _link_enums(enums, rows.flags)
    for enum in rows.enums:
        rows.cited[enum["path"]] = files[enum["path"]]
    _choice_sites(rows, files, facts_of, option_of, by_option)
    return rows


def _resolve_external_choices(flag: dict[str, Any], modules: Modules, rows: VersionRows) -> None:
    unresolved = []
    values = list(flag["choices"] or [])
    for expr, imports in flag["choices_external"]:
        try:
            found = plain(modules.fold(expr, imports))
        except Unknown:
            unresolved.append(expr)
            continue
        found = found if isinstance(found, list) else [found]
        values.extend(v for v in found if v not in values)
    if unresolved and flag.get("choices_fallback") and not values:
        values = list(flag["choices_fallback"])  # era 3: the Literal, rather than nothing
    flag["choices"] = values or None
    flag["choices_dynamic"] = bool(unresolved)
    if unresolved:
        rows.warnings.append(
            {
                "path": flag["path"],
                "line": flag["line"],
                "what": f"choices of {flag['name']} are computed at run time "
                f"({', '.join(unresolved)})" + (": the list may be partial" if values else ""),
            }
        )


def _settle_action(
    flag: dict[str, Any],
    local: dict[str, dict[str, Any]],
    modules: Modules,
    rows: VersionRows,
) -> None:
    """Apply what the flag's action class implies (nargs, const, default, what using the flag
    does), then decide whether the option takes a value and how it is deprecated."""
    action = flag.get("action")
    cls = None
    if action and action not in actions.BUILTIN_ACTIONS:
        name = action.split(".")[-1]
        cls = actions.resolve(name, local)
        if cls is None and flag.get("action_module"):
            found = modules.class_def(flag["action_module"], name)
            if found is not None:
                node, path = found
                cls = actions.facts_of_class(node, path)
                rows.cited[path] = modules.files[path]
        if cls is None:
            rows.warnings.append(
                {
                    "path": flag["path"],
                    "line": flag["line"],
                    "what": f"action {action} of {flag['name']} not found: its arity is a guess",
                }
            )
        else:
            actions.apply_class(flag, cls)
    flag["takes_value"] = actions.takes_value(flag, cls)
    if flag["deprecated"] and flag.get("deprecated_kind") is None:
        flag["deprecated_kind"] = "soft"  # said in the help only; using it does nothing else


def _constraints(rows: VersionRows, files, facts_of, option_of: dict[str, str]) -> None:
    for path in files:
        if path != SERVER_ARGS_PATH and not path.startswith(HOOK_DIR):
            continue
        for site in facts_of(path).get("constraints", []):
            flags = [option_of[d] for d in site["flags"] if d in option_of]
            affects = [option_of[d] for d in site["affects"] if d in option_of]
            writes = {d: v for d, v in site["writes"].items() if d in option_of}
            if site["kind"] == "override" and not writes:
                continue  # assigns an internal attribute, not a flag
            if not flags and not affects:
                continue
            rows.constraints.append(
                {
                    **site,
                    "flags": list(dict.fromkeys(flags)),
                    "affects": list(dict.fromkeys(affects)),
                    "writes": writes,
                    "key": site_key(site),
                }
            )
            rows.cited[path] = files[path]


def _usages(rows: VersionRows, files, facts_of, option_of: dict[str, str]) -> None:
    for path, sha in files.items():
        if path.startswith(OTHER_PROGRAMS):
            continue
        f = facts_of(path)
        seen = set()
        lines = f["lines"]
        for name, line, access in f["reads"]:
            if name not in option_of or (name, line) in seen:
                continue
            seen.add((name, line))
            rows.usages.append(
                {
                    "dest": name,
                    "access": access,
                    "path": path,
                    "line": line,
                    "text": lines.get(str(line), ""),
                }
            )
            rows.cited[path] = sha


class _SiteCollector:
    """Adds one file's choice sites to `rows`, once per (line, value, flag)."""

    def __init__(self, rows: VersionRows, path: str, sha: str, lines: dict[str, str]) -> None:
        self.rows, self.path, self.sha, self.lines = rows, path, sha, lines
        self.seen: set[tuple[int, str, str | None]] = set()

    def add(self, value: Any, line: int, how: str, flag: str | None, candidates: list[str]) -> None:
        key = (line, str(value), flag)
        if key in self.seen:
            return
        self.seen.add(key)
        self.rows.choice_sites.append(
            {
                "value": str(value),
                "flag": flag,
                "candidates": candidates if flag is None else [],
                "how": how,
                "path": self.path,
                "line": line,
                "text": self.lines.get(str(line), ""),
            }
        )
        self.rows.cited[self.path] = self.sha


def _choice_sites(rows: VersionRows, files, facts_of, option_of, by_option) -> None:
    accepting: dict[str, list[str]] = defaultdict(list)  # value -> options
    for flag in rows.flags:
        if flag["deprecated"]:
            continue
        for value in flag["choices"] or []:
            if isinstance(value, str):
                accepting[value].append(flag["name"])
    enum_by_name: dict[str, list[dict[str, Any]]] = defaultdict(list)
    is_method: dict[str, list[tuple[dict[str, Any], str]]] = defaultdict(list)
    for enum in rows.enums:
        enum_by_name[enum["name"]].append(enum)
        members = {m["name"]: m for m in enum["members"]}
        methods = dict(enum.get("is_methods", {}))
        for m in enum["members"]:
            methods.setdefault(m["name"].lower(), m["name"])
        for method, member in methods.items():
            if member in members:
                is_method[method].append((enum, member))

    for path, sha in files.items():
        if path.startswith(OTHER_PROGRAMS):
            continue
        f = facts_of(path)
        add = _SiteCollector(rows, path, sha, f["lines"]).add
        for value, line, tail, how in f["choices"]:
            if how == "is_call":
                targets = is_method.get(value)
                if not targets:
                    continue
                owner = option_of.get(tail)
                options = sorted({o for enum, _m in targets for o in enum["flags"]})
                member_value = next(
                    (m["value"] for m in targets[0][0]["members"] if m["name"] == targets[0][1]),
                    value,
                )
                enums_hit = {id(enum): enum for enum, _m in targets}
                if owner in options:
                    add(member_value, line, how, owner, [])
                elif len(enums_hit) == 1 and targets[0][0]["primary"]:
                    add(member_value, line, how, targets[0][0]["primary"], [])
                else:
                    add(member_value, line, how, None, options)
                continue
            candidates = accepting.get(value)
            if not candidates:
                continue
            owner = option_of.get(tail)
            if owner is not None:
                if owner in candidates or by_option[owner]["choices_dynamic"]:
                    add(value, line, how, owner, [])
                continue  # compared against another flag's value: not this choice
            if value.lower() in GENERIC_VALUES:
                continue
            add(value, line, how, None, sorted(candidates))
        for cls, member, line in f["enum_refs"]:
            for enum in enum_by_name.get(cls, []):
                m = next((m for m in enum["members"] if m["name"] == member), None)
                if m is None:
                    continue
                add(m["value"], line, "enum", enum["primary"], enum["flags"])
