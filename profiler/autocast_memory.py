"""The bytes a training step saves for backward under CUDA autocast (amp, bf16), measured on
the meta device in fp32 by following autocast's dtype rules.

Autocast does not halve every saved tensor. It runs matrix products, convolutions and fused
attention in 16 bits, so what they save (their inputs' 16-bit copies, their outputs) is 16-bit;
it runs normalisation, softmax, losses and reductions in fp32 (layer norm saves its fp32
input, softmax its fp32 output); everything else runs in its inputs' widest type, so a
transformer's residual stream, which starts from fp32 embeddings, stays fp32; and masks and
indices are bools and integers in any precision. These are the op lists of PyTorch's
documentation ("Autocast Op Reference": CUDA ops that can autocast to float16, to float32) and
of aten/src/ATen/autocast_mode.h, whose fp32 list also holds the upsampling operators.

`autocast_saved_bytes` follows each operator's output dtype as autocast would give it (a
dispatch mode over the forward pass), then walks the autograd graph the forward built and
prices each saved tensor's storage once: at 2 bytes an element where the saving node is one
autocast runs in 16 bits, 4 where it runs in fp32, else at the dtype the tensor would have.
"""

from __future__ import annotations

# aten operators autocast runs in 16 bits, and the autograd nodes they leave.
LOWER_PRECISION_OPS = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "addmv", "mv", "addr",
                       "convolution", "_convolution", "prelu", "_prelu_kernel",
                       "_scaled_dot_product_efficient_attention",
                       "_scaled_dot_product_flash_attention",
                       "_scaled_dot_product_cudnn_attention", "_efficient_attention_forward",
                       "_flash_attention_forward",
                       # their backward kernels, which run in their forward's precision
                       "convolution_backward",
                       "_scaled_dot_product_efficient_attention_backward",
                       "_scaled_dot_product_flash_attention_backward",
                       "_scaled_dot_product_cudnn_attention_backward",
                       "_efficient_attention_backward", "_flash_attention_backward",
                       # an LSTM cell's fused gate kernel (autocast runs lstm_cell and cuDNN's
                       # RNNs in 16 bits), forward and backward
                       "_thnn_fused_lstm_cell", "_thnn_fused_lstm_cell_backward_impl"}
LOWER_PRECISION_NODES = {"AddmmBackward0", "MmBackward0", "BmmBackward0", "BaddbmmBackward0",
                         "AddbmmBackward0", "AddmvBackward0", "MvBackward0", "AddrBackward0",
                         "ConvolutionBackward0", "PreluKernelBackward0",
                         "ScaledDotProductEfficientAttentionBackward0",
                         "ScaledDotProductFlashAttentionBackward0",
                         "ScaledDotProductCudnnAttentionBackward0"}
# aten operators autocast runs in fp32, and their nodes.
FP32_OPS = {"native_layer_norm", "native_group_norm", "_softmax", "_safe_softmax",
            "_log_softmax", "nll_loss_forward", "nll_loss2d_forward", "exp", "expm1", "log",
            "log1p", "log2", "log10", "pow", "rsqrt", "reciprocal", "sum", "cumsum", "cumprod",
            "prod", "binary_cross_entropy_with_logits", "mse_loss", "l1_loss",
            "smooth_l1_loss", "huber_loss", "kl_div", "softplus", "tan", "sinh", "cosh",
            "acos", "asin", "erfinv", "norm", "linalg_vector_norm", "cdist", "dist", "renorm",
            "logsumexp", "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d",
            "_upsample_nearest_exact1d", "_upsample_nearest_exact2d",
            "_upsample_nearest_exact3d", "upsample_linear1d", "upsample_bilinear2d",
            "_upsample_bilinear2d_aa", "upsample_trilinear3d", "upsample_bicubic2d",
            "_upsample_bicubic2d_aa"}
FP32_NODES = {"NativeLayerNormBackward0", "NativeGroupNormBackward0", "SoftmaxBackward0",
              "SafeSoftmaxBackward0", "LogSoftmaxBackward0", "NllLossBackward0",
              "NllLoss2DBackward0", "ExpBackward0", "Expm1Backward0", "LogBackward0",
              "Log1PBackward0", "Log2Backward0", "Log10Backward0", "PowBackward0",
              "PowBackward1", "PowBackward2", "RsqrtBackward0", "ReciprocalBackward0",
              "SumBackward0", "SumBackward1", "CumsumBackward0", "CumprodBackward0",
              "ProdBackward0", "ProdBackward1", "BinaryCrossEntropyWithLogitsBackward0",
              "MseLossBackward0", "L1LossBackward0", "SmoothL1LossBackward0",
              "HuberLossBackward0", "KlDivBackward0", "SoftplusBackward0", "TanBackward0",
              "SinhBackward0", "CoshBackward0", "AcosBackward0", "AsinBackward0",
              "ErfinvBackward0", "NormBackward1", "LinalgVectorNormBackward0",
              "CdistBackward0", "DistBackward0", "RenormBackward0"}
# Of those, the ones autocast hands the 16-bit input itself with an fp32 result type
# (aten/src/ATen/autocast_mode.h's fp32_set_opt_dtype and fp32_append_dtype policies): the
# kernel reads 16 bits and works in fp32, no cast runs; the rest get an fp32 copy. Softmax's
# and log-softmax's backward kernels write the gradient in their forward input's type (the
# `input_dtype` argument), 16 bits after a matrix product.
FP32_SET_OPT_DTYPE_OPS = {"_softmax", "_log_softmax", "sum", "cumsum", "cumprod", "prod",
                          "linalg_vector_norm", "norm"}
