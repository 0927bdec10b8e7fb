"""What a memory-bound kernel achieves against its size, beside what the physics prices.

The physics prices each kernel a step runs at a floor (`kernel_floor`, fitted about 3 us) and
every memory-bound byte at one efficiency (`memory`, fitted: under 60% of the datasheet
bandwidth; the script prints the shipped fit's), whatever the kernel. Published ViT rows of
code that writes its attention out need long streaming passes to run faster than that
(docs/accuracy_history.md, thirty-ninth session). This script times element-wise and
normalisation kernels from small to large on the GPU, fits each one's time as t = t0 + bytes /
(efficiency x datasheet bandwidth), and prints t0 and the efficiency beside the shipped fit's.
Bytes are what the operator counter counts (profiler/operators.py: every tensor read plus every
tensor written), so a kernel that makes more passes than that shows as a lower efficiency:
batch_norm's statistics pass, for one.

    python3 benchmarks/memory_bandwidth.py [--dtypes float32,bfloat16] [--max-mib 1024]

On a GPU each kernel is timed over a CUDA graph of --reps launches (the GPU's own time, no
host launch gaps). Without a GPU it runs the same kernels on the CPU at small sizes to show
the script works; its figures there say nothing of a GPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.optimizer_update import bandwidth_gb_s  # noqa: E402

ROW = 1024  # a row's length for softmax and layer norm (BERT-Large's hidden size)
CHANNELS = 64  # batch norm's channels (a ResNet's first stage)
TIMED_ROUNDS = 5  # median of this many timed graph replays (or loops on the CPU)


def kernels(elements: int, dtype, device) -> dict[str, tuple[Callable[[], object], int]]:
    """Each kernel at `elements` elements: (the call, the bytes the operator counter counts
    for it)."""
    import torch
    import torch.nn.functional as F

    x = torch.randn(elements, dtype=dtype, device=device)
    y, out = torch.randn_like(x), torch.empty_like(x)
    rows = x.view(-1, ROW)
    images = x.view(-1, CHANNELS, 16, 16)  # NCHW, 16x16 maps
    size = x.element_size() * elements
    return {
        "copy": (lambda: out.copy_(x), 2 * size),
        "add": (lambda: torch.add(x, y, out=out), 3 * size),
        "softmax": (lambda: torch.softmax(rows, -1), 2 * size),
        "layer_norm": (lambda: F.layer_norm(rows, (ROW,)), 2 * size),
        "batch_norm": (lambda: F.batch_norm(images, None, None, training=True), 2 * size),
    }


def seconds_per_call(call: Callable[[], object], reps: int, device) -> float:
    """The median time of one call, over TIMED_ROUNDS rounds of `reps` calls each."""
    import torch

    if device.type == "cuda":
        side = torch.cuda.Stream()  # warm-up before capture on a side stream, as torch.cuda
        side.wait_stream(torch.cuda.current_stream())  # graphs' documentation asks
        with torch.cuda.stream(side):
            call()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(reps):
                call()
        graph.replay()
        times = []
        for _ in range(TIMED_ROUNDS):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3 / reps)
        return statistics.median(times)
    call()
    times = []
    for _ in range(TIMED_ROUNDS):
        start = time.perf_counter()
        for _ in range(reps):
            call()
        times.append((time.perf_counter() - start) / reps)
    return statistics.median(times)


def latency_and_efficiency(sizes: list[int], seconds: list[float],
                           bandwidth: float | None) -> tuple[float, float | None]:
    """t0 (seconds) and bytes / (seconds - t0) as a fraction of `bandwidth` (GB/s), from a
    straight line through (bytes, seconds), each point weighted by its relative error."""
    slope, intercept = np.polyfit(sizes, seconds, 1, w=1 / np.asarray(seconds))
    efficiency = 1 / (slope * bandwidth * 1e9) if bandwidth and slope > 0 else None
    return float(intercept), efficiency


def shipped_memory_terms() -> tuple[float, float]:
    """The shipped fit's kernel floor (seconds) and memory efficiency (1 / `memory`)."""
    from advisor.artifact import load_artifact

    coefficients = load_artifact().doc["throughput"]["coefficients"]
    return coefficients["kernel_floor"], 1 / coefficients["memory"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtypes", default="float32,bfloat16",
                        help="comma-separated torch dtypes (default: float32,bfloat16)")
    parser.add_argument("--max-mib", type=float, help="the largest tensor, MiB (default: 1024 "
                        "on a GPU, 1 on the CPU); sizes go down from it by 4x to 64 KiB")
    parser.add_argument("--reps", type=int, help="calls timed together (default: 50 on a GPU, "
                        "3 on the CPU)")
    args = parser.parse_args()
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    on_gpu = device.type == "cuda"
    reps = args.reps or (50 if on_gpu else 3)
    largest = int((args.max_mib or (1024 if on_gpu else 1)) * 2**20)
    bandwidth = bandwidth_gb_s(device)
    floor, shipped = shipped_memory_terms()
    name = torch.cuda.get_device_name(device) if on_gpu else "CPU"
    print(f"{name}, torch {torch.__version__}"
          + (f", datasheet {bandwidth:,.0f} GB/s" if bandwidth else "")
          + f"; the shipped fit prices a kernel at {floor * 1e6:.2f} us + its bytes at "
            f"{shipped:.0%} of the datasheet bandwidth")
    print(f"{'kernel':<12}{'dtype':<10}{'MiB':>9}{'us':>11}{'GB/s':>9}{'of sheet':>10}")
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name.strip())
        element = torch.empty((), dtype=dtype).element_size()
        counts = []
        elements = largest // element
        while elements * element >= 64 * 2**10 and elements >= CHANNELS * 256:
            counts.append(elements - elements % (CHANNELS * 256))
            elements //= 4
        fits = {}
        for count in reversed(counts):
            for kernel, (call, moved) in kernels(count, dtype, device).items():
                seconds = seconds_per_call(call, reps, device)
                fits.setdefault(kernel, []).append((moved, seconds))
                rate = moved / seconds / 1e9
                share = f"{rate / bandwidth:.0%}" if bandwidth else "-"
                print(f"{kernel:<12}{dtype_name:<10}{moved / 2**20:>9.2f}{seconds * 1e6:>11.1f}"
                      f"{rate:>9.1f}{share:>10}")
        print(f"fitted t = t0 + bytes / (efficiency x datasheet), {dtype_name}:")
        for kernel, points in fits.items():
            if len(points) < 2:
                continue
            t0, efficiency = latency_and_efficiency(*map(list, zip(*points)), bandwidth)
            print(f"  {kernel:<12} t0 {t0 * 1e6:7.2f} us   efficiency "
                  + (f"{efficiency:.0%}" if efficiency else "-"))


if __name__ == "__main__":
    main()
