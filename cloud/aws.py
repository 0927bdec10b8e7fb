"""AWS provider: EC2 GPU instances, on-demand or spot, through boto3.

Nodes boot the Deep Learning AMI named by an SSM public parameter; user-data
(cloud/bootstrap.py) starts the node agent and arms a shutdown timer, and every way an
instance can stop ends in termination (InstanceInitiatedShutdownBehavior, spot interruption
behaviour, volumes deleted on termination), so nothing outlives its trial for long. The
2-minute interruption notice is read on the node from IMDSv2 (profiler/watcher_aws.py).
"""

from __future__ import annotations

import hashlib
import re
import time
from typing import Any

from cloud.adaptors import aws
from cloud.bootstrap import check_no_credentials, startup_script
from cloud.provider import (
    LAUNCHED_AT,
    NODE_LABEL,
    SUBNET,
    SWEEP_LABEL,
    TRIAL_LABEL,
    CapacityError,
    ClusterSpec,
    LaunchUndo,
    Node,
    NodeState,
    NotFoundError,
    PlannedRequest,
    Provider,
    ProviderError,
    ProviderEvent,
    cluster_name,
    fill,
    rendezvous_host,
    sent_values,
)

DEFAULT_AMI_PARAMETER = (
    "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
)
DEFAULT_REGION = "us-east-1"
NAME_PREFIX = "gpuadv-"
SPOT_INTERRUPTED = "Server.SpotInstanceTermination"
LIVE = ["pending", "running", "stopping", "stopped", "shutting-down"]
STATES = {
    "pending": NodeState.PENDING,
    "running": NodeState.RUNNING,
    "stopping": NodeState.STOPPING,
    "shutting-down": NodeState.STOPPING,
    "stopped": NodeState.TERMINATED,
    "terminated": NodeState.TERMINATED,
}


def instance_name(cluster: str, node: int) -> str:
    return f"{NAME_PREFIX}{cluster}-{node}"


def client_token(spec: ClusterSpec, node: int) -> str:
    """RunInstances' idempotency token: a request retried after its answer was lost returns
    the instance the first one made instead of a second one. The send time (a macro until
    then) makes each launch of a node, a replacement's too, a request of its own."""
    stem = hashlib.sha256(spec.cluster.encode()).hexdigest()[:16]
    return f"{stem}-{node}-{LAUNCHED_AT}"


def spec_region(spec: ClusterSpec) -> str | None:
    """The region a spec names, or its zones' region."""
    return spec.region or (spec.zones[0][:-1] if spec.zones else None)


