"""AWS catalog refresh against recorded Price List, spot price history and Spot Instance
Advisor responses, served through botocore's Stubber (which also checks each request)."""

import copy
import csv
import io
import json
from datetime import date, datetime, timezone
from pathlib import Path

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber
from typer.testing import CliRunner

import advisor.cli.catalog  # noqa: F401  (registers `advisor catalog`)
from advisor.cli.app import app
from cloud import catalog as cat
from cloud import pricing_aws
from cloud.provider import ProviderError

RECORDED = Path(__file__).parent / "recorded"
PRODUCTS = json.loads((RECORDED / "pricing_aws_get_products.json").read_text())
SPOT_HISTORY = json.loads((RECORDED / "pricing_aws_spot_price_history.json").read_text())
ADVISOR = (RECORDED / "pricing_aws_spot_advisor.json").read_bytes()
TYPES = ("p3.2xlarge", "p4d.24xlarge")
NOW = datetime(2026, 11, 21, 18, 0, tzinfo=timezone.utc)


def client(service, region="us-east-1"):
    return boto3.client(service, region_name=region, aws_access_key_id="AKIDRECORDED",
                        aws_secret_access_key="recorded")  # fmt: skip


def stub_products(pricing) -> Stubber:
    stubber = Stubber(pricing)
    for instance_type in TYPES:
        request = {"ServiceCode": "AmazonEC2",
                   "Filters": pricing_aws.product_filters(instance_type, "us-east-1"),
                   "FormatVersion": "aws_v1", "MaxResults": 100}
        for page in PRODUCTS[instance_type]:
            stubber.add_response("get_products", page, dict(request))
            if "NextToken" in page:
                request["NextToken"] = page["NextToken"]
    return stubber


def stub_spot(ec2, start=NOW) -> Stubber:
    response = copy.deepcopy(SPOT_HISTORY)
    for entry in response["SpotPriceHistory"]:
        entry["Timestamp"] = datetime.fromisoformat(entry["Timestamp"])
    stubber = Stubber(ec2)
    stubber.add_response("describe_spot_price_history", response, {
        "InstanceTypes": list(TYPES), "ProductDescriptions": ["Linux/UNIX"], "StartTime": start})
    return stubber


def stub_advisor(s3) -> Stubber:
    stubber = Stubber(s3)
    body = StreamingBody(io.BytesIO(ADVISOR), len(ADVISOR))
    stubber.add_response("get_object", {"Body": body},
                         {"Bucket": "spot-bid-advisor", "Key": "spot-advisor-data.json"})
    return stubber


def test_filters_are_the_documented_ones():
    filters = {f["Field"]: f["Value"]
               for f in pricing_aws.product_filters("p3.2xlarge", "us-east-1")}
    assert filters == {"instanceType": "p3.2xlarge", "regionCode": "us-east-1", "tenancy": "Shared",
                       "operatingSystem": "Linux", "preInstalledSw": "NA", "capacitystatus": "Used"}


def test_on_demand_pages_and_parses():
    pricing = client("pricing")
    with stub_products(pricing) as stubber:
        found = pricing_aws.fetch_on_demand(pricing, TYPES, ["us-east-1"])
        stubber.assert_no_pending_responses()
    assert found[("p3.2xlarge", "us-east-1")] == {
        "sku": "CGJXHFUSGE546RV6", "vcpus": 8, "memory_gb": 61.0, "gpus": 1,
        "network_gbps": 10.0, "price": 3.06}
    p4d = found[("p4d.24xlarge", "us-east-1")]
    assert (p4d["memory_gb"], p4d["gpus"], p4d["network_gbps"], p4d["price"]) == (
        1152.0, 8, 400.0, 21.9576)


def test_spot_price_is_median_of_latest_per_zone():
    ec2 = client("ec2")
    with stub_spot(ec2) as stubber:
        prices = pricing_aws.fetch_spot_prices({"us-east-1": ec2}, TYPES, now=NOW)
        stubber.assert_no_pending_responses()
    # zones a (latest 0.918, not the older 0.99), b 1.0243, d 0.9551 -> median 0.9551
    assert prices == {("p3.2xlarge", "us-east-1"): 0.9551}


def test_interruption_buckets_linux_only():
    s3 = client("s3")
    with stub_advisor(s3):
        buckets = pricing_aws.fetch_interruption_buckets(s3, TYPES, ["us-east-1", "us-west-2"])
    assert buckets == {("p3.2xlarge", "us-east-1"): ">20%", ("p4d.24xlarge", "us-east-1"): "5-10%"}


