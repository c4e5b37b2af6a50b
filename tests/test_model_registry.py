"""The model registry answered from the knowledge base's model files
(kb/explain/model_registry.py), and the pure calls SGLang's loader code makes on the names
it resolves (kb/explain/pure_calls.py: `re.fullmatch` on ModelOpt's exclude globs,
`str.rsplit(..., maxsplit=1)`, `dict.fromkeys`), on synthetic modules shaped like SGLang's.
"""

from __future__ import annotations

import ast
from typing import Any

from kb.explain import derived, pure_calls
from kb.explain.abstract_values import ClassRef, Obj
from kb.explain.frames import Ctx, Frame
from kb.explain.model_registry import ModelRegistry
from kb.explain.predicates import Profile, Unknown
from kb.explain.simulate import Simulator
from kb.explain.source_modules import Module
from tests import sim_repos

SRT = "python/sglang/srt/"
ARGS = SRT + "server_args.py"
MODEL = SRT + "models/toy.py"
LOADER_UTILS = SRT + "model_loader/utils.py"

FILES = {
    ARGS: """
        from dataclasses import dataclass


        @dataclass
        class ServerArgs:
            model_path: str

            def __post_init__(self):
                pass
        """,
    # the registry fills itself by importing every model module: not followed statically
    SRT + "models/registry.py": """
        import importlib
        import pkgutil
        from dataclasses import dataclass, field


        @dataclass
        class _ModelRegistry:
            models: dict = field(default_factory=dict)

            def resolve_model_cls(self, architectures):
                for arch in architectures:
                    if arch in self.models:
                        return (self.models[arch], arch)
                raise ValueError(f"Model architectures {architectures} are not supported")


        def import_model_classes(package_name):
            classes = {}
            for info in pkgutil.iter_modules(importlib.import_module(package_name).__path__):
                module = importlib.import_module(f"{package_name}.{info.name}")
                for cls in module.EntryClass:
                    classes[cls.__name__] = cls
            return classes


        ModelRegistry = _ModelRegistry(import_model_classes("sglang.srt.models"))
        """,
    MODEL: """
        import torch


        class ToyForCausalLM(torch.nn.Module):
            packed_modules_mapping = {"qkv_proj": ["q_proj", "k_proj", "v_proj"]}


        EntryClass = ToyForCausalLM
        """,
    # a package re-exporting (`from .entrypoint import *`) a value its configurer computed
    # when imported, read by an importer of the package as a module
    SRT + "layers/gemm_flags/__init__.py": """
        from .entrypoint import *
        """,
    SRT + "layers/gemm_flags/entrypoint.py": """
        from sglang.srt.layers.gemm_flags.configurer import ENABLED
        """,
    SRT + "layers/gemm_flags/configurer.py": """
        from sglang.srt.utils import get_bool_env_var


        def _compute():
            return get_bool_env_var("SGL_ENABLE_GEMM_FLAG", default="false")


        def _compute_on():
            return get_bool_env_var("SGL_ENABLE_GEMM_FLAG", default="true")


        ENABLED = _compute()
        ON_BY_DEFAULT = _compute_on()
        """,
    LOADER_UTILS: """
        import re
        from contextlib import suppress
        from typing import cast

        from sglang.srt.layers import gemm_flags

        from sglang.srt.models.registry import ModelRegistry


        def get_model_architecture(architectures):
            return ModelRegistry.resolve_model_cls(architectures)


        def mapping(architectures):
            model_class, _ = get_model_architecture(architectures)
            return getattr(model_class, "packed_modules_mapping", {})


        def mapper(architectures):
            model_class, _ = get_model_architecture(architectures)
            return getattr(model_class, "hf_to_sglang_mapper", None)


        def excluded(prefix, patterns):
            for pattern in patterns:
                regex = pattern.replace(".", r"\\.").replace("*", r".*")
                if re.fullmatch(regex, prefix):
                    return True
                if pattern.rsplit(".", maxsplit=1)[-1] in prefix.rsplit(".", maxsplit=1)[-1]:
                    return True
            return False


        def unique(names):
            return list(dict.fromkeys(names))


        def as_list(value):
            return cast(list, value)


        # compressed-tensors' shapes: a nested dict filled item by item, dict keys less a
        # set, a lookup whose ValueError is suppressed, next() of a generator expression
        def scheme_map(groups):
            out = {}
            for group in groups.values():
                for target in group["targets"]:
                    out[target] = {}
                    out[target]["weights"] = group["weights"]
            return out


        def matched(name, targets):
            for target in targets:
                if target == name:
                    return target
            raise ValueError("no target matches")


        def sparse_target(name, schemes, ignored):
            targets = schemes.keys() - set(ignored)
            found = None
            with suppress(ValueError):
                found = matched(name, targets)
            return found


        def fused_key(name, mapping):
            return next((key for key in mapping if name.endswith(key)), None)


        _UNSET = object()
        _OTHER = object()


        def is_unset(value):
            return value is _UNSET


        def unset():
            return _UNSET


        def gemm_enabled():
            return not not gemm_flags.ENABLED


        def gemm_on_by_default():
            return not not gemm_flags.ON_BY_DEFAULT
        """,
}


