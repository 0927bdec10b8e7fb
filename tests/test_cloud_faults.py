"""Faults injected into cloud launches: on AWS by a proxy in front of moto's server
(fakes/aws_faults.py), on GCP by the fake Compute endpoint (fakes/gcp_compute.py). Whatever
fails, and wherever, nothing is left running, and the error is one line that says what
failed and what was terminated."""

from __future__ import annotations

import pytest

pytest.importorskip("boto3")

from fakes.aws import AMI_PARAMETER, aws, client, moto_endpoint  # noqa: E402,F401
from fakes.aws_faults import DROP, Fault, FaultProxy, serve  # noqa: E402

from cloud.provider import (  # noqa: E402
    CapacityError,
    ClusterSpec,
    CredentialsError,
    ProviderError,
    QuotaError,
)

LIVE = {"pending", "running"}


def spec(nodes: int = 2, **fields) -> ClusterSpec:
    values = dict(sweep="faults", trial="t1", nodes=nodes, instance_type="g4dn.xlarge",
                  gpu_type="T4", gpus_per_node=1, region="us-east-1", zones=("us-east-1a",),
                  max_run_seconds=3000, agent_config={"sink": "s3://bucket/results"})
    values.update(fields)
    return ClusterSpec(**values)


def instances(ec2) -> list[dict]:
    return [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]


def live(ec2) -> list[str]:
    return [i["InstanceId"] for i in instances(ec2) if i["State"]["Name"] in LIVE]


@pytest.fixture
def proxy(aws, monkeypatch):
    """The provider's own clients (their retries included) reach moto through the proxy;
    3 attempts a call, so that retried faults end quickly."""
    from cloud.adaptors import aws as adaptor

    faults = FaultProxy(aws["endpoint"])
    server, endpoint = serve(faults)
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setattr(adaptor, "SETTINGS", adaptor.Settings(
        max_attempts=2, connect_timeout_s=2.0, read_timeout_s=5.0))
    yield faults
    server.shutdown()
    server.server_close()


def aws_provider():
    from cloud.aws import AwsProvider

    return AwsProvider("us-east-1", ami_parameter=AMI_PARAMETER)


RUN = "RunInstances"
# (faults, nodes, error class, what the line says, instances made in all)
AWS_CASES = {
    "instance limit on node 1": ([Fault(RUN, "instance-limit", 2)], 2, QuotaError,
                                 ["InstanceLimitExceeded", "Service Quotas",
                                  "terminated the 1 node(s)"], 1),
    "vCPU limit on node 2": ([Fault(RUN, "vcpu-limit", 3)], 3, QuotaError,
                             ["VcpuLimitExceeded", "terminated the 2 node(s)"], 2),
    "credentials refused on node 1": ([Fault(RUN, "auth", 2)], 2, CredentialsError,
                                      ["refused the credentials",
                                       "terminated the 1 node(s)"], 1),
    "not authorized on node 1": ([Fault(RUN, "denied", 2)], 2, CredentialsError,
                                 ["UnauthorizedOperation", "terminated the 1 node(s)"], 1),
    "invalid request on node 1": ([Fault(RUN, "invalid", 2)], 2, ProviderError,
                                  ["InvalidParameterValue", "terminated the 1 node(s)"], 1),
    "stock-out from node 1 on": ([Fault(RUN, "capacity", 2, None)], 2, CapacityError,
                                 ["no capacity for 2 x g4dn.xlarge in us-east-1a"], 1),
    "server errors from node 1 on": ([Fault(RUN, "internal", 2, None)], 2, ProviderError,
                                     ["InternalError", "terminated the 1 node(s)"], 1),
    # The answer for node 1 is lost and so are the retries': node 1 exists, unknown to the
    # launch but for its tags.
    "answers lost from node 1 on": ([Fault(RUN, DROP, 2, None)], 2, ProviderError,
                                    ["check the network", "terminated the 2 node(s)"], 2),
    "answer lost, then server errors": ([Fault(RUN, DROP, 2), Fault(RUN, "internal", 3, None)],
                                        2, ProviderError, ["terminated the 2 node(s)"], 2),
}


