"""The GPU instance and price catalog: catalog_{gcp,aws}.csv and spot_markets.csv.

Pure data read with csv + numpy only, because it sits on the `advisor recommend` path: no
network, no pandas. Prices are USD per node-hour. On GCP a node is a host machine plus
attached GPUs, billed separately, so both parts are kept (`gpu_price_*`, `host_price_*`)
and add up to the node price. `advisor catalog refresh` rebuilds the files from the
providers' pricing APIs (cloud/pricing_gcp.py, cloud/pricing_aws.py) into the user data dir,
where they are read before the shipped ones (gpuadvisor/data.py).
"""

from __future__ import annotations

import csv
import logging
import math
import os
import tempfile
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from functools import cache
from pathlib import Path

from cloud.gpus import gpu_specs
from gpuadvisor import data
from gpuadvisor.errors import GpuAdvisorError
from gpuadvisor.gpus import gpu_matches
from gpuadvisor.textfile import unreadable

SPOT_MARKETS = "spot_markets.csv"

log = logging.getLogger(__name__)
STALE_AFTER_DAYS = 60
PROVIDERS = ("gcp", "aws")
INTERCONNECTS = ("PCIe", "NVLink", "NVSwitch")
# AWS Spot Instance Advisor's interruption-frequency buckets, least to most frequent.
BUCKETS = ("<5%", "5-10%", "10-15%", "15-20%", ">20%")
COLUMNS = (
    "provider", "region", "instance_type", "gpu_type", "gpus_per_node", "vcpus", "memory_gb",
    "network_gbps", "interconnect", "gpu_price_on_demand", "host_price_on_demand",
    "price_on_demand", "gpu_price_spot", "host_price_spot", "price_spot", "as_of", "retired",
    "source", "notes", "gpu_memory_mib",
)  # fmt: skip
# Columns a catalog may lack (files written before they existed); read as unknown.
OPTIONAL_COLUMNS = ("gpu_memory_mib",)
SPOT_COLUMNS = (
    "provider", "region", "gpu_type", "instance_type", "notice_s", "max_runtime_h",
    "interruption_bucket", "as_of", "source", "notes",
)  # fmt: skip
PRICE_TOLERANCE = 0.002  # USD: components are rounded to 4 decimals, the total too
MAX_GPUS_PER_NODE = 128  # beyond the largest instances sold (72 GPUs in an NVL72 rack)


class CatalogError(GpuAdvisorError, ValueError):
    """A catalog file or query that cannot be used; the message says what to fix."""


class StaleCatalogWarning(UserWarning):
    """The catalog's prices are older than STALE_AFTER_DAYS."""


@dataclass(frozen=True)
class Offering:
    provider: str
    region: str
    instance_type: str
    gpu_type: str
    gpus_per_node: int
    vcpus: int
    memory_gb: float
    network_gbps: float
    interconnect: str  # PCIe | NVLink | NVSwitch: how the node's GPUs talk to each other
    price_on_demand: float
    price_spot: float | None
    as_of: date
    source: str
    gpu_price_on_demand: float | None = None  # GCP only: the attached GPUs' share
    host_price_on_demand: float | None = None  # GCP only: the host machine's vCPUs + memory
    gpu_price_spot: float | None = None
    host_price_spot: float | None = None
    retired: date | None = None  # the provider stopped selling it (e.g. GCP K80)
    notes: str = ""
    # Usable memory per GPU as the cloud reports it (MiB); None: gpus.csv's memory_mib.
    gpu_memory_mib: float | None = None

    def price(self, spot: bool) -> float | None:
        return self.price_spot if spot else self.price_on_demand

    def to_row(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in COLUMNS}


@dataclass(frozen=True)
class SpotMarket:
    notice_s: float  # warning before a spot node is taken back
    interruption_bucket: str | None  # one of BUCKETS (AWS); None where nobody publishes it
    source: str
    max_runtime_h: float | None = None  # None: runs until revoked
    as_of: date | None = None


