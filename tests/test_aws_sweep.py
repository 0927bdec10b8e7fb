"""End to end: `profiler sweep` on provider aws against moto's EC2 and S3. The nodes moto
starts never run the agent, so no record ever arrives: every trial must time out on
startup_timeout, be stored as failed, and leave no instance running."""

from __future__ import annotations

import json

from fakes.aws import aws, moto_endpoint  # noqa: F401
from typer.testing import CliRunner

from gpuadvisor.store import Store
from profiler.cli import COMMAND_MODULES, app

for _name in COMMAND_MODULES:
    __import__(f"profiler.cli.{_name}")


def write_spec(tmp_path, image: str) -> str:
    path = tmp_path / "aws.yaml"
    path.write_text(f"""
name: silent-nodes
provider: aws
models: [resnet18]
nodes: [1, 2]
batch_per_gpu: 16
instance_types: [g4dn.xlarge]
gpus_per_node: 1
region: us-east-1
zones: [us-east-1a, us-east-1b]
spot: true
image: {image}
startup_timeout: 2
max_seconds: 5
results: s3://results/runs
""")
    return str(path)


def test_silent_nodes_time_out_and_are_all_terminated(aws, tmp_path, monkeypatch):
    from cloud.aws import AwsProvider

    monkeypatch.setenv("AWS_ENDPOINT_URL", aws["endpoint"])
    monkeypatch.setattr(AwsProvider, "poll_interval_s", 0.2)  # moto answers at once
    from fakes.aws import client

    client(aws["endpoint"], "s3").create_bucket(Bucket="results")
    store = tmp_path / "runs.db"
    result = CliRunner().invoke(app, ["sweep", write_spec(tmp_path, aws["image"]),
                                      "--store", str(store)])
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
    result = CliRunner().invoke(app, ["sweep", write_spec(tmp_path, aws["image"]),
                                      "--dry-run", "--format", "json",
                                      "--store", str(tmp_path / "runs.db")])
    assert result.exit_code == 0, result.output
    assert aws["ec2"].describe_instances()["Reservations"] == []
    text = json.dumps(json.loads(result.stdout))
    assert text.count("ec2.RunInstances") == 3
    assert "InstanceInterruptionBehavior" in text and "gpuadvisor-sweep" in text
