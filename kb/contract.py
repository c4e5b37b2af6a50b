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

from kb.profile import ProfileFields, ProfileQuery, with_profile_text

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

    # No return annotation: pydantic takes the serializer's JSON schema from it, and `Any`
    # made every Sparse model an empty schema in the OpenAPI document. Without one, the
    # schema is the model's own fields (the keys left out when None are not required).
    @model_serializer(mode="wrap")
    def _drop_unset_options(self, handler: SerializerFunctionWrapHandler):
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


class DocExample(Model):
    """A launch command of the version's docs that uses a flag (or gives it a value)."""

    path: str
    line: int
    command: str
    url: str  # its row on the version's docs-commands page
    source_url: str  # the file at the version's commit, on the forge


class ChoiceSite(Site):
    """Code handling one choice value: attributed to `flag`, or ambiguous among `candidates`."""

    value: str
    flag: str | None
    attributed: bool
    candidates: list[str]
    how: str  # compare | contains | enum | is_call | registry | dispatch
    # why it is attributed to `flag`: subject | enum | type | parameter | only-flag | family;
    # "" if not
    basis: str = ""


class ChainStep(Model):
    """One step of a chain. `by_name`: reached because its name spells the feature
    (`model_forward_maybe_tbo`, `TboForwardBatchPreparer` for tbo: the acronym of
    --enable-two-batch-overlap), not through a call, an import or a class."""

    name: str
    by_name: bool


class IndirectSite(Site):
    """A use of something that carries a flag's value, with the chain from the flag's read:
    ["IS_TBO_ENABLED", "is_tbo_enabled()", "model_forward_maybe_tbo"]; `steps` is the same
    chain with each step's kind."""

    via: list[str]
    steps: list[ChainStep]


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


# --- GPUs (kb/gpus.py) -----------------------------------------------------------------------


class GpuSource(Model):
    """Where one fact of a catalog GPU comes from: a vendor page, a public record (an issue
    showing `nvidia-smi` or `sglang.check_env` output) or SGLang's own code at a commit.
    `url` is null when no public record was found; the fact is then null and `title` says
    what was looked for."""

    title: str
    url: str | None


class GpuSources(Model):
    """One source per fact; null for a fact that does not apply (`rocm` on an NVIDIA GPU)."""

    sm: GpuSource | None
    arch: GpuSource | None
    memory_gb: GpuSource | None
    memory_mb: GpuSource | None
    device_name: GpuSource | None
    cuda: GpuSource | None
    rocm: GpuSource | None
    cann: GpuSource | None


class Gpu(Model):
    """A GPU (or NPU) SGLang is deployed on, with the facts `ServerArgs` branches on."""

    model_config = ConfigDict(frozen=True)

    name: str  # the catalog key: "B200", "H100 80GB", "MI300X"
    platform: Literal["cuda", "rocm", "npu"]
    # torch.cuda.get_device_capability() as major * 10 + minor (SGLang's get_device_sm);
    # on ROCm torch reports the gfx IP version (gfx942: 9.4 -> 94); null on an NPU.
    sm: int | None
    arch: str | None  # the ROCm LLVM target ("gfx942")
    memory_gb: int  # nominal, as the vendor states it
    # The total SGLang's get_device_memory_capacity() reads, MiB: nvidia-smi's memory.total,
    # rocminfo's pool size / 1024, torch.npu.mem_get_info()'s total.
    memory_mb: int | None
    device_name: str | None  # torch.cuda.get_device_name() (torch.npu's on an NPU)
    cuda: str | None  # a torch.version.cuda seen on this GPU in a public record
    rocm: str | None  # likewise the ROCm (HIP) version
    cann: str | None  # likewise the Ascend CANN version
    aliases: tuple[str, ...]  # other names gpu_by_name() accepts
    source: GpuSources


class GpuList(Model):
    gpus: list[Gpu]


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
    # Values the code knows for a flag without choices (--speculative-algorithm: its help's
    # builtins, its enum's members; --model-impl: its str enum's values): an open set, each
    # with a value page; null for every other flag.
    known_values: list[str] | None = None
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


class FacetValue(Model):
    value: str
    count: int  # rows of the filtered result with this value
    selected: bool  # the value is one of the active filters
    query: str  # the query string that adds (or, when selected, removes) this filter


class Facet(Model):
    name: str  # the query parameter it filters: kind | function | path | section
    values: list[FacetValue]


class FlagListItem(Flag):
    constraint_count: int  # constraint sites that read or affect the flag


