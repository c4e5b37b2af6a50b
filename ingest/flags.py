"""Extract the server flags defined in one server_args.py blob, for all three eras.

Era 1/2: `parser.add_argument("--x", type=..., default=ServerArgs.x, choices=..., help=...)`,
with module-level `*_CHOICES` constants that `add_*_choices()` hooks may extend.
Era 3: dataclass fields `x: A[T, Arg(help=..., choices=..., cli_name=..., aliases=[...])]`
or `x: A[T, "help"]`, registered by `add_cli_args_from_dataclass`, plus the remaining manual
`add_argument` calls. The rules for era-3 fields mirror SGLang's own arg_utils (Literal ->
choices, bool -> store_true, List[X] -> nargs "+", no default -> required).
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ingest import actions
from ingest.static_eval import CannotFold, External, Scope, fold, plain
from kb.pyast import (
    NOT_LITERAL,
    call_name,
    kwarg,
    literal,
    render_text,
    source,
)

ANNOTATED_NAMES = {"A", "Annotated", "typing.Annotated"}
ARG_META_KEYS = {
    "help",
    "choices",
    "aliases",
    "cli_name",
    "type_parser",
    "nargs",
    "required",
    "action",
    "action_kwargs",
    "const",
    "no_cli",
}
# A brace pair is in the name (`--x-{decode,prefill}`, two flags: kb.replacements.expand_braces).
# The value stays with the flag as `=value`, like replacement_in_message's: written so
# (`use --x=auto`), or after a space inside the quotes (`use '--attention-backend triton'`).
REPLACEMENT_RE = re.compile(
    r"(?:[Uu]se|replaced by|alias (?:for|of)|renamed to|in favou?r of)"
    r"\s+(?P<q>[`'\"])?(--[A-Za-z0-9](?:[\w-]|\{[\w,-]*\})*)"
    r"(?:=(?P<eq>[\w.-]*\w)|(?(q)\s+(?P<sp>[\w.-]*\w)(?=(?P=q))))?"
)
# A flag a deprecation message names, and what follows it (a value, `to '<value>'`).
MENTION_RE = re.compile(r"(?<![\w-])(--[a-z0-9][\w-]*[a-z0-9])")
SET_BEFORE_RE = re.compile(r"\bset\s+[`'\"]?$", re.I)
AND_BEFORE_RE = re.compile(r"\b(?:and|or)\s+[`'\"]?$")  # `set --a=x and --b=x`
VALUE_AFTER_RE = re.compile(r"^(?:=([\w.-]*\w)|[`'\"]?\s+to\s+([`'\"])([\w.-]+)\2)")
# An f-string help's `{expr}` that static reading cannot render, shown as such.
RUN_TIME_OPEN = "(computed at run time: "
SEPARATOR_RE = re.compile(r"^[\s#=\-*_~]*$")
EXTEND_RE = re.compile(r"\.(?:extend|append|add|update)\(|\+=")  # literal-led: fast
NAME_BEFORE_RE = re.compile(r"\b([A-Z_][A-Z0-9_]*)\s*$")
ADD_ARGUMENT_RE = re.compile(r"\.add_argument\(")


@dataclass
class ModuleInfo:
    """What the module defines at top level, used to resolve choices, defaults and help."""

    lists: dict[str, ast.expr] = field(default_factory=dict)  # NAME -> value expression
    strings: dict[str, str] = field(default_factory=dict)
    extended: set[str] = field(default_factory=set)  # constants that hooks extend
    field_defaults: dict[str, ast.expr | None] = field(default_factory=dict)  # ServerArgs fields
    imports: dict[str, str] = field(default_factory=dict)  # name -> module it came from
    docs: dict[str, str] = field(default_factory=dict)  # function or class -> its docstring
    scope: Scope = field(default_factory=Scope)  # for folding constant expressions


def module_info(tree: ast.Module, text: str, class_name: str = "ServerArgs") -> ModuleInfo:
    info = ModuleInfo(scope=Scope.of(tree.body))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if (doc := ast.get_docstring(node)) is not None:
                info.docs[node.name] = doc
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                info.lists[target.id] = node.value
                rendered = render_text(node.value)
                if isinstance(node.value, ast.Constant) and rendered is not None:
                    info.strings[target.id] = rendered
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            info.lists[node.target.id] = node.value
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                info.imports[alias.asname or alias.name] = node.module
        elif isinstance(node, ast.ClassDef) and node.name == class_name:
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    info.field_defaults[stmt.target.id] = _field_default(stmt.value)
    # `X.extend(...)`, `X.append(...)`, `X += ...` anywhere (typically in add_*_choices hooks).
    # A text scan: walking the whole tree for this would cost more than the rest together.
    for m in EXTEND_RE.finditer(text):
        name = NAME_BEFORE_RE.search(text, max(0, m.start() - 80), m.start())
        if name and name.group(1) in info.lists:
            info.extended.add(name.group(1))
    return info


def _field_default(value: ast.expr | None) -> ast.expr | None:
    """The default of a dataclass field; `field(default=...)`/`default_factory=list` unwrapped."""
    if isinstance(value, ast.Call) and call_name(value).split(".")[-1] == "field":
        if (d := kwarg(value, "default")) is not None:
            return d
        factory = kwarg(value, "default_factory")
        if isinstance(factory, ast.Name) and factory.id in ("list", "dict", "set"):
            return {"list": ast.List(elts=[]), "dict": ast.Dict(keys=[], values=[])}.get(
                factory.id, ast.List(elts=[])
            )
        if isinstance(factory, ast.Lambda):
            return factory.body
        return None
    return value


@dataclass
class Choices:
    values: list[Any] | None = None
    const: str | None = None
    extensible: bool = False
    dynamic: bool = False
    # Sub-expressions that need imported names, folded later against those modules:
    # [(source text, {name: [module, name there]})], e.g.
    # ("list(ReasoningParser.DetectorMap.keys())", {"ReasoningParser": ["sglang...", ...]}).
    external: list[tuple[str, dict[str, list[str]]]] = field(default_factory=list)
    # a part neither known here nor in another module (`extra_parsers()`): the values found
    # are not all of them
    unknown: bool = False


def resolve_choices(
    node: ast.expr | None, info: ModuleInfo, local: dict[str, ast.expr], depth: int = 0
) -> Choices:
    """Resolve a choices expression to values as far as static reading allows."""
    if node is None or depth > 8:
        return Choices(dynamic=node is not None, unknown=node is not None)
    value = literal(node)
    if value is not NOT_LITERAL and isinstance(value, (list, tuple, set, frozenset)):
        values = list(value)
        return Choices(sorted(values, key=str) if isinstance(value, (set, frozenset)) else values)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        out: list[Any] = []
        dynamic = unknown = False
        external: list[tuple[str, dict[str, list[str]]]] = []
        for elt in node.elts:
            v = literal(elt)
            if v is NOT_LITERAL and isinstance(elt, ast.Name) and elt.id in info.strings:
                v = info.strings[elt.id]
            if v is NOT_LITERAL:
                if isinstance(elt, ast.Starred):
                    sub = resolve_choices(elt.value, info, local, depth + 1)
                    out.extend(sub.values or [])
                    dynamic = dynamic or sub.dynamic
                    unknown = unknown or sub.unknown
                    external.extend(sub.external)
                    continue
                try:  # a constant (`[LORA_TARGET_ALL_MODULES]`), folded or resolved later
                    out.append(plain(fold(elt, _scope(info, local))))
                except External:
                    external.append((source(elt), _imports_of(elt, info, local)))
                except CannotFold:
                    dynamic = unknown = True
            else:
                out.append(v)
        return Choices(out, dynamic=dynamic or bool(external), external=external, unknown=unknown)
    if isinstance(node, ast.Name):
        target = local.get(node.id) if node.id in local else info.lists.get(node.id)
        if target is None:
            imports = _imports_of(node, info, local)
            return Choices(
                const=node.id,
                dynamic=True,
                external=[(node.id, imports)] if imports else [],
                unknown=not imports,
            )
        sub = resolve_choices(target, info, local if node.id in local else {}, depth + 1)
        extensible = node.id in info.extended or sub.extensible
        const = sub.const if node.id in local else sub.const or node.id
        # (a local variable is not a named constant worth showing)
        return Choices(sub.values, const, extensible, sub.dynamic, sub.external, sub.unknown)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = resolve_choices(node.left, info, local, depth + 1)
        right = resolve_choices(node.right, info, local, depth + 1)
        return Choices(
            (left.values or []) + (right.values or []),
            left.const or right.const,
            left.extensible or right.extensible,
            left.dynamic or right.dynamic,
            left.external + right.external,
            left.unknown or right.unknown,
        )
    if isinstance(node, ast.Call) and call_name(node) in ("list", "sorted", "tuple", "set"):
        if node.args:
            inner = node.args[0]
            if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute):
                if inner.func.attr == "keys" and isinstance(inner.func.value, ast.Name):
                    d = info.lists.get(inner.func.value.id)
                    if isinstance(d, ast.Dict):
                        keys = [literal(k) for k in d.keys if k is not None]
                        if all(k is not NOT_LITERAL for k in keys):
                            return Choices(keys, const=inner.func.value.id)
            is_class = isinstance(inner, ast.Name) and inner.id in info.scope.classes
            if not is_class and not isinstance(inner, (ast.ListComp, ast.GeneratorExp)):
                return resolve_choices(inner, info, local, depth + 1)
    # Anything else: fold it (comprehensions over an enum, class attributes, `list(Enum)`).
    try:
        value = plain(fold(node, _scope(info, local)))
    except External:
        return Choices(dynamic=True, external=[(source(node), _imports_of(node, info, local))])
    except CannotFold:
        return Choices(dynamic=True, unknown=True)
    if isinstance(value, list):
        return Choices(value)
    return Choices(dynamic=True, unknown=True)


def _scope(info: ModuleInfo, local: dict[str, ast.expr]) -> Scope:
    """The module's scope with a function's local assignments on top."""
    if not local:
        return info.scope
    scope = info.scope
    return Scope({**scope.names, **local}, scope.classes, scope.imports)


def _imports_of(
    node: ast.AST, info: ModuleInfo, local: dict[str, ast.expr]
) -> dict[str, list[str]]:
    """The imported names an expression uses: {local name: [module, name there]}."""
    out: dict[str, list[str]] = {}
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id not in local and sub.id in info.scope.imports:
            module, original = info.scope.imports[sub.id]
            out[sub.id] = [module, original]
    return out


@dataclass
class Extraction:
    flags: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    era: int = 1
    action_classes: dict[str, dict[str, Any]] = field(default_factory=dict)  # defined here


def extract_flags(tree: ast.Module, text: str, path: str) -> Extraction:
    info = module_info(tree, text)
    lines = text.splitlines()
    out = Extraction()
    server_args = next(
        (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs"), None
    )
    if server_args is not None:
        fields: dict[str, dict[str, Any]] = {}
        for stmt in server_args.body:
            if isinstance(stmt, ast.AnnAssign) and _is_annotated(stmt.annotation):
                flag = _field_flag(stmt, info, out, path)
                if flag and flag["dest"] in fields:
                    # A dataclass keeps the last annotation of a repeated field name.
                    out.warnings.append(
                        {"path": path, "line": flag["line"],
                         "what": f"field {flag['dest']} is declared again (first at line "
                         f"{fields[flag['dest']]['line']}); the last declaration wins"}
                    )  # fmt: skip
                    del fields[flag["dest"]]
                if flag:
                    fields[flag["dest"]] = flag
        out.flags.extend(fields.values())
        if out.flags:
            out.era = 3
            _assign_sections(out.flags, lines, server_args)
    manual: list[dict[str, Any]] = []
    call_lines = _line_numbers(text, ADD_ARGUMENT_RE)
    for func in _functions(tree):
        # Only functions that contain an add_argument call are read (text pre-check).
        lo, hi = func.lineno, func.end_lineno or func.lineno
        at = bisect_left(call_lines, lo)  # call_lines ascend
        if at == len(call_lines) or call_lines[at] > hi:
            continue
        statements = list(_statements(func.body))
        local = {
            stmt.targets[0].id: stmt.value
            for stmt in statements
            if isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        }
        for stmt in statements:
            call = stmt.value if isinstance(stmt, ast.Expr) else None
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "add_argument"
            ):
                flag = _argparse_flag(call, info, local, out, path)
                if flag:
                    flag["_func"] = func
                    manual.append(flag)
    for func in {id(f["_func"]): f["_func"] for f in manual}.values():
        _assign_sections([f for f in manual if f["_func"] is func], lines, func)
    for flag in manual:
        del flag["_func"]
    manual.sort(key=lambda f: f["line"])
    out.flags.extend(manual)
    # Era 2 is marked by module-level *_CHOICES constants (extended by add_*_choices hooks);
    # DeprecatedAction alone came and went during 2024 and says nothing about the shape.
    if out.era == 1 and (info.extended or any(n.endswith("_CHOICES") for n in info.lists)):
        out.era = 2
    _apply_cli_remaps(tree, out.flags)
    _dedupe(out)
    out.action_classes = actions.class_facts(tree, path)
    return out


def _functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Module-level functions and methods of top-level classes."""
    out: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append(node)
        elif isinstance(node, ast.ClassDef):
            out.extend(
                n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            )
    return out


