"""A deployment profile (model, hardware, package assumptions) and the vocabulary of
environment predicates SGLang's argument handling asks about, answered from the profile.

Each predicate maps a function SGLang calls (`is_sm100_supported()`, `is_hip()`,
`get_device_memory_capacity()`...) to a value computed from the profile, or to `Unknown`
naming the fact the profile lacks ("needs: GPU memory"). Definitions are cited by the
simulator, which finds them in the version's own files (`def is_hip` or
`is_sm100_supported = ...` in the module the name is imported from); the table here only
says what each predicate means, as SGLang's definitions read (e.g. `is_sm100_supported`
is `_check_cuda_device_version(device_capability_majors=[10], cuda_version=(12, 8))`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ConfigDict, ValidationError
from pydantic.fields import FieldInfo

from kb.profile import (
    ENV_MODES,
    MAX_CONFIG,
    MAX_CONFIG_DEPTH,
    NOT_TEXT,
    PACKAGES,
    PLATFORMS,
    ProfileFields,
    config_problem,
    not_text,
)

# SM (compute capability major*10+minor) -> GPUs people name it by.
SM_NAMES: dict[int, str] = {
    80: "A100 / A800 / A30",
    86: "A10 / A40 / RTX 3090 / RTX A6000",
    89: "L4 / L40S / RTX 4090 / RTX 6000 Ada",
    90: "H100 / H200 / H20 / H800 / GH200",
    100: "B200 / GB200",
    103: "B300 / GB300",
    120: "RTX PRO 6000 Blackwell / RTX 5090",
}


class ProfileError(ValueError):
    """A profile that cannot be used (unknown platform, bad config.json...)."""


NO_LIKELY: Any = type("NoLikely", (), {"__repr__": lambda self: "NO_LIKELY"})()


@dataclass(frozen=True)
class Unknown:
    """A value the simulation cannot know. `needs` names the missing facts in words;
    `options` lists the values it may have when they are few and all known; `likely` is
    the value it has if SGLang does not change a flag the command gave (an assumption the
    report states), NO_LIKELY when there is none."""

    needs: tuple[str, ...]
    options: tuple[Any, ...] | None = None
    likely: Any = NO_LIKELY

    def __bool__(self) -> bool:  # a forgotten check must not read as True
        raise TypeError("Unknown has no truth value")

    @property
    def reason(self) -> str:
        return "needs: " + ", ".join(self.needs) if self.needs else "unknown"


def unknown(*needs: str) -> Unknown:
    return Unknown(tuple(dict.fromkeys(n for n in needs if n)))


class Profile(ProfileFields):
    """A profile the simulation reads (Profile.parse): the platform one of PLATFORMS, a
    pasted config.json parsed, the architecture and quantization read from it when not
    given."""

    model_config = ConfigDict(frozen=True)

    config: dict[str, Any] | None = None

    @property
    def empty(self) -> bool:
        return self.to_json() == Profile().to_json()

    def to_json(self) -> dict[str, Any]:
        """The profile as the answer gives it: the fields that are set."""
        return self.model_dump(exclude_none=True)

    def describe(self) -> str:
        parts = [self.arch or "any model"]
        if self.quant:
            parts.append(self.quant)
        hw = self.platform or "any platform"
        if self.platform == "cuda" and self.sm:
            hw += f" sm{self.sm} ({SM_NAMES.get(self.sm, '?')})"
        parts.append(hw)
        if self.gpus:
            parts.append(f"{self.gpus} GPU" + ("s" if self.gpus > 1 else ""))
        if self.nodes and self.nodes > 1:
            parts.append(f"{self.nodes} nodes")
        return ", ".join(parts)

    # --- reading a profile from JSON, query parameters or the CLI ---------------------

    @classmethod
    def parse(cls, data: Mapping[str, Any] | None) -> Profile | None:
        """A profile from a JSON object or query parameters; None when nothing is set."""
        if not data:
            return None
        get = {k: v for k, v in data.items() if v not in (None, "")}
        for name, value in get.items():
            if isinstance(value, str) and not_text(value):
                raise ProfileError(f"{name} {NOT_TEXT}")
        config = get.get("config")
        if isinstance(config, str):
            if len(config) > MAX_CONFIG:
                raise ProfileError("the pasted config.json is too long")
            try:
                config = json.loads(config)
            except RecursionError:  # the parser's own bound, far past ours
                raise ProfileError(
                    f"config.json nests deeper than {MAX_CONFIG_DEPTH} levels"
                ) from None
            except ValueError as exc:
                raise ProfileError(f"the pasted config.json is not JSON: {exc}") from None
        if config is not None and not isinstance(config, dict):
            raise ProfileError("config must be a JSON object (a model's config.json)")
        problem = config_problem(config) if config is not None else None
        if problem is not None:
            raise ProfileError(problem)
        platform = get.get("platform")
        if platform is not None:
            platform = str(platform).lower()
            if platform in ("hip", "amd"):
                platform = "rocm"
            if platform not in PLATFORMS:
                raise ProfileError(f"unknown platform {platform!r}; one of {', '.join(PLATFORMS)}")
        packages = str(get.get("packages", "assume-ok"))
        if packages not in PACKAGES:
            raise ProfileError(f"packages must be one of {', '.join(PACKAGES)}")
        env = str(get.get("env", "assume-unset"))
        if env not in ENV_MODES:
            raise ProfileError(f"env must be one of {', '.join(ENV_MODES)}")
        arch = get.get("arch")
        quant = get.get("quant")
        if config:
            archs = config.get("architectures")
            if arch is None and isinstance(archs, list) and archs:
                arch = archs[0]
            qc = config.get("quantization_config")
            if quant is None and isinstance(qc, dict):
                quant = qc.get("quant_method")
        sm = _int(get.get("sm"), "sm")
        if sm is not None and platform is None:
            platform = "cuda"
        try:
            profile = cls(
                arch=str(arch) if arch else None,
                quant=str(quant) if quant else None,
                platform=platform,
                sm=sm,
                gpus=_int(get.get("gpus"), "gpus"),
                nodes=_int(get.get("nodes"), "nodes"),
                packages=packages,
                env=env,
                config=config,
            )
        except ValidationError as exc:  # e.g. an architecture in config.json too long
            error = exc.errors()[0]
            raise ProfileError(f"{error['loc'][0]}: {error['msg']}") from None
        return None if profile.empty else profile

    # --- the model's config, as SGLang's hf_config ------------------------------------

    def hf_attr(self, name: str) -> Any:
        """An attribute of the model's hf_config; `MISSING` when the config lacks it."""
        if self.config is not None:
            return self.config.get(name, MISSING)
        if name == "architectures":
            return [self.arch] if self.arch else unknown("the model architecture")
        if name == "quantization_config":
            if self.quant:
                return {"quant_method": self.quant}
            return unknown("the model's quantization (config.json quantization_config)")
        if name == "torch_dtype" or name == "dtype":
            return unknown("the model's dtype (config.json)")
        return unknown(f"the model's config.json ({name})")


