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
from functools import lru_cache
from typing import Any, Literal, Protocol

from ingest import actions
from ingest.analyze import HOOK_DIR, SERVER_ARGS_PATH, kind_of
from ingest.choices import registry_subject
from ingest.constraints import ACTION_CALL, site_key
from ingest.doc_commands import is_markdown
from ingest.env_rows import docs_rows, env_rows
from ingest.flags import MENTION_RE, RUN_TIME_OPEN, replacement_in_message
from ingest.indirect import Resolver, absolute, module_of
from ingest.model_classes import model_rows
from ingest.modules import Memo, Modules
from ingest.simulated import simulated
from ingest.static_eval import CannotFold, plain
from kb.dests import dest_rank
from kb.replacements import expand_braces

# Tests and benchmarks: their comparisons are about their own arguments (a benchmark's
# `args.dataset_name == "mooncake"`), never the handling of a server flag's value.
NOT_SERVER_RE = re.compile(
    r"(?:^|/)(?:tests?|benchmarks?)/|/(?:test_|bench_)[^/]*$|benchmark[^/]*$"
)

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
    doc_commands: list[dict[str, Any]] = field(default_factory=list)  # ingest/doc_commands.py
    doc_commands_skipped: int = 0  # templates (`<model>`, `$VAR`) left out
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
            "doc_commands": len(self.doc_commands),
            "doc_commands_skipped": self.doc_commands_skipped,
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
    subsets: list[tuple[int, str]] = []  # (enum index, option) where all members are choices
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
            elif common == len(values):
                # Every member is a choice of the flag: one enum for a part of its values
                # (CacheAwarePolicy: lpm, dfs-weight of --schedule-policy).
                subsets.append((i, flag["name"]))
    dest_of = {f["name"]: f["dest"] for f in flags}
    best: dict[str, float] = defaultdict(float)
    for score, _i, option in scored:
        best[option] = max(best[option], score)
    linked: dict[int, list[str]] = defaultdict(list)
    for score, i, option in scored:
        if score >= best[option] - 1e-9:
            linked[i].append(option)
    strong = set(linked)
    for i, option in subsets:
        if i not in strong:
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
        else:
            primary = family_base(sorted(set(options)), dest_of)
        out.append({**enum, "path": path, "flags": sorted(set(options)), "primary": primary})
    return out


# "Builtins: EAGLE, EAGLE3, NGRAM. Or any name registered via ...": a help listing the
# values an open registry comes with.
BUILTINS_RE = re.compile(r"\bBuiltins:\s*([\w-]+(?:\s*,\s*[\w-]+)*)")


def _known_values(
    enums: list[tuple[str, dict[str, Any]]], flags: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Known values of flags without choices whose values an enum or the help spells: the
    help's "Builtins:" list, then what the one enum named exactly after the flag's dest says
    (two enums of that name: which one the code converts to is unknown):
    - one whose members are looked up by name (SpeculativeAlgorithm.from_string:
      `cls[name.upper()]`; `EplbAlgorithm[raw_algorithm]`): the member names, which a user
      passes, and the flag's default when no member is named so (the "auto" the code
      handles before the lookup). NONE is left out: it is what an unset flag becomes, not
      a name to pass;
    - else a str enum with string members holding the flag's default (ModelImpl: "auto"):
      the member values, which the code compares the flag with.
    Sets each flag's `known_values`; returns those enums, linked."""
    by_snake: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for path, enum in enums:
        by_snake[_camel_to_snake(enum["name"])].append((path, enum))
    out = []
    for flag in flags:
        if flag["choices"] is not None or flag["deprecated"] or not flag.get("takes_value", True):
            continue
        found = BUILTINS_RE.search(flag["help"] or "")
        known = [v.strip() for v in found.group(1).split(",")] if found else []
        named = by_snake.get(flag["dest"], [])
        default = flag.get("default")
        if len(named) == 1:
            path, enum = named[0]
            members = enum["members"]
            values = None
            if enum.get("by_name"):
                values = [m["name"] for m in members if m["name"].upper() != "NONE"]
                if (
                    isinstance(default, str)
                    and default
                    and default.upper() not in {m["name"].upper() for m in members}
                ):
                    values.insert(0, default)
            elif (
                enum.get("str_values")
                and isinstance(default, str)  # (the one check that the flag holds its values)
                and default in {m["value"] for m in members}
            ):
                values = [m["value"] for m in members]
            if values is not None:
                known += values
                out.append({**enum, "path": path, "flags": [flag["name"]], "primary": flag["name"]})
        folded: dict[str, str] = {}
        for value in known:
            folded.setdefault(value.upper(), value)
        if folded:
            flag["known_values"] = list(folded.values())
    return out


class Facts(Protocol):
    """facts key -> a blob's facts (a dict, or the ingest's store that decodes on demand)."""

    def __getitem__(self, key: str, /) -> dict[str, Any]: ...