def _apply_cli_remaps(tree: ast.Module, flags: list[dict[str, Any]]) -> None:
    """`from_cli_args` copies some argparse dests onto dataclass fields
    (`args.tp_size = args.tensor_parallel_size`): the field is the flag's real dest."""
    remap: dict[str, str] = {}
    for func in _functions(tree):
        if func.name != "from_cli_args":
            continue
        for stmt in ast.walk(func):
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Attribute)
                and isinstance(stmt.value, ast.Attribute)
                and isinstance(stmt.targets[0].value, ast.Name)
                and isinstance(stmt.value.value, ast.Name)
                and stmt.targets[0].value.id == stmt.value.value.id == "args"
            ):
                remap[stmt.value.attr] = stmt.targets[0].attr
    for flag in flags:
        flag["dest"] = remap.get(flag["dest"], flag["dest"])


def _dedupe(out: Extraction) -> None:
    """Two add_argument calls with one option: argparse raises at start-up; keep the first
    and say so in the report."""
    seen: dict[str, dict[str, Any]] = {}
    kept = []
    for flag in out.flags:
        if flag["name"] in seen:
            out.warnings.append(
                {
                    "path": flag["path"],
                    "line": flag["line"],
                    "what": f"{flag['name']} is defined twice (first at line "
                    f"{seen[flag['name']]['line']}); kept the first",
                }
            )
            continue
        seen[flag["name"]] = flag
        kept.append(flag)
    out.flags = kept


