"""Search: a Whoosh index of the knowledge base, and ranked queries over it.

Most facts repeat unchanged across many versions, so the index holds each distinct fact once
(a flag with the same names, help and choices; a choice value of a flag; an enum; an enum
member; a constraint site by its fingerprint) with the list of version ids it holds for. A
query filters on that list, so answering at one version or across all costs the same.

The index lives beside the database (``data/flagatlas.db.search``), as a symlink to a build
directory. A rebuild writes a new directory and swaps the symlink atomically; a running server
notices the new target on its next query and reopens, while queries in flight finish on the
old files (kept until the build after next).

Ranking is explicit rather than left to BM25: exact option or dest, then alias, then prefix of
the name, then all query words starting name words, then fuzzy name words (typos), then text.
"""

from __future__ import annotations

import bisect
import functools
import gc
import hashlib
import heapq
import itertools
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote

from rapidfuzz import process
from rapidfuzz.distance import Levenshtein
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select
from whoosh import index as windex
from whoosh.analysis import Analyzer, StemmingAnalyzer, Token
from whoosh.codec.whoosh3 import W3Codec
from whoosh.fields import STORED, TEXT, Schema
from whoosh.lang.porter import stem
from whoosh.query import Or, Term
from whoosh.writing import SegmentWriter

from kb.dests import dest_rank
from kb.diff import constraint_fingerprint  # diff owns what "the same site" means
from kb.schema import (
    ConstraintSite,
    Enum,
    EnvVar,
    Flag,
    IndirectUsage,
    ModelFile,
    Version,
    loads,
    make_engine,
)

INDEX_FORMAT = 10  # bump when the stored facts change: older indexes are rebuilt on open
MAX_QUERY = 200  # characters kept from a query
MAX_TOKENS = 10  # words kept from a query
KIND_ORDER = {
    "flag": 0,
    "choice": 1,
    "member": 2,
    "enum": 3,
    "env": 4,
    "carrier": 5,
    "model": 6,
    "constraint": 7,
}
TIER_LABELS = ("exact", "alias", "prefix", "words", "fuzzy", "text")


class SearchError(Exception):
    """The index cannot be opened or built."""


class UnknownVersion(SearchError):
    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(f"unknown version {name!r}")
        self.name = name
        self.known = known


def _schema() -> Schema:
    # Names are looked up in memory (_Names, from the stored data); Whoosh only ranks words
    # of the text, by frequency (no positions: no phrase queries), which halves its cost.
    # Text words split at underscores, as query words are (`words`): "fp8" finds the help
    # of --kv-cache-dtype, which names "fp8_e4m3" and "fp8_e5m2".
    return Schema(text=TEXT(analyzer=Words(), phrase=False), data=STORED)


TEXT_WORD = r"[^\W_]+(?:\.?[^\W_]+)*"


# The chain's stemmer, with its cache (the same few thousand words in every text).
_stem = functools.lru_cache(maxsize=50_000)(stem)


class Words(Analyzer):
    """StemmingAnalyzer(expression=TEXT_WORD), whose tokens an index build makes in one
    pass: Whoosh's chain of four generators a token was a third of the index's CPU. The
    chain itself analyzes queries (its tokens are the same: tests/test_search.py)."""

    def __init__(self) -> None:
        self.chain = StemmingAnalyzer(expression=TEXT_WORD)

    def __call__(self, value: str, mode: str = "", **kwargs: Any) -> Iterator[Token]:
        if mode != "index":
            return self.chain(value, mode=mode, **kwargs)  # type: ignore[no-any-return]
        return self._indexed(value)

    def _indexed(self, value: str) -> Iterator[Token]:
        """The chain's tokens of `value` as a document's text (Whoosh reads .text, .boost)."""
        tokenizer, _lower, stops, _stemmer = self.chain.items
        token = Token(removestops=True, mode="index")
        token.boost = 1.0
        for match in tokenizer.expression.findall(value):
            word = match.lower()
            if len(word) < stops.min or (stops.max is not None and len(word) > stops.max):
                continue
            if word in stops.stops:
                continue
            token.text = _stem(word)
            yield token


# --- text helpers -------------------------------------------------------------------------

_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_WORDS = re.compile(r"[a-z0-9]+")


def normalize(text: str) -> str:
    """`--Enable-NCCL-nvls`, `enable_nccl_nvls` and `enable nccl nvls` all read the same."""
    text = text.strip().lower().lstrip("-")
    return re.sub(r"[\s\-]+", "_", text)


def words(text: str) -> list[str]:
    """Lower-case words of a name or query; CamelCase and snake_case are split."""
    return _WORDS.findall(_CAMEL.sub(r"\1 \2", text).lower())


def highlight(text: str, terms: list[str]) -> list[tuple[str, bool]]:
    """Split `text` into (part, matched) pieces so a template can mark matches safely."""
    terms = sorted({t for t in terms if t}, key=len, reverse=True)
    if not terms or not text:
        return [(text, False)]
    pattern = re.compile("|".join(re.escape(t) for t in terms), re.IGNORECASE)
    parts: list[tuple[str, bool]] = []
    pos = 0
    for m in pattern.finditer(text):
        if m.start() > pos:
            parts.append((text[pos : m.start()], False))
        parts.append((m.group(0), True))
        pos = m.end()
    if pos < len(text):
        parts.append((text[pos:], False))
    return parts


def _shorten(text: str, limit: int = 180) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# --- building -----------------------------------------------------------------------------


