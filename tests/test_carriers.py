"""What carries a flag onward (ingest/carriers.py, followed by ingest/indirect.py), on
small synthetic modules resolved alone: functions whose return a carrier decides, the limit
on chain links, and accessors that are no simple expression of a flag. Made-up code
modelled on SGLang's shapes."""

from __future__ import annotations

from typing import Any

import pytest

import ingest.carriers as carriers
from ingest import sites
from ingest.carriers import call_of, hops, scan_structure
from ingest.indirect import _RECENT, Resolver, _literal, _reached, resolve
from ingest.pyfile import PyFile
from kb.threeval import is_unknown

UTILS = """
from typing import Optional

RUNNER: Optional[str] = None
A2A: Optional[str] = None
IS_XBO = False


def initialize(server_args):
    global RUNNER, A2A, IS_XBO
    RUNNER = server_args.runner_backend
    A2A = server_args.a2a_backend
    IS_XBO = server_args.enable_x_batch_overlap


def is_xbo_enabled():
    return IS_XBO


def get_runner_backend():
    return RUNNER


def get_a2a_backend():
    return A2A


def is_v1_path() -> bool:
    return get_runner_backend().is_cute() and get_a2a_backend().is_deep()
"""

# A method deciding its return by a guard on a local holding the runner backend, and by a
# `return` of the a2a backend; a class's properties composing each other; an accessor
# returning a dozen conditions, one of them a carrier.
QUANT = """
from sglang.srt.utils import get_a2a_backend, get_runner_backend, is_v1_path


class Fp9MoEMethod:
    @staticmethod
    def uses_deep_runner() -> bool:
        backend = get_runner_backend()
        if backend.is_deep():
            return True
        if backend.is_auto():
            return get_a2a_backend().is_deep()
        return False

    @property
    def _is_v1(self) -> bool:
        return is_v1_path()

    @property
    def _is_v2(self) -> bool:
        return self.enabled and not self._is_v1

    def _can_dual_stream(self, x) -> bool:
        return (
            self.alt_stream is not None
            and get_runner_backend().is_trt()
            and self.num_shared == 0
            and x.shape[0] > 0
            and hasattr(self, "shared")
            and getattr(self.experts, "use_trt", False)
            and not self._a2a
            and not self._fuse_inside
            and not getattr(self, "is_hash", False)
        )

    def warm(self, x):
        if not get_runner_backend().is_deep():
            return
        self.x = x

    def apply(self, x):
        self.warm(x)
        if self.uses_deep_runner():
            x = x + 1
        if self._is_v2:
            x = x * 2
        if self._can_dual_stream(x):
            x = x - 1
        return x
"""

# A long function using a carrier only in an `if` that returns: no accessor.
LONG = (
    "from sglang.srt.utils import get_runner_backend\n\n\ndef build(x):\n"
    + "".join(f"    x = x + {i}\n" for i in range(45))
    + "    if get_runner_backend().is_deep():\n        return x\n    return None\n"
)

# A class named for the feature (a "named" carrier) tested in a short function: its use is
# a site, but the function's return says nothing of the flag's value.
XBO = """
from sglang.srt.utils import is_xbo_enabled


class XboPreparer:
    @staticmethod
    def all_same(modes):
        return len(set(modes)) == 1


def prepare(batch):
    if is_xbo_enabled():
        batch.split = True
"""

XBO_USER = """
from sglang.srt.overlap.xbo import XboPreparer


def global_mode(modes):
    agree = XboPreparer.all_same(modes)
    if not agree:
        return None
    return modes[0]


def run(modes):
    if global_mode(modes) is None:
        return 0
    return 1
"""

# Layer modes (communicator.py's shape): the flags decide the mode only under a test of what
# the caller passes (a sparse layer), or through a method called with the caller's context.
MODES = """
from sglang.srt.utils import get_a2a_backend, is_xbo_enabled


class LayerModes:
    @classmethod
    def init_new(cls, **kwargs):
        return cls(cls._mlp_mode(kwargs), cls._output_mode(kwargs))

    @classmethod
    def _mlp_mode(cls, context):
        if context["sparse"]:
            if get_a2a_backend().is_deep():
                return "scattered"
            return "full"
        return "full"

    @classmethod
    def _gather(cls, context):
        return not context["sparse"] and context["next_sparse"] and is_xbo_enabled()

    @classmethod
    def _output_mode(cls, context):
        if cls._gather(context):
            return "full"
        return "scattered"
"""

DENSE_MODEL = """
from sglang.srt.layers.modes import LayerModes


class DenseLayer:
    def __init__(self):
        self.modes = LayerModes.init_new(sparse=False, next_sparse=False)
"""

FILES = {
    "python/sglang/srt/utils.py": UTILS,
    "python/sglang/srt/layers/modes.py": MODES,
    "python/sglang/srt/models/dense.py": DENSE_MODEL,
    "python/sglang/srt/quant/fp9.py": QUANT,
    "python/sglang/srt/quant/long.py": LONG,
    "python/sglang/srt/overlap/xbo.py": XBO,
    "python/sglang/srt/overlap/xbo_user.py": XBO_USER,
}
OPTIONS = {
    "runner_backend": "--runner-backend",
    "a2a_backend": "--a2a-backend",
    "enable_x_batch_overlap": "--enable-x-batch-overlap",
}


