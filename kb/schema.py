"""The knowledge base schema: the one contract between ingest/ (writes) and app/ (reads).

Every per-version fact row carries ``version_id``; the big per-version tables are views over
facts stored once and thin per-version locations (kb/factored.py). JSON columns hold small
lists/dicts as text so the schema stays portable across SQLAlchemy backends. Blob text is
stored once per git blob sha (zstd, most as a delta against the previous text of the same path),
and ``VersionFile`` maps a version's cited paths to blobs, the way Bootlin's Elixir indexes
blobs rather than trees.
"""

from __future__ import annotations

import functools
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    Index,
    LargeBinary,
    MetaData,
    event,
    inspect,
    text,
)
from sqlmodel import Column, Field, Session, SQLModel, create_engine

from kb.codec import (  # noqa: F401 (the codec's names, for readers of the schema)
    CHAIN_BYTES,
    LEVEL,
    MAX_FACTS_CHAIN,
    MAX_READ_CHAIN,
    MAX_TEXT_CHAIN,
    SMALL,
    pack,
    unpack,
    unpack_chain,
)
from kb.factored import VIEW_NAMES, create_views, forget, tables

# Bump when extraction output changes: versions ingested by an older extractor are redone.
EXTRACTOR_VERSION = 56

# Bump when the tables change. The knowledge base is derived data: a database of another
# schema is rebuilt (`flagatlas ingest --rebuild`), never migrated. 1 = before the meta table.
SCHEMA_VERSION = 11  # 3: indirectusage, modelfile, choicesite.basis; 4: zstd delta blobs;
# 5: facts stored once (kb/factored.py); 6: delta chains (Blob.depth), checksummed frames,
# versionfile WITHOUT ROWID; 7: envvar.conversion; 8: envvar.fallback; 9: flag.known_values;
# 10: choicesite.above; 11: doccommand, doccheck

DEFAULT_DB = "data/flagatlas.db"


class Version(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True)  # tag or --ref label
    commit: str
    date: datetime  # commit date (UTC)
    # PEP 440 labels sort by version; others are placed among them by commit date.
    # `position` is that total order (0 = oldest), recomputed whenever a version is added.
    sort_key: str
    position: int = Field(default=0, index=True)
    era: int  # 1 = argparse 2024, 2 = argparse + choices constants/hooks, 3 = dataclass A[...]
    extractor_version: int
    web_url: str  # where citations link, e.g. https://github.com/sgl-project/sglang
    report: str = "{}"  # JSON: {"counts": {...}, "warnings": [{"path","line","what"}], "seconds"}
    ingested_at: datetime = Field(default_factory=lambda: datetime.now(UTC))


