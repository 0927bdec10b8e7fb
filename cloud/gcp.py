"""GCP provider: Compute Engine GPU VMs, on-demand or Spot, through google-cloud-compute.

Nodes boot a Deep Learning VM image whose startup script (cloud/bootstrap.py) starts the node
agent; results go to a bucket, so no inbound SSH is ever opened. A node deletes itself after
`max_run_seconds` (max_run_duration + DELETE) should the orchestrator die. Clients are passed
in; without them Application Default Credentials are used.

A replacement VM gets a name of its own (`...-<node>-r<generation>`), so its events and
start-up times are never confused with its predecessor's. A replaced node 0 asks for its
predecessor's internal address, which the survivors were told to rendezvous on; should GCP
refuse it (the address was taken meanwhile, or the replacement lands in another region), the
replacement gets a new address and the survivors keep pointing at the old one.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import replace
from datetime import datetime
from typing import Any

from cloud.adaptors import gcp
from cloud.bootstrap import check_no_credentials, startup_script
from cloud.provider import (
    NODE_LABEL,
    PROJECT,
    SWEEP_LABEL,
    TRIAL_LABEL,
    CapacityError,
    ClusterSpec,
    ConflictError,
    CredentialsError,
    LaunchUndo,
    Node,
    NodeState,
    NotFoundError,
    PlannedRequest,
    Provider,
    ProviderError,
    ProviderEvent,
    QuotaError,
    cluster_name,
    fill,
    rendezvous_host,
    sent_values,
)

DEFAULT_IMAGE = (
    "projects/deeplearning-platform-release/global/images/family/common-cu124-debian-11-py310"
)
DEFAULT_ZONES = ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f")
NAME_PREFIX = "gpuadv-"
# 63 characters at most: prefix, cluster stem, "-<node>-r<generation>" (up to 12 characters).
STEM_CHARS = 44
PREEMPTED_OPERATION = "compute.instances.preempted"
# GPUs attached to N1 machines as guest accelerators.
N1_ACCELERATORS = {
    "T4": "nvidia-tesla-t4",
    "V100": "nvidia-tesla-v100",
    "P100": "nvidia-tesla-p100",
    "K80": "nvidia-tesla-k80",
}
# Accelerator-optimised families carry their GPUs in the machine type.
G2_GPUS = {"g2-standard-24": 2, "g2-standard-48": 4, "g2-standard-96": 8}  # other g2: 1
STATES = {
    "PROVISIONING": NodeState.PENDING,
    "STAGING": NodeState.PENDING,
    "RUNNING": NodeState.RUNNING,
    "STOPPING": NodeState.STOPPING,
    "SUSPENDING": NodeState.STOPPING,
    "SUSPENDED": NodeState.TERMINATED,
    "TERMINATED": NodeState.TERMINATED,
}


def built_in_gpus(machine_type: str) -> tuple[str, int] | None:
    """(GPU type, count) of an accelerator-optimised machine type, None for N1 and others."""
    family = machine_type.split("-")[0]
    if family == "g2":
        return "L4", G2_GPUS.get(machine_type, 1)
    count = re.search(r"-(\d+)g$", machine_type)
    if family == "a2" and count:
        return ("A100-80GB" if "ultragpu" in machine_type else "A100-40GB"), int(count[1])
    if family == "a3" and count:
        return "H100-80GB", int(count[1])
    return None


def accelerators(spec: ClusterSpec) -> list[tuple[str, int]]:
    """Guest accelerators to attach, after checking the GPU fits the machine type."""
    built_in = built_in_gpus(spec.instance_type)
    if built_in is not None:
        gpu, count = built_in
        if spec.gpu_type and (spec.gpu_type != gpu or spec.gpus_per_node not in (0, count)):
            raise ProviderError(
                f"{spec.instance_type} comes with {count} x {gpu}, not {spec.gpus_per_node} x "
                f"{spec.gpu_type}; pick the machine type that matches (e.g. a2 for A100, "
                "g2 for L4, a3 for H100)"
            )
        return []
    if not spec.gpus_per_node:
        return []
    if not spec.gpu_type:
        raise ProviderError(
            f"{spec.instance_type} with {spec.gpus_per_node} GPUs needs a GPU type (T4, V100, "
            "P100, K80) to attach; set gpu_type, or use an a2/g2/a3 machine type"
        )
    if not spec.instance_type.startswith("n1-") or spec.gpu_type not in N1_ACCELERATORS:
        raise ProviderError(
            f"GCP attaches {spec.gpu_type} only to "
            + ("n1 machine types" if spec.gpu_type in N1_ACCELERATORS else "its own a2/g2/a3 types")
            + f", not {spec.instance_type}; use e.g. n1-standard-8 with T4/V100/P100"
        )
    return [(N1_ACCELERATORS[spec.gpu_type], spec.gpus_per_node)]


def _stem(cluster: str) -> str:
    """The cluster's part of its instance names; a long one keeps a hash of the whole, so
    clusters that differ only at the end (the trial id) never share names."""
    text = cluster.replace("_", "-")
    if len(text) > STEM_CHARS:
        text = f"{text[:STEM_CHARS - 7]}-{hashlib.sha1(text.encode()).hexdigest()[:6]}"
    return NAME_PREFIX + text


def instance_name(cluster: str, node: int, generation: int = 0) -> str:
    """Generation 0 is the node's first VM; each replacement of it counts one up."""
    return f"{_stem(cluster)}-{node}" + (f"-r{generation}" if generation else "")


