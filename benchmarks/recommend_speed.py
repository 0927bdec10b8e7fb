"""How fast `advisor recommend` is: the cold start of the whole CLI process, and the scoring
time (throughput, overheads, spot Monte Carlo, ranking) of 100,000 candidates built from the
real catalog.

    .venv/bin/python benchmarks/recommend_speed.py [--runs 5] [--candidates 100000]

The 100k candidates are the shipped offerings x 1..8 nodes x market, repeated as synthetic
instance variants (same provider, region and GPU; prices and network jittered +-20%) until
the count is reached, so the estimator and the revocation models see real markets.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

from advisor.optimizer import DRAWS

COMMAND = ["recommend", "--model", "resnet50", "--deadline", "24h", "--format", "json"]


def cold_start(runs: int) -> tuple[list[float], list[float]]:
    """Wall and CPU (user + system) seconds of whole `advisor recommend` processes."""
    script = Path(sys.executable).parent / "advisor"  # the installed console script
    command = [str(script), *COMMAND]
    # As installed: with the bytecode caches that pip writes (an untimed first run writes them
    # here even where PYTHONDONTWRITEBYTECODE is set).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(command, check=True, capture_output=True, env=env)
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, env=env)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus


def synthetic_candidates(workload, count: int, seed: int = 0):
    """`count` candidates: the real offerings' candidates, then synthetic variants of them."""
    import numpy as np

    from advisor.candidates import Filters, enumerate_candidates
    from cloud.catalog import load_catalog

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        real = load_catalog().as_arrays()
    per_copy = len(enumerate_candidates(real, workload, Filters(max_nodes=8)))
    copies = -(-count // per_copy)
    rng = np.random.default_rng(seed)
    arrays = {k: np.concatenate([v] * copies) for k, v in real.items()}
    variant = np.repeat(np.arange(copies), len(real["provider"])).astype(str)
    arrays["instance_type"] = np.char.add(np.char.add(arrays["instance_type"], "-v"), variant)
    # Distinct prices and network bandwidths: multi-node variants differ in predicted
    # throughput too, so the Monte Carlo cannot share one simulation among the copies.
    for column in ("price_on_demand", "price_spot", "network_gbps"):
        arrays[column] = arrays[column] * rng.uniform(0.8, 1.2, len(variant))
    candidates = enumerate_candidates(arrays, workload, Filters(max_nodes=8))
    return candidates.take(np.arange(count))


def scoring(count: int, repeats: int):
    """Wall and CPU seconds of rank_plans over `count` candidates; the estimator's share."""
    from advisor.api import node_lifetimes
    from advisor.artifact import load_artifact
    from advisor.optimizer import Constraints, rank_plans
    from advisor.workload import build_workload
    from gpuadvisor.cards import load_cards

    work = build_workload(load_cards(), "resnet50")
    candidates = synthetic_candidates(work, count)
    artifact = load_artifact()
    predict_s = []

    class Timed:  # the artifact, with its predict time counted apart
        def predict(self, target, features):
            start = time.process_time()
            prediction = artifact.predict(target, features)
            predict_s[-1] += time.process_time() - start
            return prediction

    walls, cpus = [], []
    for _ in range(repeats):
        predict_s.append(0.0)
        wall, cpu = time.perf_counter(), time.process_time()
        plans = rank_plans(work, candidates, candidates.features(work), Timed(),
                           node_lifetimes(artifact, candidates.spot_markets()),
                           Constraints(deadline_s=24 * 3600.0))
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return len(candidates), int(plans["spot"].sum()), walls, cpus, predict_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="cold starts to time")
    parser.add_argument("--candidates", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3, help="scorings to time")
    args = parser.parse_args()

    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs "
          "(wall times grow with it; CPU times much less)")
    walls, cpus = cold_start(args.runs)
    print(f"cold start, `advisor {' '.join(COMMAND)}` (whole process, {args.runs} runs): "
          f"wall median {statistics.median(walls):.3f} s, "
          f"CPU median {statistics.median(cpus):.3f} s")
    count, spot, walls, cpus, predict = scoring(args.candidates, args.repeats)
    print(f"scoring {count:,} candidates ({spot:,} spot, {DRAWS} Monte Carlo draws each; "
          f"{args.repeats} runs): wall median {statistics.median(walls):.3f} s, CPU median "
          f"{statistics.median(cpus):.3f} s, of which Artifact.predict "
          f"{statistics.median(predict):.3f} s")


if __name__ == "__main__":
    main()
