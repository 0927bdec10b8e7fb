"""From a trial's records (gpuadvisor/records.py) and what the orchestrator itself saw, to the
rows of the measurement store: the trial, its revocations, start-ups and checkpoints.

Pure functions of their inputs, so every figure here can be checked against the records
it came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cloud.provider import ProviderEvent
from gpuadvisor.store import TRIAL_COLUMNS

CLOCK_TICK_S = 0.03  # a process start time read from /proc may precede its launch by this


@dataclass
class RevocationSeen:
    """A revocation as the orchestrator performed it."""

    node: int
    at: float  # time.time() of the kill / preemption
    cause: str  # sigkill | preemption | maintenance | interruption
    notice_s: float = 0.0
    replacement_launched_at: float | None = None


@dataclass
class NodeLaunch:
    """A node as the orchestrator launched it, with the provider's `running` event for it."""

    node: int
    requested_at: float | None  # time.time() when the launch request was sent
    zone: str | None = None
    running: ProviderEvent | None = None


def first(records: list[dict], type: str, after: float = float("-inf"), **match: Any):
    """The earliest record of `type` after time `after` whose fields equal `match`."""
    for record in records:
        if record["type"] == type and record["t"] > after and all(
            record.get(k) == v for k, v in match.items()
        ):
            return record
    return None


def final_result(records: list[dict]) -> dict | None:
    """Rank 0's last result record: the measurement of the trial's last attempt."""
    results = [r for r in records if r["type"] == "result" and r.get("rank") == 0]
    return results[-1] if results else None


def cluster_first_step(records: list[dict]) -> float | None:
    record = first(records, "first_step")
    return record["t"] if record else None


def trial_row(result: dict, expected_world: int) -> tuple[dict[str, Any], str | None]:
    """The `trials` columns a result record fills, and an error if it cannot count."""
    row = {k: v for k, v in result.items() if k in TRIAL_COLUMNS and k != "extra"}
    row["extra"] = {"world_size": result.get("world_size"), "device": result.get("device"),
                    "global_step": result.get("global_step"),
                    "host_op_us": result.get("host_op_us"), "optimizer": result.get("optimizer")}
    error = None
    if result.get("world_size") != expected_world:
        error = (f"the job finished with {result.get('world_size')} of {expected_world} worker "
                 f"processes (a node was lost and not replaced in time)")
    elif result.get("throughput") is None:
        error = "the worker measured no step (max_seconds too short for this model?)"
    return row, error


def startup_rows(records: list[dict], launches: list[NodeLaunch]) -> list[dict[str, Any]]:
    """One row per node start (replacements included), in CM-DARE's phases: provisioning
    (request -> resources allocated), staging (-> running), booting (-> agent up) and
    first step (-> first training step finished)."""
    starts = [r for r in records if r["type"] == "agent_start"]
    rows = []
    for start in starts:
        later = [s["t"] for s in starts if s["node"] == start["node"] and s["t"] > start["t"]]
        step = first(records, "first_step", after=start["t"], node=start["node"])
        if step is not None and later and step["t"] > min(later):
            step = None
        launch = _launch_of(start, launches)
        requested = launch.requested_at if launch else start.get("launched_at")
        provisioning, staging, running, source = _phases(start, requested, launch)
        rows.append({
            "node": start["node"],
            "zone": launch.zone if launch else None,
            "provisioning_s": provisioning,
            "staging_s": staging,
            # max(0, ...): a process start time read from /proc has 10 ms ticks.
            "booting_s": max(0.0, start["t"] - running) if running is not None else None,
            "first_step_s": step["t"] - start["t"] if step else None,
            "extra": {"replacement": any(s["node"] == start["node"] and s["t"] < start["t"]
                                         for s in starts),
                      "running_from": source},
        })
    return rows


def running_event(events: list[ProviderEvent], node_id: str, requested_at: float | None
                  ) -> ProviderEvent | None:
    """The provider's `running` event of one launch of a node: the first for its id after the
    request (a replacement VM may carry the name of the one it replaces)."""
    def running_at(event: ProviderEvent) -> float:
        return event.detail.get("running_at", event.at)

    mine = [e for e in events if e.node_id == node_id and (
        requested_at is None or running_at(e) >= requested_at - CLOCK_TICK_S)]
    return min(mine, key=running_at, default=None)


