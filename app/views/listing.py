"""Datasette-like list helpers: facets with counts whose links add (or drop) a filter, page
arithmetic, and the CSV and JSON downloads. Shared by the constraints and flags lists."""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, TypeVar
from urllib.parse import urlencode

from fastapi.responses import Response
from pydantic import BaseModel

from kb.contract import Facet, FacetValue

M = TypeVar("M", bound=BaseModel)

PER_PAGE = 50
MAX_PER_PAGE = 1000


def query(params: dict[str, str], **change: str) -> str:
    """The query string of `params` with `change` applied (an empty value drops the key);
    a changed filter goes back to page 1."""
    merged = {**params, **change}
    if "page" not in change:
        merged.pop("page", None)
    return urlencode({k: v for k, v in merged.items() if v})


def facet(name: str, values: Iterable[str], params: dict[str, str], limit: int = 30) -> Facet:
    """Counts of `values` (most common first, then by name), each linking to the list with
    the filter `name=value` added, or removed when it is the active one."""
    active = params.get(name, "")
    counts = Counter(values)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:limit]
    if active and active not in dict(ranked):
        ranked.insert(0, (active, counts.get(active, 0)))
    return Facet(
        name=name,
        values=[
            FacetValue(
                value=value,
                count=count,
                selected=value == active,
                query=query(params, **{name: "" if value == active else value}),
            )
            for value, count in ranked
        ],
    )


def clamp_page(page: int, per_page: int, total: int) -> tuple[int, int, int]:
    """(page, per_page, pages): per_page 0 means one page of everything."""
    per_page = max(0, min(per_page, MAX_PER_PAGE))
    pages = max(1, -(-total // per_page)) if per_page else 1
    return max(1, min(page, pages)), per_page, pages


def csv_text(header: list[str], rows: Iterable[list[Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def export(data: M, name: str, format: str, to_csv: Callable[[M], str]) -> Response:
    """A list as a download, `name`.csv (`to_csv`) or `name`.json (the list's model)."""
    headers = {"content-disposition": f'attachment; filename="{name}.{format}"'}
    if format == "csv":
        return Response(to_csv(data), media_type="text/csv; charset=utf-8", headers=headers)
    return Response(data.model_dump_json(), media_type="application/json", headers=headers)
