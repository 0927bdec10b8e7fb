"""`profiler ingest`: store the trials a sweep's sink kept but its store lacks."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuadvisor.cli.output import Format, emit_json, fail, warn
from gpuadvisor.cli.settings import envvar
from profiler.cli.app import app


@app.command()
def ingest(
    results: str = typer.Argument(..., metavar="RESULTS_URL", help="the sweep's --results: "
                                  "file://DIR, gs://BUCKET/PREFIX or s3://BUCKET/PREFIX"),
    store: Path = typer.Option(Path("runs.db"), "--store", envvar=envvar("store"),
                               dir_okay=False, help="measurement store (SQLite; created "
                               "when absent)"),
    fmt: Format = typer.Option(Format.table, "--format", help="table for people; json for "
                               "scripts"),
) -> None:
    """Re-ingest a sink: store every trial the sweep recorded there that the store lacks.

    At the end of each trial the sweep keeps its rows in the sink before it writes the
    store, so a trial that could not be stored (a full disk, a store on a lost mount) is
    recovered here. Running it again stores nothing twice. The default sink of a sweep is
    runs/records beside its store.

    Examples:

        profiler ingest file://runs/records --store runs.db

        profiler ingest gs://my-bucket/runs --store runs.db --format json
    """
    from cloud.provider import ProviderError
    from cloud.sinks import clusters
    from gpuadvisor.records import RecordError
    from gpuadvisor.store import Store, StoreError
    from profiler.reingest import reingest

    try:
        # checked before the store is opened, so that a wrong URL makes no store
        found = clusters(results) if results.strip() else []
        if not found:
            fail(f"no sweep records under {results!r}; give the sweep's --results URL "
                 "(by default runs/records beside its store: file://runs/records)")
        with Store(store) as opened:
            done = reingest(results, opened, found=found)
    except (StoreError, ProviderError, RecordError, OSError) as exc:  # SinkError: ProviderError
        fail(str(exc))
    if fmt is Format.json:
        emit_json({"stored": done.stored, "already_in_store": done.already,
                   "clusters_without_trial_record": done.without_trial, "store": str(store)})
        return
    for cluster in done.without_trial:
        warn(f"{cluster}: no trial record (the sweep stopped before the trial ended); "
             "re-run the sweep to measure it")
    typer.echo(f"{len(done.stored)} trial(s) stored, {done.already} already in {store}")
