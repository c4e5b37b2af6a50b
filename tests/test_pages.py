"""The HTML pages: what an engineer sees, links between pages, escaping, htmx fragments."""

from __future__ import annotations

import re

import pytest
from dashboard_kb import ARGS, RUNNER, XSS_HELP, build_kb
from fastapi.testclient import TestClient

from app.main import create_app


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    db = build_kb(tmp_path_factory.mktemp("kb") / "kb.db")
    return TestClient(create_app(f"sqlite:///{db}"), follow_redirects=False)


def page(client: TestClient, url: str, status: int = 200) -> str:
    response = client.get(url)
    assert response.status_code == status, (url, response.text[:300])
    assert response.headers["content-type"].startswith("text/html")
    return response.text


def test_home_lists_versions_newest_first(client: TestClient) -> None:
    html = page(client, "/")
    assert html.index("v0.3.0") < html.index("v0.2.0") < html.index("v0.1.0")
    assert 'id="search"' in html and 'name="q"' in html
    assert 'href="/v/v0.3.0/backends"' in html


def test_untrusted_help_is_escaped(client: TestClient) -> None:
    for url in ["/v/v0.3.0/flags", "/v/v0.3.0/flags/--show-banner", f"/v/v0.3.0/source/{ARGS}"]:
        html = page(client, url)
        assert "<script>alert" not in html, url
        assert "&lt;script&gt;" in html or "&lt;</span>script" in html, url
    escaped = "Shows &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; friends."
    assert escaped in page(client, "/v/v0.3.0/flags/--show-banner")
    # The JSON twin carries the text as data, unchanged.
    assert client.get("/api/v/v0.3.0/flags/--show-banner").json()["help"] == XSS_HELP


def test_flag_list_groups_and_badges(client: TestClient) -> None:
    html = page(client, "/v/v0.2.0/flags")
    assert html.index("<h2>Parallelism</h2>") < html.index("<h2>MoE</h2>")
    assert "--pp-size INT (default 1)" in html
    assert "--enable-two-batch-overlap (default false)" in html
    assert "--show-banner STR (default ServerArgs.banner)" in html
    assert ">deprecated<" in html  # --old-cache in v0.2.0
    assert 'href="/v/v0.2.0/flags/--pp-size"' in html


def test_flag_filter_fragment_for_htmx(client: TestClient) -> None:
    html = page(client, "/v/v0.3.0/flags?q=overlap")
    assert "--enable-two-batch-overlap" in html and "--tp-size" not in html
    fragment = client.get("/v/v0.3.0/flags?q=overlap", headers={"HX-Request": "true"}).text
    assert fragment.lstrip().startswith('<div id="flag-list">')
    assert "<html" not in fragment and "--disable-overlap-schedule" in fragment
    # A history restore needs the whole page.
    restore = client.get(
        "/v/v0.3.0/flags?q=overlap",
        headers={"HX-Request": "true", "HX-History-Restore-Request": "true"},
    ).text
    assert "<html" in restore


def test_flag_page_answers_the_questions(client: TestClient) -> None:
    html = page(client, "/v/v0.3.0/flags/--moe-runner-backend")
    # Every choice links to its backend page; the enum and defining citation are there.
    for value in ("auto", "triton", "flashinfer_cutlass", "flashinfer_trtllm"):
        assert f'href="/v/v0.3.0/backends/--moe-runner-backend/{value}"' in html
    assert "MoeRunnerBackend" in html
    assert f'href="/v/v0.3.0/source/{ARGS}#L' in html
    assert "https://github.com/example/sglang-like/blob/" in html
    assert 'data-copy="/v/v0.3.0/source/' in html and "Copy as Markdown" in html
    # Reads grouped by directory, then file; history; version switcher on the same page.
    area, name = RUNNER.rsplit("/", 1)
    assert f"<code>{area}/</code>" in html
    assert f"<summary><code>{name}</code>" in html
    assert f'<a class="file-link" href="/v/v0.3.0/source/{RUNNER}">' in html
    assert 'name="page" value="flags/--moe-runner-backend"' in html
    assert "<script>" not in re.sub(r"<script src=[^>]*></script>", "", html)


def test_constraints_on_flag_page_with_markdown_and_related(client: TestClient) -> None:
    html = page(client, "/v/v0.3.0/flags/--enable-two-batch-overlap")
    assert 'class="badge kind">raise<' in html
    assert "two-batch overlap needs an all-to-all backend" in html
    # Related flag is linked; the excerpt marks the cited line.
    assert 'href="/v/v0.3.0/flags/--moe-a2a-backend"' in html
    assert '<tr class="hit">' in html
    md = re.search(r'data-copy="(`--enable-two-batch-overlap` raises when[^"]*)"', html)
    assert md, "constraint citation has a Markdown sentence"
    assert "server_args.py#L11](https://github.com/example/sglang-like/blob/" in md.group(1)


