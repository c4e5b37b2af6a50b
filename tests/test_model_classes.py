"""The model-class index (ingest/model_classes.py) on small made-up sources: what `ast` says
of each top-level class, and the relations the walk follows between classes."""

from __future__ import annotations

import gc
import textwrap
import weakref

from ingest.model_classes import (
    ClassIndex,
    ModelClasses,
    call_args,
    loader_of,
    relations,
)

SOURCE = textwrap.dedent(
    '''\
    import torch
    from sglang.srt.models import qwen2_moe
    from sglang.srt.models.qwen2_moe import Qwen2MoeModel

    LIMIT = 4
    checked: bool = True


    def make_layers(n, build):
        return [build(i) for i in range(n)]


    class Base(torch.nn.Module):
        """A class line in a docstring:
    class NotAClass:
        """

        class Config:  # a nested class: its methods are not Base's
            def __init__(self):
                self.inner = Qwen2MoeModel()

        @torch.no_grad()
        def forward(self, x):
            return self.helper(x)

        async def serve(self):
            pass

        def helper(self, x):
            return x

        def __init__(self, config):
            super().__init__()
            self.model: Qwen2MoeModel = Qwen2MoeModel(config).to("cuda")
            self.layers = make_layers(3, lambda i: Qwen2MoeModel(config, i))
            self.a = self.b = Qwen2MoeModel(config)
            self.c, self.d = Qwen2MoeModel(config), None
            self.e = self._build(config)
            # self.f = Qwen2MoeModel(config): a comment holds nothing
            layer = Qwen2MoeModel(config)

        def load_weights(self, weights):
            self.model.load_weights(weights)
            self._quantize()

        def _quantize(self):
            pass

        def _build(self, config):
            if config.big:
                return qwen2_moe.Qwen2MoeModel(config, big=True)
            return qwen2_moe.Qwen2MoeModel(config)


    # a comment at the first column: still Base's block
    class Derived(Base, qwen2_moe.Qwen2MoeModel, metaclass=type):
        def forward(self, x):
            return super(Derived, self).forward(x)

        def helper(self, x):
            return 2 * x
    '''
)


def test_classes_bases_and_methods_come_from_the_parse() -> None:
    index = ClassIndex(SOURCE)
    (base,), (derived,) = index.named("Base"), index.named("Derived")
    # (the docstring's first-column `class` line cuts nothing: the file's parse places it)
    assert (base.line, derived.line) == (13, 56)
    assert base.last == 55  # up to the next top-level statement, comments included
    assert not index.named("NotAClass") and not index.named("Config")
    assert base.bases == ("torch.nn.Module",)
    assert derived.bases == ("Base", "qwen2_moe.Qwen2MoeModel")
    # the def lines (a decorated method's too), async ones included, nested ones not
    assert [(base.line + no - 1, name) for no, name in base.methods] == [
        (23, "forward"),
        (26, "serve"),
        (29, "helper"),
        (32, "__init__"),
        (42, "load_weights"),
        (46, "_quantize"),
        (49, "_build"),
    ]
    assert index.at(31) is base and index.at(55) is base and index.at(56) is derived
    assert index.at(12) is None
    assert base.text_of(13) == "class Base(torch.nn.Module):"
    assert base.text_of(34).startswith("self.model: Qwen2MoeModel")


def test_what_a_class_calls_on_itself_its_base_and_what_it_holds() -> None:
    (base,) = ClassIndex(SOURCE).named("Base")
    assert base.calls("forward", "helper") and base.calls("load_weights", "_quantize")
    assert not base.calls("helper", "forward") and not base.calls("serve", "helper")
    # (a comment naming a call is no call)
    assert not base.calls("__init__", "_quantize")
    assert base.loaders_run_on("model") == {"load_weights"}
    assert base.loaders_run_on("layers") == frozenset()
    # `super().__init__()` is called: it does not replace its base's `__init__`
    assert "__init__" not in base.replaced and "forward" in base.replaced
    assert base.init_assign("_build") == ("e", True)
    assert base.init_assign("_other") == (None, True)
    (derived,) = ClassIndex(SOURCE).named("Derived")
    assert derived.replaced == {"helper"}  # `super(Derived, self).forward(x)`
    assert derived.init_assign("_build") == (None, True)  # no `__init__`: its base's runs


