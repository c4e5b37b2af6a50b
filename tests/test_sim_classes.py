"""The simulator's reading of the version's own classes (kb.explain.classes) and of module
globals its functions set (`global X; X = ...`), on synthetic modules shaped like SGLang's
MoE configuration (layers/moe/utils.py, ep_moe/layer.py): Enum classes looked up by value,
instances built by their constructors through `super().__init__`, classes returned as
values, and a global set by one function read by another in the same run."""

from __future__ import annotations

import textwrap
from typing import Any

from kb.explain.abstract_values import ClassRef, EnumMember, Func, Instance
from kb.explain.predicates import Profile, Unknown
from kb.explain.simulate import Ctx, Simulator
from kb.explain.source_modules import Module, parse_module

ARGS = "python/sglang/srt/server_args.py"
UTILS = "python/sglang/srt/layers/moe/utils.py"
LAYER = "python/sglang/srt/layers/moe/ep_moe/layer.py"
FUSED = "python/sglang/srt/layers/moe/fused_moe_triton/layer.py"
SGL_UTILS = "python/sglang/srt/utils/common.py"

SERVER_ARGS = """
from dataclasses import dataclass


@dataclass
class ServerArgs:
    model_path: str
    moe_a2a_backend: str = "none"
    deepep_mode: str = "auto"

    def __post_init__(self):
        pass
"""

MOE_UTILS = """
from enum import Enum
from typing import Optional


class MoeA2ABackend(Enum):
    NONE = "none"
    DEEPEP = "deepep"

    @classmethod
    def _missing_(cls, value):
        if value is None:
            return cls.NONE
        for member in cls:
            if value == member.value:
                return member
        raise ValueError(f"No {cls.__name__} member for value {value}")

    def is_none(self):
        return self == MoeA2ABackend.NONE

    def is_deepep(self):
        return self == MoeA2ABackend.DEEPEP


class DeepEPMode(str, Enum):
    NORMAL = "normal"
    LOW_LATENCY = "low_latency"
    AUTO = "auto"

    def enable_normal(self) -> bool:
        return self in [DeepEPMode.NORMAL, DeepEPMode.AUTO]


class Plain(Enum):
    A = "a"


MOE_A2A_BACKEND: Optional[MoeA2ABackend] = None
DEEPEP_MODE: Optional[DeepEPMode] = None


def initialize_moe_config(server_args):
    global MOE_A2A_BACKEND
    global DEEPEP_MODE
    MOE_A2A_BACKEND = MoeA2ABackend(server_args.moe_a2a_backend)
    DEEPEP_MODE = DeepEPMode(server_args.deepep_mode)


def get_moe_a2a_backend():
    global MOE_A2A_BACKEND
    if MOE_A2A_BACKEND is None:
        MOE_A2A_BACKEND = MoeA2ABackend.NONE
    return MOE_A2A_BACKEND


def get_deepep_mode():
    return DEEPEP_MODE
"""

FUSED_LAYER = """
import torch
from triton_kernels import KernelBase


class Base:
    kind = "base"

    def __init__(self, hidden_size):
        self.hidden_size = hidden_size
        self.quant_config = None


class FusedMoE(Base):
    def __init__(self, hidden_size, quant_config=None):
        super().__init__(hidden_size)
        self.quant_config = quant_config

    @property
    def doubled(self):
        return self.hidden_size * 2

    @classmethod
    def make(cls, size):
        return cls(size)

    @staticmethod
    def name():
        return "fused"


class FromTorch(torch.nn.Module):
    def __init__(self):
        self.x = 1


class FromElsewhere(KernelBase):
    pass
"""

EP_LAYER = """
from sglang.srt.layers.moe.fused_moe_triton.layer import FusedMoE
from sglang.srt.layers.moe.utils import get_deepep_mode, get_moe_a2a_backend


class DeepEPMoE(FusedMoE):
    def __init__(self, hidden_size, quant_config=None):
        super().__init__(hidden_size, quant_config=quant_config)
        self.deepep_mode = get_deepep_mode()
        if quant_config == "w4afp8":
            self.use_w4afp8 = True
        else:
            self.use_w4afp8 = False

    def run(self):
        if self.deepep_mode.enable_normal():
            if not self.use_w4afp8:
                assert False, "forward_deepgemm_contiguous is deprecated"
        return self.doubled


def get_moe_impl_class(quant_config):
    if get_moe_a2a_backend().is_deepep():
        return DeepEPMoE
    return FusedMoE
"""