class FlagList(Model):
    version: str
    q: str
    flags: list[FlagListItem]
    section: str = ""  # the section filter
    facets: list[Facet] = []  # by section, with counts


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
    # its own anchor on its page, the page of the first flag it reads (else affects):
    # "/v/v0.5.6/flags/--pp-size#c-0123456789ab"
    url: str


class EnumMember(Sparse):
    name: str
    value: Value  # for an auto() member, its lower-case name (what choices are matched with)
    line: int | None = None
    auto: bool | None = None  # true: the code says `auto()`, no value


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
    added: list[Value] | None = None  # choices/known_values/aliases changes
    removed: list[Value] | None = None
    known: list[Value] | None = None  # choices dropped (null) for known values: those values
    words: list[list[str]] | None = None  # help changes: [[op, text]], op in = - +
    message: str | None = None  # deprecation changes
    replacement: str | None = None


class Change(FieldChange):
    """One step of a flag's history: `field` is added | removed | renamed | respelled (only
    the primary spelling changed, both accepted before and after) | split (one of several
    replacements a deprecated flag names) | a changed field."""

    version: str
    name: str | None = None  # its name at `version` (a link there); absent where removed
    at: str | None = None  # renamed/split: the last version the old flag (`from`) exists
    siblings: list[str] | None = None  # split: the other replacements


class RelatedFlag(Model):
    name: str
    url: str
    known: bool  # a flag of this version


class FlagConstraint(Constraint):
    """A constraint site as the flag page shows it: what it does to this flag, which of its
    values it tests, and its condition in plain words."""

    effect: Literal["requires", "overrides", "warns"]  # raise/assert | override | warning
    values: list[str]  # the flag's values the condition tests ("≠ x" for a negated test)
    plain: str  # the condition in plain words ("" when unconditional)


class ValueGroup(Model):
    value: str | None  # the tested value ("≠ x" when negated); None: other conditions
    label: str
    sites: list[int]  # indexes into FlagPage.constraints


class ConstraintGroup(Model):
    effect: Literal["requires", "overrides", "warns"]
    title: str
    count: int
    values: list[ValueGroup]


class ChoiceRow(Model):
    value: Value
    member: str | None  # the enum member whose value it is
    sites: int  # choice sites that test it
    url: str  # its backend value page
    # its load-time requirements (RequirementSummary.load_time) and the checks of the
    # classes it selects (BackendValue.layer_checks), by stage
    load_time: int = 0
    first_forward: int = 0


class UsageFile(Model):
    path: str
    url: str
    sites: list[int]  # indexes into FlagPage.usages


class UsageArea(Model):
    area: str  # the directory
    count: int
    files: list[UsageFile]


class TimelineMark(Model):
    version: str
    url: str | None  # the flag's page there; None where it does not exist
    state: Literal[
        "absent", "present", "added", "removed", "default", "choices", "deprecated", "changed"
    ]
    title: str  # what happened there, in words


class GraphNode(Model):
    name: str
    url: str
    known: bool  # a flag of this version
    y: int  # its row in the picture
    y_first: int = 0  # the rows of its edges, from y_first to y_last
    y_last: int = 0


class GraphEdge(Model):
    flag: str  # the other flag
    kind: str  # raise | assert | override | warning
    count: int  # constraint sites of this kind between the two flags
    label: str  # the values of this flag they test, or the kind alone (drawn on the edge)
    url: str  # the first such site's source line
    y1: int
    y2: int
    sites: list[str] = []  # every such site's source line


class ConstraintGraph(Model):
    """The flags a flag's constraint sites touch, laid out on the server for an SVG: the
    flag on the left, one edge per (other flag, kind), each in a row of its own: a curve
    from the flag to `xm`, then straight to `x2` with its label written above it."""

    width: int
    height: int
    x1: int  # where edges leave the flag
    x2: int  # where they reach the other flags
    xm: int = 0  # where an edge's curve ends and its labelled straight part begins
    nodes: list[GraphNode]
    edges: list[GraphEdge]


class GridColumn(Model):
    version: str  # the first version with this choice list
    until: str  # the last one
    url: str  # the flag's page at `version`


class GridRow(Model):
    value: str
    cells: list[bool]  # one per column: the value is a choice there


class ChoiceGrid(Model):
    """Choices x versions: one column per run of versions with the same choice list."""

    columns: list[GridColumn]
    rows: list[GridRow]


class PageSection(Model):
    id: str  # the anchor on the page
    title: str
    count: int | None  # items in the section, when it counts any


class FlagEnvWrite(Model):
    """An environment variable the code sets where it reads the flag."""

    name: str  # "NCCL_NVLS_ENABLE"
    url: str | None  # its page at the version (None: the version has none)
    sites: list[Site]  # the writes, in source order


