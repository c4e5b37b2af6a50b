"""Building the search index: the knowledge base's distinct facts, written to a Whoosh index
in a directory of its own, swapped in atomically (kb/search.py answers queries over it).

Most facts repeat unchanged across many versions, so the index holds each distinct fact once
(a flag with the same names, help and choices; a choice value of a flag; an enum; an enum
member; a constraint site by its fingerprint and what it reads) with the list of version ids
it holds for. A fact is everything its document shows (an enum's flag, a check's function
and wording too), so whichever version indexes it first, the index is the same. A query
filters on that list, so answering at one version or across all costs the same.

The index is a symlink to a build directory. A rebuild writes a new directory and swaps the
symlink atomically; a running server notices the new target on its next query and reopens,
while queries in flight finish on the old files (kept until the build after next). The
ingest extends a build as it writes versions (IndexBuild).

How text becomes words (`normalize`, `words`, the `Words` analyzer) is defined here and
shared with the queries, which must split a query as the index split the facts.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import re
import shutil
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select
from whoosh import index as windex
from whoosh.analysis import Analyzer, StemmingAnalyzer, Token
from whoosh.codec.whoosh3 import W3Codec
from whoosh.fields import STORED, TEXT, Schema
from whoosh.lang.porter import stem
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

# Bump when the stored facts change, or the analyzer's class moves (Whoosh pickles it into the
# index): older indexes are rebuilt on open.
INDEX_FORMAT = 12


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


def _shorten(text: str, limit: int = 180) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# --- building -----------------------------------------------------------------------------


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
        # (the flag it links to is part of the fact, as for every kind: see the docstring)
        key = ("enum", enum.name, enum.path, enum.members, flag)
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
            key = ("member", enum.name, m["name"], repr(value), flag)
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
        # The same check in another function, or worded or linked otherwise, reads
        # otherwise in a result: another fact (each holds for the versions it reads so in).
        key = (
            "constraint",
            constraint_fingerprint(site),  # type: ignore[arg-type]  # row ~ model
            site.kind,
            site.function,
            site.condition,
            site.message,
            site.flags,
            site.affects,
        )
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
        # The line moves between versions; results link to the line at the version asked
        # (of two alike sites in a version, the first in the source).
        loc = [site.path, site.line, site.end_line]
        if vid not in fact.locs or loc < fact.locs[vid]:
            fact.locs[vid] = loc
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
        text = " ".join([comment, section or "", *flags])
        snippet = f"{about}. {comment}" if comment else about
        new(key, vid, _named("env", name, deprecated, text, snippet, bool(replacement)))


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
    # name or by its own read: TboForwardBatchPreparer is one, a model class step not; or a
    # step in a model file's code {"name", "model": true}, told apart as a bare step is)
    steps = dict.fromkeys(
        (s["name"], not s.get("model")) if isinstance(s, dict) else (s, False)
        for s in loads(via_j) or []
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
        # an architecture is found whole (an alias) or by the words naming its model, not by
        # "for", "causal", "lm" that nearly every one ends with
        text = " ".join(["model", *(w for a in archs for w in words(a) if w not in ARCH_WORDS)])
        snippet = f"model file {path}" + (f"; architectures: {', '.join(archs)}" if archs else "")
        new(key, vid, _named("model", name, archs, text, snippet, unnamed=ARCH_WORDS))


def _named(
    kind: str,
    name: str,
    others: list[str],
    text: str,
    snippet: str,
    deprecated: bool = False,
    unnamed: frozenset[str] = frozenset(),
) -> _Doc:
    """A fact found by its name or whole by one of `others` (an environment variable's
    deprecated names, a model file's architectures), and by their words less `unnamed`."""
    return _Doc(
        kind=kind,
        name=name,
        flag=None,
        keys=[normalize(name)],
        aliases=[normalize(o) for o in others],
        toks=sorted({w for n in [name, *others] for w in words(n)} - unnamed),
        text=text,
        snippet=_shorten(snippet),
        deprecated=deprecated,
    )


def is_current(path: str) -> bool:
    """An index is there and was written by this code's INDEX_FORMAT."""
    try:
        return bool(json.loads(Path(path, "meta.json").read_text())["format"] == INDEX_FORMAT)
    except (OSError, ValueError, KeyError):
        return False


def fact_id(key: tuple[Any, ...]) -> str:
    return hashlib.sha1(json.dumps(key, default=str).encode()).hexdigest()[:20]


def _previous_build(link: Path) -> tuple[Path, dict[str, Any], dict[str, Any]] | None:
    """The current build: (its directory, its meta, its facts), or None."""
    real = Path(os.path.realpath(link))
    if not link.is_symlink() or not is_current(str(real)):
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
        # Facts are numbered in the order this build meets them, which depends on the order
        # versions were indexed in: the queries never let the number decide (kb/search.py).
        # One process: Whoosh's multiprocess writer took more CPU in all, was not faster on
        # two cores, and its forked children each counted the ingest's memory again. Posting
        # blocks stored without zlib (each block says whether it is compressed): its set-up
        # for each of a few thousand small blocks cost more than the bytes saved.
        self.writer = SegmentWriter(self.ix, limitmb=64, codec=W3Codec(compression=0))

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
            self.writer.add_document(
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

    def cancel(self) -> None:
        self.writer.cancel()  # releases the lock
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
            locs = {str(k): v for k, v in d.locs.items()}  # (JSON's keys are strings)
            if fact is None:
                self.facts[d.fid] = {"versions": sorted(d.versions), "locs": locs}
            else:  # indexed before: it now also holds for the new versions
                fact["versions"] = sorted(set(fact["versions"]) | d.versions)
                fact["locs"].update(locs)
        self.writer.commit(merge=False)  # the segments of the build started from stay as they are
        self.ix.close()
        # Sorted keys: the file does not depend on the order the facts were met in.
        facts = json.dumps(self.facts, separators=(",", ":"), sort_keys=True)
        (self.target / "facts.json").write_text(facts)
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


def build_index(db_url: str, index_dir: Path, incremental: bool = False) -> dict[str, Any]:
    """(Re)build the search index of the database at `db_url` at `index_dir` (a symlink, see
    kb.search.default_index_dir) and swap it in atomically.

    Called by `flagatlas reindex` and a server finding no index (the ingest uses IndexBuild
    as it writes versions). With `incremental`, only the versions the current build lacks
    are indexed, when the database only gained versions since it. Returns {"path", "docs",
    "added", "incremental", "versions", "seconds"}.
    """
    link = Path(index_dir)
    engine = make_engine(db_url, readonly=True)
    try:
        with Session(engine) as session:
            return IndexBuild(session, link, incremental).finish(session)
    finally:
        engine.dispose()
