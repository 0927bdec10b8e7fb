"""`profiler cleanup` against moto's EC2: lists only labelled leftovers, asks, deletes."""

from __future__ import annotations

import json

import pytest
from fakes.aws import aws, aws_provider, moto_endpoint, without_aws_credentials  # noqa: F401
from typer.testing import CliRunner

from cloud.provider import ClusterSpec
from gpuadvisor.durations import parse_duration
from profiler.cli import COMMAND_MODULES, app

for _name in COMMAND_MODULES:
    __import__(f"profiler.cli.{_name}")

runner = CliRunner()


@pytest.fixture
def leftovers(aws, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws["endpoint"])  # the CLI's own boto3 clients
    spec = ClusterSpec(sweep="crashed", trial="t1", nodes=2, instance_type="g4dn.xlarge",
                       region="us-east-1", zones=("us-east-1a",))
    nodes = aws_provider(aws).launch(spec)
    aws["ec2"].run_instances(ImageId=aws["image"], MinCount=1, MaxCount=1)  # someone else's
    return nodes


def states(ec2) -> dict[str, str]:
    return {i["InstanceId"]: i["State"]["Name"]
            for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]}


def test_lists_as_json_and_deletes_with_yes(aws, leftovers):
    listed = runner.invoke(app, ["cleanup", "--provider", "aws", "--region", "us-east-1",
                                 "--format", "json", "--yes"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)
    assert sorted(r["id"] for r in rows) == sorted(n.id for n in leftovers)
    assert {r["cluster"] for r in rows} == {"crashed-t1"}
    after = states(aws["ec2"])
    assert {after[n.id] for n in leftovers} == {"terminated"}
    assert sorted(after.values()).count("running") == 1  # the unlabelled one is untouched


def test_asks_before_deleting(aws, leftovers):
    refused = runner.invoke(app, ["cleanup", "--provider", "aws", "--region", "us-east-1"],
                            input="n\n")
    assert refused.exit_code == 1 and "crashed-t1" in refused.stdout
    assert "nothing deleted" in refused.output
    assert {states(aws["ec2"])[n.id] for n in leftovers} == {"running"}


def test_older_than_filters_new_nodes(aws, leftovers):
    result = runner.invoke(app, ["cleanup", "--provider", "aws", "--region", "us-east-1",
                                 "--older-than", "2h"])
    assert result.exit_code == 0 and "no leftovers on aws" in result.stdout


@pytest.mark.parametrize("args, message", [
    (["--provider", "azure"], "gcp, aws or local"),
    (["--provider", "aws", "--older-than", "soon"],
     "--older-than 'soon' is not understood; give a duration such as 90m"),
])
def test_bad_flags_are_one_line_errors(args, message):
    result = runner.invoke(app, ["cleanup", *args])
    assert result.exit_code == 2 and message in result.output
    assert "Traceback" not in result.output


def test_missing_credentials_is_one_line(monkeypatch, tmp_path):
    without_aws_credentials(monkeypatch, tmp_path)
    result = runner.invoke(app, ["cleanup", "--provider", "aws", "--region", "us-east-1"])
    assert result.exit_code == 2 and "aws configure" in result.output


def test_older_than_takes_the_duration_grammar():
    assert parse_duration("90s") == 90 and parse_duration("2h") == 7200
    assert parse_duration("1.5d") == 129600 and parse_duration("1d12h") == 129600
    assert parse_duration("0s") == 0 and parse_duration("3") == 3 * 3600
