"""`profiler sweep` end to end on the local provider: real torchrun training of a small zoo
model on 1 and 2 nodes, a real revocation (SIGKILL of a node) later than the point where the
estimate is stable, and its recovery, resume, dry run, interruption and bad specs."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from cloud.local import NODE_ID_ENV
from gpuadvisor.store import Store

PROFILER = [sys.executable, "-c", "from profiler.cli import main; main()"]
TINY = """\
name: tiny
provider: local
models: [mobilenet_v2]
nodes: [1, 2]
batch_per_gpu: 2
image_size: 16
max_seconds: 20
tolerance: 0.25
checkpoint_every: 10
startup_timeout: 180
revocation: {node: 1, at_seconds: 6}
"""

def profiler(*args, env, timeout=400, **kwargs):
    return subprocess.run([*PROFILER, *args], env=env, capture_output=True, text=True,
                          timeout=timeout, **kwargs)


@pytest.fixture
def env(tmp_path):
    return {**os.environ, "GPUADVISOR_LOCAL_STATE": str(tmp_path / "state"),
            "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """One real sweep (2 trials, one revocation), shared by the tests that read it."""
    tmp = tmp_path_factory.mktemp("sweep")
    env = {**os.environ, "GPUADVISOR_LOCAL_STATE": str(tmp / "state"), "OMP_NUM_THREADS": "1"}
    (tmp / "tiny.yaml").write_text(TINY)
    run = profiler("sweep", str(tmp / "tiny.yaml"), "--store", str(tmp / "runs.db"), env=env)
    return tmp, env, run


@pytest.mark.slow
def test_sweep_measures_one_and_two_nodes(swept):
    tmp, _, run = swept
    assert run.returncode == 0, run.stderr
    assert "2 finished, 0 failed, 0 skipped" in run.stdout
    with Store(tmp / "runs.db") as store:
        trials = store.rows("trials")
        assert [(t["nodes"], t["status"]) for t in trials] == [(1, "finished"), (2, "finished")]
        for trial in trials:
            assert trial["throughput"] > 0 and trial["steps_measured"] > 0
            assert trial["extra"]["world_size"] == trial["nodes"]
            assert trial["extra"]["host_op_us"] > 0  # the machine's dispatch cost, recorded
            assert trial["extra"]["optimizer"] == "sgd"  # the workers' own, whatever the recipe
            assert trial["provider"] == "local" and trial["sync"] == "allreduce"
            assert trial["price_per_node_hour"] == 0 and trial["software"]["torch"]
            startups = store.rows("startups", {"trial_id": trial["id"]})
            first_starts = [s for s in startups if not s["extra"]["replacement"]]
            assert sorted(s["node"] for s in first_starts) == list(range(trial["nodes"]))
            for start in startups:  # a local node is provisioned by its spawn, then runs
                assert start["provisioning_s"] >= 0 and start["first_step_s"] > 0, start
                assert (start["staging_s"], start["booting_s"]) == (0, 0), start
                assert start["extra"]["running_from"] == "process start"
        assert store.rows("checkpoints", {"trial_id": trials[0]["id"]})


@pytest.mark.slow
def test_revocation_is_measured_in_order(swept):
    tmp, _, run = swept
    assert run.returncode == 0, run.stderr
    with Store(tmp / "runs.db") as store:
        [one, two] = store.rows("trials")
        assert store.rows("revocations", {"trial_id": one["id"]}) == []
        [rev] = store.rows("revocations", {"trial_id": two["id"]})
        startups = store.rows("startups", {"trial_id": two["id"]})
    # The same workload was stable sooner on one node than the revocation came: without
    # min_seconds the first attempt would have ended before it and the trial failed.
    assert (one["warmup_steps"] + one["steps_measured"]) * one["step_time_mean"] < rev[
        "at_seconds"], (one, rev)
    # The attempt after the recovery measures a figure of its own, with an interval. Whether
    # that interval met the tolerance within max_seconds is this machine's noise, not tested.
    assert two["status"] == "finished" and two["steps_measured"] >= 40, two
    assert two["throughput_lo"] < two["throughput"] < two["throughput_hi"], two
    assert None not in rev.values(), rev
    assert rev["node"] == 1 and rev["cause"] == "sigkill" and rev["notice_s"] == 0
    assert rev["at_seconds"] >= 6
    for measure in ("detect_s", "rendezvous_s", "first_step_after_s", "replacement_ready_s"):
        assert rev[measure] is not None and rev[measure] >= 0, measure
    assert rev["detect_s"] <= rev["rendezvous_s"] <= rev["first_step_after_s"], rev
    assert rev["first_step_after_s"] <= rev["replacement_ready_s"]
    assert rev["restore_s"] > 0 and rev["steps_lost"] >= 0
    assert [s["node"] for s in startups if s["extra"]["replacement"]] == [1]


@pytest.mark.slow
def test_rerun_skips_finished_trials(swept):
    tmp, env, run = swept
    assert run.returncode == 0, run.stderr
    again = profiler("sweep", str(tmp / "tiny.yaml"), "--store", str(tmp / "runs.db"), env=env)
    assert again.returncode == 0, again.stderr
    assert "0 finished, 0 failed, 2 skipped" in again.stdout
    with Store(tmp / "runs.db") as store:
        assert len(store.rows("trials")) == 2
    assert not list((tmp / "state").glob("*/node-*.json"))


def test_dry_run_launches_nothing(tmp_path, env):
    (tmp_path / "tiny.yaml").write_text(TINY)
    run = profiler("sweep", str(tmp_path / "tiny.yaml"), "--store", str(tmp_path / "runs.db"),
                   "--dry-run", "--format", "json", env=env)
    assert run.returncode == 0, run.stderr
    planned = json.loads(run.stdout)["trials"]
    assert [len(p["requests"]) for p in planned] == [1, 2]
    assert {r["action"] for p in planned for r in p["requests"]} == {"spawn"}
    assert planned[1]["trial"]["revoke_node"] == 1
    assert not (tmp_path / "state").exists() and not (tmp_path / "runs.db").exists()


def start_long_two_node_sweep(tmp_path, env, stdout) -> subprocess.Popen:
    """`profiler sweep` of one 2-node trial that trains for up to 300 s, started in the
    background (stderr piped), for tests that interrupt it."""
    (tmp_path / "one.yaml").write_text(TINY.replace("nodes: [1, 2]", "nodes: [2]")
                                       .replace("max_seconds: 20", "max_seconds: 300"))
    return subprocess.Popen([*PROFILER, "sweep", str(tmp_path / "one.yaml"), "--store",
                             str(tmp_path / "runs.db")], env=env, stdout=stdout,
                            stderr=subprocess.PIPE, text=True)


def test_sigterm_terminates_every_node_and_keeps_the_store(tmp_path, env):
    sweep = start_long_two_node_sweep(tmp_path, env, stdout=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while len(list((tmp_path / "state").glob("*/node-*.json"))) < 2:
        assert time.monotonic() < deadline and sweep.poll() is None, sweep.communicate()
        time.sleep(0.2)
    pids = [json.loads(p.read_text())["pid"] for p in (tmp_path / "state").glob("*/node-*.json")]
    sweep.send_signal(signal.SIGTERM)
    _, err = sweep.communicate(timeout=60)
    assert sweep.returncode == 130
    assert err.strip().splitlines()[-1].startswith("error: interrupted") and "Traceback" not in err
    assert not [p for p in pids if _running(p)]
    with Store(tmp_path / "runs.db") as store:
        assert [t["status"] for t in store.rows("trials")] == ["interrupted"]


@pytest.mark.slow
def test_sigint_terminates_every_node_and_keeps_finished_trials(swept, tmp_path, env):
    tmp, _, run = swept
    assert run.returncode == 0, run.stderr
    shutil.copy(tmp / "runs.db", tmp_path / "runs.db")
    with Store(tmp_path / "runs.db") as store:
        finished = store.rows("trials")
    # One more model in the grid: the finished trials are skipped and the new one starts.
    (tmp_path / "more.yaml").write_text(TINY.replace("models: [mobilenet_v2]",
                                                     "models: [mobilenet_v2, resnet18]"))
    sweep = subprocess.Popen([*PROFILER, "sweep", str(tmp_path / "more.yaml"), "--store",
                              str(tmp_path / "runs.db")], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not any(_is_worker(p) for p in _node_processes(env)):
        assert time.monotonic() < deadline and sweep.poll() is None, sweep.communicate()
        time.sleep(0.2)
    sweep.send_signal(signal.SIGINT)  # what Ctrl-C sends to the foreground process
    _, err = sweep.communicate(timeout=60)
    assert sweep.returncode == 130, err
    assert err.strip().splitlines()[-1].startswith("error: interrupted") and "Traceback" not in err
    assert err.count("already in the store, skipped") == 2
    assert _node_processes(env) == []
    with Store(tmp_path / "runs.db") as store:
        trials = store.rows("trials")
    assert [t["status"] for t in trials] == ["finished", "finished", "interrupted"]
    assert trials[:2] == finished and trials[2]["model"] == "resnet18"


def _node_processes(env: dict) -> list:
    """Live processes of any node this test's sweeps launched (they carry the node id and the
    test's state directory in their environment)."""
    import psutil

    found = []
    for proc in psutil.process_iter():
        try:
            environ = proc.environ()
        except psutil.Error:  # gone, a zombie, or not ours to read
            continue
        if NODE_ID_ENV in environ and environ.get(
                "GPUADVISOR_LOCAL_STATE") == env["GPUADVISOR_LOCAL_STATE"]:
            found.append(proc)
    return found


