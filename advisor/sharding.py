"""What a data-parallel layout does to a step's work, as factors on the physics' terms: the
micro-batch's compute (activation checkpointing runs each forward twice) and the bytes each
worker moves per micro-step relative to DDP's ring all-reduce of the gradients, 2 (N-1)/N G.

- DDP with gradient accumulation over `a` micro-steps all-reduces once per optimizer step: 1/a.
- Every micro-step but an optimizer step's first adds its gradients into the accumulated ones
  (autograd's AccumulateGrad: .grad += g): (a-1)/a of three passes over the gradients a
  micro-step, beyond what a plain step writes.
- The optimizer reads and writes its state once per optimizer step, each worker only its
  shard under FSDP: (1/a)(1/N) of the update's bytes per micro-step; its per-tensor kernels
  (and the gradients' zeroing and DDP's bucket copies) also run once per optimizer step: 1/a
  of them per micro-step, whatever the sharding (each worker's shard is one kernel's work per
  tensor too), and recomputation does not run them again.
- A benchmark that times forward and backward alone (`forward_backward_only`: cnn-benchmarks,
  pytorch-gpu-benchmark) runs micro-steps that never reach an optimizer step: none of the
  update's bytes or once-per-update kernels, and each gradient added into its zeroed .grad.
- FSDP full shard (ZeRO-3) all-gathers the parameters in the compute dtype before forward and
  again before backward, every micro-step, and reduce-scatters the gradients once per
  optimizer step: (N-1)/N (2 W + G' / a) against 2 (N-1)/N G, with W the parameters' bytes in
  the compute dtype and G' the gradients reduced in it (FSDP's mixed precision; DDP under
  autocast reduces fp32 gradients).

- FSDP in 16 bits computes in 16 bits throughout (its parameters are in the compute dtype), where
  DDP under autocast keeps a transformer's residual stream fp32: `autocast_rows`.

The layout travels in optional feature columns (`accumulation`, `checkpointing`, `sharded`,
`forward_backward_only`, and `half_params` where the parameters' width is not the
sharding's); a feature dict without them (every measured trial) gets factors of one. numpy
only.
"""

from __future__ import annotations

import numpy as np

from advisor.memory import CHECKPOINT_COMPUTE_FACTOR
from gpuadvisor.vocab import HALF_PRECISIONS

LAYOUT_KEYS = ("accumulation", "checkpointing", "sharded", "half_params",
               "forward_backward_only")
# Of the ten kernels a tensor costs a step (physics' `tensor_launch` prior), the one that adds
# its gradient into .grad runs every micro-step; the optimizer's update, the gradient's zeroing
# and DDP's bucket copies run once per optimizer step, so a micro-step of A carries 0.1 + 0.9/A
# of them (all of them, before 2026-12-06: BERT-Large's pre-training at 2 to 8,192 micro-steps
# an update paid its ~400 tensors' update kernels each micro-step), and recomputation none again.
ACCUMULATE_SHARE = 0.1


def _column(features: dict, key: str, default: float, n: int) -> np.ndarray:
    if key not in features:
        return np.full(n, default)
    return np.nan_to_num(np.asarray(features[key], dtype=float), nan=default)


def plain_layout(features: dict, n: int) -> np.ndarray:
    """Rows trained as the measurements were: one micro-step per optimizer step, plain DDP
    (under autocast, where 16-bit)."""
    return ((_column(features, "accumulation", 1.0, n) <= 1)
            & steps_optimizer(features, n)
            & (_column(features, "checkpointing", 0.0, n) == 0)
            & (_column(features, "sharded", 0.0, n) == 0)
            & (_column(features, "half_params", 0.0, n) == 0))


def steps_optimizer(features: dict, n: int) -> np.ndarray:
    """Rows whose timed step includes an optimizer step: what a `measured` answer to a
    training query can be (a forward-and-backward benchmark's figure is faster than any
    training step of its configuration)."""
    return _column(features, "forward_backward_only", 0.0, n) == 0


def autocast_rows(features: dict, n: int, half: np.ndarray) -> np.ndarray:
    """Of the 16-bit rows (`half`), those that run under autocast, with fp32 parameters (DDP).
    Under FSDP the 16-bit precision is its mixed-precision policy's `param_dtype`: the
    parameters it gathers, and so every activation computed from them, are 16-bit
    (torchtitan's FSDP2, like Megatron's and DeepSpeed's bf16 modules, keeps no fp32 residual
    stream), so such a row's kernels read and write 16 bits throughout and no autocast cast
    runs in front of them. `half_params` (1 or 0) says where the parameters are 16-bit
    whatever the sharding (a plan's DDP reference at its widths); absent or NaN: as `sharded`."""
    sharded = _column(features, "sharded", 0.0, n) > 0
    given = np.asarray(features.get("half_params", np.full(n, np.nan)), dtype=float)
    return half & ~np.where(np.isnan(given), sharded, given > 0)


def compute_scale(features: dict, n: int) -> np.ndarray:
    """Per-sample work relative to a plain step: 4/3 with activation checkpointing."""
    recompute = _column(features, "checkpointing", 0.0, n) > 0
    return np.where(recompute, CHECKPOINT_COMPUTE_FACTOR, 1.0)


def update_share(features: dict, n: int) -> np.ndarray:
    """The optimizer steps a micro-step carries: 1/a (1 without accumulation; 0 where the
    timed step ran forward and backward alone)."""
    steps = 1.0 / np.maximum(_column(features, "accumulation", 1.0, n), 1.0)
    return np.where(steps_optimizer(features, n), steps, 0.0)


def accumulating_share(features: dict, n: int) -> np.ndarray:
    """The micro-steps that add their gradients into the accumulated ones: all but each
    optimizer step's first, which writes them (1 - 1/a; 0 without accumulation)."""
    return 1.0 - update_share(features, n)


def tensor_kernel_scale(features: dict, n: int) -> np.ndarray:
    """The per-tensor kernels' share of a micro-step (physics' `tensor_launch`): the one adding
    each gradient into .grad every micro-step, the rest once per optimizer step."""
    return ACCUMULATE_SHARE + (1 - ACCUMULATE_SHARE) * update_share(features, n)


def optimizer_scale(features: dict, n: int) -> np.ndarray:
    """The optimizer update's share of a micro-step: it runs once per optimizer step (1/a),
    and under FSDP each worker updates only its shard of the parameters (1/N)."""
    sharded = _column(features, "sharded", 0.0, n) > 0
    workers = np.asarray(features["nodes"], dtype=float) * np.asarray(features["gpus_per_node"],
                                                                       dtype=float)
    return np.where(sharded, 1.0 / np.maximum(workers, 1.0), 1.0) * update_share(features, n)


def communication_scale(features: dict, n: int) -> np.ndarray:
    """Bytes moved per micro-step relative to one ring all-reduce of the fp32 gradients."""
    accumulation = np.maximum(_column(features, "accumulation", 1.0, n), 1.0)
    sharded = _column(features, "sharded", 0.0, n) > 0
    if not sharded.any():
        return 1.0 / accumulation
    precision = np.asarray(features["precision"]).astype(str)
    compute_bytes = np.where(np.isin(precision, HALF_PRECISIONS), 2.0, 4.0)
    params = np.asarray(features["params"], dtype=float)
    gradients = np.asarray(features["gradient_bytes"], dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        fsdp = (2 * compute_bytes * params + gradients * compute_bytes / 4.0 / accumulation) / (
            2 * gradients)
    return np.where(sharded, np.nan_to_num(fsdp, nan=1.0), 1.0 / accumulation)
