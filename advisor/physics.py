"""The physical step-time model: a roofline per operator class plus communication time.

A card splits a step's work by operator class c (profiler/operators.py: matmul, conv,
grouped_conv, attention, norm, other), each with F_c FLOPs and B_c DRAM bytes per sample, the
FLOPs as the kernels execute them (a matrix product's, convolution's or attention kernel's
dimensions rounded up to whole tiles: InceptionV3's 80-channel convolutions compute 128
channels' worth, a ViT's attention over 197 tokens 256).
On a given GPU and precision each class runs on a unit (tensor cores or the FP32 cores) with
peak P_c (on the FP32 cores, the share of them its schedulers can feed: two thirds on Kepler),
at the share s of its boost clock the GPU sustains under its power limit, and takes

    t_c = max(F_c*b / (e_c * s * P_c), B_c*b / BW_mem)        (Habitat's per-operator roofline)

which side binds is decided at the prior efficiencies, so the balance point of every GPU
puts GEMMs, depthwise convolutions, attention, normalisation and element-wise work where they
belong. It is decided one operator at a time where the card says how a class's FLOPs and
bytes spread over arithmetic intensity (its intensity profile): a ResNet-50's 1x1
convolutions on 56x56 maps (26 FLOPs per fp32 byte) are memory-bound on an A100 under amp,
its 3x3 ones (144) compute-bound, and a step costs the sum of the operators' maxima, not the
maximum of the class's sums. A training step of one worker then costs

    t = a_fp32 * sum F_c*b/(e_c s P_fp32)   over compute-bound GEMM-like classes on FP32 cores
      + a_tensor * sum F_c*b/(e_c s P_tensor) over the same on 16-bit tensor cores
      + a_tf32 * the same sum over GEMM-like classes on tensor cores in TF32
      + a_conv_fp32, a_conv_tensor, a_conv_tf32: the same sums over the dense convolutions
      + a_unsplit_fp32, a_unsplit_tensor, a_unsplit_tf32: the same sums over the FLOPs of a
        card without the operator split, at the datasheet peak (the whole model's efficiency)
      + a_grouped * sum t_c over depthwise convolutions, whichever side binds
      + a_mem * (sum B_c*b + step bytes + gradient bytes) / BW_mem   (memory-bound classes;
                      the gradient bytes the trace never sees, untraced_gradient_bytes: the
                      optimizer's once per optimizer step, on its shard under FSDP (20
                      bytes a parameter for SGD with momentum, 28 Adam, 52 LAMB) and in
                      fp16 the loss scale's unscaling, 2G, before it, 3G of
                      accumulation's adds on (A-1)/A of micro-steps, 4G of an all-reduce's
                      bucket copies;
                      under autocast B_c at the widths autocast gives each tensor: a
                      transformer's residual stream stays fp32, only its GEMMs halve;
                      in NCHW, 16-bit convolutions' B_conv once more: cuDNN's transposes)
      + a_fixed                                                  (framework, input)
      + a_launch * T (0.1 + 0.9/A) + a_layer * T*b / BW_mem   (per-tensor kernels, those of
                      the update once per optimizer step of A micro-steps; traffic, unsplit cards)
      + a_kernel * K                             (each kernel's floor on the GPU)
      + a_inter * 2(N-1)/N * G / BW_net                          (ring all-reduce between nodes)
      + a_intra * 2(g-1)/g * G / BW_intra                        (all-reduce inside a node)
      + a_ps_link * 2G / BW_net                                  (own push + pull to the PS)

and, with parameter servers, no step is faster than the servers can serve all W workers,
nor faster than the host can dispatch its kernels:

    t_server = (a_ps_server * 2G / BW_net + a_ps_tensor * T) * W / ps
    t_host = a_host * K
    step = (t^P + t_server^P + t_host^P)^(1/P)

(a smooth maximum: throughput grows with workers until the servers saturate, on bytes or on
the per-tensor requests each worker's push and pull make; eager frameworks launch kernels
asynchronously, so the host's dispatch hides behind the GPU's work until a step of many small
kernels, such as a recurrent decoder's, leaves the GPU waiting on it), with K the kernels a
step dispatches (the card's trace, and in 16 bits the casts autocast adds), b the per-GPU batch, G
gradient bytes, T the model's tensors (a checkpoint's count), N nodes, g GPUs per node, W
workers, BW_intra the node's GPU link (NVLink/NVSwitch or PCIe of the GPU's generation) and
BW_net the instance's network. Each coefficient `a` is the inverse of an achieved efficiency
(or, for communication, the exposed fraction after overlap over the achieved share of
bandwidth), so the model has few physical parameters and extrapolates to GPUs and cluster
sizes it never saw. Convolutions and matrix products get efficiencies of their own on each
unit: cuDNN's convolutions (implicit GEMM with layout work, Winograd on FP32 cores) and
cuBLAS's GEMMs reach different shares of a peak, so what a convolution net's rows teach must
not move a transformer's GEMMs, nor the reverse. A card without the operator split is priced
from its totals (its FLOPs on terms of their own, saved activations written and read once):
its whole-model efficiency mixes convolutions, GEMMs and element-wise work, so it must move no
split card's GEMM efficiency, and its bound is the unit's peak, not a GEMM's.
numpy only: it is on the recommend path.
"""

from __future__ import annotations

import numpy as np

from advisor.memory import OPTIMIZER_STATE_BYTES
from advisor.sharding import (
    accumulating_share,
    autocast_rows,
    communication_scale,
    compute_scale,
    optimizer_scale,
    tensor_kernel_scale,
)
from gpuadvisor.cards import (
    AUTOCAST_BYTES_COLUMNS,
    FUSIBLE_CLASSES,
    INTENSITY_EDGES,
    OPERATOR_CLASSES,
    PROFILED_CLASSES,
    XLA_BYTES_COLUMN,
    XLA_KERNELS_COLUMN,
    executed_flops_column,
    profile_column,
)
from gpuadvisor.vocab import HALF_PRECISIONS, LOSS_SCALED_PRECISIONS

