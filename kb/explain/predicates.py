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
from typing import Any

from pydantic import ConfigDict, ValidationError
from pydantic.fields import FieldInfo

from kb.contract import Gpu
from kb.explain.abstract_values import Obj
from kb.gpus import UnknownGpu, gpu_by_name
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

# The one Unknown (kb.threeval), which the simulator's modules import from here too.
from kb.threeval import NO_LIKELY as NO_LIKELY
from kb.threeval import Unknown as Unknown
from kb.threeval import unknown as unknown

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


# The least CUDA that compiles for an SM (NVIDIA's CUDA toolkit release notes: 12.8 added
# sm_100 and sm_120, 12.9 sm_103 and sm_121): torch on such a GPU was built with at least it.
SM_FIRST_CUDA: dict[int, tuple[int, int]] = {
    100: (12, 8),
    101: (12, 8),
    103: (12, 9),
    120: (12, 8),
    121: (12, 9),
}

# What decides a machine fact the profile lacks, in words a reader acts on.
NEEDS_PLATFORM = "the platform (profile gpu or platform)"
NEEDS_SM = "the GPU's SM version (profile gpu or sm)"
NEEDS_MEMORY = "GPU memory (profile gpu or gpu_mem_gb)"
NEEDS_DEVICE_NAME = "the GPU model (profile gpu)"
NEEDS_CUDA = "the CUDA version (profile cuda)"

# Marks a value's inputs in what a condition read (kb.explain.simulate): the model's
# config, a GPU fact (the profile's or the catalog's), an assumption ("<assumed:KEY>", the
# key of its words in the run's assumptions).
MODEL = "<model>"
GPU = "<gpu>"
ASSUMED = "<assumed:"


# ... one the profile states: `packages: assume-ok` says the packages SGLang uses for the
# GPU are installed, as a normal install has them (a raise resting on it is an error that
# names it; `packages: unknown` leaves it undecided)
PACKAGE_ASSUMED = ASSUMED + "pkg:"


def assumed(key: str) -> str:
    return f"{ASSUMED}{key}>"


def run_assumptions(marks: frozenset[str] | set[str]) -> list[str]:
    """The assumptions the run made itself (not the profile's) among a condition's marks."""
    return [m for m in marks if m.startswith(ASSUMED) and not m.startswith(PACKAGE_ASSUMED)]


class ProfileError(ValueError):
    """A profile that cannot be used (unknown platform, bad config.json...)."""


