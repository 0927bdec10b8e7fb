"""The phase a running trial is shown in, and its throughput so far, from its records."""

import pytest

from gpuadvisor.records import make
from profiler.ingest import RevocationSeen
from profiler.progress import trial_phase


def record(type: str, t: float, node: int = 0, restart: int = 0, **fields) -> dict:
    rank = None if type == "agent_start" else node
    return {**make(type, node=node, rank=rank, restart=restart, **fields), "t": t}


def test_phases_of_a_trial_with_a_revocation():
    revoked = RevocationSeen(node=1, at=20.0, cause="sigkill")
    timeline = [
        (record("agent_start", 0.0), "launching", None),
        (record("rendezvous", 5.0, world_size=2), "launching", None),
        (record("first_step", 8.0), "warm-up", None),
        (record("progress", 9.0, samples_per_s=10.0, phase="warmup"), "warm-up", 10.0),
        (record("phase", 10.0, phase="measuring"), "warm-up", 10.0),
        (record("progress", 11.0, samples_per_s=20.0, phase="measuring"), "measuring", 20.0),
        (record("progress", 12.0, samples_per_s=30.0, phase="measuring"), "measuring", 25.0),
    ]
    records = []
    for new, phase, rate in timeline:
        records.append(new)
        assert trial_phase(records, []) == (phase, pytest.approx(rate) if rate else None)
    # The kill: the survivors have not noticed yet, then they restart and rendezvous anew.
    assert trial_phase(records, [revoked]) == ("revoked", None)
    records.append(record("worker_exit", 20.5, status="error", error="gloo: connection reset"))
    assert trial_phase(records, [revoked]) == ("recovering", None)
    records.append(record("rendezvous", 30.0, restart=1, world_size=2))
    assert trial_phase(records, [revoked]) == ("recovering", None)
    # The next attempt measures afresh: the old attempt's rates are not its throughput.
    records.append(record("first_step", 32.0, restart=1))
    assert trial_phase(records, [revoked]) == ("warm-up", None)
    records.append(record("progress", 33.0, restart=1, samples_per_s=8.0, phase="warmup"))
    assert trial_phase(records, [revoked]) == ("warm-up", 8.0)