def _statements(body: list[ast.stmt]):  # type: ignore[no-untyped-def]
    """Every statement in a body, into if/for/with/try blocks but not into expressions
    (walking every expression node of a 2,000-line add_cli_args is what costs)."""
    for stmt in body:
        yield stmt
        for name in ("body", "orelse", "finalbody"):
            yield from _statements(getattr(stmt, name, []) or [])
        for handler in getattr(stmt, "handlers", []) or []:
            yield from _statements(handler.body)


def _line_numbers(text: str, pattern: re.Pattern[str]) -> list[int]:
    """1-based line numbers of the matches of `pattern`, counting newlines once."""
    numbers, line, pos = [], 1, 0
    for m in pattern.finditer(text):
        line += text.count("\n", pos, m.start())
        pos = m.start()
        numbers.append(line)
    return numbers


def _is_annotated(annotation: ast.expr) -> bool:
    return isinstance(annotation, ast.Subscript) and source(annotation.value) in ANNOTATED_NAMES


def _new_flag(path: str, node: ast.AST) -> dict[str, Any]:
    return {
        "name": "",
        "aliases": [],
        "dest": "",
        "argparse_dest": "",  # argparse's own dest; `dest` is the ServerArgs field it lands in
        "type": None,
        "default": None,
        "default_expr": None,
        "choices": None,
        "choices_const": None,
        "choices_extensible": False,
        "choices_dynamic": False,
        "choices_external": [],
        "help": "",
        "help_fill": [],  # placeholders of the help the assembler may fill (_help_filler)
        # literal keywords argparse does not take, for the action class (`new_flag="--x"`)
        "action_args": {},
        "hidden": False,
        "action": None,
        "nargs": None,
        "required": False,
        "const": None,
        "deprecated": False,
        "deprecated_message": None,
        "replacement": None,
        "negation": None,  # "--no-x" that argparse.BooleanOptionalAction adds
        "takes_value": True,  # settled by the assembler once the action class is known
        "deprecated_kind": None,  # soft | warns | raises
        "action_error": None,  # what an action that raises says
        "action_path": None,  # where the action class is (and its raise)
        "action_line": None,
        "action_module": None,  # module an imported action class comes from
        "explicit": [],  # keywords the add_argument call passed (they beat the class's)
        "choices_fallback": None,  # era 3: the Literal's values, if Arg(choices=) stays unknown
        "section": None,
        "path": path,
        "line": node.lineno,  # type: ignore[attr-defined]
        "end_line": node.end_lineno,  # type: ignore[attr-defined]
    }