class HelpContradiction(Model):
    """The help says a value chooses among some of the flag's choices; the code handling
    the value maps it to one of them (kb/help_claims.py)."""

    value: str
    help_says: str  # the help's words for the value
    maps_to: str  # the string the code maps it to
    choice: str  # the choice that string names
    help: Citation  # the flag's definition
    code: Citation  # the mapping


class FlagPage(Flag):
    version: str
    constraints: list[FlagConstraint]
    usages: list[UsageSite]
    choice_counts: dict[str, int]
    choice_sites: dict[str, list[ChoiceSite]]
    enum: Enum | None
    history: list[Change]  # oldest first
    related: list[RelatedFlag]  # other flags named by its constraint sites
    indirect_usages: list[IndirectSite]  # reads past the first hop, apart from `usages`
    models: list[FlagModel]  # model files that read it, directly or through a chain
    # the models by entry point: named for the feature first, then read directly, then the
    # most used
    model_groups: list[ModelGroup]
    choice_rows: list[ChoiceRow]  # the choices with their enum members and site counts
    constraint_groups: list[ConstraintGroup]  # requires, overrides, warns; then by value
    usage_areas: list[UsageArea]  # reads grouped by directory, then file
    timeline: list[TimelineMark]  # every version, oldest first
    sections: list[PageSection]  # "On this page", in page order
    graph: ConstraintGraph  # the flags its constraint sites touch, by kind
    choice_grid: ChoiceGrid | None  # its choices across versions (flags with choices)
    sets_env: list[FlagEnvWrite]  # environment variables the code sets where it reads it

    help_contradictions: list[HelpContradiction] = []  # its help against its code
    examples: list[DocExample] = []  # the version's doc commands using it (kb/doc_commands.py)


# --- enums, constraints, backends, source --------------------------------------------------


class EnumList(Model):
    version: str
    enums: list[Enum]


class ConstraintList(Model):
    version: str
    flag: str  # the filter as given
    kind: str  # the kind filter, "" when none or unknown
    constraints: list[Constraint]  # the rows of this page (all rows when per_page is 0)
    function: str = ""  # the function filter
    path: str = ""  # the file filter
    sort: str = "path"  # path | line | kind | function
    page: int = 1
    per_page: int = 50  # 0: every row on one page (the exports)
    pages: int = 1
    total: int = 0  # rows of the whole filtered result
    facets: list[Facet] = []
    # a deprecated flag the filter names -> the flags its replacement names (a brace pair:
    # `--x-{decode,prefill}=disabled` names two), whose constraints are listed too
    replacements: dict[str, list[str]] = {}


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
    values_open: bool = False  # `values` are known values, not choices: others are accepted


class BackendList(Model):
    version: str
    backends: list[BackendFlag]


class ConditionContext(Model):
    """The model architectures and hardware checks a condition requires (its positive terms)."""

    models: list[str]
    hardware: list[str]


class Effect(Constraint):
    """A constraint site as a value's requirement or side effect, in plain words."""

    summary: str  # the whole condition, flags named: "Fails when ...: “message”"
    # one short sentence for this value (kb.requirements): "Requires --quantization ∈ {fp8,
    # unset} when ..., unless ..."; the tests the value decides left out
    statement: str = ""
    requirement: str = ""  # what must hold alone ("--quantization ∈ {fp8, unset}"), or ""
    topic: Literal["quantization", "gpu", "model", "flags", "other"] = "other"
    conditional: bool = True  # it holds only under other settings (a `when` or `unless`)
    full_condition: str = ""  # `summary` without the message: "Fails when <whole condition>"
    context: ConditionContext
    effect: Literal["requires", "triggers", "switches_to"]
    # set when the site tests the flag negatively (`x != 'a'`, `assert x in ['a']`): it
    # applies to this value because the value is not one of these
    excluding: list[str] = []


class RequirementSummary(Model):
    """A value's requirements that hold whatever else is set, by topic; the others counted."""

    quantization: list[str]
    gpu: list[str]
    model: list[str]
    flags: list[str]  # other flags
    other: list[str]
    # what the value's own code checks when the model loads (its registered builder's raises
    # and asserts: kb/load_requirements.py), each with where
    load_time: list[str] = []
    load_time_sources: list[Citation] = []
    conditional: int  # requirements holding only under other settings
    # the checks of the classes the value selects past ServerArgs (BackendValue.layer_checks),
    # counted by stage, each counted once
    layer_load: int = 0
    layer_first_forward: int = 0


