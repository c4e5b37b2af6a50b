"""The facts of one version as explain needs them: flags, constraint sites, argparse's -h."""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from kb.replacements import replacement_names

Citation = dict[str, Any]


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
    negations: tuple[str, ...] = ()  # the `--no-x` BooleanOptionalAction adds
    takes_value: bool | None = None  # the ingest's arity fact; None: older knowledge base
    deprecated_kind: str | None = None  # soft (help text only) | warns | raises (when used)
    action_error: str | None = None  # what an action that raises says
    action_source: Citation | None = None  # where the action class (or its raise) is
    # the flag's type function when explain can apply it (kb.explain.type_functions)
    converter: Callable[[str], Any] | None = field(default=None, compare=False, repr=False)

    @property
    def options(self) -> tuple[str, ...]:
        """Every option string argparse registers for the flag."""
        return (self.name, *self.aliases, *self.negations)

    @property
    def action_name(self) -> str:
        return (self.action or "store").rsplit(".", 1)[-1]


def negations_of(
    options: tuple[str, ...], action: str | None, negation: str | None
) -> tuple[str, ...]:
    """The `--no-x` strings argparse.BooleanOptionalAction registers: one per long option
    (the ingest records the first as `negation`; older knowledge bases lack it)."""
    out = [negation] if negation else []
    if (action or "").endswith("BooleanOptionalAction"):
        out += ["--no-" + o[2:] for o in options if o.startswith("--")]
    return tuple(dict.fromkeys(out))


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


@dataclass(frozen=True)
class EnvSpec:
    name: str  # "SGLANG_ENABLE_JIT_DEEPGEMM"
    type: str | None = None  # bool | int | float | str | tuple
    default: Any = None
    declared: bool = False  # an environ.py declaration (EnvBool...), else a direct read
    deprecated_names: tuple[str, ...] = ()
    replacement: str | None = None  # this name is deprecated in favour of that one
    source: Citation | None = None
    comment: str = ""  # for a name deprecated by a helper call: SGLang's warning
    # how SGLang converts this deprecated name's value for its replacement (EnvVar.conversion)
    conversion: dict[str, Any] | None = None
    # a default read from another variable (EnvVar.fallback: {name, default, reads})
    fallback: dict[str, Any] | None = None


@dataclass
class VersionFacts:
    name: str
    flags: list[FlagSpec]
    sites: list[SiteSpec] = field(default_factory=list)
    env: dict[str, EnvSpec] = field(default_factory=dict)
    env_prefix_aliases: list[tuple[str, str]] = field(default_factory=list)  # ("SGL_", "SGLANG_")

    def flag_url(self, flag: FlagSpec) -> str:
        return f"/v/{quote(self.name, safe='')}/flags/{quote(flag.name, safe='')}"

    def env_url(self, name: str) -> str:
        return f"/v/{quote(self.name, safe='')}/env/{quote(name, safe='')}"

    def replacement_flags(self, replacement: str | None) -> list[str]:
        """The flags of this version that a replacement names, by their names: a brace pair
        names two (`--x-{decode,prefill}=off`: `--x-decode`, `--x-prefill`); a value given
        with `=` is dropped, and a name no flag answers to is left out."""
        by_option = {o: f.name for f in self.flags for o in (f.name, *f.aliases)}
        named = (by_option.get(n) for n in replacement_names(replacement))
        return list(dict.fromkeys(n for n in named if n is not None))


HELP_FLAG = FlagSpec(
    name="--help",
    dest="help",
    aliases=("-h",),
    action="help",
    help="argparse's own help: prints the usage and exits",
    builtin=True,
)