class Profile(ProfileFields):
    """A profile the simulation reads (Profile.parse): the platform one of PLATFORMS, a
    pasted config.json parsed, the architecture and quantization read from it when not
    given."""

    model_config = ConfigDict(frozen=True)

    config: dict[str, Any] | None = None
    # the draft model's config.json, when speculative decoding's draft is a checkpoint of
    # its own (kb.explain.model_weights reads it)
    draft_config: dict[str, Any] | None = None
    # ModelOpt checkpoints' quantization (kb.model_source reads it beside config.json);
    # SGLang's ModelConfig reads it, its hf_config does not.
    hf_quant_config: dict[str, Any] | None = None

    @property
    def empty(self) -> bool:
        return self.to_json() == Profile().to_json()

    def to_json(self) -> dict[str, Any]:
        """The profile as the answer gives it: the fields that are set."""
        return self.model_dump(exclude_none=True)

    @property
    def catalog(self) -> Gpu | None:
        """The catalog GPU the profile names (Profile.parse checked the name)."""
        return gpu_by_name(self.gpu) if self.gpu else None

    def describe(self) -> str:
        parts = [self.arch or "any model"]
        if self.quant:
            parts.append(self.quant)
        hw = self.platform or "any platform"
        if self.gpu:
            hw = f"{self.gpu} ({self.platform}"
            hw += f" sm{self.sm})" if self.platform == "cuda" and self.sm else ")"
        elif self.platform == "cuda" and self.sm:
            hw += f" sm{self.sm} ({SM_NAMES.get(self.sm, '?')})"
        memory = self.memory_mib()
        if memory is not None:
            hw += f", {memory[0] / 1024:g} GiB"
        if self.cuda:
            hw += f", CUDA {self.cuda}"
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
        config = _config(get.get("config"), "config", "")
        draft_config = _config(get.get("draft_config"), "draft_config", "the draft model's ")
        quant_config = get.get("hf_quant_config")
        if quant_config is not None and not isinstance(quant_config, dict):
            raise ProfileError("hf_quant_config must be a JSON object")
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
        gpu = None
        if get.get("gpu") is not None:
            try:
                gpu = gpu_by_name(str(get["gpu"]))
            except UnknownGpu as exc:
                raise ProfileError(str(exc)) from None
        sm = _int(get.get("sm"), "sm")
        if gpu is not None:  # what the profile gives explicitly overrides the catalog
            platform = platform or gpu.platform
            sm = sm if sm is not None else gpu.sm
        if sm is not None and platform is None:
            platform = "cuda"
        cuda = get.get("cuda")
        if cuda is not None and not _version(str(cuda)):
            raise ProfileError(f"cuda must be a version such as 12.9, got {cuda!r}")
        try:
            profile = cls(
                model=str(get["model"]) if get.get("model") else None,
                arch=str(arch) if arch else None,
                quant=str(quant) if quant else None,
                gpu=gpu.name if gpu else None,
                platform=platform,
                sm=sm,
                gpu_mem_gb=_number(get.get("gpu_mem_gb"), "gpu_mem_gb"),
                cuda=str(cuda) if cuda is not None else None,
                gpus=_int(get.get("gpus"), "gpus"),
                nodes=_int(get.get("nodes"), "nodes"),
                packages=packages,
                env=env,
                config=config,
                hf_quant_config=quant_config,
                draft_config=draft_config,
            )
        except ValidationError as exc:  # e.g. an architecture in config.json too long
            error = exc.errors()[0]
            raise ProfileError(f"{error['loc'][0]}: {error['msg']}") from None
        return None if profile.empty else profile

    # --- the GPU's facts, each with the input it comes from ----------------------------

    def memory_mib(self) -> tuple[float, str | None] | None:
        """The MiB get_device_memory_capacity() reads, and the assumption it rests on (None:
        given, or on record): gpu_mem_gb × 1024, else the catalog's nvidia-smi total, else
        its nominal GB × 1024 (an assumption: no public record of the total)."""
        if self.gpu_mem_gb is not None:
            return self.gpu_mem_gb * 1024, None
        gpu = self.catalog
        if gpu is None:
            return None
        if gpu.memory_mb is not None:
            return float(gpu.memory_mb), None
        return float(gpu.memory_gb * 1024), (
            f"GPU memory {gpu.memory_gb * 1024} MiB ({gpu.name}'s {gpu.memory_gb} GB × 1024: "
            "the catalog has no record of the total torch reports; give gpu_mem_gb to decide)"
        )

    def cuda_version(self) -> tuple[tuple[int, int], str | None] | None:
        """torch.version.cuda as (major, minor), and the assumption it rests on: the
        profile's `cuda`, else the version the catalog saw on the GPU (an assumption)."""
        given = _version(self.cuda) if self.cuda else None
        if given is not None:
            return given, None
        gpu = self.catalog
        typical = _version(gpu.cuda) if gpu is not None and gpu.cuda else None
        if gpu is not None and typical is not None and self.platform == "cuda":
            return typical, (
                f"CUDA {gpu.cuda}, the catalog's typical version for {gpu.name} "
                "(give cuda to decide)"
            )
        return None

    def device_name(self) -> str | None:
        """torch's device name of the GPU: the catalog's (the profile's own sm does not
        say which GPU it is)."""
        gpu = self.catalog
        return gpu.device_name if gpu is not None and gpu.platform == self.platform else None

    # --- the model's config, as SGLang's hf_config ------------------------------------

    def hf_attr(self, name: str) -> Any:
        """An attribute of the model's hf_config; `MISSING` when the config lacks it, and
        unknown when only its text_config has it (whether a composite config class answers
        it from its text config is transformers' version's: Llama-4's num_experts_per_tok)."""
        if self.config is not None:
            text = self.config.get("text_config")
            if name not in self.config and isinstance(text, dict) and name in text:
                return unknown(
                    f"whether the model's config class answers {name} from its text_config"
                )
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


