"""Explain a launch command: parse it the way SGLang's argparse parser would at a version,
then report findings (unknown flags, bad values, deprecations, constraint sites it trips).

Shell text becomes argv in `kb.explain.shell`. The core here (`parse`, `analyze`,
`valid_in`, `compare`) is pure: it works on `VersionFacts` built from the knowledge base by
`kb.explain.kb_facts.load_facts`, so it is tested without a web server and reused by the API,
the page and the CLI.
"""

from __future__ import annotations

import bisect
import json
import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from rapidfuzz import fuzz, process

from kb.explain.safe_eval import Evaluator, Undecidable, flag_names
from kb.explain.shell import tokenize

Finding = dict[str, Any]
Citation = dict[str, Any]

SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}
ZERO_ARG_ACTIONS = {
    "store_true",
    "store_false",
    "store_const",
    "append_const",
    "count",
    "help",
    "version",
    "BooleanOptionalAction",
}
NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse's own test


# --------------------------------------------------------------------------------------
# Facts of one version, as the analysis needs them
# --------------------------------------------------------------------------------------

_UNSET = object()


@dataclass(frozen=True)
class FlagSpec:
    name: str  # canonical option, "--tp-size"
    dest: str
    aliases: tuple[str, ...] = ()
    type: str | None = None
    default: Any = None  # decoded literal; see default_expr
    default_expr: str | None = None  # source text when the default is not a literal
    choices: tuple[Any, ...] | None = None
    choices_dynamic: bool = False
    choices_extensible: bool = False
    action: str | None = None
    nargs: str | None = None
    const: Any = None
    required: bool = False
    deprecated: bool = False
    deprecated_message: str | None = None
    replacement: str | None = None
    help: str = ""
    hidden: bool = False
    source: Citation | None = None
    builtin: bool = False  # argparse's own -h/--help

    @property
    def options(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    @property
    def action_name(self) -> str:
        return (self.action or "store").rsplit(".", 1)[-1]


@dataclass(frozen=True)
class SiteSpec:
    kind: str  # raise | assert | override | warning
    function: str
    conditions: tuple[str, ...]  # outermost first; an assert's last one is `not (test)`
    message: str = ""
    flags: tuple[str, ...] = ()  # options read by the conditions
    affects: tuple[str, ...] = ()  # options written or checked
    writes: tuple[tuple[str, str], ...] = ()  # (dest, value source) for overrides
    key: str = ""
    path: str = ""
    line: int = 0
    source: Citation | None = None

    @property
    def location(self) -> str:
        return f"{posixpath.basename(self.path)}:{self.line}"


@dataclass
class VersionFacts:
    name: str
    flags: list[FlagSpec]
    sites: list[SiteSpec] = field(default_factory=list)

    def flag_url(self, flag: FlagSpec) -> str:
        return f"/v/{quote(self.name, safe='')}/flags/{quote(flag.name, safe='')}"


HELP_FLAG = FlagSpec(
    name="--help",
    dest="help",
    aliases=("-h",),
    action="help",
    help="argparse's own help: prints the usage and exits",
    builtin=True,
)


# --------------------------------------------------------------------------------------
# Parsing: argv -> flag uses, the way argparse does it
# --------------------------------------------------------------------------------------


@dataclass
class Match:
    kind: str  # exact | alias | abbreviation | ambiguous | unknown | positional | end
    option: str  # the option part as typed (without `=value`)
    flag: FlagSpec | None = None
    explicit: str | None = None  # the value after `=`
    candidates: tuple[str, ...] = ()  # option strings it could mean (ambiguous/abbreviation)


class OptionTable:
    """The option strings of one version, with argparse's lookup rules."""

    def __init__(self, flags: Iterable[FlagSpec]) -> None:
        self.by_option: dict[str, FlagSpec] = {}
        for flag in flags:
            for option in flag.options:
                self.by_option.setdefault(option, flag)
        if "--help" not in self.by_option and "-h" not in self.by_option:
            for option in HELP_FLAG.options:
                self.by_option[option] = HELP_FLAG
        self.sorted = sorted(self.by_option)

    def prefixed(self, prefix: str) -> list[str]:
        start = bisect.bisect_left(self.sorted, prefix)
        out = []
        for option in self.sorted[start:]:
            if not option.startswith(prefix):
                break
            out.append(option)
        return out

    def match(self, arg: str) -> Match:
        """argparse's `_parse_optional`, with allow_abbrev=True (SGLang's setting)."""
        if arg == "--":
            return Match("end", arg)
        if not arg or arg[0] != "-" or len(arg) == 1:
            return Match("positional", arg)
        if arg in self.by_option:
            return self._exact(arg, None)
        option, eq, explicit = arg.partition("=")
        if eq and option in self.by_option:
            return self._exact(option, explicit)
        if arg.startswith("--"):
            candidates = self.prefixed(option)
            explicit_arg = explicit if eq else None
        else:  # single-dash: `-x` exactly with an attached value, or a prefix
            candidates = [o for o in self.sorted if o == arg[:2] or o.startswith(arg)]
            explicit_arg = arg[2:] if arg[:2] in candidates and len(arg) > 2 else None
            option = arg[:2] if explicit_arg is not None else arg
        distinct = {self.by_option[c].name: self.by_option[c] for c in candidates}
        if len(distinct) > 1:
            return Match("ambiguous", option, candidates=tuple(sorted(distinct)))
        if len(distinct) == 1:
            (flag,) = distinct.values()
            kind = "abbreviation" if option not in flag.options else "exact"
            return Match(kind, option, flag, explicit_arg, tuple(candidates))
        if NEGATIVE_NUMBER.match(arg) or " " in arg:
            return Match("positional", arg)
        return Match("unknown", option, explicit=explicit if eq else None)

    def _exact(self, option: str, explicit: str | None) -> Match:
        flag = self.by_option[option]
        return Match("exact" if option == flag.name else "alias", option, flag, explicit)


@dataclass
class Use:
    """One occurrence of a flag in the command."""

    match: Match
    values: list[str]  # raw words taken as its arguments
    index: int
    problem: str | None = None  # argparse's complaint about the arguments, if any

    @property
    def flag(self) -> FlagSpec | None:
        return self.match.flag


def _arity(flag: FlagSpec) -> tuple[int, int | None]:
    """(min, max) arguments taken; max None means unbounded."""
    nargs = (flag.nargs or "").strip().strip("'\"")
    if nargs == "" or nargs == "None":
        if flag.action_name in ZERO_ARG_ACTIONS or "Deprecated" in flag.action_name:
            return 0, 0  # SGLang's DeprecatedAction defaults to nargs=0
        return 1, 1
    if nargs == "?" or nargs.endswith("OPTIONAL"):
        return 0, 1
    if nargs == "*" or nargs.endswith("ZERO_OR_MORE"):
        return 0, None
    if nargs == "+" or nargs.endswith("ONE_OR_MORE"):
        return 1, None
    if nargs.isdigit():
        return int(nargs), int(nargs)
    return 0, None  # a variable or REMAINDER: take what follows, check nothing


def _arity_text(low: int, high: int | None) -> str:
    if high is None:
        return "at least one argument" if low else "any number of arguments"
    if low == high:
        return "one argument" if low == 1 else f"{low} arguments"
    return "at most one argument"


def parse(argv: Sequence[str], table: OptionTable) -> tuple[list[Use], list[str]]:
    """argv -> flag uses and leftover words argparse could not place."""
    kinds = []
    ended = False
    for word in argv:
        m = Match("positional", word) if ended else table.match(word)
        if m.kind == "end":
            ended = True
        kinds.append(m)
    uses: list[Use] = []
    leftovers: list[str] = []
    i = 0
    while i < len(argv):
        m = kinds[i]
        if m.kind == "end":
            i += 1
            continue
        if m.kind == "positional":
            leftovers.append(argv[i])
            i += 1
            continue
        # The run of plain words after the option, up to the next option or `--`.
        run_end = i + 1
        while run_end < len(argv) and kinds[run_end].kind == "positional":
            run_end += 1
        run = list(argv[i + 1 : run_end])
        use = Use(m, [], i)
        if m.flag is None:  # unknown or ambiguous: its words go with it, not reported twice
            use.values = ([m.explicit] if m.explicit is not None else []) + run
            uses.append(use)
            i = run_end
            continue
        low, high = _arity(m.flag)
        nargs = (m.flag.nargs or "").strip("'\"")
        if "REMAINDER" in nargs or nargs == "...":  # argparse.REMAINDER takes everything
            use.values = list(argv[i + 1 :])
            uses.append(use)
            break
        if m.explicit is not None:
            if high == 0:
                use.problem = f"takes no argument, but `={m.explicit}` was given"
            elif low > 1:
                use.problem = f"expects {_arity_text(low, high)}"
            use.values = [m.explicit]
            uses.append(use)
            i += 1
            continue
        take = len(run) if high is None else min(high, len(run))
        if take < low:
            use.problem = f"expects {_arity_text(low, high)}"
        use.values = run[:take]
        uses.append(use)
        i += 1 + take
    return uses, leftovers


# --------------------------------------------------------------------------------------
# Values: conversion, choices, defaults
# --------------------------------------------------------------------------------------


def _is_shell(word: str) -> bool:
    return "$" in word or "`" in word


class BadValue(ValueError):
    pass


def convert(flag: FlagSpec, raw: str) -> tuple[Any, bool]:
    """Convert like the flag's `type=`; returns (value, checked). Raises BadValue."""
    kind = (flag.type or "str").strip()
    if kind in ("str", "Optional[str]", "str | None"):
        return raw, True
    if kind in ("int", "Optional[int]", "int | None"):
        try:
            return int(raw), True
        except ValueError:
            raise BadValue(f"expects an integer, got {raw!r}") from None
    if kind in ("float", "Optional[float]", "float | None"):
        try:
            return float(raw), True
        except ValueError:
            raise BadValue(f"expects a number, got {raw!r}") from None
    if kind == "bool":  # argparse's type=bool: any non-empty word is True
        return bool(raw), True
    if kind in ("json.loads", "orjson.loads", "json_list_type"):
        try:
            value = json.loads(raw)
        except ValueError:
            raise BadValue(f"expects JSON, got {raw!r}") from None
        return value, True
    if kind == "nullable_str":
        return (None if not raw or raw == "None" else raw), True
    if kind in ("str.lower", "str.upper"):
        return (raw.lower() if kind == "str.lower" else raw.upper()), True
    return raw, False  # a callable we do not know: keep the word


def _display(value: Any) -> str:
    """A value as the Python reader of SGLang's code writes it: True, None, 0.8, fa3."""
    if isinstance(value, Undecidable):
        return "(unknown)"
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, bool):
        return repr(value)
    return json.dumps(value)