def _is_worker(proc) -> bool:
    """A training worker (torchrun's command line names the worker module too)."""
    import psutil

    try:
        command = proc.cmdline()
    except psutil.Error:  # it went meanwhile
        return False
    return "profiler.worker" in command and "torch.distributed.run" not in command


def _running(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("text, expected", [
    ("name: x\nmodels: [resnet18]\nnodse: [1]\n", "unknown key 'nodse'; did you mean 'nodes'?"),
    ("name: x\nmodels: [resnet18]\nprovider: azure\n", "unknown provider 'azure'"),
])
def test_bad_spec_is_one_line_and_exit_2(tmp_path, env, text, expected):
    (tmp_path / "bad.yaml").write_text(text)
    run = profiler("sweep", str(tmp_path / "bad.yaml"), env=env)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and expected in run.stderr
    missing = profiler("sweep", str(tmp_path / "missing.yaml"), env=env)
    assert missing.returncode == 2 and "no such spec file" in missing.stderr


@pytest.mark.slow
def test_exported_runs_load_back_through_the_importer(swept, tmp_path):
    from advisor.importers.runs import import_runs

    tmp, env, run = swept
    assert run.returncode == 0, run.stderr
    export = profiler("runs", "--store", str(tmp / "runs.db"), "--sweep", "tiny", "--format",
                      "json", "-o", str(tmp_path / "runs.json"), env=env)
    assert export.returncode == 0, export.stderr
    exported = json.loads((tmp_path / "runs.json").read_text())
    assert [len(t["revocations"]) for t in exported] == [0, 1]
    with Store(tmp_path / "copy.db") as copy:
        result = import_runs(tmp_path / "runs.json", copy)
        assert result.rows["trials"] == 2 and result.rows["revocations"] == 1
        assert [t["throughput"] for t in copy.rows("trials")] == [
            t["throughput"] for t in exported]


GCP_SPEC = """\
name: budget
provider: gcp
models: [resnet50]
nodes: [2]
instance_types: [n1-standard-8]
region: us-central1
gpu_type: V100
gpus_per_node: 1
max_seconds: 300
"""


def test_max_cost_stops_before_the_estimated_spend(tmp_path, env):
    from cloud.catalog import price

    (tmp_path / "gcp.yaml").write_text(GCP_SPEC)
    per_node_hour = price("gcp", "n1-standard-8", "us-central1", False, "V100", 1)
    run = profiler("sweep", str(tmp_path / "gcp.yaml"), "--store", str(tmp_path / "runs.db"),
                   "--max-cost", "0.5", env=env)
    assert run.returncode == 3
    [line] = [x for x in run.stderr.splitlines() if x.startswith("error:")]
    # 2 nodes for start-up (120 s assumed) + the trial's deadline (300 + 300 + 60 s).
    expected = per_node_hour * 2 * (120 + 300 + 300 + 60) / 3600
    assert f"${expected:.2f}, past --max-cost $0.50" in line
    with Store(tmp_path / "runs.db") as store:
        assert store.rows("trials") == []


def test_a_cluster_that_does_not_start_in_time_is_stored_as_failed(tmp_path, env):
    (tmp_path / "slow.yaml").write_text(TINY.replace("nodes: [1, 2]", "nodes: [1]")
                                        .replace("startup_timeout: 180", "startup_timeout: 1")
                                        .replace("revocation: {node: 1, at_seconds: 6}\n", ""))
    run = profiler("sweep", str(tmp_path / "slow.yaml"), "--store", str(tmp_path / "runs.db"),
                   env=env)
    assert run.returncode == 1
    assert "0 finished, 1 failed" in run.stdout
    with Store(tmp_path / "runs.db") as store:
        [trial] = store.rows("trials")
    assert trial["status"] == "failed" and "startup_timeout=1s" in trial["error"]
    assert not list((tmp_path / "state").glob("*/node-*.json"))
