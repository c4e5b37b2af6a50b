"""The differential check of explain's parse: a real `argparse.ArgumentParser` built from flag
rows (as the knowledge base stores them), and generated commands to feed it and explain.

The parser gets the rows' option strings, nargs, choices, required and actions: argparse's
own actions by name, BooleanOptionalAction (which adds the `--no-x`), and custom actions as
what the ingest says they do: take `nargs` values (none when `takes_value` is false), or
raise when used (`deprecated_kind == "raises"`). Types are argparse's (int, float, bool) and
`json.loads`; a function Flag Atlas does not evaluate (`human_readable_int`) becomes
identity, and its choices are not checked, since neither side can know them.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kb.explain.analysis import analyze
from kb.explain.facts import FlagSpec, VersionFacts
from kb.explain.parsing import OptionTable
from kb.explain.shell import tokenize

SERVE = "python -m sglang.launch_server"

# Finding kinds by which explain says argparse (or an action it calls) stops the server.
REJECTING = {
    "unknown_flag",
    "ambiguous",
    "arguments",
    "unplaced",
    "missing_required",
    "invalid_choice",
    "wrong_type",
    "attached_text",
    "action_raises",
}
BUILTIN_ACTIONS = {
    "store",
    "store_true",
    "store_false",
    "store_const",
    "append",
    "append_const",
    "extend",
    "count",
}
TYPES: dict[str, Callable[[str], Any]] = {
    "int": int,
    "float": float,
    "bool": bool,
    "json.loads": json.loads,
    "json_list_type": json.loads,  # SGLang's is orjson.loads, raising on what is not JSON
}


class Rejected(Exception):
    pass


class Parser(argparse.ArgumentParser):
    """Raises instead of printing and exiting, for every error (exit_on_error=False does not
    cover ambiguous options, unrecognized arguments or missing required ones in 3.11)."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise Rejected(message)

    def print_help(self, file: Any = None) -> None:
        pass


def _nargs(text: str | None) -> Any:
    text = (text or "").strip().strip("'\"")
    if text in ("", "None"):
        return None
    if text.isdigit():
        return int(text)
    if text.endswith("REMAINDER") or text == "...":
        return argparse.REMAINDER
    return text if text in ("?", "*", "+") else None


def _takes_value_by_name(action: str, nargs: str | None) -> bool:
    """argparse's rule, with SGLang's custom actions known by name: DeprecatedAction sets
    nargs=0 in its __init__, the Store{True,False,Const} ones take no value either."""
    if (nargs or "").strip("'\"") == "0" or action in BUILTIN_ACTIONS - {
        "store",
        "append",
        "extend",
    }:
        return False
    if action in ("store", "append", "extend"):
        return True
    return not (
        re.search(r"StoreTrue|StoreFalse|StoreConst|Count|BooleanOptional", action)
        or ("Deprecated" in action and "Store" not in action)
    )


def _custom(nargs: Any, error: str | None) -> type[argparse.Action]:
    class Custom(argparse.Action):
        def __init__(self, option_strings: list[str], dest: str, **kw: Any) -> None:
            kw["nargs"] = nargs
            super().__init__(option_strings, dest, **kw)

        def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
            if error is not None:
                raise argparse.ArgumentError(self, error)
            setattr(namespace, self.dest, values)

    return Custom


def value(row: Mapping[str, Any], key: str) -> Any:
    raw = row.get(key)
    return json.loads(raw) if isinstance(raw, str) and key in ("aliases", "choices") else raw


