"""The training job to plan for: a model (from its card: the zoo's, the user's own, or a card
file), how much data (epochs, samples, steps or tokens), at what input size, the global batch
it trains with and the batch rule, and the precision. What fits one GPU (micro-batch,
accumulation, memory remedy) is resolved per offering by advisor.candidates with
advisor.memory."""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from advisor.errors import ParameterError
from advisor.memory import ModelMemory, optimizer_for, recipe_optimizer
from gpuadvisor.cards import (
    INPUT_SIZE,
    MAKE_A_CARD,
    base_model,
    card_name,
    matching_card,
    similar_cards,
    sized_card_names,
)
from gpuadvisor.vocab import BATCH_POLICIES, HALF_PRECISIONS, VocabError, check_precision

# Counts as people write them: 20B tokens, 1.28M samples, 90k steps (decimal, as LLM papers
# count tokens).
COUNT_SUFFIXES = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
# The global batch of a card's recipe when neither the card nor datasets/recipe_batches.csv
# names one: its per-GPU batch on the 8-GPU node the zoo's reference recipes were published on.
RECIPE_GPUS = 8
MAX_AMOUNT = 1e15  # epochs, samples, steps, batches: beyond any training run
# A split card's kernel counts (gpuadvisor.cards), which cards made by an older profiler lack,
# and what the estimator leaves unpriced without them.
KERNEL_COUNTS = {"kernels_per_step": "the host's dispatch of its kernels",
                 "autocast_kernels_per_step": "autocast's casts among them"}


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
    card: str | None = None  # the card used, when not the model's default (bert_large@384)
    seq_len: int | None = None  # tokens a sample (text models)
    image_size: int | None = None  # pixels a side (image models)
    tokens: float | None = None  # the amount of data in tokens, when given so
    # The card's operator split (gpuadvisor.cards.OPERATOR_COLUMNS); empty: priced from totals
    operators: Mapping[str, float | None] = field(default_factory=dict)
    global_batch: int = 0  # samples per optimizer step; 0: the recipe's
    batch_policy: str = "fixed-global"
    optimizer: str = "adamw"
    micro_batch_cap: int | None = None  # fixed-global: the largest micro-batch the user allows
    channels_last: bool = False  # tensors kept NHWC; PyTorch's default, NCHW, when False

    def total_samples(self, total_gpus: np.ndarray) -> np.ndarray:
        """Samples the job processes, the same on every cluster: epochs of the dataset, or
        `steps` optimizer steps of the workload's global batch."""
        amount = (self.steps * self.global_batch if self.steps is not None
                  else self.samples_per_epoch * self.epochs)
        return np.full(np.shape(total_gpus), float(amount))

    def memory_model(self) -> ModelMemory:
        return ModelMemory.from_card(
            {**self.operators, "params": self.params, "gradient_bytes": self.gradient_bytes,
             "activation_bytes_per_sample": self.activation_bytes_per_sample,
             "tensors": self.tensors}, self.precision, self.optimizer)

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
                "activation_bytes": self.activation_bytes_per_sample, "tensors": self.tensors,
                **self.operators}

    def warnings(self) -> list[str]:
        """What the workload asks that the plans cannot honour or that changes nothing: a
        per-GPU batch kept fixed changes convergence; a split card without the kernel counts
        (made by an older profiler) leaves the host's side of a step unpriced, too fast where
        it binds; channels-last changes only 16-bit convolutions (cuDNN's NCHW transposes)."""
        name = self.card or self.model
        notes = []
        if self.batch_policy == "fixed-per-gpu":
            notes.append(f"fixed-per-gpu: the global batch grows with the cluster "
                         f"({self.batch_per_gpu} per GPU); convergence changes with it, so the "
                         "epochs or steps may not reach the same accuracy (Or et al. 2020)")
        # a card without the split is priced from totals and per-tensor costs (CM-DARE's)
        split = self.operators.get("matmul_flops_per_sample") is not None
        missing = [column for column in KERNEL_COUNTS if self.operators.get(column) is None
                   and (column == "kernels_per_step" or self.precision in HALF_PRECISIONS)]
        if missing and split:
            unpriced = " and ".join(KERNEL_COUNTS[column] for column in missing)
            notes.append(f"card {name} has no {' or '.join(missing)} (made by an older "
                         f"profiler), so {unpriced} {'go' if len(missing) > 1 else 'goes'} "
                         "unpriced and a step of many small kernels is predicted too fast; "
                         "make the card again with `profiler card ... --save`")
        if self.channels_last and self.precision not in HALF_PRECISIONS:
            notes.append(f"channels-last changes nothing priced in {self.precision}: only "
                         "16-bit convolutions pay cuDNN's NCHW transposes")
        elif self.channels_last and not self.operators.get("conv_flops_per_sample"):
            has = ("no dense convolutions" if split
                   else "no operator split, so its convolutions are not priced apart")
            notes.append(f"channels-last changes nothing priced for {name}: its card has "
                         f"{has}")
        return notes

    def describe(self) -> dict:
        amount = (
            {"steps": self.steps} if self.steps is not None
            else {"samples_per_epoch": self.samples_per_epoch, "epochs": self.epochs}
        )
        if self.tokens is not None:
            amount["tokens"] = self.tokens
        size = ({"seq_len": self.seq_len} if self.seq_len else {}) | (
            {"image_size": self.image_size} if self.image_size else {})
        return {
            "model": self.model,
            **({"card": self.card} if self.card else {}),
            **size,
            "dataset": self.dataset,
            **amount,
            "global_batch": self.global_batch,
            "batch_policy": self.batch_policy,
            "batch_per_gpu": self.batch_per_gpu,
            "precision": self.precision,
            "channels_last": self.channels_last,
            "optimizer": self.optimizer,
        }


