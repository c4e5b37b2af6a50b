"""The one cache shape of Flag Atlas: an LRU bounded by entries, safe to share between the
threads FastAPI runs handlers on, whose entries can be tied to a state of the knowledge base.

Derived data (a version's facts for explain, a flag's history) holds only while the
knowledge base does not change. Such entries are stored under a `Stamp`: the database they
came from (`scope`) and its state (`state`, `kb.queries.kb_stamp`). When a lookup brings a
new state for a scope, every entry of that scope is dropped, so a re-ingest is seen on the
next request without any invalidation call. Content-addressed entries (a blob's text by its
sha) never go stale and are stored without a stamp.

`make` runs outside the lock: a slow build (highlighting a large file, loading a version's
facts) must not stall other threads. Two threads missing the same key both build it and the
last one stored wins, which is harmless for values that are pure functions of their key.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, NamedTuple, TypeVar, cast

V = TypeVar("V")


class Stamp(NamedTuple):
    scope: str  # which database (its URL)
    state: str  # its state; entries made under another state of the same scope are dropped


NO_STAMP = Stamp("", "")  # content-addressed entries: valid forever


class Cache(Generic[V]):
    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("a cache holds at least one entry")
        self.size = size
        self._items: OrderedDict[tuple[str, Hashable], V] = OrderedDict()
        self._states: dict[str, str] = {}  # scope -> the state its entries were made under
        self._lock = threading.Lock()

    def _sync(self, stamp: Stamp) -> None:
        """Drop the entries of `stamp.scope` made under another state (lock held)."""
        if self._states.get(stamp.scope, stamp.state) != stamp.state:
            for key in [k for k in self._items if k[0] == stamp.scope]:
                del self._items[key]
        self._states[stamp.scope] = stamp.state

    def get(self, key: Hashable, stamp: Stamp = NO_STAMP) -> V | None:
        with self._lock:
            self._sync(stamp)
            full = (stamp.scope, key)
            value = self._items.get(full)
            if value is not None:
                self._items.move_to_end(full)
            return value

    def put(self, key: Hashable, value: V, stamp: Stamp = NO_STAMP) -> None:
        with self._lock:
            self._sync(stamp)
            full = (stamp.scope, key)
            self._items[full] = value
            self._items.move_to_end(full)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def get_or_make(self, key: Hashable, make: Callable[[], V], stamp: Stamp = NO_STAMP) -> V:
        """The cached value, or `make()` stored and returned."""
        return cast(V, self.get_or_find(key, make, stamp))

    def get_or_find(
        self, key: Hashable, find: Callable[[], V | None], stamp: Stamp = NO_STAMP
    ) -> V | None:
        """The cached value, or what `find()` finds, stored; None when it finds nothing (not
        stored: looked for again next time, as a miss is)."""
        value = self.get(key, stamp)
        if value is None:
            value = find()
            if value is not None:
                self.put(key, value, stamp)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._states.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