@dataclass(frozen=True)
class Catalog:
    offerings: list[Offering]
    today: date = field(default_factory=date.today)

    @property
    def stale_days(self) -> int:
        """Age in days of the oldest price on sale (retired offerings keep their last date)."""
        dates = [o.as_of for o in self.offerings if o.retired is None]
        return (self.today - min(dates)).days if dates else 0

    @property
    def providers(self) -> tuple[str, ...]:
        return tuple(sorted({o.provider for o in self.offerings}))

    @property
    def regions(self) -> tuple[str, ...]:
        return tuple(sorted({o.region for o in self.offerings}))

    @property
    def gpu_types(self) -> tuple[str, ...]:
        return tuple(sorted({o.gpu_type for o in self.offerings}))

    def filter(
        self,
        provider: str | None = None,
        region: str | None = None,
        gpu: str | None = None,
        spot: bool = False,
    ) -> Catalog:
        """Offerings matching every given value; `gpu` also takes a family ('A100').
        Values the catalog does not hold raise CatalogError listing the accepted ones."""
        offerings = self.offerings
        if provider is not None:
            _check("provider", provider, PROVIDERS)
            offerings = [o for o in offerings if o.provider == provider]
        if region is not None:
            _check("region", region, sorted({o.region for o in offerings}))
            offerings = [o for o in offerings if o.region == region]
        if gpu is not None:
            known = sorted({o.gpu_type for o in offerings})
            specs = gpu_specs()  # memory and form factor tell a driver's name apart
            matches = gpu_matches(gpu, {name: specs.get(name) for name in known})
            if not matches:
                _check("GPU", gpu, known)
            offerings = [o for o in offerings if o.gpu_type in matches]
        if spot:
            offerings = [o for o in offerings if o.price_spot is not None]
        return Catalog(offerings, self.today)

    def as_arrays(self):
        """The offerings as numpy columns (str, int64, float64 with NaN for no spot price,
        datetime64[D]) for vectorised scoring."""
        import numpy as np

        o = self.offerings
        return {
            "provider": np.array([x.provider for x in o], dtype=str),
            "region": np.array([x.region for x in o], dtype=str),
            "instance_type": np.array([x.instance_type for x in o], dtype=str),
            "gpu_type": np.array([x.gpu_type for x in o], dtype=str),
            "interconnect": np.array([x.interconnect for x in o], dtype=str),
            "gpus_per_node": np.array([x.gpus_per_node for x in o], dtype=np.int64),
            "vcpus": np.array([x.vcpus for x in o], dtype=np.int64),
            "memory_gb": np.array([x.memory_gb for x in o], dtype=np.float64),
            "network_gbps": np.array([x.network_gbps for x in o], dtype=np.float64),
            "gpu_memory_mib": np.array(
                [np.nan if x.gpu_memory_mib is None else x.gpu_memory_mib for x in o],
                dtype=np.float64),
            "price_on_demand": np.array([x.price_on_demand for x in o], dtype=np.float64),
            "price_spot": np.array(
                [np.nan if x.price_spot is None else x.price_spot for x in o], dtype=np.float64
            ),
            "as_of": np.array([x.as_of.isoformat() for x in o], dtype="datetime64[D]"),
        }

    def find(
        self,
        provider: str,
        instance_type: str,
        region: str,
        gpu_type: str | None = None,
        gpus_per_node: int | None = None,
    ) -> Offering | None:
        """The one offering of that instance type in that region, or None. GCP N1 hosts
        carry several GPU choices: then `gpu_type` (and `gpus_per_node`) pick one."""
        hits = [
            o
            for o in self.offerings
            if (o.provider, o.instance_type, o.region) == (provider, instance_type, region)
            and (gpu_type is None or o.gpu_type == gpu_type)
            and (gpus_per_node is None or o.gpus_per_node == gpus_per_node)
        ]
        if len(hits) > 1:
            choices = ", ".join(f"{o.gpus_per_node}x{o.gpu_type}" for o in hits)
            raise CatalogError(
                f"{provider} {instance_type} in {region} comes with several GPU choices "
                f"({choices}); pass gpu_type and gpus_per_node"
            )
        return hits[0] if hits else None


