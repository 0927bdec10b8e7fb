"""The catalog built from SkyPilot's vms.csv: the shipped build from the dated snapshot,
the sanity rules, `advisor catalog import skypilot` and the change report."""

import csv
import json
from dataclasses import replace
from datetime import date

import pytest
from typer.testing import CliRunner

import advisor.cli.catalog  # noqa: F401  (registers `advisor catalog`)
from advisor.cli.app import app
from advisor.importers import reference_dir
from cloud import catalog as cat
from cloud import skypilot

SNAPSHOT = reference_dir("skypilot")
AS_OF = date(2026, 11, 23)
GPU_INFO = {"T4": "{'Gpus': [{'Name': 'T4', 'MemoryInfo': {'SizeInMiB': 16384}}]}",
            "V100": "{'Gpus': [{'MemoryInfo': {'SizeInMiB': 16384}}]}"}  # fmt: skip


def aws_row(instance="g4dn.xlarge", zone="use1-az1", price="0.526", spot="0.2", gpu="T4",
            count="1.0", region="us-east-1"):
    return [instance, gpu, count, "4.0", "16.0", GPU_INFO.get(gpu, ""), price, spot, region,
            zone, "x86_64", "ssd", "True", "125.0", "1.0"]  # fmt: skip


def write_vms(path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


AWS_FULL_HEADER = (*skypilot.AWS_HEADER, "Arch", "LocalDiskType", "NVMeSupported",
                   "LocalDiskSize", "LocalDiskCount")  # fmt: skip


def build_aws(tmp_path, rows):
    path = write_vms(tmp_path / "aws" / "vms.csv", AWS_FULL_HEADER, rows)
    return skypilot.build({"aws": path}, {"aws": "test"}, AS_OF)["aws"]


@pytest.fixture(scope="module")
def snapshot_build():
    if not (SNAPSHOT / "aws_gpu_vms.csv").is_file():
        pytest.skip(f"no SkyPilot snapshot at {SNAPSHOT}; set GPUADVISOR_REFERENCE")
    files = skypilot.find_files(SNAPSHOT)
    return skypilot.build(files, {"aws": "snapshot", "gcp": "snapshot"}, AS_OF)


def test_snapshot_build_counts_and_hand_checked_prices(snapshot_build):
    aws, gcp = snapshot_build["aws"].offerings, snapshot_build["gcp"].offerings
    assert (len(aws), len(gcp)) == (227, 183)
    p5 = next(o for o in aws if (o.instance_type, o.region) == ("p5.48xlarge", "us-east-1"))
    assert p5.price_on_demand == 55.04 and p5.gpu_type == "H100-80GB"
    # use1-az1/az4 quote spot = on-demand (refused); the Local Zone atl2 is not the region's:
    # the median of az2, az3, az5, az6 (18.7340, 18.1597, 18.6838, 16.9508)
    assert p5.price_spot == pytest.approx((18.1597 + 18.6838) / 2, abs=1e-4)
    assert "min 16.9508, max 18.7340" in p5.notes
    a3 = next(o for o in gcp if (o.instance_type, o.region) == ("a2-highgpu-1g", "us-central1"))
    assert (a3.gpu_price_on_demand, a3.host_price_on_demand) == (2.9339, 0.7395)
    assert a3.price_on_demand == pytest.approx(2.93391 + 0.73948, abs=1e-4)
    assert a3.gpu_type == "A100-40GB" and a3.price_spot == pytest.approx(1.5399 + 0.38812, 1e-4)
    kinds = {(o.provider, o.gpu_type) for o in aws + gcp}
    for gpu in ("H200", "B200", "L40S", "V100-32GB", "H100-80GB", "L4", "A10G", "T4"):
        assert any(g == gpu for _, g in kinds), gpu
    shapes = {o.instance_type for o in aws + gcp}
    assert {"p5.4xlarge", "a3-highgpu-1g", "a3-highgpu-2g", "a3-highgpu-4g", "p5en.48xlarge",
            "a3-ultragpu-8g", "g6e.xlarge", "p6-b200.48xlarge", "p3dn.24xlarge"} <= shapes


def test_snapshot_rejections_reported(snapshot_build):
    reasons = {r.reason.split(" (")[0] for b in snapshot_build.values() for r in b.rejected}
    assert {"missing on-demand price", "spot not below on-demand", "unknown GPU B300",
            "unknown GPU P4", "fractional GPU", "AWS Local Zone, not the region's"} <= reasons
    p5e = [r for r in snapshot_build["aws"].rejected if r.instance_type == "p5e.48xlarge"]
    assert {r.reason for r in p5e} == {"missing on-demand price"}


def test_shipped_catalog_is_the_snapshot_build(snapshot_build):
    shipped = cat.load_catalog(today=date(2026, 11, 24))
    built = [o for b in snapshot_build.values() for o in b.offerings]
    assert len(shipped.offerings) == len(built)
    assert {o.price_on_demand for o in shipped.offerings} == {o.price_on_demand for o in built}


def test_sanity_rules(tmp_path):
    result = build_aws(tmp_path, [
        aws_row(zone="use1-az1", spot="0.3"), aws_row(zone="use1-az2", spot="0.1"),
        aws_row(zone="use1-az3", spot="0.9"),  # above on-demand: refused
        aws_row(zone="use1-az4", spot=""),  # no spot price in that zone
        aws_row("g4dn.2xlarge", price=""),  # no on-demand price at all
        aws_row("g6f.large", gpu="L4", count="0.125"),
        aws_row("g4ad.xlarge", gpu="Radeon Pro V520"),
    ])
    (offering,) = result.offerings
    assert offering.price_on_demand == 0.526 and offering.price_spot == pytest.approx(0.2)
    assert "median of 2 zone(s)" in offering.notes and "min 0.1000, max 0.3000" in offering.notes
    refused = {(r.instance_type, r.zone, r.reason.split(" (")[0]) for r in result.rejected}
    assert refused == {
        ("g4dn.xlarge", "use1-az3", "spot not below on-demand"),
        ("g4dn.2xlarge", "use1-az1", "missing on-demand price"),
        ("g6f.large", "use1-az1", "fractional GPU"),
        ("g4ad.xlarge", "use1-az1", "unknown GPU Radeon Pro V520"),
    }


def test_gcp_host_and_gpu_parts(tmp_path):
    rows = [["n1-standard-8", "8.0", "30.0", "", "", "", "us-central1", z, "0.38", "0.1"]
            for z in ("us-central1-a", "us-central1-b")]
    rows += [["", "", "", "V100", "1", GPU_INFO["V100"], "us-central1", "us-central1-a", "2.48",
              "1.2"], ["", "", "", "P4", "1", "", "us-central1", "us-central1-b", "0.6", "0.2"]]
    path = write_vms(tmp_path / "gcp_gpu_vms.csv", skypilot.GCP_HEADER, rows)
    result = skypilot.build({"gcp": path}, {"gcp": "test"}, AS_OF)["gcp"]
    (v100,) = result.offerings
    assert (v100.gpu_type, v100.gpus_per_node, v100.interconnect) == ("V100", 1, "NVLink")
    assert (v100.price_on_demand, v100.price_spot) == (2.86, 1.3)
    assert (v100.gpu_price_spot, v100.host_price_spot) == (1.2, 0.1)
    assert [r.reason for r in result.rejected] == ["unknown GPU P4"]


def test_find_files_picks_the_highest_version(tmp_path):
    for version in ("v8", "v10"):
        write_vms(tmp_path / version / "aws" / "vms.csv", AWS_FULL_HEADER, [aws_row()])
    assert skypilot.find_files(tmp_path) == {"aws": tmp_path / "v10" / "aws" / "vms.csv"}
    with pytest.raises(skypilot.SkypilotError, match="no SkyPilot catalog in .*sky show-gpus"):
        skypilot.find_files(tmp_path / "v8" / "aws")


def test_changes_report():
    base = cat.load_catalog(today=date(2026, 11, 24)).filter(provider="aws").offerings[:3]
    moved = [replace(base[0], price_on_demand=base[0].price_on_demand * 1.2),
             replace(base[1], price_on_demand=base[1].price_on_demand * 1.05)]  # under 10%
    rows = cat.changes(base, moved)
    assert [(r["change"], r["instance_type"]) for r in rows if r["change"] != "price"] == [
        ("removed", base[2].instance_type)]
    (price,) = [r for r in rows if r["change"] == "price"]
    assert price["market"] == "on-demand" and price["moved_pct"] == 20.0


runner = CliRunner()


def test_cli_import_writes_user_catalog_and_reports_changes(tmp_path):
    catalogs = tmp_path / "catalogs"
    write_vms(catalogs / "v9" / "aws" / "vms.csv", AWS_FULL_HEADER,
              [aws_row(), aws_row(zone="use1-az2", spot="0.3"), aws_row("g4dn.metal")])
    home = tmp_path / "home"
    result = runner.invoke(app, ["catalog", "import", "skypilot", str(catalogs), "--format",
                                 "json"], env={"GPUADVISOR_HOME": str(home)})  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    written = cat.read_offerings(home / "catalog_aws.csv")
    assert {o.instance_type for o in written} == {"g4dn.xlarge", "g4dn.metal"}
    assert report["written"] == [f"{home / 'catalog_aws.csv'} (2 offerings)"]
    changed = {(r["change"], r["region"], r["instance_type"]) for r in report["changes"]}
    assert ("removed", "us-east-1", "p5.48xlarge") in changed
    g4dn = next(o for o in written if o.instance_type == "g4dn.xlarge")
    assert g4dn.price_spot == pytest.approx(0.25) and g4dn.network_gbps == 25
    assert not (home / "catalog_gcp.csv").exists()  # no GCP file: the shipped one stays in use


@pytest.mark.parametrize("bad, message", [
    (["g4dn.xlarge", "T4"], "2 columns, the header has 15"),
    (aws_row(price="cheap"), "Price is 'cheap', expected a number"),
])  # fmt: skip
def test_cli_import_malformed_row_writes_nothing(tmp_path, bad, message):
    catalogs = tmp_path / "catalogs"
    write_vms(catalogs / "gcp_gpu_vms.csv", skypilot.GCP_HEADER, [])
    path = write_vms(catalogs / "aws_gpu_vms.csv", AWS_FULL_HEADER, [aws_row(), bad])
    home = tmp_path / "home"
    result = runner.invoke(app, ["catalog", "import", "skypilot", str(catalogs)],
                           env={"GPUADVISOR_HOME": str(home)})
    assert result.exit_code == 1
    (error,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert f"{path}:3: {message}" in error and "Traceback" not in result.output
    assert not home.exists() or not list(home.iterdir())
