"""The google-cloud adaptor (google-cloud-compute, google-cloud-storage, google-auth): the
one place that imports them, finds the credentials, makes the clients, translates the
errors, holds the retry and timeout settings every call carries (`call_options()`: an
api_core Retry with a deadline, and a timeout), and the gs:// bucket client and the JSON GET
of the billing API."""

from __future__ import annotations

import json
import re
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import ModuleType

from cloud.adaptors import load, translated
from cloud.provider import (
    CapacityError,
    ConflictError,
    CredentialsError,
    NotFoundError,
    ProviderError,
    QuotaError,
    SinkError,
)

EXTRA = "gcp"
STOCKOUT_CODES = ("ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS")
# Operation error codes that mean what an HTTP status means, for one translation of both.
OPERATION_STATUS = {"RESOURCE_NOT_FOUND": 404, "RESOURCE_ALREADY_EXISTS": 409}


@dataclass
class Settings:
    """How long GCP calls may take; tests shorten them (monkeypatch SETTINGS)."""

    call_timeout_s: float = 60.0  # one HTTP request
    # A call and its retries of transient errors (429, 500, 503, no connection) together;
    # the pauses start at retry_first_s and double up to retry_max_s.
    retry_deadline_s: float = 120.0
    retry_first_s: float = 1.0
    retry_max_s: float = 10.0
    # One `operations.wait` request: the server answers within 2 minutes, done or not.
    wait_timeout_s: float = 150.0
    # An operation (insert, delete, maintenance event) from its start to DONE.
    operation_deadline_s: float = 900.0


SETTINGS = Settings()
LOGIN = ("run `gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS "
         "to a service-account key file (a node uses its service account)")


def sdk(module: str) -> ModuleType:
    """A google-cloud module, imported on first use."""
    return load(module, EXTRA)


def compute() -> ModuleType:
    """google.cloud.compute_v1."""
    return sdk("google.cloud.compute_v1")


def retry():
    """api_core's Retry of transient errors, with the deadline of SETTINGS."""
    retries = sdk("google.api_core.retry")
    return retries.Retry(predicate=retries.if_transient_error, initial=SETTINGS.retry_first_s,
                         maximum=SETTINGS.retry_max_s, multiplier=2.0,
                         timeout=SETTINGS.retry_deadline_s)


def call_options(timeout_s: float | None = None) -> dict:
    """The `retry` and `timeout` keywords every Compute and Storage call takes."""
    return {"retry": retry(), "timeout": timeout_s or SETTINGS.call_timeout_s}


def instance(body: dict):
    """A compute_v1.Instance from the dict of the REST request (cloud/gcp.py plans dicts, so
    that a dry run needs no SDK)."""
    return compute().Instance.from_json(json.dumps(body))


def credentials(what: str, scopes: list[str] | None = None):
    """(credentials, their default project or None): Application Default Credentials."""
    auth = sdk("google.auth")
    with errors(what):
        return auth.default(scopes=scopes)


def compute_clients():
    """(InstancesClient, ZoneOperationsClient, the credentials' default project)."""
    found, project = credentials("Compute Engine")
    compute_v1 = compute()
    return (compute_v1.InstancesClient(credentials=found),
            compute_v1.ZoneOperationsClient(credentials=found), project)


def authorized_session(what: str, scopes: list[str]):
    """A requests session that carries Application Default Credentials."""
    found, _ = credentials(what, scopes)
    return sdk("google.auth.transport.requests").AuthorizedSession(found)


def get_json(session, url: str, params: dict, what: str) -> dict:
    """One GET of a Google JSON API, retried and translated as an SDK call is (an error
    status becomes the api_core exception of that status)."""

    def once() -> dict:
        response = session.get(url, params=params, timeout=SETTINGS.call_timeout_s)
        if response.status_code != 200:
            raise sdk("google.api_core.exceptions").from_http_status(
                response.status_code, _error_message(response))
        return response.json()

    with errors(what):
        return retry()(once)()


def _error_message(response) -> str:
    try:
        return response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return response.text[:200]


def errors(what: str, **context) -> AbstractContextManager[None]:
    """Turn an SDK error raised inside into translate()'s ProviderError."""
    return translated(_sdk_errors, translate, what, **context)


