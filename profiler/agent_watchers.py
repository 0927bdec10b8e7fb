"""Revocation-notice watchers, by provider name.

A watcher is a callable `watch(notify, stop)` that the node agent runs in a daemon thread for
the whole life of the node. It polls whatever tells the node it is about to go (GCP metadata
server `instance/preempted` and `maintenance-event`, EC2 instance metadata
`spot/instance-action`) and calls

    notify(kind=..., notice_s=..., detail={...})

once per notice it sees (kind: preemption | maintenance | interruption | termination;
notice_s: the warning the provider promises), until `stop` (a threading.Event) is set. The
agent turns each call into a `notice` record.

Entries are "module:attribute" strings resolved on first use, so that the agent imports a
provider's code (and SDK) only on that provider's nodes. The cloud code adds its own, e.g.
`"gcp": "cloud.metadata:watch_gcp"`; `None` means the provider gives no notice.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable

Notify = Callable[..., None]
Watcher = Callable[[Notify, threading.Event], None]

WATCHERS: dict[str, str | None] = {
    "local": None,  # a local node is killed without warning
    "gcp": "cloud.metadata:watch_gcp",  # metadata server instance/preempted, 30 s
    "aws": "cloud.metadata:watch_aws",  # IMDSv2 spot/instance-action, 2 min
}


class WatcherError(Exception):
    """A provider without a watcher entry, or one whose code cannot be imported."""


def get_watcher(provider: str) -> Watcher | None:
    """The watcher of `provider`, or None if that provider gives no notice."""
    if provider not in WATCHERS:
        raise WatcherError(
            f"no revocation watcher entry for provider {provider!r}; known: "
            f"{', '.join(sorted(WATCHERS))} (add one to profiler.agent_watchers.WATCHERS)"
        )
    target = WATCHERS[provider]
    if target is None:
        return None
    module_name, _, attribute = target.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise WatcherError(
            f"the {provider} revocation watcher {target} cannot load: {exc}") from None
