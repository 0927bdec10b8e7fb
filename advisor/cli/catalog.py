"""`advisor catalog`: show the GPU price catalog and rebuild it from the providers' pricing APIs."""

from __future__ import annotations

import logging
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer

from advisor.cli.app import app
from gpuadvisor.cli.output import (
    FORMAT_OPTION_HELP,
    Format,
    emit,
    emit_json,
    fail,
    fail_with,
    warn,
)
from gpuadvisor.cli.settings import envvar
from gpuadvisor.vocab import market

log = logging.getLogger(__name__)

catalog_app = typer.Typer(
    help="The GCP and AWS GPU offerings and their prices (catalog_*.csv).",
    no_args_is_help=True,
)
app.add_typer(catalog_app, name="catalog")
import_app = typer.Typer(help="Import a catalog another tool keeps.", no_args_is_help=True)
catalog_app.add_typer(import_app, name="import")

SHOW_COLUMNS = (
    "provider", "region", "instance_type", "gpus", "vcpus", "memory_gb", "network_gbps",
    "interconnect", "price_on_demand", "price_spot", "usd_per_gpu_hour",
)  # fmt: skip
HEADERS = {
    "instance_type": "instance",
    "memory_gb": "mem GB",
    "network_gbps": "net Gbps",
    "interconnect": "GPU link",
    "price_on_demand": "$/h",
    "price_spot": "spot $/h",
    "usd_per_gpu_hour": "$/GPU-h",
    "moved_pct": "moved %",
}


def _report_changes(changes, written: list[str], fmt: Format) -> None:
    """What the new catalog changes against the one in use (cloud.catalog.changes)."""
    from cloud.catalog import CHANGE_COLUMNS, MOVE_THRESHOLD

    if fmt is Format.json:
        emit_json({"written": written, "changes": changes})
        return
    counts = {kind: sum(c["change"] == kind for c in changes) for kind in ("added", "removed")}
    moved = len(changes) - counts["added"] - counts["removed"]
    title = (f"{counts['added']} offerings added, {counts['removed']} removed, {moved} prices "
             f"moved by more than {MOVE_THRESHOLD:.0%}")
    emit(changes, CHANGE_COLUMNS, fmt, title=title, headers=HEADERS)
    typer.echo(f"wrote {', '.join(written)}")


@contextmanager
def _reading(given: bool = False):
    """Reads a catalog: its stale-price warnings printed, a CatalogError a one-line error
    (exit 2 for a file the user `given`, 1 for the catalog in use)."""
    from cloud.catalog import CatalogError, StaleCatalogWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StaleCatalogWarning)
        try:
            yield
        except CatalogError as error:
            fail(f"{error}; restore the file or rebuild it with `advisor catalog refresh`",
                 2 if given else 1)
    for warning in caught:
        warn(str(warning.message))


@catalog_app.command("show")
def show(
    provider: Optional[str] = typer.Option(None, help="gcp or aws"),
    region: Optional[str] = typer.Option(None, help="e.g. us-central1, us-east-1"),
    gpu: Optional[str] = typer.Option(None, help="GPU type or family: T4, V100, A100-80GB, A100"),
    spot: bool = typer.Option(False, "--spot", help="only offerings with a spot price; sort by it"),
    include_retired: bool = typer.Option(False, help="also GPUs no longer sold (GCP K80)"),
    file: Optional[list[Path]] = typer.Option(
        None, "--file", envvar=envvar("catalog"),
        help="catalog CSV to read instead of the shipped ones (repeatable)"),
    fmt: Format = typer.Option(Format.table, "--format", help=FORMAT_OPTION_HELP),
) -> None:
    """List GPU offerings with their node-hour prices, cheapest per GPU-hour first.

    Examples:

      advisor catalog show --provider gcp --gpu V100

      advisor catalog show --gpu A100 --spot --format json

      advisor catalog show --region us-east-1 --format csv > aws-us-east-1.csv
    """
    from cloud.catalog import PROVIDERS, CatalogError, load_catalog

    if provider is not None and provider not in PROVIDERS:
        fail(f"unknown provider {provider!r}; accepted: {', '.join(PROVIDERS)}")
    with _reading(bool(file)):
        catalog = load_catalog(file, include_retired=include_retired)
    if file and not catalog.offerings:
        fail(f"{', '.join(map(str, file))} holds no offering; give a catalog with rows")
    try:
        catalog = catalog.filter(provider=provider, region=region, gpu=gpu, spot=spot)
    except CatalogError as error:
        fail_with(error, code=2)
    rows = []
    for offering in catalog.offerings:
        row = offering.to_row()
        node_price = offering.price(spot)
        row["gpus"] = f"{offering.gpus_per_node}x {offering.gpu_type}"
        row["usd_per_gpu_hour"] = round(node_price / offering.gpus_per_node, 4)
        rows.append(row)
    rows.sort(key=lambda r: (r["usd_per_gpu_hour"], r["provider"], r["region"]))
    if not rows:
        fail("no offering matches those filters; drop one (see `advisor catalog show`)", 1)
    dates = sorted({str(row["as_of"]) for row in rows})
    title = f"{len(rows)} offerings, {market(spot)}, prices as of {dates[0]}" + (
        f" to {dates[-1]}" if len(dates) > 1 else ""
    )
    emit(rows, SHOW_COLUMNS, fmt, title=title, headers=HEADERS)


