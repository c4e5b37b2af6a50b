"""`flagatlas explain --version V -- <command...>`: the explain analysis in a terminal.

Exit status: 0 when the command has no errors, 1 when it has (at --version, or at the
--compare version), 2 when the input is unusable (unknown version, nothing to explain).
"""

from __future__ import annotations

import inspect
import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

import typer
from rich.console import Console
from rich.text import Text

STYLES = {"error": "bold red", "warning": "yellow", "info": "cyan"}
# The upgrade check's lists of messages, in the order printed: key, label, style.
UPGRADE_LISTS = (
    ("removed", "REMOVED", "red"),
    ("changed_meaning", "CHANGED", "yellow"),
    ("constraints_started", "STARTS", "yellow"),
    ("constraints_stopped", "STOPS", "dim"),
    ("findings_new", "NEW", "yellow"),
)


def command_text(words: list[str]) -> str:
    """One word is the command as pasted (quoted whole); several are argv words to re-join."""
    if len(words) == 1:
        return words[0]
    return shlex.join(words)


# Where an option takes a profile field otherwise than its JSON type: an SM as text (`sm90`
# too, as in the query string), config.json as a file to read.
OPTION_TYPES: dict[str, type] = {"sm": str, "config": Path, "draft_config": Path}
OPTION_HELP = {
    "config": "the model's config.json (a file)",
    "draft_config": "the draft model's config.json (a file), with speculative decoding",
}


def with_profile_options(command: Callable[..., None]) -> Callable[..., None]:
    """`command` with an option per profile field (kb.profile.ProfileFields: --arch,
    --sm, ... --config) before its last one (--profile); typer passes their values in
    the command's **profile_options keyword arguments."""
    from kb.profile import ProfileFields

    *own, last, _profile_options = inspect.signature(command, eval_str=True).parameters.values()
    options = []
    for name, info in ProfileFields.model_fields.items():
        kind = OPTION_TYPES.get(name) or next(
            t for t in get_args(info.annotation) or (info.annotation,) if t is not type(None)
        )
        options.append(
            inspect.Parameter(
                name,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=typer.Option(
                    info.default,
                    f"--{name}",
                    help=f"Profile: {OPTION_HELP.get(name, info.description)}.",
                ),
                annotation=kind if info.default is not None else kind | None,
            )
        )
    signature = inspect.Signature([*own, *options, last])
    command.__signature__ = signature  # type: ignore[attr-defined]
    return command


