"""The local provider: a node is a process session on this machine running the same node
agent a VM would run, so start-up, revocation and recovery are measured the same way.

Every process of a node carries the node's labels in its environment (torchrun starts its
workers in sessions of their own, so the environment, not the process group, is what finds
them all). A state directory (one JSON file per live node) lets `leftovers` and `terminate`
work from another process after a crash. A revocation is a SIGKILL of every process of the
node at once, as a VM that vanishes.

Nodes with GPUs (`gpus_per_node`) each get GPUs of their own through CUDA_VISIBLE_DEVICES,
node i the i-th block of the GPUs this process sees (NCCL refuses two ranks on one GPU); a
replacement takes the block of the node it replaces.

A node dies with the process that launched it: on Linux the kernel sends its agent SIGKILL
when the launching thread ends (PR_SET_PDEATHSIG), the agent's torchrun and workers follow
the same way, so a `kill -9` of the sweep leaves nothing running. `profiler cleanup
--provider local` finds what is left where that signal is not available.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cloud.provider import (
    FEATURE_GPU,
    FEATURE_REVOCATION_NOTICE,
    FEATURE_SPOT,
    LAUNCHED_AT,
    LAUNCHED_AT_MS,
    RDZV_PORT,
    ClusterSpec,
    Node,
    NodeState,
    PlannedRequest,
    Provider,
    ProviderError,
    ProviderEvent,
    fill,
)

DEFAULT_STATE_DIR = Path.home() / ".cache" / "gpu-advisor" / "local"
NODE_ID_ENV = "GPUADVISOR_NODE_ID"
AGENT_COMMAND = (sys.executable, "-m", "profiler.agent")
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def visible_gpus() -> list[str]:
    """The GPUs this process may use: CUDA_VISIBLE_DEVICES where set, else the indexes
    `nvidia-smi -L` lists (none where it is missing or fails)."""
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        return [g.strip() for g in given.split(",") if g.strip()]
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        listing = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30,
                                 check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.split(":")[0].split()[1] for line in listing.splitlines()
            if line.startswith("GPU ")]


class LocalProvider(Provider):
    name = "local"
    unsupported = frozenset({FEATURE_SPOT, FEATURE_REVOCATION_NOTICE})
    poll_interval_s = 0.5  # a look is a few system calls: local sweeps stay quick

    def __init__(
        self,
        state_dir: str | Path | None = None,
        agent_command: tuple[str, ...] | list[str] = AGENT_COMMAND,
        term_grace_s: float = 10.0,
    ):
        self.state_dir = Path(
            state_dir or os.environ.get("GPUADVISOR_LOCAL_STATE") or DEFAULT_STATE_DIR
        )
        self.agent_command = list(agent_command)
        self.term_grace_s = term_grace_s
        if not (Path("/dev/nvidia0").exists() or shutil.which("nvidia-smi")):
            self.unsupported = self.unsupported | {FEATURE_GPU}
        self._children: dict[int, subprocess.Popen] = {}  # pid -> our Popen, to reap it
        self._reported: set[str] = set()  # node ids whose end poll_events already reported
        self._pending: dict[str, list[ProviderEvent]] = {}  # cluster -> events not yet polled

    # -- the interface ---------------------------------------------------------------------

    def plan(self, spec: ClusterSpec) -> list[PlannedRequest]:
        self._check_features(spec)
        return self._requests(spec, range(spec.nodes))

    def _requests(self, spec: ClusterSpec, indexes) -> list[PlannedRequest]:
        """One spawn per node: the agent's command, the node's environment (its id carries
        the launch time) and the agent config the command names."""
        cluster_dir = self.state_dir / spec.cluster
        gpus = visible_gpus() if spec.gpus_per_node else []
        return [
            PlannedRequest(self.name, "spawn", index, {
                "command": self._command(cluster_dir, index),
                "env": self._env(spec, index, f"{spec.cluster}-n{index}-{LAUNCHED_AT_MS}",
                                 gpus),
                "config": {**self._agent_config(spec, index, f"127.0.0.1:{RDZV_PORT}"),
                           "launched_at": LAUNCHED_AT},
            })
            for index in indexes
        ]

    def launch(self, spec: ClusterSpec) -> list[Node]:
        """Start every node of the cluster that is not running (exactly the plan's spawns
        the first time); running ones are kept."""
        self._check_features(spec)
        cluster_dir = self.state_dir / spec.cluster
        (cluster_dir / "logs").mkdir(parents=True, exist_ok=True)
        port = self._cluster_port(cluster_dir)
        nodes, missing = {}, []
        for index in range(spec.nodes):
            record = _read_json(cluster_dir / f"node-{index}.json")
            if record is not None and self._alive(record):
                nodes[index] = _node(record)
                continue
            if record is not None:
                self._pending.setdefault(spec.cluster, []).extend(self._end_events([record]))
            missing.append(index)
        for request in self._requests(spec, missing):
            nodes[request.node] = _node(self._spawn(spec, request, port))
        return [nodes[i] for i in range(spec.nodes)]

    def list(self, cluster: str) -> dict[str, NodeState]:
        states = {}
        for record in self._records(cluster):
            if self._alive(record):
                states[record["id"]] = NodeState.RUNNING
            elif record.get("revoked_at"):
                states[record["id"]] = NodeState.PREEMPTED
            else:
                states[record["id"]] = NodeState.TERMINATED
        return states

    def terminate(self, nodes: list[Node]) -> None:
        """SIGTERM every process of the nodes, SIGKILL what is left after the grace period."""
        import psutil

        procs = [p for node in nodes for p in self._processes(node.id)]
        for proc in procs:
            _signal(proc, signal.SIGTERM)
        _, alive = psutil.wait_procs(procs, timeout=self.term_grace_s)
        for proc in alive:
            _signal(proc, signal.SIGKILL)
        psutil.wait_procs(alive, timeout=5)
        self._reap()
        for node in nodes:
            path = self.state_dir / node.cluster / f"node-{node.index}.json"
            record = _read_json(path)
            if record is not None and record["id"] == node.id:
                # Its end (a revocation above all) is still owed to poll_events.
                self._pending.setdefault(node.cluster, []).extend(self._end_events([record]))
                path.unlink(missing_ok=True)

    def poll_events(self, cluster: str) -> list[ProviderEvent]:
        dead = [r for r in self._records(cluster) if not self._alive(r)]
        return self._pending.pop(cluster, []) + self._end_events(dead)

    def leftovers(self, older_than_s: float | None = None) -> list[Node]:
        now = time.time()
        found = []
        for path in sorted(self.state_dir.glob("*/node-*.json")):
            record = _read_json(path)
            if record is None:
                continue
            if older_than_s is None or now - record["launched_at"] >= older_than_s:
                found.append(_node(record))
        return found

    def revoke(self, node: Node) -> None:
        """SIGKILL every process of the node at once: the node vanishes as a revoked VM does."""
        import psutil

        path = self.state_dir / node.cluster / f"node-{node.index}.json"
        record = _read_json(path)
        if record is None or record["id"] != node.id:
            raise ProviderError(f"node {node.id} is not running; nothing to revoke")
        procs = self._processes(node.id)
        record["revoked_at"] = time.time()  # the moment of the kill, for poll_events
        _write_json(path, record)
        for proc in procs:
            _signal(proc, signal.SIGKILL)
        psutil.wait_procs(procs, timeout=5)
        self._reap()

    # -- helpers ---------------------------------------------------------------------------

    def _check_features(self, spec: ClusterSpec) -> None:
        if spec.spot and not self.supports(FEATURE_SPOT):
            raise ProviderError("the local provider has no spot market; set spot: false, or "
                                "use revocation: in the spec to revoke nodes")
        if spec.gpus_per_node and not self.supports(FEATURE_GPU):
            raise ProviderError("this machine has no NVIDIA GPU; set gpus_per_node: 0")
        if spec.gpus_per_node:
            gpus, needed = visible_gpus(), spec.nodes * spec.gpus_per_node
            if needed > len(gpus):
                raise ProviderError(
                    f"{spec.nodes} local node(s) x {spec.gpus_per_node} GPU(s) need {needed} "
                    f"GPUs, and this machine shows {len(gpus)} ({', '.join(gpus) or 'none'}); "
                    "lower nodes or gpus_per_node (local nodes cannot share a GPU under NCCL)")

    def _gpus_of(self, spec: ClusterSpec, index: int, gpus: list[str]) -> dict[str, str]:
        """Node `index`'s block of `gpus` (this machine's), as CUDA_VISIBLE_DEVICES."""
        if not spec.gpus_per_node:
            return {}
        block = gpus[index * spec.gpus_per_node:(index + 1) * spec.gpus_per_node]
        return {"CUDA_VISIBLE_DEVICES": ",".join(block)}

    def _command(self, cluster_dir: Path, index: int) -> list[str]:
        return [*self.agent_command, "--config", str(cluster_dir / f"agent-{index}.json")]

    def _env(self, spec: ClusterSpec, index: int, node_id: str,
             gpus: list[str]) -> dict[str, str]:
        labels = {f"GPUADVISOR_{k.split('-', 1)[1].upper()}": v
                  for k, v in spec.labels(index).items()}
        return {**labels, **self._gpus_of(spec, index, gpus), NODE_ID_ENV: node_id}

    def _agent_config(self, spec: ClusterSpec, index: int, endpoint: str) -> dict[str, Any]:
        return {**spec.agent_config, "cluster": spec.cluster, "node": index,
                "nodes": spec.nodes, "rdzv_endpoint": endpoint}

    def _cluster_port(self, cluster_dir: Path) -> int:
        """The cluster's rendezvous port on 127.0.0.1, chosen free once and then kept."""
        path = cluster_dir / "cluster.json"
        cluster = _read_json(path)
        if cluster is None:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                cluster = {"port": sock.getsockname()[1]}
            _write_json(path, cluster)
        return cluster["port"]

    def _spawn(self, spec: ClusterSpec, request: PlannedRequest, port: int) -> dict[str, Any]:
        """Write the planned config and start the planned command, macros filled in."""
        import psutil

        cluster_dir, index = self.state_dir / spec.cluster, request.node
        launched_at = time.time()
        ms = int(launched_at * 1000)
        body = fill(request.body, {LAUNCHED_AT: launched_at, LAUNCHED_AT_MS: ms, RDZV_PORT: port})
        _write_json(cluster_dir / f"agent-{index}.json", body["config"])
        with open(cluster_dir / "logs" / f"node-{index}-{ms}.log", "wb") as log:
            proc = subprocess.Popen(body["command"], env={**os.environ, **body["env"]},
                                    stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    preexec_fn=die_with_parent())
        self._children[proc.pid] = proc
        record = {
            "id": body["env"][NODE_ID_ENV], "cluster": spec.cluster, "index": index,
            "pid": proc.pid,
            "create_time": psutil.Process(proc.pid).create_time(), "launched_at": launched_at,
            "labels": spec.labels(index), "log": log.name,
        }
        _write_json(cluster_dir / f"node-{index}.json", record)
        return record

    def _records(self, cluster: str) -> list[dict[str, Any]]:
        paths = sorted((self.state_dir / cluster).glob("node-*.json"))
        return [r for r in map(_read_json, paths) if r is not None]

    def _alive(self, record: dict[str, Any]) -> bool:
        """Whether the node's agent (the process the node was launched as) still runs."""
        import psutil

        child = self._children.get(record["pid"])
        if child is not None and child.poll() is not None:
            return False
        try:
            proc = psutil.Process(record["pid"])
            return (abs(proc.create_time() - record["create_time"]) < 0.01
                    and proc.status() != psutil.STATUS_ZOMBIE)
        except psutil.NoSuchProcess:
            return False

    def _processes(self, node_id: str) -> list:
        """Every live process whose environment marks it as part of the node."""
        import psutil

        found = []
        for proc in psutil.process_iter():
            try:
                if proc.environ().get(NODE_ID_ENV) == node_id:
                    found.append(proc)
            except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
                continue
        return found

    def _reap(self) -> None:
        for pid, child in list(self._children.items()):
            if child.poll() is not None:
                del self._children[pid]

    def _end_events(self, records: list[dict[str, Any]]) -> list[ProviderEvent]:
        events = []
        for record in records:
            if record["id"] in self._reported:
                continue
            self._reported.add(record["id"])
            child = self._children.get(record["pid"])
            detail = {"node": record["index"],
                      "exit_code": child.poll() if child is not None else None}
            if record.get("revoked_at"):
                events.append(ProviderEvent(record["id"], "preempted", record["revoked_at"],
                                            {**detail, "cause": "sigkill"}))
            else:
                events.append(ProviderEvent(record["id"], "terminated", time.time(), detail))
        return events


def die_with_parent(sig: int = signal.SIGKILL):
    """A `preexec_fn` for a child that must not outlive this process: the kernel sends it
    `sig` when the thread that spawned it ends (PR_SET_PDEATHSIG), and it exits at once if
    this process already died between the fork and the prctl. None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    parent = os.getpid()

    def arm() -> None:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig)
        if os.getppid() != parent:
            os._exit(1)

    return arm


def _node(record: dict[str, Any]) -> Node:
    return Node(provider="local", cluster=record["cluster"], index=record["index"],
                id=record["id"], internal_address="127.0.0.1",
                launched_at=record["launched_at"], labels=record["labels"])


def _signal(proc, sig: int) -> None:
    import psutil

    try:
        proc.send_signal(sig)
    except psutil.NoSuchProcess:
        pass


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Write atomically, so a reader in another process never sees half a file."""
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)