MISSING = object()


def missing(value: object) -> bool:
    return value is MISSING


def _int(value: Any, name: str) -> int | None:
    """A number field's value, from a number or its text ("sm90" for an SM), in the
    bounds ProfileFields sets."""
    if value in (None, ""):
        return None
    try:
        number = int(str(value).removeprefix("sm").removeprefix("SM"))
    except ValueError:
        raise ProfileError(f"{name} must be a number, got {value!r}") from None
    low, high = _bounds(ProfileFields.model_fields[name])
    if number < low or number > high:
        raise ProfileError(f"{name} out of range: {number}")
    return number


def _bounds(info: FieldInfo) -> tuple[int, int]:
    """A number field's least and greatest value (each number field sets both)."""
    bounds = {b: getattr(m, b) for m in info.metadata for b in ("ge", "le") if hasattr(m, b)}
    return bounds["ge"], bounds["le"]


# --- the vocabulary ---------------------------------------------------------------------

Answer = Callable[[Profile, list[Any]], Any]


def _platform_is(*names: str) -> Answer:
    def answer(p: Profile, _args: list[Any]) -> Any:
        if p.platform is None:
            return unknown("the platform (CUDA, ROCm, NPU, ...)")
        return p.platform in names

    return answer


def _sm(majors: tuple[int, ...]) -> Answer:
    """`_check_cuda_device_version(device_capability_majors=[...], cuda_version=...)`: CUDA
    with a capability major in `majors` (the CUDA toolkit version is assumed recent)."""

    def answer(p: Profile, _args: list[Any]) -> Any:
        if p.platform is None:
            return unknown("the platform (CUDA, ROCm, NPU, ...)")
        if p.platform != "cuda":
            return False
        if p.sm is None:
            return unknown("the GPU's SM version")
        return p.sm // 10 in majors

    return answer


def _sm_value(p: Profile, _args: list[Any]) -> Any:
    if p.platform is not None and p.platform != "cuda":
        return 0
    return p.sm if p.sm is not None else unknown("the GPU's SM version")


