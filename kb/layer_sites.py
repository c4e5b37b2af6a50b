"""What a flag's value selects after ServerArgs, and what the selected classes check.

Past the server arguments SGLang builds the model: each layer asks the quantization config
class for its method (`ModelOptFp4Config.get_quant_method`: an `isinstance(layer, FusedMoE)`
branch returns `ModelOptNvFp4FusedMoEMethod(self)`), and the MoE layer's class is chosen by
`get_moe_impl_class` from the MoE flags (`if get_moe_a2a_backend().is_deepep(): return
DeepEPMoE`). The classes so selected raise and assert when the weights load (`__init__`,
`create_weights`, `process_weights_after_loading`) and on the first forward pass (`forward`,
`apply` and the methods of the class they call). This module reads those selections and
checks statically from a version's stored source, each check with the `if` tests around it
(an early `return` counts: what follows runs only when its test is false), the flags those
tests read named as options, and where it is.

For a value's page the tests of the page's flag are decided for the value
(kb.requirements.simplify): a check under `get_moe_a2a_backend().is_mori()` is not
deepep's, and `is_deepep()` is dropped from deepep's conditions as true.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from kb import quant_requirements as qr
from kb.explain.source_modules import (
    Module,
    import_names,
    module_path,
    package_of,
    raise_message,
)
from kb.pyast import args_attr, render_text
from kb.requirements import Subject, simplify

LOAD = "load"
FIRST_FORWARD = "first_forward"
STAGE_WORDS = {LOAD: "at load", FIRST_FORWARD: "at first forward"}
LOAD_METHODS = ("__init__", "create_weights", "process_weights_after_loading")
# The entry points of a forward pass into a selected class: a layer's `forward`, a quant
# method's `apply`, an attention backend's; the methods of the class they call follow.
FORWARD_METHODS = ("forward", "apply", "forward_extend", "forward_decode", "init_forward_metadata")
MAX_CALL_DEPTH = 3  # self.method() calls followed from an entry point
MOE_DIR = "python/sglang/srt/layers/moe/"
MOE_SELECTOR = "get_moe_impl_class"
QUANT_SELECTOR = "get_quant_method"
ARGS_DICTS = ("global_server_args_dict",)  # era 1's dict of server arguments
INSTANCE = ("self", "cls")  # a method's own object: its attributes are no flags


@dataclass(frozen=True)
class Flags:
    """The version's flags as conditions name them: dest -> option, dest -> choices."""

    option_of: Mapping[str, str]
    choices_of: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Check:
    stage: str  # LOAD or FIRST_FORWARD
    owner: str  # the class whose method holds it
    function: str  # that method
    via: tuple[str, ...]  # the methods called to reach it, from the entry point
    kind: str  # "raise", "assert" or "not_implemented"
    condition: str  # the tests that must hold for it to run, in words ("" always)
    requires: str  # an assert's test, in words (what must hold); "" for a raise
    message: str
    flags: tuple[str, ...]  # the options its condition reads
    path: str
    line: int
    end: int


@dataclass(frozen=True)
class Selection:
    selector: str  # "ModelOptFp4Config.get_quant_method"
    selected: str  # the class it returns
    layer: str  # the layer type it returns it for ("FusedMoE"), or ""
    when: str  # the other tests of the branch, in words
    path: str  # the `return`
    line: int
    checks: tuple[Check, ...]

    @property
    def words(self) -> str:
        """ "ModelOptFp4Config.get_quant_method -> ModelOptNvFp4FusedMoEMethod for FusedMoE
        layers" (and "when ..." for its other tests)."""
        text = f"{self.selector} -> {self.selected}"
        if self.layer:
            text += f" for {self.layer} layers"
        return text + (f" when {self.when}" if self.when else "")


# --- the statements of a body with the tests they run under --------------------------------

Cond = tuple[ast.expr, bool]  # a test that holds, and whether it is an `if`'s own (positive)


