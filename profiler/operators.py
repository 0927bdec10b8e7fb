"""Per-operator work of a training step: FLOPs and memory traffic by operator class.

One training step of a zoo model runs on the meta device (shapes only) under a dispatch mode
that sees every aten operator the forward and backward passes execute. Each operator's FLOPs
come from torch's FLOP formulas (the grouped-convolution backward corrected as in
profiler/cards.py) and its bytes are what it reads and writes: every tensor argument and
every tensor result, views and allocations excepted (they move nothing). PyTorch's eager
mode runs each operator as its own kernel, so these are the bytes that cross DRAM.

Operators fall in classes that run on different units of a GPU, so that an advisor can put
each class's time at max(FLOPs / peak of its unit, bytes / memory bandwidth) on any GPU
(the per-operator roofline behind Habitat's cross-GPU scaling):

- `matmul`: dense matrix products (linear layers, attention projections, LM heads);
- `conv`: dense convolutions (groups = 1), which cuDNN runs as implicit GEMMs; the FLOPs of
  those with 3x3 and with 5x5 kernels at stride 1 are also counted apart
  (`winograd_flops_per_sample`, `conv5x5_flops_per_sample`): on the FP32 cores cuDNN runs
  them with fast algorithms (Winograd's for 3x3, FFT for 5x5), which need fewer multiplies;
- `grouped_conv`: depthwise convolutions (one input channel a group: MobileNet's, EfficientNet's,
  ConvNeXt's), which tensor cores barely help; a grouped convolution whose groups read several
  channels each (ResNeXt's 32 groups of 4 to 32) runs as a small implicit GEMM per group, and
  counts as `conv`;
- `attention`: fused scaled-dot-product attention kernels, at the FLOPs they execute: a causal
  kernel (FlashAttention's, PyTorch's memory-efficient one) skips the key blocks above the
  diagonal, so a decoder's attention does about half the work FLOP formulas (and MFU, and
  the card's `flops_per_sample`) count for it;
- `norm`: batch, layer and group normalisation, forward and backward;
- `other`: element-wise work, activations, pooling, softmax, embeddings, losses.

A matrix product, dense convolution or fused attention kernel also executes the FLOPs of
whole tiles: cuBLAS and cuDNN split a GEMM's output into tiles of fixed size, and a dimension
that is not a multiple of the tile leaves its last tile partly empty, computed all the same
(tile quantization; NVIDIA, Matrix Multiplication Background User's Guide, DU-09799-001, 2023,
§2.3 and §3.1); an attention kernel works in blocks of queries and keys the same way. The card
keeps those executed FLOPs (`<class>_tiled_flops_per_sample` for matmul, conv and attention,
whose intensity profiles are of them): InceptionV3's 48-, 80- and 96-channel convolutions
execute a third to three fifths more than they count, a ResNet-50's almost none, and a
ViT-B/16's attention over 197 tokens computes 256 of them.

The trace runs at batches 1 and 2: the difference is the per-sample work, the rest is work
per step whatever the batch (reading weights, writing weight gradients). Each matrix product,
convolution and attention kernel's own per-sample FLOPs and bytes give its arithmetic
intensity, and the card keeps how each class's work spreads over it (`intensity_profile`), so
that an advisor can price one operator at a time: a class's mean intensity would put all of
its operators on one side of a GPU's balance point. It also tallies the
logits a loss's log-softmax reads (`logits_bytes_per_sample`): a language model's scores over
its vocabulary, whose fp32 copies at the loss dominate its memory at the start of backward.
"""

from __future__ import annotations

import difflib
import math

from gpuadvisor.cards import (
    AUTOCAST_BYTES_COLUMNS,
    FUSIBLE_CLASSES,
    INTENSITY_EDGES,
    PROFILE_COLUMNS,
    PROFILED_CLASSES,
    TILED_CLASSES,
    XLA_BYTES_COLUMN,
    XLA_KERNELS_COLUMN,
    profile_column,
    tiled_column,
)
from gpuadvisor.cards import OPERATOR_CLASSES as CLASSES
from profiler import zoo
from profiler.autocast_memory import (
    FP32_BYTES,
    FP32_OPS,
    FP32_SET_OPT_DTYPE_OPS,
    HALF_BYTES,
    LOWER_PRECISION_OPS,
    AutocastWidths,
    storage_key,
)

