"""The explain answer: one command at a version, its compatibility range across versions,
and optionally the upgrade check against another version."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, select

from kb.explain.analysis import Analysis, analyze
from kb.explain.compare import compare
from kb.explain.deploy import (
    Simulation,
    annotate,
    enclosing_tests,
    fix_candidates,
    fixed_command,
    profile_options,
    simulatable,
    simulate,
)
from kb.explain.envvars import environ_of
from kb.explain.facts import VersionFacts
from kb.explain.load import load_facts, load_options, version_modules, version_paths
from kb.explain.predicates import Profile
from kb.explain.ranges import presence, used_options, valid_in
from kb.explain.report import SEVERITY_RANK, Finding, clip
from kb.explain.report import finding as new_finding
from kb.explain.shell import tokenize
from kb.explain.simulate import Budget
from kb.queries import (
    Deprecation,
    NotFound,
    citation,
    get_version,
    last_deprecation,
    newest_version,
    per_stamp,
    session_stamp,
)
from kb.schema import ModelFile, Version, loads

MAX_COMMAND = 20_000  # characters; a launch command is a few hundred
# Statements the simulations that verify fixes may take in all, for one explain (a run takes
# at most simulate's MAX_STEPS; SGLang's own argument handling takes < 2,000).
FIX_STEPS = 20_000
MAX_ALTERNATIVES = 2  # verified fixes offered beside the first, per error (each ~17 ms of CPU)
# candidates tried for alternatives once an error has a verified fix (the rest of the budget
# goes to repairing a change that broke something: kb.explain.orchestrate.add_fixes)
MAX_TRIES_AFTER = 3
MAX_PAIRED = 2  # changes of each error tried together when none passes alone
# a change that breaks something else, repaired a change at a time: the changes tried at
# each step, the breaking changes repaired per error, the changes in one such fix
MAX_REPAIRS, MAX_BROKEN, MAX_CHAIN = 3, 2, 3
# Words after the launcher (flags and their values). The compatibility range judges each word
# against every ingested version, so the cost grows with the words: SGLang's real launch
# commands have fewer than 60 flags (~120 words).
MAX_WORDS = 400


class CommandRejected(ValueError):
    """A command explain does not take: `too_large` when it passes MAX_COMMAND or MAX_WORDS,
    else it is not text a shell could pass (NUL, a lone surrogate)."""

    def __init__(self, message: str, too_large: bool) -> None:
        super().__init__(message)
        self.too_large = too_large


def check_command(command: str) -> None:
    """CommandRejected for a command over the bounds or that no shell could pass: argv
    cannot hold NUL (nor can PostgreSQL text, where the flags are looked up), and a lone
    surrogate (a `\\ud800` JSON escape) cannot be encoded in the answer."""
    if len(command) > MAX_COMMAND:
        raise CommandRejected(f"The command is longer than {MAX_COMMAND:,} characters.", True)
    if "\x00" in command:
        raise CommandRejected("The command contains a NUL character.", False)
    try:
        command.encode()
    except UnicodeEncodeError as exc:
        raise CommandRejected(
            f"The command is not valid Unicode text: a lone surrogate at character {exc.start}.",
            False,
        ) from None
    words = len(tokenize(command).argv)
    if words > MAX_WORDS:
        raise CommandRejected(
            f"The command has {words:,} words after the launcher; at most {MAX_WORDS} "
            "(flags and their values) are explained.",
            True,
        )


def resolve_version(session: Session, name: str | None) -> Version:
    """The named version (NotFound with suggestions), or the newest when none is named."""
    if name:
        return get_version(session, name)
    newest = newest_version(session)
    if newest is None:
        return get_version(session, "")  # raises NotFound: nothing ingested
    return newest


def profile_choices(session: Session, version_name: str | None) -> dict[str, Any]:
    """What the profile form offers at a version (architectures its code names, platforms,
    SMs with GPU names); empty lists for an unknown version."""
    try:
        version = resolve_version(session, version_name)
    except NotFound:
        return {"archs": [], "platforms": [], "sms": []}
    return _choices(session, version)


def _choices(session: Session, version: Version) -> dict[str, Any]:
    options = profile_options(version_modules(session, version))
    return {**options, "archs": sorted({*options["archs"], *_entry_classes(session, version)})}


def _entry_classes(session: Session, version: Version) -> list[str]:
    """The EntryClass names of the version's model files, when the knowledge base records
    them (a `ModelFile` table in kb.schema); nothing otherwise."""
    from kb import schema

    model_file = getattr(schema, "ModelFile", None)
    if model_file is None:
        return []
    rows = session.exec(select(model_file.architectures).where(model_file.version_id == version.id))
    return [name for text in rows for name in (loads(text) or []) if isinstance(name, str)]


def _model_files(session: Session, version: Version) -> dict[str, str]:
    """The version's architectures -> the path of the model file whose EntryClass names it."""
    rows = session.exec(
        select(ModelFile.path, ModelFile.architectures).where(ModelFile.version_id == version.id)
    )
    return {
        arch: path for path, text in rows for arch in loads(text) or [] if isinstance(arch, str)
    }