def _check(what: str, value: str, accepted: Iterable[str]) -> None:
    accepted = list(accepted)
    if value not in accepted:
        raise CatalogError(f"unknown {what} {value!r}; accepted: {', '.join(accepted) or 'none'}")


def _number(row: Mapping[str, str], name: str, where: str, optional: bool = False):
    text = (row.get(name) or "").strip()
    if not text and optional:
        return None
    try:
        value = float(text)
    except ValueError:
        raise CatalogError(f"{where}: column {name} is {text!r}, expected a number") from None
    if not math.isfinite(value):
        raise CatalogError(f"{where}: column {name} is {text!r}, expected a finite number")
    if value < 0:
        raise CatalogError(f"{where}: column {name} is negative ({value})")
    return value


def _date(text: str, name: str, where: str) -> date:
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise CatalogError(f"{where}: column {name} is {text!r}, expected YYYY-MM-DD") from None


def _offering(row: Mapping[str, str], where: str, known_gpus: set[str]) -> Offering:
    if row["provider"] not in PROVIDERS:
        raise CatalogError(f"{where}: provider {row['provider']!r} is not one of {PROVIDERS}")
    if row["gpu_type"] not in known_gpus:
        raise CatalogError(
            f"{where}: GPU {row['gpu_type']!r} is not in gpus.csv; add its row to your own "
            f"{data.user_dir() / 'gpus.csv'} (a copy of {data.shipped('gpus.csv')})"
        )
    if row["interconnect"] not in INTERCONNECTS:
        raise CatalogError(f"{where}: interconnect must be one of {', '.join(INTERCONNECTS)}")
    num = {name: _number(row, name, where) for name in COLUMNS[4:8] + ("price_on_demand",)}
    opt = {name: _number(row, name, where, optional=True) for name in COLUMNS[9:15]}
    if not (1 <= num["gpus_per_node"] <= MAX_GPUS_PER_NODE
            and num["gpus_per_node"].is_integer()):
        raise CatalogError(f"{where}: gpus_per_node is {row['gpus_per_node']!r}; a GPU offering "
                           f"has a whole number of 1 to {MAX_GPUS_PER_NODE} GPUs a node")
    offering = Offering(
        provider=row["provider"],
        region=row["region"],
        instance_type=row["instance_type"],
        gpu_type=row["gpu_type"],
        gpus_per_node=int(num["gpus_per_node"]),
        vcpus=int(num["vcpus"]),
        memory_gb=num["memory_gb"],
        network_gbps=num["network_gbps"],
        interconnect=row["interconnect"],
        price_on_demand=num["price_on_demand"],
        price_spot=opt["price_spot"],
        as_of=_date(row["as_of"], "as_of", where),
        source=row["source"],
        gpu_price_on_demand=opt["gpu_price_on_demand"],
        host_price_on_demand=opt["host_price_on_demand"],
        gpu_price_spot=opt["gpu_price_spot"],
        host_price_spot=opt["host_price_spot"],
        retired=_date(row["retired"], "retired", where) if row.get("retired") else None,
        notes=row.get("notes") or "",
        gpu_memory_mib=_number(row, "gpu_memory_mib", where, optional=True),
    )
    for market in ("on_demand", "spot"):
        gpu_part, host_part = (getattr(offering, f"{p}_price_{market}") for p in ("gpu", "host"))
        total = getattr(offering, f"price_{market}")
        if gpu_part is not None and total is not None:
            if abs(gpu_part + (host_part or 0.0) - total) > PRICE_TOLERANCE:
                raise CatalogError(
                    f"{where}: gpu_price_{market} + host_price_{market} != price_{market}"
                )
    return offering


def catalog_name(provider: str) -> str:
    return f"catalog_{provider}.csv"


