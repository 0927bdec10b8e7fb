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

SEARCH_STEPS = 8  # extra accumulation steps tried for a layout nearer the global batch


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
        steps, micro = _nearest(share, np.maximum(largest, 1))
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


def _nearest(share: np.ndarray, largest: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(accumulation steps, micro-batch <= `largest`) whose product is nearest the per-GPU
    `share` of the global batch: the fewest steps that hold it, or up to SEARCH_STEPS more
    where a few more steps hit it more closely (32 in micro-batches of at most 3: 16 x 2,
    not 11 x 3)."""
    fewest = np.ceil(share / largest)
    best_steps, best_micro = fewest, np.clip(np.round(share / fewest), 1, largest)
    error = np.abs(best_steps * best_micro - share)
    for extra in range(1, SEARCH_STEPS + 1):
        steps = fewest + extra
        micro = np.clip(np.round(share / steps), 1, largest)
        closer = np.abs(steps * micro - share) < error - 1e-9
        best_steps, best_micro = np.where(closer, steps, best_steps), np.where(
            closer, micro, best_micro)
        error = np.where(closer, np.abs(steps * micro - share), error)
    return best_steps.astype(np.int64), best_micro.astype(np.int64)
