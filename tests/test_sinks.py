"""gs:// and s3:// record sinks: S3 against moto's server, GCS against a local endpoint of
the storage JSON API reached through google-cloud-storage itself."""

from __future__ import annotations

import pytest
from fakes.aws import aws, client, moto_endpoint  # noqa: F401

from cloud.provider import SinkError
from cloud.sinks import ObjectSink, open_sink
from gpuadvisor.records import make


def records(node: int, n: int, t0: float = 100.0) -> list[dict]:
    return [make("progress", node=node, rank=node, restart=0, t=t0 + i * 2 + node, step=i)
            for i in range(n)]


def check_round_trip(sink, other_cluster_sink) -> None:
    for record in records(0, 3):
        sink.append(record)
    sink.append_batch(records(1, 2))
    other_cluster_sink.append(records(0, 1, t0=0.0)[0])
    got = sink.read_all()
    assert [(r["node"], r["step"]) for r in got] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)]
    assert [r["t"] for r in got] == sorted(r["t"] for r in got)
    assert sink.read_all() == got  # idempotent, from the cache
    sink.close()


def test_s3_sink_round_trip(aws):
    s3 = client(aws["endpoint"], "s3")
    s3.create_bucket(Bucket="results")
    sink = open_sink("s3://results/runs", "sweep-trial", client=s3)
    check_round_trip(sink, open_sink("s3://results/runs", "other", client=s3))
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="results")["Contents"]]
    assert len(keys) == 5  # one object per append call
    assert sum(k.startswith("runs/sweep-trial/node-1/") for k in keys) == 1


def test_s3_missing_bucket_is_one_clear_error(aws):
    sink = open_sink("s3://nope/runs", "c", client=client(aws["endpoint"], "s3"))
    with pytest.raises(SinkError, match="aws s3 mb s3://nope"):
        sink.append(records(0, 1)[0])


def test_open_sink_dispatches_to_cloud_sinks(aws):
    from cloud.adaptors.aws import S3Bucket

    sink = open_sink("s3://results/runs", "c")
    assert isinstance(sink, ObjectSink) and isinstance(sink.bucket, S3Bucket)
    with pytest.raises(SinkError, match="s3://BUCKET"):
        open_sink("s3:///no-bucket", "c")


@pytest.fixture
def gcs():
    pytest.importorskip("google.cloud.storage")
    from fakes.gcs import FakeGcs, serve, storage_client

    fake = FakeGcs()
    server, endpoint = serve(fake)
    try:
        yield fake, storage_client(endpoint)
    finally:
        server.shutdown()
        server.server_close()


def test_gcs_sink_round_trip(gcs):
    fake, storage = gcs
    sink = open_sink("gs://results/runs", "sweep-trial", client=storage)
    check_round_trip(sink, open_sink("gs://results/runs", "other", client=storage))
    names = sorted(fake.objects["results"])
    assert len(names) == 5 and all(n.endswith(".jsonl") for n in names)
    assert sum(n.startswith("runs/sweep-trial/node-0/") for n in names) == 3
    uploads = [p for m, p in fake.requests if m == "POST"]
    assert uploads == ["/upload/storage/v1/b/results/o"] * 5


def test_gcs_missing_bucket_is_one_clear_error(gcs):
    _, storage = gcs
    with pytest.raises(SinkError, match="gcloud storage buckets create gs://nope"):
        open_sink("gs://nope/runs", "c", client=storage).read_all()