def _launch_of(start: dict, launches: list[NodeLaunch]) -> NodeLaunch | None:
    """The launch an agent start belongs to: its node's latest launch before it."""
    before = [n for n in launches if n.node == start["node"]
              and n.requested_at is not None and n.requested_at <= start["t"] + CLOCK_TICK_S]
    return max(before, key=lambda n: n.requested_at, default=None)


def _phases(start: dict, requested: float | None, launch: NodeLaunch | None
            ) -> tuple[float | None, float | None, float | None, str | None]:
    """(provisioning_s, staging_s, the moment the node ran, where that moment comes from)."""
    event = launch.running if launch else None
    if event is not None:
        detail = event.detail
        running = detail.get("running_at", event.at)
        if "provisioning_s" in detail:  # GCP: request -> STAGING -> RUNNING
            return detail["provisioning_s"], detail.get("staging_s"), running, "provider"
        if detail.get("launch_time") and requested is not None:
            # EC2: the request is accepted at LaunchTime (1 s resolution), then `pending`.
            accepted = max(detail["launch_time"], requested)
            return accepted - requested, running - accepted, running, "provider"
        provisioning = running - requested if requested is not None else None
        return provisioning, None, running, "provider"
    if requested is None:
        return None, None, None, None
    if start.get("provider") == "local":
        # A local node is a process: it is allocated and running once spawned.
        return max(0.0, start["t"] - requested), 0.0, start["t"], "process start"
    booted = start.get("booted_at")
    if booted is not None and booted > requested:  # a fresh VM: its kernel boot time
        return booted - requested, None, booted, "kernel boot"
    return None, None, None, None


def revocation_row(records: list[dict], seen: RevocationSeen) -> dict[str, Any]:
    """Every revocation measure, in seconds after the revocation, from the survivors' and the
    replacement's records; None where the records never showed that moment."""
    at = seen.at
    survivors = [r for r in records if r["node"] != seen.node and r["t"] > at]
    failures = [r["t"] for r in survivors
                if r["type"] == "worker_exit" and r["status"] != "finished"]
    restarts = [r["t"] - (r["duration_s"] or 0) for r in survivors
                if r["type"] == "rendezvous" and r["restart"] > 0]
    rendezvous = first(records, "rendezvous", after=at)
    restore = first(records, "checkpoint_restore", after=at)
    step_after = first(records, "first_step", after=at)
    replacement = first(records, "first_step", after=at, node=seen.node)
    full = [r for r in records if r["type"] == "rendezvous" and r["t"] > at
            and r["world_size"] == max(x["world_size"] or 0 for x in records
                                       if x["type"] == "rendezvous")]
    started = cluster_first_step(records)

    def since(record: dict | None) -> float | None:
        return record["t"] - at if record else None

    return {
        "node": seen.node,
        "cause": seen.cause,
        "at_seconds": at - started if started is not None else None,
        "notice_s": seen.notice_s,
        "detect_s": min(failures + restarts) - at if failures or restarts else None,
        "rendezvous_s": since(rendezvous),
        "restore_s": restore["seconds"] if restore else None,
        "first_step_after_s": since(step_after),
        "steps_lost": restore["steps_lost"] if restore else None,
        "replacement_ready_s": since(replacement),
        "extra": {
            "full_rendezvous_s": since(full[0]) if full else None,
            "replacement_launch_s": (seen.replacement_launched_at - at
                                     if seen.replacement_launched_at else None),
        },
    }


def checkpoint_rows(records: list[dict], model: str, params: int | None) -> list[dict]:
    """One row per save and per restore rank 0 timed."""
    rows = []
    for record in records:
        if record["type"] == "checkpoint_save":
            rows.append({"save_s": record["seconds"], "restore_s": None})
        elif record["type"] == "checkpoint_restore" and record["seconds"] is not None:
            rows.append({"save_s": None, "restore_s": record["seconds"]})
        else:
            continue
        rows[-1].update(model=model, params=params, bytes=record["bytes"], target="local",
                        extra={"step": record["step"], "restart": record["restart"]})
    return rows


def error_message(records: list[dict]) -> str | None:
    """The first error a worker reported, if any."""
    failed = first(records, "worker_exit", status="error")
    return failed["error"] if failed else None

