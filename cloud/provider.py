"""The one interface every provider (local, gcp, aws) implements.

A *cluster* is the set of nodes of one trial; its name is derived from the sweep and trial
ids, and every resource a provider creates carries both as labels/tags so that `cleanup`
finds what a crash left behind. Every call is idempotent: launching a cluster that already
exists returns its nodes, terminating a node that is gone does nothing. SDK clients are
passed to the constructor, never created at import.
"""

from __future__ import annotations

import abc
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar

from gpuadvisor.errors import GpuAdvisorError

log = logging.getLogger(__name__)

# Label keys; GCP allows lowercase letters, digits, '-' and '_' in keys and values.
SWEEP_LABEL = "gpuadvisor-sweep"
TRIAL_LABEL = "gpuadvisor-trial"
NODE_LABEL = "gpuadvisor-node"

# Optional features a provider may declare unsupported.
FEATURE_SPOT = "spot"  # launch spot / preemptible nodes
FEATURE_INJECT_REVOCATION = "inject_revocation"  # Provider.revoke
FEATURE_REVOCATION_NOTICE = "revocation_notice"  # nodes get a warning before they go
FEATURE_GPU = "gpu"


def label_value(text: str) -> str:
    """A string made safe as a label value on every provider (GCP is the strictest)."""
    value = re.sub(r"[^a-z0-9_-]", "-", text.lower())[:63]
    return value or "-"


def cluster_name(sweep: str, trial: str) -> str:
    return label_value(f"{sweep}-{trial}")


class ProviderError(GpuAdvisorError):
    """A provider call that failed for a reason the user can act on; the message says how.
    `nodes`: what a failed launch made and could not terminate, for the caller to try again."""

    exit_code = 2

    def __init__(self, message: str = "", nodes: Iterable[Node] = ()):
        super().__init__(message)
        self.nodes = list(nodes)


class CapacityError(ProviderError):
    """No capacity for the request in any zone tried (stock-out)."""


class QuotaError(ProviderError):
    """The account's quota does not allow the request."""


class CredentialsError(ProviderError):
    """No usable credentials were found."""


class NotFoundError(ProviderError):
    """The resource a call names does not exist (any more)."""


class ConflictError(ProviderError):
    """The resource a call would create exists already."""


class SinkError(ProviderError):
    """A results sink (cloud/sinks.py) that cannot be used: a bad URL, a missing bucket, no
    access to it; the message names the fix."""


@dataclass(frozen=True)
class ClusterSpec:
    """What to launch for one trial."""

    sweep: str
    trial: str
    nodes: int
    instance_type: str
    region: str | None = None
    zones: tuple[str, ...] = ()  # tried in order on stock-outs; empty = provider default
    gpu_type: str | None = None
    gpus_per_node: int = 0
    spot: bool = False
    image: str | None = None
    max_run_seconds: int = 3600  # dead-man switch: the node deletes itself after this
    # Everything the node agent needs (trial config, sink URL, rendezvous); JSON-serialisable.
    agent_config: dict[str, Any] = field(default_factory=dict)

    @property
    def cluster(self) -> str:
        return cluster_name(self.sweep, self.trial)

    def labels(self, node: int | None = None) -> dict[str, str]:
        labels = {SWEEP_LABEL: label_value(self.sweep), TRIAL_LABEL: label_value(self.trial)}
        if node is not None:
            labels[NODE_LABEL] = str(node)
        return labels


class NodeState(str, Enum):
    PENDING = "pending"
    RUNNING = "running"
    STOPPING = "stopping"
    TERMINATED = "terminated"
    PREEMPTED = "preempted"


@dataclass
class Node:
    provider: str
    cluster: str
    index: int  # 0 is the rendezvous host
    id: str  # instance id, instance name, or process-group id
    region: str | None = None
    zone: str | None = None
    internal_address: str | None = None
    spot: bool = False
    launched_at: float | None = None  # time.time() when the launch request was sent
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ProviderEvent:
    node_id: str
    kind: str  # notice | preempted | terminated | running
    at: float  # time.time()
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PlannedRequest:
    """One request `launch` sends: `body` exactly as it is sent, once its macros are filled
    in (torchx's `schedule(dryrun)`); `--dry-run` shows it with them unfilled."""

    provider: str
    action: str  # e.g. "compute.instances.insert", "ec2.RunInstances", "spawn"
    node: int
    body: dict[str, Any]
    where: dict[str, Any] = field(default_factory=dict)  # not sent: region, zones in order


