"""The GPU catalog (kb/gpus.py): its entries and their sources, and the name lookup."""

from __future__ import annotations

import pytest

from kb.contract import Gpu
from kb.gpus import FACTS, GPUS, UnknownGpu, gpu_by_name, lookup_key

REQUIRED = {
    "A100 40GB",
    "A100 80GB",
    "H100 80GB",
    "H20",
    "H200",
    "B200",
    "B300",
    "GB200",
    "GB300",
    "RTX PRO 6000",
    "L40S",
    "MI300X",
    "MI325X",
    "MI355X",
    "Ascend 910B",
}
ALL_FACTS = ("sm", "arch", "memory_gb", "memory_mb", "device_name", "cuda", "rocm", "cann")


def test_the_catalog_has_the_required_gpus() -> None:
    assert {gpu.name for gpu in GPUS} >= REQUIRED


@pytest.mark.parametrize("gpu", GPUS, ids=lambda g: g.name)
def test_every_fact_is_sourced_or_says_no_record_was_found(gpu: Gpu) -> None:
    applies = FACTS[gpu.platform]
    for fact in ALL_FACTS:
        value, source = getattr(gpu, fact), getattr(gpu.source, fact)
        if fact not in applies:
            assert value is None and source is None, (gpu.name, fact)
        elif value is not None:
            assert source is not None and source.url, (gpu.name, fact)
            assert source.url.startswith("https://"), (gpu.name, fact)
        else:  # a fact of this platform no public record was found for
            assert source is not None and source.url is None, (gpu.name, fact)
            assert source.title.startswith("No public record found"), (gpu.name, fact)


def test_b200_is_sm100_with_its_memory() -> None:
    b200 = gpu_by_name("B200")
    assert (b200.platform, b200.sm, b200.memory_gb) == ("cuda", 100, 180)
    assert (b200.memory_mb, b200.device_name) == (183359, "NVIDIA B200")


def test_rocm_gpus_carry_their_gfx_target() -> None:
    assert (gpu_by_name("MI300X").arch, gpu_by_name("MI300X").sm) == ("gfx942", 94)
    assert (gpu_by_name("MI355X").arch, gpu_by_name("MI355X").sm) == ("gfx950", 95)


@pytest.mark.parametrize(
    ("spelled", "name"),
    [
        ("b200", "B200"),
        ("B200", "B200"),
        ("h100-80gb", "H100 80GB"),
        ("H100_80GB", "H100 80GB"),
        ("NVIDIA H100 80GB HBM3", "H100 80GB"),  # the torch device name
        ("rtx pro 6000", "RTX PRO 6000"),
        ("910b", "Ascend 910B"),
    ],
)
def test_lookup_ignores_case_and_punctuation(spelled: str, name: str) -> None:
    assert gpu_by_name(spelled).name == name


def test_an_unknown_name_lists_close_names() -> None:
    with pytest.raises(UnknownGpu) as error:
        gpu_by_name("b201")
    assert "B200" in error.value.suggestions
    assert "B200" in str(error.value) and "'b201'" in str(error.value)
    with pytest.raises(UnknownGpu) as error:
        gpu_by_name("MI350X")
    assert "MI355X" in error.value.suggestions


def test_no_spelling_names_two_gpus() -> None:
    owner: dict[str, str] = {}
    for gpu in GPUS:
        for spelling in (gpu.name, *gpu.aliases, gpu.device_name or ""):
            key = lookup_key(spelling)
            if key:
                assert owner.setdefault(key, gpu.name) == gpu.name, spelling


def test_only_the_h20_matches_sglangs_h20_device_test() -> None:
    """SGLang tells the H20 apart by its device name: "H20" in it and "H200" not."""
    names = [g.name for g in GPUS if g.device_name and "H20" in g.device_name]
    h20 = [n for n in names if "H200" not in gpu_by_name(n).device_name]  # type: ignore[operator]
    assert h20 == ["H20"] and "H200" in names