@with_profile_options
def explain(
    words: list[str] = typer.Argument(
        None, help="The launch command (after --), or nothing to read it from stdin."
    ),
    version: str | None = typer.Option(
        None, "--version", "-v", help="Version to check against (default: the newest)."
    ),
    compare_to: str | None = typer.Option(
        None, "--compare", help="Also check the command at this version (upgrade check)."
    ),
    db: str | None = typer.Option(None, "--db", help="Knowledge base (SQLite path or URL)."),
    as_json: bool = typer.Option(False, "--json", help="Print the API's JSON answer."),
    verbose: bool = typer.Option(
        False, "--all", help="Also list undecidable sites and info findings."
    ),
    profile_json: str | None = typer.Option(
        None, "--profile", help='Profile as JSON: {"arch", "quant", "platform", "sm", ...}.'
    ),
    **profile_options: Any,
) -> None:
    """Explain a launch command: each flag, the problems found, and the constraints it trips.

    With a deployment profile (--arch, --sm, --gpus, ... or --profile JSON), SGLang's own
    argument handling is replayed for that model and hardware: the effective configuration,
    and a verified fix for each error."""
    from sqlmodel import Session

    from cli.common import schema_line
    from kb.explain import explain as run
    from kb.explain.orchestrate import CommandRejected, check_command
    from kb.explain.predicates import Profile, ProfileError
    from kb.model_source import ModelPlaces, ModelUnavailable, with_model
    from kb.profile import ProfileFields
    from kb.queries import NotFound
    from kb.schema import SchemaMismatch, check_schema, database_url, make_engine

    text = command_text(list(words or [])) if words else sys.stdin.read()
    err = Console(stderr=True)
    if not text.strip():
        err.print("Nothing to explain: pass the command after --, or pipe it on stdin.")
        raise typer.Exit(2)
    url = database_url(db)
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        err.print(f"No knowledge base at {url.removeprefix('sqlite:///')}.", markup=False)
        raise typer.Exit(2)
    try:
        data = json.loads(profile_json) if profile_json else {}
        if not isinstance(data, dict):
            raise ProfileError("--profile must be a JSON object")
        for name, value in profile_options.items():
            if isinstance(value, Path):
                data[name] = value.read_text()
            elif ProfileFields.model_fields[name].default is not None:
                data.setdefault(name, value)  # --packages, --env: what --profile leaves out
            elif value is not None:
                data[name] = value  # the others override --profile
        # The model's config.json: --model, else the command's --model-path (a directory
        # here, or a Hugging Face id fetched once into the cache beside the knowledge base).
        check_command(text)  # a command over the bounds names no model to fetch
        data, origin = with_model(data, text, ModelPlaces.for_cli(url))
        profile = Profile.parse(data)
    except CommandRejected as exc:
        err.print(str(exc), markup=False)
        raise typer.Exit(2) from None
    except ModelUnavailable as exc:
        err.print(f"Unusable model: {exc}", markup=False)
        raise typer.Exit(2) from None
    except (ValueError, OSError) as exc:
        err.print(f"Unusable profile: {exc}", markup=False)
        raise typer.Exit(2) from None
    except RecursionError:  # json's own bound on --profile (a config inside is held to ours)
        err.print("Unusable profile: --profile nests too deeply.", markup=False)
        raise typer.Exit(2) from None
    engine = make_engine(url, readonly=True)
    try:
        check_schema(engine)
        with Session(engine) as session:
            result = run(session, version, text, compare_to, profile)
    except SchemaMismatch as exc:
        err.print(schema_line("explain", url, exc), markup=False, soft_wrap=True)
        raise typer.Exit(2) from None
    except NotFound as exc:
        hint = f" Did you mean {', '.join(exc.suggestions)}?" if exc.suggestions else ""
        err.print(exc.detail + hint, markup=False)
        raise typer.Exit(2) from None
    except ValueError as exc:
        err.print(str(exc), markup=False)
        raise typer.Exit(2) from None
    finally:
        engine.dispose()
    result.update(
        model_source=origin.source,
        model_notes=origin.notes,
        draft_model_source=origin.draft_source,
    )
    if as_json:  # the API model (kb/contract.py): what POST /api/explain answers
        from kb.contract import ExplainResult

        typer.echo(ExplainResult.model_validate(result).model_dump_json(indent=2))
    else:
        report(Console(highlight=False, soft_wrap=True), result, verbose)
    compared = result["compare"]["errors"] if result["compare"] else 0
    raise typer.Exit(1 if result["errors"] or compared else 0)


def _finding_lines(console: Console, finding: dict[str, Any], indent: str = "  ") -> None:
    line = Text(indent)
    line.append(f"{finding['severity'].upper():8}", style=STYLES.get(finding["severity"], ""))
    line.append(finding["message"])
    console.print(line)
    fixes = [finding["fix"], *finding.get("alternatives", [])] if finding.get("fix") else []
    for k, fix in enumerate(fixes):
        verb = next(v for v in ("add", "set", "remove") if v in fix)
        what = f"{verb} " + " ".join(fix[verb])
        label = "fix" if k == 0 else "or"
        through = fix.get("verified_through", "server_args").replace("_", " ")
        also = "".join(f" and {part}" for part in fix.get("also_checked", []))
        console.print(
            Text(f"{indent}{'':8}{label} (verified through {through}{also}): {what}", "green")
        )
    if finding.get("source"):
        src = finding["source"]
        console.print(Text(f"{indent}{'':8}{src['path']}:{src['line']}  {src['url']}", "dim"))


def _problems(items: list[dict[str, str]]) -> str:
    return ", ".join(
        f"{i['flag']} {i['problem']}" if i["problem"] in ("missing", "ambiguous") else i["message"]
        for i in items
    )