class _Blob:
    """One file of a version and what follows from its facts alone: computed when first
    asked, kept while the file keeps this blob (consecutive versions share most blobs)."""

    def __init__(self, path: str, sha: str, facts: dict[str, Any]) -> None:
        self.path, self.sha, self.facts = path, sha, facts
        self.enum_names = [e["name"] for e in facts["enums"]]

    # Each derived value is computed on first use (functools.cached_property takes a lock
    # per access in Python 3.11: too slow for the ~360,000 accesses of an ingest).
    _usages: tuple[frozenset[str], list[dict[str, Any]]] | None = None
    _choice_keys: tuple[frozenset[str], frozenset[str], frozenset[str]] | None | bool = False
    _registry: list[tuple[str, int, str, str, int]] | None = None
    _constraint_keys: list[str] | None = None

    @property
    def usages(self) -> tuple[frozenset[str], list[dict[str, Any]]]:
        """(dests read, one row per (dest, line), the first read of it on the line)."""
        if self._usages is None:
            self._usages = self._find_usages()
        return self._usages

    def _find_usages(self) -> tuple[frozenset[str], list[dict[str, Any]]]:
        seen: set[tuple[str, int]] = set()
        lines = self.facts["lines"]
        out = []
        for name, line, access in self.facts["reads"]:
            if (name, line) in seen:
                continue
            seen.add((name, line))
            text = lines.get(str(line), "")
            row = {"dest": name, "access": access, "path": self.path, "line": line, "text": text}
            out.append(row)
        return frozenset(r["dest"] for r in out), out

    @property
    def constraint_keys(self) -> list[str]:
        if self._constraint_keys is None:
            self._constraint_keys = [site_key(s) for s in self.facts.get("constraints", [])]
        return self._constraint_keys

    @property
    def choice_keys(self) -> tuple[frozenset[str], frozenset[str], frozenset[str]] | None:
        """(values that may be a flag's choice, `is_<x>()` method names, enum classes
        referenced); None when the file has a named container (its values come from
        elsewhere) and must always be looked at."""
        if self._choice_keys is False:
            self._choice_keys = self._find_choice_keys()
        return self._choice_keys  # type: ignore[return-value]

    def _find_choice_keys(
        self,
    ) -> tuple[frozenset[str], frozenset[str], frozenset[str]] | None:
        f = self.facts
        if f.get("named_contains"):
            return None
        values = {value for value, _line, _func, _position in f.get("registry", [])}
        for entries, _line, _subject, _lookups in f.get("dispatch", []):
            values.update(key for key, _line in entries)
        calls: set[str] = set()
        for value, _line, _tail, how in f["choices"]:
            (calls if how == "is_call" else values).add(value)
        classes = {cls for cls, _member, _line in f["enum_refs"]}
        return frozenset(values), frozenset(calls), frozenset(classes)

    @property
    def registry(self) -> list[tuple[str, int, str, str, int]]:
        """The registry entries (value, line, the flag the registry's name spells, the
        registering function, the value's argument position)."""
        if self._registry is None:
            self._registry = [
                (value, line, registry_subject(func), func, pos)
                for value, line, func, pos in self.facts.get("registry", [])
            ]
        return self._registry


