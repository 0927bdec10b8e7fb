"""The startup script (GCP metadata `startup-script`, EC2 user-data) that turns a fresh VM
into a profiling node: it installs the profiler, writes the agent config and starts the node
agent. It never carries credentials: a node reaches its bucket with its own instance identity
(GCP service account, EC2 instance profile), and `check_no_credentials` refuses any text that
looks like a secret before it leaves this machine.
"""

from __future__ import annotations

import json
import os
import re
import shlex

from cloud.provider import LAUNCHED_AT, ClusterSpec, ProviderError

# What a node pip-installs (GPUADVISOR_INSTALL overrides): a requirement from a public index,
# a public wheel or git URL, or a wheel in the run's bucket (s3:// on AWS, gs:// on GCP) that
# the node fetches with its instance identity. Never a URL that carries a credential.
DEFAULT_INSTALL = "gpu-advisor[profiler,gcp,aws]"
EXTRAS = "[profiler,gcp,aws]"
BUCKET_SCHEMES = {"aws": "s3://", "gcp": "gs://"}
FETCH = {"s3://": "aws s3 cp", "gs://": "gcloud storage cp"}  # on the Deep Learning images
AGENT_CONFIG_PATH = "/etc/gpuadvisor/agent.json"
AGENT_LOG_PATH = "/var/log/gpuadvisor-agent.log"

_SECRET_PATTERNS = re.compile(
    r"(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key ids
    r"|aws_secret_access_key|aws_session_token"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
    r'|\\?"(?:private_key(?:_id)?|client_secret|refresh_token)\\?"',  # also JSON-escaped
    re.IGNORECASE,
)
# Credentials inside an install URL: user:password@ or a token as the user (git@ for ssh is
# a user name), a token or signature in the query string, a forge's access token anywhere.
_URL_CREDENTIALS = re.compile(
    r"://(?!git@)[^/@\s]+@"
    r"|[?&](?:[\w-]*token|auth|key|password|passwd|secret|sig|signature"
    r"|x-amz-(?:signature|credential|security-token)|x-goog-(?:signature|credential))="
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|glpat-[\w-]{20,}",
    re.IGNORECASE,
)
# Values of these variables must never travel to a node, whatever they look like.
_SECRET_ENV = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "GOOGLE_OAUTH_ACCESS_TOKEN")


def check_no_credentials(text: str, where: str) -> None:
    """Raise ProviderError if `text` (a script, labels, a log line) carries a credential."""
    leaked = _SECRET_PATTERNS.search(text)
    if leaked is None:
        for var in _SECRET_ENV:
            value = os.environ.get(var)
            if value and len(value) >= 8 and value in text:
                leaked = var
                break
    if leaked is not None:
        raise ProviderError(
            f"the {where} would carry a credential; remove it from the sweep spec (nodes use "
            "their instance service account / instance profile, never keys)"
        )


def install_source(install: str | None = None) -> str:
    """What nodes install: `install`, else GPUADVISOR_INSTALL, else the PyPI release; refused
    (ProviderError) if it carries a credential, which would ship in plain text in every
    node's user-data or startup script."""
    source = install or os.environ.get("GPUADVISOR_INSTALL") or DEFAULT_INSTALL
    if _URL_CREDENTIALS.search(source):
        raise ProviderError(
            "GPUADVISOR_INSTALL carries a credential (user:password@, a token or a signature "
            "in the URL) that every node's startup script would show in plain text; install "
            "from a public index or wheel URL, or upload the wheel to the run's bucket and "
            "set GPUADVISOR_INSTALL=s3://BUCKET/KEY.whl (gs:// on GCP): nodes fetch it with "
            "their instance identity")
    return source


def install_lines(source: str, provider: str) -> list[str]:
    """The script lines that install `source` into /opt/gpuadvisor."""
    pip = "/opt/gpuadvisor/bin/pip install --quiet"
    scheme = next((s for s in FETCH if source.startswith(s)), None)
    if scheme is None:
        return [f"{pip} {shlex.quote(source)}"]
    if scheme != BUCKET_SCHEMES.get(provider) or not source.endswith(".whl"):
        raise ProviderError(
            f"GPUADVISOR_INSTALL={source} cannot be installed on {provider}: a bucket source "
            f"is a wheel (.whl) in a {BUCKET_SCHEMES.get(provider, 'bucket')} URL, which the "
            "node fetches with its instance identity")
    wheel = "/tmp/" + source.rsplit("/", 1)[-1]
    return [f"{FETCH[scheme]} {shlex.quote(source)} {shlex.quote(wheel)}",
            f"{pip} {shlex.quote(wheel + EXTRAS)}"]


def agent_config(spec: ClusterSpec, node: int, provider: str, rendezvous_host: str | None
                 ) -> dict:
    """profiler/agent.py's AgentConfig: the trial's settings plus where this node stands."""
    return {
        **spec.agent_config,
        "provider": provider,
        "cluster": spec.cluster,
        "node": node,
        "nodes": spec.nodes,
        "rendezvous_host": rendezvous_host,
        "launched_at": LAUNCHED_AT,  # start-up timing: request -> boot -> agent up
    }


def startup_script(
    spec: ClusterSpec,
    node: int,
    *,
    provider: str,
    rendezvous_host: str | None,
    shutdown_after_s: int | None = None,
    install: str | None = None,
) -> str:
    """A bash script that installs the profiler and starts `python -m profiler.agent`.

    `shutdown_after_s` adds an OS shutdown timer as a dead-man switch (EC2 terminates on
    shutdown with InstanceInitiatedShutdownBehavior=terminate; GCP uses max_run_duration).
    The launch time is the macro LAUNCHED_AT, bare, so that the number filled in at send
    time is a JSON number.
    """
    install = install_source(install)
    config = json.dumps(agent_config(spec, node, provider, rendezvous_host), indent=2)
    config = config.replace(json.dumps(LAUNCHED_AT), LAUNCHED_AT)
    lines = [
        "#!/bin/bash",
        f"# gpu-advisor profiling node {node} of cluster {spec.cluster} ({provider}).",
        "# No credentials here: the node uses its instance identity for the results bucket.",
        "set -euo pipefail",
    ]
    if shutdown_after_s:
        minutes = max(1, -(-shutdown_after_s // 60))
        lines.append(f"shutdown -h +{minutes} 'gpu-advisor dead-man switch'")
    lines += [
        f"mkdir -p {os.path.dirname(AGENT_CONFIG_PATH)}",
        f"cat > {AGENT_CONFIG_PATH} <<'GPUADVISOR_CONFIG'",
        config,
        "GPUADVISOR_CONFIG",
        # Deep Learning images ship CUDA torch: keep it, add the profiler beside it.
        "PY=$(command -v python3)",
        '"$PY" -m venv --system-site-packages /opt/gpuadvisor',
        *install_lines(install, provider),
        f"nohup /opt/gpuadvisor/bin/python -m profiler.agent --config {AGENT_CONFIG_PATH} "
        f">> {AGENT_LOG_PATH} 2>&1 &",
    ]
    script = "\n".join(lines) + "\n"
    check_no_credentials(script, "startup script")
    return script
