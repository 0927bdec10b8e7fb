"""Why the pick: what its step is spent on, how its instance scales node by node, what its
overheads are and where they come from, what revocations risk on it, and what was filtered
out and why, as data (advisor.cli.recommend words it)."""

from __future__ import annotations

import math

import numpy as np

from advisor.optimizer import Plans
from advisor.risk import mean_lifetime_s, time_between_revocations_s
from gpuadvisor.vocab import market

# Or, Zhang and Freedman (MLSys 2020) keep adding workers while each added one contributes at
# least this share of what an existing worker does (throughput-scaling efficiency).
SCALING_EFFICIENCY_THRESHOLD = 0.5


def scaling(plans: Plans, row: int) -> list[dict]:
    """Throughput of the row's instance and market at every node count, with the marginal
    scaling efficiency of each added node: (T(n) - T(n-1)) / (T(n-1) / (n-1))."""
    c = plans.candidates
    same = np.flatnonzero((c["offering"] == c["offering"][row]) & (c["spot"] == c["spot"][row]))
    same = same[np.argsort(c["nodes"][same])]
    steps, previous, scaling_ok = [], None, True
    for index in same:
        nodes, throughput = int(c["nodes"][index]), float(plans["throughput"][index])
        efficiency = None
        if previous is not None:
            prev_nodes, prev_throughput = previous
            efficiency = (throughput - prev_throughput) / (prev_throughput / prev_nodes)
            scaling_ok = scaling_ok and efficiency >= SCALING_EFFICIENCY_THRESHOLD
        steps.append({
            "nodes": nodes,
            "throughput": round(throughput, 2),
            "speedup": round(throughput / float(plans["throughput"][same[0]]), 3),
            "marginal_efficiency": None if efficiency is None else round(efficiency, 3),
            "worth_adding": scaling_ok,
        })
        previous = (nodes, throughput)
    return steps


def revocation_risk(plans: Plans, row: int, lifetime) -> dict:
    """What spot revocations do to the row's plan (nothing for on-demand)."""
    if not plans["spot"][row]:
        return {"market": market(False), "revocations_expected": 0.0}
    nodes = int(plans["nodes"][row])
    mean = mean_lifetime_s(lifetime)
    return {
        "market": market(True),
        "node_lifetime": {"shape": lifetime.shape, "scale_s": lifetime.scale_s,
                          "cap_s": None if math.isinf(lifetime.cap_s) else lifetime.cap_s,
                          "mean_s": round(mean) if math.isfinite(mean) else None,
                          "p_revoked_1h": _revoked_by(lifetime, 3600.0),
                          "p_revoked_24h": _revoked_by(lifetime, 86400.0),
                          "source": lifetime.source},
        "cluster_mtbf_s": round(time_between_revocations_s(lifetime) / nodes),
        "revocations_expected": round(float(plans["revocations"][row]), 2),
        "checkpoint_interval_s": round(float(plans["checkpoint_interval_s"][row])),
        "time_p50_s": round(float(plans["time_p50"][row])),
        "time_p90_s": round(float(plans["time_p90"][row])),
    }


def overheads(plans: Plans, row: int, sources: dict) -> dict:
    """The row's start-up and the cost of one revocation, each part with its source
    (`sources`: Artifact.overhead_sources of the row's market)."""
    vm, first, rejoin = (sources[k] for k in ("vm_s", "first_step_s", "recovery_s"))
    save = float(plans["checkpoint_s"][row])
    return {
        "startup_s": round(float(plans["startup_s"][row]), 1),
        "vm_s": vm, "first_step_s": first, "rejoin_s": rejoin,
        "checkpoint_s": {"seconds": round(save, 1) if math.isfinite(save) else None,
                         "source": sources["checkpoint_s"]["source"]},
        "revocation_wait_s": round(float(plans["startup_s"][row]) + rejoin["seconds"], 1),
        "revocation_wait": "the whole cluster waits: the rendezvous holds every node until "
                           "the replacement has started and rejoined",
    }


def _revoked_by(lifetime, seconds: float) -> float:
    return round(1.0 - float(lifetime.survival(seconds)), 3)


def filtered(plans: Plans) -> list[dict]:
    """Candidates dropped before scoring and candidates missing a constraint: each cut's
    reason and numbers (advisor.reasons.Cut) with its count."""
    cuts = {**plans.candidates.dropped, **plans.misses}
    return [{**cut.as_dict(), "count": count} for cut, count in cuts.items()]


# Gradient exchange and per-step costs do not grow with the batch: where they take at least
# this share of a step, fewer and larger steps (a larger global batch) spend less on them.
PER_STEP_BOUND_SHARE = 0.5
PER_STEP_PARTS = ("communication", "per_step")
# The host's dispatch of the step's kernels (physics.host_seconds), beside the GPU's parts,
# and the part of its memory-bound work that is cuDNN's NCHW transposes (physics.
# nchw_transposes), which a job kept channels-last does not spend.
HOST_PART = "host"
TRANSPOSES_PART = "transposes"


def step(parts: dict[str, float] | None) -> dict | None:
    """The pick's step (physics.step_parts of its configuration, in seconds, the host's
    dispatch under HOST_PART and the NCHW transposes under TRANSPOSES_PART): the GPU's work,
    each part's share of it, the share that does not grow with the batch, whether the host's
    dispatch outlasts the GPU's work, and what the transposes take of it."""
    if not parts:
        return None
    parts = dict(parts)
    host, transposes = parts.pop(HOST_PART, 0.0), parts.pop(TRANSPOSES_PART, 0.0)
    total = sum(parts.values())
    if not total > 0:
        return None
    shares = {part: round(seconds / total, 3) for part, seconds in parts.items()}
    fixed = sum(parts[part] for part in PER_STEP_PARTS) / total
    return {"seconds": round(total, 4), "shares": shares, "per_step_share": round(fixed, 3),
            "per_step_bound": fixed >= PER_STEP_BOUND_SHARE, "host_seconds": round(host, 4),
            "host_bound": host >= total, "transposes_seconds": round(transposes, 4),
            "transposes_share": round(transposes / total, 3)}


def explanation(plans: Plans, lifetime, sources: dict | None = None,
                step_seconds: dict[str, float] | None = None,
                measured_by: str | None = None) -> dict:
    row = plans.pick
    return {
        "step": step(step_seconds) if row is not None else None,
        "measured_by": measured_by,
        "scaling": scaling(plans, row) if row is not None else [],
        "scaling_threshold": SCALING_EFFICIENCY_THRESHOLD,
        "overheads": overheads(plans, row, sources) if row is not None and sources else None,
        "revocation_risk": revocation_risk(plans, row, lifetime) if row is not None else None,
        "filtered": filtered(plans),
    }
