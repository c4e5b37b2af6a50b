"""HTML fragments that pages repeat hundreds of times, built in Python as safe strings.

A flag page cites ~30 places, shows ~300 lines of code and reads, and a version switcher of
~120 versions; as Jinja macros and per-row loops these cost most of its render time (a
macro call and an escape per value). Here each fragment is one f-string over values escaped
once; the output is byte for byte what the macros in templates/_macros.html gave (they now
call these), so the pages did not change. Every argument is a dict or a kb.contract model
(both answer `x["field"]`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

from markupsafe import Markup

from kb.queries import quoted


def _e(value: Any) -> str:
    """Escaped like markupsafe.escape, with its entities (so the bytes match what Jinja's
    autoescape gave; safe strings pass as they are), without a Markup object per value."""
    if hasattr(value, "__html__"):
        return str(value.__html__())
    text = str(value)
    if "&" in text:
        text = text.replace("&", "&amp;")
    if "<" in text:
        text = text.replace("<", "&lt;")
    if ">" in text:
        text = text.replace(">", "&gt;")
    if '"' in text:
        text = text.replace('"', "&#34;")
    if "'" in text:
        text = text.replace("'", "&#39;")
    return text


def _d(obj: Any) -> Mapping[str, Any]:
    """A dict, or a kb.contract model's field values (no aliased field is read here)."""
    return obj if isinstance(obj, dict) else obj.__dict__


def show_value(value: Any) -> str:
    """A literal value (default, choice, history value) as JSON: "auto", 1, true, null."""
    return json.dumps(value, ensure_ascii=False)


def synopsis(flag: Any) -> str:
    """`--name TYPE (default X)` from a Flag (a kb.contract model or its dict)."""
    parts = [flag["name"]]
    action = flag["action"] or ""
    if not action.startswith("store_") and action not in ("count", "help", "version"):
        parts.append(flag["type"].upper() if flag["type"] else "VALUE")
    if flag["nargs"] in ("*", "+"):
        parts[-1] += " ..."
    if flag["default"] is not None:
        parts.append(f"(default {show_value(flag['default'])})")
    elif flag["default_expr"]:
        parts.append(f"(default {flag['default_expr']})")
    return " ".join(parts)


def first_line(text: str, limit: int = 160) -> str:
    """The first sentence of a help text, cut to `limit` characters."""
    text = " ".join((text or "").split())
    for end in (". ", "; "):
        if end in text[:limit]:
            return text[: text.index(end) + 1]
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def md_cite(cite: Any) -> str:
    """A Markdown link to a citation on GitHub: [server_args.py#L5045](url)."""
    name = cite["path"].rsplit("/", 1)[-1]
    lines = f"L{cite['line']}" + (
        f"-L{cite['end_line']}" if cite["end_line"] != cite["line"] else ""
    )
    return f"[{name}#{lines}]({cite['url']})"


def md_constraint(site: Any, flag: str) -> str:
    """One sentence about a constraint site, e.g. "`--x` raises when `cond` — [file#L1](url)"."""
    cond = f"`{site['condition']}`" if site["condition"] else "unconditionally"
    if site["kind"] == "override" and site["writes"]:
        sets = ", ".join(f"`{k} = {v}`" for k, v in site["writes"].items())
        what = f"when {cond}, {sets}" if site["condition"] else f"sets {sets}"
    elif site["kind"] == "assert":
        what = f"asserts {cond}"
    else:
        verb = {"raise": "raises", "warning": "warns", "override": "is overridden"}.get(
            site["kind"], site["kind"]
        )
        what = f"{verb} when {cond}" if site["condition"] else f"{verb} {cond}"
    return f"`{flag}` {what} — {md_cite(site['source'])}"


def md_share(sentence: str, message: str | None, version: str, url: str) -> str:
    """What "Copy as Markdown" of a constraint or a finding gives, to paste into a design
    review: the sentence with its citation, the message quoted, the version and the Flag
    Atlas permalink. A relative `url` is made absolute by static/app.js (data-links) with
    the page's origin; "<page>" stands for the page's own address."""
    lines = [sentence]
    if message:
        lines.append("> " + " ".join(message.split()))
    lines.append(f"SGLang `{version}` · [Flag Atlas]({url})")
    return "\n".join(lines)