# The tallies of the convolutions fast algorithms take, by kernel size, inside `conv`.
FAST_TALLIES = {3: "winograd", 5: "conv5x5"}
LOGITS = "logits"  # the tally of the bytes log-softmax reads (a loss's scores)

_MATMUL = {"mm", "addmm", "bmm", "baddbmm", "_scaled_mm"}
_CONV = {"convolution", "_convolution", "convolution_backward"}
# PyTorch's scaled-dot-product kernels, whose tensors are (batch, heads, length, head size).
_SDPA_PREFIX = "_scaled_dot_product_"
_ATTENTION_PREFIXES = (_SDPA_PREFIX, "_efficient_attention", "_flash_attention")
_GROUPS_ARG = {"convolution": 8, "_convolution": 8, "convolution_backward": 9}
# Where a convolution's weight and stride are among its arguments.
_WEIGHT_ARG = {"convolution": 1, "_convolution": 1, "convolution_backward": 2}
_STRIDE_ARG = {"convolution": 3, "_convolution": 3, "convolution_backward": 4}
# The query rows a fused attention kernel handles as one tile (FlashAttention-2's block of
# 128 rows, Dao 2023): a causal kernel computes the tiles on or below the diagonal.
ATTENTION_TILE = 128
# The tile edge the GEMM dimensions a step's batch does not set (a weight's, an attention
# kernel's sequence lengths and head size) are rounded up to: 64, the smallest of cuBLAS's
# usual tensor-core tiles (64x64 up to 256x128, the guide's §2.3; fused attention kernels
# work in blocks of 64 to 128 queries and keys). Libraries choose a tile per shape to waste
# least, so rounding to the smallest usual tile is the least padding any choice leaves.
# Dimensions the batch sets (a linear layer's tokens, a convolution's N*H*W) are long at
# training batches and not rounded. A grouped convolution's kernels tile several groups at
# once: not rounded either.
GEMM_TILE = 64
# Operators that move no data: they only allocate or describe memory.
_NO_TRAFFIC = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
               "detach", "lift_fresh", "alias", "_unsafe_view", "zeros_like", "ones_like",
               "full_like", "scalar_tensor", "_local_scalar_dense", "set_", "resize_"}


def operator_class(name: str, args) -> str:
    """The class of aten operator `name` (an OpOverloadPacket's name) called with `args`."""
    if name in _MATMUL:
        return "matmul"
    if name in _CONV:
        groups = args[_GROUPS_ARG[name]] if len(args) > _GROUPS_ARG[name] else 1
        weight = args[_WEIGHT_ARG[name]] if len(args) > _WEIGHT_ARG[name] else None
        depthwise = weight is None or weight.shape[1] == 1  # one input channel a group
        return "conv" if groups == 1 or not depthwise else "grouped_conv"
    if name.startswith(_ATTENTION_PREFIXES):
        return "attention"
    if "norm" in name:
        return "norm"
    return "other"


def _argument(func, args, kwargs, name: str):
    """Argument `name` of an aten operator's call, by its schema; None where it has none."""
    names = [argument.name for argument in func._schema.arguments]
    if name not in names:
        return None
    index = names.index(name)
    return kwargs.get(name, args[index] if len(args) > index else None)


