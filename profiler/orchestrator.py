"""Running a sweep: every trial of the grid not yet finished in the store is launched on the
provider, followed through its records, revoked when the spec says so, and stored.

Nodes are always terminated (result, failure, timeout, Ctrl-C or SIGTERM alike); finished
trials are in the store as soon as they end, so an interrupted sweep resumes where it stopped.
"""

from __future__ import annotations

import logging
import shutil
import signal
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cloud.gpus import gpu_spec
from cloud.provider import (
    ClusterSpec,
    Node,
    NodeState,
    PlannedRequest,
    Provider,
    ProviderError,
    ProviderEvent,
)
from gpuadvisor.errors import GpuAdvisorError
from gpuadvisor.records import make as make_record
from gpuadvisor.store import Store, StoreError, StoreWriteError, now_iso
from profiler import ingest
from profiler.lease import TrialLease, describe, new_owner
from profiler.progress import SweepDisplay, trial_phase
from profiler.revocation import Revoker
from profiler.spec import SweepSpec, Trial

log = logging.getLogger(__name__)

EXIT_GRACE_S = 10.0  # how long a finished or dying cluster gets to write its last records
DEADLINE_MARGIN_S = 60.0
PLANNED_STARTUP_S = 120.0  # start-up assumed per trial when estimating the cost
# How late after its planned time a revocation may come once the first step is seen (reading
# the records, the kill); see revocation_slack_s.
REVOCATION_SLACK_S = 3.0


class BudgetExceeded(GpuAdvisorError):
    """The next trial would take the estimated spend past max_cost."""

    exit_code = 3


class UnknownPrice(BudgetExceeded):
    """max_cost cannot be kept: a trial's offering has no known price."""


@dataclass
class SweepOutcome:
    finished: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    spent_usd: float = 0.0


def cluster_spec(spec: SweepSpec, trial: Trial, provider: Provider, results: str
                 ) -> ClusterSpec:
    return ClusterSpec(
        sweep=spec.name, trial=trial.key, nodes=trial.nodes, instance_type=trial.instance_type,
        region=trial.region, zones=trial.zones, gpu_type=trial.gpu_type,
        gpus_per_node=trial.gpus_per_node, spot=trial.spot, image=trial.image,
        max_run_seconds=int(deadline_s(trial, provider) + 600),
        agent_config=agent_config(trial, provider, results),
    )


def agent_config(trial: Trial, provider: Provider, results: str) -> dict[str, Any]:
    """What every node agent of the trial gets (profiler/agent.py's AgentConfig); the
    provider adds the node index, cluster size, rendezvous endpoint and launch time."""
    config = {
        "provider": provider.name,
        "sink": results,
        "nproc_per_node": trial.nproc_per_node,
        "gpus_per_node": trial.gpus_per_node,
        "checkpoint_dir": checkpoint_dir(trial, provider.name, results),
        "worker": {
            "model": trial.model, "batch_per_gpu": trial.batch_per_gpu,
            "precision": trial.precision, "image_size": trial.image_size,
            "seq_len": trial.seq_len, "tolerance": trial.tolerance,
            "max_seconds": trial.max_seconds, "min_seconds": min_seconds(trial, provider),
            "checkpoint_every_steps": trial.checkpoint_every,
        },
    }
    if provider.name == "local":
        # A local node is the same hardware whatever the cluster size, as a VM type is: one
        # core per worker process. (Threads beyond the free cores make OpenMP spin, and a
        # 1-node trial would then be slower per worker than a 2-node one.)
        config["env"] = {"OMP_NUM_THREADS": "1"}
    return config


def checkpoint_dir(trial: Trial, provider: str, results: str) -> str | None:
    """Local nodes share this machine's disk: beside the records. A VM keeps its own (None:
    the agent's default), which the next rank 0 sees as long as node 0 survives."""
    if provider == "local" and results.startswith("file://"):
        return str(Path(results.removeprefix("file://")) / f"{trial.sweep}-{trial.key}" / "ckpt")
    return None


def revocation_slack_s(provider: Provider) -> float:
    """How late after its planned time a revocation may come: the sweep may see the first
    step one poll interval late, and reading the records and the kill take a little more."""
    return max(REVOCATION_SLACK_S, provider.poll_interval_s)


