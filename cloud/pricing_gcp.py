"""Rebuild the GCP catalog from the Cloud Billing Catalog API (Compute Engine SKUs).

A GCP GPU node is billed in parts: each attached GPU, each host vCPU, each GiB of host
memory, with separate SKUs for on-demand and Spot ("Preemptible" usage type). The API
knows prices but not machine shapes nor where a GPU is actually sold, so those come from
the tables below (https://cloud.google.com/compute/docs/gpus and .../gpus/gpu-regions-zones).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import date
from typing import Any

from cloud.adaptors import gcp
from cloud.catalog import Offering

BILLING_ENDPOINT = "https://cloudbilling.googleapis.com"
COMPUTE_SERVICE = "services/6F81-5844-456A"  # Compute Engine
SCOPE = "https://www.googleapis.com/auth/cloud-billing.readonly"
PAGE_SIZE = 5000

# (machine family, machine type, GPU, GPUs, vCPUs, memory GiB, network Gbps, GPU link)
SHAPES = (
    *(("n1", f"n1-standard-{v}", gpu, n, v, m, g, link)
      for gpu, counts, link in (("K80", (1, 2, 4, 8), "PCIe"), ("P100", (1, 2, 4), "PCIe"),
                                ("V100", (1, 2, 4, 8), "NVLink"), ("T4", (1, 2, 4), "PCIe"))
      for n, v, m, g in ((1, 8, 30, 16), (2, 16, 60, 32), (4, 32, 120, 32), (8, 64, 240, 32))
      if n in counts),
    ("g2", "g2-standard-4", "L4", 1, 4, 16, 10, "PCIe"),
    ("g2", "g2-standard-24", "L4", 2, 24, 96, 32, "PCIe"),
    ("g2", "g2-standard-48", "L4", 4, 48, 192, 50, "PCIe"),
    ("g2", "g2-standard-96", "L4", 8, 96, 384, 100, "PCIe"),
    ("a2", "a2-highgpu-1g", "A100-40GB", 1, 12, 85, 24, "NVSwitch"),
    ("a2", "a2-highgpu-2g", "A100-40GB", 2, 24, 170, 32, "NVSwitch"),
    ("a2", "a2-highgpu-4g", "A100-40GB", 4, 48, 340, 50, "NVSwitch"),
    ("a2", "a2-highgpu-8g", "A100-40GB", 8, 96, 680, 100, "NVSwitch"),
    ("a2", "a2-megagpu-16g", "A100-40GB", 16, 96, 1360, 100, "NVSwitch"),
    ("a2", "a2-ultragpu-1g", "A100-80GB", 1, 12, 170, 24, "NVSwitch"),
    ("a2", "a2-ultragpu-2g", "A100-80GB", 2, 24, 340, 32, "NVSwitch"),
    ("a2", "a2-ultragpu-4g", "A100-80GB", 4, 48, 680, 50, "NVSwitch"),
    ("a2", "a2-ultragpu-8g", "A100-80GB", 8, 96, 1360, 100, "NVSwitch"),
    ("a3", "a3-highgpu-8g", "H100-80GB", 8, 208, 1872, 1000, "NVSwitch"),
)  # fmt: skip
SOLD_IN = {
    "K80": (),  # end of support 2024-05-01: never rebuilt
    "P100": ("us-central1", "us-east1", "us-west1", "europe-west4", "asia-east1"),
    "V100": ("us-central1", "us-west1", "europe-west4", "asia-east1"),
    "T4": ("us-central1", "us-east1", "us-west1", "europe-west4", "asia-east1"),
    "L4": ("us-central1", "us-east1", "us-west1", "us-west4", "europe-west4", "asia-east1"),
    "A100-40GB": ("us-central1", "us-east1", "us-west4", "europe-west4"),
    "A100-80GB": ("us-central1", "us-east4", "europe-west4"),
    "H100-80GB": ("us-central1", "us-east4", "europe-west4"),
}
GPU_SKUS = {  # the SKU description names each GPU so
    "K80": "Nvidia Tesla K80 GPU",
    "P100": "Nvidia Tesla P100 GPU",
    "V100": "Nvidia Tesla V100 GPU",
    "T4": "Nvidia Tesla T4 GPU",
    "L4": "Nvidia L4 GPU",
    "A100-40GB": "Nvidia Tesla A100 GPU",
    "A100-80GB": "Nvidia A100 80GB GPU",
    "H100-80GB": "Nvidia H100 80GB GPU",
}
HOST_SKU = re.compile(r"^(?:Spot Preemptible )?(N1 Predefined|G2|A2|A3) Instance (Core|Ram) ")
NOT_LIST_PRICE = ("Commitment", "Virtual Workstation", "Reserved", "DWS", "Calendar")
USAGE = {"OnDemand": False, "Preemptible": True}  # usageType -> spot


def authorized_session():
    """A requests session carrying Application Default Credentials with the billing scope."""
    return gcp.authorized_session("the Cloud Billing API", [SCOPE])


def fetch_skus(session, endpoint: str = BILLING_ENDPOINT) -> list[dict[str, Any]]:
    """Every Compute Engine SKU, following nextPageToken."""
    url = f"{endpoint.rstrip('/')}/v1/{COMPUTE_SERVICE}/skus"
    skus: list[dict[str, Any]] = []
    token = ""
    while True:
        params = {"currencyCode": "USD", "pageSize": PAGE_SIZE}
        if token:
            params["pageToken"] = token
        page = gcp.get_json(session, url, params, f"the Cloud Billing API at {endpoint}")
        skus.extend(page.get("skus", []))
        token = page.get("nextPageToken", "")
        if not token:
            return skus


def unit_price(sku: dict[str, Any]) -> float:
    """USD per hour (per GiB-hour for memory) of the SKU's first tier."""
    expression = sku["pricingInfo"][0]["pricingExpression"]
    rate = expression["tieredRates"][0]["unitPrice"]
    return int(rate.get("units") or 0) + rate.get("nanos", 0) / 1e9


