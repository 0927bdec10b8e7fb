"""GcpProvider against a local endpoint that receives google-cloud-compute's real REST
requests: the tests assert the exact requests (path, JSON body) and the handling of GCP's
answers (operations, stock-outs, quota, preemption)."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
import textwrap
from datetime import datetime
from pathlib import Path

import pytest

pytest.importorskip("google.cloud.compute_v1")

from fakes.gcp import fake_gcp  # noqa: E402

from cloud.gcp import GcpProvider, accelerators, instance_name  # noqa: E402
from cloud.provider import (  # noqa: E402
    LAUNCHED_AT,
    NODE0_ADDRESS,
    CapacityError,
    ClusterSpec,
    CredentialsError,
    NodeState,
    ProviderError,
    QuotaError,
    fill,
)

INSERT = "/compute/v1/projects/test-project/zones/{zone}/instances"
ROOT = Path(__file__).resolve().parents[1]


def spec(**fields) -> ClusterSpec:
    values = dict(sweep="s1", trial="t1", nodes=2, instance_type="n1-standard-8",
                  gpu_type="T4", gpus_per_node=2, spot=True,
                  zones=("us-central1-a", "us-central1-b"), max_run_seconds=5400,
                  agent_config={"sink": "gs://bucket/results", "model": "resnet18"})
    values.update(fields)
    return ClusterSpec(**values)


@pytest.fixture
def gcp():
    with fake_gcp() as pair:
        yield pair


def test_insert_request_is_exact(gcp):
    provider, fake = gcp
    nodes = provider.launch(spec())
    inserts = fake.calls("POST", "/instances")
    assert [r.path for r in inserts] == [INSERT.format(zone="us-central1-a")] * 2
    body = inserts[0].body
    assert body["name"] == "gpuadv-s1-t1-0"
    assert "networkIP" not in body["networkInterfaces"][0]  # GCP picks the address
    assert body["machineType"] == "zones/us-central1-a/machineTypes/n1-standard-8"
    assert body["guestAccelerators"] == [{
        "acceleratorType": "zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4",
        "acceleratorCount": 2}]
    assert body["scheduling"] == {
        "provisioningModel": "SPOT", "onHostMaintenance": "TERMINATE", "automaticRestart": False,
        "instanceTerminationAction": "DELETE", "maxRunDuration": {"seconds": "5400"}}
    assert body["labels"] == {"gpuadvisor-sweep": "s1", "gpuadvisor-trial": "t1",
                              "gpuadvisor-node": "0"}
    assert body["disks"][0]["initializeParams"]["sourceImage"].startswith(
        "projects/deeplearning-platform-release/global/images/family/")
    items = {i["key"]: i["value"] for i in body["metadata"]["items"]}
    script = items["startup-script"]
    assert "python -m profiler.agent --config /etc/gpuadvisor/agent.json" in script
    assert '"sink": "gs://bucket/results"' in script and '"rendezvous_host": null' in script
    # Node 1 is told node 0's internal address, read back after node 0 was created.
    later = {i["key"]: i["value"] for i in inserts[1].body["metadata"]["items"]}
    assert f'"rendezvous_host": "{nodes[0].internal_address}"' in later["startup-script"]
    assert nodes[0].internal_address == "10.128.0.2"
    assert [n.id for n in nodes] == ["gpuadv-s1-t1-0", "gpuadv-s1-t1-1"]
    assert all(n.zone == "us-central1-a" and n.spot for n in nodes)


def test_on_demand_and_built_in_gpus():
    with fake_gcp() as (provider, fake):
        provider.launch(spec(nodes=1, spot=False, instance_type="a2-highgpu-4g",
                             gpu_type="A100-40GB", gpus_per_node=4))
        body = fake.calls("POST", "/instances")[0].body
    assert "guestAccelerators" not in body
    assert body["scheduling"]["provisioningModel"] == "STANDARD"
    assert body["scheduling"]["instanceTerminationAction"] == "DELETE"


@pytest.mark.parametrize("machine, gpu, count", [
    ("g2-standard-8", "L4", 1), ("g2-standard-48", "L4", 4),
    ("a2-ultragpu-8g", "A100-80GB", 8), ("a3-highgpu-8g", "H100-80GB", 8)])
def test_accelerator_optimised_families_accept_their_gpu(machine, gpu, count):
    assert accelerators(spec(instance_type=machine, gpu_type=gpu, gpus_per_node=count)) == []


@pytest.mark.parametrize("machine, gpu, count", [
    ("n1-standard-8", "A100-40GB", 1), ("e2-standard-8", "T4", 1),
    ("a2-highgpu-1g", "H100-80GB", 1), ("g2-standard-8", "L4", 2)])
def test_mismatched_machine_and_gpu_is_refused_before_any_request(machine, gpu, count):
    with fake_gcp() as (provider, fake):
        with pytest.raises(ProviderError, match=machine):
            provider.launch(spec(instance_type=machine, gpu_type=gpu, gpus_per_node=count))
        assert fake.requests == []


def test_stockout_falls_back_to_next_zone(gcp):
    provider, fake = gcp
    fake.stockout_zones.add("us-central1-a")
    nodes = provider.launch(spec(nodes=1))
    assert [n.zone for n in nodes] == ["us-central1-b"]
    assert [r.path for r in fake.calls("POST", "/instances")] == [
        INSERT.format(zone="us-central1-a"), INSERT.format(zone="us-central1-b")]


def test_stockout_everywhere_is_a_capacity_error(gcp):
    provider, fake = gcp
    fake.stockout_zones.update({"us-central1-a", "us-central1-b"})
    with pytest.raises(CapacityError, match="us-central1-a.*us-central1-b"):
        provider.launch(spec())


def test_quota_is_reported_plainly(gcp):
    provider, fake = gcp
    fake.quota_zones.add("us-central1-a")
    with pytest.raises(QuotaError, match="NVIDIA_T4_GPUS.*quota increase"):
        provider.launch(spec())
    assert len(fake.calls("POST", "/instances")) == 1  # quota is not retried in other zones


def test_transient_errors_are_retried(gcp, quick_gcp_retries):
    provider, fake = gcp
    fake.failures = [503, 503]  # the first look for the cluster's instances, twice
    provider.launch(spec(nodes=1))
    lists = fake.calls("GET", "/aggregated/instances")
    assert len(lists) == 3 and lists[0] == lists[2]
    assert len(fake.calls("POST", "/instances")) == 1


def test_retries_end_at_their_deadline_with_one_line(gcp, quick_gcp_retries):
    provider, fake = gcp
    fake.failures = [503] * 1000
    with pytest.raises(ProviderError, match=r"HTTP 503: scripted failure \(still so after "
                                            r"0.5s of retries\)$"):
        provider.launch(spec(nodes=1))


def test_an_operation_that_never_ends_times_out(gcp, monkeypatch):
    from cloud.adaptors import gcp as adaptor

    provider, fake = gcp
    fake.hung_operations = True
    monkeypatch.setattr(adaptor, "SETTINGS", adaptor.Settings(operation_deadline_s=0.2))
    with pytest.raises(ProviderError, match=r"^GCP operation operation-1 in us-central1-a is "
                                            r"not done within the 0.2s allowed; look at it"
                       ) as raised:
        provider.launch(spec(nodes=1))
    assert len(fake.calls("POST", "/operations/operation-1/wait")) >= 1
    # Its deletion hangs as well: the error says so and carries the node for a later try.
    assert "could not be terminated" in str(raised.value)
    assert [n.id for n in raised.value.nodes] == ["gpuadv-s1-t1-0"]


def test_launch_is_idempotent(gcp):
    provider, fake = gcp
    first = provider.launch(spec())
    again = provider.launch(spec())
    assert again == first  # same names, addresses and launched_at
    assert len(fake.calls("POST", "/instances")) == 2 and len(fake.instances) == 2


def test_another_process_adopts_the_running_cluster(gcp):
    provider, fake = gcp
    first = provider.launch(spec())
    other = GcpProvider("test-project", instances=provider._instances,
                        zone_operations=provider._operations)
    adopted = other.launch(spec())
    assert [(n.id, n.internal_address) for n in adopted] == [
        (n.id, n.internal_address) for n in first]
    assert len(fake.calls("POST", "/instances")) == 2
    created = fake.instances[("us-central1-a", first[0].id)]["creationTimestamp"]
    assert adopted[0].launched_at == datetime.fromisoformat(created).timestamp()


def poll_until_running(provider, cluster: str, ids: set[str]) -> list:
    events = []
    for _ in range(4):
        events += provider.poll_events(cluster)
    assert {e.node_id for e in events if e.kind == "running"} >= ids
    return events


def test_replacement_gets_a_name_and_running_event_of_its_own(gcp):
    provider, fake = gcp
    nodes = provider.launch(spec())
    cluster = nodes[0].cluster
    poll_until_running(provider, cluster, {n.id for n in nodes})
    provider.terminate([nodes[1]])  # what the orchestrator does with a revoked node
    again = provider.launch(spec())
    inserts = fake.calls("POST", "/instances")
    assert [r.body["name"] for r in inserts] == [
        "gpuadv-s1-t1-0", "gpuadv-s1-t1-1", "gpuadv-s1-t1-1-r1"]
    assert again[0] is nodes[0]  # the survivor keeps its launched_at
    assert again[1].id == "gpuadv-s1-t1-1-r1" and again[1].launched_at > nodes[1].launched_at
    script = {i["key"]: i["value"] for i in inserts[2].body["metadata"]["items"]}
    assert f'"rendezvous_host": "{nodes[0].internal_address}"' in script["startup-script"]
    events = poll_until_running(provider, cluster, {again[1].id})
    [running] = [e for e in events if e.kind == "running"]
    assert running.node_id == again[1].id
    assert again[1].launched_at <= running.detail["running_at"] + 0.001
    assert running.detail["staging_s"] >= 0 and running.detail["provisioning_s"] >= 0
    assert not [e for e in events if e.kind == "terminated"]
    assert provider.list(cluster) == {nodes[0].id: NodeState.RUNNING,
                                      again[1].id: NodeState.RUNNING}
    provider.terminate([again[1]])
    assert provider.launch(spec())[1].id == "gpuadv-s1-t1-1-r2"


def test_injected_revocation_is_reported_under_the_old_name(gcp):
    provider, _ = gcp
    nodes = provider.launch(spec())
    provider.revoke(nodes[1])
    provider.terminate([nodes[1]])
    again = provider.launch(spec())
    events = provider.poll_events(nodes[0].cluster)
    assert [e.node_id for e in events if e.kind == "preempted"] == [nodes[1].id]
    assert again[1].id != nodes[1].id


def test_replaced_node_0_keeps_the_rendezvous_address(gcp):
    provider, fake = gcp
    nodes = provider.launch(spec())
    provider.terminate([nodes[0]])
    again = provider.launch(spec())
    insert = fake.calls("POST", "/instances")[-1].body
    assert insert["name"] == "gpuadv-s1-t1-0-r1"
    assert insert["networkInterfaces"][0]["networkIP"] == nodes[0].internal_address
    assert again[0].internal_address == nodes[0].internal_address
    assert again[1] is nodes[1]


def test_replaced_node_0_takes_a_new_address_when_its_old_one_is_taken(gcp):
    provider, fake = gcp
    nodes = provider.launch(spec())
    provider.terminate([nodes[0]])
    squatter = copy.deepcopy(fake.instances[("us-central1-a", nodes[1].id)])
    squatter.update(name="someone-else", labels={})
    squatter["networkInterfaces"][0]["networkIP"] = nodes[0].internal_address
    fake.instances[("us-central1-a", "someone-else")] = squatter
    again = provider.launch(spec())
    inserts = fake.calls("POST", "/instances")[2:]
    assert [r.body["name"] for r in inserts] == ["gpuadv-s1-t1-0-r1"] * 2
    assert "networkIP" not in inserts[1].body["networkInterfaces"][0]
    assert again[0].internal_address not in (None, nodes[0].internal_address)


def test_stockout_during_a_replacement_spares_the_survivors(gcp):
    provider, fake = gcp
    nodes = provider.launch(spec(nodes=3))
    provider.terminate([nodes[1], nodes[2]])
    fake.stockout_zones.add("us-central1-a")
    again = provider.launch(spec(nodes=3))
    assert again[0] is nodes[0]
    assert [n.zone for n in again[1:]] == ["us-central1-b"] * 2
    assert ("us-central1-a", nodes[0].id) in fake.instances


def test_preemption_from_simulated_maintenance(gcp):
    provider, fake = gcp
    nodes = provider.launch(spec())
    provider.revoke(nodes[1])
    assert fake.calls("POST", f"/instances/{nodes[1].id}/simulateMaintenanceEvent")
    events = provider.poll_events(nodes[0].cluster)
    preempted = [e for e in events if e.kind == "preempted"]
    assert [e.node_id for e in preempted] == [nodes[1].id]
    ops = fake.calls("GET", "/zones/us-central1-a/operations")
    assert ops[0].query["filter"] == ['operationType="compute.instances.preempted"']
    assert provider.list(nodes[0].cluster) == {nodes[0].id: NodeState.RUNNING}
    assert not [e for e in provider.poll_events(nodes[0].cluster) if e.kind == "preempted"]


def test_running_event_carries_startup_phases(gcp):
    provider, _ = gcp
    nodes = provider.launch(spec(nodes=1))
    events = []
    for _ in range(4):
        events += provider.poll_events(nodes[0].cluster)
    running = [e for e in events if e.kind == "running"]
    assert len(running) == 1
    detail = running[0].detail
    # lastStartTimestamp and creationTimestamp as GCP reported them; STAGING as polled.
    assert nodes[0].launched_at <= detail["running_at"] + 0.001
    assert detail["created_at"] <= detail["running_at"]
    assert detail["staging_s"] >= 0 and detail["provisioning_s"] >= 0


def test_terminate_deletes_and_is_idempotent(gcp):
    provider, fake = gcp
    nodes = provider.launch(spec())
    provider.terminate(nodes)
    provider.terminate(nodes)
    assert fake.instances == {}
    deletes = fake.calls("DELETE")
    assert sorted(r.path.rsplit("/", 1)[-1] for r in deletes) == sorted([n.id for n in nodes] * 2)


def test_leftovers_are_found_by_label(gcp):
    provider, fake = gcp
    provider.launch(spec(trial="a", nodes=1))
    provider.launch(spec(trial="b", nodes=1))
    left = provider.leftovers()
    assert sorted(n.id for n in left) == ["gpuadv-s1-a-0", "gpuadv-s1-b-0"]
    assert fake.calls("GET", "/aggregated/instances")[-1].query["filter"] == [
        "labels.gpuadvisor-sweep:*"]
    assert provider.leftovers(older_than_s=10 * 365 * 86400) == []


def test_plan_sends_nothing():
    with fake_gcp() as (provider, fake):
        planned = provider.plan(spec())
        assert fake.requests == []
    assert [p.action for p in planned] == ["compute.instances.insert"] * 2
    assert [p.node for p in planned] == [0, 1]
    assert planned[0].where["zones"] == ["us-central1-a", "us-central1-b"]
    assert planned[0].body["instance"]["scheduling"]["provisioningModel"] == "SPOT"


def test_launch_sends_exactly_the_planned_requests():
    with fake_gcp(clock=lambda: 1700000000.25) as (provider, fake):
        planned = provider.plan(spec())
        nodes = provider.launch(spec())
        inserts = fake.calls("POST", "/instances")
    # What a launch learns as it goes: the time it sends, node 0's address.
    values = {LAUNCHED_AT: 1700000000.25, NODE0_ADDRESS: nodes[0].internal_address}
    assert [r.body for r in inserts] == [fill(p.body["instance"], values) for p in planned]
    assert [r.path for r in inserts] == [INSERT.format(zone=p.body["zone"]) for p in planned]
    assert NODE0_ADDRESS in str(planned[1].body) and nodes[0].internal_address in str(
        inserts[1].body)
    assert '"launched_at": 1700000000.25' in str(inserts[0].body)


def test_plan_needs_no_google_cloud_compute(tmp_path):
    """The dry run works where google-cloud-compute is not installed."""
    code = textwrap.dedent("""
        import json, sys

        class Refuse:
            def find_spec(self, name, path=None, target=None):
                if name == "google" or name.startswith("google."):
                    raise ImportError(name + " is blocked")

        sys.meta_path.insert(0, Refuse())
        from cloud.gcp import GcpProvider
        from cloud.provider import ClusterSpec

        spec = ClusterSpec(sweep="s", trial="t", nodes=2, instance_type="n1-standard-8",
                           gpu_type="T4", gpus_per_node=1, zones=("us-central1-a",))
        planned = GcpProvider("p").plan(spec)
        print(json.dumps([p.body for p in planned]))
        print(sorted(m for m in sys.modules if m.split(".")[0] == "google"), file=sys.stderr)
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, timeout=60)
    assert result.returncode == 0, result.stderr
    bodies = json.loads(result.stdout)
    assert [b["instance"]["name"] for b in bodies] == ["gpuadv-s-t-0", "gpuadv-s-t-1"]
    assert result.stderr.strip() == "[]"


def test_missing_credentials_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    with pytest.raises(CredentialsError, match="gcloud auth application-default login"):
        GcpProvider("p").launch(spec(nodes=1))


def test_instance_names_are_valid_gcp_names():
    name = instance_name("x" * 63, 12, generation=99999)
    assert len(name) <= 63 and name.endswith("-12-r99999")
    assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name)
    assert instance_name("a_b", 0) == "gpuadv-a-b-0"
    # Long clusters that differ only in their trial id keep names of their own.
    assert instance_name("s" * 60 + "-t1", 0) != instance_name("s" * 60 + "-t2", 0)
