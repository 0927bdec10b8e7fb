"""AwsProvider against moto's server: tags, spot options, user-data, terminate-on-everything,
zone fallback on InsufficientInstanceCapacity, events, cleanup discovery, credentials."""

from __future__ import annotations

import base64
import copy

import pytest

pytest.importorskip("boto3")

from fakes.aws import (  # noqa: E402,F401
    AMI_PARAMETER,
    aws,
    aws_provider,
    inject_stockout,
    moto_endpoint,
    without_aws_credentials,
)

from cloud.aws import DEFAULT_AMI_PARAMETER, AwsProvider  # noqa: E402
from cloud.provider import (  # noqa: E402
    LAUNCHED_AT,
    NODE0_ADDRESS,
    SUBNET,
    CapacityError,
    ClusterSpec,
    CredentialsError,
    NodeState,
    fill,
)


def spec(**fields) -> ClusterSpec:
    values = dict(sweep="s1", trial="t1", nodes=2, instance_type="g4dn.xlarge", gpu_type="T4",
                  gpus_per_node=1, spot=True, region="us-east-1",
                  zones=("us-east-1a", "us-east-1b"), max_run_seconds=3000,
                  agent_config={"sink": "s3://bucket/results"})
    values.update(fields)
    return ClusterSpec(**values)


def instances(ec2) -> list[dict]:
    return [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]


def user_data(ec2, instance_id: str) -> str:
    value = ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")
    return base64.b64decode(value["UserData"]["Value"]).decode()


def test_launch_spot_with_tags_ami_and_user_data(aws):
    ec2 = aws["ec2"]
    nodes = aws_provider(aws).launch(spec())
    found = {i["InstanceId"]: i for i in instances(ec2)}
    assert sorted(found) == sorted(n.id for n in nodes)
    first = found[nodes[0].id]
    tags = {t["Key"]: t["Value"] for t in first["Tags"]}
    assert tags == {"Name": "gpuadv-s1-t1-0", "gpuadvisor-sweep": "s1",
                    "gpuadvisor-trial": "t1", "gpuadvisor-node": "0"}
    assert first["ImageId"] == aws["image"]  # the DLAMI from the SSM parameter
    assert first["InstanceLifecycle"] == "spot"
    assert first["InstanceType"] == "g4dn.xlarge"
    assert first["Placement"]["AvailabilityZone"] == "us-east-1a"
    assert first["MetadataOptions"]["HttpTokens"] == "required"
    shutdown = ec2.describe_instance_attribute(
        InstanceId=nodes[0].id, Attribute="instanceInitiatedShutdownBehavior")
    assert shutdown["InstanceInitiatedShutdownBehavior"]["Value"] == "terminate"
    script = user_data(ec2, nodes[0].id)
    assert "shutdown -h +50 " in script  # dead-man switch: max_run_seconds 3000
    assert "python -m profiler.agent --config /etc/gpuadvisor/agent.json" in script
    assert '"sink": "s3://bucket/results"' in script
    later = user_data(ec2, nodes[1].id)
    assert f'"rendezvous_host": "{nodes[0].internal_address}"' in later
    assert nodes[0].internal_address and nodes[0].spot


def test_run_request_has_every_terminate_option(aws):
    request = aws_provider(aws).run_request(spec(), 0, "ami-1", "subnet-1", None)
    assert request["InstanceMarketOptions"] == {"MarketType": "spot", "SpotOptions": {
        "SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"}}
    assert request["InstanceInitiatedShutdownBehavior"] == "terminate"
    assert request["BlockDeviceMappings"][0]["Ebs"]["DeleteOnTermination"] is True
    assert [t["ResourceType"] for t in request["TagSpecifications"]] == ["instance", "volume"]
    on_demand = aws_provider(aws).run_request(spec(spot=False), 0, "ami-1", None, None)
    assert "InstanceMarketOptions" not in on_demand and "SubnetId" not in on_demand


def test_stockout_tries_the_next_zone(aws):
    ec2 = aws["ec2"]
    subnets = {s["AvailabilityZone"]: s["SubnetId"] for s in ec2.describe_subnets()["Subnets"]}
    inject_stockout(ec2, {subnets["us-east-1a"]})
    nodes = aws_provider(aws).launch(spec())
    assert {n.zone for n in nodes} == {"us-east-1b"}


def test_stockout_everywhere_leaves_nothing_running(aws):
    ec2 = aws["ec2"]
    subnets = {s["AvailabilityZone"]: s["SubnetId"] for s in ec2.describe_subnets()["Subnets"]}
    # Each zone has room for node 0 only: the partial cluster is terminated before moving on.
    inject_stockout(ec2, {subnets["us-east-1a"], subnets["us-east-1b"]}, allow=1)
    with pytest.raises(CapacityError, match="us-east-1a.*us-east-1b"):
        aws_provider(aws).launch(spec())
    states = [i["State"]["Name"] for i in instances(ec2)]
    assert len(states) == 2 and set(states) == {"terminated"}


def test_launch_is_idempotent_and_replaces_a_lost_node(aws):
    provider = aws_provider(aws)
    first = provider.launch(spec())
    assert [n.id for n in provider.launch(spec())] == [n.id for n in first]
    provider.revoke(first[1])
    assert provider.list(first[0].cluster)[first[1].id] is NodeState.TERMINATED
    again = provider.launch(spec())
    assert again[0].id == first[0].id and again[1].id != first[1].id
    assert again[1].zone == first[0].zone