class AwsProvider(Provider):
    """Clients are made for the region each call concerns: the spec's `region` (or its zones'),
    else the provider's, else the AWS configuration's."""

    name = "aws"

    def __init__(
        self,
        region: str | None = None,
        *,
        ec2=None,
        ssm=None,
        ami_parameter: str = DEFAULT_AMI_PARAMETER,
        instance_profile: str | None = None,
        install: str | None = None,
        clock=time.time,
    ):
        self.region = region
        self._given = {"ec2": ec2, "ssm": ssm}
        self._made: dict[tuple[str, str], Any] = {}
        self._session = None
        self._cluster_regions: dict[str, str] = {}  # cluster -> the region it was launched in
        self.ami_parameter, self.instance_profile = ami_parameter, instance_profile
        self._install, self._clock = install, clock
        self._reported: set[tuple[str, str]] = set()

    def _boto_session(self):
        if self._session is None:
            self._session = aws.session("EC2", self.region)
        return self._session

    def _region(self, spec: ClusterSpec | None = None) -> str:
        if spec is not None and spec_region(spec):
            return spec_region(spec)
        if self.region:
            return self.region
        given = self._given["ec2"]
        return getattr(getattr(given, "meta", None), "region_name", None) or \
            self._boto_session().region_name or DEFAULT_REGION

    def _client(self, service: str, region: str):
        """The client passed in if it serves `region`, else one made for it."""
        given = self._given[service]
        if given is not None and getattr(given.meta, "region_name", region) == region:
            return given
        if (service, region) not in self._made:
            self._made[service, region] = aws.make_client(service, region,
                                                          session=self._boto_session())
        return self._made[service, region]

    def _call(self, what: str, method, **kwargs) -> dict:
        """One EC2/SSM call, its errors translated by the adaptor."""
        with aws.errors(what):
            return method(**kwargs)

    # -- requests -------------------------------------------------------------------------

    def tags(self, spec: ClusterSpec, node: int) -> list[dict[str, str]]:
        labels = {"Name": instance_name(spec.cluster, node), **spec.labels(node)}
        check_no_credentials(repr(labels), "tags")
        return [{"Key": k, "Value": v} for k, v in labels.items()]

    def run_request(
        self, spec: ClusterSpec, node: int, image: str, subnet: str | None, rendezvous: str | None
    ) -> dict[str, Any]:
        """The RunInstances parameters of one node."""
        tags = self.tags(spec, node)
        script = startup_script(
            spec, node, provider=self.name, rendezvous_host=rendezvous,
            shutdown_after_s=spec.max_run_seconds, install=self._install,
        )
        request: dict[str, Any] = {
            "ImageId": image,
            "InstanceType": spec.instance_type,
            "MinCount": 1,
            "MaxCount": 1,
            "UserData": script,
            "InstanceInitiatedShutdownBehavior": "terminate",  # the shutdown timer deletes it
            "TagSpecifications": [
                {"ResourceType": "instance", "Tags": tags},
                {"ResourceType": "volume", "Tags": tags},
            ],
            "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},  # IMDSv2
            "BlockDeviceMappings": [{
                "DeviceName": "/dev/sda1",
                "Ebs": {"VolumeSize": 100, "VolumeType": "gp3", "DeleteOnTermination": True},
            }],
        }
        if subnet:
            request["SubnetId"] = subnet
        if spec.spot:
            request["InstanceMarketOptions"] = {
                "MarketType": "spot",
                "SpotOptions": {
                    "SpotInstanceType": "one-time",
                    "InstanceInterruptionBehavior": "terminate",
                },
            }
        if self.instance_profile:
            request["IamInstanceProfile"] = {"Name": self.instance_profile}
        request["ClientToken"] = client_token(spec, node)
        return request

    def plan(self, spec: ClusterSpec) -> list[PlannedRequest]:
        """The image is a macro `${ssm:PARAMETER}` until the launch reads that parameter."""
        return self._requests(spec, spec.image or f"${{ssm:{self.ami_parameter}}}", SUBNET, {})

    def _requests(self, spec: ClusterSpec, image: str, subnet: str | None,
                  existing: dict[int, Node]) -> list[PlannedRequest]:
        """The RunInstances calls that complete the cluster, node 0 first."""
        where = {"region": spec_region(spec) or self.region or DEFAULT_REGION,
                 "zones": list(spec.zones) or ["<each zone with a default subnet>"]}
        return [PlannedRequest(self.name, "ec2.RunInstances", index, self.run_request(
                    spec, index, image, subnet, rendezvous_host(index, existing)), where)
                for index in range(spec.nodes) if index not in existing]

    # -- launch ---------------------------------------------------------------------------

    def _image(self, spec: ClusterSpec) -> str:
        if spec.image:
            return spec.image
        ssm = self._client("ssm", self._region(spec))
        found = self._call("ssm.GetParameter", ssm.get_parameter, Name=self.ami_parameter)
        return found["Parameter"]["Value"]

    def _subnets(self, spec: ClusterSpec) -> list[tuple[str, str]]:
        """(zone, subnet) pairs to try in order: the default subnet of each zone."""
        ec2 = self._client("ec2", self._region(spec))
        filters = [{"Name": "default-for-az", "Values": ["true"]}]
        if spec.zones:
            filters.append({"Name": "availability-zone", "Values": list(spec.zones)})
        found = self._call("ec2.DescribeSubnets", ec2.describe_subnets, Filters=filters)
        by_zone = {s["AvailabilityZone"]: s["SubnetId"] for s in found["Subnets"]}
        order = list(spec.zones) or sorted(by_zone)
        missing = [z for z in order if z not in by_zone]
        if missing or not by_zone:
            raise ProviderError(
                f"no default subnet in {', '.join(missing) or 'the region'}; create one with "
                "`aws ec2 create-default-subnet --availability-zone ZONE` or list other zones"
            )
        return [(zone, by_zone[zone]) for zone in order]

    def launch(self, spec: ClusterSpec) -> list[Node]:
        region = self._cluster_regions[spec.cluster] = self._region(spec)
        existing = {n.index: n for n in self._cluster_nodes(spec.cluster, region, live_only=True)}
        image = self._image(spec)
        subnets = self._subnets(spec)
        if existing:  # idempotent: complete the cluster where it already lives
            zone = next(iter(existing.values())).zone
            subnets = [(z, s) for z, s in subnets if z == zone] or [(zone, None)]
        survivors = [n.id for n in existing.values()]
        with LaunchUndo(self, lambda: self._cluster_nodes(spec.cluster, region, live_only=True),
                        keep=survivors) as undo:
            return self._launch_in(spec, image, subnets, existing, undo)

    def _launch_in(self, spec, image, subnets, existing: dict[int, Node], undo: LaunchUndo
                   ) -> list[Node]:
        """Send the cluster's requests in each zone in turn until one has the capacity; any
        other error ends the launch (`undo` terminates what it made)."""
        stockouts, ec2 = [], self._client("ec2", self._cluster_regions[spec.cluster])
        deadline_s = aws.SETTINGS.launch_deadline_s
        give_up = time.monotonic() + deadline_s
        for zone, subnet in subnets:
            nodes = dict(existing)
            try:
                for request in self._requests(spec, image, subnet, existing):
                    if undo.sent and time.monotonic() > give_up:
                        raise ProviderError(
                            f"launching {spec.nodes} x {spec.instance_type} took over "
                            f"{deadline_s:g}s (EC2 answers slowly or not at all); re-run later")
                    undo.sending()
                    nodes[request.node] = self._run(request, nodes, ec2)
                    undo.made(nodes[request.node])
                return [nodes[i] for i in range(spec.nodes)]
            except CapacityError as exc:
                stockouts.append(f"{zone} ({exc})")
                new = [n for i, n in nodes.items() if i not in existing]
                self.terminate(new)
                undo.forget(new)
        raise CapacityError(
            f"no capacity for {spec.nodes} x {spec.instance_type} in {'; '.join(stockouts)}; "
            "add zones to the spec or try another instance type"
        )

    def _run(self, request: PlannedRequest, nodes: dict[int, Node], ec2) -> Node:
        launched_at = self._clock()
        params = fill(request.body, sent_values(launched_at, nodes))
        found = self._call("ec2.RunInstances", ec2.run_instances, **params)["Instances"][0]
        return self._node(found, launched_at)

    def _node(self, instance: dict, launched_at: float | None = None) -> Node:
        tags = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
        zone = instance.get("Placement", {}).get("AvailabilityZone")
        return Node(
            provider=self.name,
            cluster=cluster_name(tags.get(SWEEP_LABEL, ""), tags.get(TRIAL_LABEL, "")),
            index=int(tags.get(NODE_LABEL, 0)),
            id=instance["InstanceId"],
            region=zone[:-1] if zone else None,
            zone=zone,
            internal_address=instance.get("PrivateIpAddress"),
            spot=instance.get("InstanceLifecycle") == "spot",
            launched_at=launched_at or instance["LaunchTime"].timestamp(),
            labels=tags,
        )

    # -- observe --------------------------------------------------------------------------

    def _describe(self, filters: list[dict], region: str) -> list[dict]:
        ec2 = self._client("ec2", region)

        def every_page() -> list[dict]:  # paginator errors surface while iterating
            pages = ec2.get_paginator("describe_instances").paginate(Filters=filters)
            return [i for page in pages for r in page["Reservations"] for i in r["Instances"]]

        return self._call("ec2.DescribeInstances", every_page)

    def _cluster_instances(self, cluster: str, region: str | None = None,
                           live_only: bool = False) -> list[dict]:
        filters = [{"Name": "tag:Name", "Values": [instance_name(cluster, 0)[:-1] + "*"]}]
        if live_only:
            filters.append({"Name": "instance-state-name", "Values": LIVE[:2]})
        pattern = re.compile(re.escape(instance_name(cluster, 0)[:-1]) + r"\d+")
        region = region or self._cluster_regions.get(cluster) or self._region()
        return [i for i in self._describe(filters, region) if any(
            t["Key"] == "Name" and pattern.fullmatch(t["Value"]) for t in i.get("Tags", []))]

    def _cluster_nodes(self, cluster: str, region: str, live_only: bool = False) -> list[Node]:
        return [self._node(i) for i in self._cluster_instances(cluster, region, live_only)]

    def list(self, cluster: str) -> dict[str, NodeState]:
        return {i["InstanceId"]: _state(i) for i in self._cluster_instances(cluster)}

    def poll_events(self, cluster: str) -> list[ProviderEvent]:
        now, events = self._clock(), []
        for instance in self._cluster_instances(cluster):
            node, state = instance["InstanceId"], _state(instance)
            kind = {NodeState.RUNNING: "running", NodeState.PREEMPTED: "preempted",
                    NodeState.TERMINATED: "terminated"}.get(state)
            if kind is None or (node, kind) in self._reported:
                continue
            self._reported.add((node, kind))
            detail: dict[str, Any] = {"launch_time": instance["LaunchTime"].timestamp()}
            if kind == "preempted":
                detail.update(cause="interruption", notice_s=120.0)
            events.append(ProviderEvent(node, kind, now, detail))
        return events

    # -- end ------------------------------------------------------------------------------

    def terminate(self, nodes: list[Node]) -> None:
        regions: dict[str, set[str]] = {}
        for node in nodes:
            regions.setdefault(node.region or self._region(), set()).add(node.id)
        for region, ids in sorted(regions.items()):
            self._terminate(sorted(ids), self._client("ec2", region))

    def _terminate(self, ids: list[str], ec2) -> None:
        try:
            self._call("ec2.TerminateInstances", ec2.terminate_instances, InstanceIds=ids)
        except NotFoundError:
            for one in ids:  # one id is unknown (gone long ago): terminate the rest singly
                try:
                    self._call("ec2.TerminateInstances", ec2.terminate_instances, InstanceIds=[one])
                except NotFoundError:
                    pass

    def revoke(self, node: Node) -> None:
        """EC2 offers no interruption API outside AWS FIS: the node is terminated at once,
        an interruption without the 2-minute notice."""
        self.terminate([node])

    def leftovers(self, older_than_s: float | None = None) -> list[Node]:
        now = self._clock()
        filters = [{"Name": "tag-key", "Values": [SWEEP_LABEL]},
                   {"Name": "instance-state-name", "Values": LIVE}]
        return [self._node(i) for i in self._describe(filters, self._region())
                if older_than_s is None or now - i["LaunchTime"].timestamp() >= older_than_s]


def _state(instance: dict) -> NodeState:
    name = instance["State"]["Name"]
    if name in ("terminated", "shutting-down") and \
            instance.get("StateReason", {}).get("Code") == SPOT_INTERRUPTED:
        return NodeState.PREEMPTED
    return STATES.get(name, NodeState.PENDING)