def _resolve(files: dict[str, str]) -> list[dict[str, Any]]:
    _RECENT.clear()  # (kept by blob; here a path stands for the blob, its text may differ)
    facts = {}
    for path, text in files.items():
        data = text.encode()
        facts[path] = scan_structure(data, sites.scan(data)["reads"])
    return resolve(
        {p: p for p in files}, facts.__getitem__, OPTIONS, files.__getitem__, lambda p: False
    )


def _at(found: list[dict[str, Any]], path: str, text: str) -> dict[str, list[str]]:
    """dest -> chain of the sites on the line holding `text` (a step in a model file's code,
    stored {"name", "model": true}, by its name: tests/test_model_entries.py reads them)."""
    return {
        s["dest"]: [v["name"] if isinstance(v, dict) and v.get("model") else v for v in s["via"]]
        for s in found
        if s["path"].endswith(path) and text in s["text"]
    }


def test_a_guard_on_a_local_holding_a_carrier_decides_the_return() -> None:
    found = _resolve(FILES)
    use = _at(found, "fp9.py", "if self.uses_deep_runner():")
    assert use["runner_backend"] == [
        "RUNNER",
        "get_runner_backend()",
        "Fp9MoEMethod.uses_deep_runner()",
    ]
    assert use["a2a_backend"][-1] == "Fp9MoEMethod.uses_deep_runner()"
    # a bare `return` under an `if` decides what a method does, not a value it returns
    assert not _at(found, "fp9.py", "self.warm(x)")
    # a long function is no accessor, whatever its `if`s test
    assert not [s for s in found if "build" in " ".join(map(str, s["via"]))]


def test_a_test_of_a_class_named_for_a_feature_carries_nothing() -> None:
    found = _resolve(FILES)
    use = _at(found, "xbo_user.py", "agree = XboPreparer.all_same(modes)")
    assert use["enable_x_batch_overlap"][-1] == {"name": "XboPreparer", "by_name": True}
    assert not _at(found, "xbo_user.py", "if global_mode(modes) is None:")


def test_a_class_composing_its_own_properties_is_no_further_hop() -> None:
    chain = ("A2A", "get_a2a_backend()", "is_v1_path()", "Fp9MoEMethod._is_v1")
    assert hops(chain) == 4
    assert hops((*chain, "Fp9MoEMethod._is_v2")) == 4  # properties
    assert hops((*chain, "Fp9MoEMethod._is_v2()")) == 4  # or methods
    assert hops((*chain, "Other._is_v2")) == 5
    use = _at(_resolve(FILES), "fp9.py", "if self._is_v2:")
    assert set(use) == {"runner_backend", "a2a_backend"}
    assert use["a2a_backend"] == [*chain, "Fp9MoEMethod._is_v2"]


def test_a_return_of_a_dozen_conditions_carries_the_flag_on() -> None:
    found = _resolve(FILES)
    # its value is false whenever the backend is not trt: the callers depend on the flag
    assert _at(found, "fp9.py", "and get_runner_backend().is_trt()")
    assert _at(found, "fp9.py", "if self._can_dual_stream(x):")["runner_backend"][-1] == (
        "Fp9MoEMethod._can_dual_stream()"
    )


def test_a_test_of_what_the_caller_passes_makes_no_carrier() -> None:
    """The flags decide the layer modes only for some arguments (a sparse layer, a dense
    one before a sparse one): `_mlp_mode` and `_output_mode` (through `_gather`'s `and`
    terms) carry them on to no call that can only pass a dense layer, so a dense layer's
    `init_new(sparse=False, ...)` is no read of the a2a backend or of xbo."""
    found = _resolve(FILES)
    assert _at(found, "modes.py", "if get_a2a_backend().is_deep():")  # the use itself
    assert _at(found, "modes.py", "if cls._gather(context):")["enable_x_batch_overlap"] == [
        "IS_XBO",
        "is_xbo_enabled()",
        "LayerModes._gather()",
    ]
    # (the module's own call passes its caller's context on: a fact of that file)
    assert set(_at(found, "modes.py", "return cls(cls._mlp_mode(kwargs)")) == {
        "a2a_backend",
        "enable_x_batch_overlap",
    }
    assert not [s for s in found if s["path"].endswith("dense.py")]


# The same shape with a context object, and the tests of the later versions: the flags decide
# the MLP mode under `if context.is_layer_sparse:`, in guards at the top of that branch (one
# test over several lines), the runner backend only under `if not context.is_layer_sparse:`.
# `gather` decides its return under a test of the server args, a flag's test.
SPARSE_MODES = """
from sglang.srt.utils import get_a2a_backend, get_runner_backend


class Context:
    is_layer_sparse: bool


class LayerModes:
    @classmethod
    def init_new(cls, **kwargs):
        context = Context(**kwargs)
        return cls(cls._mlp_mode(context), cls._dense_mode(context))

    @classmethod
    def _mlp_mode(cls, context):
        if context.is_layer_sparse:
            if (
                # handled outside for these
                not get_a2a_backend().is_none()
            ):
                return "scattered"
            return "full"
        else:
            return "full"

    @classmethod
    def _dense_mode(cls, context):
        if not context.is_layer_sparse:
            if get_runner_backend().is_deep():
                return "scattered"
        return "full"


def gather(server_args):
    if server_args.enable_dp:
        if get_a2a_backend().is_none():
            return True
        return False
    return False
"""