class Assembly:
    """Assembles the versions of one ingest, oldest first. What depends on a blob alone is
    computed once and kept while later versions still have the blob (see `_Blob`, and
    `indirect.Resolver` for the indirect reads); each version then filters it by its own
    flags. The rows are those `assemble()` gives for each version on its own."""

    def __init__(self) -> None:
        self.blobs: dict[str, _Blob] = {}  # the previous version's files
        self.env_cache: dict[str, Any] = {}
        self.modules_memo: Memo = {}
        self.resolver = Resolver()
        self.doc_commands: dict[str, tuple[str, dict[str, Any]]] = {}  # path -> (sha, found)

    def _doc_commands(
        self, files: dict[str, str], facts: Facts, rows: VersionRows
    ) -> dict[str, str]:
        """The version's doc commands (from every Markdown/MDX file, the flag and variable
        references included) into `rows`; returns the files without the Markdown files read
        for nothing else, which the rest of the assembly has no use for."""
        from ingest.analyze import facts_key

        old, kept, rest = self.doc_commands, {}, {}
        for path, sha in files.items():
            if not is_markdown(path):
                rest[path] = sha
                continue
            kind = kind_of(path)
            if kind != "markdown":
                rest[path] = sha
            known = old.get(path)
            if known is None or known[0] != sha:
                known = (sha, facts[facts_key(sha, kind)].get("doc_commands") or {})
            kept[path] = known
            found = known[1]
            rows.doc_commands_skipped += found.get("skipped", 0)
            if found.get("commands"):
                rows.doc_commands.extend(
                    {"path": path, "line": line, "command": command}
                    for line, command in found["commands"]
                )
        self.doc_commands = kept
        return rest

    def _files(self, files: dict[str, str], facts: Facts) -> dict[str, _Blob]:
        from ingest.analyze import facts_key

        old, out = self.blobs, {}
        for path, sha in files.items():
            blob = old.get(path)
            if blob is None or blob.sha != sha:
                blob = _Blob(path, sha, facts[facts_key(sha, kind_of(path))])
            out[path] = blob
        self.blobs = out
        return out

    def version(
        self,
        files: dict[str, str],
        facts: Facts,
        read_text: Callable[[str], str] | None = None,
    ) -> VersionRows:
        """`files`: path -> sha of the version; `facts`: facts key -> facts of every file
        (only the version's own files are looked up); `read_text(sha)`: a blob's text, to
        resolve choices imported from other modules and follow indirect reads."""
        rows = VersionRows()
        files = self._doc_commands(files, facts, rows)
        blobs = self._files(files, facts)

        def facts_of(path: str) -> dict[str, Any]:
            return blobs[path].facts

        if SERVER_ARGS_PATH not in files:
            rows.warnings.append({"path": SERVER_ARGS_PATH, "line": 0, "what": "file not found"})
            return rows
        main = facts_of(SERVER_ARGS_PATH)
        rows.era = main.get("era", 1)
        rows.flags = [dict(f) for f in main.get("flags", [])]
        rows.cited[SERVER_ARGS_PATH] = files[SERVER_ARGS_PATH]
        for path, sha in files.items():  # what explain's simulation reads besides server_args
            if simulated(path):
                rows.cited[path] = sha
        modules = Modules(files, read_text, self.modules_memo)
        local_actions = main.get("action_classes", {})
        for flag in rows.flags:
            if flag.get("choices_external"):
                _resolve_external_choices(flag, modules, rows)
            if flag.get("help_fill"):
                _fill_help(flag, modules)
            if flag.get("const_external"):
                with contextlib.suppress(CannotFold):  # else the source text stays
                    flag["const"] = plain(modules.fold(*flag["const_external"]))
            _settle_action(flag, local_actions, modules, rows)
        _replacements_in_messages(rows.flags)
        rows.cited.update(modules.used)
        for blob in blobs.values():
            rows.warnings.extend(blob.facts.get("warnings", []))

        # dest -> option; of flags sharing a dest the best (kb.dests) is written last.
        option_of: dict[str, str] = {}
        ranked = sorted(rows.flags, key=lambda f: dest_rank(f["name"], f["dest"], f["deprecated"]))
        for flag in ranked:
            option_of[flag["dest"]] = flag["name"]
        by_option = {f["name"]: f for f in rows.flags}

        _constraints(rows, blobs, option_of)
        _action_warnings(rows, blobs)
        _usages(rows, blobs, option_of)
        self.env_cache = {p: e for p, e in self.env_cache.items() if p in files}
        rows.env_vars, rows.env_sites, rows.env_prefix_aliases = env_rows(
            files, facts_of, option_of, rows.cited, self.env_cache
        )
        rows.docs = docs_rows(files, facts_of, rows.cited)
        rows.models = model_rows(files, facts_of)
        if read_text is not None:
            rows.indirect = self.resolver.resolve(
                files,
                facts_of,
                option_of,
                read_text,
                lambda p: p == SERVER_ARGS_PATH,
            )
            _accessor_reads(rows, blobs, option_of)
            for site in rows.indirect:
                rows.cited[site["path"]] = files[site["path"]]

        enums = [
            (path, e)
            for path, blob in blobs.items()
            if blob.enum_names and path.startswith("python/sglang/")
            for e in blob.facts["enums"]
        ]
        rows.enums = _link_enums(enums, rows.flags)
        for enum in _known_values(enums, rows.flags):
            same = [e for e in rows.enums if (e["path"], e["name"]) == (enum["path"], enum["name"])]
            if same:  # also linked to flags by their choices: one row, linked to all
                same[0]["flags"] = sorted({*same[0]["flags"], *enum["flags"]})
            else:
                rows.enums.append(enum)
        for enum in rows.enums:
            rows.cited[enum["path"]] = files[enum["path"]]
        _choice_sites(rows, blobs, option_of, by_option)
        return rows


def assemble(
    files: dict[str, str],
    facts: dict[str, dict[str, Any]],
    read_text: Callable[[str], str] | None = None,
) -> VersionRows:
    """One version's rows on their own (an ingest uses one `Assembly` for all its versions)."""
    return Assembly().version(files, facts, read_text)


def _resolve_external_choices(flag: dict[str, Any], modules: Modules, rows: VersionRows) -> None:
    unresolved = []
    values = list(flag["choices"] or [])
    for expr, imports in flag["choices_external"]:
        try:
            found = plain(modules.fold(expr, imports))
        except CannotFold:
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


def _fill_help(flag: dict[str, Any], modules: Modules) -> None:
    """The help's placeholders that need another module (ingest.flags._help_filler): an
    imported function's docstring, a list folded like external choices (only when every
    piece folds). What stays unknown keeps its "(computed at run time: …)"."""
    for marker, kind, *where in flag["help_fill"]:
        text = None
        if kind == "doc":
            text = modules.docstring(*where)
        elif kind == "values":
            values, pieces = list(where[0]), where[1]
            try:
                for expr, imports in pieces:
                    found = plain(modules.fold(expr, imports))
                    values.extend(found if isinstance(found, list) else [found])
                text = str(values)
            except CannotFold:
                pass
        if text is not None:
            flag["help"] = flag["help"].replace(marker, text, 1)
            if flag["deprecated_message"]:
                flag["deprecated_message"] = flag["deprecated_message"].replace(marker, text, 1)


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


def _replacements_in_messages(flags: list[dict[str, Any]]) -> None:
    """A deprecated flag whose message names its replacement only in words (`set --x to
    'v'`): the replacement among the flags of the version. A replacement's value the
    flag's choices lack is dropped, as replacement_in_message drops it."""
    choices_of: dict[str, list[Any] | None] = {}
    for flag in flags:
        for name in [flag["name"], *flag["aliases"], flag.get("negation")]:
            if name:
                choices_of[name] = flag["choices"]
    for flag in flags:
        name, _, value = (flag["replacement"] or "").partition("=")
        choices = choices_of.get(name)
        if value and choices and value not in {str(c) for c in choices}:
            flag["replacement"] = name  # a value the flag cannot take ('pytroch'): dropped
        if flag["deprecated"] and not flag["replacement"] and flag["deprecated_message"]:
            own = {flag["name"], *flag["aliases"], flag.get("negation") or ""}
            flag["replacement"] = replacement_in_message(
                flag["deprecated_message"], own, choices_of
            )


