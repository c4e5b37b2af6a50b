"""Per-use checks: what each flag of the command is, and what is wrong with its use."""

from __future__ import annotations

from typing import Any

from kb.explain.facts import FlagSpec, VersionFacts
from kb.explain.memo import by_identity
from kb.explain.parsing import Match, OptionTable, Use
from kb.explain.report import Finding, clip, display, finding, one_line, suggest
from kb.explain.sites import FlagEnv, dest_of
from kb.explain.values import default_of, equal, is_shell, use_value
from kb.queries import deprecation_note
from kb.replacements import expand_braces


class UseChecker:
    """Walks the parsed uses, collecting per-flag findings and the resulting values."""

    def __init__(self, facts: VersionFacts, table: OptionTable, findings: list[Finding]):
        self.facts, self.table, self.findings = facts, table, findings
        self.env = FlagEnv()
        defaults = _defaults(facts.flags)  # (each run of a version's facts asks again)
        dict.update(self.env, defaults)
        self.env.aliases = dict(defaults.aliases)
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
        self.findings.append(finding(severity, flag, text, kind, **kw))

    def leftover(self, word: str) -> None:
        if is_shell(word):
            text = f"`{word}` comes from the shell and may expand to more flags: not checked"
            self.add("warning", None, text, "shell")
        else:
            text = f"cannot place `{word}`: argparse would stop with 'unrecognized arguments'"
            if word == "--":
                text += " (`--` ends the options, and SGLang's parser takes no positionals)"
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
        if m.kind == "attached" and use.problem:
            self.attached(use)
            return
        if flag.builtin:
            self.add("info", flag, "prints the help and exits", "help")
            return
        if use.problem:
            self.add("error", flag, f"{m.option} {use.problem}", "arguments")
            return
        if flag.deprecated_kind == "raises":
            text = f"{m.option} makes SGLang stop: its action raises when the flag is used"
            if flag.action_error:
                text += f" ({clip(flag.action_error, 300)})"
            source = flag.action_source or flag.source
            self.add("error", flag, text, "action_raises", source=source)
            return
        if flag.deprecated:
            self.deprecated(flag)
        value = use_value(flag, use, self.findings, self.env.get(flag.dest))
        if "Deprecated" in flag.action_name:
            return  # SGLang's DeprecatedAction only prints a warning: nothing is stored
        self.given[flag.dest] = value
        self.given_flag[flag.dest] = flag
        self.env[flag.dest] = value

    def deprecated(self, flag: FlagSpec) -> None:
        kind = flag.deprecated_kind
        if kind == "soft":  # said in the help only: the flag still does what it did
            text, severity = f"{flag.name} is marked deprecated in its help; it still works", "info"
        elif kind == "warns":
            text, severity = (
                f"{flag.name} is deprecated: SGLang logs a warning when it is used",
                "warning",
            )
        else:  # a knowledge base from before the ingest told these apart
            text, severity = f"{flag.name} is deprecated", "warning"
        # As stored, the value read by the ingest (`--x=v`): the flag page shows the same.
        replacement = flag.replacement
        if replacement:  # a brace pair names two flags: `--x-{decode,prefill}=off`
            text += f"; use {' and '.join(expand_braces(replacement))} instead"
        if note := deprecation_note(flag.deprecated_message, flag.replacement):
            text += f" ({clip(note, 200)})"
        source = flag.action_source if kind == "warns" and flag.action_source else flag.source
        self.add(
            severity,
            flag,
            text,
            "deprecated",
            source=source,
            replacement=replacement,
            # the flags it names, braces expanded: `replacement` keeps SGLang's spelling
            replacements=self.facts.replacement_flags(replacement) if replacement else None,
            deprecated_kind=kind,
        )

    def attached(self, use: Use) -> None:
        """`-hicache-ratio 2`: argparse takes `-h` and reads `icache-ratio` as glued to it."""
        m, flag = use.match, use.flag
        assert flag is not None
        names = "/".join(flag.options)
        text = (
            f"argparse reads `{m.word}` as {m.option} ({names}) with the text "
            f"`{m.explicit}` glued to it, and stops: 'argument {names}: {use.problem}'"
        )
        spelled = "-" + m.word.partition("=")[0]
        hint = self.table.match(spelled)
        if hint.flag is not None and hint.kind != "ambiguous":
            text += f". Did you mean {spelled}?"
        suggestions = [spelled] if hint.flag is not None else []
        self.add("error", m.word, text, "attached_text", suggestions=suggestions)

    def unresolved(self, m: Match) -> None:
        if m.kind == "ambiguous":
            shown = ", ".join(m.candidates[:6]) + (" …" if len(m.candidates) > 6 else "")
            text = f"ambiguous abbreviation {m.option}: could match {shown}"
            self.add("error", m.option, text, "ambiguous", candidates=list(m.candidates))
            return
        hint = suggest(m.option, [o for o in self.table.sorted if o.startswith("--")])
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
        if has_config:
            text = (
                "SGLang merges the YAML file given to --config into the arguments before it "
                "parses them; explain cannot read the file: the flags it sets are not seen "
                "here, and required flags may come from it"
            )
            self.add("info", self.table.by_option["--config"], text, "config_file")
        helper = next(
            (
                f
                for n in self.given_names
                if (f := self.table.by_option.get(n)) and f.action == "help"
            ),
            None,
        )
        if helper is not None:  # argparse prints the usage as it meets it, and exits
            text = (
                f"{helper.name} prints the usage and exits: argparse checks no required flag "
                "and SGLang starts no server"
            )
            self.add("info", helper, text, "prints_help")
        for flag in self.facts.flags:
            if helper is None and flag.required and flag.name not in self.given_names:
                text = f"missing required flag {flag.name}"
                if has_config:
                    text += " (unless the --config file sets it)"
                self.add("warning" if has_config else "error", flag, text, "missing_required")
        for dest, value in self.given.items():
            flag = self.given_flag[dest]
            if equal(value, default_of(flag)):
                text = f"{flag.name} {display(value)} is already the default in {self.facts.name}"
                self.add("info", flag, text, "default_value")


@by_identity
def _defaults(flags: list[FlagSpec]) -> FlagEnv:
    """Each dest's default (argparse: the first action of a dest sets it) and the alias
    spellings of each."""
    env = FlagEnv()
    for spec in flags:
        if spec.dest not in env:
            env[spec.dest] = default_of(spec)
    for spec in flags:
        for alias in spec.aliases:
            env.aliases.setdefault(dest_of(alias), spec.dest)
    return env
