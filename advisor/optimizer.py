"""Rank candidate clusters for a workload: a pure function of (workload, candidates, their
features, estimator, node-lifetime models, constraints) to plans, vectorised over every
candidate. No I/O: the caller (advisor.api) resolves the features and the lifetime model of
every spot market beforehand.

Time of a plan = start-up + samples / throughput, plus, on spot, what revocations cost
(advisor.risk). The estimator's throughput interval is read as a log-normal error shared by
all candidates in each draw (common random numbers), so on-demand plans have a spread too and
every plan is compared on the same draws. Quantiles are empirical over the draws; a plan meets
the deadline (budget) when its time (cost) at the chosen confidence does.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

from advisor.candidates import Candidates
from advisor.reasons import Cut, Reason
from advisor.risk import simulate_spot
from advisor.workload import Workload

DRAWS = 200
SEED = 2020


@dataclass(frozen=True)
class Constraints:
    deadline_s: float | None = None
    budget_usd: float | None = None
    confidence: float = 0.9


@dataclass
class Plans:
    """Scores of every candidate (same row order) and the ranking of the feasible ones."""

    candidates: Candidates
    constraints: Constraints
    scores: dict[str, np.ndarray]
    ranked: np.ndarray  # feasible rows, best first
    misses: Counter = field(default_factory=Counter)  # Cut -> candidates missing it

    @property
    def pick(self) -> int | None:
        return int(self.ranked[0]) if len(self.ranked) else None

    def __getitem__(self, name: str) -> np.ndarray:
        return self.scores[name] if name in self.scores else self.candidates[name]


def rank_plans(
    workload: Workload,
    candidates: Candidates,
    features: Mapping[str, np.ndarray],
    estimator,
    lifetimes: Mapping[tuple[str, str, str], object],
    constraints: Constraints,
    draws: int = DRAWS,
    seed: int = SEED,
) -> Plans:
    """Score every candidate and rank the feasible ones: cheapest at the confidence level when
    there is a deadline, fastest when there is only a budget. `features` are
    `candidates.features(workload)`; `lifetimes` map every (provider, GPU, region) of
    `candidates.spot_markets()` to its spot nodes' NodeLifetime. The estimator's predict must do
    no I/O (Artifact's does not)."""
    rng = np.random.default_rng(seed)
    throughput = estimator.predict("throughput", features)
    usable = np.isfinite(throughput.value) & (throughput.value > 0)
    if not usable.all():  # rare: score the rest, and say what was set aside
        rows = np.flatnonzero(usable)
        kept = candidates.take(rows)
        kept.dropped = kept.dropped + Counter({Cut(Reason.NO_THROUGHPUT): int((~usable).sum())})
        return rank_plans(workload, kept, _subset(features, rows), estimator, lifetimes,
                          constraints, draws, seed)
    startup = estimator.predict("startup_s", features).value
    nodes, spot = candidates["nodes"], candidates["spot"]
    samples = workload.total_samples(nodes * candidates["gpus_per_node"])
    price = candidates["price_per_node_hour"]

    z = np.sort(rng.standard_normal(draws))  # shared log-throughput errors, ascending
    sigma = _log_sigma(throughput)
    quantiles = {"p50": 0.5, "p90": 0.9, "conf": constraints.confidence}
    time = {name: np.empty(len(candidates)) for name in quantiles}
    within = {"deadline": np.ones(len(candidates)), "budget": np.ones(len(candidates))}
    revocations = np.zeros(len(candidates))
    interval = np.full(len(candidates), np.inf)
    checkpoint = np.full(len(candidates), np.nan)  # seconds of one save, spot plans only
    hour_cost = nodes * price / 3600.0  # USD per second of the whole cluster

    # On demand: time falls as the throughput error z rises, so its quantiles and
    # probabilities come straight from the sorted z draws.
    od = np.flatnonzero(~spot)
    work = samples[od] / throughput.value[od]
    for name, q in quantiles.items():
        z_at = z[draws - _order_index(q, draws) - 1]
        time[name][od] = startup[od] + work * np.exp(-sigma[od] * z_at)
    for name, limit in _limits_s(constraints, hour_cost[od]).items():
        within[name][od] = _share_faster(z, sigma[od], work, limit - startup[od])

    # Spot: Monte Carlo over revocations on the same draws.
    sp = np.flatnonzero(spot)
    if len(sp):
        sub = _subset(features, sp)
        keys, models = _lifetime_groups(candidates, sp, lifetimes)
        # The rendezvous holds every node until the replacement has started and rejoined:
        # the whole cluster waits out the replacement's start-up, whatever its size.
        overhead = estimator.predict("recovery_s", sub).value + startup[sp]
        checkpoint[sp] = estimator.predict("checkpoint_s", sub).value
        runs = simulate_spot(keys, nodes[sp], samples[sp] / throughput.value[sp],
                             (z, sigma[sp]), checkpoint[sp], overhead, models, rng)
        # Quantiles of the distinct simulations, start-up (a constant per row) added after.
        # A sort along the draws is faster than a partition at three quantiles; float32
        # halves its work, times keep 7 significant digits.
        ranked = np.sort(runs.distinct_time_s.astype(np.float32), axis=0)
        for name, q in quantiles.items():
            time[name][sp] = ranked[_order_index(q, draws)][runs.column] + startup[sp]
        for name, limit in _limits_s(constraints, hour_cost[sp]).items():
            room = (limit - startup[sp]).astype(np.float32)
            within[name][sp] = np.count_nonzero(
                np.take(ranked, runs.column, axis=1) <= room, axis=0) / draws
        revocations[sp], interval[sp] = runs.revocations, runs.checkpoint_interval_s

    scores = {
        "throughput": throughput.value, "throughput_lo": throughput.lo,
        "throughput_hi": throughput.hi, "provenance": np.asarray(throughput.provenance, str),
        "startup_s": startup, "revocations": revocations, "checkpoint_interval_s": interval,
        "checkpoint_s": checkpoint,
        "p_deadline": within["deadline"], "p_budget": within["budget"],
    }
    for name in quantiles:
        scores[f"time_{name}"] = time[name]
        scores[f"cost_{name}"] = time[name] * hour_cost
    return _rank(candidates, constraints, scores)


def _lifetime_groups(candidates: Candidates, rows: np.ndarray, lifetimes: Mapping):
    """Each row's index into a list of distinct node life models, and that list. Markets
    whose nodes live alike share a model, hence one set of simulated revocations."""
    _, first, inverse = np.unique(candidates["offering"][rows], return_index=True,
                                  return_inverse=True)
    at = rows[first]
    models: list = []
    code_of_model: dict = {}  # (shape, scale, cap) -> index into models
    code_of_market: dict = {}  # (provider, gpu, region) -> index into models
    markets = list(zip(*(candidates[c][at].tolist() for c in ("provider", "gpu_type", "region"))))
    for market in markets:
        if market not in code_of_market:
            model = lifetimes[market]
            key = (model.shape, model.scale_s, getattr(model, "cap_s", math.inf))
            if key not in code_of_model:
                code_of_model[key] = len(models)
                models.append(model)
            code_of_market[market] = code_of_model[key]
    codes = [code_of_market[market] for market in markets]
    return np.array(codes, dtype=np.int64)[inverse.reshape(-1)], models


def _subset(features: dict, rows: np.ndarray) -> dict:
    return {key: np.asarray(value)[rows] for key, value in features.items()}


def _rank(candidates: Candidates, constraints: Constraints, scores: dict) -> Plans:
    time, cost = scores["time_conf"], scores["cost_conf"]
    feasible = np.isfinite(time)
    misses: Counter = Counter()
    misses[Cut(Reason.NEVER_FINISHES)] = int((~np.isfinite(time)).sum())
    at = constraints.confidence
    if constraints.deadline_s is not None:
        late = np.isfinite(time) & (time > constraints.deadline_s)
        misses[Cut(Reason.MISSES_DEADLINE, confidence=at)] = int(late.sum())
        feasible &= ~late
    if constraints.budget_usd is not None:
        over = np.isfinite(cost) & (cost > constraints.budget_usd)
        misses[Cut(Reason.OVER_BUDGET, confidence=at)] = int(over.sum())
        feasible &= ~over
    rows = np.flatnonzero(feasible)
    if constraints.deadline_s is not None:
        ranked = rows[np.lexsort((time[rows], cost[rows]))]  # cheapest, then fastest
    else:
        ranked = rows[np.lexsort((cost[rows], time[rows]))]  # fastest, then cheapest
    return Plans(candidates, constraints, scores, ranked, +misses)


def _order_index(q: float, draws: int) -> int:
    """0-based index of the empirical q-quantile (smallest value with CDF >= q)."""
    return min(draws - 1, max(0, math.ceil(q * draws) - 1))


def _log_sigma(prediction) -> np.ndarray:
    """Standard deviation of log throughput implied by the interval [lo, hi] at the level the
    estimator calibrated it for."""
    z = NormalDist().inv_cdf(0.5 + prediction.level / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        sigma = np.log(prediction.hi / prediction.lo) / (2 * z)
    return np.where(np.isfinite(sigma) & (sigma > 0), sigma, 0.0)


def _limits_s(constraints: Constraints, cost_per_s: np.ndarray) -> dict[str, np.ndarray]:
    """Seconds each candidate may run to meet the deadline and to stay within the budget."""
    limits = {}
    if constraints.deadline_s is not None:
        limits["deadline"] = np.full(len(cost_per_s), constraints.deadline_s)
    if constraints.budget_usd is not None:
        limits["budget"] = constraints.budget_usd / cost_per_s
    return limits


def _share_faster(z: np.ndarray, sigma: np.ndarray, work: np.ndarray, room: np.ndarray):
    """Share of draws with work x exp(-sigma z) <= room, z sorted: z >= log(work/room)/sigma."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.log(work / np.where(room > 0, room, np.nan))
        threshold = np.where(sigma > 0, ratio / sigma, np.where(ratio <= 0, -np.inf, np.inf))
    threshold = np.where(room > 0, threshold, np.inf)
    return 1.0 - np.searchsorted(z, threshold, side="left") / len(z)
