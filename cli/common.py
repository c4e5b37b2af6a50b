"""Shared by the commands: how a database is named in messages, and the one line for a
database of another schema."""

from __future__ import annotations

import shlex


def where(url: str) -> str:
    """The database as the user named it (a URL's password hidden)."""
    from sqlalchemy.engine import make_url

    if url.startswith("sqlite:///"):
        return url.removeprefix("sqlite:///")
    return make_url(url).render_as_string(hide_password=True)


def schema_line(command: str, url: str, reason: Exception, rebuild: str | None = None) -> str:
    """`flagatlas serve: data/x.db: it holds ... schema 1, ...; rebuild it: flagatlas ingest
    --rebuild --db data/x.db` (`rebuild`: the command to name, by default an ingest of the
    same database)."""
    if rebuild is None:
        db = f" --db {shlex.quote(where(url))}" if url.startswith("sqlite:///") else ""
        rebuild = f"flagatlas ingest --rebuild{db}"
    return f"flagatlas {command}: {where(url)}: {reason}; rebuild it: {rebuild}"
