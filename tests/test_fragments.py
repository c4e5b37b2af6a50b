"""app/fragments.py builds in Python what Jinja macros and loops built: the bytes must be the
same (pages did not change), and per-stamp data must follow a re-ingest."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import explain_kb
import pytest
from markupsafe import Markup, escape
from sqlmodel import Session, select

from app import fragments
from app.templating import env
from kb.contract import Citation
from kb.queries import dest_names, get_version, version_flag_dicts
from kb.schema import Flag, make_engine

NASTY = "a<b>&\"c\"'d' → é"

# The macros as they were before app/fragments.py (templates/_macros.html, flags.html).
OLD_MACROS = """
{% macro cite(c, label=none, md=none) -%}
<span class="cite">
  <a class="src" href="{{ c.permalink }}">{{ label or (c.path ~ '#L' ~ c.line ~ ('-L' ~ c.end_line if c.end_line != c.line else '')) }}</a>
  <a class="gh" href="{{ c.url }}" rel="noopener noreferrer" title="Open at this commit on GitHub">GitHub</a>
  <button type="button" class="copy" data-copy="{{ c.permalink }}" data-absolute title="Copy a link to this line in Flag Atlas">Copy permalink</button>
  <button type="button" class="copy" data-copy="{{ md or (c|md_cite) }}" title="Copy a Markdown citation">Copy as Markdown</button>