class EnumMemberRef(Model):
    enum: str
    name: str
    value: Value
    auto: bool = False  # the code says `auto()`: `value` is the lower-case name standing for it
    source: Citation


class AreaCount(Model):
    area: str  # quantization, moe, attention, layers, models, scheduler, ...
    count: int


class DerivedFrom(Model):
    """The flag a variant derives from (--attention-backend for --decode-attention-backend),
    with its sites for the same value: sites that do not say which variant they serve are
    attributed to it."""

    flag: str
    sites: int
    url: str  # its page for the value


class LayerCheck(Model):
    """A raise or assert of a class the value selects when the model is built
    (kb/layer_sites.py), with the tests that must hold for it to run, in words."""

    stage: Literal["load", "first_forward"]  # weights loading, or the first forward pass
    owner: str  # the class whose method holds it
    function: str  # that method
    via: list[str]  # the methods called to reach it, from the entry point (forward, apply)
    kind: Literal["raise", "assert", "not_implemented"]
    # the tests that must hold for it to fail ("" when none but its own), flags named as
    # options ("--moe-runner-backend = flashinfer_cutlass"), the page's flag decided
    condition: str
    requires: str = ""  # an assert's test, in words: what must hold ("" for a raise)
    message: str  # the raise's exception and text, the assert's message ("" without)
    flags: list[str]  # the options its condition reads
    source: Citation


class LayerSelection(Model):
    """A class the value selects past ServerArgs, by what, with its checks."""

    selector: str  # "ModelOptFp4Config.get_quant_method", "get_moe_impl_class"
    selected: str  # the class returned: "ModelOptNvFp4FusedMoEMethod", "DeepEPMoE"
    layer: str  # the layer type it is returned for ("FusedMoE"), or ""
    when: str  # the branch's other tests, in words, or ""
    # "ModelOptFp4Config.get_quant_method -> ModelOptNvFp4FusedMoEMethod for FusedMoE layers"
    words: str
    source: Citation  # the `return`
    checks: list[LayerCheck]


class BackendValue(Model):
    version: str
    flag: str
    flag_url: str
    value: str
    choices: list[str]
    known_values: list[str] | None = None  # see Flag.known_values
    enum: str | None
    sites: list[ChoiceSite]
    enum_member: EnumMemberRef | None
    requirements: list[Effect]  # raise/assert sites whose condition tests this value
    requirement_summary: RequirementSummary | None = None
    side_effects: list[Effect]  # overrides/warnings it triggers, overrides switching to it
    areas: list[AreaCount]
    compare_url: str | None
    derives_from: DerivedFrom | None = None  # None: the flag is no variant taking the value
    examples: list[DocExample] = []  # the version's doc commands giving the flag this value
    # what the value selects when the model is built (a quantization method's classes per
    # layer type, the MoE layer class) and their raises and asserts (kb/layer_sites.py)
    layer_checks: list[LayerSelection] = []


class CompareRow(Model):
    area: str
    path: str
    cells: dict[str, list[ChoiceSite]]  # value -> sites in this file
    # line -> the chain the flag's value reaches it through (the flag page's "Read through a
    # chain"), for the lines of this file that list holds
    via: dict[str, list[str]] = {}


class Compare(Model):
    version: str
    flag: str
    dest: str = ""
    values: list[str]
    choices: list[str]
    known_values: list[str] | None = None  # see Flag.known_values
    requirements: dict[str, list[Effect]]
    requirement_summaries: dict[str, RequirementSummary] = {}
    side_effects: dict[str, list[Effect]]
    enum_members: dict[str, EnumMemberRef | None]
    rows: list[CompareRow]
    chain_reads: int = 0  # uses of the flag past its first read (the flag page's list)
    chain_url: str = ""  # that list on the flag page


# --- models, the extraction report ------------------------------------------------------------


class ModelEntry(Model):
    """One way a model file reaches a flag: its own read (`direct`, `entry` ""), or the
    shared code (a function, a class) whose use in the file's code, or in a model class it
    derives from or holds, reaches the flag's reads (`model_forward_maybe_tbo`,
    `LayerScatterModes`), cited through the shortest chain. `by_name`: the entry point is
    named for the feature (ChainStep)."""

    entry: str
    by_name: bool
    direct: bool
    via: list[str]
    steps: list[ChainStep]
    site: Citation


class FlagModel(Model):
    """A model file that reads the flag: directly (`via` empty) or through a chain; `via`,
    `steps`, `direct` and `site` are its first entry's."""

    name: str
    path: str
    url: str
    via: list[str]
    steps: list[ChainStep]  # `via` with each step's kind (ChainStep)
    direct: bool
    site: Citation
    # every entry point it reaches the flag through: its own read first, then those named
    # for the feature, then the shortest chains
    entries: list[ModelEntry]


