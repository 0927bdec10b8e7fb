"""Revocation-notice watchers against local metadata servers that behave like GCP's
(hanging GETs with wait_for_change, Metadata-Flavor header) and EC2's IMDSv2 (session token,
404 until an interruption is scheduled)."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from profiler import watcher_aws, watcher_gcp


def serve(handler_cls) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_cls)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    return server


class Gce:
    """preempted turns TRUE once `preempt` is set; hanging GETs wake on the change."""

    def __init__(self):
        self.preempt = threading.Event()
        self.headers_ok = True

    def handler(self):
        gce = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                url = urlparse(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                gce.headers_ok &= self.headers.get("Metadata-Flavor") == "Google"
                if url.path.endswith("/instance/preempted"):
                    value_now = lambda: "TRUE" if gce.preempt.is_set() else "FALSE"  # noqa: E731
                    if (query.get("wait_for_change") == "true"
                            and query.get("last_etag") == value_now()):
                        gce.preempt.wait(float(query.get("timeout_sec", "1")))
                    value = value_now()
                elif url.path.endswith("/instance/maintenance-event"):
                    value = "NONE"
                    if query.get("last_etag") == "NONE":
                        time.sleep(float(query.get("timeout_sec", "1")))
                else:
                    self.send_error(404)
                    return
                data = value.encode()
                self.send_response(200)
                self.send_header("ETag", value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        return Handler


def run_watcher(watch, **kwargs):
    notices, stop = [], threading.Event()
    thread = threading.Thread(target=watch, args=(lambda **n: notices.append(n), stop),
                              kwargs=kwargs, daemon=True)
    thread.start()
    return notices, stop, thread


def wait_for(predicate, timeout_s=10.0):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_gcp_preemption_notice(monkeypatch):
    gce = Gce()
    server = serve(gce.handler())
    monkeypatch.setenv("GCE_METADATA_HOST", f"127.0.0.1:{server.server_port}")
    notices, stop, thread = run_watcher(watcher_gcp.watch_gcp, timeout_s=1)
    time.sleep(0.5)
    assert notices == []
    gce.preempt.set()
    assert wait_for(lambda: notices)
    assert notices[0]["kind"] == "preemption" and notices[0]["notice_s"] == 30.0
    assert notices[0]["detail"]["source"] == "instance/preempted"
    thread.join(5)
    assert not thread.is_alive() and len(notices) == 1 and gce.headers_ok
    stop.set()
    server.shutdown()


class Imds:
    def __init__(self):
        self.action: dict | None = None
        self.tokens = 0
        self.unauthorised = 0

    def handler(self):
        imds = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, status, body=b""):
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_PUT(self):
                if (self.path == "/latest/api/token"
                        and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")):
                    imds.tokens += 1
                    self._send(200, f"token-{imds.tokens}".encode())
                else:
                    self._send(400)

            def do_GET(self):
                if self.headers.get("X-aws-ec2-metadata-token") != f"token-{imds.tokens}":
                    imds.unauthorised += 1
                    self._send(401)
                elif self.path == "/latest/meta-data/spot/instance-action" and imds.action:
                    self._send(200, json.dumps(imds.action).encode())
                else:
                    self._send(404)

            def log_message(self, *args):
                pass

        return Handler


def test_aws_interruption_notice(monkeypatch):
    imds = Imds()
    server = serve(imds.handler())
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    notices, stop, thread = run_watcher(watcher_aws.watch_aws, poll_s=0.1)
    time.sleep(0.4)
    assert notices == [] and imds.tokens == 1
    imds.tokens += 1  # the session token expired: the watcher must get a new one
    at = datetime.fromtimestamp(time.time() + 120, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    imds.action = {"action": "terminate", "time": at}
    assert wait_for(lambda: notices)
    notice = notices[0]
    assert notice["kind"] == "interruption" and notice["detail"]["action"] == "terminate"
    assert notice["notice_s"] == pytest.approx(120, abs=3)
    assert imds.unauthorised >= 1 and imds.tokens == 3
    thread.join(5)
    assert not thread.is_alive() and len(notices) == 1
    stop.set()
    server.shutdown()


def test_watchers_stop_when_told_and_survive_an_unreachable_server(monkeypatch):
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:9")
    notices, stop, thread = run_watcher(watcher_aws.watch_aws, poll_s=0.1)
    time.sleep(0.3)
    stop.set()
    thread.join(watcher_aws.RETRY_S + 2)
    assert not thread.is_alive() and notices == []


def test_agent_watcher_registry_knows_the_cloud_watchers():
    from profiler.agent_watchers import get_watcher

    assert get_watcher("local") is None
    assert get_watcher("gcp") is watcher_gcp.watch_gcp
    assert get_watcher("aws") is watcher_aws.watch_aws
