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

from pydantic import BaseModel, Field, create_model
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
# A number given as text (a query parameter; `sm90` is an SM too) is at most this long.
NUMBER_TEXT = 10


def _one_of(values: tuple[str, ...]) -> str:
    return ", ".join(values[:-1]) + " or " + values[-1]


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
    platform: Annotated[str | None, Field(max_length=20, description=_one_of(PLATFORMS))] = None
    sm: Annotated[int | None, Field(ge=0, le=1000, description="CUDA SM, e.g. 90, 100, 120")] = None
    gpu_mem_gb: Annotated[
        float | None, Field(ge=0, le=100_000, description="memory per GPU in GB, e.g. 80")
    ] = None
    cuda: Annotated[
        str | None,
        Field(max_length=20, description="the CUDA version torch was built with, e.g. 12.9"),
    ] = None
    gpus: Annotated[int | None, Field(ge=0, le=100_000, description="GPU count")] = None
    nodes: Annotated[int | None, Field(ge=0, le=100_000, description="node count")] = None
    packages: Annotated[
        str, Field(max_length=20, description=f"package versions {_one_of(PACKAGES)}")
    ] = "assume-ok"
    env: Annotated[
        str, Field(max_length=20, description=f"environment variables {_one_of(ENV_MODES)}")
    ] = "assume-unset"
    config: Annotated[
        dict[str, Any] | str | None,
        Field(
            description=f"the model's config.json (at most {MAX_CONFIG_DEPTH} levels deep "
            f"and {MAX_CONFIG_VALUES:,} values)"
        ),
    ] = None


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
    number, MAX_CONFIG for a pasted config.json."""
    for limit in info.metadata:
        if getattr(limit, "max_length", None) is not None:
            return int(limit.max_length)
    numbers = {int, float} & set(get_args(info.annotation))
    return NUMBER_TEXT if numbers else MAX_CONFIG


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
                ),
            )
            for name, info in ProfileFields.model_fields.items()
        }
        return create_model(cls.__name__, __base__=cls, __module__=cls.__module__, **fields)

    return add
