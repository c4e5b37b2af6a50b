"""The GPU catalog (kb/gpus.py): its entries and their sources, the name lookup, and the
/gpus page with its JSON twin."""

from __future__ import annotations

from pathlib import Path

import pytest
from dashboard_kb import build_kb
from fastapi.testclient import TestClient

from app.main import create_app
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
    "RTX 5090",
    "L40S",
    "MI300X",
    "MI325X",
    "MI355X",
    "Ascend 910B",
}
ALL_FACTS = ("sm", "arch", "memory_gb", "memory_mb", "device_name", "cuda", "rocm", "cann")


def test_the_catalog_has_the_required_gpus() -> None:
    assert {gpu.name for gpu in GPUS} >= REQUIRED


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    db = build_kb(Path(tmp_path_factory.mktemp("kb")) / "kb.db")
    return TestClient(create_app(f"sqlite:///{db}"), follow_redirects=False)


def test_api_lists_the_required_gpus_with_their_facts(client: TestClient) -> None:
    response = client.get("/api/gpus")
    assert response.status_code == 200
    gpus = response.json()["gpus"]
    assert {g["name"] for g in gpus} >= REQUIRED
    shape = {"name", "platform", "sm", "memory_gb", "device_name", "cuda", "rocm", "source"}
    for gpu in gpus:
        assert shape | {"memory_mb", "arch", "cann", "aliases"} <= set(gpu), gpu["name"]
        assert gpu["platform"] in ("cuda", "rocm", "npu")
        assert set(gpu["source"]) == set(ALL_FACTS)


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
    names = {g.name: g.device_name or "" for g in GPUS}
    with_h20 = [name for name, device in names.items() if "H20" in device]
    assert [name for name in with_h20 if "H200" not in names[name]] == ["H20"]
    assert "H200" in with_h20  # the rule's second half is what tells them apart


def test_page_shows_each_gpu_with_its_sources(client: TestClient) -> None:
    page = client.get("/gpus")
    assert page.status_code == 200
    assert "NVIDIA B200" in page.text and "gfx942" in page.text
    assert 'href="https://developer.nvidia.com/cuda-gpus"' in page.text
    assert "no record" in page.text  # a fact without a public record says so
    assert 'href="/gpus"' in client.get("/").text  # linked from the site footer
