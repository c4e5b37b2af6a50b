"""PostgreSQL for the tests: a fresh database per caller on the server FLAGATLAS_TEST_PG_URL
names (`.ci/run` starts one with scripts/pg-test-server.sh). Without that variable the
PostgreSQL variants of the tests are skipped, so `make test` on a laptop still runs."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

PG_URL = os.environ.get("FLAGATLAS_TEST_PG_URL", "")
BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def fresh_database(prefix: str = "fa", icu_locale: str | None = None) -> str:
    """The URL of a new, empty database on the test server (skips when there is none). With
    `icu_locale` ("en-US"), its text compares by that language's rules (ICU), as a server
    initialized in that locale does, instead of by code point (the test server's C.UTF-8)."""
    if not PG_URL:
        pytest.skip("FLAGATLAS_TEST_PG_URL is not set (see scripts/pg-test-server.sh)")
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    collation = (
        f" TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE '{icu_locale}'" if icu_locale else ""
    )
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"{collation}'))
    admin.dispose()
    return make_url(PG_URL).set(database=name).render_as_string(hide_password=False)


@contextmanager
def index_at(path: Path) -> Iterator[None]:
    """FLAGATLAS_INDEX set to `path` for the duration (a PostgreSQL KB has no file to sit
    beside; without it the index would land in data/ of the working tree)."""
    old = os.environ.get("FLAGATLAS_INDEX")
    os.environ["FLAGATLAS_INDEX"] = str(path)
    try:
        yield
    finally:
        if old is None:
            del os.environ["FLAGATLAS_INDEX"]
        else:
            os.environ["FLAGATLAS_INDEX"] = old