@pytest.mark.parametrize("case", AWS_CASES)
def test_aws_launch_failing_on_node_k_leaves_nothing_running(proxy, aws, case):
    faults, nodes, error, words, made = AWS_CASES[case]
    proxy.faults = faults
    with pytest.raises(error) as raised:
        aws_provider().launch(spec(nodes))
    line = str(raised.value)
    assert "\n" not in line and all(w in line for w in words), line
    assert proxy.injected, "the fault was never met"
    assert live(aws["ec2"]) == [] and raised.value.nodes == []
    assert len(instances(aws["ec2"])) == made  # no duplicate from a retried request


def test_aws_a_lost_answer_is_retried_into_the_same_instance(proxy, aws):
    proxy.faults = [Fault(RUN, DROP, 2)]
    nodes = aws_provider().launch(spec(3))
    assert proxy.injected == [(RUN, 2, DROP)]
    assert sorted(live(aws["ec2"])) == sorted(n.id for n in nodes)  # 3, not 4 (ClientToken)
    aws_provider().terminate(nodes)
    assert live(aws["ec2"]) == []


def test_aws_what_the_launch_cannot_terminate_travels_with_the_error(proxy, aws):
    proxy.faults = [Fault(RUN, "instance-limit", 2), Fault("TerminateInstances", "denied", 1)]
    with pytest.raises(QuotaError, match="could not be terminated.*profiler cleanup") as raised:
        aws_provider().launch(spec(2))
    assert [n.id for n in raised.value.nodes] == live(aws["ec2"]) != []
    aws_provider().terminate(raised.value.nodes)  # what the orchestrator's `finally` does
    assert live(aws["ec2"]) == []


def test_aws_sweep_with_a_quota_on_node_1_stores_the_failure_and_leaks_nothing(
        proxy, aws, tmp_path, monkeypatch):
    from fakes.aws import sweep, write_spec

    from cloud.aws import AwsProvider
    from gpuadvisor.store import Store

    monkeypatch.setattr(AwsProvider, "poll_interval_s", 0.2)
    client(aws["endpoint"], "s3").create_bucket(Bucket="results")
    # The launch's own clean-up is refused too: the sweep's `finally` terminates node 0.
    proxy.faults = [Fault(RUN, "instance-limit", 2), Fault("TerminateInstances", "denied", 1)]
    result = sweep(tmp_path, write_spec(tmp_path, aws["image"], nodes="[2]"))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert live(aws["ec2"]) == [] and len(instances(aws["ec2"])) == 1
    with Store(tmp_path / "runs.db") as opened:
        [trial] = opened.rows("trials")
    assert trial["status"] == "failed" and "InstanceLimitExceeded" in trial["error"]
    assert "could not be terminated" in trial["error"]


# -- GCP -----------------------------------------------------------------------------------

# fault of insert 2 -> (error class, what the line says, instances made in all)
GCP_CASES = {
    "quota": (QuotaError, ["QUOTA_EXCEEDED", "quota increase", "terminated the 1 node(s)"], 1),
    "forbidden": (CredentialsError, ["HTTP 403", "terminated the 1 node(s)"], 1),
    "unauthenticated": (CredentialsError, ["gcloud auth application-default login",
                                           "terminated the 1 node(s)"], 1),
    "stockout": (CapacityError, ["no capacity for 2 x n1-standard-8 in us-central1-a"], 1),
    "hang": (ProviderError, ["is not done within the 0.5s allowed", "terminated the 2 node(s)"], 2),
}