def modules() -> dict[str, Module]:
    files = {ARGS: SERVER_ARGS, UTILS: MOE_UTILS, LAYER: EP_LAYER, FUSED: FUSED_LAYER}
    out = {}
    for path, text in files.items():
        mod = parse_module(path, textwrap.dedent(text))
        assert mod is not None
        out[path] = mod
    return out


def simulator(fields: dict[str, Any] | None = None) -> tuple[Simulator, dict[str, Module]]:
    mods = modules()
    sim = Simulator(mods.get, mods[ARGS], {"model_path": "m", **(fields or {})}, Profile())
    sim.run()
    return sim, mods


def call(sim: Simulator, mod: Module, name: str, *args: Any) -> Any:
    return sim.call_function(Func(mod, mod.functions[name]), list(args), {}, Ctx())


def evaluate(sim: Simulator, mod: Module, source: str, **local: Any) -> Any:
    """An expression evaluated in `mod`'s names (and the given locals)."""
    from kb.explain.simulate import Frame

    node = ast_expr(source)
    return sim.eval(node, Frame(mod, "<test>", dict(local)), Ctx())


def ast_expr(source: str) -> Any:
    import ast

    tree = ast.parse(source, mode="eval")
    return tree.body


def test_an_enum_is_looked_up_by_value_and_its_methods_compare_members() -> None:
    sim, mods = simulator()
    utils = mods[UTILS]
    deepep = evaluate(sim, utils, 'MoeA2ABackend("deepep")')
    assert isinstance(deepep, EnumMember) and deepep.name == "DEEPEP"
    assert evaluate(sim, utils, 'MoeA2ABackend("deepep").is_deepep()') is True
    assert evaluate(sim, utils, 'MoeA2ABackend("none").is_deepep()') is False
    assert evaluate(sim, utils, "MoeA2ABackend.DEEPEP.value") == "deepep"
    assert evaluate(sim, utils, "MoeA2ABackend.DEEPEP.name") == "DEEPEP"
    assert evaluate(sim, utils, 'MoeA2ABackend("deepep") == MoeA2ABackend.DEEPEP') is True
    # `_missing_` runs for a value no member has: None is NONE, another value raises there
    assert evaluate(sim, utils, "MoeA2ABackend(None)") == evaluate(sim, utils, "MoeA2ABackend.NONE")
    before = len(sim.result.checks)
    assert isinstance(evaluate(sim, utils, 'MoeA2ABackend("nope")'), Unknown | type(None))
    (raised,) = sim.result.checks[before:]
    assert raised.outcome == "fired" and raised.message.startswith("ValueError: No ")
    # an Enum without _missing_: an unmatched value is unknown, never a member
    assert isinstance(evaluate(sim, utils, 'Plain("b")'), Unknown)
    # a str mixin equals its value; `in [members]` works
    assert evaluate(sim, utils, 'DeepEPMode("auto") == "auto"') is True
    assert evaluate(sim, utils, 'DeepEPMode("auto").enable_normal()') is True
    assert evaluate(sim, utils, 'DeepEPMode("low_latency").enable_normal()') is False


def test_an_enum_of_an_unknown_value_keeps_its_options() -> None:
    sim, mods = simulator()
    both = Unknown(("which mode",), ("normal", "low_latency"))
    mode = evaluate(sim, mods[UTILS], "DeepEPMode(x)", x=both)
    assert isinstance(mode, Unknown) and mode.options is not None
    assert {m.name for m in mode.options} == {"NORMAL", "LOW_LATENCY"}
    assert isinstance(evaluate(sim, mods[UTILS], "DeepEPMode(x).enable_normal()", x=both), Unknown)


def test_a_global_set_by_one_function_is_read_by_the_next() -> None:
    """initialize_moe_config sets MOE_A2A_BACKEND; get_moe_a2a_backend() then sees it, and
    get_moe_impl_class returns the class (a value) it selects."""
    sim, mods = simulator({"moe_a2a_backend": "deepep"})
    # before any simulated code set it, the global is read as today: unknown (rebound)
    assert isinstance(call(sim, mods[UTILS], "get_deepep_mode"), Unknown)
    call(sim, mods[UTILS], "initialize_moe_config", _self())
    backend = call(sim, mods[UTILS], "get_moe_a2a_backend")
    assert isinstance(backend, EnumMember) and backend.name == "DEEPEP"
    impl = call(sim, mods[LAYER], "get_moe_impl_class", None)
    assert isinstance(impl, ClassRef) and impl.name == "DeepEPMoE"
    assert evaluate(sim, mods[LAYER], "get_moe_impl_class(None) == DeepEPMoE") is True
    assert evaluate(sim, mods[LAYER], "get_moe_impl_class(None) == FusedMoE") is False
    # without deepep the plain class is selected
    sim, mods = simulator({"moe_a2a_backend": "none"})
    call(sim, mods[UTILS], "initialize_moe_config", _self())
    impl = call(sim, mods[LAYER], "get_moe_impl_class", None)
    assert isinstance(impl, ClassRef) and impl.name == "FusedMoE"