def _suggest(word: str, options: Iterable[str], limit: int = 3, cutoff: float = 70) -> list[str]:
    found = process.extract(word, list(options), scorer=fuzz.ratio, limit=limit)
    return [choice for choice, score, _ in found if score >= cutoff]


def _default_of(flag: FlagSpec) -> Any:
    if flag.default_expr is not None and flag.default is None:
        return Undecidable(
            f"the default of {flag.name} is computed ({_clip(flag.default_expr, 50)})"
        )
    return flag.default


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def one_line(help_text: str, limit: int = 160) -> str:
    text = " ".join(help_text.split())
    match = re.match(r"(.+?[.!?])(\s|$)", text)
    if match and len(match.group(1)) <= limit:
        return match.group(1)
    return _clip(text, limit)


# --------------------------------------------------------------------------------------
# The analysis
# --------------------------------------------------------------------------------------


def _finding(
    severity: str,
    flag: str | None,
    message: str,
    kind: str,
    source: Citation | None = None,
    **extra: Any,
) -> Finding:
    return {
        "severity": severity,
        "flag": flag,
        "message": message,
        "source": source,
        "kind": kind,
        **extra,
    }


@dataclass
class Analysis:
    version: str
    launcher: str
    uses: list[Use]
    flags: list[dict[str, Any]]
    findings: list[Finding]
    env: FlagEnv
    fired: dict[str, Finding]  # constraint key -> finding, for the upgrade check

    @property
    def errors(self) -> int:
        return sum(1 for f in self.findings if f["severity"] == "error")

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "launcher": self.launcher,
            "flags": self.flags,
            "findings": self.findings,
        }