def test_instances_held_in_init() -> None:
    (base,) = ClassIndex(SOURCE).named("Base")
    held = [(b.line + 12, b.attr, b.direct) for b in base.held("Qwen2MoeModel")]
    assert sorted(held) == [
        (34, "model", True),  # led by the call: `X(...).to(...)`
        (35, "layers", False),  # inside make_layers(lambda ...)
        (36, "a", False),  # two targets
        (37, "c", False),  # a tuple
    ]
    assert [b.attr for b in base.held("make_layers")] == ["layers"]
    model = next(b for b in base.held("Qwen2MoeModel") if b.attr == "model")
    assert base.source(model.span) == "Qwen2MoeModel(config)"
    assert base.held("Config") == []  # a nested class's `__init__` is not its own


def test_factories_return_one_class_from_every_return() -> None:
    (base,) = ClassIndex(SOURCE).named("Base")
    made = base.made("qwen2_moe.Qwen2MoeModel")
    assert [(b.attr, b.line + 12) for b in made] == [("_build", 51), ("_build", 52)]
    source = base.source(made[0].span)
    assert source == "qwen2_moe.Qwen2MoeModel(config, big=True)"
    assert call_args(source) == (("0", "config"), ("big", "True"))
    assert call_args("X(*a, k=1, **kw)") == (("0", "*a"), ("k", "1"), ("*", "kw"), ("*", ""))
    mixed = "class M:\n    def make(self, c):\n        if c:\n            return A(c)\n"
    mixed += "        return B(c)\n"
    assert ClassIndex(mixed).named("M")[0].made("A") == []
    long = "class L:\n    def make(self, c):\n" + "        c += 1\n" * 40 + "        return A(c)\n"
    assert ClassIndex(long).named("L")[0].made("A") == []


def test_relations_of_a_file_to_a_class() -> None:
    index = ClassIndex(SOURCE)
    rels = relations(index, "Qwen2MoeModel", "Qwen2MoeModel", local=False)
    assert [(r.kind, r.line, r.name, r.link, r.via) for r in rels] == [
        ("hold", 34, "Base", "self.model = Qwen2MoeModel(…)", "__init__"),
        ("hold", 35, "Base", "self.layers = …Qwen2MoeModel(…)", "__init__"),
        ("hold", 36, "Base", "self.a = …Qwen2MoeModel(…)", "__init__"),
        ("hold", 37, "Base", "self.c = …Qwen2MoeModel(…)", "__init__"),
    ]
    assert rels[0].methods == {"load_weights"} and rels[0].text.startswith("self.model:")
    assert [r.args for r in rels] == [(("0", "config"),), (("0", "config"), ("1", "i"))] + [
        (("0", "config"),)
    ] * 2
    dotted = relations(index, "qwen2_moe.Qwen2MoeModel", "Qwen2MoeModel", local=False)
    assert [(r.kind, r.line, r.name, r.link, r.via) for r in dotted] == [
        ("inherit", 56, "Derived", "Qwen2MoeModel", "__init__"),
        ("make", 51, "Base", "self._build(…) → Qwen2MoeModel(…)", "_build"),
        ("make", 52, "Base", "self._build(…) → Qwen2MoeModel(…)", "_build"),
    ]
    assert dotted[0].methods == {"helper"}
    # a name the file defines itself is another thing: not followed
    assert relations(index, "LIMIT", "LIMIT", local=False) == []


def test_top_level_definitions() -> None:
    index = ClassIndex(SOURCE)
    assert all(index.defines(n) for n in ("LIMIT", "checked", "make_layers", "Base"))
    assert not any(index.defines(n) for n in ("torch", "Qwen2MoeModel", "Config", "layer"))
    assert not ClassIndex("X == 1\nX.y = 2\nX[0] = 3\n").defines("X")


def test_a_class_or_member_that_does_not_parse() -> None:
    broken = "class Broken(Base:\n    pass\n\n\nclass Fine(Base):\n    def f(self:\n        pass\n"
    broken += "\n    def g(self):\n        return self.h()\n"
    index = ClassIndex(broken)
    assert not index.named("Broken") and index.at(2) is None
    (fine,) = index.named("Fine")
    assert fine.bases == ("Base",) and [name for _l, name in fine.methods] == ["f", "g"]
    assert fine.calls("g", "h") and not fine.calls("f", "h")  # `f` says nothing