def _set_default(flag: dict[str, Any], node: ast.expr | None, info: ModuleInfo) -> None:
    """Literal defaults are kept as values; `ServerArgs.x` is resolved to the field default."""
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in ("ServerArgs", "cls")
        and node.attr in info.field_defaults
    ):
        node = info.field_defaults[node.attr]
        if node is None:
            flag["default"] = None
            return
    value = literal(node)
    if value is NOT_LITERAL and node is not None:
        flag["default_expr"] = source(node)  # kept beside the folded value
        try:
            folded = plain(fold(node, info.scope))
        except CannotFold:
            return
        flag["default"] = folded
    elif value is not NOT_LITERAL:
        flag["default"] = list(value) if isinstance(value, (tuple, set)) else value


def _set_help(
    flag: dict[str, Any],
    node: ast.expr | None,
    info: ModuleInfo,
    out: Extraction,
    local: dict[str, ast.expr] | None = None,
) -> None:
    if node is None:
        return
    if isinstance(node, ast.Attribute) and source(node) == "argparse.SUPPRESS":
        flag["hidden"] = True
        return
    text = render_text(node, info.strings, _help_filler(flag, info, local or {}))
    if text is None:
        text = source(node)
        out.warnings.append(
            {"path": flag["path"], "line": node.lineno, "what": f"help is not text: {text[:80]}"}
        )
    flag["help"] = argparse_text(text)


def argparse_text(text: str) -> str:
    """The help as argparse prints it: it %-formats every help string, so `%%` shows as `%`
    (`token_idx %% cp_size`). A `%(name)s` of argparse's own is left as written."""
    return text.replace("%%", "%") if "%" in text else text