def _layer(name: str, call: str, sparse: str = "self.is_layer_sparse = is_moe") -> str:
    return (
        "from sglang.srt.layers.sparse_modes import LayerModes\n\n\n"
        f"class {name}:\n"
        "    def __init__(self, layer_id, is_moe):\n"
        f"        {sparse}\n"
        f"        self.modes = {call}\n"
    )


SPARSE_FILES = {
    "python/sglang/srt/utils.py": UTILS,
    "python/sglang/srt/layers/sparse_modes.py": SPARSE_MODES,
    "python/sglang/srt/models/dense_layer.py": _layer(
        "DenseLayer", "LayerModes.init_new(layer_id=layer_id, is_layer_sparse=False)"
    ),
    "python/sglang/srt/models/sparse_layer.py": _layer(
        "MoeLayer",
        "LayerModes.init_new(\n            layer_id=layer_id,\n"
        "            is_layer_sparse=self.is_layer_sparse,\n        )",
    ),
    "python/sglang/srt/models/all_moe.py": _layer(
        "AllMoeLayer", "LayerModes.init_new(layer_id=layer_id, is_layer_sparse=True)"
    ),
    "python/sglang/srt/models/unsaid.py": _layer(
        "UnsaidLayer", "LayerModes.init_new(layer_id=layer_id)"
    ),
    # a dense model setting the attribute it passes to a literal: a dense call all the same
    "python/sglang/srt/models/set_dense.py": _layer(
        "SetDenseLayer",
        "LayerModes.init_new(layer_id=layer_id, is_layer_sparse=self.is_layer_sparse)",
        "self.is_layer_sparse = False",
    ),
    # a local set to True on one way, False on the other: either
    "python/sglang/srt/models/hybrid.py": _layer(
        "HybridLayer",
        "LayerModes.init_new(layer_id=layer_id, is_layer_sparse=sparse)",
        "sparse = True\n        if not is_moe:\n            sparse = False",
    ),
    "python/sglang/srt/runner.py": (
        "from sglang.srt.layers.sparse_modes import gather\n\n\n"
        "def run(server_args):\n"
        "    return 1 if gather(server_args) else 0\n"
    ),
}


def test_a_guard_under_a_test_of_what_the_caller_passes_is_read_where_a_call_makes_it_true() -> (
    None
):
    """`_mlp_mode` carries the a2a backend only under `if context.is_layer_sparse:`: a
    layer passing `is_layer_sparse=self.is_layer_sparse` or `True` reaches it, one passing
    `False` or leaving the keyword out does not; `if not context.is_layer_sparse:` the
    other way round (the runner backend)."""
    found = _resolve(SPARSE_FILES)
    chain = ["A2A", "get_a2a_backend()", "LayerModes._mlp_mode()", "LayerModes.init_new()"]
    assert (
        _at(found, "sparse_layer.py", "self.modes = LayerModes.init_new(")["a2a_backend"] == chain
    )
    assert set(_at(found, "all_moe.py", "self.modes = LayerModes.init_new(")) == {"a2a_backend"}
    dense = _at(found, "dense_layer.py", "self.modes = LayerModes.init_new(")
    assert set(dense) == {"runner_backend"}
    assert dense["runner_backend"][-2:] == ["LayerModes._dense_mode()", "LayerModes.init_new()"]
    assert set(_at(found, "sparse_layer.py", "self.modes = LayerModes.init_new(")) == {
        "a2a_backend",
        "runner_backend",
    }
    assert not _at(found, "unsaid.py", "self.modes")
    assert set(_at(found, "set_dense.py", "self.modes")) == {"runner_backend"}
    assert set(_at(found, "hybrid.py", "self.modes")) == {"a2a_backend", "runner_backend"}
    # the calls inside the module pass their caller's context on: reads of that file
    assert set(_at(found, "sparse_modes.py", "return cls(cls._mlp_mode(context)")) == {
        "a2a_backend",
        "runner_backend",
    }


# Returns under a test of what the caller passes (communicator.py up to snapshot-2026-04-01):
# the a2a backend decides only a sparse layer's mode, the runner backend only a dense one's.
RETURN_MODES = """
from sglang.srt.utils import get_a2a_backend, get_runner_backend


class ReturnModes:
    @classmethod
    def init_new(cls, **kwargs):
        ctx = Ctx(**kwargs)
        return cls(mode=cls._mode(ctx))

    @classmethod
    def _mode(cls, ctx):
        if ctx.sparse:
            return (
                "scattered"
                if not get_a2a_backend().is_none()
                else "full"
            )
        else:
            return "scattered" if get_runner_backend().is_deep() else "full"
"""


def _return_layer(name: str, sparse: str) -> str:
    return (
        "from sglang.srt.layers.return_modes import ReturnModes\n\n\n"
        f"class {name}:\n"
        "    def __init__(self, is_moe):\n"
        f"        self.modes = ReturnModes.init_new(sparse={sparse})\n"
    )


RETURN_FILES = {
    "python/sglang/srt/utils.py": UTILS,
    "python/sglang/srt/layers/return_modes.py": RETURN_MODES,
    "python/sglang/srt/models/r_sparse.py": _return_layer("SparseLayer", "is_moe"),
    "python/sglang/srt/models/r_dense.py": _return_layer("DenseLayer", "False"),
    "python/sglang/srt/models/r_moe.py": _return_layer("MoeLayer", "True"),
}


