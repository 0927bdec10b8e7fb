"""A local Compute Engine REST endpoint for tests: it receives the exact requests
google-cloud-compute sends (transport="rest", api_endpoint="http://127.0.0.1:PORT") and answers
with responses shaped like GCP's own (gcp_responses/*.json, the documented v1 formats), keeping
just enough state for instances to be created, listed, preempted and deleted.

Scripted failures: `stockout_zones` (the insert operation ends ZONE_RESOURCE_POOL_EXHAUSTED),
`quota_zones` (it ends QUOTA_EXCEEDED), `failures` (the next requests, whatever they are,
answer these HTTP statuses, e.g. [503, 503]), `hung_operations` (`wait` answers the operation
still RUNNING), `insert_faults` (the Nth insert, from 1, meets a fault of INSERT_FAULTS).
Internal addresses are never handed out twice unless
an insert asks for a free one by `networkIP` (one in use ends IP_IN_USE_BY_ANOTHER_RESOURCE).
Every request is kept in `requests`.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from fakes.local_server import QuietHandler, start

RESPONSES = Path(__file__).parent / "gcp_responses"
ZONE_PATH = re.compile(r"^/compute/v1/projects/([^/]+)/zones/([^/]+)/(instances|operations)"
                       r"(?:/([^/]+))?(?:/(\w+))?$")
AGGREGATED = re.compile(r"^/compute/v1/projects/([^/]+)/aggregated/instances$")
STATUS_STEPS = ["PROVISIONING", "STAGING", "RUNNING"]
DROP = object()  # the status of an answer lost on the way: the connection closes unanswered
# fault -> how the insert meets it: its operation ends with that error, an HTTP error comes
# back instead, the instance is made and the answer lost, or its operation never ends.
INSERT_FAULTS = {
    "quota": "operation_quota", "stockout": "operation_stockout",
    "forbidden": (403, "Required 'compute.instances.create' permission for "
                  "'projects/test-project/zones/us-central1-a/instances'"),
    "unauthenticated": (401, "Request had invalid authentication credentials."),
    "internal": (500, "Internal error. Please try again or contact Google Support."),
    "drop": DROP, "hang": "hang",
}


def recorded(name: str, **values: str) -> dict:
    text = (RESPONSES / f"{name}.json").read_text()
    for key, value in values.items():
        text = text.replace(f"__{key}__", value)
    return json.loads(text)


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    body: dict | None


@dataclass
class FakeCompute:
    stockout_zones: set[str] = field(default_factory=set)
    quota_zones: set[str] = field(default_factory=set)
    failures: list[int] = field(default_factory=list)
    hung_operations: bool = False
    insert_faults: dict[int, str] = field(default_factory=dict)
    inserts: int = 0
    requests: list[Request] = field(default_factory=list)
    instances: dict[tuple[str, str], dict] = field(default_factory=dict)  # (zone, name)
    operations: dict[str, dict] = field(default_factory=dict)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    _addresses: itertools.count = field(default_factory=lambda: itertools.count(2))

    def calls(self, method: str, suffix: str = "") -> list[Request]:
        return [r for r in self.requests if r.method == method and r.path.endswith(suffix)]

    # -- state changes --------------------------------------------------------------------

    def _operation(self, project, zone, name, kind="insert", failure: str | None = None) -> dict:
        number = next(self._ids)
        op = recorded("operation", PROJECT=project, ZONE=zone, NAME=name)
        op.update(name=f"operation-{number}", operationType=kind,
                  selfLink=op["selfLink"].replace("__OPERATION__", f"operation-{number}"))
        op["_failure"] = failure
        self.operations[op["name"]] = op
        return op

    def _finish(self, op: dict) -> dict:
        op.update(status="DONE", progress=100, endTime=op["startTime"])
        if op["_failure"]:
            op.update(recorded(op["_failure"], PROJECT="project", ZONE=_zone_of(op),
                               ADDRESS=op.get("_address", "")))
        return op

    def insert(self, project, zone, body) -> tuple[int | object, dict]:
        self.inserts += 1
        fault = INSERT_FAULTS[self.insert_faults[self.inserts]] \
            if self.inserts in self.insert_faults else None
        if isinstance(fault, tuple):
            status, message = fault
            return status, {"error": {"code": status, "message": message}}
        name = body["name"]
        if (zone, name) in self.instances:
            return 409, recorded("error_conflict", PROJECT=project, ZONE=zone, NAME=name)
        wanted = body.get("networkInterfaces", [{}])[0].get("networkIP")
        in_use = {nic["networkIP"] for i in self.instances.values()
                  for nic in i.get("networkInterfaces", [])}
        failure = fault if fault in ("operation_quota", "operation_stockout") else \
            "operation_stockout" if zone in self.stockout_zones else (
            "operation_quota" if zone in self.quota_zones else
            "operation_ip_in_use" if wanted in in_use else None)
        op = self._operation(project, zone, name, failure=failure)
        if failure:
            op["_address"] = wanted or ""
            return 200, _public(op)
        instance = recorded("instance", PROJECT=project, ZONE=zone, NAME=name,
                            REGION=zone.rsplit("-", 1)[0], ADDRESS=str(next(self._addresses)))
        address = wanted or instance["networkInterfaces"][0]["networkIP"]
        body = copy.deepcopy(body)  # the request as sent stays in `requests`
        instance.update({k: v for k, v in body.items() if k != "name"}, name=name,
                        creationTimestamp=_now())
        for nic in instance.get("networkInterfaces", []):
            nic["networkIP"] = address  # GCP assigns the internal address
        self.instances[(zone, name)] = instance
        op["_hung"] = fault == "hang"
        return (DROP if fault is DROP else 200), _public(op)

    def observe(self, instance: dict) -> dict:
        """Each look at an instance moves it one step along PROVISIONING -> STAGING -> RUNNING."""
        if instance["status"] in STATUS_STEPS[:-1]:  # TERMINATED stays
            instance["status"] = STATUS_STEPS[STATUS_STEPS.index(instance["status"]) + 1]
            if instance["status"] == "RUNNING":
                instance["lastStartTimestamp"] = _now()
        return copy.deepcopy(instance)

    def preempt(self, project, zone, name) -> dict:
        """What GCP does to a Spot VM on a (simulated) maintenance event with action DELETE."""
        instance = self.instances.pop((zone, name))
        op = recorded("operation_preempted", PROJECT=project, ZONE=zone, NAME=name)
        self.operations[op["name"]] = {**op, "_failure": None}
        return instance

    # -- HTTP -----------------------------------------------------------------------------

    def handle(self, method: str, url: str, body: dict | None) -> tuple[int, dict]:
        parsed = urlparse(url)
        query = parse_qs(parsed.query)
        self.requests.append(Request(method, parsed.path, query, body))
        if self.failures:
            status = self.failures.pop(0)
            return status, {"error": {"code": status, "message": "scripted failure"}}
        if match := AGGREGATED.match(parsed.path):
            items = [self.observe(i) for i in self.instances.values() if _matches(i, query)]
            by_zone: dict[str, list] = {}
            for item in items:
                by_zone.setdefault("zones/" + item["zone"].rsplit("/", 1)[-1], []).append(item)
            return 200, {"kind": "compute#instanceAggregatedList",
                         "items": {z: {"instances": v} for z, v in by_zone.items()}}
        match = ZONE_PATH.match(parsed.path)
        if not match:
            return 404, {"error": {"code": 404, "message": f"no route {parsed.path}"}}
        project, zone, collection, name, verb = match.groups()
        if collection == "operations":
            if name and verb == "wait":
                op = self.operations[name]
                hung = self.hung_operations or op.get("_hung")
                return 200, _public(op if hung else self._finish(op))
            ops = [o for o in self.operations.values()
                   if _zone_of(o) == zone and _matches(o, query)]
            return 200, {"kind": "compute#operationList", "items": [_public(o) for o in ops]}
        if method == "POST" and not name:
            return self.insert(project, zone, body or {})
        instance = self.instances.get((zone, name))
        if instance is None:
            return 404, recorded("error_not_found", PROJECT=project, ZONE=zone, NAME=name or "")
        if method == "GET" and not verb:
            return 200, self.observe(instance)
        if method == "DELETE":
            del self.instances[(zone, name)]
            return 200, _public(self._operation(project, zone, name, "delete"))
        if method == "POST" and verb == "simulateMaintenanceEvent":
            op = self._operation(project, zone, name, "simulateMaintenanceEvent")
            if instance["scheduling"].get("provisioningModel") == "SPOT":
                self.preempt(project, zone, name)
            elif instance["scheduling"].get("onHostMaintenance") == "TERMINATE":
                instance["status"] = "TERMINATED"  # a GPU VM cannot migrate: it stops
            return 200, _public(op)
        return 400, {"error": {"code": 400, "message": f"unsupported {method} {parsed.path}"}}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _public(op: dict) -> dict:
    return {k: v for k, v in op.items() if not k.startswith("_")}


def _zone_of(resource: dict) -> str:
    return resource["zone"].rsplit("/", 1)[-1]


def _matches(resource: dict, query: dict[str, list[str]]) -> bool:
    """The filter forms the provider uses: name eq "re", labels.KEY:*, field="value"."""
    text = query.get("filter", [""])[0]
    if not text:
        return True
    if m := re.fullmatch(r'name eq "(.*)"', text):
        return re.fullmatch(m[1], resource["name"]) is not None
    if m := re.fullmatch(r"labels\.([\w-]+):\*", text):
        return m[1] in resource.get("labels", {})
    if m := re.fullmatch(r'(\w+)="(.*)"', text):
        return resource.get(m[1]) == m[2]
    raise ValueError(f"the fake does not understand filter {text!r}")


def serve(fake: FakeCompute) -> tuple[ThreadingHTTPServer, str]:
    """Start the fake on a free port; returns the server and its endpoint URL."""
    lock = threading.Lock()

    class Handler(QuietHandler):
        def _answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            with lock:
                status, payload = fake.handle(self.command, self.path,
                                              json.loads(raw) if raw else None)
            if status is DROP:
                self.close_connection = True
                return
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = _answer

    return start(Handler)