def test_events_and_terminate_is_idempotent(aws):
    provider = aws_provider(aws)
    nodes = provider.launch(spec())
    cluster = nodes[0].cluster
    kinds = [e.kind for e in provider.poll_events(cluster)]
    assert kinds == ["running", "running"]
    assert provider.poll_events(cluster) == []
    provider.terminate(nodes)
    provider.terminate(nodes)
    assert set(provider.list(cluster).values()) == {NodeState.TERMINATED}
    assert sorted(e.kind for e in provider.poll_events(cluster)) == ["terminated", "terminated"]


def test_leftovers_by_tag_and_age(aws):
    provider = aws_provider(aws)
    provider.launch(spec(trial="a", nodes=1))
    aws["ec2"].run_instances(ImageId=aws["image"], MinCount=1, MaxCount=1)  # not ours
    left = provider.leftovers()
    assert [n.labels["gpuadvisor-trial"] for n in left] == ["a"]
    assert left[0].cluster == "s1-a"
    assert provider.leftovers(older_than_s=3600) == []


def test_plan_sends_nothing(aws, moto_endpoint):
    provider = AwsProvider("us-east-1", ec2=object(), ssm=object())  # any call would fail
    planned = provider.plan(spec())
    assert [p.action for p in planned] == ["ec2.RunInstances"] * 2
    assert planned[0].body["ImageId"] == f"${{ssm:{DEFAULT_AMI_PARAMETER}}}"
    assert planned[0].body["SubnetId"] == SUBNET and [p.node for p in planned] == [0, 1]
    assert planned[0].where["zones"] == ["us-east-1a", "us-east-1b"]


def test_launch_sends_exactly_the_planned_requests(aws):
    ec2, sent = aws["ec2"], []
    ec2.meta.events.register("provide-client-params.ec2.RunInstances",
                             lambda params, **_: sent.append(copy.deepcopy(params)))
    provider = aws_provider(aws, clock=lambda: 1700000000.5)
    planned = provider.plan(spec())
    nodes = provider.launch(spec())
    subnets = {s["AvailabilityZone"]: s["SubnetId"] for s in ec2.describe_subnets()["Subnets"]}
    # What a launch learns as it goes: the image, the zone's subnet, the time, node 0's address.
    values = {f"${{ssm:{AMI_PARAMETER}}}": aws["image"], SUBNET: subnets["us-east-1a"],
              LAUNCHED_AT: 1700000000.5, NODE0_ADDRESS: nodes[0].internal_address}
    assert sent == [fill(p.body, values) for p in planned]
    assert nodes[0].internal_address in sent[1]["UserData"]


def test_clients_it_makes_retry_adaptively_within_timeouts(monkeypatch):
    from fakes.aws import FAKE_CREDENTIALS

    for key, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    for made in (AwsProvider("us-east-1")._client(s, "us-east-1") for s in ("ec2", "ssm")):
        config = made.meta.config
        assert config.retries == {"mode": "adaptive", "total_max_attempts": 9}  # 8 retries
        assert (config.connect_timeout, config.read_timeout) == (10.0, 60.0)


def test_missing_credentials_is_a_clear_error(monkeypatch, tmp_path):
    without_aws_credentials(monkeypatch, tmp_path)
    with pytest.raises(CredentialsError, match="aws configure"):
        AwsProvider("us-east-1").launch(spec())


def test_instances_land_in_the_spec_region_not_the_default(aws, monkeypatch):
    from fakes.aws import client

    monkeypatch.setenv("AWS_ENDPOINT_URL", aws["endpoint"])  # clients the provider makes
    west = {name: client(aws["endpoint"], name, "us-west-2") for name in ("ec2", "ssm")}
    image = west["ec2"].register_image(Name="dlami-west", RootDeviceName="/dev/sda1")["ImageId"]
    west["ssm"].put_parameter(Name=AMI_PARAMETER, Value=image, Type="String")
    provider = AwsProvider(ami_parameter=AMI_PARAMETER)  # no region: boto3's is us-east-1
    nodes = provider.launch(spec(region="us-west-2", zones=("us-west-2b",)))
    assert {n.region for n in nodes} == {"us-west-2"} and {n.zone for n in nodes} == {"us-west-2b"}
    assert instances(aws["ec2"]) == []  # nothing in the default region
    assert {i["ImageId"] for i in instances(west["ec2"])} == {image}
    cluster = nodes[0].cluster
    assert set(provider.list(cluster).values()) <= {NodeState.PENDING, NodeState.RUNNING}
    assert [e.kind for e in provider.poll_events(cluster)] == ["running", "running"]
    assert AwsProvider("us-west-2").leftovers() and AwsProvider().leftovers() == []
    provider.terminate(nodes)
    assert {i["State"]["Name"] for i in instances(west["ec2"])} == {"terminated"}


def test_region_follows_the_zones_when_the_spec_names_none(aws, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws["endpoint"])
    nodes = AwsProvider().launch(spec(region=None, zones=("eu-west-1a",), image="ami-12c6146b",
                                      nodes=1))
    assert nodes[0].region == "eu-west-1" and instances(aws["ec2"]) == []