def default_index_dir(db_url: str) -> Path:
    """FLAGATLAS_INDEX if set; else beside a SQLite database (DB.search); else, for a server
    database (PostgreSQL), one directory per database in the user's data directory:
    $XDG_DATA_HOME (default ~/.local/share)/flagatlas/DATABASE[@HOST][_PORT].search, the same
    whichever directory the ingest or the server starts from."""
    from sqlalchemy.engine import make_url

    if os.environ.get("FLAGATLAS_INDEX"):
        return Path(os.environ["FLAGATLAS_INDEX"])
    if db_url.startswith("sqlite:///"):
        return Path(db_url.removeprefix("sqlite:///") + ".search")
    url = make_url(db_url)
    where = (f"@{url.host}" if url.host else "") + (f"_{url.port}" if url.port else "")
    name = re.sub(r"[^\w.@-]", "_", f"{url.database or 'db'}{where}")
    data = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data) / "flagatlas" / f"{name}.search"


@dataclass
class _Doc:
    kind: str
    name: str
    flag: str | None
    keys: list[str]
    aliases: list[str]
    toks: list[str]
    text: str
    snippet: str
    deprecated: bool = False
    key: tuple[Any, ...] = ()
    versions: set[int] = field(default_factory=set)
    locs: dict[int, list[Any]] = field(default_factory=dict)
    fid: str = ""


# Facts of one kind are numbered together, in this order (see IndexBuild).
KINDS = {
    "flag": 0, "choice": 0, "enum": 1, "member": 1, "env": 2, "constraint": 3, "carrier": 4,
    "model": 5,
}  # fmt: skip
GROUPS = 6


def _versions(session: Session) -> list[dict[str, Any]]:
    return [
        {"id": v.id, "name": v.name, "position": v.position, "stamp": v.ingested_at.isoformat()}
        for v in session.exec(select(Version).order_by(col(Version.position))).all()
    ]


class IndexRows(NamedTuple):
    """One version's rows as the index reads them (the ingest hands over what it just wrote,
    instead of reading it back): flags as (version_id, name, dest, aliases, help, section,
    choices, deprecated, argparse_dest, negation), env vars as (version_id, name, type,
    default, default_expr, deprecated_names, replacement, comment, section, flags); JSON
    columns as the JSON text stored, in the order written; indirect reads as (version_id,
    dest, via); model files as (version_id, name, path, architectures)."""

    flags: Iterable[tuple[Any, ...]]
    enums: Iterable[EnumRow]
    env: Iterable[tuple[Any, ...]]
    sites: Iterable[SiteRow]
    indirect: Iterable[tuple[int, str, str]]
    models: Iterable[tuple[int, str, str, str]]


class EnumRow(NamedTuple):
    version_id: int
    name: str
    path: str
    members: str
    flags: str


class SiteRow(NamedTuple):
    version_id: int
    key: str
    kind: str
    function: str
    condition: str
    message: str
    flags: str
    affects: str
    path: str
    line: int
    end_line: int


def _each(session: Session, query: Any) -> Iterator[Any]:
    """The rows of `query`, executed when first iterated."""
    yield from session.connection().execute(query)


def _collect(
    session: Session,
    only: set[int] | None = None,
    docs: dict[tuple[Any, ...], _Doc] | None = None,
) -> dict[tuple[Any, ...], _Doc]:
    """Every distinct fact of the knowledge base (or of the versions `only`), with the ids of
    the versions it holds for, by key; added to `docs` (the facts of other versions)."""
    flag_cols: list[Any] = [
        Flag.version_id,
        Flag.name,
        Flag.dest,
        Flag.aliases,
        Flag.help,
        Flag.section,
        Flag.choices,
        Flag.deprecated,
        Flag.argparse_dest,  # argparse's own dest ("tensor_parallel_size"): searchable too
        Flag.negation,  # the --no-x of a BooleanOptionalAction
    ]
    # Plain rows, not ORM objects: every flag of every version passes here. In row order,
    # so facts are numbered alike whether indexed at once or version by version.
    flag_query = sa_select(*flag_cols).order_by(col(Flag.id))
    enum_table = Enum.__table__  # type: ignore[attr-defined]
    c = enum_table.c
    enums = sa_select(c.version_id, c.name, c.path, c.members, c.flags).order_by(c.id)
    site_table = ConstraintSite.__table__  # type: ignore[attr-defined]
    sites = sa_select(site_table).order_by(site_table.c.id)
    env_cols: list[Any] = [
        EnvVar.version_id,
        EnvVar.name,
        EnvVar.type,
        EnvVar.default,
        EnvVar.default_expr,
        EnvVar.deprecated_names,
        EnvVar.replacement,
        EnvVar.comment,
        EnvVar.section,
        EnvVar.flags,
    ]
    env = sa_select(*env_cols).order_by(col(EnvVar.id))
    iu = IndirectUsage
    indirect = sa_select(col(iu.version_id), col(iu.dest), col(iu.via)).order_by(col(iu.id))
    mf = ModelFile
    models = sa_select(
        col(mf.version_id), col(mf.name), col(mf.path), col(mf.architectures)
    ).order_by(col(mf.id))
    if only is not None:
        flag_query = flag_query.where(col(Flag.version_id).in_(only))
        enums = enums.where(c.version_id.in_(only))
        sites = sites.where(site_table.c.version_id.in_(only))
        env = env.where(col(EnvVar.version_id).in_(only))
        indirect = indirect.where(col(iu.version_id).in_(only))
        models = models.where(col(mf.version_id).in_(only))
    rows = IndexRows(
        _each(session, flag_query),
        _each(session, enums),
        _each(session, env),
        _each(session, sites),
        _each(session, indirect),
        _each(session, models),
    )
    return _collect_rows(rows, docs)


