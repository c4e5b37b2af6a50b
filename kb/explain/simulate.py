"""Replay `ServerArgs.__post_init__` over a command's values and a deployment profile.

A small abstract interpreter over the AST of SGLang's own argument handling: statements run
in the order SGLang runs them; values are known (literals, flags, profile answers) or
`Unknown` (with the facts that would decide them); an `if` on a known value takes one
branch, on an unknown one runs both "tainted", so what they assign becomes unknown (or one of
a few known options) and what they raise is undecidable, naming the missing facts. Calls to
methods of the class, module functions and era 3's hook functions (`handle_x(self)` in
`arg_groups/*_hook.py`) are followed with the caller's conditions. Assignments to
`self.x` / `server_args.x` change the state, so later code sees the new value.

Nothing is eval'ed or imported: only the node types below are interpreted, every call goes
to a function whose AST we hold, the predicate table, or a small whitelist of pure builtins;
anything else is Unknown. Loops, call depth and total steps are bounded, so a hostile file
costs at most a bounded amount of work.
"""

from __future__ import annotations

import ast
import contextlib
import copy
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from types import NoneType
from typing import Any

from kb.explain import (
    call_memo,
    classes,
    compressed_tensors_types,
    exceptions,
    item_stores,
    messages,
    model_attrs,
    model_files,
    model_registry,
    module_state,
    parallel_state,
    pure_calls,
    tensors,
    unfollowed,
)
from kb.explain.abstract_values import (
    SELF,
    ClassRef,
    EnumMember,
    ExternalName,
    Func,
    Instance,
    Method,
    Obj,
    Registry,
    RunDict,
    Self,
    Sentinel,
    Super,
    Symbol,
    is_known,
    lift,
    likely_of,
    merge_needs,
    options_of,
    same_value,
    truth,
)
from kb.explain.frames import Ctx, Frame, Raised, closure_of, lambda_function, super_of
from kb.explain.known_names import (
    ENV_READERS,
    EXPRESSION_NAMES,
    MODEL_CONFIG_FACTORY,
    OTHER_BUILTINS,
    PATHLIB_PATH,
    PLATFORM_METHODS,
    PREDICATE_HOMES,
    TORCH_ATTRIBUTES,
    TORCH_PREDICATES,
)
from kb.explain.predicates import (
    ASSUMED,
    IMPORTABLE,
    MISSING,
    NO_LIKELY,
    PREDICATES,
    Profile,
    Unknown,
    answer_with_inputs,
    assumed,
    missing,
    run_assumptions,
    unknown,
)
from kb.explain.source_modules import (
    HF_CONFIG_LOADER,
    Module,
    class_defaults,
    computed_at_import,
    defines,
    env_fields,
    import_names,
    loads_hf_config,
    module_path,
    package_of,
    raise_message,
    registered,
)
from kb.pyast import NOT_LITERAL, fill_names, literal, render_text, strip_ansi
from kb.threeval import Refused, all_of, any_of, binary, compare, unary

# the objects whose attributes a run's assignments set in Simulator.derived: the key each
# attribute is kept under (a ModelConfig's by its name, the draft's while run as the model)
DERIVED_OWNERS = {
    "runner": "runner.{}",
    "draft_runner": "draft_runner.{}",
    "model_config": "{}",
    "draft_model_config": "{}",
}
MAX_STEPS = 20_000  # statements per run; SGLang's own argument handling takes < 2,000
MAX_DEPTH = 14  # nested calls
MAX_LOOP = 64  # iterations of one loop over a known sequence
MAX_TEXT = 160
# a sub-config's attributes transformers sets only from the JSON (PretrainedConfig has no
# default for them): absent when its dict lacks them
JSON_ONLY = frozenset({"quantization_config", "compression_config"})
# methods that change a list, dict or set in place (their result is None or unused)
_MUTATING_METHODS = {"append", "extend", "insert", "add", "update", "setdefault", "remove",
                     "discard", "clear"}  # fmt: skip
_LOG_METHODS = {"warning", "warn", "info", "debug", "error", "critical", "warning_once"}

# --------------------------------------------------------------------------------------
# What a run records
# --------------------------------------------------------------------------------------


@dataclass
class Change:
    field: str
    before: Any
    after: Any
    path: str
    line: int
    end_line: int
    conditions: tuple[str, ...]
    needs: tuple[str, ...] = ()  # non-empty: it happens only if these facts say so
    reads: frozenset[str] = frozenset()  # fields its conditions read
    # the profile's inputs its value and conditions rest on (predicates' marks: "<model>",
    # "<gpu>", "<assumed:KEY>"), through locals and fields set from them
    inputs: frozenset[str] = frozenset()

    @property
    def certain(self) -> bool:
        return not self.needs


@dataclass
class Check:
    kind: str  # raise | assert | warning | opaque (server args handed to code we do not hold)
    path: str
    line: int
    end_line: int
    message: str
    conditions: tuple[str, ...]
    outcome: str  # fired | passed | unknown
    needs: tuple[str, ...] = ()
    reads: frozenset[str] = frozenset()
    # the message as the source writes it (`{capability}`): what identifies the check
    # whatever values the run filled in
    template: str = ""
    reraised: tuple[str, int, int] | None = None  # (path, line, end) of a re-raise


@dataclass
class PredicateUse:
    name: str
    value: Any
    path: str | None
    line: int | None
    meaning: str


@dataclass
class Result:
    fields: dict[str, Any]
    changes: list[Change]
    checks: list[Check]
    predicates: dict[str, PredicateUse]
    assumptions: dict[str, str] = field(default_factory=dict)  # key -> in words
    steps: int = 0
    truncated: str | None = None  # why the run stopped early, if it did
    calls: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)  # order followed

    @property
    def errors(self) -> list[Check]:
        return [c for c in self.checks if c.outcome == "fired" and c.kind in ("raise", "assert")]


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _Budget(Exception):
    pass


class Budget:
    """Statements that runs may still take, shared by the runs of one search (the fixes of
    one explain). Counted, not timed: an answer must not depend on the machine's load."""

    def __init__(self, steps: int) -> None:
        self.left = steps

    @property
    def exhausted(self) -> bool:
        return self.left <= 0


@lru_cache(maxsize=50_000)
def source_of(node: ast.AST) -> str:
    return plain(ast.unparse(node))


