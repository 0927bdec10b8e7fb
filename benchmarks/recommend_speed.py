"""How fast `advisor recommend` is: the cold start of the whole CLI process, and the scoring
time (throughput, overheads, spot Monte Carlo, ranking) of 100,000 candidates built from the
real catalog.

    .venv/bin/python benchmarks/recommend_speed.py [--runs 5] [--candidates 100000]

The 100k candidates are the shipped offerings x 1..8 nodes x market, repeated as synthetic
instance variants (same provider, region and GPU; prices and network jittered +-20%) until the count is
reached, so the estimator and the revocation models see real markets.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path


def cold_start(runs: int) -> list[float]:
    script = Path(sys.executable).parent / "advisor"  # the installed console script
    command = [str(script), "recommend", "resnet50", "--deadline", "24h", "--format", "json"]
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        seconds.append(time.perf_counter() - start)
    return seconds


def synthetic_offerings(count: int, max_nodes: int, seed: int = 0):
    import numpy as np

    from cloud.catalog import load_catalog

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        real = load_catalog().as_arrays()
    per_copy = max_nodes * int(len(real["provider"]) + np.isfinite(real["price_spot"]).sum())
    copies = -(-count // per_copy)
    rng = np.random.default_rng(seed)
    arrays = {k: np.concatenate([v] * copies) for k, v in real.items()}
    variant = np.repeat(np.arange(copies), len(real["provider"])).astype(str)
    arrays["instance_type"] = np.char.add(np.char.add(arrays["instance_type"], "-v"), variant)
    # Distinct prices and network bandwidths: multi-node variants differ in predicted
    # throughput too, so the Monte Carlo cannot share one simulation among the copies.
    for column in ("price_on_demand", "price_spot", "network_gbps"):
        arrays[column] = arrays[column] * rng.uniform(0.8, 1.2, len(variant))
    return arrays


def scoring(count: int, repeats: int) -> tuple[int, list[float]]:
    from advisor.artifact import load_artifact
    from advisor.candidates import Filters, enumerate_candidates
    from advisor.optimizer import Constraints, rank_plans
    from advisor.workload import build_workload
    from profiler.cards import load_cards

    work = build_workload(load_cards(), "resnet50")
    candidates = enumerate_candidates(synthetic_offerings(count, 8), work, Filters(max_nodes=8))
    candidates = candidates.take(slice(0, count))
    artifact = load_artifact()
    constraints = Constraints(deadline_s=24 * 3600.0)
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        rank_plans(work, candidates, artifact, artifact.lifetime, constraints)
        seconds.append(time.perf_counter() - start)
    return len(candidates), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="cold starts to time")
    parser.add_argument("--candidates", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3, help="scorings to time")
    args = parser.parse_args()

    starts = cold_start(args.runs)
    print(f"cold start, `advisor recommend resnet50 --deadline 24h --format json` "
          f"(whole process, {args.runs} runs): median {statistics.median(starts):.3f} s, "
          f"min {min(starts):.3f} s")
    count, seconds = scoring(args.candidates, args.repeats)
    print(f"scoring {count:,} candidates (spot Monte Carlo included, {args.repeats} runs): "
          f"median {statistics.median(seconds):.3f} s, min {min(seconds):.3f} s")


if __name__ == "__main__":
    main()