def _config(value: Any, name: str, whose: str) -> dict[str, Any] | None:
    """A config.json given as text or as an object, parsed and held to the bounds of
    kb.profile.config_problem; `whose` begins the error's words ("the draft model's ")."""
    if isinstance(value, str):
        if len(value) > MAX_CONFIG:
            raise ProfileError(f"{whose or 'the '}pasted config.json is too long")
        try:
            value = json.loads(value)
        except RecursionError:  # the parser's own bound, far past ours
            raise ProfileError(
                f"{whose}config.json nests deeper than {MAX_CONFIG_DEPTH} levels"
            ) from None
        except ValueError as exc:
            raise ProfileError(f"{whose or 'the '}pasted config.json is not JSON: {exc}") from None
    if value is not None and not isinstance(value, dict):
        raise ProfileError(f"{name} must be a JSON object (a model's config.json)")
    problem = config_problem(value) if value is not None else None
    if problem is not None:
        raise ProfileError(whose + problem)
    return value


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


def _number(value: Any, name: str) -> float | None:
    """A number field that takes a fraction (gpu_mem_gb), in the bounds ProfileFields sets."""
    if value in (None, ""):
        return None
    try:
        number = float(str(value))
    except ValueError:
        raise ProfileError(f"{name} must be a number, got {value!r}") from None
    low, high = _bounds(ProfileFields.model_fields[name])
    if not low <= number <= high:  # also refuses nan
        raise ProfileError(f"{name} out of range: {value}")
    return number


def _version(text: str) -> tuple[int, int] | None:
    """ "12.9" -> (12, 9), as SGLang reads torch.version.cuda (its first two numbers)."""
    parts = text.strip().split(".")
    if len(parts) < 2 or not all(p.isdigit() and len(p) <= 4 for p in parts[:2]):
        return None
    return int(parts[0]), int(parts[1])


def _bounds(info: FieldInfo) -> tuple[int, int]:
    """A number field's least and greatest value (each number field sets both)."""
    bounds = {b: getattr(m, b) for m in info.metadata for b in ("ge", "le") if hasattr(m, b)}
    return bounds["ge"], bounds["le"]


# --- the vocabulary ---------------------------------------------------------------------


class Facts:
    """The profile as one predicate's answer reads it: each fact read marks its input in
    `used` (GPU, or an assumption with its words), which the simulation adds to what the
    condition read."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.used: dict[str, str | None] = {}  # mark -> the assumption's words, if one

    def _mark(self, mark: str, words: str | None = None) -> None:
        self.used[mark] = words

    def platform(self) -> Any:
        if self.profile.platform is None:
            return unknown(NEEDS_PLATFORM)
        self._mark(GPU)
        return self.profile.platform

    def sm(self) -> Any:
        if self.profile.sm is None:
            return unknown(NEEDS_SM)
        self._mark(GPU)
        return self.profile.sm

    def memory_mib(self) -> Any:
        memory = self.profile.memory_mib()
        if memory is None:
            return unknown(NEEDS_MEMORY)
        value, assumption = memory
        self._mark(assumed("gpu:memory") if assumption else GPU, assumption)
        return value

    def device_name(self) -> Any:
        name = self.profile.device_name()
        if name is None:
            return unknown(NEEDS_DEVICE_NAME)
        self._mark(GPU)
        return name

    def cuda(self) -> Any:
        """torch.version.cuda's text."""
        version = self.profile.cuda_version()
        if version is None:
            return unknown(NEEDS_CUDA)
        (major, minor), assumption = version
        self._mark(assumed("gpu:cuda") if assumption else GPU, assumption)
        return f"{major}.{minor}"

    def cuda_at_least(self, floor: tuple[int, int]) -> Any:
        """torch.version.cuda >= floor. The least CUDA that compiles for the GPU's SM
        settles it when it reaches the floor (torch runs on a GPU only when built for it:
        CUDA >= 12.8 on sm100); else the CUDA version, the profile's or the catalog's."""
        sm = self.profile.sm
        first = SM_FIRST_CUDA.get(sm) if sm is not None else None
        if first is not None and first >= floor:
            self._mark(GPU)
            return True
        version = self.profile.cuda_version()
        if version is None:
            return unknown(NEEDS_CUDA)
        self.cuda()
        return version[0] >= floor


