"""Where a simulation run is (kb.explain.simulate): the conditions a statement runs under
(`Ctx`) and a function call's frame (`Frame`). Apart from the interpreter so that the modules
it hands work to (kb.explain.classes) can build frames without importing it."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from kb.explain.abstract_values import ClassRef, Func, Super
from kb.explain.source_modules import Module
from kb.threeval import unknown


@dataclass(frozen=True)
class Ctx:
    conds: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    reads: frozenset[str] = frozenset()
    likely: bool = True  # every unknown condition so far has a `likely` value choosing this path

    def under(
        self, text: str, needs: tuple[str, ...], reads: frozenset[str], likely: bool = True
    ) -> Ctx:
        return Ctx(
            (*self.conds, text),
            tuple(dict.fromkeys((*self.needs, *needs))) if needs else self.needs,
            self.reads | reads if reads else self.reads,
            self.likely and likely,
        )


@dataclass
class Frame:
    module: Module
    name: str
    locals: dict[str, Any]
    maybe_returned: tuple[str, ...] = ()  # needs of a return that may have happened
    likely_returned: bool = False  # one of those returns is on the likely path
    returns: list[Any] = field(default_factory=list)
    # the state at each return that may have happened: merged into the state at the end
    return_states: list[tuple[dict[str, Any], tuple[str, ...]]] = field(default_factory=list)
    site: tuple[str, ast.AST] | None = None  # the call that entered it: (path, node)
    arg_nodes: dict[str, ast.expr] = field(default_factory=dict)  # parameter -> its argument
    marks: dict[str, frozenset[str]] = field(default_factory=dict)  # local -> its inputs
    owner: ClassRef | None = None  # the class of a method (for super())
    globals: set[str] = field(default_factory=set)  # names its `global` statements declare


class Raised(Exception):
    """Past ServerArgs, a raise that certainly fires ends SGLang's start: nothing after it
    runs (the simulator raises this to leave the stage)."""


def lambda_function(node: ast.Lambda, frame: Frame) -> Func:
    """`lambda x, m: (x + m - 1) // m * m` as a function of the frame's module (a closure
    over the enclosing function's locals)."""
    body: list[ast.stmt] = [ast.Return(value=node.body)]
    fn = ast.FunctionDef(name="<lambda>", args=node.args, body=body, decorator_list=[])
    return Func(
        frame.module,
        ast.fix_missing_locations(ast.copy_location(fn, node)),
        closure=closure_of(frame),
    )


def closure_of(frame: Frame) -> dict[str, Any] | None:
    """What a function defined in the frame reads of it: its locals (none at module level,
    where names are the module's globals)."""
    return frame.locals if frame.name != "<module>" else None


def super_of(frame: Frame) -> Any:
    """`super()` in a method: the class defining it and the method's first argument."""
    params = list(frame.locals.values())
    if frame.owner is None or not params:
        return unknown("super() outside a method")
    return Super(frame.owner, params[0])
