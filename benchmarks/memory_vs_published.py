"""The memory estimate (advisor/memory.py) against the per-GPU batches published recipes run
(datasets/published_batches.csv): for each, the largest micro-batch the estimate lets fit
that GPU's usable memory and its ratio to the published batch (>= 1: the published batch
fits; near 1 where the recipe cut its batch to what fits, `at_limit`).

    PYTHONPATH=. .venv/bin/python benchmarks/memory_vs_published.py
"""

from __future__ import annotations

import csv

from advisor.memory import NONE, ModelMemory, largest_micro_batch
from cloud.gpus import gpu_spec
from gpuadvisor import data
from gpuadvisor.cards import load_cards


def main() -> None:
    cards = load_cards()
    with open(data.find("published_batches.csv"), newline="") as handle:
        rows = list(csv.DictReader(handle))
    print(f"{'model':<22} {'gpu':<10} {'prec':<5} {'input':>5} {'usable MiB':>10} "
          f"{'published':>9} {'estimated max':>13} {'ratio':>6}  at limit")
    for row in rows:
        card = cards[row["model"]]
        size = row["seq_len"] or row["image_size"]
        scale = (float(row["seq_len"]) / float(card["seq_len"]) if row["seq_len"]
                 else (float(row["image_size"]) / float(card["image_size"])) ** 2)
        model = ModelMemory.from_card(card, row["precision"], row["optimizer"], scale)
        usable = gpu_spec(row["gpu"]).memory_mib
        largest = int(largest_micro_batch(model, NONE, usable))
        batch = int(row["batch_per_gpu"])
        print(f"{row['model']:<22} {row['gpu']:<10} {row['precision']:<5} {size:>5} "
              f"{usable:>10,.0f} {batch:>9} {largest:>13} {largest / batch:>6.2f}  "
              f"{row['at_limit']}")


if __name__ == "__main__":
    main()
