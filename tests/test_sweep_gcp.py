"""A trial on the GCP provider against the fake Compute endpoint, its node agents played by the
test (no VM runs here): the start-up rows take provisioning and staging from what GCP reported
(creation, STAGING as polled, lastStartTimestamp) and booting from RUNNING to the agent."""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("google.cloud.compute_v1")

from fakes.gcp import fake_gcp

from cloud.sinks import open_sink
from gpuadvisor.records import Recorder
from gpuadvisor.store import Store
from profiler.ingest import running_event
from profiler.orchestrator import TrialRun
from profiler.progress import SweepDisplay
from profiler.spec import parse_spec

SPEC = {"name": "gcpstart", "provider": "gcp", "models": ["resnet18"], "nodes": [2],
        "batch_per_gpu": 8, "instance_types": ["n1-standard-8"], "region": "us-central1",
        "zones": ["us-central1-a"], "gpu_type": "V100", "gpus_per_node": 1,
        "max_seconds": 5, "startup_timeout": 30}


def play_agents(fake, results: str, cluster: str, nodes: int, stop: threading.Event) -> None:
    """What the nodes would write: agent_start once their VM runs, a first step each once all
    are up, rank 0's result, each agent's exit; then the VMs shut down (a VM that ends
    without its agent's exit is a lost node, and the trial would replace it)."""
    sink = open_sink(results, cluster)
    started: set[int] = set()
    while len(started) < nodes and not stop.wait(0.05):
        try:
            instances = list(fake.instances.values())
        except RuntimeError:  # the endpoint's thread added one meanwhile
            continue
        for instance in instances:
            index = int(instance["labels"]["gpuadvisor-node"])
            if instance["status"] == "RUNNING" and index not in started:
                Recorder(sink, node=index, rank=None).emit(
                    "agent_start", provider="gcp", launched_at=None, booted_at=None)
                started.add(index)
    time.sleep(0.2)
    for index in sorted(started):
        Recorder(sink, node=index, rank=index).emit("first_step", step=1)
    Recorder(sink, node=0, rank=0).emit(
        "result", model="resnet18", batch_per_gpu=8, precision="fp32", world_size=nodes,
        device="Tesla V100-SXM2-16GB", throughput=500.0, steps_measured=60, stable=True)
    for index in sorted(started):
        Recorder(sink, node=index, rank=None).emit("agent_exit", exit_code=0, duration_s=1.0)
    for instance in fake.instances.values():
        instance["status"] = "TERMINATED"


def test_startup_rows_carry_gcp_phases(tmp_path):
    spec = parse_spec(SPEC)
    [trial] = spec.trials()
    results = f"file://{tmp_path / 'records'}"
    stop = threading.Event()
    with fake_gcp() as (provider, fake), Store(tmp_path / "runs.db") as store:
        provider.poll_interval_s = 0.05  # the fake answers at once: no need to wait 15 s
        run = TrialRun(spec, trial, provider, results, SweepDisplay(1, enabled=False))
        agents = threading.Thread(target=play_agents,
                                  args=(fake, results, run.cluster.cluster, 2, stop))
        agents.start()
        try:
            row = run.run(store)
        finally:
            stop.set()
            agents.join()
        startups = store.rows("startups", {"trial_id": row["id"]})
    assert row["status"] == "finished", row["error"]
    assert len(run.launches) == 2, run.launches  # no node was taken for lost and replaced
    records = open_sink(results, run.cluster.cluster).read_all()
    nodes = {n.index: n for n in run.launched.values()}
    assert sorted(s["node"] for s in startups) == [0, 1]
    for start in startups:
        node = nodes[start["node"]]
        running = running_event(run.running, node.id, node.launched_at)
        agent = next(r for r in records if r["type"] == "agent_start"
                     and r["node"] == start["node"])
        step = next(r for r in records if r["type"] == "first_step"
                    and r["node"] == start["node"])
        assert start["provisioning_s"] == running.detail["provisioning_s"] >= 0
        assert start["staging_s"] == running.detail["staging_s"] >= 0
        assert start["booting_s"] == pytest.approx(agent["t"] - running.detail["running_at"])
        assert start["first_step_s"] == pytest.approx(step["t"] - agent["t"])
        # The phases add up to request -> first step.
        total = (start["provisioning_s"] + start["staging_s"] + start["booting_s"]
                 + start["first_step_s"])
        assert total == pytest.approx(step["t"] - node.launched_at, abs=0.01)
        assert (start["provider"], start["zone"], start["gpu_type"]) == (
            "gcp", "us-central1-a", "V100")
        assert start["extra"]["running_from"] == "provider"
