"""Monte Carlo of a training run on spot nodes that get revoked.

Each node lives a Weibull lifetime (Artifact.lifetime) and is replaced when revoked; the
cluster's revocations are the union of its nodes' renewal processes, sampled once per
(lifetime model, node count) and shared by every candidate of that group (common random
numbers). A revocation costs the overhead `overhead_s` (the replacement's whole start-up plus
the rejoin: the rendezvous holds every node until it is back) and the work since the last
checkpoint, uniform over one checkpoint period. The job checkpoints every Young/Daly interval
sqrt(2 x checkpoint cost x cluster MTBF), MTBF from `time_between_revocations_s`, and pays for
every checkpoint it writes (Young's C / tau overhead). A run ends after K revocations, K
the first k for which the run, with the cost of its k revocations, ends before the next one:
found for all candidates and draws at once by a searchsorted into a running maximum.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# Longest run the simulation follows, in absolute terms and as a multiple of the run without
# revocations; a draw still unfinished is reported as never finishing (revocations outpace
# progress), a plan nobody would choose.
MAX_HORIZON_S = 365 * 86400.0
MAX_SLOWDOWN = 20.0
# Horizon of the evidence on node lives (CM-DARE followed preemptible VMs for their 24 h):
# the span over which the time between revocations is measured for checkpointing.
FAILURE_WINDOW_S = 86400.0


@dataclass(frozen=True)
class SpotRuns:
    """Run times over draws of the distinct candidates; per candidate row, which of them it is
    and the plan the simulation assumed."""

    distinct_time_s: np.ndarray  # (draws, distinct): first to last step, np.inf if never done
    column: np.ndarray  # (rows,): the row's column in distinct_time_s
    revocations: np.ndarray  # (rows,): mean revocations per run
    checkpoint_interval_s: np.ndarray  # (rows,): np.inf when no checkpointing is needed

    @property
    def time_s(self) -> np.ndarray:
        """(draws, rows) run times (a copy; callers that can should use the distinct ones)."""
        return np.take(self.distinct_time_s, self.column, axis=1)


def mean_lifetime_s(lifetime) -> float:
    """Mean node life: Weibull(shape, scale), cut at `cap_s` where the provider imposes one
    (the integral of the survival function); inf for nodes that are never revoked."""
    if not math.isfinite(lifetime.scale_s):
        return math.inf
    cap = getattr(lifetime, "cap_s", math.inf)
    if not math.isfinite(cap):
        log_mean = math.log(lifetime.scale_s) + math.lgamma(1.0 + 1.0 / lifetime.shape)
        return math.exp(log_mean) if log_mean < 700 else math.inf
    return _time_alive_s(lifetime, cap)


def time_between_revocations_s(lifetime, window_s: float = FAILURE_WINDOW_S) -> float:
    """Node time per revocation over a node's first `window_s` (or its life, if capped
    sooner): integral of S over the window / (1 - S(window)). The mean life when the hazard is
    flat; for a front-loaded curve (shape << 1) the mean rests on rare near-endless lives, so
    this, not the mean, is what checkpointing must answer. inf for nodes never revoked."""
    if not math.isfinite(lifetime.scale_s):
        return math.inf
    until = min(window_s, getattr(lifetime, "cap_s", math.inf))
    revoked = 1.0 if until < window_s else 1.0 - float(lifetime.survival(until))
    return _time_alive_s(lifetime, until) / revoked if revoked > 0 else math.inf


def _time_alive_s(lifetime, until: float) -> float:
    t = np.linspace(0.0, until, 4097)
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
    log_speed: tuple[np.ndarray, np.ndarray],
    checkpoint_s: np.ndarray,
    overhead_s: np.ndarray,
    lifetimes: Sequence,
    rng: np.random.Generator,
) -> SpotRuns:
    """Run times of spot candidates.

    group: (rows,) index into `lifetimes`, the node life models; nodes: (rows,); work_s:
    (rows,) median compute seconds the run needs without revocations or checkpoints;
    log_speed = (z, sigma): in draw d the row runs exp(z[d] x sigma[row]) times its median
    speed; checkpoint_s, overhead_s: (rows,) cost of one checkpoint and of one revocation.
    Rows that agree on all of these (one instance type in many regions) are simulated once:
    on common draws their runs are the same.
    """
    z, sigma = log_speed
    group_code = np.asarray(group, dtype=np.int64)
    first, inverse = unique_rows(np.column_stack(
        [group_code, nodes, work_s, sigma, checkpoint_s, overhead_s]))
    # Distinct rows ordered by (lifetime, nodes): each simulation group is one column block;
    # by work within it, so that each draw's searchsorted queries come nearly sorted.
    block_key = group_code[first] * (int(nodes.max()) + 1) + nodes[first]
    order = np.lexsort((work_s[first], block_key))
    first, block_key = first[order], block_key[order]
    position = np.empty_like(order)
    position[order] = np.arange(len(order))
    inverse = position[inverse]

    time_s = np.empty((len(z), len(first)))
    revocations = np.zeros(len(first))
    interval = np.full(len(first), np.inf)
    edges = np.r_[0, np.flatnonzero(np.diff(block_key)) + 1, len(first)]
    for start, stop in zip(edges[:-1], edges[1:]):
        of = first[start:stop]
        lifetime, n = lifetimes[group_code[of[0]]], int(nodes[of[0]])
        tau = checkpoint_interval(checkpoint_s[of], time_between_revocations_s(lifetime) / n)
        # Compute plus the checkpoints written every tau of it (Young's overhead C / tau).
        work = np.where(np.isfinite(tau), work_s[of] * (1.0 + checkpoint_s[of] / tau),
                        work_s[of])
        # Few distinct sigmas (one per provenance): exponentiate those, then gather.
        sigmas, which = np.unique(sigma[of], return_inverse=True)
        base = work * np.exp(-np.outer(z, sigmas))[:, which.reshape(-1)]
        # Work lost at a revocation: uniform over one period of compute plus checkpoint.
        period = np.where(np.isfinite(tau), tau + checkpoint_s[of], 0.0)
        interval[start:stop] = tau
        time_s[:, start:stop], revocations[start:stop] = _solve_group(
            lifetime, n, base, overhead_s[of], period, rng)
    return SpotRuns(time_s, inverse, revocations[inverse], interval[inverse])


def unique_rows(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index of the first occurrence of each distinct row of a float matrix, and each row's
    index into those; rows compared as raw bytes, which sorts far faster than axis=0."""
    matrix = np.ascontiguousarray(matrix, dtype=np.float64)
    as_bytes = matrix.view(np.dtype((np.void, matrix.dtype.itemsize * matrix.shape[1])))
    _, first, inverse = np.unique(as_bytes.ravel(), return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def _solve_group(lifetime, nodes, base, overhead, period, rng):
    """Run times (draws, rows) and mean revocations (rows,) of one lifetime model and size;
    base: (draws, rows) run time with checkpoints but without revocations."""
    draws = base.shape[0]
    first, cost_of_row = unique_rows(np.column_stack([overhead, period]))
    costs = np.column_stack([overhead, period])[first]
    limit = min(MAX_HORIZON_S, MAX_SLOWDOWN * float(base.max()))
    horizon = min(limit, 2.0 * float(base.max()) + 1.0)
    while True:
        events = revocation_times(lifetime, nodes, draws, horizon, rng)
        lost = np.zeros((draws, events.shape[1] + 1))
        np.cumsum(rng.random(events.shape), axis=1, out=lost[:, 1:])
        if len(costs) == 1:  # the usual case: no copies of column subsets
            time, count = _finish(events, lost, base, *costs[0])
        else:
            time, count = np.empty_like(base), np.empty(base.shape, dtype=np.int64)
            for i, (cost, lost_per_period) in enumerate(costs):
                rows = np.flatnonzero(cost_of_row == i)
                time[:, rows], count[:, rows] = _finish(events, lost, base[:, rows], cost,
                                                        lost_per_period)
        hopeless, late = time > MAX_SLOWDOWN * base, time > horizon
        if horizon >= limit or not (late & ~hopeless).any():
            break
        horizon = min(limit, 4.0 * horizon)
    time[late | hopeless] = np.inf
    return time, count.mean(axis=0)


def _finish(events, lost, base, cost, lost_per_period):
    """Run times and revocation counts of rows that share the per-revocation costs.

    After k revocations a run would end at base + k x cost + lost_per_period x lost[k]; it
    does end there if the (k+1)-th revocation comes later. So K = the first k with
    h_k = t_(k+1) - k x cost - lost_per_period x lost[k] >= base, which is a searchsorted
    into the running maximum of h (monotone), for every draw and row at once.

    events: (draws, E) sorted, inf-padded; lost: (draws, E + 1) cumulative lost fractions
    (lost[:, 0] = 0); base: (draws, rows)."""
    draws, width = events.shape
    ceiling = float(base.max()) + 1.0  # h above every base acts like +inf
    following = np.concatenate([events, np.full((draws, 1), np.inf)], axis=1)
    h = following - np.arange(width + 1) * cost - lost_per_period * lost
    h = np.clip(np.maximum.accumulate(h, axis=1), 0.0, ceiling)
    # One sorted array for all draws: draw d's values shifted by d x stride; the queries of a
    # draw are contiguous, which keeps the search in cache.
    shift = (np.arange(draws) * (ceiling + 1.0))[:, None]
    count = np.searchsorted((h + shift).ravel(), base + shift)
    count -= (np.arange(draws) * (width + 1))[:, None]
    lost_at = np.take_along_axis(lost, count, axis=1)
    return base + count * cost + lost_per_period * lost_at, count
