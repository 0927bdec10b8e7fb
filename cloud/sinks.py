"""Where records go: one sink per cluster, addressed by URL; the nodes write it, the
orchestrator reads the cluster's records back through the same kind of object.

    open_sink(url, cluster, *, client=None) -> Sink

- `file://DIR` (or a plain path) writes DIR/<cluster>/node-<i>.jsonl, one file per node,
  each record one line appended with O_APPEND and written through at once, so that a record
  survives the SIGKILL of its writer and several processes of a node can append to the
  same file (each line goes in one write() call).
- `gs://BUCKET/PREFIX` and `s3://BUCKET/PREFIX` write objects through the bucket clients of
  the cloud adaptors (cloud/adaptors/gcp.py, aws.py); `client` is the SDK client to use
  (google-cloud-storage or boto3 S3), by default one with the machine's own credentials.
  Objects cannot be appended to, so every append is one object, a batch of JSON lines, under
  PREFIX/<cluster>/node-<i>/, written at once, so a record survives the revocation of the
  node that wrote it. Objects never change, so each is downloaded only once per sink. Nodes
  reach the bucket with their instance identity (GCP service account, EC2 instance
  profile), never with keys.

The interface every sink implements:

    append(record: dict) -> None      store one record; `record["node"]` picks the node's file
    read_all() -> list[dict]          every record of the cluster, all nodes, ordered by "t"
    close() -> None                   release what the sink holds (idempotent)

`clusters(url)` lists the clusters a sink holds records of (for `profiler ingest`);
`check_local_sink(url)` refuses a local directory that cannot be written before a sweep.

Errors are SinkError, one line that names the fix.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlparse

from cloud.adaptors import aws, gcp
from cloud.provider import SinkError
from gpuadvisor.records import dumps, parse_lines
from gpuadvisor.textfile import unreadable

BUCKETS = {"gs": gcp.GcsBucket, "s3": aws.S3Bucket}


class Sink(Protocol):
    def append(self, record: dict) -> None: ...

    def read_all(self) -> list[dict]: ...

    def close(self) -> None: ...


class FileSink:
    """Records in DIR/<cluster>/node-<i>.jsonl."""

    def __init__(self, url: str, cluster: str):
        self.root = Path(_local_path(url)) / cluster
        self._fds: dict[int, int] = {}

    def _fd(self, node: int) -> int:
        if node not in self._fds:
            self.root.mkdir(parents=True, exist_ok=True)
            path = self.root / f"node-{int(node)}.jsonl"
            self._fds[node] = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return self._fds[node]

    def append(self, record: dict) -> None:
        # One write() per line: O_APPEND makes concurrent appends land whole, and the bytes are
        # in the kernel as soon as it returns, whatever happens to this process afterwards.
        os.write(self._fd(record["node"]), dumps(record).encode())

    def read_all(self) -> list[dict]:
        records: list[dict] = []
        for path in sorted(self.root.glob("node-*.jsonl")):
            try:
                with open(path, encoding="utf-8") as lines:
                    records.extend(parse_lines(lines, str(path)))
            except (OSError, UnicodeDecodeError) as exc:
                raise SinkError(f"the records cannot be read: {unreadable(path, exc)}") from None
        return sorted(records, key=lambda r: r["t"])

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


class ObjectSink:
    """Records in a bucket (GcsBucket, S3Bucket), one object per append."""

    def __init__(self, url: str, cluster: str, bucket):
        self.url, self.bucket = url, bucket
        prefix = urlparse(url).path.strip("/")
        self.prefix = f"{prefix}/{cluster}/" if prefix else f"{cluster}/"
        self._seq = itertools.count()
        self._cache: dict[str, list[dict]] = {}

    def _key(self, node: int) -> str:
        # Time first, so a listing comes back roughly in write order; pid + counter: unique.
        return (f"{self.prefix}node-{int(node)}/"
                f"{time.time_ns():020d}-{os.getpid()}-{next(self._seq)}.jsonl")

    def append(self, record: dict) -> None:
        self.append_batch([record])

    def append_batch(self, records: list[dict]) -> None:
        """One object for records of one node."""
        if records:
            self.bucket.put(self._key(records[0]["node"]),
                            "".join(dumps(r) for r in records).encode())

    def read_all(self) -> list[dict]:
        for key in self.bucket.keys(self.prefix):
            if key not in self._cache and key.endswith(".jsonl"):
                text = self.bucket.get(key).decode("utf-8")
                where = f"{self.bucket.url}/{key}"
                self._cache[key] = list(parse_lines(text.splitlines(keepends=True), where))
        return sorted((r for rs in self._cache.values() for r in rs), key=lambda r: r["t"])

    def close(self) -> None:
        pass  # nothing is held open between calls


def _local_path(url: str) -> str:
    if "://" not in url:
        return url
    parsed = urlparse(url)
    if parsed.netloc not in ("", "localhost"):
        raise SinkError(f"{url}: a file:// URL names a local directory, e.g. file:///tmp/runs")
    return unquote(parsed.path)


def check_local_sink(url: str) -> None:
    """Refuse, before anything is launched, a local sink this machine cannot write and read
    back (a file in the way, no permission, a full disk): its nodes would be taken for a
    cluster that never trained. A bucket is checked by its first write."""
    if "://" in url and urlparse(url).scheme != "file":
        return
    root = Path(_local_path(url))
    probe = root / f".gpuadvisor-probe-{os.getpid()}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"{}\n")
        probe.read_bytes()
    except OSError as exc:
        raise SinkError(f"{url}: the records cannot be written there ({exc.strerror}); send "
                        "them to a writable directory on a disk with free space") from None
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()


def open_sink(url: str, cluster: str, *, client=None) -> Sink:
    """The sink for `url` (file://, gs://, s3:// or a plain directory path) and a cluster."""
    bucket = _bucket(url, client)
    return FileSink(url, cluster) if bucket is None else ObjectSink(url, cluster, bucket)


def clusters(url: str, *, client=None) -> list[str]:
    """The clusters whose records are under `url`, sorted."""
    bucket = _bucket(url, client)
    if bucket is None:
        root = Path(_local_path(url))
        if not root.is_dir():
            raise SinkError(f"{url}: no such directory; give the results URL of the sweep")
        return sorted(d.name for d in root.iterdir() if any(d.glob("node-*.jsonl")))
    prefix = urlparse(url).path.strip("/")
    prefix = f"{prefix}/" if prefix else ""
    names = {key[len(prefix):].split("/", 1)[0] for key in bucket.keys(prefix)
             if key.endswith(".jsonl") and "/" in key[len(prefix):]}
    return sorted(names)


def _bucket(url: str, client):
    """The bucket object of a gs:// or s3:// URL; None for a local directory."""
    scheme = urlparse(url).scheme if "://" in url else "file"
    if scheme == "file":
        return None
    if scheme not in BUCKETS:
        raise SinkError(f"{url}: unknown sink scheme {scheme!r}; use file://DIR, gs://BUCKET "
                        "or s3://BUCKET")
    bucket = urlparse(url).netloc
    if not bucket:
        raise SinkError(f"{url}: expected {scheme}://BUCKET/PREFIX")
    return BUCKETS[scheme](bucket, client=client)
