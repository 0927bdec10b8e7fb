"""The shipped price catalog, its loader and `advisor catalog show`."""

import csv
import json
import warnings
from datetime import date, timedelta

import numpy as np
import pytest
from typer.testing import CliRunner

import advisor.cli.catalog  # noqa: F401  (registers `advisor catalog`)
from advisor.cli.app import app
from cloud import catalog as cat
from cloud.gpus import gpu_specs
from gpuadvisor import data

FRESH = {"today": date(2026, 11, 24)}  # a day after the shipped prices were read: not stale


def shipped(provider):
    return data.shipped(cat.catalog_name(provider))


def load(**kwargs):
    return cat.load_catalog(**{**FRESH, **kwargs})


def test_shipped_files_load_with_every_field():
    catalog = load(include_retired=True)
    by_provider = {p: [o for o in catalog.offerings if o.provider == p] for p in cat.PROVIDERS}
    with open(shipped("gcp")) as gcp, open(shipped("aws")) as aws:
        assert len(by_provider["gcp"]) == sum(1 for _ in csv.DictReader(gcp))
        assert len(by_provider["aws"]) == sum(1 for _ in csv.DictReader(aws))
    assert len(by_provider["gcp"]) > 50 and len(by_provider["aws"]) > 30
    known = set(gpu_specs())
    for o in catalog.offerings:
        assert o.gpu_type in known
        assert o.interconnect in cat.INTERCONNECTS
        assert o.gpus_per_node >= 1 and o.vcpus >= 1 and o.memory_gb > 0 and o.network_gbps > 0
        assert o.price_on_demand > 0 and (
            o.price_spot is None or 0 < o.price_spot < o.price_on_demand)
        assert isinstance(o.as_of, date) and o.as_of <= date.today() and o.source


def test_gcp_price_components_add_up():
    for o in load(include_retired=True).filter(provider="gcp").offerings:
        assert o.gpu_price_on_demand is not None and o.host_price_on_demand is not None
        assert o.gpu_price_on_demand + o.host_price_on_demand == pytest.approx(
            o.price_on_demand, abs=2e-3)
        if o.price_spot is not None:
            assert o.gpu_price_spot + o.host_price_spot == pytest.approx(o.price_spot, abs=2e-3)


def test_every_gpu_and_main_region_present():
    catalog = load()
    assert set(catalog.filter(provider="gcp").gpu_types) >= {
        "T4", "V100", "P100", "L4", "A100-40GB", "A100-80GB", "H100-80GB"}
    assert set(catalog.filter(provider="aws").gpu_types) >= {
        "T4", "A10G", "L4", "V100", "A100-40GB", "A100-80GB", "H100-80GB"}
    assert {"us-central1", "us-east1", "europe-west4", "us-east-1", "us-west-2",
            "eu-west-1"} <= set(catalog.regions)


def test_retired_k80_hidden_unless_asked():
    assert "K80" not in load().gpu_types
    k80 = load(include_retired=True).filter(gpu="K80").offerings
    assert k80 and all(o.retired == date(2024, 5, 1) for o in k80)


def test_filters_and_gpu_family():
    catalog = load()
    gcp_v100 = catalog.filter(provider="gcp", region="us-central1", gpu="v100")
    assert {o.instance_type for o in gcp_v100.offerings} == {
        f"n1-standard-{v}" for v in (8, 16, 32, 64)}
    assert set(catalog.filter(gpu="A100").gpu_types) == {"A100-40GB", "A100-80GB"}
    spot = catalog.filter(spot=True)
    assert spot.offerings and all(o.price_spot is not None for o in spot.offerings)
    assert len(spot.offerings) < len(catalog.offerings)  # A3 and p4de have no spot price here


@pytest.mark.parametrize(
    "kwargs, accepted",
    [({"provider": "azure"}, "gcp, aws"), ({"region": "mars-1"}, "us-central1"),
     ({"gpu": "B300"}, "T4")],
)
def test_unknown_filter_values_list_accepted_ones(kwargs, accepted):
    with pytest.raises(cat.CatalogError, match=accepted):
        load().filter(**kwargs)