def read_offerings(path: Path) -> list[Offering]:
    from cloud.gpus import gpu_specs

    known_gpus = set(gpu_specs())
    try:
        with open(path, newline="") as handle:
            reader = csv.DictReader(handle)
            missing = set(COLUMNS) - set(OPTIONAL_COLUMNS) - set(reader.fieldnames or ())
            if missing:
                raise CatalogError(f"{path}: missing columns {', '.join(sorted(missing))}")
            offerings = [
                _offering(row, f"{path}:{line}", known_gpus) for line, row in enumerate(reader, 2)
            ]
    except (OSError, UnicodeDecodeError) as error:
        raise CatalogError(f"catalog file {unreadable(path, error)}") from None
    keys = [(o.provider, o.region, o.instance_type, o.gpu_type, o.gpus_per_node) for o in offerings]
    if len(set(keys)) != len(keys):
        raise CatalogError(f"{path}: the same offering appears twice")
    return offerings


def load_catalog(
    paths: Sequence[Path | str] | None = None,
    *,
    include_retired: bool = False,
    today: date | None = None,
) -> Catalog:
    """All offerings of the given files (default: the GCP and AWS catalogs, each the user's
    refreshed one if there is one, else the shipped one).
    Warns with StaleCatalogWarning when the prices are older than STALE_AFTER_DAYS."""
    files = [Path(p) for p in paths] if paths else [data.find(catalog_name(p)) for p in PROVIDERS]
    offerings = [o for path in files for o in read_offerings(path)]
    if not include_retired:
        offerings = [o for o in offerings if o.retired is None]
    catalog = Catalog(offerings, today or date.today())
    log.info("loaded %d offerings from %s", len(offerings), ", ".join(map(str, files)))
    if catalog.stale_days > STALE_AFTER_DAYS:
        warnings.warn(
            f"the price catalog is {catalog.stale_days} days old (oldest price "
            f"{catalog.today - timedelta(days=catalog.stale_days)}); run "
            "`advisor catalog refresh` for current prices",
            StaleCatalogWarning,
            stacklevel=2,
        )
    return catalog


@cache
def _default_catalog() -> Catalog:
    return load_catalog(include_retired=True)


def price(
    provider: str,
    instance_type: str,
    region: str,
    spot: bool,
    gpu_type: str | None = None,
    gpus_per_node: int | None = None,
) -> float | None:
    """USD per node-hour from the default catalog; None when not listed (or no spot price)."""
    offering = _default_catalog().find(provider, instance_type, region, gpu_type, gpus_per_node)
    return offering.price(spot) if offering else None


def fixed_gpus(provider: str, instance_type: str) -> int | None:
    """The GPUs a node of this instance type always comes with, in any region (8 on an
    a2-highgpu-8g or a p4d.24xlarge); None where the catalog does not list it or lists
    several GPUs for it (a GCP N1 host, to which a GPU of the user's choice is attached)."""
    return _fixed_gpu_counts().get((provider, instance_type))


@cache
def _fixed_gpu_counts() -> dict[tuple[str, str], int | None]:
    """fixed_gpus of every instance type of the default catalog, read once: a sweep asks
    for every trial of its grid."""
    builds: dict[tuple[str, str], set[tuple[str, int]]] = {}
    for o in _default_catalog().offerings:
        builds.setdefault((o.provider, o.instance_type), set()).add((o.gpu_type, o.gpus_per_node))
    return {key: next(iter(b))[1] if len(b) == 1 else None for key, b in builds.items()}


def read_spot_markets(path: Path | None = None) -> list[dict[str, str]]:
    path = path or data.find(SPOT_MARKETS)
    try:
        with open(path, newline="") as handle:
            rows = list(csv.DictReader(handle))
    except (OSError, UnicodeDecodeError) as error:
        raise CatalogError(unreadable(path, error)) from None
    for line, row in enumerate(rows, 2):
        bucket = row.get("interruption_bucket") or ""
        if bucket and bucket not in BUCKETS:
            raise CatalogError(f"{path}:{line}: interruption_bucket must be one of {BUCKETS}")
    return rows