def min_seconds(trial: Trial, provider: Provider) -> float:
    """How long the job's first attempt measures at least: past the planned revocation, so
    that an estimate stable sooner does not end the trial before it (the attempt after the
    recovery then measures to a stable figure of its own)."""
    if trial.revoke_node is None:
        return 0.0
    return trial.revoke_at + revocation_slack_s(provider)


def deadline_s(trial: Trial, provider: Provider) -> float:
    """The longest a trial may take from launch before it is abandoned: start-up, the first
    attempt up to the revocation, the recovery (a start-up again) and the measurement."""
    recovery = trial.startup_timeout if trial.revoke_node is not None else 0.0
    return (trial.startup_timeout + min_seconds(trial, provider) + recovery + trial.max_seconds
            + DEADLINE_MARGIN_S)


def price_per_node_hour(provider: str, trial: Trial) -> float | None:
    """USD per node-hour: 0 on this machine; on a cloud the spec's `price_per_hour`, else the
    catalog's price (None, unknown, if the catalog does not list the offering)."""
    if provider == "local":
        return 0.0
    if trial.price_per_hour is not None:
        return trial.price_per_hour
    from cloud.catalog import CatalogError, price

    try:
        return price(provider, trial.instance_type, trial.region or "", trial.spot,
                     trial.gpu_type, trial.gpus_per_node or None)
    except CatalogError as exc:
        raise ProviderError(f"{exc} (in the spec: gpu_type, gpus_per_node)") from None


def estimated_cost(provider: Provider, trial: Trial) -> float | None:
    """USD for the trial at its deadline; None when its price is unknown (never $0)."""
    price = price_per_node_hour(provider.name, trial)
    if price is None:
        return None
    return price * trial.nodes * (PLANNED_STARTUP_S + deadline_s(trial, provider)) / 3600


def check_prices_known(provider: Provider, trials: list[Trial]) -> None:
    """Raise UnknownPrice, before anything is launched, for the first trial whose price the
    catalog lacks: a budget cannot be kept on an unknown price."""
    for trial in trials:
        if price_per_node_hour(provider.name, trial) is None:
            market = "spot" if trial.spot else "on-demand"
            where = f"in {trial.region}" if trial.region else "with no region in the spec"
            raise UnknownPrice(
                f"max_cost cannot be kept: the catalog has no {market} price for "
                f"{trial.instance_type} {where}; add it to the catalog (`advisor catalog "
                "import skypilot`), or give `price_per_hour: USD` (per node) in the spec",
                "max_cost")


def dry_run_sweep(spec: SweepSpec, provider: Provider, results: str
               ) -> list[tuple[Trial, list[PlannedRequest]]]:
    """Every trial and the requests its launch would send; sends nothing."""
    return [(t, provider.plan(cluster_spec(spec, t, provider, results)))
            for t in spec.trials()]


def run_sweep(spec: SweepSpec, store: Store, provider: Provider, results: str, *,
              max_cost: float | None = None, display: SweepDisplay) -> SweepOutcome:
    """Run every unfinished trial; SIGTERM is turned into KeyboardInterrupt so that the
    nodes of the running trial are terminated either way."""
    outcome = SweepOutcome()
    trials = spec.trials()
    finished = store.finished_trial_keys(spec.name)
    pending = [t for t in trials if t.key not in finished]
    if pending:  # a request that would be refused (a credential in it) stops the sweep here
        provider.plan(cluster_spec(spec, pending[0], provider, results))
    if max_cost is not None:
        check_prices_known(provider, pending)
    owner = new_owner()
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        for number, trial in enumerate(trials, 1):
            head = f"trial {number}/{len(trials)} {_label(trial)}"
            if trial.key in store.finished_trial_keys(spec.name):
                _skip(outcome, display, trial, f"{head}: already in the store, skipped")
                continue
            cost = estimated_cost(provider, trial)
            if max_cost is not None and outcome.spent_usd + cost > max_cost:
                raise BudgetExceeded(
                    f"trial {number}/{len(trials)} would take the estimated spend to "
                    f"${outcome.spent_usd + cost:.2f}, past max_cost ${max_cost:.2f}; "
                    f"raise max_cost or trim the spec (finished trials are kept)", "max_cost")
            lease = TrialLease(store, spec.name, trial.key, owner)
            if (held := lease.claim()) is not None:
                _skip(outcome, display, trial, f"{head}: another run of this spec is "
                      f"measuring it, skipped ({describe(held)}); re-run later to resume")
                continue
            if trial.key in store.finished_trial_keys(spec.name):  # by another run, meanwhile
                lease.release()
                _skip(outcome, display, trial, f"{head}: already in the store, skipped")
                continue
            display.trial(number, len(trials), _label(trial))
            started = time.time()
            try:
                row = TrialRun(spec, trial, provider, results, display, lease).run(store)
            finally:
                lease.release()
            price = price_per_node_hour(provider.name, trial) or 0.0
            outcome.spent_usd += price * trial.nodes * (time.time() - started) / 3600
            (outcome.finished if row["status"] == "finished" else outcome.failed).append(trial.key)
            display.done(_summary(number, len(trials), trial, row))
    finally:
        signal.signal(signal.SIGTERM, previous)
    return outcome


