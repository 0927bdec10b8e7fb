"""Start-up rows from a trial's records and the provider's launches: CM-DARE's phases
(provisioning, staging, booting, first step) on each provider's evidence."""

import pytest

from cloud.provider import ProviderEvent
from gpuadvisor.records import make
from profiler.ingest import NodeLaunch, running_event, startup_rows


def agent_start(node: int, t: float, provider: str, launched_at: float,
                booted_at: float | None = None) -> dict:
    return {**make("agent_start", node=node, rank=None, restart=0, provider=provider,
                   launched_at=launched_at, booted_at=booted_at), "t": t}


def first_step(node: int, t: float) -> dict:
    return {**make("first_step", node=node, rank=node, restart=0, step=1), "t": t}


def test_local_node_is_provisioned_when_its_process_exists():
    records = [agent_start(0, 100.4, "local", 100.0), first_step(0, 110.0)]
    [row] = startup_rows(records, [NodeLaunch(0, 100.0)])
    assert row["provisioning_s"] == pytest.approx(0.4)  # the spawn
    assert (row["staging_s"], row["booting_s"]) == (0.0, 0.0)
    assert row["first_step_s"] == pytest.approx(9.6)
    assert row["extra"] == {"replacement": False, "running_from": "process start"}


def test_gcp_phases_come_from_the_running_event():
    running = ProviderEvent("vm-1", "running", 130.0, {
        "running_at": 130.0, "provisioning_s": 20.0, "staging_s": 10.0})
    records = [agent_start(1, 175.0, "gcp", 99.9, booted_at=131.0), first_step(1, 200.0)]
    [row] = startup_rows(records, [NodeLaunch(1, 100.0, "us-central1-a", running)])
    assert (row["provisioning_s"], row["staging_s"]) == (20.0, 10.0)
    assert row["booting_s"] == pytest.approx(45.0)  # RUNNING -> agent up
    assert row["first_step_s"] == pytest.approx(25.0)
    assert row["zone"] == "us-central1-a" and row["extra"]["running_from"] == "provider"


def test_ec2_launch_time_splits_request_to_running():
    # LaunchTime has a resolution of one second: it may read before the request was sent.
    running = ProviderEvent("i-1", "running", 140.0, {"launch_time": 99.0})
    [row] = startup_rows([agent_start(0, 160.0, "aws", 100.0)],
                         [NodeLaunch(0, 100.0, None, running)])
    assert (row["provisioning_s"], row["staging_s"]) == (0.0, 40.0)
    assert row["booting_s"] == pytest.approx(20.0) and row["first_step_s"] is None


def test_without_a_running_event_a_fresh_vm_falls_back_to_its_kernel_boot():
    [row] = startup_rows([agent_start(0, 160.0, "gcp", 100.0, booted_at=135.0)],
                         [NodeLaunch(0, 100.0)])
    assert (row["provisioning_s"], row["staging_s"]) == (35.0, None)
    assert row["booting_s"] == pytest.approx(25.0)
    assert row["extra"]["running_from"] == "kernel boot"


def test_a_replacement_is_matched_to_its_own_launch():
    records = [agent_start(0, 100.2, "local", 100.0), agent_start(1, 100.3, "local", 100.0),
               first_step(0, 105.0), first_step(1, 105.0),
               agent_start(1, 121.0, "local", 120.0), first_step(1, 130.0)]
    launches = [NodeLaunch(0, 100.0), NodeLaunch(1, 100.0), NodeLaunch(1, 120.0)]
    rows = startup_rows(records, launches)
    assert [(r["node"], r["extra"]["replacement"]) for r in rows] == [
        (0, False), (1, False), (1, True)]
    assert [r["provisioning_s"] for r in rows] == pytest.approx([0.2, 0.3, 1.0])
    assert [r["first_step_s"] for r in rows] == pytest.approx([4.8, 4.7, 9.0])


def test_a_replacement_vm_with_its_predecessors_name_gets_its_own_running_event():
    first = ProviderEvent("vm-1", "running", 130.0, {"running_at": 130.0})
    second = ProviderEvent("vm-1", "running", 260.0, {"running_at": 260.0})
    assert running_event([second, first], "vm-1", 100.0) is first
    assert running_event([first, second], "vm-1", 200.0) is second
    assert running_event([first], "vm-1", 200.0) is None  # not the replacement's
    assert running_event([first], "vm-0", 100.0) is None
