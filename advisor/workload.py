"""The training job to plan for: a zoo model (from its card), how much data, at what batch and
precision, and how much GPU memory one worker needs for it."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from advisor.errors import ParameterError
from gpuadvisor.vocab import HALF_PRECISIONS, VocabError, check_precision

GIB = 2.0**30

# Bytes of optimizer state per parameter: SGD with momentum for image models (one fp32
# buffer), AdamW for text models (two fp32 moments), as the zoo's reference recipes train them.
OPTIMIZER_STATE_BYTES = {"image": 4.0, "text": 8.0}
# Autocast (amp, bf16) keeps fp32 weights and gradients but saves most activations for
# backward in 16 bits; fp32 and tf32 save them in 32.
HALF_ACTIVATION_FACTOR = 0.5
# The CUDA context, cuDNN/cuBLAS workspaces and allocator fragmentation: a fixed reserve plus
# a margin, so that a plan never sits at the edge of an out-of-memory error.
CONTEXT_RESERVE_BYTES = 1.0 * GIB
FRAGMENTATION_MARGIN = 1.10


class WorkloadError(ParameterError):
    """Bad workload input; the message names the problem and what is accepted."""


@dataclass(frozen=True)
class Workload:
    model: str
    task: str
    dataset: str
    samples_per_epoch: int
    epochs: float
    steps: int | None  # total optimizer steps, when given instead of epochs
    batch_per_gpu: int
    precision: str
    params: float
    gradient_bytes: float
    flops_per_sample: float
    activation_bytes_per_sample: float  # fp32, saved for backward
    tensors: float | None = None  # parameter tensors (a checkpoint's count)
    # The card's operator split (gpuadvisor.cards.OPERATOR_COLUMNS); empty: priced from totals
    operators: Mapping[str, float | None] = field(default_factory=dict)

    def total_samples(self, total_gpus: np.ndarray) -> np.ndarray:
        """Samples the job processes on clusters of `total_gpus` GPUs (steps fix the sample
        count only together with the global batch)."""
        if self.steps is not None:
            return self.steps * self.batch_per_gpu * np.asarray(total_gpus, dtype=float)
        return np.full(np.shape(total_gpus), self.samples_per_epoch * self.epochs, dtype=float)

    def memory_per_gpu_bytes(self) -> float:
        """Weights + gradients + optimizer state + saved activations of one data-parallel worker."""
        weights = 4.0 * self.params
        optimizer = OPTIMIZER_STATE_BYTES.get(self.task, 8.0) * self.params
        per_sample = self.activation_bytes_per_sample * (
            HALF_ACTIVATION_FACTOR if self.precision in HALF_PRECISIONS else 1.0)
        activations = per_sample * self.batch_per_gpu
        model_state = weights + self.gradient_bytes + optimizer + activations
        return FRAGMENTATION_MARGIN * model_state + CONTEXT_RESERVE_BYTES

    def model_features(self) -> dict[str, float | None]:
        """The card features `advisor.features.configuration_features` reads for this model."""
        return {"params": self.params, "flops_per_sample": self.flops_per_sample,
                "gradient_bytes": self.gradient_bytes,
                "activation_bytes": self.activation_bytes_per_sample, "tensors": self.tensors,
                **self.operators}

    def describe(self) -> dict:
        amount = (
            {"steps": self.steps} if self.steps is not None
            else {"samples_per_epoch": self.samples_per_epoch, "epochs": self.epochs}
        )
        return {
            "model": self.model,
            "dataset": self.dataset,
            **amount,
            "batch_per_gpu": self.batch_per_gpu,
            "precision": self.precision,
            "memory_per_gpu_gb": round(self.memory_per_gpu_bytes() / GIB, 2),
        }


def build_workload(
    cards: Mapping[str, Mapping[str, str]],
    model: str,
    *,
    epochs: float | None = None,
    samples: int | None = None,
    steps: int | None = None,
    batch_per_gpu: int | None = None,
    precision: str = "fp32",
) -> Workload:
    """A Workload from the model card, with the user's overrides checked."""
    from advisor.features import card_features
    from gpuadvisor.cards import OPERATOR_COLUMNS

    card = _find_card(cards, model)
    features = card_features(card)
    try:
        check_precision(precision)
    except VocabError as error:
        raise WorkloadError(str(error), "precision") from None
    for name, value in (("epochs", epochs), ("samples", samples), ("steps", steps),
                        ("batch_per_gpu", batch_per_gpu)):
        if value is not None and value <= 0:
            raise WorkloadError(f"{name} must be positive, got {value}", name)
    if steps is not None and (epochs is not None or samples is not None):
        raise WorkloadError("give either steps or epochs/samples, not both",
                            "steps", "epochs", "samples")
    return Workload(
        model=card["model"],
        task=card["task"],
        dataset=card["dataset"],
        samples_per_epoch=int(samples or float(card["samples_per_epoch"])),
        epochs=float(epochs or float(card["epochs"])),
        steps=steps,
        batch_per_gpu=int(batch_per_gpu or float(card["batch_per_gpu"])),
        precision=precision,
        params=features["params"],
        gradient_bytes=features["gradient_bytes"],
        flops_per_sample=features["flops_per_sample"],
        activation_bytes_per_sample=features["activation_bytes"],
        tensors=features["tensors"],
        operators={key: features[key] for key in OPERATOR_COLUMNS},
    )


def _find_card(cards: Mapping[str, Mapping[str, str]], model: str) -> Mapping[str, str]:
    """The card of `model`, tolerant of case, '-' and '_' as the zoo is (ResNet-50 = resnet50)."""
    def plain(name: str) -> str:
        return name.strip().lower().replace("-", "").replace("_", "")

    by_plain = {plain(name): name for name in cards}
    if plain(model) in by_plain:
        return cards[by_plain[plain(model)]]
    closest = difflib.get_close_matches(model.strip().lower().replace("-", "_"), list(cards),
                                        n=3, cutoff=0.4)
    raise WorkloadError(
        f"unknown model {model!r}; closest: {', '.join(closest) or '-'}"
        f" (all: {', '.join(sorted(cards))})"
    )
