"""GPU datasheet figures (datasets/gpus.csv), the hardware features of every model."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gpuadvisor import data


@dataclass(frozen=True)
class GpuSpec:
    gpu: str
    memory_gb: float
    mem_bw_gbps: float
    fp32_tflops: float
    tensor_tflops: float | None  # dense fp16/bf16 tensor-core TFLOPS; None without tensor cores
    source: str


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
            )
            for row in csv.DictReader(handle)
        }


def gpu_spec(name: str) -> GpuSpec:
    specs = gpu_specs()
    canonical = {key.lower(): key for key in specs}
    for alias in (name.lower(), name.lower().split("-")[0]):
        if alias in canonical:
            return specs[canonical[alias]]
    raise KeyError(f"unknown GPU {name!r}; known: {', '.join(specs)}")
