"""GPU datasheet figures (datasets/gpus.csv), the hardware features of every model."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gpuadvisor import data
from gpuadvisor.gpus import gpu_matches, other_form_of


@dataclass(frozen=True)
class GpuSpec:
    gpu: str
    memory_gb: float
    mem_bw_gbps: float
    fp32_tflops: float
    tensor_tflops: float | None  # dense fp16/bf16 tensor-core TFLOPS; None without tensor cores
    source: str
    # Capabilities (empty in an older or user's file: then unknown, and the advisor assumes
    # what the GPU's tensor-core figure implies).
    bf16: bool | None = None  # BF16 arithmetic (Ampere and later)
    tf32: bool | None = None  # TF32 tensor-core mode (Ampere and later): half the 16-bit peak
    power_w: float | None = None  # board power limit
    base_clock_mhz: float | None = None  # the clock guaranteed at the power limit
    boost_clock_mhz: float | None = None  # the clock the peak TFLOPS figures are quoted at
    pcie_gen: int | None = None  # host link: PCIe generation, x16
    nvlink_gb_s: float | None = None  # NVLink bandwidth per GPU, both directions together
    architecture: str | None = None  # NVIDIA's generation of the chip (Kepler ... Blackwell)
    form_factor: str | None = None  # SXM or PCIe: the part the datasheet row is of
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
                bf16=_yes_no(row.get("bf16")),
                tf32=_yes_no(row.get("tf32")),
                power_w=_number(row.get("power_w")),
                base_clock_mhz=_number(row.get("base_clock_mhz")),
                boost_clock_mhz=_number(row.get("boost_clock_mhz")),
                pcie_gen=int(row["pcie_gen"]) if row.get("pcie_gen") else None,
                nvlink_gb_s=_number(row.get("nvlink_gb_s")),
                architecture=(row.get("architecture") or "").strip() or None,
                form_factor=(row.get("form_factor") or "").strip() or None,
                memory_mib=float(row.get("memory_mib") or 0.0),
            )
            for row in csv.DictReader(handle)
        }


def gpu_spec(name: str) -> GpuSpec:
    """The one GPU `name` stands for (gpuadvisor.gpus: any case, family, SkyPilot's or GCP's
    name); KeyError naming the known GPUs, or the family's members where it has several."""
    specs = gpu_specs()
    matches = gpu_matches(name, specs)
    if not matches and (parts := other_form_of(name, specs)):
        raise KeyError(f"GPU {name!r} has no datasheet row: gpus.csv's {' and '.join(parts)} "
                       f"is the {specs[parts[0]].form_factor} part, another power limit and "
                       f"clock; add its own row to a copy of gpus.csv in {data.user_dir()}")
    if not matches:
        raise KeyError(f"unknown GPU {name!r}; known: {', '.join(specs)}")
    if len(matches) > 1:
        raise KeyError(f"GPU {name!r} names {len(matches)} GPUs; name one of {', '.join(matches)}")
    return specs[matches[0]]


# What sets a GPU's speed: every datasheet figure but its memory's capacity.
PERFORMANCE_FIELDS = ("mem_bw_gbps", "fp32_tflops", "tensor_tflops", "bf16", "tf32", "power_w",
                      "base_clock_mhz", "boost_clock_mhz", "pcie_gen", "nvlink_gb_s",
                      "architecture", "form_factor")


def silicon(name: str) -> str:
    """The first gpus.csv row with the performance figures of canonical GPU `name`: parts that
    differ in memory capacity alone run a job alike (a V100-32GB is a V100: one chip, clock,
    power limit and memory bandwidth), so a measurement of one is a measurement of the other
    wherever the job fits."""
    return _silicon_names()[name]


@cache
def _silicon_names() -> dict[str, str]:
    first: dict[tuple, str] = {}
    return {spec.gpu: first.setdefault(tuple(getattr(spec, f) for f in PERFORMANCE_FIELDS),
                                       spec.gpu)
            for spec in gpu_specs().values()}


def _number(cell: str | None) -> float | None:
    return float(cell) if cell else None


def _yes_no(cell: str | None) -> bool | None:
    return {"yes": True, "no": False}.get((cell or "").strip().lower())
