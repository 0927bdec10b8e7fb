"""A GcpProvider wired to the local fake Compute endpoint, for tests and the contract suite."""

from __future__ import annotations

from contextlib import contextmanager

from fakes.gcp_compute import FakeCompute, serve


def compute_clients(endpoint: str):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import compute_v1

    options = {"credentials": AnonymousCredentials(), "transport": "rest",
               "client_options": {"api_endpoint": endpoint}}
    return compute_v1.InstancesClient(**options), compute_v1.ZoneOperationsClient(**options)


@contextmanager
def fake_gcp(**provider_options):
    """Yields (provider, fake); the server stops on exit."""
    from cloud.gcp import GcpProvider

    fake = FakeCompute()
    server, endpoint = serve(fake)
    instances, operations = compute_clients(endpoint)
    try:
        yield GcpProvider("test-project", instances=instances, zone_operations=operations,
                          **provider_options), fake
    finally:
        server.shutdown()
        server.server_close()