@pytest.fixture
def gcp(monkeypatch):
    pytest.importorskip("google.cloud.compute_v1")
    from fakes.gcp import fake_gcp

    from cloud.adaptors import gcp as adaptor

    # The fake answers each `operations.wait` at once; its client timeout (wait_timeout_s)
    # stays well above that, so a loaded machine's slow answer is not read as an unreachable
    # API (it was 0.2 s, and one such answer failed the hang case in a clean-clone CI).
    monkeypatch.setattr(adaptor, "SETTINGS", adaptor.Settings(
        retry_deadline_s=0.5, retry_first_s=0.01, retry_max_s=0.05, wait_timeout_s=2.0,
        operation_deadline_s=0.5))
    with fake_gcp() as pair:
        yield pair


def gcp_spec(**fields) -> ClusterSpec:
    return spec(instance_type="n1-standard-8", zones=("us-central1-a",), region=None,
                agent_config={"sink": "gs://bucket/results"}, **fields)


@pytest.mark.parametrize("case", GCP_CASES)
def test_gcp_launch_failing_on_node_1_leaves_nothing_running(gcp, case):
    provider, fake = gcp
    error, words, made = GCP_CASES[case]
    fake.insert_faults = {2: case}
    with pytest.raises(error) as raised:
        provider.launch(gcp_spec())
    line = str(raised.value)
    assert "\n" not in line and all(w in line for w in words), line
    assert fake.instances == {} and raised.value.nodes == []
    assert len(fake.calls("DELETE")) == made


@pytest.mark.parametrize("case", ["drop", "internal"])
def test_gcp_a_lost_or_failed_insert_is_retried_into_one_instance(gcp, case):
    provider, fake = gcp
    fake.insert_faults = {2: case}
    nodes = provider.launch(gcp_spec())
    assert sorted(name for _, name in fake.instances) == sorted(n.id for n in nodes)
    provider.terminate(nodes)
    assert fake.instances == {}


def test_aws_a_launch_past_its_deadline_stops_and_terminates_what_it_made(proxy, aws,
                                                                           monkeypatch):
    from cloud.adaptors import aws as adaptor

    monkeypatch.setattr(adaptor.SETTINGS, "launch_deadline_s", 0.0)
    with pytest.raises(ProviderError, match=r"took over 0s .*terminated the 1 node\(s\)"):
        aws_provider().launch(spec(3))
    assert live(aws["ec2"]) == [] and len(instances(aws["ec2"])) == 1


def test_aws_ctrl_c_during_a_launch_terminates_what_it_made(proxy, aws, monkeypatch):
    from cloud.aws import AwsProvider

    run, calls = AwsProvider._run, []

    def interrupted_at_node_1(self, *args):
        calls.append(args)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return run(self, *args)

    monkeypatch.setattr(AwsProvider, "_run", interrupted_at_node_1)
    with pytest.raises(KeyboardInterrupt):
        aws_provider().launch(spec(2))
    assert live(aws["ec2"]) == [] and len(instances(aws["ec2"])) == 1


def test_gcp_trial_with_a_quota_on_node_1_is_stored_failed_and_leaks_nothing(gcp, tmp_path):
    from gpuadvisor.store import Store
    from profiler.orchestrator import TrialRun
    from profiler.progress import SweepDisplay
    from profiler.spec import parse_spec

    provider, fake = gcp
    spec = parse_spec({"name": "quota", "provider": "gcp", "models": ["resnet18"],
                       "nodes": [2], "instance_types": ["n1-standard-8"],
                       "zones": ["us-central1-a"], "gpu_type": "T4", "gpus_per_node": 1})
    [trial] = spec.trials()
    fake.insert_faults = {2: "quota"}
    with Store(tmp_path / "runs.db") as store:
        row = TrialRun(spec, trial, provider, f"file://{tmp_path / 'records'}",
                       SweepDisplay(1, enabled=False)).run(store)
    assert row["status"] == "failed" and "QUOTA_EXCEEDED" in row["error"]
    assert "terminated the 1 node(s)" in row["error"] and fake.instances == {}