Answer = Callable[[Facts, list[Any]], Any]


def _platform_is(*names: str) -> Answer:
    def answer(f: Facts, _args: list[Any]) -> Any:
        platform = f.platform()
        return platform if isinstance(platform, Unknown) else platform in names

    return answer


def _sm(majors: tuple[int, ...], cuda: tuple[int, int] | None = None) -> Answer:
    """`_check_cuda_device_version(device_capability_majors=[...], cuda_version=(...))`:
    CUDA, a capability major in `majors`, and torch built with at least CUDA `cuda`."""

    def answer(f: Facts, _args: list[Any]) -> Any:
        platform = f.platform()
        if isinstance(platform, Unknown) or platform != "cuda":
            return platform if isinstance(platform, Unknown) else False
        sm = f.sm()
        if isinstance(sm, Unknown) or sm // 10 not in majors:
            return sm if isinstance(sm, Unknown) else False
        return True if cuda is None else f.cuda_at_least(cuda)

    return answer


def _sm_value(f: Facts, _args: list[Any]) -> Any:
    """`get_device_sm()`: major * 10 + minor where torch.cuda is available (CUDA and ROCm,
    where torch reports the gfx version: gfx942 is 94), else 0."""
    platform = f.platform()
    if isinstance(platform, Unknown):
        return platform
    if platform not in ("cuda", "rocm"):
        return 0
    return f.sm()