def _collect_rows(
    rows: IndexRows, docs: dict[tuple[Any, ...], _Doc] | None = None
) -> dict[tuple[Any, ...], _Doc]:
    """The facts of `rows` by key, added to `docs` (see _collect)."""
    docs = {} if docs is None else docs

    def known(key: tuple[Any, ...], vid: int) -> _Doc | None:
        """The fact if another version already had it (now held for `vid` too)."""
        doc = docs.get(key)
        if doc is not None:
            doc.versions.add(vid)
        return doc

    def new(key: tuple[Any, ...], vid: int, doc: _Doc) -> _Doc:
        doc.key = key
        doc.versions.add(vid)
        docs[key] = doc
        return doc

    option_of: dict[tuple[int, str], tuple[tuple[bool, bool], str]] = {}  # (vid, dest) -> flag
    for row in rows.flags:
        (
            vid,
            name,
            dest,
            aliases_j,
            help_,
            section,
            choices_j,
            deprecated,
            argparse_dest,
            negation,
        ) = row
        dests = [dest, *([argparse_dest] if argparse_dest and argparse_dest != dest else [])]
        rank = dest_rank(name, dest, deprecated)
        if (vid, dest) not in option_of or rank > option_of[vid, dest][0]:
            option_of[vid, dest] = (rank, name)
        choices = _choice_strings(choices_j)
        key = ("flag", *row[1:])
        if not known(key, vid):
            # Every name the flag answers to: its aliases and its --no-x.
            aliases = (loads(aliases_j) or []) + ([negation] if negation else [])
            new(
                key,
                vid,
                _Doc(
                    kind="flag",
                    name=name,
                    flag=name,
                    keys=[normalize(name), *(normalize(d) for d in dests)],
                    aliases=[normalize(a) for a in aliases],
                    toks=sorted({w for n in [name, *dests, *aliases] for w in words(n)}),
                    text=" ".join([help_, section or "", *choices]),
                    snippet=("(deprecated) " if deprecated else "") + _shorten(help_),
                    deprecated=deprecated,
                ),
            )
        for value in choices:
            if not known(("choice", name, value), vid):
                doc = _Doc(
                    kind="choice",
                    name=value,
                    flag=name,
                    keys=[normalize(value)],
                    aliases=[],
                    toks=words(value),
                    text=value,
                    snippet=f"a value of {name}",
                )
                new(("choice", name, value), vid, doc)

    for enum in rows.enums:
        vid = enum.version_id
        members = loads(enum.members) or []
        linked = loads(enum.flags) or []
        flag = linked[0] if linked else None
        key = ("enum", enum.name, enum.path, enum.members)
        if not known(key, vid):
            names = ", ".join(m["name"] for m in members[:12]) + ("…" if len(members) > 12 else "")
            doc = _Doc(
                kind="enum",
                name=enum.name,
                flag=flag,
                keys=[normalize(enum.name)],
                aliases=[],
                toks=words(enum.name),
                text=" ".join(str(m.get("value", "")) for m in members),
                snippet=f"enum in {enum.path}: {names}",
            )
            new(key, vid, doc)
        for m in members:
            value = m.get("value")
            key = ("member", enum.name, m["name"], repr(value))
            if not known(key, vid):
                doc = _Doc(
                    kind="member",
                    name=f"{enum.name}.{m['name']}",
                    flag=flag,
                    keys=[normalize(m["name"])]
                    + ([normalize(value)] if isinstance(value, str) else []),
                    aliases=[],
                    toks=words(m["name"]),
                    text=str(value or ""),
                    snippet=f"{enum.name}.{m['name']} = {value!r}",
                )
                new(key, vid, doc)

    _collect_env(rows.env, known, new)
    _collect_carriers(rows.indirect, {k: v[1] for k, v in option_of.items()}, known, new)
    _collect_models(rows.models, known, new)

    for site in rows.sites:
        vid = site.version_id
        key = ("constraint", constraint_fingerprint(site))  # type: ignore[arg-type]  # row ~ model
        fact = known(key, vid)
        if fact is None:
            flags = loads(site.flags) or []
            affects = loads(site.affects) or []
            fact = new(
                key,
                vid,
                _Doc(
                    kind="constraint",
                    name=_shorten(site.message or site.condition or site.function, 120),
                    flag=flags[0] if flags else None,
                    keys=[],
                    aliases=[],
                    toks=[],
                    text=" ".join([site.message, site.condition, site.function, *flags, *affects]),
                    snippet=_shorten(f"{site.kind} in {site.function}: if {site.condition}"),
                ),
            )
        # The line moves between versions; results link to the line at the version asked.
        fact.locs.setdefault(vid, [site.path, site.line, site.end_line])
    return docs