def test_a_return_under_a_test_of_what_the_caller_passes_is_read_where_a_call_makes_it_true() -> (
    None
):
    """The return under `if ctx.sparse:` reaches a call that can pass a sparse layer, not a
    dense one passing `sparse=False`; the `else:` return the other way round."""
    found = _resolve(RETURN_FILES)
    line = "self.modes = ReturnModes.init_new("
    sparse = _at(found, "r_sparse.py", line)
    assert set(sparse) == {"a2a_backend", "runner_backend"}
    assert sparse["a2a_backend"][-2:] == ["ReturnModes._mode()", "ReturnModes.init_new()"]
    assert set(_at(found, "r_dense.py", line)) == {"runner_backend"}
    assert set(_at(found, "r_moe.py", line)) == {"a2a_backend"}
    # the module's own call passes its caller's context on: both, as a fact of that file
    assert set(_at(found, "return_modes.py", "return cls(mode=cls._mode(ctx))")) == {
        "a2a_backend",
        "runner_backend",
    }


def test_a_local_at_the_top_used_in_a_conditional_return_keeps_its_condition() -> None:
    """`backend = get_a2a_backend()` at the top, used only in the return under `if
    ctx.sparse:`: it decides for sparse callers only, as the same code written inline."""
    files = dict(RETURN_FILES)
    files["python/sglang/srt/layers/return_modes.py"] = RETURN_MODES.replace(
        '        if ctx.sparse:\n            return (\n                "scattered"\n'
        "                if not get_a2a_backend().is_none()",
        "        backend = get_a2a_backend()\n        if ctx.sparse:\n            return (\n"
        '                "scattered"\n                if not backend.is_none()',
    )
    assert "backend = get_a2a_backend()" in files["python/sglang/srt/layers/return_modes.py"]
    found = _resolve(files)
    line = "self.modes = ReturnModes.init_new("
    assert set(_at(found, "r_dense.py", line)) == {"runner_backend"}
    assert set(_at(found, "r_moe.py", line)) == {"a2a_backend"}


def test_a_guard_under_a_test_of_the_server_args_carries_the_flag_on() -> None:
    found = _resolve(SPARSE_FILES)
    use = _at(found, "runner.py", "return 1 if gather(server_args) else 0")
    assert use == {"a2a_backend": ["A2A", "get_a2a_backend()", "gather()"]}


def test_call_of_reads_the_call_over_its_lines() -> None:
    f = PyFile("x = Modes.init_new(\n    a=1,  # (\n    b=c(d),\n)\ny = Modes.init_new(**kw)\n")
    found = call_of(f, 1, ("Modes", "init_new"))
    assert found is not None and sorted(k.arg for k in found.keywords if k.arg) == ["a", "b"]
    late = call_of(f, 5, ("Modes", "init_new"))
    assert late is not None and [k.arg for k in late.keywords] == [None]
    assert call_of(f, 5, ("Other", None)) is None


POSITIONAL_FILES = {
    "python/sglang/srt/utils.py": UTILS,
    "python/sglang/srt/layers/helper.py": """from sglang.srt.utils import get_a2a_backend


def mlp_mode(is_sparse):
    if is_sparse:
        return "scattered" if not get_a2a_backend().is_none() else "full"
    return "full"


def use_a2a(x, args):
    if args.enable_dp_attention:
        return not get_a2a_backend().is_none()
    return False
""",
    "python/sglang/srt/models/m.py": """from sglang.srt.layers.helper import mlp_mode, use_a2a


class M:
    def __init__(self, config, server_args):
        self.mode = mlp_mode(config.num_experts > 0)
        self.kw_mode = mlp_mode(is_sparse=config.num_experts > 0)
        self.dense = mlp_mode(is_sparse=False)
        self.gather = use_a2a(1, server_args)
""",
}


def test_a_conditional_carrier_called_by_position_or_tested_on_args() -> None:
    """Which parameter a positional argument binds is not read: such a call reaches, as
    every call did before conditions; a test of a parameter named `args` tests the server
    args (ARGS_RECEIVERS), which makes no condition."""
    found = _resolve(POSITIONAL_FILES)
    assert "a2a_backend" in _at(found, "m.py", "self.mode = mlp_mode(")
    assert "a2a_backend" in _at(found, "m.py", "self.kw_mode = mlp_mode(")
    assert not _at(found, "m.py", "self.dense = mlp_mode(")
    assert "a2a_backend" in _at(found, "m.py", "self.gather = use_a2a(")


# --- choice attribution (ingest/assemble.py Attributor) -----------------------------------

KERNEL = """
def apply(quant_info, server_args, quant_type, layer):
    if quant_info.quant_type == "fp9":
        return 1
    if quant_info.quant_type in ("bf16", "fp9"):
        return 2
    if server_args.quantization == "fp9":
        return 3
    if quant_type == "fp9":
        return 4
    if layer.quantization == "fp9":
        return 5
    if layer.cache_layout == "page_major":
        return 6
    if layer.model_path.lower() in ("none", "awq"):
        return 7
    if quant_info.quant_type.strip().lower() == "fp9":
        return 8
"""


