"""What the diff pairs and folds, on a knowledge base ingested from a synthetic repository
(tests/diff_moves_repos.py): a site moved or reworded is one entry, a condition only
restructured (or changed only through an earlier `elif` branch) is folded out of the
headline, `None -> argparse.SUPPRESS` is no default change, renames with no alias, dest or
deprecation left behind are found, and the diff narrows to a flag or a help section."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from tests.diff_moves_repos import MOVED, NEW_WORDS, OLD_WORDS, build_moves_kb

API = "/api/diff/v2.0.0/v2.1.0"
PAGE = "/diff/v2.0.0...v2.1.0"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    db = build_moves_kb(tmp_path_factory.mktemp("moveskb"))
    with TestClient(create_app(f"sqlite:///{db}")) as c:
        yield c


def text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_a_moved_or_reworded_site_is_one_entry(client: Any) -> None:
    body = client.get(API).json()
    assert body["constraints_added"] == [] and body["constraints_removed"] == []
    moves = {m["to"]["message"]: m for m in body["constraints_moved"]}
    assert set(moves) == {f"ValueError: {MOVED}", f"ValueError: {NEW_WORDS}"}
    moved = moves[f"ValueError: {MOVED}"]
    assert (moved["from"]["function"], moved["to"]["function"]) == (
        "ServerArgs._handle_parallelism",
        "ServerArgs._handle_memory",
    )
    assert moved["moved"] and moved["reworded"] and moved["message"] == []
    assert ["+", "self.page_size is not None and"] in moved["condition"]
    reworded = moves[f"ValueError: {NEW_WORDS}"]
    assert reworded["from"]["message"] == f"ValueError: {OLD_WORDS}"
    assert not reworded["moved"] and reworded["reworded"]
    assert reworded["message"][1:] == [["-", "supported."], ["+", "supported yet."]]
    assert body["summary"]["constraints_moved"] == 2
    # Backwards, the same pairs turned around.
    back = client.get("/api/diff/v2.1.0/v2.0.0").json()
    assert {m["from"]["message"] for m in back["constraints_moved"]} == set(moves)


def test_suppress_is_no_default_change(client: Any) -> None:
    body = client.get(API).json()
    assert [c["name"] for c in body["changed"] if c["field"] == "default"] == ["--chunk-size"]
    html = client.get(PAGE).text
    assert "SUPPRESS" not in html


def test_renames_without_alias_dest_or_deprecation(client: Any) -> None:
    body = client.get(API).json()
    renames = {(r["from"], r["to"], r["via"]) for r in body["renamed"]}
    assert renames == {
        ("--enable-fast-sampler", "--disable-fast-sampler", "inverted"),
        ("--widget-timeout", "--widget-deadline", "help"),
    }
    assert body["added"] == [] and body["removed"] == []
    page = text(client.get(PAGE).text.split('id="renamed"')[1].split('id="changed"')[0])
    assert "--enable-fast-sampler → --disable-fast-sampler inverted" in page
    assert "--widget-timeout → --widget-deadline the same help text" in page


def test_refactors_are_folded_and_counted(client: Any) -> None:
    body = client.get(API).json()
    meaning = {
        (c["to"]["message"] or str(c["to"]["writes"])): c["meaning"]
        for c in body["constraints_changed"]
    }
    assert meaning == {
        # `if a and b:` split into `if a:` / `if b:`
        "ValueError: Overlap does not run with pipelines.": "same",
        # the first branch's test widened: told once, by its own site
        "{'chunk_size': '1024'}": "changed",
        # the `elif` and `else` sites only carry that test negated
        "ValueError: gamma runs on at most 4 GPUs.": "earlier_branch",
        "{'page_size': '16'}": "earlier_branch",
        "The default MoE backend is slow.": "earlier_branch",
    }
    assert body["summary"]["constraints_folded"] == 4
    html = client.get(PAGE).text
    headline, folded = html.split('id="constraints-folded"')
    assert headline.count('<details class="cgroup"') == 1
    assert "chunk_size = 1024" in headline and "gamma runs" not in headline
    assert "4 refactors folded" in text(headline.split('id="summary"')[1].split("</nav>")[0])
    # One click away: a closed fold holding the four sites.
    assert re.search(r'<details class="folded">\s*<summary>Show the 4 sites', folded)
    assert folded.count('<li class="kind-') == 4


def test_filter_by_flag_and_topic(client: Any) -> None:
    by_flag = client.get(API, params={"flag": "page-size"}).json()
    assert by_flag["flag"] == "page-size" and by_flag["topic"] is None
    assert by_flag["renamed"] == [] and by_flag["changed"] == []
    assert [m["to"]["message"] for m in by_flag["constraints_moved"]] == [f"ValueError: {MOVED}"]
    # The override that writes page_size (its condition changed through an earlier branch).
    assert [c["to"]["writes"] for c in by_flag["constraints_changed"]] == [{"page_size": "16"}]
    assert by_flag["summary"]["constraints_moved"] == 1
    by_topic = client.get(API, params={"topic": "memory"}).json()
    assert [c["name"] for c in by_topic["changed"]] == ["--chunk-size"]
    assert by_topic["renamed"] == []
    assert {m["to"]["message"] for m in by_topic["constraints_moved"]} == {f"ValueError: {MOVED}"}
    both = client.get(API, params={"flag": "sampler", "topic": "Model and tokenizer"}).json()
    assert [r["to"] for r in both["renamed"]] == ["--disable-fast-sampler"]
    # The page: a plain GET form (works without JavaScript) that keeps what was asked.
    html = client.get(PAGE, params={"flag": "page-size"}).text
    form = html.split('class="filter diff-filter"')[1].split("</form>")[0]
    assert f'action="{PAGE}"' in form and 'method="get"' in form
    assert 'name="flag" value="page-size"' in form
    assert '<option value="Memory">Memory</option>' in form
    assert "Show everything" in form
    assert 'href="/api/diff/v2.0.0/v2.1.0?flag=page-size"' in html  # the JSON twin, filtered
    assert "widget" not in text(html.split('id="flags"')[1])
    selected = client.get(PAGE, params={"topic": "Memory"}).text
    assert '<option value="Memory" selected>' in selected


def test_a_message_about_another_name_is_another_check() -> None:
    from kb.diff_fold import pair_moved
    from kb.schema import ConstraintSite

    def site(message: str, function: str = "ServerArgs._check") -> ConstraintSite:
        return ConstraintSite(
            version_id=1,
            kind="raise",
            function=function,
            message=message,
            path="p.py",
            line=1,
            end_line=1,
            flags='["--attention-backend"]',
        )

    gone = [site("ValueError: TRTLLM MHA backend is only supported on SM100 GPUs.")]
    came = [site("ValueError: CuteDSL MLA backend is only supported on SM100 GPUs.")]
    assert pair_moved(gone, came)[0] == []
    # A name renamed (NSA -> DSA) reads alike: the same check.
    gone = [site("Set NSA backends: prefill={self.nsa_prefill_backend}.")]
    came = [site("Set DSA backends: prefill={self.dsa_prefill_backend}.", "handle_dsa")]
    assert len(pair_moved(gone, came)[0]) == 1


def test_a_test_of_the_sites_own_is_no_earlier_branch() -> None:
    from kb.diff_fold import condition_meanings

    own = "self.tp_size > 4"
    was = ["not (self.backend == 'a')", "not is_npu()", own]
    assert condition_meanings(
        [
            # an earlier branch (ingest writes it `not (...)`) widened: folded
            (was, ["not (self.backend in ['a', 'b'])", "not is_npu()", own]),
            # the site's own `not x` gained a test: a new requirement
            (was, ["not (self.backend == 'a')", "not is_npu() and not is_xpu()", own]),
            # the same tests, nested otherwise
            (["self.a and self.b"], ["self.a", "self.b"]),
        ]
    ) == ["earlier_branch", "changed", "same"]
