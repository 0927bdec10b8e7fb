"""What each call the worker makes per step costs the host, in microseconds: the CUDA-event
calls of its step timer (a new event against one reused from its pool), and the stop decision
all ranks share every 10 steps (an all-reduce of three integers over a gloo group). On a
host-bound step (a small model at a small batch: a few ms of kernel launches) these add to
every step; `instrumentation_overhead.py` measures the sum, this script the parts.

    python3 benchmarks/worker_step_costs.py [--calls 5000]

Each call is timed in a loop of --calls with the GPU idle; the median of 5 loops is printed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from profiler import worker  # noqa: E402


def per_call_us(call, calls: int) -> float:
    loops = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        loops.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(loops)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=5000)
    args = parser.parse_args()
    import torch
    import torch.distributed as dist

    if not torch.cuda.is_available():
        sys.exit("error: torch sees no GPU; this benchmark measures CUDA calls")
    torch.cuda.init()
    other, pooled = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    other.record()
    pooled.record()

    def new_event():
        torch.cuda.Event(enable_timing=True).record()

    dist.init_process_group("gloo", rank=0, world_size=1,
                            init_method=f"tcp://127.0.0.1:{worker._free_port()}")
    try:
        def stop_decision():
            dist.all_reduce(torch.tensor([0, 0, 0]), op=dist.ReduceOp.MAX)

        costs = {
            "new event, recorded (the timer before its pool)": new_event,
            "pooled event, recorded": pooled.record,
            "query of a completed event": other.query,
            "elapsed_time of two completed events": lambda: other.elapsed_time(pooled),
            "stop decision (gloo all-reduce of 3 ints)": stop_decision,
            "perf_counter (for scale)": time.perf_counter,
        }
        print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; "
              f"{args.calls} calls a loop, median of 5 loops")
        for name, call in costs.items():
            calls = args.calls // 10 if "stop" in name else args.calls
            torch.cuda.synchronize()  # the events read below have completed
            print(f"  {name:<50}{per_call_us(call, calls):>9.2f} us", flush=True)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
