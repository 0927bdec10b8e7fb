"""Startup scripts: what they run, and that no credential ever travels in one."""

import shlex

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


@pytest.mark.parametrize("source", [
    "git+https://ghp_abcdefghijklmnopqrstuvwxyz0123@github.com/org/gpu-advisor.git",
    "git+https://oauth2:glpat-abcdefghijklmnopqrstuv@gitlab.com/org/gpu-advisor.git",
    "https://user:hunter2@pypi.example.com/simple/gpu-advisor/gpu_advisor-1.0-py3-none-any.whl",
    "https://files.example.com/gpu_advisor-1.0-py3-none-any.whl?token=abc123",
    "https://h.example.com/w.whl?X-Amz-Credential=AKID%2F20261124&X-Amz-Signature=abc",
    "gpu-advisor @ https://example.com/w.whl?access_token=abc",
])
def test_an_install_source_with_a_credential_is_refused(source, monkeypatch):
    monkeypatch.setenv("GPUADVISOR_INSTALL", source)
    with pytest.raises(ProviderError, match="GPUADVISOR_INSTALL carries a credential") as error:
        startup_script(spec(), 0, provider="aws", rendezvous_host=None)
    assert "\n" not in str(error.value) and "s3://BUCKET/KEY.whl" in str(error.value)
    assert "hunter2" not in str(error.value) and "abc123" not in str(error.value)


@pytest.mark.parametrize("source", [
    "gpu-advisor[profiler,aws]==1.2",
    "https://files.example.com/gpu_advisor-1.0-py3-none-any.whl",
    "git+https://github.com/org/gpu-advisor.git@v1.0",
    "git+ssh://git@github.com/org/gpu-advisor.git",
])
def test_public_install_sources_are_installed_as_given(source):
    script = startup_script(spec(), 0, provider="gcp", rendezvous_host=None, install=source)
    assert f"/opt/gpuadvisor/bin/pip install --quiet {shlex.quote(source)}\n" in script


@pytest.mark.parametrize(("provider", "source", "fetch"), [
    ("aws", "s3://runs/wheels/gpu_advisor-1.0-py3-none-any.whl", "aws s3 cp"),
    ("gcp", "gs://runs/wheels/gpu_advisor-1.0-py3-none-any.whl", "gcloud storage cp"),
])
def test_a_wheel_in_the_bucket_is_fetched_with_the_instance_identity(provider, source, fetch):
    script = startup_script(spec(), 0, provider=provider, rendezvous_host=None, install=source)
    wheel = "/tmp/gpu_advisor-1.0-py3-none-any.whl"
    assert f"{fetch} {source} {wheel}\n" in script
    assert f"pip install --quiet '{wheel}[profiler,gcp,aws]'\n" in script
    other = "gcp" if provider == "aws" else "aws"
    with pytest.raises(ProviderError, match="cannot be installed on"):
        startup_script(spec(), 0, provider=other, rendezvous_host=None, install=source)
    with pytest.raises(ProviderError, match=r"a wheel \(\.whl\)"):
        startup_script(spec(), 0, provider=provider, rendezvous_host=None,
                       install=source.removesuffix(".whl") + ".tar.gz")
