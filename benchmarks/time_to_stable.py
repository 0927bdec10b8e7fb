"""How long a trial needs, on this machine, before its throughput figure is stable: for each
model and batch, the worker (in this process, a group of one: NCCL on a GPU when torch sees
one, else gloo) trains until the 95% interval of its throughput is within the tolerance, or
gives up at --max-seconds.

    .venv/bin/python benchmarks/time_to_stable.py [--workloads mobilenet_v2:16:4,resnet18:32:4]
        [--tolerance 0.02] [--max-seconds 90] [--threads 1] [--precision fp32]

A workload is MODEL:IMAGE_SIZE_OR_SEQ_LEN:BATCH. Printed per workload: seconds from the first
step to the verdict, warm-up steps, measured steps, whether the tolerance was met, the interval
reached, and the throughput.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from profiler import worker, zoo  # noqa: E402


def measure(model: str, size: int, batch: int, args, sink: str) -> dict:
    sizes = {"image_size": size} if zoo.resolve(model).task == "image" else {"seq_len": size}
    config = worker.WorkerConfig(model=model, batch_per_gpu=batch, **sizes, sink=sink,
                                 cluster=f"{model}-{size}-{batch}", tolerance=args.tolerance,
                                 precision=args.precision,
                                 max_seconds=args.max_seconds)
    records = worker.run_here(config)
    (first,) = [r for r in records if r["type"] == "first_step"]
    (result,) = [r for r in records if r["type"] == "result"]
    return {**result, "seconds": result["t"] - first["t"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", default="mobilenet_v2:16:4,resnet18:32:4")
    parser.add_argument("--tolerance", type=float, default=0.02)
    parser.add_argument("--max-seconds", type=float, default=90)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--precision", default="fp32", help="fp32 | tf32 | amp | bf16")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    print(f"{'workload':<24}{'seconds':>9}{'warm-up':>9}{'measured':>10}{'stable':>8}"
          f"{'+-%':>7}{'samples/s':>11}", flush=True)
    with tempfile.TemporaryDirectory() as sink:
        for workload in args.workloads.split(","):
            model, size, batch = workload.split(":")
            r = measure(model, int(size), int(batch), args, sink)
            half = ((r["throughput_hi"] - r["throughput_lo"]) / 2 / r["throughput"] * 100
                    if r["throughput_lo"] else float("nan"))
            print(f"{workload:<24}{r['seconds']:>9.1f}{r['warmup_steps']:>9}"
                  f"{r['steps_measured']:>10}{str(r['stable']):>8}{half:>7.2f}"
                  f"{r['throughput']:>11.2f}", flush=True)


if __name__ == "__main__":
    main()
