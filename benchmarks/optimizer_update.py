"""What an optimizer step moves a parameter, measured against what the physics prices for it.

The physics prices an update at a fused optimizer's passes over fp32 tensors
(`advisor.physics.update_bytes`: SGD with momentum 20 bytes a parameter, Adam and AdamW 28,
LAMB 52). PyTorch's optimizers run by default as `foreach` (one multi-tensor kernel an
arithmetic operation, each a pass of its own) and optionally `fused` (one kernel a step). This
script times both on a model's worth of parameters (default: BERT-Large's 335M in 394 tensors)
and prints the bytes a parameter each step would have moved at the GPU's datasheet bandwidth
(`cloud.gpus`): since a kernel streams at perhaps 80-90% of it, the figure bounds the passes an
implementation makes from above.

    python3 benchmarks/optimizer_update.py [--params 335e6] [--tensors 394] [--steps 20]

Without a GPU it runs the same loop on the CPU at --params 2e6 to show the script works; its
figures there say nothing of a GPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from advisor.physics import update_bytes  # noqa: E402

OPTIMIZERS = ("sgd", "adamw")
IMPLEMENTATIONS = ("foreach", "fused")
WARMUP_STEPS = 3  # the first step creates the state


def build(name: str, implementation: str, params: list):
    import torch

    flag = {implementation: True}
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, **flag)
    return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, **flag)


def step_seconds(optimizer, steps: int, sync) -> float:
    """The median of `steps` timed optimizer steps, after WARMUP_STEPS untimed ones."""
    for _ in range(WARMUP_STEPS):
        optimizer.step()
    sync()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        optimizer.step()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bandwidth_gb_s(device) -> float | None:
    """The datasheet DRAM bandwidth of the GPU the script runs on; None on the CPU or for a GPU
    without a datasheet row."""
    import torch

    if device.type != "cuda":
        return None
    from cloud.gpus import gpu_spec

    try:
        return gpu_spec(torch.cuda.get_device_name(device)).mem_bw_gbps
    except KeyError:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", type=float, help="parameters (default: 335e6 on a GPU, "
                        "2e6 on the CPU)")
    parser.add_argument("--tensors", type=int, default=394,
                        help="tensors they are split into (default: BERT-Large's 394)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps of each optimizer")
    args = parser.parse_args()
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    total = int(args.params or (335e6 if device.type == "cuda" else 2e6))
    size = max(1, total // args.tensors)
    params = [torch.zeros(size, device=device, requires_grad=True) for _ in range(args.tensors)]
    for p in params:
        p.grad = torch.randn_like(p)
    count = size * args.tensors
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    bandwidth = bandwidth_gb_s(device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"{name}, torch {torch.__version__}: {count:,} fp32 parameters in {args.tensors} "
          f"tensors, median of {args.steps} steps"
          + (f", bytes a parameter at the datasheet's {bandwidth:,.0f} GB/s" if bandwidth
             else ""))
    print(f"{'optimizer':<10}{'implementation':<16}{'ms a step':>10}{'bytes/param':>13}"
          f"{'priced':>8}")
    for optimizer in OPTIMIZERS:
        for implementation in IMPLEMENTATIONS:
            try:
                built = build(optimizer, implementation, params)
            except (RuntimeError, TypeError, ValueError) as error:  # fused: not on every device
                print(f"{optimizer:<10}{implementation:<16}  not available here: "
                      f"{str(error).splitlines()[0][:60]}")
                continue
            seconds = step_seconds(built, args.steps, sync)
            moved = f"{seconds * bandwidth * 1e9 / count:.0f}" if bandwidth else "-"
            print(f"{optimizer:<10}{implementation:<16}{seconds * 1e3:>10.2f}{moved:>13}"
                  f"{update_bytes(optimizer):>8.0f}")
            del built


if __name__ == "__main__":
    main()