def md_constraint_share(c: Any, flag: str) -> str:
    """A constraint site (with its `url`) as `md_share` gives it; the version is the one
    its permalink names."""
    c = _d(c)
    url = c.get("url") or c["source"]["permalink"]
    version = url.split("/", 3)[2] if url.startswith("/v/") else ""
    return md_share(md_constraint(c, flag), c["message"], unquote(version), url)


def md_finding(f: Any, version: str) -> str:
    """An explain finding as `md_share` gives it; its permalink is the analysis's page."""
    f = _d(f)
    sentence = f"**{f['severity']}**" + (f" on `{f['flag']}`" if f.get("flag") else "")
    if f.get("source"):
        sentence += f" — {md_cite(f['source'])}"
    message = f["message"] + (f" (when {f['condition']})" if f.get("condition") else "")
    return md_share(sentence, message, version, "<page>")


def share_button(md: str) -> Markup:
    """A "Copy as Markdown" button for `md` (`md_share`'s text) where no citation has one."""
    return Markup(
        f'<button type="button" class="copy" data-copy="{_e(md)}" data-links '
        'title="Copy as Markdown: the message, the version and the permalink">'
        "Copy as Markdown</button>"
    )


def cite(c: Any, label: str | None = None, md: str | None = None, links: bool = False) -> Markup:
    """A citation: the in-app link, GitHub, and copy buttons (permalink, Markdown). `links`:
    the Markdown's relative links are made absolute when copied (`md_share`)."""
    c = _d(c)
    permalink = _e(c["permalink"])
    if not label:
        end = c["end_line"]
        label = f"{c['path']}#L{c['line']}" + (f"-L{end}" if end != c["line"] else "")
    return Markup(
        f'<span class="cite">\n'
        f'  <a class="src" href="{permalink}">{_e(label)}</a>\n'
        f'  <a class="gh" href="{_e(c["url"])}" rel="noopener noreferrer" '
        f'title="Open at this commit on GitHub">GitHub</a>\n'
        f'  <button type="button" class="copy" data-copy="{permalink}" data-absolute '
        f'title="Copy a link to this line in Flag Atlas">Copy permalink</button>\n'
        f'  <button type="button" class="copy" data-copy="{_e(md or md_cite(c))}"'
        f"{' data-links' if links else ''} "
        f'title="Copy a Markdown citation">Copy as Markdown</button>\n'
        f"</span>"
    )


def excerpt(lines: Sequence[Mapping[str, Any]] | None) -> Markup:
    """Highlighted source lines (`html` is already safe), the cited ones marked."""
    if not lines:
        return Markup("")
    hit = ' class="hit"'
    rows = "".join(
        f'<tr{hit if line["hit"] else ""}><td class="ln">{line["line"]}</td>'
        f'<td class="src">{_e(line["html"])}</td></tr>\n'
        for line in map(_d, lines)
    )
    head = '<div class="excerpt" tabindex="0"><table class="code"><tbody>\n'
    return Markup(f"{head}{rows}</tbody></table></div>\n")


def flag_link(version: Any, name: str) -> Markup:
    """`--x=value` (a replacement naming the value) links the flag's page, shown whole."""
    option = str(name).partition("=")[0]
    return Markup(
        f'<a class="flag" href="/v/{quoted(version.name, "")}/flags/'
        f'{quoted(option, "")}"><code>{_e(name)}</code></a>'
    )


# A step taken by its name alone (ingest/indirect.py: in a module using a feature's carrier,
# its definitions named for the feature), told apart from the steps the code links.
BY_NAME = (
    '<span class="by-name" title="Named like the feature: this definition is in a module that '
    "uses the step before it and is followed because its name spells the same feature; no "
    'call or import links the two.">'
)


def via(steps: Iterable[Any]) -> Markup:
    """A chain (kb.contract.ChainStep each): a step reached by its name alone is marked."""
    links = " ← ".join(
        f"{BY_NAME}<code>{_e(s['name'])}</code> <i>named like the feature</i></span>"
        if s["by_name"]
        else f"<code>{_e(s['name'])}</code>"
        for s in map(_d, steps)
    )
    return Markup(
        f'<span class="via" title="how the flag\'s value reaches this line">via {links}</span>'
    )


