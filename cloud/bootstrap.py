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

# What a node pip-installs; a wheel URL or a git URL works too (GPUADVISOR_INSTALL overrides).
DEFAULT_INSTALL = "gpu-advisor[profiler,gcp,aws]"
AGENT_CONFIG_PATH = "/etc/gpuadvisor/agent.json"
AGENT_LOG_PATH = "/var/log/gpuadvisor-agent.log"

_SECRET_PATTERNS = re.compile(
    r"(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key ids
    r"|aws_secret_access_key|aws_session_token"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
    r'|\\?"(?:private_key(?:_id)?|client_secret|refresh_token)\\?"',  # also JSON-escaped
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
    install = install or os.environ.get("GPUADVISOR_INSTALL") or DEFAULT_INSTALL
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
        f"/opt/gpuadvisor/bin/pip install --quiet {shlex.quote(install)}",
        f"nohup /opt/gpuadvisor/bin/python -m profiler.agent --config {AGENT_CONFIG_PATH} "
        f">> {AGENT_LOG_PATH} 2>&1 &",
    ]
    script = "\n".join(lines) + "\n"
    check_no_credentials(script, "startup script")
    return script
