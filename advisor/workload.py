"""The training job to plan for: a zoo model (from its card), how much data, the global batch
it trains with and the batch rule, and the precision. What fits one GPU (micro-batch,
accumulation, memory remedy) is resolved per offering by advisor.candidates with
advisor.memory."""

from __future__ import annotations

import csv
import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

import numpy as np

from advisor.errors import ParameterError
from advisor.memory import ModelMemory, optimizer_for
from gpuadvisor.vocab import VocabError, check_precision

GIB = 2.0**30
# Or et al. (2020)'s two rules for a cluster of a different size: keep the global batch (the
# per-GPU share shrinks, the optimization is unchanged), or keep the per-GPU batch (the global
# batch grows with the GPUs, and so may the epochs needed to converge).
BATCH_POLICIES = ("fixed-global", "fixed-per-gpu")
# The global batch of a card's recipe when neither the card nor datasets/recipe_batches.csv
# names one: its per-GPU batch on the 8-GPU node the zoo's reference recipes were published on.
RECIPE_GPUS = 8


class WorkloadError(ParameterError):
    """Bad workload input; the message names the problem and what is accepted."""


@dataclass(frozen=True)
class Workload:
    model: str
    task: str
    dataset: str
    samples_per_epoch: int
    epochs: float
    steps: int | None  # optimizer steps of `global_batch` samples, when given instead of epochs
    batch_per_gpu: int  # fixed-per-gpu: the per-GPU batch; fixed-global: the micro-batch cap
    precision: str
    params: float
    gradient_bytes: float
    flops_per_sample: float
    activation_bytes_per_sample: float  # fp32, saved for backward
    tensors: float | None = None  # parameter tensors (a checkpoint's count)
    global_batch: int = 0  # samples per optimizer step; 0: the recipe's
    batch_policy: str = "fixed-global"
    optimizer: str = "adamw"
    micro_batch_cap: int | None = None  # fixed-global: the largest micro-batch the user allows

    def total_samples(self, total_gpus: np.ndarray) -> np.ndarray:
        """Samples the job processes, the same on every cluster: epochs of the dataset, or
        `steps` optimizer steps of the workload's global batch."""
        amount = (self.steps * self.global_batch if self.steps is not None
                  else self.samples_per_epoch * self.epochs)
        return np.full(np.shape(total_gpus), float(amount))

    def memory_model(self) -> ModelMemory:
        return ModelMemory(self.params, self.gradient_bytes, self.activation_bytes_per_sample,
                           self.precision, self.optimizer, self.tensors)

    def per_gpu_share(self, workers: np.ndarray) -> np.ndarray:
        """Samples each GPU contributes to one optimizer step on clusters of `workers`."""
        workers = np.asarray(workers, dtype=float)
        if self.batch_policy == "fixed-per-gpu":
            return np.full(workers.shape, float(self.batch_per_gpu))
        return self.global_batch / workers

    def model_features(self) -> dict[str, float | None]:
        """The card features `advisor.features.configuration_features` reads for this model."""
        return {"params": self.params, "flops_per_sample": self.flops_per_sample,
                "gradient_bytes": self.gradient_bytes,
                "activation_bytes": self.activation_bytes_per_sample, "tensors": self.tensors}

    def describe(self) -> dict:
        amount = (
            {"steps": self.steps} if self.steps is not None
            else {"samples_per_epoch": self.samples_per_epoch, "epochs": self.epochs}
        )
        return {
            "model": self.model,
            "dataset": self.dataset,
            **amount,
            "global_batch": self.global_batch,
            "batch_policy": self.batch_policy,
            "batch_per_gpu": self.batch_per_gpu,
            "precision": self.precision,
            "optimizer": self.optimizer,
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
    global_batch: int | None = None,
    batch_policy: str = "fixed-global",
) -> Workload:
    """A Workload from the model card, with the user's overrides checked. `batch_per_gpu` is
    the per-GPU batch under the fixed-per-gpu policy and caps the micro-batch under
    fixed-global; `global_batch` defaults to the card's recipe."""
    from advisor.features import card_features

    card = _find_card(cards, model)
    features = card_features(card)
    try:
        check_precision(precision)
    except VocabError as error:
        raise WorkloadError(str(error), "precision") from None
    if batch_policy not in BATCH_POLICIES:
        raise WorkloadError(f"batch_policy must be one of {', '.join(BATCH_POLICIES)}, got "
                            f"{batch_policy!r}", "batch_policy")
    for name, value in (("epochs", epochs), ("samples", samples), ("steps", steps),
                        ("batch_per_gpu", batch_per_gpu), ("global_batch", global_batch)):
        if value is not None and value <= 0:
            raise WorkloadError(f"{name} must be positive, got {value}", name)
    if steps is not None and (epochs is not None or samples is not None):
        raise WorkloadError("give either steps or epochs/samples, not both",
                            "steps", "epochs", "samples")
    try:
        optimizer = optimizer_for(card["task"], card.get("optimizer"))
    except ValueError as error:
        raise WorkloadError(f"model card {card['model']}: {error}") from None
    per_gpu = int(batch_per_gpu or float(card["batch_per_gpu"]))
    recipe = (card.get("global_batch") or recipe_batches().get(card["model"])
              or float(card["batch_per_gpu"]) * RECIPE_GPUS)
    return Workload(
        model=card["model"],
        task=card["task"],
        dataset=card["dataset"],
        samples_per_epoch=int(samples or float(card["samples_per_epoch"])),
        epochs=float(epochs or float(card["epochs"])),
        steps=steps,
        batch_per_gpu=per_gpu,
        precision=precision,
        params=features["params"],
        gradient_bytes=features["gradient_bytes"],
        flops_per_sample=features["flops_per_sample"],
        activation_bytes_per_sample=features["activation_bytes"],
        tensors=features["tensors"],
        global_batch=int(global_batch or float(recipe)),
        batch_policy=batch_policy,
        optimizer=optimizer,
        micro_batch_cap=batch_per_gpu if batch_policy == "fixed-global" else None,
    )


@cache
def recipe_batches() -> dict[str, int]:
    """Model -> the global batch its published recipe trains with (datasets/recipe_batches.csv)."""
    from gpuadvisor import data

    path = data.find("recipe_batches.csv")
    try:
        with open(path, newline="") as handle:
            return {row["model"]: int(row["global_batch"]) for row in csv.DictReader(handle)}
    except FileNotFoundError:
        return {}
    except (OSError, KeyError, ValueError) as error:
        raise WorkloadError(f"cannot read {path} ({error}); fix or remove it") from None


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
