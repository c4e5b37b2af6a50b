"""The `flagatlas` command: ingest, serve, reindex, explain."""

from __future__ import annotations

import typer

cli = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
