"""Search: ranked queries over the index kb/search_build.py writes.

Ranking is explicit rather than left to BM25: exact option or dest, then alias, then prefix of
the name, then all query words starting name words, then fuzzy name words (typos), then text.

An index lives beside its database (``data/flagatlas.db.search``): `default_index_dir`. A
server finding none, or one of another INDEX_FORMAT, builds it on first use.
"""

from __future__ import annotations

import bisect
import gc
import heapq
import json
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rapidfuzz import process
from rapidfuzz.distance import Levenshtein
from whoosh import index as windex
from whoosh.query import Or, Term

from kb.search_build import build_index, is_current, normalize, words

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


# --- querying -----------------------------------------------------------------------------


class _Names:
    """In-memory name lookups over the index's stored facts, built once per opened index:
    set operations in C instead of Whoosh's per-document Python matchers, so a keystroke
    costs a few set intersections whatever the query."""

    def __init__(self, docs: dict[int, dict[str, Any]], positions: dict[int, int]) -> None:
        self.exact: dict[str, set[int]] = {}
        self.alias: dict[str, set[int]] = {}
        self.words: dict[str, set[int]] = {}
        self.order: dict[int, tuple[int, bool, int, str, int, str, int, str]] = {}
        self.newest: dict[int, int] = {}  # the position of the newest version a fact holds at
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
            self.newest[n] = max((positions[v] for v in d.get("versions", ())), default=0)
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
                # Then the fact that holds at the newer version, and its id: a total order,
                # so no tie is left to the document numbers, which depend on the order the
                # versions were indexed in.
                -self.newest[n],
                d["fid"],
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
        if not is_current(real):
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
            names=_Names(docs, {v["id"]: v["position"] for v in versions}),
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
    """The page of a fact's result at `version` (one it holds at); a constraint's, at its
    line there."""
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
    loc = data["locs"].get(version["id"])
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
        # Every hit, not the best few: hits of equal score come in document number order,
        # so a cut among them would depend on how the index was built.
        for hit in op.searcher.search(query, filter=allowed, limit=None, terms=True):
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
                group = grouped[key]
                group["_ids"].update(data["versions"])
                if op.names.newest[docnum] > op.names.newest[group["_n"]]:
                    # The result links to the newest version: it reads as that version does.
                    group.update(_n=docnum, _data=data, snippet=data["snippet"])
                continue
            if len(results) >= limit:
                continue
            result: dict[str, Any] = {"_ids": set(data["versions"]), "_n": docnum, "_data": data}
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
            del r["_n"]
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
