"""Type functions of SGLang's flags that explain can apply to a value, read off their AST.

A flag's `type=` may be a function of SGLang's (`type=parse_size`). Explain does not run
SGLang's code, so such a value is normally "not checked". One shape is common and small
enough to recognise exactly: an integer with unit suffixes, where the function holds
- a regular expression literal matched against the whole value (`re.fullmatch`), with two
  groups: the number and the suffix;
- dict literals from suffix to an integer multiplier (`{"k": 10**3, "Ki": 2**10}`);
- optionally, a raise when a suffix of one dict comes with a decimal point
  (`if suffix in iec: if "." in number: raise ...`);
- optionally, a fallback to `int(value)`.
The suffixes are matched as the expression says (so `4K` is refused when only `k` is a
suffix, as argparse refuses it). A function of any other shape is left unrecognised.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from kb.explain.source_modules import Module, module_path

MAX_PATTERN = 200  # characters of a recognised expression
MAX_VALUE = 64  # characters of a value it is matched against (a count has fewer than 30)


class TypeFunctionError(ValueError):
    """The value is one the type function refuses (argparse: 'invalid value')."""


@dataclass(frozen=True)
class SuffixedInt:
    name: str  # the function's name, for the messages
    pattern: re.Pattern[str]
    multipliers: tuple[tuple[str, int], ...]
    whole_only: frozenset[str]  # suffixes that refuse a decimal number
    plain_int: bool  # a value without a suffix is read with int()

    def __call__(self, raw: str) -> int:
        value = raw.strip()
        if len(value) <= MAX_VALUE and (m := self.pattern.fullmatch(value)):
            number, suffix = m.group(1), m.group(2)
            factor = dict(self.multipliers).get(suffix)
            if factor is not None:
                if suffix in self.whole_only and "." in number:
                    raise TypeFunctionError(
                        f"takes no decimals with the suffix {suffix!r} ({self.name}), got {raw!r}"
                    )
                try:
                    return int(Decimal(number) * factor)
                except InvalidOperation:
                    pass
        if self.plain_int:
            try:
                return int(value)
            except ValueError:
                pass
        suffixes = ", ".join(s for s, _ in self.multipliers)
        raise TypeFunctionError(
            f"expects an integer, optionally with a suffix ({suffixes}; case-sensitive, "
            f"read by {self.name}), got {raw!r}"
        )


def suffixed_int(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> SuffixedInt | None:
    """The function as a SuffixedInt, or None when it has another shape."""
    params = [a.arg for a in fn.args.args]
    if not params:
        return None
    pattern: str | None = None
    tables: dict[str, dict[str, int]] = {}
    plain_int = False
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            callee = ast.unparse(node.func)
            first = node.args[0] if node.args else None
            if callee == "re.fullmatch" and isinstance(first, ast.Constant):
                if isinstance(first.value, str) and pattern is None:
                    pattern = first.value
            elif callee == "int" and len(node.args) == 1:
                plain_int = plain_int or isinstance(first, ast.Name)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            table = _multipliers(node.value)
            if table and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                tables[node.targets[0].id] = table
    if pattern is None or not tables or len(pattern) > MAX_PATTERN:
        return None
    try:
        compiled = re.compile(pattern)
    except re.error:
        return None
    if compiled.groups != 2:
        return None
    whole_only = frozenset(
        s for name in _tables_refusing_decimals(fn) for s in tables.get(name, {})
    )
    multipliers = tuple((s, f) for table in tables.values() for s, f in table.items())
    return SuffixedInt(fn.name, compiled, multipliers, whole_only, plain_int)


def _multipliers(node: ast.Dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for key, value in zip(node.keys, node.values, strict=True):
        factor = _int_of(value)
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)) or factor is None:
            return {}
        out[key.value] = factor
    return out


def _int_of(node: ast.expr) -> int | None:
    """An integer literal, or a product or small power of them (`10**3`, `1 << 10`)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.BinOp):
        left, right = _int_of(node.left), _int_of(node.right)
        if left is None or right is None or not (0 <= right <= 64):
            return None
        if isinstance(node.op, ast.Pow):
            return int(left**right)
        if isinstance(node.op, ast.Mult):
            return left * right
        if isinstance(node.op, ast.LShift):
            return left << right
    return None


def _tables_refusing_decimals(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names of the dicts `D` in `if x in D: ... if "." in y: raise ...`."""
    out: set[str] = set()
    for node in ast.walk(fn):
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)):
            continue
        test = node.test
        if not (len(test.ops) == 1 and isinstance(test.ops[0], ast.In)):
            continue
        table = test.comparators[0]
        if not isinstance(table, ast.Name):
            continue
        for inner in node.body:
            for sub in ast.walk(inner):
                if (
                    isinstance(sub, ast.If)
                    and isinstance(sub.test, ast.Compare)
                    and isinstance(sub.test.left, ast.Constant)
                    and sub.test.left.value == "."
                    and any(isinstance(s, ast.Raise) for s in sub.body)
                ):
                    out.add(table.id)
    return out


def find_function(
    modules: Callable[[str], Module | None], path: str, name: str
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function `name` as the module at `path` sees it: defined there, or imported
    (through a package's `from x import *` too), a few modules deep."""
    seen: set[str] = set()
    queue = [(modules(path), name)]
    while queue and len(seen) < 8:
        mod, wanted = queue.pop(0)
        if mod is None or mod.path in seen:
            continue
        seen.add(mod.path)
        if wanted in mod.functions:
            return mod.functions[wanted]
        targets = [mod.imports[wanted]] if wanted in mod.imports else []
        targets += [t for local, t in mod.imports.items() if local == "*"]
        for dotted, attr in targets:
            for candidate in module_path(dotted):
                queue.append((modules(candidate), wanted if attr in (None, "*") else attr))
    return None
