"""Other modules of one version, read as folding scopes: how a choices expression or an
action class imported into server_args.py is resolved against the module it comes from.

Only a module's top-level constants, classes and imports are parsed (a 4,000-line utils
module costs a fraction of a full parse), each blob once per process. `from .common import *`
and `from x import NAME` re-exports are followed, a few levels deep.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable
from typing import Any

from ingest.static_eval import CannotFold, External, Scope, fold
from kb.pyast import PARSE_FAILURES

MAX_HOPS = 4
TOP_LEVEL_RE = re.compile(r"^(?:[A-Z_][A-Za-z0-9_]*\s*[:=]|class\s|from\s|import\s)")


def module_path_candidates(module: str) -> list[str]:
    base = "python/" + module.replace(".", "/")
    return [base + ".py", base + "/__init__.py"]


def _top_level_blocks(text: str) -> str:
    """Module-level constants, classes and imports, as parseable source (a statement runs
    until the next line that starts at column 0 and is not a closer). Other lines are
    blanked, not dropped, so line numbers stay those of the file."""
    out: list[str] = []
    keep = False
    for line in text.splitlines():
        if line and not line[0].isspace() and line[0] not in ")]}#":
            keep = TOP_LEVEL_RE.match(line) is not None
        out.append(line if keep else "")
    return "\n".join(out) + "\n"


# 32: a version's folds revisit a few modules; 256 held ~11 MiB of ASTs for no speed.
@functools.lru_cache(maxsize=32)
def _parsed(text: str, module: str) -> tuple[Scope, tuple[str, ...]] | None:
    """(scope, star-imported modules) of a module's text, or None if it does not parse."""
    try:
        tree = ast.parse(_top_level_blocks(text))
    except (SyntaxError, *PARSE_FAILURES):
        return None
    package = module
    stars = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                base = ".".join([*parts, base] if base else parts)
            stars.append(base)
    return Scope.of(tree.body, package), tuple(stars)


# (question, its arguments) -> answers of earlier versions: [(files looked up: path -> sha
# or None, the answer, the modules it was taken from)]
Memo = dict[tuple[Any, ...], list[tuple[dict[str, str | None], Any, list[tuple[str, str]]]]]
MEMO_ANSWERS = 4  # answers kept per question (the newest first)


class _Raised:
    def __init__(self, message: str) -> None:
        self.message = message


