"""The physical step-time model: roofline compute time plus communication time.

A training step of one worker costs

    t = a_fp32 * F*b / P_fp32 + a_tensor * F*b / P_tensor      (compute at a fraction of peak)
      + a_mem * A*b / BW_mem                                    (memory traffic of activations)
      + a_fixed                                                  (framework, input)
      + a_launch * T + a_layer * T*b / BW_mem                    (per-layer launches, traffic)
      + a_inter * 2(N-1)/N * G / BW_net                          (ring all-reduce between nodes)
      + a_intra * 2(g-1)/g * G / BW_intra                        (all-reduce inside a node)
      + a_ps_link * 2G / BW_net                                  (own push + pull to the PS)

and, with parameter servers, no step is faster than the servers can serve all W workers:

    t_server = (a_ps_server * 2G / BW_net + a_ps_tensor * T) * W / ps
    step = (t^P + t_server^P)^(1/P)

(a smooth maximum: throughput grows with workers until the servers saturate, on bytes or on
the per-tensor requests each worker's push and pull make), with F FLOPs per sample (forward +
backward), b the per-GPU batch, A activation bytes per sample, G gradient bytes, T the model's
tensors (a checkpoint's count: two models of equal FLOPs run at different speeds when one has
four times the layers), N nodes, g GPUs per node, W workers. Each coefficient `a` is the
inverse of an achieved efficiency (or, for communication, the exposed fraction after overlap
over the achieved share of bandwidth), so the model has few physical parameters and
extrapolates to GPUs and cluster sizes it never saw. numpy only: it is on the recommend path.
"""

from __future__ import annotations

import numpy as np

from advisor.sharding import communication_scale, compute_scale
from gpuadvisor.gpus import family
from gpuadvisor.vocab import HALF_PRECISIONS

# Order of the design-matrix columns; the artifact stores coefficients in this order.
TERMS = ("compute_fp32", "compute_tensor", "memory", "fixed", "tensor_launch",
         "tensor_memory", "allreduce_inter", "allreduce_intra", "ps_link", "ps_server",
         "ps_server_tensor")
WORKER_TERMS = len(TERMS) - 2  # every term but the last two (the servers') adds to a step
SMOOTH_MAX_POWER = 4.0

# Prior coefficients: what the fit is pulled towards, and what a term keeps when the training
# data does not exercise it. Achieved fractions from published ResNet-50 runs (~30% of FP32
# peak, ~15% of tensor peak), activations read and written ~3 times, 5 ms fixed cost, half of
# the communication hidden behind backward; per tensor and step ~10 kernels of ~10 us, and
# ~1 MB per sample of activations read and written (a CIFAR-sized layer, three passes); a
# parameter server handles each tensor's push and pull as requests, ~100 us per tensor and
# worker (two RPCs of tens of microseconds of server work each). That last value was first
# read off CM-DARE rows, so a fit whose data exercise it (or the per-tensor traffic term)
# chooses the prior by inner cross-validation instead (advisor/fitting.py, TUNED_PRIORS); the
# values here are then only the fallback.
PRIOR = {
    "compute_fp32": 1 / 0.35,
    "compute_tensor": 1 / 0.15,
    "memory": 3.0,
    "fixed": 0.005,
    "tensor_launch": 1e-4,
    "tensor_memory": 1e6,
    "allreduce_inter": 0.5,
    "allreduce_intra": 0.5,
    "ps_link": 0.5,
    "ps_server": 1.0,
    "ps_server_tensor": 1e-4,
}

# GPUs older than Ampere have no TF32 mode: `tf32` runs at their FP32 rate.
NO_TF32 = frozenset({"K80", "P100", "V100", "T4", "M60", "P4"})
# Nominal intra-node all-reduce bandwidth (bytes/s); the fitted coefficient rescales it.
INTRA_NODE_BYTES_PER_S = 100e9


def _arr(features: dict, key: str, dtype=float) -> np.ndarray:
    return np.asarray(features[key], dtype=dtype)