def _collect_env(rows: Iterable[tuple[Any, ...]], known: Any, new: Any) -> None:
    """Environment variables: found by name, deprecated name, or words of their comment."""
    for row in rows:
        vid, name, type_, default, default_expr, deprecated_j, replacement, comment, section = row[
            :9
        ]
        key = ("env", *row[1:])
        if known(key, vid):
            continue
        deprecated = loads(deprecated_j) or []
        flags = loads(row[9]) or []
        shown = default if default is not None else default_expr
        about = f"{type_ or 'untyped'} environment variable" + (
            f", default {shown}" if shown is not None else ""
        )
        if replacement:
            about = f"(deprecated, use {replacement}) " + about
        new(
            key,
            vid,
            _Doc(
                kind="env",
                name=name,
                flag=None,
                keys=[normalize(name)],
                aliases=[normalize(d) for d in deprecated],
                toks=sorted({w for n in [name, *deprecated] for w in words(n)}),
                text=" ".join([comment, section or "", *flags]),
                snippet=_shorten(f"{about}. {comment}" if comment else about),
                deprecated=bool(replacement),
            ),
        )


# A chain's steps that are carriers rather than model classes: globals (`IS_TBO_ENABLED`),
# functions and methods (`is_tbo_enabled()`, `SboFlags.enable_x()`), properties
# (`Fp4MoEMethod.enable_x`), lower-case definitions named for a feature
# (`model_forward_maybe_tbo`). CamelCase names (a subclass step, a holder class) and `self.x =
# …` steps are models', and would make every DeepSeek class a hit.
_CARRIER = re.compile(
    r"^(?:[A-Z][A-Z0-9_]*|[a-z_][a-z0-9_]*|[A-Za-z_][\w.]*\(\)|[A-Za-z_]\w*\.[a-z_]\w*)$"
)


def _collect_carriers(
    rows: Iterable[tuple[int, str, str]],
    option_of: dict[tuple[int, str], str],
    known: Any,
    new: Any,
) -> None:
    """The names that carry a flag's value onward (the steps of indirect reads' chains):
    searching `is_tbo_enabled` finds `--enable-two-batch-overlap` through them."""
    for vid, dest, via_j in rows:
        flag = option_of.get((vid, dest))
        if flag is None:
            continue
        for step in _carrier_steps(via_j):
            key = ("carrier", step, flag)
            if known(key, vid):
                continue
            bare = step.removesuffix("()")
            new(
                key,
                vid,
                _Doc(
                    kind="carrier",
                    name=step,
                    flag=flag,
                    keys=list(dict.fromkeys([normalize(bare), normalize(bare.rsplit(".", 1)[-1])])),
                    aliases=[],
                    toks=words(bare),
                    text=bare,
                    snippet=f"carries the value of {flag}: the flag's reads through a chain",
                ),
            )


@functools.lru_cache(maxsize=8192)  # the same chains come back in every version
def _carrier_steps(via_j: str | None) -> tuple[str, ...]:
    """The steps of a chain (its `via` JSON) that are carriers."""
    # (a step stored as a dict is a definition named for the feature, reached by its
    # name or by its own read: TboForwardBatchPreparer is one, a model class step not)
    steps = dict.fromkeys(
        (s["name"], True) if isinstance(s, dict) else (s, False) for s in loads(via_j) or []
    )
    return tuple(step for step, named in steps if named or _CARRIER.match(step))


@functools.lru_cache(maxsize=8192)  # most flags' choices are the same in every version
def _choice_strings(choices_j: str | None) -> tuple[str, ...]:
    return tuple(str(c) for c in loads(choices_j) or [])


# Words of architecture names that say what kind of head, not which model.
ARCH_WORDS = frozenset(
    {"for", "causal", "lm", "conditional", "generation", "model", "sequence"}
    | {"classification", "embedding", "reward", "multimodal", "vl", "vision"}
)


def _collect_models(rows: Iterable[tuple[int, str, str, str]], known: Any, new: Any) -> None:
    """Model files, found by file name or architecture (`deepseek_v2`, `DeepseekV3ForCausalLM`):
    each leads to its page, what configures it."""
    for vid, name, path, archs_j in rows:
        key = ("model", name, path, archs_j)
        if known(key, vid):
            continue
        archs = loads(archs_j) or []
        new(
            key,
            vid,
            _Doc(
                kind="model",
                name=name,
                flag=None,
                keys=[normalize(name)],
                aliases=[normalize(a) for a in archs],
                # an architecture is found whole (an alias) or by the words naming its
                # model, not by "for", "causal", "lm" that nearly every one ends with
                toks=sorted({w for n in [name, *archs] for w in words(n)} - ARCH_WORDS),
                text=" ".join(
                    ["model", *(w for a in archs for w in words(a) if w not in ARCH_WORDS)]
                ),
                snippet=_shorten(
                    f"model file {path}" + (f"; architectures: {', '.join(archs)}" if archs else "")
                ),
            ),
        )


def fact_id(key: tuple[Any, ...]) -> str:
    return hashlib.sha1(json.dumps(key, default=str).encode()).hexdigest()[:20]


def _previous_build(link: Path) -> tuple[Path, dict[str, Any], dict[str, Any]] | None:
    """The current build: (its directory, its meta, its facts), or None."""
    real = Path(os.path.realpath(link))
    if not link.is_symlink() or not _current_format(str(real)):
        return None
    try:
        meta = json.loads((real / "meta.json").read_text())
        facts = json.loads((real / "facts.json").read_text())
    except (OSError, ValueError):
        return None
    return real, meta, facts


def _link_or_copy(src: str, dst: str) -> None:
    if src.endswith((".seg", ".toc")):
        try:
            os.link(src, dst)
            return
        except OSError:  # another file system, or no hard links there
            pass
    shutil.copy2(src, dst)


