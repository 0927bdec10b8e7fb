"""The price catalog built from SkyPilot's catalog files (`vms.csv` for AWS and GCP).

SkyPilot publishes per-zone on-demand and spot prices, fetched from the providers' APIs
(https://github.com/skypilot-org/skypilot-catalog; `sky` keeps a copy under
`~/.sky/catalogs/<version>/`). `build(files)` turns those rows into offerings, one per
(provider, region, instance type, GPU, count): the on-demand price, the spot price as the
median over the region's zones (a launch lands in whichever zone has capacity) with its
spread in `notes`, and every row it refuses with the reason (`Rejected`). Used by
`scripts/build_catalog.py` (the shipped catalog, from the dated snapshot in
`../shared/reference/skypilot/`) and by `advisor catalog import skypilot` (the user's copy).

GCP lists GPUs and host machines as separate rows and bills them apart, as SkyPilot composes
them: an accelerator-optimized machine (a2/a3/a4/g2) costs its host row plus the GPU row of
the GPUs it comes with; an N1 machine its host row plus the attached GPUs' row.
Network bandwidth and the GPU link are not in SkyPilot's files: they come from the
providers' documentation, per instance type (`NETWORK_GBPS`, `FAMILIES`).
"""

from __future__ import annotations

import ast
import csv
import io
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from cloud.catalog import CatalogError, Offering
from gpuadvisor.gpus import family, gpu_matches
from gpuadvisor.textfile import unreadable

AWS_HEADER = ("InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB",
              "GpuInfo", "Price", "SpotPrice", "Region", "AvailabilityZone")  # fmt: skip
GCP_HEADER = ("InstanceType", "vCPUs", "MemoryGiB", "AcceleratorName", "AcceleratorCount",
              "GpuInfo", "Region", "AvailabilityZone", "Price", "SpotPrice")  # fmt: skip