def run(
    session: Session,
    version: Version,
    facts: VersionFacts,
    command: str,
    profile: Profile | None,
    budget: Budget | None = None,
) -> tuple[Analysis, Simulation | None]:
    """Parse and check the command, then replay SGLang's argument handling on it (with the
    profile, if any; within `budget`, else a run's own bound). The simulation's findings
    replace the site-by-site evaluation, which remains for knowledge bases without the
    source of ServerArgs."""
    modules = version_modules(session, version)
    analysis = analyze(facts, command, evaluate=not simulatable(modules))
    for f in analysis.findings:
        if f["kind"] == "unknown_flag" and f["flag"]:
            said_before(f, last_deprecation(session, version, f["flag"]), version.name)

    def cite(path: str, line: int, end: int) -> dict[str, Any]:
        return citation(version, path, line, end)

    models = per_stamp(("model-files", version.id), lambda: _model_files(session, version), session)
    paths = version_paths(session, version)
    sim = simulate(
        facts, analysis, modules, profile, cite, environ_of(facts, command), budget, models, paths
    )
    for f in analysis.findings:  # the site-by-site evaluation checks ServerArgs' constraints
        f["stage"] = "server_args" if f["kind"] in ("constraint", "undecidable") else "parse"
    if sim is not None:
        for f in sim.findings:
            f.setdefault("stage", "server_args")
        kept = [f for f in analysis.findings if f["kind"] not in ("constraint", "undecidable")]
        analysis.findings = sorted(
            kept + sim.findings, key=lambda f: SEVERITY_RANK.get(f["severity"], 3)
        )
        analysis.fired = sim.fired
    return analysis, sim


def said_before(finding: Finding, gone: Deprecation | None, version: str) -> None:
    """An unknown flag that SGLang deprecated before this version: its message, and the
    flags it names that exist here first among the suggestions (a fuzzy match of the
    name, `--enable-ep-moe` -> `--enable-eplb`, is no replacement)."""
    if gone is None:
        return
    option, fuzzy = finding["flag"], finding.get("suggestions") or []
    text = f"unknown flag {option} in {version}; deprecated in {gone.version}"
    if gone.message:
        text += f" ({clip(gone.message, 200)})"
    if gone.flags:
        text += f": use {' or '.join(gone.flags)}"
    elif fuzzy:
        text += "; did you mean " + " or ".join(fuzzy) + "?"
    finding["message"] = text
    finding["suggestions"] = list(dict.fromkeys([*gone.flags, *fuzzy]))
    finding["replacement"] = gone.replacement or (gone.flags[0] if gone.flags else None)
    finding["replacements"] = gone.flags  # (the page's "use instead" links)


