"""The JSON contract of Flag Atlas: one Pydantic model per answer of the API.

docs/DESIGN.md lists the fields (they may be added, never renamed); docs/API.md shows each
route with its model. The app's JSON twins return these models (so /api/openapi.json
describes every body), its HTML pages render the same objects, and `flagatlas explain --json`
prints `ExplainResult`.

Conventions: a field whose default is None is an optional key, left out of the JSON when it
is None (e.g. a help change's `words`); every other field is always present. Fields named
after Python keywords (`from`) are declared as `from_` with the alias the JSON uses; models
also answer `model["from"]`, so templates and filters read them like the dicts they replace.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

# A literal value from the source (default, choice, enum member value): any JSON value.
Value = Any


class Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    def __getitem__(self, key: str) -> Any:
        """`model["from"]` as in a dict (templates index rows by their JSON names)."""
        name = _ALIASES.get(key, key)
        try:
            return getattr(self, name)
        except AttributeError:
            raise KeyError(key) from None


_ALIASES = {"from": "from_"}


def From(**kw: Any) -> Any:
    return Field(alias="from", **kw)


class Sparse(Model):
    """A model with optional keys (default None): they are left out of the JSON when None.
    Only these models pay for the Python hook; the others serialize in pydantic-core alone."""

    @model_serializer(mode="wrap")
    def _drop_unset_options(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        for name, key in _optional_keys(type(self)):
            if getattr(self, name) is None:
                data.pop(key, None)
        return data


_optional: dict[type, list[tuple[str, str]]] = {}


def _optional_keys(cls: type[BaseModel]) -> list[tuple[str, str]]:
    if cls not in _optional:
        _optional[cls] = [
            (name, field.alias or name)
            for name, field in cls.model_fields.items()
            if not field.is_required() and field.default is None
        ]
    return _optional[cls]


# --- shared shapes ---------------------------------------------------------------------------


class Citation(Model):
    """A line span of a file at a version: GitHub `url` at the commit, in-app `permalink`."""

    path: str
    line: int
    end_line: int
    url: str
    permalink: str


class Site(Citation):
    """A citation plus the cited line(s) as text."""

    text: str


class UsageSite(Site):
    access: str  # read | write | ...


class ChoiceSite(Site):
    """Code handling one choice value: attributed to `flag`, or ambiguous among `candidates`."""

    value: str
    flag: str | None
    attributed: bool
    candidates: list[str]
    how: str


class Link(Model):
    name: str
    url: str


class VersionLink(Model):
    version: str
    url: str


class Span(Model):
    """A run of consecutive versions, oldest first."""

    from_: str = From()
    to: str


class ErrorBody(Model):
    """Every error reply (400, 404, 405, 413, 422, 503): what went wrong, which URL segment
    (`kind`: version, flag, value, path, page, parameter, body, ...) and `name`, did-you-mean
    links, and the nearest versions where a missing flag exists."""

    detail: str
    kind: str
    name: str
    suggestions: list[Link]
    elsewhere: list[VersionLink]


# --- versions ------------------------------------------------------------------------------


class VersionInfo(Model):
    name: str
    commit: str
    date: str  # ISO 8601 commit date
    flags: int
    position: int  # 0 = oldest
    era: int
    url: str


class VersionList(Model):
    versions: list[VersionInfo]  # newest first


# --- flags ---------------------------------------------------------------------------------


class Flag(Model):
    name: str
    dest: str
    aliases: list[str]
    type: str | None
    default: Value
    default_expr: str | None  # the default's source text when it is not a literal
    choices: list[Value] | None
    choices_const: str | None
    choices_extensible: bool
    choices_dynamic: bool
    help: str
    hidden: bool
    action: str | None
    nargs: str | None
    required: bool
    deprecated: bool
    deprecated_message: str | None
    replacement: str | None
    # argparse's own dest ("tensor_parallel_size") beside `dest`, the ServerArgs field
    argparse_dest: str
    takes_value: bool | None  # whether the option consumes argument(s); null before issue 9
    negation: str | None  # "--no-x" added by argparse.BooleanOptionalAction
    deprecated_kind: str | None  # soft | warns | raises (the action refuses the flag)
    action_error: str | None  # the message of an action that raises
    action_source: Citation | None  # the custom action class, or its raise
    section: str | None
    url: str
    source: Citation


class FlagListItem(Flag):
    constraint_count: int  # constraint sites that read or affect the flag


class FlagList(Model):
    version: str
    q: str
    flags: list[FlagListItem]


class Constraint(Model):
    kind: str  # raise | assert | override | warning
    function: str
    condition: str
    conditions: list[str]
    message: str
    flags: list[str]  # read by the condition
    affects: list[str]  # written or checked
    writes: dict[str, str]  # dest -> value source, for overrides
    key: str
    source: Citation


class EnumMember(Sparse):
    name: str
    value: Value
    line: int | None = None


class Enum(Model):
    name: str
    values: list[Value]
    members: list[EnumMember]
    flags: list[str]
    source: Citation


class FieldChange(Sparse):
    """A flag's field from one version to the next (`field`: type, default, choices, help, ...)."""

    field: str
    from_: Value = From()
    to: Value
    added: list[Value] | None = None  # choices/aliases changes
    removed: list[Value] | None = None
    words: list[list[str]] | None = None  # help changes: [[op, text]], op in = - +
    message: str | None = None  # deprecation changes
    replacement: str | None = None


