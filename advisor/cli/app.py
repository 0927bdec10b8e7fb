import typer

app = typer.Typer(
    name="advisor",
    help="Recommend the cheapest GPU cluster on GCP or AWS that trains a model by a deadline "
    "(or the fastest within a budget), from measurements and fitted performance models.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