def _capability(f: Facts, _args: list[Any]) -> Any:
    value = _sm_value(f, _args)
    return (value // 10, value % 10) if isinstance(value, int) else value


def _memory(f: Facts, args: list[Any]) -> Any:
    """`get_device_memory_capacity(device)`: the MiB total nvidia-smi (CUDA), rocm-smi
    (ROCm) or torch.npu (an NPU) reports; other devices read the host, unknown here."""
    platform = f.platform()
    if isinstance(platform, Unknown):
        return platform
    if platform in ("cuda", "rocm", "npu"):
        return f.memory_mib()
    return unknown(f"the memory of the {platform} device")


def _device_name(f: Facts, _args: list[Any]) -> Any:
    """`get_device_name()`: torch's name of the device (CUDA, ROCm through torch.cuda, NPU)."""
    platform = f.platform()
    if isinstance(platform, Unknown):
        return platform
    if platform not in ("cuda", "rocm", "npu"):
        return unknown(f"the name of the {platform} device")
    return f.device_name()


def _torch_cuda(f: Facts, _args: list[Any]) -> Any:
    """`torch.version.cuda`: its CUDA version on CUDA, None on other platforms."""
    platform = f.platform()
    if isinstance(platform, Unknown) or platform != "cuda":
        return platform if isinstance(platform, Unknown) else None
    return f.cuda()


def _torch_hip(f: Facts, _args: list[Any]) -> Any:
    """`torch.version.hip`: on ROCm the catalog GPU's ROCm version (a text: `if
    torch.version.hip:` holds), else unknown; None elsewhere."""
    platform = f.platform()
    if isinstance(platform, Unknown) or platform == "rocm":
        if isinstance(platform, Unknown):
            return platform
        gpu = f.profile.catalog
        return gpu.rocm if gpu is not None and gpu.rocm else unknown("the ROCm version")
    return None


def _device_properties(f: Facts, _args: list[Any]) -> Any:
    """`torch.cuda.get_device_properties(i)`: the device, whose attributes the simulation
    reads from the profile (kb.explain.model_attrs.device_property)."""
    platform = f.platform()
    return platform if isinstance(platform, Unknown) else Obj("device_properties")


def _in_tree(f: Facts, _args: list[Any]) -> Any:
    """`current_platform.is_out_of_tree()`: False for the platforms SGLang ships
    (sglang/srt/platforms: cuda, rocm, cpu); a plugin's otherwise."""
    platform = f.platform()
    if isinstance(platform, Unknown) or platform not in ("cuda", "rocm", "cpu"):
        return unknown("whether a platform plugin is installed")
    return False


def _in_tree_defaults(f: Facts, _args: list[Any]) -> Any:
    """`current_platform.apply_server_args_defaults(server_args)`: the in-tree platforms
    keep SRTPlatform's, which does nothing."""
    out_of_tree = _in_tree(f, _args)
    return out_of_tree if isinstance(out_of_tree, Unknown) else None


def _package(f: Facts, args: list[Any]) -> Any:
    """`check_pkg_version_at_least(name, version)` or a package's availability: installed
    when the profile assumes packages are (an assumption the answer states), else unknown."""
    name = args[0] if args and isinstance(args[0], str) else "a package"
    if f.profile.packages == "assume-ok":
        what = f"{name} >= {args[1]}" if len(args) > 1 else name
        f._mark(assumed(f"pkg:{what}"), f"{what} is installed")
        return True
    return unknown(f"the installed version of {name}")


def _package_named(name: str) -> Answer:
    """A predicate that asks whether one package is installed (it takes no arguments)."""

    def answer(f: Facts, _args: list[Any]) -> Any:
        return _package(f, [name])

    return answer


def _flashinfer(f: Facts, args: list[Any]) -> Any:
    cuda = _platform_is("cuda")(f, args)
    if cuda is not True:
        return cuda
    return _package(f, ["flashinfer"])


# packages SGLang imports on one platform only (a ROCm install has none of CUDA's)
PLATFORM_PACKAGES = {
    **dict.fromkeys(("flashinfer", "deep_gemm", "deep_ep"), "cuda"),
    **dict.fromkeys(("zbal", "torch_npu"), "npu"),
}


def _importable(f: Facts, args: list[Any]) -> Any:
    """Whether a module-level try-import of the package succeeds: a platform's own
    package on that platform alone, then installed as the profile assumes packages are."""
    name = args[0] if args and isinstance(args[0], str) else "a package"
    if name in PLATFORM_PACKAGES:
        on = _platform_is(PLATFORM_PACKAGES[name])(f, args)
        if on is not True:
            return on
    return _package(f, [name])


IMPORTABLE = "<importable>"  # (not a name in SGLang's code: asked for try-imports)


def _device(f: Facts, _args: list[Any]) -> Any:
    platform = f.platform()
    if isinstance(platform, Unknown):
        return platform
    return {"rocm": "cuda"}.get(platform, platform)


def _gpu_count(f: Facts, _args: list[Any]) -> Any:
    return f.profile.gpus if f.profile.gpus is not None else unknown("the GPU count")


def _connector(_f: Facts, args: list[Any]) -> Any:
    url = args[0] if args else None
    if isinstance(url, str) and "://" not in url:
        return ""  # SGLang: no `<type>://` prefix, no connector
    return unknown("the connector type of --model-path")


def _quant(f: Facts, _args: list[Any]) -> Any:
    p = f.profile
    if p.config is not None:
        f.used[MODEL] = None
        qc = p.config.get("quantization_config")
        return qc.get("quant_method") if isinstance(qc, dict) else None
    if p.quant:
        f.used[MODEL] = None
        return p.quant
    return unknown("the model's quantization (config.json quantization_config)")


def _needs(fact: str) -> Answer:
    return lambda _f, _args: unknown(fact)


# name -> (answer, what it asks in words). The SM predicates' CUDA floors are those of
# SGLang's definitions (utils/common.py: `is_sm100_supported` is
# `_check_cuda_device_version(device_capability_majors=[10], cuda_version=(12, 8))`,
# `is_hopper_with_cuda_12_3` is `..._version([9], (12, 3))`; v0.5.x states the same floors
# as `torch.version.cuda >= "12.8"`).
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
    "is_out_of_tree": (_in_tree, "the platform is a plugin's, not one SGLang ships"),
    "apply_server_args_defaults": (_in_tree_defaults, "the platform's own server args defaults"),
    "is_host_cpu_x86": (_needs("the host CPU architecture"), "host CPU is x86"),
    "is_host_cpu_arm64": (_needs("the host CPU architecture"), "host CPU is arm64"),
    "cpu_has_amx_support": (_needs("the host CPU's AMX support"), "CPU has AMX"),
    "xpu_has_xmx_support": (_needs("the XPU's XMX support"), "XPU has XMX"),
    "is_sm90_supported": (_sm((9,), (12, 3)), "GPU is SM90 (Hopper) with CUDA >= 12.3"),
    "is_hopper_with_cuda_12_3": (_sm((9,), (12, 3)), "GPU is SM90 (Hopper) with CUDA >= 12.3"),
    "is_ampere_with_cuda_12_3": (_sm((8,), (12, 3)), "GPU is SM80 (Ampere) with CUDA >= 12.3"),
    "is_sm100_supported": (_sm((10,), (12, 8)), "GPU is SM100/SM103 with CUDA >= 12.8"),
    "is_sm120_supported": (_sm((12,), (12, 8)), "GPU is SM120 with CUDA >= 12.8"),
    "is_blackwell_supported": (
        _sm((10, 11, 12), (12, 8)),
        "GPU is Blackwell (SM100/SM103/SM110/SM120) with CUDA >= 12.8",
    ),
    "is_blackwell": (_sm((10, 11, 12)), "GPU is Blackwell (SM100/SM103/SM110/SM120)"),
    "is_sm80_supported": (_sm((8,), (11, 0)), "GPU is SM80 (Ampere)"),
    "get_device_sm": (_sm_value, "the GPU's SM version"),
    "get_device_capability": (_capability, "the GPU's compute capability"),
    "get_device_properties": (_device_properties, "the GPU's properties"),
    "torch.version.cuda": (_torch_cuda, "the CUDA version torch was built with"),
    "torch.version.hip": (_torch_hip, "the ROCm version torch was built with"),
    "get_device": (_device, "the device type"),
    "get_device_memory_capacity": (_memory, "GPU memory (MiB)"),
    "get_nvgpu_memory_capacity": (_memory, "GPU memory (MiB)"),
    "get_device_name": (_device_name, "the GPU's model name"),
    "get_nvidia_driver_version": (_needs("the NVIDIA driver version"), "the driver version"),
    "get_device_count": (_gpu_count, "the GPU count"),
    "check_pkg_version_at_least": (_package, "an installed package version"),
    "is_flashinfer_available": (_flashinfer, "flashinfer is installed (CUDA)"),
    IMPORTABLE: (_importable, "a package a module's try-import imports is installed"),
    "is_triton_kernels_available": (
        _package_named("triton_kernels"),
        "triton_kernels is installed",
    ),
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
    return answer_with_inputs(name, profile, args)[0]


def answer_with_inputs(
    name: str, profile: Profile, args: list[Any]
) -> tuple[Any, dict[str, str | None]]:
    """The predicate's value, and the inputs it rests on (marks -> assumption words)."""
    fn, _text = PREDICATES[name]
    facts = Facts(profile)
    return fn(facts, args), facts.used
