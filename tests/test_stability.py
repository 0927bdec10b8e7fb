"""The stopping rule on synthetic step-time series whose truth is known."""

import numpy as np
import pytest

from profiler.stability import StoppingRule, batch_means_interval, warmup_length


def ar1(rng, n, mean=0.1, phi=0.8, sigma=0.005):
    """Autocorrelated step times: x_t - mean = phi (x_{t-1} - mean) + noise."""
    x = np.empty(n)
    x[0] = rng.normal(0, sigma / np.sqrt(1 - phi**2))
    noise = rng.normal(0, sigma, n)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + noise[i]
    return mean + x


def test_warmup_found_after_a_decaying_transient():
    rng = np.random.default_rng(1)
    steady = 0.1 + rng.normal(0, 0.002, 400)
    transient = np.zeros(400)
    transient[:30] = np.linspace(0.5, 0.05, 30)  # slow first steps (compilation, allocator)
    w = warmup_length(steady + transient, min_steps=5)
    assert 25 <= w <= 60


def test_warmup_is_the_minimum_on_a_stationary_series():
    rng = np.random.default_rng(2)
    assert warmup_length(0.1 + rng.normal(0, 0.002, 400), min_steps=5) <= 25


def test_batch_means_cover_the_true_mean_of_an_autocorrelated_series():
    rng = np.random.default_rng(3)
    hits, naive_hits, trials = 0, 0, 300
    for _ in range(trials):
        x = ar1(rng, 2000)
        interval = batch_means_interval(x, batches=20)
        hits += abs(interval.mean - 0.1) <= interval.half_width
        naive_half = 1.96 * x.std(ddof=1) / np.sqrt(len(x))
        naive_hits += abs(x.mean() - 0.1) <= naive_half
    assert hits / trials >= 0.88  # nominal 95%
    assert naive_hits / trials < 0.75  # what the rule would get by assuming independence


def test_interval_needs_two_steps_per_batch():
    assert batch_means_interval(np.ones(39), batches=20) is None
    interval = batch_means_interval(np.full(40, 0.5), batches=20)
    assert interval.mean == pytest.approx(0.5) and interval.half_width == pytest.approx(0)


def test_throughput_interval_brackets_the_estimate():
    interval = batch_means_interval(0.1 + np.random.default_rng(4).normal(0, 0.01, 200))
    value, lo, hi = interval.throughput(32)
    assert lo < value < hi
    assert value == pytest.approx(32 / interval.mean)


def test_rule_stops_only_once_the_tolerance_is_met():
    rng = np.random.default_rng(5)
    rule = StoppingRule(tolerance=0.02, min_warmup_steps=5, min_measure_steps=40)
    series = np.concatenate([np.linspace(0.6, 0.12, 20), ar1(rng, 3000, sigma=0.01)])
    stopped_at = None
    for i, step_time in enumerate(series, 1):
        rule.add(step_time)
        if i % 10 == 0 and rule.verdict().stable:
            stopped_at = i
            break
    assert stopped_at is not None
    verdict = rule.verdict()
    assert verdict.warmup_steps >= 15
    assert verdict.interval.relative <= 0.02
    assert abs(verdict.interval.mean - 0.1) <= 3 * verdict.interval.half_width
    # A noisier series of the same length needs more steps to meet the same tolerance.
    noisy = StoppingRule(tolerance=0.02)
    for step_time in ar1(rng, stopped_at, sigma=0.04):
        noisy.add(step_time)
    assert not noisy.verdict().stable


def test_rule_waits_for_the_minimum_measured_steps():
    rule = StoppingRule(min_warmup_steps=5, min_measure_steps=40)
    for _ in range(44):
        rule.add(0.1)
    assert not rule.verdict().stable
    rule.add(0.1)
    assert rule.verdict().stable
