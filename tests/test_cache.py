"""kb.cache: the LRU bound, stamps that drop stale entries, and many threads at once."""

from __future__ import annotations

import contextlib
import random
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import explain_kb
import pytest
from sqlmodel import Session, select

from kb.cache import Cache, Stamp
from kb.explain import explain
from kb.explain.load import load_facts
from kb.queries import flag_history, get_version, kb_stamp
from kb.schema import Flag, make_engine


def test_bounded_by_entries_and_least_recently_used_goes_first() -> None:
    cache: Cache[int] = Cache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now the most recent
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)
    assert len(cache) == 2


def test_a_new_state_drops_the_entries_of_its_scope_only() -> None:
    cache: Cache[str] = Cache(10)
    one, two = Stamp("db1", "s1"), Stamp("db2", "s1")
    cache.put("k", "one", one)
    cache.put("k", "two", two)
    cache.put("k", "forever")  # no stamp: content-addressed
    assert cache.get("k", one) == "one" and cache.get("k", two) == "two"
    assert cache.get("k", Stamp("db1", "s2")) is None  # db1 re-ingested
    assert cache.get("k", one) is None  # and the old state does not come back
    assert cache.get("k", two) == "two"
    assert cache.get("k") == "forever"


def test_get_or_make_builds_once_per_state() -> None:
    cache: Cache[int] = Cache(4)
    calls: list[str] = []

    def make(state: str) -> int:
        calls.append(state)
        return len(calls)

    assert cache.get_or_make("k", lambda: make("s1"), Stamp("db", "s1")) == 1
    assert cache.get_or_make("k", lambda: make("s1"), Stamp("db", "s1")) == 1
    assert cache.get_or_make("k", lambda: make("s2"), Stamp("db", "s2")) == 2
    assert calls == ["s1", "s2"]


def test_get_or_find_keeps_what_it_finds_and_not_a_miss() -> None:
    """Nothing found (a blob the knowledge base lacks) takes no entry: looked for again."""
    cache: Cache[str] = Cache(1)
    cache.put("kept", "x")
    found: dict[str, str | None] = {"k": None}
    calls: list[str] = []

    def find() -> str | None:
        calls.append("k")
        return found["k"]

    assert cache.get_or_find("k", find) is None
    assert cache.get("kept") == "x"  # the miss evicted nothing
    found["k"] = "v"
    assert cache.get_or_find("k", find) == "v"
    assert cache.get_or_find("k", find) == "v"
    assert calls == ["k", "k"]


@contextlib.contextmanager
def fast_switching() -> Iterator[None]:
    """Let threads interleave every few bytecodes, so races show up in a short test."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def hammer(cache: Cache[tuple[str, str, int]], threads: int = 8, rounds: int = 3000) -> list:
    """Threads mixing lookups, builds and state changes over a few scopes; returns what went
    wrong (exceptions, a value from another key or state, the bound exceeded)."""
    problems: list = []
    start = threading.Barrier(threads)

    def work(seed: int) -> None:
        rng = random.Random(seed)
        start.wait()
        try:
            for _ in range(rounds):
                scope = rng.choice(["db1", "db2", ""])
                state = rng.choice(["s1", "s2"]) if scope else ""
                key = rng.randrange(40)
                got = cache.get_or_make(
                    key, lambda s=scope, t=state, k=key: (s, t, k), Stamp(scope, state)
                )
                if got != (scope, state, key):
                    problems.append(("wrong value", got, (scope, state, key)))
                if len(cache) > cache.size:
                    problems.append(("over the bound", len(cache)))
        except Exception as exc:  # noqa: BLE001 - any exception is what this test looks for
            problems.append(exc)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    with fast_switching():
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    return problems


def test_many_threads_never_see_a_stale_or_foreign_value() -> None:
    cache: Cache[tuple[str, str, int]] = Cache(16)
    assert hammer(cache) == []
    assert len(cache) <= 16


def test_the_hammer_catches_a_cache_without_its_lock() -> None:
    """The threaded test can fail: the same cache with its lock removed goes wrong."""
    cache: Cache[tuple[str, str, int]] = Cache(16)
    cache._lock = contextlib.nullcontext()  # type: ignore[assignment]
    original = cache._sync

    def slow_sync(stamp: Stamp) -> None:  # widen the window between check and use
        original(stamp)
        threading.Event().wait(0.0001)

    cache._sync = slow_sync  # type: ignore[method-assign]
    assert hammer(cache, rounds=400) != []


# --- the caches in use: entries follow the knowledge base ---------------------------------


@pytest.fixture()
def db_url(tmp_path: Path) -> str:
    return explain_kb.build(tmp_path / "kb.db")


def reingest(session: Session, version: str, flag: str, help_text: str, later: int = 1) -> None:
    """What a re-ingest does to the rows: new facts, a newer `ingested_at`."""
    row = get_version(session, version)
    row.ingested_at = row.ingested_at + timedelta(days=later)
    target = session.exec(select(Flag).where(Flag.version_id == row.id, Flag.name == flag)).one()
    target.help = help_text
    session.add(row)
    session.add(target)
    session.commit()


def test_explain_sees_a_reingested_version_without_a_restart(db_url: str) -> None:
    with Session(make_engine(db_url)) as session:
        first = explain(session, "v0.2.0", "--pp-size 2")
        assert "pipeline" in first["flags"][0]["help"]
        reingest(session, "v0.2.0", "--pp-size", "Stages of the pipeline, renamed help.")
        again = explain(session, "v0.2.0", "--pp-size 2")
        assert again["flags"][0]["help"] == "Stages of the pipeline, renamed help."
        assert load_facts(session, get_version(session, "v0.2.0")) is load_facts(
            session, get_version(session, "v0.2.0")
        )


def test_history_is_cached_per_database(tmp_path: Path) -> None:
    """Two databases in one process with the same stamp must not share entries."""
    url_a = explain_kb.build(tmp_path / "a.db")
    url_b = explain_kb.build(tmp_path / "b.db")
    with Session(make_engine(url_b)) as session:
        reingest(session, "v0.3.0", "--pp-size", "B only.", later=0)
    with Session(make_engine(url_a)) as a, Session(make_engine(url_b)) as b:
        assert kb_stamp(a) == kb_stamp(b)
        helps_a = [c for c in flag_history(a, "--pp-size") if c["field"] == "help"]
        helps_b = [c for c in flag_history(b, "--pp-size") if c["field"] == "help"]
        assert not any(c["to"] == "B only." for c in helps_a)
        assert any(c["to"] == "B only." for c in helps_b)
