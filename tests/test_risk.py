"""The spot Monte Carlo against Daly's closed form and its limits."""

from __future__ import annotations

import math

import numpy as np
import pytest

from advisor.artifact import NodeLifetime
from advisor.risk import checkpoint_interval, mean_lifetime_s, revocation_times, simulate_spot


def run(lifetime, work_s, nodes=1, checkpoint_s=60.0, overhead_s=300.0, draws=4000, seed=7):
    runs = simulate_spot(np.array([0]), np.array([nodes]), np.array([work_s]),
                         (np.zeros(draws), np.zeros(1)), np.array([checkpoint_s]),
                         np.array([overhead_s]), [lifetime], np.random.default_rng(seed))
    assert runs.time_s.shape == (draws, 1)
    return runs


def test_mean_time_matches_dalys_expected_time_for_exponential_lives():
    mtbf, work, ckpt, restart = 6 * 3600.0, 20 * 3600.0, 60.0, 300.0
    runs = run(NodeLifetime("weibull", 1.0, mtbf, "test"), work, checkpoint_s=ckpt,
               overhead_s=restart)
    tau = runs.checkpoint_interval_s[0]
    assert tau == pytest.approx(math.sqrt(2 * ckpt * mtbf))
    # Daly (2006): E[T] = M e^(R/M) (e^((tau+C)/M) - 1) W / tau
    daly = mtbf * math.exp(restart / mtbf) * (math.exp((tau + ckpt) / mtbf) - 1) * work / tau
    assert runs.time_s.mean() == pytest.approx(daly, rel=0.02)
    assert runs.revocations[0] == pytest.approx(runs.time_s.mean() / mtbf, rel=0.05)


def test_endless_lives_mean_no_revocation_and_no_checkpoint():
    runs = run(NodeLifetime("on-demand", 1.0, math.inf, "test"), 3600.0)
    assert (runs.time_s == 3600.0).all()
    assert runs.revocations[0] == 0 and math.isinf(runs.checkpoint_interval_s[0])


def test_more_nodes_mean_more_revocations_and_a_wider_spread():
    life = NodeLifetime("weibull", 0.8, 12 * 3600.0, "test")
    one, eight = run(life, 10 * 3600.0, nodes=1), run(life, 10 * 3600.0, nodes=8)
    assert eight.revocations[0] > 4 * one.revocations[0]
    spread = [np.percentile(r.time_s, 90) - np.percentile(r.time_s, 50) for r in (one, eight)]
    assert spread[1] > spread[0] > 0


def test_revocations_outpacing_progress_never_finish():
    runs = run(NodeLifetime("weibull", 1.0, 60.0, "test"), 3600.0, overhead_s=600.0, draws=50)
    assert np.isinf(runs.time_s).all()


def test_revocation_times_are_sorted_and_respect_the_cap():
    life = NodeLifetime("weibull", 2.0, 50 * 3600.0, "test", cap_s=24 * 3600.0)
    events = revocation_times(life, 1, 300, 10 * 86400.0, np.random.default_rng(1))
    finite = np.where(np.isfinite(events), events, np.nan)
    steps = np.diff(np.c_[np.zeros(300), finite], axis=1)
    assert (steps[~np.isnan(steps)] >= 0).all()
    assert np.nanmax(steps) <= 24 * 3600.0 * (1 + 1e-12)
    assert np.nanmax(finite) < 10 * 86400.0
    # A 24 h cap on a 50 h Weibull(2) life: the mean is the integral of survival to the cap.
    grid = np.linspace(0, 24 * 3600.0, 100001)
    assert mean_lifetime_s(life) == pytest.approx(
        np.exp(-((grid / life.scale_s) ** 2)).mean() * 24 * 3600.0, rel=1e-4)


def test_checkpoint_interval_is_young_daly():
    assert checkpoint_interval(np.array([50.0]), np.array([3600.0]))[0] == pytest.approx(600.0)
    assert math.isinf(checkpoint_interval(np.array([50.0]), np.array([math.inf]))[0])


def test_rows_alike_share_one_simulation_and_keep_their_own_order():
    life = NodeLifetime("weibull", 1.0, 3000.0, "test")
    # rows 0 and 2 agree on everything: one column; row 1 needs less work.
    runs = simulate_spot(np.zeros(3, int), np.array([2, 2, 2]), np.array([9000.0, 4000.0, 9000.0]),
                         (np.zeros(50), np.zeros(3)), np.full(3, 60.0), np.full(3, 300.0),
                         [life], np.random.default_rng(3))
    assert runs.distinct_time_s.shape == (50, 2)
    assert runs.column[0] == runs.column[2] != runs.column[1]
    np.testing.assert_array_equal(runs.time_s[:, 0], runs.time_s[:, 2])
    assert (runs.time_s[:, 1] < runs.time_s[:, 0]).all()