def _not(test: ast.expr) -> ast.expr:
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return test.operand
    return ast.UnaryOp(ast.Not(), test)


def _ends(body: list[ast.stmt]) -> bool:
    """Whether running `body` never reaches what follows it."""
    if not body:
        return False
    last = body[-1]
    if isinstance(last, ast.Return | ast.Raise):
        return True
    if isinstance(last, ast.Assert):
        return isinstance(last.test, ast.Constant) and not last.test.value
    if isinstance(last, ast.If):
        return _ends(last.body) and _ends(last.orelse)
    return False


def guarded(
    body: list[ast.stmt], conds: tuple[Cond, ...] = ()
) -> Iterator[tuple[ast.stmt, tuple[Cond, ...]]]:
    """Each simple statement of `body` with the tests that hold when it runs: the `if`s
    around it (an `else` under the test negated) and the earlier `if`s that return."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            yield from guarded(stmt.body, (*conds, (stmt.test, True)))
            yield from guarded(stmt.orelse, (*conds, (_not(stmt.test), False)))
            body_ends, else_ends = _ends(stmt.body), _ends(stmt.orelse)
            if body_ends and else_ends:
                return
            if body_ends:
                conds = (*conds, (_not(stmt.test), False))
            elif else_ends:
                conds = (*conds, (stmt.test, False))
        elif isinstance(stmt, ast.For | ast.While | ast.With | ast.AsyncWith | ast.AsyncFor):
            yield from guarded(stmt.body, conds)
            yield from guarded(getattr(stmt, "orelse", []), conds)
        elif isinstance(stmt, ast.Try):
            yield from guarded(stmt.body + stmt.orelse + stmt.finalbody, conds)
            for handler in stmt.handlers:
                if handler.type is not None:
                    caught = ast.Name(f"<{ast.unparse(handler.type)} raised>", ast.Load())
                    yield from guarded(handler.body, (*conds, (caught, False)))
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue  # defined here, run elsewhere
        else:
            yield stmt, conds
            if _ends([stmt]):
                return


# --- conditions in words --------------------------------------------------------------------


def _getter_dest(node: ast.AST, flags: Flags) -> str | None:
    """`moe_runner_backend` for `get_moe_runner_backend()` when that is a flag's dest."""
    if (
        isinstance(node, ast.Call)
        and not node.args
        and isinstance(node.func, ast.Name)
        and node.func.id.startswith("get_")
        and node.func.id[4:] in flags.option_of
    ):
        return node.func.id[4:]
    return None


def _args_dest(node: ast.AST, flags: Flags) -> str | None:
    """The dest of a server argument read: `server_args.x`, `get_global_server_args().x`,
    `self.server_args.x`, `global_server_args_dict["x"]` (not a class's own `self.x`)."""
    if isinstance(node, ast.Attribute):
        base = node.value
        if isinstance(base, ast.Name) and base.id in INSTANCE:
            return None
        dest = args_attr(node)
        return dest if dest in flags.option_of else None
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id in ARGS_DICTS
        and isinstance(node.slice, ast.Constant)
        and node.slice.value in flags.option_of
    ):
        return str(node.slice.value)
    return _getter_dest(node, flags)


def _spelled(flags: Flags, dest: str, method: str) -> str:
    """The choice an `is_<method>()` call names (`is_flashinfer_trtllm` -> flashinfer_trtllm)."""
    for choice in flags.choices_of.get(dest, ()):
        if str(choice).lower().replace("-", "_") == method:
            return str(choice)
    return method