def test_switcher_marks_versions_without_the_flag(client: TestClient) -> None:
    html = page(client, "/v/v0.3.0/flags/--fp4-gemm-backend")
    assert ">v0.1.0 (absent)<" in html and ">v0.2.0 (absent)<" in html
    assert ">v0.3.0<" in html


def test_missing_flag_page_links_nearest_versions(client: TestClient) -> None:
    html = page(client, "/v/v0.3.0/flags/--old-cache", 404)
    assert "does not exist in v0.3.0" in html
    assert 'href="/v/v0.2.0/flags/--old-cache"' in html
    # It keeps the switcher so another version is one click away.
    assert 'name="page" value="flags/--old-cache"' in html


def switch_from(client: TestClient, url: str, to: str) -> str:
    """Submit the version switcher of the page at `url`, as the browser does without JS: its
    hidden fields go to /switch; the redirect's target."""
    html = page(client, url)
    fields = dict(re.findall(r'<input type="hidden" name="(page|query)" value="([^"]*)">', html))
    fields = {k: v.replace("&amp;", "&") for k, v in fields.items()}
    response = client.get("/switch", params={"to": to, **fields})
    assert response.status_code == 302, (url, response.text[:300])
    return str(response.headers["location"])


@pytest.mark.parametrize(
    ("url", "landing"),
    [
        # The compared values are a query: in the path they made a 404.
        (
            "/v/v0.3.0/backends/--moe-runner-backend/compare?values=triton,flashinfer_cutlass",
            "/v/v0.1.0/backends/--moe-runner-backend/compare?values=triton,flashinfer_cutlass",
        ),
        # List filters were dropped on the way.
        ("/v/v0.3.0/flags?q=batch", "/v/v0.1.0/flags?q=batch"),
        ("/v/v0.3.0/flags?section=Parallelism", "/v/v0.1.0/flags?section=Parallelism"),
        (
            "/v/v0.3.0/constraints?kind=raise&per_page=2&page=2",
            "/v/v0.1.0/constraints?kind=raise&per_page=2&page=2",
        ),
        ("/v/v0.3.0/env?q=SGLANG", "/v/v0.1.0/env?q=SGLANG"),
        ("/v/v0.3.0/flags/--pp-size", "/v/v0.1.0/flags/--pp-size"),
    ],
)
def test_switcher_keeps_path_and_query(client: TestClient, url: str, landing: str) -> None:
    assert switch_from(client, url, "v0.1.0") == landing
    assert client.get(landing).status_code == 200


def test_switcher_to_a_version_without_the_value_keeps_the_fallback(client: TestClient) -> None:
    url = "/v/v0.3.0/backends/--moe-runner-backend/compare?values=triton,flashinfer_trtllm"
    landing = switch_from(client, url, "v0.1.0")
    assert landing == url.replace("v0.3.0", "v0.1.0")
    html = page(client, landing, 404)  # the value is newer: said so, switcher kept
    assert "flashinfer_trtllm" in html and "is not a value of --moe-runner-backend" in html
    assert 'name="query" value="values=triton,flashinfer_trtllm"' in html


def test_old_version_banner_keeps_the_query(client: TestClient) -> None:
    html = page(client, "/v/v0.2.0/flags?q=batch&section=Parallelism")
    link = "/switch?to=v0.3.0&amp;page=flags&amp;query=q%3Dbatch%26section%3DParallelism"
    assert f'class="same-page" href="{link}"' in html
    response = client.get(link.replace("&amp;", "&"))
    assert response.headers["location"] == "/v/v0.3.0/flags?q=batch&section=Parallelism"


def test_switch_query_is_re_encoded_and_old_links_still_land(client: TestClient) -> None:
    # A fragment or a line break in the query stays inside its value.
    response = client.get(
        "/switch", params={"to": "v0.1.0", "page": "flags", "query": "q=a#b\r\nX: y"}
    )
    assert response.headers["location"] == "/v/v0.1.0/flags?q=a%23b%0D%0AX%3A+y"
    # Links made when the query rode inside `page` (the 404 this fixes) land on the page.
    page_ = "backends/--moe-runner-backend/compare?values=triton,auto"
    response = client.get("/switch", params={"to": "v0.1.0", "page": page_})
    assert response.headers["location"] == f"/v/v0.1.0/{page_}"