def test_a_string_at_the_first_column_or_the_body_s_indentation_cuts_nothing() -> None:
    text = (
        'class Prompt(Base):\n    TEXT = """\nfirst column\n"""\n\n    def f(self):\n        pass\n'
    )
    (c,) = ClassIndex(text).named("Prompt")
    assert c.bases == ("Base",) and c.methods == [(6, "f")] and c.last == 8
    text = 'class Prompt(Base):\n    def f(self):\n        """Doc\n    def g(self):\n        """\n'
    text += "        return self.h()\n"
    (c,) = ClassIndex(text).named("Prompt")
    assert c.methods == [(2, "f")] and c.calls("f", "h")


def test_a_header_over_several_lines_is_parsed_with_its_class() -> None:
    text = "class Long(\n    Base,\n    Mixin,\n):\n    def __init__(self):\n"
    text += "        self.m = Model()\n"
    (c,) = ClassIndex(text).named("Long")
    assert c.bases == ("Base", "Mixin") and [b.attr for b in c.held("Model")] == ["m"]


def test_a_helper_called_only_by_the_weight_loader_runs_in_it() -> None:
    text = """\
class M:
    def forward(self, x):
        return self.helper(x)

    def load_weights(self, weights):
        self._quantize()
        self._fix()

    def _quantize(self):
        self._fix()

    def _fix(self):
        pass

    def helper(self, x):
        return x
"""
    (c,) = ClassIndex(text).named("M")
    assert loader_of(c, "_fix") == "load_weights"
    assert loader_of(c, "helper") is None
    assert loader_of(c, "forward") is None  # called by nothing


HOLDERS = """\
from sglang.srt.models.m import Base


class Runs:
    def __init__(self, config):
        self.base = Base(config)

    def load_weights(self, weights):
        self.base.load_weights(weights)


class Builds:
    def __init__(self, config):
        self.base = Base(config)
"""


class _Graph:
    """The resolver's side: two model files, the second importing Base from the first."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.bound: dict = {}

    def importers(self, target: tuple[str, str]) -> list[tuple[str, str]]:
        found = target == ("sglang.srt.models.m", "Base")
        return [("python/sglang/srt/models/h.py", "Base")] if found else []

    def module(self, path: str) -> str:
        return path.removeprefix("python/").removesuffix(".py").replace("/", ".")

    def holder_reaches(self, *args: object) -> bool:
        return True


def test_the_walk_cites_a_holder_that_runs_the_method_holding_the_use() -> None:
    """A use in Base._quantize, which only the weight loader calls: Derived (same file)
    inherits it, uncited; of the two holders in another file, the one calling the held
    instance's loader is cited through it, the other not."""
    m, h = "python/sglang/srt/models/m.py", "python/sglang/srt/models/h.py"
    graph = _Graph({m: "m", h: "h"})
    texts = {"m": SOURCE, "h": HOLDERS}
    site = {"dest": "x", "path": m, "line": 47, "text": "", "via": ["F"], "rank": (0, 1)}
    sites = {("x", m, 47, ""): site}
    models = ModelClasses(graph)
    assert models._class_method("m", 47, texts.__getitem__) == ("Base", "load_weights")
    assert models._class_method("m", 24, texts.__getitem__) == ("Base", "forward")
    assert models._class_method("m", 10, texts.__getitem__) is None
    models.inherit(graph.files, texts.__getitem__, sites)
    # (a resolver's site is keyed by entry "", a holder's by the entry point of its chain)
    assert sorted(sites) == [("x", h, 6, "F"), ("x", m, 47, "")]
    assert sites[("x", h, 6, "F")]["via"] == ["F", "self.base = Base(…)"]
    assert sites[("x", h, 6, "F")]["text"] == "self.base = Base(config)"


def test_a_class_read_is_freed_with_its_index_without_the_cyclic_collector() -> None:
    """The ingest runs the cyclic collector seldom (and freezes what lives): a reference
    cycle through a class (to its index, or a nested function calling itself) would keep
    its members' texts for the whole run."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        index = ClassIndex(SOURCE)
        (base,) = index.named("Base")
        assert loader_of(base, "_quantize") == "load_weights" and base.replaced
        relations(index, "Qwen2MoeModel", "Qwen2MoeModel", local=False)
        gone = weakref.ref(base)
        del base, index
        assert gone() is None
    finally:
        if enabled:
            gc.enable()