class IndexBuild:
    """A build of the index in progress, in a directory of its own until `finish` swaps it in.

    The ingest calls `add` after writing each version, so its facts are indexed while the
    workers still analyze (no rebuild from every version after the last one); `finish` adds
    whatever other versions the database has, commits the Whoosh segments and swaps.
    With `incremental`, the build starts from a copy of the current one when the database
    only gained versions since it: then existing facts gain version ids in facts.json and
    new facts are appended to the Whoosh index. Anything else (a version re-ingested or
    removed, another index format) makes `finish` rebuild from scratch.
    """

    def __init__(self, session: Session, link: Path, incremental: bool = True) -> None:
        started = time.perf_counter()
        self.link = link
        self.builds = link.parent / (link.name + ".d")
        self.builds.mkdir(parents=True, exist_ok=True)
        previous = _previous_build(link) if incremental else None
        now = {v["id"]: v["stamp"] for v in _versions(session)}
        if previous is not None and any(
            now.get(v["id"]) != v.get("stamp") for v in previous[1]["versions"]
        ):
            previous = None
        self._start(previous)
        self.seconds = time.perf_counter() - started  # spent on the index (an ingest's part)

    def _start(self, previous: tuple[Path, dict[str, Any], dict[str, Any]] | None) -> None:
        self.target = self.builds / f"{time.time_ns():020d}-{os.getpid()}"  # sorts by time
        self.base: dict[int, str] = {}  # version id -> stamp, of the build started from
        self.facts: dict[str, dict[str, Any]] = {}
        if previous is not None:
            # Whoosh never rewrites a segment or table of contents in place (a commit writes
            # new ones), so those are hard-linked rather than copied; the rest is small.
            shutil.copytree(previous[0], self.target, copy_function=_link_or_copy)
            self.ix = windex.open_dir(str(self.target))
            self.base = {v["id"]: v["stamp"] for v in previous[1]["versions"]}
            self.facts = previous[2]
        else:
            self.target.mkdir()
            self.ix = windex.create_in(str(self.target), _schema())
        self.incremental = previous is not None
        self.indexed: set[int] = set(self.base)
        self.docs: dict[tuple[Any, ...], _Doc] = {}  # the facts of the versions added
        self.added = 0
        # New facts are numbered as a build from scratch numbers them (flags, enums, env,
        # constraints; each oldest version first): ties in the text ranking go to the lower
        # number, so answers do not depend on how the index was built. So each kind has a
        # segment of its own, written as versions come, and `finish` lists them in that
        # order. One process: Whoosh's multiprocess writer took more CPU in all, was not
        # faster on two cores, and its forked children each counted the ingest's memory again.
        # Posting blocks stored without zlib (each block says whether it is compressed): its
        # set-up for each of a few thousand small blocks cost more than the bytes saved.
        self.writers = [
            SegmentWriter(
                self.ix, limitmb=64, codec=W3Codec(compression=0), _lk=group == GROUPS - 1
            )
            for group in range(GROUPS)
        ]

    def add(self, session: Session, vids: set[int]) -> None:
        """Index the facts of the versions `vids` (a version indexed already is skipped)."""
        vids = vids - self.indexed
        if not vids:
            return
        started = time.perf_counter()
        self.indexed |= vids
        known = len(self.docs)
        _collect(session, vids, self.docs)
        self._write_new(known)
        self.seconds += time.perf_counter() - started

    def add_rows(self, vid: int, rows: IndexRows) -> None:
        """Index version `vid` from its rows as just written (`add`, without reading them
        back): the ingest's way."""
        if vid in self.indexed:
            return
        started = time.perf_counter()
        self.indexed.add(vid)
        known = len(self.docs)
        _collect_rows(rows, self.docs)
        self._write_new(known)
        self.seconds += time.perf_counter() - started

    def _write_new(self, known: int) -> None:
        """Give Whoosh the facts found since the first `known` (those it lacks)."""
        for d in itertools.islice(self.docs.values(), known, None):
            d.fid = fact_id(d.key)
            if d.fid in self.facts:
                continue  # indexed by the build this one started from
            self.added += 1
            self.writers[KINDS[d.kind]].add_document(
                text=d.text,
                data={
                    "fid": d.fid,
                    "kind": d.kind,
                    "name": d.name,
                    "flag": d.flag,
                    "keys": d.keys,
                    "aliases": d.aliases,
                    "toks": d.toks,
                    "snippet": d.snippet,
                    "deprecated": d.deprecated,
                },
            )

    def _commit(self) -> None:
        """Write the kinds' segments after the existing ones, in kind order, under one table
        of contents (the last writer's commit, which holds the lock). The others are finished
        with the steps SegmentWriter.commit takes for its own segment (the tests of the
        index's numbering and incremental builds would catch a Whoosh that changed them)."""
        *others, last = self.writers
        segments = []
        for writer in others:
            if writer._added:
                segments.append(writer._finalize_segment())
            else:
                writer._close_segment()
        last.commit(mergetype=lambda _writer, existing: [*existing, *segments])

    def cancel(self) -> None:
        for writer in self.writers:
            writer._close_segment()
        self.writers[-1]._finish()  # releases the lock
        self.ix.close()
        shutil.rmtree(self.target, ignore_errors=True)

    def finish(self, session: Session) -> dict[str, Any]:
        """Index the versions not indexed yet, commit, and swap the build in atomically.
        Returns {"path", "docs", "added", "incremental", "versions", "seconds"}."""
        started, seconds = time.perf_counter(), self.seconds
        versions = _versions(session)
        now = {v["id"]: v["stamp"] for v in versions}
        if any(now.get(vid) != stamp for vid, stamp in self.base.items()) or not (
            self.indexed <= now.keys()
        ):
            self.cancel()  # a version it holds was written again or removed meanwhile
            self._start(None)
        self.add(session, set(now))
        for d in self.docs.values():
            fact = self.facts.get(d.fid)
            locs = {str(k): v for k, v in d.locs.items()}
            if fact is None:
                self.facts[d.fid] = {"versions": sorted(d.versions), "locs": locs}
            else:  # indexed before: it now also holds for the new versions
                fact["versions"] = sorted(set(fact["versions"]) | d.versions)
                fact["locs"].update(locs)
        self._commit()
        self.ix.close()
        (self.target / "facts.json").write_text(json.dumps(self.facts, separators=(",", ":")))
        meta = {"format": INDEX_FORMAT, "versions": versions, "docs": len(self.facts)}
        (self.target / "meta.json").write_text(json.dumps(meta))
        previous = Path(os.path.realpath(self.link)) if self.link.is_symlink() else None
        # Atomic swap: a new symlink renamed over the old one.
        link = self.link
        tmp = link.parent / f".{link.name}.tmp-{os.getpid()}"
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        tmp.symlink_to(os.path.relpath(self.target, link.parent))
        if link.exists() and not link.is_symlink():
            shutil.rmtree(link)  # an index left by hand: replaced once, then swaps are atomic
        os.replace(tmp, link)
        # Keep the previous build for searchers still reading it; drop older ones (and any
        # a killed build left).
        for old in self.builds.iterdir():
            if old.resolve() not in (self.target.resolve(), previous):
                shutil.rmtree(old, ignore_errors=True)
        return {
            "path": str(link),
            "docs": len(self.facts),
            "added": self.added,
            "incremental": self.incremental,
            "versions": len(versions),
            "seconds": round(seconds + time.perf_counter() - started, 3),
        }