def _help_filler(
    flag: dict[str, Any], info: ModuleInfo, local: dict[str, ast.expr]
) -> Callable[[ast.FormattedValue], str]:
    """What an f-string help shows for `{expr}`, read statically: a name bound to a literal,
    a function's `__doc__` in this file, a list worked out like choices
    (`{tool_call_parser_choices}`). What needs another module is left to the assembler as
    `help_fill`: [placeholder, "doc", module, name] for an imported function's `__doc__`,
    [placeholder, "values", known values, [(expr, imports)]] for a list. Anything else is
    shown as a placeholder that says so, never as raw braces, which read as part of the
    text."""

    def fill(value: ast.FormattedValue) -> str:
        expr = target = value.value
        for _ in range(4):  # a name bound to a name ...
            if not isinstance(target, ast.Name):
                break
            if target.id not in local and target.id in info.extended:
                break  # hooks add to it: the list printed may be longer
            bound = local.get(target.id) if target.id in local else info.lists.get(target.id)
            if bound is None:
                break
            target = bound
        marker = f"{RUN_TIME_OPEN}{source(target)})"  # the expression rather than its name
        spec = render_text(value.format_spec) if value.format_spec is not None else ""
        if spec is None or "{" in spec:
            return marker
        if isinstance(expr, ast.Attribute) and expr.attr == "__doc__":
            name = expr.value.id if isinstance(expr.value, ast.Name) else ""
            if name in info.docs:
                return info.docs[name]
            if name in info.imports:
                flag["help_fill"].append([marker, "doc", info.imports[name], name])
            return marker
        found = literal(target)
        if found is not NOT_LITERAL:
            conversions: dict[int, Callable[[object], str]] = {
                ord("r"): repr,
                ord("s"): str,
                ord("a"): ascii,
            }
            convert = conversions.get(value.conversion)
            try:
                return format(convert(found) if convert else found, spec)
            except (TypeError, ValueError):
                return marker
        listed = resolve_choices(expr, info, local)
        if listed.unknown or listed.extensible or spec:
            return marker  # (a call adds to it, hooks do, or a format spec: not shown as is)
        if listed.external:
            flag["help_fill"].append([marker, "values", listed.values or [], listed.external])
        elif listed.values:
            return str(listed.values)
        return marker

    return fill


def _finish_deprecation(flag: dict[str, Any], new_flag: ast.expr | None) -> None:
    action = flag["action"] or ""
    help_text = flag["help"] or ""
    if (
        "Deprecated" in action
        or re.match(r"^\W*(deprecated|note:.*deprecated)", help_text, re.I)
        or (re.search(r"\bdeprecated\b", help_text, re.I) and flag["name"] in help_text)
    ):
        flag["deprecated"] = True
    if not flag["deprecated"]:
        return
    flag["deprecated_message"] = help_text or None
    replacement = literal(new_flag)
    if isinstance(replacement, str):
        flag["replacement"] = replacement
    elif m := REPLACEMENT_RE.search(help_text):
        if m.group(2) != flag["name"]:
            value = m.group("eq") or m.group("sp")
            flag["replacement"] = m.group(2) + (f"={value}" if value else "")


def replacement_in_message(
    message: str, own: set[str], choices_of: dict[str, list[Any] | None]
) -> str | None:
    """The replacement a deprecation message names in words REPLACEMENT_RE does not read:
    `Please set `--x` to 'v' instead` -> `--x=v` (what follows `to` is the value: `set --ep-size
    to the same value as --tp-size` names --ep-size), else the one flag of the version (keys of
    `choices_of`) a message saying `instead` names. Several: a brace pair (`--x-{a,b}`) when
    they differ in their last part only, else None. A value the flag cannot take is dropped."""
    named: list[tuple[str, str | None]] = []
    targets: list[tuple[str, str | None]] = []
    for m in MENTION_RE.finditer(message):
        name = m.group(1)
        if name in own or name not in choices_of:
            continue
        after = VALUE_AFTER_RE.match(message[m.end() :])
        value = (after.group(1) or after.group(3)) if after else None
        choices = choices_of[name]
        if value is not None and choices and value not in {str(c) for c in choices}:
            value = None
        before = message[: m.start()]
        is_target = SET_BEFORE_RE.search(before) or (targets and AND_BEFORE_RE.search(before))
        (targets if is_target else named).append((name, value))
    found = list(dict.fromkeys(targets or (named if re.search(r"\binstead\b", message) else [])))
    if not found or len({v for _n, v in found}) > 1:
        return None
    value = f"={found[0][1]}" if found[0][1] is not None else ""
    if len(found) == 1:
        return found[0][0] + value
    heads = {n.rpartition("-")[0] for n, _v in found}
    if len(heads) != 1:
        return None
    tails = ",".join(n.rpartition("-")[2] for n, _v in found)
    return f"{heads.pop()}-{{{tails}}}{value}"


