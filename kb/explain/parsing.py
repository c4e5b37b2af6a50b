"""argv -> flag uses, the way argparse's parser does it (option lookup, arity).

This follows `ArgumentParser._parse_known_args` of CPython 3.11 step by step: every word is
first classified (`_parse_optional`: an option, a plain word `A`, or the `--` marker), then
each option takes the run of plain words its nargs pattern matches, and what no option takes
is left over ("unrecognized arguments": SGLang's parser has no positionals).

Why not run a real `argparse.ArgumentParser` built from the facts? It stops at the first
error (and `exit_on_error=False` does not cover all of them), while explain reports every
problem of the command with its kind, and tells an abbreviation from an exact spelling.
tests/test_explain_differential.py builds that real parser from the same facts and checks that
this module accepts and rejects exactly what it does.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kb.explain.facts import HELP_FLAG, FlagSpec

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
# Custom actions named like argparse's zero-argument ones, for knowledge bases without the
# ingest's `takes_value` fact.
ZERO_ARG_NAMES = re.compile(r"StoreTrue|StoreFalse|StoreConst|Count|BooleanOptional")
NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse's own test
UNBOUNDED = None


@dataclass
class Match:
    # exact | alias | abbreviation | attached | ambiguous | unknown | positional | end
    # ("attached": a single-dash option with text glued to it, `-hicache-ratio` = -h + text)
    kind: str
    option: str  # the option part as typed (without `=value`); for "attached" the short option
    flag: FlagSpec | None = None
    explicit: str | None = None  # the value after `=`, or the text glued to a short option
    candidates: tuple[str, ...] = ()  # option strings it could mean (ambiguous/abbreviation)
    word: str = ""  # the word as typed
    resolved: str | None = None  # the option string of the table it stands for


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
        # argparse: words like -1 are values unless some option looks like a negative number
        self.negative_options = any(NEGATIVE_NUMBER.match(o) for o in self.by_option)

    def prefixed(self, prefix: str) -> list[str]:
        start = bisect.bisect_left(self.sorted, prefix)
        out = []
        for option in self.sorted[start:]:
            if not option.startswith(prefix):
                break
            out.append(option)
        return out

    def match(self, arg: str) -> Match:
        """argparse's `_parse_optional` with allow_abbrev=True (SGLang's setting)."""
        if not arg or arg[0] != "-":
            return Match("positional", arg, word=arg)
        if arg in self.by_option:
            return self._exact(arg, None, arg)
        if len(arg) == 1:
            return Match("positional", arg, word=arg)
        option, eq, explicit = arg.partition("=")
        if eq and option in self.by_option:
            return self._exact(option, explicit, arg)
        tuples = self._option_tuples(arg)
        if len(tuples) > 1:  # argparse counts option strings, even two of one flag
            candidates = tuple(o for o, _ in tuples)
            return Match("ambiguous", option if arg[1] == "-" else arg, None, None, candidates, arg)
        if tuples:
            ((resolved, attached),) = tuples
            flag = self.by_option[resolved]
            if arg[1] != "-" and resolved == arg[:2]:
                return Match("attached", resolved, flag, attached, (resolved,), arg, resolved)
            typed = option if arg[1] == "-" else arg
            return Match("abbreviation", typed, flag, attached, (resolved,), arg, resolved)
        if NEGATIVE_NUMBER.match(arg) and not self.negative_options:
            return Match("positional", arg, word=arg)
        if " " in arg:
            return Match("positional", arg, word=arg)
        return Match("unknown", option, explicit=explicit if eq else None, word=arg)

    def _option_tuples(self, arg: str) -> list[tuple[str, str | None]]:
        """argparse's `_get_option_tuples`: (option string, explicit argument) it may mean."""
        if arg[1] == "-":  # long: a prefix, split at `=`
            prefix, eq, explicit = arg.partition("=")
            return [(o, explicit if eq else None) for o in self.prefixed(prefix)]
        # single dash: the short option `-x` with glued text, or a prefix of the whole word
        out: list[tuple[str, str | None]] = []
        for option in self.sorted:
            if option == arg[:2]:
                out.append((option, arg[2:]))
            elif option.startswith(arg):
                out.append((option, None))
        return out

    def _exact(self, option: str, explicit: str | None, word: str) -> Match:
        flag = self.by_option[option]
        kind = "exact" if option in (flag.name, *flag.negations) else "alias"
        return Match(kind, option, flag, explicit, word=word, resolved=option)


@dataclass
class Use:
    """One occurrence of a flag in the command."""

    match: Match
    values: list[str]  # raw words taken as its arguments
    index: int
    problem: str | None = None  # argparse's complaint about the arguments, if any
    swallowed: list[str] = field(default_factory=list)  # words a failed use leaves unplaced

    @property
    def flag(self) -> FlagSpec | None:
        return self.match.flag


def nargs_of(flag: FlagSpec) -> str:
    return (flag.nargs or "").strip().strip("'\"")