def stubbed_clients():
    clients = {"pricing": client("pricing"), "s3": client("s3"), "us-east-1": client("ec2")}
    stubbers = [stub_products(clients["pricing"]), stub_spot(clients["us-east-1"], ANY),
                stub_advisor(clients["s3"])]  # fmt: skip
    for stubber in stubbers:
        stubber.activate()
    return clients, stubbers


def test_refresh_rebuilds_offerings_and_markets():
    clients, stubbers = stubbed_clients()
    offerings, markets = pricing_aws.refresh(["us-east-1"], TYPES, clients=clients)
    for stubber in stubbers:
        stubber.assert_no_pending_responses()
    p3, p4d = sorted(offerings, key=lambda o: o.instance_type)
    assert (p3.gpu_type, p3.gpus_per_node, p3.interconnect, p3.price_on_demand, p3.price_spot) == (
        "V100", 1, "NVLink", 3.06, 0.9551)
    assert (p4d.gpu_type, p4d.price_spot, p4d.as_of) == ("A100-40GB", None, date.today())
    assert "CGJXHFUSGE546RV6" in p3.source
    assert [(m["instance_type"], m["interruption_bucket"], m["notice_s"]) for m in markets] == [
        ("*", "", 120), ("p3.2xlarge", ">20%", 120), ("p4d.24xlarge", "5-10%", 120)]


def test_client_error_is_one_line_provider_error():
    pricing = client("pricing")
    stubber = Stubber(pricing)
    stubber.add_client_error("get_products", "AccessDeniedException",
                             "User is not authorized to perform: pricing:GetProducts")
    with stubber, pytest.raises(ProviderError,
                                match="AccessDeniedException: User is not authorized"):
        pricing_aws.refresh(["us-east-1"], TYPES, clients={"pricing": pricing})


runner = CliRunner()
NO_CREDENTIALS = {"AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None,
                  "AWS_SESSION_TOKEN": None,
                  "AWS_PROFILE": None, "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
                  "AWS_CONFIG_FILE": "/nonexistent/config", "AWS_EC2_METADATA_DISABLED": "true",
                  "AWS_CONTAINER_CREDENTIALS_FULL_URI": None,
                  "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": None,
                  "AWS_WEB_IDENTITY_TOKEN_FILE": None}


def test_cli_missing_credentials_exit_1_nothing_written(tmp_path):
    result = runner.invoke(app, ["catalog", "refresh", "--provider", "aws",
                                 "--output-dir", str(tmp_path / "out")],
                           env=NO_CREDENTIALS)
    assert result.exit_code == 1
    assert result.stderr.startswith("error: no AWS credentials") and result.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.filterwarnings("ignore::cloud.catalog.StaleCatalogWarning")  # the shipped GCP prices
def test_cli_refresh_keeps_other_providers_spot_rows(tmp_path, monkeypatch):
    """By default the files go to the user data dir, and are read there before the shipped."""
    clients, _ = stubbed_clients()
    monkeypatch.setattr(pricing_aws, "_clients", lambda session, regions: clients)
    monkeypatch.setattr(pricing_aws, "INSTANCE_TYPES", TYPES)
    monkeypatch.setenv("GPUADVISOR_HOME", str(tmp_path))
    result = runner.invoke(app, ["catalog", "refresh", "--provider", "aws",
                                 "--region", "us-east-1"])
    assert result.exit_code == 0, result.output
    assert f"wrote {tmp_path / 'catalog_aws.csv'} (" in result.stdout
    # the change report against the catalog in use (the shipped one): its other types removed
    assert "offerings added" in result.stdout and "removed" in result.stdout
    rebuilt = cat.load_catalog([tmp_path / "catalog_aws.csv"])
    assert sorted(o.instance_type for o in rebuilt.offerings) == list(TYPES)
    with open(tmp_path / "spot_markets.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["provider"] for r in rows] == ["gcp", "aws", "aws", "aws"]
    assert rows[0]["notice_s"] == "30"
    read = cat.load_catalog()
    assert sorted(o.instance_type for o in read.offerings if o.provider == "aws") == list(TYPES)
    assert any(o.provider == "gcp" for o in read.offerings)  # the shipped GCP catalog
    assert cat.read_spot_markets() == rows
