"""Contract target: AwsProvider against moto's server (one server for the whole run,
its state reset for every test)."""

import atexit
from contextlib import contextmanager

import pytest

from cloud.provider import ClusterSpec

_SERVER: dict[str, str] = {}


def _endpoint() -> str:
    from fakes.aws import start_moto

    if "endpoint" not in _SERVER:
        process, _SERVER["endpoint"] = start_moto()
        atexit.register(process.terminate)
    return _SERVER["endpoint"]


@contextmanager
def make_target(request, tmp_path):
    pytest.importorskip("moto.server")
    from fakes.aws import FAKE_CREDENTIALS, aws_provider, client, reset

    endpoint = _endpoint()
    reset(endpoint)
    monkeypatch = pytest.MonkeyPatch()
    for key, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    ec2 = client(endpoint, "ec2")
    image = ec2.register_image(Name="dlami-test", RootDeviceName="/dev/sda1")["ImageId"]

    def cluster_spec(trial: str, nodes: int, **fields) -> ClusterSpec:
        return ClusterSpec(sweep="contract", trial=trial, nodes=nodes,
                           instance_type="g4dn.xlarge", image=image, zones=("us-east-1a",),
                           **fields)

    try:
        yield {"provider": aws_provider({"ec2": ec2, "ssm": client(endpoint, "ssm")}),
               "cluster_spec": cluster_spec, "wait_s": 5.0}
    finally:
        monkeypatch.undo()
