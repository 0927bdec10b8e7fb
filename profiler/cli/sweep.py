"""`profiler sweep`: measure every trial of a spec's grid and keep the results in a store."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuadvisor.cli.output import Format, emit, emit_json, fail, fail_with
from gpuadvisor.cli.settings import envvar
from profiler.cli.app import app
from profiler.limits import MAX_CLOUD_NODES, MAX_TRIALS


@app.command()
def sweep(
    spec_path: Path = typer.Argument(..., metavar="SPEC.yaml", help="the sweep spec"),
    store: Path = typer.Option(Path("runs.db"), "--store", envvar=envvar("store"),
                               help="measurement store (SQLite)"),
    provider: str = typer.Option(None, "--provider", help="override the spec's provider: "
                                 "local, gcp or aws"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the trial grid and every "
                                 "provider request; launch nothing"),
    max_cost: float = typer.Option(None, "--max-cost", metavar="USD", min=0,
                                   help="stop before the estimated spend passes this"),
    results: str = typer.Option(None, "--results", metavar="URL", envvar=envvar("results"),
                                help="where nodes write their records: file://DIR, "
                                "gs://BUCKET/PREFIX, s3://... (default: runs/records beside "
                                "the store)"),
    max_trials: int = typer.Option(
        MAX_TRIALS, "--max-trials", min=1,
        help="refuse a spec whose grid holds more trials than this"),
    max_nodes: int = typer.Option(
        None, "--max-nodes", min=1, help="refuse a spec asking for larger clusters (default: "
        f"{MAX_CLOUD_NODES} on a cloud; locally, this machine's core count)"),
    fmt: Format = typer.Option(Format.table, "--format",
                               help="table or json (the trials' summary; with --dry-run the "
                               "plan)"),
) -> None:
    """Run a sweep: launch each trial's cluster, train, revoke if asked, store the figures.

    The spec's lists (models, nodes, instance_types, batch_per_gpu, precision) expand into a
    grid of trials; `revocation: {node: 1, at_seconds: 20}` kills node 1 that long after
    training starts and launches a replacement (see specs/smoke.yaml); training goes on past
    that time even when its estimate is stable sooner, and after the recovery measures to a
    stable figure again. The display shows each trial's phase (launching, warm-up, measuring,
    revoked, recovering) and its throughput so far. Trials already finished in the store are
    skipped, so re-running a spec resumes it. Ctrl-C terminates every node and keeps what
    finished.

    Examples:

        profiler sweep specs/smoke.yaml --store runs.db

        profiler sweep specs/smoke.yaml --dry-run --format json

        profiler sweep my-v100.yaml --provider gcp --max-cost 20 --results gs://bucket/runs
    """
    from gpuadvisor.errors import GpuAdvisorError
    from profiler.api import dry_run as plan
    from profiler.api import sweep as run

    try:
        if dry_run:
            _print_dry_run(plan(spec_path, store=store, provider=provider, results=results,
                                max_trials=max_trials, max_nodes=max_nodes), fmt)
            return
        result = run(spec_path, store=store, provider=provider, results=results,
                     max_cost=max_cost, progress=True, max_trials=max_trials,
                     max_nodes=max_nodes)
    except KeyboardInterrupt:
        fail("interrupted: every node was terminated; finished trials are in the store, "
             "re-run the same command to resume", code=130)
    except GpuAdvisorError as exc:
        fail_with(exc)
    if fmt is Format.json:
        emit_json(result.to_dict())
    else:
        typer.echo(f"{len(result.finished)} finished, {len(result.failed)} failed, "
                   f"{len(result.skipped)} skipped; stored in {result.store}")
    if not result.ok:
        raise typer.Exit(1)


def _print_dry_run(planned, fmt: Format) -> None:
    if fmt is Format.json:
        emit_json(planned.to_dict())
        return
    rows = [{**t["trial"], "cost": t["estimated_cost_usd"],
             "revoke": (f"node {t['trial']['revoke_node']} at {t['trial']['revoke_at']:.0f}s"
                        if t["trial"]["revoke_node"] is not None else None)}
            for t in planned.trials]
    emit(rows, ["key", "model", "nodes", "instance_type", "batch_per_gpu", "precision", "revoke",
                "cost"], Format.table,
         headers={"instance_type": "instance", "batch_per_gpu": "batch/GPU", "cost": "est. USD"},
         title=f"sweep {planned.sweep}: {len(rows)} trials on {planned.provider} (dry run)")
    for t in planned.trials:
        for request in t["requests"]:
            where = f" where {_compact(request['where'])}" if request["where"] else ""
            typer.echo(f"{t['trial']['key']} {request['provider']} {request['action']} node "
                       f"{request['node']} {_compact(request['body'])}{where}")


def _compact(body: dict) -> str:
    import json

    return json.dumps(body, separators=(",", ":"), default=str)
