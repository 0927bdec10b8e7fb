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
from test_sweep import PROFILER, TINY, _is_worker, _node_processes
from typer.testing import CliRunner

from cloud.local import LocalProvider
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
    (tmp_path / "one.yaml").write_text(TINY.replace("nodes: [1, 2]", "nodes: [2]")
                                       .replace("max_seconds: 10", "max_seconds: 300"))
    sweep = subprocess.Popen([*PROFILER, "sweep", str(tmp_path / "one.yaml"), "--store",
                              str(tmp_path / "runs.db")], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
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