AWS_NET = "https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html"
GCP_NET = "https://cloud.google.com/compute/docs/gpus/gpu-network-bandwidth"
# family -> (GPU link, where the network figures come from)
FAMILIES = {
    "g4dn": ("PCIe", AWS_NET), "g5": ("PCIe", AWS_NET), "g6": ("PCIe", AWS_NET),
    "g6e": ("PCIe", AWS_NET), "gr6": ("PCIe", AWS_NET), "p3": ("NVLink", AWS_NET),
    "p3dn": ("NVLink", AWS_NET), "p4d": ("NVSwitch", AWS_NET), "p4de": ("NVSwitch", AWS_NET),
    "p5": ("NVSwitch", AWS_NET), "p5e": ("NVSwitch", AWS_NET), "p5en": ("NVSwitch", AWS_NET),
    "p6-b200": ("NVSwitch", AWS_NET),
    "n1": ("PCIe", GCP_NET), "g2": ("PCIe", GCP_NET), "a2": ("NVSwitch", GCP_NET),
    "a3": ("NVSwitch", GCP_NET), "a4": ("NVSwitch", GCP_NET),
}  # fmt: skip
# Per-node bandwidth, Gbps (the "up to" figure where the provider gives one). Figures of the
# instance types the 2024 catalog had are kept as they were; UNCONFIRMED ones were not found
# in the documentation searched at build time and say so in `notes`. Checked 2026-11-24
# against GCP_NET's per-series list (A3 High up to 1,000, A3 Mega up to 1,600 (an older
# version said 1,800, counting its gVNIC), A3 Edge up to 800, A3 Ultra and A4 up to 3,600,
# A2 and G2 up to 100, N1 with P100/P4 32).
NETWORK_GBPS = {
    "g4dn.xlarge": 25, "g4dn.2xlarge": 25, "g4dn.4xlarge": 25, "g4dn.8xlarge": 50,
    "g4dn.12xlarge": 50, "g4dn.16xlarge": 50, "g4dn.metal": 100,
    "g5.xlarge": 10, "g5.2xlarge": 10, "g5.4xlarge": 25, "g5.8xlarge": 25, "g5.12xlarge": 40,
    "g5.16xlarge": 25, "g5.24xlarge": 50, "g5.48xlarge": 100,
    "g6.xlarge": 10, "g6.2xlarge": 10, "g6.4xlarge": 25, "g6.8xlarge": 25, "g6.12xlarge": 40,
    "g6.16xlarge": 25, "g6.24xlarge": 50, "g6.48xlarge": 100,
    "g6e.xlarge": 20, "g6e.2xlarge": 20, "g6e.4xlarge": 20, "g6e.8xlarge": 25,
    "g6e.12xlarge": 100, "g6e.16xlarge": 35, "g6e.24xlarge": 200, "g6e.48xlarge": 400,
    "gr6.4xlarge": 25, "gr6.8xlarge": 25,
    "p3.2xlarge": 10, "p3.8xlarge": 10, "p3.16xlarge": 25, "p3dn.24xlarge": 100,
    "p4d.24xlarge": 400, "p4de.24xlarge": 400, "p5.4xlarge": 100, "p5.48xlarge": 3200,
    "p5e.48xlarge": 3200, "p5en.48xlarge": 3200, "p6-b200.48xlarge": 3200,
    "n1-standard-8": 16, "n1-standard-16": 32, "n1-standard-32": 32, "n1-standard-64": 32,
    "g2-standard-4": 10, "g2-standard-8": 16, "g2-standard-12": 16, "g2-standard-16": 32,
    "g2-standard-24": 32, "g2-standard-32": 32, "g2-standard-48": 50, "g2-standard-96": 100,
    "a2-highgpu-1g": 24, "a2-highgpu-2g": 32, "a2-highgpu-4g": 50, "a2-highgpu-8g": 100,
    "a2-megagpu-16g": 100, "a2-ultragpu-1g": 24, "a2-ultragpu-2g": 32, "a2-ultragpu-4g": 50,
    "a2-ultragpu-8g": 100, "a3-highgpu-1g": 25, "a3-highgpu-2g": 50, "a3-highgpu-4g": 100,
    "a3-highgpu-8g": 1000, "a3-megagpu-8g": 1600, "a3-edgegpu-8g": 800,
    "a3-ultragpu-8g": 3600, "a4-highgpu-8g": 3600,
}  # fmt: skip
UNCONFIRMED = frozenset({
    "g4dn.xlarge", "g4dn.2xlarge", "g4dn.4xlarge", "g4dn.8xlarge", "g4dn.16xlarge",
    "g4dn.metal", "g5.4xlarge", "g5.8xlarge", "g5.16xlarge", "g5.24xlarge", "g6.2xlarge",
    "g6.4xlarge", "g6.8xlarge", "g6.16xlarge", "g6.24xlarge", "g6e.xlarge", "g6e.2xlarge",
    "g6e.4xlarge", "g6e.8xlarge", "g6e.12xlarge", "g6e.16xlarge", "g6e.24xlarge",
    "g6e.48xlarge", "gr6.4xlarge", "gr6.8xlarge", "p3dn.24xlarge", "p5.4xlarge",
    "p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "g2-standard-8", "g2-standard-12",
    "g2-standard-16", "g2-standard-32", "a3-highgpu-1g", "a3-highgpu-2g", "a3-highgpu-4g",
})  # fmt: skip
# GCP accelerator-optimized series -> SkyPilot's name of the GPUs they come with.
GCP_SERIES = {"a2-highgpu": "A100", "a2-megagpu": "A100", "a2-ultragpu": "A100-80GB",
              "a3-highgpu": "H100", "a3-edgegpu": "H100", "a3-megagpu": "H100-MEGA",
              "a3-ultragpu": "H200", "a4-highgpu": "B200"}  # fmt: skip
G2_GPUS = {4: 1, 8: 1, 12: 1, 16: 1, 24: 2, 32: 1, 48: 4, 96: 8}  # g2-standard-<vCPUs> -> L4s
N1_HOSTS = {1: "n1-standard-8", 2: "n1-standard-16", 4: "n1-standard-32", 8: "n1-standard-64"}
N1_GPUS = {"T4": "PCIe", "V100": "NVLink", "P100": "PCIe", "P4": "PCIe"}
LOCAL_ZONE = re.compile(r"^[a-z0-9]+-[a-z]+\d+-az\d+$")  # usw2-lax1-az1: an AWS Local Zone
MEMORY_TOLERANCE = 0.1  # SkyPilot's usable MiB vs the datasheet's GB


