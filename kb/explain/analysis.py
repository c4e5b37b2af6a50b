"""One command at one version: shell words -> parse -> per-use checks -> constraint sites."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kb.explain.checks import UseChecker
from kb.explain.envvars import check_env
from kb.explain.facts import VersionFacts
from kb.explain.parsing import OptionTable, Use, parse
from kb.explain.report import SEVERITY_RANK, Finding
from kb.explain.shell import tokenize
from kb.explain.sites import FlagEnv, evaluate_sites


@dataclass
class Analysis:
    version: str
    launcher: str
    uses: list[Use]
    flags: list[dict[str, Any]]
    findings: list[Finding]
    env: FlagEnv
    fired: dict[str, Finding]  # constraint key -> finding, for the upgrade check
    given: dict[str, Any] = field(default_factory=dict)  # dest -> value from the command
    env_vars: list[dict[str, Any]] = field(default_factory=list)  # variables the command sets

    def given_value(self, dest: str) -> Any:
        for name, value in self.given.items():
            if self.env.canon(name) == dest:
                return value
        return None

    @property
    def errors(self) -> int:
        return sum(1 for f in self.findings if f["severity"] == "error")

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "launcher": self.launcher,
            "flags": self.flags,
            "findings": self.findings,
            "env": self.env_vars,
        }


def analyze(
    facts: VersionFacts, command: str, evaluate: bool = True, table: OptionTable | None = None
) -> Analysis:
    """`evaluate=False` when the simulation (kb.explain.deploy) judges the sites instead;
    `table`, the option table of `facts.flags` when the caller has it already."""
    tokens = tokenize(command)
    table = table or OptionTable(facts.flags)
    uses, leftovers = parse(tokens.argv, table)
    check = UseChecker(facts, table, list(tokens.findings))
    for word in leftovers:
        check.leftover(word)
    for use in uses:
        check.use(use)
    check.after_all()
    env_rows, env_values, env_findings = check_env(facts, command)
    check.findings.extend(env_findings)
    check.env.environ = env_values  # sites reading these variables are decided with them
    fired = (
        evaluate_sites(facts, check.env, check.given, check.given_options, check.findings)
        if evaluate
        else {}
    )
    findings = sorted(check.findings, key=lambda f: SEVERITY_RANK.get(f["severity"], 3))
    return Analysis(
        facts.name,
        tokens.launcher,
        uses,
        check.rows,
        findings,
        check.env,
        fired,
        check.given,
        env_rows,
    )
