import typer

app = typer.Typer(
    name="profiler",
    help="Measure distributed PyTorch training on local processes, GCP or EC2, and keep "
    "every measurement in a store.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def profiler() -> None:
    # A group even when main() registers only the command being invoked: a Typer app with a
    # single command and no callback would run that command without its name.
    pass
