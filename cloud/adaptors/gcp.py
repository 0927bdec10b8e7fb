"""The google-cloud adaptor (google-cloud-compute, google-cloud-storage, google-auth): the
one place that imports them, translates their errors and holds the gs:// bucket client."""

from __future__ import annotations

from contextlib import AbstractContextManager
from types import ModuleType

from cloud.adaptors import load, translated
from cloud.provider import CapacityError, CredentialsError, ProviderError, QuotaError, SinkError

EXTRA = "gcp"
STOCKOUT_CODES = ("ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS")
LOGIN = ("run `gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS "
         "to a service-account key file (a node uses its service account)")


def sdk(module: str) -> ModuleType:
    """A google-cloud module, imported on first use."""
    return load(module, EXTRA)


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
    if isinstance(exc, auth.DefaultCredentialsError):
        error, text = CredentialsError, f"no Google credentials found for {what}; {LOGIN}"
    elif isinstance(exc, auth.RefreshError) or getattr(exc, "code", None) == 401:
        error, text = CredentialsError, f"{what}: Google refused the credentials ({exc}); {LOGIN}"
    elif isinstance(exc, api.GoogleAPICallError):
        error, text = _explain(exc.code, exc.message, what, missing)
    else:  # no answer: connection refused, DNS, TLS
        error, text = ProviderError, f"cannot reach {what}: {exc}; check the network and re-run"
    return (kind or error)(text)


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
        return ProviderError, f"{what}: {missing or f'not found ({message})'}"
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
            self._bucket.blob(key).upload_from_string(data, content_type="application/x-ndjson")

    def keys(self, prefix: str) -> list[str]:
        with self._errors():
            return [b.name for b in self._client.list_blobs(self.name, prefix=prefix)]

    def get(self, key: str) -> bytes:
        with self._errors():
            return self._bucket.blob(key).download_as_bytes()
