"""The time-cost Pareto frontier of the scored plans as a PNG, the pick highlighted.
matplotlib is imported here only, when a plot is asked for."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from advisor.optimizer import Plans
from gpuadvisor.vocab import market


def pareto_front(time: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Rows no other row beats on both time and cost, fastest first."""
    finite = np.flatnonzero(np.isfinite(time) & np.isfinite(cost))
    order = finite[np.lexsort((cost[finite], time[finite]))]
    best_cost = np.minimum.accumulate(cost[order])
    keep = np.r_[True, cost[order][1:] < best_cost[:-1]]
    return order[keep]


def plot_frontier(plans: Plans, path: Path, title: str) -> None:
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError("plotting needs matplotlib: pip install 'gpu-advisor[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    confidence = f"P{plans.constraints.confidence * 100:.0f}"
    hours, cost = plans["time_conf"] / 3600.0, plans["cost_conf"]
    spot = plans["spot"]
    front = pareto_front(hours, cost)
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for mask, label, colour in ((~spot, market(False), "tab:blue"),
                                (spot, market(True), "tab:orange")):
        ax.scatter(hours[mask], cost[mask], s=8, alpha=0.3, color=colour, label=label)
    ax.plot(hours[front], cost[front], "-o", color="black", markersize=3, label="Pareto frontier")
    if plans.pick is not None:
        pick = plans.pick
        ax.scatter([hours[pick]], [cost[pick]], s=160, marker="*", color="crimson", zorder=5,
                   label=f"pick: {plans['instance_type'][pick]} x{plans['nodes'][pick]}")
    if plans.constraints.deadline_s is not None:
        ax.axvline(plans.constraints.deadline_s / 3600.0, color="grey", ls="--", label="deadline")
    if plans.constraints.budget_usd is not None:
        ax.axhline(plans.constraints.budget_usd, color="grey", ls=":", label="budget")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"training time at {confidence} (hours)")
    ax.set_ylabel(f"cost at {confidence} (USD)")
    ax.set_title(title)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
