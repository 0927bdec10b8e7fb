"""Revoking a node during a trial and bringing in its replacement.

A planned revocation (the spec's at_seconds, or a time drawn from its lifetime distribution)
is injected with `Provider.revoke`; a revocation the provider itself announces (a real spot
preemption) arrives as a `preempted` event. Either way the lost node is cleaned up and a
replacement is launched, and the moment is kept for profiler/ingest.py to measure from.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from cloud.provider import ClusterSpec, Node, Provider, ProviderEvent
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
        return self._replace(node, seen)

    def handle_events(self, events: list[ProviderEvent], nodes: list[Node]) -> list[Node]:
        """Replace nodes the provider preempted on its own; returns the current nodes."""
        by_id = {n.id: n for n in nodes}
        for event in events:
            if event.kind == "preempted" and event.node_id in self._replaced:
                # The provider's own time of an injected revocation is the better one.
                self._replaced[event.node_id].at = event.at
                continue
            node = by_id.get(event.node_id)
            if event.kind != "preempted" or node is None:
                continue
            seen = RevocationSeen(node=node.index, at=event.at,
                                  cause=event.detail.get("cause", "preemption"),
                                  notice_s=event.detail.get("notice_s", 0.0))
            nodes = self._replace(node, seen)
        return nodes

    def _replace(self, node: Node, seen: RevocationSeen) -> list[Node]:
        log.info("%s: node %d (%s) revoked (%s); launching its replacement", self.spec.cluster,
                 node.index, node.id, seen.cause)
        self._replaced[node.id] = seen
        self.provider.terminate([node])
        self.on_lost(node.index)
        seen.replacement_launched_at = time.time()
        nodes = self.provider.launch(self.spec)
        self.seen.append(seen)
        return nodes