# Order of the design-matrix columns; the artifact stores coefficients in this order.
TERMS = ("compute_fp32", "compute_tensor", "compute_tf32", "conv_fp32", "conv_tensor", "conv_tf32",
         "unsplit_fp32", "unsplit_tensor", "unsplit_tf32", "grouped_conv", "memory", "fixed",
         "tensor_launch", "kernel_floor", "tensor_memory", "allreduce_inter", "allreduce_intra",
         "ps_link", "ps_server", "ps_server_tensor", "host_dispatch")
# A step is the smooth maximum of three sides that run concurrently: the worker's GPU work
# (every term before the servers'), the parameter servers' and the host's dispatch of the
# step's kernels (launches are asynchronous: a host that issues kernels faster than the GPU
# runs them is hidden behind it, one that issues them slower sets the step).
WORKER_TERMS = len(TERMS) - 3
# The terms a host's speed sets: the Python a step runs once (`fixed`: the training loop, the
# batch's hand-off, the synchronisations a benchmark times) and the dispatch of each kernel
# (`host_dispatch`). A benchmark's own machines run both at their own speed
# (fitting.fit_throughput_core's `host_effects`): cloud notebooks on 1-2.5 GHz vCPUs are
# slower than a DGX's Xeons, which no multiplicative effect on the step can say, since the
# host's work adds to the step or hides behind the GPU's.
HOST_TERMS = [TERMS.index(term) for term in ("fixed", "host_dispatch")]
SIDES = (slice(0, WORKER_TERMS), slice(WORKER_TERMS, len(TERMS) - 1),
         slice(len(TERMS) - 1, len(TERMS)))
SMOOTH_MAX_POWER = 4.0
# What one tiny operator costs the host the `host_dispatch` prior describes, in the probe the
# profiler's workers record with each trial (`extra.host_op_us`: in-place adds dispatched to
# the device, profiler.worker.host_dispatch_us): 1.8-2.1 us on this project's 2-vCPU
# development VM. A trial's host dispatches a step's kernels that much slower or faster.
REFERENCE_HOST_OP_US = 2.0

# The feature marking the rows whose step XLA compiled (advisor.features; a published row's
# `xla` column): XLA fuses each run of element-wise kernels into one and has no fused
# attention kernel, so such a row's element-wise traffic and kernels are its card's fused
# figures (gpuadvisor.cards.XLA_BYTES_COLUMN, XLA_KERNELS_COLUMN;
# profiler.operators.fused_elementwise).
XLA_KEY = "xla"
# The feature naming the GPU a configuration's measurements count for (cloud.gpus.silicon: a
# V100-32GB's are a V100's): what anchoring, measured configurations and held-out GPUs key on.
SILICON_KEY = "gpu_silicon"

# Prior coefficients: what the fit is pulled towards, and what a term keeps when the training
# data does not exercise it. Achieved fractions of peak once the memory-bound operators are
# priced apart: cuBLAS reaches about 70% of the tensor or FP32 peak on the large matrix
# products of training; a card without the operator split, whose FLOPs carry its memory-bound
# operators too, the whole-model efficiency published ResNet-50 runs reach (~35% of FP32
# peak: half the large-GEMM figure); element-wise kernels about 70% of DRAM bandwidth
# (STREAM-like); 5 ms fixed cost, half of the communication hidden behind backward; per
# tensor and optimizer step ~10 kernels of ~10 us on the GPU (the optimizer's and the
# gradient's per-parameter kernels, sharding.ACCUMULATE_SHARE of them every micro-step, which
# the card's `kernels_per_step` does not count: each small kernel's launch latency, ramp and
# tail, whatever its size), and ~1 MB per sample of
# activations read and written (a CIFAR-sized layer, three passes); a parameter server
# handles each tensor's push and pull as requests, ~100 us per tensor and worker (two RPCs
# of tens of microseconds of server work each). That last value was first read off CM-DARE
# rows, so a fit whose data exercise it (or the per-tensor traffic term) chooses the prior by
# inner cross-validation instead (advisor/fitting.py, TUNED_PRIORS); the values here are then
# only the fallback. A host dispatches a kernel of an eager step in ~10 us (Python, the
# dispatcher, autograd's bookkeeping and the CUDA launch: PyTorch's ~5-25 us an operator), on
# a host as fast as REFERENCE_HOST_OP_US says.
# A kernel also holds the GPU for a few microseconds however little it computes: the
# front end takes ~1 us to start the next queued kernel, and its one partial wave ramps up and
# drains, ~2 us more (a tiny element-wise op on a V100 or A100 runs for ~2-5 us in a
# profiler's timeline). So a step of K kernels costs the GPU at least ~3 us each
# (`kernel_floor`, beside the roofline): a recurrent decoder's tens of thousands of small
# kernels keep the GPU busy for that long even on a host fast enough to hide its dispatch.
# Several of these the published figures hardly inform, so their priors set them
# (benchmarks/coefficient_sensitivity.py --by prior: how far each fit follows its prior):
# the GPU's floor per kernel, the host's dispatch and both all-reduce terms almost wholly,
# the step's fixed cost and each tensor's kernels about half; the efficiencies hardly at all.
PRIOR = {
    "compute_fp32": 1 / 0.7,
    "compute_tensor": 1 / 0.7,
    "compute_tf32": 1 / 0.7,
    "conv_fp32": 1 / 0.7,
    "conv_tensor": 1 / 0.7,
    "conv_tf32": 1 / 0.7,
    "unsplit_fp32": 1 / 0.35,
    "unsplit_tensor": 1 / 0.35,
    "unsplit_tf32": 1 / 0.35,
    "grouped_conv": 1 / 0.7,
    "memory": 1 / 0.7,
    "fixed": 0.005,
    "tensor_launch": 1e-4,
    "kernel_floor": 3e-6,
    "tensor_memory": 1e6,
    "allreduce_inter": 0.5,
    "allreduce_intra": 0.5,
    "ps_link": 0.5,
    "ps_server": 1.0,
    "ps_server_tensor": 1e-4,
    "host_dispatch": 1e-5,
}
# Efficiency of each operator class relative to a large matrix product on the same unit,
# stated a priori: cuDNN's implicit-GEMM convolutions reach about 70% of what cuBLAS does on
# an equal GEMM (layout transforms, small spatial tiles), depthwise convolutions a quarter
# (no reuse to feed the units), fused attention kernels about 60% (softmax between
# two GEMMs); normalisation and element-wise work is memory-bound on every GPU.
RELATIVE_EFFICIENCY = {"matmul": 1.0, "conv": 0.7, "grouped_conv": 0.25, "attention": 0.6,
                       "norm": 1.0, "other": 1.0}
