"""Contract target: GcpProvider against the local fake Compute REST endpoint."""

from contextlib import contextmanager

import pytest

from cloud.provider import ClusterSpec


@contextmanager
def make_target(request, tmp_path):
    pytest.importorskip("google.cloud.compute_v1")
    from fakes.gcp import fake_gcp

    def cluster_spec(trial: str, nodes: int, **fields) -> ClusterSpec:
        return ClusterSpec(sweep="contract", trial=trial, nodes=nodes,
                           instance_type="n1-standard-4", zones=("us-central1-a",), **fields)

    with fake_gcp() as (provider, _):
        yield {"provider": provider, "cluster_spec": cluster_spec, "wait_s": 5.0}