class _InWords(ast.NodeTransformer):
    """Server arguments as their options, `get_x().is_v()` as `--x = v` (a Name holding the
    text: unparsed as is)."""

    def __init__(self, flags: Flags) -> None:
        self.flags = flags
        self.named: list[str] = []

    def _option(self, dest: str) -> str:
        option = self.flags.option_of[dest]
        if option not in self.named:
            self.named.append(option)
        return option

    def visit_Call(self, node: ast.Call) -> ast.expr:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr.startswith("is_") and not node.args:
            dest = _args_dest(func.value, self.flags)
            if dest is not None:
                value = _spelled(self.flags, dest, func.attr[3:])
                return ast.Name(f"{self._option(dest)} = {value}", ast.Load())
        dest = _getter_dest(node, self.flags)
        if dest is not None:
            return ast.Name(self._option(dest), ast.Load())
        return self.generic_visit(node)  # type: ignore[return-value]

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        dest = _args_dest(node, self.flags)
        if dest is not None:
            return ast.Name(self._option(dest), ast.Load())
        return self.generic_visit(node)  # type: ignore[return-value]

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        dest = _args_dest(node, self.flags)
        if dest is not None:
            return ast.Name(self._option(dest), ast.Load())
        return self.generic_visit(node)  # type: ignore[return-value]


def conjuncts(tests: list[ast.expr]) -> list[ast.expr]:
    """The tests with their `and`s split, each once (an early return and the `if` of a
    method it calls may test the same)."""
    out: list[ast.expr] = []
    seen: set[str] = set()
    for test in tests:
        parts = (
            test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
        )
        for part in parts:
            if ast.dump(part) not in seen:
                seen.add(ast.dump(part))
                out.append(part)
    return out


def in_words(tests: list[ast.expr], flags: Flags) -> tuple[str, tuple[str, ...]]:
    """The tests joined by "and", flags as options; and the options they read."""
    words = _InWords(flags)
    parts = []
    for test in conjuncts(tests):
        if (
            isinstance(test, ast.UnaryOp)
            and isinstance(test.op, ast.Not)
            and isinstance(test.operand, ast.Compare)
        ):
            test = simplify(test, None)  # `x is not None`, not `not x is None`
        node = words.visit(_copy(test))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = ast.unparse(node.operand)
            text = f"not ({inner})" if isinstance(node.operand, ast.BoolOp) else f"not {inner}"
        else:
            text = ast.unparse(node)
            if isinstance(node, ast.BoolOp):  # an `or`: one test among the `and`s
                text = f"({text})"
        parts.append(text)
    if len(parts) == 1 and parts[0].startswith("("):
        parts[0] = parts[0][1:-1]
    return " and ".join(parts), tuple(words.named)


def _copy(node: ast.expr) -> ast.expr:
    return copy.deepcopy(node)


class _AsArgs(ast.NodeTransformer):
    """`get_x()` and `global_server_args_dict["x"]` as `server_args.x`, for the flag x whose
    value is decided (kb.requirements reads `server_args.x`)."""

    def __init__(self, dest: str, flags: Flags) -> None:
        self.dest, self.flags = dest, flags

    def _args(self) -> ast.expr:
        return ast.Attribute(ast.Name("server_args", ast.Load()), self.dest, ast.Load())

    def visit_Call(self, node: ast.Call) -> ast.expr:
        if _getter_dest(node, self.flags) == self.dest:
            return self._args()
        return self.generic_visit(node)  # type: ignore[return-value]

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        if _args_dest(node, self.flags) == self.dest:
            return self._args()
        return self.generic_visit(node)  # type: ignore[return-value]

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        if isinstance(node.value, ast.Name) and node.value.id in INSTANCE:
            return node  # a class's own attribute, even if named like the flag
        return self.generic_visit(node)  # type: ignore[return-value]


@dataclass(frozen=True)
class Value:
    """The page's flag and value: the tests of that flag are decided for it."""

    dest: str
    value: str

    def subject(self, flags: Flags) -> Subject:
        return Subject(self.dest, self.value, frozenset(flags.choices_of.get(self.dest, ())))


def _type_checking(test: ast.expr) -> bool | None:
    """`TYPE_CHECKING` is false when the code runs (its branch is for type checkers)."""
    if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
        return False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _type_checking(test.operand)
        return None if inner is None else not inner
    return None