def build_workload(
    cards: Mapping[str, Mapping[str, str]],
    model: str,
    *,
    epochs: float | None = None,
    samples: int | str | None = None,
    steps: int | str | None = None,
    batch_per_gpu: int | None = None,
    precision: str = "fp32",
    tokens: float | str | None = None,
    seq_len: int | None = None,
    image_size: int | None = None,
    global_batch: int | None = None,
    batch_policy: str = "fixed-global",
    channels_last: bool = False,
    optimizer: str | None = None,
) -> Workload:
    """A Workload from the model card (at `seq_len` / `image_size` when given: the model's
    card at that size), with the user's overrides checked. `tokens` (20B, 1.5T or a number)
    is the amount of data of a text model: tokens / seq_len samples, one pass; `samples` and
    `steps` are counts too (1.28M, 90k).
    `batch_per_gpu` is the per-GPU batch under the fixed-per-gpu policy and caps the
    micro-batch under fixed-global; `global_batch` defaults to the card's recipe;
    `channels_last`: the job keeps its tensors NHWC (else PyTorch's NCHW); `optimizer`: what
    it steps (advisor.memory.OPTIMIZER_STATE_BYTES names them; default: the card's recipe's),
    whose state each GPU holds and each update reads and writes."""
    from advisor.features import card_features
    from gpuadvisor.cards import OPERATOR_COLUMNS

    card = _card_at_size(cards, _find_card(cards, model), seq_len=seq_len,
                         image_size=image_size)
    features = card_features(card)
    samples, steps = (None if value is None else int(parse_count(value, name))
                      for name, value in (("samples", samples), ("steps", steps)))
    try:
        check_precision(precision)
    except VocabError as error:
        raise WorkloadError(str(error), "precision") from None
    if batch_policy not in BATCH_POLICIES:
        raise WorkloadError(f"batch_policy must be one of {', '.join(BATCH_POLICIES)}, got "
                            f"{batch_policy!r}", "batch_policy")
    for name, value in (("epochs", epochs), ("samples", samples), ("steps", steps),
                        ("batch_per_gpu", batch_per_gpu), ("global_batch", global_batch)):
        if value is not None and not 0 < value <= MAX_AMOUNT:
            raise WorkloadError(f"{name} must be positive and at most {MAX_AMOUNT:.0e}, got "
                                f"{str(value)[:20]}", name)
    if steps is not None and (epochs is not None or samples is not None):
        raise WorkloadError("give either steps or epochs/samples, not both",
                            "steps", "epochs", "samples")
    if tokens is not None:
        tokens = parse_count(tokens, "tokens")
        samples, epochs = _token_samples(card, tokens, steps, epochs, samples), 1.0
    if steps is None and not ((samples or card["samples_per_epoch"])
                              and (epochs or card["epochs"])):
        raise WorkloadError(f"the card of {card['model']} sets no amount of data; give "
                            "tokens, samples and epochs, or steps",
                            "tokens", "samples", "epochs", "steps")
    if optimizer is not None:
        try:
            optimizer = optimizer_for(card["task"], optimizer)
        except ValueError as error:
            raise WorkloadError(str(error), "optimizer") from None
    try:
        optimizer = optimizer or recipe_optimizer(card)
    except ValueError as error:
        raise WorkloadError(f"model card {card['model']}: {error}") from None
    per_gpu = int(batch_per_gpu or float(card["batch_per_gpu"]))
    recipe = (card.get("global_batch") or recipe_batches().get(base_model(card["model"]))
              or float(card["batch_per_gpu"]) * RECIPE_GPUS)
    return Workload(
        model=base_model(card["model"]),
        card=card["model"] if card["model"] != base_model(card["model"]) else None,
        seq_len=card.get("seq_len"),
        image_size=card.get("image_size"),
        tokens=tokens,
        task=card["task"],
        dataset=card["dataset"],
        samples_per_epoch=int(samples or float(card["samples_per_epoch"] or 0)),
        epochs=float(epochs or float(card["epochs"] or 0)),
        steps=steps,
        batch_per_gpu=per_gpu,
        precision=precision,
        params=features["params"],
        gradient_bytes=features["gradient_bytes"],
        flops_per_sample=features["flops_per_sample"],
        activation_bytes_per_sample=features["activation_bytes"],
        tensors=features["tensors"],
        operators={key: features[key] for key in OPERATOR_COLUMNS},
        global_batch=int(global_batch or float(recipe)),
        batch_policy=batch_policy,
        optimizer=optimizer,
        micro_batch_cap=batch_per_gpu if batch_policy == "fixed-global" else None,
        channels_last=bool(channels_last),
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
    name = matching_card(cards, model)
    if name is not None:
        return cards[name]
    closest = similar_cards(cards, model)
    near = f"closest: {', '.join(closest)}" if closest else "no zoo name is close"
    raise WorkloadError(
        f"unknown model {model!r}; {near} (all: {', '.join(sorted(cards))}); a model of your "
        f"own: {MAKE_A_CARD}"
    )


# What a count may be given as, per flag: a number or one with a unit suffix (k, M, B/G, T).
COUNT_EXAMPLES = {"tokens": "20B, 1.5T or 500M", "samples": "1281167, 1.28M or 50k",
                  "steps": "90000 or 90k"}


def parse_count(value: float | str, name: str = "tokens") -> float:
    """A count from a number or a string such as 20B, 1.5T, 1.28M or 300k; samples and steps
    are whole (rounded), tokens may be any amount from 1. WorkloadError names `name`."""
    match = re.fullmatch(r"\s*([0-9.]+(?:e[0-9]+)?)\s*([kmbgt]?)\s*", str(value).lower())
    try:
        number = float(match[1]) * COUNT_SUFFIXES[match[2]] if match else math.nan
    except ValueError:  # '1.2.3'
        number = math.nan
    if name != "tokens" and math.isfinite(number):
        number = float(round(number))
    if not (number >= 1 and math.isfinite(number)):
        raise WorkloadError(f"{name} must be a count such as {COUNT_EXAMPLES[name]}, got "
                            f"{str(value)[:20]!r}", name)
    return number


def _token_samples(card, tokens: float, steps, epochs, samples) -> int:
    """Samples (sequences of the card's seq_len) that hold `tokens` tokens."""
    if steps is not None or epochs is not None or samples is not None:
        raise WorkloadError("give tokens or epochs/samples/steps, not both",
                            "tokens", "epochs", "samples", "steps")
    if card["task"] != "text" or not card.get("seq_len"):
        raise WorkloadError(f"tokens count the data of text models; {card['model']} is "
                            f"{_kind(card)}: give samples and epochs", "tokens")
    return math.ceil(tokens / card["seq_len"])


def _card_at_size(cards, card, *, seq_len: int | None, image_size: int | None):
    """`card`'s model at the input size asked for: the card of that size (model@size, or
    at 32 px the model's CIFAR variant) or the default card when it has that size;
    WorkloadError naming the command that makes it."""
    for key, size in (("seq_len", seq_len), ("image_size", image_size)):
        if size is None:
            continue
        flag = key.replace("_", "-")
        if size <= 0:
            raise WorkloadError(f"{key} must be positive, got {size}", key)
        if card["task"] not in INPUT_SIZE:  # NCF: user-item pairs
            raise WorkloadError(f"{card['model']} is {_kind(card)} and takes no input size: "
                                f"leave out {key}", key)
        if INPUT_SIZE[card["task"]] != key:
            other = "image_size" if key == "seq_len" else "seq_len"
            raise WorkloadError(f"{card['model']} is {_kind(card)}: give {other}, not {key}",
                                key)
        base = base_model(card["model"])
        for name in (card["model"], *sized_card_names(base, size), base):
            if name in cards and cards[name].get(key) == size:
                return cards[name]
        make = (f"profiler card {base} --{flag} {size} --save" if card["family"] != "custom"
                and not str(card.get("source", "")).startswith("profiler card --") else
                f"profiler card --config/--callable ... --{flag} {size} --name "
                f"{card_name(base, size)} --save")
        raise WorkloadError(f"no card of {base} at {key} {size} (its card has "
                            f"{card.get(key)}); make it with `{make}`", key)
    return card


def _kind(card) -> str:
    return {"image": "an image model", "text": "a text model"}.get(card["task"],
                                                                 f"a {card['task']} model")
