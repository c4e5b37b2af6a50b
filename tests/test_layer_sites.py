"""What a value selects past ServerArgs and the selected classes' checks (kb/layer_sites.py):
a quantization method's classes per layer type (through a helper taking them as keyword
arguments) with their guarded raises and asserts at load and at the first forward pass, the
MoE layer class get_moe_impl_class returns for a MoE flag's value, and the value, compare and
flag pages showing them. A synthetic repository (tests/layer_sites_repo.py)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from tests.conftest import api_json, ingest_into
from tests.layer_sites_repo import (
    FP4,
    FP4_TEXT,
    MOE_LAYER,
    MOE_LAYER_TEXT,
    build_layer_sites_repo,
)

V = "/v/v1.0.0"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    root = tmp_path_factory.mktemp("layer-sites")
    ingest_into(build_layer_sites_repo(root), root / "kb.db", jobs=1)
    return TestClient(create_app(f"sqlite:///{root / 'kb.db'}"))


def api(client: TestClient, url: str) -> dict[str, Any]:
    return api_json(client, url)


def line(text: str, snippet: str) -> int:
    """The line of the written file (dedented, its first blank line stripped) holding it."""
    lines = text.lstrip().splitlines()
    return next(i for i, t in enumerate(lines, 1) if snippet in t)


def checks(selection: dict[str, Any]) -> list[tuple[str, str, str, str, int]]:
    return [
        (
            c["stage"],
            c["function"],
            c["condition"],
            c["requires"] or c["message"],
            c["source"]["line"],
        )
        for c in selection["checks"]
    ]


def test_a_quantization_method_s_classes_per_layer_type(client: TestClient) -> None:
    data = api(client, f"{V}/backends/--quantization/fp4")
    words = [s["words"] for s in data["layer_checks"]]
    assert words == [
        "Fp4Config.get_quant_method -> UnquantizedLinearMethod for LinearBase layers"
        " when self.is_skipped(prefix)",
        "Fp4Config.get_quant_method -> Fp4LinearMethod for LinearBase layers"
        " when not self.is_skipped(prefix)",
        # (the earlier branch's `not isinstance(layer, LinearBase)` says nothing more)
        "Fp4Config.get_quant_method -> Fp4MoEMethod for FusedMoE layers",
    ]
    by_class = {s["selected"]: s for s in data["layer_checks"]}
    assert by_class["UnquantizedLinearMethod"]["checks"] == []
    assert checks(by_class["Fp4LinearMethod"]) == [
        (
            "load",
            "create_weights",
            "size % 16 != 0",
            "ValueError: fp4 weights need a multiple of 16",
            line(FP4_TEXT, "multiple of 16"),
        )
    ]
    moe = by_class["Fp4MoEMethod"]
    assert moe["source"]["path"] == FP4 and moe["source"]["line"] == line(
        FP4_TEXT, "return Moe(self)"
    )  # the helper's return
    assert checks(moe) == [
        (
            "load",
            "__init__",
            "not is_sm100_supported()",
            "ValueError: fp4 MoE needs an SM100 GPU",
            line(FP4_TEXT, "SM100 GPU"),
        ),
        # a field set from a flag's getter is the flag's test
        (
            "load",
            "process_weights_after_loading",
            "--moe-runner-backend = fast_trt",
            "layer.padded",
            line(FP4_TEXT, "assert layer.padded"),
        ),
        # a property returning a flag's test too; the method's own raise is reached from apply
        (
            "first_forward",
            "_deep",
            "--moe-a2a-backend == 'deep' and --moe-runner-backend = fast_cutlass",
            "NotImplementedError: deep all-to-all with fast_cutlass",
            line(FP4_TEXT, "deep all-to-all with"),
        ),
    ]
    deep = moe["checks"][2]
    assert deep["kind"] == "not_implemented" and deep["via"] == ["apply"]
    assert deep["flags"] == ["--moe-a2a-backend", "--moe-runner-backend"]
    # the base class's abstract `apply` (overridden) is no check; nothing for a method
    # whose config selects nothing
    assert api(client, f"{V}/backends/--quantization/plain")["layer_checks"] == []
    summary = data["requirement_summary"]
    assert (summary["layer_load"], summary["layer_first_forward"]) == (3, 1)


def test_the_moe_layer_class_a_moe_flag_s_value_selects(client: TestClient) -> None:
    deep = api(client, f"{V}/backends/--moe-a2a-backend/deep")["layer_checks"]
    assert [s["words"] for s in deep] == ["get_moe_impl_class -> DeepMoE"]
    assert deep[0]["source"] == {
        **deep[0]["source"],
        "path": MOE_LAYER,
        "line": line(MOE_LAYER_TEXT, "return DeepMoE"),
    }
    # forward (inherited) calls run_moe_core: the class's own, after its early return; the
    # check under TYPE_CHECKING never runs; `is_none()` is false for deep: not deep's
    assert checks(deep[0]) == [
        (
            "first_forward",
            "w4",
            "not self.deprecated and x.normal and self.use_w4",
            "x.silu",
            line(MOE_LAYER_TEXT, "silu only"),
        ),
        (
            "first_forward",
            "run_moe_core",
            "not self.deprecated and x.normal and not self.use_w4",
            "contiguous is deprecated",
            line(MOE_LAYER_TEXT, "contiguous is deprecated"),
        ),
    ]
    assert deep[0]["checks"][0]["via"] == ["forward", "run_moe_core"]
    # a value that no branch's own test names selects nothing (the default FusedMoE)
    assert api(client, f"{V}/backends/--moe-a2a-backend/none")["layer_checks"] == []
    trt = api(client, f"{V}/backends/--moe-runner-backend/fast_trt")["layer_checks"]
    assert [s["words"] for s in trt] == [
        "get_moe_impl_class -> TrtMoE when not --moe-a2a-backend = deep"
        " and quant_config is not None and quant_config.get_name() == 'fp4'"
    ]
    assert checks(trt[0]) == [
        (
            "load",
            "__init__",
            "",
            "quant_config is not None",
            line(MOE_LAYER_TEXT, "needs a quantized"),
        )
    ]


def test_the_pages_show_them(client: TestClient) -> None:
    page = client.get(f"{V}/backends/--quantization/fp4").text
    section = page[page.index('<section id="layer-checks">') :]
    section = section[: section.index("</section>")]
    assert section.index("At load") < section.index("At first forward")
    assert "<code>Fp4Config.get_quant_method</code> → <code>Fp4MoEMethod</code> for" in section
    assert "fp4 MoE needs an SM100 GPU" in section
    assert "Also selected, with no check found: <code>UnquantizedLinearMethod</code>" in section
    compare = client.get(f"{V}/backends/--quantization/compare?values=fp4,plain").text
    row = compare[compare.index('<tr class="load-time-row">') :]
    row = row[: row.index("</tr>")]
    assert (
        f'href="{V}/backends/--quantization/fp4#layer-checks">3 at load, 1 at first forward' in row
    )
    assert "none found" in row
    flag = client.get(f"{V}/flags/--moe-a2a-backend").text
    listed = flag[flag.index('<div id="load-time"') :]
    assert (
        f'<a href="{V}/backends/--moe-a2a-backend/deep#requirement-summary"><code>deep</code></a>'
        in listed
    )
    rows = {r["value"]: r for r in api(client, f"{V}/flags/--moe-a2a-backend")["choice_rows"]}
    assert (rows["deep"]["load_time"], rows["deep"]["first_forward"]) == (0, 2)
    assert (rows["none"]["load_time"], rows["none"]["first_forward"]) == (0, 0)
