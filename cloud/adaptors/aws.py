"""The boto3 adaptor: the one place that imports boto3/botocore, finds the credentials, makes
the clients with the retry and timeout settings (botocore's adaptive retry mode: throttling
and 5xx answers are retried with backoff under a client-side rate limit), translates the
errors, and holds the s3:// bucket client."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import ModuleType

from cloud.adaptors import load, translated
from cloud.provider import (
    CapacityError,
    CredentialsError,
    NotFoundError,
    ProviderError,
    QuotaError,
    SinkError,
)

EXTRA = "aws"


@dataclass
class Settings:
    """What every client the adaptor makes carries; tests may change it (monkeypatch)."""

    max_attempts: int = 8  # retries after the first try (botocore's Config meaning)
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 60.0
    # A cluster's launch, all its RunInstances together: past it, no further node is asked
    # for and the ones made are terminated (each call is bounded by the settings above).
    launch_deadline_s: float = 900.0


SETTINGS = Settings()
LOGIN = ("run `aws configure` (or `aws sso login`), or set AWS_PROFILE / AWS_ACCESS_KEY_ID "
         "and AWS_SECRET_ACCESS_KEY (a node uses its instance profile)")
CAPACITY_CODES = {"InsufficientInstanceCapacity", "InsufficientCapacity", "Unsupported"}
QUOTA_CODES = {"VcpuLimitExceeded", "InstanceLimitExceeded", "MaxSpotInstanceCountExceeded"}
AUTH_CODES = {"AuthFailure", "InvalidClientTokenId", "ExpiredToken", "SignatureDoesNotMatch",
              "UnrecognizedClientException"}
DENIED_CODES = {"UnauthorizedOperation", "AccessDenied", "AccessDeniedException"}


def sdk(module: str) -> ModuleType:
    """A boto3/botocore module, imported on first use."""
    return load(module, EXTRA)


def session(what: str, region: str | None = None):
    """A boto3 session with credentials from the usual chain (AWS_PROFILE, ...)."""
    found = sdk("boto3").session.Session(region_name=region)
    if found.get_credentials() is None:
        raise CredentialsError(f"no AWS credentials found for {what}; {LOGIN}")
    return found


def make_client(service: str, region: str | None = None, *, session=None, **config):
    """A client of `service` (from `session`, or boto3's default chain) with the retry and
    timeout settings; `config` adds botocore Config settings."""
    session = session or sdk("boto3").session.Session()
    config = sdk("botocore.config").Config(
        retries={"mode": "adaptive", "max_attempts": SETTINGS.max_attempts},
        connect_timeout=SETTINGS.connect_timeout_s, read_timeout=SETTINGS.read_timeout_s,
        **config)
    return session.client(service, region_name=region, config=config)


def errors(what: str, **context) -> AbstractContextManager[None]:
    """Turn an SDK error raised inside into translate()'s ProviderError."""
    return translated(_sdk_errors, translate, what, **context)


def _sdk_errors() -> tuple[type[Exception], ...]:
    botocore = sdk("botocore.exceptions")
    return botocore.BotoCoreError, botocore.ClientError


def translate(exc: Exception, what: str, *, missing: str | None = None,
              kind: type[ProviderError] | None = None) -> ProviderError:
    """One line for an SDK error: `what` failed, why, and the fix. `missing` says what to do
    when the thing is not found; `kind` replaces the error class (SinkError for a bucket)."""
    botocore = sdk("botocore.exceptions")
    if isinstance(exc, (botocore.NoCredentialsError, botocore.PartialCredentialsError)):
        error, text = CredentialsError, f"no AWS credentials found for {what}; {LOGIN}"
    elif isinstance(exc, botocore.ClientError):
        error, text = _explain(exc.response.get("Error", {}), what, missing)
    else:  # no answer: endpoint unreachable, connection or read timeout
        error, text = ProviderError, f"{what} failed: {exc}; check the network and re-run"
    return (kind or error)(text)


def _explain(info: dict, what: str, missing: str | None):
    code, message = info.get("Code", ""), info.get("Message", "")
    if code in CAPACITY_CODES:
        return CapacityError, f"{code}: {message}"
    if code in QUOTA_CODES:
        return QuotaError, (f"{what}: {code}: {message}; request a limit increase in Service "
                            "Quotas (EC2)")
    if code in AUTH_CODES:
        return CredentialsError, f"AWS refused the credentials for {what}: {message}; {LOGIN}"
    if code in DENIED_CODES:
        return CredentialsError, (f"{what}: {code}: {message}; grant the IAM permission it "
                                  "names, or use other credentials")
    if code.endswith(".NotFound") or code.startswith("NoSuch") or code == "ParameterNotFound":
        return NotFoundError, f"{what}: {missing or f'{code}: {message}'}"
    return ProviderError, f"{what} failed: {code}: {message}"


class S3Bucket:
    """The three calls an s3:// sink makes on its bucket: put, list a prefix, get."""

    def __init__(self, name: str, client=None):
        self.name, self.url = name, f"s3://{name}"
        self._client = client or make_client("s3")

    def _errors(self):
        return errors(self.url, kind=SinkError,
                      missing=f"no such bucket; create it with `aws s3 mb {self.url}`")

    def put(self, key: str, data: bytes) -> None:
        with self._errors():
            self._client.put_object(Bucket=self.name, Key=key, Body=data,
                                    ContentType="application/x-ndjson")

    def keys(self, prefix: str) -> list[str]:
        with self._errors():
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.name, Prefix=prefix)
            return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def get(self, key: str) -> bytes:
        with self._errors():
            return self._client.get_object(Bucket=self.name, Key=key)["Body"].read()