def simulator(registered: bool = True) -> tuple[Simulator, dict[str, Module]]:
    mods = sim_repos.parsed_modules(FILES)
    sim = Simulator(mods.get, mods[ARGS], {"model_path": "m"}, Profile())
    sim.run()
    if registered:
        sim.models = ModelRegistry.of({"ToyForCausalLM": MODEL})
    return sim, mods


def evaluate(sim: Simulator, mod: Module, source: str) -> Any:
    return sim.eval(ast.parse(source, mode="eval").body, Frame(mod, "<test>", {}), Ctx())


def test_the_registry_resolves_an_architecture_to_its_model_class() -> None:
    sim, mods = simulator()
    utils = mods[LOADER_UTILS]
    cls, arch = evaluate(sim, utils, "get_model_architecture(['ToyForCausalLM'])")
    assert isinstance(cls, ClassRef) and (cls.path, cls.name, arch) == (
        MODEL,
        "ToyForCausalLM",
        "ToyForCausalLM",
    )
    assert evaluate(sim, utils, "mapping(['ToyForCausalLM'])") == {
        "qkv_proj": ["q_proj", "k_proj", "v_proj"]
    }
    # nn.Module defines no such attribute: the default, not unknown
    assert evaluate(sim, utils, "mapper(['ToyForCausalLM'])") is None
    assert "model registry" in " ".join(sim.result.assumptions.values())
    # an architecture no model file registers: the Transformers fallback, not followed
    assert isinstance(evaluate(sim, utils, "get_model_architecture(['Other'])"), Unknown)


def test_without_the_version_s_model_files_the_registry_is_unknown() -> None:
    sim, mods = simulator(registered=False)
    found = evaluate(sim, mods[LOADER_UTILS], "mapping(['ToyForCausalLM'])")
    assert isinstance(found, Unknown)


def test_exclude_globs_are_matched_as_sglang_matches_them() -> None:
    sim, mods = simulator()
    utils = mods[LOADER_UTILS]
    assert evaluate(sim, utils, "excluded('model.layers.3.mlp.experts', ['lm_head'])") is False
    assert evaluate(sim, utils, "excluded('mtp_layers.0', ['mtp*'])") is True
    assert evaluate(sim, utils, "excluded('model.layers.0.self_attn.q_a_proj', ['*q_a_proj'])")
    assert evaluate(sim, utils, "unique(['a', 'b', 'a'])") == ["a", "b"]


