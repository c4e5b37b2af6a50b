"""A quantization method's load-time requirements (kb/quant_requirements.py): the model
loader's capability and dtype checks, stated with the answer of the config class that the
version's name -> class table maps the method to. Synthetic modules modelled on SGLang's
layers/quantization/__init__.py, its config classes and model_loader/loader.py."""

from __future__ import annotations

import textwrap
from types import SimpleNamespace

import pytest

from kb import load_requirements as lr
from kb import quant_requirements as qr
from kb.explain.source_modules import Module, parse_module

PACKAGE = "python/sglang/srt/layers/quantization/__init__.py"
FP4 = "python/sglang/srt/layers/quantization/fp4.py"
BASE = "python/sglang/srt/layers/quantization/base_config.py"
LOADER = "python/sglang/srt/model_loader/loader.py"

SOURCES = {
    PACKAGE: """
        from sglang.srt.layers.quantization.fp4 import Fp4Config, MixedConfig, Fp8Config
        from sglang.srt.layers.quantization.fp4 import PlainConfig
        from sglang.srt.utils import is_cuda

        METHODS = {
            "fp4": Fp4Config,
            "fp8": Fp8Config,
            "plain": PlainConfig,
        }
        if is_cuda():
            METHODS.update({"mixed": MixedConfig})
    """,
    BASE: """
        class QuantizationConfig:
            def get_supported_act_dtypes(self):
                return [torch.bfloat16, torch.half]
    """,
    FP4: """
        import torch
        from sglang.srt.layers.quantization.base_config import QuantizationConfig

        class Fp4Config(QuantizationConfig):
            @classmethod
            def get_min_capability(cls) -> int:
                return 100

        class MixedConfig(QuantizationConfig):
            @classmethod
            def get_min_capability(cls) -> int:
                \"\"\"As the FP4 one.\"\"\"
                return Fp4Config.get_min_capability()

            def get_supported_act_dtypes(self):
                return [torch.bfloat16]

        class Fp8Config(QuantizationConfig):
            def get_min_capability(self) -> int:
                return 100 if self.use_mxfp8 else 80

        class PlainConfig(QuantizationConfig):
            def get_min_capability(self) -> int:
                return self.capability
    """,
    LOADER: """
        def _get_quantization_config(model_config, load_config):
            quant_config = get_quant_config(model_config, load_config)
            major, minor = get_device_capability()
            capability = major * 10 + minor
            if capability < quant_config.get_min_capability():
                raise ValueError("not supported for the current GPU")
            supported_dtypes = quant_config.get_supported_act_dtypes()
            if model_config.dtype not in supported_dtypes:
                raise ValueError("dtype not supported")
            return quant_config
    """,
}


def modules(sources: dict[str, str]) -> qr.Modules:
    parsed: dict[str, Module | None] = {
        path: parse_module(path, textwrap.dedent(text)) for path, text in sources.items()
    }
    return parsed.get


def texts(sources: dict[str, str], method: str) -> list[str]:
    return [r.text for r in qr.requirements(modules(sources), sorted(sources), method)]


def test_the_loader_s_checks_with_the_class_s_answers() -> None:
    assert texts(SOURCES, "fp4") == [
        "GPU compute capability ≥ 100 (sm100) (Fp4Config.get_min_capability, fp4.py:8);"
        " the model loader raises otherwise (_get_quantization_config, loader.py:7)",
        # inherited from the base class
        "the model's dtype is bfloat16 or half (QuantizationConfig.get_supported_act_dtypes,"
        " base_config.py:4); the model loader raises otherwise"
        " (_get_quantization_config, loader.py:10)",
    ]


def test_a_delegated_answer_and_a_table_extended_by_update() -> None:
    assert texts(SOURCES, "mixed") == [
        "GPU compute capability ≥ 100 (sm100) (Fp4Config.get_min_capability, fp4.py:8);"
        " the model loader raises otherwise (_get_quantization_config, loader.py:7)",
        "the model's dtype is bfloat16 (MixedConfig.get_supported_act_dtypes, fp4.py:17);"
        " the model loader raises otherwise (_get_quantization_config, loader.py:10)",
    ]


def test_an_answer_of_the_instance_is_stated_per_case_or_not_at_all() -> None:
    assert texts(SOURCES, "fp8")[0].startswith(
        "GPU compute capability ≥ 100 when use_mxfp8, else ≥ 80 (Fp8Config.get_min_capability"
    )
    assert [t for t in texts(SOURCES, "plain") if "capability" in t] == []


def test_without_the_loader_s_check_nothing_is_claimed() -> None:
    without = dict(SOURCES)
    without[LOADER] = """
        def _get_quantization_config(model_config, load_config):
            return get_quant_config(model_config, load_config)
    """
    assert texts(without, "fp4") == []
    assert texts(SOURCES, "unknown_method") == []


@pytest.fixture
def version_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lr, "version_paths", lambda _s, _v: sorted(SOURCES))
    monkeypatch.setattr(lr, "version_modules", lambda _s, _v: modules(SOURCES))
    monkeypatch.setattr(lr, "per_stamp", lambda _key, make, _session: make())
    monkeypatch.setattr(
        lr, "citation", lambda _v, path, line, end: {"path": path, "line": line, "end": end}
    )


def test_a_quantization_flag_s_value_gets_them_cited(version_source: None) -> None:
    version = SimpleNamespace(name="v1", id=1)
    found = lr.load_requirements(None, version, ["fp4", "fp8", "plain", "mixed"], "fp4")  # type: ignore[arg-type]
    assert [f["source"] for f in found] == [
        {"path": LOADER, "line": 7, "end": 7},
        {"path": LOADER, "line": 10, "end": 10},
    ]
    # another flag whose values merely include a method's name says nothing of it
    other = lr.load_requirements(None, version, ["fp4", "auto", "triton", "cutlass"], "fp4")  # type: ignore[arg-type]
    assert other == []
