"""A total order for the rows of a list, the same on every database and after every ingest.

Lists are sorted here, in Python, rather than by ORDER BY: PostgreSQL compares text by the
database's collation (en_US in the postgres image, which ignores punctuation: `a_b/` and
`ab/` sort otherwise than in SQLite), and rows that tie on the columns a list is sorted by
come in whatever order the database read them. So a list sorts on its own columns first,
then on every other column of the row, never on ids: a row's id, and the ids it refers to,
change when a version is ingested again (`--force`) or by another path. Rows alike in every
column show alike, so their order does not matter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache
from itertools import groupby
from operator import attrgetter
from typing import Any, TypeVar

T = TypeVar("T")

FLAG_ORDER = ("path", "line", "name")  # flags in source order (then their other columns)


def in_order(found: Iterable[T], model: Any, *first: str) -> list[T]:
    """`found` (ORM objects or Core rows of `model`'s table) sorted by the columns `first`
    (never null), then by the others (`total_order`). Only rows that tie on `first` are
    compared on the others: a key of every column cost more than the query."""
    head = attrgetter(*first)
    out: list[T] = []
    for _head, group in groupby(sorted(found, key=head), key=head):
        tied = list(group)
        out += sorted(tied, key=total_order(model, *first)) if len(tied) > 1 else tied
    return out


@lru_cache(maxsize=64)
def total_order(model: Any, *first: str) -> Callable[[Any], tuple[Any, ...]]:
    """The sort key of `in_order`: the columns `first`, then every other column but ids (a
    None before any value)."""
    table = model.__table__
    rest = [c.name for c in table.columns if c.name not in first and not _is_id(c.name)]
    names = [*first, *rest]

    def key(row: Any) -> tuple[Any, ...]:
        return tuple((v is not None, v) for v in (getattr(row, n) for n in names))

    return key


def _is_id(column: str) -> bool:
    return column == "id" or column.endswith("_id")
