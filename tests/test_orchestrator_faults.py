"""Faults around a running sweep: the orchestrator killed with SIGKILL (its local nodes must
die with it), leftovers found by `profiler cleanup --provider local`, a second Ctrl-C while
the nodes are being terminated, node 0 lost, the same spec run twice at once."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import psutil
import pytest
from test_local_provider import TREE_AGENT, _child, _spec
from test_orchestrator_polls import SPEC, CloudLike, run_on_clock
from test_sweep import PROFILER, TINY, _is_worker, _node_processes, start_long_two_node_sweep
from typer.testing import CliRunner

from cloud.local import LocalProvider
from cloud.provider import NodeState, ProviderEvent
from gpuadvisor.records import make
from gpuadvisor.store import Store
from profiler.cli import COMMAND_MODULES, app
from profiler.orchestrator import deferred_interrupts

for _name in COMMAND_MODULES:  # register every command, as the console script does
    __import__(f"profiler.cli.{_name}")

runner = CliRunner()


@pytest.fixture
def env(tmp_path):
    return {**os.environ, "GPUADVISOR_LOCAL_STATE": str(tmp_path / "state"),
            "OMP_NUM_THREADS": "1"}


def _gone_within(seconds: float, env: dict) -> list:
    deadline = time.monotonic() + seconds
    while (left := _node_processes(env)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def test_kill_9_of_the_sweep_takes_its_local_nodes_with_it(tmp_path, env):
    sweep = start_long_two_node_sweep(tmp_path, env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while sum(_is_worker(p) for p in _node_processes(env)) < 2:
        assert time.monotonic() < deadline and sweep.poll() is None, sweep.communicate()
        time.sleep(0.2)
    sweep.kill()  # SIGKILL: no handler, no finally
    sweep.wait(10)
    assert _gone_within(5, env) == []  # agents, torchrun and workers alike
    # Their state files are what a crash leaves; cleanup clears them.
    cleaned = runner.invoke(app, ["cleanup", "--provider", "local", "--yes"], env=env)
    assert cleaned.exit_code == 0, cleaned.output
    assert LocalProvider(state_dir=tmp_path / "state").leftovers() == []


def test_cleanup_finds_and_kills_leftover_local_nodes(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUADVISOR_LOCAL_STATE", str(tmp_path / "state"))
    provider = LocalProvider(agent_command=TREE_AGENT, term_grace_s=2.0)
    nodes = provider.launch(_spec(trial="crashed"))
    children = [_child(provider, n) for n in nodes]
    listed = runner.invoke(app, ["cleanup", "--provider", "local", "--format", "json"],
                           input="n\n")
    assert listed.exit_code == 1 and "nothing deleted" in listed.output
    assert all(c.is_running() for c in children)
    deleted = runner.invoke(app, ["cleanup", "--provider", "local", "--yes"])
    assert deleted.exit_code == 0 and "deleted 2 node(s)" in deleted.output, deleted.output
    assert not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children)
    assert provider.leftovers() == []
    again = runner.invoke(app, ["cleanup", "--provider", "local"])
    assert again.exit_code == 0 and "no leftovers on local" in again.output


def test_a_second_ctrl_c_does_not_cut_the_termination_short():
    finished = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupts():
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)
            finished.append("terminated and stored")
    assert finished == ["terminated and stored"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.slow
def test_the_same_spec_run_twice_at_once_runs_each_trial_once(tmp_path, env):
    spec = tmp_path / "tiny.yaml"
    spec.write_text(TINY.replace("revocation: {node: 1, at_seconds: 6}\n", ""))
    command = [*PROFILER, "sweep", str(spec), "--store", str(tmp_path / "runs.db")]
    runs = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [run.communicate(timeout=500) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    said = "".join(err for _, err in outputs)
    assert "another run of this spec is measuring it, skipped" in said, said
    with Store(tmp_path / "runs.db", readonly=True) as store:
        trials = store.rows("trials")
        assert store.query("SELECT * FROM trial_leases") == []
    assert sorted(t["status"] for t in trials) == ["finished", "finished"]
    assert len({t["trial_key"] for t in trials}) == 2
    assert _node_processes(env) == []


class Scripted(CloudLike):
    """CloudLike with events the script queues and each call that terminated nodes."""

    def __init__(self, clock):
        super().__init__(clock)
        self.queued, self.terminated = [], []

    def poll_events(self, cluster):
        events, self.queued = self.queued, []
        return events

    def terminate(self, nodes):
        if nodes:
            self.terminated.append(sorted(n.id for n in nodes))


def _run_scripted(tmp_path, monkeypatch, spec_dict, script):
    """One trial against Scripted, its nodes' records written by `script(pause, now, sink,
    provider)`; returns (stored trial row, its revocations, provider)."""
    return run_on_clock(tmp_path, monkeypatch, spec_dict, Scripted, script)[:3]


def _train(sink, now, restart_from=None):
    for node in (0, 1):
        sink.append(make("first_step", node=node, rank=node, restart=0, t=now))
    if restart_from is not None:
        sink.append(make("checkpoint_restore", node=1, rank=0, restart=0, t=now - 0.5,
                         step=restart_from, seconds=0.2, bytes=1000, steps_lost=2))


def _result(sink, now):
    sink.append(make("result", node=0, rank=0, restart=0, t=now, model="resnet18",
                     batch_per_gpu=8, precision="fp32", world_size=2, device="cpu",
                     throughput=50.0, steps_measured=40, stable=True))


def test_node_0_lost_from_outside_is_a_revocation_and_the_whole_job_restarts(
        tmp_path, monkeypatch):
    def script(pause, now, sink, provider):
        if pause == 1:
            _train(sink, now - 3)
        if pause == 2:  # node 0's processes vanish: no agent_exit record, only the event
            provider.queued.append(ProviderEvent("n0-1", "terminated", now, {"node": 0}))
        if pause == 4:
            _train(sink, now - 1, restart_from=10)
            _result(sink, now)

    row, revocations, provider = _run_scripted(
        tmp_path, monkeypatch, {k: v for k, v in SPEC.items() if k != "revocation"}, script)
    assert row["status"] == "finished", row["error"]
    assert [(r["node"], r["cause"]) for r in revocations] == [(0, "lost")]
    assert revocations[0]["steps_lost"] == 2
    # Both nodes of the first launch stopped (node 1 cannot rejoin without the host), then
    # the whole cluster launched again; the deadline was never waited out.
    assert provider.launches == 2 and provider.terminated[0] == ["n0-1", "n1-1"]
    assert provider.clock.now - 1000 < 4 * 15 + 1


def test_revoking_node_0_on_purpose_restarts_the_whole_job(tmp_path, monkeypatch):
    def script(pause, now, sink, provider):
        if pause == 1:
            _train(sink, now - 3)
        if pause == 4:
            _train(sink, now - 1, restart_from=10)
            _result(sink, now)

    spec = {**SPEC, "revocation": {"node": 0, "at_seconds": 5}}
    row, revocations, provider = _run_scripted(tmp_path, monkeypatch, spec, script)
    assert row["status"] == "finished", row["error"]
    assert provider.revoked and provider.revoked[0][0] == 0
    assert [(r["node"], r["cause"]) for r in revocations] == [(0, "sigkill")]
    assert provider.launches == 2 and provider.terminated[0] == ["n0-1", "n1-1"]


def test_a_node_that_exits_on_its_own_is_not_a_revocation(tmp_path, monkeypatch):
    def script(pause, now, sink, provider):
        if pause == 1:
            _train(sink, now - 3)
            sink.append(make("agent_exit", node=1, rank=None, restart=0, t=now, exit_code=1,
                             duration_s=5.0))
        if pause == 2:
            provider.queued.append(ProviderEvent("n1-1", "terminated", now, {"node": 1}))
        if pause == 3:
            sink.append(make("agent_exit", node=0, rank=None, restart=0, t=now, exit_code=1,
                             duration_s=5.0))

    spec = {k: v for k, v in SPEC.items() if k != "revocation"}
    row, revocations, provider = _run_scripted(tmp_path, monkeypatch, spec, script)
    assert row["status"] == "failed" and revocations == [] and provider.launches == 1


@pytest.mark.slow
def test_a_real_node_0_revocation_is_measured_and_recovered(tmp_path, env):
    spec = tmp_path / "n0.yaml"
    spec.write_text(TINY.replace("nodes: [1, 2]", "nodes: [2]")
                    .replace("{node: 1, at_seconds: 6}", "{node: 0, at_seconds: 4}"))
    run = subprocess.run([*PROFILER, "sweep", str(spec), "--store", str(tmp_path / "runs.db")],
                         env=env, capture_output=True, text=True, timeout=500)
    assert run.returncode == 0, run.stderr
    with Store(tmp_path / "runs.db", readonly=True) as store:
        [trial] = store.rows("trials")
        [revoked] = store.rows("revocations")
    assert trial["status"] == "finished" and trial["extra"]["world_size"] == 2
    assert (revoked["node"], revoked["cause"]) == (0, "sigkill")
    assert revoked["first_step_after_s"] is not None
    assert _node_processes(env) == []


def test_an_end_reported_for_a_running_node_is_no_loss(tmp_path, monkeypatch):
    """A cloud may reuse a name: the end of an earlier machine called n0-1 is not the loss of
    the n0-1 the provider lists as running."""
    monkeypatch.setattr(Scripted, "list", lambda self, cluster: {
        "n0-1": NodeState.RUNNING, "n1-1": NodeState.RUNNING})

    def script(pause, now, sink, provider):
        if pause == 1:
            _train(sink, now - 3)
        if pause == 2:
            provider.queued.append(ProviderEvent("n0-1", "terminated", now, {"node": 0}))
        if pause == 3:
            _result(sink, now)

    spec = {k: v for k, v in SPEC.items() if k != "revocation"}
    row, revocations, provider = _run_scripted(tmp_path, monkeypatch, spec, script)
    assert row["status"] == "finished" and revocations == [] and provider.launches == 1
