"""GPU datasheet figures (datasets/gpus.csv), the hardware features of every model."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gpuadvisor import data
from gpuadvisor.gpus import gpu_matches


@dataclass(frozen=True)
class GpuSpec:
    gpu: str
    memory_gb: float
    mem_bw_gbps: float
    fp32_tflops: float
    tensor_tflops: float | None  # dense fp16/bf16 tensor-core TFLOPS; None without tensor cores
    source: str
    memory_mib: float = 0.0  # usable memory as the driver or the cloud reports it

    def __post_init__(self):
        if not self.memory_mib:  # a gpus.csv without the column: the datasheet's decimal GB
            object.__setattr__(self, "memory_mib", self.memory_gb * 1e9 / 2**20)


@cache
def gpu_specs(path: Path | None = None) -> dict[str, GpuSpec]:
    with open(path or data.find("gpus.csv"), newline="") as handle:
        return {
            row["gpu"]: GpuSpec(
                gpu=row["gpu"],
                memory_gb=float(row["memory_gb"]),
                mem_bw_gbps=float(row["mem_bw_gbps"]),
                fp32_tflops=float(row["fp32_tflops"]),
                tensor_tflops=float(row["tensor_tflops"]) if row["tensor_tflops"] else None,
                source=row["source"],
                memory_mib=float(row.get("memory_mib") or 0.0),
            )
            for row in csv.DictReader(handle)
        }


def gpu_spec(name: str) -> GpuSpec:
    """The one GPU `name` stands for (gpuadvisor.gpus: any case, family, SkyPilot's or GCP's
    name); KeyError naming the known GPUs, or the family's members where it has several."""
    specs = gpu_specs()
    matches = gpu_matches(name, specs)
    if not matches:
        raise KeyError(f"unknown GPU {name!r}; known: {', '.join(specs)}")
    if len(matches) > 1:
        raise KeyError(f"GPU {name!r} names {len(matches)} GPUs; name one of {', '.join(matches)}")
    return specs[matches[0]]
