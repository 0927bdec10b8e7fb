"""Revocation-notice watchers the node agent runs (profiler/agent_watchers.py): each is
`watch(notify, stop)` and calls `notify(kind=..., notice_s=..., detail=...)` once per notice.

- GCP: the metadata server's `instance/preempted` turns TRUE about 30 s before a Spot VM is
  stopped; a hanging GET with `wait_for_change=true` returns the moment it changes.
  `instance/maintenance-event` announces host maintenance (TERMINATE_ON_HOST_MAINTENANCE
  for GPU VMs) the same way.
- EC2: IMDSv2 `spot/instance-action` answers 404 until an interruption is scheduled, then
  {"action": "terminate", "time": "...Z"} two minutes ahead; AWS asks for a poll every 5 s.

The hosts follow the variables the SDKs honour (GCE_METADATA_HOST,
AWS_EC2_METADATA_SERVICE_ENDPOINT), which is also how the tests point them at a local server.
Only the standard library is used: the agent starts before anything else is imported.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import datetime

GCP_NOTICE_S = 30.0
AWS_NOTICE_S = 120.0
AWS_POLL_S = 5.0
RETRY_S = 5.0  # after the metadata server could not be reached
GCP_MAINTENANCE_NOTICE_S = 60.0


def _gcp_base() -> str:
    return f"http://{os.environ.get('GCE_METADATA_HOST', 'metadata.google.internal')}/computeMetadata/v1/instance/"


def _aws_base() -> str:
    return os.environ.get("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://169.254.169.254").rstrip("/")


def _gcp_get(path: str, etag: str | None, timeout_s: int) -> tuple[str, str | None]:
    """One hanging GET: returns (value, etag) when the value differs from `etag` or on timeout."""
    query = f"?wait_for_change=true&timeout_sec={timeout_s}"
    if etag:
        query += f"&last_etag={etag}"
    request = urllib.request.Request(_gcp_base() + path + query, headers={"Metadata-Flavor": "Google"})
    with urllib.request.urlopen(request, timeout=timeout_s + 5) as response:
        return response.read().decode().strip(), response.headers.get("ETag")


def watch_gcp(notify: Callable[..., None], stop: threading.Event, timeout_s: int = 10) -> None:
    """Watch `preempted` and `maintenance-event` until `stop`, one thread each."""

    def follow(path: str, fires: Callable[[str], bool], kind: str, notice_s: float) -> None:
        etag, told = None, False
        while not stop.is_set() and not told:
            try:
                value, etag = _gcp_get(path, etag, timeout_s)
            except (OSError, urllib.error.URLError):
                stop.wait(RETRY_S)
                continue
            if fires(value):
                told = True
                notify(kind=kind, notice_s=notice_s, detail={"source": f"instance/{path}",
                                                             "value": value, "seen_at": time.time()})

    helper = threading.Thread(target=follow, daemon=True, name="gcp-maintenance-watch", args=(
        "maintenance-event", lambda v: v not in ("NONE", ""), "maintenance", GCP_MAINTENANCE_NOTICE_S))
    helper.start()
    follow("preempted", lambda v: v.upper() == "TRUE", "preemption", GCP_NOTICE_S)


def _aws_token() -> str:
    request = urllib.request.Request(_aws_base() + "/latest/api/token", method="PUT",
                                     headers={"X-aws-ec2-metadata-token-ttl-seconds": "21600"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.read().decode()


def _aws_instance_action(token: str) -> dict | None:
    request = urllib.request.Request(_aws_base() + "/latest/meta-data/spot/instance-action",
                                     headers={"X-aws-ec2-metadata-token": token})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None  # no interruption scheduled
        raise


def watch_aws(notify: Callable[..., None], stop: threading.Event, poll_s: float = AWS_POLL_S) -> None:
    """Poll IMDSv2 for a spot interruption until `stop`; a 401 renews the session token."""
    token = None
    while not stop.is_set():
        try:
            token = token or _aws_token()
            action = _aws_instance_action(token)
        except urllib.error.HTTPError as exc:
            token = None if exc.code == 401 else token
            stop.wait(poll_s if exc.code == 401 else RETRY_S)
            continue
        except (OSError, ValueError):
            stop.wait(RETRY_S)
            continue
        if action is not None:
            at = datetime.fromisoformat(action["time"].replace("Z", "+00:00")).timestamp()
            notify(kind="interruption", notice_s=max(0.0, at - time.time()),
                   detail={"action": action.get("action"), "time": action["time"],
                           "nominal_notice_s": AWS_NOTICE_S})
            return
        stop.wait(poll_s)