def _argparse_flag(
    call: ast.Call,
    info: ModuleInfo,
    local: dict[str, ast.expr],
    out: Extraction,
    path: str,
) -> dict[str, Any] | None:
    options = [literal(a) for a in call.args]
    if not options or not all(isinstance(o, str) for o in options):
        out.warnings.append(
            {
                "path": path,
                "line": call.lineno,
                "what": f"add_argument names not literal: {source(call)[:80]}",
            }
        )
        return None
    if not options[0].startswith("-"):
        return None  # positional arguments are not server flags
    flag = _new_flag(path, call)
    longs = [o for o in options if o.startswith("--")] or options
    flag["name"] = longs[0]
    flag["aliases"] = [o for o in options if o != flag["name"]]
    dest = literal(kwarg(call, "dest"))
    flag["dest"] = dest if isinstance(dest, str) else flag["name"].lstrip("-").replace("-", "_")
    flag["argparse_dest"] = flag["dest"]
    flag["explicit"] = [kw.arg for kw in call.keywords if kw.arg]
    action = kwarg(call, "action")
    flag["action"] = (
        (literal(action) if isinstance(action, ast.Constant) else source(action))
        if action is not None
        else None
    )
    _note_action(flag, info, options)
    type_node = kwarg(call, "type")
    flag["type"] = source(type_node) if type_node is not None else None
    if flag["action"] in ("store_true", "store_false", "BooleanOptionalAction") or (
        flag["action"] and "StoreTrue" in flag["action"]
    ):
        flag["type"] = "bool"
    default = kwarg(call, "default")
    if default is None and flag["action"] in ("store_true", "store_false"):
        flag["default"] = flag["action"] == "store_false"
    else:
        _set_default(flag, default, info)
    choices = resolve_choices(kwarg(call, "choices"), info, local)
    _apply_choices(flag, choices, call, out)
    _set_help(flag, kwarg(call, "help"), info, out, local)
    nargs = literal(kwarg(call, "nargs"))
    flag["nargs"] = None if nargs is NOT_LITERAL or nargs is None else str(nargs)
    flag["required"] = literal(kwarg(call, "required")) is True
    const = kwarg(call, "const") or kwarg(call, "const_value")
    if const is not None:
        flag["const"] = _const(const, info, flag)
    _finish_deprecation(flag, kwarg(call, "new_flag"))
    for kw in call.keywords:
        _note_action_arg(flag, kw.arg, kw.value)
    return flag


# add_argument's own keywords; any other goes to the action class's __init__
ARGPARSE_KEYWORDS = {
    "action", "nargs", "const", "default", "type", "choices", "required", "help", "metavar",
    "dest", "version", "deprecated",
}  # fmt: skip


def _note_action_arg(flag: dict[str, Any], key: str | None, node: ast.expr) -> None:
    value = literal(node)
    if key and key not in ARGPARSE_KEYWORDS and isinstance(value, str | int | float | bool):
        flag["action_args"][key] = value


def _const(node: ast.expr, info: ModuleInfo, flag: dict[str, Any]) -> Any:
    """A const folded when known; its source text otherwise (an imported constant is
    folded by the assembler: `const_external`)."""
    value = literal(node)
    if value is not NOT_LITERAL:
        return value
    try:
        return plain(fold(node, info.scope))
    except External:
        flag["const_external"] = [source(node), _imports_of(node, info, {})]
    except CannotFold:
        pass
    return source(node)


def _note_action(flag: dict[str, Any], info: ModuleInfo, options: list[str]) -> None:
    """Where the action class lives, and the `--no-x` option BooleanOptionalAction adds."""
    action = flag["action"]
    if not action:
        return
    if action.endswith("BooleanOptionalAction"):
        # argparse adds "--no-" + option[2:] for every option starting with "--".
        longs = [o for o in options if o.startswith("--")]
        flag["negation"] = "--no-" + longs[0][2:] if longs else None
        return
    root = action.split(".")[0]
    if root in info.imports and root != "argparse":
        flag["action_module"] = info.imports[root]


def _apply_choices(flag: dict[str, Any], choices: Choices, node: ast.AST, out: Extraction) -> None:
    if choices.values is None and not choices.dynamic and choices.const is None:
        return
    flag["choices"] = choices.values if (choices.values or not choices.dynamic) else None
    flag["choices_const"] = choices.const
    flag["choices_extensible"] = choices.extensible
    flag["choices_dynamic"] = choices.dynamic
    flag["choices_external"] = [list(e) for e in choices.external]
    if choices.dynamic and not choices.values and not choices.external:
        out.warnings.append(
            {
                "path": flag["path"],
                "line": node.lineno,  # type: ignore[attr-defined]
                "what": f"choices of {flag['name']} are computed at run time"
                + (f" ({choices.const})" if choices.const else ""),
            }
        )


def _unwrap_optional(node: ast.expr) -> ast.expr:
    if isinstance(node, ast.Subscript) and source(node.value) in ("Optional", "typing.Optional"):
        return node.slice
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        for a, b in ((node.left, node.right), (node.right, node.left)):
            if isinstance(b, ast.Constant) and b.value is None:
                return a
    if isinstance(node, ast.Subscript) and source(node.value) in ("Union", "typing.Union"):
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        rest = [e for e in elts if not (isinstance(e, ast.Constant) and e.value is None)]
        if len(rest) == 1:
            return rest[0]
    return node