def negated_source(test: ast.expr) -> str:
    """The condition under which `test` is false: `not (x)`, or `x` for `not x` (a reader
    trips on `not (not use_mla_backend())`; constraint sites say it so too)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return source_of(test.operand)
    return f"not ({source_of(test)})"


def plain(text: str) -> str:
    """A condition as a reader wants it: `self.` and `server_args.` dropped, one line."""
    text = " ".join(text.replace("self.", "").replace("server_args.", "").split())
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


# --------------------------------------------------------------------------------------
# The interpreter
# --------------------------------------------------------------------------------------


COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class Simulator:
    def __init__(
        self,
        modules: Callable[[str], Module | None],
        entry: Module,
        fields: dict[str, Any],
        profile: Profile | None = None,
        canon: Callable[[str], str] = lambda name: name,
        class_name: str = "ServerArgs",
        given: Iterable[str] = (),
        environ: dict[str, str] | None = None,
        env_defaults: dict[str, Any] | None = None,
        derive: Any = None,
        budget: Budget | None = None,
    ) -> None:
        given = set(given)
        # kb.explain.derived (ModelConfig's derived facts, comprehensions): it builds on this
        # module, so it is handed in rather than imported; without it those stay unknown
        self.derive = derive
        self.budget = budget
        self.limit = MAX_STEPS if budget is None else max(0, min(MAX_STEPS, budget.left))
        self.environ = dict(environ or {})  # variables the command sets (`X=1 python -m ...`)
        # defaults the knowledge base worked out that the code states in a way not evaluated
        # here (`os.getenv("X", envs.Y.default)`: EnvVar.fallback's default)
        self.env_defaults = dict(env_defaults or {})
        self.modules = modules
        self.entry = entry
        self.fields = dict(fields)
        self.profile = profile or Profile()
        self.canon = canon
        self.given = given
        self.cls = entry.classes.get(class_name)
        self.methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        if self.cls is not None:
            for node in self.cls.body:
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    self.methods[node.name] = node
            # A flag whose argparse default is computed (`default=ServerArgs.x`) starts
            # from the dataclass field's own literal default, as ServerArgs does.
            for raw, value in class_defaults(self.cls).items():
                name = canon(raw)
                if name not in self.fields or (
                    isinstance(self.fields[name], Unknown) and name not in given
                ):
                    self.fields[name] = copy.copy(value)  # the cache keeps the original
        self.result = Result(self.fields, [], [], {})
        self.steps = 0
        self.stack: list[str] = []
        self.reads: set[str] = set()  # field reads of the expression being evaluated
        self.field_marks: dict[str, frozenset[str]] = {}  # field -> the inputs it was set from
        self.arg_marks: frozenset[str] = frozenset()  # the inputs of a call's arguments
        self.written: set[str] = set()  # fields assigned since the innermost fork began
        self.modules_seen: dict[str, Module | None] = {}
        self.derived: dict[str, Any] = {}  # ModelConfig attribute -> its value (derived.py)
        # what `ModelConfig.from_server_args` is passed besides the server args, for the
        # model being run (the draft's: model_weights.as_model), else its defaults
        self.model_config_args: dict[str, Any] = {}
        self.module_values: dict[tuple[str, str], Any] = {}  # (path, name) -> value (lookup)
        # module globals the run's functions assigned (`global X; X = ...`), by (path, name):
        # what later code of the same run reads in place of the module's own value
        self.overlay: dict[tuple[str, str], Any] = {}
        self.overlay_marks: dict[tuple[str, str], frozenset[str]] = {}  # what each was set from
        self.class_cache: dict[tuple[str, ...], Any] = {}  # kb.explain.classes, per run
        self.skip_init: set[ClassRef] = set()  # classes built without their constructor
        self.catching: list[frozenset[str] | None] = []  # the run's `try`s (exceptions.py)
        self.parallel: dict[str, parallel_state.Answer] = {}  # getter -> size (a stage sets)
        self.models: model_registry.ModelRegistry | None = None  # the version's models
        # False: every class called is built without its constructor (explain's stages
        # build the objects they follow themselves: kb.explain.moe)
        self.construct = True
        self.construct_under: tuple[str, ...] = ()  # ... but these paths' classes are built
        self.built_under: list[Instance] | None = None  # (the objects built there, when kept)
        # each argument's inputs of the call being made (arguments), for its parameters
        self.each_marks: tuple[list[frozenset[str]], dict[str, frozenset[str]]] | None = None
        self.unknown_loop: Callable[[], None] | None = None  # a stage's, at a loop not read

    # --- entry ------------------------------------------------------------------------

    def run(self, methods: Iterable[str] = ("__post_init__", "check_server_args")) -> Result:
        """Run the methods SGLang runs on a new ServerArgs: the dataclass's __post_init__,
        then the launcher's `server_args.check_server_args()`."""
        found = [self.methods[m] for m in methods if m in self.methods]
        if not found:
            self.result.truncated = "no __post_init__ in the ServerArgs class"
            return self.result
        try:
            for node in found:
                self.call_function(Func(self.entry, node, SELF), [], {}, Ctx())
        except _Budget:
            self.result.truncated = f"budget exhausted after {self.limit:,} statements"
        except RecursionError:
            self.result.truncated = "the code nests too deeply to follow"
        if self.budget is not None:
            self.budget.left -= self.steps
        self.result.steps = self.steps
        self.result.fields = self.fields
        return self.result

    def run_after(self, fn: Func | Callable[[], Any]) -> bool:
        """Go on past ServerArgs with `fn` (a method of the ModelRunner that loads the model,
        or a function running such steps), on the state the run left. Only its checks are
        kept: what it assigns to the server args is not ServerArgs' effective configuration
        (module globals it sets are kept for the next stage). False when it could not be
        followed to its end (its checks are dropped then: a partial stage decides nothing)."""
        if not self.past_server_args:  # ModelConfig is built from the final server args
            self.derived = {}
        self.past_server_args = True
        checks, changes, fields = len(self.result.checks), len(self.result.changes), self.fields
        self.fields = dict(fields)
        steps = self.steps
        self.limit = steps + (
            MAX_STEPS if self.budget is None else max(0, min(MAX_STEPS, self.budget.left))
        )
        done = True
        try:
            if isinstance(fn, Func):
                self.call_function(fn, [], {}, Ctx())
            else:
                fn()
        except Raised:
            pass  # SGLang stops there: the checks so far are the stage's
        except (_Budget, RecursionError):
            done = False
            del self.result.checks[checks:]
        finally:
            if self.budget is not None:
                self.budget.left -= self.steps - steps
            self.fields = self.result.fields = fields
            del self.result.changes[changes:]
        return done

    # --- modules and names ------------------------------------------------------------

    def module(self, dotted: str) -> Module | None:
        if dotted not in self.modules_seen:
            found = None
            for path in module_path(dotted):
                found = self.modules(path)
                if found is not None:
                    break
            self.modules_seen[dotted] = found
        return self.modules_seen[dotted]

    def resolve_import(self, name: str, target: tuple[str, str | None]) -> Any:
        dotted, attr = target
        if attr is None:
            return Symbol(name)
        if (dotted, attr) == model_registry.REGISTRY and self.models is not None:
            return self.models
        found = self.exported(dotted, attr)
        if found is not None:
            return found
        mod = self.module(dotted)
        if mod is not None and isinstance(mod.assigns.get(attr), ast.Constant):
            return self.lookup(attr, Frame(mod, "<module>", {}))  # `MAMBA = "M"`
        if mod is not None and computed_at_import(mod, attr):
            return self.lookup(attr, Frame(mod, "<module>", {}))
        if mod is not None and (functions := registered(mod, attr)):
            return Registry(mod, attr, functions)
        if (
            mod is not None
            and attr not in mod.imports
            and isinstance(mod.assigns.get(attr), ast.Dict | ast.List | ast.Tuple | ast.Set)
        ):
            # a module-level table (`from ...quantization import QUANTIZATION_METHODS`): what
            # the module holds once imported (objects it builds, `envs = Envs()`, stay names)
            return self.lookup(attr, Frame(mod, "<module>", {}))
        return ExternalName(attr, dotted)

    def exported(self, dotted: str, attr: str, depth: int = 0) -> Func | ClassRef | None:
        """The function `from <dotted> import <attr>` gets: defined there, or re-exported
        through its own imports (`from .common import f`, `from pkg import *`) from a
        module held too; a few hops at most (import cycles end there)."""
        mod = self.module(dotted)
        if mod is None or depth > 4:
            return None
        if attr in mod.functions:
            return Func(mod, mod.functions[attr])
        if attr in mod.classes:
            return classes.class_ref(mod, attr)
        if attr in mod.imports:
            source, name = mod.imports[attr]
            return self.exported(source, name, depth + 1) if name is not None else None
        for source in mod.star_imports:
            found = self.exported(source, attr, depth + 1)
            if found is not None:
                return found
        return None

    def lookup(self, name: str, frame: Frame) -> Any:
        if name in frame.locals:
            self.reads |= frame.marks.get(name, frozenset())
            return frame.locals[name]
        mod = frame.module
        if (mod.path, name) in self.overlay:  # a global this run's code set
            self.reads |= self.overlay_marks.get((mod.path, name), frozenset())
            return self.overlay[mod.path, name]
        if name in mod.functions:
            return Func(mod, mod.functions[name])
        if name in mod.classes:
            return classes.class_ref(mod, name)
        if name in mod.imports:
            return self.resolve_import(name, mod.imports[name])
        for source in mod.star_imports:  # `from .entrypoint import *` (a package's)
            if (sub := self.module(source)) is not None and defines(sub, name):
                return self.lookup(name, Frame(sub, "<module>", {}))
        if name in mod.rebound:
            return unknown(f"{name} (a module global set at run time)")
        if name in mod.import_flags:  # (a try-import's flag: whether its packages import)
            return self.import_flag(mod, name)
        if name in mod.assigns:
            if name in PREDICATES and mod.path.startswith(PREDICATE_HOMES):
                # `is_hopper_with_cuda_12_3 = lru_cache(maxsize=1)(partial(...))`: a fact of
                # the profile, however utils builds it
                return ExternalName(name, mod.path.removeprefix("python/").removesuffix(".py"))
            if name in mod.appended:
                if functions := registered(mod, name):
                    return Registry(mod, name, functions)
                table = mod.assigns[name]
                if isinstance(table, ast.Dict) and not table.keys:
                    # `_PARSERS: dict = {}`, filled by decorators elsewhere when imported
                    return unknown(f"{name} (filled when the modules registering into it load)")
                self.registry(mod, name)
            value = mod.assigns[name]
            if name in module_state.mutations(mod):  # a table its module extends
                return copy.copy(module_state.value(self, mod, name))
            if isinstance(value, ast.Constant | ast.List | ast.Tuple | ast.Set | ast.Dict):
                if name not in mod.constants:
                    mod.constants[name] = self.eval(value, Frame(mod, "<module>", {}), Ctx())
                return copy.copy(mod.constants[name])  # callers must not share a mutable list
            if isinstance(value, ast.Call | ast.BoolOp | ast.UnaryOp | ast.Compare | ast.Name):
                # `_is_musa = is_musa()`: what the module computed when imported, which may
                # depend on the profile (so kept per run, not with the module)
                key = (mod.path, name)
                if key not in self.module_values:
                    self.module_values[key] = unknown(f"{name} (computed when imported)")
                    self.module_values[key] = self.eval(value, Frame(mod, "<module>", {}), Ctx())
                return self.module_values[key]
            return Symbol(name)
        if name in pure_calls.PURE_BUILTINS or name in OTHER_BUILTINS:
            return ExternalName(name, "builtins")
        if name == "True":
            return True
        return Symbol(name)

    def import_flag(self, mod: Module, name: str) -> Any:
        """A try-import's flag (source_modules.ImportFlag): whether its packages import,
        as the profile says of each (kb.explain.predicates' IMPORTABLE); computed once per
        run, as the module computed it when imported."""
        key = (mod.path, name)
        if key in self.module_values:
            return self.module_values[key]
        flag = mod.import_flags[name]
        where = ExternalName(IMPORTABLE, mod.path.removeprefix("python/").removesuffix(".py"))
        found = [self.predicate(IMPORTABLE, where, [p]) for p in flag.required]
        if flag.alternatives:  # (of the packages imported under an `if`, one is: the platform's)
            found.append(any_of(self.predicate(IMPORTABLE, where, [p]) for p in flag.alternatives))
        if all(f is True for f in found):
            value = self.eval(flag.imported, Frame(mod, "<module>", {}), Ctx())
        elif any(f is False for f in found):
            value = self.eval(flag.failed, Frame(mod, "<module>", {}), Ctx())
        else:
            packages = ", ".join((*flag.required, *flag.alternatives))
            value = unknown(f"{name} (whether {packages} imports)")
        self.module_values[key] = value
        return value

    def registry(self, mod: Module, name: str) -> None:
        """A registry's entries are those its source lists: code outside SGLang's tree may
        register more at run time, which is stated as an assumption."""
        key = f"registry:{mod.path}:{name}"
        where = mod.path.removeprefix("python/")
        self.result.assumptions[key] = (
            f"nothing is registered in {name} ({where}) beyond what its source lists"
        )
        self.reads.add(assumed(key))

    # --- statements -------------------------------------------------------------------

    def tick(self) -> None:
        self.steps += 1
        if self.steps > self.limit:
            raise _Budget

    def block(self, body: list[ast.stmt], frame: Frame, ctx: Ctx) -> None:
        for stmt in body:
            if frame.maybe_returned:
                # reached only if no return was: as undecided as the returns, and no likelier
                # than the path it is on (nor likely at all past a return that likely was)
                ctx = Ctx(
                    ctx.conds,
                    tuple(dict.fromkeys((*ctx.needs, *frame.maybe_returned))),
                    ctx.reads,
                    ctx.likely and not frame.likely_returned,
                )
            self.stmt(stmt, frame, ctx)

    def stmt(self, node: ast.stmt, frame: Frame, ctx: Ctx) -> None:
        self.tick()
        if isinstance(node, ast.Expr):
            self.eval(node.value, frame, ctx)
        elif isinstance(node, ast.Assign):
            value, marks = self.value_of(node.value, frame, ctx)
            for target in node.targets:
                self.assign(target, value, frame, ctx, node, marks)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                value, marks = self.value_of(node.value, frame, ctx)
                self.assign(node.target, value, frame, ctx, node, marks)
        elif isinstance(node, ast.AugAssign):
            current, marks = self.value_of(_as_load(node.target), frame, ctx)
            rhs, rhs_marks = self.value_of(node.value, frame, ctx)
            value = binary(node.op, current, rhs)
            self.assign(node.target, value, frame, ctx, node, marks | rhs_marks)
        elif isinstance(node, ast.If):
            self.if_(node, frame, ctx)
        elif isinstance(node, ast.Return):
            value = self.eval(node.value, frame, ctx) if node.value is not None else None
            if ctx.needs:
                frame.returns.append(Unknown(ctx.needs, options_of([value])))
                frame.maybe_returned = tuple(dict.fromkeys((*frame.maybe_returned, *ctx.needs)))
                frame.likely_returned = frame.likely_returned or ctx.likely
                frame.return_states.append((dict(self.fields), ctx.needs))
            else:
                raise _Return(value)
        elif isinstance(node, ast.Raise):
            if not exceptions.handled(self, exceptions.raised_name(node), ctx):
                self.check(
                    "raise", node, messages.raise_text(self, node, frame, ctx), ctx, fired=True
                )
        elif isinstance(node, ast.Assert):
            outcome, reads = self.test(node.test, frame, ctx)
            message = render_text(node.msg) or "" if node.msg is not None else ""
            text = negated_source(node.test)
            fails_likely = isinstance(outcome, Unknown) and outcome.likely is False
            inner = ctx.under(text, merge_needs(outcome), reads, fails_likely)
            if outcome is True:
                self.check("assert", node, message, inner, fired=False)
            elif not exceptions.handled(self, "AssertionError", inner):
                self.check("assert", node, message, inner, fired=True)
        elif isinstance(node, ast.For | ast.AsyncFor):
            self.for_(node, frame, ctx)
        elif isinstance(node, ast.While):
            test = truth(self.eval(node.test, frame, ctx))
            if test is not False:
                loop_ctx = ctx.under(source_of(node.test), ("how often a loop runs",), frozenset())
                self.fork(frame, loop_ctx.needs, None, (node.body, loop_ctx), ([], ctx))
            self.block(node.orelse, frame, ctx)
        elif isinstance(node, ast.Try):
            exceptions.run_try(self, node, frame, ctx)
        elif isinstance(node, ast.With | ast.AsyncWith):
            exceptions.run_with(self, node, frame, ctx)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for name, imported in import_names(node, package_of(frame.module.path)):
                frame.locals[name] = self.resolve_import(name, imported)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            frame.locals[node.name] = Func(frame.module, node, closure=closure_of(frame))
        elif isinstance(node, ast.Global):
            frame.globals.update(node.names)
        elif isinstance(node, ast.Break):
            raise _Break
        elif isinstance(node, ast.Continue):
            raise _Continue
        # pass, global, delete, class definitions, match: nothing to track

    def value_of(self, node: ast.expr, frame: Frame, ctx: Ctx) -> tuple[Any, frozenset[str]]:
        """An assigned value and the profile's inputs it was computed from."""
        outer, self.reads = self.reads, set()
        try:
            value = self.eval(node, frame, ctx)
            # (past ServerArgs the fields it read go with it too, as with a call's arguments)
            marks = frozenset(self.reads) if self.past_server_args else _marks(self.reads)
        finally:
            self.reads = outer | self.reads
        return value, marks

    def test(self, node: ast.expr, frame: Frame, ctx: Ctx) -> tuple[Any, frozenset[str]]:
        """The truth of a condition and the fields (and "<profile>") it read."""
        outer, self.reads = self.reads, set()
        try:
            outcome = truth(self.eval(node, frame, ctx))
            reads = frozenset(self.reads)
        finally:
            self.reads = outer | self.reads
        return outcome, reads

    def if_(self, node: ast.If, frame: Frame, ctx: Ctx) -> None:
        outcome, reads = self.test(node.test, frame, ctx)
        text, untrue = source_of(node.test), negated_source(node.test)
        if outcome is True:
            self.block(node.body, frame, ctx.under(text, (), reads))
            self.passed(node.orelse, ctx.under(untrue, (), reads))
        elif outcome is False:
            elif_chain = len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If)
            # an `elif` says its own condition; the failed ones before it are noise to a reader
            inner = Ctx(ctx.conds, ctx.needs, ctx.reads | reads, ctx.likely)
            if not elif_chain:
                inner = ctx.under(untrue, (), reads)
            self.block(node.orelse, frame, inner)
            self.passed(node.body, ctx.under(text, (), reads))
        else:
            needs = outcome.needs or ("a value this analysis cannot compute",)
            likely = outcome.likely
            returned = len(frame.returns)
            self.fork(
                frame,
                tuple(dict.fromkeys((*ctx.needs, *needs))),
                None if likely is NO_LIKELY else bool(likely),
                (node.body, ctx.under(text, needs, reads, likely is True)),
                (node.orelse, ctx.under(untrue, needs, reads, likely is False)),
            )
            if likely is NO_LIKELY and len(frame.returns) > returned:
                # past a return on a branch nothing makes likelier: what follows is not
                # likely either (a tensor's dtype tested in turn, the last test raising)
                frame.likely_returned = True

    def fork(
        self,
        frame: Frame,
        needs: tuple[str, ...],
        likely: bool | None,
        first: tuple[list[ast.stmt], Ctx],
        second: tuple[list[ast.stmt], Ctx],
    ) -> None:
        """Run two branches of an undecided choice from the same state, then merge: a value
        the branches agree on stays known, others become Unknown with both as options. The
        first branch is the one taken when the condition holds (`likely` True)."""
        fields, local, overlay = dict(self.fields), dict(frame.locals), dict(self.overlay)
        outer_written = self.written
        states = []
        touched: set[str] = set()
        for body, ctx in (first, second):
            self.fields, frame.locals = dict(fields), dict(local)
            self.overlay = dict(overlay)
            self.written = set()
            with contextlib.suppress(_Break, _Continue):
                self.block(body, frame, ctx)
            states.append((self.fields, frame.locals, self.overlay))
            touched |= self.written
        self.written = outer_written | touched
        pick = None if likely is None else (0 if likely else 1)
        (fa, la, oa), (fb, lb, ob) = states
        self.fields = self.merge(fa, fb, fields, needs, pick, given=True, keys=touched)
        frame.locals = self.merge(la, lb, local, needs, pick, given=False)
        if oa or ob:
            self.overlay = self.merge(oa, ob, overlay, needs, pick, given=False)

    def merge(
        self,
        a: dict[Any, Any],
        b: dict[Any, Any],
        before: dict[Any, Any],
        needs: tuple[str, ...],
        pick: int | None,
        given: bool,
        keys: set[str] | None = None,  # the only keys that may differ, when known
    ) -> dict[Any, Any]:
        out = dict(a)
        for key in keys if keys is not None else a.keys() | b.keys():
            va, vb = a.get(key, _ABSENT), b.get(key, _ABSENT)
            if va is vb or same_value(va, vb):
                continue
            if va is _ABSENT or vb is _ABSENT:
                out[key] = Unknown(needs)  # a local bound on one path only
                continue
            # the likely value: the branch the condition likely takes, else (for a flag
            # the command gave) the branch that left the command's value alone
            likely: Any = NO_LIKELY
            if pick is not None:
                likely = likely_of((va, vb)[pick])
            elif given and key in self.given and key in before:
                for v in (va, vb):
                    if same_value(v, before[key]) or v is before[key]:
                        likely = likely_of(v)
            out[key] = Unknown(
                tuple(dict.fromkeys((*needs, *merge_needs(va, vb)))), options_of([va, vb]), likely
            )
        return out

    def passed(self, body: list[ast.stmt], ctx: Ctx) -> None:
        """A branch not taken: the raises directly in it are checks that passed."""
        for stmt in body:
            if isinstance(stmt, ast.Raise):
                self.check("raise", stmt, raise_message(stmt), ctx, fired=False)

    def for_(self, node: ast.For | ast.AsyncFor, frame: Frame, ctx: Ctx) -> None:
        items = self.eval(node.iter, frame, ctx)
        if isinstance(items, dict):
            items = list(items)
        if isinstance(items, ClassRef):  # `for member in cls` in an Enum's _missing_
            items = classes.enum_members(self, items) or unknown("the items of a class")
        if isinstance(items, list | tuple | str | set | frozenset) and len(items) <= MAX_LOOP:
            try:
                for item in list(items):
                    self.assign(node.target, item, frame, ctx, node)
                    try:
                        self.block(node.body, frame, ctx)
                    except _Continue:
                        continue
            except _Break:
                return
            self.block(node.orelse, frame, ctx)
            return
        if self.unknown_loop is not None:  # (a stage that ends where what it reads is not known)
            self.unknown_loop()
        needs = merge_needs(items) or ("the items of a loop",)
        self.assign(node.target, Unknown(needs), frame, ctx, node)
        body_ctx = ctx.under(source_of(node.iter), needs, frozenset())
        self.fork(frame, body_ctx.needs, None, (node.body, body_ctx), ([], ctx))

    def loop_body(self, body: list[ast.stmt], frame: Frame, ctx: Ctx) -> None:
        with contextlib.suppress(_Break, _Continue):
            self.block(body, frame, ctx)

    def assign(
        self,
        target: ast.expr,
        value: Any,
        frame: Frame,
        ctx: Ctx,
        node: ast.AST,
        marks: frozenset[str] = frozenset(),
    ) -> None:
        # a value set on a path the profile chose (past ServerArgs, or the fields chose)
        marks = marks | (ctx.reads if self.past_server_args else _marks(ctx.reads))
        if isinstance(target, ast.Name):
            if target.id in frame.globals:
                self.overlay[frame.module.path, target.id] = value
                key = (frame.module.path, target.id)  # (both branches' when forked)
                self.overlay_marks[key] = self.overlay_marks.get(key, frozenset()) | marks
                return
            frame.locals[target.id] = value
            frame.marks[target.id] = marks
        elif isinstance(target, ast.Attribute):
            owner = self.eval(target.value, frame, ctx)
            if owner is SELF:
                self.set_field(target.attr, value, ctx, node, marks)
            elif isinstance(owner, Instance):
                classes.set_attr(owner, target.attr, value, ctx, marks)
            elif isinstance(owner, tensors.Tensor):
                tensors.set_attribute(owner, target.attr, value, ctx)
            elif isinstance(owner, Obj) and owner.kind in DERIVED_OWNERS:
                # the load stage's runner, or the model's ModelConfig whose constructor's
                # checks are run (kb.explain.derived, kb.explain.model_config_checks): what
                # it sets is what later reads of it see
                kept = DERIVED_OWNERS[owner.kind].format(target.attr)
                self.derived[kept] = (
                    Unknown(tuple(dict.fromkeys((*ctx.needs, *merge_needs(value)))))
                    if ctx.needs
                    else value
                )
        elif isinstance(target, ast.Tuple | ast.List):
            if isinstance(value, list | tuple) and len(value) == len(target.elts):
                for elt, v in zip(target.elts, value, strict=True):
                    self.assign(elt, v, frame, ctx, node, marks)
            else:
                for elt in target.elts:
                    self.assign(
                        elt,
                        Unknown(merge_needs(value) or ("an unpacked value",)),
                        frame,
                        ctx,
                        node,
                    )
        elif isinstance(target, ast.Starred):
            self.assign(target.value, Unknown(("an unpacked value",)), frame, ctx, node)
        elif isinstance(target, ast.Subscript):  # `tiers[key] = entry`
            item_stores.store_item(self, target, value, frame, ctx)

    def update_local(
        self, target: ast.expr, method: str, args: list[Any], frame: Frame, ctx: Ctx
    ) -> None:
        """A local container changed in place (an item stored, `.append(x)`): on a copy when
        it and the change are known (on an undecided path too: `fork` merges the paths),
        else the local becomes Unknown. A collection filled from data the run cannot read is
        unknown, not left empty."""
        if not isinstance(target, ast.Name) or target.id not in frame.locals:
            return
        container = frame.locals[target.id]
        if not isinstance(container, dict | list | set | Unknown):
            return  # an object's own method or item (`self.x[k] = v` is not tracked either)
        if method == "__setitem__" and isinstance(container, RunDict) and not ctx.needs:
            if is_known(args[0]):  # (config.json's: the dicts holding it see the change)
                container[args[0]] = args[1]
                return
        if method == "__setitem__" and isinstance(container, dict) and is_known(args[0]):
            # an item not known leaves the others known (`cfg["packed_modules_mapping"] = x`)
            frame.locals[target.id] = {**container, args[0]: args[1]}
            return
        if isinstance(container, dict | list | set) and all(map(is_known, args)):
            changed = copy.copy(container)
            with contextlib.suppress(Exception):
                getattr(changed, method)(*args)
                frame.locals[target.id] = changed
                return
        needs = merge_needs(container, *args) or ctx.needs or (f"what {target.id} holds",)
        frame.locals[target.id] = Unknown(tuple(dict.fromkeys((*ctx.needs, *needs))))

    def set_field(
        self, name: str, value: Any, ctx: Ctx, node: ast.AST, marks: frozenset[str] = frozenset()
    ) -> None:
        name = self.canon(name)
        before = self.fields.get(name, _ABSENT)
        # inside an undecided branch the value holds on that path; `fork` merges the paths
        self.fields[name] = value
        self.field_marks[name] = marks
        self.written.add(name)
        if before is _ABSENT and name in ("model_config",):
            return
        if not ctx.needs and same_value(before, value):
            return
        opaque = (Func, Method, Obj, Self, Instance)
        shown = value if not isinstance(value, opaque) else unknown("an object")
        self.result.changes.append(
            Change(
                name,
                None if before is _ABSENT else before,
                shown,
                self.path_of(node),
                getattr(node, "lineno", 0),
                getattr(node, "end_lineno", 0) or getattr(node, "lineno", 0),
                ctx.conds,
                ctx.needs,
                ctx.reads,
                marks,
            )
        )

    def check(self, kind: str, node: ast.AST, message: str, ctx: Ctx, fired: bool) -> None:
        outcome = (
            ("fired" if not ctx.needs else "likely" if ctx.likely else "unknown")
            if fired
            else "passed"
        )
        if outcome == "fired" and kind != "warning" and run_assumptions(ctx.reads):
            outcome = "assumed"  # an error only if what the run assumed holds
        self.result.checks.append(
            Check(
                kind,
                self.current_path,
                int(getattr(node, "lineno", 0) or 0),
                int(getattr(node, "end_lineno", 0) or getattr(node, "lineno", 0) or 0),
                message,
                ctx.conds,
                outcome,
                ctx.needs,
                ctx.reads,
                raise_message(node) if isinstance(node, ast.Raise) else message,
            )
        )
        if outcome == "fired" and kind != "warning" and self.past_server_args:
            raise Raised

    current_path = ""
    past_server_args = False  # in the load stage (run_after)
    default_dtype: Any = None  # torch's, while the loader builds the model (None: unknown)

    def path_of(self, _node: ast.AST) -> str:
        return self.current_path

    # --- calls ------------------------------------------------------------------------

    def call_function(
        self,
        fn: Func,
        args: list[Any],
        kwargs: dict[str, Any],
        ctx: Ctx,
        site: ast.AST | None = None,
    ) -> Any:
        if (kept := call_memo.key(fn, args, kwargs, ctx)) is not None:
            return call_memo.call(self, kept, lambda: self._run(fn, args, kwargs, ctx, site))
        return self._run(fn, args, kwargs, ctx, site)

    def _run(
        self, fn: Func, args: list[Any], kwargs: dict[str, Any], ctx: Ctx, site: ast.AST | None
    ) -> Any:
        owner = f"{fn.owner.name}." if fn.owner is not None else ""
        key = f"{fn.module.path}:{owner}{fn.node.name}"
        if key in self.stack or len(self.stack) >= MAX_DEPTH:
            unfollowed.handed(None, [fn.bound, *args, *kwargs.values()])
            return unknown(f"what {fn.node.name}() returns (recursion)")
        params = fn.node.args
        positional = [*params.posonlyargs, *params.args]
        frame = Frame(fn.module, fn.node.name, dict(fn.closure or {}), owner=fn.owner)
        arg_marks, self.arg_marks = self.arg_marks, frozenset()
        if isinstance(site, ast.Call):
            frame.site = (self.current_path, site)
            offset = 1 if fn.bound is not None else 0
            for i, a in enumerate(site.args):
                if isinstance(a, ast.Starred):
                    break
                if i + offset < len(positional):
                    frame.arg_nodes[positional[i + offset].arg] = a
            frame.arg_nodes.update((k.arg, k.value) for k in site.keywords if k.arg)
        values = ([fn.bound] if fn.bound is not None else []) + list(args)
        defaults = params.defaults
        first_default = len(positional) - len(defaults)
        for i, param in enumerate(positional):
            if i < len(values):
                frame.locals[param.arg] = values[i]
            elif param.arg in kwargs:
                frame.locals[param.arg] = kwargs.pop(param.arg)
            elif i >= first_default:
                frame.locals[param.arg] = self.eval(defaults[i - first_default], frame, Ctx())
            else:
                frame.locals[param.arg] = unknown(f"argument {param.arg} of {fn.node.name}()")
        for param, default in zip(params.kwonlyargs, params.kw_defaults, strict=True):
            if param.arg in kwargs:
                frame.locals[param.arg] = kwargs.pop(param.arg)
            elif default is not None:
                frame.locals[param.arg] = self.eval(default, frame, Ctx())
        if params.kwarg is not None:
            frame.locals[params.kwarg.arg] = dict(kwargs)
        if params.vararg is not None:
            frame.locals[params.vararg.arg] = tuple(values[len(positional) :])
        each, self.each_marks = self.each_marks, None
        if arg_marks and each is not None and self.past_server_args:
            # each parameter from its own argument's inputs (a layer's sizes do not rest
            # on what its quantization config assumed)
            offset = 1 if fn.bound is not None else 0
            names = [p.arg for p in positional[offset:]]
            frame.marks = {n: m for n, m in zip(names, each[0], strict=False) if m}
            frame.marks |= {n: m for n, m in each[1].items() if m and n in frame.locals}
            if params.kwarg is not None or params.vararg is not None:
                frame.marks |= dict.fromkeys(
                    [p.arg for p in (params.kwarg, params.vararg) if p], arg_marks
                )
        elif arg_marks:  # each parameter as if from all the arguments' inputs
            frame.marks = dict.fromkeys(frame.locals, arg_marks)
        self.stack.append(key)
        saved = self.current_path
        self.current_path = fn.module.path
        self.result.calls.append((fn.node.name, ctx.conds))
        # (the fields written in this call: all a return's state can differ in at its end)
        outer_written, self.written = self.written, set()
        try:
            self.block(fn.node.body, frame, ctx)
            value: Any = None
            certain = True
        except _Return as ret:
            value, certain = ret.value, True
        except (_Break, _Continue):
            value, certain = None, True
        finally:
            self.stack.pop()
            self.current_path = saved
            written, self.written = self.written, outer_written | self.written
        for state, needs in frame.return_states:  # the end is reached only if no return was
            self.fields = self.merge(
                self.fields, state, state, needs, None, given=False, keys=written
            )
        if frame.returns:
            merged = [*frame.returns, value] if certain else frame.returns
            return Unknown(merge_needs(*merged), options_of(merged))
        return value

    def call(self, node: ast.Call, frame: Frame, ctx: Ctx) -> Any:
        func = node.func
        # logger.warning(...) and friends: a warning site, nothing else
        if isinstance(func, ast.Attribute) and func.attr in _LOG_METHODS:
            base = func.value
            if isinstance(base, ast.Name) and base.id in ("logger", "logging", "log"):
                if func.attr in ("warning", "warn", "warning_once", "error", "critical"):
                    self.warning(node, frame, ctx)
                return None
        if isinstance(func, ast.Name) and func.id == "super" and not node.args:
            return super_of(frame)
        outer, self.reads = self.reads, set()
        try:
            callee = self.eval(func, frame, ctx)
        finally:
            picked, self.reads = self.reads, outer | self.reads
        if isinstance(func, ast.Subscript) and isinstance(callee, Func) and picked:
            # `REGISTRY[name](...)`: the function runs because of what chose `name`
            text = f"{plain(ast.unparse(func))} is {callee.node.name}()"
            ctx = ctx.under(text, (), frozenset(picked))
        outer, self.reads = self.reads, set()
        try:
            args, kwargs = self.arguments(node, frame, ctx)
            # (past ServerArgs the fields an argument read go with it too: what chose a
            # backend's name is what a fix changes)
            arg_marks = frozenset(self.reads) if self.past_server_args else _marks(self.reads)
        finally:
            self.reads = outer | self.reads
        if (
            isinstance(func, ast.Attribute)
            and func.attr in _MUTATING_METHODS
            and isinstance(func.value, ast.Name)
            and isinstance(frame.locals.get(func.value.id), dict | list | set | Unknown)
        ):
            changes = [unknown()] if args is None or kwargs else args
            self.update_local(func.value, func.attr, changes, frame, ctx)
            return None
        if args is None:
            return kwargs
        self.arg_marks = arg_marks
        try:
            return self.apply(callee, args, kwargs, ctx, func, node)
        finally:
            self.arg_marks = frozenset()

    def arguments(self, node: ast.Call, frame: Frame, ctx: Ctx) -> tuple[list[Any] | None, Any]:
        """A call's positional and keyword arguments; (None, Unknown) for a spread of an
        unknown sequence. Past ServerArgs each argument's inputs are kept apart
        (`self.each_marks`: positional list, keyword dict; None after a spread)."""
        args: list[Any] = []
        marks: list[frozenset[str]] = []
        spread_seen = False

        def value(expr: ast.expr) -> Any:
            outer, self.reads = self.reads, set()
            try:
                return self.eval(expr, frame, ctx)
            finally:
                marks.append(frozenset(self.reads))
                self.reads = outer | self.reads

        for a in node.args:
            if isinstance(a, ast.Starred):
                spread = value(a.value)
                spread_seen = True
                if isinstance(spread, list | tuple):
                    args.extend(spread)
                else:
                    return None, Unknown(merge_needs(spread) or ("call arguments",))
            else:
                args.append(value(a))
        positional = marks[:]
        kwargs: dict[str, Any] = {}
        for k in node.keywords:
            if k.arg is not None:
                kwargs[k.arg] = value(k.value)
                continue
            spread = value(k.value)  # `**options`: its items, when known
            spread_seen = True
            if not (isinstance(spread, dict) and all(isinstance(key, str) for key in spread)):
                return None, Unknown(merge_needs(spread) or ("call arguments",))
            kwargs.update(spread)
        named = dict(zip(kwargs, marks[len(positional) :], strict=False))
        self.each_marks = None if spread_seen else (positional, named)
        return args, kwargs

    def warning(self, node: ast.Call, frame: Frame, ctx: Ctx) -> None:
        """A logged warning. Logged by a helper of the same file whose message is its
        parameter (`print_deprecated_warning(message)`): the caller's site and text."""
        arg = node.args[0] if node.args else None
        read = {n.id for n in ast.walk(arg) if isinstance(n, ast.Name)} if arg else set()
        given: dict[str, str] = {}
        for name in read & frame.arg_nodes.keys():
            value = frame.locals.get(name)
            text = value if isinstance(value, str) else render_text(frame.arg_nodes[name])
            if text is not None:
                given[name] = text
        where: ast.AST = node
        if given and frame.site is not None and frame.site[0] == self.current_path:
            where = frame.site[1]
        if isinstance(arg, ast.Name) and arg.id in given:  # `logger.warning(message)`
            message: str | None = strip_ansi(given[arg.id])
        else:
            message = render_text(arg, fill=fill_names(given)) if arg is not None else ""
        self.check("warning", where, message or "", ctx, fired=True)

    def apply(
        self,
        callee: Any,
        args: list[Any],
        kwargs: dict[str, Any],
        ctx: Ctx,
        func: ast.expr,
        site: ast.AST | None = None,
    ) -> Any:
        if self.parallel and (size := self.parallel.get(parallel_state.getter_name(callee) or "")):
            self.reads |= size[1]
            return size[0]
        name = callee.node.name if isinstance(callee, Func) else getattr(callee, "name", None)
        if name in PREDICATES and (
            isinstance(callee, ExternalName)
            or (
                isinstance(callee, Func)
                and callee.bound is None
                and callee.module.path.startswith(PREDICATE_HOMES)
            )
        ):
            return self.predicate(str(name), callee, args, kwargs)
        if isinstance(callee, Func):
            if callee.bound is SELF and callee.node.name == "get_model_config":
                return Obj("model_config")
            if self.past_server_args and callee.node.name == "get_global_server_args":
                return SELF  # set by then: the server args the run ended with
            if loads_hf_config(callee.node):  # SGLang's get_config: the profile's config
                return model_files.loaded_config(self, callee.node, args, kwargs)
            return self.call_function(callee, args, kwargs, ctx, site)
        if isinstance(callee, ClassRef):
            if classes.is_parameter_class(self, callee):
                return tensors.parameter_of(args[0] if args else kwargs.get("data"))
            return classes.call_class(self, callee, args, kwargs, ctx, site)
        if isinstance(callee, Symbol) and callee.dotted in PLATFORM_METHODS:
            name = PLATFORM_METHODS[callee.dotted]
            return self.predicate(name, ExternalName(name, "sglang.srt.platforms"), args)
        if isinstance(callee, Symbol) and callee.dotted == ".".join(MODEL_CONFIG_FACTORY):
            if args[:1] == [SELF]:
                # the version's ServerArgs builds its ModelConfig itself (not through
                # get_model_config()): the same model, derived the same way
                return Obj("model_config")
        if any(a is SELF for a in (*args, *kwargs.values())):
            if not (isinstance(callee, ExternalName) and callee.module == "builtins"):
                # SGLang hands the server args to code we do not hold: it may change them
                text = f"passes the server args to {plain(ast.unparse(func))}(), not followed"
                self.check("opaque", func, text, ctx, fired=True)
                return unknown(f"what {plain(ast.unparse(func))}() does with the server args")
        unfollowed.handed(callee, [*args, *kwargs.values()])  # (what it may set on them)
        if isinstance(callee, ExternalName) and (callee.module, callee.name) == PATHLIB_PATH:
            return model_files.make_path(args)
        if isinstance(callee, ExternalName) and callee.module.startswith(model_files.HUB_MODULES):
            return model_files.hub_call(self, callee.name, args, kwargs, ctx)
        if callee == ExternalName("object", "builtins") and not args and site is not None:
            return Sentinel(self.current_path, getattr(site, "lineno", 0))  # `_UNSET = object()`
        dotted = (
            callee.dotted
            if isinstance(callee, Symbol)
            else f"{callee.module}.{callee.name}"
            if isinstance(callee, ExternalName)
            else ""
        )
        if (tensor := tensors.created(dotted, args, kwargs, self.default_dtype)) is not None:
            return tensor
        if (built := compressed_tensors_types.build(callee, args, kwargs)) is not None:
            return built
        if isinstance(callee, ExternalName):
            return self.builtin(callee, args, kwargs)
        if isinstance(callee, Method) and isinstance(callee.target, Instance):
            if callee.name == tensors.REGISTER:
                return tensors.register(callee.target, args, kwargs, ctx)
        if isinstance(callee, Method):
            return self.method(callee, args, kwargs)
        if isinstance(callee, Unknown):
            return Unknown(callee.needs)
        if isinstance(callee, Symbol):
            return self.symbol_call(callee.dotted, args)
        return unknown(f"what {plain(ast.unparse(func))}() returns")

    # --- environment variables: unset by default (an assumption shown to the reader) ----

    def env(self, name: Any, default: Any, kind: str | None = None) -> Any:
        """`kind`: the declared type (EnvFloat(-1) is a float whatever its default)."""
        if not isinstance(name, str):
            return unknown("an environment variable")
        if name in self.environ:
            raw = self.environ[name]
            self.result.assumptions[f"env:{name}"] = f"environment variable {name}={raw}"
            if isinstance(default, bool):
                return raw.strip().lower() in ("1", "true", "yes", "on")
            if kind == "float" or isinstance(default, float):
                try:
                    return float(raw)
                except ValueError:
                    return unknown(f"environment variable {name} as a number")
            if isinstance(default, int):
                try:
                    return int(raw)
                except ValueError:
                    return unknown(f"environment variable {name} as a number")
            return raw
        if self.profile.env != "assume-unset":
            return unknown(f"environment variable {name}")
        self.result.assumptions[f"env:{name}"] = f"environment variable {name} is not set"
        if isinstance(default, Unknown) and name in self.env_defaults:
            return self.env_defaults[name]
        return default

    def symbol_call(self, dotted: str, args: list[Any]) -> Any:
        if dotted.split(".")[-2:] == HF_CONFIG_LOADER:
            return Obj("hf_config")
        if dotted in TORCH_PREDICATES:
            name = TORCH_PREDICATES[dotted]
            return self.predicate(name, ExternalName(name, "torch"), args)
        if (found := model_files.path_call(self, dotted, args)) is not model_files.NOT_A_PATH:
            return found  # (os.path's probes and join, glob.glob)
        if (found := pure_calls.dotted_call(dotted, args)) is not pure_calls.NOT_PURE:
            return found
        if dotted in ("os.getenv", "os.environ.get"):
            return self.env(args[0] if args else None, args[1] if len(args) > 1 else None)
        parts = dotted.split(".")
        if len(parts) == 3 and parts[0] == "envs" and parts[2] in ("get", "is_set", "value"):
            if parts[2] == "is_set":
                return self.env(parts[1], False)
            return self.env(parts[1], self.env_default(parts[1]), self.env_kind(parts[1]))
        return unknown(f"what {dotted}() returns")

    def env_kind(self, name: str) -> str | None:
        """ "float" for a variable declared `EnvFloat(..)` in sglang.srt.environ."""
        mod = self.module("sglang.srt.environ")
        node = env_fields(mod).get(name) if mod is not None else None
        func = node.func if isinstance(node, ast.Call) else None
        return "float" if isinstance(func, ast.Name) and "Float" in func.id else None

    def env_default(self, name: str) -> Any:
        mod = self.module("sglang.srt.environ")
        node = env_fields(mod).get(name) if mod is not None else None
        if isinstance(node, ast.Call):
            arg = (
                node.args[0]
                if node.args
                else next((k.value for k in node.keywords if k.arg == "default"), None)
            )
            value = literal(arg) if arg is not None else None
            if value is not NOT_LITERAL:
                return value
        return unknown(f"the default of environment variable {name}")

    def predicate(
        self, name: str, callee: Func | ExternalName, args: list[Any], kwargs: Any = None
    ) -> Any:
        meaning = PREDICATES[name][1]
        if name in ENV_READERS:  # (`get_bool_env_var("X", default="true")`)
            default = args[1] if len(args) > 1 else (kwargs or {}).get("default", ENV_READERS[name])
            value = self.env(args[0] if args else None, default)
            if name == "get_bool_env_var" and isinstance(value, str):
                value = value.lower() in ("true", "1")
            return value
        value, used = answer_with_inputs(name, self.profile, args)
        for mark, words in used.items():
            if words is not None:
                self.result.assumptions[mark[len(ASSUMED) : -1]] = words
        if name not in self.result.predicates:
            path: str | None
            line: int | None
            if isinstance(callee, Func):
                path, line = callee.module.path, callee.node.lineno
            else:
                mod = self.module(callee.module)
                path = mod.path if mod else None
                line = mod.lines.get(name) if mod else None
            self.result.predicates[name] = PredicateUse(name, value, path, line, meaning)
        if not isinstance(value, Unknown):
            self.reads.update(used)
        return value

    def builtin(self, callee: ExternalName, args: list[Any], kwargs: dict[str, Any]) -> Any:
        name = callee.name
        if callee.module == "builtins":
            if name in ("getattr", "hasattr") and len(args) >= 2:
                obj, attr = args[0], args[1]
                if not isinstance(attr, str):
                    return unknown("an attribute name")
                value = self.attribute(obj, attr, allow_missing=True)
                if name == "hasattr":
                    return not missing(value) if not isinstance(value, Unknown) else value
                if missing(value):
                    return args[2] if len(args) > 2 else unknown(f"attribute {attr}")
                return value
            if name == "open":  # (a file of the model's the profile gives: model_files)
                return model_files.open_file(self, args)
            if name == "type" and len(args) == 1 and isinstance(args[0], Instance):
                return args[0].cls  # (its class's name: `type(module).__name__`)
            if name == "isinstance":
                if len(args) == 2 and isinstance(args[0], tensors.Tensor):
                    kinds = args[1] if isinstance(args[1], tuple) else (args[1],)
                    return tensors.isinstance_of(args[0], kinds)
                return classes.isinstance_call(self, args)
            fn = pure_calls.PURE_BUILTINS.get(name)
            if fn is not None and not kwargs:
                if name in ("any", "all") and len(args) == 1:
                    return pure_calls.any_all(name, args[0])
                if any(isinstance(a, Unknown) for a in args):
                    return lift(fn, *args)
                if all(is_known(a) for a in args):
                    try:
                        return fn(*args)
                    except Exception:  # noqa: BLE001
                        return unknown("a value this analysis cannot compute")
        found = pure_calls.module_call(callee.module, name, args, kwargs)
        return unknown(f"what {name}() returns") if found is pure_calls.NOT_PURE else found

    def method(self, m: Method, args: list[Any], kwargs: dict[str, Any]) -> Any:
        target = m.target
        if target == Obj("hf_config") and m.name == "get_text_config":
            return target
        if isinstance(target, tensors.Tensor):
            return tensors.method(target, m.name, args, kwargs)
        result = pure_calls.method(target, m.name, args, kwargs)
        if result is not pure_calls.NOT_PURE:
            return result
        if isinstance(target, model_files.LocalPath) and m.name in model_files.PROBES:
            return model_files.probe(self, target)
        if isinstance(target, model_files.HubClient):
            return model_files.hub_method(self, m.name, args)
        if isinstance(target, model_registry.ModelRegistry):
            return model_registry.call(self, target, m.name, args)
        if isinstance(target, Symbol) and target.dotted.startswith("envs."):
            var = target.dotted.split(".")[1]
            return unknown(f"environment variable {var}")
        return unknown(f"what .{m.name}() returns")

    # --- expressions ------------------------------------------------------------------

    def eval(self, node: ast.expr | None, frame: Frame, ctx: Ctx) -> Any:
        if node is None:
            return None
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.lookup(node.id, frame)
        if isinstance(node, ast.Attribute):
            return self.attribute(self.eval(node.value, frame, ctx), node.attr)
        if isinstance(node, ast.Call):
            return self.call(node, frame, ctx)
        if isinstance(node, ast.BoolOp):
            return self.boolop(node, frame, ctx)
        if isinstance(node, ast.UnaryOp):
            operand = self.eval(node.operand, frame, ctx)
            if isinstance(node.op, ast.Not | ast.USub):
                return unary(node.op, operand)
            return operand
        if isinstance(node, ast.Compare):
            return all_of(self.comparisons(node, frame, ctx))  # False once a link is
        if isinstance(node, ast.BinOp):
            lhs, rhs = self.eval(node.left, frame, ctx), self.eval(node.right, frame, ctx)
            if isinstance(lhs, str) and isinstance(node.op, ast.Mod):
                return unknown("a formatted string")
            return binary(node.op, lhs, rhs)
        if isinstance(node, ast.IfExp):
            t = truth(self.eval(node.test, frame, ctx))
            if t is True:
                return self.eval(node.body, frame, ctx)
            if t is False:
                return self.eval(node.orelse, frame, ctx)
            a, b = self.eval(node.body, frame, ctx), self.eval(node.orelse, frame, ctx)
            if same_value(a, b):
                return a
            return Unknown(tuple(dict.fromkeys((*t.needs, *merge_needs(a, b)))), options_of([a, b]))
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            items = []
            for e in node.elts:
                if not isinstance(e, ast.Starred):
                    items.append(self.eval(e, frame, ctx))
                    continue
                spread = self.eval(e.value, frame, ctx)  # `[*OTHER_ARCHS, "X"]`
                if not isinstance(spread, list | tuple):
                    return unknown("a starred list")
                items.extend(spread)
            if isinstance(node, ast.Tuple):
                return tuple(items)
            if isinstance(node, ast.Set):
                try:
                    return set(items)
                except TypeError:
                    return unknown("a set of unhashable values")
            return items
        if isinstance(node, ast.Dict):
            out: Any = {}
            for k, v in zip(node.keys, node.values, strict=True):
                if k is None:  # `{**other}` (of each dict an undecided one may be)
                    spread = self.eval(v, frame, ctx)
                    if not isinstance(spread, dict | Unknown):
                        return unknown("a dict")
                    out = lift(_spread, out, spread)
                    continue
                key = self.eval(k, frame, ctx)
                if not is_known(key) or isinstance(key, list | dict | set):
                    return unknown("a dict")
                item = self.eval(v, frame, ctx)
                if isinstance(out, dict):  # (this display's own dict)
                    out[key] = item
                else:
                    out = lift(lambda d, key=key, item=item: {**d, key: item}, out)
            return out
        if isinstance(node, ast.Subscript):
            base = self.eval(node.value, frame, ctx)
            if isinstance(node.slice, ast.Slice):  # `target[3:]` of a known text or list
                cut = node.slice
                bounds: list[Any] = [
                    b and self.eval(b, frame, ctx) for b in (cut.lower, cut.upper, cut.step)
                ]
                if isinstance(base, str | list | tuple) and all(
                    type(b) in (int, NoneType) for b in bounds
                ):
                    return base[slice(*bounds)]
                return unknown("a slice")
            index = self.eval(node.slice, frame, ctx)
            if isinstance(base, ClassRef) and classes.is_enum(self, base):
                return classes.enum_by_name(self, base, index)  # `cls[name.upper()]`
            if isinstance(base, Registry):
                if isinstance(index, str) and index in base.functions:
                    return Func(base.module, base.functions[index])
                return unknown(f"the function {base.table} registers for {_shown_key(index)}")
            return lift(lambda b, i: b[i], base, index)
        if isinstance(node, ast.JoinedStr):
            return messages.formatted(self, node, frame, ctx)
        if isinstance(node, ast.NamedExpr):
            value = self.eval(node.value, frame, ctx)
            frame.locals[node.target.id] = value
            return value
        if isinstance(node, ast.Lambda):
            return lambda_function(node, frame)
        if isinstance(node, COMPREHENSIONS) and self.derive:
            return self.derive.comprehension(self, node, frame, ctx)
        kind = EXPRESSION_NAMES.get(type(node).__name__, type(node).__name__)
        return unknown(f"{kind} (not interpreted)")

    def comparisons(self, node: ast.Compare, frame: Frame, ctx: Ctx) -> Iterator[Any]:
        left = self.eval(node.left, frame, ctx)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = self.eval(comparator, frame, ctx)
            yield truth(compare(op, left, right))
            left = right

    def boolop(self, node: ast.BoolOp, frame: Frame, ctx: Ctx) -> Any:
        """The operand deciding it (or the last), else Unknown; operands after the deciding
        one are not evaluated."""
        seen: list[Any] = []

        def truths() -> Iterator[Any]:
            for value_node in node.values:
                seen.append(self.eval(value_node, frame, ctx))
                yield truth(seen[-1])

        decided = (all_of if isinstance(node.op, ast.And) else any_of)(truths())
        if isinstance(decided, Unknown):
            and_ = isinstance(node.op, ast.And)
            return False if and_ and parallel_state.exclusive_stages(seen) else decided
        return seen[-1]

    def attribute(self, obj: Any, attr: str, allow_missing: bool = False) -> Any:
        if obj is SELF:
            name = self.canon(attr)
            self.reads.add(name)
            self.reads |= self.field_marks.get(name, frozenset())
            if name in self.fields:
                return self.fields[name]
            if attr in self.methods:
                return Func(self.entry, self.methods[attr], SELF)
            if attr == "model_config":
                return Obj("model_config")
            return MISSING if allow_missing else unknown(f"ServerArgs.{attr}")
        if isinstance(obj, Obj):
            return self.model_attr(obj, attr, allow_missing)
        if isinstance(obj, ClassRef):
            if (package_of(obj.path) + "." + obj.path.split("/")[-1][:-3], obj.name, attr) == (
                MODEL_CONFIG_FACTORY
            ):
                return Symbol(".".join(MODEL_CONFIG_FACTORY))
            return classes.class_attr(self, obj, attr, allow_missing)
        if isinstance(obj, Instance):
            return classes.instance_attr(self, obj, attr, allow_missing)
        if isinstance(obj, EnumMember):
            return classes.member_attr(self, obj, attr, allow_missing)
        if isinstance(obj, Super):
            return classes.super_attr(self, obj, attr)
        if isinstance(obj, Symbol):
            dotted = f"{obj.dotted}.{attr}"
            if dotted in TORCH_ATTRIBUTES:
                return self.predicate(dotted, ExternalName(dotted, "torch"), [])
            return Symbol(dotted)
        if isinstance(obj, ExternalName):
            if (found := compressed_tensors_types.class_attribute(obj, attr)) is not None:
                return found
            if (obj.module, obj.name, attr) == MODEL_CONFIG_FACTORY:
                return Symbol(".".join(MODEL_CONFIG_FACTORY))
            # `from sglang.srt.layers import deep_gemm_wrapper`: a module held here
            sub = self.module(f"{obj.module}.{obj.name}") if obj.module != "builtins" else None
            if sub is not None:
                return self.lookup(attr, Frame(sub, "<module>", {}))
            return Symbol(f"{obj.name}.{attr}")
        if isinstance(obj, Unknown):
            return Unknown(obj.needs)
        if isinstance(obj, tensors.Tensor):
            return tensors.attribute(obj, attr)
        if isinstance(obj, CT_VALUES):
            return compressed_tensors_types.attribute(obj, attr)
        if isinstance(obj, dict) and not hasattr(dict, attr):
            # a dict read by attribute is a config object built from it (an hf_config's
            # sub-config: InternVL's `config.llm_config.architectures`)
            if attr in obj:
                return obj[attr]
            # (what transformers sets only from the JSON: absent, as config.json's own)
            return MISSING if attr in JSON_ONLY else unknown(f"the config's {attr}")
        if isinstance(
            obj,
            str
            | dict
            | list
            | tuple
            | model_files.LocalPath
            | model_files.HubClient
            | model_registry.ModelRegistry,
        ):
            return Method(obj, attr)
        return unknown(f"attribute {attr}")

    def model_attr(self, obj: Obj, attr: str, allow_missing: bool) -> Any:
        return model_attrs.model_attr(self, obj, attr, allow_missing)


_ABSENT = object()
CT_VALUES = (
    compressed_tensors_types.EnumStr,
    compressed_tensors_types.Member,
    compressed_tensors_types.Args,
)


def _spread(into: dict[Any, Any], other: Any) -> dict[Any, Any]:
    if not isinstance(other, dict):
        raise Refused("a dict spread of a value that is no dict")
    return {**into, **other}


def _shown_key(key: Any) -> str:
    return repr(key) if is_known(key) else "a value not known here"


def _marks(reads: Iterable[str]) -> frozenset[str]:
    """The profile's inputs among what an expression read (fields read are not)."""
    return frozenset(r for r in reads if r.startswith("<"))


def _as_load(target: ast.expr) -> ast.expr:
    return target
