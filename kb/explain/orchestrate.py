"""The explain answer: one command at a version, its compatibility range across versions,
and optionally the upgrade check against another version."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from kb.explain.analysis import analyze
from kb.explain.compare import compare
from kb.explain.load import load_facts, load_options
from kb.explain.ranges import presence, used_options, valid_in
from kb.queries import get_version, newest_version, session_stamp
from kb.schema import Version

MAX_COMMAND = 20_000  # characters; a launch command is a few hundred


def resolve_version(session: Session, name: str | None) -> Version:
    """The named version (NotFound with suggestions), or the newest when none is named."""
    if name:
        return get_version(session, name)
    newest = newest_version(session)
    if newest is None:
        return get_version(session, "")  # raises NotFound: nothing ingested
    return newest


def explain(
    session: Session, version_name: str | None, command: str, compare_to: str | None = None
) -> dict[str, Any]:
    """The API's answer: {"version", "flags", "findings", "valid_in", "compare", ...}."""
    if len(command) > MAX_COMMAND:
        raise ValueError(f"the command is longer than {MAX_COMMAND} characters")
    stamp = session_stamp(session)  # one state of the knowledge base for the whole answer
    version = resolve_version(session, version_name)
    facts = load_facts(session, version, stamp)
    analysis = analyze(facts, command)
    versions = load_options(session, stamp)
    options = used_options(analysis)
    result: dict[str, Any] = {
        **analysis.to_json(),
        "errors": analysis.errors,
        "valid_in": valid_in(options, versions) if options else [],
        "presence": presence(options, versions),
        "compare": None,
    }
    if compare_to:
        other = get_version(session, compare_to)
        other_facts = load_facts(session, other, stamp)
        result["compare"] = compare(analysis, analyze(other_facts, command), facts, other_facts)
    return result
