"""A deprecated flag's replacement links only flags the version has: a shell brace pair
(`--x-{decode,prefill}=disabled`) names two flags, each linked (hand-built KB)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi.testclient import TestClient
from planted_kb import build_kb, flag

from app.main import create_app
from ingest.flags import _finish_deprecation
from kb.queries import deprecation_note
from kb.replacements import expand_braces

NO_SITES: dict[str, Any] = {"constraints": [], "enums": {}}


def site(key: str, line: int, flags: list[str]) -> tuple[Any, ...]:
    return (key, "raise", "ServerArgs.check", f"{key} says no", line, {"flags": flags})


SPEC = {
    **NO_SITES,
    "constraints": [
        site("k-decode", 50, ["--graph-backend-decode"]),
        site("k-prefill", 60, ["--graph-backend-prefill"]),
        site("k-old", 70, ["--disable-graph"]),
        site("k-other", 80, ["--other-knob"]),
    ],
    "flags": [
        flag("--other-knob", type="int", line=50),
        flag("--graph-backend-decode", choices=["full", "disabled"]),
        flag("--graph-backend-prefill", choices=["full", "disabled"], line=20),
        flag(
            "--disable-graph",
            deprecated=True,
            deprecated_message="Deprecated. Use --graph-backend-{decode,prefill}=disabled instead.",
            help="Deprecated. Use --graph-backend-{decode,prefill}=disabled instead.",
            replacement="--graph-backend-{decode,prefill}=disabled",
            action="store_true",
            takes_value=False,
            line=30,
        ),
        flag(
            "--old-widget",
            deprecated=True,
            deprecated_message="Deprecated. Use --new-widget instead.",
            replacement="--new-widget",  # not a flag of the version
            line=40,
        ),
    ],
}


# The next version drops the deprecated flags.
NEXT = {**NO_SITES, "flags": [f for f in SPEC["flags"] if not f.get("deprecated")]}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    url = build_kb(tmp_path_factory.mktemp("repl") / "kb.db", [("p1", SPEC), ("p2", NEXT)])
    return TestClient(create_app(url), follow_redirects=False)


def notice(client: TestClient, name: str) -> str:
    page = client.get(f"/v/p1/flags/{name}")
    assert page.status_code == 200
    found = re.search(r'<div class="notice warn">(.*?)</div>', page.text, re.S)
    assert found is not None
    return found.group(1)


def test_a_brace_pair_links_both_flags(client: TestClient) -> None:
    text = notice(client, "--disable-graph")
    hrefs = re.findall(r'href="([^"]*)"', text)
    assert hrefs == ["/v/p1/flags/--graph-backend-decode", "/v/p1/flags/--graph-backend-prefill"]
    assert "<code>--graph-backend-decode=disabled</code></a> and <a" in text
    for href in hrefs:
        assert client.get(href).status_code == 200


def test_the_notice_says_the_deprecation_once(client: TestClient) -> None:
    # The message "Deprecated. Use --graph-backend-{decode,prefill}=disabled instead." is what
    # the notice says with both flags linked: neither it nor the help is repeated.
    text = re.sub(r"<[^>]+>|\s+", " ", notice(client, "--disable-graph")).split()
    assert " ".join(text) == (
        "Deprecated. Use --graph-backend-decode=disabled and "
        "--graph-backend-prefill=disabled instead."
    )
    page = client.get("/v/p1/flags/--disable-graph").text
    assert 'class="help-full"' not in page and "No help text" not in page
    found = client.get("/api/explain", params={"version": "p1", "command": "x --disable-graph"})
    (dep,) = [f for f in found.json()["findings"] if f["kind"] == "deprecated"]
    assert "(" not in dep["message"]  # no "(Deprecated. Use … instead.)" after it


def test_deprecation_note_keeps_what_the_notice_does_not_say() -> None:
    assert deprecation_note("Deprecated alias for --x.", "--x") == ""
    assert deprecation_note("[Deprecated] Please use `--x` instead.", "--x") == ""
    assert (
        deprecation_note("[Deprecated] Use --x {a,b} instead. 'c' maps to 'a'.", "--x")
        == "'c' maps to 'a'."
    )
    assert deprecation_note("(Deprecated) Enable the old kernel.", None) == "Enable the old kernel."
    assert deprecation_note("Note: --y is deprecated. Use --x instead.", "--x") == (
        "Note: --y is deprecated."
    )
    assert deprecation_note("Use --x-other instead.", "--x") == "Use --x-other instead."
    assert deprecation_note(None, "--x") == ""
    # a replacement with its value, written `'--x v'` in the message
    said = "'--old' is deprecated. Please use '--x v' instead."
    assert deprecation_note(said, "--x=v") == "'--old' is deprecated."
    assert deprecation_note("Use --x=v instead.", "--x=v") == ""


def test_a_replacement_that_is_no_flag_is_not_linked(client: TestClient) -> None:
    text = notice(client, "--old-widget")
    assert "href" not in text.split("Use", 1)[1] and "<code>--new-widget</code>" in text


def test_expand_braces() -> None:
    assert expand_braces("--x-{decode,prefill}=off") == ["--x-decode=off", "--x-prefill=off"]
    assert expand_braces("--{a,b}-{c,d}") == ["--a-c", "--a-d", "--b-c", "--b-d"]
    assert expand_braces("--x") == ["--x"]
    assert expand_braces("--x {zigzag}") == ["--x {zigzag}"]  # no pair: left as it is


def test_a_help_text_replacement_keeps_its_braces() -> None:
    # Without a literal new_flag=, the replacement is read from the help: the brace pair is
    # part of the name (it was cut at the brace: `--graph-backend-`, no flag at all), and
    # the value stays with it, as replacements read from other words keep theirs.
    found: dict[str, Any] = {
        "name": "--disable-graph",
        "action": "store_true",
        "help": "Deprecated. Use --graph-backend-{decode,prefill}=disabled instead.",
        "deprecated": False,
    }
    _finish_deprecation(found, None)
    assert found["replacement"] == "--graph-backend-{decode,prefill}=disabled"
    found = {**found, "help": "[Deprecated] Use --cp-mode {zigzag,interleave} instead."}
    _finish_deprecation(found, None)
    assert found["replacement"] == "--cp-mode"


def test_explain_names_both_flags_of_a_brace_pair(client: TestClient) -> None:
    command = "python -m sglang.launch_server --disable-graph"
    found = client.get("/api/explain", params={"version": "p1", "command": command}).json()
    (dep,) = [f for f in found["findings"] if f["kind"] == "deprecated"]
    assert (
        "use --graph-backend-decode=disabled and --graph-backend-prefill=disabled instead"
        in dep["message"]
    )
    # The flags it names, braces expanded, next to SGLang's own spelling (kept as it was).
    assert dep["replacement"] == "--graph-backend-{decode,prefill}=disabled"
    assert dep["replacements"] == ["--graph-backend-decode", "--graph-backend-prefill"]
    command = "python -m sglang.launch_server --old-widget w"
    found = client.get("/api/explain", params={"version": "p1", "command": command}).json()
    (dep,) = [f for f in found["findings"] if f["kind"] == "deprecated"]
    assert (dep["replacement"], dep["replacements"]) == ("--new-widget", [])  # no such flag


def test_explain_page_links_each_replacement(client: TestClient) -> None:
    command = "python -m sglang.launch_server --disable-graph"
    page = client.get("/explain", params={"version": "p1", "command": command}).text
    found = re.search(r'<div class="replacements">(.*?)</div>', page, re.S)
    assert found is not None
    hrefs = re.findall(r'href="([^"]*)"', found.group(1))
    assert hrefs == ["/v/p1/flags/--graph-backend-decode", "/v/p1/flags/--graph-backend-prefill"]


def test_an_upgrade_names_the_flags_replacing_a_removed_one(client: TestClient) -> None:
    command = "python -m sglang.launch_server --disable-graph"
    params = {"version": "p1", "command": command, "compare": "p2"}
    (removed,) = client.get("/api/explain", params=params).json()["compare"]["removed"]
    assert removed["replacement"] == "--graph-backend-{decode,prefill}=disabled"
    assert removed["replacements"] == ["--graph-backend-decode", "--graph-backend-prefill"]
    page = client.get("/explain", params=params).text
    assert (
        'does not exist in p2; use --graph-backend-{decode,prefill}=disabled → <a class="flag"'
        ' href="/v/p2/flags/--graph-backend-decode">' in page
    )


def keys(client: TestClient, flag: str) -> tuple[list[str], dict[str, list[str]]]:
    data = client.get("/api/v/p1/constraints", params={"flag": flag}).json()
    return [c["key"] for c in data["constraints"]], data["replacements"]


def test_the_constraints_filter_follows_a_flag_to_every_flag_replacing_it(
    client: TestClient,
) -> None:
    both = ["--graph-backend-decode", "--graph-backend-prefill"]
    for name in ("--disable-graph", "disable_graph"):  # any of its names
        assert keys(client, name) == (["k-decode", "k-prefill", "k-old"], {"--disable-graph": both})
    # The flags replacing it do not follow it back; a replacement naming no flag adds none.
    assert keys(client, "--graph-backend-decode") == (["k-decode"], {})
    assert keys(client, "--old-widget") == ([], {})
    assert keys(client, "graph-backend") == (["k-decode", "k-prefill"], {})  # part of a name
    page = client.get("/v/p1/constraints", params={"flag": "--disable-graph"}).text
    note = re.search(r'<p class="notice replaced">(.*?)</p>', page, re.S)
    assert note is not None
    assert re.findall(r'href="([^"]*)"', note.group(1)) == [f"/v/p1/flags/{n}" for n in both]
    assert "the list shows the constraints of all of them" in note.group(1)
    assert "3 sites" in page
    assert "notice replaced" not in client.get("/v/p1/constraints?flag=--graph-backend-decode").text