def decided(
    conds: tuple[Cond, ...], flags: Flags, value: Value | None
) -> tuple[list[ast.expr], bool] | None:
    """The tests left once the value decides its flag's (None: one is false, the code does
    not run with the value); and whether an `if`'s own test is made true by the value."""
    subject = value.subject(flags) if value is not None else None
    left: list[ast.expr] = []
    chosen = False
    for test, positive in conds:
        known = _type_checking(test)
        if known is not None:
            if not known:
                return None
            continue
        if value is None or subject is None:
            left.append(test)
            continue
        form = _AsArgs(value.dest, flags).visit(_copy(test))
        s = simplify(form, subject)
        plain = simplify(form, None)
        if isinstance(s, ast.Constant) and s.value is False:
            return None
        if isinstance(s, ast.Constant) and s.value is True:
            chosen = chosen or (positive and not isinstance(plain, ast.Constant))
            continue
        left.append(test if ast.dump(s) == ast.dump(plain) else s)
    return left, chosen


# --- the checks of a class ------------------------------------------------------------------


def _self_calls(stmt: ast.stmt) -> list[str]:
    return [
        n.func.attr
        for n in ast.walk(stmt)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == "self"
    ]


def _kind(node: ast.Raise | ast.Assert) -> str:
    if isinstance(node, ast.Assert):
        return "assert"
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return (
        "not_implemented"
        if exc is not None and ast.unparse(exc) == "NotImplementedError"
        else "raise"
    )


def _message(node: ast.Raise | ast.Assert) -> str:
    if isinstance(node, ast.Raise):
        return raise_message(node)
    return (render_text(node.msg) or "") if node.msg is not None else ""


def class_checks(
    modules: qr.Modules, ref: qr.ClassRef, flags: Flags, value: Value | None = None
) -> list[Check]:
    """The raises and asserts a class runs when the weights load and on the first forward
    pass, from its entry points (its own or inherited) and the `self.` methods they call."""
    reader = _ClassReader(modules, ref, flags, value)
    out: list[Check] = []
    for stage, entries in ((LOAD, LOAD_METHODS), (FIRST_FORWARD, FORWARD_METHODS)):
        for entry in entries:
            found = qr.method_of(modules, ref, entry)
            if found is not None:
                out.extend(reader.checks(found, stage, (), ()))
    return out


def constructor_checks(
    modules: qr.Modules,
    ref: qr.ClassRef,
    found: tuple[qr.ClassRef, ast.FunctionDef],
    flags: Flags,
) -> list[Check]:
    """The raises and asserts of a class's constructor `found` (its own or a base's) and of
    the `self.` methods it calls (a model class's, kb/model_checks.py)."""
    return list(_ClassReader(modules, ref, flags, None).checks(found, LOAD, (), ()))


def _reads_flag(node: ast.AST, flags: Flags) -> bool:
    return any(_args_dest(n, flags) is not None for n in ast.walk(node))


def flag_attributes(modules: qr.Modules, ref: qr.ClassRef, flags: Flags) -> dict[str, ast.expr]:
    """The class's attributes that stand for a flag's test: a property returning one
    (`return get_moe_runner_backend().is_flashinfer_cutlass()`), or a field `__init__`
    sets once, unconditionally, to one (`self.enable_trtllm = get_moe_runner_backend()
    .is_flashinfer_trtllm()`): conditions on them are conditions on the flag."""
    out: dict[str, ast.expr] = {}
    init = qr.method_of(modules, ref, "__init__")
    if init is not None:
        stores = [
            t.attr
            for n in ast.walk(init[1])
            if isinstance(n, ast.Assign | ast.AugAssign | ast.AnnAssign)
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Attribute)
            and isinstance(t.value, ast.Name)
            and t.value.id == "self"
        ]
        for stmt in init[1].body:  # set at the top of the body (whatever returned before)
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0]
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                    and stores.count(target.attr) == 1
                    and _reads_flag(stmt.value, flags)
                ):
                    out[target.attr] = stmt.value
    cls: qr.ClassRef | None = ref
    for _ in range(qr.MAX_HOPS):  # properties, the class's own first
        if cls is None:
            break
        for node in cls.node.body:
            if (
                isinstance(node, ast.FunctionDef)
                and node.name not in out
                and any(ast.unparse(d) == "property" for d in node.decorator_list)
            ):
                body = [
                    s
                    for s in node.body
                    if not isinstance(s, ast.Import | ast.ImportFrom)
                    and not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
                ]
                if (
                    len(body) == 1
                    and isinstance(body[0], ast.Return)
                    and body[0].value is not None
                    and _reads_flag(body[0].value, flags)
                ):
                    out[node.name] = body[0].value
        base = next((b for b in cls.node.bases if isinstance(b, ast.Name)), None)
        cls = qr.resolve_class(modules, cls.module, base.id) if base is not None else None
    return out