def _constraints(rows: VersionRows, blobs: dict[str, _Blob], option_of: dict[str, str]) -> None:
    for path, blob in blobs.items():
        if path != SERVER_ARGS_PATH and not path.startswith(HOOK_DIR):
            continue
        for site, key in zip(blob.facts.get("constraints", []), blob.constraint_keys, strict=True):
            if "binds" in site:
                continue  # an action's warning: a site for each flag using it (below)
            flags = [option_of[d] for d in site["flags"] if d in option_of]
            affects = [option_of[d] for d in site["affects"] if d in option_of]
            affects += _braced_in(site["message"], rows.flags)
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
                    "key": key,
                }
            )
            rows.cited[path] = blob.sha


def _action_warnings(rows: VersionRows, blobs: dict[str, _Blob]) -> None:
    """The warning an argparse action's `__call__` gives (constraints.ACTION_CALL sites) is
    a site of each flag using the action, at the warning, its text as the flag makes it:
    `option_string` is the flag, `self.new_flag` what its add_argument passes (a local
    `replacement = f" Use '{self.new_flag}' instead." if self.new_flag else ""` follows)."""
    for flag in rows.flags:
        path, action = flag.get("action_path"), (flag["action"] or "").split(".")[-1]
        blob = blobs.get(path or "")
        if blob is None or not action:
            continue
        for site in blob.facts.get("constraints", []):
            if site.get("binds") is None or site["function"] != f"{action}{ACTION_CALL}":
                continue
            message = _action_message(site["message"], site["binds"], flag)
            affects = [f for f in _options_in(message, rows.flags) if f != flag["name"]]
            made = {k: v for k, v in site.items() if k != "binds"}
            made.update(message=message, flags=[flag["name"]], affects=affects, writes={})
            rows.constraints.append({**made, "key": site_key(made)})
            rows.cited[blob.path] = blob.sha


SELF_ATTR_RE = re.compile(r"\{self\.(\w+)\}")


def _action_message(template: str, binds: dict[str, dict[str, str]], flag: dict[str, Any]) -> str:
    given = flag.get("action_args") or {}

    def fill(text: str) -> str:  # `{self.attr}`: what add_argument passes, else unknown
        return SELF_ATTR_RE.sub(
            lambda m: str(given[m[1]]) if m[1] in given else f"{RUN_TIME_OPEN}self.{m[1]})", text
        )

    text = fill(template.replace("{option_string}", flag["name"]))
    for name, bound in binds.items():
        if "run_time" in bound:  # as a help's unknown placeholder: the code, said to be so
            chosen = f"{RUN_TIME_OPEN}{bound['run_time']})"
        elif "text" in bound:
            chosen = fill(bound["text"])
        else:
            chosen = fill(bound["then"] if given.get(bound["if"]) else bound["else"])
        text = text.replace("{" + name + "}", chosen)
    return text


def _options_in(message: str, flags: list[dict[str, Any]]) -> list[str]:
    """The flags of the version a message names (`Use '--x' instead.`)."""
    names = {f["name"] for f in flags}
    found = [o for o in MENTION_RE.findall(message) if o in names]
    return list(dict.fromkeys(found + _braced_in(message, flags)))


# `--x-{decode,prefill}`: a pair of flags named at once (MENTION_RE stops at the brace).
BRACED_RE = re.compile(r"(?<![\w-])--[a-z0-9][\w-]*\{[\w-]+(?:,[\w-]+)+\}[\w-]*")


def _braced_in(message: str, flags: list[dict[str, Any]]) -> list[str]:
    """The flags a brace pair in a message names, braces expanded, when each one is a flag
    of the version (`{label}` in an f-string's text, or a pair half of which is not a flag,
    names none)."""
    found = BRACED_RE.findall(message)
    if not found:  # most messages: the flags' table (built per message) is not needed
        return []
    by_option = {o: f["name"] for f in flags for o in (f["name"], *f["aliases"])}
    out: list[str] = []
    for text in found:
        named = [by_option.get(o) for o in expand_braces(text)]
        out += [n for n in named if n is not None] if all(named) else []
    return out


def _accessor_reads(rows: VersionRows, blobs: dict[str, _Blob], option_of: dict[str, str]) -> None:
    """Calls of a ServerArgs accessor method (`server_args.get_attention_backends()`) read
    the flags it returns: an indirect read through `ServerArgs.<method>()` each."""
    main = blobs.get(SERVER_ARGS_PATH)
    accessors = main.facts.get("accessors", {}) if main is not None else {}
    if not accessors:
        return
    held = {(r["dest"], r["path"], r["line"]) for r in rows.indirect}
    for path, blob in blobs.items():
        if path == SERVER_ARGS_PATH or not blob.facts["reads"]:
            continue
        read, found = blob.usages
        if read.isdisjoint(accessors):
            continue
        for row in found:
            for dest in accessors.get(row["dest"], ()):
                if dest in option_of and (dest, path, row["line"]) not in held:
                    held.add((dest, path, row["line"]))
                    via = [f"ServerArgs.{row['dest']}()"]
                    rows.indirect.append(
                        {"dest": dest, "path": path, "line": row["line"], "text": row["text"],
                         "via": via}
                    )  # fmt: skip


