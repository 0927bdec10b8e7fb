"""Where records go: one sink per cluster, addressed by URL.

    open_sink(url, cluster) -> Sink

- `file://DIR` (or a plain path) writes DIR/<cluster>/node-<i>.jsonl, one file per node,
  each record one line appended with O_APPEND and written through at once, so that a record
  survives the SIGKILL of its writer and several processes of a node can append to the
  same file (each line goes in one write() call).
- `gs://BUCKET/PREFIX` and `s3://BUCKET/PREFIX` use `cloud.sinks.GcsSink` / `cloud.sinks.S3Sink`
  (imported only when asked for).

The interface a sink implements (and the cloud sinks must too):

    Sink(url: str, cluster: str)      constructor
    append(record: dict) -> None      store one record; `record["node"]` picks the node's file
    read_all() -> list[dict]          every record of the cluster, all nodes, ordered by "t"
    close() -> None                   release what the sink holds (idempotent)

The orchestrator reads a cluster's records back through the same object it would write with.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlparse

from profiler.records import dumps, parse_lines


class SinkError(Exception):
    """A sink URL that cannot be used; the message names the fix."""


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
            with open(path, encoding="utf-8") as lines:
                records.extend(parse_lines(lines, str(path)))
        return sorted(records, key=lambda r: r["t"])

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def _local_path(url: str) -> str:
    if "://" not in url:
        return url
    parsed = urlparse(url)
    if parsed.netloc not in ("", "localhost"):
        raise SinkError(f"{url}: a file:// URL names a local directory, e.g. file:///tmp/runs")
    return unquote(parsed.path)


def open_sink(url: str, cluster: str) -> Sink:
    """The sink for `url` (file://, gs://, s3:// or a plain directory path) and a cluster."""
    scheme = urlparse(url).scheme if "://" in url else "file"
    if scheme == "file":
        return FileSink(url, cluster)
    if scheme in ("gs", "s3"):
        name = {"gs": "GcsSink", "s3": "S3Sink"}[scheme]
        try:
            from cloud import sinks
        except ImportError as exc:
            raise SinkError(
                f"{url}: the {scheme}:// sink needs cloud.sinks ({exc}); install "
                f"gpu-advisor[{'gcp' if scheme == 'gs' else 'aws'}]"
            ) from None
        return getattr(sinks, name)(url, cluster)
    raise SinkError(f"{url}: unknown sink scheme {scheme!r}; use file://DIR, gs://BUCKET or s3://BUCKET")
