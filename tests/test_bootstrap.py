"""Startup scripts: what they run, and that no credential ever travels in one."""

import pytest

from cloud.bootstrap import check_no_credentials, startup_script
from cloud.provider import LAUNCHED_AT, ClusterSpec, ProviderError, fill

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def spec(**agent_config) -> ClusterSpec:
    return ClusterSpec(sweep="s", trial="t", nodes=2, instance_type="g4dn.xlarge",
                       agent_config={"sink": "s3://b/r", **agent_config})


def test_script_writes_config_and_starts_the_agent():
    planned = startup_script(spec(), 1, provider="aws", rendezvous_host="10.0.0.5",
                             shutdown_after_s=3601)
    assert '"launched_at": ${launched_at}' in planned
    script = fill(planned, {LAUNCHED_AT: 1.5})  # as the launch sends it
    assert script.startswith("#!/bin/bash\n")
    assert "shutdown -h +61 " in script
    assert '"rendezvous_host": "10.0.0.5"' in script and '"node": 1' in script
    assert '"launched_at": 1.5' in script and '"cluster": "s-t"' in script
    assert script.rstrip().endswith("2>&1 &")


def test_credentials_of_this_machine_never_reach_a_node(monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
    script = startup_script(spec(), 0, provider="aws", rendezvous_host=None)
    assert SECRET not in script and "AKIA" not in script
    with pytest.raises(ProviderError, match="credential"):
        startup_script(spec(token=SECRET), 0, provider="aws", rendezvous_host=None)


@pytest.mark.parametrize("leak", [
    "AKIAIOSFODNN7EXAMPLE", "aws_secret_access_key=x", '{"private_key": "..."}',
    "-----BEGIN RSA PRIVATE KEY-----"])
def test_secret_shapes_are_refused(leak):
    with pytest.raises(ProviderError, match="instance profile"):
        check_no_credentials(f"echo {leak}", "startup script")
    with pytest.raises(ProviderError):
        startup_script(spec(note=leak), 0, provider="gcp", rendezvous_host=None)