class SkypilotError(CatalogError):
    """A SkyPilot catalog file that cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class Rejected:
    provider: str
    region: str
    instance_type: str
    zone: str
    reason: str


@dataclass
class Build:
    offerings: list[Offering]
    rejected: list[Rejected]


@dataclass(frozen=True)
class _Zone:
    zone: str
    gpu: float | None  # GCP: the GPUs' part; AWS: None
    host: float  # AWS: the whole instance
    gpu_spot: float | None
    host_spot: float | None


def _text(path: Path) -> str:
    try:
        return Path(path).read_text()
    except UnicodeDecodeError as exc:
        raise SkypilotError(f"{unreadable(path, exc)}; fetch the file again") from None


def provider_of(path: Path) -> str:
    """'aws' or 'gcp' from a vms.csv header."""
    header = tuple(next(csv.reader(io.StringIO(_text(path))), ()))
    for provider, expected in (("aws", AWS_HEADER), ("gcp", GCP_HEADER)):
        if header[: len(expected)] == expected:
            return provider
    raise SkypilotError(f"{path}:1: not a SkyPilot AWS or GCP vms.csv header; "
                        "pass the catalog's aws/vms.csv or gcp/vms.csv")  # fmt: skip


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a vms.csv, each checked (column count, numbers); SkypilotError naming the
    file and line otherwise."""
    rows = []
    with io.StringIO(_text(path)) as handle:
        reader = csv.reader(handle)
        header = next(reader)
        for line, cells in enumerate(reader, 2):
            where = f"{path}:{line}"
            if len(cells) != len(header):
                raise SkypilotError(f"{where}: {len(cells)} columns, the header has "
                                    f"{len(header)}; repair the line or fetch the file again")
            row = dict(zip(header, cells))
            for name in ("vCPUs", "MemoryGiB", "AcceleratorCount", "Price", "SpotPrice"):
                _number(row.get(name, ""), name, where)
            if not row["Region"] or not row["AvailabilityZone"]:
                raise SkypilotError(f"{where}: empty Region or AvailabilityZone; "
                                    "repair the line or fetch the file again")
            row["_where"] = where
            rows.append(row)
    return rows


def _number(text: str, name: str, where: str) -> float | None:
    if not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        raise SkypilotError(f"{where}: {name} is {text!r}, expected a number; "
                            "repair the line or fetch the file again") from None
    if value < 0:
        raise SkypilotError(f"{where}: {name} is negative; repair the line or fetch it again")
    return value


def memory_mib(gpu_info: str) -> float | None:
    """Usable memory per GPU in MiB from SkyPilot's GpuInfo (a Python dict literal)."""
    if not gpu_info:
        return None
    try:
        return float(ast.literal_eval(gpu_info)["Gpus"][0]["MemoryInfo"]["SizeInMiB"])
    except (ValueError, SyntaxError, KeyError, IndexError, TypeError):
        return None


def canonical_gpu(name: str, mib: float | None, specs: Mapping[str, float]) -> str | None:
    """The project's name (datasets/gpus.csv) of SkyPilot's accelerator `name`, told apart by
    memory where a family has several (SkyPilot's AWS 'A100' is the 40 GB one); None when
    gpus.csv has no such GPU."""
    matches = gpu_matches(name, specs) or gpu_matches(family(name), specs)
    if mib is not None:
        matches = tuple(g for g in matches
                        if abs(specs[g] * 1024 - mib) <= MEMORY_TOLERANCE * specs[g] * 1024)
    return matches[0] if len(matches) == 1 else None