def analyze(facts: VersionFacts, command: str) -> Analysis:
    tokens = tokenize(command)
    table = OptionTable(facts.flags)
    uses, leftovers = parse(tokens.argv, table)
    check = _Checker(facts, table, list(tokens.findings))
    for word in leftovers:
        check.leftover(word)
    for use in uses:
        check.use(use)
    check.after_all()
    fired = _evaluate_sites(facts, check.env, check.given, check.given_options, check.findings)
    findings = sorted(check.findings, key=lambda f: SEVERITY_RANK.get(f["severity"], 3))
    return Analysis(facts.name, tokens.launcher, uses, check.rows, findings, check.env, fired)


class FlagEnv(dict[str, Any]):
    """Flag values by dest, where alias spellings resolve too: SGLang reads
    `self.tp_size` although argparse stores `--tensor-parallel-size` (alias `--tp-size`) as
    `tensor_parallel_size`, and renames it in `from_cli_args`."""

    def __init__(self) -> None:
        super().__init__()
        self.aliases: dict[str, str] = {}

    def canon(self, name: str) -> str:
        return name if dict.__contains__(self, name) else self.aliases.get(name, name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and dict.__contains__(self, self.canon(name))

    def __getitem__(self, name: str) -> Any:
        return dict.__getitem__(self, self.canon(name))

    def __setitem__(self, name: str, value: Any) -> None:
        dict.__setitem__(self, self.canon(name), value)

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        return dict.get(self, self.canon(name), default)


def _dest_of(option: str) -> str:
    return option.lstrip("-").replace("-", "_")


def _as_option(name: str) -> str:
    """Sites list options; tolerate a bare dest (`pp_size`) from the ingest too."""
    return name if name.startswith("-") else "--" + name.replace("_", "-")


class _Checker:
    """Walks the parsed uses, collecting per-flag findings and the resulting values."""

    def __init__(self, facts: VersionFacts, table: OptionTable, findings: list[Finding]):
        self.facts, self.table, self.findings = facts, table, findings
        self.env = FlagEnv()
        for spec in facts.flags:  # argparse: the first action of a dest sets its default
            if spec.dest not in self.env:
                self.env[spec.dest] = _default_of(spec)
        for spec in facts.flags:
            for alias in spec.aliases:
                self.env.aliases.setdefault(_dest_of(alias), spec.dest)
        self.given: dict[str, Any] = {}  # dest -> value from the command
        self.given_flag: dict[str, FlagSpec] = {}
        self.given_names: set[str] = set()
        self.given_options: dict[str, str] = {}  # every spelling of a given flag -> its name
        self.counts: dict[str, int] = {}
        self.rows: list[dict[str, Any]] = []

    def add(self, severity: str, flag: FlagSpec | str | None, text: str, kind: str, **kw: Any):
        if isinstance(flag, FlagSpec):
            kw.setdefault("source", flag.source)
            flag = flag.name
        self.findings.append(_finding(severity, flag, text, kind, **kw))

    def leftover(self, word: str) -> None:
        if _is_shell(word):
            text = f"`{word}` comes from the shell and may expand to more flags: not checked"
            self.add("warning", None, text, "shell")
        else:
            text = f"cannot place `{word}`: argparse would stop with 'unrecognized arguments'"
            self.add("error", None, text, "unplaced")

    def use(self, use: Use) -> None:
        m, flag = use.match, use.flag
        self.rows.append(
            {
                "option": m.option,
                "name": flag.name if flag else None,
                "dest": flag.dest if flag else None,
                "value": (use.values or None) if len(use.values) != 1 else use.values[0],
                "via": m.kind,
                "help": one_line(flag.help) if flag else "",
                "url": self.facts.flag_url(flag) if flag and not flag.builtin else None,
                "source": flag.source if flag else None,
            }
        )
        if flag is None:
            self.unresolved(m)
            return
        self.given_names.add(flag.name)
        for option in (*flag.options, "--" + flag.dest.replace("_", "-")):
            self.given_options[option] = flag.name
        self.counts[flag.name] = self.counts.get(flag.name, 0) + 1
        if m.kind == "abbreviation":
            spelled = m.candidates[0] if len(m.candidates) == 1 else flag.name
            full = spelled if spelled == flag.name else f"{spelled} (alias of {flag.name})"
            text = (
                f"{m.option} is an abbreviation of {full}: argparse accepts it today, "
                "but it breaks as soon as another flag starts with the same letters"
            )
            self.add("warning", flag, text, "abbreviation")
        if flag.builtin:
            self.add("info", flag, "prints the help and exits", "help")
            return
        if use.problem:
            self.add("error", flag, f"{m.option} {use.problem}", "arguments")
            return
        if flag.deprecated:
            text = f"{flag.name} is deprecated"
            if flag.replacement:
                text += f"; use {flag.replacement} instead"
            if flag.deprecated_message:
                text += f" ({_clip(flag.deprecated_message, 200)})"
            self.add("warning", flag, text, "deprecated", replacement=flag.replacement)
        value = _use_value(flag, use, self.findings, self.env.get(flag.dest))
        if "Deprecated" in flag.action_name:
            return  # SGLang's DeprecatedAction only prints a warning: nothing is stored
        self.given[flag.dest] = value
        self.given_flag[flag.dest] = flag
        self.env[flag.dest] = value

    def unresolved(self, m: Match) -> None:
        if m.kind == "ambiguous":
            shown = ", ".join(m.candidates[:6]) + (" …" if len(m.candidates) > 6 else "")
            text = f"ambiguous abbreviation {m.option}: could match {shown}"
            self.add("error", m.option, text, "ambiguous", candidates=list(m.candidates))
            return
        hint = _suggest(m.option, [o for o in self.table.sorted if o.startswith("--")])
        text = f"unknown flag {m.option} in {self.facts.name}"
        if hint:
            text += "; did you mean " + " or ".join(hint) + "?"
        self.add("error", m.option, text, "unknown_flag", suggestions=hint)

    def after_all(self) -> None:
        for name, count in self.counts.items():
            flag = self.table.by_option[name]
            if count > 1 and flag.action_name not in ("append", "append_const", "count"):
                self.add(
                    "warning",
                    flag,
                    f"{name} is given {count} times: the last value wins",
                    "repeated",
                )
        has_config = "--config" in self.given_names
        for flag in self.facts.flags:
            if flag.required and flag.dest not in self.given:
                text = f"missing required flag {flag.name}"
                if has_config:
                    text += " (unless the --config file sets it)"
                self.add("warning" if has_config else "error", flag, text, "missing_required")
        for dest, value in self.given.items():
            flag = self.given_flag[dest]
            if _equal(value, _default_of(flag)):
                text = f"{flag.name} {_display(value)} is already the default in {self.facts.name}"
                self.add("info", flag, text, "default_value")


def _equal(value: Any, default: Any) -> bool:
    if isinstance(value, Undecidable) or isinstance(default, Undecidable):
        return False
    if _is_number(value) and _is_number(default):
        return bool(value == default)
    return type(value) is type(default) and bool(value == default)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _use_value(flag: FlagSpec, use: Use, findings: list[Finding], previous: Any) -> Any:
    """The value argparse stores for this use, with type/choice findings on the way."""
    action = flag.action_name
    if action == "store_true":
        return True
    if action == "store_false":
        return False
    if action in ("store_const", "append_const"):
        return flag.const if flag.const is not None else Undecidable("a constant of the flag")
    if action == "count":
        return (previous if isinstance(previous, int) else 0) + 1
    if action == "BooleanOptionalAction":
        return not use.match.option.startswith("--no-")
    nargs = (flag.nargs or "").strip("'\"")
    if not use.values:  # `--x` alone with nargs="?" stores const, with "*" an empty list
        return flag.const if nargs == "?" else []
    shell = [w for w in use.values if _is_shell(w)]
    if shell:
        if flag.choices or (flag.type or "str") not in ("str", "nullable_str"):
            findings.append(
                _finding(
                    "info",
                    flag.name,
                    f"the value of {flag.name} comes from the shell ({' '.join(shell)}): "
                    "not checked",
                    "shell",
                    flag.source,
                )
            )
        return Undecidable(f"{flag.name} comes from the shell ({' '.join(shell)})")
    converted: list[Any] = []
    for raw in use.values:
        try:
            value, checked = convert(flag, raw)
        except BadValue as exc:
            findings.append(
                _finding("error", flag.name, f"{flag.name} {exc}", "wrong_type", flag.source)
            )
            return Undecidable(f"{flag.name} has an invalid value")
        _check_choice(flag, value, checked, findings)
        converted.append(value)
    if not custom_action(flag):
        return converted[0] if nargs in ("", "None", "?") and converted else converted
    return Undecidable(f"{flag.name} is stored by a custom action ({flag.action})")


def custom_action(flag: FlagSpec) -> bool:
    return flag.action_name not in ("store", "append", "extend", *ZERO_ARG_ACTIONS)


def _check_choice(flag: FlagSpec, value: Any, checked: bool, findings: list[Finding]) -> None:
    if flag.choices is None or value in flag.choices:
        return
    if not checked and str(value) in [str(c) for c in flag.choices]:
        return
    shown = [_display(c) for c in flag.choices]
    hint = _suggest(str(value), shown, limit=1, cutoff=60)
    folded = [c for c in shown if isinstance(value, str) and c.lower() == value.lower()]
    hint = folded or hint
    text = f"invalid choice {_display(value)!r} for {flag.name}; valid: " + ", ".join(shown)
    if hint:
        text += f". Did you mean {hint[0]}?"
    dynamic = flag.choices_dynamic or not checked
    if dynamic:
        text += " (the list is computed at run time and may be incomplete)"
    elif flag.choices_extensible:
        text += " (plugins can add choices through an add_*_choices() hook)"
    findings.append(
        _finding(
            "warning" if dynamic else "error",
            flag.name,
            text,
            "invalid_choice",
            flag.source,
            suggestions=hint,
            choices=shown,
        )
    )


# --------------------------------------------------------------------------------------
# Constraint sites
# --------------------------------------------------------------------------------------


def _all_true(ev: Evaluator, conditions: Sequence[str]) -> bool | Undecidable:
    pending: Undecidable | None = None
    for text in conditions:
        outcome = ev.truth(text)
        if outcome is False:
            return False
        if isinstance(outcome, Undecidable) and pending is None:
            pending = outcome
    return pending if pending is not None else True


def _site_outcome(site: SiteSpec, env: dict[str, Any]) -> tuple[bool | Undecidable, set[str]]:
    """Whether the site fires under `env`, and which flag dests the decision read.

    Every kind fires when all its conditions hold: the ingest records an assert's failure
    as a last condition `not (test)`, and an `else` branch as `not (cond)`.
    """
    ev = Evaluator(env)
    return _all_true(ev, site.conditions), ev.names_read


def _option_for(facts: VersionFacts, dest: str) -> str:
    for flag in facts.flags:
        if flag.dest == dest or dest in (_dest_of(a) for a in flag.aliases):
            return flag.name
    return dest


def _evaluate_sites(
    facts: VersionFacts,
    env: FlagEnv,
    given: dict[str, Any],
    given_options: dict[str, str],
    findings: list[Finding],
) -> dict[str, Finding]:
    """Apply overrides to a fixed point, then check raises/asserts/warnings on the result."""
    fired: dict[str, Finding] = {}
    given_dests = set(given)
    overrides = sorted(
        (s for s in facts.sites if s.kind == "override"), key=lambda s: (s.path, s.line)
    )
    done: set[int] = set()
    maybe_written: dict[str, SiteSpec] = {}  # dests an undecidable override may change
    applied: list[tuple[SiteSpec, dict[str, Any], bool]] = []  # site, writes, changed anything
    for _ in range(3):
        changed = False
        for idx, site in enumerate(overrides):
            if idx in done:
                continue
            outcome, _read = _site_outcome(site, env)
            if isinstance(outcome, Undecidable):
                for name, _src in site.writes:
                    maybe_written.setdefault(env.canon(name), site)
            if outcome is not True:
                continue
            done.add(idx)
            written: dict[str, Any] = {}
            for name, src in site.writes:
                dest = env.canon(name)
                value = Evaluator(env).value(src)
                if isinstance(value, Undecidable):
                    value = Undecidable(
                        f"{_option_for(facts, dest)} is computed at run time ({site.location})"
                    )
                written[dest] = value
            effective = False
            for dest, value in written.items():
                if not _same(env.get(dest), value):
                    env[dest] = value
                    effective = changed = True
            applied.append((site, written, effective))
        if not changed:
            break
    for site, written, effective in applied:
        reads_given = _reads_given(site, given_options, env)
        overridden = [
            d
            for d in written
            if d in given
            and not isinstance(given[d], Undecidable)
            and not _same(given[d], written[d])
        ]
        if not reads_given and not overridden:
            continue
        sources = {env.canon(name): src for name, src in site.writes}
        parts = [
            f"{_option_for(facts, d)} to {_display_written(v, sources[d])}"
            + (f" (you gave {_display(given[d])})" if d in overridden else "")
            for d, v in written.items()
        ]
        text = f"overrides {', '.join(parts) or 'settings'} at {site.location}"
        if not effective:
            text += " (already so)"
        if site.message:
            text += f": {_clip(site.message, 300)}"
        finding = _finding(
            "warning" if effective else "info",
            _first_given(site, given_options),
            text,
            "constraint",
            site.source,
            key=site.key,
        )
        findings.append(finding)
        fired[site.key or f"{site.kind}:{site.message}"] = finding

    for site in facts.sites:
        if site.kind == "override" or not _reads_given(site, given_options, env):
            continue
        outcome, read = _site_outcome(site, env)
        if outcome is False:
            continue
        flag = _first_given(site, given_options)
        if isinstance(outcome, Undecidable):
            verb = {"raise": "a raise", "assert": "an assertion", "warning": "a warning"}.get(
                site.kind, site.kind
            )
            cause = (
                "a value from the shell"
                if "comes from the shell" in outcome.reason
                else "the model/hardware/environment"
            )
            text = (
                f"{verb} at {site.location} depends on {cause}: "
                f"cannot be decided here ({outcome.reason})"
            )
            if site.message:
                text += f": {_clip(site.message, 200)}"
            findings.append(_finding("info", flag, text, "undecidable", site.source, key=site.key))
            continue
        if site.kind == "raise":
            text, severity = f"raises at {site.location}", "error"
        elif site.kind == "assert":
            text, severity = f"assertion fails at {site.location}", "error"
        else:
            text, severity = f"logs a warning at {site.location}", "warning"
        text += f": {_clip(site.message, 300)}" if site.message else ""
        read = {env.canon(d) for d in read}
        caveats = sorted(d for d in read if d in maybe_written and d not in given_dests)
        if caveats:
            text += (
                " (assuming "
                + ", ".join(
                    f"{_option_for(facts, d)} keeps its value; {maybe_written[d].location} may "
                    "change it depending on the environment"
                    for d in caveats
                )
                + ")"
            )
        finding = _finding(severity, flag, text, "constraint", site.source, key=site.key)
        findings.append(finding)
        fired[site.key or f"{site.kind}:{site.message}"] = finding
    return fired


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, Undecidable) or isinstance(b, Undecidable) or a is _UNSET or b is _UNSET:
        return False
    return type(a) is type(b) and a == b


