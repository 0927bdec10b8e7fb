"""The orchestrator looks at a running trial once per poll interval of its provider (15 s on a
cloud, 0.5 s locally) and wakes early when a planned revocation falls due. A fake clock
stands in for time, so nothing here sleeps."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from cloud.aws import AwsProvider
from cloud.gcp import GcpProvider
from cloud.local import LocalProvider
from cloud.provider import ClusterSpec, Node, Provider
from cloud.sinks import open_sink
from gpuadvisor.records import make
from gpuadvisor.store import Store
from profiler import orchestrator, revocation
from profiler.orchestrator import TrialRun, min_seconds
from profiler.progress import SweepDisplay
from profiler.spec import parse_spec

SPEC = {"name": "polls", "provider": "local", "models": ["resnet18"], "nodes": [2],
        "batch_per_gpu": 8, "max_seconds": 30, "startup_timeout": 300,
        "revocation": {"node": 1, "at_seconds": 5}}


class Clock:
    """time.time and time.sleep: a sleep moves the time on and runs the next step of a script."""

    def __init__(self, script):
        self.now, self.pauses, self.script = 1000.0, [], script

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds
        self.script(len(self.pauses), self.now)


class CloudLike(Provider):
    """Nodes that exist only as this object's notes, looked at every 15 s as on a cloud."""

    name = "local"  # free of charge, so no catalog price is needed
    poll_interval_s = 15.0

    def __init__(self, clock: Clock):
        self.clock, self.revoked, self.launches = clock, [], 0

    def plan(self, spec: ClusterSpec):
        return []

    def launch(self, spec: ClusterSpec) -> list[Node]:
        self.launches += 1
        return [Node("local", spec.cluster, i, f"n{i}-{self.launches}",
                     launched_at=self.clock.now) for i in range(spec.nodes)]

    def list(self, cluster: str):
        return {}

    def terminate(self, nodes: list[Node]) -> None:
        pass

    def poll_events(self, cluster: str):
        return []

    def leftovers(self, older_than_s=None):
        return []

    def revoke(self, node: Node) -> None:
        self.revoked.append((node.index, self.clock.now))


def test_clouds_are_polled_every_15_s_and_this_machine_every_half_second():
    assert GcpProvider.poll_interval_s == AwsProvider.poll_interval_s == 15.0
    assert LocalProvider.poll_interval_s == 0.5


def run_on_clock(tmp_path, monkeypatch, spec_dict, provider_class, write):
    """One trial on a scripted clock against `provider_class(clock)`, its nodes' records
    written by `write(pause, now, sink, provider)` at each of the orchestrator's pauses;
    returns (stored trial row, its revocations, provider, clock)."""
    spec = parse_spec(spec_dict)
    [trial] = spec.trials()
    results = f"file://{tmp_path / 'records'}"
    cluster = {}
    clock = Clock(lambda pause, now: write(pause, now, open_sink(results, cluster["name"]),
                                           provider))
    fake_time = SimpleNamespace(time=clock.time, sleep=clock.sleep)
    monkeypatch.setattr(orchestrator, "time", fake_time)
    monkeypatch.setattr(revocation, "time", fake_time)
    provider = provider_class(clock)
    with Store(tmp_path / "runs.db") as store:
        run = TrialRun(spec, trial, provider, results, SweepDisplay(1, enabled=False))
        cluster["name"] = run.cluster.cluster
        row = run.run(store)
        return row, store.rows("revocations", {"trial_id": row["id"]}), provider, clock


def test_a_trial_is_looked_at_once_per_interval_and_revoked_on_time(tmp_path, monkeypatch):
    def nodes_write(pause: int, now: float, sink, _provider) -> None:
        if pause == 1:  # both nodes took their first step 3 s ago
            for node in (0, 1):
                sink.append(make("first_step", node=node, rank=node, restart=0, t=now - 3))
        if pause == 3:
            sink.append(make("result", node=0, rank=0, restart=1, t=now, model="resnet18",
                             batch_per_gpu=8, precision="fp32", world_size=2, device="cpu",
                             throughput=50.0, steps_measured=40, stable=True))

    row, _, provider, clock = run_on_clock(tmp_path, monkeypatch, SPEC, CloudLike, nodes_write)
    assert row["status"] == "finished", row["error"]
    # One interval, then only as long as the revocation (5 s after the first step) needs.
    assert clock.pauses == [15.0, pytest.approx(2.0), 15.0]
    assert provider.revoked == [(1, pytest.approx(1017.0))] and provider.launches == 2
    # The first attempt measures past the revocation by at least one poll interval.
    [trial] = parse_spec(SPEC).trials()
    assert min_seconds(trial, provider) == 5 + 15.0
    assert min_seconds(trial, LocalProvider(state_dir=tmp_path)) == 5 + 3.0


def test_a_local_gpu_run_is_stored_under_its_datasheet_name():
    from profiler.orchestrator import _gpu_type

    assert _gpu_type({"device": "NVIDIA H100 80GB HBM3"}) == "H100-80GB"
    assert _gpu_type({"device": "NVIDIA H200"}) == "H200"
    assert _gpu_type({"device": "NVIDIA H100 PCIe"}) == "H100PCIe"
    # A part gpus.csv has no row for keeps the driver's name: the measurement is not lost.
    assert _gpu_type({"device": "NVIDIA H200 NVL"}) == "NVIDIA H200 NVL"
    assert _gpu_type({"device": "cpu"}) is None and _gpu_type(None) is None
