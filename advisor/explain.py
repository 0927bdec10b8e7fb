"""Why the pick: how the pick's instance scales node by node, what revocations risk on it, and
what was filtered out and why, as data (advisor.cli.recommend words it)."""

from __future__ import annotations

import numpy as np

from advisor.optimizer import Plans
from advisor.risk import mean_lifetime_s
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
    return {
        "market": market(True),
        "node_lifetime": {"shape": lifetime.shape, "scale_s": lifetime.scale_s,
                          "mean_s": round(mean_lifetime_s(lifetime)), "source": lifetime.source},
        "cluster_mtbf_s": round(mean_lifetime_s(lifetime) / nodes),
        "revocations_expected": round(float(plans["revocations"][row]), 2),
        "checkpoint_interval_s": round(float(plans["checkpoint_interval_s"][row])),
        "time_p50_s": round(float(plans["time_p50"][row])),
        "time_p90_s": round(float(plans["time_p90"][row])),
    }


def filtered(plans: Plans) -> list[dict]:
    """Candidates dropped before scoring and candidates missing a constraint: each cut's
    reason and numbers (advisor.reasons.Cut) with its count."""
    cuts = {**plans.candidates.dropped, **plans.misses}
    return [{**cut.as_dict(), "count": count} for cut, count in cuts.items()]


def explanation(plans: Plans, lifetime) -> dict:
    row = plans.pick
    return {
        "scaling": scaling(plans, row) if row is not None else [],
        "scaling_threshold": SCALING_EFFICIENCY_THRESHOLD,
        "revocation_risk": revocation_risk(plans, row, lifetime) if row is not None else None,
        "filtered": filtered(plans),
    }