</span>
{%- endmacro %}
{% macro excerpt(lines) -%}
{% if lines %}
<div class="excerpt" tabindex="0"><table class="code"><tbody>
{% for l in lines %}<tr{% if l.hit %} class="hit"{% endif %}><td class="ln">{{ l.line }}</td><td class="src">{{ l.html }}</td></tr>
{% endfor %}
</tbody></table></div>
{% endif %}
{%- endmacro %}
{% macro flag_badges(f) -%}
{% if f.deprecated %}<span class="badge warn">deprecated</span>{% endif %}
{% if f.hidden %}<span class="badge">hidden</span>{% endif %}
{% if f.choices %}<span class="badge">{{ f.choices|length }} choices</span>{% endif %}
{% if f.constraint_count %}<span class="badge info">{{ f.constraint_count }} constraint{{ 's' if f.constraint_count != 1 }}</span>{% endif %}
{%- endmacro %}
{% macro grid(rows) -%}
{% for r in rows %}
    <tr><th scope="row"><code>{{ r.value }}</code></th>{% for on in r.cells %}<td class="{{ 'on' if on else 'off' }}">{% if on %}✓<span class="visually-hidden"> a choice</span>{% else %}<span aria-hidden="true">·</span><span class="visually-hidden">not a choice</span>{% endif %}</td>{% endfor %}</tr>
    {% endfor %}
{%- endmacro %}
{% macro via(chain) -%}
<span class="via" title="how the flag's value reaches this line">via {% for link in chain %}<code>{{ link }}</code>{{ ' ← ' if not loop.last }}{% endfor %}</span>
{%- endmacro %}
"""  # noqa: E501


def old(call: str, **values: Any) -> str:
    return env.from_string(OLD_MACROS + "{{ " + call + " }}").render(**values).lstrip("\n")


@pytest.mark.parametrize("value", [NASTY, "", 42, None, Markup("<b>safe</b>")])
def test_escaping_matches_markupsafe(value: Any) -> None:
    assert fragments._e(value) == str(escape(value))


def test_a_step_taken_by_its_name_is_marked() -> None:
    """A step followed because its name spells the feature reads differently from a code
    step: in italics, "named like the feature", with a title saying why."""
    html = str(
        fragments.via(
            [
                {"name": "IS_TBO_ENABLED", "by_name": False},
                {"name": NASTY, "by_name": True},
            ]
        )
    )
    code, named = html.split(" ← ")
    assert "by-name" not in code and "named like the feature" not in code
    assert named.startswith('<span class="by-name" title="Named like the feature: ')
    assert f"<code>{escape(NASTY)}</code> <i>named like the feature</i></span>" in named


def test_fragments_match_the_macros_they_replace() -> None:
    source = {
        "path": f"dir/{NASTY}.py",
        "line": 3,
        "end_line": 5,
        "url": f"https://x/{NASTY}",
        "permalink": f"/v/{NASTY}#L3",
    }
    for c in (source, Citation.model_validate(source)):
        assert str(fragments.cite(c)) == old("cite(c)", c=c)
        assert str(fragments.cite(c, label=NASTY, md=NASTY)) == old(
            "cite(c, label=x, md=x)", c=c, x=NASTY
        )
    lines = [
        {"line": 1, "html": Markup("<span>x</span>"), "hit": False},
        {"line": 2, "html": Markup("&lt;y"), "hit": True},
    ]
    assert str(fragments.excerpt(lines)) == old("excerpt(lines)", lines=lines)
    assert str(fragments.excerpt([])) == old("excerpt(lines)", lines=[])
    rows = [{"value": NASTY, "cells": [True, False]}, {"value": "1", "cells": [False, True]}]
    assert str(fragments.grid_rows(rows)) == old("grid(rows)", rows=rows)
    chain = [NASTY, "b", "c"]
    steps = [{"name": n, "by_name": False} for n in chain]
    assert str(fragments.via(steps)) == old("via(chain)", chain=chain)
    for flag in (
        {"deprecated": True, "hidden": True, "choices": ["a", "b"], "constraint_count": 1},
        {"deprecated": False, "hidden": False, "choices": None, "constraint_count": 3},
        {"deprecated": False, "hidden": False, "choices": [], "constraint_count": 0},
    ):
        assert str(fragments.flag_badges(flag)) == old("flag_badges(f)", f=flag)


# The constraint graph's loops as flag.html had them before fragments.graph_* (the whole
# SVG, so the whitespace the block tags left between the parts is checked too).
OLD_GRAPH = """
    <svg>
      <text class="me">{{ flag.name }}</text>
      {% for e in g.edges %}
      <a href="{{ e.url }}" class="edge k-{{ e.kind }}"><title>{{ flag.name }} – {{ e.flag }}: {{ e.label }}{% if e.count > 1 %} (opens the first of {{ e.count }} sites){% endif %}</title>
        <path d="M{{ g.x1 }} {{ e.y1 }} C{{ (g.x1 + g.xm) // 2 }} {{ e.y1 }} {{ (g.x1 + g.xm) // 2 }} {{ e.y2 }} {{ g.xm }} {{ e.y2 }} H{{ g.x2 }}"/>
        <text class="elabel" x="{{ g.xm + 6 }}" y="{{ e.y2 - 5 }}">{{ e.label }}</text>
      </a>
      {% endfor %}
      {% for n in g.nodes %}
      {% if n.y_last > n.y_first %}<path class="bracket" d="M{{ g.x2 }} {{ n.y_first }} V{{ n.y_last }}"/>{% endif %}
      {% if n.known %}<a href="{{ n.url }}" class="node"><text x="{{ g.x2 + 8 }}" y="{{ n.y + 4 }}">{{ n.name }}</text></a>{% else %}<text class="node absent" x="{{ g.x2 + 8 }}" y="{{ n.y + 4 }}">{{ n.name }} (not in {{ version.name }})</text>{% endif %}
      {% endfor %}
    </svg>
      <ul class="edge-list">{% for e in g.edges %}<li><a href="{{ e.url }}">{{ e.flag }}</a>: {{ e.label }}{% if e.sites|length > 1 %} <span class="sites">({% for u in e.sites[:6] %}<a href="{{ u }}" title="{{ u.split('/source/', 1)[1] }}">{{ u.rsplit('#', 1)[1] }}</a>{{ ', ' if not loop.last }}{% endfor %}{% if e.sites|length > 6 %}, {{ e.sites|length - 6 }} more under Constraints{% endif %})</span>{% endif %}</li>{% endfor %}</ul>
"""  # noqa: E501
NEW_GRAPH = """
    <svg>
      <text class="me">{{ flag.name }}</text>
{{ graph_edges_html(g, flag.name) }}{{ graph_nodes_html(g, version.name) }}    </svg>
      <ul class="edge-list">{{ graph_edge_list_html(g) }}</ul>