class ModelGroup(Model):
    """The models reaching a flag through one entry point (ModelEntry): a model is in one
    group per entry point. `models`: their names, as FlagModel's."""

    entry: str
    by_name: bool
    direct: bool
    models: list[str]


class ModelListItem(Model):
    name: str  # glm4_moe
    path: str
    url: str
    architectures: list[str]  # EntryClass names
    flags: int  # flags read directly or through a chain


class ModelList(Model):
    version: str
    models: list[ModelListItem]


class ModelFlag(Model):
    name: str
    dest: str
    reads: list[UsageSite]
    indirect: list[IndirectSite]


class ModelCheck(Model):
    """A raise or assert in the constructor of a class the architecture's class builds
    (kb/model_checks.py), with the tests that must hold for it to fail, in words."""

    owner: str  # the class whose constructor (or a method it calls) holds it
    built_by: list[str]  # the classes from the architecture's down to the owner
    built_when: str  # the test its builder builds it under, as written ("" whenever)
    kind: Literal["raise", "assert", "not_implemented"]
    condition: str
    requires: str = ""  # an assert's test, in words: what must hold ("" for a raise)
    message: str
    flags: list[str]  # the options its condition reads
    source: Citation


class ArchitectureChecks(Model):
    """What SGLang checks of one architecture when it builds the model."""

    architecture: str
    # whether its forward takes `pp_proxy_tensors` (the ModelRunner asserts it when
    # --pp-size > 1); null when no class held defines its forward
    pipeline_parallel: bool | None
    forward: Citation | None  # the forward the runner inspects
    pp_check: Citation | None  # the ModelRunner's assert
    checks: list[ModelCheck]


class ModelPage(Model):
    version: str
    name: str
    path: str
    source: Citation
    architectures: list[str]
    flags: list[ModelFlag]
    constraints: list[Constraint]  # sites whose condition or message names an architecture
    load_checks: list[ArchitectureChecks] = []  # what building each architecture checks


class HowCount(Model):
    attributed: int
    ambiguous: int


class Report(Model):
    version: str
    extractor_version: int
    counts: dict[str, int]
    choice_sites: int
    ambiguous_choice_sites: int
    ambiguous_share: float
    choice_sites_by_how: dict[str, HowCount]
    warnings: list[dict[str, Any]]
    seconds: float | None


class Mark(Model):
    line: int
    end_line: int
    what: str  # flag | constraint | usage | choice
    label: str
    url: str


class SourceLink(Model):
    line: int
    text: str  # the identifier or the string literal's text: "tp_size", "fa3", "--tp-size"
    url: str  # its flag or value page at the same version


class SourceFile(Model):
    version: str
    path: str
    sha: str
    url: str
    text: str
    marks: list[Mark]
    links: list[SourceLink]  # identifiers that link to a flag or value page


# --- diff ----------------------------------------------------------------------------------


class DiffSummary(Model):
    added: int
    removed: int
    renamed: int  # renames (`respelled` flags are not counted)
    changed: int  # flags
    changes: int  # field changes
    constraints_added: int
    constraints_removed: int
    constraints_changed: int
    enums_changed: int
    condition_groups: int = 0  # root causes of the constraints_changed (ConditionGroup)
    env_added: int = 0
    env_removed: int = 0
    env_renamed: int = 0
    env_changed: int = 0  # variables with a changed field
    respelled: int = 0  # flags whose primary spelling changed, the other one kept as an alias
    constraints_value_changed: int = 0
    constraints_moved: int = 0  # sites moved or reworded (ConstraintMove)
    # constraints_changed whose `meaning` is not "changed": folded out of the headline
    constraints_folded: int = 0


class Rename(Sparse):
    from_: str = From()
    to: str
    # alias | dest | deprecated | inverted (--enable-x -> --disable-x) | help (the same help,
    # a name that reads alike); primary (in `respelled`)
    via: str
    dest: str  # of the new flag
    # deprecated for a value of the new flag (`--x=v`): the old option is that value's
    # spelling, not the new flag renamed (its history does not continue the old one's)
    value: str | None = None


class FlagBrief(Model):
    name: str
    dest: str
    help: str
    url: str
    section: str | None = None  # the help section it is listed under, if any


class FlagChange(FieldChange):
    name: str  # the flag's name at `to`
    section: str | None = None  # its help section at `to`, when it has one


