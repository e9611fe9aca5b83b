"""The `mnemo-sea` command line."""

import typer

app = typer.Typer(no_args_is_help=True, help="mnemo-sea: evidence archive and hybrid retrieval.")