def _median(zones: list[_Zone], spot: bool) -> tuple[float | None, float]:
    """The (GPU part, host part) of the median zone by total; two middle zones: their mean."""
    parts = sorted(((z.gpu_spot, z.host_spot) if spot else (z.gpu, z.host) for z in zones),
                   key=lambda p: (p[0] or 0.0) + p[1])  # fmt: skip
    middle = parts[(len(parts) - 1) // 2: len(parts) // 2 + 1]
    gpu = None if middle[0][0] is None else statistics.mean(p[0] for p in middle)
    return gpu, statistics.mean(p[1] for p in middle)


def usable_mib(gpu: str, reported: float | None) -> int:
    """Usable memory per GPU: the smaller of what this cloud reports (EC2 gives the usable
    size, GCP the nominal one) and gpus.csv's usable figure for the same silicon."""
    from cloud.gpus import gpu_specs

    usable = gpu_specs()[gpu].memory_mib
    return round(min(usable, reported) if reported else usable)


def _offering(provider, region, instance_type, gpu, count, vcpus, memory, mib, zones, source,
              as_of, rejected) -> Offering | None:
    """One region's offering from its zones' prices, after the sanity rules."""
    def reject(reason, zone=""):
        rejected.append(Rejected(provider, region, instance_type, zone, reason))

    priced = []
    for z in zones:
        if not z.host or (z.gpu is not None and not z.gpu):
            reject("missing on-demand price", z.zone)
        else:
            priced.append(z)
    if not priced:
        return None
    spot = []
    for z in priced:
        if z.host_spot is None or (z.gpu is not None and z.gpu_spot is None):
            continue
        total, on_demand = (z.gpu_spot or 0.0) + z.host_spot, (z.gpu or 0.0) + z.host
        if total <= 0:
            reject("missing spot price", z.zone)
        elif total >= on_demand:
            reject(f"spot not below on-demand ({total:.4f} >= {on_demand:.4f})", z.zone)
        else:
            spot.append(z)
    gpu_od, host_od = _median(priced, spot=False)
    notes = []
    totals = sorted({round((z.gpu or 0.0) + z.host, 4) for z in priced})
    if len(totals) > 1:
        notes.append(f"on-demand differs across zones ({totals[0]}-{totals[-1]}): median")
    gpu_spot = host_spot = price_spot = None
    if spot:
        gpu_spot, host_spot = _median(spot, spot=True)
        price_spot = round((gpu_spot or 0.0) + host_spot, 4)
        low, high = (min((z.gpu_spot or 0.0) + z.host_spot for z in spot),
                     max((z.gpu_spot or 0.0) + z.host_spot for z in spot))  # fmt: skip
        notes.append(f"spot: median of {len(spot)} zone(s) "
                     f"({', '.join(sorted(z.zone for z in spot))}), min {low:.4f}, "
                     f"max {high:.4f}")  # fmt: skip
    else:
        notes.append("no spot price in any zone")
    link, network_source = FAMILIES[_family(instance_type)]
    if instance_type in UNCONFIRMED:
        notes.append(f"network {NETWORK_GBPS[instance_type]} Gbps not confirmed in "
                     f"{network_source}")  # fmt: skip
    gcp = provider == "gcp"
    return Offering(
        provider=provider, region=region, instance_type=instance_type, gpu_type=gpu,
        gpus_per_node=count, vcpus=int(vcpus), memory_gb=memory,
        network_gbps=NETWORK_GBPS[instance_type],
        interconnect=N1_GPUS.get(gpu, link) if instance_type.startswith("n1-") else link,
        price_on_demand=round((gpu_od or 0.0) + host_od, 4), price_spot=price_spot,
        as_of=as_of, source=f"{source}; network: {network_source}",
        gpu_price_on_demand=round(gpu_od, 4) if gcp else None,
        host_price_on_demand=round(host_od, 4) if gcp else None,
        gpu_price_spot=round(gpu_spot, 4) if gcp and spot else None,
        host_price_spot=round(host_spot, 4) if gcp and spot else None,
        notes="; ".join(notes), gpu_memory_mib=usable_mib(gpu, mib),
    )  # fmt: skip


def _family(instance_type: str) -> str:
    return instance_type.split(".")[0] if "." in instance_type else instance_type.split("-")[0]


def build_aws(rows: Iterable[Mapping[str, str]], specs, source, as_of) -> Build:
    groups, shapes, rejected = defaultdict(list), {}, []
    for row in rows:
        instance_type, region, zone = row["InstanceType"], row["Region"], row["AvailabilityZone"]
        if not row["AcceleratorName"]:
            continue  # no accelerator
        count = float(row["AcceleratorCount"] or 0)
        mib = memory_mib(row["GpuInfo"])
        gpu = canonical_gpu(row["AcceleratorName"], mib, specs)
        reason = ("fractional GPU" if count != int(count) or count < 1
                  else "unknown GPU " + row["AcceleratorName"] if gpu is None
                  else "no network figure for this instance type"
                  if instance_type not in NETWORK_GBPS
                  else "AWS Local Zone, not the region's" if LOCAL_ZONE.match(zone) else "")
        if reason:
            rejected.append(Rejected("aws", region, instance_type, zone, reason))
            continue
        price, spot = float(row["Price"] or 0), row["SpotPrice"]
        groups[(region, instance_type)].append(
            _Zone(zone, None, price, None, float(spot) if spot else None))
        shapes[(region, instance_type)] = (gpu, int(count), float(row["vCPUs"]),
                                           float(row["MemoryGiB"]), mib)  # fmt: skip
    offerings = [
        _offering("aws", region, instance_type, *shapes[(region, instance_type)], zones, source,
                  as_of, rejected)
        for (region, instance_type), zones in sorted(groups.items())
    ]  # fmt: skip
    return Build([o for o in offerings if o], rejected)


def _gcp_gpus(machine: str) -> tuple[str, int] | None:
    """SkyPilot's GPU name and count an accelerator-optimized machine type comes with."""
    series = machine.rsplit("-", 1)[0]
    if series in GCP_SERIES:
        return GCP_SERIES[series], int(machine.rsplit("-", 1)[1].rstrip("g"))
    if series == "g2-standard":
        return "L4", G2_GPUS[int(machine.rsplit("-", 1)[1])]
    return None


def build_gcp(rows: Iterable[Mapping[str, str]], specs, source, as_of) -> Build:
    gpu_rows, hosts, rejected = {}, defaultdict(list), []
    for row in rows:
        if row["InstanceType"]:
            if row["InstanceType"] in NETWORK_GBPS:
                hosts[(row["Region"], row["InstanceType"])].append(row)
        elif row["AcceleratorName"]:
            key = (row["AcceleratorName"], int(float(row["AcceleratorCount"])),
                   row["AvailabilityZone"])  # fmt: skip
            gpu_rows[key] = row
    groups, shapes = defaultdict(list), {}
    for (region, machine), host_rows in sorted(hosts.items()):
        fixed = _gcp_gpus(machine)
        choices = [fixed] if fixed else [
            (gpu, count) for count, host in N1_HOSTS.items() if host == machine for gpu in N1_GPUS
        ]  # fmt: skip
        for name, count in choices:
            for host in host_rows:
                zone = host["AvailabilityZone"]
                gpu_row = gpu_rows.get((name, count, zone))
                if gpu_row is None:
                    if fixed:
                        rejected.append(Rejected("gcp", region, machine, zone,
                                                 f"no price row for {count}x {name}"))
                    continue  # N1: that GPU is not sold in that zone
                mib = memory_mib(gpu_row["GpuInfo"])
                gpu = canonical_gpu(name, mib, specs)
                if gpu is None:
                    rejected.append(Rejected("gcp", region, machine, zone, f"unknown GPU {name}"))
                    continue
                spot = (gpu_row["SpotPrice"], host["SpotPrice"])
                groups[(region, machine, gpu, count)].append(_Zone(
                    zone, float(gpu_row["Price"] or 0), float(host["Price"] or 0),
                    float(spot[0]) if spot[0] else None, float(spot[1]) if spot[1] else None))
                shapes[(region, machine, gpu, count)] = (float(host["vCPUs"]),
                                                         float(host["MemoryGiB"]), mib)
    offerings = [
        _offering("gcp", *key, *shapes[key], zones, source, as_of, rejected)
        for key, zones in sorted(groups.items())
    ]
    return Build([o for o in offerings if o], rejected)


def build(files: Mapping[str, Path], source: Mapping[str, str], as_of: date) -> dict[str, Build]:
    """provider -> Build from each provider's vms.csv; `source` is what each row cites."""
    from cloud.gpus import gpu_specs

    specs = {name: spec.memory_gb for name, spec in gpu_specs().items()}
    builders = {"aws": build_aws, "gcp": build_gcp}
    return {provider: builders[provider](read_rows(path), specs, source[provider], as_of)
            for provider, path in files.items()}  # fmt: skip


def find_files(directory: Path) -> dict[str, Path]:
    """provider -> vms.csv under a SkyPilot catalog directory: `<dir>/vN/<provider>/vms.csv`
    (the highest N), `<dir>/<provider>/vms.csv`, or the reference folder's
    `<provider>_gpu_vms.csv`. SkypilotError when neither provider has one."""
    directory = Path(directory).expanduser()
    found = {}
    for provider in ("aws", "gcp"):
        candidates = [directory / f"{provider}_gpu_vms.csv", directory / provider / "vms.csv"]
        versioned = sorted(directory.glob(f"v*/{provider}/vms.csv"),
                           key=lambda p: int(re.sub(r"\D", "", p.parent.parent.name) or 0))
        for path in [*candidates, *reversed(versioned)]:
            if path.is_file():
                found[provider] = path
                break
    if not found:
        raise SkypilotError(
            f"no SkyPilot catalog in {directory}: expected vN/aws/vms.csv, vN/gcp/vms.csv or "
            "aws_gpu_vms.csv, gcp_gpu_vms.csv; run `sky show-gpus` once to fetch them"
        )
    return found


def carried(previous: Iterable[Offering], built: Iterable[Offering]) -> list[Offering]:
    """Retired offerings of the catalog in use that the SkyPilot files no longer list (GCP
    K80, for replaying CM-DARE): kept as they were, with their own date and source."""
    keys = {(o.provider, o.region, o.instance_type, o.gpu_type, o.gpus_per_node) for o in built}
    return [o for o in previous if o.retired is not None and
            (o.provider, o.region, o.instance_type, o.gpu_type, o.gpus_per_node) not in keys]


@dataclass
class Imported:
    written: dict[str, Path]  # provider -> catalog file written
    offerings: dict[str, list[Offering]]  # provider -> what was written
    rejected: list[Rejected]
    changes: list[dict[str, object]]  # cloud.catalog.changes against the catalog in use


def import_catalog(directory: Path, output_dir: Path) -> Imported:
    """Build the catalog from the SkyPilot files under `directory` and write
    catalog_<provider>.csv into `output_dir` (the user data dir), each atomically, only after
    every file has been read and checked: a malformed row writes nothing."""
    from cloud.catalog import COLUMNS, catalog_name, changes, load_catalog, write_csv_atomically
    from gpuadvisor import data

    files = find_files(directory)
    source = {p: f"SkyPilot catalog {path}" for p, path in files.items()}
    as_of = {p: date.fromtimestamp(path.stat().st_mtime) for p, path in files.items()}
    built = {p: build({p: files[p]}, source, as_of[p])[p] for p in files}
    previous = {p: load_catalog([data.find(catalog_name(p))], include_retired=True).offerings
                for p in files}  # fmt: skip
    offerings = {p: b.offerings + carried(previous[p], b.offerings) for p, b in built.items()}
    empty = [p for p, o in offerings.items() if not o]
    if empty:
        raise SkypilotError(f"{files[empty[0]]}: no GPU offering the catalog keeps; "
                            "is it SkyPilot's vms.csv with GPU rows?")
    written = {}
    for provider, rows in offerings.items():
        written[provider] = Path(output_dir) / catalog_name(provider)
        write_csv_atomically(written[provider], COLUMNS, (o.to_row() for o in rows))
    return Imported(
        written, offerings, [r for b in built.values() for r in b.rejected],
        [c for p in files for c in changes(previous[p], offerings[p])],
    )
