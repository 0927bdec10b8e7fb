"""Output helpers shared by the `advisor` and `profiler` commands: tables for people,
JSON/CSV for scripts, and one-line errors and warnings on stderr (never a traceback)."""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from collections.abc import Collection, Mapping, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, NoReturn

import typer

if TYPE_CHECKING:
    from rich.progress import Progress
    from rich.table import Table


class Format(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


FORMAT_OPTION_HELP = "table for people; json or csv for scripts"


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a one-line error on stderr and exit with `code`."""
    raise typer.Exit(report_error(message, code))


def fail_with(error: Exception, flags: Mapping[str, str] | None = None,
              code: int | None = None) -> NoReturn:
    """Fail with a library error (gpuadvisor.errors.GpuAdvisorError): its parameters worded as
    this command's flags, its lines joined into one, its exit status (or `code`)."""
    fail(flag_words(error, flags).replace("\n", "; "),
         code if code is not None else getattr(error, "exit_code", 2))


def flag_words(error: Exception | str, flags: Mapping[str, str] | None = None,
               parameters: Sequence[str] | None = None) -> str:
    """The message with the API parameters it names (the error's `parameters`, or those
    given) worded as the command's flags: max_nodes -> --max-nodes; `flags` maps a
    parameter whose flag is named otherwise (gpus -> gpu gives --gpu). A command quoted in
    backticks (`advisor catalog refresh`) is left as it is."""
    if parameters is None:
        parameters = getattr(error, "parameters", ())
    parts = str(error).split("`")
    for parameter in parameters:
        flag = "--" + (flags or {}).get(parameter, parameter).replace("_", "-")
        parts[::2] = [re.sub(rf"(?<![-\w]){re.escape(parameter)}(?!\w)", flag, part)
                      for part in parts[::2]]
    return "`".join(parts)


def report_error(message: str, code: int) -> int:
    """Print a one-line error on stderr and return `code`, the exit status it calls for."""
    typer.echo(f"error: {message}", err=True)
    return code


def one_line(message: str) -> str:
    """A click or typer message as one lower-case line, without typer's pydantic prefix."""
    message = " ".join(message.split()).replace("Value error, ", "").removesuffix(".")
    return message[:1].lower() + message[1:]


def warn(message: str) -> None:
    typer.echo(f"warning: {message}", err=True)


def stderr_progress(*columns: Any) -> Progress:
    """A transient rich progress bar on stderr (stdout stays the command's output), off where
    stderr is no terminal: rich would print a blank line there and nobody sees the bar."""
    from rich.console import Console
    from rich.progress import Progress

    console = Console(stderr=True)
    return Progress(*columns, console=console, transient=True, disable=not console.is_terminal)


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def emit_csv(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: _csv_cell(row.get(c)) for c in columns})
    sys.stdout.write(buffer.getvalue())


def _csv_cell(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, (dict, list)) else value


def emit_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], **options: Any) -> None:
    """Print `render_table(rows, columns, **options)`. A table that never wraps gets 160 columns
    when piped, where rich would assume 80 and cut its cells short."""
    from rich.console import Console

    console = Console()
    if not options.get("wrap", True) and not console.is_terminal:
        console = Console(width=160)
    console.print(render_table(rows, columns, **options))


def render_table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    *,
    title: str | None = None,
    headers: Mapping[str, str] | None = None,
    right: Collection[str] | None = None,
    wrap: bool = True,
    compact: bool = False,
    row_styles: Sequence[str | None] | None = None,
) -> Table:
    """The one table renderer of both apps. Cells go through `_table_cell`. `right`: the columns
    to right-justify (default: those holding numbers). `wrap=False` keeps every cell on one
    line (a terminal shows what fits); wrapped cells fold rather than lose characters.
    `compact`: no frame and tight padding, for tables that must fit a console."""
    from rich import box
    from rich.table import Table

    tight = {"box": box.SIMPLE_HEAD, "pad_edge": False, "collapse_padding": True}
    table = Table(title=title, **(tight if compact else {}))
    for col in columns:
        numeric = (col in right if right is not None
                   else any(isinstance(r.get(col), (int, float)) for r in rows))
        table.add_column((headers or {}).get(col, col), justify="right" if numeric else "left",
                         no_wrap=not wrap, overflow="fold" if wrap else "ellipsis")
    for row, row_style in zip(rows, row_styles or [None] * len(rows)):
        table.add_row(*(_table_cell(row.get(c)) for c in columns), style=row_style)
    return table


def _table_cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)


def emit(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    fmt: Format,
    *,
    title: str | None = None,
    headers: Mapping[str, str] | None = None,
    right: Collection[str] | None = None,
) -> None:
    """Rows as a rich table, JSON (all keys) or CSV (the given columns); `right` as
    render_table's."""
    if fmt is Format.json:
        emit_json(list(rows))
    elif fmt is Format.csv:
        emit_csv(rows, columns)
    else:
        emit_table(rows, columns, title=title, headers=headers, right=right)