def _classify(sku: dict[str, Any]) -> tuple[str, bool] | None:
    """('gpu:T4' | 'n1:core' | 'a2:ram' ..., spot) for a list-price SKU we price, else None."""
    description = sku.get("description", "")
    category = sku.get("category", {})
    if category.get("usageType") not in USAGE or any(w in description for w in NOT_LIST_PRICE):
        return None
    spot = USAGE[category["usageType"]]
    for gpu, name in GPU_SKUS.items():
        if description.startswith(name + " "):
            return f"gpu:{gpu}", spot
    match = HOST_SKU.match(description)
    if match:
        family = match.group(1).split()[0].lower()
        return f"{family}:{match.group(2).lower()}", spot
    return None


def price_table(skus: Iterable[dict[str, Any]]) -> dict[tuple[str, bool, str], tuple[float, str]]:
    """(part, spot, region) -> (USD per unit-hour, skuId)."""
    table = {}
    for sku in skus:
        kind = _classify(sku)
        if kind is None:
            continue
        for region in sku.get("serviceRegions", []):
            table[(*kind, region)] = (unit_price(sku), sku["skuId"])
    return table


def build_offerings(
    skus: Iterable[dict[str, Any]], regions: Sequence[str] | None = None, as_of: date | None = None
) -> list[Offering]:
    """One offering per machine shape and region where the GPU is sold and every part priced."""
    table = price_table(skus)
    as_of = as_of or date.today()
    offerings = []
    for family, machine, gpu, count, vcpus, memory, gbps, link in SHAPES:
        for region in SOLD_IN[gpu]:
            if regions and region not in regions:
                continue
            parts = {}
            for spot in (False, True):
                keys = (("gpu:" + gpu, spot, region), (family + ":core", spot, region),
                        (family + ":ram", spot, region))  # fmt: skip
                if all(k in table for k in keys):
                    (g, g_id), (c, c_id), (r, r_id) = (table[k] for k in keys)
                    parts[spot] = (round(count * g, 4), round(vcpus * c + memory * r, 4),
                                   f"{g_id} {c_id} {r_id}")  # fmt: skip
            if False not in parts:
                continue
            on_demand, spot_parts = parts[False], parts.get(True)
            offerings.append(
                Offering(
                    provider="gcp",
                    region=region,
                    instance_type=machine,
                    gpu_type=gpu,
                    gpus_per_node=count,
                    vcpus=vcpus,
                    memory_gb=memory,
                    network_gbps=gbps,
                    interconnect=link,
                    price_on_demand=round(on_demand[0] + on_demand[1], 4),
                    price_spot=round(spot_parts[0] + spot_parts[1], 4) if spot_parts else None,
                    as_of=as_of,
                    source=f"Cloud Billing Catalog API {COMPUTE_SERVICE} SKUs "
                    f"{on_demand[2]}" + (f"; spot {spot_parts[2]}" if spot_parts else ""),
                    gpu_price_on_demand=on_demand[0],
                    host_price_on_demand=on_demand[1],
                    gpu_price_spot=spot_parts[0] if spot_parts else None,
                    host_price_spot=spot_parts[1] if spot_parts else None,
                    notes="" if spot_parts else "no Spot SKU priced for this part in this region",
                )
            )
    return offerings


def refresh(
    regions: Sequence[str] | None = None, endpoint: str = BILLING_ENDPOINT, session=None
) -> list[Offering]:
    """The GCP catalog rebuilt from the live API (ADC credentials unless a session is given)."""
    session = session or authorized_session()
    return build_offerings(fetch_skus(session, endpoint), regions)
