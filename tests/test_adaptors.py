"""The cloud SDK adaptors: one install hint each, and one translation of SDK errors into
one-line ProviderErrors that name the fix."""

from __future__ import annotations

import pytest

from cloud.adaptors import load
from cloud.provider import (
    CapacityError,
    ConflictError,
    CredentialsError,
    NotFoundError,
    ProviderError,
    QuotaError,
    SinkError,
)


def test_a_missing_sdk_names_the_extra_to_install():
    with pytest.raises(ProviderError, match=r"^no_such_sdk is not installed; "
                                            r"pip install 'gpu-advisor\[gcp\]'$"):
        load("no_such_sdk", "gcp")


@pytest.mark.parametrize("status, message, error, expected", [
    (403, "Quota 'NVIDIA_T4_GPUS' exceeded.", QuotaError, "request a quota increase"),
    (400, "ZONE_RESOURCE_POOL_EXHAUSTED: no T4", CapacityError, "us-central1-a is out of stock"),
    (403, "Compute Engine API has not been used", CredentialsError, "enable the API"),
    (401, "Request had invalid authentication credentials", CredentialsError,
     "gcloud auth application-default login"),
    (404, "The resource was not found", NotFoundError, "not found"),
    (409, "The resource already exists", ConflictError, "exists already"),
    (500, "Internal error", ProviderError, "HTTP 500: Internal error"),
])
def test_gcp_errors_translate_by_status(status, message, error, expected):
    pytest.importorskip("google.api_core")
    from google.api_core import exceptions

    from cloud.adaptors import gcp

    with pytest.raises(error, match=expected) as raised:
        with gcp.errors("us-central1-a"):
            raise exceptions.from_http_status(status, message)
    assert type(raised.value) is error and "\n" not in str(raised.value)


def test_gcp_unreachable_and_sink_errors():
    pytest.importorskip("google.api_core")
    import requests

    from cloud.adaptors import gcp

    with pytest.raises(ProviderError, match="cannot reach the API: .*check the network"):
        with gcp.errors("the API"):
            raise requests.ConnectionError("connection refused")
    with pytest.raises(SinkError, match="create it"):
        with gcp.errors("gs://b", kind=SinkError, missing="no such bucket; create it"):
            raise gcp.sdk("google.api_core.exceptions").NotFound("no bucket")
    with pytest.raises(KeyError):  # not an SDK error: passes through untouched
        with gcp.errors("the API"):
            raise KeyError("x")


@pytest.mark.parametrize("code, error, expected", [
    ("InsufficientInstanceCapacity", CapacityError, "InsufficientInstanceCapacity: no room"),
    ("VcpuLimitExceeded", QuotaError, "request a limit increase"),
    ("AuthFailure", CredentialsError, "AWS refused the credentials for ec2.RunInstances"),
    ("UnauthorizedOperation", CredentialsError, "grant the IAM permission"),
    ("InvalidInstanceID.NotFound", NotFoundError, "InvalidInstanceID.NotFound"),
    ("InternalError", ProviderError, "ec2.RunInstances failed: InternalError: no room"),
])
def test_aws_errors_translate_by_code(code, error, expected):
    pytest.importorskip("botocore")
    from botocore.exceptions import ClientError

    from cloud.adaptors import aws

    with pytest.raises(error, match=expected) as raised:
        with aws.errors("ec2.RunInstances"):
            raise ClientError({"Error": {"Code": code, "Message": "no room"}}, "RunInstances")
    assert type(raised.value) is error


def test_aws_missing_credentials():
    pytest.importorskip("botocore")
    from botocore.exceptions import NoCredentialsError

    from cloud.adaptors import aws

    with pytest.raises(CredentialsError, match="^no AWS credentials found for s3://b; run "
                                               "`aws configure`"):
        with aws.errors("s3://b"):
            raise NoCredentialsError()


def test_gcp_calls_carry_a_retry_with_a_deadline_and_a_timeout():
    pytest.importorskip("google.api_core")
    from cloud.adaptors import gcp

    options = gcp.call_options()
    assert options["timeout"] == gcp.SETTINGS.call_timeout_s == 60.0
    assert options["retry"].timeout == gcp.SETTINGS.retry_deadline_s == 120.0
    assert gcp.call_options(150.0)["timeout"] == 150.0


def test_aws_clients_retry_adaptively_within_timeouts(monkeypatch):
    pytest.importorskip("botocore")
    from cloud.adaptors import aws

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    config = aws.make_client("s3").meta.config
    assert config.retries == {"mode": "adaptive", "total_max_attempts": 9}  # 8 retries
    assert (config.connect_timeout, config.read_timeout) == (10.0, 60.0)
