"""Constraint sites: apply overrides, then check raises/asserts/warnings on the values."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from kb.explain.facts import SiteSpec, VersionFacts
from kb.explain.report import Finding, clip, display, finding
from kb.explain.safe_eval import Evaluator, flag_names
from kb.threeval import Unknown, all_of, unknown

_UNSET = object()


class FlagEnv(dict[str, Any]):
    """Flag values by dest, where alias spellings resolve too: SGLang reads
    `self.tp_size` although argparse stores `--tensor-parallel-size` (alias `--tp-size`) as
    `tensor_parallel_size`, and renames it in `from_cli_args`."""

    def __init__(self) -> None:
        super().__init__()
        self.aliases: dict[str, str] = {}
        # Environment variables the command sets: name -> (typed value, raw string).
        # Conditions reading them (`get_bool_env_var("X")`, `envs.X.get()`) are decided
        # with these values; the others stay undecidable.
        self.environ: dict[str, tuple[Any, str]] = {}

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


def dest_of(option: str) -> str:
    return option.lstrip("-").replace("-", "_")


def as_option(name: str) -> str:
    """Sites list options; tolerate a bare dest (`pp_size`) from the ingest too."""
    return name if name.startswith("-") else "--" + name.replace("_", "-")


def _all_true(ev: Evaluator, conditions: Sequence[str]) -> bool | Unknown:
    return all_of(ev.truth(text) for text in conditions)  # the ones after a False unread


def _site_outcome(site: SiteSpec, env: dict[str, Any]) -> tuple[bool | Unknown, set[str]]:
    """Whether the site fires under `env`, and which flag dests the decision read.

    Every kind fires when all its conditions hold: the ingest records an assert's failure
    as a last condition `not (test)`, and an `else` branch as `not (cond)`.
    """
    ev = Evaluator(env)
    return _all_true(ev, site.conditions), ev.names_read


def _option_for(facts: VersionFacts, dest: str) -> str:
    for flag in facts.flags:
        if flag.dest == dest or dest in (dest_of(a) for a in flag.aliases):
            return flag.name
    return dest


def evaluate_sites(
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
            if isinstance(outcome, Unknown):
                for name, _src in site.writes:
                    maybe_written.setdefault(env.canon(name), site)
            if outcome is not True:
                continue
            done.add(idx)
            written: dict[str, Any] = {}
            for name, src in site.writes:
                dest = env.canon(name)
                value = Evaluator(env).value(src)
                if isinstance(value, Unknown):
                    value = unknown(
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
            if d in given and not isinstance(given[d], Unknown) and not _same(given[d], written[d])
        ]
        if not reads_given and not overridden:
            continue
        sources = {env.canon(name): src for name, src in site.writes}
        parts = [
            f"{_option_for(facts, d)} to {_display_written(v, sources[d])}"
            + (f" (you gave {display(given[d])})" if d in overridden else "")
            for d, v in written.items()
        ]
        text = f"overrides {', '.join(parts) or 'settings'} at {site.location}"
        if not effective:
            text += " (already so)"
        if site.message:
            text += f": {clip(site.message, 300)}"
        found = finding(
            "warning" if effective else "info",
            _first_given(site, given_options),
            text,
            "constraint",
            site.source,
            key=site.key,
        )
        findings.append(found)
        fired[site.key or f"{site.kind}:{site.message}"] = found

    for site in facts.sites:
        if site.kind == "override" or not _reads_given(site, given_options, env):
            continue
        outcome, read = _site_outcome(site, env)
        if outcome is False:
            continue
        flag = _first_given(site, given_options)
        if _said_as_deprecated(site, findings):
            continue
        if isinstance(outcome, Unknown):
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
                text += f": {clip(site.message, 200)}"
            findings.append(finding("info", flag, text, "undecidable", site.source, key=site.key))
            continue
        if site.kind == "raise":
            text, severity = f"raises at {site.location}", "error"
        elif site.kind == "assert":
            text, severity = f"assertion fails at {site.location}", "error"
        else:
            text, severity = f"logs a warning at {site.location}", "warning"
        text += f": {clip(site.message, 300)}" if site.message else ""
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
        found = finding(severity, flag, text, "constraint", site.source, key=site.key)
        findings.append(found)
        fired[site.key or f"{site.kind}:{site.message}"] = found
    return fired


def _said_as_deprecated(site: SiteSpec, findings: list[Finding]) -> bool:
    """Whether `site` is the deprecation warning of a flag's argparse action
    (`DeprecatedStoreTrueAction.__call__`) and the flag's "deprecated" finding is there: one
    thing, said once, by the finding that links the replacement's flags (braces expanded)."""
    if site.kind != "warning" or not site.function.endswith(".__call__"):
        return False
    return any(
        f["kind"] == "deprecated"
        and f.get("deprecated_kind") == "warns"
        and f["flag"] in site.flags
        for f in findings
    )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, Unknown) or isinstance(b, Unknown) or a is _UNSET or b is _UNSET:
        return False
    return type(a) is type(b) and a == b


def _display_written(value: Any, source: str) -> str:
    return display(value) if not isinstance(value, Unknown) else clip(source, 60)


def _reads_given(site: SiteSpec, given_options: dict[str, str], env: FlagEnv) -> bool:
    """The site's conditions read a flag of the command: by the ingest's list, or by the
    attributes the condition texts read (which also catches renamed dests like tp_size)."""
    if any(as_option(o) in given_options for o in site.flags):
        return True
    if any(
        re.search(rf"\b{re.escape(name)}\b", text)
        for name in env.environ
        for text in site.conditions
    ):
        return True
    return any(
        as_option(env.canon(name)) in given_options
        for text in site.conditions
        for name in flag_names(text)
    )


def _first_given(site: SiteSpec, given_options: dict[str, str]) -> str | None:
    for option in (*site.flags, *site.affects):
        if as_option(option) in given_options:
            return given_options[as_option(option)]
    return as_option(site.flags[0]) if site.flags else None
