"""moto's server (EC2, SSM, S3) as a subprocess on a free local port, and boto3 clients for it.

Import `moto_endpoint` and `aws` into a test module to use them: the server lives for the
module, its state is reset before each test.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REGION = "us-east-1"
# moto reserves /aws/service/* for its own parameters: the tests publish the DLAMI id under
# their own name and point the provider at it (the lookup code is the same).
AMI_PARAMETER = "/gpuadvisor-test/deeplearning/ami-id"
FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                    "AWS_DEFAULT_REGION": REGION}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_moto() -> tuple[subprocess.Popen, str]:
    port = _free_port()
    server = Path(sys.executable).with_name("moto_server")
    command = [str(server)] if server.exists() else [sys.executable, "-m", "moto.server"]
    process = subprocess.Popen([*command, "-H", "127.0.0.1", "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(endpoint + "/moto-api/", timeout=1)
            return process, endpoint
        except OSError:
            if process.poll() is not None:
                break
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("moto_server did not start")


@pytest.fixture(scope="module")
def moto_endpoint():
    pytest.importorskip("moto.server")
    process, endpoint = start_moto()
    try:
        yield endpoint
    finally:
        process.terminate()
        process.wait(timeout=10)


def reset(endpoint: str) -> None:
    urllib.request.urlopen(urllib.request.Request(endpoint + "/moto-api/reset", method="POST"))


def client(endpoint: str, service: str, region: str = REGION):
    import boto3

    return boto3.client(service, region_name=region, endpoint_url=endpoint,
                        aws_access_key_id="testing", aws_secret_access_key="testing")


@pytest.fixture
def aws(moto_endpoint, monkeypatch):
    """Fresh moto state, fake credentials in the environment and the DLAMI SSM parameter."""
    reset(moto_endpoint)
    for key, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    ssm = client(moto_endpoint, "ssm")
    ec2 = client(moto_endpoint, "ec2")
    image = ec2.register_image(Name="Deep Learning Base OSS Nvidia Driver GPU AMI (test)",
                               RootDeviceName="/dev/sda1")["ImageId"]
    ssm.put_parameter(Name=AMI_PARAMETER, Value=image, Type="String")
    return {"endpoint": moto_endpoint, "ec2": ec2, "ssm": ssm, "image": image}


def aws_provider(aws: dict, **options):
    from cloud.aws import AwsProvider

    return AwsProvider(REGION, ec2=aws["ec2"], ssm=aws["ssm"], ami_parameter=AMI_PARAMETER,
                       **options)


def inject_stockout(ec2, subnets: set[str], allow: int = 0) -> None:
    """Make RunInstances in these subnets fail as EC2 does when a zone has no capacity
    (after `allow` successful launches in each): the client's before-call hook answers in
    place of the server."""
    from botocore.awsrequest import AWSResponse

    launched: dict[str, int] = {}

    def answer(params, **_):
        subnet = params["body"].get("SubnetId")
        launched[subnet] = launched.get(subnet, 0) + 1
        if subnet in subnets and launched[subnet] > allow:
            response = AWSResponse("https://ec2", 500, {}, None)
            error = {"Code": "InsufficientInstanceCapacity",
                     "Message": "We currently do not have sufficient g4dn.xlarge capacity in the "
                                "Availability Zone you requested."}
            return response, {"Error": error, "ResponseMetadata": {"HTTPStatusCode": 500}}
        return None

    ec2.meta.events.register("before-call.ec2.RunInstances", answer)


def without_aws_credentials(monkeypatch, tmp_path) -> None:
    """An environment in which boto3's credential chain finds nothing."""
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def write_spec(tmp_path, image: str, region: str = "us-east-1", nodes: str = "[1, 2]",
               extra: str = "", instance: str = "g4dn.xlarge") -> str:
    """An AWS sweep spec whose nodes never report (moto's instances run nothing)."""
    path = tmp_path / "aws.yaml"
    path.write_text(f"""
name: silent-nodes
provider: aws
models: [resnet18]
nodes: {nodes}
batch_per_gpu: 16
instance_types: [{instance}]
gpus_per_node: 1
region: {region}
zones: [{region}a, {region}b]
spot: true
image: {image}
startup_timeout: 2
max_seconds: 5
results: s3://results/runs
{extra}""")
    return str(path)


def sweep(tmp_path, spec: str, *options: str):
    """`profiler sweep SPEC --store tmp_path/runs.db OPTIONS` in this process."""
    from typer.testing import CliRunner

    from profiler.cli import COMMAND_MODULES, app

    for name in COMMAND_MODULES:
        __import__(f"profiler.cli.{name}")
    return CliRunner().invoke(app, ["sweep", spec, "--store", str(tmp_path / "runs.db"),
                                    *options])