def test_a_name_of_another_object_is_the_flag_s_only_when_it_is_the_dest() -> None:
    from ingest.assemble import Attributor

    flags: list[dict[str, Any]] = [
        {"name": n, "dest": d, "choices": c, "choices_dynamic": False, "deprecated": None}
        for n, d, c in [
            ("--quantization", "quantization", ["fp9", "awq"]),
            ("--draft-model-quantization", "draft_model_quantization", ["fp9", "awq"]),
            ("--kv-cache-dtype", "kv_cache_dtype", ["auto", "fp9", "bf16"]),
            ("--cache-mem-layout", "cache_mem_layout", ["layer_major", "page_major"]),
            ("--model-path", "model_path", None),
        ]
    ]
    who = Attributor(flags, {f["dest"]: f["name"] for f in flags})
    got: dict[int, list[Any]] = {}
    for value, line, tail, _how in sites.scan(KERNEL.encode())["choices"]:
        got.setdefault(line, []).append(who.attribute(value, tail))
    ambiguous = (None, ["--draft-model-quantization", "--kv-cache-dtype", "--quantization"], "")
    # the kernel's input format shares a word with --quantization: not the flag
    assert got[3] == [ambiguous]
    assert got[5][1] == ambiguous
    assert got[7] == [("--quantization", [], "subject")]  # server args
    assert got[9] == [("--quantization", [], "subject")]  # a bare name: its words
    assert got[11] == [("--quantization", [], "subject")]  # the dest itself
    # a value no other flag accepts: the value says it, not the name
    assert got[13] == [("--cache-mem-layout", [], "only-flag")]
    # a case or blank change is no other name: another flag's dest compared, not a choice
    assert got[15] == [None, None]  # ("none"; "awq", which --quantization's family takes)
    assert got[17] == [ambiguous]  # (was the name `lower`, no receiver's: by words)


# --- what is no use of a carrier, and what is no step by name ------------------------------

# A docstring listing the experts' class (after non-ASCII text: str and bytes offsets differ),
# and a real use after it. (A parameter or local named like a carrier is still taken for a
# use of it: no such case in SGLang's history, and the check cost ~3 s of ingest CPU.)
SHADOWS = """
from sglang.srt.utils import get_runner_backend, is_xbo_enabled


class Fp9Experts:
    \"\"\"Experts — «fused» (ü):
    - runner: get_runner_backend().is_deep()
    \"\"\"

    def __init__(self):
        self.deep = get_runner_backend().is_deep()


def gather(
    x,
    is_xbo_enabled: bool,
):
    if not is_xbo_enabled:
        return x

    def inner():
        return is_xbo_enabled and x

    return inner()


def local_only(x):
    is_xbo_enabled = x > 0
    if is_xbo_enabled:
        x.split = True


def setup(x):
    if is_xbo_enabled():
        x.split = True
"""

# A class named for the feature whose `__init__` reads the carrier (MaybeXboDispatcher), one
# that does not (XboHelper); a module using both.
XBO_DISPATCH = """
from sglang.srt.utils import is_xbo_enabled


class MaybeXboDispatcher:
    def __init__(self):
        self.count = 2 if is_xbo_enabled() else 1


class XboHelper:
    pass
"""

XBO_DISPATCH_USER = """
from sglang.srt.overlap.xbo_dispatch import MaybeXboDispatcher, XboHelper


def make_dispatcher():
    return MaybeXboDispatcher()


def make_helper():
    return XboHelper()
"""


def test_a_docstring_line_is_no_use() -> None:
    found = _resolve({**FILES, "python/sglang/srt/quant/shadows.py": SHADOWS})
    assert not _at(found, "shadows.py", "- runner: get_runner_backend()")
    assert _at(found, "shadows.py", "self.deep = get_runner_backend().is_deep()")


def test_a_definition_named_for_the_feature_that_reads_it_is_no_step_by_name() -> None:
    found = _resolve(
        {
            **FILES,
            "python/sglang/srt/overlap/xbo_dispatch.py": XBO_DISPATCH,
            "python/sglang/srt/overlap/xbo_dispatch_user.py": XBO_DISPATCH_USER,
        }
    )
    read = _at(found, "xbo_dispatch_user.py", "return MaybeXboDispatcher()")
    assert read["enable_x_batch_overlap"] == [
        "IS_XBO",
        "is_xbo_enabled()",
        {"name": "MaybeXboDispatcher", "by_name": False},
    ]
    named = _at(found, "xbo_dispatch_user.py", "return XboHelper()")
    assert named["enable_x_batch_overlap"][-1] == {"name": "XboHelper", "by_name": True}


def test_a_one_line_guard_on_a_parameter_makes_no_carrier() -> None:
    """`if ctx.sparse and ...: return True` on one line: the returned `True` shares the line
    but the test reads what the caller passes, as on two lines."""
    one_line = (
        "from sglang.srt.utils import get_runner_backend\n\n\n"
        "def deep_here(ctx):\n"
        "    if ctx.sparse and get_runner_backend().is_deep(): return True\n"
        "    return False\n"
    )
    user = (
        "from sglang.srt.quant.one_line import deep_here\n\n\n"
        "def run(ctx):\n"
        "    if deep_here(ctx):\n"
        "        return 1\n"
        "    return 0\n"
    )
    found = _resolve(
        {
            **FILES,
            "python/sglang/srt/quant/one_line.py": one_line,
            "python/sglang/srt/quant/one_line_user.py": user,
        }
    )
    assert _at(found, "one_line.py", "if ctx.sparse and get_runner_backend()")  # the use
    assert not _at(found, "one_line_user.py", "if deep_here(ctx):")


