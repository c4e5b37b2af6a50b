"""A value's load-time requirements (kb/load_requirements.py): the raises and asserts of the
function a decorator-filled registry holds for the value, each with the `if` tests around it
(an `else` negated without `not (not ...)`), found in the registry whose names cover the
flag's choices. Synthetic modules, modelled on SGLang's attention registry."""

from __future__ import annotations

import textwrap
from types import SimpleNamespace
from typing import Any

import pytest

from kb import load_requirements as lr
from kb.explain.source_modules import parse_module
from tests.sim_repos import REGISTER_ATTENTION_BACKEND

REGISTRY = "python/sglang/srt/layers/attention/attention_registry.py"
TEXT = (
    """
from sglang.srt.utils import is_musa

ATTENTION_BACKENDS = {}
_is_musa = is_musa()


"""
    + REGISTER_ATTENTION_BACKEND
    + """

@register_attention_backend("flashinfer")
def create_flashinfer_backend(runner):
    return "FlashInfer"


@register_attention_backend("fa3")
def create_fa3_backend(runner):
    if not _is_musa:
        assert runner.major == 9, "FA3 needs SM90."
        return "FA3"
    else:
        assert runner.major == 3, "FA3 needs MP31."
        return "MusaFA3"


@register_attention_backend("mla_only")
def create_mla_only_backend(runner):
    if not runner.use_mla_backend:
        raise ValueError("mla_only backend can only be used with MLA models.")
    return "MLA"
"""
)


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = parse_module(REGISTRY, textwrap.dedent(TEXT))
    assert mod is not None
    monkeypatch.setattr(lr, "version_paths", lambda _s, _v: [REGISTRY, "python/x.py"])
    monkeypatch.setattr(lr, "version_modules", lambda _s, _v: {REGISTRY: mod}.get)
    monkeypatch.setattr(lr, "per_stamp", lambda _key, make, _session: make())
    monkeypatch.setattr(
        lr, "citation", lambda _v, path, line, end: {"path": path, "line": line, "end": end}
    )


def texts(choices: list[str], value: str) -> list[str]:
    found: list[dict[str, Any]] = lr.load_requirements(
        None,  # type: ignore[arg-type]
        SimpleNamespace(name="v1", id=1),  # type: ignore[arg-type]
        choices,
        value,
    )
    return [f["text"] for f in found]


def test_the_registered_builder_s_checks_with_their_conditions(registry: None) -> None:
    choices = ["flashinfer", "fa3", "mla_only", "triton"]
    assert texts(choices, "fa3") == [
        "when not _is_musa: FA3 needs SM90. (create_fa3_backend, attention_registry.py:24)",
        "when _is_musa: FA3 needs MP31. (create_fa3_backend, attention_registry.py:27)",
    ]
    assert texts(choices, "mla_only") == [
        "when not runner.use_mla_backend: ValueError: mla_only backend can only be used with"
        " MLA models. (create_mla_only_backend, attention_registry.py:34)"
    ]
    assert texts(choices, "flashinfer") == []  # registered, checks nothing
    assert texts(choices, "triton") == []  # not registered here


def test_a_registry_of_another_flag_s_names_says_nothing(registry: None) -> None:
    """The registry serves a flag only when its names cover half the flag's choices."""
    assert texts(["auto", "triton", "cutlass", "fa3", "deep_gemm"], "fa3") == []
