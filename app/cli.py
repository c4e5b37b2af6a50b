"""The `flagatlas` command: ingest, serve, reindex, explain."""

from __future__ import annotations

import typer

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


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
