"""Explain with a deployment profile in a real browser (Debian's chromium through
Playwright): choose a profile, read the effective configuration, apply the suggested fix
and land on the updated permalink. Screenshots land in test-output/browser/."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from browser_support import MARKS, live_server, new_page
from browser_support import shot as full_shot

from tests.conftest import ingest_into
from tests.sim_repos import build_sim_repo

pytestmark = MARKS

COMMAND = (
    "python -m sglang.launch_server --model-path /models/glm --tp-size 8 \\\n"
    "  --enable-two-batch-overlap"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("simkb")
    db = root / "kb.db"
    ingest_into(build_sim_repo(root), db, jobs=1)
    with live_server(f"sqlite:///{db}") as url:
        yield url


@pytest.fixture
def page(browser: Any, server: str) -> Iterator[Any]:
    with new_page(browser, server, height=1000) as pg:
        yield pg


def test_profile_effective_configuration_and_fix(page: Any) -> None:
    page.goto("/explain")
    page.select_option("#explain-version", "v0.2.0")
    page.fill("#explain-command", COMMAND)
    page.click("#explain-profile summary")
    page.fill("#profile-arch", "GlmMoeForCausalLM")
    page.fill("#profile-quant", "modelopt_fp4")
    page.select_option("#profile-platform", "cuda")
    page.select_option("#profile-sm", "100")
    page.fill("#profile-gpus", "8")
    page.click("#explain-form button[type=submit]")
    table = page.locator("table.effective").first
    table.wait_for()

    # the effective configuration, each change at its cited line
    rows = table.locator("tbody tr")
    texts = rows.all_inner_texts()
    moe = next(t for t in texts if "--moe-runner-backend" in t)
    assert "auto" in moe and "flashinfer_trtllm" in moe and "server_args.py#L" in moe
    assert any("--quantization" in t and "modelopt_fp4" in t for t in texts)
    assert "B200" in page.locator(".profile-line").inner_text()
    # the command, word by word: hovering a flag tells what it does
    token = page.locator("p.tokens .tok.role-flag", has_text="--tp-size")
    assert token.get_attribute("title") == "Tensor parallel degree."

    # the permalink keeps the profile
    query = parse_qs(urlparse(page.url).query)
    assert query["arch"] == ["GlmMoeForCausalLM"] and query["sm"] == ["100"]
    full_shot(page, "explain-profile", full_page=True)

    # the error has verified fixes, the smallest change first; applying one lands on the
    # fixed command's permalink
    error = page.locator("li.finding.sev-error", has_text="raises at server_args.py:")
    fixes = error.locator("a.apply-fix")
    assert fixes.count() == 2
    text = error.locator(".fix").inner_text()
    assert text.index("remove --enable-two-batch-overlap") < text.index("--moe-a2a-backend")
    fixes.nth(1).click()
    page.wait_for_url("**/explain?**moe-a2a-backend**")
    query = parse_qs(urlparse(page.url).query)
    assert query["command"][0].endswith("--moe-a2a-backend deepep")
    assert query["arch"] == ["GlmMoeForCausalLM"]
    assert page.locator("li.finding.sev-error").count() == 0
    assert "No errors" in page.locator(".summary").inner_text()
    full_shot(page, "explain-profile-fixed", full_page=True)
