"""The one Jinja2 environment of the app (autoescaped), its filters and a render helper.

Views call `render(request, "page.html", {...})`; an htmx request for a page that names a
fragment block gets just that block (jinja2-fragments), so filters swap in without a reload.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import Response
from jinja2_fragments.fastapi import Jinja2Blocks

from app import fragments
from app.fragments import first_line, md_cite, md_constraint, series, show_value, synopsis
from kb.cache import Cache
from kb.env import conversion_short, conversion_words

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "templates"
STATIC = ROOT / "static"

templates = Jinja2Blocks(directory=str(TEMPLATES))
env = templates.env
env.autoescape = True  # extracted text comes from an untrusted repository
env.trim_blocks = True
env.lstrip_blocks = True


def _static_version(name: str) -> str:
    path = STATIC / name
    try:
        return hashlib.sha1(path.read_bytes()).hexdigest()[:10]
    except OSError:
        return "0"


_static_hashes: Cache[str] = Cache(256)


def static_url(name: str) -> str:
    """/static/NAME?v=HASH so browsers may cache assets and still see new ones."""
    return f"/static/{name}?v={_static_hashes.get_or_make(name, lambda: _static_version(name))}"


_DICT_ATTRS = frozenset(dir(dict))
_jinja_getattr = env.getattr


def _getattr(obj: Any, attribute: str) -> Any:
    """Jinja's `x.name`, the same answer sooner for a plain dict: Jinja tries the attribute
    first (only dict's own methods exist) and reads the key after the AttributeError; pages
    rendered from the API's dicts do this a thousand times."""
    if type(obj) is dict and attribute not in _DICT_ATTRS:
        try:
            return obj[attribute]
        except KeyError:
            return env.undefined(obj=obj, name=attribute)
    return _jinja_getattr(obj, attribute)


env.getattr = _getattr  # type: ignore[method-assign]
env.filters["show"] = show_value
env.filters["series"] = series
env.filters["synopsis"] = synopsis
env.filters["md_cite"] = md_cite
env.filters["md_constraint"] = md_constraint
env.globals["md_finding"] = fragments.md_finding
env.globals["share_button"] = fragments.share_button
env.filters["first_line"] = first_line
env.filters["conversion_short"] = conversion_short
env.filters["conversion_words"] = conversion_words
env.filters["q"] = lambda value: quote(str(value), safe="")
env.globals["static_url"] = static_url
env.globals["cite_html"] = fragments.cite
env.globals["excerpt_html"] = fragments.excerpt
env.globals["flag_link_html"] = fragments.flag_link
env.globals["via_html"] = fragments.via
env.globals["constraint_card_html"] = fragments.constraint_card
env.globals["indirect_files_html"] = fragments.indirect_files
env.globals["usage_rows_html"] = fragments.usage_rows
env.globals["indirect_rows_html"] = fragments.indirect_rows
env.globals["version_options_html"] = fragments.version_options
env.globals["flag_badges_html"] = fragments.flag_badges
env.globals["flag_items_html"] = fragments.flag_items
env.globals["constraint_rows_html"] = fragments.constraint_rows
env.globals["grid_rows_html"] = fragments.grid_rows
env.globals["graph_edges_html"] = fragments.graph_edges
env.globals["graph_nodes_html"] = fragments.graph_nodes
env.globals["graph_edge_list_html"] = fragments.graph_edge_list
env.globals["toc_items_html"] = fragments.toc_items
env.globals["choice_rows_html"] = fragments.choice_rows
env.globals["constraint_groups_html"] = fragments.constraint_groups
env.globals["usage_areas_html"] = fragments.usage_areas
env.globals["grid_columns_html"] = fragments.grid_columns


# The request headers a page's body depends on (is_fragment_request reads both); the
# response cache keys its entries on them too (app/respcache.py).
PAGE_HEADERS = ("HX-Request", "HX-History-Restore-Request")
VARY = ", ".join(PAGE_HEADERS)


def is_fragment_request(request: Request) -> bool:
    """An htmx swap (not a history restore, which needs the whole page)."""
    return bool(
        request.headers.get("HX-Request") and not request.headers.get("HX-History-Restore-Request")
    )


def render(
    request: Request,
    name: str,
    context: dict[str, Any],
    status_code: int = 200,
    block: str | None = None,
) -> Response:
    """Render a page, or only `block` of it when htmx asks for a fragment."""
    if block and is_fragment_request(request):
        response = templates.TemplateResponse(
            request, name, context, status_code=status_code, block_name=block
        )
    else:
        response = templates.TemplateResponse(request, name, context, status_code=status_code)
    response.headers["Vary"] = VARY
    return response