def constraint_card(
    c: Any, lines: Sequence[Mapping[str, Any]] | None, version: Any, flag: str
) -> Markup:
    """One constraint site on the flag page: what it does, when, the flags it reads and
    affects, its full condition, its code and its citation."""
    card = constraint_card_body(c, lines, version) + constraint_card_tail(c, flag)
    return Markup(with_anchor(card, c))


# What a constraint card shows apart from its citation: the same on every flag page that
# cites the site (app/views/flags.py keeps it per site and KB stamp).
CARD_FIELDS = (
    "kind", "function", "plain", "message", "writes", "flags", "affects", "condition",
    "conditions",
)  # fmt: skip


def constraint_card_tail(c: Any, flag: str) -> str:
    """The card's citation (its Markdown names `flag`, the message, the version and the
    card's permalink) and its end."""
    c = _d(c)
    md = md_constraint_share(c, flag)
    return f"  <p>{cite(c['source'], md=md, links=True)}</p>\n</div>"


def with_anchor(card: str, c: Any) -> str:
    """A card (its body starts `<div class="constraint`) with its anchor, the fragment of
    the site's `url`, as its id and a link to itself in its head."""
    anchor = _e(str(_d(c).get("url") or "").partition("#")[2])
    if not anchor:
        return card
    card = card.replace('<div class="constraint', f'<div id="{anchor}" class="constraint', 1)
    return card.replace(
        "</p>\n",
        f' <a class="self" href="#{anchor}" aria-label="Link to this constraint" '
        'title="Link to this constraint">#</a></p>\n',
        1,
    )


def constraint_card_body(c: Any, lines: Sequence[Mapping[str, Any]] | None, version: Any) -> str:
    """The card up to its citation: reads CARD_FIELDS of `c`, `lines` and `version.name`."""
    c = _d(c)
    kind = _e(c["kind"])
    out = [
        f'<div class="constraint kind-{kind}">\n'
        f'  <p class="head"><span class="badge kind">{kind}</span> in '
        f"<code>{_e(c['function'])}</code></p>\n"
    ]
    out.append(
        f'<p class="plain">when {_e(c["plain"])}</p>'
        if c["plain"]
        else '<p class="plain">always</p>'
    )
    if c["message"]:
        out.append(f'<p class="message">“{_e(c["message"])}”</p>')
    if c["writes"]:
        sets = ", ".join(f"<code>{_e(k)} = {_e(v)}</code>" for k, v in c["writes"].items())
        out.append(f"<p>sets {sets}</p>")
    out.append('  <p class="flags-line">\n')
    if c["flags"]:
        out.append("reads " + "".join(f"{flag_link(version, n)} " for n in c["flags"]))
    if c["affects"]:
        out.append("· affects " + "".join(f"{flag_link(version, n)} " for n in c["affects"]))
    out.append("  </p>\n")
    if c["condition"]:
        parts = "".join(
            f'<li><code class="cond">{_e(p)}</code></li>'
            for p in c["conditions"] or [c["condition"]]
        )
        out.append(
            '<details class="cond-path"><summary>Full condition</summary>\n'
            f"    <ol>{parts}</ol></details>"
        )
    if lines:
        out.append(
            f'<details class="code-toggle"><summary>Code</summary>{excerpt(lines)}</details>'
        )
    return "".join(out)


def usage_rows(sites: Sequence[int], usages: Sequence[Any]) -> Markup:
    """The rows of one file's reads on the flag page (`sites` index into `usages`)."""
    out = []
    for i in sites:
        s = _d(usages[i])
        out.append(
            f'<tr><td class="ln"><a href="{_e(s["permalink"])}">{s["line"]}</a></td>'
            f'<td class="src">{_e(s["text"])}</td><td class="acts"><a class="gh" '
            f'href="{_e(s["url"])}" rel="noopener noreferrer">GitHub</a></td></tr>\n'
        )
    return Markup("".join(out))


def indirect_rows(sites: Sequence[Any]) -> Markup:
    """The rows of one file's reads through a chain on the flag page."""
    out = []
    for s in map(_d, sites):
        out.append(
            f'<tr><td class="ln"><a href="{_e(s["permalink"])}">{s["line"]}</a></td>'
            f'<td class="src">{_e(s["text"])}<br>{via(s["steps"])}</td><td class="acts">'
            f'<a class="gh" href="{_e(s["url"])}" rel="noopener noreferrer">GitHub</a>'
            "</td></tr>\n"
        )
    return Markup("".join(out))


