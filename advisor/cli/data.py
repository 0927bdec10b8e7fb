"""`advisor data import ...`: bring measurements made elsewhere into a measurement store."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import typer

from advisor.cli.app import app
from gpuadvisor.cli.output import (
    FORMAT_OPTION_HELP,
    Format,
    emit,
    emit_json,
    fail_with,
    stderr_progress,
    warn,
)
from gpuadvisor.cli.settings import envvar

data_app = typer.Typer(help="Measurement data: import CM-DARE's data, exchange files and "
                       "published figures into a store.", no_args_is_help=True)
import_app = typer.Typer(help="Import data into a measurement store (idempotent: importing "
                         "the same data twice adds nothing).", no_args_is_help=True)
data_app.add_typer(import_app, name="import")
app.add_typer(data_app, name="data")

STORE_OPTION = typer.Option(..., "--store", envvar=envvar("store"), dir_okay=False,
                            help="measurement store (SQLite file; created when absent)")
FORMAT_OPTION = typer.Option(Format.table, "--format", help=FORMAT_OPTION_HELP)
CMDARE_PATH = typer.Argument(..., help="CM-DARE's data/processed_data folder (or a clone of "
                             "cake-lab/CM-DARE)")
RUNS_FILE = typer.Argument(..., help="JSON written by `profiler runs --format json`")
PUBLISHED_FILE = typer.Argument(None, help="CSV in the form of the shipped "
                                "published_throughput.csv (default: that file)")


@contextmanager
def _open(store: Path):
    """The store to import into. An import that fails leaves no store where there was none
    (or an empty file as it was): the data is checked only once the store is open."""
    from gpuadvisor.store import Store, StoreError

    new = not store.exists() or (store.is_file() and store.stat().st_size == 0)
    existed = store.exists()
    try:
        with Store(store) as db:
            yield db
    except BaseException as exc:
        if new:
            _remove_new_store(store, existed)
        if isinstance(exc, StoreError):
            fail_with(exc)
        raise


def _remove_new_store(store: Path, existed: bool) -> None:
    for leftover in (Path(f"{store}-wal"), Path(f"{store}-shm")):
        leftover.unlink(missing_ok=True)
    if existed:
        store.write_bytes(b"")
    else:
        store.unlink(missing_ok=True)


def _report(result, store: Path, fmt: Format) -> None:
    for reason in result.skipped:
        warn(f"skipped {reason}")
    for line in result.warnings:
        warn(line)
    if fmt is Format.json:
        emit_json({"source": result.source, "fingerprint": result.fingerprint,
                   "already_imported": result.already_imported, "rows": result.rows,
                   "skipped": result.skipped, "warnings": result.warnings,
                   "store": str(store)})
        return
    if result.already_imported:
        typer.echo(f"already imported (fingerprint {result.fingerprint}) into {store}; "
                   "nothing added")
        return
    rows = [{"table": table, "rows added": count} for table, count in result.rows.items()]
    emit(rows, ["table", "rows added"], fmt,
         title=f"{result.source} -> {store} (fingerprint {result.fingerprint})")


@import_app.command("cmdare")
def import_cmdare(
    path: Path = CMDARE_PATH,
    store: Path = STORE_OPTION,
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Import CM-DARE's processed measurements (ICDCS 2020) into a store.

    Reads speeds of 1-8 workers with 1-2 parameter servers (K80/P100/V100), model features,
    checkpoint times, VM start-up times and chief-rejoin accuracy curves.

    Each speed series becomes one trial: warm-up skipped, median, 2.5-97.5% spread.

    Throughput = global steps/s x 128 (T2T's per-worker batch; async PS global steps).

    Examples:

        advisor data import cmdare ~/CM-DARE/data/processed_data --store m.db

        advisor data import cmdare ../shared/reference/cmdare --store m.db --format json
    """
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn

    from advisor.importers import ImportDataError, cmdare

    with _open(store) as db:
        try:
            root = cmdare.find_root(path)
            total = len(cmdare.plan(root))
            with stderr_progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn()) as bar:
                task = bar.add_task("reading CM-DARE files", total=total)
                result = cmdare.import_cmdare(root, db, progress=lambda _: bar.advance(task))
        except ImportDataError as exc:
            fail_with(exc)
    _report(result, store, fmt)


@import_app.command("runs")
def import_runs(
    file: Path = RUNS_FILE,
    store: Path = STORE_OPTION,
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Import trials from the exchange JSON of `profiler runs --format json`.

    Brings their revocations, start-ups and checkpoints too; trials already in the store
    are skipped.

    Examples:

        profiler runs --store cloud.db --format json > sweep.json

        advisor data import runs sweep.json --store m.db

        advisor data import runs datasets/measurements/local_sweep.json --store m.db
    """
    from advisor.importers import ImportDataError
    from advisor.importers.runs import import_runs as run_import

    with _open(store) as db:
        try:
            result = run_import(file, db)
        except ImportDataError as exc:
            fail_with(exc)
    _report(result, store, fmt)


@import_app.command("published")
def import_published(
    file: Path = PUBLISHED_FILE,
    store: Path = STORE_OPTION,
    source: str = typer.Option(
        None, "--source", metavar="NAME",
        help="the benchmark FILE's figures come from: its trials get source published:NAME, "
             "so that `advisor evaluate --split source` holds them out as a source the fit "
             "never saw (default: published, as the shipped figures)"),
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Import published throughput figures as trials with source 'published'.

    NVIDIA DeepLearningExamples figures (optimised NGC containers, DALI, one DGX node): a
    prior for modern GPUs, not measurements of your workload. Your own CSV needs only the
    columns model, gpu, num_gpus, precision, batch_per_gpu, throughput and unit (the shipped
    file's others are optional: image_size, seq_len, software, notes, and an LLM run's
    sharded, checkpointing and accumulation, ...); it may name models
    and GPUs as its source did (ResNet-50, Tesla V100-SXM2-16GB, 3090) and give tokens/s with
    a seq_len, and a figure for one GPU of the run as img/s/gpu or tok/s/gpu.

    Examples:

        advisor data import published --store m.db

        advisor data import published my_figures.csv --store m.db --format json

        advisor data import published their_table.csv --source their-lab --store m.db
        advisor evaluate --store m.db --split source
    """
    from advisor.importers import ImportDataError
    from advisor.importers.published import import_published as published_import

    with _open(store) as db:
        try:
            result = published_import(db, file, source)
        except ImportDataError as exc:
            fail_with(exc)
    _report(result, store, fmt)
