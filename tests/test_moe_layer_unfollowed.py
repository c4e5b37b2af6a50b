"""The MoE layer's first forward past what its quantization method reads with a default
(kb.explain.unfollowed), on synthetic modules shaped like SGLang's: the method's `apply`
first asks `use_intel_amx_backend(layer)` (`getattr(layer, "use_intel_amx_backend",
False)`, set only by the CPU's weight packing in `process_weights_after_loading`), then
runs the MoE runner, whose PermuteMethodPool has a pre-permute function registered (by a
decorator of the runner package) for the standard dispatch output and the triton runner
only: DeepEP's normal dispatch output with the triton runner fails its assertion."""

from __future__ import annotations

from typing import Any

from kb.explain import classes, derived, moe, moe_quant
from kb.explain.abstract_values import Instance
from kb.explain.frames import Ctx
from kb.explain.predicates import Profile
from kb.explain.simulate import Check, Simulator
from tests import sim_repos
from tests import test_moe_runner_stage as runner_stage

SRT = runner_stage.SRT
MOE = runner_stage.MOE
ARGS = runner_stage.ARGS
DISPATCHERS = MOE + "token_dispatcher/"

# the runner's core knows its backend; the pools hold the pre-permute functions, which the
# runner asks for the dispatch output's format and its backend when no fused func is set
RUNNER = (
    runner_stage.RUNNER.replace(
        "from sglang.srt.layers.moe.moe_runner.base import FusedOpPool",
        "from sglang.srt.layers.moe.moe_runner.base import FusedOpPool, PermuteMethodPool",
    )
    + """
    def run(self, dispatch_output):
        if self.fused_func is not None:
            return self.fused_func(dispatch_output, None, None)
        dispatch_format = dispatch_output.format.value
        runner_format = self.runner_core.runner_backend.value
        pre_permute = PermuteMethodPool.get_pre_permute(dispatch_format, runner_format)
        return pre_permute(dispatch_output)
"""
)

RUNNER_BASE = (
    runner_stage.RUNNER_BASE
    + """

class PermuteMethodPool:
    _pre_permute_methods: dict = {}

    @classmethod
    def register_pre_permute(cls, dispatch_output_name, runner_backend_name, permute_func):
        cls._pre_permute_methods[(dispatch_output_name, runner_backend_name)] = permute_func

    @classmethod
    def get_pre_permute(cls, dispatch_output_format, runner_input_format):
        key = (dispatch_output_format, runner_input_format)
        pre_permute_func = cls._pre_permute_methods.get(key)
        assert pre_permute_func is not None, "Pre-permute function is not registered"
        return pre_permute_func


def register_pre_permute(dispatch_output_name, runner_backend_name):
    def decorator(permute_func):
        PermuteMethodPool.register_pre_permute(
            dispatch_output_name, runner_backend_name, permute_func
        )
        return permute_func

    return decorator
"""
)

TRITON = runner_stage.TRITON.replace(
    "import register_fused_func",
    "import register_fused_func, register_pre_permute\n"
    "from sglang.srt.layers.moe.utils import MoeRunnerBackend",
).replace(
    "        self.config = config\n",
    """        self.config = config

    @property
    def runner_backend(self):
        return MoeRunnerBackend.TRITON


@register_pre_permute("standard", "triton")
def pre_permute_standard_to_triton(dispatch_output, quant_info, runner_config, state):
    return dispatch_output
""",
)

AMX = """
from sglang.srt.utils import cpu_has_amx_support


def use_intel_amx_backend(layer):
    return getattr(layer, "use_intel_amx_backend", False)


def _amx_process_weight_after_loading(module):
    module.use_intel_amx_backend = cpu_has_amx_support()
"""