class ConstraintChange(Model):
    from_: Constraint = From()
    to: Constraint
    condition: list[list[str]]  # word diff [[op, text]]
    gained: list[str] = []  # clauses of `conditions` only at `to`, as written
    lost: list[str] = []  # clauses only at `from`
    # same: the same tests ANDed, restructured (a refactor); earlier_branch: its own test
    # (the last clause) the same, only earlier branches' tests (negated) differ
    meaning: Literal["changed", "same", "earlier_branch"] = "changed"


class ConstraintMove(Model):
    """A site that moved (another function or file) or was reworded (its message or its
    test), paired across versions instead of listed as removed and added."""

    from_: Constraint = From()
    to: Constraint
    moved: bool
    reworded: bool
    message: list[list[str]]  # word diff [[op, text]]; [] when the same
    condition: list[list[str]]  # word diff; [] when the same (`server_args.` read as `self.`)


class WriteChange(Model):
    dest: str
    from_: Value = From()  # the value written, as source text
    to: Value


class ConstraintValueChange(Model):
    """A site under the same condition that writes another value or says it differently."""

    from_: Constraint = From()
    to: Constraint
    writes: list[WriteChange]  # the overridden values that changed
    message: list[list[str]]  # word diff [[op, text]] of the message; [] when the same


class ConditionGroup(Model):
    """Condition changes with one root cause: every site that gained (or lost) `condition`,
    as written or negated (an `elif` below it carries it negated)."""

    change: Literal["gained", "lost", "reworded"]  # reworded: the clauses read the same
    condition: str  # the clause without its outer `not`; "" when reworded
    count: int
    items: list[int]  # indices into `constraints_changed`


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


class EnvRename(Model):
    """A name that became a deprecated name of another variable: SGLang still reads it."""

    from_: str = From()
    to: str  # the variable that reads the old name in its place


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
    env_renamed: list[EnvRename] = []
    env_changed: list[EnvChange] = []
    condition_groups: list[ConditionGroup] = []  # constraints_changed by root cause, biggest first
    # Both names accepted before and after, only the primary spelling changed (not renamed).
    respelled: list[Rename] = []
    constraints_value_changed: list[ConstraintValueChange] = []
    constraints_moved: list[ConstraintMove] = []
    # The filter asked for (?flag=, ?topic=): the lists and counts hold only what concerns it.
    flag: str | None = None
    topic: str | None = None
    # The doc commands of `to` that `from` accepted and `to` rejects or fails (the same text
    # at both); null when either version's doc commands are not checked (check-docs).
    doc_commands_broken: list[BrokenDocCommand] | None = None


# --- search --------------------------------------------------------------------------------


class SearchHit(Sparse):
    kind: Literal["flag", "choice", "member", "enum", "env", "carrier", "model", "constraint"]
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


class DeployProfile(Sparse, ProfileFields):
    """A deployment profile: the model (architecture, or a pasted config.json), the
    hardware, and what to assume about package versions and environment variables."""


class ExplainRequest(Model):
    version: str | None = Field(None, max_length=200)
    # No shell passes a NUL (a 400, kb.explain.check_command); over 20,000 characters: 413.
    command: str = Field(json_schema_extra={"pattern": "^[^\\u0000]*$"})
    compare: str | None = Field(None, max_length=200)
    profile: DeployProfile | None = None


@with_profile_text()
class ExplainQuery(ProfileQuery):
    """GET /api/explain's query parameters: ExplainRequest's, the profile's fields in place
    of `profile`."""

    # Over 20,000 characters (kb.explain.MAX_COMMAND) a command is a 413, as in POST.
    command: str = Field(json_schema_extra={"maxLength": 20_000})
    version: str = Field("", max_length=200)
    compare: str = Field("", max_length=200)


class Fix(Sparse):
    """A change that makes an error pass, verified by simulating the fixed command."""

    add: list[str] | None = None  # e.g. ["--moe-a2a-backend deepep"]
    remove: list[str] | None = None  # switches to drop
    set: list[str] | None = None  # a given flag with another of its values: ["--x value"]
    command: str
    verified: bool = True
    # The last stage the fixed command was simulated through (ServerArgs' handling: what
    # SGLang checks at model load or at the first forward is not simulated).
    verified_through: Literal["parse", "server_args", "load", "first_forward"] = "server_args"
    # what of the later stages was checked too: ["the attention backend"] (the main model's
    # ModelRunner building it, followed in the version's code)
    also_checked: list[str] | None = None