class Flag(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    version_id: int = Field(foreign_key="version.id", index=True)
    name: str  # canonical option, "--moe-runner-backend"
    dest: str  # the ServerArgs field the value lands in ("tp_size")
    # argparse's own dest ("tensor_parallel_size"; from_cli_args copies it into `dest`)
    argparse_dest: str | None = None
    aliases: str = "[]"  # JSON list of other option strings
    type: str | None = None  # "str", "int", "float", "bool", or source text of a callable
    default: str | None = None  # JSON of the value: a literal, or folded from default_expr
    default_expr: str | None = None  # source text when the default is not a literal
    choices: str | None = None  # JSON list, null when the flag takes any value
    choices_const: str | None = None  # e.g. "MOE_RUNNER_BACKEND_CHOICES"
    choices_extensible: bool = False  # an add_*_choices() hook can extend the constant
    choices_dynamic: bool = False  # choices computed at run time: the list may be partial
    # JSON list of the values the code knows for a flag without choices (--speculative-algorithm,
    # --model-impl: kb.contract.Flag): an open set, null for every other flag.
    known_values: str | None = None
    help: str = ""
    hidden: bool = False  # help=argparse.SUPPRESS
    action: str | None = None
    nargs: str | None = None  # as argparse gets it, also when a custom Action sets it
    # Whether the option consumes argument(s): false for store_true-style actions, nargs=0
    # classes and BooleanOptionalAction. Explain decides arity from this and nargs.
    takes_value: bool | None = None
    negation: str | None = None  # "--no-x" added by argparse.BooleanOptionalAction
    required: bool = False
    const: str | None = None  # JSON or source text
    deprecated: bool = False
    deprecated_message: str | None = None
    replacement: str | None = None  # option that replaces it, e.g. "--dsa-prefill-backend"
    # soft: "(Deprecated)" in the help, plain action | warns: the action warns and stores or
    # ignores | raises: the action's __call__ raises, so the server refuses to start
    deprecated_kind: str | None = None
    action_error: str | None = None  # the message an action that raises gives
    action_path: str | None = None  # where the custom action class (or its raise) is
    action_line: int | None = None
    section: str | None = None
    path: str
    line: int
    end_line: int

    __table_args__ = (Index("ix_flag_version_name", "version_id", "name"),)


class Option(SQLModel, table=True):
    """Every name a flag answers to in a version, so "a flag by any of its names" is one
    probe of (version_id, key). A dest spelled like its option adds no row: the option's row
    answers for it. Derived from Flag rows by kb.relations.write_relations."""

    id: int | None = Field(default=None, primary_key=True)
    version_id: int = Field(foreign_key="version.id")
    key: str  # name_key(name): "pp_size" for --pp-size and for pp_size
    flag_id: int = Field(index=True)  # flag.id (a view: no foreign key)
    name: str  # as spelled: "--pp-size", "pp_size"
    kind: str  # option | alias | dest | argparse_dest | deprecated_alias | negation

    __table_args__ = (Index("ix_option_version_key", "version_id", "key"),)


class Enum(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    version_id: int = Field(foreign_key="version.id", index=True)
    name: str
    path: str
    line: int
    end_line: int
    members: str = "[]"  # JSON [{"name", "value", "line"}]
    flags: str = "[]"  # JSON list of linked options


class ConstraintSite(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    version_id: int = Field(foreign_key="version.id", index=True)
    kind: str  # raise | assert | override | warning
    function: str  # "ServerArgs._handle_a2a_moe" or "handle_speculative_decoding"
    condition: str = ""  # the enclosing conditions ANDed (kb.pyast.and_all: an `or` bracketed)
    conditions: str = "[]"  # JSON list of condition source texts, outermost first
    message: str = ""
    flags: str = "[]"  # JSON options read in the conditions (and the assert test)
    affects: str = "[]"  # JSON options written (override) or checked
    writes: str = "{}"  # JSON {dest: value source text} for overrides
    key: str = ""  # line-independent fingerprint, to match the site across versions
    path: str
    line: int
    end_line: int


class ConstraintFlag(SQLModel, table=True):
    """The flags a constraint site reads (its conditions) or affects (writes, checks): what
    the constraints filter and the flag page query. The JSON lists on ConstraintSite stay as
    the API's ordered copy."""

    __tablename__ = "constraint_flag"
    id: int | None = Field(default=None, primary_key=True)
    constraint_id: int = Field(index=True)  # constraintsite.id (a view: no foreign key)
    version_id: int = Field(foreign_key="version.id")
    flag_id: int | None = Field(default=None, index=True)  # flag.id
    option: str | None = None  # only when the version defines no flag of that name
    role: str  # reads | affects


class UsageSite(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    version_id: int = Field(foreign_key="version.id")
    dest: str
    access: str = "read"  # read | write
    path: str
    line: int
    text: str

    __table_args__ = (Index("ix_usage_version_dest", "version_id", "dest"),)


class ChoiceSite(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    version_id: int = Field(foreign_key="version.id")
    value: str
    flag: str | None = None  # the option it is attributed to; None when ambiguous
    candidates: str = "[]"  # JSON options that accept this value (when ambiguous)
    how: str  # compare | contains | enum | is_call | registry | dispatch
    # why it is attributed to `flag`: subject | enum | type | parameter | only-flag | family
    # ("" if not)
    basis: str = ""
    path: str
    line: int  # the operator's line
    text: str
    # lines above `line` that `text` joins (the compared expression starts there): the
    # citation spans line - above .. line
    above: int = 0

    __table_args__ = (Index("ix_choice_version_value", "version_id", "value"),)


class EnvVar(SQLModel, table=True):
    """An environment variable of a version: declared in environ.py, or read by the code."""

    id: int | None = Field(default=None, primary_key=True)
    version_id: int = Field(foreign_key="version.id", index=True)
    name: str  # "SGLANG_ENABLE_JIT_DEEPGEMM"
    declared: bool = False  # declared in environ.py (Envs), not only read somewhere
    type: str | None = None  # bool | int | float | str | tuple, else unknown
    default: str | None = None  # JSON of the value when it is static
    default_expr: str | None = None  # source text when it is not
    # JSON {"name", "default", "reads"} of a default read from another variable
    # (`os.environ.get("A", os.environ.get("B", "x"))`); "reads" false when it is only B's
    # declared default (`envs.B.default`)
    fallback: str | None = None
    deprecated_names: str = "[]"  # JSON names still read in its place (EnvBoolWithAlias)
    # for a deprecated name: the variable or --flag replacing it (`--flag=value` when the
    # warning names the value)
    replacement: str | None = None
    # JSON of how SGLang converts the value it copies to the replacement variable
    # (ingest/environ_decls.py `_Deprecation.conversion`: {"expr", "cast", "op", "by"}, or
    # {"expr"} when not worked out); null when it copies it as it is
    conversion: str | None = None
    comment: str = ""  # the comment on or above the declaration
    section: str | None = None  # the heading comment of its group in environ.py
    flags: str = "[]"  # JSON options whose handling reads or writes it
    reads: int = 0
    writes: int = 0
    path: str  # the declaration, else the first read
    line: int
    end_line: int

    __table_args__ = (Index("ix_envvar_version_name", "version_id", "name"),)


class EnvSite(SQLModel, table=True):
    """Where the code reads or writes an environment variable."""

    id: int | None = Field(default=None, primary_key=True)
    version_id: int = Field(foreign_key="version.id")
    name: str
    access: str = "read"  # read | write | check ("X" in os.environ)
    how: str  # environ.get | getenv | environ[] | get_bool_env_var | envs.get | literal | dict key
    default: str | None = None  # JSON of a literal default given at the read
    function: str = ""  # enclosing function, when known
    flags: str = "[]"  # JSON options read by the statement or its enclosing conditions
    path: str
    line: int
    end_line: int
    text: str

    __table_args__ = (Index("ix_envsite_version_name", "version_id", "name"),)


class DocEntry(SQLModel, table=True):
    """A flag or environment variable named in the version's hand-written docs."""

    id: int | None = Field(default=None, primary_key=True)
    version_id: int = Field(foreign_key="version.id", index=True)
    kind: str  # flag | env
    name: str  # the first name of the row, as written
    names: str = "[]"  # JSON all names of the row (`--tp-size`<br>`--tensor-parallel-size`)
    form: str = "option"  # option | dest (2024 bullets) | env
    description: str = ""
    default: str | None = None  # the Defaults cell, as text
    choices: str | None = None  # JSON list from the Options cell
    type: str | None = None  # "Type: int" in the Options cell
    path: str
    line: int


class DocCommand(SQLModel, table=True):
    """A launch command the version's Markdown/MDX files show (ingest/doc_commands.py)."""

    id: int | None = Field(default=None, primary_key=True)
    version_id: int = Field(foreign_key="version.id", index=True)
    path: str
    command: str  # as written, continuations joined, blanks collapsed
    line: int  # where the command starts


class DocCheck(SQLModel, table=True):
    """Explain's verdict on a version's distinct doc command (kb/doc_commands.py), stored by
    `flagatlas check-docs` after an ingest; a version without rows is checked on request."""

    id: int | None = Field(default=None, primary_key=True)
    version_id: int = Field(foreign_key="version.id", index=True)
    command: str
    status: str  # ok | rejected | fails | undecided
    findings: str = "[]"  # JSON [Finding]


class IndirectUsage(SQLModel, table=True):
    """A use of something that carries a flag's value (a global, an accessor, a function
    named for the feature), with the chain from the flag's read to it."""

    id: int | None = Field(default=None, primary_key=True)
    version_id: int = Field(foreign_key="version.id")
    dest: str
    path: str
    line: int
    text: str
    # JSON chain, first link first: ["IS_TBO_ENABLED", "is_tbo_enabled()", {"name":
    # "model_forward_maybe_tbo", "by_name": true}] (chain_steps); a definition named for the
    # feature that reads the carrier itself is {"name", "by_name": false}; a step in a
    # model file's code (a model class deriving from or holding the one before, a function
    # of the file) is {"name", "model": true} (chain_entry)
    via: str = "[]"

    __table_args__ = (Index("ix_indirect_version_dest", "version_id", "dest"),)


class ModelFile(SQLModel, table=True):
    """A model file of a version (python/sglang/srt/models/<name>.py) and its EntryClass."""

    id: int | None = Field(default=None, primary_key=True)
    version_id: int = Field(foreign_key="version.id", index=True)
    name: str  # "glm4_moe"
    path: str
    architectures: str = "[]"  # JSON EntryClass names


class VersionFile(SQLModel, table=True):
    """Cited files of a version: path -> blob sha."""

    # Clustered on its key: a rowid table would store every (version, path) twice.
    __table_args__ = {"sqlite_with_rowid": False}
    version_id: int = Field(foreign_key="version.id", primary_key=True)
    path: str = Field(primary_key=True)
    sha: str = Field(foreign_key="blob.sha")


class Blob(SQLModel, table=True):
    """A cited file's text: zstd of its UTF-8, or a zstd delta against the text of `base`
    (the previous blob of the same path, itself whole or a delta): see blob_text."""

    sha: str = Field(primary_key=True)
    text: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    base: str | None = None
    depth: int = 0  # deltas to undo to read it: 0 when whole, else the base's depth + 1


class BlobFacts(SQLModel, table=True):
    """Ingest cache: what the analyzer found in one blob, reused across versions and runs."""

    key: str = Field(primary_key=True)  # "{blob sha}:{analyzer kind}"
    analyzer_version: int
    facts: bytes = Field(sa_column=Column(LargeBinary, nullable=False))  # zstd JSON (pack)
    base: str | None = None  # the key whose facts JSON `facts` is a delta against
    depth: int = 0  # as Blob.depth


class Meta(SQLModel, table=True):
    """Facts about the database itself: {"schema_version": "2"}."""

    key: str = Field(primary_key=True)
    value: str


class SchemaMismatch(Exception):
    """The database holds a knowledge base of another schema (or none at all)."""


def database_url(db_path: str | None = None) -> str:
    """DATABASE_URL wins; else --db / FLAGATLAS_DB / data/flagatlas.db as SQLite."""
    if os.environ.get("DATABASE_URL") and not db_path:
        return os.environ["DATABASE_URL"]
    path = db_path or os.environ.get("FLAGATLAS_DB") or DEFAULT_DB
    return path if "://" in path else f"sqlite:///{path}"


def make_engine(url: str, readonly: bool = False) -> Engine:
    if url.startswith("sqlite:///") and not readonly:
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    if url.startswith("sqlite:///") and readonly:
        # Read-only URI: the web process can never write the knowledge base.
        path = Path(url.removeprefix("sqlite:///")).resolve()
        engine = create_engine(
            f"sqlite:///file:{path}?mode=ro&uri=true",
            connect_args={"check_same_thread": False},
        )
    elif url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False})
    else:
        # A reader's session sees one snapshot (PostgreSQL, MySQL), as SQLite's BEGIN below.
        options = {"isolation_level": "REPEATABLE READ"} if readonly else {}
        engine = create_engine(url, **options)  # type: ignore[arg-type]
    if url.startswith("sqlite"):

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            if not readonly:
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()
            if readonly:
                # Take BEGIN out of pysqlite's hands (it never begins before a SELECT)...
                dbapi_conn.isolation_level = None

        if readonly:

            @event.listens_for(engine, "begin")
            def _begin(conn: Any) -> None:
                # ...and begin on SQLAlchemy's: a session (one web request) then reads one
                # snapshot, never half of an ingest that commits meanwhile (SQLAlchemy's
                # pysqlite recipe for serializable reads).
                conn.exec_driver_sql("BEGIN")

    return engine


def create_schema(engine: Engine) -> None:
    tables()  # the factored tables join the metadata
    md = SQLModel.metadata
    md.create_all(engine, tables=[t for t in md.sorted_tables if t.name not in VIEW_NAMES])
    with engine.begin() as conn:
        create_views(conn)
        table = Meta.__table__  # type: ignore[attr-defined]
        if conn.execute(table.select().where(table.c.key == "schema_version")).first() is None:
            conn.execute(table.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))


def stored_schema(engine: Engine) -> int | None:
    """The schema version of the knowledge base in the database; None when it holds none."""
    tables = set(inspect(engine).get_table_names())
    if "version" not in tables:
        return None
    if "meta" not in tables:
        return 1
    with engine.connect() as conn:
        value = conn.execute(text("SELECT value FROM meta WHERE key = 'schema_version'")).scalar()
    return int(value) if value is not None and str(value).isdigit() else 1


def check_schema(engine: Engine, empty_ok: bool = False) -> None:
    """Raise SchemaMismatch (one line) unless the database holds this schema's knowledge base
    (or, with `empty_ok`, none yet)."""
    found = stored_schema(engine)
    if found == SCHEMA_VERSION or (found is None and empty_ok):
        return
    if found is None:
        raise SchemaMismatch("it holds no knowledge base")
    raise SchemaMismatch(
        f"it holds a knowledge base of schema {found}, this Flag Atlas reads schema "
        f"{SCHEMA_VERSION}"
    )


def drop_schema(engine: Engine) -> None:
    """Drop every table in the database, whatever its schema (for a rebuild)."""
    with engine.begin() as conn:
        for view in inspect(conn).get_view_names():
            conn.exec_driver_sql(f'DROP VIEW "{view}"')
    found = MetaData()
    found.reflect(engine)
    found.drop_all(engine)
    forget(engine)


# --- compact storage of texts and facts: kb.codec (zstd chains of deltas) ------------------


def pack_text(text: str) -> bytes:
    """A whole text, as stored in Blob.text with no base."""
    return pack(text.encode("utf-8", "surrogateescape"))


# The row and the bases it needs, newest first, in one statement (SQLite and PostgreSQL).
_CHAIN = text(
    "WITH RECURSIVE chain(text, base, n) AS ("
    " SELECT text, base, 0 FROM blob WHERE sha = :sha"
    " UNION ALL SELECT b.text, b.base, c.n + 1 FROM blob b JOIN chain c ON b.sha = c.base"
    f" WHERE c.n < {MAX_READ_CHAIN}) "
    "SELECT text, base FROM chain ORDER BY n"
)


def blob_text(conn: Session | Connection, sha: str) -> str | None:
    """The text of blob `sha` (its chain of bases undone), None when it or a base is missing.
    `conn`: a SQLModel Session or a SQLAlchemy Connection."""
    if isinstance(conn, Session):
        conn = conn.connection()
    rows = conn.execute(_CHAIN, {"sha": sha}).all()
    if not rows or rows[-1].base is not None:
        return None
    return unpack_chain([r.text for r in reversed(rows)]).decode("utf-8", "replace")


def loads(value: str | None) -> Any:
    """Decode a JSON column (None stays None)."""
    return None if value is None else json.loads(value)


def chain_steps(via: list[Any] | None) -> list[dict[str, Any]]:
    """An indirect read's stored chain as {"name", "by_name"} steps. A step is stored as its
    name, or as {"name", "by_name": true} when it is reached because its name spells the
    feature (`model_forward_maybe_tbo` for tbo) rather than through a call or an import
    ({"name", "by_name": false}: named so, but it reads the carrier itself)."""
    return [
        {"name": s["name"], "by_name": bool(s.get("by_name"))}
        if isinstance(s, dict)
        else {"name": s, "by_name": False}
        for s in via or []
    ]


def chain_entry(via: list[Any] | None) -> tuple[str, bool]:
    """The entry point of a stored chain and whether it is named for the feature: its last
    step in shared code (not stored {"name", "model": true}: a step in a model file's code),
    through which a model file reaches the flag; a class's method
    (`LayerScatterModes.init_new()`) gives the class. ("", False) when every step is in a
    model file's code (it reads the flag itself)."""
    steps = [s for s in via or [] if not (isinstance(s, dict) and s.get("model"))]
    if not steps:
        return "", False
    last = steps[-1]
    name = (last["name"] if isinstance(last, dict) else last).removesuffix("()")
    owner, dot, _member = name.partition(".")
    if dot and owner[:1].isupper() and owner.isidentifier():
        name = owner
    return name, isinstance(last, dict) and bool(last.get("by_name"))


def chain_names(via: list[Any] | None) -> list[str]:
    """The names of a stored chain's steps."""
    return [s["name"] if isinstance(s, dict) else s for s in via or []]


# One encoder for every call: json.dumps with options builds a new JSONEncoder each time.
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def dumps(value: Any) -> str:
    if not value and isinstance(value, list):
        return "[]"  # most JSON list columns are empty
    return _encode(value)


def option_to_dest(option: str) -> str:
    return option.lstrip("-").replace("-", "_")


@functools.lru_cache(maxsize=16384)  # the same few thousand names, ~60,000 calls an ingest
def name_key(name: str) -> str:
    """The lookup key of a flag name: case-insensitive, leading dashes stripped, `-` = `_`
    ("--PP-size", "pp_size" -> "pp_size")."""
    return name.strip().lstrip("-").lower().replace("-", "_")