TENSOR_CLASSES = ("matmul", "conv", "attention")  # what cuBLAS/cuDNN run on tensor cores
# Depthwise convolutions (one input channel a group; ResNeXt's wider groups are implicit GEMMs,
# `conv`: profiler/operators.py) get a term of their own, compute- or memory-bound: their
# kernels fall short of both rooflines by a margin of their own (depthwise layers "cannot fully
# utilize modern accelerators", Tan & Le, EfficientNetV2, ICML 2021), so what a depthwise
# net's rows teach must not move the dense convolutions' or the element-wise kernels' terms.
GROUPED_CLASSES = ("grouped_conv",)
# On the FP32 cores cuDNN runs stride-1 convolutions with fast algorithms: 3x3 ones (the
# card's `winograd_flops_per_sample`) with Winograd's minimal filtering, F(2x2,3x3): 16
# multiplies where a direct convolution makes 36 (Lavin & Gray, CVPR 2016), the transforms
# being cheap additions; 5x5 ones (`conv5x5_flops_per_sample`) with FFT (cuDNN 3: "FFT
# convolutions accelerate larger filter sizes (5x5 and better)"), whose cost does not grow
# with the kernel, counted here at minimal filtering's F(2x2,5x5): 36 multiplies for a
# direct 100, the same accounting as the 3x3 ones'. Without them AlexNet on a P100 would run
# above the FP32 peak. Tensor cores run both as implicit GEMMs at their full count.
# Card column -> direct multiplies per fast-algorithm multiply.
FAST_CONV_REDUCTION = {"winograd_flops_per_sample": 36 / 16, "conv5x5_flops_per_sample": 100 / 36}
# PyTorch's defaults (since 1.12): torch.backends.cudnn.allow_tf32 = True, matmul TF32 off, so
# `fp32` runs convolutions in TF32 on GPUs that have it and matrix products in FP32.
FP32_DEFAULT_TF32_CLASSES = ("conv",)
# What a class moves under autocast per byte it moves in fp32, for a card without its
# autocast traffic (`<class>_autocast_bytes_per_sample`): as if every tensor were 16-bit.
HALF_BYTES = 0.5
# A card without the operator split: its saved activations are written in the forward pass
# and read in the backward pass (its FLOPs are the `unsplit_*` terms' work).
ACTIVATION_PASSES = 2.0
# An optimizer step reads each fp32 weight and its gradient and writes the weight (12 bytes a
# parameter), and reads and writes its state (advisor.memory.OPTIMIZER_STATE_BYTES): SGD with
# momentum 5 x 4 bytes a parameter, Adam, AdamW and RMSprop with momentum 7 x 4. LAMB (You et
# al. 2020) scales each tensor's Adam update by the ratio of the weight's norm to the update's,
# which its kernels pay with six more fp32 passes (apex's FusedLAMB, which NVIDIA's PyTorch
# BERT pre-trains with; apex optimizers/fused_lamb.py@16fadfe7, csrc/multi_tensor_lamb.cu
# @06a83ce7: the gradients' norm for clipping and the weights' norms read both, the first
# stage writes the update into the gradient, its norms read it, the second stage reads it and
# the weight again): 13 x 4 (TensorFlow's LAMBs and the TorchScript one NVIDIA's
# Transformer-XL steps compute the same norms in more kernels). NVIDIA's PyTorch BERT
# fine-tunes without AMP with `BertAdam` (run_squad.py@0663b67c; optimization.py@2a520dd5), a
# Python loop over the parameters that writes each intermediate out: the gradients' norm
# (multi_tensor_l2norm) reads the gradient, then m.mul_ and m.add_(g), v.mul_ and
# v.addcmul_(g, g), sqrt(v), + eps, m / that, wd * p, update += that, lr * update, its
# negation and p.add_: 31 x 4 bytes, 24 passes more than a fused Adam's 7 (the clipping line
# rescales a copy of the weight when the norm exceeds 1, not counted). A configuration that
# names no optimizer (features from before it was one) is priced as SGD with momentum.
UPDATE_WEIGHT_BYTES = 12.0
EXTRA_UPDATE_PASSES = {"lamb": 6.0, "bertadam": 24.0}
DEFAULT_OPTIMIZER = "sgd"
# Under accumulation a micro-step's weight gradient is added into the accumulated one (autograd's
# AccumulateGrad: .grad += g, in fp32 whatever the compute dtype): it reads both and writes
# the sum, three passes over the gradients that the card's trace, of one step whose gradients
# are written, does not count. An optimizer step's first micro-step writes them as traced.
ACCUMULATE_GRADIENT_PASSES = 3.0
# Mixed precision in fp16 scales the loss so that small gradients survive 16 bits, and
# unscales the gradients before each optimizer step, checking them for infinities on the way:
# PyTorch's GradScaler in one kernel over every gradient
# (torch._amp_foreach_non_finite_check_and_unscale_: it reads each fp32 gradient and writes it
# back divided), apex's amp and TensorFlow's and MXNet's loss-scale optimizers likewise. Two
# passes over the gradients an optimizer step, which the card's trace of the forward and
# backward passes does not hold. bf16 has fp32's range and needs no loss scale.
LOSS_SCALE_PASSES = 2.0
# Data-parallel workers reduce their gradients through flat buffers: PyTorch's DDP copies each
# gradient into its bucket and, once the bucket is all-reduced, back into .grad (its default,
# gradient_as_bucket_view=False); Horovod's fusion buffer and TensorFlow's packed all-reduce
# copy in and out the same way. Each copy reads and writes: four passes over the gradients
# an all-reduce, in the GPU's memory, whatever the link.
BUCKET_COPY_PASSES = 4.0
# GB/s per direction of a x16 PCIe link (PCI-SIG: 8, 16, 32 GT/s a lane from gen 3 to 5,
# 128b/130b encoding); GPUs of unknown generation are taken as gen 3.
PCIE_X16_GB_S = {3: 15.75, 4: 31.5, 5: 63.0}
# Intra-node bandwidth (GB/s) for a configuration that names no link (older feature rows).
FALLBACK_INTRA_NODE_GB_S = 100.0
# Dynamic power grows about as f^3 (P ~ C V^2 f, voltage rising with frequency). NVIDIA's
# base clock is what a part holds at its power limit under a worst-case load; a training
# step's heavy kernels are taken to draw half that power per cycle, so they run at
# base * 2^(1/3), up to the boost clock the peak TFLOPS figures are quoted at. This derates
# power-limited parts (T4 70 W: 0.46, L4 72 W: 0.49) and leaves A100/H100 near their peak.
TRAINING_POWER_ACTIVITY = 0.5
# cuDNN's tensor-core convolutions work on NHWC tensors: fed NCHW ones (PyTorch's default
# memory format) in 16 bits, it transposes each convolution's inputs and outputs around the
# kernel, and a transpose reads a tensor and writes it again: two more passes over the
# convolution's traffic. NCHW against channels-last in AMP, measured: a third party's
# torchvision ResNet-50 on a V100, 841 and 1,154 images/s (1.37x); timm's train benchmark on
# an RTX 3090 (published_throughput.csv), 1.15x (DenseNet-161) to 1.47x (ResNet-50). Priced
# with one pass these pairs were 1.09-1.20x apart, with two (refitted) 1.20-1.41x. A
# configuration says its format in `channels_last` (1: channels-last; 0 or absent: NCHW).
LAYOUT_TRANSPOSE_PASSES = 2.0
# The share of its FP32 cores a GPU's warp schedulers can feed without dual issue. A Kepler
# SMX has 192 FP32 cores behind 4 warp schedulers of one 32-thread warp instruction a cycle
# each (NVIDIA, Kepler GK110 whitepaper): single issue feeds 128 of them, the other 64 only
# when a warp has a second independent FP32 instruction ready in the same cycle. From Maxwell
# on, each scheduler owns exactly a warp's width of cores, so single issue keeps all of them
# busy (NVIDIA, Maxwell Tuning Guide, "Instruction Scheduling"). The datasheet counts all 192;
# the efficiencies this model fits on later GPUs would otherwise be read as Kepler's too.
FP32_ISSUE_FRACTION = {"kepler": 128 / 192}