def _usages(rows: VersionRows, blobs: dict[str, _Blob], option_of: dict[str, str]) -> None:
    dests = option_of.keys()
    for path, blob in blobs.items():
        if not blob.facts["reads"]:
            continue
        read, found = blob.usages
        if dests.isdisjoint(read):  # iterates the smaller side
            continue
        rows.usages.extend([dict(row) for row in found if row["dest"] in option_of])
        rows.cited[path] = blob.sha


# Words that say what kind of thing a name is, not which one: `dsa_decode_impl` is about
# --dsa-decode-backend. Abbreviations are spelled out.
KIND_WORDS = {
    "backend", "impl", "type", "mode", "name", "method", "kind", "algo", "algorithm",
    "current", "selected", "default", "the", "self", "get", "use", "choice", "str",
}  # fmt: skip
SYNONYMS = {
    "attn": "attention", "quant": "quantization", "spec": "speculative",
    "disagg": "disaggregation", "cfg": "config",
}  # fmt: skip


@lru_cache(maxsize=65536)
def _words(name: str) -> list[str]:
    snake = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()  # ToolCallParser too
    return [SYNONYMS.get(w, w) for w in re.split(r"[_.]", snake) if w and not w.isdigit()]


@lru_cache(maxsize=65536)
def core_words(name: str) -> frozenset[str]:
    return frozenset(w for w in _words(name) if w not in KIND_WORDS)


def related(tail: str, dest: str) -> bool:
    """Whether a compared name could be about the flag: no name at all, or a word in
    common (`backend` and `..._backend`; not `block.type` and log_requests_format)."""
    return not tail or bool(set(_words(tail)) & set(_words(dest)))


def fits(tail: str, dest: str) -> bool:
    """Whether a compared name could hold the flag's value: each word that says which thing
    it is (not `backend`, `type`, ...) is one of the dest's, or two of them are
    (`prefetch_stop_policy`). One word in common and one more names something else:
    `input_dtype` and `rounter_params_dtype` are no --kv-cache-dtype or --dtype,
    `response_format` no --log-requests-format. A name of kind words only: `related`."""
    core = core_words(tail)
    if not core:
        return related(tail, dest)
    words = frozenset(_words(dest))
    return core <= words or len(_stems(core) & _stems(words)) >= 2


@lru_cache(maxsize=65536)
def _stems(words: frozenset[str]) -> frozenset[str]:
    """Words without a plural's `s`: `target_module` has two of --lora-target-modules's."""
    return frozenset(w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words)


def family_base(options: list[str], dest_of: dict[str, str]) -> str | None:
    """The flag a family of variants derives from: --attention-backend for
    {--attention-backend, --decode-attention-backend, --prefill-attention-backend};
    --quantization for {--quantization, --speculative-draft-model-quantization}."""
    for option in sorted(options, key=lambda o: len(dest_of[o])):
        dest = dest_of[option]
        if all(dest_of[o] == dest or dest_of[o].endswith("_" + dest) for o in options):
            return option
    return None


