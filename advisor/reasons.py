"""Why a candidate is dropped before scoring or misses a constraint, as data: a `Cut` is a
`Reason` with the numbers it needs. Counters of cuts say how many candidates each removed;
the CLI words them for people."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum


class Reason(str, Enum):
    PROVIDER_FILTER = "provider_filter"
    REGION_FILTER = "region_filter"
    GPU_FILTER = "gpu_filter"
    MARKET_FILTER = "market_filter"
    MAX_GPUS = "max_gpus"  # more GPUs in all than the user allows
    MEMORY = "memory"  # the workload does not fit the GPU's memory under any remedy
    BATCH_BELOW_GPUS = "global_batch_below_gpus"  # more GPUs than the global batch's samples
    PRECISION = "precision"  # the GPU cannot run the precision (bf16 before Ampere)
    NO_THROUGHPUT = "no_throughput_prediction"
    NEVER_FINISHES = "never_finishes"  # revocations outpace progress
    MISSES_DEADLINE = "misses_deadline"  # at the confidence level
    OVER_BUDGET = "over_budget"  # at the confidence level


@dataclass(frozen=True)
class Cut:
    reason: Reason
    gpu: str | None = None  # MEMORY: the GPU too small; PRECISION: the GPU without it
    need_mib: float | None = None  # MEMORY: the least one worker needs (one sample)
    gpu_memory_mib: float | None = None  # MEMORY: what the GPU has, usable
    confidence: float | None = None  # MISSES_DEADLINE, OVER_BUDGET

    def as_dict(self) -> dict:
        """The reason's value and its numbers, without the ones it does not use."""
        return {key: value.value if isinstance(value, Reason) else value
                for key, value in asdict(self).items() if value is not None}