class Finding(Sparse):
    severity: Literal["error", "warning", "info"]
    flag: str | None
    message: str
    source: Citation | None
    kind: str  # unknown_flag, invalid_choice, constraint, undecidable, deprecated, ...
    key: str | None = None  # the constraint site's key
    replacement: str | None = None  # as SGLang names it: `--x-{decode,prefill}=disabled`
    # the flags of the version `replacement` names (braces expanded, `=value` dropped; a
    # name that is no flag there left out): ["--x-decode", "--x-prefill"]
    replacements: list[str] | None = None
    deprecated_kind: Literal["soft", "warns", "raises"] | None = None  # on kind=deprecated
    candidates: list[str] | None = None
    suggestions: list[str] | None = None
    choices: list[str] | None = None
    condition: str | None = None  # the simulation's path to the site, in words
    needs: list[str] | None = None  # undecidable: the facts that would decide it
    reads: list[str] | None = None  # fields the failing condition read
    fix: Fix | None = None  # the smallest verified change
    alternatives: list[Fix] | None = None  # other verified changes, smallest first
    env: str | None = None  # the environment variable a finding is about
    # where SGLang would say it: argparse ("parse") or ServerArgs' handling ("server_args")
    stage: Literal["parse", "server_args", "load", "first_forward"] | None = None
    # where SGLang re-raises the error as its own (the CUDA-graph runner's "Capture cuda
    # graph failed" around a RuntimeError raised while capturing); `source` is the raise
    reraised_at: Citation | None = None


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
    problem: Literal[
        "missing",
        "ambiguous",
        "unplaced",
        "attached_text",
        "arguments",
        "wrong_type",
        "invalid_choice",
        "action_raises",
    ]
    message: str  # explain's finding at that version


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
    replacement: str | None  # as SGLang names it (a brace pair names two flags)
    message: str
    replacements: list[str] = []  # the flags of the newer version it names (Finding's)


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
    # the input the value came from: the command's flags, the model's config.json, the
    # GPU, SGLang's default handling, or an assumption the run made (named in `assuming`)
    input: Literal["flag", "model", "gpu", "default", "assumed"] = "default"
    assuming: list[str] = []  # the assumptions (in words) the value rests on


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


class EnvAssignment(Model):
    """An environment variable the command sets, and what SGLang makes of it."""

    name: str
    value: str | None  # None: passed through from the host (`docker run -e X`)
    how: str  # prefix | env | export | docker -e | compose | kubernetes
    known: bool  # read by SGLang at this version (under this name or as a deprecated one)
    variable: str | None  # the variable SGLang reads (the replacement of a deprecated name)
    type: str | None
    parsed: Value  # the value as SGLang parses it
    default: Value
    url: str | None
    source: Citation | None


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
    # Where the model's config.json came from (kb/model_source.py): "pasted",
    # "hub:<id>@<commit>", "local:<dir>", "reference:transformers <Class> <version>"; null
    # when none was used. model_notes: what to know about it (a model that could not be
    # read, a reference config's caveat, hf_quant_config.json).
    model_source: str | None = None
    model_notes: list[str] = []
    # The same for the draft model's config.json, with speculative decoding whose draft is
    # a checkpoint of its own (--speculative-draft-model-path): the profile's
    # `draft_config` ("pasted"), else read as the model's is; null when none was used.
    draft_model_source: str | None = None
    simulated: bool = False  # SGLang's argument handling was replayed
    effective: list[EffectiveSetting] = []
    passed: list[PassedCheck] = []
    predicates: list[PredicateAnswer] = []
    assumptions: list[str] = []
    tokens: list[Token] = []
    profile_options: ProfileOptions | None = None
    env: list[EnvAssignment] = []  # environment variables the command sets
    # Lists cut at 200 entries (app/views/explain.py): {"flags": full length, ...}; null
    # when nothing was cut.
    truncated: dict[str, int] | None = None


# --- environment variables and docs drift ----------------------------------------------------


class EnvConversion(Model):
    """How SGLang converts a deprecated name's value when it copies it to the replacement
    variable: `str(float(old) / 1000.0)` is cast "float", op "/", by 1000.0. A conversion
    in another shape has its source text only (cast, op and by null: not worked out)."""

    expr: str  # environ.py's expression, as written
    cast: Literal["float", "int"] | None = None
    op: Literal["*", "/", "//"] | None = None
    by: int | float | None = None


class EnvFallback(Model):
    """A default read from another variable: `os.environ.get("A", os.environ.get("B",
    "/tmp"))` falls back to B, then to "/tmp". `reads` is false when the default is only B's
    declared default (`os.getenv("A", envs.B.default)`), not B's value."""

    name: str  # the other variable
    default: Value  # its default, when neither is set (None: unset)
    reads: bool
    url: str  # the other variable's page


