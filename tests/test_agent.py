"""The node agent end to end: real torchrun, real gloo DDP training of a zoo model, records
read back through the sink; a worker killed mid-run and resumed; the agent killed with its
whole tree. Also the sink and the agent's bad-input paths."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest

from cloud.provider import SinkError
from cloud.sinks import open_sink
from gpuadvisor.records import Recorder, RecordError
from profiler import agent
from profiler.checkpoint import StepMarker

WORKLOAD = {"model": "mobilenet_v2", "batch_per_gpu": 4, "image_size": 16}  # fast on a CPU


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def agent_config(tmp_path, cluster, **worker):
    config = {
        "cluster": cluster, "node": 0, "provider": "local", "sink": f"file://{tmp_path}/sink",
        "rdzv_endpoint": f"127.0.0.1:{free_port()}", "checkpoint_dir": str(tmp_path / "ckpt"),
        "max_restarts": 1, "env": {"OMP_NUM_THREADS": "1"},
        "worker": {**WORKLOAD, **worker},
    }
    path = tmp_path / f"{cluster}.json"
    path.write_text(json.dumps(config))
    return path


def start_agent(config_path, tmp_path):
    log = open(tmp_path / "agent.log", "wb")
    return subprocess.Popen([sys.executable, "-m", "profiler.agent", "--config", str(config_path)],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def of_type(records, type, restart=None):
    return [r for r in records if r["type"] == type and restart in (None, r["restart"])]


@pytest.mark.slow
def test_worker_killed_mid_run_resumes_from_its_checkpoint(tmp_path):
    """A worker SIGKILLed after a checkpoint: torchrun restarts it, it restores, counts the
    steps it lost, then measures until the throughput interval meets the tolerance."""
    config = agent_config(tmp_path, "resume", checkpoint_every_steps=4, tolerance=0.3,
                          max_seconds=100)
    sink = open_sink(f"file://{tmp_path}/sink", "resume")
    proc = start_agent(config, tmp_path)
    try:
        marker = StepMarker(tmp_path / "ckpt" / "node-0")
        rendezvous = wait_for(lambda: of_type(sink.read_all(), "rendezvous"), 120, "rendezvous")
        wait_for(lambda: (marker.read() or 0) >= 6, 120, "step 6")
        os.kill(rendezvous[0]["pid"], signal.SIGKILL)
        time.sleep(0.2)
        steps_at_kill = marker.read()  # before the restarted worker's first step rewrites it
        assert proc.wait(timeout=150) == 0, (tmp_path / "agent.log").read_text()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    records = sink.read_all()
    saved_before = of_type(records, "checkpoint_save", restart=0)
    assert saved_before and steps_at_kill >= 6
    (restore,) = of_type(records, "checkpoint_restore", restart=1)
    assert restore["step"] == saved_before[-1]["step"]
    assert restore["steps_lost"] == steps_at_kill - restore["step"] >= 1
    assert restore["seconds"] > 0 and restore["bytes"] == saved_before[-1]["bytes"]
    (first,) = of_type(records, "first_step", restart=1)
    assert first["step"] == restore["step"] + 1
    measuring = of_type(records, "phase", restart=1)[-1]
    assert measuring["phase"] == "measuring" and measuring["warmup_steps"] >= 5
    (result,) = of_type(records, "result")
    assert result["restart"] == 1 and result["model"] == "mobilenet_v2"
    assert result["world_size"] == 1 and result["batch_per_gpu"] == 4
    assert result["stable"] is True and result["steps_measured"] >= 40
    assert result["throughput_lo"] < result["throughput"] < result["throughput_hi"]
    half = (result["throughput_hi"] - result["throughput_lo"]) / 2
    assert half / result["throughput"] <= 0.35  # the tolerance, to first order
    assert result["throughput"] == pytest.approx(4 / result["step_time_mean"])
    assert result["step_time_median"] <= result["step_time_p95"]
    assert result["time_to_first_step"] == pytest.approx(first["since_agent_start_s"])
    assert result["checkpoint_save_s"] > 0 and result["checkpoint_restore_s"] > 0
    assert result["peak_memory_bytes"] > 10_000_000  # a mobilenet_v2 and its optimizer state
    assert result["software"]["torch"]
    assert of_type(records, "worker_exit", restart=1)[0]["status"] == "finished"
    (start,) = of_type(records, "agent_start")
    (end,) = of_type(records, "agent_exit")
    assert end["exit_code"] == 0 and start["t"] < rendezvous[0]["t"] < end["t"]


@pytest.mark.slow
def test_killing_the_agent_group_leaves_nothing_running(tmp_path):
    proc = start_agent(agent_config(tmp_path, "kill", max_seconds=600), tmp_path)
    try:
        agent_process = psutil.Process(proc.pid)
        (torchrun,) = wait_for(agent_process.children, 60, "torchrun")
        workers = wait_for(  # agent -> torchrun -> worker
            lambda: [p.pid for p in torchrun.children(recursive=True)
                     if "profiler.worker" in p.cmdline()], 60, "the worker process")
        tree = agent_process.children(recursive=True)
        assert len(tree) >= 2
        # the agent's notice path reaches exactly the workers (signal 0: only a check)
        assert agent.signal_workers(torchrun.pid, 0) == workers
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    gone, alive = psutil.wait_procs(tree, timeout=15)
    assert not alive, f"still running after the agent was killed: {alive}"


def test_sink_round_trip_keeps_every_node_and_skips_a_torn_last_line(tmp_path):
    sink = open_sink(f"file://{tmp_path}", "c")
    Recorder(sink, node=0, rank=None).emit("agent_start", pid=1)
    Recorder(sink, node=1, rank=2, restart=1).emit("progress", step=7, samples_per_s=3.5)
    sink.close()
    with open(tmp_path / "c" / "node-1.jsonl", "a") as torn:  # a writer killed mid-line
        torn.write('{"type":"progress","t":1')
    records = open_sink(str(tmp_path), "c").read_all()
    assert [(r["type"], r["node"], r["rank"], r["restart"]) for r in records] == [
        ("agent_start", 0, None, 0), ("progress", 1, 2, 1)]
    assert records[1]["step"] == 7 and records[0]["launched_at"] is None


def test_sink_rejects_corrupt_lines_and_unknown_schemes(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "node-0.jsonl").write_text("not json\n")
    with pytest.raises(RecordError, match="node-0.jsonl:1: not JSON"):
        open_sink(str(tmp_path), "c").read_all()
    with pytest.raises(SinkError, match="unknown sink scheme 'ftp'"):
        open_sink("ftp://host/x", "c")
    with pytest.raises(SinkError, match="local directory"):
        open_sink("file://otherhost/x", "c")


@pytest.mark.parametrize(
    "change, message",
    [
        ({"node": -1}, "node: Input should be greater than or equal to 0"),
        ({"worker": {"model": "resnet18", "batch_per_gpu": 0}}, "worker.batch_per_gpu"),
        ({"worker": {"model": "resnet18", "batch_per_gpu": 2, "precison": "fp32"}},
         "worker.precison: Extra inputs are not permitted"),
        ({"provider": "azure"}, "no revocation watcher entry for provider 'azure'"),
    ],
)
def test_agent_rejects_bad_config_in_one_line(tmp_path, capsys, change, message):
    config = {"cluster": "c", "node": 0, "sink": str(tmp_path),
              "worker": {"model": "resnet18", "batch_per_gpu": 2}, **change}
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(config))
    assert agent.main(["--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "c").exists()  # nothing was started or recorded


def test_agent_names_a_missing_config(tmp_path, capsys):
    assert agent.main(["--config", str(tmp_path / "nope.json")]) == 2
    assert "no such agent config" in capsys.readouterr().err


def test_torchrun_command_is_elastic_with_the_rendezvous_of_the_config():
    config = agent.AgentConfig(cluster="c", node=1, sink="/tmp/s", nodes=2, min_nodes=1,
                               rendezvous_host="10.0.0.2", worker={})
    command = config.torchrun_command("/w.json")
    assert command[1:3] == ["-m", "torch.distributed.run"]
    for flag in ("--nnodes=1:2", "--nproc-per-node=1", "--rdzv-backend=c10d",
                 "--rdzv-endpoint=10.0.0.2:29400", "--rdzv-id=c", "--max-restarts=3",
                 f"--rdzv-conf={agent.RDZV_CONF},is_host=false"):
        assert flag in command
    assert command[-4:] == ["-m", "profiler.worker", "--config", "/w.json"]