def _sdk_errors() -> tuple[type[Exception], ...]:
    return (sdk("google.api_core.exceptions").GoogleAPIError,
            sdk("google.auth.exceptions").GoogleAuthError, sdk("requests").RequestException)


def translate(exc: Exception, what: str, *, missing: str | None = None,
              kind: type[ProviderError] | None = None) -> ProviderError:
    """One line for an SDK error: `what` failed, why, and the fix. `missing` says what to do
    when the thing is not found; `kind` replaces the error class (SinkError for a bucket)."""
    api, auth = sdk("google.api_core.exceptions"), sdk("google.auth.exceptions")
    if isinstance(exc, api.RetryError) and exc.cause is not None:
        last = translate(exc.cause, what, missing=missing, kind=kind)
        return type(last)(f"{last} (still so after {SETTINGS.retry_deadline_s:g}s of retries)")
    if isinstance(exc, auth.DefaultCredentialsError):
        error, text = CredentialsError, f"no Google credentials found for {what}; {LOGIN}"
    elif isinstance(exc, auth.RefreshError) or getattr(exc, "code", None) == 401:
        error, text = CredentialsError, f"{what}: Google refused the credentials ({exc}); {LOGIN}"
    elif isinstance(exc, api.GoogleAPICallError):
        # REST clients put "GET https://...: " before the server's message: `what` says it.
        error, text = _explain(exc.code, re.sub(r"^[A-Z]+ https?://\S+: ", "", exc.message),
                               what, missing)
    else:  # no answer: connection refused, DNS, TLS
        error, text = ProviderError, f"cannot reach {what}: {exc}; check the network and re-run"
    return (kind or error)(text)


def operation_error(operation, what: str) -> ProviderError | None:
    """The error a finished Compute operation ended with (None if it succeeded), translated
    as translate() does."""
    if not operation.error:
        return None
    codes = [e.code for e in operation.error.errors]
    status = next((OPERATION_STATUS[c] for c in codes if c in OPERATION_STATUS), None)
    message = "; ".join(e.message for e in operation.error.errors)
    error, text = _explain(status, f"{', '.join(codes)}: {message}", what, None)
    return error(text)


def _explain(code: int | None, message: str, what: str, missing: str | None):
    if any(c in message for c in STOCKOUT_CODES):
        return CapacityError, f"{what} is out of stock"
    if "QUOTA" in message.upper():
        return QuotaError, (f"{what}: {message}; request a quota increase in the GCP console "
                            "(IAM & Admin > Quotas)")
    if code == 403:
        return CredentialsError, (f"{what}: HTTP 403: {message}; enable the API and grant the "
                                  "account the IAM role it needs, or use other credentials")
    if code == 404:
        return NotFoundError, f"{what}: {missing or f'not found ({message})'}"
    if code == 409:
        return ConflictError, f"{what}: exists already ({message})"
    return ProviderError, f"{what}: " + (f"HTTP {code}: " if code else "") + message


class GcsBucket:
    """The three calls a gs:// sink makes on its bucket: put, list a prefix, get."""

    def __init__(self, name: str, client=None):
        self.name, self.url = name, f"gs://{name}"
        with self._errors():
            # A bucket call needs no project: None spares the lookup of a default one.
            self._client = client or sdk("google.cloud.storage").Client(project=None)
        self._bucket = self._client.bucket(name)

    def _errors(self):
        return errors(self.url, kind=SinkError, missing="no such bucket; create it with "
                      f"`gcloud storage buckets create {self.url}`")

    def put(self, key: str, data: bytes) -> None:
        with self._errors():
            # Keys are never reused, so a retried upload rewrites the same bytes.
            self._bucket.blob(key).upload_from_string(
                data, content_type="application/x-ndjson", **call_options())

    def keys(self, prefix: str) -> list[str]:
        with self._errors():
            blobs = self._client.list_blobs(self.name, prefix=prefix, **call_options())
            return [b.name for b in blobs]

    def get(self, key: str) -> bytes:
        with self._errors():
            return self._bucket.blob(key).download_as_bytes(**call_options())