def test_as_arrays_match_offerings():
    catalog = load().filter(provider="aws")
    arrays = catalog.as_arrays()
    assert {len(v) for v in arrays.values()} == {len(catalog.offerings)}
    assert (arrays["price_on_demand"].dtype == np.float64
            and arrays["gpus_per_node"].dtype == np.int64)
    missing = [o.price_spot is None for o in catalog.offerings]
    assert np.isnan(arrays["price_spot"]).tolist() == missing
    i = next(i for i, o in enumerate(catalog.offerings) if o.instance_type == "p3.16xlarge")
    assert arrays["gpus_per_node"][i] == 8 and arrays["as_of"][i] == np.datetime64("2026-11-23")


def test_stale_catalog_warns_and_fresh_does_not():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        catalog = load()
    assert catalog.stale_days == 1
    later = date(2026, 11, 23) + timedelta(days=cat.STALE_AFTER_DAYS + 1)
    with pytest.warns(cat.StaleCatalogWarning, match="61 days old"):
        assert cat.load_catalog(today=later).stale_days == 61


@pytest.mark.filterwarnings("ignore::cloud.catalog.StaleCatalogWarning")
def test_price_lookup():
    assert cat.price("aws", "p3.2xlarge", "us-east-1", spot=False) == 3.06
    assert cat.price("aws", "p5.48xlarge", "us-east-1", spot=False) == 55.04
    assert cat.price("aws", "p5.48xlarge", "us-east-1", spot=True) == 18.4218  # zone median
    assert cat.price("gcp", "a3-highgpu-8g", "us-central1", spot=True) is None  # spot > OD
    assert cat.price("aws", "p3.2xlarge", "ap-south-1", spot=False) is None
    t4 = cat.price("gcp", "n1-standard-8", "us-central1", False, gpu_type="T4")
    assert t4 == pytest.approx(0.35 + 8 * 0.031611 + 30 * 0.004237, abs=1e-3)
    with pytest.raises(cat.CatalogError, match="several GPU choices"):
        cat.price("gcp", "n1-standard-8", "us-central1", False)


def test_spot_markets():
    gcp = cat.spot_market("gcp", "us-central1", "V100")
    assert gcp.notice_s == 30 and gcp.max_runtime_h is None and gcp.interruption_bucket is None
    assert cat.spot_market("aws", "us-east-1", "T4").notice_s == 120
    with pytest.raises(cat.CatalogError, match="unknown provider"):
        cat.spot_market("azure", "eastus", "T4")


def test_spot_market_most_specific_and_cautious(tmp_path, monkeypatch):
    path = tmp_path / "spot.csv"
    rows = [
        ("aws", "*", "*", "*", ""), ("aws", "us-east-1", "T4", "g4dn.xlarge", "<5%"),
        ("aws", "us-east-1", "T4", "g4dn.12xlarge", "10-15%"),
    ]
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(cat.SPOT_COLUMNS)
        for p, r, g, i, b in rows:
            writer.writerow([p, r, g, i, 120, "", b, "2026-01-01", "test", ""])
    monkeypatch.setattr(cat, "_spot_rows", lambda: tuple(cat.read_spot_markets(path)))
    assert cat.spot_market("aws", "us-east-1", "T4", "g4dn.xlarge").interruption_bucket == "<5%"
    assert cat.spot_market("aws", "us-east-1", "T4").interruption_bucket == "10-15%"
    assert cat.spot_market("aws", "us-west-2", "T4").interruption_bucket is None


