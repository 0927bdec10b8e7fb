"""Rebuilding a provider's catalog from its pricing API (`advisor catalog refresh`): the new
offerings are written atomically into the user data dir (or another folder), AWS's spot
markets beside them, and compared with the catalog in use. Needs that cloud's credentials."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cloud.catalog import Offering

PROVIDERS = ("gcp", "aws")


@dataclass
class Refreshed:
    catalog: Path  # catalog_<provider>.csv written
    offerings: list[Offering]
    markets_file: Path | None  # spot_markets.csv written (AWS), if any
    markets: list[dict]  # the provider's spot markets written
    changes: list[dict[str, object]]  # cloud.catalog.changes against the catalog in use


def refresh_catalog(provider: str, output_dir: Path | None = None,
                    regions: list[str] | None = None, endpoint: str | None = None) -> Refreshed:
    """Query `provider`'s pricing API for `regions` (default: the catalog's main regions; GCP
    at `endpoint`, default the Cloud Billing API) and write the catalog into `output_dir`
    (default: the user data dir). ProviderError when the API fails or lists no GPU offering;
    CatalogError when the catalog in use cannot be read; nothing is written then."""
    from cloud.catalog import (
        COLUMNS,
        SPOT_COLUMNS,
        SPOT_MARKETS,
        catalog_name,
        changes,
        load_catalog,
        read_spot_markets,
        write_csv_atomically,
    )  # fmt: skip
    from cloud.provider import ProviderError
    from gpuadvisor import data

    if provider not in PROVIDERS:
        raise ProviderError(f"unknown provider {provider!r}; accepted: {', '.join(PROVIDERS)}",
                            "provider")
    markets: list[dict] = []
    if provider == "gcp":
        from cloud.pricing_gcp import BILLING_ENDPOINT
        from cloud.pricing_gcp import refresh as rebuild

        offerings = rebuild(regions=regions, endpoint=endpoint or BILLING_ENDPOINT)
    else:
        from cloud.pricing_aws import refresh as rebuild

        offerings, markets = rebuild(regions=regions)
    if not offerings:
        raise ProviderError(f"the {provider} pricing API returned no GPU offering for those "
                            "regions", "regions")
    output_dir = output_dir or data.user_dir()
    target = output_dir / catalog_name(provider)
    in_use = target if target.is_file() else data.find(catalog_name(provider))
    before = load_catalog([in_use], include_retired=True).offerings
    write_csv_atomically(target, COLUMNS, (o.to_row() for o in offerings))
    markets_file = None
    if markets:
        # Other providers' rows are kept from the file being replaced (or the one read now).
        markets_file = output_dir / SPOT_MARKETS
        previous = markets_file if markets_file.exists() else None
        kept = [row for row in read_spot_markets(previous) if row["provider"] != provider]
        write_csv_atomically(markets_file, SPOT_COLUMNS, kept + markets)
    return Refreshed(target, offerings, markets_file, markets, changes(before, offerings))
