"""GPU memory one data-parallel worker needs, in MiB (the unit the clouds and the driver report
usable memory in), and the largest micro-batch that fits under each memory remedy.

Per GPU: fp32 weights (the master copy, also under autocast), gradients, optimizer state,
autocast's 16-bit weight copies, DDP's gradient buckets (a second copy of the gradients), the
saved activations of the micro-batch (under autocast at the dtypes it saves them in: the card's
`autocast_activation_bytes_per_sample`; under FSDP in 16 bits, whose gathered parameters are
16-bit, half their fp32 bytes: advisor.sharding.autocast_rows) and those a step saves once
whatever its batch (the card's `step_activation_bytes`: WaveGlow's weight-normalised weights)
plus the activation gradients live at the backward peak (or, where larger, a language model's
fp32 logits and their gradients at its loss), the allocator's slack, cuDNN/cuBLAS workspaces
and the CUDA context.
Sharding (FSDP full shard / ZeRO-3) divides weights, gradients and optimizer state by the
workers and keeps the few layers being gathered; activation checkpointing keeps each block's
input and recomputes its inside. The constants are held against published batch sizes by
tests/test_memory.py (datasets/published_batches.csv). numpy only: on the recommend path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuadvisor.cards import STEP_ACTIVATION_COLUMNS
from gpuadvisor.vocab import HALF_PRECISIONS

MIB = 2.0**20
# Bytes of optimizer state per parameter (fp32): SGD keeps one momentum buffer, Adam(W) and
# LAMB two moments, RMSprop with momentum (EfficientNet's recipe) its square average and a
# momentum buffer. `bertadam` is Adam as NVIDIA's PyTorch BERT steps it without AMP, a Python
# loop over the parameters (advisor.physics.EXTRA_UPDATE_PASSES): the same two moments.
OPTIMIZER_STATE_BYTES = {"sgd": 4.0, "adamw": 8.0, "adam": 8.0, "lamb": 8.0, "rmsprop": 8.0,
                         "bertadam": 8.0}
# The optimizer a card's task is trained with when the card does not say (the zoo's recipes).
TASK_OPTIMIZER = {"image": "sgd", "text": "adamw", "recommendation": "adam"}  # NCF: Adam
# Image families whose published recipes train with another: EfficientNet with RMSprop, decay
# and momentum 0.9 (Tan & Le 2019; NVIDIA DeepLearningExamples' PyTorch EfficientNet README,
# "This model uses RMSprop", and its TensorFlow 2 ConvNets' `--optimizer` default,
# utils/cmdline_helper.py@115867b5); DeiT's ViT, Swin and ConvNeXt with AdamW (Touvron et al.
# 2021, Liu et al. 2021, Liu et al. 2022).
FAMILY_OPTIMIZER = {"efficientnet": "rmsprop", "vit": "adamw", "swin": "adamw",
                    "convnext": "adamw"}
# Autocast (amp, bf16) caches a 16-bit copy of each weight for the step, and saves most
# activations for backward in 16 bits: the card's `autocast_activation_bytes_per_sample` says
# how many bytes (profiler/autocast_memory.py); a card without it is counted at half its fp32
# figure.
HALF_ACTIVATION_FACTOR = 0.5
CAST_WEIGHT_BYTES = 2.0
# During backward the gradients of the activations being back-propagated live beside the
# saved ones: a few of the largest layer outputs, about an eighth of the saved set.
ACTIVATION_GRADIENT_PEAK = 0.12
# Except where a loss's scores are the largest tensors (a language model's logits, tokens x
# vocabulary): when backward starts at the loss, beside the saved set live the gradient of the
# log-softmax's output and that of its input, fp32 whatever the precision (autocast runs the
# loss in fp32), and the logits the model returns (its output, not saved by autograd; 16-bit
# under autocast). The larger of the two transients sets the peak (they are not alive together).
LOSS_GRADIENT_COPIES = 2.0
# Outside the tensors: the CUDA context with its kernels (what nvidia-smi shows before the
# first allocation, 300-600 MiB), cuBLAS/cuDNN workspaces, and the caching allocator's
# rounding and fragmentation (reserved over allocated).
CUDA_CONTEXT_MIB = 512.0
WORKSPACE_MIB = 128.0
ALLOCATOR_MARGIN = 1.05
# A block (residual block, transformer layer) holds about this many parameter tensors; the
# card's tensor count then gives the blocks FSDP gathers and checkpointing recomputes.
TENSORS_PER_BLOCK = 12.0
DEFAULT_BLOCKS = 12.0
# Checkpointing each block keeps its input (a tenth of what the block saves: one tensor of
# the ~10-17 a transformer layer or bottleneck saves, Korthikanti et al. 2022) and, during
# backward, one block recomputed in full; it runs each forward twice (forward ~1/3 of a step).
CHECKPOINT_INPUT_SHARE = 0.1
CHECKPOINT_COMPUTE_FACTOR = 4.0 / 3.0
# FSDP holds the unit being computed, the prefetched next one and the gradients of one unit
# before its reduce-scatter.
FSDP_LIVE_UNITS = 3.0


@dataclass(frozen=True)
class Remedy:
    name: str
    checkpointing: bool = False
    sharded: bool = False  # FSDP full shard / ZeRO-3 over every worker


NONE = Remedy("none")
REMEDIES = (NONE, Remedy("checkpointing", checkpointing=True), Remedy("fsdp", sharded=True),
            Remedy("fsdp+checkpointing", checkpointing=True, sharded=True))


@dataclass(frozen=True)
class ModelMemory:
    """What the estimate needs of a model card (activations at the input size trained at)."""

    params: float
    gradient_bytes: float
    activation_bytes: float  # per sample, fp32, saved for backward
    precision: str
    optimizer: str
    tensors: float | None = None
    logits_bytes: float = 0.0  # per sample, fp32: what a loss's log-softmax reads
    autocast_activation_bytes: float | None = None  # per sample, saved under autocast
    step_activation_bytes: float = 0.0  # saved once a step whatever the batch, fp32
    autocast_step_activation_bytes: float | None = None  # the same under autocast

    @classmethod
    def from_card(cls, card, precision: str, optimizer: str,
                  activation_scale: float = 1.0) -> ModelMemory:
        """A model card's figures (activations and logits scaled from the card's input size
        to the one trained at)."""
        tensors, autocast = card.get("tensors"), card.get("autocast_activation_bytes_per_sample")
        step, autocast_step = (card.get(c) for c in STEP_ACTIVATION_COLUMNS.values())
        return cls(float(card["params"]), float(card["gradient_bytes"]),
                   float(card["activation_bytes_per_sample"]) * activation_scale, precision,
                   optimizer, float(tensors) if tensors else None,
                   float(card.get("logits_bytes_per_sample") or 0.0) * activation_scale,
                   None if autocast in (None, "") else float(autocast) * activation_scale,
                   _bytes(step) or 0.0, _bytes(autocast_step))

    @property
    def blocks(self) -> float:
        if not self.tensors:
            return DEFAULT_BLOCKS
        return max(1.0, self.tensors / TENSORS_PER_BLOCK)

    @property
    def half(self) -> bool:
        return self.precision in HALF_PRECISIONS


def _bytes(value) -> float | None:
    return None if value in (None, "") or not np.isfinite(float(value)) else float(value)


def optimizer_for(task: str, optimizer: str | None = None, family: str | None = None) -> str:
    """The card's optimizer, else its family's recipe's, else its task's; ValueError naming
    the accepted ones."""
    name = (optimizer or FAMILY_OPTIMIZER.get(family or "")
            or TASK_OPTIMIZER.get(task, "adamw")).lower()
    if name not in OPTIMIZER_STATE_BYTES:
        raise ValueError(f"unknown optimizer {name!r}; one of "
                         f"{', '.join(OPTIMIZER_STATE_BYTES)}")
    return name


def recipe_optimizer(card) -> str:
    """The optimizer a model card's recipe trains with (`optimizer_for` of its columns)."""
    return optimizer_for(card["task"], card.get("optimizer"), card.get("family"))