def test_a_name_two_flags_shorten_is_the_one_the_file_s_path_names() -> None:
    from ingest.assemble import Attributor

    flags: list[dict[str, Any]] = [
        {"name": n, "dest": d, "choices": c, "choices_dynamic": False, "deprecated": None}
        for n, d, c in [
            ("--radix-eviction-policy", "radix_eviction_policy", ["lru", "lfu"]),
            ("--lora-eviction-policy", "lora_eviction_policy", ["lru", "fifo"]),
            ("--schedule-policy", "schedule_policy", ["lpm", "priority"]),
        ]
    ]
    who = Attributor(flags, {f["dest"]: f["name"] for f in flags})
    radix = "python/pkg/mem_cache/radix_cache.py"
    assert who.attribute("lru", "eviction_policy", radix) == (
        "--radix-eviction-policy",
        [],
        "subject",
    )
    # values the radix flag does not take: the radix cache's own, no choice site
    assert who.attribute("fifo", "eviction_policy", radix) is None
    assert who.attribute("priority", "eviction_policy", radix) is None
    # a path that names neither: the value decides, as before
    elsewhere = "python/pkg/managers/cache.py"
    assert who.attribute("lru", "eviction_policy", elsewhere)[0] is None  # type: ignore[index]
    assert who.attribute("fifo", "eviction_policy", elsewhere)[0] == "--lora-eviction-policy"  # type: ignore[index]
    # a name that is a flag's dest is that flag's, whatever the path says
    flags.append({"name": "--eviction-policy", "dest": "eviction_policy", "choices": ["fifo"],
                  "choices_dynamic": False, "deprecated": None})  # fmt: skip
    who = Attributor(flags, {f["dest"]: f["name"] for f in flags})
    assert who.attribute("fifo", "eviction_policy", radix) == ("--eviction-policy", [], "subject")


# The gather of a dense layer before a sparse one: the flag is read directly in a return
# `and`-ed with tests of the context; the output mode tests it (nested, passing the context
# on whole); the input mode is the previous layer's output mode, through a method building
# the previous layer's context from this one's fields (`sparse` is the previous `prev_sparse`).
GATHER_MODES = """
from sglang.srt.server_args import get_global_server_args


class _Ctx:
    def previous_layer(self):
        return _Ctx(
            layer_id=self.layer_id - 1,
            sparse=self.prev_sparse,
            prev_sparse=None,
            next_sparse=self.sparse,
        )


class LayerModes:
    @classmethod
    def init_new(cls, **kwargs):
        context = _Ctx(**kwargs)
        return cls(cls._input_mode(context), cls._output_mode(context))

    @classmethod
    def _input_mode(cls, context):
        if context.layer_id == 0:
            return "full"
        return cls._output_mode(context.previous_layer())

    @classmethod
    def _gather(cls, context):
        return (
            not context.sparse
            and context.next_sparse
            and get_global_server_args().enable_x_batch_overlap
        )

    @classmethod
    def _output_mode(cls, context):
        if get_global_server_args().dense_dp:
            if cls._gather(context):
                return "full"
            return "scattered"
        return "full"
"""


def _gather_model(sparse: str, prev: str, nxt: str, setup: str = "") -> str:
    return f"""
from sglang.srt.layers.gather_modes import LayerModes


class Layer:
    def __init__(self, config, layer_id):
{setup or "        pass"}
        self.modes = LayerModes.init_new(
            layer_id=layer_id,
            sparse={sparse},
            prev_sparse={prev},
            next_sparse={nxt},
        )
"""


GATHER_FILES = {
    "python/sglang/srt/layers/gather_modes.py": GATHER_MODES,
    # every layer from the config: some dense one may come before a sparse one
    "python/sglang/srt/models/mixed.py": _gather_model(
        "config.is_sparse(layer_id)",
        "config.is_sparse(layer_id - 1)",
        "config.is_sparse(layer_id + 1)",
    ),
    # a sparse layer whose previous one may be dense: only its input mode gathers
    "python/sglang/srt/models/sparse_after.py": _gather_model(
        "True", "config.is_sparse(layer_id - 1)", "True"
    ),
    # all dense, all sparse, or one of the two by model type: no dense layer before a sparse
    "python/sglang/srt/models/dense.py": _gather_model(
        "self.sparse", "prev", "False", "        self.sparse = False\n        prev = False"
    ),
    "python/sglang/srt/models/sparse.py": _gather_model("True", "True", "True"),
    "python/sglang/srt/models/by_type.py": _gather_model(
        "sparse",
        "prev",
        "nxt",
        "        if config.moe:\n            sparse = True\n            prev = True\n"
        "            nxt = True\n        else:\n            sparse = False\n"
        "            prev = False\n            nxt = False",
    ),
}


def test_a_return_anded_with_tests_of_the_context_is_read_where_a_call_can_make_them_true():
    found = _resolve(GATHER_FILES)
    gather = [s for s in found if s["dest"] == "enable_x_batch_overlap"]
    assert sorted(s["path"].rsplit("/", 1)[1] for s in gather if "models" in s["path"]) == [
        "mixed.py",
        "sparse_after.py",
    ]
    # the dense layer's own output mode, and the next (sparse) layer's input mode
    assert _at(found, "mixed.py", "self.modes")["enable_x_batch_overlap"] == [
        "LayerModes._gather()",
        "LayerModes._output_mode()",
        "LayerModes.init_new()",
    ]
    assert _at(found, "sparse_after.py", "self.modes")["enable_x_batch_overlap"] == [
        "LayerModes._gather()",
        "LayerModes._output_mode()",
        "LayerModes._input_mode()",
        "LayerModes.init_new()",
    ]