class EnvVar(Model):
    """An environment variable of a version: declared in environ.py, or read by the code."""

    name: str
    type: str | None  # bool | int | float | str | tuple, None when unknown
    default: Value  # the static default (None: unset, or see default_expr)
    default_expr: str | None  # source text of a default that is not static
    fallback: EnvFallback | None  # a default read from another variable, else null
    deprecated_names: list[str]  # still read in its place (EnvBoolWithAlias)
    # this name is deprecated: the variable (or --flag, `--flag=value` when SGLang's warning
    # names the value) replacing it
    replacement: str | None
    # how SGLang converts the value it copies to the replacement (a unit change, ms -> s);
    # null when it copies it as it is
    conversion: EnvConversion | None
    declared: bool
    comment: str
    section: str | None
    flags: list[str]  # options whose handling reads or writes it
    read_count: int
    write_count: int
    url: str
    source: Citation  # the declaration, else the first read


class EnvList(Model):
    version: str
    env: list[EnvVar]


class EnvSite(Site):
    name: str
    access: str  # read | write | check
    how: str  # environ.get | getenv | environ[] | get_bool_env_var | envs.get | literal | dict key
    default: Value  # a literal default given at the read
    function: str
    flags: list[str]  # options read by the statement or its enclosing conditions


class EnvPage(EnvVar):
    version: str
    reads: list[EnvSite]  # every read and write
    history: list[Change]


class DriftMissing(Sparse):
    name: str
    code: Citation
    docs: Citation | None  # the docs row it would follow
    after: str | None = None  # that row's name
    section: str | None = None
    declared: bool | None = None


class DriftAbsent(Model):
    name: str
    docs: Citation
    suggestion: str | None  # the closest name in the code
    code: Citation | None


class DriftDiffer(Sparse):
    name: str
    field: str  # default | choices | aliases | name
    docs: Value
    code: Value
    docs_source: Citation
    code_source: Citation
    missing_from_docs: list[str] | None = None  # choices
    not_in_code: list[str] | None = None


class DriftDetails(Model):
    missing_from_docs: list[DriftMissing]
    not_in_code: list[DriftAbsent]


class DriftSection(Model):
    missing_from_docs: list[str]
    not_in_code: list[str]
    differs: list[DriftDiffer]
    details: DriftDetails


class DriftTable(DriftSection):
    """One flag table (a docs file) against the code: its own three lists."""

    path: str
    docs: Citation
    rows: int
    named: int  # distinct options its rows name
    scope: str  # all: a reference of every flag | sections: of those of `sections` only
    sections: list[str]


class DriftSaid(Model):
    path: str  # the table
    value: Value  # what its row states ("named" / "missing" for field "named")
    docs: Citation | None  # its row (None: it has none)


class DriftDisagreement(Model):
    """Where flag tables disagree with each other about one flag."""

    name: str
    field: str  # named | default | choices | type
    tables: list[DriftSaid]


class FlagDriftSection(DriftSection):
    """The union of the flag tables (missing: named by none), each table's own lists and
    where they disagree with each other."""

    tables: list[DriftTable]
    disagreements: list[DriftDisagreement]


class DocsFiles(Model):
    flags: list[Citation]
    env: list[Citation]


class DocsDrift(Model):
    version: str
    docs_files: DocsFiles
    flags: FlagDriftSection
    env: DriftSection


# --- the docs' launch commands (kb/doc_commands.py) ------------------------------------------

DocStatus = Literal["ok", "rejected", "fails", "undecided"]


class DocCommandRow(Model):
    path: str
    line: int
    command: str
    status: DocStatus
    findings: list[Finding]
    url: str  # the file at the version's commit, on the forge
    anchor: str  # the row's id on the page


class DocCommandCounts(Model):
    ok: int
    rejected: int
    fails: int
    undecided: int
    skipped: int  # templates (`<model>`, `$VAR`, `{x}`, `...`) not checked
    total: int  # commands (a command shown in two places counts twice)
    distinct: int  # distinct command texts


class DocCommands(Model):
    version: str
    commands: list[DocCommandRow]  # by file then line (those of `status` alone, if given)
    counts: DocCommandCounts  # over every command of the version
    status: DocStatus | None = None  # the filter asked for


class BrokenDocCommand(Model):
    command: str
    path: str
    line: int
    from_: DocStatus = From()
    to: DocStatus
    findings: list[Finding]  # its errors at `to`
    url: str  # its row on `to`'s docs-commands page
    source_url: str


FlagPage.model_rebuild()  # FlagModel is declared below it
Diff.model_rebuild()  # BrokenDocCommand is declared below it
