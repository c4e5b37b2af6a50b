"""SGLang's model registry (`ModelRegistry` of models/registry.py), answered from the
knowledge base rather than interpreted.

When imported, the registry registers the EntryClass of every module of the models package
(`import_model_classes` walks it with pkgutil and importlib: not something a static reading
follows). The knowledge base records each version's model files and their EntryClass names
(the ModelFile table), which is what the registry holds, provided each of those modules
imports on the server: the answer states that assumption (as it states that a Hub model
has no file besides config.json), without making what follows from it conditional.
`resolve_model_cls` returns the class of the first architecture registered; with none
registered, SGLang falls back to its Transformers backend, which is not followed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from kb.explain.abstract_values import ClassRef
from kb.explain.classes import class_ref
from kb.explain.frames import Ctx, Frame
from kb.explain.predicates import unknown

Simulator = Any  # kb.explain.simulate.Simulator (which imports this module)

REGISTRY = ("sglang.srt.models.registry", "ModelRegistry")
ASSUMPTION = "model-registry"


@dataclass(frozen=True)
class ModelRegistry:
    """The registry of a version: architecture -> the model file defining its class."""

    files: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, files: dict[str, str]) -> ModelRegistry:
        return cls(tuple(sorted(files.items())))


def call(sim: Simulator, registry: ModelRegistry, name: str, args: list[Any]) -> Any:
    """`ModelRegistry.<name>(*args)`: the supported architectures, or an architecture's
    class; anything else unknown."""
    files = dict(registry.files)
    sim.result.assumptions[ASSUMPTION] = (
        "every model file of the version imports on the server (the model registry holds "
        "the EntryClass of each)"
    )
    if name == "get_supported_archs":
        return sorted(files)
    if name == "resolve_model_cls" and args:
        archs = [args[0]] if isinstance(args[0], str) else args[0]
        if isinstance(archs, list | tuple) and all(isinstance(a, str) for a in archs):
            for arch in archs:
                if arch in files:
                    found = architecture_class(sim, files[arch], arch)
                    if found is not None:
                        return (found, arch)
                    return unknown(f"the class of {arch} (its model file is not held here)")
            return unknown("the Transformers backend's class for the model (not followed)")
    return unknown(f"what ModelRegistry.{name}() returns")


def architecture_class(sim: Simulator, path: str | None, arch: str | None) -> ClassRef | None:
    """The class named `arch` in the stored model file `path` (its EntryClass), or one it
    imports under that name from another model file."""
    if path is None or arch is None:
        return None
    mod = sim.modules(path)
    if mod is None:
        return None
    if arch in mod.classes:
        return class_ref(mod, arch)
    found = sim.eval(ast.Name(arch, ast.Load()), Frame(mod, "<module>", {}), Ctx())
    return found if isinstance(found, ClassRef) else None
