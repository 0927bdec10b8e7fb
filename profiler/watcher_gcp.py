"""The node agent's revocation-notice watcher on a GCP VM (profiler/agent_watchers.py).

The metadata server's `instance/preempted` turns TRUE about 30 s before a Spot VM is
stopped; a hanging GET with `wait_for_change=true` returns the moment it changes.
`instance/maintenance-event` announces host maintenance (TERMINATE_ON_HOST_MAINTENANCE for
GPU VMs) the same way. The host follows GCE_METADATA_HOST, the variable the Google SDKs
honour, which is also how the tests point it at a local server. Standard library only.
"""

from __future__ import annotations

import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable

NOTICE_S = 30.0
MAINTENANCE_NOTICE_S = 60.0
RETRY_S = 5.0  # after the metadata server could not be reached


def _base() -> str:
    return (f"http://{os.environ.get('GCE_METADATA_HOST', 'metadata.google.internal')}"
            "/computeMetadata/v1/instance/")


def _get(path: str, etag: str | None, timeout_s: int) -> tuple[str, str | None]:
    """One hanging GET: returns (value, etag) when the value differs from `etag` or on timeout."""
    query = f"?wait_for_change=true&timeout_sec={timeout_s}"
    if etag:
        query += f"&last_etag={etag}"
    request = urllib.request.Request(_base() + path + query, headers={"Metadata-Flavor": "Google"})
    with urllib.request.urlopen(request, timeout=timeout_s + 5) as response:
        return response.read().decode().strip(), response.headers.get("ETag")


def watch_gcp(notify: Callable[..., None], stop: threading.Event, timeout_s: int = 10) -> None:
    """Watch `preempted` and `maintenance-event` until `stop`, one thread each."""

    def follow(path: str, fires: Callable[[str], bool], kind: str, notice_s: float) -> None:
        etag, told = None, False
        while not stop.is_set() and not told:
            try:
                value, etag = _get(path, etag, timeout_s)
            except (OSError, urllib.error.URLError):
                stop.wait(RETRY_S)
                continue
            if fires(value):
                told = True
                notify(kind=kind, notice_s=notice_s,
                       detail={"source": f"instance/{path}", "value": value,
                               "seen_at": time.time()})

    helper = threading.Thread(target=follow, daemon=True, name="gcp-maintenance-watch", args=(
        "maintenance-event", lambda v: v not in ("NONE", ""), "maintenance", MAINTENANCE_NOTICE_S))
    helper.start()
    follow("preempted", lambda v: v.upper() == "TRUE", "preemption", NOTICE_S)
