"""`profiler runs`: what a measurement store holds, as a table, JSON, CSV or parquet."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any

import typer

from gpuadvisor.cli.output import emit_csv, emit_json, emit_table, fail
from gpuadvisor.cli.settings import envvar
from profiler.cli.app import app


class RunsFormat(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"
    parquet = "parquet"


@app.command()
def runs(
    store: Path = typer.Option(Path("runs.db"), "--store", envvar=envvar("store"),
                               help="measurement store (SQLite)"),
    fmt: RunsFormat = typer.Option(RunsFormat.table, "--format", help="table for people; json "
                                   "(the exchange form), csv or parquet for scripts"),
    output: Path | None = typer.Option(None, "--output", "-o", help="write to this file "
                                          "instead of stdout (required for parquet)"),
    sweep: str | None = typer.Option(None, "--sweep", help="only this sweep's trials"),
    model: str | None = typer.Option(None, "--model", help="only trials of this model"),
    show: int | None = typer.Option(None, "--show", metavar="TRIAL_ID", min=1, max=2**63 - 1,
                                       help="one trial in full, with its revocations, "
                                       "start-ups and checkpoints"),
) -> None:
    """List the trials in a measurement store.

    The table gives cluster throughput (samples/s) with its 95% interval, step-time median and
    95th percentile, time to the first step, checkpoint save/restore and revocations. The
    JSON form is the exchange form `advisor data import runs` reads back.

    Examples:

        profiler runs --store runs.db

        profiler runs --store runs.db --sweep smoke --model resnet18

        profiler runs --store runs.db --show 3

        profiler runs --store runs.db --format json -o measurements.json

        profiler runs --store runs.db --format parquet -o trials.parquet
    """
    from gpuadvisor.overwrite import overwrite_problem
    from gpuadvisor.store import StoreError
    from profiler.runs_export import exchange_trials, open_existing

    if fmt is RunsFormat.parquet and output is None:
        fail("parquet is binary: add --output FILE.parquet")
    if output is not None and (problem := overwrite_problem(output, fmt.value)):
        fail(problem)
    try:
        with open_existing(store) as opened:
            trials = exchange_trials(opened, sweep=sweep, model=model, trial_id=show)
    except StoreError as exc:
        fail(str(exc))
    if show is not None and not trials:
        fail(f"no trial {show} in {store}; `profiler runs --store {store}` lists the ids")
    try:
        _write(trials, fmt, output, show is not None)
    except (OSError, ImportError) as exc:
        fail(f"cannot write {output}: {exc}")


def _write(trials: list[dict[str, Any]], fmt: RunsFormat, output: Path | None,
           detail: bool) -> None:
    from contextlib import redirect_stdout

    from profiler.runs_export import write_parquet

    if fmt is RunsFormat.parquet:
        write_parquet(trials, output)
    elif output is not None:
        with open(output, "w", newline="") as handle, redirect_stdout(handle):
            _print(trials, fmt, detail)
    else:
        _print(trials, fmt, detail)
    if output is not None:
        typer.echo(f"wrote {len(trials)} trials to {output}", err=True)


def _print(trials: list[dict[str, Any]], fmt: RunsFormat, detail: bool) -> None:
    from profiler.runs_export import FLAT_COLUMNS, SUMMARY_HEADERS, flat_rows, summary_row

    if fmt is RunsFormat.json:
        emit_json(trials)
    elif fmt is RunsFormat.csv:
        emit_csv(flat_rows(trials), FLAT_COLUMNS)
    elif detail:
        _print_trial(trials[0])
    elif not trials:
        typer.echo("no trials match", err=True)
    else:
        left = ("sweep", "model", "cluster", "precision", "status")
        emit_table([summary_row(t) for t in trials], list(SUMMARY_HEADERS),
                   title=f"{len(trials)} trials", headers=SUMMARY_HEADERS,
                   right=[key for key in SUMMARY_HEADERS if key not in left], wrap=False)


def _print_trial(trial: dict[str, Any]) -> None:
    from profiler.runs_export import CHILD_TABLES

    fields = [{"field": k, "value": v} for k, v in trial.items()
              if k not in CHILD_TABLES and v is not None]
    emit_table(fields, ["field", "value"], title=f"trial {trial['id']}")
    for table in CHILD_TABLES:
        rows = trial[table]
        if not rows:
            continue
        columns = [c for c in rows[0] if c not in ("trial_id", "source")
                   and any(r.get(c) is not None for r in rows)]
        emit_table(rows, columns, title=table)
