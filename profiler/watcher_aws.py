"""The node agent's revocation-notice watcher on an EC2 instance (profiler/agent_watchers.py).

IMDSv2 `spot/instance-action` answers 404 until an interruption is scheduled, then
{"action": "terminate", "time": "...Z"} two minutes ahead; AWS asks for a poll every 5 s.
The host follows AWS_EC2_METADATA_SERVICE_ENDPOINT, the variable the AWS SDKs honour, which
is also how the tests point it at a local server. Standard library only.
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

NOTICE_S = 120.0
POLL_S = 5.0
RETRY_S = 5.0  # after the metadata service could not be reached


def _base() -> str:
    return os.environ.get("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://169.254.169.254").rstrip("/")


def _token() -> str:
    request = urllib.request.Request(_base() + "/latest/api/token", method="PUT",
                                     headers={"X-aws-ec2-metadata-token-ttl-seconds": "21600"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.read().decode()


def _instance_action(token: str) -> dict | None:
    request = urllib.request.Request(_base() + "/latest/meta-data/spot/instance-action",
                                     headers={"X-aws-ec2-metadata-token": token})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None  # no interruption scheduled
        raise


def watch_aws(notify: Callable[..., None], stop: threading.Event, poll_s: float = POLL_S) -> None:
    """Poll IMDSv2 for a spot interruption until `stop`; a 401 renews the session token."""
    token = None
    while not stop.is_set():
        try:
            token = token or _token()
            action = _instance_action(token)
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
                           "nominal_notice_s": NOTICE_S})
            return
        stop.wait(poll_s)
