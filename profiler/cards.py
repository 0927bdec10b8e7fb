"""Model cards: what the advisor needs to know about a model, computed once with torch and
shipped as `datasets/model_cards.csv` (read and written by `gpuadvisor/cards.py`) so that the
advisor never imports torch.

A card is measured on the meta device (shapes only, no memory, no arithmetic): one training
step at a batch of one and one at two, each traced once by profiler/operators.py's dispatch
mode, whose FLOPs are `FlopCounterMode`'s formulas (a multiply-add counts as 2 FLOPs), and
under `saved_tensors_hooks` (the tensors autograd keeps for the backward pass). Attention runs as
PyTorch's memory-efficient SDPA kernel, as it does on a GPU; on the meta device SDPA would
otherwise fall back to the math path, which stores every attention matrix.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from datetime import date

from gpuadvisor.cards import STEP_ACTIVATION_COLUMNS, card_name, check_input_size
from profiler import zoo
from profiler.autocast_memory import autocast_saved_bytes, dtype_tracker
from profiler.operators import operator_counter, split_from, written_attention_pair

# FlopCounterMode names the FLOP formulas (torch's flop_registry), which the operator counter
# applies; the text is every shipped card's `source`, so it stays as the cards were made.
METHOD = ("meta device, FlopCounterMode with grouped-conv backward corrected, "
          "memory-efficient attention; operator split by profiler/operators.py")
SOURCE = f"scripts/build_cards.py: {METHOD}"


def conv_backward_flop(grad_out_shape, x_shape, w_shape, _bias, _stride, _padding, _dilation,
                       transposed, _output_padding, _groups, output_mask, out_shape=None,
                       **kwargs) -> int:
    """FLOPs of a convolution's backward pass.

    Each of grad-input and grad-weight does exactly the multiply-adds of the forward pass.
    torch's own formula computes grad-weight as a convolution over all input channels,
    ignoring groups, so it overstates depthwise convolutions by their channel count.
    """
    from torch.utils.flop_counter import conv_flop_count

    forward = conv_flop_count(x_shape, w_shape, grad_out_shape, transposed=transposed)
    return forward * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


def _query_heads(query, key, value, enable_gqa: bool):
    """Key and value with a head for each query head: under grouped-query attention each K/V
    head serves several query heads."""
    if enable_gqa and key.shape[-3] != query.shape[-3]:
        groups = query.shape[-3] // key.shape[-3]
        key, value = (t.repeat_interleave(groups, dim=-3) for t in (key, value))
    return key, value


def _efficient_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                    scale=None, enable_gqa=False, **kwargs):
    import torch

    key, value = _query_heads(query, key, value, enable_gqa)
    if attn_mask is not None and attn_mask.dtype == torch.bool:  # the kernel takes a bias
        bias = torch.zeros(attn_mask.shape, dtype=query.dtype, device=query.device)
        attn_mask = bias.masked_fill(~attn_mask, float("-inf"))
    return torch.ops.aten._scaled_dot_product_efficient_attention(
        query, key, value, attn_mask, True, dropout_p, is_causal, scale=scale)[0]


def _written_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                  scale=None, enable_gqa=False, **kwargs):
    """Attention as code without a fused kernel writes it (transformers' eager attention,
    NVIDIA's TensorFlow BERT): the scores matrix product, its scale, the mask, softmax,
    dropout and the product with the values, each a kernel of its own."""
    import math

    import torch

    key, value = _query_heads(query, key, value, enable_gqa)
    scores = query @ key.transpose(-2, -1) * (scale or 1 / math.sqrt(query.shape[-1]))
    if is_causal:
        length, keys = scores.shape[-2:]
        attn_mask = torch.ones(length, keys, dtype=torch.bool, device=query.device).tril()
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) \
            if attn_mask.dtype == torch.bool else scores + attn_mask
    probabilities = _fused_dropout(torch.softmax(scores, dim=-1), dropout_p)
    return probabilities @ value


def _fused_dropout(input, p=0.5, training=True, inplace=False):
    """Dropout as CUDA runs it: one fused kernel (native_dropout) that writes the output and a
    1-byte mask, which backward keeps. The CPU and meta path multiplies by a float mask it
    saves, 4 bytes an element: a card traced on it would count the mask four times over."""
    import torch

    if not training or p == 0.0:
        return input
    return torch.native_dropout(input, p, True)[0]


@contextmanager
def _gpu_kernels(written_attention: bool = False):
    """The card's trace runs the kernels a GPU runs where the meta device's differ: fused
    memory-efficient attention (or, `written_attention`, attention written out:
    `_written_sdpa`), and fused dropout. BART's decoder builds an all-ones padding mask and
    transformers reads it (on a GPU, a sync) to pick the causal attention kernel; the meta
    device cannot read it, so the decoder builds none, as under compilation, and goes to that
    kernel directly."""
    import sys
    from unittest import mock

    import torch.nn.functional as F

    originals = F.scaled_dot_product_attention, F.dropout
    F.scaled_dot_product_attention = _written_sdpa if written_attention else _efficient_sdpa
    F.dropout = _fused_dropout
    bart = sys.modules.get("transformers.models.bart.modeling_bart")
    no_mask = (mock.patch.object(bart, "is_torchdynamo_compiling", lambda: True) if bart
               else nullcontext())
    try:
        with no_mask:
            yield
    finally:
        F.scaled_dot_product_attention, F.dropout = originals


@contextmanager
def saved_tensor_bytes(model, saved: dict):
    """Collect into `saved` every non-parameter tensor autograd saves for the backward pass,
    each storage once (a view keeps its whole base alive), held weakly: `live_bytes` then
    counts those still alive when the forward pass ends (a saved tensor whose graph branch
    was dropped, such as a sort whose values nothing uses, is freed at once)."""
    import torch

    params = {id(p) for p in model.parameters()}

    def pack(tensor):
        base = tensor
        while base._base is not None:
            base = base._base
        if id(base) not in params:
            saved[id(base)] = weakref.ref(base)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        yield


def live_bytes(saved: dict) -> int:
    """Bytes of the storages in `saved` (`saved_tensor_bytes`) still alive."""
    return sum(base.untyped_storage().nbytes() for base in (ref() for ref in saved.values())
               if base is not None)


def figures(model, step, fuse_normalisation: bool = False) -> dict:
    """The measured card columns of `model`, whose `step(batch)` returns the loss of a
    forward pass at `batch` samples on the meta device: `measure_module`'s of one sample
    (`per_sample`) and the operator split (profiler.operators.split_from), both from one
    traced step at batch 1 and one at batch 2, with each batch normalisation's ReLU and
    residual add in its kernel where `fuse_normalisation` (profiler.operators.FUSED_SHARE)."""
    counters = {batch: operator_counter(fuse_normalisation) for batch in (1, 2)}

    def measured(batch: int) -> dict:
        model.zero_grad(set_to_none=True)  # a step writes its gradients, it does not add
        return measure_module(model, lambda: step(batch), counters[batch])

    one, two = measured(1), measured(2)
    written = written_attention_pair(model, step, counters[1], fuse_normalisation)
    return {**per_sample(one, two), **split_from(counters[1], counters[2], written)}


def per_sample(one: dict, two: dict) -> dict:
    """`measure_module`'s figures of one sample from those of a batch of one and of two, its
    saved activations split in two: what each sample adds (a batch of two less a batch of
    one) and what a step keeps once whatever its batch (STEP_ACTIVATION_COLUMNS)."""
    one = dict(one)
    for per_sample_column, per_step in STEP_ACTIVATION_COLUMNS.items():
        sample = max(two[per_sample_column] - one[per_sample_column], 0)
        one[per_step] = max(one[per_sample_column] - sample, 0)
        one[per_sample_column] = sample
    return one


def measure_module(model, loss, operators=None) -> dict:
    """Parameters, parameter tensors, gradient bytes, FLOPs and activation bytes (fp32, and
    as CUDA autocast would save them: profiler/autocast_memory.py) of one training step of
    `model` (on the meta device), whose `loss()` runs the forward pass of one sample. `tensors`
    counts parameter tensors (weights, biases, norm scales; not buffers such as running
    statistics): the notion of CM-DARE's checkpoint "Number of Tensors". The FLOPs are the
    `operators` counter's (profiler.operators.operator_counter; a new one if none is given),
    which the step fills as profiler.operators.trace does: a trace costs per operator, so a
    card traces each step once. (torch's FlopCounterMode would count the same FLOPs, but under
    it a `detach` dispatches as a copy, which the operator split would count as traffic.)"""
    saved: dict = {}
    widths = dtype_tracker()
    operators = operator_counter() if operators is None else operators
    with _gpu_kernels(), saved_tensor_bytes(model, saved), widths, operators:
        value = loss()
        forward = operators.formula_flops
        activation = live_bytes(saved)  # before backward frees them
        autocast = autocast_saved_bytes(value, widths, model.parameters())
        operators.backward = True
        value.backward()
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {
        "params": sum(p.numel() for p in model.parameters()),
        "tensors": len(list(model.parameters())),
        "gradient_bytes": trainable * 4,  # fp32 gradients, what all-reduce moves per step
        "forward_flops_per_sample": forward,
        "flops_per_sample": operators.formula_flops,
        "activation_bytes_per_sample": activation,
        "autocast_activation_bytes_per_sample": autocast,
    }


def versions() -> dict:
    """How a card was made: the torch that traced it, when, and by what."""
    import torch

    return {"torch_version": torch.__version__.split("+")[0],
            "as_of": date.today().isoformat(), "source": SOURCE}


def compute_card(name: str, image_size: int | None = None, seq_len: int | None = None,
                 batch_per_gpu: int | None = None, fuse_normalisation: bool = False,
                 head_positions: int | None = None) -> dict:
    """The full card of a zoo model: default workload plus measured figures. At an input
    size other than the model's default the card is named `name@size` (bert_large@384);
    traced with each batch normalisation's ReLU and residual add in its kernel
    (`fuse_normalisation`), `name[@size]+fused_norm`; a BERT's with its masked-LM head over
    `head_positions` gathered positions a sequence (profiler.zoo.gathered_head_loss),
    `name[@size]+head<positions>`.
    `image_size` applies to image models only, `seq_len` to text models only (CardError
    otherwise)."""
    entry = zoo.resolve(name)
    check_input_size(entry.task, entry.name, image_size, seq_len)

    image_size = image_size or entry.image_size
    seq_len = seq_len or entry.seq_len
    size = image_size if entry.task == "image" else seq_len
    default = entry.image_size if entry.task == "image" else entry.seq_len
    workload = {"model": card_name(entry.name, None if size == default else size,
                                   fuse_normalisation, head_positions),
                "family": entry.family, "task": entry.task,
                "dataset": entry.dataset, "epochs": entry.epochs,
                # the same data: as many tokens an epoch, in longer or shorter sequences
                "samples_per_epoch": entry.samples_per_epoch * default // size
                if entry.task == "text" else entry.samples_per_epoch,
                "image_size": image_size if entry.task == "image" else None,
                "seq_len": seq_len if entry.task == "text" else None,
                "batch_per_gpu": batch_per_gpu or entry.batch_per_gpu}
    traced = figures(*zoo.meta_step(entry.name, image_size, seq_len, head_positions),
                     fuse_normalisation)
    return {**workload, **traced, **versions()}


def compute_cards(sizes: list[tuple], jobs: int | None = None,
                  progress: Callable[[str], None] | None = None) -> list[dict]:
    """`compute_card(*size)` of each of `sizes` (its arguments: name, image_size, seq_len and
    optionally batch_per_gpu, fuse_normalisation and head_positions), in their order, traced
    in `jobs` processes (default: one per core), each on one torch thread: tiny meta-device
    kernels run fastest on one. The traces that dispatch the most operators (by the shipped card's
    `kernels_per_step`, where there is one) start first, so that no process is left with one
    at the end (Tacotron 2's takes over a minute alone). `progress(card)` is called as each
    card is done."""
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor, as_completed

    import torch

    from gpuadvisor.cards import load_cards

    jobs = min(jobs or os.cpu_count() or 1, len(sizes))
    if jobs <= 1:
        return [_reported(compute_card(*size), progress) for size in sizes]
    shipped = load_cards()
    longest_first = sorted(range(len(sizes)), key=lambda i: -shipped.get(
        sizes[i][0], {}).get("kernels_per_step", 0))
    with ProcessPoolExecutor(jobs, multiprocessing.get_context("spawn"),
                             initializer=torch.set_num_threads, initargs=(1,)) as pool:
        futures = {pool.submit(compute_card, *sizes[i]): i for i in longest_first}
        done = {futures[future]: _reported(future.result(), progress)
                for future in as_completed(futures)}
    return [done[i] for i in range(len(sizes))]


def _reported(card: dict, progress: Callable[[str], None] | None) -> dict:
    if progress is not None:
        progress(card["model"])
    return card