def recipe_defaults() -> str:
    """The recipes' optimizers in words, for help texts: each task's, then the families'
    that differ."""
    tasks = ", ".join(f"{task} models {name}" for task, name in TASK_OPTIMIZER.items())
    families = ", ".join(f"{family} {name}" for family, name in FAMILY_OPTIMIZER.items())
    return f"{tasks}; {families}"


def state_mib(model: ModelMemory, remedy: Remedy, workers) -> np.ndarray:
    """Weights, gradients, optimizer state and their copies per GPU (MiB), before the
    allocator margin; an array over `workers` (the data-parallel world size)."""
    workers = np.asarray(workers, dtype=float)
    p = model.params
    cast = CAST_WEIGHT_BYTES * p if model.half else 0.0
    states = 4.0 * p + model.gradient_bytes + OPTIMIZER_STATE_BYTES[model.optimizer] * p
    if remedy.sharded:
        compute_weights = (2.0 if model.half else 4.0) * p
        live = FSDP_LIVE_UNITS * compute_weights / model.blocks
        total = states / np.maximum(workers, 1.0) + live
    else:
        total = np.full(workers.shape, states + model.gradient_bytes + cast)  # + DDP buckets
    return total / MIB


def step_saved_mib(model: ModelMemory, remedy: Remedy) -> float:
    """Saved tensors a step keeps once whatever its batch (MiB): under autocast at the widths
    it saves them in (half the fp32 figure where the card does not say, and under FSDP in 16
    bits, which computes in 16 bits throughout); checkpointing keeps those of the block being
    recomputed."""
    if not model.half:
        saved = model.step_activation_bytes
    elif model.autocast_step_activation_bytes is not None and not remedy.sharded:
        saved = model.autocast_step_activation_bytes
    else:
        saved = model.step_activation_bytes * HALF_ACTIVATION_FACTOR
    if remedy.checkpointing:
        saved *= CHECKPOINT_INPUT_SHARE + 1.0 / model.blocks
    return saved / MIB


