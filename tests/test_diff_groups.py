"""The diff as a summary, on a knowledge base ingested from a synthetic repository where one
upstream `if` is split (tests/diff_repos.py): one entry for the sites whose condition
changed with it, flags by help section, counts first, additions and removals marked by a
symbol and a word. The JSON twin carries the same grouping."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from tests.diff_repos import ADDED_FLAGS, SECTIONS, SPLIT_SITES, build_diff_kb

URL = "/diff/v1.0.0...v1.1.0"
CAUSE = "model_arch in ['DeepNetV3ForCausalLM']"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    db = build_diff_kb(tmp_path_factory.mktemp("diffkb"))
    with TestClient(create_app(f"sqlite:///{db}")) as c:
        yield c


def text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_api_groups_condition_changes_by_root_cause(client: Any) -> None:
    body = client.get("/api/diff/v1.0.0/v1.1.0").json()
    assert body["summary"]["constraints_changed"] == SPLIT_SITES + 1
    assert body["summary"]["condition_groups"] == 2
    first, rest = body["condition_groups"]
    assert (first["change"], first["condition"], first["count"]) == ("gained", CAUSE, SPLIT_SITES)
    changed = body["constraints_changed"]
    assert sorted(first["items"] + rest["items"]) == list(range(len(changed)))
    # Sites in the `elif` branches carry the cause negated; each says what it gained and lost.
    sites = [changed[i] for i in first["items"]]
    negated = [s for s in sites if "not (model_arch in ['DeepNetV3ForCausalLM'])" in s["gained"]]
    assert len(negated) == SPLIT_SITES - 6
    assert all(s["lost"] for s in sites)
    assert rest["count"] == 1 and "not in ['flashinfer', 'fa3']" in rest["condition"]


def test_api_flags_carry_their_section(client: Any) -> None:
    body = client.get("/api/diff/v1.0.0/v1.1.0").json()
    assert len(body["added_flags"]) == ADDED_FLAGS
    sections = {f["name"]: f["section"] for f in body["added_flags"]}
    assert sections["--max-total-tokens"] == "Memory and scheduling"
    assert {c["name"]: c["section"] for c in body["changed"]}["--attention-backend"] == (
        "Kernel backend"
    )


def test_page_counts_first_with_anchors(client: Any) -> None:
    html = client.get(URL).text
    nav = html.split('id="summary"')[1].split("</nav>")[0]
    assert f"{ADDED_FLAGS} added" in text(nav) and "from 1 cause" in text(nav)
    assert f"{SPLIT_SITES} refactors folded" in text(nav)
    assert html.index('id="summary"') < html.index('id="flags"')
    for anchor in re.findall(r'href="#([\w-]+)"', nav):
        assert f'id="{anchor}"' in html, anchor


def test_page_one_entry_per_cause_and_flags_by_section(client: Any) -> None:
    html = client.get(URL).text
    headline, folded = html.split('id="constraints-folded"')
    # The one rewrite of a site's own test leads; the split `if` is folded: the sites under
    # it AND the same tests as before, those in its `elif` branches test the same themselves.
    causes = re.findall(r'<details class="cgroup"[^>]*id="cause-\d+"', headline)
    assert len(causes) == 1 and "Condition gained" not in text(headline)
    assert "not in [&#39;flashinfer&#39;, &#39;fa3&#39;]" in headline
    assert f"{SPLIT_SITES} sites" in text(folded.split("</h3>")[0])
    # The split `if`: one entry naming the clause, its sites folded inside it.
    assert len(re.findall(r'<details class="cgroup"[^>]*id="folded-\d+"', folded)) == 1
    assert text(folded).count("Condition gained") == 1
    entry = folded.split('id="folded-1"')[1]
    assert "model_arch in [&#39;DeepNetV3ForCausalLM&#39;]" in entry
    assert f"{SPLIT_SITES} sites, {SPLIT_SITES - 6} of them negated" in text(entry)
    assert entry.count('<li class="kind-') == SPLIT_SITES
    assert not folded.split('id="folded-1"')[0].endswith(" open")  # folded
    # 25 added flags is a long list: one closed group per section, named with its count.
    added = html.split('id="added"')[1].split('id="removed"')[0]
    assert added.count('<details class="dgroup">') == len(SECTIONS)
    assert "Memory and scheduling" in added and "5 added" in text(added)


def test_additions_and_removals_say_so_in_words(client: Any) -> None:
    html = client.get(URL).text
    # Lists under a heading that says "Added" (or "Removed"): "+" (or "−") on every item.
    added = html.split('id="added"')[1].split('id="removed"')[0]
    assert '<span class="visually-hidden">added </span>Added' in added
    assert added.count('<span class="sym add" aria-hidden="true">+</span>') == ADDED_FLAGS + 1
    removed = html.split('id="removed"')[1].split('id="renamed"')[0]
    assert '<span class="sym del" aria-hidden="true">−</span>' in removed
    assert '<span class="visually-hidden">removed </span>Removed' in removed
    # A choice added to a flag: "+" and the word, not a green background alone.
    changed = html.split('id="changed"')[1].split('id="constraints"')[0]
    assert re.search(r'<ins class="item">.*?added </span><code>fa4</code></ins>', changed)


def test_short_lists_are_open_by_section(client: Any) -> None:
    html = client.get("/diff/v1.1.0...v1.0.0").text  # backwards: 1 "added", 25 "removed"
    added = html.split('id="added"')[1].split('id="removed"')[0]
    assert '<dl class="by-group">' in added and "<details" not in added


def test_long_site_lists_show_a_few_per_group_and_link_the_rest(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.views import diff

    monkeypatch.setattr(diff, "LONG", 2)
    monkeypatch.setattr(diff, "FEW", 1)
    asked = {"flag": "backend"}  # a filter, kept by the links
    body = client.get("/api/diff/v1.0.0/v1.1.0", params=asked).json()  # lists them all
    by_function: dict[str, int] = {}
    for site in body["constraints_added"]:
        by_function[site["function"]] = by_function.get(site["function"], 0) + 1
    name, total = max(by_function.items(), key=lambda kv: kv[1])
    assert total > 1
    html = client.get(URL, params=asked).text
    added = html.split('id="constraints-added"')[1].split('id="constraints-removed"')[0]
    assert f"{len(body['constraints_added'])} " in text(added.split("</h3>")[0]) + " "
    shown = name.replace("_", "_<wbr>").replace(".", ".<wbr>")
    group = added.split(f'<span class="gname">{shown}</span>')[1].split("</dd>")[0]
    assert group.count('<li class="kind-') == 1
    link = re.search(r'<a href="([^"]+)#more">Show all (\d+)</a>', group)
    assert link is not None and int(link.group(2)) == total
    url = link.group(1).replace("&amp;", "&")
    assert "flag=backend" in url
    opened = client.get(url).text.split('id="more"')[1].split("</dd>")[0]
    assert opened.count('<li class="kind-') == total and "Show all" not in opened