class Change(FieldChange):
    """One step of a flag's history: `field` is added | removed | renamed | a changed field."""

    version: str


class RelatedFlag(Model):
    name: str
    url: str
    known: bool  # a flag of this version


class FlagPage(Flag):
    version: str
    constraints: list[Constraint]
    usages: list[UsageSite]
    choice_counts: dict[str, int]
    choice_sites: dict[str, list[ChoiceSite]]
    enum: Enum | None
    history: list[Change]  # oldest first
    related: list[RelatedFlag]  # other flags named by its constraint sites


# --- enums, constraints, backends, source --------------------------------------------------


class EnumList(Model):
    version: str
    enums: list[Enum]


class ConstraintList(Model):
    version: str
    flag: str  # the filter as given
    kind: str  # the kind filter, "" when none or unknown
    constraints: list[Constraint]


class BackendValueRef(Model):
    value: str
    sites: int
    url: str


class BackendFlag(Model):
    flag: str
    url: str
    help: str
    enum: str | None
    choices_const: str | None
    values: list[BackendValueRef]


class BackendList(Model):
    version: str
    backends: list[BackendFlag]


class BackendValue(Model):
    version: str
    flag: str
    flag_url: str
    value: str
    choices: list[str]
    enum: str | None
    sites: list[ChoiceSite]


class Mark(Model):
    line: int
    end_line: int
    what: str  # flag | constraint | usage | choice
    label: str
    url: str


class SourceFile(Model):
    version: str
    path: str
    sha: str
    url: str
    text: str
    marks: list[Mark]


# --- diff ----------------------------------------------------------------------------------


class DiffSummary(Model):
    added: int
    removed: int
    renamed: int
    changed: int  # flags
    changes: int  # field changes
    constraints_added: int
    constraints_removed: int
    constraints_changed: int
    enums_changed: int
    env_added: int = 0
    env_removed: int = 0
    env_changed: int = 0  # variables with a changed field


class Rename(Model):
    from_: str = From()
    to: str
    via: str  # alias | dest | deprecated
    dest: str  # of the new flag


class FlagBrief(Model):
    name: str
    dest: str
    help: str
    url: str


class FlagChange(FieldChange):
    name: str  # the flag's name at `to`


class ConstraintChange(Model):
    from_: Constraint = From()
    to: Constraint
    condition: list[list[str]]  # word diff [[op, text]]


class MemberChange(Model):
    name: str
    from_: Value = From()
    to: Value


class EnumChange(Model):
    name: str
    added: list[str]
    removed: list[str]
    changed: list[MemberChange]
    source: Citation


class EnvChange(FieldChange):
    name: str  # the environment variable


class Diff(Model):
    from_: str = From()
    to: str
    backwards: bool  # `from` is newer than `to`
    summary: DiffSummary
    added: list[str]
    removed: list[str]
    added_flags: list[FlagBrief]
    removed_flags: list[FlagBrief]
    renamed: list[Rename]
    changed: list[FlagChange]
    constraints_added: list[Constraint]
    constraints_removed: list[Constraint]
    constraints_changed: list[ConstraintChange]
    enums_added: list[Enum]
    enums_removed: list[Enum]
    enums_changed: list[EnumChange]
    env_added: list[str] = []
    env_removed: list[str] = []
    env_changed: list[EnvChange] = []


# --- search --------------------------------------------------------------------------------


class SearchHit(Sparse):
    kind: Literal["flag", "choice", "member", "enum", "constraint"]
    name: str
    version: str
    url: str
    snippet: str
    flag: str | None
    match: str  # the rank tier: exact, alias, prefix, name words, fuzzy, text
    versions: list[Span] | None = None  # with version=all: where the hit holds


class SearchPage(Model):
    query: str
    version: str | None  # the scope searched: a name or "all"
    results: list[SearchHit]  # best first
    message: str | None  # why there is nothing, or a hint
    terms: list[str] = []  # the spellings that matched, for highlighting


# --- explain -------------------------------------------------------------------------------