def factorize(column) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values, each row's index into them) of a column; strings lower-cased,
    numbers as integers, both as str. String work happens once per distinct value."""
    column = np.asarray(column)
    if column.dtype.kind in "fiub":
        values, codes = dense_codes(np.nan_to_num(column.astype(float)).astype(np.int64))
        return values.astype(str), codes
    column = column.astype(str).reshape(-1)
    if column.size and column[0] == column[-1] and (column == column[0]).all():
        return np.char.lower(column[:1]), np.zeros(len(column), dtype=np.int64)
    if column.size == 0:
        return np.array([], dtype=str), np.zeros(0, dtype=np.int64)
    # Hash each fixed-width string's code points to one integer: sorting 100k integers is
    # several times faster than sorting or dict-hashing 100k Python strings.
    width = column.dtype.itemsize // 4
    points = column.view(np.uint32).reshape(len(column), width).astype(np.uint64)
    hashes = points @ (np.arange(1, width + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    _, first, codes = np.unique(hashes, return_index=True, return_inverse=True)
    distinct = column[first]
    if not np.array_equal(distinct[codes], column):  # a hash collision: exact, slower path
        distinct, codes = np.unique(column, return_inverse=True)
    return np.char.lower(distinct), codes.reshape(-1)


def dense_codes(ints: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(ints, return_inverse=True) without the sort when the range is small (cluster
    sizes, batches, combined group codes): a presence table and its running count."""
    ints = ints.reshape(-1)
    if ints.size == 0:
        return ints, np.zeros(0, dtype=np.int64)
    low, high = int(ints.min()), int(ints.max())
    if high - low > 4 * ints.size + 1024:
        values, codes = np.unique(ints, return_inverse=True)
        return values, codes.reshape(-1)
    present = np.zeros(high - low + 1, dtype=bool)
    present[ints - low] = True
    rank = np.cumsum(present) - 1
    return np.flatnonzero(present) + low, rank[ints - low]


