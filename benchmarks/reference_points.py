"""A handful of predictions beside published figures, through the recommend path's feature
builder and the shipped artifact: per-GPU samples/s, the fraction of the GPU's sustained
peak that implies (`of peak`: model FLOPs over the peak its arithmetic runs under at the
clock the GPU holds under its power limit), and NVIDIA's figure where
datasets/published_throughput.csv holds that exact configuration (those rows are in the
artifact's training data: `measured`).

    .venv/bin/python benchmarks/reference_points.py
"""

from __future__ import annotations

import csv
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from advisor import physics
from advisor.artifact import load_artifact
from advisor.features import configuration_features, model_features

# (model, GPU, precision, GPUs in one node, per-GPU batch, sequence length or None)
POINTS = [
    ("resnet50", "T4", "amp", 1, 256, None),
    ("resnet50", "V100", "amp", 1, 256, None),
    ("resnet50", "A100-80GB", "amp", 1, 256, None),
    ("resnet50", "A100-80GB", "tf32", 1, 256, None),
    ("resnet50", "A100-80GB", "fp32", 1, 256, None),
    ("resnet50", "H100-80GB", "amp", 1, 256, None),
    ("resnet50", "L4", "amp", 8, 256, None),
    ("resnet50", "A100-80GB", "amp", 8, 256, None),
    ("efficientnet_b0", "T4", "amp", 1, 128, None),
    ("efficientnet_b0", "V100", "amp", 1, 128, None),
    ("efficientnet_b0", "A100-80GB", "amp", 1, 256, None),
    ("bert_large", "V100", "amp", 1, 64, 128),
    ("bert_large", "A100-80GB", "amp", 1, 64, 128),
    ("bert_large", "A100-80GB", "amp", 1, 32, 384),
    ("bert_large", "H100-80GB", "bf16", 1, 64, 128),
]
LINK = {"L4": "PCIe", "T4": "PCIe"}  # the others: their NVLink/NVSwitch node


def published() -> dict[tuple, float]:
    """Median NVIDIA figure per (model, GPU, precision, GPUs, batch, seq_len), per GPU."""
    out: dict[tuple, list[float]] = {}
    with open(ROOT / "datasets" / "published_throughput.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            if "pytorch-20.06" in row["software"] or not row["batch_per_gpu"]:
                continue
            key = (row["model"], row["gpu"], row["precision"], int(row["num_gpus"]),
                   int(row["batch_per_gpu"]), int(row["seq_len"]) if row["seq_len"] else None)
            out.setdefault(key, []).append(float(row["throughput"]) / int(row["num_gpus"]))
    return {key: float(np.median(values)) for key, values in out.items()}


def main() -> None:
    warnings.simplefilter("ignore")
    n = len(POINTS)
    model, gpu, precision, per_node, batch, seq = (list(c) for c in zip(*POINTS))
    configs = {"model": model, "gpu": gpu, "provider": ["aws"] * n, "sync": ["allreduce"] * n,
               "ps_count": [0] * n, "precision": precision, "nodes": [1] * n,
               "gpus_per_node": per_node, "batch_per_gpu": batch, "spot": [False] * n,
               "network_gbps": [100.0] * n, "seq_len": seq,
               "interconnect": [LINK.get(g, "NVSwitch") for g in gpu]}
    features = configuration_features(configs, model_features())
    prediction = load_artifact().predict("throughput", features)
    peak = physics.effective_peak_tflops(features) * 1e12
    reference = published()
    print(f"{'configuration':<44} {'predicted/GPU':>13} {'90% interval':>17} "
          f"{'of peak':>8} {'NVIDIA':>8}")
    for i, point in enumerate(POINTS):
        per_gpu = prediction.value[i] / per_node[i]
        lo, hi = prediction.lo[i] / per_node[i], prediction.hi[i] / per_node[i]
        mfu = per_gpu * features["flops_per_sample"][i] / peak[i]
        name = f"{model[i]} {gpu[i]} x{per_node[i]} {precision[i]} b{batch[i]}" + (
            f" s{seq[i]}" if seq[i] else "")
        known = reference.get(point)
        print(f"{name:<44} {per_gpu:13,.0f} {lo:8,.0f}-{hi:<8,.0f} {mfu:8.0%} "
              f"{f'{known:,.0f}' if known else '-':>8}  {prediction.provenance[i]}")


if __name__ == "__main__":
    main()