def _field_flag(
    stmt: ast.AnnAssign, info: ModuleInfo, out: Extraction, path: str
) -> dict[str, Any] | None:
    assert isinstance(stmt.annotation, ast.Subscript) and isinstance(stmt.target, ast.Name)
    parts = stmt.annotation.slice.elts if isinstance(stmt.annotation.slice, ast.Tuple) else []
    if len(parts) < 2:
        return None
    raw_type, meta_nodes = parts[0], parts[1:]
    meta: dict[str, ast.expr] = {}
    for m in meta_nodes:
        if isinstance(m, ast.Call) and call_name(m) in ("Arg", "arg_utils.Arg"):
            for kw in m.keywords:
                if kw.arg is None:
                    out.warnings.append(
                        {"path": path, "line": m.lineno, "what": "Arg(**...) not understood"}
                    )
                elif kw.arg not in ARG_META_KEYS:
                    out.warnings.append(
                        {
                            "path": path,
                            "line": kw.value.lineno,
                            "what": f"unknown Arg keyword {kw.arg}",
                        }
                    )
                meta[kw.arg or "**"] = kw.value
            break
        text = render_text(m, info.strings)
        if text is not None:
            meta["help"] = m
            break
    else:
        return None  # Annotated without Arg metadata: not registered on the CLI
    if literal(meta.get("no_cli")) is True:
        return None
    name = stmt.target.id
    flag = _new_flag(path, stmt)
    cli_name = literal(meta.get("cli_name"))
    flag["name"] = cli_name if isinstance(cli_name, str) else "--" + name.replace("_", "-")
    aliases = literal(meta.get("aliases"))
    flag["aliases"] = list(aliases) if isinstance(aliases, (list, tuple)) else []
    flag["dest"] = flag["argparse_dest"] = name  # arg_utils anchors dest to the field
    _set_help(flag, meta.get("help"), info, out)
    default_node = _field_default(stmt.value)
    has_default = stmt.value is not None
    if has_default:
        _set_default(flag, default_node, info)
        flag["explicit"].append("default")
    inner = _unwrap_optional(raw_type)
    type_parser = meta.get("type_parser")
    inner_src = source(inner)
    if "action" in meta:
        # arg_utils passes only action, help, dest, default and action_kwargs to argparse:
        # Arg's own choices/nargs/type_parser are not used with a custom action.
        flag["action"] = source(meta["action"])
        flag["type"] = "bool" if inner_src == "bool" else None
        _note_action(flag, info, [flag["name"], *flag["aliases"]])
        _merge_action_kwargs(flag, meta.get("action_kwargs"), info, out, stmt)
        _finish_deprecation(flag, None)
        return flag
    elif isinstance(inner, ast.Subscript) and source(inner.value) in ("Literal", "typing.Literal"):
        elts = inner.slice.elts if isinstance(inner.slice, ast.Tuple) else [inner.slice]
        values = [literal(e) for e in elts]
        literal_values = [v for v in values if v is not NOT_LITERAL]
        resolved = resolve_choices(meta["choices"], info, {}) if "choices" in meta else None
        if resolved is not None and (resolved.values or resolved.external):
            # `choices = arg_meta.choices or literal_vals`: Arg's choices win over the Literal.
            _apply_choices(flag, resolved, stmt, out)
            flag["choices_fallback"] = literal_values
        else:  # no choices=, or one computed at run time: the Literal spells the values
            flag["choices"] = literal_values
            flag["choices_const"] = resolved.const if resolved else None
        # The type comes from the Literal's first value, whatever the choices; arg_utils
        # converts any type but str/int/float as str (`Literal[None, "a"]` takes "a").
        first = type(literal_values[0]).__name__ if literal_values else "str"
        scalar = first if first in ("str", "int", "float") else "str"
        flag["type"] = source(type_parser) if type_parser else scalar
    elif (
        isinstance(inner, ast.Subscript)
        and source(inner.value) in ("List", "list", "typing.List")
        and type_parser is None
    ):
        flag["type"] = source(inner.slice)
        nargs = literal(meta.get("nargs"))
        flag["nargs"] = nargs if isinstance(nargs, str) else "+"
    elif inner_src == "bool":
        flag["action"] = "store_true"
        flag["type"] = "bool"
    else:
        flag["type"] = (
            source(type_parser)
            if type_parser
            else (inner_src if inner_src in ("str", "int", "float") else "str")
        )
        nargs = literal(meta.get("nargs"))
        if nargs is not NOT_LITERAL and nargs is not None:
            flag["nargs"] = str(nargs)
        required = literal(meta.get("required"))
        flag["required"] = required is True or (required is NOT_LITERAL and not has_default)
    if "choices" in meta and flag["choices"] is None:
        _apply_choices(flag, resolve_choices(meta["choices"], info, {}), stmt, out)
    if "const" in meta:
        flag["const"] = _const(meta["const"], info, flag)
    _finish_deprecation(flag, None)
    return flag


