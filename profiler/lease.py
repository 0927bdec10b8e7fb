"""Which run owns a trial: a lease row in the store (table trial_leases), so that the same
spec run twice at once on one store never runs one trial twice. The owner renews its lease
while the trial runs and releases it at the end; a lease past its expiry, or held by a
process gone from this host (a kill -9), is taken over by the next run that wants it."""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from datetime import datetime, timezone
from typing import Any

from gpuadvisor.store import Store, StoreError

log = logging.getLogger(__name__)

LEASE_TTL_S = 600.0  # outlasts any wait between renewals, a cloud launch included
RENEW_EVERY_S = 60.0


def new_owner() -> str:
    """This run's name in the lease table: host, pid and a token (a pid may be reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class TrialLease:
    def __init__(self, store: Store, sweep: str, key: str, owner: str):
        self.store, self.sweep, self.key, self.owner = store, sweep, key, owner
        self.renewed_at = 0.0

    def claim(self) -> dict[str, Any] | None:
        """None when this run owns the trial now; else the other owner's lease."""
        now = time.time()
        held = self.store.claim_trial(self.sweep, self.key, self.owner,
                                      host=socket.gethostname(), pid=os.getpid(),
                                      ttl_s=LEASE_TTL_S, now=now)
        if held is None:
            self.renewed_at = now
        return held

    def renew(self) -> None:
        """Extend the lease once RENEW_EVERY_S has passed; a store that cannot be written now
        only shortens it (the trial's own rows are kept in the sink either way)."""
        if time.time() - self.renewed_at < RENEW_EVERY_S:
            return
        try:
            held = self.claim()
        except StoreError as exc:
            log.warning("%s: lease not renewed (%s)", self.key, exc)
            return
        if held is not None:
            log.warning("%s: lease lost to %s", self.key, held["owner"])

    def release(self) -> None:
        try:
            self.store.release_trial(self.sweep, self.key, self.owner)
        except StoreError as exc:  # it lapses on its own; the sweep reports the store's state
            log.debug("%s: lease not released (%s)", self.key, exc)


def describe(held: dict[str, Any]) -> str:
    until = datetime.fromtimestamp(held["expires_at"], timezone.utc).strftime("%H:%M:%S UTC")
    return f"run {held['owner']} owns it (lease until {until}, renewed while it runs)"
