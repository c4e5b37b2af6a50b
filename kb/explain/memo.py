"""A cache for what is computed from parsed source alone (AST nodes, parsed modules, a
version's module loader): every simulation asks again, and the answer cannot change while
the objects asked about live. Keyed by the objects' identity (parsed modules are plain
dataclasses, not hashable); each entry holds its objects, so their ids stay theirs."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

MAX_ENTRIES = 1024  # (a version's worth of modules; cleared whole when full)

R = TypeVar("R")


def by_identity(fn: Callable[..., R]) -> Callable[..., R]:
    """`fn(*objects)` computed once per tuple of objects (compared by identity)."""
    cache: dict[tuple[int, ...], tuple[tuple[Any, ...], R]] = {}

    @wraps(fn)
    def cached(*objects: Any) -> R:
        key = tuple(map(id, objects))
        hit = cache.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], objects, strict=True)):
            return hit[1]
        if len(cache) >= MAX_ENTRIES:
            cache.clear()
        value = fn(*objects)
        cache[key] = (objects, value)
        return value

    return cached