class Modules:
    """The modules of one version: files (path -> sha) and a way to read a blob's text.

    With a `memo` shared by consecutive versions, a question (`fold`, `class_def`) is
    answered as before when every file its answer looked up still has the same blob (or is
    still absent): folding is pure in the texts it reads."""

    def __init__(
        self,
        files: dict[str, str],
        read_text: Callable[[str], str] | None,
        memo: Memo | None = None,
    ) -> None:
        self.files, self.read_text = files, read_text
        self.used: dict[str, str] = {}  # path -> sha of every module a value came from
        self.memo = memo
        self._deps: dict[str, str | None] | None = None  # recorded while answering
        self._used_log: list[tuple[str, str]] = []

    def path_of(self, module: str) -> str | None:
        for p in module_path_candidates(module):
            if self._deps is not None:
                self._deps[p] = self.files.get(p)
            if p in self.files:
                return p
        return None

    def _memoized(self, key: tuple[Any, ...], answer: Callable[[], Any]) -> Any:
        """answer(), or an earlier version's answer whose files are unchanged."""
        if self.memo is None or self._deps is not None:  # no memo, or inside a question
            return answer()
        earlier = self.memo.setdefault(key, [])
        found = next(
            (a for a in earlier if all(self.files.get(p) == s for p, s in a[0].items())), None
        )
        if found is None:
            self._deps, self._used_log = {}, []
            try:
                outcome = answer()
            except CannotFold as exc:
                outcome = _Raised(str(exc))
            finally:
                found = (self._deps, None, self._used_log)
                self._deps = None
            found = (found[0], outcome, found[2])
            earlier.insert(0, found)
            del earlier[MEMO_ANSWERS:]
        _deps, outcome, used = found
        for path, sha in used:
            self.used[path] = sha
        if isinstance(outcome, _Raised):
            raise CannotFold(outcome.message)
        return outcome

    def text(self, module: str) -> tuple[str, str] | None:
        path = self.path_of(module)
        if path is None or self.read_text is None:
            return None
        return path, self.read_text(self.files[path])

    def scope(self, module: str) -> tuple[Scope, tuple[str, ...], str] | None:
        found = self.text(module)
        if found is None:
            return None
        path, text = found
        # A package's __init__ resolves relative imports against the package itself.
        package = module if path.endswith("__init__.py") else module.rsplit(".", 1)[0]
        parsed = _parsed(text, package)
        if parsed is None:
            return None
        scope, stars = parsed
        return scope, stars, path

    def value(self, module: str, name: str, hops: int = 0) -> Any:
        """The folded value of `name` as module `module` defines or re-exports it."""
        return self.locate(module, name, hops)[0]

    def locate(self, module: str, name: str, hops: int = 0) -> tuple[Any, str]:
        """(value, path of the module that binds it)."""
        if hops > MAX_HOPS:
            raise CannotFold(f"{module}.{name}: too many re-exports")
        found = self.scope(module)
        if found is None:
            raise CannotFold(f"module {module} not in this version")
        base, stars, path = found
        scope = Scope(base.names, base.classes, base.imports, self._resolver(hops))
        if name in scope.imports and name not in scope.names and name not in scope.classes:
            origin, original = scope.imports[name]  # a re-export: follow it
            return self.locate(origin, original, hops + 1)
        if name in scope.names or name in scope.classes:
            value = fold(ast.Name(id=name, ctx=ast.Load()), scope)
            self.used[path] = self.files[path]
            self._used_log.append((path, self.files[path]))
            return value, path
        for star in stars:
            try:
                return self.locate(star, name, hops + 1)
            except CannotFold:
                continue
        raise CannotFold(f"{name} not found in {module}")

    def _resolver(self, hops: int) -> Callable[[str, str], Any]:
        return lambda module, name: self.value(module, name, hops + 1)

    def fold(self, expr_src: str, imports: dict[str, list[str]]) -> Any:
        """Fold an expression from server_args.py whose imported names are `imports`."""
        key = ("fold", expr_src, tuple(sorted((k, tuple(v)) for k, v in imports.items())))
        return self._memoized(key, lambda: self._fold(expr_src, imports))

    def _fold(self, expr_src: str, imports: dict[str, list[str]]) -> Any:
        try:
            expr = ast.parse(expr_src, mode="eval").body
        except (SyntaxError, *PARSE_FAILURES) as exc:
            raise CannotFold(expr_src) from exc
        scope = Scope(
            imports={k: (m, n) for k, (m, n) in imports.items()}, resolver=self._resolver(0)
        )
        try:
            return fold(expr, scope)
        except External as exc:  # pragma: no cover - the resolver never leaves one
            raise CannotFold(str(exc)) from exc

    def docstring(self, module: str, name: str) -> str | None:
        """The docstring of a function or class a module defines at top level (not
        followed through re-exports), cleaned like `inspect.cleandoc`."""
        return self._memoized(("docstring", module, name), lambda: self._docstring(module, name))

    def _docstring(self, module: str, name: str) -> str | None:
        found = self.text(module)
        if found is None:
            return None
        path, text = found
        try:
            tree = ast.parse(text)
        except (SyntaxError, *PARSE_FAILURES):
            return None
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                if node.name == name and (doc := ast.get_docstring(node)) is not None:
                    self.used[path] = self.files[path]
                    self._used_log.append((path, self.files[path]))
                    return doc
        return None

    def class_def(self, module: str, name: str) -> tuple[ast.ClassDef, str] | None:
        """A class defined in (or re-exported by) a module, with the path it is in."""
        return self._memoized(("class_def", module, name), lambda: self._class_def(module, name))

    def _class_def(self, module: str, name: str) -> tuple[ast.ClassDef, str] | None:
        try:
            value, path = self.locate(module, name)
        except CannotFold:
            return None
        return (value, path) if isinstance(value, ast.ClassDef) else None