def test_an_instance_runs_its_constructor_through_super() -> None:
    sim, mods = simulator({"deepep_mode": "normal"})
    call(sim, mods[UTILS], "initialize_moe_config", _self())
    layer = evaluate(sim, mods[LAYER], "DeepEPMoE(64, quant_config='fp4')")
    assert isinstance(layer, Instance)
    assert layer.fields["hidden_size"] == 64  # set by Base.__init__, two super() calls up
    assert layer.fields["quant_config"] == "fp4"  # FusedMoE's, after Base's None
    assert layer.fields["use_w4afp8"] is False
    assert evaluate(sim, mods[LAYER], "x.doubled", x=layer) == 128  # a property
    assert evaluate(sim, mods[LAYER], "x.kind", x=layer) == "base"  # a class attribute
    assert evaluate(sim, mods[LAYER], "x.name()", x=layer) == "fused"  # a staticmethod
    made = evaluate(sim, mods[FUSED], "FusedMoE.make(3)")  # a classmethod builds cls(size)
    assert isinstance(made, Instance) and made.fields["hidden_size"] == 3
    # a method reaches the assert, with the instance's fields deciding it
    before = len(sim.result.checks)
    assert evaluate(sim, mods[LAYER], "x.run()", x=layer) == 128
    (check,) = sim.result.checks[before:]
    assert (check.kind, check.outcome) == ("assert", "fired")
    assert check.message == "forward_deepgemm_contiguous is deprecated" and check.path == LAYER
    w4 = evaluate(sim, mods[LAYER], "DeepEPMoE(64, quant_config='w4afp8')")
    before = len(sim.result.checks)
    evaluate(sim, mods[LAYER], "x.run()", x=w4)
    assert [c for c in sim.result.checks[before:] if c.outcome != "passed"] == []


def test_what_is_not_decided_stays_unknown() -> None:
    sim, mods = simulator()
    layer = evaluate(sim, mods[LAYER], "DeepEPMoE(64)")
    # a field set on an undecided path: unknown, never the value of one path
    q = Unknown(("the checkpoint's quantization",))
    unsure = evaluate(sim, mods[LAYER], "DeepEPMoE(64, quant_config=q)", q=q)
    assert isinstance(unsure.fields["use_w4afp8"], Unknown)
    assert isinstance(evaluate(sim, mods[LAYER], "x.nothing", x=layer), Unknown)
    # torch's nn.Module as a base defines what it defines (unknown), nothing else
    outside = evaluate(sim, mods[FUSED], "FromTorch()")
    assert outside.fields["x"] == 1
    training = evaluate(sim, mods[FUSED], "y.training", y=outside)
    assert isinstance(training, Unknown) and "nn.Module" in training.reason
    assert evaluate(sim, mods[FUSED], "getattr(y, 'hf_to_sglang_mapper', 7)", y=outside) == 7
    assert isinstance(evaluate(sim, mods[FUSED], "y._private", y=outside), Unknown)
    # any other base class from outside may define what ours does not
    elsewhere = evaluate(sim, mods[FUSED], "getattr(FromElsewhere, 'mapper', 7)")
    assert isinstance(elsewhere, Unknown) and "base class" in elsewhere.reason
    # isinstance decides for our objects
    assert evaluate(sim, mods[LAYER], "isinstance(x, FusedMoE)", x=layer) is True
    assert evaluate(sim, mods[FUSED], "isinstance(x, FromTorch)", x=layer) is False


def test_a_class_built_without_its_constructor_has_unknown_fields() -> None:
    sim, mods = simulator()
    fused = evaluate(sim, mods[FUSED], "FusedMoE")
    sim.skip_init.add(fused)
    layer = evaluate(sim, mods[FUSED], "FusedMoE(8)")
    assert isinstance(layer, Instance) and layer.fields == {}
    value = evaluate(sim, mods[FUSED], "x.hidden_size", x=layer)
    assert isinstance(value, Unknown) and "not simulated" in value.reason
    assert evaluate(sim, mods[FUSED], "x.name()", x=layer) == "fused"


def _self() -> Any:
    from kb.explain.abstract_values import SELF

    return SELF