def build_index(
    db_url: str, index_dir: Path | None = None, incremental: bool = False
) -> dict[str, Any]:
    """(Re)build the search index of the database at `db_url` and swap it in atomically.

    Called by `flagatlas reindex` and a server finding no index (the ingest uses IndexBuild
    as it writes versions). With `incremental`, only the versions the current build lacks
    are indexed, when the database only gained versions since it. Returns {"path", "docs",
    "added", "incremental", "versions", "seconds"}.
    """
    link = Path(index_dir) if index_dir else default_index_dir(db_url)
    engine = make_engine(db_url, readonly=True)
    try:
        with Session(engine) as session:
            return IndexBuild(session, link, incremental).finish(session)
    finally:
        engine.dispose()


# --- querying -----------------------------------------------------------------------------


class _Names:
    """In-memory name lookups over the index's stored facts, built once per opened index:
    set operations in C instead of Whoosh's per-document Python matchers, so a keystroke
    costs a few set intersections whatever the query."""

    def __init__(self, docs: dict[int, dict[str, Any]]) -> None:
        self.exact: dict[str, set[int]] = {}
        self.alias: dict[str, set[int]] = {}
        self.words: dict[str, set[int]] = {}
        self.order: dict[int, tuple[int, bool, int, str, int, str]] = {}
        self.name_words: dict[int, list[str]] = {}
        keys: set[tuple[str, int]] = set()
        for n, d in docs.items():
            for k in d["keys"]:
                self.exact.setdefault(k, set()).add(n)
                keys.add((k, n))
            for a in d["aliases"]:
                self.alias.setdefault(a, set()).add(n)
                keys.add((a, n))
            for w in d["toks"]:
                self.words.setdefault(w, set()).add(n)
            # Flags before values before enums, deprecated last, then the shortest name.
            self.order[n] = (
                KIND_ORDER[d["kind"]],
                bool(d.get("deprecated")),
                len(words(d["name"])),
                d["name"],
                # The same value of several flags: the one that has held it longest first
                # (`flashinfer_cutlass` is the MoE runner's before it is the FP4 GEMM's).
                -len(d.get("versions", ())),
                d["flag"] or "",
            )
            self.name_words[n] = words(d["name"])
        self.keys = sorted(keys)
        self.vocab = sorted(self.words)

    def _prefixed(self, items: list[Any], prefix: str) -> list[Any]:
        lo = bisect.bisect_left(items, (prefix,) if isinstance(items[0], tuple) else prefix)
        out = []
        for item in items[lo:]:
            text = item[0] if isinstance(item, tuple) else item
            if not text.startswith(prefix):
                break
            out.append(item)
        return out

    def key_prefix(self, prefix: str) -> set[int]:
        return {n for _k, n in self._prefixed(self.keys, prefix)} if self.keys else set()

    def word_docs(self, token: str, fuzzy: set[str]) -> tuple[set[int], set[int]]:
        """(docs with a name word starting with token, docs with one within typo distance)."""
        exact: set[int] = set()
        if self.vocab:
            for w in self._prefixed(self.vocab, token):
                exact |= self.words[w]
        typo: set[int] = set()
        for w in fuzzy:
            typo |= self.words.get(w, set())
        return exact, typo


@dataclass
class _Open:
    path: str
    ix: Any
    searcher: Any
    versions: list[dict[str, Any]]
    by_name: dict[str, dict[str, Any]]
    by_id: dict[int, dict[str, Any]]
    analyzer: Any
    docs: dict[int, dict[str, Any]]  # docnum -> stored data, loaded once per opened index
    names: _Names
    allowed: dict[int, set[int]] = field(default_factory=dict)  # version id -> docnums

    def in_version(self, vid: int) -> set[int]:
        """Docnums of the facts that hold at a version (cached: the filter of every query)."""
        if vid not in self.allowed:
            self.allowed[vid] = {n for n, d in self.docs.items() if vid in d["versions"]}
        return self.allowed[vid]


