"""A fault-injecting HTTP proxy in front of moto's server: the Nth call of an EC2 action (from
1, retries counted) gets EC2's answer for a quota, authorization, capacity or other error
instead of moto's, or moto does the work and the answer is lost on the way (the connection
closes). It also keeps EC2's idempotency, which moto lacks: a RunInstances whose ClientToken
was seen before gets the first answer again instead of another instance.
"""

from __future__ import annotations

import http.client
import threading
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from fakes.local_server import QuietHandler, start

# fault -> (HTTP status, EC2 error code, message), as EC2 answers them
ERRORS = {
    "instance-limit": (400, "InstanceLimitExceeded", "You have requested more instances (2) "
                       "than your current instance limit of 1 allows for the specified "
                       "instance type."),
    "vcpu-limit": (400, "VcpuLimitExceeded", "You have requested more vCPU capacity than your "
                   "current vCPU limit of 8 allows for the instance bucket that the specified "
                   "instance type belongs to."),
    "auth": (401, "AuthFailure", "AWS was not able to validate the provided access "
             "credentials"),
    "denied": (403, "UnauthorizedOperation", "You are not authorized to perform this "
               "operation."),
    "capacity": (500, "InsufficientInstanceCapacity", "We currently do not have sufficient "
                 "g4dn.xlarge capacity in the Availability Zone you requested."),
    "invalid": (400, "InvalidParameterValue", "Value (g4dn.xlarge) for parameter "
                "instanceType is invalid."),
    "internal": (500, "InternalError", "An internal error has occurred"),
}
DROP = "drop"  # moto does the work; the answer is lost


@dataclass
class Fault:
    action: str  # EC2 action, e.g. RunInstances
    kind: str  # a key of ERRORS, or DROP
    at: int  # the first call it hits, from 1
    times: int | None = 1  # how many calls in a row; None: every one from `at` on


@dataclass
class FaultProxy:
    upstream: str
    faults: list[Fault] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)  # action -> calls seen
    injected: list[tuple[str, int, str]] = field(default_factory=list)  # (action, call, kind)
    _answers: dict[str, tuple[int, list, bytes]] = field(default_factory=dict)  # ClientToken
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def fault(self, action: str) -> str | None:
        """Count a call of `action`; the fault it meets, if any."""
        with self._lock:
            number = self.calls[action] = self.calls.get(action, 0) + 1
            for fault in self.faults:
                last = None if fault.times is None else fault.at + fault.times - 1
                if fault.action == action and number >= fault.at and (
                        last is None or number <= last):
                    self.injected.append((action, number, fault.kind))
                    return fault.kind
        return None

    def forward(self, method: str, path: str, headers: dict, body: bytes
                ) -> tuple[int, list, bytes]:
        target = urlparse(self.upstream)
        connection = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            connection.close()


def error_body(code: str, message: str) -> bytes:
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}'
            f"</Code><Message>{message}</Message></Error></Errors>"
            "<RequestID>fault-proxy</RequestID></Response>").encode()


def serve(proxy: FaultProxy) -> tuple[ThreadingHTTPServer, str]:
    """Start the proxy on a free port; returns the server and its endpoint URL."""

    class Handler(QuietHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            form = parse_qs(body.decode(errors="replace"))
            action = form.get("Action", [""])[0]
            token = form.get("ClientToken", [None])[0] if action == "RunInstances" else None
            kind = proxy.fault(action) if action else None
            if kind in ERRORS:
                status, code, message = ERRORS[kind]
                return self._send(status, [("Content-Type", "text/xml")],
                                  error_body(code, message))
            answer = proxy._answers.get(token) if token else None  # EC2's idempotency
            if answer is None:
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                answer = proxy.forward(self.command, self.path, headers, body)
                if token and answer[0] == 200:
                    proxy._answers[token] = answer
            if kind == DROP:
                self.close_connection = True  # the work is done; nobody hears of it
                return None
            return self._send(*answer)

        def _send(self, status: int, headers: list, body: bytes):
            self.send_response(status)
            for key, value in headers:
                if key.lower() not in ("content-length", "transfer-encoding", "connection",
                                       "server", "date"):
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_DELETE = _answer

    return start(Handler)
