"""Measured GPU trials against what the advisor predicts for exactly those configurations:
throughput from a fitted artifact, through the one feature path that fit, evaluate and
recommend share (advisor.features.trial_features), on the reference PyTorch stack as
`recommend` predicts it; and the memory estimate (advisor/memory.py) against the peaks the
worker measured (torch.cuda.max_memory_allocated / _reserved).

    PYTHONPATH=. .venv/bin/python benchmarks/measured_vs_predicted.py \\
        datasets/measurements/h200.json [--artifact datasets/model_artifact.json]

Run it before a GPU's rows join the fit for a true cross-GPU test (the artifact has never
seen the GPU), or on an artifact fitted without them:

    .venv/bin/python scripts/build_artifact.py --output no_h200.json --leave-out h200.json

After the refit the same rows are in-sample and read `measured`. The memory
estimate is taken for the optimizer the trial stepped (the worker's SGD with momentum) and without
the CUDA context and cuDNN/cuBLAS workspaces, which torch's peaks do not count. A trial
marked suspect (`extra.suspect`: it ran an implementation its card no longer describes) is
listed with its reason and left out of the figures, as the fit leaves it out.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from advisor.artifact import load_artifact
from advisor.features import model_features, trial_features
from advisor.importers.published import is_suspect
from advisor.memory import NONE, ModelMemory, allocated_mib, recipe_optimizer
from gpuadvisor.cards import load_cards

MIB = 2.0**20


def estimated_tensors_mib(card: dict, trial: dict) -> float:
    """The estimate of what torch allocates at the peak of the worker's step, with the
    optimizer the trial stepped (`extra.optimizer`, which the workers record), else the
    card's recipe's."""
    optimizer = (trial.get("extra") or {}).get("optimizer") or recipe_optimizer(card)
    return float(allocated_mib(ModelMemory.from_card(card, trial["precision"], optimizer),
                               NONE, trial["batch_per_gpu"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("measurements", type=Path, help="exchange JSON (profiler runs "
                        "--format json)")
    parser.add_argument("--artifact", help="fitted artifact (default: the shipped one)")
    args = parser.parse_args()
    trials = [t for t in json.loads(args.measurements.read_text())
              if t["status"] == "finished" and t.get("gpu_type") and t.get("throughput")]
    cards = load_cards()
    features, kept, skipped = trial_features(trials, model_features())
    for reason, count in skipped.items():
        print(f"skipped {count}: {reason}")
    prediction = load_artifact(args.artifact).predict("throughput", features)
    print(f"{'model':<24}{'gpu':<6}{'prec':<5}{'batch':>7}{'measured':>12}{'predicted':>12}"
          f"{'ratio':>7}  {'90% interval':<26}{'provenance':<13}{'alloc GiB':>10}{'est GiB':>8}"
          f"{'est/alloc':>10}{'resv GiB':>9}")
    ratios, inside, memory, suspect = [], [], {}, []
    for i, t in enumerate(kept):
        value, lo, hi = (float(prediction.value[i]), float(prediction.lo[i]),
                         float(prediction.hi[i]))
        if is_suspect(t):
            suspect.append(f"{t['model']} {t['precision']} b{t['batch_per_gpu']}: measured "
                           f"{t['throughput']:,.0f}, predicted {value:,.0f} "
                           f"({value / t['throughput']:.2f}x); {t['extra']['suspect']}")
            continue
        ratios.append(value / t["throughput"])
        inside.append(lo <= t["throughput"] <= hi)
        est = estimated_tensors_mib(cards[t["model"]], t) / 1024
        alloc = t["peak_allocated_bytes"] / MIB / 1024
        # At fp32 and tf32 cuDNN's autotuning allocates transient workspaces: kept apart.
        autotuned = t["precision"] in ("fp32", "tf32")
        memory.setdefault(t["model"] + (f" {t['precision']}" if autotuned else ""),
                          []).append(est / alloc)
        print(f"{t['model']:<24}{t['gpu_type']:<6}{t['precision']:<5}{t['batch_per_gpu']:>7}"
              f"{t['throughput']:>12,.0f}{value:>12,.0f}{ratios[-1]:>7.2f}  "
              f"{f'{lo:,.0f}-{hi:,.0f}':<26}{prediction.provenance[i]:<13}{alloc:>10.2f}"
              f"{est:>8.2f}{est / alloc:>10.2f}{t['peak_reserved_bytes'] / MIB / 1024:>9.2f}")
    ratios = np.array(ratios)
    print(f"\nthroughput over {len(ratios)} trials: MAPE {np.mean(np.abs(ratios - 1)) * 100:.1f}%,"
          f" predicted/measured median {np.median(ratios):.2f} (range {ratios.min():.2f}-"
          f"{ratios.max():.2f}), 90% intervals cover {np.mean(inside) * 100:.0f}%")
    print("memory estimate / measured peak allocated, per model: " + ", ".join(
        f"{m} {np.mean(v):.2f}" for m, v in memory.items()))
    for line in suspect:
        print(f"left out (suspect): {line}")


if __name__ == "__main__":
    main()
