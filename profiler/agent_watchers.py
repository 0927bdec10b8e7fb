"""Revocation-notice watchers, by provider name.

A watcher is a callable `watch(notify, stop)` that the node agent runs in a daemon thread for
the whole life of the node. It polls whatever tells the node it is about to go and calls

    notify(kind=..., notice_s=..., detail={...})

once per notice it sees (kind: preemption | maintenance | interruption | termination;
notice_s: the warning the provider promises), until `stop` (a threading.Event) is set. The
agent turns each call into a `notice` record. Each cloud's watcher is a module of its own
beside the agent, standard library only:

- profiler/watcher_gcp.py: the metadata server's `instance/preempted` and
  `maintenance-event` (30 s notice for a Spot VM);
- profiler/watcher_aws.py: IMDSv2 `spot/instance-action` (2 minutes).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from profiler.watcher_aws import watch_aws
from profiler.watcher_gcp import watch_gcp

Notify = Callable[..., None]
Watcher = Callable[[Notify, threading.Event], None]

WATCHERS: dict[str, Watcher | None] = {
    "local": None,  # a local node is killed without warning
    "gcp": watch_gcp,
    "aws": watch_aws,
}


class WatcherError(Exception):
    """A provider without a watcher entry."""


def get_watcher(provider: str) -> Watcher | None:
    """The watcher of `provider`, or None if that provider gives no notice."""
    if provider not in WATCHERS:
        raise WatcherError(
            f"no revocation watcher entry for provider {provider!r}; known: "
            f"{', '.join(sorted(WATCHERS))} (add one to profiler.agent_watchers.WATCHERS)"
        )
    return WATCHERS[provider]
