"""The node agent: the one program every node runs (local process group, GCP VM, EC2 VM).

    python -m profiler.agent --config agent.json

It records `agent_start`, starts torchrun with the training worker (profiler/worker.py) as a
child in its own process group, runs the provider's revocation-notice watcher
(profiler/agent_watchers.py; profiler/watcher_gcp.py, watcher_aws.py), which on a notice
records it and sends SIGUSR1 to the workers (rank 0 then checkpoints at once), waits,
records `agent_exit` and exits with torchrun's code. It takes its children with it:
torchrun gets SIGKILL from the kernel when the agent dies (PR_SET_PDEATHSIG), and each
worker when torchrun dies, so killing the agent's process group, even with SIGKILL, leaves
nothing running (and the local provider starts the agent the same way, so a killed sweep
takes its local nodes with it). SIGTERM or SIGINT to the agent stop the run.

agent.json (AgentConfig; keys not listed are ignored, so providers may add their own):

    cluster          cluster name (sink directory, rendezvous id)            required
    node             index of this node; node 0 hosts the rendezvous         required
    sink             file://DIR, gs://BUCKET/PREFIX or s3://BUCKET/PREFIX    required
    worker           WorkerConfig fields: model, batch_per_gpu, precision, image_size, seq_len,
                     device, tolerance, max_seconds, max_steps, checkpoint_every_steps,
                     checkpoint_every_s, ... (sink, cluster, node, checkpoint_dir are filled in)
    provider         local | gcp | aws (picks the notice watcher)            default local
    nodes            cluster size; default for min_nodes and max_nodes       default 1
    min_nodes, max_nodes   elastic range for torchrun --nnodes=MIN:MAX
    rdzv_endpoint    HOST:PORT of the rendezvous, or rendezvous_host + rendezvous_port
    nproc_per_node   worker processes on this node         default gpus_per_node, or 1
    max_restarts     torchrun --max-restarts                                 default 3
    checkpoint_dir   where the node keeps its checkpoint copy (in DIR/node-<node>/); the
                     newest copy of any node is restored after a restart
                     default TMPDIR/gpuadvisor/<cluster>/checkpoint
    launched_at      time.time() when the launch request was sent (start-up timing)
    env              extra environment variables for torchrun and the workers
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cloud.local import die_with_parent
from cloud.provider import ProviderError
from cloud.sinks import open_sink
from gpuadvisor.records import Recorder
from profiler.agent_watchers import WatcherError, get_watcher
from profiler.clock import boot_time, process_start_time
from profiler.worker import ConfigError, WorkerConfig, first_problem, read_config

# Without it, restarts after a lost node hang or fail over gloo (pytorch issue 135712).
TORCHRUN_ENV = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
# A lost node leaves the rendezvous when it has missed keep_alive_max_attempt heartbeats of
# keep_alive_interval seconds; torch's 5 s x 3 would add up to 15 s to every recovery.
RDZV_CONF = "last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt=3"
DEFAULT_RDZV_PORT = 29400
# A process start time read from /proc is good to two 10 ms clock ticks.
PROC_CLOCK_ERROR_S = 0.03


class AgentConfig(BaseModel):
    model_config = ConfigDict(extra="ignore")

    cluster: str = Field(min_length=1)
    node: int = Field(ge=0)
    sink: str
    worker: dict[str, Any]
    provider: str = "local"
    nodes: int = Field(1, ge=1)
    min_nodes: int | None = Field(None, ge=1)
    max_nodes: int | None = Field(None, ge=1)
    rdzv_endpoint: str | None = None
    rendezvous_host: str | None = None
    rendezvous_port: int = DEFAULT_RDZV_PORT
    gpus_per_node: int = Field(0, ge=0)
    nproc_per_node: int | None = Field(None, ge=1)
    max_restarts: int = Field(3, ge=0)
    checkpoint_dir: str | None = None
    launched_at: float | None = None
    env: dict[str, str] = {}

    @property
    def endpoint(self) -> str:
        return self.rdzv_endpoint or f"{self.rendezvous_host or '127.0.0.1'}:{self.rendezvous_port}"

    @property
    def run_dir(self) -> Path:
        return Path(tempfile.gettempdir()) / "gpuadvisor" / self.cluster

    def torchrun_command(self, worker_config: Path) -> list[str]:
        low, high = self.min_nodes or self.nodes, self.max_nodes or self.nodes
        return [
            sys.executable, "-m", "torch.distributed.run",
            f"--nnodes={low}:{high}",
            f"--nproc-per-node={self.nproc_per_node or self.gpus_per_node or 1}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={self.endpoint}",
            f"--rdzv-id={self.cluster}",
            # Node 0 hosts the rendezvous store, whatever the address heuristic says: nodes
            # sharing one machine (the local provider) would otherwise race to host it.
            f"--rdzv-conf={RDZV_CONF},is_host={str(self.node == 0).lower()}",
            f"--max-restarts={self.max_restarts}",
            "--monitor-interval=0.5",
            "-m", "profiler.worker", "--config", str(worker_config),
        ]


def load_config(path: str) -> AgentConfig:
    config = read_config(AgentConfig, path, "agent")
    try:  # the worker part too, so that a typo fails here in one line, not in every rank
        WorkerConfig.model_validate(worker_config(config))
    except ValidationError as exc:
        raise ConfigError(f"{path}: {first_problem(exc, 'worker.')}") from None
    return config


def worker_config(config: AgentConfig) -> dict[str, Any]:
    checkpoint_dir = config.checkpoint_dir or str(config.run_dir / "checkpoint")
    return {**config.worker, "sink": config.sink, "cluster": config.cluster, "node": config.node,
            "checkpoint_dir": checkpoint_dir}


def signal_workers(torchrun_pid: int, signum: int) -> list[int]:
    """Send `signum` to the worker processes under torchrun (not to torchrun, for which
    SIGUSR1 is fatal); returns their pids."""
    import psutil

    try:
        children = psutil.Process(torchrun_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    sent = []
    for child in children:
        try:
            if "profiler.worker" in child.cmdline():
                child.send_signal(signum)
                sent.append(child.pid)
        except psutil.NoSuchProcess:
            pass
    return sent


def _start_watcher(config: AgentConfig, recorder: Recorder, torchrun_pid: int) -> threading.Event:
    stop = threading.Event()
    watch = get_watcher(config.provider)
    if watch is not None:
        def notify(kind: str, notice_s: float | None = None, detail: dict | None = None) -> None:
            recorder.emit("notice", kind=kind, notice_s=notice_s, detail=detail or {})
            # Checkpoint now: the workers agree on it within a few steps and rank 0 saves.
            signal_workers(torchrun_pid, signal.SIGUSR1)

        threading.Thread(target=watch, args=(notify, stop), name="notice-watcher",
                         daemon=True).start()
    return stop


def run(config: AgentConfig, started_at: float) -> int:
    if config.launched_at and 0 < config.launched_at - started_at < PROC_CLOCK_ERROR_S:
        started_at = config.launched_at  # rounding put the start before the launch it followed
    sink = open_sink(config.sink, config.cluster)
    recorder = Recorder(sink, node=config.node, rank=None)
    recorder.emit("agent_start", pid=os.getpid(), host=socket.gethostname(),
                  provider=config.provider, cluster=config.cluster,
                  launched_at=config.launched_at, booted_at=boot_time(), t=started_at)
    node_dir = config.run_dir / f"node-{config.node}"
    node_dir.mkdir(parents=True, exist_ok=True)
    worker_path = node_dir / "worker.json"
    worker_path.write_text(json.dumps(worker_config(config), indent=2))
    env = {**os.environ, **TORCHRUN_ENV, **config.env, "PROFILER_AGENT_START": repr(started_at)}
    torchrun = subprocess.Popen(config.torchrun_command(worker_path), env=env,
                                start_new_session=True, preexec_fn=die_with_parent())

    def forward(signum: int, _frame: Any) -> None:
        try:
            os.killpg(torchrun.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    stop = _start_watcher(config, recorder, torchrun.pid)
    code = torchrun.wait()
    stop.set()
    recorder.emit("agent_exit", exit_code=code, duration_s=time.time() - started_at)
    sink.close()
    return code if code >= 0 else 128 - code


def main(argv: list[str] | None = None) -> int:
    started_at = process_start_time() or time.time()
    parser = argparse.ArgumentParser(prog="profiler.agent", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="agent config JSON (see above)")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
        get_watcher(config.provider)  # fail before starting anything
        return run(config, started_at)
    except (ConfigError, ProviderError, WatcherError) as exc:  # SinkError is a ProviderError
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
