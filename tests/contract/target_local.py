"""Contract target: the local provider with an agent that only sleeps (no training)."""

import sys
from contextlib import contextmanager

from cloud.local import LocalProvider
from cloud.provider import ClusterSpec

SLEEPING_AGENT = (sys.executable, "-c", "import time; time.sleep(120)")


@contextmanager
def make_target(request, tmp_path):
    provider = LocalProvider(state_dir=tmp_path / "local", agent_command=SLEEPING_AGENT,
                             term_grace_s=2.0)

    def cluster_spec(trial: str, nodes: int, **fields) -> ClusterSpec:
        return ClusterSpec(sweep="contract", trial=trial, nodes=nodes,
                           instance_type="local-cpu", **fields)

    try:
        yield {"provider": provider, "cluster_spec": cluster_spec, "wait_s": 10.0}
    finally:
        provider.terminate(provider.leftovers())
