"""argv -> flag uses, the way argparse's parser does it (option lookup, arity)."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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
NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse's own test


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


def arity(flag: FlagSpec) -> tuple[int, int | None]:
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


def arity_text(low: int, high: int | None) -> str:
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
        low, high = arity(m.flag)
        nargs = (m.flag.nargs or "").strip("'\"")
        if "REMAINDER" in nargs or nargs == "...":  # argparse.REMAINDER takes everything
            use.values = list(argv[i + 1 :])
            uses.append(use)
            break
        if m.explicit is not None:
            if high == 0:
                use.problem = f"takes no argument, but `={m.explicit}` was given"
            elif low > 1:
                use.problem = f"expects {arity_text(low, high)}"
            use.values = [m.explicit]
            uses.append(use)
            i += 1
            continue
        take = len(run) if high is None else min(high, len(run))
        if take < low:
            use.problem = f"expects {arity_text(low, high)}"
        use.values = run[:take]
        uses.append(use)
        i += 1 + take
    return uses, leftovers