class DeployProfile(Sparse):
    """A deployment profile: the model (architecture, or a pasted config.json), the
    hardware, and what to assume about package versions and environment variables."""

    arch: str | None = Field(None, max_length=200)
    quant: str | None = Field(None, max_length=100)
    platform: str | None = Field(None, max_length=20)  # cuda | rocm | npu | xpu | hpu | cpu
    sm: int | None = Field(None, ge=0, le=1000)
    gpus: int | None = Field(None, ge=0, le=100_000)
    nodes: int | None = Field(None, ge=0, le=100_000)
    packages: str = Field("assume-ok", max_length=20)  # assume-ok | unknown
    env: str = Field("assume-unset", max_length=20)  # assume-unset | unknown
    config: dict[str, Any] | str | None = None  # the model's config.json


class ExplainRequest(Model):
    version: str | None = Field(None, max_length=200)
    command: str
    compare: str | None = Field(None, max_length=200)
    profile: DeployProfile | None = None


class Fix(Sparse):
    """A change that makes an error pass, verified by simulating the fixed command."""

    add: list[str] | None = None  # e.g. ["--moe-a2a-backend deepep"]
    remove: list[str] | None = None  # switches to drop
    command: str
    verified: bool = True


class Finding(Sparse):
    severity: Literal["error", "warning", "info"]
    flag: str | None
    message: str
    source: Citation | None
    kind: str  # unknown_flag, invalid_choice, constraint, undecidable, deprecated, ...
    key: str | None = None  # the constraint site's key
    replacement: str | None = None
    deprecated_kind: Literal["soft", "warns", "raises"] | None = None  # on kind=deprecated
    candidates: list[str] | None = None
    suggestions: list[str] | None = None
    choices: list[str] | None = None
    condition: str | None = None  # the simulation's path to the site, in words
    needs: list[str] | None = None  # undecidable: the facts that would decide it
    reads: list[str] | None = None  # fields the failing condition read
    fix: Fix | None = None


class ExplainFlag(Model):
    option: str  # as written
    name: str | None
    dest: str | None
    value: Value
    via: str  # exact | alias | abbreviation | ambiguous | unknown | ...
    help: str
    url: str | None
    source: Citation | None


class Limit(Model):
    flag: str
    problem: Literal["missing", "ambiguous"]


class ValidRange(Model):
    from_: str = From()
    to: str
    versions: int
    limited_from: list[Limit]
    before: str | None
    limited_to: list[Limit]
    after: str | None


class RemovedFlag(Model):
    flag: str
    name: str
    replacement: str | None
    message: str


class MeaningChange(Model):
    flag: str
    from_: str = From()
    to: str
    message: str


class DefaultChange(Model):
    flag: str
    from_: str = From()
    to: str


class Upgrade(Model):
    from_: str = From()
    to: str
    removed: list[RemovedFlag]
    changed_meaning: list[MeaningChange]
    defaults_changed: list[DefaultChange]
    constraints_started: list[Finding]
    constraints_stopped: list[Finding]
    findings_new: list[Finding]
    findings_gone: list[Finding]
    persisting: list[Finding] = []  # problems at both versions, listed once
    errors: int


class EffectiveSetting(Model):
    """A setting whose final value differs from the command or the default."""

    field: str
    dest: str
    flag: str | None
    from_: Value = From()
    to: Value  # null when not certain
    from_text: str
    to_text: str
    certain: bool  # false: it depends on facts the profile does not give
    needs: list[str]
    given: bool  # the command set it
    condition: str
    source: Citation


class PassedCheck(Model):
    kind: str
    condition: str
    message: str
    flags: list[str]
    source: Citation


class PredicateAnswer(Model):
    name: str  # "is_sm100_supported"
    meaning: str
    value: Value
    needs: list[str]
    source: Citation | None  # its definition in the version's files


class Token(Sparse):
    text: str
    flag: str | None
    help: str
    role: str  # launcher | flag | value | word
    via: str | None = None  # exact | alias | abbreviation | ...
    url: str | None = None
    value_of: str | None = None


class SmName(Model):
    sm: int
    name: str


class ProfileOptions(Model):
    archs: list[str]
    platforms: list[str]
    sms: list[SmName]


class ExplainResult(Model):
    version: str
    launcher: str
    flags: list[ExplainFlag]
    findings: list[Finding]
    errors: int
    valid_in: list[ValidRange]
    presence: dict[str, list[Span]]
    compare: Upgrade | None
    profile: DeployProfile | None = None
    profile_text: str | None = None
    simulated: bool = False  # SGLang's argument handling was replayed
    effective: list[EffectiveSetting] = []
    passed: list[PassedCheck] = []
    predicates: list[PredicateAnswer] = []
    assumptions: list[str] = []
    tokens: list[Token] = []
    profile_options: ProfileOptions | None = None
    # Lists cut at 200 entries (app/views/explain.py): {"flags": full length, ...}; null
    # when nothing was cut.
    truncated: dict[str, int] | None = None