class Attributor:
    """Which flag a choice site is about, and on what basis; None when it really is
    ambiguous. Bases: "subject" (the compared name spells the flag), "enum" (a member of the
    flag's enum), "type" (the receiver's type or getter; the enum a registering function's
    parameter holds), "parameter" (that parameter's name), "only-flag" (no other flag
    accepts the value), "family" (variants of one flag: the flag they derive from). A name
    compared on another object (`quant_info.quant_type`) spells a flag only as its dest."""

    def __init__(self, flags: list[dict[str, Any]], option_of: dict[str, str]) -> None:
        self.option_of = option_of
        self.dest_of = {f["name"]: f["dest"] for f in flags}
        self.dynamic = {f["name"] for f in flags if f["choices_dynamic"]}
        self._answers: dict[tuple[str, str], tuple[str | None, list[str], str] | None] = {}
        self.accepting: dict[str, list[str]] = defaultdict(list)  # value -> options
        self._by_path: dict[tuple[str, str], str | None] = {}
        for flag in flags:
            if flag["deprecated"]:
                continue
            for value in flag["choices"] or flag.get("known_values") or []:
                if isinstance(value, str):
                    self.accepting[value].append(flag["name"])
        self.with_choices = sorted({o for options in self.accepting.values() for o in options})

    def by_subject(self, tail: str, candidates: list[str]) -> str | None:
        words = core_words(tail)
        if not words:
            return None
        strong = [c for c in candidates if (w := core_words(self.dest_of[c])) and w <= words]
        weak = [c for c in candidates if words <= core_words(self.dest_of[c])]
        if strong:  # the most specific flag the name spells: decode_attention_kernels
            size = max(len(core_words(self.dest_of[c])) for c in strong)
            top = [c for c in strong if len(core_words(self.dest_of[c])) == size]
            strong = top if len(top) == 1 else strong
        for pick in (strong, weak):
            if len(pick) == 1:
                return pick[0]
            if pick:
                base = family_base(pick, self.dest_of)
                if base is not None:
                    return base
        return None

    def attribute(
        self, value: str, tail: str, path: str = ""
    ) -> tuple[str | None, list[str], str] | None:
        """(flag, candidates, basis) for a string value compared with `tail`; None when the
        site is not about a choice (or is about another flag's value). `path`, the file's,
        picks among flags whose dests the name shortens (see by_path)."""
        if path and "." not in tail and value in self.accepting:
            picked = self.by_path(tail, path)
            if picked is not None:
                return (picked, [], "subject") if picked in self.accepting[value] else None
        key = (value, tail)
        if key not in self._answers:  # the same comparisons recur in many files
            self._answers[key] = self._attribute_uncached(value, tail)
        return self._answers[key]

    def by_path(self, tail: str, path: str) -> str | None:
        """The one flag the compared name shortens that the file's path names: in
        mem_cache/radix_cache.py `eviction_policy` is --radix-eviction-policy's, not
        --lora-eviction-policy's (and a value only the LoRA flag takes is no choice site)."""
        key = (tail, path)
        if key not in self._by_path:
            self._by_path[key] = None
            words = core_words(tail)  # (a name of one word, `dtype`, says too little)
            spelled = [o for o in self.with_choices if words < core_words(self.dest_of[o])]
            if (
                len(words) > 1
                and tail not in self.option_of
                and len(spelled) > 1
                and family_base(spelled, self.dest_of) is None
            ):
                where = core_words(path.removesuffix(".py").replace("/", "_"))
                named = [o for o in spelled if (core_words(self.dest_of[o]) - words) & where]
                self._by_path[key] = named[0] if len(named) == 1 else None
        return self._by_path[key]

    def _attribute_uncached(
        self, value: str, tail: str
    ) -> tuple[str | None, list[str], str] | None:
        candidates = self.accepting.get(value)
        if not candidates:
            return None
        # `quant_info.quant_type` (ingest.sites.compared_name): a receiver not known to hold
        # flags; its name is the flag's only when it is the flag's dest.
        receiver, _, tail = tail.rpartition(".")
        owner = self.option_of.get(tail)
        if owner is not None:
            if owner in candidates or owner in self.dynamic:
                return owner, [], "subject"
            return None  # compared against another flag's value: not this choice
        if value.lower() in GENERIC_VALUES:
            return None
        # Words in common (quant_type, --quantization) say nothing of what another object
        # holds (the kernel's own input format); the value alone still may (only-flag, family),
        # unless a name of its own fits none of the flags (`config.rounter_params_dtype`;
        # `quant_config.get_name()` is the quantization's name).
        if (
            receiver
            and core_words(tail)
            and not any(fits(tail, self.dest_of[c]) for c in candidates)
        ):
            return None
        return self.among(sorted(candidates), tail, by_words=not receiver, narrow=not receiver)

    def among(
        self, candidates: list[str], tail: str, by_words: bool = True, narrow: bool = False
    ) -> tuple[str | None, list[str], str] | None:
        """`by_words`: the compared name may stand for a flag whose words it spells;
        `narrow`: it is compared with the value, so only the flags it fits are candidates."""
        found = self.by_subject(tail, candidates) if by_words else None
        if found is not None:
            return found, [], "subject"
        if narrow:
            # Only the flags the name could be: `dsa_impl` is no --attention-backend, and a
            # name that fits none (`dataset_name`, `block.type`) is no choice site at all.
            candidates = [c for c in candidates if fits(tail, self.dest_of[c])]
            if not candidates:
                return None
        if len(candidates) == 1:
            # No other flag accepts the value; unless the compared name is plainly something
            # else (`input_dtype == "fp8"`), which is not a choice site at all.
            if narrow or related(tail, self.dest_of[candidates[0]]):
                return candidates[0], [], "only-flag"
            return None
        base = family_base(candidates, self.dest_of)
        if base is not None:
            return base, [], "family"
        return None, candidates, ""


class _SiteCollector:
    """Adds one file's choice sites to `rows`, once per (line, value, flag)."""

    def __init__(
        self,
        rows: VersionRows,
        path: str,
        sha: str,
        lines: dict[str, str],
        spelled: dict[str, dict[str, str]],
        spans: dict[str, int] | None = None,
    ) -> None:
        self.rows, self.path, self.sha, self.lines = rows, path, sha, lines
        self.spans = spans or {}  # line -> lines above it that its text joins
        self.spelled = spelled
        self.seen: set[tuple[int, str]] = set()

    def add(
        self,
        value: Any,
        line: int,
        how: str,
        flag: str | None,
        candidates: list[str],
        basis: str = "",
    ) -> None:
        if flag is not None:
            # As the flag spells it: an auto() member's value is its name in lower case
            # (`eagle`), the value page's is the flag's own (EAGLE).
            own = self.spelled.get(flag, {})
            value = own.get(str(value)) or own.get(str(value).lower(), value)
        key = (line, str(value))
        if key in self.seen:
            return  # one site per line and value: the first (most specific) scan wins
        self.seen.add(key)
        self.rows.choice_sites.append(
            {
                "value": str(value),
                "flag": flag,
                "candidates": candidates if flag is None else [],
                "how": how,
                "basis": basis if flag is not None else "",
                "path": self.path,
                "line": line,
                "text": self.lines.get(str(line), ""),
                # (cited from line - above: the text shown starts there)
                "above": self.spans.get(str(line), 0),
            }
        )
        self.rows.cited[self.path] = self.sha


