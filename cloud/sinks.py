"""Record sinks in object storage: `gs://BUCKET/PREFIX` (google-cloud-storage) and
`s3://BUCKET/PREFIX` (boto3), with the interface of profiler/sink.py.

Objects cannot be appended to, so every append is one object, a batch of JSON lines, under
PREFIX/<cluster>/node-<i>/; it is written at once, so a record survives the revocation of
the node that wrote it. `read_all` lists the cluster's prefix and merges every object; objects
never change, so each is downloaded only once per sink. Nodes reach the bucket with their
instance identity (GCP service account, EC2 instance profile), never with keys.
"""

from __future__ import annotations

import itertools
import os
import time
from urllib.parse import urlparse

from profiler.records import dumps, parse_lines
from profiler.sink import SinkError


class ObjectSink:
    """What both sinks share; a subclass provides _put, _keys and _get."""

    scheme = ""

    def __init__(self, url: str, cluster: str):
        parsed = urlparse(url)
        if parsed.scheme != self.scheme or not parsed.netloc:
            raise SinkError(f"{url}: expected {self.scheme}://BUCKET/PREFIX")
        self.url, self.bucket = url, parsed.netloc
        prefix = parsed.path.strip("/")
        self.prefix = f"{prefix}/{cluster}/" if prefix else f"{cluster}/"
        self._seq = itertools.count()
        self._cache: dict[str, list[dict]] = {}

    def _key(self, node: int) -> str:
        # Time first, so a listing comes back roughly in write order; pid + counter: unique.
        return f"{self.prefix}node-{int(node)}/{time.time_ns():020d}-{os.getpid()}-{next(self._seq)}.jsonl"

    def append(self, record: dict) -> None:
        self.append_batch([record])

    def append_batch(self, records: list[dict]) -> None:
        """One object for records of one node."""
        if records:
            self._put(self._key(records[0]["node"]), "".join(dumps(r) for r in records).encode())

    def read_all(self) -> list[dict]:
        for key in self._keys(self.prefix):
            if key not in self._cache and key.endswith(".jsonl"):
                text = self._get(key).decode("utf-8")
                self._cache[key] = list(parse_lines(text.splitlines(keepends=True), self._where(key)))
        return sorted((r for rs in self._cache.values() for r in rs), key=lambda r: r["t"])

    def _where(self, key: str) -> str:
        return f"{self.scheme}://{self.bucket}/{key}"

    def close(self) -> None:
        pass  # nothing is held open between calls

    def _put(self, key: str, data: bytes) -> None:
        raise NotImplementedError

    def _keys(self, prefix: str) -> list[str]:
        raise NotImplementedError

    def _get(self, key: str) -> bytes:
        raise NotImplementedError


class GcsSink(ObjectSink):
    scheme = "gs"

    def __init__(self, url: str, cluster: str, *, client=None):
        super().__init__(url, cluster)
        if client is None:
            try:
                from google.cloud import storage
                from google.auth.exceptions import DefaultCredentialsError
            except ImportError:
                raise SinkError(f"{url}: gs:// needs google-cloud-storage; pip install "
                                "'gpu-advisor[gcp]'") from None
            try:
                client = storage.Client()
            except DefaultCredentialsError:
                raise SinkError(f"{url}: no Google credentials; run `gcloud auth "
                                "application-default login` (nodes use their service account)") from None
        self._bucket = client.bucket(self.bucket)
        self._client = client

    def _put(self, key: str, data: bytes) -> None:
        self._bucket.blob(key).upload_from_string(data, content_type="application/x-ndjson")

    def _keys(self, prefix: str) -> list[str]:
        from google.api_core import exceptions

        try:
            return [b.name for b in self._client.list_blobs(self.bucket, prefix=prefix)]
        except exceptions.NotFound:
            raise SinkError(f"gs://{self.bucket}: no such bucket; create it with "
                            f"`gcloud storage buckets create gs://{self.bucket}`") from None

    def _get(self, key: str) -> bytes:
        return self._bucket.blob(key).download_as_bytes()


class S3Sink(ObjectSink):
    scheme = "s3"

    def __init__(self, url: str, cluster: str, *, client=None):
        super().__init__(url, cluster)
        if client is None:
            try:
                import boto3
            except ImportError:
                raise SinkError(f"{url}: s3:// needs boto3; pip install 'gpu-advisor[aws]'") from None
            client = boto3.client("s3")
        self._client = client

    def _call(self, method, **kwargs):
        from botocore.exceptions import ClientError, NoCredentialsError

        try:
            return method(Bucket=self.bucket, **kwargs)
        except NoCredentialsError:
            raise SinkError(f"s3://{self.bucket}: no AWS credentials; run `aws configure` "
                            "(nodes use their instance profile)") from None
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code == "NoSuchBucket":
                raise SinkError(f"s3://{self.bucket}: no such bucket; create it with "
                                f"`aws s3 mb s3://{self.bucket}`") from None
            raise SinkError(f"s3://{self.bucket}: {code}: {exc}") from None

    def _put(self, key: str, data: bytes) -> None:
        self._call(self._client.put_object, Key=key, Body=data,
                   ContentType="application/x-ndjson")

    def _keys(self, prefix: str) -> list[str]:
        keys, token = [], None
        while True:
            extra = {"ContinuationToken": token} if token else {}
            page = self._call(self._client.list_objects_v2, Prefix=prefix, **extra)
            keys += [o["Key"] for o in page.get("Contents", [])]
            token = page.get("NextContinuationToken")
            if not token:
                return keys

    def _get(self, key: str) -> bytes:
        return self._call(self._client.get_object, Key=key)["Body"].read()
