"""Rebuild the AWS catalog from the Price List API, EC2 spot price history and the Spot
Instance Advisor's interruption-frequency data.

On-demand: `pricing.get_products` (the API lives in us-east-1) for each instance type and
region. Spot: `ec2.describe_spot_price_history` from now, one price per availability zone,
summarised per region by the median (a launch may land in any zone that has capacity).
Interruption buckets: the public JSON behind https://aws.amazon.com/ec2/spot/instance-advisor/.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import defaultdict
from collections.abc import Sequence
from datetime import date, datetime, timezone
from typing import Any

from cloud.adaptors import aws
from cloud.catalog import BUCKETS, Offering
from cloud.provider import ProviderError

FAMILIES = {  # instance family -> (GPU, how its GPUs are linked)
    "g4dn": ("T4", "PCIe"),
    "g5": ("A10G", "PCIe"),
    "g6": ("L4", "PCIe"),
    "p3": ("V100", "NVLink"),
    "p4d": ("A100-40GB", "NVSwitch"),
    "p4de": ("A100-80GB", "NVSwitch"),
    "p5": ("H100-80GB", "NVSwitch"),
}
INSTANCE_TYPES = (
    "g4dn.xlarge", "g4dn.2xlarge", "g4dn.12xlarge", "g4dn.metal",
    "g5.xlarge", "g5.2xlarge", "g5.12xlarge", "g5.48xlarge",
    "g6.xlarge", "g6.12xlarge", "g6.48xlarge",
    "p3.2xlarge", "p3.8xlarge", "p3.16xlarge",
    "p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge",
)  # fmt: skip
REGIONS = ("us-east-1", "us-west-2", "eu-west-1")
PRICING_REGION = "us-east-1"
SPOT_ADVISOR = ("spot-bid-advisor", "spot-advisor-data.json")  # S3 bucket, key
NOTICE_S = 120
NOTICE_SOURCE = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html"


def product_filters(instance_type: str, region: str) -> list[dict[str, str]]:
    """Exactly one product: shared-tenancy Linux, no pre-installed software, on-demand."""
    terms = {
        "instanceType": instance_type,
        "regionCode": region,
        "tenancy": "Shared",
        "operatingSystem": "Linux",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
    }
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in terms.items()]


def _gbps(text: str) -> float:
    """'Up to 25 Gigabit' -> 25, '4x 100 Gigabit' -> 400, '3200 Gigabit' -> 3200."""
    match = re.search(r"(?:(\d+)\s*x\s*)?([\d.]+)\s*Gigabit", text)
    if not match:
        raise ProviderError(f"Price List API: unreadable networkPerformance {text!r}")
    return float(match.group(1) or 1) * float(match.group(2))


def parse_product(document: str) -> dict[str, Any]:
    """A PriceList item (a JSON string) -> shape and on-demand USD per hour."""
    item = json.loads(document)
    attributes = item["product"]["attributes"]
    dimensions = [
        dimension
        for term in item["terms"]["OnDemand"].values()
        for dimension in term["priceDimensions"].values()
        if dimension["unit"] == "Hrs"
    ]
    if len(dimensions) != 1:
        raise ProviderError(f"Price List API: {len(dimensions)} hourly prices for one product")
    return {
        "sku": item["product"]["sku"],
        "vcpus": int(attributes["vcpu"]),
        "memory_gb": float(attributes["memory"].split()[0].replace(",", "")),
        "gpus": int(attributes["gpu"]),
        "network_gbps": _gbps(attributes["networkPerformance"]),
        "price": float(dimensions[0]["pricePerUnit"]["USD"]),
    }


def fetch_on_demand(pricing, instance_types, regions) -> dict[tuple[str, str], dict[str, Any]]:
    found = {}
    for region in regions:
        for instance_type in instance_types:
            request = {
                "ServiceCode": "AmazonEC2",
                "Filters": product_filters(instance_type, region),
                "FormatVersion": "aws_v1",
                "MaxResults": 100,
            }
            products = []
            while True:
                page = pricing.get_products(**request)
                products += [parse_product(doc) for doc in page["PriceList"]]
                if not page.get("NextToken"):
                    break
                request["NextToken"] = page["NextToken"]
            priced = [p for p in products if p["price"] > 0]
            if len(priced) > 1:
                raise ProviderError(f"Price List API: {len(priced)} products match "
                                    f"{instance_type} in {region}; "
                                    "the filters need tightening")  # fmt: skip
            if priced:
                found[(instance_type, region)] = priced[0]
    return found


def fetch_spot_prices(ec2_by_region, instance_types, now=None) -> dict[tuple[str, str], float]:
    """Median over availability zones of the current Linux spot price."""
    now = now or datetime.now(timezone.utc)
    medians = {}
    for region, ec2 in ec2_by_region.items():
        per_type = defaultdict(dict)
        request = {
            "InstanceTypes": list(instance_types),
            "ProductDescriptions": ["Linux/UNIX"],
            "StartTime": now,
        }
        while True:
            page = ec2.describe_spot_price_history(**request)
            for entry in page["SpotPriceHistory"]:
                zones = per_type[entry["InstanceType"]]
                zones.setdefault(entry["AvailabilityZone"], float(entry["SpotPrice"]))
            if not page.get("NextToken"):
                break
            request["NextToken"] = page["NextToken"]
        for instance_type, zones in per_type.items():
            medians[(instance_type, region)] = round(statistics.median(zones.values()), 4)
    return medians


def fetch_interruption_buckets(s3, instance_types, regions) -> dict[tuple[str, str], str]:
    """Spot Instance Advisor bucket ('<5%' ... '>20%') per (instance type, region), Linux."""
    body = s3.get_object(Bucket=SPOT_ADVISOR[0], Key=SPOT_ADVISOR[1])["Body"].read()
    data = json.loads(body)
    labels = {r["index"]: r["label"].replace(" ", "") for r in data["ranges"]}
    unknown = set(labels.values()) - set(BUCKETS)
    if unknown:
        raise ProviderError(f"Spot Instance Advisor: unexpected buckets {sorted(unknown)}")
    buckets = {}
    for region in regions:
        linux = data["spot_advisor"].get(region, {}).get("Linux", {})
        for instance_type in instance_types:
            if instance_type in linux:
                buckets[(instance_type, region)] = labels[linux[instance_type]["r"]]
    return buckets


def build(on_demand, spot_prices, buckets, as_of: date | None = None):
    """Offerings and spot-market rows from the three sources' answers."""
    as_of = as_of or date.today()
    offerings, markets = [], [
        {"provider": "aws", "region": "*", "gpu_type": "*", "instance_type": "*",
         "notice_s": NOTICE_S, "max_runtime_h": "", "interruption_bucket": "",
         "as_of": as_of, "source": NOTICE_SOURCE, "notes": "2-minute interruption notice"},
    ]  # fmt: skip
    for (instance_type, region), product in sorted(on_demand.items(), key=lambda kv: kv[0][::-1]):
        gpu, link = FAMILIES[instance_type.split(".")[0]]
        spot = spot_prices.get((instance_type, region))
        offerings.append(
            Offering(
                provider="aws",
                region=region,
                instance_type=instance_type,
                gpu_type=gpu,
                gpus_per_node=product["gpus"],
                vcpus=product["vcpus"],
                memory_gb=product["memory_gb"],
                network_gbps=product["network_gbps"],
                interconnect=link,
                price_on_demand=product["price"],
                price_spot=spot,
                as_of=as_of,
                source=f"AWS Price List API AmazonEC2 SKU {product['sku']}"
                + ("; spot: describe_spot_price_history, median over zones" if spot else ""),
                notes="" if spot else "no spot price history in this region",
            )
        )
        if (instance_type, region) in buckets:
            markets.append(
                {"provider": "aws", "region": region, "gpu_type": gpu,
                 "instance_type": instance_type, "notice_s": NOTICE_S, "max_runtime_h": "",
                 "interruption_bucket": buckets[(instance_type, region)], "as_of": as_of,
                 "source": "https://aws.amazon.com/ec2/spot/instance-advisor/ "
                 "(spot-bid-advisor/spot-advisor-data.json, Linux)", "notes": ""}
            )  # fmt: skip
    return offerings, markets


