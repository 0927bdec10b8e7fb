"""Options more than one `advisor` command takes, declared once."""

import typer

from gpuadvisor.cli.settings import envvar

ARTIFACT_OPTION = typer.Option(
    None, "--artifact", envvar=envvar("artifact"),
    help="fitted model artifact (default: datasets/model_artifact.json)")
CATALOG_OPTION = typer.Option(
    None, "--catalog", envvar=envvar("catalog"),
    help="catalog CSV to read instead of the shipped ones (repeatable)")