def _write(path, rows):
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, cat.COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"gpu_type": "B300"}, "not in gpus.csv; add its row to your own .*gpus.csv"),
        ({"price_on_demand": "cheap"}, "expected a number"),
        ({"as_of": "June 2024"}, "expected YYYY-MM-DD"),
        ({"host_price_on_demand": "9.99"}, "!= price_on_demand"),
        ({"interconnect": "Ethernet"}, "interconnect must be one of"),
    ],
)
def test_corrupt_rows_are_named(tmp_path, change, message):
    with open(shipped("gcp")) as handle:
        row = next(csv.DictReader(handle))
    path = tmp_path / "catalog.csv"
    _write(path, [{**row, **change}])
    with pytest.raises(cat.CatalogError, match=f"catalog.csv:2: .*{message}"):
        cat.load_catalog([path])


def test_missing_file_and_column(tmp_path):
    with pytest.raises(cat.CatalogError, match="catalog file .*none.csv: no such file"):
        cat.load_catalog([tmp_path / "none.csv"])
    (tmp_path / "bad.csv").write_text("provider,region\ngcp,us-central1\n")
    with pytest.raises(cat.CatalogError, match="missing columns"):
        cat.load_catalog([tmp_path / "bad.csv"])


def test_atomic_write_leaves_old_file_on_failure(tmp_path):
    path = tmp_path / "out.csv"
    path.write_text("old\n")

    def rows():
        yield {"provider": "gcp"}
        raise RuntimeError("API died mid-way")

    with pytest.raises(RuntimeError):
        cat.write_csv_atomically(path, cat.COLUMNS, rows())
    assert path.read_text() == "old\n" and list(tmp_path.iterdir()) == [path]


runner = CliRunner()


def test_cli_show_json_sorted_by_gpu_hour():
    result = runner.invoke(app, ["catalog", "show", "--provider", "aws", "--gpu", "V100",
                                 "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert rows[0]["instance_type"].startswith("p3.") and rows[0]["region"] == "us-east-1"
    assert {r["region"] for r in rows} == {"us-east-1", "us-east-2", "us-west-2", "eu-west-1",
                                           "eu-central-1", "ap-northeast-1"}
    per_gpu = [r["usd_per_gpu_hour"] for r in rows]
    assert per_gpu == sorted(per_gpu) and per_gpu[0] == pytest.approx(3.06)


def test_cli_show_csv_spot_and_table():
    result = runner.invoke(app, ["catalog", "show", "--gpu", "H100", "--spot", "--format", "csv"])
    assert result.exit_code == 0
    rows = list(csv.DictReader(result.stdout.splitlines()))
    assert {"p5.4xlarge", "p5.48xlarge", "a3-highgpu-8g"} <= {r["instance_type"] for r in rows}
    assert all(float(r["price_spot"]) > 0 for r in rows)
    # GCP's us-central1 A3 spot price is above on-demand in the snapshot: rejected
    assert not [r for r in rows if r["instance_type"].startswith("a3-highgpu")
                and r["region"] == "us-central1"]
    table = runner.invoke(
        app, ["catalog", "show", "--provider", "gcp", "--region", "us-central1", "--gpu", "L4"],
        env={"COLUMNS": "200"},
    )
    assert (table.exit_code == 0 and "g2-standard-4" in table.stdout
            and "prices as of 2026-11-23" in table.stdout)


@pytest.mark.parametrize(
    "args, accepted",
    [(["--provider", "azure"], "gcp, aws"), (["--region", "mars-1"], "us-central1"),
     (["--provider", "aws", "--region", "us-central1"], "us-east-1"),
     (["--gpu", "B300"], "A100-40GB")],
)
def test_cli_unknown_values_exit_2(args, accepted):
    result = runner.invoke(app, ["catalog", "show", *args])
    assert result.exit_code == 2
    error = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and accepted in error[0] and "Traceback" not in result.output


def test_cli_corrupt_file_given_exits_2(tmp_path):
    # a file the user names is bad input, as `advisor recommend --catalog FILE` has it
    (tmp_path / "bad.csv").write_text("provider,region\n")
    result = runner.invoke(app, ["catalog", "show", "--file", str(tmp_path / "bad.csv")])
    assert result.exit_code == 2 and "missing columns" in result.stderr
