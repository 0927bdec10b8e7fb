"""The records the node agent and the training worker emit: the contract with the orchestrator.
It lives in the lowest room because both sides of that contract use it: the nodes (profiler)
write it and the sinks (cloud) parse it.

A record is one JSON object on one line (JSON lines), appended to a sink (cloud/sinks.py).
Every record carries:

    type     one of RECORD_TYPES below
    t        time.time() when it was made (seconds since the epoch, wall clock of the node)
    node     index of the node in the cluster (0 hosts the rendezvous)
    rank     global rank of the worker process, or null for the agent
    restart  torchrun restart count of the worker (TORCHELASTIC_RESTART_COUNT); 0 for the agent.
             torchrun counts failures only: a re-rendezvous because a node joined keeps the
             count, so an attempt is told apart by its `rendezvous` record's "t"

and then the fields of its type. Seconds are floats, byte counts integers. Fields named in
RECORD_TYPES are always present (null when unknown); a record may carry more.

Which record answers which question (for the orchestrator):

- start-up, per node: `agent_start.t` - `agent_start.launched_at` is request -> agent up;
  `first_step.since_agent_start_s` is agent up -> first finished step (store column
  `startups.first_step_s`); `result.time_to_first_step` is the same figure for rank 0.
- revocation, survivors: the orchestrator knows when it killed or was told of the loss; the
  next attempt's `rendezvous` (restart > 0) gives re-rendezvous, its `checkpoint_restore`
  the restore time and `steps_lost`, its `first_step` the first finished step after.
- a trial's measurements: the `result` record, whose fields are named as the `trials`
  columns of gpuadvisor/store.py so that they copy straight across.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from typing import Any

from gpuadvisor.errors import GpuAdvisorError

# type -> {field: meaning}. The fields every record of that type carries.
RECORD_TYPES: dict[str, dict[str, str]] = {
    "agent_start": {  # its "t" is when the agent process started
        "pid": "process id of the agent",
        "host": "host name of the node",
        "provider": "local | gcp | aws",
        "cluster": "cluster name (sweep + trial)",
        "launched_at": "time.time() when the launch request was sent (from the agent config)",
        "booted_at": "time.time() when the node's kernel booted (/proc/stat btime), if known",
    },
    "rendezvous": {
        "pid": "process id of the worker (emitted by each node's local rank 0)",
        "world_size": "worker processes in the job after this rendezvous",
        "nodes": "nodes in the job (world_size / local_world_size)",
        "duration_s": "worker process start -> process group initialised",
    },
    "first_step": {  # emitted by each node's local rank 0
        "step": "global step number of the first step finished by this attempt",
        "since_agent_start_s": "agent start -> this step finished",
        "since_process_start_s": "this worker process start -> this step finished",
    },
    "phase": {
        "phase": "warmup | measuring",
        "step": "global step at which the phase began",
        "warmup_steps": "steps of this attempt judged warm-up (measuring phase only)",
    },
    "checkpoint_save": {  # rank 0's; every node's local rank 0 saves its copy at that step
        "step": "global step saved",
        "seconds": "wall time of the save (state to CPU, write, fsync, rename)",
        "bytes": "size of the checkpoint file",
        "reason": "periodic | notice (a node was warned it will go) | final (end of a run "
        "that made none, to measure one)",
    },
    "checkpoint_restore": {
        "step": "global step restored",
        "seconds": "wall time of the restore (read, load_state_dict)",
        "bytes": "size of the checkpoint file",
        "steps_lost": "steps finished after that checkpoint and before the restart (redone)",
    },
    "progress": {
        "step": "global step",
        "samples_per_s": "cluster throughput over the last interval",
        "phase": "warmup | measuring",
    },
    "notice": {
        "kind": "preemption | maintenance | interruption | termination",
        "notice_s": "seconds of warning the provider promises before the node goes",
        "detail": "what the watcher saw (provider-specific dict)",
    },
    "result": {
        "model": "zoo model name",
        "batch_per_gpu": "batch per worker process",
        "precision": "fp32 | tf32 | amp | bf16 (gpuadvisor.vocab.PRECISION_MEANING)",
        "world_size": "worker processes",
        "device": "cpu | cuda device name",
        "throughput": "samples/s of the whole cluster (world_size * batch / mean step time)",
        "throughput_lo": "95% interval of the throughput, low end (batch means)",
        "throughput_hi": "95% interval of the throughput, high end",
        "step_time_mean": "seconds, rank 0, measured steps",
        "step_time_median": "seconds",
        "step_time_p95": "seconds",
        "steps_measured": "steps in the measurement (after warm-up)",
        "warmup_steps": "steps skipped as warm-up",
        "stable": "true when the interval met the tolerance before max_seconds",
        "peak_memory_bytes": "torch.cuda.max_memory_allocated, or the process max RSS on CPU",
        "peak_allocated_bytes": "torch.cuda.max_memory_allocated since start; null on CPU",
        "peak_reserved_bytes": "torch.cuda.max_memory_reserved (allocator's segments); null on CPU",
        "time_to_first_step": "agent start -> first finished step of this attempt, seconds",
        "checkpoint_save_s": "mean save time of this attempt",
        "checkpoint_restore_s": "restore time (of the restart, or of a test restore at the end)",
        "checkpoint_bytes": "checkpoint file size",
        "global_step": "global step at the end",
        "software": "dict: python, torch, cuda, nccl, transformers, gpu-advisor versions",
    },
    "worker_exit": {
        "status": "finished | error",
        "error": "one-line error message, or null",
    },
    "agent_exit": {
        "exit_code": "exit code of torchrun (negative: killed by that signal)",
        "duration_s": "agent start -> exit",
    },
    "trial": {  # the orchestrator's, with node 0, when the trial ends, before it is stored
        "attempt": "unique id of this attempt of the trial (trials.extra.attempt in the store)",
        "rows": "what goes into the store: {trial: {...}, revocations: [...], startups: "
        "[...], checkpoints: [...]}; `profiler ingest` stores it if the store lacks it",
    },
}


class RecordError(GpuAdvisorError, ValueError):
    """A record line that is not a valid record; the message names the line and the problem."""


def make(type: str, *, node: int, rank: int | None, restart: int, **fields: Any) -> dict:
    """A record of `type`; fields of the type that are not given are null."""
    if type not in RECORD_TYPES:
        raise RecordError(f"unknown record type {type!r}; types are {', '.join(RECORD_TYPES)}")
    record = {"type": type, "t": time.time(), "node": node, "rank": rank, "restart": restart}
    record.update({name: None for name in RECORD_TYPES[type]})
    record.update(fields)
    return record


def dumps(record: dict) -> str:
    """One line of JSON, newline included."""
    return json.dumps(record, separators=(",", ":"), default=_plain) + "\n"


def _plain(value: Any) -> Any:
    """numpy and torch scalars as the Python numbers they hold."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def parse_line(line: str, where: str = "record") -> dict | None:
    """The record on one line; None for a blank line or a torn last line (see parse_lines)."""
    line = line.strip()
    if not line:
        return None
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{where}: not JSON ({exc.msg})") from None
    if not isinstance(record, dict) or record.get("type") not in RECORD_TYPES:
        raise RecordError(f"{where}: not a record (type must be one of {', '.join(RECORD_TYPES)})")
    for key in ("t", "node", "restart"):
        if key not in record:
            raise RecordError(f"{where}: record without {key!r}")
    return record


def parse_lines(lines: Iterable[str], source: str = "records") -> Iterator[dict]:
    """Records of a JSON-lines text. A last line without its newline is what a process killed
    mid-write leaves; it is skipped rather than failing the whole file."""
    pending: tuple[int, str] | None = None
    for number, line in enumerate(lines, 1):
        if pending is not None:
            record = parse_line(pending[1], f"{source}:{pending[0]}")
            if record is not None:
                yield record
        pending = (number, line)
    if pending is not None and pending[1].endswith("\n"):
        record = parse_line(pending[1], f"{source}:{pending[0]}")
        if record is not None:
            yield record


class Recorder:
    """Makes records for one process (node, rank, restart fixed) and appends them to a sink."""

    def __init__(self, sink: Any, *, node: int, rank: int | None, restart: int = 0):
        self.sink, self.node, self.rank, self.restart = sink, node, rank, restart

    def emit(self, type: str, **fields: Any) -> dict:
        record = make(type, node=self.node, rank=self.rank, restart=self.restart, **fields)
        self.sink.append(record)
        return record