def _current_format(path: str) -> bool:
    """An index is there and was written by this code's INDEX_FORMAT."""
    try:
        return bool(json.loads(Path(path, "meta.json").read_text())["format"] == INDEX_FORMAT)
    except (OSError, ValueError, KeyError):
        return False


class SearchIndex:
    """One index directory, reopened when the symlink is swapped. Thread-safe."""

    def __init__(self, link: Path, db_url: str | None = None) -> None:
        self.link = link
        self.db_url = db_url
        self._lock = threading.Lock()
        self._open: _Open | None = None

    def _current(self) -> _Open:
        real = os.path.realpath(self.link)
        if self._open is not None and self._open.path == real:
            return self._open
        if not _current_format(real):
            if self.db_url is None:
                raise SearchError("the search index is not built: run `flagatlas reindex`")
            try:
                build_index(self.db_url, self.link)
            except Exception as exc:  # read-only disk, empty database...
                raise SearchError(
                    f"the search index is not built ({exc}): run `flagatlas reindex`"
                ) from exc
            real = os.path.realpath(self.link)
        meta = json.loads(Path(real, "meta.json").read_text())
        ix = windex.open_dir(real)
        searcher = ix.searcher()
        versions = meta["versions"]
        facts = json.loads(Path(real, "facts.json").read_text())
        docs = {}
        for n, fields in searcher.reader().iter_docs():
            data = fields["data"]
            fact = facts[data["fid"]]
            data["versions"] = fact["versions"]
            data["locs"] = {int(k): v for k, v in fact["locs"].items()}
            docs[n] = data
        if self._open is not None:
            self._open.searcher.close()
        # The facts live as long as the index: keep the collector from rescanning them.
        gc.collect()
        gc.freeze()
        self._open = _Open(
            path=real,
            ix=ix,
            searcher=searcher,
            versions=versions,
            by_name={v["name"]: v for v in versions},
            by_id={v["id"]: v for v in versions},
            analyzer=ix.schema["text"].analyzer,
            docs=docs,
            names=_Names(docs),
        )
        return self._open

    def versions(self) -> list[str]:
        """Version names, newest first."""
        with self._lock:
            return [v["name"] for v in reversed(self._current().versions)]

    def search(self, q: str, version: str | None = None, limit: int = 20) -> dict[str, Any]:
        with self._lock:
            return _search(self._current(), q, version, limit)


_INDEXES: dict[str, SearchIndex] = {}
_INDEXES_LOCK = threading.Lock()


def get_index(db_url: str, index_dir: Path | None = None) -> SearchIndex:
    """The process-wide SearchIndex for a database (built on first use if missing)."""
    link = Path(index_dir) if index_dir else default_index_dir(db_url)
    key = str(link.absolute())
    with _INDEXES_LOCK:
        if key not in _INDEXES:
            _INDEXES[key] = SearchIndex(link, db_url)
        return _INDEXES[key]


def _fuzzy(token: str, vocab: list[str]) -> set[str]:
    """Name words within typo distance (1, or 2 for long words); none for short tokens."""
    if len(token) < 4:
        return set()
    maxd = 1 if len(token) < 7 else 2
    hits = process.extract(token, vocab, scorer=Levenshtein.distance, score_cutoff=maxd, limit=30)
    return {h[0] for h in hits}


def _url(kind: str, data: dict[str, Any], version: dict[str, Any]) -> str:
    v = quote(version["name"], safe="")
    if kind == "flag":
        return f"/v/{v}/flags/{quote(data['name'], safe='')}"
    if kind == "carrier":
        return f"/v/{v}/flags/{quote(data['flag'], safe='')}#indirect"
    if kind == "choice" and data["flag"]:
        return f"/v/{v}/backends/{quote(data['flag'], safe='')}/{quote(data['name'], safe='')}"
    if kind in ("enum", "member"):
        return f"/v/{v}/enums#enum-{quote(data['name'].split('.')[0], safe='')}"
    if kind == "env":
        return f"/v/{v}/env/{quote(data['name'], safe='')}"
    if kind == "model":
        return f"/v/{v}/models/{quote(data['name'], safe='')}"
    loc = data["locs"].get(version["id"]) or next(iter(data["locs"].values()), None)
    if loc:
        path, line, end = loc
        return f"/v/{v}/source/{quote(path)}#L{line}-L{end}"
    return f"/v/{v}/constraints"


def _ranges(ids: list[int], op: _Open) -> list[dict[str, str]]:
    """Consecutive runs of versions, as [{"from", "to"}] names (oldest first)."""
    held = set(ids)
    out: list[dict[str, str]] = []
    run: list[str] = []
    for v in op.versions:
        if v["id"] in held:
            run.append(v["name"])
        elif run:
            out.append({"from": run[0], "to": run[-1]})
            run = []
    if run:
        out.append({"from": run[0], "to": run[-1]})
    return out