def _display_written(value: Any, source: str) -> str:
    return _display(value) if not isinstance(value, Undecidable) else _clip(source, 60)


def _reads_given(site: SiteSpec, given_options: dict[str, str], env: FlagEnv) -> bool:
    """The site's conditions read a flag of the command: by the ingest's list, or by the
    attributes the condition texts read (which also catches renamed dests like tp_size)."""
    if any(_as_option(o) in given_options for o in site.flags):
        return True
    return any(
        _as_option(env.canon(name)) in given_options
        for text in site.conditions
        for name in flag_names(text)
    )


def _first_given(site: SiteSpec, given_options: dict[str, str]) -> str | None:
    for option in (*site.flags, *site.affects):
        if _as_option(option) in given_options:
            return given_options[_as_option(option)]
    return _as_option(site.flags[0]) if site.flags else None


# --------------------------------------------------------------------------------------
# Across versions: where the command is valid, and what an upgrade changes
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VersionOptions:
    """The option strings of one version, mapped to their canonical flag name."""

    name: str
    options: dict[str, str]
    sorted: tuple[str, ...] = ()

    @classmethod
    def build(cls, name: str, options: dict[str, str]) -> VersionOptions:
        return cls(name, options, tuple(sorted(options)))

    def resolves(self, option: str) -> bool:
        return self.status(option) == "ok"

    def status(self, option: str) -> str:
        """ "ok" (exact or unambiguous abbreviation), "ambiguous" or "missing"."""
        if option in self.options:
            return "ok"
        start = bisect.bisect_left(self.sorted, option)
        names = set()
        for candidate in self.sorted[start:]:
            if not candidate.startswith(option):
                break
            names.add(self.options[candidate])
            if len(names) > 1:
                return "ambiguous"
        return "ok" if names else "missing"


