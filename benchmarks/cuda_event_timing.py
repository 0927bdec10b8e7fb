"""Whether the worker's CUDA-event step times add up to the wall clock over a long window.

    python3 benchmarks/cuda_event_timing.py [--workloads resnet50:224:64:bf16,resnet18:64:32:amp]
        [--seconds 8]

A workload is MODEL:IMAGE_SIZE_OR_SEQ_LEN:BATCH:PRECISION. The worker's own Trainer (model,
DDP over an NCCL group of one, optimizer, autocast and scaler) trains for about --seconds;
its StepTimer marks every step, read back without blocking as the worker reads it, and
perf_counter spans the same window, the GPU synchronised at both ends. Printed per workload:
steps, the events' sum against the wall clock (target: within 1%), and the events' median
step against the wall clock's mean step.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from profiler import worker, zoo


def compare(model: str, size: int, batch: int, precision: str, seconds: float,
            sink: str) -> dict:
    import torch

    sizes = {"image_size": size} if zoo.resolve(model).task == "image" else {"seq_len": size}
    config = worker.WorkerConfig(model=model, batch_per_gpu=batch, precision=precision,
                                 device="cuda", sink=sink, cluster=f"timing-{model}", **sizes)
    trainer = worker.Trainer(config, started_at=time.time())
    try:
        trainer.init_distributed()
        trainer.build()
        trainer.wrap()
        for _ in range(20):  # warm-up: cuDNN's algorithm search, the allocator, the scaler
            trainer.train_step()
        torch.cuda.synchronize()
        start = time.perf_counter()
        timer = worker.StepTimer(cuda=True)
        durations, steps = [], 0
        while time.perf_counter() - start < seconds:
            trainer.train_step()
            steps += 1
            timer.mark(steps)
            durations += [s for _, s in timer.ready()]
        torch.cuda.synchronize()
        wall = time.perf_counter() - start
        durations += [s for _, s in timer.ready(wait=True)]
    finally:
        trainer.close()
    return {"steps": steps, "events_s": sum(durations), "wall_s": wall,
            "median_step_ms": statistics.median(durations) * 1e3,
            "mean_wall_step_ms": wall / steps * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", default="resnet50:224:64:bf16,resnet18:64:32:amp")
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        sys.exit("error: torch sees no GPU; this benchmark checks CUDA-event timing")
    print(f"{'workload':<28}{'steps':>7}{'events s':>10}{'wall s':>9}{'diff %':>8}"
          f"{'event p50 ms':>14}{'wall mean ms':>14}", flush=True)
    with tempfile.TemporaryDirectory() as sink:
        for workload in args.workloads.split(","):
            model, size, batch, precision = workload.split(":")
            r = compare(model, int(size), int(batch), precision, args.seconds, sink)
            diff = (r["events_s"] / r["wall_s"] - 1) * 100
            print(f"{workload:<28}{r['steps']:>7}{r['events_s']:>10.3f}{r['wall_s']:>9.3f}"
                  f"{diff:>+8.2f}{r['median_step_ms']:>14.3f}{r['mean_wall_step_ms']:>14.3f}",
                  flush=True)


if __name__ == "__main__":
    main()
