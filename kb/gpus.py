"""A catalog of the GPUs (and an NPU) people deploy SGLang on, with the facts SGLang's
`ServerArgs.__post_init__` branches on: compute capability (`sm`), memory (nominal GB, and
the MiB total `get_device_memory_capacity()` reads), the `torch.cuda.get_device_name()`
string (rules test substrings such as "H20") and a CUDA/ROCm/CANN version seen on it.

Every fact cites a public record (`Gpu.source`): vendor pages for sm and nominal memory,
issues showing `nvidia-smi` / `sglang.check_env` / `rocminfo` output for the device name,
the MiB total and the toolkit version, or SGLang's own code at a commit. A fact no public
record was found for is None, and its source says so. Nothing here is measured or guessed.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from rapidfuzz import fuzz, process

from kb.contract import Gpu, GpuList, GpuSource, GpuSources

# --- sources shared by several GPUs ----------------------------------------------------------

NVIDIA_CC = GpuSource(
    title="NVIDIA, CUDA GPU Compute Capability (table: GPU -> compute capability)",
    url="https://developer.nvidia.com/cuda-gpus",
)
NVIDIA_FORUM_CC = GpuSource(
    title="NVIDIA Developer Forums, 'Minimum required CUDA version by GPU' (A100 - 8.0)",
    url="https://forums.developer.nvidia.com/t/minimum-required-cuda-version-by-gpu/276955/2",
)
NIM_LLM_GPUS = "https://docs.nvidia.com/nim/large-language-models/1.13.0/supported-models.html"
NIM_GENMOL_GPUS = "https://docs.nvidia.com/nim/bionemo/genmol/support-matrix"
ROCM_SPECS = "https://rocm.docs.amd.com/en/7.13.0-preview/reference/gpu-specs.html"
MODAL_MIB = GpuSource(
    title="modal-labs/modal-client#2797: nvidia-smi totals across Modal's GPU types "
    "(H100 81559MiB, A100 80GB 81920MiB, A100 40GB 40960MiB, L40S 46068MiB)",
    url="https://github.com/modal-labs/modal-client/pull/2797",
)

RTX_5090_SMI = GpuSource(
    title="noonghunna/club-3090#1261: nvidia-smi on 2x NVIDIA GeForce RTX 5090 running SGLang "
    "(29024MiB / 32607MiB)",
    url="https://github.com/noonghunna/club-3090/issues/1261",
)

# SGLang's own code is cited at the commit of the label it was read at.
SGLANG_COMMITS = {"snapshot-2026-07-01": "53c61bd5e62ca90a8e488821917abf9303c8b94d"}
SGLANG_MOE_CONFIGS = "python/sglang/srt/layers/moe/moe_runner/triton_utils/configs"


def sglang_source(what: str, path: str, line: int | None = None) -> GpuSource:
    """SGLang's own code at snapshot-2026-07-01 (its tuned-config file names are
    `get_device_name().replace(" ", "_")`: fused_moe_triton_config.py line 44)."""
    label = "snapshot-2026-07-01"
    where = f"{label}:{path}" + (f":{line}" if line else "")
    url = f"https://github.com/sgl-project/sglang/blob/{SGLANG_COMMITS[label]}/"
    url += quote(path, safe="/,=") + (f"#L{line}" if line else "")
    return GpuSource(title=f"SGLang's own table at {where}: {what}", url=url)


def moe_config_name(device: str, triton: str, experts: str) -> GpuSource:
    """A tuned MoE config SGLang ships for a device: its file name spells the device name."""
    underscored = device.replace(" ", "_")
    path = f"{SGLANG_MOE_CONFIGS}/{triton}/{experts},device_name={underscored}.json"
    return sglang_source(f"tuned config file for device_name={underscored}", path)


def issue(title: str, url: str) -> GpuSource:
    return GpuSource(title=title, url=url)


def not_found(what: str) -> GpuSource:
    return GpuSource(title=f"No public record found: {what}", url=None)


def nim_llm(gpu: str, gb: int) -> GpuSource:
    return issue(f"NVIDIA NIM for LLMs 1.13.0, Supported Models, GPUs: {gpu} {gb} GB", NIM_LLM_GPUS)


def nim_genmol(gpu: str, gb: int) -> GpuSource:
    return issue(f"NVIDIA GenMol NIM, Support Matrix: {gpu} {gb} GB", NIM_GENMOL_GPUS)


def rocm_specs(fact: str) -> GpuSource:
    return issue(f"AMD ROCm docs, AMD GPU specifications: {fact}", ROCM_SPECS)


# --- the catalog -----------------------------------------------------------------------------

CHECK_ENV = "sglang.check_env"

GPUS: tuple[Gpu, ...] = (
    Gpu(
        name="A100 40GB",
        platform="cuda",
        sm=80,
        arch=None,
        memory_gb=40,
        memory_mb=40960,
        device_name="NVIDIA A100-SXM4-40GB",
        cuda=None,
        rocm=None,
        cann=None,
        aliases=("A100-SXM4-40GB",),
        source=GpuSources(
            sm=NVIDIA_FORUM_CC,
            arch=None,
            memory_gb=nim_genmol("NVIDIA A100", 40),
            memory_mb=MODAL_MIB,
            device_name=moe_config_name("NVIDIA A100-SXM4-40GB", "triton_3_1_0", "E=16,N=1344"),
            cuda=not_found(f"a {CHECK_ENV} or collect_env output on an A100 40GB"),
            rocm=None,
            cann=None,
        ),
    ),
    Gpu(
        name="A100 80GB",
        platform="cuda",
        sm=80,
        arch=None,
        memory_gb=80,
        memory_mb=81920,
        device_name="NVIDIA A100-SXM4-80GB",
        cuda="12.1",
        rocm=None,
        cann=None,
        aliases=("A100-SXM4-80GB",),
        source=GpuSources(
            sm=NVIDIA_FORUM_CC,
            arch=None,
            memory_gb=nim_llm("A100 SXM", 80),
            memory_mb=MODAL_MIB,
            device_name=issue(
                f"sgl-project/sglang#965: {CHECK_ENV} (NVIDIA A100-SXM4-80GB, capability 8.0, "
                "PyTorch 2.3.1+cu121)",
                "https://github.com/sgl-project/sglang/pull/965",
            ),
            cuda=issue(
                f"sgl-project/sglang#965: {CHECK_ENV} shows PyTorch 2.3.1+cu121",
                "https://github.com/sgl-project/sglang/pull/965",
            ),
            rocm=None,
            cann=None,
        ),
    ),
    Gpu(
        name="H100 80GB",
        platform="cuda",
        sm=90,
        arch=None,
        memory_gb=80,
        memory_mb=81559,
        device_name="NVIDIA H100 80GB HBM3",
        cuda="12.6",
        rocm=None,
        cann=None,
        aliases=("H100", "H100 SXM", "H100 80GB HBM3"),
        source=GpuSources(
            sm=NVIDIA_CC,
            arch=None,
            memory_gb=nim_llm("H100 SXM", 80),
            memory_mb=MODAL_MIB,
            device_name=issue(
                f"sgl-project/sglang#10216: {CHECK_ENV} (NVIDIA H100 80GB HBM3, capability "
                "9.0, PyTorch 2.8.0+cu126)",
                "https://github.com/sgl-project/sglang/issues/10216",
            ),
            cuda=issue(
                f"sgl-project/sglang#10216: {CHECK_ENV} shows PyTorch 2.8.0+cu126",
                "https://github.com/sgl-project/sglang/issues/10216",
            ),
            rocm=None,
            cann=None,
        ),
    ),
    Gpu(
        name="H20",
        platform="cuda",
        sm=90,
        arch=None,
        memory_gb=96,
        memory_mb=97871,
        device_name="NVIDIA H20",
        cuda="12.9",
        rocm=None,
        cann=None,
        aliases=(),
        source=GpuSources(
            sm=issue(
                f"sgl-project/sglang#11052: {CHECK_ENV} on H20 (NVIDIA H20, capability 9.0)",
                "https://github.com/sgl-project/sglang/pull/11052",
            ),
            arch=None,
            memory_gb=nim_llm("H20", 96),
            memory_mb=issue(
                "NVIDIA/nvtrust#128: nvidia-smi shows NVIDIA H20 with 97871MiB",
                "https://github.com/NVIDIA/nvtrust/issues/128",
            ),
            device_name=issue(
                f"sgl-project/sglang#11052: {CHECK_ENV} on H20 (NVIDIA H20, PyTorch 2.8.0+cu129)",
                "https://github.com/sgl-project/sglang/pull/11052",
            ),
            cuda=issue(
                f"sgl-project/sglang#11052: {CHECK_ENV} shows PyTorch 2.8.0+cu129",
                "https://github.com/sgl-project/sglang/pull/11052",
            ),
            rocm=None,
            cann=None,
        ),
    ),
    Gpu(
        name="H200",
        platform="cuda",
        sm=90,
        arch=None,
        memory_gb=141,
        memory_mb=143771,
        device_name="NVIDIA H200",
        cuda="12.4",
        rocm=None,
        cann=None,
        aliases=("H200 141GB", "H200 SXM"),
        source=GpuSources(
            sm=NVIDIA_CC,
            arch=None,
            memory_gb=nim_llm("H200 SXM", 141),
            memory_mb=issue(
                "sgl-project/sglang#3196: nvidia-smi shows NVIDIA H200 with 143771MiB",
                "https://github.com/sgl-project/sglang/issues/3196",
            ),
            device_name=issue(
                f"sgl-project/sglang#3817: {CHECK_ENV} (NVIDIA H200, capability 9.0, PyTorch "
                "2.5.1+cu124)",
                "https://github.com/sgl-project/sglang/issues/3817",
            ),
            cuda=issue(
                f"sgl-project/sglang#3817: {CHECK_ENV} shows PyTorch 2.5.1+cu124",
                "https://github.com/sgl-project/sglang/issues/3817",
            ),
            rocm=None,
            cann=None,
        ),
    ),
    Gpu(
        name="B200",
        platform="cuda",
        sm=100,
        arch=None,
        memory_gb=180,
        memory_mb=183359,
        device_name="NVIDIA B200",
        cuda="12.9",
        rocm=None,
        cann=None,
        aliases=("HGX B200",),
        source=GpuSources(
            sm=NVIDIA_CC,
            arch=None,
            memory_gb=issue(
                "NVIDIA DGX B200 User Guide: 8 x NVIDIA B200 GPUs that provide 1,440 GB total "
                "GPU memory (180 GB each; SGLang's cookbook table says 192GB)",
                "https://docs.nvidia.com/dgx/dgxb200-user-guide/introduction-to-dgxb200.html",
            ),
            memory_mb=issue(
                "sgl-project/sglang#27487: nvidia-smi shows NVIDIA B200 with 183359MiB",
                "https://github.com/sgl-project/sglang/issues/27487",
            ),
            device_name=issue(
                f"sgl-project/sglang#18943: {CHECK_ENV} (NVIDIA B200, capability 10.0, "
                "PyTorch 2.9.1+cu129)",
                "https://github.com/sgl-project/sglang/issues/18943",
            ),
            cuda=issue(
                f"sgl-project/sglang#18943: {CHECK_ENV} shows PyTorch 2.9.1+cu129",
                "https://github.com/sgl-project/sglang/issues/18943",
            ),
            rocm=None,
            cann=None,
        ),
    ),
    Gpu(
        name="B300",
        platform="cuda",
        sm=103,
        arch=None,
        memory_gb=288,
        memory_mb=None,
        device_name="NVIDIA B300 SXM6 AC",
        cuda="13.0",
        rocm=None,
        cann=None,
        aliases=("B300 SXM6 AC", "HGX B300"),
        source=GpuSources(
            sm=NVIDIA_CC,
            arch=None,
            memory_gb=nim_genmol("NVIDIA B300", 288),
            memory_mb=not_found("an nvidia-smi memory.total on a B300"),
            device_name=issue(
                "NVIDIA/cosmos-framework#114: torch.cuda.get_device_name() returns "
                "'NVIDIA B300 SXM6 AC'",
                "https://github.com/NVIDIA/cosmos-framework/pull/114",
            ),
            cuda=issue(
                "vllm-project/vllm#28707: collect_env on B300, CUDA used to build PyTorch: 13.0",
                "https://github.com/vllm-project/vllm/issues/28707",
            ),
            rocm=None,
            cann=None,
        ),
    ),
    Gpu(
        name="GB200",
        platform="cuda",
        sm=100,
        arch=None,
        memory_gb=186,
        memory_mb=None,
        device_name="NVIDIA GB200",
        cuda="12.9",
        rocm=None,
        cann=None,
        aliases=("GB200 NVL72",),
        source=GpuSources(
            sm=NVIDIA_CC,
            arch=None,
            memory_gb=issue(
                "NVIDIA GenMol NIM, Support Matrix: NVIDIA GB200 186 GB (NVIDIA's NIM Day 0 "
                "matrix and SGLang's cookbook table say 192)",
                NIM_GENMOL_GPUS,
            ),
            memory_mb=not_found("an nvidia-smi memory.total on a GB200"),
            device_name=issue(
                f"sgl-project/sglang#11208: {CHECK_ENV} (NVIDIA GB200, capability 10.0, "
                "PyTorch 2.8.0+cu129)",
                "https://github.com/sgl-project/sglang/issues/11208",
            ),
            cuda=issue(
                f"sgl-project/sglang#11208: {CHECK_ENV} shows PyTorch 2.8.0+cu129",
                "https://github.com/sgl-project/sglang/issues/11208",
            ),
            rocm=None,
            cann=None,
        ),
    ),
    Gpu(
        name="GB300",
        platform="cuda",
        sm=103,
        arch=None,
        memory_gb=288,
        memory_mb=None,
        device_name="NVIDIA GB300",
        cuda=None,
        rocm=None,
        cann=None,
        aliases=("GB300 NVL72",),
        source=GpuSources(
            sm=NVIDIA_CC,
            arch=None,
            memory_gb=nim_genmol("NVIDIA GB300", 288),
            memory_mb=not_found("an nvidia-smi memory.total on a GB300"),
            device_name=issue(
                "pytorch/pytorch#196944: exact-name GB300 device metadata; lookup_device_info "
                "resolves 'NVIDIA GB300' on a GB300 host",
                "https://github.com/pytorch/pytorch/pull/196944",
            ),
            cuda=not_found("a torch.version.cuda printed on a GB300"),
            rocm=None,
            cann=None,
        ),
    ),
    Gpu(
        name="RTX PRO 6000",
        platform="cuda",
        sm=120,
        arch=None,
        memory_gb=96,
        memory_mb=None,
        device_name="NVIDIA RTX PRO 6000 Blackwell Server Edition",
        cuda="13.0",
        rocm=None,
        cann=None,
        aliases=("RTX PRO 6000 Blackwell", "RTX PRO 6000 Blackwell Server Edition"),
        source=GpuSources(
            sm=NVIDIA_CC,
            arch=None,
            memory_gb=nim_llm("NVIDIA RTX PRO 6000 Blackwell Server Edition", 96),
            memory_mb=not_found("an nvidia-smi memory.total on an RTX PRO 6000 Blackwell"),
            device_name=issue(
                "NVIDIA/personaplex#2: torch warns 'NVIDIA RTX PRO 6000 Blackwell Server "
                "Edition with CUDA capability sm_120'",
                "https://github.com/NVIDIA/personaplex/issues/2",
            ),
            cuda=issue(
                "vllm-project/vllm#32109: collect_env on RTX PRO 6000 Blackwell Server "
                "Edition, PyTorch 2.9.1+cu130",
                "https://github.com/vllm-project/vllm/issues/32109",
            ),
            rocm=None,
            cann=None,
        ),
    ),
    Gpu(
        name="RTX 5090",
        platform="cuda",
        sm=120,
        arch=None,
        memory_gb=32,
        memory_mb=32607,
        device_name="NVIDIA GeForce RTX 5090",
        cuda=None,
        rocm=None,
        cann=None,
        aliases=("GeForce RTX 5090", "NVIDIA GeForce RTX 5090"),
        source=GpuSources(
            sm=NVIDIA_CC,
            arch=None,
            memory_gb=RTX_5090_SMI,
            memory_mb=RTX_5090_SMI,
            device_name=issue(
                "xorbitsai/inference#3603: torch warns 'NVIDIA GeForce RTX 5090 with CUDA "
                "capability sm_120'",
                "https://github.com/xorbitsai/inference/issues/3603",
            ),
            cuda=not_found(f"a {CHECK_ENV} or collect_env output on an RTX 5090"),
            rocm=None,
            cann=None,
        ),
    ),
    Gpu(
        name="L40S",
        platform="cuda",
        sm=89,
        arch=None,
        memory_gb=48,
        memory_mb=46068,
        device_name="NVIDIA L40S",
        cuda=None,
        rocm=None,
        cann=None,
        aliases=(),
        source=GpuSources(
            sm=NVIDIA_CC,
            arch=None,
            memory_gb=nim_llm("L40S PCIe", 48),
            memory_mb=MODAL_MIB,
            device_name=moe_config_name("NVIDIA L40S", "triton_3_1_0", "E=8,N=3584"),
            cuda=not_found(f"a {CHECK_ENV} or collect_env output on an L40S"),
            rocm=None,
            cann=None,
        ),
    ),
    Gpu(
        name="MI300X",
        platform="rocm",
        sm=94,
        arch="gfx942",
        memory_gb=192,
        memory_mb=196592,
        device_name="AMD Instinct MI300X",
        cuda=None,
        rocm="7.2",
        cann=None,
        aliases=("Instinct MI300X",),
        source=GpuSources(
            sm=rocm_specs("MI300X GFXIP 9.4; sgl-project/sglang#10195 shows capability 9.4"),
            arch=rocm_specs("MI300X LLVM target gfx942"),
            memory_gb=rocm_specs("MI300X VRAM 192 GiB"),
            memory_mb=issue(
                "ROCm/rocm-examples#187: rocminfo on MI300X, Pool 1 Size 201310208 KB "
                "(SGLang's get_amdgpu_memory_capacity divides it by 1024)",
                "https://github.com/ROCm/rocm-examples/issues/187",
            ),
            device_name=issue(
                f"sgl-project/sglang#10195: {CHECK_ENV} (AMD Instinct MI300X, capability 9.4)",
                "https://github.com/sgl-project/sglang/issues/10195",
            ),
            cuda=None,
            rocm=issue(
                f"sgl-project/sglang#38849: {CHECK_ENV} on MI300X VF, PyTorch 2.9.1+rocm7.2.0",
                "https://github.com/sgl-project/sglang/issues/38849",
            ),
            cann=None,
        ),
    ),
    Gpu(
        name="MI325X",
        platform="rocm",
        sm=94,
        arch="gfx942",
        memory_gb=256,
        memory_mb=None,
        device_name="AMD Instinct MI325X",
        cuda=None,
        rocm="7.2",
        cann=None,
        aliases=("Instinct MI325X",),
        source=GpuSources(
            sm=rocm_specs("MI325X GFXIP 9.4"),
            arch=rocm_specs("MI325X LLVM target gfx942"),
            memory_gb=rocm_specs("MI325X VRAM 256 GiB"),
            memory_mb=not_found("a rocminfo pool size on an MI325X"),
            device_name=moe_config_name("AMD Instinct MI325X", "triton_3_1_0", "E=8,N=14336"),
            cuda=None,
            rocm=sglang_source(
                "MI325X runs the lmsysorg/sglang:<ver>-rocm720-mi30x image",
                ".claude/skills/cookbook-add-model/SKILL.md",
                113,
            ),
            cann=None,
        ),
    ),
    Gpu(
        name="MI355X",
        platform="rocm",
        sm=95,
        arch="gfx950",
        memory_gb=288,
        memory_mb=None,
        device_name="AMD Instinct MI355X",
        cuda=None,
        rocm="7.2",
        cann=None,
        aliases=("Instinct MI355X",),
        source=GpuSources(
            sm=rocm_specs("MI355X GFXIP 9.5"),
            arch=rocm_specs("MI355X LLVM target gfx950"),
            memory_gb=rocm_specs("MI355X VRAM 288 GiB"),
            memory_mb=not_found("a rocminfo pool size on an MI355X"),
            device_name=issue(
                "unslothai/unsloth#4051: hardware verification prints 'GPU: AMD Instinct "
                "MI355X', gcnArchName gfx950",
                "https://github.com/unslothai/unsloth/pull/4051",
            ),
            cuda=None,
            rocm=sglang_source(
                "MI355X runs the lmsysorg/sglang:<ver>-rocm720-mi35x image",
                ".claude/skills/cookbook-add-model/SKILL.md",
                115,
            ),
            cann=None,
        ),
    ),
    Gpu(
        name="Ascend 910B",
        platform="npu",
        sm=None,
        arch=None,
        memory_gb=64,
        memory_mb=None,
        device_name=None,
        cuda=None,
        rocm=None,
        cann="8.5.0",
        aliases=("910B", "Atlas 800I A2"),
        source=GpuSources(
            sm=None,
            arch=None,
            memory_gb=sglang_source(
                "910B1/910B2/910B2C/910B3 fall in its <= 64 GiB NPU memory bucket (npu-smi "
                "shows 65536 MB HBM per 910B NPU: Project-HAMi/HAMi-WebUI#47)",
                "python/sglang/srt/hardware_backend/npu/utils.py",
                72,
            ),
            memory_mb=not_found("a torch.npu.mem_get_info() total on a 910B"),
            device_name=not_found("a torch.npu.get_device_name() string on a 910B"),
            cuda=None,
            rocm=None,
            cann=sglang_source(
                "Atlas 800I A2 runs the {main}-cann8.5.0-910b image",
                "docs/platforms/ascend/ascend_npu.md",
                108,
            ),
        ),
    ),
)

# Facts that apply to each platform: those a source must account for (a value or a
# "no public record found"); the others are None with no source.
FACTS: dict[str, tuple[str, ...]] = {
    "cuda": ("sm", "memory_gb", "memory_mb", "device_name", "cuda"),
    "rocm": ("sm", "arch", "memory_gb", "memory_mb", "device_name", "rocm"),
    "npu": ("memory_gb", "memory_mb", "device_name", "cann"),
}


def gpu_text(gpu: Gpu) -> str:
    """A GPU as a chooser lists it: "B200 · cuda sm100 · 180 GB"."""
    sm = f" sm{gpu.sm}" if gpu.platform == "cuda" and gpu.sm else ""
    return f"{gpu.name} · {gpu.platform}{sm} · {gpu.memory_gb} GB"


def gpu_list() -> GpuList:
    return GpuList(gpus=list(GPUS))


def lookup_key(name: str) -> str:
    """One key for "H100-80GB", "h100 80gb" and "H100_80GB": lower case, letters, digits."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _index() -> dict[str, Gpu]:
    """Every spelling of each GPU: its name, aliases and torch device name."""
    index: dict[str, Gpu] = {}
    for gpu in GPUS:
        for spelling in (gpu.name, *gpu.aliases, gpu.device_name or ""):
            key = lookup_key(spelling)
            if key:
                index.setdefault(key, gpu)
    return index


INDEX = _index()


class UnknownGpu(LookupError):
    """A name no catalog GPU answers to; `suggestions` are the closest catalog names."""

    def __init__(self, name: str, suggestions: list[str]) -> None:
        self.name = name
        self.suggestions = suggestions
        close = f" Did you mean {', '.join(suggestions)}?" if suggestions else ""
        known = ", ".join(gpu.name for gpu in GPUS)
        super().__init__(f"Unknown GPU {name!r}.{close} Known GPUs: {known}.")


def gpu_by_name(name: str) -> Gpu:
    """The catalog GPU `name` spells, in any case and punctuation ("b200", "h100-80gb",
    "NVIDIA H100 80GB HBM3"); UnknownGpu lists the closest names otherwise."""
    key = lookup_key(name)
    if key in INDEX:
        return INDEX[key]
    found = process.extract(key, list(INDEX), scorer=fuzz.WRatio, limit=8, score_cutoff=60)
    close = list(dict.fromkeys(INDEX[match].name for match, _score, _i in found))
    raise UnknownGpu(name, close[:3])