def used_options(analysis: Analysis) -> list[str]:
    seen: dict[str, None] = {}
    for use in analysis.uses:
        if use.flag is not None and use.flag.builtin:
            continue
        seen[use.match.option] = None
    return list(seen)


def _ranges(flags: Sequence[bool]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    start = None
    for i, ok in enumerate([*flags, False]):
        if ok and start is None:
            start = i
        elif not ok and start is not None:
            out.append((start, i - 1))
            start = None
    return out


def presence(options: Sequence[str], versions: Sequence[VersionOptions]) -> dict[str, list[dict]]:
    """For each option, the ranges of versions (oldest first) where it resolves."""
    out = {}
    for option in options:
        marks = [v.resolves(option) for v in versions]
        out[option] = [
            {"from": versions[a].name, "to": versions[b].name} for a, b in _ranges(marks)
        ]
    return out


def valid_in(options: Sequence[str], versions: Sequence[VersionOptions]) -> list[dict[str, Any]]:
    """Ranges of versions (oldest first) where every option resolves, and what limits each end.

    `limited_from` lists the options that fail in the version just before the range,
    `limited_to` those failing just after it, each as {"flag", "problem": missing|ambiguous};
    both are empty at the ends of the ingested history.
    """
    table = [[v.status(o) for o in options] for v in versions]

    def failing(i: int) -> list[dict[str, str]]:
        return [
            {"flag": o, "problem": status}
            for o, status in zip(options, table[i], strict=True)
            if status != "ok"
        ]

    out = []
    for a, b in _ranges([all(s == "ok" for s in row) for row in table]):
        after = b + 1 < len(versions)
        out.append(
            {
                "from": versions[a].name,
                "to": versions[b].name,
                "versions": b - a + 1,
                "limited_from": failing(a - 1) if a else [],
                "before": versions[a - 1].name if a else None,
                "limited_to": failing(b + 1) if after else [],
                "after": versions[b + 1].name if after else None,
            }
        )
    return out


def _default_text(flag: FlagSpec) -> str:
    if flag.default_expr is not None and flag.default is None:
        return flag.default_expr
    return json.dumps(flag.default)


def compare(
    a: Analysis, b: Analysis, facts_a: VersionFacts, facts_b: VersionFacts
) -> dict[str, Any]:
    """What changes for this command when moving from version A to version B."""
    removed, meaning = [], []
    for ua, ub in zip(a.uses, b.uses, strict=False):
        if ua.match.option != ub.match.option or ua.flag is None or ua.flag.builtin:
            continue
        if ub.flag is None:
            hint = ua.flag.replacement
            removed.append(
                {
                    "flag": ua.match.option,
                    "name": ua.flag.name,
                    "replacement": hint,
                    "message": f"{ua.match.option} does not exist in {b.version}"
                    + (f"; use {hint}" if hint else ""),
                }
            )
        elif ub.flag.name != ua.flag.name:
            meaning.append(
                {
                    "flag": ua.match.option,
                    "from": ua.flag.name,
                    "to": ub.flag.name,
                    "message": f"{ua.match.option} meant {ua.flag.name} in {a.version} "
                    f"but {ub.flag.name} in {b.version}",
                }
            )
    given = {u.flag.name for u in a.uses if u.flag} | {u.flag.name for u in b.uses if u.flag}
    old = {f.name: f for f in facts_a.flags}
    defaults = []
    for flag in facts_b.flags:
        before = old.get(flag.name)
        if before is None or flag.name in given or flag.hidden:
            continue
        if _default_text(before) != _default_text(flag):
            defaults.append(
                {"flag": flag.name, "from": _default_text(before), "to": _default_text(flag)}
            )

    def key(f: Finding) -> tuple[str, str | None]:
        return (f["kind"], f["flag"])

    plain_a = {key(f): f for f in a.findings if f["kind"] not in ("constraint", "undecidable")}
    plain_b = {key(f): f for f in b.findings if f["kind"] not in ("constraint", "undecidable")}
    serious = ("error", "warning")
    return {
        "from": a.version,
        "to": b.version,
        "removed": removed,
        "changed_meaning": meaning,
        "defaults_changed": defaults,
        "constraints_started": [f for k, f in b.fired.items() if k not in a.fired],
        "constraints_stopped": [f for k, f in a.fired.items() if k not in b.fired],
        "findings_new": [
            f for k, f in plain_b.items() if k not in plain_a and f["severity"] in serious
        ],
        "findings_gone": [
            f for k, f in plain_a.items() if k not in plain_b and f["severity"] in serious
        ],
        "errors": b.errors,
    }