def sustained_clock_fraction(base_mhz: float | None, boost_mhz: float | None) -> float:
    """The share of its boost clock a GPU sustains under training load (1 where unknown)."""
    if not base_mhz or not boost_mhz:
        return 1.0
    return min(1.0, base_mhz / boost_mhz * TRAINING_POWER_ACTIVITY ** (-1 / 3))


def fp32_issue_fraction(architecture: str | None) -> float:
    """The share of a GPU's datasheet FP32 peak that single-issue code can reach (1 from
    Maxwell on, and where the architecture is unknown)."""
    return FP32_ISSUE_FRACTION.get(str(architecture or "").lower(), 1.0)


def intra_node_gb_s(interconnect: str | None, pcie_gen: int | None,
                    nvlink_gb_s: float | None) -> float:
    """All-reduce bandwidth per GPU and direction inside a node: half the GPU's NVLink
    figure (datasheets quote both directions) where the node links its GPUs by NVLink or
    NVSwitch, else the GPU's x16 PCIe link. 8 L4s on PCIe 4 get 31.5 GB/s, 8 A100s on
    NVSwitch 300."""
    if str(interconnect).lower() in ("nvlink", "nvswitch") and nvlink_gb_s:
        return nvlink_gb_s / 2
    return PCIE_X16_GB_S.get(pcie_gen or 3, PCIE_X16_GB_S[3])


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


def unique_keys(*columns) -> tuple[list[str], np.ndarray]:
    """Distinct rows of the columns as 'a|b|c' strings (lower case, numbers as integers) and
    each row's index into them. A column is an array or its `factorize` pair."""
    first = columns[0]
    inverse = np.zeros(len(first[1] if isinstance(first, tuple) else first), dtype=np.int64)
    keys = [""]
    for column in columns:
        names, codes = column if isinstance(column, tuple) else factorize(column)
        names = names.tolist()
        combos, inverse = dense_codes(inverse * len(names) + codes)
        keys = [keys[c // len(names)] + "|" + names[c % len(names)] for c in combos.tolist()]
    return [k[1:] for k in keys], inverse.reshape(-1)


def identity(features: dict, key: str) -> str:
    """The column that says which `key` a row's measurements count for: the GPU's silicon
    (SILICON_KEY) for `gpu` where the features carry it, else `key` itself."""
    return SILICON_KEY if key == "gpu" and SILICON_KEY in features else key


def codes(features: dict, key: str) -> tuple[np.ndarray, np.ndarray]:
    return features.codes(key) if isinstance(features, Encoded) else factorize(features[key])


def is_in(features: dict, key: str, values) -> np.ndarray:
    """Rows whose (lower-cased) `key` is one of `values`."""
    names, inverse = codes(features, key)
    return np.isin(names, values)[inverse]


def _optional(features: dict, key: str, n: int) -> np.ndarray:
    return np.asarray(features.get(key, np.full(n, np.nan)), dtype=float)


def has_operator_split(features: dict, n: int) -> np.ndarray:
    """Rows whose card carries the operator split (FLOPs and bytes by class)."""
    return np.isfinite(_optional(features, "matmul_flops_per_sample", n))


def operator_work(features: dict) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray],
                                           np.ndarray]:
    """(FLOPs, bytes) per sample of each operator class, and which rows have the card's split;
    a row without it is priced from its totals (every FLOP in the matmul class, priced on the
    `unsplit_*` terms; activations written and read)."""
    flops_total = _arr(features, "flops_per_sample")
    n = len(flops_total)
    split = has_operator_split(features, n)
    activation = np.nan_to_num(_arr(features, "activation_bytes"))
    flops, nbytes = {}, {}
    for kind in OPERATOR_CLASSES:
        f = np.nan_to_num(_optional(features, f"{kind}_flops_per_sample", n))
        b = np.nan_to_num(_optional(features, f"{kind}_bytes_per_sample", n))
        flops[kind] = np.where(split, f, flops_total if kind == "matmul" else 0.0)
        nbytes[kind] = np.where(split, b, ACTIVATION_PASSES * activation
                                if kind == "other" else 0.0)
    share = fused_elementwise_share(features, nbytes["other"] + nbytes["norm"], split)
    for kind in FUSIBLE_CLASSES:
        nbytes[kind] = nbytes[kind] * share
    return flops, nbytes, split