def add_fixes(
    session: Session,
    version: Version,
    facts: VersionFacts,
    command: str,
    profile: Profile | None,
    analysis: Analysis,
    sim: Simulation,
) -> None:
    """For each error of the simulation, the values of the flags its condition reads that
    make it pass, each verified by simulating the fixed command: a fix is verified when the
    fixed command has no error at all, through every stage simulated (nor a raise left to an
    assumption: an installed package, the typical CUDA). The first (the smallest change) is
    the finding's `fix`, up to MAX_ALTERNATIVES more its `alternatives`; each says the last
    stage it was simulated through (`verified_through`) and what of the load stage was
    checked (`also_checked`). A change that clears its error but leaves another one (the
    command had two) is tried with a change clearing the other: the pair, when it passes,
    is the fix. The simulations share FIX_STEPS statements; when they are spent, the search
    stops and says so."""
    budget = Budget(FIX_STEPS)
    plain_errors = {
        (f["kind"], f["flag"])
        for f in analysis.findings
        if f["severity"] == "error" and f["kind"] != "constraint"
    }
    errors = [f for f in sim.findings if f["severity"] == "error"]
    # error key -> the changes that clear it but leave others (fix, fixed command, its parse)
    clearing: dict[str, list[tuple[dict[str, Any], str, Analysis]]] = {}
    # ... and those that clear it but break something else (with the fixed run)
    breaking: dict[str, list[tuple[dict[str, Any], str, Analysis, Simulation]]] = {}

    def verify(fixed: str) -> tuple[str, Analysis, Simulation | None] | None:
        """ "passes" (no error at all), "clears" (no error the command did not have) or "no",
        with the fixed command's parse and simulation; None when the budget is spent."""
        if budget.exhausted:
            return None
        other, other_sim = run(session, version, facts, fixed, profile, budget)
        if budget.exhausted:  # spent within this run: a stage past ServerArgs may be cut short
            return "no", other, other_sim
        if other_sim is None or other_sim.result.truncated:
            return "no", other, other_sim
        new_plain = any(
            f["severity"] == "error" and f["kind"] != "constraint" for f in other.findings
        )
        if not other_sim.errors and not other_sim.assumed and not new_plain:
            return "passes", other, other_sim
        if (
            other_sim.errors <= sim.errors
            and other_sim.assumed <= sim.assumed
            and not any(
                f["severity"] == "error"
                and f["kind"] != "constraint"
                and (f["kind"], f["flag"]) not in plain_errors
                for f in other.findings
            )
        ):
            return "clears", other, other_sim
        return "no", other, other_sim

    modules = version_modules(session, version)

    def tests_around(finding: Finding) -> str:
        source = finding.get("source") or {}
        path, line = source.get("path"), source.get("line")
        if not isinstance(path, str) or not isinstance(line, int):
            return ""
        return enclosing_tests(modules(path), line)

    def verified_fix(fix: dict[str, Any], fixed: str, other_sim: Simulation) -> dict[str, Any]:
        return {
            **fix,
            "command": fixed,
            "verified": True,
            "verified_through": other_sim.last_stage,
            **({"also_checked": other_sim.load_parts} if other_sim.load_parts else {}),
        }

    for finding in errors:
        verified: list[dict[str, Any]] = []
        tried_after = 0  # candidates tried since the first verified fix
        for fix in fix_candidates(finding, facts, analysis, profile, tests_around(finding)):
            if len(verified) > MAX_ALTERNATIVES or tried_after >= MAX_TRIES_AFTER:
                break
            tried_after += 1 if verified else 0
            fixed = fixed_command(command, analysis, fix)
            outcome = verify(fixed)
            if outcome is None:
                _keep(finding, verified)
                analysis.findings.append(_search_stopped())
                return
            verdict, other, other_sim = outcome
            if other_sim is None:
                continue
            if finding["key"] in other_sim.errors | other_sim.assumed:
                continue  # it may still raise
            if verdict == "no":
                if other_sim.errors and not other_sim.result.truncated:
                    breaking.setdefault(finding["key"], []).append((fix, fixed, other, other_sim))
                continue
            if verdict == "clears":
                clearing.setdefault(finding["key"], []).append((fix, fixed, other))
                continue
            verified.append(verified_fix(fix, fixed, other_sim))
        _keep(finding, verified)
    for finding in errors:
        if "fix" in finding:
            continue
        for fix, fixed, fixed_analysis in clearing.get(finding["key"], [])[:MAX_PAIRED]:
            pairs = [p for k, ps in clearing.items() if k != finding["key"] for p in ps]
            for second, _, _ in pairs[:MAX_PAIRED]:
                both = fixed_command(fixed, fixed_analysis, second)
                outcome = verify(both)
                if outcome is None:
                    analysis.findings.append(_search_stopped())
                    return
                verdict, _, other_sim = outcome
                if verdict == "passes" and other_sim is not None:
                    _keep(finding, [verified_fix(_merged(fix, second), both, other_sim)])
                    break
            if "fix" in finding:
                break

    def repair(fix: dict[str, Any], fixed: str, parsed: Analysis, ran: Simulation) -> Any:
        """A verified fix that starts with `fix` (which broke something) and repairs what
        it broke a change at a time; None when none is found, STOPPED when the budget is
        spent."""
        broken = [
            f for f in ran.findings if f["severity"] == "error" and f["key"] not in sim.errors
        ]
        if not broken or _changes(fix) >= MAX_CHAIN:
            return None
        candidates = fix_candidates(broken[0], facts, parsed, profile, tests_around(broken[0]))
        # (a change to a flag an earlier change set would undo or redo it)
        steps = [c for c in candidates if not _flags(c) & _flags(fix)]
        for step in steps[:MAX_REPAIRS]:
            again = fixed_command(fixed, parsed, step)
            outcome = verify(again)
            if outcome is None:
                return STOPPED
            verdict, other, other_sim = outcome
            if other_sim is None or broken[0]["key"] in other_sim.errors | other_sim.assumed:
                continue
            chained = _merged(fix, step)
            if verdict == "passes":
                return verified_fix(chained, again, other_sim)
            deeper = repair(chained, again, other, other_sim)
            if deeper is not None:
                return deeper
        return None

    # A change that clears its error but breaks something else (deepep for the TBO error,
    # whose normal mode then asserts at the first forward) is repaired a change at a time,
    # each run verified (deepep, then its low-latency mode, then the MoE runner that mode
    # needs), up to MAX_CHAIN changes in all: offered after the fixes found before.
    for finding in errors:
        offered = ([finding["fix"]] if "fix" in finding else []) + finding.get("alternatives", [])
        if len(offered) > MAX_ALTERNATIVES:
            continue
        for fix, fixed, parsed, ran in breaking.get(finding["key"], [])[:MAX_BROKEN]:
            found = repair(fix, fixed, parsed, ran)
            if found is STOPPED:
                analysis.findings.append(_search_stopped())
                return
            if found is not None:
                _keep(finding, [*offered, found])
                break