def _choice_sites(
    rows: VersionRows, blobs: dict[str, _Blob], option_of: dict[str, str], by_option
) -> None:
    who = Attributor(rows.flags, option_of)
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
    module_paths: dict[str, str] | None = None  # built when a file imports a named constant
    # Enum classes no flag is linked to (ForwardMode): `forward_mode.is_decode()` is theirs.
    linked_names = {e["name"] for e in rows.enums}
    other_enums = {n for b in blobs.values() for n in b.enum_names} - linked_names
    accepting = who.accepting.keys()
    spelled: dict[str, dict[str, str]] = {}  # flag -> its values, exact and in lower case
    for f in rows.flags:
        values = [str(v) for v in f["choices"] or f.get("known_values") or []]
        spelled[f["name"]] = {**{v.lower(): v for v in values}, **{v: v for v in values}}

    for path, blob in blobs.items():
        if NOT_SERVER_RE.search(path):
            continue
        keys = blob.choice_keys
        if keys is not None and (
            accepting.isdisjoint(keys[0])
            and not any(k in is_method for k in keys[1])
            and not any(k in enum_by_name for k in keys[2])
        ):
            continue  # nothing in the file is a choice of this version's flags
        f = blob.facts
        collector = _SiteCollector(rows, path, blob.sha, f["lines"], spelled, f.get("spans"))
        add = collector.add
        types = f.get("types", {})
        # Registries first: the most explicit shape, then the rest.
        for value, line, subject, func, pos in blob.registry:
            if module_paths is None:
                module_paths = {m: p for p in blobs if (m := module_of(p)) is not None}
            params = _registry_params(func, path, f, blobs, module_paths)
            param = params[pos] if params is not None and pos < len(params) else None
            found = _registry_value(who, enum_by_name, other_enums, value, param)
            if found is False:
                continue  # the parameter holds another enum's values
            if pos == 0 and (found is None or found[0] is None):
                # the first argument: the flag the registry's name spells
                found = who.attribute(value, subject) or found
            if found is not None:
                add(value, line, "registry", *found)
        for entries, _line, subject, lookups in f.get("dispatch", []):
            _dispatch(who, entries, subject, lookups, add)
        for value, line, tail, how in f["choices"]:
            if how == "is_call":
                if value not in is_method or _other_enum(tail, types, other_enums):
                    continue
                _is_call(who, is_method, types, value, line, tail, add)
                continue
            found = who.attribute(value, tail, path)
            if found is not None:
                add(value, line, how, *found)
        for const, line, tail in f.get("named_contains", []):
            if module_paths is None:
                module_paths = {m: p for p in blobs if (m := module_of(p)) is not None}
            for value in _const_values(const, path, f, blobs, module_paths):
                found = who.attribute(value, tail)
                if found is not None and found[0] is None:
                    # the constant's name may say what it lists: ..._ATTENTION_BACKENDS
                    found = who.attribute(value, const.lower()) or found
                if found is not None:
                    add(value, line, "contains", *found)
        for cls, member, line in f["enum_refs"]:
            for enum in enum_by_name.get(cls, []):
                m = next((m for m in enum["members"] if m["name"] == member), None)
                if m is None:
                    continue
                add(m["value"], line, "enum", enum["primary"], enum["flags"], "enum")


def _registry_params(
    func: str, path: str, f: dict[str, Any], blobs: dict[str, _Blob], module_paths
) -> list[list[Any]] | None:
    """The parameters ([name, classes]) of a registering function called by its bare name:
    defined in this file, or imported from the file that defines it (one import of it)."""
    if "." in func:
        return None
    own = f.get("registry_defs", {})
    if func in own:
        return own[func]
    mod = module_of(path) or ""
    bound = [(module, name) for module, name, alias, _line in f.get("imports", []) if alias == func]
    if len(bound) != 1:
        return None
    module, name = bound[0]
    target = module_paths.get(absolute(module, mod, path.endswith("/__init__.py")))
    if target is None:
        return None
    return blobs[target].facts.get("registry_defs", {}).get(name)


def _registry_value(
    who: Attributor,
    enum_by_name: dict[str, list[dict[str, Any]]],
    other_enums: set[str],
    value: str,
    param: list[Any] | None,
) -> tuple[str | None, list[str], str] | None | Literal[False]:
    """(flag, candidates, basis) for a registry's value from the parameter it is passed as
    (`runner_backend_name`, which the file converts to MoeRunnerBackend); False when the
    parameter holds an enum no flag is linked to (DispatchOutputFormat); None when the
    parameter says nothing."""
    if param is None:
        return None
    name, classes = param
    accepting = who.accepting.get(value, [])
    linked = [e for c in classes for e in enum_by_name.get(c, [])]
    if linked:
        flags = sorted({e["primary"] for e in linked if e["primary"] in accepting})
        if len(flags) == 1:
            return flags[0], [], "type"
        options = sorted({o for e in linked for o in e["flags"] if o in accepting})
        return who.among(options, name) if options else False
    if any(c in other_enums for c in classes):
        return False
    if not core_words(name) or not accepting:
        return None
    owner = who.option_of.get(name)
    if owner in accepting:
        return owner, [], "parameter"
    found = who.by_subject(name, sorted(accepting))
    if found is not None:
        return found, [], "parameter"
    if value.lower() in GENERIC_VALUES:
        return None
    return who.among(sorted(accepting), name)


