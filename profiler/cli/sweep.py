"""`profiler sweep`: measure every trial of a spec's grid and keep the results in a store."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuadvisor.cli.output import Format, emit, emit_json, fail
from gpuadvisor.cli.settings import envvar
from profiler.cli.app import app


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
    fmt: Format = typer.Option(Format.table, "--format", help="for --dry-run: table or json"),
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
    from cloud.provider import ProviderError
    from cloud.registry import make_provider
    from gpuadvisor.store import StoreError
    from profiler.spec import SpecError, load_spec

    try:
        spec = load_spec(spec_path, {"provider": provider, "results": results,
                                     "max_cost": max_cost})
    except SpecError as exc:
        fail(str(exc).replace("\n", "; "))
    results_url = spec.results or f"file://{store.resolve().parent / 'runs' / 'records'}"
    try:
        # A cloud provider works in the spec's region: launch, events, clean-up alike.
        chosen = make_provider(spec.provider, **({"region": spec.region}
                                                 if spec.provider != "local" else {}))
        if dry_run:
            _print_dry_run(spec, chosen, results_url, fmt)
            return
        from gpuadvisor.store import Store

        with Store(store) as opened:
            _run(spec, opened, chosen, results_url)
    except (ProviderError, StoreError) as exc:
        fail(str(exc))


def _run(spec, store, provider, results_url: str) -> None:
    import sys

    from profiler.orchestrator import BudgetExceeded, run_sweep
    from profiler.progress import SweepDisplay

    trials = spec.trials()
    with SweepDisplay(len(trials), enabled=sys.stderr.isatty()) as display:
        try:
            outcome = run_sweep(spec, store, provider, results_url, max_cost=spec.max_cost,
                                display=display)
        except KeyboardInterrupt:
            fail("interrupted: every node was terminated; finished trials are in the store, "
                 "re-run the same command to resume", code=130)
        except BudgetExceeded as exc:
            fail(str(exc), code=3)
    typer.echo(f"{len(outcome.finished)} finished, {len(outcome.failed)} failed, "
               f"{len(outcome.skipped)} skipped; stored in {store.path}")
    if outcome.failed:
        raise typer.Exit(1)


def _print_dry_run(spec, provider, results_url: str, fmt: Format) -> None:
    from profiler.orchestrator import dry_run_sweep, estimated_cost

    launches = dry_run_sweep(spec, provider, results_url)
    if fmt is Format.json:
        emit_json([{"trial": trial.as_dict(), "estimated_cost_usd":
                    estimated_cost(provider, trial),
                    "requests": [vars(r) for r in requests]} for trial, requests in launches])
        return
    rows = [{**trial.as_dict(), "cost": estimated_cost(provider, trial),
             "revoke": (f"node {trial.revoke_node} at {trial.revoke_at:.0f}s"
                        if trial.revoke_node is not None else None)}
            for trial, _ in launches]
    emit(rows, ["key", "model", "nodes", "instance_type", "batch_per_gpu", "precision", "revoke",
                "cost"], Format.table,
         headers={"instance_type": "instance", "batch_per_gpu": "batch/GPU", "cost": "est. USD"},
         title=f"sweep {spec.name}: {len(rows)} trials on {provider.name} (dry run)")
    for trial, requests in launches:
        for request in requests:
            where = f" where {_compact(request.where)}" if request.where else ""
            typer.echo(f"{trial.key} {request.provider} {request.action} node {request.node} "
                       f"{_compact(request.body)}{where}")


def _compact(body: dict) -> str:
    import json

    return json.dumps(body, separators=(",", ":"), default=str)
