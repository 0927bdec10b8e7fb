"""When a throughput measurement may stop: skip warm-up, then measure until the estimate is
stable.

Step times are not independent (a slow step often follows a slow step: allocator, clocks,
other tenants), so the textbook interval mean +- t * s / sqrt(n) is too narrow and would stop
too early. Two standard tools of simulation output analysis fix that:

- warm-up: MSER-5 (White 1997), which truncates the prefix that minimises the standard error
  of the remaining batch-of-5 means, searched over the first half of the series;
- the interval: non-overlapping batch means (a fixed number of batches whose size grows with
  the series, Schmeiser 1982), whose means are close to independent once batches are long
  enough, with a Student-t quantile on batches - 1 degrees of freedom.

Throughput is samples per step / mean step time, so its relative half-width is the mean step
time's (to first order); the rule stops when that is within the tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from gpuadvisor.vocab import THROUGHPUT_CI_LEVEL

MSER_BATCH = 5


def warmup_length(step_times: np.ndarray, min_steps: int = 0) -> int:
    """Steps to discard as warm-up (MSER-5), at least `min_steps`."""
    n = len(step_times) // MSER_BATCH
    if n < 4:
        return min(max(min_steps, 0), len(step_times))
    z = np.asarray(step_times[: n * MSER_BATCH], dtype=float).reshape(n, MSER_BATCH).mean(axis=1)
    z = z - z.mean()  # centred, so that the suffix sums below do not lose digits
    # MSER(d) = sum_{i>=d} (z_i - mean_d)^2 / (n - d)^2, from suffix sums in O(n).
    suffix_sum = np.cumsum(z[::-1])[::-1]
    suffix_sq = np.cumsum((z * z)[::-1])[::-1]
    remaining = n - np.arange(n)
    mser = (suffix_sq - suffix_sum**2 / remaining) / remaining**2
    d = int(np.argmin(mser[: n // 2 + 1]))
    return max(d * MSER_BATCH, min_steps)


@dataclass(frozen=True)
class Interval:
    """95% (or `confidence`) interval of the mean step time."""

    mean: float
    half_width: float
    batches: int

    @property
    def relative(self) -> float:
        return self.half_width / self.mean if self.mean > 0 else float("inf")

    def throughput(self, samples_per_step: float) -> tuple[float, float, float]:
        """(estimate, low, high) of samples/s."""
        low_time = self.mean - self.half_width
        high = samples_per_step / low_time if low_time > 0 else float("inf")
        return samples_per_step / self.mean, samples_per_step / (self.mean + self.half_width), high


def batch_means_interval(
    step_times: np.ndarray, batches: int = 20, confidence: float = THROUGHPUT_CI_LEVEL
) -> Interval | None:
    """Batch-means interval of the mean; None while there are fewer than 2 steps per batch."""
    x = np.asarray(step_times, dtype=float)
    size = len(x) // batches
    if size < 2:
        return None
    # Drop the oldest leftover steps so that every batch has the same length.
    means = x[len(x) - size * batches :].reshape(batches, size).mean(axis=1)
    half = t_quantile(confidence, batches - 1) * float(means.std(ddof=1)) / float(np.sqrt(batches))
    return Interval(mean=float(x.mean()), half_width=half, batches=batches)


@lru_cache(maxsize=None)
def t_quantile(confidence: float, degrees_of_freedom: int) -> float:
    """Two-sided Student-t quantile (scipy is imported here, once)."""
    from scipy.stats import t

    return float(t.ppf(0.5 + confidence / 2, degrees_of_freedom))


@dataclass(frozen=True)
class Verdict:
    warmup_steps: int
    interval: Interval | None  # of the steps after warm-up
    stable: bool  # the interval meets the tolerance


class StoppingRule:
    """Feed step times with `add`; `verdict()` says how much is warm-up and whether to stop."""

    def __init__(
        self,
        tolerance: float = 0.02,
        min_warmup_steps: int = 5,
        min_measure_steps: int = 40,
        batches: int = 20,
    ):
        self.tolerance = tolerance
        self.min_warmup_steps = min_warmup_steps
        self.min_measure_steps = max(min_measure_steps, 2 * batches)
        self.batches = batches
        self.times: list[float] = []
        t_quantile(THROUGHPUT_CI_LEVEL, batches - 1)  # now, not in the middle of a timed step

    def add(self, step_time: float) -> None:
        self.times.append(step_time)

    def verdict(self) -> Verdict:
        times = np.asarray(self.times, dtype=float)
        warmup = warmup_length(times, self.min_warmup_steps)
        measured = times[warmup:]
        if len(measured) < self.min_measure_steps:
            return Verdict(warmup, None, False)
        interval = batch_means_interval(measured, self.batches)
        stable = bool(interval is not None and interval.relative <= self.tolerance)
        return Verdict(warmup, interval, stable)
