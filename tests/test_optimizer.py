"""The optimizer picks what a brute-force search over the same fixture picks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_recommend_fixtures import OFFERINGS, SAMPLES_PER_GPU_S, Estimator, candidates_for, rank

from advisor.optimizer import Constraints, rank_plans
from advisor.reasons import Cut, Reason


def brute_force_on_demand(deadline_s=None, budget=None, max_nodes=4):
    """Exact time and cost of every on-demand plan by hand (no throughput spread)."""
    plans = []
    for _, _, instance, gpu, gpus, _, price, _ in OFFERINGS:
        for nodes in range(1, max_nodes + 1):
            throughput = SAMPLES_PER_GPU_S[gpu] * gpus * nodes**0.9
            time = 120.0 + 50000 * 10 / throughput
            cost = nodes * price * time / 3600.0
            if (deadline_s is None or time <= deadline_s) and (budget is None or cost <= budget):
                plans.append((instance, nodes, time, cost))
    return plans


def on_demand_only(candidates):
    return candidates.take(np.flatnonzero(~candidates["spot"]))


def test_deadline_mode_picks_the_cheapest_plan_that_meets_it():
    work, cands = candidates_for()
    plans = rank(work, on_demand_only(cands), Estimator(spread=0.0), Estimator().lifetime,
                       Constraints(deadline_s=1800.0))
    expected = min(brute_force_on_demand(deadline_s=1800.0), key=lambda p: p[3])
    pick = plans.pick
    assert (plans["instance_type"][pick], plans["nodes"][pick]) == expected[:2]
    assert plans["time_conf"][pick] == pytest.approx(expected[2])
    assert plans["cost_conf"][pick] == pytest.approx(expected[3])
    assert len(plans.ranked) == len(brute_force_on_demand(deadline_s=1800.0))


def test_budget_mode_picks_the_fastest_plan_within_it():
    work, cands = candidates_for()
    plans = rank(work, on_demand_only(cands), Estimator(spread=0.0), Estimator().lifetime,
                       Constraints(budget_usd=1.0))
    expected = min(brute_force_on_demand(budget=1.0), key=lambda p: p[2])
    assert (plans["instance_type"][plans.pick], plans["nodes"][plans.pick]) == expected[:2]


def test_both_constraints_pick_the_cheapest_plan_meeting_both():
    work, cands = candidates_for()
    plans = rank(work, on_demand_only(cands), Estimator(spread=0.0), Estimator().lifetime,
                       Constraints(deadline_s=900.0, budget_usd=2.0))
    feasible = brute_force_on_demand(deadline_s=900.0, budget=2.0)
    assert feasible, "fixture should leave some plan meeting both"
    expected = min(feasible, key=lambda p: p[3])
    assert (plans["instance_type"][plans.pick], plans["nodes"][plans.pick]) == expected[:2]
    assert {(plans["instance_type"][r], plans["nodes"][r]) for r in plans.ranked} == {
        p[:2] for p in feasible}


def test_spot_plans_are_ranked_by_their_cost_at_the_confidence_level():
    work, cands = candidates_for()
    constraints = Constraints(deadline_s=3600.0, confidence=0.8)
    plans = rank(work, cands, Estimator(), Estimator().lifetime, constraints)
    rows = range(len(cands))
    feasible = [r for r in rows if plans["time_conf"][r] <= 3600.0]
    assert sorted(plans.ranked.tolist()) == sorted(feasible)
    assert plans.pick == min(feasible, key=lambda r: (plans["cost_conf"][r], plans["time_conf"][r]))
    assert plans["spot"][plans.pick], "spot is far cheaper and a one-hour run is rarely revoked"
    # The time at 80% is the empirical quantile: at least 80% of draws finish by it.
    assert (plans["p_deadline"][feasible] >= 0.8).all()


def test_nothing_feasible_leaves_no_pick_and_counts_the_misses():
    work, cands = candidates_for()
    plans = rank(work, cands, Estimator(), Estimator().lifetime,
                       Constraints(deadline_s=60.0))
    assert plans.pick is None
    assert plans.misses[Cut(Reason.MISSES_DEADLINE, confidence=0.9)] == len(cands)


def test_spot_with_endless_lifetimes_takes_as_long_as_on_demand():
    work, cands = candidates_for()
    estimator = Estimator(spot_life_s=math.inf)
    plans = rank(work, cands, estimator, lambda *key: estimator.lifetime(*key[:3], False),
                       Constraints(deadline_s=1400.0))
    spot = np.flatnonzero(cands["spot"])
    on_demand = {(cands["offering"][r], cands["nodes"][r]): r
                 for r in np.flatnonzero(~cands["spot"])}
    twins = [on_demand[(cands["offering"][r], cands["nodes"][r])] for r in spot]
    for q in ("time_p50", "time_p90", "time_conf"):
        np.testing.assert_allclose(plans[q][spot], plans[q][twins], rtol=1e-6)
    np.testing.assert_array_equal(plans["p_deadline"][spot], plans["p_deadline"][twins])
    assert ((plans["p_deadline"] > 0) & (plans["p_deadline"] < 1)).any()
    assert (plans["revocations"][spot] == 0).all()


def test_revocations_lengthen_spot_runs_and_p90_is_never_below_p50():
    work, cands = candidates_for(epochs=200)
    estimator = Estimator(spot_life_s=2 * 3600.0)
    plans = rank(work, cands, estimator, estimator.lifetime, Constraints(budget_usd=1e6))
    spot = cands["spot"]
    assert (plans["time_p90"] >= plans["time_p50"]).all()
    assert (plans["cost_p90"] >= plans["cost_p50"]).all()
    assert (plans["revocations"][spot] > 0).all()
    on_demand = {(cands["offering"][r], cands["nodes"][r]): r for r in np.flatnonzero(~spot)}
    for r in np.flatnonzero(spot):
        assert plans["time_p50"][r] > plans["time_p50"][on_demand[(cands["offering"][r],
                                                                  cands["nodes"][r])]]


def test_the_same_seed_gives_the_same_plans():
    work, cands = candidates_for()
    estimator = Estimator(spot_life_s=1800.0)
    runs = [rank(work, cands, estimator, estimator.lifetime, Constraints(deadline_s=7200.0))
            for _ in range(2)]
    np.testing.assert_array_equal(runs[0]["time_p90"], runs[1]["time_p90"])
    np.testing.assert_array_equal(runs[0].ranked, runs[1].ranked)


def test_candidates_without_a_throughput_prediction_are_set_aside():
    class Partial(Estimator):
        def predict(self, target, features):
            prediction = super().predict(target, features)
            if target == "throughput":
                prediction.value[features["gpu"] == "T4"] = np.nan
            return prediction

    work, cands = candidates_for()
    plans = rank(work, cands, Partial(), Estimator().lifetime, Constraints(deadline_s=1e5))
    t4 = int((cands["gpu_type"] == "T4").sum())
    assert len(plans.candidates) == len(cands) - t4
    assert plans.candidates.dropped[Cut(Reason.NO_THROUGHPUT)] == t4
    assert "T4" not in set(plans["gpu_type"])


def test_spot_quantiles_and_probabilities_are_those_of_the_draws(monkeypatch):
    """The optimizer reads quantiles off the distinct simulations and adds each row's start-up
    after: the same numbers as order statistics of every row's own draws."""
    import advisor.optimizer as optimizer

    simulated = []
    real = optimizer.simulate_spot
    monkeypatch.setattr(optimizer, "simulate_spot",
                        lambda *args: simulated.append(real(*args)) or simulated[-1])
    work, cands = candidates_for(epochs=50)
    estimator = Estimator(spot_life_s=3 * 3600.0)
    deadline, budget = 2500.0, 0.9  # inside the spread of several plans
    plans = rank(work, cands, estimator, estimator.lifetime,
                       Constraints(deadline_s=deadline, budget_usd=budget, confidence=0.8))
    spot = np.flatnonzero(cands["spot"])
    total = simulated[0].time_s + plans["startup_s"][spot]  # (draws, spot rows)
    ordered = np.sort(total, axis=0)
    np.testing.assert_allclose(plans["time_p50"][spot], ordered[99], rtol=1e-6)
    np.testing.assert_allclose(plans["time_conf"][spot], ordered[159], rtol=1e-6)
    np.testing.assert_allclose(plans["p_deadline"][spot], (total <= deadline).mean(axis=0))
    cost_per_s = cands["nodes"][spot] * cands["price_per_node_hour"][spot] / 3600.0
    np.testing.assert_allclose(plans["p_budget"][spot],
                               (total * cost_per_s <= budget).mean(axis=0), atol=0.011)
    for p in ("p_deadline", "p_budget"):
        assert ((plans[p][spot] > 0) & (plans[p][spot] < 1)).any()


def test_ranking_opens_no_file(monkeypatch):
    """The optimizer is pure: with the shipped artifact and catalog, every input resolved
    beforehand as advisor.api does, ranking opens no file."""
    import builtins
    import io
    import os

    from advisor.api import node_lifetimes
    from advisor.artifact import load_artifact
    from advisor.candidates import Filters, enumerate_candidates
    from advisor.workload import build_workload
    from cloud.catalog import load_catalog
    from gpuadvisor.cards import load_cards

    work = build_workload(load_cards(), "resnet50")
    cands = enumerate_candidates(load_catalog().as_arrays(), work, Filters(max_nodes=2))
    artifact = load_artifact()
    features, lifetimes = cands.features(work), node_lifetimes(artifact, cands.spot_markets())
    assert any(market[0] == "aws" for market in lifetimes)

    def refuse(path, *args, **kwargs):
        raise AssertionError(f"rank_plans opened {path!r}")

    for module, name in ((builtins, "open"), (io, "open"), (os, "open")):
        monkeypatch.setattr(module, name, refuse)
    plans = rank_plans(work, cands, features, artifact, lifetimes, Constraints(deadline_s=86400))
    monkeypatch.undo()
    assert plans.pick is not None and plans["spot"].any()