def _merge_action_kwargs(
    flag: dict[str, Any], node: ast.expr | None, info: ModuleInfo, out: Extraction, at: ast.AST
) -> None:
    """Era 3 `Arg(action=..., action_kwargs={...})`: the dict goes to add_argument as is."""
    if node is None:
        return
    if not isinstance(node, ast.Dict):
        out.warnings.append(
            {"path": flag["path"], "line": node.lineno, "what": f"action_kwargs of "
             f"{flag['name']} not a dict literal: {source(node)[:60]}"}
        )  # fmt: skip
        return
    for k, v in zip(node.keys, node.values, strict=False):
        key = literal(k) if k is not None else None
        if not isinstance(key, str):
            continue
        flag["explicit"].append(key)
        _note_action_arg(flag, key, v)
        if key == "nargs":
            value = literal(v)
            flag["nargs"] = None if value is NOT_LITERAL or value is None else str(value)
        elif key == "type":
            flag["type"] = source(v)
        elif key == "choices":
            _apply_choices(flag, resolve_choices(v, info, {}), at, out)
        elif key == "default":
            flag["default"], flag["default_expr"] = None, None
            _set_default(flag, v, info)
        elif key in ("const", "const_value"):
            flag["const"] = _const(v, info, flag)
        elif key == "required":
            flag["required"] = literal(v) is True
        elif key == "dest" and isinstance(literal(v), str):
            flag["argparse_dest"] = flag["dest"] = literal(v)
        elif key == "new_flag":
            flag["replacement"] = literal(v) if isinstance(literal(v), str) else None


def _assign_sections(flags: list[dict[str, Any]], lines: list[str], scope: ast.AST) -> None:
    """Section = the nearest short comment header above a flag, at the flags' indentation.

    Headers stand after a blank line (or a separator rule, or the start of the body); other
    comments above a flag explain that flag and are not sections.
    """
    if not flags:
        return
    start = scope.lineno + 1 if isinstance(scope, (ast.ClassDef, ast.FunctionDef)) else 1
    first_flag_line = lines[flags[0]["line"] - 1] if flags[0]["line"] <= len(lines) else ""
    indent = len(first_flag_line) - len(first_flag_line.lstrip())
    end = scope.end_lineno or len(lines)  # type: ignore[attr-defined]
    headers: list[tuple[int, str]] = []
    prev_blank = True
    prev_line = ""
    for no in range(max(start - 1, 0), min(end, len(lines))):
        line = lines[no]
        stripped = line.strip()
        if not stripped:
            prev_blank = True
            continue
        is_comment = stripped.startswith("#") and len(line) - len(line.lstrip()) == indent
        if is_comment and SEPARATOR_RE.match(stripped):
            prev_blank = True
            continue
        if is_comment:
            text = stripped.lstrip("#").strip(" -=*:")
            # Right after the previous call's ")", only a short capitalized phrase that is
            # not a sentence reads as a header ("# Memory and scheduling").
            after_call = prev_line == ")" and re.match(r"^[A-Z][\w/ ()+-]*$", text) is not None
            if (
                (prev_blank or after_call)
                and 1 <= len(text.split()) <= 8
                and re.search(r"[A-Za-z]{2}", text)
            ):
                headers.append((no + 1, text))
        prev_blank = False
        prev_line = stripped
    i = 0
    current = None
    for flag in sorted(flags, key=lambda f: f["line"]):
        while i < len(headers) and headers[i][0] < flag["line"]:
            current = headers[i][1]
            i += 1
        flag["section"] = current


# --- ServerArgs's accessor methods ---------------------------------------------------------


def accessors(tree: ast.Module) -> dict[str, list[str]]:
    """name -> the fields it returns (accessor_dests) of each method of server_args.py's
    ServerArgs class that is a plain accessor."""
    cls = next(
        (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs"), None
    )
    out = {}
    for func in _methods(cls.body) if cls is not None else []:
        dests = accessor_dests(func)
        if dests:
            out[func.name] = dests
    return out


def _methods(body: list[ast.stmt]) -> Iterator[ast.FunctionDef]:
    """The defs of a class body, in order, also those inside its `if` and `try` blocks."""
    for st in body:
        if isinstance(st, ast.FunctionDef):
            yield st
        elif not isinstance(st, (ast.AsyncFunctionDef, ast.ClassDef)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                yield from _methods(getattr(st, field, []))


def accessor_dests(func: ast.FunctionDef) -> list[str]:
    """The fields a ServerArgs method returns, when it is a plain accessor: `self` its only
    parameter, no decorator, no call, no assignment to `self`, a `return`
    (`get_attention_backends()` returning `self.prefill_attention_backend or
    self.attention_backend`, ...); [] for any other method. Code calling
    `server_args.get_attention_backends()` reads those flags."""
    if func.decorator_list:
        return []
    a = func.args
    if [p.arg for p in a.args] != ["self"] or a.posonlyargs or a.kwonlyargs or a.vararg or a.kwarg:
        return []
    returns = False
    read: set[str] = set()
    for n in ast.walk(func):  # (stops at the first call: most methods make one early)
        if isinstance(n, (ast.Call, ast.Lambda, ast.Yield, ast.Await)):
            return []
        if isinstance(n, ast.Return) and n.value is not None:
            returns = True
        elif (
            isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
        ):
            if not isinstance(n.ctx, ast.Load):
                return []
            read.add(n.attr)
    return sorted(read) if returns else []
