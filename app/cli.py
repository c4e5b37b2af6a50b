"""The `flagatlas` command: ingest, serve, reindex, explain."""

from __future__ import annotations

import typer

from app import explain_cli

cli = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


@cli.command()
def serve(
    db: str | None = typer.Option(None, "--db", help="Knowledge base (SQLite path or URL)."),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8000, "--port"),
) -> None:
    """Serve the dashboard (read-only on the knowledge base)."""
    from pathlib import Path

    import uvicorn

    from app.main import create_app
    from app.schema import database_url

    url = database_url(db)
    path = url.removeprefix("sqlite:///")
    if url.startswith("sqlite:///") and not Path(path).exists():
        typer.echo(f"No knowledge base at {path}: run `flagatlas ingest` first.")
        raise typer.Exit(1)
    uvicorn.run(create_app(url), host=host, port=port, log_level="info")


@cli.command()
def reindex(
    db: str | None = typer.Option(None, "--db", help="Knowledge base (SQLite path or URL)."),
    index: str | None = typer.Option(
        None, "--index", help="Index directory (default: beside the database, DB.search)."
    ),
) -> None:
    """Rebuild the search index and swap it in (a running server picks it up)."""
    from pathlib import Path

    from app.schema import database_url
    from app.search import build_index

    url = database_url(db)
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        typer.echo(f"No knowledge base at {url.removeprefix('sqlite:///')}.")
        raise typer.Exit(1)
    info = build_index(url, Path(index) if index else None)
    typer.echo(
        f"Indexed {info['docs']} distinct facts of {info['versions']} versions "
        f"in {info['seconds']:.2f}s: {info['path']}"
    )


# `flagatlas explain`: words after `--` (or after the first non-option word) are the command.
cli.command("explain", context_settings={"allow_interspersed_args": False})(explain_cli.explain)


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