def causal_fraction(func, args, kwargs) -> float:
    """The share of an attention operator's full FLOPs its kernel executes: (n + 1) / 2n for
    a causal one over n query tiles (the tiles on or below the diagonal), else 1."""
    query = _argument(func, args, kwargs, "query")
    if not _argument(func, args, kwargs, "is_causal") or query is None:
        return 1.0
    tiles = -(-query.shape[-2] // ATTENTION_TILE)
    return (tiles + 1) / (2 * tiles)


def gemm_dims(func, kind: str, args, kwargs) -> tuple[int, ...]:
    """The dimensions of a matrix product, dense convolution or fused attention kernel that
    tiles round up, as far as they can be read from its arguments: a product's rows,
    reduction and columns (a batched one's per matrix), a convolution's weight as a GEMM
    (output channels, input channels times kernel size), an attention kernel's query and key
    lengths and head size (a scaled-dot-product kernel's); the batch-set ones are told apart
    by `tile_factor`. Empty elsewhere."""
    name = func._overloadpacket.__name__
    if kind == "matmul" and name in _MATMUL:
        first, second = (args[1], args[2]) if name in ("addmm", "baddbmm") else args[:2]
        return (*first.shape[-2:], second.shape[-1])
    if kind == "conv" and name in _CONV:
        groups = args[_GROUPS_ARG[name]] if len(args) > _GROUPS_ARG[name] else 1
        weight = args[_WEIGHT_ARG[name]]
        if groups != 1:
            return ()
        return (weight.shape[0], math.prod(weight.shape[1:]))
    if kind == "attention" and name.startswith(_SDPA_PREFIX):
        query, key = (_argument(func, args, kwargs, arg) for arg in ("query", "key"))
        if query is not None and key is not None:
            return (query.shape[-2], key.shape[-2], query.shape[-1])
    return ()


def tile_factor(one: tuple[int, ...], two: tuple[int, ...]) -> float:
    """Executed over counted FLOPs of an operator whose GEMM dimensions were `one` in the
    trace at batch 1 and `two` at batch 2: each dimension the batch did not change is rounded
    up to GEMM_TILE."""
    factor = 1.0
    for first, second in zip(one, two):
        if first == second and first > 0:
            factor *= -(-first // GEMM_TILE) * GEMM_TILE / first
    return factor


def fast_kernel_size(name: str, args) -> int | None:
    """3 or 5 for a dense convolution with a 3x3 or 5x5 kernel at stride 1 and no dilation,
    which cuDNN's fast algorithms take on FP32 cores: Winograd's for 3x3 (F(2x2,3x3) and
    F(4x4,3x3) tiles; Lavin & Gray, CVPR 2016), FFT (cuDNN 3: "FFT convolutions accelerate
    larger filter sizes (5x5 and better)") for 5x5; else None."""
    if name not in _CONV or len(args) <= _GROUPS_ARG[name] or args[_GROUPS_ARG[name]] != 1:
        return None
    weight, stride = args[_WEIGHT_ARG[name]], args[_STRIDE_ARG[name]]
    dilation, transposed = args[_STRIDE_ARG[name] + 2], args[_STRIDE_ARG[name] + 3]
    kernel = tuple(weight.shape[2:])
    square = len(kernel) == 2 and kernel[0] == kernel[1] and kernel[0] in FAST_TALLIES
    plain = all(s == 1 for s in stride) and all(d == 1 for d in dilation) and not transposed
    return kernel[0] if square and plain else None


def _tensor_bytes(values) -> int:
    import torch
    from torch.utils._pytree import tree_leaves

    return sum(v.numel() * v.element_size() for v in tree_leaves(values)
               if isinstance(v, torch.Tensor))


def fused_elementwise(kernel_log: list[tuple[bool, tuple, tuple]]) -> tuple[float, int]:
    """(bytes, kernels) of a traced step whose element-wise work a compiler fuses (XLA's
    operator fusion, which NVIDIA's TensorFlow BERT recipes turn on): each run of consecutive
    element-wise kernels (FUSIBLE_CLASSES) becomes one kernel that reads each tensor it did
    not produce once and writes only what a kernel outside it reads (or nothing reads: a
    parameter's gradient). A tensor saved for the backward pass is read there, so it is
    written. Returns the fused kernels' bytes and the step's kernels (the others unchanged).
    Consecutive runs only: XLA also fuses across independent branches, so this is the least
    it fuses. Tensors are told apart by storage: two views of one read in a run count once."""
    readers: dict[int, list[int]] = {}
    for index, (_, reads, _) in enumerate(kernel_log):
        for storage, _ in reads:
            readers.setdefault(storage, []).append(index)
    fused_bytes, kernels, start = 0.0, 0, 0
    while start < len(kernel_log):
        kernels += 1
        if not kernel_log[start][0]:
            start += 1
            continue
        end = start
        while end < len(kernel_log) and kernel_log[end][0]:
            end += 1
        produced: dict[int, int] = {}
        read: dict[int, int] = {}
        for _, reads, writes in kernel_log[start:end]:
            read.update((storage, size) for storage, size in reads if storage not in produced)
            produced.update(writes)
        fused_bytes += sum(read.values()) + sum(
            size for storage, size in produced.items()
            if not all(start <= reader < end for reader in readers.get(storage, [end])))
        start = end
    return fused_bytes, kernels


def _element_count(values) -> int:
    import torch
    from torch.utils._pytree import tree_leaves

    return sum(v.numel() for v in tree_leaves(values) if isinstance(v, torch.Tensor))


# Batch normalisation kernels that also apply the ReLU after them, and the residual add
# before it (`operator_counter(fuse_normalisation=True)`): MXNet's NHWC BatchNorm and
# BatchNormAddRelu, which NVIDIA's MXNet ResNet-50 runs in 16 bits (DeepLearningExamples'
# runner and MLPerf's run script pass `--fuse-bn-relu 1 --fuse-bn-add-relu 1`), and
# PaddlePaddle's fused batch norm ops (`fuse_bn_act_ops`, `fuse_bn_add_act_ops`). What an
# operator such a kernel runs still moves, as a share of what it moves alone: a ReLU nothing
# (the normalisation writes its output), a residual add its addend (one of its three
# passes); backward, a fused ReLU's gradient mask nothing (the normalisation's backward reads
# the gradient and a bit mask), but after a fused add one pass (the addend's gradient, which
# the kernel writes).
FUSED_SHARE = {"relu": 0.0, "add": 1 / 3, "relu_backward": 0.0, "add_relu_backward": 1 / 3}
_BATCH_NORM = {"native_batch_norm", "_native_batch_norm_legit",
               "_native_batch_norm_legit_functional", "cudnn_batch_norm"}


def _tensor_key(tensor) -> tuple:
    """What identifies a tensor's data across the autograd graph: a tensor saved for backward
    comes back as another Python object over the same storage."""
    return (tensor.untyped_storage()._cdata, tensor.storage_offset(), tuple(tensor.shape))


def _cast_target(func, args, kwargs):
    """The dtype `tensor.float()` or `tensor.to(...)` converts to (None: none named)."""
    import torch

    if func is torch.Tensor.float:
        return torch.float32
    for value in (*args[1:], kwargs.get("dtype"), kwargs.get("other")):
        if isinstance(value, torch.dtype):
            return value
        if isinstance(value, torch.Tensor):
            return value.dtype
    return None


def operator_counter(fuse_normalisation: bool = False):
    """A dispatch mode that adds each operator's FLOPs and bytes to `totals` by class; with
    `fuse_normalisation`, a batch normalisation's ReLU and residual add run in its own
    kernel (`FUSED_SHARE`)."""
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves
    from torch.utils.flop_counter import flop_registry, shape_wrapper

    from profiler.cards import conv_backward_flop

    formulas = {**flop_registry,
                torch.ops.aten.convolution_backward: shape_wrapper(conv_backward_flop)}

    class ExplicitCasts(TorchFunctionMode):
        """Hands the counter each fp32 tensor the model casts to fp32 (`explicit_cast`)."""

        def __init__(self, counter):
            super().__init__()
            self.counter = counter

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func in (torch.Tensor.float, torch.Tensor.to) and args \
                    and isinstance(args[0], torch.Tensor) \
                    and args[0].dtype == torch.float32 \
                    and _cast_target(func, args, kwargs) == torch.float32:
                self.counter.explicit_cast(args[0])
            return func(*args, **kwargs)

    class OperatorCounter(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            # class -> [FLOPs, bytes, bytes under autocast]; a FAST_TALLIES one -> [FLOPs of
            # its convolutions, 0, 0]
            self.totals = {c: [0.0, 0.0, 0.0]
                           for c in (*CLASSES, *FAST_TALLIES.values(), LOGITS)}
            # (name, class, FLOPs, bytes, GEMM dimensions) of each operator of a
            # PROFILED_CLASSES class, in order
            self.operators: list[tuple[str, str, float, float, tuple[int, ...]]] = []
            self.widths = AutocastWidths()
            self.backward = False  # set by `trace` between the passes
            self.kernels = 0  # operators that run a kernel (views and allocations excepted)
            # The casts autocast adds to them (`autocast_casts`), and the weights already cast.
            self.autocast_kernels = 0
            self.cast_weights: set[int] = set()
            # Each kernel's (element-wise or not, its inputs' and its outputs' storages with
            # their bytes), in order: what `fused_elementwise` groups as XLA would.
            self.kernel_log: list[tuple[bool, tuple, tuple]] = []
            self.kept_storages: list = []
            # FLOPs of the operators torch's FLOP counter has a formula for (matrix products,
            # convolutions, attention), as it counts them: the card's flops_per_sample.
            self.formula_flops = 0
            # Under fuse_normalisation: batch normalisations' outputs, the residual adds on
            # them and the ReLUs after either, by `_tensor_key` (each tensor kept, so that no
            # storage is freed and its key reused).
            self.normalised: dict[tuple, object] = {}
            self.added: dict[tuple, object] = {}
            self.fused_relus: dict[tuple, tuple[object, bool]] = {}

        def __enter__(self):
            self.casts = ExplicitCasts(self)  # below the dispatch: it sees `.float()` calls
            self.casts.__enter__()
            return super().__enter__()

        def __exit__(self, *exc):
            super().__exit__(*exc)
            self.casts.__exit__(*exc)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            packet = func._overloadpacket
            name = packet.__name__
            if func.is_view or name in _NO_TRAFFIC:
                return out
            self.kernels += 1
            if name == "_log_softmax":
                self.totals[LOGITS][1] += _tensor_bytes(args[0])
            kind = operator_class(name, args)
            if packet in formulas:
                flops = formulas[packet](*args, **kwargs, out_val=out)
                self.formula_flops += flops
            else:  # element-wise and reductions: about one operation per element produced
                flops = _element_count(out)
            if kind == "attention":
                flops *= causal_fraction(func, args, kwargs)
            self.totals[kind][0] += flops
            kernel = fast_kernel_size(name, args) if kind == "conv" else None
            if kernel:
                self.totals[FAST_TALLIES[kernel]][0] += flops
            nbytes = _tensor_bytes(args) + _tensor_bytes(kwargs) + _tensor_bytes(out)
            # first: it adds its casts to the element-wise total, which may be this one
            autocast = self.autocast_bytes(func, args, kwargs, out)
            share = self.fused_share(name, args, out) if fuse_normalisation else 1.0
            if share < 1.0:
                self.kernels -= 1  # it runs inside the normalisation's kernel
                nbytes, autocast = nbytes * share, autocast * share
            self.totals[kind][1] += nbytes
            self.totals[kind][2] += autocast
            if kind in PROFILED_CLASSES:
                dims = gemm_dims(func, kind, args, kwargs)
                self.operators.append((name, kind, flops, nbytes, dims))
            self.kernel_log.append((kind in FUSIBLE_CLASSES, self.storages((args, kwargs)),
                                    self.storages(out)))
            return out

        def storages(self, values) -> tuple[tuple[int, int], ...]:
            """(storage, bytes) of each tensor among `values`. The storage is kept, as
            AutocastWidths keeps those it records, so that no later one reuses its address; a
            tensor is not (a reference to it would change what autograd dispatches: it copies
            a gradient it could otherwise take over)."""
            out = []
            for tensor in tree_leaves(values):
                if isinstance(tensor, torch.Tensor):
                    self.kept_storages.append(tensor.untyped_storage())
                    out.append((storage_key(tensor), tensor.numel() * tensor.element_size()))
            return tuple(out)

        def fused_share(self, name: str, args, out) -> float:
            """The share of its traffic operator `name` moves where a batch normalisation's
            kernel runs it (`FUSED_SHARE`), 1 where it runs its own; it records the tensors
            the rules follow."""
            keys = [_tensor_key(a) for a in args[:2] if isinstance(a, torch.Tensor)]
            if name in _BATCH_NORM:
                self.normalised[_tensor_key(out[0])] = out[0]
            elif name in ("add", "add_") and len(keys) == 2 and args[1].dim() > 0 \
                    and any(key in self.normalised for key in keys):
                self.added[_tensor_key(out)] = out
                return FUSED_SHARE["add"]
            elif name in ("relu", "relu_") and (keys[0] in self.normalised
                                                or keys[0] in self.added):
                self.fused_relus[_tensor_key(out)] = (out, keys[0] in self.added)
                return FUSED_SHARE["relu"]
            elif name == "threshold_backward" and keys[1] in self.fused_relus:
                after_add = self.fused_relus[keys[1]][1]
                return FUSED_SHARE["add_relu_backward" if after_add else "relu_backward"]
            return 1.0

        def autocast_bytes(self, func, args, kwargs, out) -> float:
            """What the operator would read and write under CUDA autocast
            (profiler/autocast_memory.py gives each tensor's width). A 16-bit kernel reads
            16-bit copies of fp32 inputs, and an fp32 one (layer norm, a loss) fp32 copies of
            16-bit inputs: in the forward pass autocast casts each (reading one width and
            writing the other), and the backward pass casts its gradient back, both counted
            as element-wise work where the forward casts it (`autocast_casts`: a weight's
            copy once a step). Softmax and the other FP32_SET_OPT_DTYPE_OPS read the 16-bit
            input themselves."""
            name = func._overloadpacket.__name__
            sixteen = name in LOWER_PRECISION_OPS
            widening = name in FP32_OPS and name not in FP32_SET_OPT_DTYPE_OPS
            read = 0.0
            for tensor in tree_leaves((args, kwargs)):
                if not isinstance(tensor, torch.Tensor):
                    continue
                if not tensor.is_floating_point():
                    read += tensor.numel() * tensor.element_size()
                    continue
                width = self.widths.bytes_of(tensor)
                target = HALF_BYTES if sixteen and width > HALF_BYTES else \
                    FP32_BYTES if widening and width < FP32_BYTES else width
                if target != width:
                    if not self.backward and tensor.dim() > 0:
                        self.cast(tensor, width, target)
                    width = target
                read += tensor.numel() * width
            width = self.widths.record(func, args, kwargs, out)
            written = sum(t.numel() * (width if t.is_floating_point() and width
                                       else t.element_size())
                          for t in tree_leaves(out) if isinstance(t, torch.Tensor))
            return read + written

        def cast(self, tensor, width: int, target: int) -> None:
            """Count autocast's casts of `tensor` from `width` to `target` bytes an element
            (`autocast_casts`), each reading one width and writing the other."""
            casts = self.autocast_casts(tensor)
            self.autocast_kernels += casts
            self.totals["other"][2] += casts * tensor.numel() * (width + target)

        def explicit_cast(self, tensor) -> None:
            """The model's own cast of `tensor` to fp32 (`.float()`: transformers' causal-LM
            loss upcasts its logits), which the fp32 trace runs as a no-op: under autocast a
            16-bit tensor is copied, and its readers read the fp32 copy."""
            width = self.widths.bytes_of(tensor)
            if width < FP32_BYTES and tensor.dim() > 0:
                self.cast(tensor, width, FP32_BYTES)
                self.widths.set_width(tensor, FP32_BYTES)

        def autocast_casts(self, tensor) -> int:
            """Kernels autocast runs to hand an operator this input in its precision (an fp32
            one to a 16-bit operator, a 16-bit one to an fp32 operator such as layer norm): a
            cast, and its gradient's cast back where one flows. A weight (a parameter or a view
            of one) is cast once a step, whatever its uses (autocast caches the copy), an
            activation at each use (a recurrent decoder casts its state every time step)."""
            base = tensor if tensor._base is None else tensor._base
            if base.is_leaf and base.requires_grad:
                if id(base) in self.cast_weights:
                    return 0
                self.cast_weights.add(id(base))
            return 1 + int(tensor.requires_grad)

    return OperatorCounter()


def trace(model, step, batch: int, fuse_normalisation: bool = False,
          written_attention: bool = False):
    """The counter (`operator_counter`, fusing normalisations' activations where
    `fuse_normalisation`) of one training step (forward and backward, fp32) of `model` at
    `batch` samples, on the meta device, its attention written out where
    `written_attention`: its `totals` (class -> [FLOPs, bytes]) and `operators`.
    `step(batch)` returns the loss of that step's forward pass."""
    from profiler.cards import _gpu_kernels

    model.zero_grad(set_to_none=True)  # a step writes its gradients, it does not add to them
    counter = operator_counter(fuse_normalisation)
    with _gpu_kernels(written_attention), counter:
        loss = step(batch)
        counter.backward = True
        loss.backward()
    return counter


def intensity_profile(one: list[tuple],
                      two: list[tuple]) -> tuple[dict[str, int], dict[str, float]]:
    """The PROFILE_COLUMNS of a model traced at batches 1 and 2 (`operators` of each): each
    operator's per-sample FLOPs and bytes are its difference between the traces (its weights'
    traffic, the same at any batch, drops out), its FLOPs as executed (`tile_factor`), and
    its intensity their ratio; and, per TILED_CLASSES class, the FLOPs a sample's tiles add
    to what it counts. The traces are aligned by operator name, since a batch of one can
    dispatch a few operators more or fewer (a copy of a broadcast view); an operator without
    a partner is left out."""
    out = dict.fromkeys(PROFILE_COLUMNS, 0.0)
    padding = dict.fromkeys(TILED_CLASSES, 0.0)
    names_one, names_two = [op[:2] for op in one], [op[:2] for op in two]
    if names_one == names_two:  # the usual case; aligning thousands of operators is slow
        pairs = zip(one, two)
    else:
        matcher = difflib.SequenceMatcher(a=names_one, b=names_two, autojunk=False)
        pairs = ((one[block.a + offset], two[block.b + offset])
                 for block in matcher.get_matching_blocks() for offset in range(block.size))
    for (_, kind, flops_one, bytes_one, dims_one), (_, _, flops_two, bytes_two, dims_two) \
            in pairs:
        counted = max(flops_two - flops_one, 0.0)
        flops = counted * tile_factor(dims_one, dims_two)
        if kind in padding:
            padding[kind] += flops - counted
        nbytes = max(bytes_two - bytes_one, 0.0)
        for edge in INTENSITY_EDGES:
            if flops < edge * nbytes:
                out[profile_column(kind, edge, "flops")] += flops
                out[profile_column(kind, edge, "bytes")] += nbytes
    return {key: round(value) for key, value in out.items()}, padding


def split_of(model, step) -> dict[str, int]:
    """The card columns of any model: per class, FLOPs and bytes per sample
    (`<class>_flops_per_sample`, `<class>_bytes_per_sample`), `step_bytes`, the traffic of
    a step that does not grow with the batch (weights read, weight gradients written), and
    `winograd_flops_per_sample` and `conv5x5_flops_per_sample`, the parts of the convolutions'
    FLOPs fast algorithms take (3x3 and 5x5 kernels at stride 1), and
    `logits_bytes_per_sample`, what a loss's log-softmax reads a sample (fp32), and how each
    class's work spreads over arithmetic intensity (`intensity_profile`), and the FLOPs the
    matrix products', convolutions' and attention kernels' tiles execute
    (`<class>_tiled_flops_per_sample`).
    `step(batch)` returns the loss of a forward pass at `batch` samples on the meta device."""
    one = trace(model, step, 1)
    return split_from(one, trace(model, step, 2), written_attention_pair(model, step, one))


def written_attention_pair(model, step, traced_one, fuse_normalisation: bool = False):
    """The step traced at batches 1 and 2 with its attention written out (what a compiler
    without a fused attention kernel fuses around, `fused_elementwise`), where `traced_one`
    (the step at batch 1) ran an attention kernel; else None."""
    if not traced_one.totals["attention"][0]:
        return None
    return tuple(trace(model, step, batch, fuse_normalisation, written_attention=True)
                 for batch in (1, 2))


def split_from(traced_one, traced_two, written=None) -> dict[str, int]:
    """`split_of`'s columns from the counters (`operator_counter`) of one training step at
    batch 1 and at batch 2; the fused columns (`fused_elementwise`) from `written`'s pair,
    the same steps with attention written out, where the model has attention."""
    one, two = traced_one.totals, traced_two.totals
    out, padding = intensity_profile(traced_one.operators, traced_two.operators)
    step_bytes = 0.0
    for kind in CLASSES:
        counted = two[kind][0] - one[kind][0]
        out[f"{kind}_flops_per_sample"] = round(counted)
        if kind in TILED_CLASSES:
            out[tiled_column(kind)] = round(counted + padding[kind])
        per_sample = max(two[kind][1] - one[kind][1], 0.0)
        out[f"{kind}_bytes_per_sample"] = round(per_sample)
        out[AUTOCAST_BYTES_COLUMNS[kind]] = round(max(two[kind][2] - one[kind][2], 0.0))
        step_bytes += max(one[kind][1] - per_sample, 0.0)
    out["step_bytes"] = round(step_bytes)
    for tally in FAST_TALLIES.values():
        out[f"{tally}_flops_per_sample"] = round(two[tally][0] - one[tally][0])
    out["logits_bytes_per_sample"] = round(two[LOGITS][1] - one[LOGITS][1])
    out["kernels_per_step"] = traced_one.kernels
    out["autocast_kernels_per_step"] = traced_one.autocast_kernels
    written_one, written_two = written or (traced_one, traced_two)
    fused_one, kernels = fused_elementwise(written_one.kernel_log)
    fused_two, _ = fused_elementwise(written_two.kernel_log)
    out[XLA_BYTES_COLUMN] = round(max(fused_two - fused_one, 0.0))
    out[XLA_KERNELS_COLUMN] = kernels
    return out


def operator_split(name: str, image_size: int | None = None,
                   seq_len: int | None = None) -> dict[str, int]:
    """The operator-split card columns (`split_of`) of zoo model `name`."""
    return split_of(*zoo.meta_step(name, image_size=image_size, seq_len=seq_len))
