"""The typed JSON contract (kb/contract.py): each HTML page and its JSON twin come from one
builder call and one model; errors, HEAD and 405 as documented; docs/openapi.json in sync."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest
from dashboard_kb import ARGS, build_kb
from fastapi.testclient import TestClient
from jinja2 import Undefined
from jinja2.exceptions import UndefinedError

from app.main import NUL_IN_URL, create_app
from app.templating import templates
from app.views.common import ERROR_STATUSES
from kb.contract import Model

ROOT = Path(__file__).resolve().parent.parent
EXPLAIN = "--tp 2 --moe-runner-backend tritn --enable-two-batch-overlap"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    db = build_kb(tmp_path_factory.mktemp("kb") / "kb.db")
    return TestClient(create_app(f"sqlite:///{db}"), follow_redirects=False)


class FieldsOnly(Undefined):
    """Reading a name that is not a field of a contract model (or a key of the dict a page
    renders in the model's place) fails the render: whatever a page shows of its model is
    therefore in the JSON twin (the same model, dumped)."""

    __slots__ = ()

    def __init__(self, hint: Any = None, obj: Any = None, name: Any = None, exc: Any = None):
        if isinstance(obj, Model | dict):
            raise UndefinedError(f"{type(obj).__name__} has no field {name!r}")
        super().__init__(hint, obj, name, exc or UndefinedError)


# kind: (view module, builder, HTML page, JSON twin, the template variable holding the model)
V3 = "/v/v0.3.0"
RUNNER = "--moe-runner-backend"
PAGE_KINDS = {
    "versions": ("home", "version_list", "/", "/api/versions", "data"),
    "flags": ("flags", "flag_list_dict", f"{V3}/flags?q=moe", f"/api{V3}/flags?q=moe", "data"),
    # The flag page renders the dict its twin validates into FlagPage (app/views/flags.py).
    "flag": ("flags", "flag_page_dict", f"{V3}/flags/{RUNNER}", f"/api{V3}/flags/{RUNNER}", "flag"),
    "enums": ("enums", "enum_list", f"{V3}/enums", f"/api{V3}/enums", "data"),
    "constraints": (
        "constraints",
        "constraint_list_dict",
        "/v/v0.2.0/constraints?flag=pp_size",
        "/api/v/v0.2.0/constraints?flag=pp_size",
        "data",
    ),
    "backends": ("backends", "backend_list", f"{V3}/backends", f"/api{V3}/backends", "data"),
    "backend value": (
        "backends",
        "backend_value",
        f"{V3}/backends/{RUNNER}/triton",
        f"/api{V3}/backends/{RUNNER}/triton",
        "data",
    ),
    "compare": (
        "compare",
        "compare_data",
        f"{V3}/backends/{RUNNER}/compare?values=triton,flashinfer_cutlass",
        f"/api{V3}/backends/{RUNNER}/compare?values=triton,flashinfer_cutlass",
        "data",
    ),
    "report": ("compare", "report_data", f"{V3}/report", f"/api{V3}/report", "report"),
    "models": ("models", "model_list_data", f"{V3}/models", f"/api{V3}/models", "data"),
    "model": ("models", "model_data", f"{V3}/models/runner", f"/api{V3}/models/runner", "model"),
    "source": ("source", "source_file", f"{V3}/source/{ARGS}", f"/api{V3}/source/{ARGS}", "data"),
    "diff": ("diff", "diff_model", "/diff/v0.1.0...v0.3.0", "/api/diff/v0.1.0/v0.3.0", "d"),
    "search": ("search", "run_search", "/search?q=moe", "/api/search?q=moe", "out"),
    "env": ("env", "env_list", f"{V3}/env?q=fake", f"/api{V3}/env?q=fake", "data"),
    "env var": (
        "env",
        "env_data",
        f"{V3}/env/SGLANG_FAKE_SWITCH",
        f"/api{V3}/env/SGLANG_FAKE_SWITCH",
        "var",
    ),
    # A deprecated name: its replacement and conversion are shown from the model's fields.
    "env deprecated": (
        "env",
        "env_data",
        f"{V3}/env/SGLANG_FAKE_SWITCH_MS",
        f"/api{V3}/env/SGLANG_FAKE_SWITCH_MS",
        "var",
    ),
    "docs drift": ("docsdrift", "drift_data", f"{V3}/docs-drift", f"/api{V3}/docs-drift", "drift"),
    "docs commands": (
        "doc_commands",
        "doc_commands_data",
        f"{V3}/docs-commands",
        f"/api{V3}/docs-commands",
        "data",
    ),
    "gpus": ("gpus", "gpu_list", "/gpus", "/api/gpus", "data"),
    "explain": (
        "explain",
        "explain_result",
        f"/explain?version=v0.3.0&compare=v0.1.0&command={EXPLAIN}",
        f"/api/explain?version=v0.3.0&compare=v0.1.0&command={EXPLAIN}",
        "result",
    ),
}


@pytest.mark.parametrize("kind", list(PAGE_KINDS))
def test_html_and_json_twins_render_one_model(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    name, builder, html_url, api_url, key = PAGE_KINDS[kind]
    module = importlib.import_module(f"app.views.{name}")
    built: list[Any] = []  # models, or the dicts a twin validates into its model
    rendered: list[dict[str, Any]] = []
    real_builder, real_render = getattr(module, builder), module.render

    def spy_builder(*args: Any, **kwargs: Any) -> Any:
        built.append(real_builder(*args, **kwargs))
        return built[-1]

    def spy_render(request: Any, template: str, context: dict[str, Any], **kw: Any) -> Any:
        rendered.append(context)
        return real_render(request, template, context, **kw)

    monkeypatch.setattr(module, builder, spy_builder)
    monkeypatch.setattr(module, "render", spy_render)
    monkeypatch.setattr(templates.env, "undefined", FieldsOnly)

    page = client.get(html_url)
    assert page.status_code == 200, page.text[:500]
    assert len(built) == 1 and len(rendered) == 1
    html_model = built[0]
    assert rendered[0][key] is html_model  # the page renders the builder's object

    api = client.get(api_url)
    assert api.status_code == 200, api.text[:500]
    assert len(built) == 2  # one builder call per request
    if isinstance(built[1], dict):
        # Every key of the dict is a field of the model, with the value the JSON carries
        # (a sparse model leaves out its unset fields: None in the dict).
        as_json = json.dumps(built[1], default=lambda m: m.model_dump(mode="json"))
        assert without_none(json.loads(as_json)) == without_none(api.json())
    else:
        assert api.json() == built[1].model_dump(mode="json")
    assert built[1] == html_model  # both twins show the same facts


def without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_none(v) for v in value]
    return value


def test_twin_table_covers_every_json_route(client: TestClient) -> None:
    """A new /api route needs a row in PAGE_KINDS (its builder and HTML page)."""
    from starlette.routing import compile_path

    twins = [api.split("?")[0] for _, _, _, api, _ in PAGE_KINDS.values()]
    for path in client.get("/api/openapi.json").json()["paths"]:
        if path == "/api/v/{version}":
            continue  # one row of the versions page (VersionInfo), which has no HTML page
        regex = compile_path(path.replace("{path}", "{path:path}"))[0]
        assert any(regex.match(twin) for twin in twins), path


def test_flags_list_twins_both_count_constraints(client: TestClient) -> None:
    flags = client.get("/api/v/v0.3.0/flags").json()["flags"]
    counts = {f["name"]: f["constraint_count"] for f in flags}
    assert counts["--enable-two-batch-overlap"] >= 1 and counts["--show-banner"] == 0
    html = client.get("/v/v0.3.0/flags?q=two-batch").text
    n = counts["--enable-two-batch-overlap"]
    assert f"{n} constraint" in html


def test_post_explain_is_the_get_twin(client: TestClient) -> None:
    body = {"version": "v0.3.0", "command": EXPLAIN, "compare": "v0.1.0"}
    post = client.post("/api/explain", json=body).json()
    assert post == client.get("/api/explain", params=body).json()
    assert post["compare"]["from"] == "v0.3.0" and post["findings"]


@pytest.mark.parametrize(
    "url",
    [
        "/api/versions",
        "/api/v/v0.3.0/flags/--tp",
        "/api/v/nope/flags",
        "/api/search?q=moe",
        "/v/v0.3.0/flags",
        "/api/openapi.json",
    ],
)
def test_head_answers_like_get_without_a_body(client: TestClient, url: str) -> None:
    get, head = client.get(url), client.head(url)
    assert head.status_code == get.status_code
    assert head.content == b""
    for header in ("content-type", "content-length", "content-security-policy"):
        assert head.headers.get(header) == get.headers.get(header), header


def test_405_carries_allow(client: TestClient) -> None:
    put = client.put("/api/explain")
    assert put.status_code == 405
    assert put.headers["allow"] == "GET, HEAD, POST"
    assert put.json()["detail"]
    delete = client.delete("/api/versions")
    assert (delete.status_code, delete.headers["allow"]) == (405, "GET, HEAD")


@pytest.mark.parametrize(
    ("method", "url", "body", "status", "kind"),
    [
        ("get", "/api/v/nope/flags", None, 404, "version"),
        ("get", "/api/v/v0.3.0/flags/--nope", None, 404, "flag"),
        ("get", "/api/search?q=x&limit=many", None, 400, "parameter"),
        ("get", "/api/explain", None, 400, "parameter"),
        ("post", "/api/explain", {"command": 1}, 422, "body"),
        ("post", "/api/explain", {"command": "x" * 20_001}, 413, "command"),
        ("get", "/api/nothing/here", None, 404, "page"),
    ],
)
def test_errors_are_typed_with_documented_statuses(
    client: TestClient, method: str, url: str, body: Any, status: int, kind: str
) -> None:
    response = client.request(method.upper(), url, json=body)
    assert response.status_code == status, response.text[:300]
    error = response.json()
    assert set(error) == {"detail", "kind", "name", "suggestions", "elsewhere"}
    assert error["kind"] == kind and error["detail"]
    spec = client.get("/api/openapi.json").json()
    route = url.split("?")[0].replace("/v/nope/", "/v/{version}/")
    route = route.replace("/v/v0.3.0/flags/--nope", "/v/{version}/flags/{flag}")
    if route in spec["paths"]:  # the status is in the route's documented responses
        documented = spec["paths"][route][method]["responses"][str(status)]
        schema = documented["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/ErrorBody"}


def test_openapi_is_typed_without_phantom_statuses(client: TestClient) -> None:
    spec = client.get("/api/openapi.json").json()
    assert "HTTPValidationError" not in json.dumps(spec)
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            ok = operation["responses"]["200"]["content"]["application/json"]["schema"]
            assert set(ok) == {"$ref"}, (method, path)  # a named model, never a bare object
            for status, reply in operation["responses"].items():
                if status != "200":
                    schema = reply["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (path, status)
            # Only routes with a parameter that can fail to parse answer 400 for it; every
            # route answers 400 for a NUL character in the URL (app/limits.py).
            can_400 = (path, method) in {
                ("/api/search", "get"),
                ("/api/explain", "get"),
                ("/api/explain", "post"),
                ("/api/v/{version}/constraints", "get"),  # page, per_page
            }
            assert {"400", "414"} <= set(operation["responses"]), (method, path)
            why = operation["responses"]["400"]["description"]
            assert (why != NUL_IN_URL["description"]) == can_400, (method, path, why)
            if can_400 and path != "/api/explain":  # explain says its own (a profile, a command)
                assert why == ERROR_STATUSES[400], (method, path, why)
    schemas = spec["components"]["schemas"]
    assert schemas["FlagList"]["properties"]["flags"]["items"] == {
        "$ref": "#/components/schemas/FlagListItem"
    }
    assert "constraint_count" in schemas["FlagListItem"]["required"]
    # A deprecated variable's conversion is typed, and always present (null: copied as is).
    conversion = schemas["EnvVar"]["properties"]["conversion"]
    assert {"$ref": "#/components/schemas/EnvConversion"} in conversion["anyOf"]
    assert "conversion" in schemas["EnvVar"]["required"]
    assert schemas["EnvConversion"]["properties"]["op"]["anyOf"][0]["enum"] == ["*", "/", "//"]
    # Models whose None keys are left out (Sparse) describe their fields too: their
    # serializer's return annotation once made them empty schemas ({}).
    assert not [name for name, schema in schemas.items() if not schema.get("properties")]
    finding = schemas["Finding"]
    assert {"severity", "flag", "message", "source", "kind"} <= set(finding["required"])
    assert "replacement" in finding["properties"] and "fix" not in finding["required"]
    assert schemas["SearchHit"]["properties"]["kind"]["enum"][0] == "flag"


def test_committed_openapi_matches_the_served_one(client: TestClient) -> None:
    served = client.get("/api/openapi.json").json()
    committed = json.loads((ROOT / "docs" / "openapi.json").read_text())
    assert committed == served, (
        "docs/openapi.json is out of date: regenerate it with `make openapi` "
        "(.venv/bin/flagatlas openapi > docs/openapi.json) and describe the change in docs/API.md"
    )


def test_api_md_documents_every_route(client: TestClient) -> None:
    text = (ROOT / "docs" / "API.md").read_text()
    for path, operations in client.get("/api/openapi.json").json()["paths"].items():
        for method, operation in operations.items():
            assert f"{method.upper()} {path}" in text, (method, path)
            ok = operation["responses"]["200"]["content"]["application/json"]["schema"]
            assert ok["$ref"].rsplit("/", 1)[-1] in text
