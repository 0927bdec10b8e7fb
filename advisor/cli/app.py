import typer

app = typer.Typer(
    name="advisor",
    help="Recommend the cheapest GPU cluster on GCP or AWS that trains a model by a deadline "
    "(or the fastest within a budget), from measurements and fitted performance models.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def advisor() -> None:
    # A group even when main() registers only the command being invoked: a Typer app with a
    # single command and no callback would run that command without its name.
    pass