class Encoded(dict):
    """A feature dict that factorizes each column at most once (predict asks several times)."""

    def __init__(self, features: dict):
        super().__init__(features)
        self._codes: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def codes(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        if key not in self._codes:
            self._codes[key] = factorize(self[key])
        return self._codes[key]


def codes(features: dict, key: str) -> tuple[np.ndarray, np.ndarray]:
    return features.codes(key) if isinstance(features, Encoded) else factorize(features[key])


def is_in(features: dict, key: str, values) -> np.ndarray:
    """Rows whose (lower-cased) `key` is one of `values`."""
    names, inverse = codes(features, key)
    return np.isin(names, values)[inverse]


def uses_tensor_cores(features: dict) -> np.ndarray:
    """True where the arithmetic runs on tensor cores (16-bit, or TF32 on Ampere and later)."""
    names, inverse = codes(features, "gpu")
    no_tf32 = np.array([family(n).upper() in NO_TF32 for n in names], dtype=bool)
    has_tensor = _arr(features, "gpu_tensor_tflops") > 0
    half = is_in(features, "precision", HALF_PRECISIONS)
    tf32 = is_in(features, "precision", ["tf32"]) & ~no_tf32[inverse]
    return has_tensor & (half | tf32)


def design_matrix(features: dict) -> np.ndarray:
    """Per-row seconds of each term at coefficient 1: shape (n, len(TERMS))."""
    flops = _arr(features, "flops_per_sample") * _arr(features, "batch_per_gpu")
    tensor = uses_tensor_cores(features)
    tf32 = is_in(features, "precision", ["tf32"])
    tensor_peak = _arr(features, "gpu_tensor_tflops") * np.where(tf32, 0.5, 1.0)
    fp32_peak = _arr(features, "gpu_fp32_tflops")
    with np.errstate(divide="ignore", invalid="ignore"):
        compute_fp32 = np.where(tensor, 0.0, flops / (fp32_peak * 1e12))
        compute_tensor = np.where(tensor, flops / (np.where(tensor, tensor_peak, 1.0) * 1e12), 0.0)
    # 16-bit activations move half the bytes.
    act_scale = np.where(is_in(features, "precision", HALF_PRECISIONS), 0.5, 1.0)
    activation = np.nan_to_num(_arr(features, "activation_bytes"))
    memory = activation * act_scale * _arr(features, "batch_per_gpu") / (
        _arr(features, "gpu_mem_bw_gbps") * 1e9)

    nodes = _arr(features, "nodes")
    per_node = _arr(features, "gpus_per_node")
    grad = _arr(features, "gradient_bytes")
    net = _arr(features, "network_gbps") * 1e9 / 8
    ps_sync = is_in(features, "sync", ["ps"])
    ps_count = np.maximum(np.nan_to_num(_arr(features, "ps_count"), nan=1.0), 1.0)
    workers = nodes * per_node
    inter = np.where(ps_sync, 0.0, 2 * (nodes - 1) / nodes * grad / net)
    intra = np.where(ps_sync, 0.0, 2 * (per_node - 1) / per_node * grad / INTRA_NODE_BYTES_PER_S)
    ps_link = np.where(ps_sync, 2 * grad / net, 0.0)
    ps_server = np.where(ps_sync, 2 * grad * workers / (ps_count * net), 0.0)
    fixed = np.ones_like(flops)
    tensors = np.nan_to_num(np.asarray(features.get("tensors", np.zeros(len(flops))), float))
    tensor_memory = tensors * _arr(features, "batch_per_gpu") / (
        _arr(features, "gpu_mem_bw_gbps") * 1e9)
    ps_server_tensor = np.where(ps_sync, tensors * workers / ps_count, 0.0)
    # The layout (advisor/sharding.py): recomputed forwards, FSDP's gathers, accumulation.
    work, traffic = compute_scale(features, len(flops)), communication_scale(features, len(flops))
    return np.column_stack([compute_fp32 * work, compute_tensor * work, memory * work, fixed,
                            tensors * work, tensor_memory * work, inter * traffic,
                            intra * traffic, ps_link, ps_server,
                            ps_server_tensor]).astype(float)


def combine(design: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Seconds per step from the design matrix and coefficients (in TERMS order)."""
    worker = design[:, :WORKER_TERMS] @ theta[:WORKER_TERMS]
    server = design[:, WORKER_TERMS:] @ theta[WORKER_TERMS:]
    return (worker ** SMOOTH_MAX_POWER + server ** SMOOTH_MAX_POWER) ** (1 / SMOOTH_MAX_POWER)


def step_time(features: dict, coefficients: dict | None = None) -> np.ndarray:
    """Seconds per step of one worker under the physical model."""
    coef = {**PRIOR, **(coefficients or {})}
    return combine(design_matrix(features), np.array([coef[t] for t in TERMS]))


def cluster_throughput(features: dict, seconds_per_step: np.ndarray) -> np.ndarray:
    """Samples/s of the whole cluster: every worker finishes a batch per step."""
    workers = _arr(features, "nodes") * _arr(features, "gpus_per_node")
    return workers * _arr(features, "batch_per_gpu") / seconds_per_step


def effective_peak_tflops(features: dict) -> np.ndarray:
    """The roofline ceiling the arithmetic runs under (tensor cores or FP32)."""
    tensor = uses_tensor_cores(features)
    tf32 = is_in(features, "precision", ["tf32"])
    tensor_peak = _arr(features, "gpu_tensor_tflops") * np.where(tf32, 0.5, 1.0)
    return np.where(tensor, tensor_peak, _arr(features, "gpu_fp32_tflops"))


def correction_inputs(features: dict) -> dict[str, np.ndarray]:
    """Transferable log-scale descriptors the learned correction may use."""
    peak = effective_peak_tflops(features)
    flops = _arr(features, "flops_per_sample")
    activation = np.maximum(np.nan_to_num(_arr(features, "activation_bytes")), 1.0)
    return {
        "log_flops": np.log(flops),
        "log_batch": np.log(_arr(features, "batch_per_gpu")),
        "log_peak": np.log(peak),
        "log_balance": np.log(_arr(features, "gpu_mem_bw_gbps") / peak),
        "log_workers": np.log(_arr(features, "nodes") * _arr(features, "gpus_per_node")),
        "log_intensity": np.log(flops / activation),
        "log_params": np.log(np.maximum(_arr(features, "params"), 1.0)),
    }
