"""What the worker's instrumentation costs: its measured throughput against a plain DDP loop
of the same model, batch and steps, in alternating runs in this process (a gloo group of one).

    .venv/bin/python benchmarks/instrumentation_overhead.py [--model mobilenet_v2]
        [--image-size 16] [--batch 4] [--warmup 60] [--steps 200] [--pairs 5] [--threads 1]
        [--device cpu|cuda] [--precision fp32|tf32|amp|bf16]

The plain loop is DDP + SGD on the same device-resident synthetic batch, with the worker's
autocast, gradient scaler and TF32/cuDNN settings for the precision, timed with one
perf_counter around its last `--steps` steps (the GPU synchronised at both ends). The worker
runs `--warmup + --steps` steps with its timer, stopping rule, progress records and step
marker (checkpoints off: their cost is measured separately and excluded from its figure by
design). Overhead = 1 - worker / plain,
per pair; positive means the worker is slower. The worker's figure starts where its own
warm-up detection (MSER-5) cuts, the plain loop's after a fixed `--warmup`; short runs of a
small model on CPU favour the worker because allocator warm-up lasts tens of steps, hence the
long defaults.

On a CPU shared with other work, wall-clock throughput swings by tens of percent from one run
to the next, so the script also reports the CPU-time overhead: the process CPU seconds of a
whole run (process group, model, all steps) of the worker against the plain loop's, which other
tenants disturb far less.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from profiler import worker, zoo  # noqa: E402


def plain_loop(args) -> tuple[float, float]:
    """Samples/s of an uninstrumented DDP loop over its last `args.steps` steps, and the CPU
    seconds of the whole run."""
    import torch
    import torch.distributed as dist

    cpu = time.process_time()
    cuda = args.device == "cuda"
    dist.init_process_group("nccl" if cuda else "gloo", rank=0, world_size=1,
                            init_method=f"tcp://127.0.0.1:{worker._free_port()}")
    try:
        torch.manual_seed(0)
        device = torch.device(args.device)
        # The worker's settings for this precision (profiler/worker.py, Trainer.build).
        torch.backends.cuda.matmul.allow_tf32 = args.precision == "tf32"
        torch.backends.cudnn.benchmark = cuda
        with device:
            module = zoo.build_model(args.model, image_size=args.image_size)
        model = torch.nn.parallel.DistributedDataParallel(
            module, **({"device_ids": [0]} if cuda else {}))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        scaler = torch.amp.GradScaler(device.type, enabled=args.precision == "amp")
        dtype = {"amp": torch.float16, "bf16": torch.bfloat16}.get(args.precision)
        batch = zoo.synthetic_batch(args.model, args.batch, device, image_size=args.image_size)
        for step in range(args.warmup + args.steps):
            if step == args.warmup:
                if cuda:
                    torch.cuda.synchronize()
                start = time.perf_counter()
            with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                loss = zoo.loss(args.model, model, batch)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        throughput = args.steps * args.batch / (time.perf_counter() - start)
    finally:
        dist.destroy_process_group()
    return throughput, time.process_time() - cpu


def instrumented(args, sink: str, run: int) -> tuple[float, float]:
    cpu = time.process_time()
    config = worker.WorkerConfig(
        model=args.model, batch_per_gpu=args.batch, image_size=args.image_size, sink=sink,
        device=args.device, precision=args.precision,
        cluster=f"overhead-{run}", max_steps=args.warmup + args.steps,
        min_warmup_steps=args.warmup, max_seconds=3600, tolerance=1e-9)
    (result,) = [r for r in worker.run_here(config) if r["type"] == "result"]
    return result["throughput"], time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mobilenet_v2")
    parser.add_argument("--image-size", type=int, default=16)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=60)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--precision", default="fp32", help="fp32 | tf32 | amp | bf16")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    wall, cpu = [], []
    with tempfile.TemporaryDirectory() as sink:
        instrumented(args, sink, -1)  # a run before the pairs: imports and first-use costs
        for pair in range(args.pairs):
            # Alternate which goes first, so that drift in the machine's load cancels out.
            if pair % 2:
                mine, plain = instrumented(args, sink, pair), plain_loop(args)
            else:
                plain, mine = plain_loop(args), instrumented(args, sink, pair)
            wall.append(100 * (1 - mine[0] / plain[0]))
            cpu.append(100 * (mine[1] / plain[1] - 1))
            print(f"pair {pair + 1}: plain {plain[0]:7.2f} samples/s {plain[1]:6.2f} cpu-s, "
                  f"worker {mine[0]:7.2f} samples/s {mine[1]:6.2f} cpu-s, overhead wall "
                  f"{wall[-1]:+6.2f}% cpu {cpu[-1]:+6.2f}%", flush=True)
    print(f"{args.model} @{args.image_size}px batch {args.batch} {args.precision} on "
          f"{args.device}, {args.steps} steps, "
          f"{args.pairs} pairs:")
    for name, values in (("throughput (wall)", wall), ("CPU time", cpu)):
        spread = statistics.stdev(values) if len(values) > 1 else 0.0
        print(f"  overhead by {name}: median {statistics.median(values):+.2f}%, "
              f"mean {statistics.mean(values):+.2f}% +- {spread:.2f}% (sd), "
              f"range {min(values):+.2f}% .. {max(values):+.2f}%")


if __name__ == "__main__":
    main()