# `apply` may first read an attribute the layer's constructor sets after its dispatcher
# (which no step follows): GUARD
FP8 = (
    runner_stage.FP8.replace(
        "from sglang.srt.layers.moe.moe_runner import MoeRunner",
        "from sglang.srt.layers.amx_utils import (\n"
        "    _amx_process_weight_after_loading,\n"
        "    use_intel_amx_backend,\n"
        ")\n"
        "from sglang.srt.layers.moe.moe_runner import MoeRunner\n"
        "from sglang.srt.utils import is_cpu\n"
        "from some_kernels import pack_weights\n\n"
        "_is_cpu = is_cpu()",
    )
    + """
    def process_weights_after_loading(self, layer):
        if _is_cpu:
            _amx_process_weight_after_loading(layer)
        PROCESS

    def apply(self, layer, dispatch_output):
        if use_intel_amx_backend(layer):
            return dispatch_output
        GUARD
        return self.runner.run(dispatch_output)
"""
)

# FusedMoE's constructor goes on after its dispatcher (no step follows that part, but for
# the fields it copies from a name or a constant: not this call)
FUSED = runner_stage.FUSED.replace(
    """        raise RuntimeError("past the dispatcher: not this step's")
""",
    """        self.overlap_args = dict()

    def run_moe_core(self, dispatch_output):
        return self.quant_method.apply(self, dispatch_output)
""",
)

DISPATCH_INIT = """
from sglang.srt.layers.moe.token_dispatcher.deepep import (
    DeepEPLLDispatchOutput,
    DeepEPNormalDispatchOutput,
)
"""

DISPATCH_BASE = """
from enum import Enum


class DispatchOutputFormat(Enum):
    STANDARD = "standard"
    DEEPEP_NORMAL = "deepep_normal"
    DEEPEP_LL = "deepep_ll"
"""

DISPATCH_DEEPEP = """
from typing import NamedTuple

from sglang.srt.layers.moe.token_dispatcher.base import DispatchOutputFormat


class DeepEPNormalDispatchOutput(NamedTuple):
    hidden_states: int

    @property
    def format(self):
        return DispatchOutputFormat.DEEPEP_NORMAL


class DeepEPLLDispatchOutput(NamedTuple):
    hidden_states: int

    @property
    def format(self):
        return DispatchOutputFormat.DEEPEP_LL
"""


def files(
    guard: str = "", extra: dict[str, str] | None = None, process: str = ""
) -> dict[str, str]:
    return {
        **(extra or {}),
        **runner_stage.FILES,
        MOE + "moe_runner/base.py": RUNNER_BASE,
        MOE + "moe_runner/runner.py": RUNNER,
        MOE + "moe_runner/triton.py": TRITON,
        SRT + "layers/amx_utils.py": AMX,
        SRT + "layers/quantization/fp8.py": FP8.replace("GUARD", guard or "pass").replace(
            "PROCESS", process or "pass"
        ),
        MOE + "fused_moe_triton/layer.py": FUSED,
        DISPATCHERS + "__init__.py": DISPATCH_INIT,
        DISPATCHERS + "base.py": DISPATCH_BASE,
        DISPATCHERS + "deepep.py": DISPATCH_DEEPEP,
    }


