"""`advisor catalog`: show the GPU price catalog and rebuild it from the providers' pricing APIs."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Optional

import typer

from advisor.cli.app import app
from gpuadvisor.cli.output import FORMAT_OPTION_HELP, Format, emit, emit_json, fail, warn
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


def _load(files: list[Path] | None, include_retired: bool):
    from cloud.catalog import CatalogError, StaleCatalogWarning, load_catalog

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StaleCatalogWarning)
        try:
            catalog = load_catalog(files, include_retired=include_retired)
        except CatalogError as error:
            fail(f"{error}; restore the file or rebuild it with `advisor catalog refresh`", 1)
    for warning in caught:
        warn(str(warning.message))
    return catalog


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
    from cloud.catalog import PROVIDERS, CatalogError

    if provider is not None and provider not in PROVIDERS:
        fail(f"unknown provider {provider!r}; accepted: {', '.join(PROVIDERS)}")
    catalog = _load(file, include_retired)
    try:
        catalog = catalog.filter(provider=provider, region=region, gpu=gpu, spot=spot)
    except CatalogError as error:
        fail(str(error))
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
    from cloud.catalog import (
        COLUMNS,
        SPOT_COLUMNS,
        SPOT_MARKETS,
        catalog_name,
        changes,
        read_spot_markets,
        write_csv_atomically,
    )  # fmt: skip
    from cloud.provider import ProviderError
    from gpuadvisor import data

    if provider not in ("gcp", "aws"):
        fail(f"unknown provider {provider!r}; accepted: gcp, aws")
    from rich.console import Console

    markets = None
    try:
        with Console(stderr=True).status(f"Querying the {provider.upper()} pricing APIs..."):
            if provider == "gcp":
                from cloud.pricing_gcp import BILLING_ENDPOINT
                from cloud.pricing_gcp import refresh as rebuild

                offerings = rebuild(regions=region, endpoint=endpoint or BILLING_ENDPOINT)
            else:
                from cloud.pricing_aws import refresh as rebuild

                offerings, markets = rebuild(regions=region)
    except ProviderError as error:
        fail(str(error), 1)
    if not offerings:
        fail(f"the {provider} pricing API returned no GPU offering for those regions", 1)
    output_dir = output_dir or data.user_dir()
    target = output_dir / catalog_name(provider)
    in_use = target if target.is_file() else data.find(catalog_name(provider))
    before = _load([in_use], include_retired=True).offerings
    write_csv_atomically(target, COLUMNS, (o.to_row() for o in offerings))
    written = [f"{target} ({len(offerings)} offerings)"]
    if markets:
        # Other providers' rows are kept from the file being replaced (or the one read now).
        markets_file = output_dir / SPOT_MARKETS
        previous = markets_file if markets_file.exists() else None
        kept = [row for row in read_spot_markets(previous) if row["provider"] != provider]
        write_csv_atomically(markets_file, SPOT_COLUMNS, kept + markets)
        written.append(f"{markets_file} ({len(markets)} {provider} markets)")
    _report_changes(changes(before, offerings), written, fmt)


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
        fail(str(error), 1)
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
