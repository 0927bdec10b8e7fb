"""Small fixtures that follow docs/interfaces.md (model cards, catalog arrays, an estimator
with the Artifact's predict/lifetime), shared by the recommend tests; the CLI tests use the
shipped files instead."""

from __future__ import annotations

import math

import numpy as np

from advisor.artifact import NodeLifetime, Prediction
from advisor.candidates import Filters, enumerate_candidates
from advisor.optimizer import rank_plans
from advisor.workload import build_workload
from cloud.gpus import gpu_spec

CARDS = {
    "tinynet": {
        "model": "tinynet", "family": "resnet", "task": "image", "dataset": "cifar10",
        "samples_per_epoch": "50000", "epochs": "10", "image_size": "32", "seq_len": "",
        "batch_per_gpu": "128", "params": "1e6", "gradient_bytes": "4e6",
        "forward_flops_per_sample": "1e8", "flops_per_sample": "3e8",
        "activation_bytes_per_sample": "2e6", "torch_version": "2.13.0", "source": "test",
    },
    "hugenet": {
        "model": "hugenet", "family": "gpt", "task": "text", "dataset": "web",
        "samples_per_epoch": "1000000", "epochs": "1", "image_size": "", "seq_len": "1024",
        "batch_per_gpu": "8", "params": "1.5e9", "gradient_bytes": "6e9",
        "forward_flops_per_sample": "3e12", "flops_per_sample": "9e12",
        "activation_bytes_per_sample": "2e9", "torch_version": "2.13.0", "source": "test",
    },
}

# provider, region, instance, gpu, gpus/node, network, on-demand $/h, spot $/h (nan: none)
OFFERINGS = [
    ("gcp", "us-central1", "n1-standard-8-t4", "T4", 1, 16.0, 0.73, 0.25),
    ("gcp", "us-central1", "n1-standard-16-v100x2", "V100", 2, 32.0, 5.7, 1.9),
    ("gcp", "europe-west4", "a2-highgpu-1g", "A100-40GB", 1, 24.0, 3.67, math.nan),
    ("aws", "us-east-1", "g4dn.12xlarge", "T4", 4, 50.0, 3.91, 1.6),
    ("aws", "us-east-1", "p3.8xlarge", "V100", 4, 10.0, 12.24, 3.7),
]
SAMPLES_PER_GPU_S = {"T4": 400.0, "V100": 900.0, "A100-40GB": 2000.0}


def offering_arrays(rows=OFFERINGS) -> dict[str, np.ndarray]:
    columns = list(zip(*rows))
    return {
        "provider": np.array(columns[0]), "region": np.array(columns[1]),
        "instance_type": np.array(columns[2]), "gpu_type": np.array(columns[3]),
        "gpus_per_node": np.array(columns[4], dtype=np.int64),
        "network_gbps": np.array(columns[5], dtype=float),
        "interconnect": np.array(["PCIe"] * len(rows)),
        "price_on_demand": np.array(columns[6], dtype=float),
        "price_spot": np.array(columns[7], dtype=float),
    }


class Estimator:
    """Artifact stand-in: per-GPU rate x GPUs x nodes^0.9, fixed overheads."""

    def __init__(self, spread=0.1, startup_s=120.0, checkpoint_s=30.0, recovery_s=60.0,
                 spot_life_s=6 * 3600.0):
        self.spread, self.spot_life_s = spread, spot_life_s
        self.overheads = {"startup_s": startup_s, "checkpoint_s": checkpoint_s,
                          "recovery_s": recovery_s}

    def predict(self, target, features):
        n = len(features["gpu"])
        if target == "throughput":
            rate = np.array([SAMPLES_PER_GPU_S[g] for g in features["gpu"]])
            value = rate * features["gpus_per_node"] * features["nodes"] ** 0.9
            lo, hi = value * (1 - self.spread), value * (1 + self.spread)
        else:
            value = lo = hi = np.full(n, self.overheads[target])
        return Prediction(value, lo, hi, np.full(n, "interpolated"))

    def lifetime(self, provider, gpu, region, spot):
        if not spot:
            return NodeLifetime("on-demand", 1.0, math.inf, "test")
        return NodeLifetime("weibull", 1.0, self.spot_life_s, "test")


def candidates_for(model="tinynet", max_nodes=4, **workload):
    work = build_workload(CARDS, model, **workload)
    return work, enumerate_candidates(offering_arrays(), work, Filters(max_nodes=max_nodes),
                                      gpu_spec)


def rank(work, cands, estimator, lifetime, constraints, **options):
    """rank_plans with the features and the spot markets' lifetimes resolved beforehand, as
    advisor.api does; `lifetime` is called as Artifact.lifetime is."""
    lifetimes = {market: lifetime(*market, True) for market in cands.spot_markets()}
    return rank_plans(work, cands, cands.features(work), estimator, lifetimes, constraints,
                      **options)