def build_parser(rows: Iterable[Mapping[str, Any]]) -> Parser:
    parser = Parser(prog="sglang serve", exit_on_error=False)
    for row in rows:
        options = [row["name"], *(value(row, "aliases") or [])]
        action = (row.get("action") or "store").rsplit(".", 1)[-1]
        kw: dict[str, Any] = {"dest": row["dest"], "required": bool(row.get("required"))}
        type_fn = TYPES.get((row.get("type") or "str").strip())
        known_type = type_fn is not None or (row.get("type") or "str") == "str"
        choices = value(row, "choices")
        takes = row.get("takes_value")
        if takes is None:  # a knowledge base from before the ingest recorded it
            takes = _takes_value_by_name(action, row.get("nargs"))
        if action == "BooleanOptionalAction":
            kw["action"] = argparse.BooleanOptionalAction
        elif row.get("deprecated_kind") == "raises":
            kw["action"] = _custom(_nargs(row.get("nargs")) if takes else 0, row["action_error"])
        elif action in BUILTIN_ACTIONS:
            kw["action"] = action
            if action in ("store_const", "append_const"):
                kw["const"] = True
            if action in ("store", "append", "extend"):
                kw["nargs"] = _nargs(row.get("nargs"))
                kw["type"] = type_fn
                if choices is not None and known_type and not row.get("choices_dynamic"):
                    kw["choices"] = choices
        else:  # a custom class: what the ingest says it takes
            nargs = _nargs(row.get("nargs")) if takes else 0
            kw["action"] = _custom(nargs, None)
            if nargs != 0:
                kw["type"] = type_fn
                if choices is not None and known_type and not row.get("choices_dynamic"):
                    kw["choices"] = choices
        parser.add_argument(*options, **kw)
    return parser


def argparse_accepts(parser: Parser, argv: list[str]) -> tuple[bool, str]:
    try:
        parser.parse_args(argv)
    except (Rejected, argparse.ArgumentError) as exc:
        return False, str(exc)
    return True, ""


def explain_accepts(facts: VersionFacts, argv: list[str]) -> tuple[bool, list[dict[str, Any]]]:
    command = f"{SERVE} {shlex.join(argv)}"
    assert tokenize(command).argv == argv, argv  # the shell step hands argparse the same words
    analysis = analyze(facts, command)
    errors = [f for f in analysis.findings if f["severity"] == "error" and f["kind"] in REJECTING]
    return not errors, errors


# --- generated commands -----------------------------------------------------------------------

JUNK = ["x", "fa3", "-1", "-0.5", "-1e5", "1.5", "0", "8", "[1, 2]", '{"a": 1}', "4K", "", "a b"]


def is_help(table: OptionTable, word: str) -> bool:
    """Words argparse reads as -h/--help (it prints the help and exits: not a verdict)."""
    m = table.match(word)
    return m.flag is not None and m.flag.builtin and m.kind != "attached"


def command(rng: random.Random, flags: list[FlagSpec], table: OptionTable) -> list[str]:
    """A launch command as people get them wrong: exact names, aliases, negations,
    abbreviations (some ambiguous), `=` forms, `-single-dash` typos, unknown flags, `--`,
    values from the flag's choices or of the wrong type, too few or too many values."""
    words: list[str] = []
    if rng.random() < 0.85:
        words += ["--model-path", "m"]
    for _ in range(rng.randint(0, 5)):
        flag = rng.choice(flags)
        if flag.name == "--config":
            continue  # SGLang merges the config file into argv before argparse runs
        option = rng.choice(flag.options)
        roll = rng.random()
        if roll < 0.12:
            option = option[: rng.randint(3, max(3, len(option) - 1))]  # an abbreviation
        elif roll < 0.17:
            option = option[1:]  # `-hicache-ratio`: one dash lost
        elif roll < 0.20:
            option = "--" + rng.choice(["zzz", "tp", "enable", "no-x", "model"])
        if is_help(table, option):
            continue
        pool = [str(c) for c in flag.choices or ()] + JUNK
        values = [rng.choice(pool) for _ in range(rng.choice([0, 1, 1, 1, 2, 3]))]
        if values and rng.random() < 0.25:
            words.append(f"{option}={values[0]}")
            words += values[1:]
        else:
            words += [option, *values]
        if rng.random() < 0.03:
            words.append("--")
    return words