"""


def test_the_constraint_graph_matches_the_loops_it_replaces() -> None:
    from app.views.flag_parts import constraint_graph

    def site(n: int) -> dict[str, Any]:
        return {"permalink": f"/v/{NASTY}/source/p/{NASTY}.py#L{n}"}

    constraints = [
        {"flags": ["--x", NASTY], "affects": ["--y"], "kind": "raise", "values": ["a"]},
        *({"flags": ["--x", "--y"], "affects": [], "kind": "warning", "values": []},) * 8,
    ]
    for i, c in enumerate(constraints):
        c["source"] = site(i + 1)
    related = [
        {"name": NASTY, "url": f"/v/x/flags/{NASTY}", "known": False},
        {"name": "--y", "url": "/v/x/flags/--y", "known": True},
        {"name": "--z", "url": "/v/x/flags/--z", "known": True},  # no edge of its own
    ]
    graph = constraint_graph(constraints, "--x", related)
    assert any(len(e["sites"]) > 6 for e in graph["edges"])  # "… more under Constraints"
    values = {"g": graph, "flag": {"name": "--x<"}, "version": {"name": NASTY}}
    assert env.from_string(NEW_GRAPH).render(**values) == env.from_string(OLD_GRAPH).render(
        **values
    )


def test_per_stamp_data_follows_a_reingest(tmp_path: Path) -> None:
    engine = make_engine(explain_kb.build(tmp_path / "kb.db"))
    with Session(engine) as session:
        version = get_version(session, "v0.2.0")
        before = {f["name"]: f["help"] for f in version_flag_dicts(session, version)}
        assert dest_names(session, version)["pp_size"] == "--pp-size"
        # What a re-ingest does: new facts and a newer ingested_at (a new stamp).
        version.ingested_at = version.ingested_at + timedelta(days=1)
        flag = session.exec(
            select(Flag).where(Flag.version_id == version.id, Flag.name == "--pp-size")
        ).one()
        flag.help = "Renamed help."
        session.add(version)
        session.add(flag)
        session.commit()
    with Session(engine) as session:
        version = get_version(session, "v0.2.0")
        after = {f["name"]: f["help"] for f in version_flag_dicts(session, version)}
    assert before["--pp-size"] != "Renamed help." and after["--pp-size"] == "Renamed help."


def test_attribute_lookup_on_dicts_answers_as_jinja_does() -> None:
    """The fast `x.name` for plain dicts (app/templating.py) keeps Jinja's rules: dict's
    own methods first, then the key, else undefined."""
    template = env.from_string("{{ d.name }}|{{ d.missing }}|{{ d.items() | list | length }}")
    assert template.render(d={"name": NASTY, "items": 5}) == escape(NASTY) + "||2"


def test_constraint_cards_kept_per_site_answer_for_each_flag(tmp_path: Path) -> None:
    """A card's body is kept per site and shared by the pages of the flags it cites; each
    page's card is still the whole `constraint_card` naming its own flag."""
    from app.highlight import excerpt
    from app.views.flags import constraint_cards

    source = {
        "path": f"dir/{NASTY}.py", "line": 3, "end_line": 4, "url": f"https://x/{NASTY}",
        "permalink": f"/v/{NASTY}/source/dir#L3",
    }  # fmt: skip
    site = {
        "kind": "raise", "function": NASTY, "plain": NASTY, "message": NASTY,
        "writes": {NASTY: NASTY}, "flags": [NASTY, "--a"], "affects": ["--b"],
        "condition": NASTY, "conditions": [NASTY, "x"], "source": source,
    }  # fmt: skip
    engine = make_engine(explain_kb.build(tmp_path / "kb.db"))
    with Session(engine) as session:
        version = get_version(session, "v0.2.0")
        lines = excerpt(session, version, source["path"], 3, 4)
        for flag in ("--a", NASTY, "--a"):
            [card] = constraint_cards(session, version, [dict(site)], flag)
            assert card == fragments.constraint_card(site, lines, version, flag)
            assert escape(f"`{flag}`") in card
        other = {**site, "plain": "other words"}
        [card] = constraint_cards(session, version, [other], "--a")
        assert card == fragments.constraint_card(other, lines, version, "--a")


def test_flag_row_answers_as_get_flag(tmp_path: Path) -> None:
    from kb.queries import NotFound, get_flag, get_flag_row

    engine = make_engine(explain_kb.build(tmp_path / "kb.db"))
    with Session(engine) as session:
        version = get_version(session, "v0.2.0")
        names = [f["name"] for f in version_flag_dicts(session, version)]
        for raw in names + [n.upper() for n in names] + [n.lstrip("-") for n in names]:
            flag, row = get_flag(session, version, raw), get_flag_row(session, version, raw)
            assert {k: getattr(flag, k) for k in row._fields} == row._asdict()
        with pytest.raises(NotFound):
            get_flag_row(session, version, "--no-such-flag")


def test_version_options_made_once_answer_for_their_arguments() -> None:
    """The switcher is kept per (versions, current, absent): each answer is its own."""
    names = ["v0.5.1", NASTY, "snapshot-1", "v0.4.0"]
    seen = set()
    for current, absent in [("v0.5.1", set()), (NASTY, set()), ("v0.5.1", {NASTY})] * 2:
        html = fragments.version_options(names, current, absent)
        assert f'<option value="{escape(current)}" selected>' in html
        assert html.count(" selected") == 1
        assert (f"{escape(NASTY)} (absent)" in html) == (NASTY in absent)
        seen.add(str(html))
    assert len(seen) == 3