def arity(flag: FlagSpec) -> tuple[int, int | None]:
    """(min, max) arguments taken; max None means unbounded. Decided by the facts the flag
    page shows: the ingest's `takes_value`, then nargs; older knowledge bases fall back on
    the action's name."""
    nargs = nargs_of(flag)
    zero = flag.action_name in ZERO_ARG_ACTIONS or nargs == "0"
    if flag.takes_value is not None:
        zero = zero or not flag.takes_value
    elif not nargs or nargs == "None":
        name = flag.action_name
        zero = zero or bool(ZERO_ARG_NAMES.search(name))
        zero = zero or ("Deprecated" in name and "Store" not in name)
    if zero:
        return 0, 0
    if nargs in ("", "None"):
        return 1, 1
    if nargs == "?" or nargs.endswith("OPTIONAL"):
        return 0, 1
    if nargs == "*" or nargs.endswith("ZERO_OR_MORE"):
        return 0, UNBOUNDED
    if nargs == "+" or nargs.endswith("ONE_OR_MORE") or is_parser(flag):
        return 1, UNBOUNDED
    if nargs.isdigit():
        return int(nargs), int(nargs)
    return 0, UNBOUNDED  # a variable or REMAINDER: take what follows, check nothing


def is_remainder(flag: FlagSpec) -> bool:
    nargs = nargs_of(flag)
    return nargs.endswith("REMAINDER") or nargs == "..."


def is_parser(flag: FlagSpec) -> bool:
    nargs = nargs_of(flag)
    return nargs.endswith("PARSER") or nargs == "A..."


def arity_text(low: int, high: int | None) -> str:
    """argparse's wording: expected one argument / at most one / at least one / N."""
    if high is None:
        return "at least one argument" if low else "any number of arguments"
    if low == high:
        return "one argument" if low == 1 else f"{low} arguments"
    return "at most one argument"


def classify(argv: Sequence[str], table: OptionTable) -> list[Match]:
    """Each word's role before any is consumed; after the first `--` every word is plain."""
    out = []
    ended = False
    for word in argv:
        if ended:
            out.append(Match("positional", word, word=word))
        elif word == "--":
            out.append(Match("end", word, word=word))
            ended = True
        else:
            out.append(table.match(word))
    return out


def parse(argv: Sequence[str], table: OptionTable) -> tuple[list[Use], list[str]]:
    """argv -> flag uses and leftover words argparse could not place."""
    kinds = classify(argv, table)

    def plain_run(start: int, options_too: bool = False) -> int:
        """End of the run of plain words (and of options, for REMAINDER) from `start`."""
        end = start
        ok = ("positional", "unknown", "ambiguous") if options_too else ("positional",)
        while end < len(argv) and (kinds[end].kind in ok or (options_too and kinds[end].flag)):
            end += 1
        return end

    uses: list[Use] = []
    leftovers: list[str] = []
    i = 0
    while i < len(argv):
        m = kinds[i]
        if m.kind in ("positional", "end"):  # `--` too: SGLang's parser has no positionals
            leftovers.append(argv[i])
            i += 1
            continue
        use = Use(m, [], i)
        uses.append(use)
        run_end = plain_run(i + 1)
        if m.flag is None:  # unknown or ambiguous: its words go with it, not reported twice
            use.values = ([m.explicit] if m.explicit is not None else []) + list(
                argv[i + 1 : run_end]
            )
            i = run_end
            continue
        low, high = arity(m.flag)
        if m.explicit is not None:
            _explicit(use, table, low, high)
            if use.problem and m.kind == "attached":
                use.swallowed = list(argv[i + 1 : run_end])
                i = run_end
            else:
                i += 1
            continue
        if is_remainder(m.flag) or is_parser(m.flag):  # argparse: [AO]* / A[AO]*
            end = plain_run(i + 1, options_too=True)
            use.values = list(argv[i + 1 : end])
            if is_parser(m.flag) and not use.values:
                use.problem = "expects at least one argument"
            i = end
            continue
        run = run_end - (i + 1)
        take = run if high is None else min(high, run)
        if take < low:
            use.problem = f"expects {arity_text(low, high)}"
            take = 0
        use.values = list(argv[i + 1 : i + 1 + take])
        i += 1 + take
    return uses, leftovers


def _explicit(use: Use, table: OptionTable, low: int, high: int | None) -> None:
    """argparse's rules for an argument glued to the option (`--x=v`, `-xv`)."""
    m = use.match
    assert m.explicit is not None and m.flag is not None
    explicit = m.explicit
    if high == 0:
        # A single-dash switch with glued text: argparse reads the text as more switches
        # (`-ab` = `-a -b`) when the next letter is an option (SGLang has none but -h).
        if m.option[1] != "-" and explicit and "-" + explicit[0] in table.by_option:
            return
        use.problem = f"ignored explicit argument {explicit!r}"  # argparse's words
        if m.option.startswith("--"):
            use.problem = f"takes no argument, but `={explicit}` was given ({use.problem})"
        return
    use.values = [explicit]
    if low > 1:
        use.problem = f"expects {arity_text(low, high)}"