class _Substitute(ast.NodeTransformer):
    def __init__(self, attrs: Mapping[str, ast.expr]) -> None:
        self.attrs = attrs

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        if isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr in self.attrs:
            return _copy(self.attrs[node.attr])
        return self.generic_visit(node)  # type: ignore[return-value]


class _ClassReader:
    """The checks of one selected class, for one value of a flag (or none)."""

    def __init__(
        self, modules: qr.Modules, ref: qr.ClassRef, flags: Flags, value: Value | None
    ) -> None:
        self.modules, self.ref, self.flags, self.value = modules, ref, flags, value
        self.seen: set[tuple[str, int]] = set()
        self.attrs = flag_attributes(modules, ref, flags)

    def _tests(self, conds: tuple[Cond, ...]) -> tuple[Cond, ...]:
        if not self.attrs:
            return conds
        sub = _Substitute(self.attrs)
        return tuple((sub.visit(_copy(test)), positive) for test, positive in conds)

    def checks(
        self,
        found: tuple[qr.ClassRef, ast.FunctionDef],
        stage: str,
        via: tuple[str, ...],
        outer: tuple[Cond, ...],
    ) -> Iterator[Check]:
        owner, fn = found
        for stmt, conds in guarded(fn.body, outer):
            if isinstance(stmt, ast.Raise | ast.Assert) and not (
                isinstance(stmt, ast.Raise) and stmt.exc is None
            ):
                check = self._check(owner, fn, stmt, stage, via, conds)
                if check is not None:
                    yield check
            if len(via) < MAX_CALL_DEPTH:
                for name in _self_calls(stmt):
                    if name in via or name == fn.name:
                        continue
                    # the selected class's method, as it runs (an override wins)
                    callee = qr.method_of(self.modules, self.ref, name)
                    if callee is not None:
                        yield from self.checks(callee, stage, (*via, fn.name), conds)

    def _check(
        self,
        owner: qr.ClassRef,
        fn: ast.FunctionDef,
        stmt: ast.Raise | ast.Assert,
        stage: str,
        via: tuple[str, ...],
        conds: tuple[Cond, ...],
    ) -> Check | None:
        key = (owner.module.path, stmt.lineno)
        if key in self.seen:
            return None
        self.seen.add(key)
        fails = [c for c, _ in conds]
        requires = ""
        tested = conds
        if isinstance(stmt, ast.Assert):  # what makes it fail decides too
            failing = simplify(stmt.test, None, negate=True)
            if not (isinstance(failing, ast.Constant) and failing.value is True):
                tested = (*conds, (failing, False))
                fails.append(failing)
                requires = in_words([stmt.test], self.flags)[0]
        if not fails:
            # failing whenever it runs: a method not meant to be called (an abstract
            # `raise NotImplementedError`, a KV-cache method's `apply`)
            return None
        if decided(self._tests(tested), self.flags, self.value) is None:
            return None
        tests = decided(self._tests(conds), self.flags, self.value)
        assert tests is not None  # (fewer tests than the ones just decided)
        condition, named = in_words(tests[0], self.flags)
        return Check(
            stage,
            owner.node.name,
            fn.name,
            via,
            _kind(stmt),
            condition,
            requires,
            _message(stmt),
            named,
            owner.module.path,
            stmt.lineno,
            getattr(stmt, "end_lineno", None) or stmt.lineno,
        )