def test_read_version_is_get_version_unattached(tmp_path: Path) -> None:
    from kb.queries import NotFound, read_version

    engine = make_engine(explain_kb.build(tmp_path / "kb.db"))
    with Session(engine) as session:
        shared = read_version(session, "v0.2.0")
        assert shared not in session and shared.name == "v0.2.0"
        assert get_version(session, "v0.2.0").id == shared.id
        with pytest.raises(NotFound):
            read_version(session, "v9.9.9")


# flag.html's loop over the files of reads through a chain, before fragments.indirect_files.
OLD_INDIRECT = """<section>
  {% for path, sites in indirect_by_file %}
  <details class="usage-file"{% if loop.index <= 5 %} open{% endif %}>
    <summary><code>{{ path }}</code> <span class="muted">{{ sites|length }}</span></summary>
    <a class="file-link" href="/v/{{ version.name|q }}/source/{{ path }}">whole file</a>
    <div class="excerpt" tabindex="0"><table class="code usages"><tbody>
{{ indirect_rows_html(sites) }}    </tbody></table></div>
  </details>
  {% else %}
  <p class="empty">Nothing found.</p>
  {% endfor %}
</section>"""
NEW_INDIRECT = """<section>
  {% if indirect_by_file %}
{{ indirect_files_html(indirect_by_file, version) }}{% else %}
  <p class="empty">Nothing found.</p>
  {% endif %}
</section>"""


@pytest.mark.parametrize("files", [0, 1, 7])
def test_indirect_files_match_the_loop_they_replace(files: int) -> None:
    class V:
        name = f"v/{NASTY}"

    site = {
        "permalink": f"/p/{NASTY}",
        "line": 4,
        "text": NASTY,
        "url": NASTY,
        "via": [NASTY],
        "steps": [{"name": NASTY, "by_name": False}],
    }
    groups = [(f"dir/{NASTY}{i}.py", [site] * (i + 1)) for i in range(files)]
    values = {"indirect_by_file": groups, "version": V()}
    old = env.from_string(OLD_INDIRECT).render(**values)
    assert env.from_string(NEW_INDIRECT).render(**values) == old
    assert old.count(" open>") == min(files, 5)