def xla_rows(features: dict, column: str, n: int) -> np.ndarray:
    """The rows compiled with XLA (XLA_KEY) whose card has the fused `column`."""
    return (np.nan_to_num(_optional(features, XLA_KEY, n)) > 0) \
        & np.isfinite(_optional(features, column, n))


def fused_elementwise_share(features: dict, elementwise: np.ndarray,
                            split: np.ndarray) -> np.ndarray:
    """What each row's element-wise classes move per byte the card's eager trace counts
    (`elementwise`, bytes per sample): the card's fused figure over it where XLA compiled the
    step (XLA_BYTES_COLUMN: consecutive element-wise kernels fused, attention written out),
    else 1. Applied to each precision's traffic alike."""
    n = len(elementwise)
    xla = xla_rows(features, XLA_BYTES_COLUMN, n) & split & (elementwise > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(xla, _optional(features, XLA_BYTES_COLUMN, n) / elementwise, 1.0)


def executed_flops(features: dict, kind: str, counted: np.ndarray) -> np.ndarray:
    """The FLOPs per sample class `kind`'s kernels execute: the card's tile-rounded count
    (gpuadvisor.cards.TILED_CLASSES) where it has one, else `counted`."""
    executed = _optional(features, executed_flops_column(kind), len(counted))
    return np.where(np.isfinite(executed), executed, counted)


def gpu_flag(features: dict, key: str) -> np.ndarray:
    """A GPU capability (feature 1/0) of each row; false where unknown."""
    n = len(_arr(features, "gpu_fp32_tflops"))
    return np.nan_to_num(_optional(features, key, n)) > 0


def on_tensor_cores(features: dict) -> dict[str, np.ndarray]:
    """Per operator class, the rows whose arithmetic runs on tensor cores: 16-bit precisions
    wherever the GPU has a 16-bit figure; `tf32` on GPUs with TF32; `fp32` convolutions on
    GPUs with TF32 (PyTorch's cuDNN default)."""
    has_tensor = _arr(features, "gpu_tensor_tflops") > 0
    tf32_gpu = gpu_flag(features, "gpu_tf32")
    half = is_in(features, "precision", HALF_PRECISIONS)
    tf32 = is_in(features, "precision", ["tf32"]) & tf32_gpu
    fp32 = is_in(features, "precision", ["fp32"]) & tf32_gpu
    return {kind: has_tensor & (half | tf32 | (fp32 & (kind in FP32_DEFAULT_TF32_CLASSES)))
            if kind in TENSOR_CLASSES else np.zeros(len(has_tensor), dtype=bool)
            for kind in OPERATOR_CLASSES}


def arithmetic_unit(features: dict) -> np.ndarray:
    """The unit a row's heavy arithmetic runs on: `tensor16` (FP16/BF16 tensor cores),
    `tf32` (TF32 tensor cores: `tf32`, or `fp32` convolutions on Ampere and later) or `fp32`
    (the FP32 cores). Efficiencies learnt on one unit say little about another, so a unit
    the training data never ran on is an axis of extrapolation."""
    tensor = on_tensor_cores(features)
    any_tensor = np.any([tensor[kind] for kind in TENSOR_CLASSES], axis=0)
    half = is_in(features, "precision", HALF_PRECISIONS)
    return np.where(any_tensor, np.where(half, "tensor16", "tf32"), "fp32")


def sustained_peaks(features: dict) -> tuple[np.ndarray, np.ndarray]:
    """(FP32, tensor-core) TFLOPS each row sustains: datasheet peaks at the sustained share of
    the boost clock, the FP32 one at the share of its cores single issue feeds; the tensor
    figure halves in TF32 (every precision but the 16-bit ones)."""
    n = len(_arr(features, "gpu_fp32_tflops"))
    clock = np.nan_to_num(_optional(features, "gpu_clock_fraction", n), nan=1.0)
    issue = np.nan_to_num(_optional(features, "gpu_fp32_issue_fraction", n), nan=1.0)
    half = is_in(features, "precision", HALF_PRECISIONS)
    tensor = _arr(features, "gpu_tensor_tflops") * np.where(half, 1.0, 0.5)
    return _arr(features, "gpu_fp32_tflops") * clock * issue, tensor * clock


def winograd_spared(features: dict, n: int) -> np.ndarray:
    """FLOPs a sample's 3x3 and 5x5 stride-1 convolutions spare on the FP32 cores, which run
    them with fast algorithms (FAST_CONV_REDUCTION; 0 where the card has no split)."""
    return sum(np.nan_to_num(_optional(features, column, n)) * (1 - 1 / reduction)
               for column, reduction in FAST_CONV_REDUCTION.items())


def roofline_terms(features: dict) -> dict[str, np.ndarray]:
    """Seconds at full efficiency, per row, of the compute-bound work of the GEMM-like and of
    the dense convolution classes on FP32 cores, 16-bit tensor cores and TF32 tensor cores
    (`compute_fp32`, `compute_tensor`, `compute_tf32`, `conv_fp32`, `conv_tensor`, `conv_tf32`),
    of a card without the split at the unit's peak (`unsplit_*`), of the depthwise convolutions
    whichever side binds (`grouped_conv`) and of the memory-bound traffic (`memory`); each
    class binds where its prior time is longer."""
    batch = _arr(features, "batch_per_gpu")
    bandwidth = _arr(features, "gpu_mem_bw_gbps") * 1e9
    fp32_peak, tensor_peak = sustained_peaks(features)
    tensor = on_tensor_cores(features)
    half = is_in(features, "precision", HALF_PRECISIONS)
    autocast = autocast_rows(features, len(batch), half)
    flops, nbytes, split = operator_work(features)
    flops = {kind: np.where(split, executed_flops(features, kind, flops[kind]), flops[kind])
             for kind in OPERATOR_CLASSES}
    efficiency = {kind: np.where(split, RELATIVE_EFFICIENCY[kind], 1.0)
                  for kind in OPERATOR_CLASSES}
    out = {name: np.zeros(len(batch)) for name in TERMS[:TERMS.index("memory") + 1]}
    spared = np.where(split, winograd_spared(features, len(batch)), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        for kind in OPERATOR_CLASSES:
            peak = np.where(tensor[kind], tensor_peak, fp32_peak) * 1e12
            work = flops[kind] - np.where(tensor[kind], 0.0, spared) if kind == "conv" \
                else flops[kind]
            compute = work * batch / (peak * efficiency[kind])
            act_scale = traffic_scale(features, kind, half, autocast)
            traffic = nbytes[kind] * act_scale * batch / bandwidth
            if kind == "conv":  # what NCHW's transposes move again (below)
                conv_traffic = traffic
            prior = np.where(tensor[kind], PRIOR["compute_tensor"], PRIOR["compute_fp32"])
            prior = np.where(split, prior, PRIOR["unsplit_fp32"])
            # Which side binds is decided at the prior efficiencies: per operator where the
            # card profiles the class, else for the class as a whole.
            whole = compute * prior < traffic * PRIOR["memory"]
            if kind in PROFILED_CLASSES:
                balance = act_scale * PRIOR["memory"] * peak * efficiency[kind] \
                    / (bandwidth * prior)
                flops_share, bytes_share = memory_bound_shares(features, kind, balance, whole)
            else:
                flops_share = bytes_share = whole.astype(float)
            compute = compute * (1 - flops_share)
            traffic = traffic * bytes_share
            if kind in GROUPED_CLASSES:
                out["grouped_conv"] += compute + traffic
                continue
            for family, rows in (("conv" if kind == "conv" else "compute", split),
                                 ("unsplit", ~split)):
                out[f"{family}_tensor"] += np.where(rows & tensor[kind] & half, compute, 0.0)
                out[f"{family}_tf32"] += np.where(rows & tensor[kind] & ~half, compute, 0.0)
                out[f"{family}_fp32"] += np.where(rows & ~tensor[kind], compute, 0.0)
            out["memory"] += traffic
    out["memory"] = out["memory"] + np.nan_to_num(_optional(features, "step_bytes",
                                                            len(batch))) / bandwidth
    out["memory"] += np.where(_transposed(features, split & half & tensor["conv"]),
                              LAYOUT_TRANSPOSE_PASSES * conv_traffic, 0.0)
    return out


def _transposed(features: dict, tensor_core_convs: np.ndarray) -> np.ndarray:
    """Of the rows whose split card's convolutions run on 16-bit tensor cores, those in NCHW."""
    channels_last = _optional(features, "channels_last", len(tensor_core_convs))
    return tensor_core_convs & ~(np.nan_to_num(channels_last) > 0)


def nchw_transposes(features: dict) -> np.ndarray:
    """Rows whose convolutions cuDNN transposes (LAYOUT_TRANSPOSE_PASSES): a split card's
    convolutions on 16-bit tensor cores, in NCHW. Elsewhere the memory format changes nothing
    the physics prices, so a measurement in either format is of the same configuration."""
    flops, _, split = operator_work(features)
    half = is_in(features, "precision", HALF_PRECISIONS)
    return _transposed(features, split & half & on_tensor_cores(features)["conv"]
                       & (flops["conv"] > 0))


def traffic_scale(features: dict, kind: str, half: np.ndarray,
                  autocast: np.ndarray) -> np.ndarray:
    """Bytes class `kind` moves at each row's precision per byte it moves in fp32: 1 in FP32
    and TF32; under autocast (16-bit DDP rows) the card's autocast traffic over its fp32
    traffic (a 16-bit GEMM's 0.5; a transformer's element-wise work near 1, its residual stream
    being fp32), else HALF_BYTES: a card without the column, and FSDP in 16 bits, whose
    parameters and activations are 16-bit throughout. `half` marks the 16-bit rows,
    `autocast` those of them under autocast (sharding.autocast_rows)."""
    n = len(half)
    fp32 = np.nan_to_num(_optional(features, f"{kind}_bytes_per_sample", n))
    autocast_bytes = _optional(features, AUTOCAST_BYTES_COLUMNS[kind], n)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(np.isfinite(autocast_bytes) & (fp32 > 0), autocast_bytes / fp32,
                         HALF_BYTES)
    return np.where(autocast, ratio, np.where(half, HALF_BYTES, 1.0))


def memory_bound_shares(features: dict, kind: str, balance: np.ndarray,
                        whole: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(share of the FLOPs, share of the bytes) of class `kind` in operators whose intensity
    (FLOPs per fp32 byte) is below each row's `balance` point: those operators are
    memory-bound there. Read off the card's intensity profile (gpuadvisor.cards.
    PROFILE_COLUMNS), linear in log intensity between its edges, none below half the first
    edge, the last edge's shares above it; where the card has no profile, all or nothing as
    `whole` (the class's mean intensity) says."""
    n = len(balance)
    grid = np.log2([INTENSITY_EDGES[0] / 2, *INTENSITY_EDGES])
    with np.errstate(divide="ignore"):
        position = np.log2(np.nan_to_num(balance, nan=0.0))
    index = np.clip(np.searchsorted(grid, position, side="right") - 1, 0, len(grid) - 2)
    weight = np.clip((position - grid[index]) / (grid[index + 1] - grid[index]), 0.0, 1.0)
    rows = np.arange(n)
    shares = []
    for what in ("flops", "bytes"):
        under = np.column_stack([np.zeros(n)] + [
            _optional(features, profile_column(kind, edge, what), n)
            for edge in INTENSITY_EDGES])
        total = np.nan_to_num(_optional(features, f"{kind}_{what}_per_sample", n))
        if what == "flops":  # the profile's FLOPs are those the kernels execute
            total = executed_flops(features, kind, total)
        profiled = np.isfinite(under).all(axis=1) & (total > 0)
        value = under[rows, index] * (1 - weight) + under[rows, index + 1] * weight
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.clip(np.where(profiled, value / total, 0.0), 0.0, 1.0)
        shares.append(np.where(profiled, share, whole.astype(float)))
    return shares[0], shares[1]


def design_matrix(features: dict) -> np.ndarray:
    """Per-row seconds of each term at coefficient 1: shape (n, len(TERMS))."""
    roofline = roofline_terms(features)
    batch = _arr(features, "batch_per_gpu")
    nodes = _arr(features, "nodes")
    per_node = _arr(features, "gpus_per_node")
    grad = _arr(features, "gradient_bytes")
    net = _arr(features, "network_gbps") * 1e9 / 8
    intra_link = np.nan_to_num(_optional(features, "intra_node_gb_s", len(batch)),
                               nan=FALLBACK_INTRA_NODE_GB_S) * 1e9
    ps_sync = is_in(features, "sync", ["ps"])
    ps_count = np.maximum(np.nan_to_num(_arr(features, "ps_count"), nan=1.0), 1.0)
    workers = nodes * per_node
    inter = np.where(ps_sync, 0.0, 2 * (nodes - 1) / nodes * grad / net)
    intra = np.where(ps_sync, 0.0, 2 * (per_node - 1) / per_node * grad / intra_link)
    ps_link = np.where(ps_sync, 2 * grad / net, 0.0)
    ps_server = np.where(ps_sync, 2 * grad * workers / (ps_count * net), 0.0)
    fixed = np.ones_like(batch)
    tensors = np.nan_to_num(np.asarray(features.get("tensors", np.zeros(len(batch))), float))
    # Per-layer activation traffic stands in for the bytes of a card without the split; a
    # split card's traffic is already in its classes' bytes (the `memory` term).
    memory_bw = _arr(features, "gpu_mem_bw_gbps") * 1e9
    tensor_memory = np.where(has_operator_split(features, len(batch)), 0.0,
                             tensors * batch / memory_bw)
    ps_server_tensor = np.where(ps_sync, tensors * workers / ps_count, 0.0)
    # The layout (advisor/sharding.py): recomputed forwards, FSDP's gathers, accumulation.
    work, traffic = compute_scale(features, len(batch)), communication_scale(features, len(batch))
    kernels = kernels_per_step(features, len(batch))
    columns = {**{name: values * work for name, values in roofline.items()}, "fixed": fixed,
               "memory": roofline["memory"] * work
               + untraced_gradient_bytes(features, len(batch), traffic) / memory_bw,
               "tensor_launch": tensors * tensor_kernel_scale(features, len(batch)),
               "kernel_floor": kernels * work,
               "tensor_memory": tensor_memory * work,
               "allreduce_inter": inter * traffic, "allreduce_intra": intra * traffic,
               "ps_link": ps_link, "ps_server": ps_server, "ps_server_tensor": ps_server_tensor,
               "host_dispatch": kernels * work * host_speed(features, len(batch))}
    return np.column_stack([columns[name] for name in TERMS]).astype(float)


def untraced_gradient_bytes(features: dict, n: int, traffic: np.ndarray) -> np.ndarray:
    """Bytes a worker's micro-step moves through its memory for the parameters and gradients
    beyond the card's one-step trace: the optimizer's update (once per optimizer step, on its
    shard, not recomputed) and in fp16 the loss scale's unscaling before it
    (LOSS_SCALE_PASSES), accumulation's adds into the accumulated gradients, and an
    all-reduce's copies into its buckets and back (`traffic`: the communication per
    micro-step, sharding.communication_scale)."""
    grad = _arr(features, "gradient_bytes")
    workers = _arr(features, "nodes") * _arr(features, "gpus_per_node")
    unscale = np.where(is_in(features, "precision", LOSS_SCALED_PRECISIONS),
                       LOSS_SCALE_PASSES * grad, 0.0)
    update = (optimizer_update_bytes(features, n) * np.nan_to_num(_arr(features, "params"))
              + unscale) * optimizer_scale(features, n)
    accumulate = ACCUMULATE_GRADIENT_PASSES * grad * accumulating_share(features, n)
    data_parallel = ~is_in(features, "sync", ["ps"]) & (workers > 1)
    buckets = np.where(data_parallel, BUCKET_COPY_PASSES * grad * traffic, 0.0)
    return update + accumulate + buckets


def optimizer_update_bytes(features: dict, n: int) -> np.ndarray:
    """Bytes an optimizer step moves a parameter (`optimizer_update_bytes`, update_bytes),
    SGD with momentum's where a row names none."""
    given = _optional(features, "optimizer_update_bytes", n)
    return np.where(np.isfinite(given), given, update_bytes(DEFAULT_OPTIMIZER))


def update_bytes(optimizer: str) -> float:
    """Bytes a step of `optimizer` (an advisor.memory.OPTIMIZER_STATE_BYTES name) moves a
    parameter: the weight's read and write, the gradient's read, its state's read and write
    and its own further passes (UPDATE_WEIGHT_BYTES, EXTRA_UPDATE_PASSES)."""
    return (UPDATE_WEIGHT_BYTES + 2.0 * OPTIMIZER_STATE_BYTES[optimizer]
            + 4.0 * EXTRA_UPDATE_PASSES.get(optimizer, 0.0))


def kernels_per_step(features: dict, n: int) -> np.ndarray:
    """The kernels the host dispatches a step: the card's, and under autocast the casts it
    adds in front of its 16-bit operators (0 for a card without the columns); under XLA the
    card's fused count (XLA_KERNELS_COLUMN)."""
    kernels = np.nan_to_num(_optional(features, "kernels_per_step", n))
    casts = np.nan_to_num(_optional(features, "autocast_kernels_per_step", n))
    half = is_in(features, "precision", HALF_PRECISIONS)
    eager = kernels + np.where(autocast_rows(features, n, half), casts, 0.0)
    # XLA folds autocast's casts into its fused kernels
    return np.where(xla_rows(features, XLA_KERNELS_COLUMN, n),
                    _optional(features, XLA_KERNELS_COLUMN, n), eager)


def host_speed(features: dict, n: int) -> np.ndarray:
    """How much slower than the reference host each row's host dispatches an operator (its
    recorded `host_op_us` over REFERENCE_HOST_OP_US; 1 where none was recorded)."""
    recorded = _optional(features, "host_op_us", n)
    return np.where(recorded > 0, recorded / REFERENCE_HOST_OP_US, 1.0)


def _sides(design: np.ndarray, theta: np.ndarray) -> list[np.ndarray]:
    return [design[:, side] @ theta[side] for side in SIDES]


def combine(design: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Seconds per step from the design matrix and coefficients (in TERMS order)."""
    return sum(side ** SMOOTH_MAX_POWER for side in _sides(design, theta)) \
        ** (1 / SMOOTH_MAX_POWER)


def log_combine_gradient(design: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """d log(combine(design, theta)) / d log(theta): shape (rows, terms). Each term's share of
    its side (SIDES), times that side's share of the smooth maximum."""
    sides = _sides(design, theta)
    total = sum(side ** SMOOTH_MAX_POWER for side in sides)
    scale = np.zeros_like(design)
    with np.errstate(divide="ignore", invalid="ignore"):
        for side, seconds in zip(SIDES, sides):
            scale[:, side] = np.where(seconds > 0, seconds ** (SMOOTH_MAX_POWER - 1) / total,
                                      0.0)[:, None]
    return design * theta * scale


# A worker's step in the parts a person can act on (`--explain`): arithmetic, memory-bound
# work, gradient exchange, and what each step costs whatever its size.
STEP_PARTS = {
    "compute": ("compute_fp32", "compute_tensor", "compute_tf32", "conv_fp32", "conv_tensor",
                "conv_tf32", "unsplit_fp32", "unsplit_tensor", "unsplit_tf32", "grouped_conv"),
    "memory": ("memory", "tensor_memory"),
    "communication": ("allreduce_inter", "allreduce_intra", "ps_link"),
    "per_step": ("fixed", "tensor_launch", "kernel_floor"),
}


def theta(coefficients: dict | None = None) -> np.ndarray:
    """Coefficients in TERMS order: the fitted ones, PRIOR's for the rest."""
    coef = {**PRIOR, **(coefficients or {})}
    return np.array([coef[t] for t in TERMS])


def step_parts(features: dict, coefficients: dict | None = None) -> dict[str, np.ndarray]:
    """Seconds of each part (STEP_PARTS) of a worker's step under the physical model: before
    the learned correction and any software stack's effect, and without the parameter
    servers' side, which a smooth maximum sets against the worker's."""
    seconds = design_matrix(features) * theta(coefficients)
    return {part: sum(seconds[:, TERMS.index(t)] for t in terms)
            for part, terms in STEP_PARTS.items()}


def host_seconds(features: dict, coefficients: dict | None = None) -> np.ndarray:
    """Seconds the host takes to dispatch a step's kernels: the host's side of the smooth
    maximum, which sets the step where it exceeds the worker's GPU work."""
    return _sides(design_matrix(features), theta(coefficients))[-1]


def step_time(features: dict, coefficients: dict | None = None,
              host_scale: np.ndarray | None = None) -> np.ndarray:
    """Seconds per step of one worker under the physical model; `host_scale`: how much slower
    than the reference each row's host runs the step's Python (with_host_scale)."""
    return combine(with_host_scale(design_matrix(features), host_scale), theta(coefficients))


def with_host_scale(design: np.ndarray, host_scale: np.ndarray | None) -> np.ndarray:
    """The design matrix with each row's HOST_TERMS columns times its `host_scale` (a copy;
    the matrix itself where there is no scale)."""
    if host_scale is None:
        return design
    scaled = design.copy()
    scaled[:, HOST_TERMS] *= np.asarray(host_scale, dtype=float)[:, None]
    return scaled


def cluster_throughput(features: dict, seconds_per_step: np.ndarray) -> np.ndarray:
    """Samples/s of the whole cluster: every worker finishes a batch per step."""
    workers = _arr(features, "nodes") * _arr(features, "gpus_per_node")
    return workers * _arr(features, "batch_per_gpu") / seconds_per_step


def effective_peak_tflops(features: dict) -> np.ndarray:
    """The sustained ceiling the arithmetic runs under: each class's peak (tensor cores or
    FP32), harmonically weighted by the class's FLOPs."""
    fp32_peak, tensor_peak = sustained_peaks(features)
    tensor = on_tensor_cores(features)
    flops, _, _ = operator_work(features)
    total = sum(flops.values())
    seconds = sum(flops[k] / np.where(tensor[k], tensor_peak, fp32_peak) for k in flops)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, total / seconds, fp32_peak)


def peak_throughput(features: dict) -> np.ndarray:
    """Samples/s of the cluster if every FLOP ran at the datasheet peak of the fastest unit
    the precision may use (tensor cores, TF32 on GPUs that have it for the 32-bit ones):
    model FLOPs utilisation 100%, which no configuration reaches, so no prediction and no
    interval may pass it. On the FP32 cores a 3x3 or 5x5 stride-1 convolution needs only a fast
    algorithm's share of its multiplies (VGG16 on a P100 runs at 1.35x the FP32 peak in
    direct-convolution FLOPs), so the bound there counts its FLOPs as the step time does."""
    half = is_in(features, "precision", HALF_PRECISIONS)
    tf32 = gpu_flag(features, "gpu_tf32")
    tensor = _arr(features, "gpu_tensor_tflops") * np.where(half, 1.0, np.where(tf32, 0.5, 0.0))
    n = len(tensor)
    scale = compute_scale(features, n)
    work = _arr(features, "flops_per_sample") * scale
    fewest = work - winograd_spared(features, n) * scale  # the multiplies FP32 cores need
    workers = _arr(features, "nodes") * _arr(features, "gpus_per_node")
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.maximum(_arr(features, "gpu_fp32_tflops") * 1e12 / fewest,
                          tensor * 1e12 / work)
        return np.where(work > 0, workers * rate, np.inf)


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
