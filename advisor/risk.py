"""Monte Carlo of a training run on spot nodes that get revoked.

Each node lives a Weibull lifetime (Artifact.lifetime) and is replaced when revoked; the
cluster's revocations are the union of its nodes' renewal processes, sampled once per
(lifetime model, node count) and shared by every candidate of that group (common random
numbers). A revocation costs the overhead `overhead_s` (re-rendezvous plus the replacement's
start-up) and the work since the last checkpoint, uniform over one checkpoint period. The job
checkpoints every Young/Daly interval sqrt(2 x checkpoint cost x cluster MTBF), and pays for
every checkpoint it writes. The run time T of one draw is the fixed point of
T = base + K(T) x overhead + lost work of those K revocations, where K(T) counts the
revocations before T; it is found for all candidates and draws at once with searchsorted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Hashable, Mapping

import numpy as np

# Longest run the simulation follows, in absolute terms and as a multiple of the run without
# revocations; a draw still unfinished is reported as never finishing (revocations outpace
# progress), a plan nobody would choose.
MAX_HORIZON_S = 365 * 86400.0
MAX_SLOWDOWN = 20.0
_MAX_FIXED_POINT_STEPS = 200
# Below this share of moving (draw, row) pairs, gathering them beats recomputing all.
_DENSE_FRACTION = 0.2


@dataclass(frozen=True)
class SpotRuns:
    """Per candidate row: run times over draws, and the plan the simulation assumed."""

    time_s: np.ndarray  # (rows, draws): first step to last step, np.inf if never done
    revocations: np.ndarray  # (rows,): mean revocations per run
    checkpoint_interval_s: np.ndarray  # (rows,): np.inf when no checkpointing is needed


def mean_lifetime_s(lifetime) -> float:
    """Mean node life: Weibull(shape, scale), cut at `cap_s` where the provider imposes one
    (the integral of the survival function); inf for nodes that are never revoked."""
    if not math.isfinite(lifetime.scale_s):
        return math.inf
    cap = getattr(lifetime, "cap_s", math.inf)
    if not math.isfinite(cap):
        return lifetime.scale_s * math.gamma(1.0 + 1.0 / lifetime.shape)
    t = np.linspace(0.0, cap, 4097)
    alive = np.exp(-((t / lifetime.scale_s) ** lifetime.shape))
    return float((alive[1:] + alive[:-1]).sum() * (t[1] - t[0]) / 2.0)


def checkpoint_interval(checkpoint_s: np.ndarray, cluster_mtbf_s: np.ndarray) -> np.ndarray:
    """Young/Daly optimum sqrt(2 C M) of compute between checkpoints (inf if M is inf)."""
    # At least a second: a free checkpoint would otherwise mean checkpointing continuously.
    cost = np.maximum(np.asarray(checkpoint_s, float), 1.0)
    return np.sqrt(2.0 * cost * np.asarray(cluster_mtbf_s, float))


def revocation_times(lifetime, nodes: int, draws: int, horizon_s: float,
                     rng: np.random.Generator) -> np.ndarray:
    """(draws, E) sorted times of the cluster's revocations before `horizon_s`, inf-padded."""
    if not math.isfinite(lifetime.scale_s):
        return np.empty((draws, 0))
    per_node = max(4, int(2 * horizon_s / mean_lifetime_s(lifetime)) + 4)
    while True:
        lives = np.asarray(lifetime.sample(rng, draws * nodes * per_node), float)
        epochs = np.cumsum(lives.reshape(draws, nodes, per_node), axis=2)
        if epochs[:, :, -1].min() >= horizon_s:
            break
        per_node *= 2
    epochs = np.sort(epochs.reshape(draws, -1), axis=1)
    epochs[epochs >= horizon_s] = np.inf
    width = int(np.isfinite(epochs).sum(axis=1).max())
    return epochs[:, :width]


