"""A deployment profile's parameters, defined once (ProfileFields): the model (architecture,
quantization, or a pasted config.json), the hardware, and what to assume about package
versions and environment variables.

Each place that takes a profile takes its fields from ProfileFields: POST /api/explain's
`profile` (kb.contract.DeployProfile), the query parameters of GET /api/explain and of the
/explain page (as text: with_profile_text), `flagatlas explain`'s options (cli/explain.py)
and the profile the simulation reads (kb.explain.predicates.Profile, which checks a profile
and reads the model's facts out of a config.json). This module imports pydantic alone, so
the CLI builds its options without loading the whole API contract.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar, get_args

from pydantic import BaseModel, Field, create_model, field_validator
from pydantic.fields import FieldInfo

PLATFORMS = ("cuda", "rocm", "npu", "xpu", "hpu", "cpu")
PACKAGES = ("assume-ok", "unknown")
ENV_MODES = ("assume-unset", "unknown")
MAX_CONFIG = 200_000  # characters of a pasted config.json
# A config.json, pasted or posted as an object, is read by walking it: these bound that walk
# and what the answer echoes back. Real ones nest 3 to 5 levels and hold a few thousand
# values at most (long per-layer lists, quantization `ignore` lists).
MAX_CONFIG_DEPTH = 32
MAX_CONFIG_VALUES = 20_000
# ... in a URL (GET /api/explain): the URL limit (app/limits.py, 32 KiB) holds this many
# characters even %-encoded (up to 12 bytes each) beside the other parameters; POST for more.
MAX_CONFIG_TEXT = 2_000
# A number given as text (a query parameter; `sm90` is an SM too) is at most this long.
NUMBER_TEXT = 10


def _one_of(values: tuple[str, ...]) -> str:
    return ", ".join(values[:-1]) + " or " + values[-1]


def _json_number(value: Any) -> Any:
    """A JSON number, not `false` or "5" (pydantic's lax mode reads them as 0 and 5): what
    the description's `integer`/`number` says, whatever pydantic would coerce."""
    if isinstance(value, bool) or not isinstance(value, int | float | None):
        raise ValueError("must be a JSON number")
    return value


PLATFORM_ALIASES = ("hip", "amd")  # read as rocm
CHOICE_FIELDS = ("platform", "packages", "env")


def choices(name: str) -> tuple[str, ...]:
    """The values a choice field of the profile takes."""
    return {"platform": PLATFORMS + PLATFORM_ALIASES, "packages": PACKAGES, "env": ENV_MODES}[name]


def enum(name: str, text: bool = False) -> Callable[[dict[str, Any]], None]:
    """The `json_schema_extra` of choice field `name`: its choices as an `enum`, "" (not
    given, as everywhere in a profile) and null (in JSON, when the field takes null)."""

    def extra(schema: dict[str, Any]) -> None:
        values: list[Any] = ["", *choices(name)]
        if not text and name not in ("packages", "env"):
            values.append(None)
        schema["enum"] = values

    return extra


# What each profile field's text (a query parameter) must look like, when not any text: the
# numbers in their bounds (an SM may be written sm90), a CUDA version, a choice.
TEXT_PATTERNS = {
    "sm": r"^((sm|SM)?([0-9]{1,3}|1000))?$",
    "gpus": r"^([0-9]{1,5}|100000)?$",
    "nodes": r"^([0-9]{1,5}|100000)?$",
    "gpu_mem_gb": r"^([0-9]{1,5}(\.[0-9]{1,4})?|100000)?$",
    "cuda": r"^([0-9]{1,4}\.[0-9]{1,4})?$",
}


class ProfileFields(BaseModel):
    """The profile's parameters: names, JSON types, bounds, defaults; a description is the
    parameter's help (the CLI's, after "Profile: ")."""

    model: Annotated[
        str | None,
        Field(
            max_length=500,
            description="a Hugging Face model id (org/name) or a model directory, whose "
            "config.json is read (default: the command's --model-path)",
        ),
    ] = None
    arch: Annotated[
        str | None,
        Field(max_length=200, description="the model architecture, e.g. Glm4MoeForCausalLM"),
    ] = None
    quant: Annotated[
        str | None,
        Field(max_length=100, description="quantization_config.quant_method of the model"),
    ] = None
    gpu: Annotated[
        str | None,
        Field(
            max_length=100,
            description="a GPU of the catalog (GET /api/gpus), e.g. B200, H100, MI300X: its "
            "platform, SM, memory and device name (sm, gpu_mem_gb and cuda override them)",
        ),
    ] = None
    platform: Annotated[
        str | None,
        Field(
            max_length=20,
            description=_one_of(PLATFORMS),
            json_schema_extra=enum("platform"),
        ),
    ] = None
    sm: Annotated[int | None, Field(ge=0, le=1000, description="CUDA SM, e.g. 90, 100, 120")] = None
    gpu_mem_gb: Annotated[
        float | None,
        Field(ge=0, le=100_000, description="memory per GPU in GB, e.g. 80"),
    ] = None
    cuda: Annotated[
        str | None,
        Field(
            max_length=20,
            pattern=TEXT_PATTERNS["cuda"],
            description="the CUDA version torch was built with, e.g. 12.9",
        ),
    ] = None
    gpus: Annotated[int | None, Field(ge=0, le=100_000, description="GPU count")] = None
    nodes: Annotated[int | None, Field(ge=0, le=100_000, description="node count")] = None
    packages: Annotated[
        str,
        Field(
            max_length=20,
            # (assume-ok: an error resting on a package names it; unknown: left undecided)
            description=f"installed packages {_one_of(PACKAGES)} (as a normal install has them)",
            json_schema_extra=enum("packages"),
        ),
    ] = "assume-ok"
    env: Annotated[
        str,
        Field(
            max_length=20,
            description=f"environment variables {_one_of(ENV_MODES)}",
            json_schema_extra=enum("env"),
        ),
    ] = "assume-unset"
    config: Annotated[
        dict[str, Any] | str | None,
        Field(
            description=f"the model's config.json (at most {MAX_CONFIG_DEPTH} levels deep "
            f"and {MAX_CONFIG_VALUES:,} values)"
        ),
    ] = None
    draft_config: Annotated[
        dict[str, Any] | str | None,
        Field(
            description="the draft model's config.json, with speculative decoding whose "
            "draft is a checkpoint of its own (--speculative-draft-model-path; default: "
            "read from it as the model's is)"
        ),
    ] = None

    _numbers = field_validator("sm", "gpu_mem_gb", "gpus", "nodes", mode="before")(
        lambda value: _json_number(value)
    )


def config_problem(config: dict[str, Any]) -> str | None:
    """Why a parsed config.json cannot be taken, or None: nested deeper than
    MAX_CONFIG_DEPTH, more than MAX_CONFIG_VALUES values, or text that is not Unicode (a
    lone surrogate from a `\\ud800` escape: the answer echoes the config, and JSON
    cannot encode it). A walk with its own stack: the depth is not known yet."""
    stack: list[tuple[Any, int]] = [(config, 1)]
    values = 0
    while stack:
        value, depth = stack.pop()
        values += 1
        if values > MAX_CONFIG_VALUES:
            return f"config.json holds more than {MAX_CONFIG_VALUES:,} values"
        if isinstance(value, dict | list):
            if depth > MAX_CONFIG_DEPTH:
                return f"config.json nests deeper than {MAX_CONFIG_DEPTH} levels"
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str) and not_text(key):
                    return f"config.json {NOT_TEXT}"
                stack.append((item, depth + 1))
        elif isinstance(value, str) and not_text(value):
            return f"config.json {NOT_TEXT}"
    return None


