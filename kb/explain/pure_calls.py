"""Calls the interpreter (kb.explain.simulate) runs itself on known values: Python's pure
builtins, the methods of strings and containers that change nothing, `dict.fromkeys`, and
`re`'s matching functions. Each runs on plain values only, and anything it raises is an
unknown value rather than an error SGLang would raise.

A regular expression SGLang builds from the model's config (ModelOpt's `exclude_modules`
globs: `"mtp*"` -> `"mtp.*"`) is matched only when it cannot backtrack for long: short
pattern and text, few quantifiers and none on a group (what makes a pattern blow up).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Callable
from typing import Any

from kb.explain.abstract_values import Again, bounded_range, is_known
from kb.explain.predicates import unknown
from kb.threeval import Unknown, lift, merge_needs, truth

PURE_BUILTINS: dict[str, Callable[..., Any]] = {
    "len": len,
    "min": min,
    "max": max,
    "abs": abs,
    "callable": callable,  # (of a plain value: getattr's None default is not callable)
    "int": int,
    "float": float,
    "str": str,
    "bool": bool,
    "any": any,
    "all": all,
    "sorted": sorted,
    "sum": sum,
    "list": list,
    "tuple": tuple,
    "set": set,
    "round": round,
    "range": bounded_range,
    "next": lambda items, *default: first(items, *default),
    "iter": lambda items: list(items),
}
# functions of other modules that are pure on known values: (module, name) -> function
MODULE_FUNCTIONS: dict[tuple[str, str], Callable[..., Any]] = {
    ("types", "MappingProxyType"): dict,  # (a read-only view: read like the dict)
    ("json", "loads"): lambda text: json_loads(text),
    ("orjson", "loads"): lambda text: json_loads(text),
    # a glob on a layer's name (Quark's `layer_quant_config` patterns; on Linux, where
    # fnmatch does not fold case)
    ("fnmatch", "fnmatch"): lambda name, pattern: glob_match(name, pattern),
    ("fnmatch", "fnmatchcase"): lambda name, pattern: glob_match(name, pattern),
}
MAX_GLOB = 512  # characters of a name or pattern matched (fnmatch's regex cannot blow up)
STR_METHODS = frozenset(
    {
        "lower",
        "upper",
        "startswith",
        "endswith",
        "strip",
        "lstrip",
        "rstrip",
        "split",
        "rsplit",
        "replace",
        "removeprefix",
        "removesuffix",
        "isdigit",
    }
)
CONTAINER_METHODS = frozenset({"get", "keys", "values", "items", "count", "index", "copy"})
REGEX_FUNCTIONS = frozenset({"match", "fullmatch", "search"})
MAX_PATTERN = 200  # characters of a pattern matched
MAX_SUBJECT = 500  # characters of the text it is matched against
MAX_QUANTIFIERS = 4
_QUANTIFIED_GROUP = re.compile(r"\)[*+?{]")
NOT_PURE = object()  # (the call is not one of these: the interpreter goes on)


class Matched:
    """What `re.fullmatch` returns when the text matches (true; its groups not followed)."""

    def __repr__(self) -> str:
        return "<re.Match>"


def first(items: Any, *default: Any) -> Any:
    """`next(<generator expression>, default)`: the interpreter reads a generator
    expression as the list it yields (kb.explain.derived.comprehension), and `iter(x)` as x's
    items."""
    if not isinstance(items, list | tuple):
        raise TypeError("next() of something not iterated here")
    if items:
        return items[0]
    if default:
        return default[0]
    raise TypeError("next() of nothing: StopIteration")  # (not simulated: unknown)


class Keys(list[Any]):
    """`d.keys()`: a list in the dict's order that takes set operators as dict_keys does
    (`scheme_map.keys() - set(ignored)`)."""

    def __sub__(self, other: Any) -> set[Any]:  # type: ignore[override]
        return set(self) - set(other)

    def __rsub__(self, other: Any) -> set[Any]:
        return set(other) - set(self)

    def __or__(self, other: Any) -> set[Any]:
        return set(self) | set(other)

    def __and__(self, other: Any) -> set[Any]:
        return set(self) & set(other)

    def __xor__(self, other: Any) -> set[Any]:
        return set(self) ^ set(other)

    __ror__, __rand__, __rxor__ = __or__, __and__, __xor__


def method(target: Any, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """`target.name(*args, **kwargs)` for a string or container method that changes
    nothing, on known arguments; NOT_PURE for any other."""
    if isinstance(target, Again):  # (a method already run: what it built)
        return target.value
    if isinstance(target, str):
        if name not in STR_METHODS:
            return NOT_PURE
    elif not (isinstance(target, dict | list | tuple) and name in CONTAINER_METHODS):
        return NOT_PURE
    if not all(is_known(a) for a in (*args, *kwargs.values())):
        return NOT_PURE
    try:
        result = getattr(target, name)(*args, **kwargs)
    except Exception:  # noqa: BLE001
        return unknown("a value this analysis cannot compute")
    if name == "keys":
        return Keys(result)
    return list(result) if name in ("values", "items") else result


def regex(name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """`re.<name>(pattern, text)`: Matched or None, when both are known strings and the
    pattern is one that cannot backtrack for long; else unknown."""
    pattern, text = (list(args) + [kwargs.get("pattern"), kwargs.get("string")])[:2]
    if (
        name not in REGEX_FUNCTIONS
        or len(args) > 2
        or (len(kwargs) - ("pattern" in kwargs) - ("string" in kwargs))
    ):
        return unknown(f"what re.{name}() returns")
    if not (isinstance(pattern, str) and isinstance(text, str)):
        return unknown(f"what re.{name}() returns")
    if (
        len(pattern) > MAX_PATTERN
        or len(text) > MAX_SUBJECT
        or sum(pattern.count(q) for q in "*+?{") > MAX_QUANTIFIERS
        or _QUANTIFIED_GROUP.search(pattern)
    ):
        return unknown(f"what re.{name}() returns (a pattern not matched here)")
    try:
        found = getattr(re, name)(pattern, text)
    except re.error:
        return unknown(f"what re.{name}() returns (the pattern does not compile)")
    return Matched() if found is not None else None


def from_keys(args: list[Any]) -> Any:
    """`dict.fromkeys(keys[, value])` on known keys."""
    if args and isinstance(args[0], list | tuple) and all(is_known(a) for a in args):
        try:
            return dict.fromkeys(*args)
        except TypeError:
            pass
    return unknown("what dict.fromkeys() returns")


def module_call(module: str, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """`module.name(*args, **kwargs)` for a pure function of another module or the builtins'
    `dict`, on known values; `typing.cast(type, value)` is the value; NOT_PURE for any other."""
    if (module, name) == ("typing", "cast") and len(args) == 2 and not kwargs:
        return args[1]  # (whatever the type it is cast to)
    if (module, name) == ("builtins", "dict") and (
        not args or (len(args) == 1 and type(args[0]) is dict)
    ):
        # (a dict of keyword arguments holds whatever values they have, known or not:
        # DeepSeek-V2's `topk_kwargs = dict(top_k=..., correction_bias=...)`)
        return {**(args[0] if args else {}), **kwargs}
    if not all(is_known(a) for a in (*args, *kwargs.values())):
        return NOT_PURE
    if (module, name) == ("builtins", "dict"):
        try:
            return dict(*args, **kwargs)
        except (TypeError, ValueError):
            return unknown("what dict() returns")
    pure = MODULE_FUNCTIONS.get((module, name))
    return pure(*args) if pure is not None and not kwargs else NOT_PURE


def glob_match(name: Any, pattern: Any) -> Any:
    if not (isinstance(name, str) and isinstance(pattern, str)):
        return unknown("what fnmatch() returns")
    if len(name) > MAX_GLOB or len(pattern) > MAX_GLOB:
        return unknown("what fnmatch() returns (a long name or pattern)")
    return fnmatch.fnmatchcase(name, pattern)


def json_loads(text: Any) -> Any:
    """`json.loads(text)` (orjson's too) of a JSON text given in the command: the value it
    holds; unknown for text that is not JSON (what the parser raises cites no line of
    SGLang's)."""
    if not isinstance(text, str | bytes):
        return unknown("what json.loads() returns")
    try:
        return json.loads(text)
    except ValueError:
        return unknown("the JSON text's value (it does not parse)")


def dotted_call(dotted: str, args: list[Any]) -> Any:
    """A pure function called through its module's name (`re.match(...)`,
    `orjson.loads(...)`, `dict.fromkeys(...)`) on known values; NOT_PURE for any other."""
    if dotted.startswith("re."):
        return regex(dotted.split(".")[-1], args, {})
    if dotted == "dict.fromkeys":
        return from_keys(args)
    module, _, name = dotted.rpartition(".")
    return module_call(module, name, args, {}) if module else NOT_PURE


def any_all(name: str, items: Any) -> Any:
    """`any(items)` / `all(items)` over items some of which are unknown (a generator's:
    kb.explain.derived.comprehension): decided by a known item when one decides it
    (`any(hasattr(config, a) for a in names)` is true when one key is present), else
    unknown."""
    if not isinstance(items, list | tuple | set | frozenset):
        return lift(any if name == "any" else all, items)
    truths = [truth(v) for v in items]
    decisive = name == "any"  # (True decides any(), False decides all())
    if decisive in truths:
        return decisive
    if all(isinstance(t, bool) for t in truths):
        return not decisive
    return Unknown(merge_needs(*items) or (f"what {name}() returns",))
