"""Revoking a node during a trial and bringing in its replacement.

A planned revocation (the spec's at_seconds, or a time drawn from its lifetime distribution)
is injected with `Provider.revoke`; a revocation the provider itself announces (a real spot
preemption) arrives as a `preempted` event, and a node that ends without its agent's
`agent_exit` record before the trial's result (killed from outside, a VM gone without
notice) is lost all the same (cause `lost`). Either way the lost node is cleaned up and a
replacement is launched, and the moment is kept for profiler/ingest.py to measure from.

Node 0 hosts the rendezvous: when it goes, the survivors' torchrun cannot rejoin (they fail
or hang on a store that is gone), so every node is stopped and the whole cluster launched
again, to resume from the newest checkpoint copy left on a survivor's disk.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from cloud.provider import ClusterSpec, Node, NodeState, Provider, ProviderEvent
from profiler.ingest import RevocationSeen

log = logging.getLogger(__name__)

# What a revocation is called on each provider when this program causes it.
INJECTED_CAUSE = {"local": "sigkill", "gcp": "maintenance", "aws": "interruption"}


class Revoker:
    """Tracks a trial's revocations: the planned one and any the provider reports."""

    def __init__(self, provider: Provider, spec: ClusterSpec, node: int | None,
                 after_first_step_s: float | None,
                 on_lost: Callable[[int], None] = lambda index: None):
        self.provider, self.spec, self.on_lost = provider, spec, on_lost
        self.planned_node, self.planned_after = node, after_first_step_s
        self.seen: list[RevocationSeen] = []
        self._replaced: dict[str, RevocationSeen] = {}  # node id -> its revocation
        self._stopped: set[str] = set()  # survivors of a lost node 0, stopped by this program

    @property
    def pending(self) -> bool:
        """A planned revocation that has not happened yet."""
        return self.planned_node is not None and not any(
            s.node == self.planned_node for s in self.seen)

    def due_at(self, first_step_t: float | None) -> float | None:
        """When the planned revocation falls due, once the first step is known."""
        if not self.pending or first_step_t is None:
            return None
        return first_step_t + self.planned_after

    def due(self, first_step_t: float | None, now: float) -> bool:
        due_at = self.due_at(first_step_t)
        return due_at is not None and now >= due_at

    def revoke_planned(self, nodes: list[Node]) -> list[Node]:
        """Revoke the planned node now and launch its replacement; returns the new nodes."""
        node = next(n for n in nodes if n.index == self.planned_node)
        requested = time.time()
        self.provider.revoke(node)
        seen = RevocationSeen(node=node.index, at=requested,
                              cause=INJECTED_CAUSE.get(self.provider.name, "preemption"))
        return self._replace(node, seen, nodes)

    def handle_events(self, events: list[ProviderEvent], nodes: list[Node],
                      exited: set[str] = frozenset()) -> list[Node]:
        """Replace nodes the provider preempted on its own, and nodes that ended without
        exiting on their own (ids in `exited` did: their agent recorded its exit); returns
        the current nodes. Call it only while the trial has no result."""
        by_id = {n.id: n for n in nodes}
        for event in events:
            if event.kind == "preempted" and event.node_id in self._replaced:
                # The provider's own time of an injected revocation is the better one.
                self._replaced[event.node_id].at = event.at
                continue
            node = by_id.get(event.node_id)
            if node is None or event.node_id in self._replaced:
                continue
            if event.kind == "preempted":
                seen = RevocationSeen(node=node.index, at=event.at,
                                      cause=event.detail.get("cause", "preemption"),
                                      notice_s=event.detail.get("notice_s", 0.0))
            elif (event.kind == "terminated" and event.node_id not in self._stopped | exited
                  and not self._running(event.node_id)):
                seen = RevocationSeen(node=node.index, at=event.at, cause="lost")
            else:
                continue
            nodes = self._replace(node, seen, nodes)
            by_id = {n.id: n for n in nodes}
        return nodes

    def _running(self, node_id: str) -> bool:
        """Whether the provider has the node running now: an end reported for an earlier
        machine of the same name (a cloud may reuse one) is no loss."""
        return self.provider.list(self.spec.cluster).get(node_id) is NodeState.RUNNING

    def _replace(self, node: Node, seen: RevocationSeen, nodes: list[Node]) -> list[Node]:
        log.info("%s: node %d (%s) revoked (%s); launching its replacement", self.spec.cluster,
                 node.index, node.id, seen.cause)
        self._replaced[node.id] = seen
        stop = [node]
        if node.index == 0:  # the rendezvous went with it: the whole job starts again
            survivors = [n for n in nodes if n.id != node.id]
            self._stopped.update(n.id for n in survivors)
            stop += survivors
        self.provider.terminate(stop)
        self.on_lost(node.index)
        seen.replacement_launched_at = time.time()
        nodes = self.provider.launch(self.spec)
        self.seen.append(seen)
        return nodes