def _skip(outcome: SweepOutcome, display: SweepDisplay, trial: Trial, message: str) -> None:
    outcome.skipped.append(trial.key)
    display.done(message)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@contextmanager
def deferred_interrupts():
    """Ctrl-C or SIGTERM while the nodes are terminated and the trial stored would skip what
    the sweep then reports as done: each is noted, and raised once that is over."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals are only ever delivered to the main thread
        return
    caught: list[int] = []

    def note(signum: int, frame: Any) -> None:
        caught.append(signum)
        print("stopping: terminating the nodes and storing the trial first", file=sys.stderr)

    previous = {sig: signal.signal(sig, note) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if caught:
        raise KeyboardInterrupt


def _label(trial: Trial) -> str:
    revoke = f" revoke node {trial.revoke_node}" if trial.revoke_node is not None else ""
    return (f"{trial.model} x{trial.nodes} {trial.instance_type} b{trial.batch_per_gpu} "
            f"{trial.precision}{revoke}")


def _summary(number: int, total: int, trial: Trial, row: dict) -> str:
    head = f"trial {number}/{total} {_label(trial)}: "
    if row["status"] != "finished":
        return head + f"{row['status']}: {row['error']}"
    return head + f"{row['throughput']:,.1f} samples/s (stable: {bool(row['stable'])})"


class TrialRun:
    """One trial from launch to the store."""

    def __init__(self, spec: SweepSpec, trial: Trial, provider: Provider, results: str,
                 display: SweepDisplay, lease: TrialLease | None = None):
        from cloud.sinks import open_sink

        self.spec, self.trial, self.provider, self.display = spec, trial, provider, display
        self.lease = lease
        self.cluster = cluster_spec(spec, trial, provider, results)
        self.sink = open_sink(results, self.cluster.cluster)
        self.revoker = Revoker(provider, self.cluster, trial.revoke_node, trial.revoke_at,
                               on_lost=self._wipe_local_disk)
        self.launched: dict[str, Node] = {}  # every node of the trial, replacements included
        # Every launch of a node, for start-up timing: a re-launch returns the survivors
        # again, and a provider need not give a replacement a fresh id.
        self.launches: list[Node] = []
        self.running: list[ProviderEvent] = []  # the provider's `running` events
        self.records: list[dict] = []
        self.attempt = uuid.uuid4().hex  # tells this attempt's stored rows from any other's

    def run(self, store: Store) -> dict[str, Any]:
        status, error = "failed", None
        try:
            self._clear_previous_attempt()
            error = self._follow()
            status = "finished" if error is None else "failed"
        except ProviderError as exc:
            error = str(exc)
            # A launch that failed part way and could not end what it made: try again below.
            self.launched.update({n.id: n for n in exc.nodes})
        except KeyboardInterrupt:
            status, error = "interrupted", "interrupted by the user"
            raise
        finally:
            with deferred_interrupts():
                self._terminate()
                row = self._store(store, status, error)
        return row

    def _clear_previous_attempt(self) -> None:
        """An earlier attempt of this trial (crashed or failed) leaves nodes and a checkpoint."""
        leftover = [n for n in self.provider.leftovers() if n.cluster == self.cluster.cluster]
        self.provider.terminate(leftover)
        ckpt = self.cluster.agent_config["checkpoint_dir"]
        if ckpt and self.provider.name == "local":
            shutil.rmtree(ckpt, ignore_errors=True)

    def _wipe_local_disk(self, index: int) -> None:
        """A revoked VM takes its disk with it; a local node's disk is its checkpoint copy
        (profiler/agent.py keeps it in DIR/node-<i>), so the replacement starts without it."""
        ckpt = self.cluster.agent_config["checkpoint_dir"]
        if ckpt and self.provider.name == "local":
            shutil.rmtree(Path(ckpt) / f"node-{index}", ignore_errors=True)

    def _follow(self) -> str | None:
        """Launch and watch until the result; returns an error message, or None on success."""
        trial = self.trial
        self.started = time.time()
        nodes = self.provider.launch(self.cluster)
        log.debug("%s: launched %s", self.cluster.cluster, ", ".join(n.id for n in nodes))
        self._note_launched(nodes)
        ended_at = first_step = None
        while True:
            self._pause(first_step)
            if self.lease is not None:
                self.lease.renew()
            now = time.time()
            self.records = [r for r in self.sink.read_all() if r["t"] >= self.started - 1]
            first_step = ingest.cluster_first_step(self.records)
            self._show()
            result = ingest.final_result(self.records)
            if result is not None and self.revoker.pending:
                slack = revocation_slack_s(self.provider)
                return (f"training finished before the revocation at {trial.revoke_at:.0f}s "
                        f"(the sweep could not revoke within {slack:.0f}s of it); "
                        "see the node logs, or lower revocation.at_seconds")
            if self.revoker.due(first_step, now):
                self.display.phase("revoked")
                nodes = self.revoker.revoke_planned(nodes)
            events = self.provider.poll_events(self.cluster.cluster)
            self.running += [e for e in events if e.kind == "running"]
            if result is None:
                nodes = self.revoker.handle_events(events, nodes, self._exited(nodes, events))
            self._note_launched(nodes)
            if result is not None:
                self._await_exit()
                return None
            if first_step is None and now - self.started > trial.startup_timeout:
                from cloud.sinks import check_local_sink

                # a full or unwritable local sink silences every node: say so
                check_local_sink(self.cluster.agent_config["sink"])
                up = {r["node"] for r in self.records if r["type"] == "agent_start"}
                silent = sorted(set(range(trial.nodes)) - up)
                return (f"the cluster did not train within startup_timeout="
                        f"{trial.startup_timeout:.0f}s (nodes whose agent never reported: "
                        f"{silent or 'none'}); raise startup_timeout or see the node logs")
            if now - self.started > deadline_s(trial, self.provider):
                return (f"the trial passed its deadline of "
                        f"{deadline_s(trial, self.provider):.0f}s without a result")
            if ended_at is None and self._node_zero_exited():
                ended_at = now
            if ended_at is not None and now - ended_at > EXIT_GRACE_S:
                return ingest.error_message(self.records) or "node 0 exited without a result"

    def _pause(self, first_step: float | None) -> None:
        """One poll interval of the provider, or less when the planned revocation falls due
        sooner."""
        pause = self.provider.poll_interval_s
        due = self.revoker.due_at(first_step)
        if due is not None:
            pause = min(pause, max(0.0, due - time.time()))
        time.sleep(pause)

    def _await_exit(self) -> None:
        """Let the agents finish on their own after the result (their last records too)."""
        deadline = time.time() + EXIT_GRACE_S
        while time.time() < deadline and NodeState.RUNNING in set(
                self.provider.list(self.cluster.cluster).values()):
            time.sleep(min(self.provider.poll_interval_s, max(0.0, deadline - time.time())))
        self.records = [r for r in self.sink.read_all() if r["t"] >= self.started - 1]

    def _note_launched(self, nodes: list[Node]) -> None:
        known = {(n.id, n.launched_at) for n in self.launches}
        self.launches += [n for n in nodes if (n.id, n.launched_at) not in known]
        self.launched.update({n.id: n for n in nodes})

    def _exited(self, nodes: list[Node], events: list[ProviderEvent]) -> set[str]:
        """Ids of the nodes whose agent recorded its exit: they ended on their own, not lost.
        Read again when a node has ended, so that an exit recorded just now counts."""
        if any(e.kind == "terminated" for e in events):
            self.records = [r for r in self.sink.read_all() if r["t"] >= self.started - 1]
        return {n.id for n in nodes if any(
            r["type"] == "agent_exit" and r["node"] == n.index
            and r["t"] >= (n.launched_at or self.started) - ingest.CLOCK_TICK_S
            for r in self.records)}

    def _node_zero_exited(self) -> bool:
        return any(r["type"] == "agent_exit" and r["node"] == 0 for r in self.records)

    def _show(self) -> None:
        self.display.phase(*trial_phase(self.records, self.revoker.seen))

    def _terminate(self) -> None:
        self.display.phase("stopping")
        log.debug("%s: terminating %s", self.cluster.cluster, ", ".join(self.launched) or "none")
        self.provider.terminate(list(self.launched.values()))
        self.sink.close()

    def _store(self, store: Store, status: str, error: str | None) -> dict[str, Any]:
        """Store the trial. Its rows go to the sink first, as a `trial` record, so that a
        store that cannot be written (a full disk) loses nothing: `profiler ingest` stores
        them later."""
        rows = self._rows(status, error)
        kept = self._keep_in_sink(rows)
        try:
            trial_id = store.add_trial_once(rows)
        except StoreWriteError as exc:
            sink = self.cluster.agent_config["sink"]
            raise StoreError(
                f"trial {self.trial.key} ({rows['trial']['status']}) was not stored in "
                f"{store.path} ({exc.reason}); "
                + (f"its rows are kept in {sink}: once the store can be written, run "
                   f"`profiler ingest {sink} --store {store.path}`" if kept else
                   "the sink could not keep its rows either: free space and re-run the sweep")
            ) from None
        return {**rows["trial"], "id": trial_id}

    def _keep_in_sink(self, rows: dict[str, Any]) -> bool:
        try:
            self.sink.append(make_record("trial", node=0, rank=None, restart=0,
                                         attempt=rows["trial"]["extra"]["attempt"], rows=rows))
            self.sink.close()
        except (OSError, ProviderError) as exc:  # SinkError is a ProviderError
            log.warning("%s: the trial's rows could not be kept in the sink (%s)",
                        self.cluster.cluster, exc)
            return False
        return True

    def _rows(self, status: str, error: str | None) -> dict[str, Any]:
        """The trial's row and its revocations, start-ups and checkpoints."""
        trial, records = self.trial, self.records
        result = ingest.final_result(records)
        row: dict[str, Any] = {}
        if result is not None and status == "finished":
            row, problem = ingest.trial_row(result, trial.nodes * trial.nproc_per_node)
            if problem:
                status, error = "failed", problem
        row.update({
            "trial_key": trial.key, "sweep": trial.sweep, "status": status, "error": error,
            "recorded_at": now_iso(),
            "source": self.provider.name, "provider": self.provider.name,
            "region": trial.region, "instance_type": trial.instance_type,
            "gpu_type": trial.gpu_type or _gpu_type(result), "gpus_per_node": trial.gpus_per_node,
            "nodes": trial.nodes, "sync": "allreduce", "spot": trial.spot,
            "price_per_node_hour": price_per_node_hour(self.provider.name, trial),
            "model": trial.model, "batch_per_gpu": trial.batch_per_gpu,
            "precision": trial.precision, "image_size": trial.image_size,
            "seq_len": trial.seq_len,
            "extra": {**row.get("extra", {}), "trial": trial.as_dict(),
                      "cluster": self.cluster.cluster, "attempt": self.attempt},
        })
        revocations = [ingest.revocation_row(records, seen) for seen in self.revoker.seen]
        launches = [ingest.NodeLaunch(n.index, n.launched_at, n.zone,
                                      ingest.running_event(self.running, n.id, n.launched_at))
                    for n in self.launches]
        startups = [{**s, "provider": self.provider.name, "region": trial.region,
                     "instance_type": trial.instance_type, "gpu_type": row["gpu_type"],
                     "spot": trial.spot, "recorded_at": now_iso()}
                    for s in ingest.startup_rows(records, launches)]
        checkpoints = [{**c, "recorded_at": now_iso()} for c in
                       ingest.checkpoint_rows(records, trial.model, _params(trial.model))]
        return {"trial": row, "revocations": revocations, "startups": startups,
                "checkpoints": checkpoints}


def _gpu_type(result: dict | None) -> str | None:
    """The GPU a local run measured, by its datasheet name (gpus.csv) where the driver's
    device name resolves to one ('NVIDIA H100 80GB HBM3' is H100-80GB), else as the driver
    named it (the store keeps the measurement; adding the GPU's row makes it usable)."""
    device = (result or {}).get("device")
    if device in (None, "cpu"):
        return None
    try:
        return gpu_spec(device).gpu
    except KeyError:
        return device


def _params(model: str) -> int | None:
    """The model card's parameter count; a missing or unreadable card must not cost the
    measurement."""
    try:
        from gpuadvisor.cards import load_cards

        card = load_cards().get(model)
    except (ImportError, OSError, ValueError):
        return None
    return int(card["params"]) if card and card.get("params") else None