def test_a_context_built_by_a_method_defined_twice_is_not_followed() -> None:
    twice = GATHER_MODES.replace(
        "class LayerModes:",
        "class _Other:\n    def previous_layer(self):\n        return 1\n\n\nclass LayerModes:",
    )
    found = _resolve({**GATHER_FILES, "python/sglang/srt/layers/gather_modes.py": twice})
    assert _at(found, "mixed.py", "self.modes")["enable_x_batch_overlap"]
    assert not _at(found, "sparse_after.py", "self.modes")


def test_a_test_passing_the_context_to_an_unconditional_carrier_decides_nothing() -> None:
    """What `_always(context)` depends on besides the flag is not named: `_mode` stays no
    carrier (only a conditional carrier's condition names what the call passes on)."""
    always = GATHER_MODES.replace(
        "    @classmethod\n    def _output_mode(",
        "    @classmethod\n    def _always(cls, context):\n"
        "        return get_global_server_args().enable_x_batch_overlap\n\n"
        "    @classmethod\n    def _mode(cls, context):\n"
        "        if cls._always(context):\n            return 1\n        return 2\n\n"
        "    @classmethod\n    def _output_mode(",
    ).replace("cls._output_mode(context))", "cls._output_mode(context), cls._mode(context))")
    assert "cls._mode(context))" in always
    found = _resolve({**GATHER_FILES, "python/sglang/srt/layers/gather_modes.py": always})
    assert not _at(found, "gather_modes.py", "return cls(cls._input_mode(context)")
    assert not _at(found, "dense.py", "self.modes")


# A layer class whose sparsity and place come from its constructor's arguments, and model
# files building it: a nextn layer (`is_nextn=True`, layer 0) is sparse and first, so it is
# neither a dense layer before a sparse one nor after one.
NEXTN_LAYER = """
from sglang.srt.layers.gather_modes import LayerModes


class MoeLayer:
    def __init__(self, config, layer_id, is_nextn=False):
        self.config = config
        self.sparse = self._is_sparse(layer_id, is_nextn=is_nextn)
        prev_sparse = self._is_sparse(layer_id - 1, is_nextn=False)
        self.modes = LayerModes.init_new(
            layer_id=layer_id,
            sparse=self.sparse,
            prev_sparse=prev_sparse,
            next_sparse=self._is_sparse(layer_id + 1, is_nextn=False),
        )

    def _is_sparse(self, layer_id, is_nextn):
        return is_nextn or layer_id >= self.config.first_sparse
"""


def _holder(call: str) -> str:
    return f"""
from sglang.srt.models.moe import MoeLayer


class Holder:
    def __init__(self, config):
        self.decoder = {call}
"""


def test_a_holder_building_a_layer_with_literals_making_every_way_false_reads_nothing():
    files = {
        **GATHER_FILES,
        "python/sglang/srt/models/moe.py": NEXTN_LAYER,
        "python/sglang/srt/models/moe_nextn.py": _holder("MoeLayer(config, 0, is_nextn=True)"),
        "python/sglang/srt/models/moe_nextn_kw.py": _holder(
            "MoeLayer(config, layer_id=0, is_nextn=True)"
        ),
        # layer 0 of the model's own layers: dense before a sparse one, maybe
        "python/sglang/srt/models/moe_first.py": _holder("MoeLayer(config, 0)"),
        # a sparse layer at a place not known: its previous layer may be dense
        "python/sglang/srt/models/moe_mtp.py": _holder("MoeLayer(config, config.n, is_nextn=True)"),
    }
    found = _resolve(files)
    gather = {s["path"].rsplit("/", 1)[1] for s in found if s["dest"] == "enable_x_batch_overlap"}
    assert {"moe.py", "moe_first.py", "moe_mtp.py"} <= gather
    assert "moe_nextn.py" not in gather
    assert "moe_nextn_kw.py" not in gather
    assert _at(found, "moe_first.py", "self.decoder")["enable_x_batch_overlap"][-1] == (
        "self.decoder = MoeLayer(…)"
    )


def test_what_follows_an_early_return_on_the_context_decides_only_past_it() -> None:
    """`if context.layer_id == 0: return` above: the input mode reads the flag only for a
    layer other than the first; a call passing `layer_id=0` reaches nothing through it."""
    first = _gather_model("True", "config.is_sparse(layer_id - 1)", "True").replace(
        "layer_id=layer_id,", "layer_id=0,"
    )
    found = _resolve({**GATHER_FILES, "python/sglang/srt/models/first.py": first})
    assert _at(found, "sparse_after.py", "self.modes")["enable_x_batch_overlap"]
    assert not _at(found, "first.py", "self.modes")


def test_a_layer_also_reached_without_conditions_is_held_whatever_its_arguments() -> None:
    """The nextn layer also builds a block reading the flag unconditionally: its holder
    reads it through that, though the search meets the layer before the block."""
    always = """
from sglang.srt.server_args import get_global_server_args


def x_overlap_on():
    return get_global_server_args().enable_x_batch_overlap
"""
    block = """
from sglang.srt.layers.overlap import x_overlap_on


class MoeSparseBlock:
    def __init__(self, config):
        self.overlap = x_overlap_on()
"""
    layer = block + NEXTN_LAYER.replace(
        "        self.config = config\n",
        "        self.config = config\n        self.mlp = MoeSparseBlock(config)\n",
    )
    files = {
        **GATHER_FILES,
        "python/sglang/srt/layers/overlap.py": always,
        "python/sglang/srt/models/moe.py": layer,
        "python/sglang/srt/models/moe_nextn.py": _holder("MoeLayer(config, 0, is_nextn=True)"),
    }
    found = _resolve(files)
    assert _at(found, "moe.py", "self.modes")["enable_x_batch_overlap"]
    assert _at(found, "moe_nextn.py", "self.decoder")["enable_x_batch_overlap"]


