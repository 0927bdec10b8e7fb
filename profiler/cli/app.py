import typer

app = typer.Typer(
    name="profiler",
    help="Measure distributed PyTorch training on local processes, GCP or EC2, and keep "
    "every measurement in a store.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