def test_a_pattern_that_may_backtrack_for_long_is_not_matched() -> None:
    assert isinstance(pure_calls.regex("fullmatch", ["(a+)+$", "a" * 30 + "b"], {}), Unknown)
    assert isinstance(pure_calls.regex("fullmatch", ["a*" * 10, "a" * 30], {}), Unknown)
    assert isinstance(pure_calls.regex("fullmatch", ["x", "y" * 10_000], {}), Unknown)
    assert isinstance(pure_calls.regex("fullmatch", ["(", "y"], {}), Unknown)  # no compile
    assert isinstance(pure_calls.regex("sub", ["a", "b"], {}), Unknown)
    assert pure_calls.regex("match", ["a.*", "abc"], {}) is not None
    assert pure_calls.regex("search", ["z", "abc"], {}) is None


def test_methods_take_their_keywords() -> None:
    assert pure_calls.method("a.b.c", "rsplit", ["."], {"maxsplit": 1}) == ["a.b", "c"]
    assert pure_calls.method("a.b.c", "rsplit", ["."], {}) == ["a", "b", "c"]
    assert pure_calls.method({"k": 1}, "get", ["k"], {}) == 1
    assert pure_calls.method("abc", "encode", [], {}) is pure_calls.NOT_PURE


def test_typing_cast_is_its_value_and_dict_builds_on_known_values() -> None:
    sim, mods = simulator()
    frame_mod = mods[LOADER_UTILS]
    assert evaluate(sim, frame_mod, "dict(a=1, **{'b': 2})") == {"a": 1, "b": 2}
    assert evaluate(sim, frame_mod, "dict([('a', 1)])") == {"a": 1}
    assert evaluate(sim, frame_mod, "as_list([3])") == [3]


def test_compressed_tensors_shapes_are_followed_on_known_values() -> None:
    sim, mods = simulator()
    sim.derive = derived  # (comprehensions, as explain's runs have them)
    utils = mods[LOADER_UTILS]
    groups = "{'g': {'targets': ['Linear'], 'weights': 4}}"
    # the inner dict of a nested store holds its item (it read as {} before)
    assert evaluate(sim, utils, f"scheme_map({groups})") == {"Linear": {"weights": 4}}
    # keys less a set is a set; a ValueError raised under suppress() is no raise
    assert evaluate(sim, utils, "sparse_target('x', {'x': 1, 'y': 2}, ['y'])") == "x"
    assert evaluate(sim, utils, "sparse_target('x', {}, [])") is None
    assert [c for c in sim.result.checks if c.outcome == "fired"] == []
    assert evaluate(sim, utils, "fused_key('a.qkv_proj', {'qkv_proj': 1})") == "qkv_proj"
    assert evaluate(sim, utils, "fused_key('a.o_proj', {'qkv_proj': 1})") is None


def test_a_sentinel_is_only_itself_and_the_text_config_is_the_config() -> None:
    sim, mods = simulator()
    utils = mods[LOADER_UTILS]
    assert evaluate(sim, utils, "is_unset(unset())") is True
    assert evaluate(sim, utils, "is_unset(_OTHER)") is False
    assert evaluate(sim, utils, "is_unset(None)") is False
    frame = Frame(utils, "<test>", {"config": Obj("hf_config")})
    text = sim.eval(ast.parse("config.get_text_config()", mode="eval").body, frame, Ctx())
    assert text == Obj("hf_config")


def test_a_package_s_value_computed_at_import_is_read_through_its_star_import() -> None:
    # (an unresolved name read as true made `if not gemm_flags.ENABLED: raise` pass)
    sim, mods = simulator()
    assert evaluate(sim, mods[LOADER_UTILS], "gemm_enabled()") is False
    # an environment variable not set reads as the default the call passes by keyword
    assert evaluate(sim, mods[LOADER_UTILS], "gemm_on_by_default()") is True
    configurer = mods[SRT + "layers/gemm_flags/configurer.py"]
    assert evaluate(sim, configurer, "get_bool_env_var('SGL_X', default='true')") is True
    assert evaluate(sim, configurer, "get_bool_env_var('SGL_X')") is False