# --- what selects the classes ---------------------------------------------------------------


def _returned_class(
    modules: qr.Modules,
    mod: Module,
    fn: ast.FunctionDef,
    stmt: ast.stmt,
    bound: Mapping[str, qr.ClassRef],
) -> qr.ClassRef | None:
    """The class a `return Cls(...)` (or `return Cls`) builds: `Cls` bound to a parameter
    by the caller, imported in the function, or resolved in its module."""
    if not isinstance(stmt, ast.Return) or stmt.value is None:
        return None
    node = stmt.value.func if isinstance(stmt.value, ast.Call) else stmt.value
    if not isinstance(node, ast.Name):
        return None
    if node.id in bound:
        return bound[node.id]
    built = [  # `fp8_method = Fp8MoEMethod(self)` ... `return fp8_method`
        n.value.func
        for n in ast.walk(fn)
        if isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == node.id for t in n.targets)
        and isinstance(n.value, ast.Call)
        and isinstance(n.value.func, ast.Name)
    ]
    if len(built) == 1 and isinstance(built[0], ast.Name):
        node = built[0]
    for imp in ast.walk(fn):  # `from ...layer import FlashInferFP4MoE` in the branch
        if isinstance(imp, ast.ImportFrom):
            for name, (dotted, attr) in import_names(imp, package_of(mod.path)):
                if name == node.id and attr is not None:
                    for path in module_path(dotted):
                        source = modules(path)
                        if source is not None:
                            return qr.resolve_class(modules, source, attr)
    return qr.resolve_class(modules, mod, node.id)


def _layer_of(tests: list[ast.expr]) -> tuple[str, list[ast.expr]]:
    """The layer type an `isinstance(layer, X)` test names, and the other tests."""
    layer, rest, other_layers = "", [], []
    for t in conjuncts(tests):
        if _is_layer_test(t):
            assert isinstance(t, ast.Call)
            layer = layer or ast.unparse(t.args[1])
        elif isinstance(t, ast.UnaryOp) and _is_layer_test(t.operand):
            other_layers.append(t)  # `not isinstance(layer, LinearBase)`: an earlier branch
        else:
            rest.append(t)
    return layer, rest if layer else [*other_layers, *rest]


def _is_layer_test(t: ast.expr) -> bool:
    return (
        isinstance(t, ast.Call)
        and isinstance(t.func, ast.Name)
        and t.func.id == "isinstance"
        and len(t.args) == 2
        and isinstance(t.args[0], ast.Name)
        and t.args[0].id == "layer"
    )


def _returns(
    modules: qr.Modules,
    owner: qr.ClassRef,
    fn: ast.FunctionDef,
    bound: Mapping[str, qr.ClassRef],
    outer: tuple[Cond, ...] = (),
    depth: int = 0,
) -> Iterator[tuple[qr.ClassRef, tuple[Cond, ...], ast.stmt, str]]:
    """The classes `fn` returns, each with the tests of its branch; a `return
    self.helper(..., Linear=Cls)` is followed into the helper, its parameters bound."""
    for stmt, conds in guarded(fn.body, outer):
        found = _returned_class(modules, owner.module, fn, stmt, bound)
        if found is not None:
            yield found, conds, stmt, owner.module.path
            continue
        call = stmt.value if isinstance(stmt, ast.Return) else None
        if (
            depth < MAX_CALL_DEPTH
            and isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and isinstance(call.func.value, ast.Name)
            and call.func.value.id == "self"
        ):
            helper = qr.method_of(modules, owner, call.func.attr)
            if helper is None:
                continue
            binds = {}
            for kw in call.keywords:
                if kw.arg and isinstance(kw.value, ast.Name):
                    ref = bound.get(kw.value.id) or qr.resolve_class(
                        modules, owner.module, kw.value.id
                    )
                    if ref is not None:
                        binds[kw.arg] = ref
            yield from _returns(modules, helper[0], helper[1], binds, conds, depth + 1)


