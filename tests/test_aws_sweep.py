"""End to end: `profiler sweep` on provider aws against moto's EC2 and S3. The nodes moto
starts never run the agent, so no record ever arrives: every trial must time out on
startup_timeout, be stored as failed, and leave no instance running."""

from __future__ import annotations

import json

import pytest
from fakes.aws import aws, moto_endpoint, sweep, write_spec  # noqa: F401

from gpuadvisor.store import Store


@pytest.fixture
def quick(aws, monkeypatch):
    """Clients the provider makes reach moto; it looks at the cluster 5 times a second."""
    from fakes.aws import client

    from cloud.aws import AwsProvider

    monkeypatch.setenv("AWS_ENDPOINT_URL", aws["endpoint"])
    monkeypatch.setattr(AwsProvider, "poll_interval_s", 0.2)  # moto answers at once
    client(aws["endpoint"], "s3").create_bucket(Bucket="results")
    return aws


def test_silent_nodes_time_out_and_are_all_terminated(quick, tmp_path):
    aws, store = quick, tmp_path / "runs.db"
    result = sweep(tmp_path, write_spec(tmp_path, aws["image"]))
    assert "Traceback" not in result.output
    reservations = aws["ec2"].describe_instances()["Reservations"]
    launched = [i for r in reservations for i in r["Instances"]]
    assert len(launched) == 3  # 1 + 2 nodes
    assert {i["State"]["Name"] for i in launched} == {"terminated"}
    assert all(i["InstanceLifecycle"] == "spot" for i in launched)
    with Store(store) as opened:
        trials = opened.rows("trials", {"sweep": "silent-nodes"})
    assert [t["status"] for t in trials] == ["failed", "failed"]
    assert all("startup_timeout" in t["error"] for t in trials)
    assert {t["provider"] for t in trials} == {"aws"}


def test_dry_run_prints_every_request_and_sends_none(aws, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws["endpoint"])
    result = sweep(tmp_path, write_spec(tmp_path, aws["image"]), "--dry-run", "--format",
                   "json")
    assert result.exit_code == 0, result.output
    assert aws["ec2"].describe_instances()["Reservations"] == []
    text = json.dumps(json.loads(result.stdout))
    assert text.count("ec2.RunInstances") == 3
    assert "InstanceInterruptionBehavior" in text and "gpuadvisor-sweep" in text


def test_the_spec_region_is_where_instances_run_and_what_the_store_says(quick, tmp_path):
    from fakes.aws import client

    result = sweep(tmp_path, write_spec(tmp_path, quick["image"], "eu-west-1", "[1]"))
    assert "Traceback" not in result.output
    west = [i for r in client(quick["endpoint"], "ec2", "eu-west-1").describe_instances()[
        "Reservations"] for i in r["Instances"]]
    assert [i["State"]["Name"] for i in west] == ["terminated"]
    assert quick["ec2"].describe_instances()["Reservations"] == []  # the default region
    with Store(tmp_path / "runs.db") as opened:
        assert [t["region"] for t in opened.rows("trials", {"sweep": "silent-nodes"})] == [
            "eu-west-1"]


def test_max_cost_stops_before_launching_when_the_price_is_unknown(quick, tmp_path):
    from fakes.aws import client

    # The catalog has no p5.48xlarge in eu-west-1: its price is unknown, never $0.
    spec = write_spec(tmp_path, quick["image"], "eu-west-1", "[8]", instance="p5.48xlarge")
    result = sweep(tmp_path, spec, "--max-cost", "1")
    assert result.exit_code == 3 and "Traceback" not in result.output
    [line] = result.output.strip().splitlines()
    assert "p5.48xlarge in eu-west-1" in line and "price_per_hour" in line
    assert "catalog import skypilot" in line
    west = client(quick["endpoint"], "ec2", "eu-west-1")
    assert west.describe_instances()["Reservations"] == []
    with Store(tmp_path / "runs.db") as opened:
        assert opened.rows("trials") == []


def test_an_explicit_price_in_the_spec_is_charged_and_stored(quick, tmp_path):
    spec = write_spec(tmp_path, quick["image"], "eu-west-1", "[8]", instance="p5.48xlarge",
                      extra="price_per_hour: 100\n")
    result = sweep(tmp_path, spec, "--max-cost", "1")
    assert result.exit_code == 3 and "past --max-cost $1.00" in result.output
    cheap = write_spec(tmp_path, quick["image"], "eu-west-1", "[1]", instance="p5.48xlarge",
                       extra="price_per_hour: 0.5\n")
    result = sweep(tmp_path, cheap, "--max-cost", "1")
    assert "Traceback" not in result.output
    with Store(tmp_path / "runs.db") as opened:
        [trial] = opened.rows("trials")
    assert trial["price_per_node_hour"] == 0.5 and trial["region"] == "eu-west-1"


def test_an_install_source_with_a_token_stops_the_sweep_before_any_launch(quick, tmp_path,
                                                                          monkeypatch):
    token = "ghp_" + "x" * 36
    monkeypatch.setenv("GPUADVISOR_INSTALL", f"git+https://{token}@github.com/org/repo.git")
    result = sweep(tmp_path, write_spec(tmp_path, quick["image"]))
    assert result.exit_code == 2 and "Traceback" not in result.output
    [line] = result.output.strip().splitlines()
    assert "GPUADVISOR_INSTALL carries a credential" in line and token not in line
    assert quick["ec2"].describe_instances()["Reservations"] == []
    with Store(tmp_path / "runs.db") as opened:
        assert opened.rows("trials") == []
