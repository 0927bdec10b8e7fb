"""The frame both apps share: a root with --version, -v/--verbose and shell completion, and
`run_app`, which runs a command with the config file's defaults and turns click's usage errors
into one line."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

import typer
import typer.main

from gpuadvisor.cli.config import ConfigError, load_defaults, log_sources
from gpuadvisor.cli.logs import set_verbosity
from gpuadvisor.cli.output import one_line, report_error

try:  # typer >= 0.20 vendors click; older typers use click itself
    from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
except ImportError:
    from click.exceptions import ClickException, NoArgsIsHelpError, UsageError

DISTRIBUTION = "gpu-advisor"


def make_app(name: str, help: str) -> typer.Typer:
    """A Typer app whose root takes --version and -v/--verbose; typer adds
    --install-completion and --show-completion."""
    # Markdown: a docstring's paragraphs reflow to the reader's terminal (rich mode keeps the
    # source's line breaks, cutting lines short at 80 columns); indented examples stay as typed.
    app = typer.Typer(name=name, help=help, no_args_is_help=True, rich_markup_mode="markdown",
                      pretty_exceptions_enable=False)

    def print_version(value: bool) -> None:
        if value:
            typer.echo(f"{name} {_version()}")
            raise typer.Exit()

    @app.callback()
    def root(
        ctx: typer.Context,
        version: bool = typer.Option(False, "--version", is_eager=True, callback=print_version,
                                     help="print the version and exit"),
        verbose: int = typer.Option(0, "--verbose", "-v", count=True,
                                    help="log what happens on stderr: -v progress, -vv detail"),
    ) -> None:
        # Also keeps the app a group when run_app registers only the command being invoked: a
        # Typer app with a single command and no callback runs it without its name.
        set_verbosity(verbose)
        log_sources(ctx.default_map)

    return app


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "(version unknown: gpu-advisor is not installed)"


def invoked_command(args: Sequence[str]) -> str | None:
    """The command a command line names: its first word that is not an option."""
    return next((arg for arg in args if not arg.startswith("-")), None)


def run_app(app: typer.Typer, args: Sequence[str], package: str,
            commands: Sequence[str]) -> NoReturn:
    """Register the invoked command by importing `package.<command>` (all of `commands` for the
    help, completion or a misspelt command: only what runs is imported, for start-up time),
    run it with the config file's defaults, and exit. Click's own usage errors (an unknown
    option, a value of the wrong type, a missing argument) become one line naming the problem
    and where the help is, exit 2, instead of click's multi-line panel."""
    command = invoked_command(args)
    for name in (command,) if command in commands else commands:
        importlib.import_module(f"{package}.{name}")
    try:
        root = typer.main.get_command(app)
        # prog_name: completion answers to _ADVISOR_COMPLETE however the app was started
        code = root.main(args=list(args), prog_name=app.info.name, standalone_mode=False,
                         default_map=load_defaults(root, commands))
    except ConfigError as error:
        code = report_error(str(error), 2)
    except NoArgsIsHelpError as error:
        if error.format_message().strip():  # empty when rich has printed the help already
            typer.echo(error.format_message())
        code = 2
    except UsageError as error:
        # Without a context (a value missing at the end of the line) the command is the
        # first word that is not an option.
        where = (error.ctx.command_path if error.ctx
                 else " ".join(filter(None, [app.info.name, command])))
        hint = f"see `{where} --help`"
        if getattr(error, "option_name", None) in {opt for p in root.params for opt in p.opts}:
            hint = f"it goes before the command: {app.info.name} {error.option_name} {command} ..."
        code = report_error(f"{one_line(error.format_message())} ({hint})", 2)
    except ClickException as error:
        code = report_error(one_line(error.format_message()), error.exit_code)
    except typer.Abort:
        code = report_error("aborted", 1)
    sys.exit(code if isinstance(code, int) else 0)