INPUT_DTYPE_BACKWARD = {"_softmax_backward_data": "_softmax",
                        "_log_softmax_backward_data": "_log_softmax"}
# Batch normalisation takes a 16-bit input with fp32 weights and statistics and gives its
# input's type (cuDNN's mixed-precision kernel), where type promotion would say fp32.
INPUT_TYPED_OPS = {"native_batch_norm", "_native_batch_norm_legit",
                   "_native_batch_norm_legit_no_training", "_native_batch_norm_legit_functional",
                   "cudnn_batch_norm", "_batch_norm_with_update", "_batch_norm_no_update",
                   "native_batch_norm_backward", "cudnn_batch_norm_backward",
                   "batch_norm_backward"}
HALF_BYTES, FP32_BYTES = 2, 4


def storage_key(tensor) -> int:
    """The identity of `tensor`'s storage (a view's is its base's; a saved output that autograd
    hands back as a new tensor object keeps it)."""
    return tensor.untyped_storage()._cdata


class AutocastWidths:
    """The bytes per element each storage an operator writes would have under autocast, as
    operators run (forward or backward): `record` after each, `bytes_of` any tensor."""

    def __init__(self):
        self.width: dict[int, int] = {}
        # a softmax's output storage -> the width of the input it read (INPUT_DTYPE_BACKWARD)
        self.softmax_input: dict[int, int] = {}
        # Each recorded storage, held so that no later storage takes its address (a key); a
        # storage does not keep its tensors alive, so liveness counts are unchanged.
        self.storages: list = []

    def bytes_of(self, tensor) -> int:
        """Bytes an element of `tensor` would take under autocast: what its producing operator
        gave it, else (a parameter, an input) its own dtype's."""
        return self.width.get(storage_key(tensor), tensor.element_size())

    def set_width(self, tensor, width: int) -> None:
        """From now on `tensor`'s storage holds `width` bytes an element (what a cast of it,
        which the fp32 trace does not run, would have written)."""
        self.width[storage_key(tensor)] = width
        self.storages.append(tensor.untyped_storage())

    def output_width(self, name: str, args, kwargs) -> int | None:
        """Bytes per element of what aten operator `name` writes under autocast (None: no
        floating input to go by)."""
        import torch
        from torch.utils._pytree import tree_leaves

        if name in LOWER_PRECISION_OPS:
            return HALF_BYTES
        if name in FP32_OPS:
            return FP32_BYTES
        if name in INPUT_TYPED_OPS:
            return self.bytes_of(args[0])
        if name in INPUT_DTYPE_BACKWARD:  # (grad, the forward's output, dim, input_dtype)
            return self.softmax_input.get(storage_key(args[1]), FP32_BYTES)
        # the widest floating input, as type promotion gives it
        return max((self.bytes_of(t) for t in tree_leaves((args, kwargs))
                    if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dim() > 0),
                   default=None)

    def record(self, func, args, kwargs, out) -> int | None:
        """Note the width of each floating tensor `func` wrote (a view writes nothing: its
        base's width holds); returns that width."""
        import torch
        from torch.utils._pytree import tree_leaves

        name = func._overloadpacket.__name__
        width = self.output_width(name, args, kwargs)
        if name in INPUT_DTYPE_BACKWARD.values():
            self.softmax_input[storage_key(out)] = self.bytes_of(args[0])
        for result in tree_leaves(out):
            if isinstance(result, torch.Tensor) and result.is_floating_point() and width \
                    and not func.is_view:
                self.set_width(result, width)
        return width


def dtype_tracker():
    """A dispatch mode that records, per storage an operator writes, the bytes per element it
    would have under autocast: `bytes_of(tensor)`."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Tracker(TorchDispatchMode, AutocastWidths):
        def __init__(self):
            TorchDispatchMode.__init__(self)
            AutocastWidths.__init__(self)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            self.record(func, args, kwargs or {}, out)
            return out

    return Tracker()


def saved_by_node(node):
    """The tensors autograd node `node` saved for backward."""
    import torch

    found = []
    names = [a for a in dir(node) if a.startswith("_saved_")]
    if hasattr(node, "saved_tensors"):  # a custom autograd.Function's ctx.save_for_backward
        names.append("saved_tensors")
    for attribute in names:
        try:
            value = getattr(node, attribute)
        except RuntimeError:  # freed or not a tensor
            continue
        values = value if isinstance(value, (tuple, list)) else (value,)
        found += [v for v in values if isinstance(v, torch.Tensor)]
    return found


def autocast_saved_bytes(loss, tracker, parameters) -> int:
    """Bytes of the storages the graph behind `loss` saved for backward, each once per width
    at which it is saved, priced under autocast (the module docstring); `parameters` (their
    16-bit copies are the model state's) excluded."""
    skip = {storage_key(p) for p in parameters}
    priced: dict[tuple[int, int], int] = {}
    seen, stack = set(), [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        kind = type(node).__name__
        for tensor in saved_by_node(node):
            key = storage_key(tensor)
            if key in skip:
                continue
            if not tensor.is_floating_point():
                width = tensor.element_size()
            elif kind in LOWER_PRECISION_NODES:
                width = HALF_BYTES
            elif kind in FP32_NODES:
                width = FP32_BYTES
            else:
                width = tracker.bytes_of(tensor)
            elements = tensor.untyped_storage().nbytes() // tensor.element_size()
            priced[(key, width)] = elements * width
        stack.extend(next_node for next_node, _ in node.next_functions)
    return sum(priced.values())