def _selection(
    modules: qr.Modules,
    selector: str,
    ref: qr.ClassRef,
    tests: list[ast.expr],
    stmt: ast.stmt,
    path: str,
    flags: Flags,
    value: Value | None,
) -> Selection:
    layer, rest = _layer_of(tests)
    when, _named = in_words(rest, flags)
    checks = tuple(class_checks(modules, ref, flags, value))
    return Selection(selector, ref.node.name, layer, when, path, stmt.lineno, checks)


def quant_selections(
    modules: qr.Modules, method: str, flags: Flags, dest: str = "quantization"
) -> list[Selection]:
    """What `--quantization method`'s config class returns per layer type, each method class
    with its checks."""
    config = qr.method_classes(modules).get(method)
    if config is None:
        return []
    found = qr.method_of(modules, config, QUANT_SELECTOR)
    if found is None:
        return []
    owner, fn = found
    selector = f"{config.node.name}.{QUANT_SELECTOR}"
    value = Value(dest, method)
    out: list[Selection] = []
    seen: set[tuple[str, str]] = set()
    for ref, conds, stmt, path in _returns(modules, owner, fn, {}):
        tests = decided(conds, flags, value)
        if tests is None:
            continue
        sel = _selection(modules, selector, ref, tests[0], stmt, path, flags, value)
        if (sel.selected, sel.layer) not in seen:
            seen.add((sel.selected, sel.layer))
            out.append(sel)
    return out


def moe_selector(modules: qr.Modules, paths: list[str]) -> tuple[Module, ast.FunctionDef] | None:
    """The version's `get_moe_impl_class` (under layers/moe/, ep_moe first)."""
    candidates = sorted(
        (p for p in paths if p.startswith(MOE_DIR) and p.endswith(".py")),
        key=lambda p: ("ep_moe" not in p, p),
    )
    for path in candidates:
        mod = modules(path)
        fn = mod.functions.get(MOE_SELECTOR) if mod is not None else None
        if isinstance(fn, ast.FunctionDef) and mod is not None:
            return mod, fn
    return None


def moe_selector_dests(modules: qr.Modules, paths: list[str], flags: Flags) -> frozenset[str]:
    """The flags (dests) whose values `get_moe_impl_class` tests."""
    found = moe_selector(modules, paths)
    if found is None:
        return frozenset()
    return frozenset(d for n in ast.walk(found[1]) if (d := _args_dest(n, flags)) is not None)


def moe_selections(
    modules: qr.Modules, paths: list[str], dest: str, value: str, flags: Flags
) -> list[Selection]:
    """The MoE layer classes `get_moe_impl_class` returns because of `--dest value` (a
    branch whose own test the value makes true), each with its checks."""
    found = moe_selector(modules, paths)
    if found is None:
        return []
    mod, fn = found
    if not any(
        _getter_dest(n, flags) == dest or _args_dest(n, flags) == dest for n in ast.walk(fn)
    ):
        return []
    chosen_value = Value(dest, value)
    out: list[Selection] = []
    seen: set[str] = set()
    for stmt, conds in guarded(fn.body):
        if not isinstance(stmt, ast.Return):
            continue
        ref = _returned_class(modules, mod, fn, stmt, {})
        tests = decided(conds, flags, chosen_value)
        if ref is None or tests is None or not tests[1] or ref.node.name in seen:
            continue
        seen.add(ref.node.name)
        out.append(
            _selection(modules, MOE_SELECTOR, ref, tests[0], stmt, mod.path, flags, chosen_value)
        )
    return out
