"""Values: conversion like `type=`, choices, defaults, and what argparse stores for a use."""

from __future__ import annotations

import json
from typing import Any

from kb.explain.facts import FlagSpec
from kb.explain.parsing import ZERO_ARG_ACTIONS, Use
from kb.explain.report import Finding, clip, display, finding, suggest
from kb.threeval import Unknown, unknown


def is_shell(word: str) -> bool:
    return "$" in word or "`" in word


class BadValue(ValueError):
    pass


def convert(flag: FlagSpec, raw: str) -> tuple[Any, bool]:
    """Convert like the flag's `type=`; returns (value, checked). Raises BadValue."""
    if flag.converter is not None:  # a type function of SGLang's that explain can apply
        try:
            return flag.converter(raw), True
        except ValueError as exc:
            raise BadValue(str(exc)) from None
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
        # SGLang's json_list_type checks more than JSON syntax, in code not evaluated here
        return value, kind != "json_list_type"
    if kind == "nullable_str":
        return (None if not raw or raw == "None" else raw), True
    if kind in ("str.lower", "str.upper"):
        return (raw.lower() if kind == "str.lower" else raw.upper()), True
    return raw, False  # a callable we do not know: keep the word


def default_of(flag: FlagSpec) -> Any:
    if flag.default_expr is not None and flag.default is None:
        return unknown(f"the default of {flag.name} is computed ({clip(flag.default_expr, 50)})")
    return flag.default


def equal(value: Any, default: Any) -> bool:
    if isinstance(value, Unknown) or isinstance(default, Unknown):
        return False
    if _is_number(value) and _is_number(default):
        return bool(value == default)
    return type(value) is type(default) and bool(value == default)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def use_value(flag: FlagSpec, use: Use, findings: list[Finding], previous: Any) -> Any:
    """The value argparse stores for this use, with type/choice findings on the way."""
    action = flag.action_name
    if action == "store_true":
        return True
    if action == "store_false":
        return False
    if action in ("store_const", "append_const"):
        return flag.const if flag.const is not None else unknown("a constant of the flag")
    if action == "count":
        return (previous if isinstance(previous, int) else 0) + 1
    if action == "BooleanOptionalAction":
        return (use.match.resolved or use.match.option) not in flag.negations
    nargs = (flag.nargs or "").strip("'\"")
    if not use.values:  # `--x` alone with nargs="?" stores const, with "*" an empty list
        return flag.const if nargs == "?" else []
    shell = [w for w in use.values if is_shell(w)]
    if shell:
        if flag.choices or (flag.type or "str") not in ("str", "nullable_str"):
            findings.append(
                finding(
                    "info",
                    flag.name,
                    f"the value of {flag.name} comes from the shell ({' '.join(shell)}): "
                    "not checked",
                    "shell",
                    flag.source,
                )
            )
        return unknown(f"{flag.name} comes from the shell ({' '.join(shell)})")
    converted: list[Any] = []
    for raw in use.values:
        try:
            value, checked = convert(flag, raw)
        except BadValue as exc:
            findings.append(
                finding("error", flag.name, f"{flag.name} {exc}", "wrong_type", flag.source)
            )
            return unknown(f"{flag.name} has an invalid value")
        if not checked:
            unchecked(flag, raw, findings)
        check_choice(flag, value, checked, findings)
        converted.append(value)
    if not custom_action(flag):
        return converted[0] if nargs in ("", "None", "?") and converted else converted
    return unknown(f"{flag.name} is stored by a custom action ({flag.action})")


def unchecked(flag: FlagSpec, raw: str, findings: list[Finding]) -> None:
    """A value whose validity a function decides (`type=human_readable_int`): say so, and
    never let the answer read as if the value were fine."""
    text = (
        f"{flag.name} {raw!r}: whether SGLang accepts this value depends on "
        f"`{clip(flag.type or '', 60)}`, a function Flag Atlas does not evaluate: not checked"
    )
    findings.append(finding("warning", flag.name, text, "unchecked_value", flag.source))


def custom_action(flag: FlagSpec) -> bool:
    return flag.action_name not in ("store", "append", "extend", *ZERO_ARG_ACTIONS)


def check_choice(flag: FlagSpec, value: Any, checked: bool, findings: list[Finding]) -> None:
    if flag.choices is None or value in flag.choices:
        return
    if not checked and str(value) in [str(c) for c in flag.choices]:
        return
    shown = [display(c) for c in flag.choices]
    hint = suggest(str(value), shown, limit=1, cutoff=60)
    folded = [c for c in shown if isinstance(value, str) and c.lower() == value.lower()]
    hint = folded or hint
    text = f"invalid choice {display(value)!r} for {flag.name}; valid: " + ", ".join(shown)
    if hint:
        text += f". Did you mean {hint[0]}?"
    dynamic = flag.choices_dynamic or not checked
    if dynamic:
        text += " (the list is computed at run time and may be incomplete)"
    elif flag.choices_extensible:
        text += " (plugins can add choices through an add_*_choices() hook)"
    findings.append(
        finding(
            "warning" if dynamic else "error",
            flag.name,
            text,
            "invalid_choice",
            flag.source,
            suggestions=hint,
            choices=shown,
        )
    )
