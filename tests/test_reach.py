"""Past the first hop: indirect reads with their chains, model files, a backend value's
requirements and side effects, comparing values, and the extraction report (synthetic repo)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from tests.conftest import ingest_into
from tests.reach_fixtures import HOLDING_MODELS, build_reach_repo

V = "/api/v/v0.4.0"
BEFORE_HOLDING = {"alpha_moe", "beta", "gamma", "delta", "epsilon", "eta", "zeta", "theta"}
LBO = [
    "IS_LBO_ENABLED",
    "is_lbo_enabled()",
    "LboFlags.overlap_down()",
    "LboFlags.fuse_inside_lbo()",
]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    root = tmp_path_factory.mktemp("reach")
    db = root / "kb.db"
    ingest_into(build_reach_repo(root), db, jobs=1)
    return TestClient(create_app(f"sqlite:///{db}"), follow_redirects=False)


def get(client: TestClient, url: str, status: int = 200) -> Any:
    response = client.get(url)
    assert response.status_code == status, (url, response.text[:500])
    return response.json()


def test_models_of_a_flag_with_their_chains(client: TestClient) -> None:
    dbo = get(client, f"{V}/flags/--enable-dual-batch-overlap")
    models = {m["name"]: m["via"] for m in dbo["models"]}
    # beta imports an unrelated helper, gamma shadows the accessor with its own: neither uses
    # it. epsilon inherits alpha's forward, eta inherits epsilon, theta overrides it calling
    # super().forward(); zeta overrides it without: not a user.
    alpha = ["IS_DBO_ENABLED", "is_dbo_enabled()", "model_forward_maybe_dbo"]
    assert {k: v for k, v in models.items() if k in BEFORE_HOLDING} == {
        "alpha_moe": alpha,
        "epsilon": [*alpha, "AlphaMoeForCausalLM"],
        "eta": [*alpha, "AlphaMoeForCausalLM", "EpsilonMoeForCausalLM"],
        "theta": [*alpha, "AlphaMoeForCausalLM"],
    }
    # mu's holder name is imported from two places, nu replaces the draft model's
    # `__init__` (and builds alpha outside one), pi also assigns the module's name, rho
    # holds kappa's model (a third step into another file): no user (sigma, upsilon, chi,
    # psi, omni*: below).
    assert set(models) - BEFORE_HOLDING == {
        "alpha_nextn", "iota", "kappa", "xi", "omicron", "sigma", "upsilon", "omega", "chi",
        "psi", "omni4", "omni4_vl",
    }  # fmt: skip
    epsilon = next(m for m in dbo["models"] if m["name"] == "epsilon")
    assert epsilon["site"]["line"] == 4 and not epsilon["direct"]
    # held (`self.model = ...`), in a lambda of layers, then by a wrapper of that model in
    # the same file and by a file holding the wrapper; the base named through its module
    assert models["alpha_nextn"] == [*alpha, "self.model = AlphaMoeForCausalLM(…)"]
    iota = [*alpha, "self.layers = …AlphaMoeForCausalLM(…)"]
    assert models["iota"] == iota
    assert models["kappa"] == [
        *iota,
        "self.model = IotaModel(…)",
        "self.language_model = IotaForCausalLM(…)",
    ]
    assert models["xi"] == models["omicron"] == [*alpha, "AlphaMoeForCausalLM"]
    lbo = get(client, f"{V}/flags/--enable-lone-batch-overlap")
    assert {m["name"]: m["via"] for m in lbo["models"]}["delta"] == LBO


def test_methods_holding_the_uses_are_per_flag(client: TestClient) -> None:
    # SigmaForCausalLM holds dbo's model in __init__ and inherits lbo's `load`; tau derives
    # from its subclass and replaces __init__ without super(): lbo only; upsilon calls it.
    dbo = get(client, f"{V}/flags/--enable-dual-batch-overlap")
    lbo = get(client, f"{V}/flags/--enable-lone-batch-overlap")
    dbo_models = {m["name"]: m["via"] for m in dbo["models"]}
    lbo_models = {m["name"]: m["via"] for m in lbo["models"]}
    alpha = ["IS_DBO_ENABLED", "is_dbo_enabled()", "model_forward_maybe_dbo"]
    held = [*alpha, "self.model = SigmaModel(…)", "SigmaForCausalLM", "SigmaV3ForCausalLM"]
    # omega calls it as `super(OmegaForCausalLM, self).__init__(config)`.
    assert "tau" not in dbo_models and dbo_models["upsilon"] == dbo_models["omega"] == held
    loaded = [*LBO, "SigmaLoaderMixin", "SigmaForCausalLM", "SigmaV3ForCausalLM"]
    assert lbo_models["tau"] == lbo_models["upsilon"] == lbo_models["omega"] == loaded
    # lam reads lbo in load_weights: lam_vl holds it but loads the weights itself.
    assert set(lbo_models) == {
        "delta", "sigma", "tau", "upsilon", "omega", "lam", "lam_delegate", "kai", "kai_vl",
        "kai_delegate", "omni", "omni3",
    }  # fmt: skip
    assert lbo_models["lam_delegate"][-1] == "self.language_model = LamForCausalLM(…)"
    assert not [u for u in dbo["indirect_usages"] if u["path"].endswith("/tau.py")]
    # ChiForCausalLM uses dbo in `capture` and inherits ChiBase's `forward`: psi replaces
    # `capture` only, so it still gets dbo through the base's method, cited through it (not
    # through `capture`'s shorter chain, which psi replaces).
    assert dbo_models["psi"] == [*alpha, "ChiBase", "ChiForCausalLM"]


def test_a_holder_is_cited_through_a_method_it_runs(client: TestClient) -> None:
    """KaiForCausalLM reaches lbo through its loader mixin (a helper only `do_load_weights`
    calls: the shorter chain) and through the MoE its `__init__` builds. kai_vl loads the
    weights itself: its chain is the MoE's (it was the loader's, the shortest); kai_delegate
    calls the held model's `load_weights`: the loader's chain is a way that runs there."""
    lbo = get(client, f"{V}/flags/--enable-lone-batch-overlap")
    models = {m["name"]: m["via"] for m in lbo["models"]}
    built = [
        *LBO,
        "self.mlp = KaiMoE(…)",
        "self.layer = KaiDecoderLayer(…)",
        "self.model = KaiModel(…)",
    ]
    assert models["kai_vl"] == [*built, "self.language_model = KaiForCausalLM(…)"]
    # (the loader's helper returns what the flag decides: itself a carrier, as its caller)
    assert models["kai_delegate"] == [
        "IS_LBO_ENABLED",
        "is_lbo_enabled()",
        "KaiLoaderMixin._maybe_cast_weights()",
        "KaiLoaderMixin.do_load_weights()",
        "self.language_model = KaiForCausalLM(…)",
    ]
    # the file itself reads it in the mixin's helper: its own shortest chain
    assert models["kai"] == ["IS_LBO_ENABLED", "is_lbo_enabled()"]


def test_a_model_built_by_a_factory_method_is_held(client: TestClient) -> None:
    """`self.model = self._init_model(...)` in an `__init__` holds what the factory the
    concrete class resolves returns: Omni4ForCausalLM's own `_init_model` (Omni4Model, dbo),
    called by its base's `__init__` in another file, so omni4_vl holding Omni4ForCausalLM
    gets dbo; OmniForCausalLM's own returns OmniModel (lbo): omni3 inherits it, omni4
    overrides the factory (no lbo); omni5's returns one of two classes: not followed;
    omni_mtp replaces `__init__` without `super()`: it never calls the factory (no lbo)."""
    dbo = get(client, f"{V}/flags/--enable-dual-batch-overlap")
    lbo = get(client, f"{V}/flags/--enable-lone-batch-overlap")
    dbo_models = {m["name"]: m for m in dbo["models"]}
    lbo_models = {m["name"]: m for m in lbo["models"]}
    alpha = ["IS_DBO_ENABLED", "is_dbo_enabled()", "model_forward_maybe_dbo"]
    assert dbo_models["omni4_vl"]["via"] == [
        *alpha,
        "self.model = self._init_model(…) → Omni4Model(…)",
        "self.language_model = Omni4ForCausalLM(…)",
    ]
    assert dbo_models["omni4_vl"]["site"]["line"] == 7  # the holding line
    assert dbo_models["omni4"]["via"] == alpha  # its own model's use
    held = [*LBO, "self.model = self._init_model(…) → OmniModel(…)", "OmniForCausalLM"]
    assert lbo_models["omni3"]["via"] == held
    assert "omni4" not in lbo_models and "omni5" not in lbo_models | dbo_models
    assert "omni_mtp" not in lbo_models


def test_name_based_steps_are_marked(client: TestClient) -> None:
    """`model_forward_maybe_dbo` is followed because its name spells dbo, not through a call
    or an import: its step says so (`by_name`) in the JSON, and the pages show it apart."""
    dbo = get(client, f"{V}/flags/--enable-dual-batch-overlap")
    alpha = next(m for m in dbo["models"] if m["name"] == "epsilon")
    assert alpha["steps"] == [
        {"name": "IS_DBO_ENABLED", "by_name": False},
        {"name": "is_dbo_enabled()", "by_name": False},
        {"name": "model_forward_maybe_dbo", "by_name": True},
        {"name": "AlphaMoeForCausalLM", "by_name": False},
    ]
    for u in dbo["indirect_usages"]:
        assert [s["name"] for s in u["steps"]] == u["via"]
        # DboGraphPlugin, named for dbo too, reads is_dbo_enabled() itself: a real step
        assert [s["by_name"] for s in u["steps"]] == [
            s == "model_forward_maybe_dbo" for s in u["via"]
        ]
    plugin = [u for u in dbo["indirect_usages"] if u["via"][-1:] == ["DboGraphPlugin"]]
    assert plugin and plugin[0]["path"].endswith("dbo_runner.py")
    page = client.get("/v/v0.4.0/flags/--enable-dual-batch-overlap").text
    named = "<code>model_forward_maybe_dbo</code> <i>named like the feature</i></span>"
    for section in ("indirect", "models"):
        part = page.split(f'id="{section}"', 1)[1].split("</section>", 1)[0]
        assert named in part and 'class="by-name" title="Named like the feature' in part
        assert "<code>is_dbo_enabled()</code> <i>" not in part  # code steps are not marked
    model = get(client, f"{V}/models/alpha_moe")
    steps = model["flags"][0]["indirect"][0]["steps"]
    assert steps[-1] == {"name": "model_forward_maybe_dbo", "by_name": True}
    assert named in client.get("/v/v0.4.0/models/alpha_moe").text


def test_a_property_carrier_is_shown_without_parentheses(client: TestClient) -> None:
    dbo = get(client, f"{V}/flags/--enable-dual-batch-overlap")
    fp4 = [(u["line"], u["via"]) for u in dbo["indirect_usages"] if u["path"].endswith("/fp4.py")]
    assert (10, ["IS_DBO_ENABLED", "is_dbo_enabled()", "Fp4MoEMethod.overlap_on"]) in fp4
    hits = get(client, "/api/search?q=overlap_on&version=v0.4.0")["results"]
    assert (hits[0]["kind"], hits[0]["name"]) == ("carrier", "Fp4MoEMethod.overlap_on")


def test_holding_and_module_bases_are_cited_where_they_are(client: TestClient) -> None:
    dbo = get(client, f"{V}/flags/--enable-dual-batch-overlap")
    sites = {m["name"]: (m["site"]["line"], m["direct"]) for m in dbo["models"]}
    # the assignment's line (the first of a multi-line one), the class line
    assert sites["alpha_nextn"] == (7, False) and sites["iota"] == (7, False)
    assert sites["kappa"] == (7, False) and sites["xi"] == (4, False)
    iota = [
        (u["line"], u["text"]) for u in dbo["indirect_usages"] if u["path"].endswith("/iota.py")
    ]
    # IotaForCausalLM holding IotaModel is a step inside the file: no second site there
    assert iota == [(7, "self.layers, self.start_layer, self.end_layer = make_layers(")]


def test_a_comment_naming_a_class_holds_nothing(client: TestClient) -> None:
    # `# ... AlphaMoeForCausalLM load_weights()` after `self.config = config` in __init__
    dbo = get(client, f"{V}/flags/--enable-dual-batch-overlap")
    assert "phi" not in {m["name"] for m in dbo["models"]}
    assert not [u for u in dbo["indirect_usages"] if u["path"].endswith("/phi.py")]


def test_indirect_usages_are_apart_from_direct_reads(client: TestClient) -> None:
    dbo = get(client, f"{V}/flags/--enable-dual-batch-overlap")
    assert [(u["path"], u["line"]) for u in dbo["usages"]] == [
        ("python/sglang/srt/layers/moe/utils.py", 9)
    ]
    indirect = {(u["path"].rsplit("/", 1)[1], u["text"]): u["via"] for u in dbo["indirect_usages"]}
    assert indirect[("dbo_overlap.py", "if not is_dbo_enabled():")] == [
        "IS_DBO_ENABLED",
        "is_dbo_enabled()",
    ]
    # the re-export in layers/moe/__init__.py and its __all__ string are not uses
    assert not [u for u in dbo["indirect_usages"] if u["path"].endswith("__init__.py")]
    assert not [u for u in dbo["indirect_usages"] if "gamma" in u["path"] or "beta" in u["path"]]
    for u in dbo["indirect_usages"]:
        assert u["url"].endswith(f"#L{u['line']}-L{u['line']}")


def test_models_pages(client: TestClient) -> None:
    models = {m["name"]: m for m in get(client, f"{V}/models")["models"]}
    assert set(models) == BEFORE_HOLDING | set(HOLDING_MODELS)
    assert models["delta"]["architectures"] == [
        "DeltaForCausalLM",
        "DeltaVLForConditionalGeneration",
    ]
    assert models["alpha_moe"]["flags"] == 1 and models["beta"]["flags"] == 0
    alpha = get(client, f"{V}/models/alpha_moe")
    assert [f["name"] for f in alpha["flags"]] == ["--enable-dual-batch-overlap"]
    assert alpha["flags"][0]["indirect"][0]["via"][-1] == "model_forward_maybe_dbo"
    # the override for AlphaMoeForCausalLM names its architecture
    assert [c["kind"] for c in alpha["constraints"]] == ["override"]
    assert "AlphaMoeForCausalLM" in alpha["constraints"][0]["condition"]
    # by architecture name too
    assert get(client, f"{V}/models/DeltaForCausalLM")["name"] == "delta"
    missing = get(client, f"{V}/models/alpha_mo", 404)
    assert missing["suggestions"][0]["name"] == "alpha_moe"
    html = client.get("/v/v0.4.0/models/alpha_moe").text
    assert "model_forward_maybe_dbo" in html and "AlphaMoeForCausalLM" in html
    flag_html = client.get("/v/v0.4.0/flags/--enable-dual-batch-overlap").text
    assert 'id="models"' in flag_html and "alpha_moe" in flag_html
    assert 'id="indirect"' in flag_html


def test_search_finds_model_pages(client: TestClient) -> None:
    def search(q: str) -> list[dict[str, Any]]:
        body = client.get("/api/search", params={"q": q, "version": "v0.4.0"}).json()
        return [r for r in body["results"] if r["kind"] == "model"]

    # by file name, and by an architecture it registers (its EntryClass)
    assert [(r["name"], r["match"]) for r in search("alpha_moe")][:1] == [("alpha_moe", "exact")]
    hit = search("DeltaVLForConditionalGeneration")[0]
    assert (hit["name"], hit["match"]) == ("delta", "alias")
    assert hit["url"] == "/v/v0.4.0/models/delta"
    assert client.get(hit["url"]).status_code == 200
    # not every model whose architecture also ends in "ForCausalLM"
    assert [r["name"] for r in search("DeltaForCausalLM")] == ["delta"]
    page = client.get("/search", params={"q": "delta", "version": "v0.4.0"}).text
    assert "Models" in page and "/v/v0.4.0/models/delta" in page


def test_backend_value_requirements_and_side_effects(client: TestClient) -> None:
    cutlass = get(client, f"{V}/backends/--moe-runner-backend/flashinfer_cutlass")
    reqs = cutlass["requirements"]
    assert {r["message"] for r in reqs} == {
        "cutlass MoE wants fp4 weights",
        "expert parallel size must be 1 or tp",
    }
    assert any("--quantization" in r["summary"] for r in reqs)
    trtllm = get(client, f"{V}/backends/--moe-runner-backend/flashinfer_trtllm")
    effects = {e["effect"]: e for e in trtllm["side_effects"]}
    assert effects["triggers"]["writes"] == {"disable_fusion": "True"}
    switch = effects["switches_to"]
    assert switch["context"]["models"] == ["AlphaMoeForCausalLM"]
    assert switch["context"]["hardware"] == ["is_sm100_supported()"]
    assert trtllm["requirements"] == []
    assert "compare?values=flashinfer_trtllm," in trtllm["compare_url"]


def test_compare_values(client: TestClient) -> None:
    url = f"{V}/backends/--moe-runner-backend/compare?values=flashinfer_cutlass,flashinfer_trtllm"
    body = get(client, url)
    assert body["flag"] == "--moe-runner-backend"
    assert body["values"] == ["flashinfer_cutlass", "flashinfer_trtllm"]
    assert len(body["requirements"]["flashinfer_cutlass"]) == 2
    assert body["requirements"]["flashinfer_trtllm"] == []
    assert len(body["side_effects"]["flashinfer_trtllm"]) == 2
    for row in body["rows"]:
        assert set(row) >= {"area", "path", "cells"}
        assert set(row["cells"]) == {"flashinfer_cutlass", "flashinfer_trtllm"}
    html = client.get(url.removeprefix("/api")).text
    assert "expert parallel size must be 1 or tp" in html
    bad = get(client, f"{V}/backends/--moe-runner-backend/compare?values=flashinfer_cutlas,x", 404)
    # The suggestion is the same comparison with the value corrected, not the value's page;
    # `x`, wrong too and like no value, is dropped rather than kept to 404 again.
    assert bad["suggestions"][0] == {
        "name": "flashinfer_cutlass",
        "url": f"{V}/backends/--moe-runner-backend/compare?values=flashinfer_cutlass",
    }
    bad = get(client, f"{V}/backends/--moe-runner-backen/compare?values=triton,auto", 404)
    assert bad["suggestions"][0] == {
        "name": "--moe-runner-backend",
        "url": f"{V}/backends/--moe-runner-backend/compare?values=triton,auto",
    }
    bad = get(client, "/api/v/v0.4/backends/--moe-runner-backend/compare?values=triton,auto", 404)
    assert bad["suggestions"][0]["url"] == (
        f"{V}/backends/--moe-runner-backend/compare?values=triton,auto"
    )
    # No value to correct (none named, or only empty ones): the suggestion is the value's page.
    for query in ("", "?values=,,"):
        bad = get(client, f"{V}/backends/--moe-runner-backend/compare{query}", 404)
        first = bad["suggestions"][0]
        assert first["url"] == f"{V}/backends/--moe-runner-backend/{first['name']}"
    get(client, f"{V}/backends/--no-such-flag/compare?values=a", 404)
    assert client.get("/v/v0.4.0/backends/--moe-runner-backend/compare?values=").status_code == 404


def test_report(client: TestClient) -> None:
    body = get(client, f"{V}/report")
    assert {"counts", "choice_sites", "ambiguous_choice_sites", "warnings"} <= set(body)
    assert body["counts"]["models"] == len(BEFORE_HOLDING | set(HOLDING_MODELS))
    assert body["counts"]["indirect_usages"] >= 5
    assert 0 <= body["ambiguous_choice_sites"] <= body["choice_sites"]
    assert "Extraction report" in client.get("/v/v0.4.0/report").text
    get(client, "/api/v/v9/report", 404)


def sites_of(client: TestClient, flag: str, value: str) -> list[tuple[str, str, str, int]]:
    body = get(client, f"{V}/backends/{flag}/{value}")
    return [
        (s["how"], s["basis"], s["path"].rsplit("/", 1)[1], s["line"])
        for s in body["sites"]
        if s["attributed"]
    ]


def test_registries_are_handling_sites(client: TestClient) -> None:
    # a decorator with a string argument, and a Registry.register("x", ...) call
    assert ("registry", "subject", "registry.py", 12) in sites_of(
        client, "--attention-backend", "fa3"
    )
    assert ("registry", "subject", "registry.py", 25) in sites_of(
        client, "--attention-backend", "wave"
    )


def test_registry_arguments_go_to_the_flag_their_parameter_holds(client: TestClient) -> None:
    # `@register_fused_step("none", "triton")`: the pool's key tuple is annotated
    # (MoeA2ABackend, MoeRunnerBackend), so each position goes to its enum's flag, even a
    # value as common as "none".
    assert sites_of(client, "--moe-a2a-backend", "none") == [("registry", "type", "steps.py", 5)]
    assert ("registry", "type", "steps.py", 5) in sites_of(client, "--moe-runner-backend", "triton")
    assert ("registry", "type", "steps.py", 10) in sites_of(
        client, "--moe-runner-backend", "flashinfer_cutlass"
    )
    # "flashinfer" is an attention backend too: the first position says the all-to-all one.
    assert ("registry", "type", "steps.py", 10) in sites_of(
        client, "--moe-a2a-backend", "flashinfer"
    )
    assert not [
        s for s in sites_of(client, "--attention-backend", "flashinfer") if s[2] == "steps.py"
    ]
    # The parameter's name: `runner_backend_name`, not an attention backend's "triton".
    assert ("registry", "parameter", "steps.py", 15) in sites_of(
        client, "--moe-runner-backend", "triton"
    )
    assert not [s for s in sites_of(client, "--attention-backend", "triton") if s[2] == "steps.py"]
    # `policy_name` holds a QueueOrder, which backs no flag: not --schedule-policy's "fcfs"
    # (the registry's name alone, `policy_step`, would have said so).
    assert not [s for s in sites_of(client, "--schedule-policy", "fcfs") if s[2] == "steps.py"]
    # A registering function defined nowhere here: its second argument is not taken.
    assert not [
        s
        for s in sites_of(client, "--moe-runner-backend", "flashinfer_trtllm")
        if s[2] == "steps.py"
    ]


def test_dispatch_dict_keys_go_to_the_flag_its_name_spells(client: TestClient) -> None:
    sites = sites_of(client, "--decode-attention-backend", "flashinfer")
    assert ("dispatch", "subject", "registry.py", 30) in sites
    assert not [
        s for s in sites_of(client, "--attention-backend", "flashinfer") if s[0] == "dispatch"
    ]


def test_named_constant_containment_and_receiver_type(client: TestClient) -> None:
    cutlass = sites_of(client, "--moe-runner-backend", "flashinfer_cutlass")
    assert ("contains", "subject", "runner.py", 11) in cutlass  # SUPPORTED_RUNNERS, imported
    triton = sites_of(client, "--moe-runner-backend", "triton")
    assert ("is_call", "type", "runner.py", 5) in triton  # backend: MoeRunnerBackend
    # the same method on the attention kind's enum is not the MoE runner's
    assert not [s for s in sites_of(client, "--attention-backend", "triton") if s[2] == "runner.py"]


def test_enums_covering_part_of_a_flags_values(client: TestClient) -> None:
    assert sites_of(client, "--schedule-policy", "lpm") == [
        ("enum", "enum", "schedule_policy.py", 15)
    ]
    assert sites_of(client, "--schedule-policy", "dfs-weight") == [
        ("enum", "enum", "schedule_policy.py", 17)
    ]
    # `block.type == "lof"` names something else: not a site of --schedule-policy=lof
    assert not [s for s in sites_of(client, "--schedule-policy", "lof") if s[2] == "runner.py"]
    report = get(client, f"{V}/report")
    assert set(report["choice_sites_by_how"]) >= {"registry", "dispatch", "contains", "is_call"}


def test_search_finds_a_flag_by_the_names_that_carry_it(client: TestClient) -> None:
    def hits(q: str) -> list[tuple[str, str, str | None, str]]:
        out = get(client, "/api/search?" + urlencode({"q": q, "version": "v0.4.0", "limit": 5}))
        return [(h["kind"], h["name"], h["flag"], h["match"]) for h in out["results"]]

    dbo = "--enable-dual-batch-overlap"
    assert hits("is_dbo_enabled")[:2] == [
        ("carrier", "IS_DBO_ENABLED", dbo, "exact"),
        ("carrier", "is_dbo_enabled()", dbo, "exact"),
    ]
    assert hits("model_forward_maybe_dbo")[0] == (
        "carrier",
        "model_forward_maybe_dbo",
        dbo,
        "exact",
    )
    # A method of a carrier class, by the class and by its own name.
    lbo = {h[1:] for h in hits("LboFlags") if h[0] == "carrier"}
    assert ("LboFlags.fuse_inside_lbo()", "--enable-lone-batch-overlap", "prefix") in lbo
    assert hits("fuse_inside_lbo")[0][1] == "LboFlags.fuse_inside_lbo()"
    # A class named for the feature, used outside the model files, is one.
    assert ("carrier", "DboGraphPlugin", dbo, "exact") in hits("DboGraphPlugin")
    # Model classes on a chain are not carriers: a model's name names no carrier.
    assert not [h for h in hits("AlphaMoeForCausalLM") if h[0] == "carrier" and h[3] != "text"]
    first = get(client, "/api/search?q=is_dbo_enabled&version=v0.4.0")["results"][0]
    assert first["url"] == f"/v/v0.4.0/flags/{dbo}#indirect"


def test_an_accessor_of_two_carriers_carries_both_flags(client: TestClient) -> None:
    """`return A == "x" and B > 1` (two globals of two flags, in their file) and `return not
    a() and b()` (two imported accessors, in another module): each flag reaches the user
    with its own chain (the first carrier's flag alone did before)."""
    user = "python/sglang/srt/layers/gather_user.py"

    def chains(flag: str) -> dict[int, list[str]]:
        reads = get(client, f"{V}/flags/{flag}")["indirect_usages"]
        return {u["line"]: u["via"] for u in reads if u["path"] == user}

    assert chains("--quantization") == {8: ["GATHER_QUANT", "quant_gather_enabled()"]}
    assert chains("--tp-size") == {8: ["GATHER_TP", "quant_gather_enabled()"]}
    assert chains("--enable-dual-batch-overlap") == {
        6: ["IS_DBO_ENABLED", "is_dbo_enabled()", "should_gather_early()"]
    }
    assert chains("--enable-lone-batch-overlap") == {
        6: ["IS_LBO_ENABLED", "is_lbo_enabled()", "should_gather_early()"]
    }


def test_dispatch_dicts_named_for_something_else(client: TestClient) -> None:
    def dispatch(flag: str, value: str) -> list[tuple[str, str, str, int]]:
        return [s for s in sites_of(client, flag, value) if s[2] == "tables.py"]

    # A model's modules (a class attribute, a dict in `mapping.update(...)`, a dict going on
    # past comment lines) and a map looked up with a name that is no flag's: not handlers of
    # --schedule-policy=fcfs / --attention-backend=aiter although no other flag takes them.
    assert dispatch("--schedule-policy", "fcfs") == [("dispatch", "subject", "tables.py", 66)]
    assert dispatch("--schedule-policy", "lof") == [("dispatch", "subject", "tables.py", 67)]
    # looked up with a backend of its own (`QKV_BACKEND_IMPL[qkv_backend]`): kept
    assert dispatch("--attention-backend", "aiter") == [("dispatch", "family", "tables.py", 33)]
    # the key read on the line after `.get(`: the flag it reads, by subject
    assert dispatch("--decode-attention-backend", "flashinfer") == [
        ("dispatch", "subject", "tables.py", 53)
    ]
    assert dispatch("--attention-backend", "flashinfer") == []


def test_a_variant_value_page_points_to_the_flag_it_derives_from(client: TestClient) -> None:
    # Sites that do not say which variant they serve go to --attention-backend (the
    # "family" basis): --decode-attention-backend's page for such a value had 0 sites and
    # said nothing about why.
    choices = get(client, f"{V}/flags/--decode-attention-backend")["choices"]
    pages = {c: get(client, f"{V}/backends/--decode-attention-backend/{c}") for c in choices}
    base = {c: get(client, f"{V}/backends/--attention-backend/{c}") for c in choices}
    bare = [c for c in choices if not pages[c]["sites"] and base[c]["sites"]]
    assert bare, "the fixture handles a value only through --attention-backend"
    value = bare[0]
    assert pages[value]["derives_from"] == {
        "flag": "--attention-backend",
        "sites": len(base[value]["sites"]),
        "url": f"/v/v0.4.0/backends/--attention-backend/{value}",
    }
    assert base[value]["derives_from"] is None
    html = client.get(f"/v/v0.4.0/backends/--decode-attention-backend/{value}").text
    assert f'href="/v/v0.4.0/backends/--attention-backend/{value}"' in html
    assert "the flag it derives from" in html