def _name_pattern(cluster: str) -> str:
    """RE2 (GCP's filter syntax) matching every instance name of the cluster."""
    return re.escape(_stem(cluster)) + "-[0-9]+(-r[0-9]+)?"


def _generation(name: str) -> int:
    found = re.search(r"-r(\d+)$", name)
    return int(found[1]) if found else 0


def _timestamp(text: str) -> float | None:
    return datetime.fromisoformat(text).timestamp() if text else None


class GcpProvider(Provider):
    name = "gcp"

    def __init__(
        self,
        project: str | None = None,
        *,
        instances=None,
        zone_operations=None,
        region: str | None = None,
        install: str | None = None,
        clock=time.time,
    ):
        self.project = project
        self.region = region
        self._instances, self._operations = instances, zone_operations
        self._install, self._clock = install, clock
        self._nodes: dict[str, list[Node]] = {}  # cluster -> its current nodes
        self._launched: dict[str, Node] = {}  # instance name -> every node this process launched
        self._seen: dict[str, dict[str, float]] = {}  # node -> status -> first seen
        self._reported: set[tuple[str, str]] = set()  # (node or operation, kind)

    # -- clients --------------------------------------------------------------------------

    def _clients(self):
        if self._instances is None or self._operations is None:
            self._instances, self._operations, default_project = gcp.compute_clients()
            self.project = self.project or default_project
        if not self.project:
            raise ProviderError("no GCP project; set GOOGLE_CLOUD_PROJECT or run "
                                "`gcloud config set project ID`")
        return self._instances, self._operations

    # -- requests -------------------------------------------------------------------------

    def _zones(self, spec: ClusterSpec) -> tuple[str, ...]:
        if spec.zones:
            return spec.zones
        region = spec.region or self.region
        return tuple(f"{region}-{z}" for z in "abcf") if region else DEFAULT_ZONES

    def instance_body(self, spec: ClusterSpec, node: int, zone: str, rendezvous: str | None,
                      *, name: str, address: str | None = None) -> dict[str, Any]:
        """The insert body as the REST API takes it (a plain dict: no SDK needed); `address`
        asks for that internal address (a replaced node 0's)."""
        script = startup_script(spec, node, provider=self.name, rendezvous_host=rendezvous,
                                install=self._install)
        labels = spec.labels(node)
        check_no_credentials(repr(labels), "labels")
        # An external address for outbound pip/bucket traffic; no firewall rule opens SSH.
        interface = {"network": "global/networks/default",
                     "accessConfigs": [{"name": "External NAT"}]}
        if address:
            interface["networkIP"] = address
        body = {
            "name": name,
            "machineType": f"zones/{zone}/machineTypes/{spec.instance_type}",
            "labels": labels,
            "disks": [{"boot": True, "autoDelete": True, "initializeParams": {
                "sourceImage": spec.image or DEFAULT_IMAGE, "diskSizeGb": "100"}}],
            "networkInterfaces": [interface],
            "scheduling": {
                "provisioningModel": "SPOT" if spec.spot else "STANDARD",
                "onHostMaintenance": "TERMINATE",  # GPUs cannot live-migrate
                "automaticRestart": False,
                "instanceTerminationAction": "DELETE",
                "maxRunDuration": {"seconds": str(spec.max_run_seconds)},  # int64: a string
            },
            "metadata": {"items": [{"key": "startup-script", "value": script},
                                   {"key": "install-nvidia-driver", "value": "True"}]},
            "serviceAccounts": [{"email": "default", "scopes": [
                "https://www.googleapis.com/auth/devstorage.read_write"]}],
        }
        guests = [{"acceleratorType": f"zones/{zone}/acceleratorTypes/{kind}",
                   "acceleratorCount": count} for kind, count in accelerators(spec)]
        if guests:
            body["guestAccelerators"] = guests
        return body

    def plan(self, spec: ClusterSpec) -> list[PlannedRequest]:
        zones = self._zones(spec)
        return self._requests(spec, zones[0], zones, {}, {})

    def _requests(self, spec: ClusterSpec, zone: str, zones: tuple[str, ...],
                  live: dict[int, Node], launched: dict[str, Node]) -> list[PlannedRequest]:
        """The inserts that complete the cluster in `zone`, node 0 first: one per node that no
        live VM stands for, under its next generation's name (`launched`: every VM this
        process launched). A replaced node 0 asks for its predecessor's internal address,
        which the survivors rendezvous on; the others are told node 0's address."""
        requests = []
        for index in range(spec.nodes):
            if index in live:
                continue
            earlier = [n for n in launched.values()
                       if n.cluster == spec.cluster and n.index == index]
            previous = max(earlier, key=lambda n: _generation(n.id), default=None)
            generation = _generation(previous.id) + 1 if previous else 0
            same_subnet = previous is not None and previous.region == zone.rsplit("-", 1)[0]
            address = previous.internal_address if index == 0 and same_subnet else None
            instance = self.instance_body(spec, index, zone, rendezvous_host(index, live),
                                          address=address,
                                          name=instance_name(spec.cluster, index, generation))
            requests.append(PlannedRequest(
                self.name, "compute.instances.insert", index,
                {"project": self.project or PROJECT, "zone": zone, "instance": instance},
                {"zones": list(zones)}))
        return requests

    # -- launch ---------------------------------------------------------------------------

    def launch(self, spec: ClusterSpec) -> list[Node]:
        """Launch the nodes the cluster lacks: the first time all of them (exactly the plan's
        requests), after a revocation the replacement only. Healthy nodes are returned as
        they are (same name, same launched_at) and get no insert."""
        accelerators(spec)  # a bad machine/GPU pair fails before any request
        live = self._live_nodes(spec)
        zones = self._zones(spec)
        if live:  # replacements go where the survivors are, if they can
            home = live[min(live)].zone
            zones = (home, *(z for z in zones if z != home))
        stockouts = []
        survivors = [n.id for n in live.values()]
        give_up = time.monotonic() + gcp.SETTINGS.operation_deadline_s  # every insert together
        with LaunchUndo(self, lambda: list(self._live_nodes(spec).values()),
                        keep=survivors) as undo:
            for zone in zones:
                try:
                    nodes = self._send(spec, self._requests(spec, zone, zones, live,
                                                            self._launched), live, undo, give_up)
                except CapacityError as exc:
                    stockouts.append(f"{zone} ({exc})")
                    continue
                self._nodes[spec.cluster] = nodes
                return nodes
            raise CapacityError(
                f"no capacity for {spec.nodes - len(live)} x {spec.instance_type} in "
                f"{', '.join(stockouts)}; add zones to the spec or try another GPU type"
            )

    def _live_nodes(self, spec: ClusterSpec) -> dict[int, Node]:
        """The cluster's nodes whose VM is pending or running, by index."""
        now = self._clock()
        live: dict[int, Node] = {}
        for instance in self._cluster_instances(spec.cluster):
            self._seen.setdefault(instance.name, {}).setdefault(instance.status, now)
            index = int(instance.labels.get(NODE_LABEL, -1))
            if STATES.get(instance.status) not in (NodeState.PENDING, NodeState.RUNNING):
                continue
            if not 0 <= index < spec.nodes:
                continue
            if index in live and _generation(live[index].id) > _generation(instance.name):
                continue
            if instance.name not in self._launched:  # launched by an earlier process
                self._launched[instance.name] = self._node(spec, index, instance)
            live[index] = self._launched[instance.name]
        return live

    def _send(self, spec: ClusterSpec, requests: list[PlannedRequest], live: dict[int, Node],
              undo: LaunchUndo, give_up: float) -> list[Node]:
        """Send the inserts in order; a stock-out deletes the nodes they made (a partial
        cluster is useless) so that the next zone gets the cluster whole; any other error
        ends the launch (`undo` deletes what it made)."""
        nodes, new = dict(live), []
        try:
            for request in requests:
                undo.sending()
                nodes[request.node] = self._insert(spec, request, nodes, give_up)
                new.append(nodes[request.node])
                undo.made(nodes[request.node])
        except CapacityError:
            self.terminate(new)
            undo.forget(new)
            raise
        return [nodes[i] for i in range(spec.nodes)]

    def _insert(self, spec: ClusterSpec, request: PlannedRequest, nodes: dict[int, Node],
                give_up: float) -> Node:
        """Send one insert; should the internal address it asks for be taken, send it again
        without (the survivors will not find that new node 0)."""
        try:
            return self._insert_once(spec, request, nodes, give_up)
        except (CapacityError, QuotaError, CredentialsError):
            raise
        except ProviderError:
            interface = request.body["instance"]["networkInterfaces"][0]
            if "networkIP" not in interface:
                raise
        instance = {**request.body["instance"], "networkInterfaces": [
            {k: v for k, v in interface.items() if k != "networkIP"}]}
        return self._insert_once(spec, replace(request, body={**request.body,
                                                               "instance": instance}), nodes,
                                 give_up)

    def _insert_once(self, spec: ClusterSpec, request: PlannedRequest,
                     nodes: dict[int, Node], give_up: float) -> Node:
        instances, _ = self._clients()
        launched_at = self._clock()
        body = fill(request.body, {**sent_values(launched_at, nodes), PROJECT: self.project})
        zone, name = body["zone"], body["instance"]["name"]
        try:
            with gcp.errors(zone):
                operation = instances.insert_unary(
                    project=body["project"], zone=zone, instance_resource=gcp.instance(
                        body["instance"]), **gcp.call_options())
            self._wait(operation, zone, give_up)
        except ConflictError:
            pass  # it exists already: launch is idempotent
        with gcp.errors(f"reading {name} in {zone}"):
            found = instances.get(project=self.project, zone=zone, instance=name,
                                  **gcp.call_options())
        self._seen.setdefault(name, {}).setdefault(found.status, self._clock())
        node = self._node(spec, request.node, found, launched_at)
        self._launched[name] = node
        return node

    def _node(self, spec: ClusterSpec, index: int, instance, launched_at: float | None = None):
        """A Node for an instance; one this process did not launch dates from its creation."""
        zone = instance.zone.rsplit("/", 1)[-1]
        address = (instance.network_interfaces[0].network_i_p
                   if instance.network_interfaces else None)
        return Node(
            provider=self.name,
            cluster=spec.cluster,
            index=index,
            id=instance.name,
            region=zone.rsplit("-", 1)[0],
            zone=zone,
            internal_address=address or None,
            spot=spec.spot,
            launched_at=launched_at or _timestamp(instance.creation_timestamp),
            labels=dict(instance.labels),
        )

    def _wait(self, operation, zone: str, give_up: float | None = None) -> None:
        """Wait for a zone operation until `give_up` (time.monotonic()), by default
        gcp.SETTINGS.operation_deadline_s from now; raise the provider error its error
        codes mean."""
        done = gcp.compute().Operation.Status.DONE
        _, operations = self._clients()
        deadline_s = gcp.SETTINGS.operation_deadline_s
        give_up = give_up or time.monotonic() + deadline_s
        while operation.status != done:
            if time.monotonic() >= give_up:
                raise ProviderError(
                    f"GCP operation {operation.name} in {zone} is not done within the "
                    f"{deadline_s:g}s allowed; look at it with `gcloud compute operations describe "
                    f"{operation.name} --zone {zone}` and re-run (launch and terminate are "
                    "idempotent)")
            with gcp.errors(f"waiting for {operation.name} in {zone}"):
                wait_s = min(gcp.SETTINGS.wait_timeout_s, max(1.0, give_up - time.monotonic()))
                operation = operations.wait(project=self.project, zone=zone,
                                            operation=operation.name,
                                            **gcp.call_options(wait_s))
        error = gcp.operation_error(operation, zone)
        if error is not None:
            raise error

    # -- observe --------------------------------------------------------------------------

    def _find(self, filter_: str) -> list[Any]:
        instances, _ = self._clients()
        with gcp.errors(f"listing the instances of {self.project}"):  # pages load as iterated
            pages = instances.aggregated_list(request={"project": self.project, "filter": filter_},
                                              **gcp.call_options())
            return [i for _, scoped in pages for i in scoped.instances]

    def _cluster_instances(self, cluster: str) -> list[Any]:
        return self._find(f'name eq "{_name_pattern(cluster)}"')

    def list(self, cluster: str) -> dict[str, NodeState]:
        return {i.name: STATES.get(i.status, NodeState.PENDING)
                for i in self._cluster_instances(cluster)}

    def poll_events(self, cluster: str) -> list[ProviderEvent]:
        now = self._clock()
        events = self._preemptions(cluster)
        preempted = {e.node_id for e in events} | {n for n, k in self._reported if k == "preempted"}
        alive = {}
        for instance in self._cluster_instances(cluster):
            alive[instance.name] = instance
            seen = self._seen.setdefault(instance.name, {})
            seen.setdefault(instance.status, now)
            if instance.status == "RUNNING" and self._first(instance.name, "running"):
                events.append(self._running_event(instance, seen, now))
            elif (STATES.get(instance.status) is NodeState.TERMINATED
                  and instance.name not in preempted):
                if self._first(instance.name, "terminated"):
                    events.append(ProviderEvent(instance.name, "terminated", now))
        for node in self._nodes.get(cluster, []):
            gone = node.id not in alive and node.id not in preempted
            if gone and self._first(node.id, "terminated"):
                events.append(ProviderEvent(node.id, "terminated", now))
        return events

    def _first(self, key: str, kind: str) -> bool:
        if (key, kind) in self._reported:
            return False
        self._reported.add((key, kind))
        return True

    def _running_event(self, instance, seen: dict[str, float], now: float):
        """Start-up phases as CM-DARE split them, from what GCP and our polls saw."""
        node = self._launched.get(instance.name)
        launched = (node and node.launched_at) or _timestamp(instance.creation_timestamp)
        running = _timestamp(instance.last_start_timestamp) or seen.get("RUNNING", now)
        staged = seen.get("STAGING")
        detail = {
            "created_at": _timestamp(instance.creation_timestamp),
            "running_at": running,
            "provisioning_s": (staged or running) - launched if launched else None,
            "staging_s": running - staged if staged else None,
        }
        return ProviderEvent(instance.name, "running", running, detail)

    def _preemptions(self, cluster: str) -> list[ProviderEvent]:
        _, operations = self._clients()
        # Every VM the cluster had: an injected revocation is followed by its replacement
        # before GCP's preemption operation is read.
        mine = [n for n in self._launched.values() if n.cluster == cluster]
        names, zones = {n.id for n in mine}, {n.zone for n in mine}
        events = []
        for zone in sorted(zones):
            query = {"project": self.project, "zone": zone,
                     "filter": f'operationType="{PREEMPTED_OPERATION}"'}
            with gcp.errors(f"listing the operations of {zone}"):
                found = list(operations.list(request=query, **gcp.call_options()))
            for op in found:
                node = op.target_link.rsplit("/", 1)[-1]
                if node in names and self._first(node, "preempted"):
                    at = _timestamp(op.insert_time) or self._clock()
                    events.append(ProviderEvent(node, "preempted", at, {"operation": op.name}))
        return events

    # -- end ------------------------------------------------------------------------------

    def terminate(self, nodes: list[Node]) -> None:
        instances, _ = self._clients()
        pending = []
        for node in nodes:
            try:
                with gcp.errors(f"deleting {node.id} in {node.zone}"):
                    op = instances.delete_unary(project=self.project, zone=node.zone,
                                                instance=node.id, **gcp.call_options())
                pending.append((op, node.zone))
            except NotFoundError:
                continue  # gone already
        give_up = time.monotonic() + gcp.SETTINGS.operation_deadline_s  # all of them together
        for op, zone in pending:
            try:
                self._wait(op, zone, give_up)
            except NotFoundError:
                pass

    def revoke(self, node: Node) -> None:
        instances, _ = self._clients()
        with gcp.errors(f"simulating a maintenance event on {node.id}"):
            op = instances.simulate_maintenance_event_unary(
                project=self.project, zone=node.zone, instance=node.id, **gcp.call_options()
            )
        self._wait(op, node.zone)

    def leftovers(self, older_than_s: float | None = None) -> list[Node]:
        now = self._clock()
        nodes = []
        for instance in self._find(f"labels.{SWEEP_LABEL}:*"):
            created = _timestamp(instance.creation_timestamp) or now
            if older_than_s is not None and now - created < older_than_s:
                continue
            labels = dict(instance.labels)
            zone = instance.zone.rsplit("/", 1)[-1]
            nodes.append(
                Node(
                    provider=self.name,
                    cluster=cluster_name(labels.get(SWEEP_LABEL, ""), labels.get(TRIAL_LABEL, "")),
                    index=int(labels.get(NODE_LABEL, 0)),
                    id=instance.name,
                    region=zone.rsplit("-", 1)[0],
                    zone=zone,
                    spot=instance.scheduling.provisioning_model == "SPOT",
                    launched_at=created,
                    labels=labels,
                )
            )
        return nodes