def _ranked(
    op: _Open, norm: str, tokens: list[str], allowed: set[int] | None, need: int
) -> list[tuple[int, int]]:
    """[(docnum, tier)] best first, at least `need` long when there are that many matches.

    Tiers: 0 exact option/dest/value, 1 alias, 2 prefix of a name, 3 every query word starts
    a name word, 4 the same allowing typos, 5 some words in the name or the text (BM25)."""
    names = op.names

    def scoped(docs: set[int]) -> set[int]:
        return docs if allowed is None else docs & allowed

    fuzzy = {t: _fuzzy(t, names.vocab) for t in tokens}
    per_token = {t: names.word_docs(t, fuzzy[t]) for t in tokens}
    exact_words = set.intersection(*(scoped(per_token[t][0]) for t in tokens))
    typo_words = set.intersection(*(scoped(per_token[t][0] | per_token[t][1]) for t in tokens))
    tiers = [
        scoped(names.exact.get(norm, set())),
        scoped(names.alias.get(norm, set())),
        scoped(names.key_prefix(norm)) if len(norm) >= 2 else set(),
        exact_words,
        typo_words,
    ]

    def in_own_name(n: int) -> int:
        """Query words matched by the option itself (not only by its dest or aliases)."""
        own = names.name_words[n]
        return sum(1 for t in tokens if any(w.startswith(t) or w in fuzzy[t] for w in own))

    out: list[tuple[int, int]] = []
    seen: set[int] = set()
    for tier, docs in enumerate(tiers):
        docs = docs - seen
        seen |= docs
        for n in sorted(docs, key=lambda n: (names.order[n][0], -in_own_name(n), names.order[n])):
            out.append((n, tier))
        if len(out) >= need:
            return out

    # Tier 5: partial name matches and text, by how many query words they cover.
    cover: dict[int, set[str]] = {}
    for t in tokens:
        for n in scoped(per_token[t][0] | per_token[t][1]) - seen:
            cover.setdefault(n, set()).add(t)
    in_name = {n: len(ts) for n, ts in cover.items()}  # words matched in the name itself
    owner: dict[str, str] = {}
    for t in tokens:
        for a in op.analyzer(t, mode="query"):
            owner.setdefault(a.text, t)
    score: dict[int, float] = {}
    if owner:
        query = Or([Term("text", term) for term in owner])
        for hit in op.searcher.search(query, filter=allowed, limit=max(need, 50), terms=True):
            if hit.docnum in seen:
                continue
            score[hit.docnum] = hit.score
            for _field, term in hit.matched_terms():
                text = term.decode() if isinstance(term, bytes) else term
                if text in owner:
                    cover.setdefault(hit.docnum, set()).add(owner[text])
    rest = heapq.nsmallest(
        max(need - len(out), 0),
        cover,
        key=lambda n: (-len(cover[n]), -in_name.get(n, 0), -score.get(n, 0.0), names.order[n]),
    )
    return out + [(n, 5) for n in rest]


def _search(op: _Open, q: str, version: str | None, limit: int) -> dict[str, Any]:
    q = (q or "")[:MAX_QUERY]
    if not op.versions:
        return {"query": q, "version": None, "results": [], "message": "No versions ingested."}
    scope: dict[str, Any] | None
    if version == "all":
        scope = None
    elif version:
        if version not in op.by_name:
            raise UnknownVersion(version, [v["name"] for v in op.versions])
        scope = op.by_name[version]
    else:
        scope = op.versions[-1]
    out: dict[str, Any] = {
        "query": q,
        "version": "all" if scope is None else scope["name"],
        "results": [],
        "message": None,
    }
    norm = normalize(q)
    tokens = list(dict.fromkeys(words(q)))[:MAX_TOKENS]
    if not tokens:
        out["message"] = (
            "Type part of a flag name, a value or words from its help."
            if not q.strip()
            else "Nothing to search for in that query: use letters or digits."
        )
        return out

    allowed = None if scope is None else op.in_version(scope["id"])
    # Across all versions one flag is many facts (one per variant): rank more, then group.
    need = limit if scope is not None else limit * 20
    ranked = _ranked(op, norm, tokens, allowed, need)

    results: list[dict[str, Any]] = []
    grouped: dict[tuple[str, str, str | None], dict[str, Any]] = {}
    for docnum, tier in ranked:
        data = op.docs[docnum]
        if scope is None:
            key = (data["kind"], data["name"], data["flag"])
            if key in grouped:  # another fact of the same flag: merge its versions
                grouped[key]["_ids"].update(data["versions"])
                continue
            if len(results) >= limit:
                continue
            result: dict[str, Any] = {"_ids": set(data["versions"]), "_data": data}
            grouped[key] = result
        elif len(results) >= limit:
            break
        else:
            result = {"_data": data}
        result.update(
            kind=data["kind"],
            name=data["name"],
            version=None,
            url=None,
            snippet=data["snippet"],
            flag=data["flag"],
            match=TIER_LABELS[tier],
        )
        results.append(result)
    for r in results:
        data = r.pop("_data")
        if scope is None:
            ids = r.pop("_ids")
            r["versions"] = _ranges(sorted(ids), op)
            ver = op.by_id[max(ids, key=lambda i: op.by_id[i]["position"])]
        else:
            ver = scope
        r["version"] = ver["name"]
        r["url"] = _url(data["kind"], data, ver)
    out["results"] = results
    # Whole-query spellings first (longest wins), then words and the typos' corrections.
    fixes = {w for t in tokens for w in _fuzzy(t, op.names.vocab)}
    out["terms"] = [q.strip(), norm, norm.replace("_", "-"), *tokens, *sorted(fixes)]
    if not results:
        out["message"] = f"No match for {q.strip()!r}."
    return out