def sample_mib(model: ModelMemory, remedy: Remedy) -> float:
    """Activation memory per sample of the micro-batch at the backward peak (MiB)."""
    returned = HALF_ACTIVATION_FACTOR if model.half else 1.0  # the logits the model returns
    if not model.half:
        saved = model.activation_bytes
    elif np.isfinite(model.autocast_activation_bytes or np.nan) and not remedy.sharded:
        saved = model.autocast_activation_bytes  # the log-softmax's output at fp32 in it
    else:  # halved (FSDP in 16 bits: 16-bit parameters, so 16-bit activations throughout), the
        # log-softmax's fp32 output too: its other half comes with the loss
        saved = model.activation_bytes * HALF_ACTIVATION_FACTOR
        returned += HALF_ACTIVATION_FACTOR
    if remedy.checkpointing:  # the loss's scores lie outside the checkpointed blocks
        saved *= CHECKPOINT_INPUT_SHARE + 1.0 / model.blocks
    transient = max(ACTIVATION_GRADIENT_PEAK * saved,
                    (LOSS_GRADIENT_COPIES + returned) * model.logits_bytes)
    return (saved + transient) / MIB


def allocated_mib(model: ModelMemory, remedy: Remedy, micro_batch, workers=1) -> np.ndarray:
    """MiB of tensors at the step's peak, the allocator's margin included: what
    torch.cuda.max_memory_allocated reports (no CUDA context, no cuDNN/cuBLAS workspace)."""
    tensors = state_mib(model, remedy, workers) + step_saved_mib(model, remedy) \
        + np.asarray(micro_batch) * sample_mib(model, remedy)
    return ALLOCATOR_MARGIN * tensors


def need_mib(model: ModelMemory, remedy: Remedy, micro_batch, workers=1) -> np.ndarray:
    """MiB one GPU needs to train `micro_batch` samples per micro-step."""
    return CUDA_CONTEXT_MIB + WORKSPACE_MIB + allocated_mib(model, remedy, micro_batch, workers)


def largest_micro_batch(model: ModelMemory, remedy: Remedy, usable_mib, workers=1) -> np.ndarray:
    """The largest micro-batch that fits `usable_mib` per GPU (0: not even one sample)."""
    room = (np.asarray(usable_mib, dtype=float) - CUDA_CONTEXT_MIB - WORKSPACE_MIB) / (
        ALLOCATOR_MARGIN) - state_mib(model, remedy, workers) - step_saved_mib(model, remedy)
    return np.maximum(np.floor(room / sample_mib(model, remedy)), 0).astype(np.int64)
