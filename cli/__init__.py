"""The `flagatlas` command: ingest, serve, reindex, check-docs, explain."""

from __future__ import annotations

import typer

from cli import explain as explain_cli
from cli.common import schema_line

cli = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)

# Where the search index lives (kb.search.default_index_dir), for the commands' help.
INDEX_PLACE = (
    "FLAGATLAS_INDEX, else beside a SQLite database (DB.search), else (PostgreSQL) "
    "<database>@<host>_<port>.search in $XDG_DATA_HOME/flagatlas/ (default "
    "~/.local/share/flagatlas/)"
)


@cli.command()
def ingest(
    repo: str = typer.Option(
        None,
        "--repo",
        envvar="SGLANG_REPO",
        show_default="https://github.com/sgl-project/sglang.git",
        help="SGLang git URL (cloned once into the data directory) or local path (read in place).",
    ),
    tags: str | None = typer.Option(
        None, "--tags", help="Glob of tags to ingest, e.g. '*' (default: release tags vX.Y.Z…)."
    ),
    ref: list[str] = typer.Option(
        [], "--ref", help="REF[=LABEL]: also ingest a branch, commit or tag under a label."
    ),
    since: str | None = typer.Option(None, "--since", help="Only versions from this one on."),
    latest: int | None = typer.Option(None, "--latest", help="Only the newest N versions."),
    # No envvar here: database_url() reads FLAGATLAS_DB itself, after DATABASE_URL (as every
    # other command does); typer's envvar made FLAGATLAS_DB win over DATABASE_URL.
    db: str | None = typer.Option(
        None,
        "--db",
        help="SQLite path (default: FLAGATLAS_DB, else data/flagatlas.db); DATABASE_URL "
        "takes any SQLAlchemy URL.",
    ),
    web_url: str | None = typer.Option(
        None,
        "--web-url",
        help="Where citations link (default: the repo if on GitHub, else "
        "https://github.com/sgl-project/sglang).",
    ),
    force: bool = typer.Option(False, "--force", help="Re-extract versions already ingested."),
    rebuild: bool = typer.Option(
        False,
        "--rebuild",
        help="Drop the knowledge base and ingest from scratch (needed after a schema change).",
    ),
    jobs: int = typer.Option(0, "--jobs", help="Worker processes (default: all cores)."),
    as_json: bool = typer.Option(False, "--json", help="Print a machine-readable summary."),
) -> None:
    """Extract flags, enums, constraint and usage sites from SGLang's history into the KB,
    and update the search index (where: FLAGATLAS_INDEX, else beside a SQLite database,
    else under $XDG_DATA_HOME/flagatlas/; `flagatlas reindex --help`)."""
    import atexit
    import gc
    import json
    import os
    import shlex
    import sys
    from pathlib import Path

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from sqlalchemy.exc import ArgumentError

    from ingest.git_source import DEFAULT_REPO, RepoUnavailable, web_url_for
    from ingest.runner import IngestOptions, run, summary_json
    from kb.schema import SchemaMismatch, database_url

    # At exit the ingest's objects (~300,000 after a full ingest, in reference cycles) are
    # left to the OS: the collector's last pass over them cost ~0.5 s before the process
    # ended. (At exit, not here: a test calling this command goes on collecting.)
    atexit.register(gc.freeze)
    repo = repo or DEFAULT_REPO
    url = database_url(db)
    data_dir = (
        Path(url.removeprefix("sqlite:///")).parent
        if url.startswith("sqlite:///")
        else Path("data")
    )
    refs = [(r.split("=", 1)[0], r.split("=", 1)[1] if "=" in r else None) for r in ref]
    opts = IngestOptions(
        repo=repo,
        db_url=url,
        web_url=web_url or web_url_for(repo),
        cache_dir=data_dir / "repos",
        tags=tags,
        refs=refs,
        since=since,
        latest=latest,
        force=force,
        rebuild=rebuild,
        jobs=jobs or os.cpu_count() or 1,
    )
    console = Console(stderr=as_json)
    progress = Progress(
        TextColumn("ingest"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=as_json or not console.is_terminal,
    )
    task = progress.add_task("versions", total=None)

    def on_version(s) -> None:  # type: ignore[no-untyped-def]
        progress.advance(task)
        if not as_json:
            progress.console.print(
                f"{s.version:<22} era {s.era}  {s.flags:4d} flags  {s.enums:3d} enums  "
                f"{s.constraints:4d} constraint sites  {s.usages:5d} usage sites  "
                f"{s.choice_sites:5d} choice sites  {s.warnings:3d} warnings  {s.seconds:5.2f}s",
                highlight=False,
            )

    try:
        with progress:
            summary = run(opts, lambda total: progress.update(task, total=total), on_version)
    except SchemaMismatch as exc:  # the same command again, with --rebuild
        again = shlex.join(["flagatlas", *sys.argv[1:], "--rebuild"])
        print(schema_line("ingest", url, exc, again), file=sys.stderr)
        raise typer.Exit(2) from None
    except (RepoUnavailable, ValueError) as exc:
        print(f"flagatlas ingest: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    except (ModuleNotFoundError, ArgumentError) as exc:  # a DATABASE_URL without its driver
        print(f"flagatlas ingest: cannot open the database {url}: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        print(
            "flagatlas ingest: interrupted; finished versions are kept, re-run to continue",
            file=sys.stderr,
        )
        raise typer.Exit(130) from None
    if as_json:
        print(json.dumps(summary_json(summary), indent=2))
    else:
        console.print(
            f"{len(summary.versions)} versions ingested, "
            f"{len(summary.skipped)} already up to date; "
            f"{summary.blobs_analyzed} blobs analyzed, {summary.blobs_cached} from cache; "
            f"{summary.seconds:.1f}s -> {url}",
            highlight=False,
        )


@cli.command()
def serve(
    db: str | None = typer.Option(None, "--db", help="Knowledge base (SQLite path or URL)."),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8000, "--port"),
    workers: int = typer.Option(
        0, "--workers", help="Server processes (default: the machine's cores)."
    ),
) -> None:
    """Serve the dashboard (read-only on the knowledge base); the search index is built
    first if missing or stale (where: FLAGATLAS_INDEX, else beside a SQLite database, else
    under $XDG_DATA_HOME/flagatlas/; `flagatlas reindex --help`)."""
    import os

    from app.main import create_app
    from cli.serve import ensure_index, serve_workers, uvicorn_config

    url = _readable_kb("serve", db, ": run `flagatlas ingest` first.")
    ensure_index(url)
    count = workers or os.cpu_count() or 1
    if count == 1:
        import uvicorn

        uvicorn.Server(uvicorn_config(create_app(url), host=host, port=port)).run()
        return
    serve_workers(lambda: create_app(url), host, port, count)


def _readable_kb(command: str, db: str | None, missing: str = ".") -> str:
    """The URL of the knowledge base `db` names (a path or a URL), once it is known to be there
    and of this schema; else the reason (`missing` ends the line of a SQLite file that is
    not there) and exit 1."""
    from pathlib import Path

    from kb.schema import SchemaMismatch, check_schema, database_url, make_engine

    url = database_url(db)
    path = url.removeprefix("sqlite:///")
    if url.startswith("sqlite:///") and not Path(path).exists():
        typer.echo(f"No knowledge base at {path}{missing}")
        raise typer.Exit(1)
    engine = make_engine(url, readonly=True)
    try:
        check_schema(engine)
    except SchemaMismatch as exc:
        typer.echo(schema_line(command, url, exc), err=True)
        raise typer.Exit(1) from None
    finally:
        engine.dispose()
    return url


@cli.command()
def reindex(
    db: str | None = typer.Option(None, "--db", help="Knowledge base (SQLite path or URL)."),
    index: str | None = typer.Option(
        None, "--index", help=f"Index directory (default: {INDEX_PLACE})."
    ),
) -> None:
    """Rebuild the search index and swap it in (a running server picks it up)."""
    from pathlib import Path

    from kb.search import default_index_dir
    from kb.search_build import build_index

    url = _readable_kb("reindex", db)
    info = build_index(url, Path(index) if index else default_index_dir(url))
    typer.echo(
        f"Indexed {info['docs']} distinct facts of {info['versions']} versions "
        f"in {info['seconds']:.2f}s: {info['path']}"
    )


@cli.command("check-docs")
def check_docs(
    db: str | None = typer.Option(None, "--db", help="Knowledge base (SQLite path or URL)."),
    version: list[str] = typer.Option(
        [], "--version", help="Only this version (repeatable; default: every version)."
    ),
    jobs: int = typer.Option(0, "--jobs", help="Worker processes (default: all cores)."),
) -> None:
    """Check every launch command of the docs with explain at its version and store the
    verdicts (the docs-commands page, the diff and the examples read them; a version already
    checked is skipped, a re-ingested one is checked again). Models are read from the model
    cache alone: nothing is fetched."""
    import os

    from kb.doc_commands import store_checks
    from kb.model_source import default_cache_dir
    from kb.schema import make_engine

    url = _readable_kb("check-docs", db)
    engine = make_engine(url)

    def said(name: str, count: int, seconds: float) -> None:
        typer.echo(f"{name:<24} {count:5d} distinct commands checked in {seconds:6.2f}s")

    try:
        count = jobs or os.cpu_count() or 1
        done = store_checks(engine, default_cache_dir(url), version or None, said, count)
    finally:
        engine.dispose()
    typer.echo(f"{len(done)} versions checked")


@cli.command()
def openapi() -> None:
    """Print the OpenAPI description of the JSON API (docs/openapi.json is this output)."""
    import json

    from app.main import create_app

    # The description does not depend on the data: an empty in-memory database will do.
    spec = create_app("sqlite://").openapi()
    typer.echo(json.dumps(spec, indent=2, ensure_ascii=False))


# `flagatlas explain`: words after `--` (or after the first non-option word) are the command.
cli.command("explain", context_settings={"allow_interspersed_args": False})(explain_cli.explain)


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
