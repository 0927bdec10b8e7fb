"""Output helpers shared by the `advisor` and `profiler` commands: tables for people,
JSON/CSV for scripts, and one-line errors with a non-zero exit (never a traceback)."""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any, NoReturn

import typer


class Format(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


FORMAT_OPTION_HELP = "table for people; json or csv for scripts"


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a one-line error on stderr and exit with `code`."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def warn(message: str) -> None:
    typer.echo(f"warning: {message}", err=True)


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


def emit_table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    *,
    title: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for col in columns:
        numeric = any(isinstance(r.get(col), (int, float)) for r in rows)
        table.add_column((headers or {}).get(col, col), justify="right" if numeric else "left")
    for row in rows:
        table.add_row(*(_table_cell(row.get(c)) for c in columns))
    Console().print(table)


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
) -> None:
    """Rows as a rich table, JSON (all keys) or CSV (the given columns)."""
    if fmt is Format.json:
        emit_json(list(rows))
    elif fmt is Format.csv:
        emit_csv(rows, columns)
    else:
        emit_table(rows, columns, title=title, headers=headers)