def report(console: Console, result: dict[str, Any], verbose: bool = False) -> None:
    head = Text("Explained at ", style="bold")
    head.append(result["version"], style="bold green")
    if result["launcher"]:
        head.append(f"   (launcher ignored: {result['launcher']})", style="dim")
    console.print(head)

    console.print(Text("\nFlags", style="bold"))
    for row in result["flags"]:
        line = Text(f"  {row['option']}")
        if row["name"] and row["name"] != row["option"]:
            line.append(f" → {row['name']}", style="dim")
        value = row["value"]
        if value is not None:
            shown = value if isinstance(value, str) else " ".join(value)
            line.append(f" = {shown}", style="green")
        if row["help"]:
            line.append(f"   {row['help']}", style="dim")
        console.print(line)
    if not result["flags"]:
        console.print(Text("  (none)", style="dim"))

    findings = [
        f
        for f in result["findings"]
        if verbose or (f["severity"] != "info" and f["kind"] != "undecidable")
    ]
    hidden = len(result["findings"]) - len(findings)
    console.print(Text("\nFindings", style="bold"))
    for finding in findings:
        _finding_lines(console, finding)
    if not findings:
        console.print(Text("  no errors or warnings", style="green"))
    if hidden:
        console.print(Text(f"  ({hidden} info/undecidable findings: --all shows them)", "dim"))

    if result.get("simulated"):
        _effective(console, result)

    console.print(Text("\nCompatibility range", style="bold"))
    for r in result["valid_in"]:
        span = r["from"] if r["from"] == r["to"] else f"{r['from']} … {r['to']}"
        count = f"{r['versions']} version{'s' if r['versions'] != 1 else ''}"
        line = Text(f"  valid in {span} ({count})")
        if r["limited_from"]:
            line.append(f"; in {r['before']}: {_problems(r['limited_from'])}")
        if r["limited_to"]:
            line.append(f"; in {r['after']}: {_problems(r['limited_to'])}")
        console.print(line)
    if not result["valid_in"]:
        console.print(Text("  no ingested version parses this command", "yellow"))

    compare = result["compare"]
    if compare:
        console.print(Text(f"\nUpgrade check {compare['from']} → {compare['to']}", style="bold"))
        for key, label, style in UPGRADE_LISTS:
            for item in compare[key]:
                console.print(Text(f"  {label:8} {item['message']}", style=style))
        for item in compare["defaults_changed"]:
            console.print(
                Text(f"  DEFAULT  {item['flag']}: {item['from']} → {item['to']}", style="dim")
            )
        console.print(f"  {compare['errors']} error(s) at {compare['to']}", markup=False)


def _effective(console: Console, result: dict[str, Any]) -> None:
    from kb.model_source import source_words

    title = "\nEffective configuration"
    if result.get("profile_text"):
        title += f" for {result['profile_text']}"
    console.print(Text(title, style="bold"))
    if result.get("model_source") or result.get("model_notes"):
        console.print(Text(f"  model config: {source_words(result.get('model_source'))}"))
        for note in result.get("model_notes") or []:
            console.print(Text(f"    {note}", style="dim"))
    if result.get("draft_model_source"):
        draft = source_words(result["draft_model_source"])
        console.print(Text(f"  draft model config: {draft}"))
    sure = [e for e in result["effective"] if e["certain"]]
    for e in sure:
        line = Text(f"  {e['flag'] or e['field']}: {e['from_text']} → ")
        line.append(e["to_text"], style="green")
        src = e["source"]
        line.append(f"   {src['path'].rsplit('/', 1)[-1]}:{src['line']}", style="dim")
        console.print(line)
        if e["condition"]:
            console.print(Text(f"      when {e['condition']}", style="dim"))
    if not sure:
        console.print(Text("  no setting changes", style="dim"))
    maybe = [e for e in result["effective"] if not e["certain"]]
    if maybe:
        console.print(Text(f"  {len(maybe)} more depend on facts not given:", style="dim"))
        for e in maybe:
            needs = ", ".join(e["needs"])
            console.print(Text(f"    {e['flag'] or e['field']} (needs: {needs})", style="dim"))
    for a in result.get("assumptions", []):
        console.print(Text(f"  assumed: {a}", style="dim"))
