"""`profiler cleanup`: find and delete what crashed sweeps left running on a cloud or on this
machine."""

from __future__ import annotations

import time

import typer

from gpuadvisor.cli.output import FORMAT_OPTION_HELP, Format, emit, fail
from gpuadvisor.durations import parse_duration
from profiler.cli.app import app

COLUMNS = ["id", "cluster", "node", "zone", "spot", "age_h"]


@app.command()
def cleanup(
    provider: str = typer.Option(..., "--provider", help="gcp, aws or local"),
    older_than: str = typer.Option("0s", "--older-than",
                                   help="only nodes launched at least this long ago "
                                        "(30m, 2h, 1d; plain hours)"),
    yes: bool = typer.Option(False, "--yes", "-y", help="delete without asking"),
    region: str = typer.Option(None, "--region", help="AWS region (default: your AWS config)"),
    project: str = typer.Option(None, "--project", help="GCP project (default: ADC's project)"),
    fmt: Format = typer.Option(Format.table, "--format", help=FORMAT_OPTION_HELP),
) -> None:
    """List the VMs (or local nodes) labelled by this project's sweeps and delete them.

    Every VM a sweep starts carries the labels (GCP) or tags (EC2) gpuadvisor-sweep,
    gpuadvisor-trial and gpuadvisor-node; a sweep terminates its nodes when it ends, so
    anything found here was left by a crash or a kill -9. Local nodes (process sessions
    found through the state directory, GPUADVISOR_LOCAL_STATE) die with their sweep on
    Linux; elsewhere, or after a crash of this machine's sweep, this finds what is left.

    Examples:

        profiler cleanup --provider gcp --project my-project

        profiler cleanup --provider aws --region us-east-1 --older-than 2h --yes

        profiler cleanup --provider local --yes
    """
    from cloud.provider import ProviderError
    from cloud.registry import make_provider

    if provider not in ("gcp", "aws", "local"):
        fail(f"--provider {provider!r}: cleanup works on gcp, aws or local")
    try:
        age = parse_duration(older_than, "--older-than")
        options = {"gcp": {"project": project, "region": region}, "aws": {"region": region},
                   "local": {}}[provider]
        chosen = make_provider(provider, **options)
        nodes = chosen.leftovers(older_than_s=age or None)
    except (ProviderError, ValueError) as exc:
        fail(str(exc))
    now = time.time()
    rows = [{"id": n.id, "cluster": n.cluster, "node": n.index, "zone": n.zone, "spot": n.spot,
             "age_h": round((now - n.launched_at) / 3600, 2) if n.launched_at else None}
            for n in nodes]
    if not rows:
        if fmt is Format.json:
            emit([], COLUMNS, fmt)
        else:
            typer.echo(f"no leftovers on {provider}")
        return
    emit(rows, COLUMNS, fmt, title=f"{len(rows)} leftover node(s) on {provider}")
    if not yes and not typer.confirm(f"delete these {len(rows)} node(s)?", err=True):
        fail("nothing deleted", code=1)
    try:
        chosen.terminate(nodes)
    except ProviderError as exc:
        fail(str(exc))
    typer.echo(f"deleted {len(rows)} node(s)", err=True)