def _capability(p: Profile, _args: list[Any]) -> Any:
    value = _sm_value(p, _args)
    return (value // 10, value % 10) if isinstance(value, int) else value


def _package(p: Profile, args: list[Any]) -> Any:
    if p.packages == "assume-ok":
        return True
    name = args[0] if args and isinstance(args[0], str) else "a package"
    return unknown(f"the installed version of {name}")


def _flashinfer(p: Profile, args: list[Any]) -> Any:
    cuda = _platform_is("cuda")(p, args)
    if cuda is not True:
        return cuda
    return _package(p, ["flashinfer"])


def _device(p: Profile, _args: list[Any]) -> Any:
    if p.platform is None:
        return unknown("the platform (CUDA, ROCm, NPU, ...)")
    return {"rocm": "cuda"}.get(p.platform, p.platform)


def _connector(_p: Profile, args: list[Any]) -> Any:
    url = args[0] if args else None
    if isinstance(url, str) and "://" not in url:
        return ""  # SGLang: no `<type>://` prefix, no connector
    return unknown("the connector type of --model-path")


def _quant(p: Profile, _args: list[Any]) -> Any:
    if p.config is not None:
        qc = p.config.get("quantization_config")
        return qc.get("quant_method") if isinstance(qc, dict) else None
    if p.quant:
        return p.quant
    return unknown("the model's quantization (config.json quantization_config)")


def _needs(fact: str) -> Answer:
    return lambda _p, _args: unknown(fact)


# name -> (answer, what it asks in words)
PREDICATES: dict[str, tuple[Answer, str]] = {
    "is_cuda": (_platform_is("cuda"), "platform is CUDA"),
    "is_cuda_alike": (_platform_is("cuda", "rocm"), "platform is CUDA or ROCm"),
    "is_hip": (_platform_is("rocm"), "platform is ROCm"),
    "is_npu": (_platform_is("npu"), "platform is an Ascend NPU"),
    "is_xpu": (_platform_is("xpu"), "platform is an Intel XPU"),
    "is_hpu": (_platform_is("hpu"), "platform is a Gaudi HPU"),
    "is_cpu": (_platform_is("cpu"), "platform is the CPU"),
    "is_mps": (_platform_is("mps"), "platform is Apple MPS"),
    "is_musa": (_platform_is("musa"), "platform is MUSA"),
    "is_host_cpu_x86": (_needs("the host CPU architecture"), "host CPU is x86"),
    "cpu_has_amx_support": (_needs("the host CPU's AMX support"), "CPU has AMX"),
    "xpu_has_xmx_support": (_needs("the XPU's XMX support"), "XPU has XMX"),
    "is_sm90_supported": (_sm((9,)), "GPU is SM90 (Hopper)"),
    "is_hopper_with_cuda_12_3": (_sm((9,)), "GPU is SM90 (Hopper) with CUDA >= 12.3"),
    "is_sm100_supported": (_sm((10,)), "GPU is SM100/SM103 (Blackwell datacenter)"),
    "is_sm120_supported": (_sm((12,)), "GPU is SM120 (Blackwell workstation)"),
    "is_blackwell_supported": (_sm((10, 12)), "GPU is Blackwell (SM100/SM103/SM120)"),
    "is_blackwell": (_sm((10, 12)), "GPU is Blackwell (SM100/SM103/SM120)"),
    "is_sm80_supported": (_sm((8,)), "GPU is SM80 (Ampere)"),
    "get_device_sm": (_sm_value, "the GPU's SM version"),
    "get_device_capability": (_capability, "the GPU's compute capability"),
    "get_device": (_device, "the device type"),
    "get_device_memory_capacity": (_needs("GPU memory"), "GPU memory"),
    "get_nvgpu_memory_capacity": (_needs("GPU memory"), "GPU memory"),
    "get_device_name": (_needs("the GPU's model name"), "the GPU's model name"),
    "get_device_count": (
        lambda p, _a: p.gpus if p.gpus is not None else unknown("the GPU count"),
        "the GPU count",
    ),
    "check_pkg_version_at_least": (_package, "an installed package version"),
    "is_flashinfer_available": (_flashinfer, "flashinfer is installed (CUDA)"),
    "is_triton_kernels_available": (_package, "triton_kernels is installed"),
    "parse_connector_type": (_connector, "the connector type of a model path"),
    "get_quantization_config": (_quant, "the model's quantization_config.quant_method"),
    "get_bool_env_var": (_needs("an environment variable"), "an environment variable"),
    "get_int_env_var": (_needs("an environment variable"), "an environment variable"),
    "get_str_env_var": (_needs("an environment variable"), "an environment variable"),
    "torch_release": (_needs("the installed torch version"), "the torch version"),
    "is_in_ci": (lambda _p, _a: False, "running in SGLang's CI"),
    "is_port_available": (lambda _p, _a: True, "a port is free"),
    "is_remote_url": (
        lambda _p, a: ("://" in a[0]) if a and isinstance(a[0], str) else unknown("the model path"),
        "a path is a URL",
    ),
    "check_gguf_file": (
        lambda _p, a: (
            a[0].endswith(".gguf") if a and isinstance(a[0], str) else unknown("the model path")
        ),
        "a model path is a GGUF file",
    ),
}


def answer(name: str, profile: Profile, args: list[Any]) -> Any:
    """The predicate's value under the profile, or Unknown; KeyError when not in the table."""
    fn, _text = PREDICATES[name]
    return fn(profile, args)