class LaunchUndo:
    """A launch that fails part way leaves nothing behind. Inside `with LaunchUndo(...)`, a
    launch notes each node it makes (`made`) and each create request it sends (`sending`);
    on any error the nodes made, and the cluster's other live nodes not in `keep` (one whose
    answer was lost on the way), are terminated and the error says so. Should that fail,
    the ProviderError carries them (`nodes`) for the caller to terminate."""

    def __init__(self, provider: Provider, live_nodes: Callable[[], list[Node]],
                 keep: Iterable[str] = ()):
        self.provider, self.live_nodes, self.keep = provider, live_nodes, set(keep)
        self.nodes: dict[str, Node] = {}
        self.sent = False

    def sending(self) -> None:
        self.sent = True

    def made(self, node: Node) -> None:
        self.nodes[node.id] = node

    def forget(self, nodes: Iterable[Node]) -> None:
        """Nodes the launch terminated itself (a zone without capacity)."""
        for node in nodes:
            self.nodes.pop(node.id, None)

    def __enter__(self) -> LaunchUndo:
        return self

    def __exit__(self, kind, error, traceback) -> bool:
        if error is None or not self.sent:
            return False
        note, alive = self._undo()
        if isinstance(error, ProviderError) and note:
            raise type(error)(f"{error}; {note}", [*error.nodes, *alive]) from None
        if alive:  # an interrupt or a bug: the error stays as it is, the leak is told
            log.error("%s", note)
        return False

    def _undo(self) -> tuple[str, list[Node]]:
        doomed = {i: n for i, n in self.nodes.items() if i not in self.keep}
        try:
            doomed.update({n.id: n for n in self.live_nodes() if n.id not in self.keep})
        except ProviderError:
            pass  # the nodes it knows of are ended all the same
        if not doomed:
            return "", []
        ids = ", ".join(sorted(doomed))
        try:
            self.provider.terminate(list(doomed.values()))
        except ProviderError as exc:
            return (f"the {len(doomed)} node(s) it launched ({ids}) could not be terminated "
                    f"({exc}); run `profiler cleanup --provider {self.provider.name}`",
                    list(doomed.values()))
        return f"terminated the {len(doomed)} node(s) it had launched ({ids})", []


# What a plan cannot know before its requests go out; `launch` fills them in as it sends.
LAUNCHED_AT = "${launched_at}"  # time.time() when the request is sent
LAUNCHED_AT_MS = "${launched_at_ms}"  # the same, in whole milliseconds
NODE0_ADDRESS = "${node0_address}"  # node 0's internal address, once node 0 exists
PROJECT = "${project}"  # the project of the credentials (gcp, when none is given)
SUBNET = "${subnet}"  # the default subnet of the zone launched in (aws)
RDZV_PORT = "${rdzv_port}"  # the cluster's rendezvous port on this machine (local)


def rendezvous_host(index: int, live: dict[int, Node]) -> str | None:
    """Where node `index` rendezvous: node 0 hosts; the others are told node 0's internal
    address, a macro while node 0 is yet to be made."""
    if index == 0:
        return None
    return live[0].internal_address if 0 in live else NODE0_ADDRESS


def sent_values(launched_at: float, nodes: dict[int, Node]) -> dict[str, Any]:
    """The macros a launch knows as it sends a request: the time, and node 0's address once
    node 0 exists."""
    values: dict[str, Any] = {LAUNCHED_AT: launched_at}
    if 0 in nodes and nodes[0].internal_address:
        values[NODE0_ADDRESS] = nodes[0].internal_address
    return values


def fill(value: Any, values: dict[str, Any]) -> Any:
    """`value` with its macros replaced: a string that is one macro becomes the value itself,
    a macro inside a longer string (a startup script) its text."""
    if isinstance(value, dict):
        return {key: fill(item, values) for key, item in value.items()}
    if isinstance(value, list):
        return [fill(item, values) for item in value]
    if not isinstance(value, str):
        return value
    if value in values:
        return values[value]
    for macro, known in values.items():
        value = value.replace(macro, str(known))
    return value


class Provider(abc.ABC):
    name: ClassVar[str]
    unsupported: ClassVar[frozenset[str]] = frozenset()
    # Seconds between the orchestrator's looks at a running trial (its events, its nodes,
    # its records): a cloud's API quotas are counted per minute, and a VM takes minutes to
    # start. Set per instance to look faster (tests).
    poll_interval_s: float = 15.0

    def supports(self, feature: str) -> bool:
        return feature not in self.unsupported

    @abc.abstractmethod
    def plan(self, spec: ClusterSpec) -> list[PlannedRequest]:
        """The requests `launch(spec)` sends for the cluster from nothing, node 0 first; sends
        nothing, needs no SDK."""

    @abc.abstractmethod
    def launch(self, spec: ClusterSpec) -> list[Node]:
        """Start the cluster's nodes (or return them if they exist already)."""

    @abc.abstractmethod
    def list(self, cluster: str) -> dict[str, NodeState]:
        """State of every node of the cluster, by node id."""

    @abc.abstractmethod
    def terminate(self, nodes: list[Node]) -> None:
        """Stop and delete the nodes; nodes already gone are ignored."""

    @abc.abstractmethod
    def poll_events(self, cluster: str) -> list[ProviderEvent]:
        """Events since the last poll (revocation notices and preemptions included)."""

    @abc.abstractmethod
    def leftovers(self, older_than_s: float | None = None) -> list[Node]:
        """Nodes carrying this project's labels, for `profiler cleanup`."""

    def revoke(self, node: Node) -> None:
        """Revoke a node as the provider would (kill, preempt, simulate maintenance)."""
        raise ProviderError(f"the {self.name} provider cannot inject a revocation")
