"""Context shared by the version-pinned pages: the version, the switcher's list, the page."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from app.queries import version_names
from app.schema import Version


def page_context(
    session: Session,
    version: Version,
    page: str,
    absent: set[str] | None = None,
    names: list[str] | None = None,
) -> dict[str, Any]:
    """`page` is the URL tail after /v/{version}/ that the version switcher keeps;
    `absent` names versions where that page does not exist (marked in the switcher)."""
    return {
        "version": version,
        "versions": names if names is not None else version_names(session),
        "page": page,
        "absent": absent or set(),
    }