def indirect_files(groups: Sequence[tuple[str, Sequence[Any]]], version: Any) -> Markup:
    """The flag page's reads through a chain, one fold per file (the first five open)."""
    q = quoted(version.name, "")
    out = []
    for i, (path, sites) in enumerate(groups, 1):
        p = _e(path)
        out.append(
            f'  <details class="usage-file"{" open" if i <= 5 else ""}>\n'
            f'    <summary><code>{p}</code> <span class="muted">{len(sites)}</span></summary>\n'
            f'    <a class="file-link" href="/v/{q}/source/{p}">whole file</a>\n'
            '    <div class="excerpt" tabindex="0"><table class="code usages"><tbody>\n'
            f"{indirect_rows(sites)}    </tbody></table></div>\n"
            "  </details>\n"
        )
    return Markup("".join(out))


def series(names: Sequence[str]) -> list[tuple[str, list[str]]]:
    """Version names grouped for the picker, order kept: one group per release series
    (v0.5.2rc0 and v0.5.6.post1 both in "v0.5"), snapshots in a group of their own."""
    return [(label, list(group)) for label, group in _series(tuple(names))]


@lru_cache(maxsize=64)
def _series(names: tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    groups: dict[str, list[str]] = {}
    for name in names:
        match = re.match(r"v?(\d+)\.(\d+)", name)
        if name.startswith("snapshot"):
            label = "Snapshots"
        elif match:
            label = f"v{match[1]}.{match[2]}"
        else:
            label = "Other"
        groups.setdefault(label, []).append(name)
    return tuple((label, tuple(group)) for label, group in groups.items())


def version_options(versions: Sequence[str], current: str, absent: Iterable[str] | None) -> Markup:
    """The <optgroup>s of the version switcher (every page): one per release series. Made
    once per (versions, current, absent): the pages of a version's flags share a few."""
    return Markup(_version_options(tuple(versions), current, frozenset(absent or ())))


@lru_cache(maxsize=512)
def _version_options(versions: tuple[str, ...], current: str, absent: frozenset[str]) -> str:
    out = []
    for label, names in _series(tuple(versions)):
        out.append(f'        <optgroup label="{_e(label)}">\n')
        for name in names:
            n = _e(name)
            selected = " selected" if name == current else ""
            gone = " (absent)" if name in absent else ""
            out.append(f'          <option value="{n}"{selected}>{n}{gone}</option>\n')
        out.append("        </optgroup>\n")
    return "".join(out)


def flag_badges(f: Any) -> Markup:
    """Deprecated, hidden, how many choices and constraints (a list item's badges)."""
    f = _d(f)
    out = []
    if f["deprecated"]:
        out.append('<span class="badge warn">deprecated</span>')
    if f["hidden"]:
        out.append('<span class="badge">hidden</span>')
    if f["choices"]:
        out.append(f'<span class="badge">{len(f["choices"])} choices</span>')
    count = f["constraint_count"]
    if count:
        plural = "s" if count != 1 else ""
        out.append(f'<span class="badge info">{_e(count)} constraint{plural}</span>')
    return Markup("".join(out))


def flag_items(flags: Iterable[Any]) -> Markup:
    """The <li>s of a section of the flags list: synopsis, badges, the help's first line."""
    out = []
    for flag in flags:
        f = _d(flag)
        text = f'<p class="help">{_e(first_line(f["help"]))}</p>' if f["help"] else ""
        out.append(
            f'      <li>\n        <a class="syn" href="{_e(f["url"])}"><code>{_e(synopsis(f))}'
            f"</code></a>\n        {flag_badges(f)}\n{text}      </li>\n"
        )
    return Markup("".join(out))


def constraint_rows(constraints: Sequence[Any], version: Any) -> Markup:
    """The <tr>s of the constraints list (one per site; a row saying so when none)."""
    if not constraints:
        return Markup('  <tr><td colspan="4" class="empty">No constraint matches.</td></tr>\n')
    out = []
    for site in constraints:
        c = _d(site)
        kind = _e(c["kind"])
        what = [f'<code class="cond">{_e(c["condition"])}</code>' if c["condition"] else ""]
        if c["message"]:
            what.append(f'<p class="message">“{_e(c["message"])}”</p>')
        if c["writes"]:
            sets = ", ".join(f"<code>{_e(k)} = {_e(v)}</code>" for k, v in c["writes"].items())
            what.append(f"<p>sets {sets}</p>")
        names = c["flags"] or c["affects"]
        md = md_constraint_share(c, names[0]) if names else None
        anchor = _e(str(c.get("url") or "").partition("#")[2])
        row_id = f' id="{anchor}"' if anchor else ""
        links = "".join(f"{flag_link(version, n)} " for n in c["flags"])
        if c["affects"]:
            arrow = "".join(f"{flag_link(version, n)} " for n in c["affects"])
            links += f'<span class="muted">→</span> {arrow}'
        out.append(
            f'  <tr{row_id} class="kind-{kind}">\n'
            f'    <td><span class="badge kind">{kind}</span></td>\n'
            f'    <td><code class="fn">{_e(c["function"])}</code><br>'
            f"{cite(c['source'], md=md, links=md is not None)}</td>\n"
            f"    <td>{''.join(what)}</td>\n"
            f"    <td>{links}</td>\n"
            "  </tr>\n"
        )
    return Markup("".join(out))


_ON = '<td class="on">✓<span class="visually-hidden"> a choice</span></td>'
_OFF = (
    '<td class="off"><span aria-hidden="true">·</span>'
    '<span class="visually-hidden">not a choice</span></td>'
)


def grid_rows(rows: Iterable[Any]) -> Markup:
    """The rows of the flag page's choices × versions grid (a cell per run of versions)."""
    out = []
    for row in map(_d, rows):
        cells = "".join(_ON if on else _OFF for on in row["cells"])
        out.append(f'    <tr><th scope="row"><code>{_e(row["value"])}</code></th>{cells}</tr>\n')
    return Markup("".join(out))


def graph_edges(g: Mapping[str, Any], flag: str) -> Markup:
    """The edges of the flag page's constraint graph (`flag_parts.constraint_graph`)."""
    x1, xm, x2 = g["x1"], g["xm"], g["x2"]
    mid = (x1 + xm) // 2
    me = _e(flag)
    out = []
    for e in map(_d, g["edges"]):
        label = _e(e["label"])
        count = e["count"]
        more = f" (opens the first of {count} sites)" if count > 1 else ""
        y1, y2 = e["y1"], e["y2"]
        out.append(
            f'      <a href="{_e(e["url"])}" class="edge k-{_e(e["kind"])}"><title>{me} – '
            f"{_e(e['flag'])}: {label}{more}</title>\n"
            f'        <path d="M{x1} {y1} C{mid} {y1} {mid} {y2} {xm} {y2} H{x2}"/>\n'
            f'        <text class="elabel" x="{xm + 6}" y="{y2 - 5}">{label}</text>\n'
            "      </a>\n"
        )
    return Markup("".join(out))


def graph_nodes(g: Mapping[str, Any], version: str) -> Markup:
    """The other flags of the constraint graph, bracketed when they have several edges."""
    x2 = g["x2"]
    out = []
    for n in map(_d, g["nodes"]):
        if n["y_last"] > n["y_first"]:
            out.append(f'<path class="bracket" d="M{x2} {n["y_first"]} V{n["y_last"]}"/>')
        at = f'x="{x2 + 8}" y="{n["y"] + 4}"'
        name = _e(n["name"])
        if n["known"]:
            out.append(f'<a href="{_e(n["url"])}" class="node"><text {at}>{name}</text></a>')
        else:
            out.append(f'<text class="node absent" {at}>{name} (not in {_e(version)})</text>')
    return Markup("".join(out))


def graph_edge_list(g: Mapping[str, Any]) -> Markup:
    """The graph's edges as a list of links (under the picture)."""
    out = []
    for e in map(_d, g["edges"]):
        sites = e["sites"]
        more = ""
        if len(sites) > 1:
            links = ", ".join(
                f'<a href="{_e(u)}" title="{_e(u.split("/source/", 1)[1])}">'
                f"{_e(u.rsplit('#', 1)[1])}</a>"
                for u in sites[:6]
            )
            rest = f", {len(sites) - 6} more under Constraints" if len(sites) > 6 else ""
            more = f' <span class="sites">({links}{rest})</span>'
        out.append(f'<li><a href="{_e(e["url"])}">{_e(e["flag"])}</a>: {_e(e["label"])}{more}</li>')
    return Markup("".join(out))


# --- the flag page's remaining loops (templates/flag.html calls these; each gives the bytes
# its Jinja loop gave: tests/test_fragments.py renders both over hostile strings) ---------


def toc_items(sections: Iterable[Any]) -> Markup:
    """The "On this page" <li>s (sub-entries for the constraint groups)."""
    out = []
    for s in map(_d, sections):
        sub = ' class="sub"' if s["id"].startswith("c-") else ""
        count = f' <span class="muted">{_e(s["count"])}</span>' if s["count"] is not None else ""
        out.append(f'<li{sub}><a href="#{_e(s["id"])}">{_e(s["title"])}</a>{count}</li>')
    return Markup("".join(out))


def choice_rows(rows: Iterable[Any], default: Any, with_enum: Any) -> Markup:
    """The choices table's rows: value (and whether it is the default), enum member, sites."""
    out = []
    for row in map(_d, rows):
        badge = ' <span class="badge">default</span>' if row["value"] == default else ""
        member = ""
        if with_enum:
            shown = (
                f"<code>{_e(row['member'])}</code>"
                if row["member"]
                else '<span class="muted">—</span>'
            )
            member = f'<td class="member">{shown}</td>'
        out.append(
            f'    <tr><td class="value"><a href="{_e(row["url"])}"><code>{_e(row["value"])}'
            f"</code></a>{badge}</td>\n{member}"
            f'      <td class="num">{_e(row["sites"])}</td></tr>\n'
        )
    return Markup("".join(out))


def constraint_groups(groups: Iterable[Any], cards: Sequence[Any], total: int) -> Markup:
    """The constraint sites by what they do, then by the value they test (`cards[i]` is the
    i-th site's card); every fold open when the flag has at most six sites."""
    opened = " open" if total <= 6 else ""
    out = []
    for g in map(_d, groups):
        effect = _e(g["effect"])
        out.append(
            f'  <section id="c-{effect}" class="cgroup effect-{effect}">\n'
            f"    <h3>{_e(g['title'])} <small>{_e(g['count'])}</small></h3>\n"
        )
        for v in map(_d, g["values"]):
            sites = v["sites"]
            plural = "s" if len(sites) != 1 else ""
            out.append(
                f'    <details class="vgroup"{opened}>\n'
                f'      <summary><span class="vlabel">{_e(v["label"])}</span> '
                f'<span class="muted">{len(sites)} site{plural}</span></summary>\n'
                + "".join(_e(cards[i]) for i in sites)
                + "    </details>\n"
            )
        out.append("  </section>\n")
    return Markup("".join(out))


def usage_areas(areas: Iterable[Any], usages: Sequence[Any]) -> Markup:
    """The reads by directory, then by file (a fold per file, open up to five reads)."""
    out = []
    for a in map(_d, areas):
        out.append(
            f'  <h3 class="area"><code>{_e(a["area"])}/</code> <small>{_e(a["count"])}'
            "</small></h3>\n"
        )
        for f in map(_d, a["files"]):
            sites = f["sites"]
            out.append(
                f'  <details class="usage-file"{" open" if len(sites) <= 5 else ""}>\n'
                f"    <summary><code>{_e(f['path'].rsplit('/', 1)[-1])}</code> "
                f'<span class="muted">{len(sites)}</span></summary>\n'
                f'    <a class="file-link" href="{_e(f["url"])}">whole file</a>\n'
                '    <div class="excerpt" tabindex="0"><table class="code usages"><tbody>\n'
                f"{usage_rows(sites, usages)}    </tbody></table></div>\n"
                "  </details>\n"
            )
    return Markup("".join(out))


def grid_columns(columns: Iterable[Any]) -> Markup:
    """The choice grid's column heads: the first version of each run (and its last)."""
    out = []
    for c in map(_d, columns):
        until = (
            f'<br><span class="muted">to <code>{_e(c["until"])}</code></span>'
            if c["until"] != c["version"]
            else ""
        )
        out.append(
            f'<th scope="col"><a href="{_e(c["url"])}"><code>{_e(c["version"])}</code></a>'
            f"{until}</th>"
        )
    return Markup("".join(out))