@lru_cache(maxsize=65536)
def _camel(snake: str) -> str:
    return "".join(w.capitalize() for w in snake.split("_"))


def _other_enum(tail: str, types: dict[str, str], other_enums: set[str]) -> bool:
    """The receiver is typed (or named) as an enum that backs no flag."""
    camel = _camel(tail)
    known = types.get(tail, "")
    return camel in other_enums or (known.startswith("type:") and known[5:] in other_enums)


def _is_call(who: Attributor, is_method, types, value, line, tail, add) -> None:
    targets = is_method.get(value)
    if not targets:
        return
    options = sorted({o for enum, _m in targets for o in enum["flags"]})
    enums_hit = {id(enum): enum for enum, _m in targets}

    def member_value(enum: dict[str, Any], member: str) -> Any:
        return next((m["value"] for m in enum["members"] if m["name"] == member), value)

    owner = who.option_of.get(tail)
    if owner in options:
        enum, member = next((e, m) for e, m in targets if owner in e["flags"])
        add(member_value(enum, member), line, "is_call", owner, [], "subject")
        return
    known = types.get(tail, "")
    if known.startswith("get:") and who.option_of.get(known[4:]) in options:
        owner = who.option_of[known[4:]]
        enum, member = next((e, m) for e, m in targets if owner in e["flags"])
        add(member_value(enum, member), line, "is_call", owner, [], "type")
        return
    if known.startswith("type:"):
        typed = [(e, m) for e, m in targets if e["name"] == known[5:]]
        if typed and typed[0][0]["primary"]:
            enum, member = typed[0]
            add(member_value(enum, member), line, "is_call", enum["primary"], [], "type")
            return
    first_enum, first_member = targets[0]
    # A receiver named for another flag holds that flag's values, whose class (not always
    # an Enum: SpeculativeAlgorithm once was a registry) may have the same method:
    # `spec_algorithm.is_none()` is no --moe-a2a-backend's `none`.
    # (`_lora_runner_backend` names --lora-backend's words and more: a MoE runner backend.)
    other = owner or (who.by_subject(tail, who.with_choices) if tail else None)
    if other is not None and other not in options and fits(tail, who.dest_of[other]):
        return
    if len(enums_hit) == 1 and first_enum["primary"]:
        add(
            member_value(first_enum, first_member),
            line,
            "is_call",
            first_enum["primary"],
            [],
            "enum",
        )
        return
    found = who.by_subject(tail, options)
    if found is not None:
        enum, member = next((e, m) for e, m in targets if found in e["flags"])
        add(member_value(enum, member), line, "is_call", found, [], "subject")
        return
    add(member_value(first_enum, first_member), line, "is_call", None, options)


def _dispatch(
    who: Attributor, entries: list[list[Any]], subject: str, lookups: list[str], add
) -> None:
    """A dict whose keys are choices of one flag: one site per key, on the key's line.
    `lookups`: the names the file looks the dict up with (`table.get(self.server_args.x`)."""
    keys = [key for key, _line in entries]
    cover: dict[str, int] = defaultdict(int)
    for key in keys:
        for option in who.accepting.get(key, []):
            cover[option] += 1
    if not cover or max(cover.values()) < 2:
        return
    most = max(cover.values())
    top = sorted(o for o, n in cover.items() if n == most)
    owners = [who.option_of.get(name) for name in [subject, *lookups]]
    owner = next((o for o in owners if o in top), None)
    if owner is not None:
        flag: str | None = owner
        basis = "subject"
    else:
        found = who.among(top, subject)
        if found is None:
            return
        flag, _candidates, basis = found
        # The dict's name alone (`dtype_map`) says little when the file looks it up with
        # names of other things only (a model config's field, a local the env sets).
        if (
            flag is not None
            and (basis != "subject" or lookups)
            and not _keyed_by(who, flag, subject, lookups)
        ):
            return
    for key, line in entries:
        if (flag or top[0]) not in who.accepting.get(key, []):
            continue
        if key.lower() in GENERIC_VALUES and flag is None:
            continue
        add(key, line, "dispatch", flag, top, basis)


def _keyed_by(who: Attributor, flag: str, subject: str, lookups: list[str]) -> bool:
    """Whether a dict the value alone attributes may be keyed by the flag's values: a dict
    named for something else (`packed_modules_mapping`, a model's modules for LoRA;
    `dtype_map`) only when the file looks it up with a name that fits the flag or holds the
    same kind of thing (`QKV_BACKEND_IMPL[qkv_backend]`: a backend, --mm-attention-backend's)."""
    dest = who.dest_of[flag]
    if not core_words(subject) or fits(subject, dest):
        return True
    kinds = set(_words(dest)) & KIND_WORDS
    return any(fits(name, dest) or kinds & set(_words(name)) for name in lookups)


def _const_values(const, path, f, blobs: dict[str, _Blob], module_paths) -> list[str]:
    """The values of a named list/set/tuple constant: defined in this file, or imported."""
    if const in f.get("consts", {}):
        return f["consts"][const]
    mod = module_of(path) or ""
    for module, name, alias, _line in f.get("imports", []):
        if alias != const:
            continue
        target = module_paths.get(absolute(module, mod, path.endswith("/__init__.py")))
        if target is not None:
            return blobs[target].facts.get("consts", {}).get(name, [])
    return []