def simulate_spot(
    group: np.ndarray,
    nodes: np.ndarray,
    work_s: np.ndarray,
    checkpoint_s: np.ndarray,
    overhead_s: np.ndarray,
    lifetimes: Mapping[Hashable, object],
    rng: np.random.Generator,
) -> SpotRuns:
    """Run times of spot candidates.

    group: (rows,) key into `lifetimes` (one per provider/GPU/region); nodes: (rows,);
    work_s: (rows, draws) compute seconds the run needs without revocations or checkpoints;
    checkpoint_s, overhead_s: (rows,) cost of one checkpoint and of one revocation.
    """
    rows, draws = work_s.shape
    time_s = np.empty((rows, draws))
    revocations = np.zeros(rows)
    interval = np.full(rows, np.inf)
    group = np.asarray(group).astype(str)
    keys = np.unique(np.stack([group, nodes.astype(str)]), axis=1)
    for key, n in keys.T:
        members = np.flatnonzero((group == key) & (nodes == int(n)))
        lifetime = lifetimes[key]
        mtbf = mean_lifetime_s(lifetime) / int(n)
        tau = checkpoint_interval(checkpoint_s[members], mtbf)
        interval[members] = tau
        time_s[members], revocations[members] = _solve_group(
            lifetime, int(n), work_s[members], tau, checkpoint_s[members],
            overhead_s[members], rng,
        )
    return SpotRuns(time_s, revocations, interval)


def _solve_group(lifetime, nodes, work, tau, ckpt, overhead, rng):
    draws = work.shape[1]
    # Draw-major layout with rows in order of work: the queries of one draw then sit together
    # and nearly sorted, which keeps searchsorted in cache.
    order = np.argsort(work[:, 0])
    work, tau, ckpt, overhead = work[order].T, tau[order], ckpt[order], overhead[order]
    checkpoints = np.where(np.isfinite(tau), np.floor(work / tau), 0.0)
    base = work + checkpoints * ckpt
    # Work lost at a revocation: uniform over one period of compute plus checkpoint write.
    # (No events reach a row whose interval is inf: its nodes are never revoked.)
    period = np.where(np.isfinite(tau), tau + ckpt, 0.0)

    limit = min(MAX_HORIZON_S, MAX_SLOWDOWN * float(base.max()))
    horizon = min(limit, 2.0 * float(base.max()) + 1.0)
    while True:
        events = revocation_times(lifetime, nodes, draws, horizon, rng)
        lost_fraction = np.concatenate(
            [np.zeros((draws, 1)), np.cumsum(rng.random(events.shape), axis=1)], axis=1
        )
        time, count = _fixed_point(events, lost_fraction, base, overhead, period, horizon)
        hopeless = time > MAX_SLOWDOWN * base
        if ((time <= horizon) | hopeless).all() or horizon >= limit:
            break
        horizon = min(limit, 4.0 * horizon)
    time[time > np.minimum(horizon, MAX_SLOWDOWN * base)] = np.inf
    unsort = np.argsort(order)
    return time.T[unsort], count.mean(axis=0)[unsort]


def _fixed_point(events, lost_fraction, base, overhead, period, horizon):
    """Smallest T with T = base + K(T) x overhead + period x sum of K lost fractions.

    events: (draws, E); base: (draws, rows); overhead, period: (rows,)."""
    draws, width = events.shape
    rows = base.shape[1]
    if width == 0:
        return base.copy(), np.zeros(base.shape, dtype=np.int64)
    # One sorted 1-D array for all draws: draw d's events shifted by d x stride, so that a
    # single searchsorted counts the events before T for every (draw, row) at once.
    stride = 4.0 * horizon
    shift = (np.arange(draws) * stride)[:, None]
    flat = (np.where(np.isfinite(events), events, 3.0 * horizon) + shift).ravel()
    first = (np.arange(draws) * width)[:, None]

    # Dense steps while most (draw, row) pairs still move, then steps on those that do.
    clipped = 2.0 * horizon
    count = np.zeros(base.shape, dtype=np.int64)
    time = base
    for _ in range(_MAX_FIXED_POINT_STEPS):
        new_count = np.searchsorted(flat, np.minimum(time, clipped) + shift) - first
        moved = new_count != count
        count = new_count
        time = base + count * overhead + period * np.take_along_axis(lost_fraction, count, axis=1)
        if moved.mean() < _DENSE_FRACTION:
            break
    time, count = time.ravel(), count.ravel()
    active = np.flatnonzero(moved)  # flat (draw, row) positions whose count may still grow
    for _ in range(_MAX_FIXED_POINT_STEPS):
        if not len(active):
            break
        d, r = np.divmod(active, rows)
        new_count = np.searchsorted(flat, np.minimum(time[active], clipped) + d * stride)
        new_count -= d * width
        changed = new_count != count[active]
        active, d, r, new_count = active[changed], d[changed], r[changed], new_count[changed]
        count[active] = new_count
        time[active] = (base.ravel()[active] + new_count * overhead[r]
                        + period[r] * lost_fraction[d, new_count])
    return time.reshape(draws, rows), count.reshape(draws, rows)