# flag.html's loops as they were before fragments.toc_items, choice_rows, constraint_groups,
# grid_columns and usage_areas (the page around each kept, so the whitespace that
# trim_blocks/lstrip_blocks leave at the seams is compared too).
OLD_FLAG_LOOPS = """{% from "_macros.html" import via %}
<nav>
  <ul>{% for s in flag.sections %}<li{% if s.id.startswith('c-') %} class="sub"{% endif %}><a href="#{{ s.id }}">{{ s.title }}</a>{% if s.count is not none %} <span class="muted">{{ s.count }}</span>{% endif %}</li>{% endfor %}</ul>
</nav>
  <table class="choices-table">
    <tbody>
    {% for row in flag.choice_rows %}
    <tr><td class="value"><a href="{{ row.url }}"><code>{{ row.value }}</code></a>{% if row.value == flag.default %} <span class="badge">default</span>{% endif %}</td>
      {% if flag.enum %}<td class="member">{% if row.member %}<code>{{ row.member }}</code>{% else %}<span class="muted">—</span>{% endif %}</td>{% endif %}
      <td class="num">{{ row.sites }}</td></tr>
    {% endfor %}
    </tbody>
  </table>
<section id="constraints">
  <h2>Constraints <small>{{ flag.constraints|length }}</small></h2>
  {% for g in flag.constraint_groups %}
  <section id="c-{{ g.effect }}" class="cgroup effect-{{ g.effect }}">
    <h3>{{ g.title }} <small>{{ g.count }}</small></h3>
    {% for v in g["values"] %}
    <details class="vgroup"{% if flag.constraints|length <= 6 %} open{% endif %}>
      <summary><span class="vlabel">{{ v.label }}</span> <span class="muted">{{ v.sites|length }} site{{ 's' if v.sites|length != 1 }}</span></summary>
      {% for i in v.sites %}{{ cards[i] }}{% endfor %}
    </details>
    {% endfor %}
  </section>
  {% else %}
  <p class="empty">No constraint site reads or changes this flag.</p>
  {% endfor %}
</section>
    <thead><tr><th scope="col">Value</th>{% for c in flag.columns %}<th scope="col"><a href="{{ c.url }}"><code>{{ c.version }}</code></a>{% if c.until != c.version %}<br><span class="muted">to <code>{{ c.until }}</code></span>{% endif %}</th>{% endfor %}</tr></thead>
<section id="usages">
  {% for a in flag.usage_areas %}
  <h3 class="area"><code>{{ a.area }}/</code> <small>{{ a.count }}</small></h3>
  {% for f in a.files %}
  <details class="usage-file"{% if f.sites|length <= 5 %} open{% endif %}>
    <summary><code>{{ f.path.rsplit('/', 1)[-1] }}</code> <span class="muted">{{ f.sites|length }}</span></summary>
    <a class="file-link" href="{{ f.url }}">whole file</a>
    <div class="excerpt" tabindex="0"><table class="code usages"><tbody>
{{ usage_rows_html(f.sites, flag.usages) }}    </tbody></table></div>
  </details>
  {% endfor %}
  {% else %}
  <p class="empty">No place in the code reads <code>{{ flag.dest }}</code>.</p>
  {% endfor %}
</section>"""  # noqa: E501
NEW_FLAG_LOOPS = """<nav>
  <ul>{{ toc_items_html(flag.sections) }}</ul>
</nav>
  <table class="choices-table">
    <tbody>
{{ choice_rows_html(flag.choice_rows, flag.default, flag.enum) }}    </tbody>
  </table>
<section id="constraints">
  <h2>Constraints <small>{{ flag.constraints|length }}</small></h2>
  {% if flag.constraint_groups %}
{{ constraint_groups_html(flag.constraint_groups, cards, flag.constraints|length) }}{% else %}
  <p class="empty">No constraint site reads or changes this flag.</p>
  {% endif %}
</section>
    <thead><tr><th scope="col">Value</th>{{ grid_columns_html(flag.columns) }}</tr></thead>
<section id="usages">
  {% if flag.usage_areas %}
{{ usage_areas_html(flag.usage_areas, flag.usages) }}{% else %}
  <p class="empty">No place in the code reads <code>{{ flag.dest }}</code>.</p>
  {% endif %}
</section>"""


@pytest.mark.parametrize("size", [0, 1, 7])
def test_flag_page_loops_match_the_fragments_that_replace_them(size: int) -> None:
    """Every value hostile, every branch taken somewhere: sizes 0 (empty lists), 1
    (singular words, folds open) and 7 (plural, folds closed past the limits)."""
    sites = list(range(size))
    usage = {"permalink": f"/p/{NASTY}", "line": 3, "text": NASTY, "url": NASTY}
    flag = {
        "default": NASTY,
        "enum": {"name": NASTY} if size != 1 else None,
        "dest": NASTY,
        "sections": [
            {"id": i, "title": NASTY, "count": c}
            for i, c in [("summary", None), (f"c-{NASTY}", 0), ("usages", size)]
        ][: size + 1],
        "choice_rows": [
            {"url": f"/b/{NASTY}", "value": v, "member": m, "sites": i}
            for i, (v, m) in enumerate([(NASTY, NASTY), ("x", None), (1, "")] * size)
        ],
        "constraints": sites,
        "constraint_groups": [
            {
                "effect": f"e{g}{NASTY}",
                "title": NASTY,
                "count": size,
                "values": [{"label": NASTY, "sites": sites[: v + 1]} for v in range(size)],
            }
            for g in range(min(size, 2))
        ],
        "columns": [
            {"url": f"/v/{NASTY}", "version": NASTY, "until": u}
            for u in [NASTY, "v1", NASTY + "x"][:size]
        ],
        "usages": [usage] * 3,
        "usage_areas": [
            {
                "area": NASTY,
                "count": a,
                "files": [
                    {"path": f"d/{NASTY}/f{n}.py", "url": f"/u/{NASTY}", "sites": [0, 1, 2] * n}
                    for n in range(1, size + 1)
                ],
            }
            for a in range(min(size, 2))
        ],
    }
    cards = [Markup(f'<div class="card">{i} {escape(NASTY)}</div>\n') for i in sites]
    values = {"flag": flag, "cards": cards}
    old = env.from_string(OLD_FLAG_LOOPS).render(**values)
    new = env.from_string(NEW_FLAG_LOOPS).render(**values)
    assert new == old
    assert ('class="vgroup" open>' in old) == (size == 1)
    assert ('class="vgroup">' in old) == (size == 7)
