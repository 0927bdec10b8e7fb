"""How each candidate cluster trains the workload's batch within its GPUs' memory: the
per-GPU micro-batch, the gradient-accumulation steps and the memory remedy (none, smaller
micro-batches with accumulation, activation checkpointing, FSDP sharding, or both), as numpy
columns. Every layout that could be the fastest is kept; advisor.candidates keeps the one the
estimator prices fastest. numpy only."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from advisor.memory import NONE, REMEDIES, largest_micro_batch, need_mib
from advisor.workload import Workload


@dataclass
class Layouts:
    """Equal-length columns: one row per (base row, feasible layout)."""

    row: np.ndarray  # index into the rows the layouts were asked for
    remedy: np.ndarray  # the plan's name: none | accumulation | checkpointing | fsdp | ...
    micro_batch: np.ndarray
    accumulation: np.ndarray
    checkpointing: np.ndarray
    sharded: np.ndarray
    need_mib: np.ndarray  # what one GPU needs at this layout

    def columns(self) -> dict[str, np.ndarray]:
        return {"remedy": self.remedy, "micro_batch": self.micro_batch,
                "accumulation": self.accumulation, "checkpointing": self.checkpointing,
                "sharded": self.sharded, "need_mib": self.need_mib}


def layouts(workload: Workload, workers: np.ndarray, usable_mib: np.ndarray) -> Layouts:
    """The layouts of clusters of `workers` GPUs with `usable_mib` each. A remedy is listed
    where plain data parallelism does not fit, or fits only with more accumulation steps."""
    model = workload.memory_model()
    workers = np.asarray(workers, dtype=float)
    share = workload.per_gpu_share(workers)
    parts, plain_steps = [], None
    for remedy in REMEDIES:
        largest = largest_micro_batch(model, remedy, usable_mib, workers)
        if workload.micro_batch_cap is not None:
            largest = np.minimum(largest, workload.micro_batch_cap)
        feasible = (largest >= 1) & (share >= 1)  # at least one sample per GPU
        if remedy.sharded:
            feasible &= workers > 1  # one GPU has nothing to shard over
        steps = np.ceil(share / np.maximum(largest, 1)).astype(np.int64)
        micro = np.clip(np.round(share / steps), 1, np.maximum(largest, 1)).astype(np.int64)
        if remedy is NONE:
            plain_steps = np.where(feasible, steps, np.iinfo(np.int64).max)
            name = np.where(steps > 1, "accumulation", "none")
        else:
            feasible &= steps < plain_steps  # only where it saves accumulation steps
            name = np.full(len(steps), remedy.name)
        rows = np.flatnonzero(feasible)
        parts.append((rows, name[rows], micro[rows], steps[rows],
                      np.full(len(rows), remedy.checkpointing), np.full(len(rows), remedy.sharded),
                      need_mib(model, remedy, micro[rows], workers[rows])))
    return Layouts(*(np.concatenate(column) for column in zip(*parts)))