@cache
def _spot_rows() -> tuple[dict[str, str], ...]:
    return tuple(read_spot_markets())


def spot_market(
    provider: str, region: str, gpu_type: str, instance_type: str | None = None
) -> SpotMarket:
    """The revocation terms of a spot market. Rows match on provider, region, GPU and
    instance type, '*' matching anything; the most specific row wins. Asked for a GPU
    without an instance type, the most frequent interruption bucket among its instance
    types in that region is given (the cautious reading)."""
    _check("provider", provider, PROVIDERS)
    wanted = {"provider": provider, "region": region, "gpu_type": gpu_type}
    if instance_type is not None:
        wanted["instance_type"] = instance_type
    rows = [r for r in _spot_rows() if all(r[k] in (v, "*") for k, v in wanted.items())]
    if not rows:
        raise CatalogError(f"no spot market row for {provider}; check {data.find(SPOT_MARKETS)}")

    def specificity(row: Mapping[str, str]) -> int:
        return sum(row[k] != "*" for k in ("region", "gpu_type", "instance_type"))

    best = max(map(specificity, rows))
    top = [r for r in rows if specificity(r) == best]
    row = max(top, key=lambda r: BUCKETS.index(r["interruption_bucket"]) + 1
              if r["interruption_bucket"] else 0)  # fmt: skip
    return SpotMarket(
        notice_s=float(row["notice_s"]),
        interruption_bucket=row["interruption_bucket"] or None,
        source=row["source"],
        max_runtime_h=float(row["max_runtime_h"]) if row["max_runtime_h"] else None,
        as_of=date.fromisoformat(row["as_of"]) if row["as_of"] else None,
    )


def write_csv_atomically(path: Path, columns: Sequence[str], rows: Iterable[Mapping]) -> None:
    """Write the whole file next to `path`, then rename it over: a failure part-way never
    leaves a half-written catalog behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = tempfile.NamedTemporaryFile(
        "w", newline="", dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False
    )
    try:
        with handle:
            writer = csv.DictWriter(handle, fieldnames=list(columns), extrasaction="ignore")
            writer.writeheader()
            for row in rows:
                writer.writerow({k: "" if v is None else v for k, v in row.items()})
        os.replace(handle.name, path)
    except BaseException:
        os.unlink(handle.name)
        raise


CHANGE_COLUMNS = ("change", "provider", "region", "instance_type", "gpus", "market", "old", "new",
                  "moved_pct")  # fmt: skip
MOVE_THRESHOLD = 0.10  # a price change reported is more than 10% either way


def changes(old: Iterable[Offering], new: Iterable[Offering],
            threshold: float = MOVE_THRESHOLD) -> list[dict[str, object]]:
    """What a new catalog changes against the one in use: offerings added and removed, and
    prices (on-demand, spot) moved by more than `threshold` (a fraction), one row each."""
    def key(o: Offering):
        return (o.provider, o.region, o.instance_type, o.gpu_type, o.gpus_per_node)

    before, after = {key(o): o for o in old}, {key(o): o for o in new}
    rows = []
    for k in sorted(before.keys() | after.keys()):
        was, now = before.get(k), after.get(k)
        row = {"provider": k[0], "region": k[1], "instance_type": k[2], "gpus": f"{k[4]}x {k[3]}"}
        if was is None or now is None:
            rows.append({**row, "change": "added" if was is None else "removed",
                         "market": "on-demand", "old": was and was.price_on_demand,
                         "new": now and now.price_on_demand, "moved_pct": None})  # fmt: skip
            continue
        for market, spot in (("on-demand", False), ("spot", True)):
            a, b = was.price(spot), now.price(spot)
            if a and b and abs(b - a) > threshold * a:
                rows.append({**row, "change": "price", "market": market, "old": a, "new": b,
                             "moved_pct": round(100 * (b - a) / a, 1)})
    return rows
