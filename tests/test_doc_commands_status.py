"""The status of a checked doc command, from explain's findings (kb/doc_commands.py)."""

from __future__ import annotations

from typing import Any

from kb.doc_commands import LIKELY, status_of


def f(severity: str, kind: str, message: str = "x", **extra: Any) -> dict[str, Any]:
    return {"severity": severity, "kind": kind, "message": message, "flag": None, **extra}


def test_statuses():
    assert status_of([]) == "ok"
    assert status_of([f("warning", "deprecated")]) == "ok"
    assert status_of([f("error", "unknown_flag"), f("error", "constraint")]) == "rejected"
    assert status_of([f("error", "constraint", "raises at a.py:1: no")]) == "fails"
    assert status_of([f("info", "undecidable", needs=["the GPU"])]) == "undecided"
    assert status_of([f("warning", "assumed", needs=["a"])]) == "undecided"


def test_a_likely_raise_needs_inputs_and_is_no_failure():
    likely = f("error", "constraint", f"raises at m.py:5: boom ({LIKELY}; whether ... needs: x)")
    assert status_of([likely]) == "undecided"
    decided = f("error", "constraint", "assertion fails at s.py:9: multi-node")
    assert status_of([likely, decided]) == "fails"


def test_the_likely_words_are_deploys():
    from pathlib import Path

    import kb.explain.deploy as deploy

    assert LIKELY in Path(deploy.__file__).read_text()