NOT_TEXT = "holds text that is not valid Unicode (a lone surrogate)"


def not_text(text: str) -> bool:
    """Holds a lone surrogate: a str Python allows, but no UTF-8 (or JSON answer) can."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False


def _text_length(info: FieldInfo) -> int:
    """The most characters a profile field takes as text: its own limit, NUMBER_TEXT for a
    number, MAX_CONFIG_TEXT for a pasted config.json."""
    for limit in info.metadata:
        if getattr(limit, "max_length", None) is not None:
            return int(limit.max_length)
    numbers = {int, float} & set(get_args(info.annotation))
    return NUMBER_TEXT if numbers else MAX_CONFIG_TEXT


class ProfileQuery(BaseModel):
    """A query string that holds the profile's fields as text (with_profile_text)."""

    def profile(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in ProfileFields.model_fields}


Q = TypeVar("Q", bound=ProfileQuery)


def with_profile_text(bounded: bool = True) -> Callable[[type[Q]], type[Q]]:
    """A class decorator: the query model with the profile's fields added after its own,
    as text query parameters ("" when not given; when `bounded`, each no longer than it
    may be). FastAPI takes a model's fields as parameters when it is declared Query()."""

    def add(cls: type[Q]) -> type[Q]:
        fields: dict[str, Any] = {
            name: (
                str,
                Field(
                    "",
                    max_length=_text_length(info) if bounded else None,
                    description=info.description,
                    pattern=TEXT_PATTERNS.get(name) if bounded else None,
                    json_schema_extra=enum(name, text=True)
                    if bounded and name in CHOICE_FIELDS
                    else None,
                ),
            )
            for name, info in ProfileFields.model_fields.items()
        }
        return create_model(cls.__name__, __base__=cls, __module__=cls.__module__, **fields)

    return add