@pytest.mark.parametrize(
    "evil",
    [
        "//evil.example/x",
        "http://evil.example/",
        "https:evil.example",
        "javascript:alert(1)",
        "/\\evil.example",
        "\\evil.example",
        "../../etc/passwd",
        "flags/../../x",
        "flags/./x",
        "flags//x",
        "flags\r\nSet-Cookie: a=b",
        "x" * 1001,
    ],
)
def test_switch_refuses_a_page_outside_the_versions(client: TestClient, evil: str) -> None:
    response = client.get("/switch", params={"to": "v0.1.0", "page": evil})
    assert response.status_code == 400, evil
    assert "location" not in response.headers
    assert "must be a path inside a version" in response.text
    assert 'href="/v/v0.1.0/flags"' in response.text


def test_backend_value_page(client: TestClient) -> None:
    html = page(client, "/v/v0.3.0/backends/--moe-runner-backend/auto")
    assert ">ambiguous<" in html and 'href="/v/v0.3.0/flags/--fp4-gemm-backend"' in html
    html = page(client, "/v/v0.3.0/backends/--moe-runner-backend/triton")
    assert f'href="/v/v0.3.0/source/{RUNNER}#L' in html and '<tr class="hit">' in html
    assert 'href="/v/v0.3.0/backends/--moe-runner-backend/flashinfer_cutlass"' in html
    html = page(client, "/v/v0.3.0/backends")
    assert 'href="/v/v0.3.0/backends/--fp4-gemm-backend/cutlass"' in html


def test_constraints_and_enums_pages(client: TestClient) -> None:
    html = page(client, "/v/v0.3.0/constraints?kind=override")
    assert "disable_overlap_schedule = True" in html
    assert 'class="badge kind">raise<' not in html
    fragment = client.get("/v/v0.3.0/constraints?flag=tp", headers={"HX-Request": "1"}).text
    assert (
        fragment.lstrip().startswith('<div id="constraint-rows">') and 'kind">assert<' in fragment
    )
    html = page(client, "/v/v0.3.0/enums")
    assert "FLASHINFER_CUTLASS" in html and 'href="/v/v0.3.0/flags/--moe-runner-backend"' in html


def test_source_view(client: TestClient) -> None:
    html = page(client, f"/v/v0.3.0/source/{RUNNER}")
    assert "<li id=L2>" in html and 'id="source-lines"' in html
    # A cited line: marked, and its title says what is cited there.
    assert "<li id=L5 class=mk title=\"handles 'triton' of --moe-runner-backend\">" in html
    assert "<span class=k>if</span>" in html  # highlighted
    # Elixir-style links: a flag dest read from server_args, a choice value the knowledge
    # base attributes to a flag on that line; "auto" (two flags accept it) stays plain.
    flag = '<a href="/v/v0.3.0/flags/--moe-runner-backend">moe_runner_backend</a>'
    assert f"server_args.{flag}" in html
    value = "/v/v0.3.0/backends/--moe-runner-backend/triton"
    assert f"<a class=s href=\"{value}\">'triton'</a>" in html
    assert "<span class=s>'auto'</span>" in html
    # In the file that defines the flags, `self.x` and option strings (aliases too) link.
    html = page(client, f"/v/v0.3.0/source/{ARGS}")
    assert 'self.<a href="/v/v0.3.0/flags/--pp-size">pp_size</a>' in html
    assert "<a class=s href=\"/v/v0.3.0/flags/--tp-size\">'--tp'</a>" in html
    # "auto" is linked where it is written in --moe-runner-backend's choices constant.
    auto = "/v/v0.3.0/backends/--moe-runner-backend/auto"
    assert f"<li id=L5>    <a class=s href=\"{auto}\">'auto'</a>" in html
    assert 'title="defines --tp-size (to L' in html
    page(client, f"/v/v0.3.0/source/{RUNNER}x", 404)
    page(client, "/v/v0.3.0/source/python/../etc/passwd", 404)


def test_source_json_twin_lists_the_links(client: TestClient) -> None:
    data = client.get(f"/api/v/v0.3.0/source/{RUNNER}").json()
    links = {(link["line"], link["text"]): link["url"] for link in data["links"]}
    assert links[(4, "moe_runner_backend")] == "/v/v0.3.0/flags/--moe-runner-backend"
    assert links[(5, "triton")] == "/v/v0.3.0/backends/--moe-runner-backend/triton"
    assert (9, "auto") not in links
    assert data["text"].splitlines()[3].startswith("    backend = server_args.moe_runner_backend")


def test_unknown_pages_are_friendly_404s(client: TestClient) -> None:
    html = page(client, "/v/v9.9.9/flags", 404)
    assert "Did you mean" in html and 'href="/v/v0.3.0/flags"' in html
    html = page(client, "/v/v0.3.0/flags/--pp-sise", 404)
    assert 'href="/v/v0.3.0/flags/--pp-size"' in html
    page(client, "/no/such/page", 404)