def refresh(
    regions: Sequence[str] | None = None,
    instance_types: Sequence[str] | None = None,
    session=None,
    clients: dict[str, Any] | None = None,
):
    """(offerings, spot-market rows) from the live APIs. `clients` (tests) maps 'pricing',
    's3' and each region name to a ready client; otherwise they come from `session`."""
    regions = list(regions or REGIONS)
    instance_types = list(instance_types or INSTANCE_TYPES)
    if clients is None:
        clients = _clients(session, regions)
    with aws.errors("the AWS pricing refresh"):
        on_demand = fetch_on_demand(clients["pricing"], instance_types, regions)
        spot = fetch_spot_prices({r: clients[r] for r in regions}, instance_types)
        buckets = fetch_interruption_buckets(clients["s3"], instance_types, regions)
    return build(on_demand, spot, buckets)


def _clients(session, regions):
    session = session or aws.session("the AWS pricing APIs")
    clients = {"pricing": aws.make_client("pricing", PRICING_REGION, session=session)}
    # The Spot Instance Advisor's object is public: read it unsigned.
    clients["s3"] = aws.make_client("s3", session=session,
                                    signature_version=aws.sdk("botocore").UNSIGNED)
    clients.update({r: aws.make_client("ec2", r, session=session) for r in regions})
    return clients