STOPPED = object()  # (the fix search's budget ran out)


def _changes(fix: dict[str, Any]) -> int:
    return sum(len(fix.get(kind, [])) for kind in ("add", "remove", "set"))


def _flags(fix: dict[str, Any]) -> set[str]:
    """The flags a fix adds, removes or sets."""
    return {part.split()[0] for kind in ("add", "remove", "set") for part in fix.get(kind, [])}


def _merged(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Two changes as one fix: {"add": [...], "set": [...]} (each kind of change listed)."""
    out: dict[str, Any] = {}
    for kind in ("add", "remove", "set"):
        changes = [*first.get(kind, []), *second.get(kind, [])]
        if changes:
            out[kind] = changes
    return out


def _keep(finding: Finding, verified: list[dict[str, Any]]) -> None:
    if verified:
        finding["fix"] = verified[0]
        if len(verified) > 1:
            finding["alternatives"] = verified[1:]


def _search_stopped() -> Finding:
    return new_finding(
        "info",
        None,
        f"unknown: budget exhausted: the search for fixes stopped after {FIX_STEPS:,} "
        "statements of simulation; the errors after this point have no fix tried",
        "budget",
        None,
    )


def explain(
    session: Session,
    version_name: str | None,
    command: str,
    compare_to: str | None = None,
    profile: Profile | None = None,
) -> dict[str, Any]:
    """The API's answer: {"version", "flags", "findings", "valid_in", "compare", ...} and,
    from the simulation, {"effective", "passed", "tokens", "predicates", ...}."""
    check_command(command)
    stamp = session_stamp(session)  # one state of the knowledge base for the whole answer
    version = resolve_version(session, version_name)
    facts = load_facts(session, version, stamp)
    analysis, sim = run(session, version, facts, command, profile)
    if sim is not None:
        add_fixes(session, version, facts, command, profile, analysis, sim)
    versions = load_options(session, stamp)
    options = used_options(analysis)
    result: dict[str, Any] = {
        **analysis.to_json(),
        "errors": analysis.errors,
        "valid_in": valid_in(command, versions) if options else [],
        "presence": presence(options, versions),
        "compare": None,
        "profile": profile.to_json() if profile is not None else None,
        "profile_text": profile.describe() if profile is not None else None,
        "simulated": sim is not None,
        "effective": sim.effective if sim else [],
        "passed": sim.passed if sim else [],
        "predicates": sim.predicates if sim else [],
        "assumptions": sim.assumptions if sim else [],
        "tokens": annotate(command, analysis, facts),
        "profile_options": _choices(session, version),
    }
    if compare_to:
        other = get_version(session, compare_to)
        other_facts = load_facts(session, other, stamp)
        other_analysis, _ = run(session, other, other_facts, command, profile)
        result["compare"] = compare(analysis, other_analysis, facts, other_facts)
    return result