def forward(
    fields: dict[str, Any],
    platform: str = "cuda",
    guard: str = "",
    extra: dict[str, str] | None = None,
    process: str = "",
) -> list[Check]:
    """The first forward's checks of the MoE layer built and loaded by the MoE
    quantization step, on the DeepEP dispatch output(s) of its mode; `guard`: a statement
    of the quantization method's `apply` before it runs the runner; `extra`: more files;
    `process`: a statement ending its `process_weights_after_loading`."""
    given = files(guard, extra, process)
    mods = sim_repos.parsed_modules(given)
    fields = {"moe_a2a_backend": "deepep", "moe_runner_backend": "triton", **fields}
    profile = Profile.parse({**runner_stage.PROFILE, "platform": platform})
    sim = Simulator(
        mods.get,
        mods[ARGS],
        {"model_path": "m", "tp_size": 8, "ep_size": 8, **fields},
        profile,
        given={"model_path", *fields},
        derive=derived,
    )
    result = sim.run()
    configure = moe.moe_config(sim)
    assert configure is not None and sim.run_after(configure)
    fp8 = sim.module("sglang.srt.layers.quantization.fp8")
    assert fp8 is not None
    qc = classes.call_class(sim, classes.class_ref(fp8, "Fp8Config"), [], {}, Ctx(), None)
    assert isinstance(qc, Instance)
    built = moe.MoeLayer()
    assert sim.run_after(lambda: built.__dict__.update(moe.build_layer(sim, qc).__dict__))
    step = moe_quant.step(sim, built, qc, profile, list(given))
    assert step is not None and sim.run_after(step)
    start = len(result.checks)
    assert sim.run_after(lambda: moe.first_forward(sim, result.fields, built))
    return result.checks[start:]


def raised(checks: list[Check]) -> list[tuple[str, str]]:
    return [(c.outcome, c.message) for c in checks if c.kind != "warning" and c.outcome != "passed"]


NOT_REGISTERED = "Pre-permute function is not registered"


def test_an_attribute_only_another_platforms_loading_sets_is_absent() -> None:
    # on a GPU, the CPU's weight packing never runs: the layer has no use_intel_amx_backend,
    # getattr's default holds, and the runner finds no pre-permute for deepep_normal/triton
    checks = forward({"deepep_mode": "normal"})
    assert raised(checks) == [("fired", NOT_REGISTERED)]
    assert next(c for c in checks if c.outcome == "fired").path == MOE + "moe_runner/base.py"
    # both of auto's outputs (prefill's, decode's) lack one
    assert raised(forward({"deepep_mode": "auto"})) == [("fired", NOT_REGISTERED)] * 2


def test_what_code_not_followed_may_set_stays_unknown() -> None:
    # on the CPU the packing sets it from the host's AMX support, which is not known
    assert [o for o, _ in raised(forward({"deepep_mode": "normal"}, "cpu"))] == ["unknown"]
    # an attribute the constructor sets after its dispatcher (not followed) is not absent
    guard = 'if getattr(layer, "overlap_args", 0) == 0:\n            return dispatch_output'
    assert [o for o, _ in raised(forward({"deepep_mode": "normal"}, guard=guard))] == ["unknown"]
    # the loaded layer handed to code not followed, which may set any attribute on it
    for process in (
        'setattr(layer, "use_intel_amx_" + "backend", True)',
        "pack_weights(layer)",  # (a function of a package not held)
        'layer.register_buffer("use_intel_amx_backend", None)',  # (torch's: not followed)
    ):
        outcomes = [o for o, _ in raised(forward({"deepep_mode": "normal"}, process=process))]
        assert outcomes == ["unknown"], process
    # ... or in its forward, before it reads one
    guard = (
        "pack_weights(layer)\n"
        '        if getattr(layer, "packed", None) is None:\n'
        "            return dispatch_output"
    )
    assert [o for o, _ in raised(forward({"deepep_mode": "normal"}, guard=guard))] == ["unknown"]


REGISTERED_NORMAL = """
from sglang.srt.layers.moe.moe_runner.base import register_pre_permute


@register_pre_permute("deepep_normal", "triton")
def pre_permute_deepep_normal_to_triton(dispatch_output, quant_info, runner_config, state):
    return dispatch_output
"""


def test_a_registered_pair_passes() -> None:
    # registered by another module of the runner package: the normal output passes, the
    # low-latency one (auto's decode) still has none
    extra = {MOE + "moe_runner/deepep_triton.py": REGISTERED_NORMAL}
    assert raised(forward({"deepep_mode": "normal"}, extra=extra)) == []
    assert raised(forward({"deepep_mode": "auto"}, extra=extra)) == [("fired", NOT_REGISTERED)]