def test_a_holders_argument_is_known_only_when_it_is_a_constant() -> None:
    assert [_literal(s) for s in ("0", "True", "-1", "'x'", "None")] == [0, True, -1, "x", None]
    assert all(is_unknown(_literal(s)) for s in ("config", "n - 1", "[1, 2]", "-'x'", "f(", "*a"))


GUARD = (("LayerScatterModes", "init_new"), (("is_layer_sparse", True),))


@pytest.mark.parametrize(
    ("src", "line", "args"),
    [
        # a parameter `__init__` may bind again is not the holder's argument
        (
            "class L:\n"
            "    def __init__(self, config, layer_id, is_nextn=False):\n"
            "        if config.force:\n"
            "            is_nextn = True\n"
            "        self.modes = LayerScatterModes.init_new(is_layer_sparse=is_nextn)\n",
            5,
            (("0", "config"), ("1", "3")),
        ),
        # `a or b` is an operand, not True: (None or 4) - 1 == 3
        (
            "class L:\n"
            "    def __init__(self, config, n=None):\n"
            "        k = (n or 4) - 1\n"
            "        self.modes = LayerScatterModes.init_new(is_layer_sparse=k == 3)\n",
            4,
            (("0", "config"),),
        ),
        # a guard in a function nested in `__init__` gets that function's caller's values
        (
            "class L:\n"
            "    def __init__(self):\n"
            "        def build(sparse=False):\n"
            "            return LayerScatterModes.init_new(is_layer_sparse=sparse)\n"
            "        self.modes = build(sparse=True)\n",
            4,
            (),
        ),
    ],
)
def test_a_holder_reaches_what_its_arguments_do_not_rule_out(
    src: str, line: int, args: tuple[tuple[str, str], ...]
) -> None:
    assert _reached(PyFile(src), [(line, *GUARD)], args)


def test_a_holders_constant_argument_still_rules_a_guard_out() -> None:
    src = (
        "class L:\n"
        "    def __init__(self, config, layer_id, is_nextn=False):\n"
        "        self.modes = LayerScatterModes.init_new(is_layer_sparse=not is_nextn)\n"
    )
    assert not _reached(PyFile(src), [(3, *GUARD)], (("0", "config"), ("is_nextn", "True")))


def test_a_file_s_next_blob_reuses_what_its_unchanged_functions_gave(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The resolver keeps, per file, what each function's block gave (by its text): the
    next blob of a file, its functions moved down by a new one, parses only the new one,
    and resolves as a resolver starting afresh does."""
    files = {**FILES, **SPARSE_FILES}
    path = "python/sglang/srt/quant/fp9.py"
    moved = {**files, path: files[path] + "\n\ndef tail():\n    return get_runner_backend()\n"}
    moved[path] = moved[path].replace("class ", "def head():\n    return 1\n\n\nclass ", 1)
    texts = {f"{p}@1": t for p, t in files.items()} | {f"{path}@2": moved[path]}
    facts = {
        k: scan_structure(t.encode(), sites.scan(t.encode())["reads"]) for k, t in texts.items()
    }
    decided: list[int] = []
    real = carriers.decides_return

    def counting(f: PyFile, d: Any, line: int) -> Any:
        if f.text == moved[path]:
            decided.append(line)
        return real(f, d, line)

    monkeypatch.setattr(carriers, "decides_return", counting)

    def version(resolver: Resolver, new: bool) -> list[dict[str, Any]]:
        shas = {p: f"{p}@{2 if new and p == path else 1}" for p in files}
        return resolver.resolve(
            shas, lambda p: facts[shas[p]], OPTIONS, texts.__getitem__, lambda p: False
        )

    _RECENT.clear()
    kept = Resolver()
    version(kept, new=False)
    first = len(decided)  # (none: the first version asks of the first blob only)
    again = version(kept, new=True)
    reused = len(decided) - first
    _RECENT.clear()
    decided.clear()
    fresh = version(Resolver(), new=True)
    assert again == fresh
    assert _at(fresh, "fp9.py", "return get_runner_backend()")  # the new function's read
    assert reused == 1 < len(decided)  # the new function's read only, of the file's


def test_a_holder_importing_the_class_inside_its_init_is_followed() -> None:
    """`from sglang.srt.models.moe import MoeLayer` inside `__init__` (a vision model
    holding its language model this way) binds the name like a top-level import."""
    lazy = """
class Holder:
    def __init__(self, config):
        from sglang.srt.models.moe import MoeLayer

        self.decoder = MoeLayer(config, 3)
"""
    # the same name imported from two modules is two things: not followed
    twice = lazy.replace(
        "class Holder", "from sglang.srt.models.other import MoeLayer\n\n\nclass Holder"
    )
    files = {
        **GATHER_FILES,
        "python/sglang/srt/models/moe.py": NEXTN_LAYER,
        "python/sglang/srt/models/lazy.py": lazy,
        "python/sglang/srt/models/twice.py": twice,
    }
    found = _resolve(files)
    assert _at(found, "lazy.py", "self.decoder")["enable_x_batch_overlap"][-1] == (
        "self.decoder = MoeLayer(…)"
    )
    assert not _at(found, "twice.py", "self.decoder")