@catalog_app.command("refresh")
def refresh(
    provider: str = typer.Option(..., help="gcp or aws"),
    output_dir: Optional[Path] = typer.Option(
        None,
        help="where catalog_<provider>.csv (and spot_markets.csv for aws) are written "
        "(default: the user data dir, $GPUADVISOR_HOME or ~/.local/share/gpu-advisor, "
        "read before the shipped catalog)",
    ),
    region: Optional[list[str]] = typer.Option(
        None, help="regions to price (repeatable); default: the catalog's main regions"
    ),
    endpoint: Optional[str] = typer.Option(
        None, help="GCP only: Cloud Billing API root URL, for a proxy or a recorded-response server"
    ),
    fmt: Format = typer.Option(Format.table, "--format", help=FORMAT_OPTION_HELP),
) -> None:
    """Rebuild a provider's catalog from its pricing API (needs that cloud's credentials).

    GCP: the Cloud Billing Catalog API (Compute Engine SKUs), credentials from Application
    Default Credentials (`gcloud auth application-default login`). AWS: the Price List API,
    EC2 spot price history and the Spot Instance Advisor data, credentials from the usual
    boto3 chain (AWS_PROFILE, ...). Files are replaced atomically: a failure leaves the old
    catalog as it was. The shipped catalog is never written: what is written to the user
    data dir is read instead of it from then on.

    Examples:

      advisor catalog refresh --provider gcp

      advisor catalog refresh --provider aws --region us-east-1 --output-dir /tmp/prices
    """
    from rich.console import Console

    from cloud.provider import ProviderError
    from cloud.refresh import PROVIDERS, refresh_catalog

    if provider not in PROVIDERS:
        fail(f"unknown provider {provider!r}; accepted: {', '.join(PROVIDERS)}")
    with Console(stderr=True).status(f"Querying the {provider.upper()} pricing APIs..."):
        try:
            with _reading():
                result = refresh_catalog(provider, output_dir, region, endpoint)
        except ProviderError as error:
            fail_with(error, code=1)
    written = [f"{result.catalog} ({len(result.offerings)} offerings)"]
    if result.markets_file:
        written.append(f"{result.markets_file} ({len(result.markets)} {provider} markets)")
    _report_changes(result.changes, written, fmt)


@import_app.command("skypilot")
def import_skypilot(
    directory: Path = typer.Argument(
        Path("~/.sky/catalogs"),
        help="SkyPilot's catalog folder (vN/aws/vms.csv, vN/gcp/vms.csv; the highest N) or a "
        "folder holding aws_gpu_vms.csv / gcp_gpu_vms.csv"),
    output_dir: Optional[Path] = typer.Option(
        None, help="where catalog_<provider>.csv are written (default: the user data dir, "
        "read before the shipped catalog)"),
    fmt: Format = typer.Option(Format.table, "--format", help=FORMAT_OPTION_HELP),
) -> None:
    """Build the catalog from SkyPilot's price catalog (per-zone on-demand and spot prices).

    Per region and instance type: the on-demand price and the median spot price over the
    zones. Every file is checked before anything is written; each is then replaced
    atomically. Prints what changed against the catalog in use.

    Examples:

      advisor catalog import skypilot

      advisor catalog import skypilot ./catalogs --format json
    """
    from cloud.skypilot import SkypilotError, import_catalog
    from gpuadvisor import data

    try:
        result = import_catalog(directory, output_dir or data.user_dir())
    except SkypilotError as error:
        fail_with(error, code=1)
    except OSError as error:
        fail(f"cannot read {error.filename}: {error.strerror}; check the path", 1)
    if result.rejected:
        warn(f"{len(result.rejected)} SkyPilot rows refused (unknown GPU, no price, spot not "
             "below on-demand, ...); `advisor -v` lists them")
        for row in result.rejected:
            log.info("refused %s %s %s %s: %s", row.provider, row.region, row.instance_type,
                     row.zone, row.reason)
    written = [f"{result.written[p]} ({len(o)} offerings)" for p, o in result.offerings.items()]
    _report_changes(result.changes, written, fmt)
