"""The model cards file, `model_cards.csv`: its columns, reader and writer, with the csv
module only so that the advisor never imports torch. The cards are computed with torch by
`profiler/cards.py`. A user's own cards (`model_cards.csv` in the user data dir) add to the
shipped ones, and replace a shipped card of the same model.

A card at an input size other than its model's default is named `model@size` (bert_large@384:
BERT-Large at 384 tokens), so that a model's cards at several sizes live side by side. A card
file (`advisor recommend --card FILE`, `profiler card --out FILE`) is one card as JSON."""

from __future__ import annotations

import csv
import difflib
import json
import math
import os
import re
from pathlib import Path
from typing import Any

from gpuadvisor import data
from gpuadvisor.errors import GpuAdvisorError
from gpuadvisor.textfile import unreadable

FILE = "model_cards.csv"

WORKLOAD_COLUMNS = ["model", "family", "task", "dataset", "samples_per_epoch", "epochs",
                    "image_size", "seq_len", "batch_per_gpu"]
MEASURED_COLUMNS = ["params", "tensors", "gradient_bytes", "forward_flops_per_sample",
                    "flops_per_sample", "activation_bytes_per_sample"]
# The operator split (profiler/operators.py): FLOPs and bytes per sample of each operator
# class, the traffic of a step that does not grow with the batch, and the parts of the dense
# convolutions' FLOPs in 3x3 and in 5x5 stride-1 kernels (fast algorithms'), and the fp32 bytes
# of the scores a loss's log-softmax reads (a language model's logits: the memory model's loss
# peak), and the saved activations' bytes as CUDA autocast keeps them (16-bit where it runs an
# operator in 16 bits, fp32 where in fp32: profiler/autocast_memory.py), and each class's
# traffic under autocast (`<class>_autocast_bytes_per_sample`: 16-bit kernels read and write
# 16 bits, normalisation and softmax fp32, element-wise work its inputs' widest type, so a
# transformer's residual stream stays fp32; autocast's casts count as element-wise work).
# Optional: a card without them (a user's own, an older file) is priced from its totals, its
# memory and traffic under autocast from half its fp32 figures.
OPERATOR_CLASSES = ("matmul", "conv", "grouped_conv", "attention", "norm", "other")
# How a class's work spreads over arithmetic intensity (FLOPs per fp32 byte of each operator):
# `<class>_under<I>_{flops,bytes}_per_sample` sum the FLOPs and bytes of the class's operators
# below intensity I, so that on a GPU whose balance point is I those operators are priced
# memory-bound and the rest compute-bound, one operator at a time (Habitat's per-operator
# roofline) rather than the whole class at its mean intensity. Element-wise and normalisation
# classes sit below every GPU's balance point (about one FLOP a byte) and need no profile.
# The edges span the balance points of training GPUs in FLOPs per fp32 byte: a K80's FP32
# cores (~12) to an L40S's 16-bit tensor cores (~210, its 16-bit bytes counted as fp32 halves).
PROFILED_CLASSES = ("matmul", "conv", "grouped_conv", "attention")
INTENSITY_EDGES = (8, 16, 32, 64, 128, 256, 512)
# Classes whose kernels execute whole tiles (profiler/operators.py, GEMM_TILE): their
# `<class>_tiled_flops_per_sample` counts the FLOPs a tile-rounded kernel executes, and their
# intensity profiles are of those FLOPs; `<class>_flops_per_sample` stays the model's count.
TILED_CLASSES = ("matmul", "conv", "attention")


def profile_column(kind: str, edge: int, what: str) -> str:
    """The card column of class `kind`'s `what` ('flops' or 'bytes') below intensity `edge`."""
    return f"{kind}_under{edge}_{what}_per_sample"


def tiled_column(kind: str) -> str:
    """The card column of the FLOPs class `kind` executes, tiles rounded up (TILED_CLASSES)."""
    return f"{kind}_tiled_flops_per_sample"


def executed_flops_column(kind: str) -> str:
    """The card column of the FLOPs class `kind`'s kernels execute, the total its intensity
    profile's FLOPs add up to: the tiled count where tiles round it, else the class's FLOPs."""
    return tiled_column(kind) if kind in TILED_CLASSES else f"{kind}_flops_per_sample"


# Saved tensors whose size does not grow with the batch (WaveGlow's weight-normalised weights,
# computed from their parameters each step; Transformer-XL's relative position embeddings): a
# step keeps them once, so the per-sample columns leave them out (the difference between a
# batch of two and a batch of one) and these hold them, fp32 and as autocast saves them.
STEP_ACTIVATION_COLUMNS = {"activation_bytes_per_sample": "step_activation_bytes",
                           "autocast_activation_bytes_per_sample":
                               "autocast_step_activation_bytes"}
AUTOCAST_BYTES_COLUMNS = {kind: f"{kind}_autocast_bytes_per_sample" for kind in OPERATOR_CLASSES}
PROFILE_COLUMNS = [profile_column(kind, edge, what) for kind in PROFILED_CLASSES
                   for edge in INTENSITY_EDGES for what in ("flops", "bytes")]
# The classes a compiler fuses into the kernels around them: element-wise work,
# activations, reductions and normalisations.
FUSIBLE_CLASSES = ("other", "norm")
# The step as a compiler that fuses element-wise work runs it (XLA: NVIDIA's TensorFlow BERT
# recipes), attention written out (no fused attention kernel): its element-wise bytes per
# sample in fp32 and its kernels (profiler.operators.fused_elementwise).
XLA_BYTES_COLUMN = "xla_elementwise_bytes_per_sample"
XLA_KERNELS_COLUMN = "xla_kernels_per_step"
OPERATOR_COLUMNS = [f"{kind}_{what}_per_sample" for kind in OPERATOR_CLASSES
                    for what in ("flops", "bytes")] + ["step_bytes", "winograd_flops_per_sample",
                                                       "conv5x5_flops_per_sample",
                                                       "logits_bytes_per_sample",
                                                       "kernels_per_step",
                                                       "autocast_kernels_per_step",
                                                       "autocast_activation_bytes_per_sample",
                                                       *STEP_ACTIVATION_COLUMNS.values(),
                                                       *AUTOCAST_BYTES_COLUMNS.values(),
                                                       *map(tiled_column, TILED_CLASSES),
                                                       *PROFILE_COLUMNS,
                                                       XLA_BYTES_COLUMN, XLA_KERNELS_COLUMN]
VERSION_COLUMNS = ["torch_version", "as_of", "source"]  # how a card was made, not what it says
COLUMNS = WORKLOAD_COLUMNS + MEASURED_COLUMNS + OPERATOR_COLUMNS + VERSION_COLUMNS
INT_COLUMNS = {"samples_per_epoch", "epochs", "image_size", "seq_len", "batch_per_gpu", "params",
               "tensors", "gradient_bytes", "forward_flops_per_sample", "flops_per_sample",
               "activation_bytes_per_sample", *OPERATOR_COLUMNS}


# A task's input-size column; a recommendation model (NCF: user-item pairs) has none.
INPUT_SIZE = {"image": "image_size", "text": "seq_len"}
TASKS = (*INPUT_SIZE, "recommendation")
# What a card must say for the advisor to plan with it; the rest may be empty.
REQUIRED = ["model", "task", "batch_per_gpu", "params", "gradient_bytes", "flops_per_sample",
            "activation_bytes_per_sample"]
SIZE_SEPARATOR = "@"
# The card of a model traced with each batch normalisation's ReLU and residual add run in its
# kernel (profiler/operators.py, `FUSED_SHARE`), as NVIDIA's MXNet and PaddlePaddle
# ResNet-50s run them in 16 bits.
FUSED_NORMALISATION_SUFFIX = "+fused_norm"
# The card of a BERT traced with its masked-LM head over that many gathered positions a
# sequence, as pre-training code that gathers the masked positions runs it
# (profiler.zoo.gathered_head_loss): `bert_large+head20`, `bert_large@512+head80`.
HEAD_POSITIONS_SUFFIX = "+head"
_VARIANT_SUFFIXES = re.compile(rf"(\{FUSED_NORMALISATION_SUFFIX}|\{HEAD_POSITIONS_SUFFIX}\d+)+$")
# At 32 px a ResNet is CIFAR's (profiler/zoo_convnets.py, CifarResNet): an ImageNet stem would
# leave its first block an 8x8 map, so CIFAR code replaces it, and the work differs 13x. A
# model whose zoo has such a variant (`resnet18_cifar`) is matched to it at that size.
CIFAR_IMAGE_SIZE = 32
CIFAR_SUFFIX = "_cifar"
# A point release a source adds to a model's name ("ResNet-50 v1.5", "SSD300 v1.1"): the
# same network, revised in its training details. A whole version ("MobileNetV2") is another.
_POINT_RELEASE = re.compile(r"[\s\-_]*v\d+\.\d+$", re.IGNORECASE)
# A Hugging Face checkpoint's tokenizer casing ("bert-base-uncased"): the same network.
_CASING = re.compile(r"[\s\-_]*(un)?cased$", re.IGNORECASE)
# Meta's names of the Llama 3 generation the zoo's Llama shapes are of
# ("meta-llama/Meta-Llama-3.1-8B", "Llama 3 70B", "llama3.2-1b"): publisher and generation
# dropped, llama_8b. Llama 2 is another network (another vocabulary, MLP width and attention)
# and keeps its '2'.
_LLAMA_3 = re.compile(r"^(meta-llama/)?(meta[\s\-_]*)?llama[\s\-_]*3(\.\d)?(?=[\s\-_])",
                      re.IGNORECASE)


class CardError(GpuAdvisorError, ValueError):
    """A card that cannot be used or computed as asked; the one-line message names the
    problem and the fix (and the parameters at fault, where it is about some)."""

    exit_code = 2


def check_input_size(task: str, what: str, image_size: int | None,
                     seq_len: int | None) -> None:
    """`image_size` goes with image models, `seq_len` with text models, neither with a
    recommendation model; CardError naming the parameter to use or leave out otherwise
    (`what`: the model or file the card is of)."""
    if task not in INPUT_SIZE and (image_size or seq_len):
        given = "image_size" if image_size else "seq_len"
        raise CardError(f"{what} is a {task} model and takes no input size: leave out {given}",
                        given)
    if image_size and task != "image":
        raise CardError(f"{what} is a text model: use seq_len, not image_size", "seq_len",
                        "image_size")
    if seq_len and task != "text":
        raise CardError(f"{what} is an image model: use image_size, not seq_len", "image_size",
                        "seq_len")


def card_name(model: str, size: int | None = None, fused_normalisation: bool = False,
              head_positions: int | None = None) -> str:
    """The name of `model`'s card at input size `size` (tokens or pixels a side), traced with
    its normalisations' activations fused where `fused_normalisation` and its masked-LM head
    over `head_positions` gathered positions a sequence where given."""
    sized = f"{base_model(model)}{SIZE_SEPARATOR}{size}" if size else base_model(model)
    return variant_name(sized, fused_normalisation, head_positions)


def variant_name(card: str, fused_normalisation: bool = False,
                 head_positions: int | None = None) -> str:
    """The name of card `card` (a model's, at its size) traced as `card_name` says."""
    return (card + (FUSED_NORMALISATION_SUFFIX if fused_normalisation else "")
            + (f"{HEAD_POSITIONS_SUFFIX}{head_positions}" if head_positions else ""))


def size_variant(model: str, size: int) -> str | None:
    """The card of the other network `model` is at input size `size`, if any: at 32 px a
    ResNet's CIFAR variant (CIFAR_SUFFIX)."""
    return base_model(model) + CIFAR_SUFFIX if size == CIFAR_IMAGE_SIZE else None


def sized_card_names(model: str, size: int) -> tuple[str, ...]:
    """The names a card of `model` at input size `size` may have, the first preferred:
    `model@size`, then its `size_variant`."""
    variant = size_variant(model, size)
    return (card_name(model, size),) + ((variant,) if variant else ())


def matching_card(cards, model: str) -> str | None:
    """The name in `cards` that `model` stands for, tolerant of case, spaces, '-', '_', '.'
    and '/' as the zoo is (ResNet-50 is resnet50, BERT Large bert_large, ViT-B/16 vit_b16),
    of a point release the zoo's name does not carry (ResNet-50 v1.5 is resnet50), a checkpoint's
    tokenizer casing (bert-large-uncased is bert_large), Meta's name of a Llama 3 model (Llama
    3.1 8B is llama_8b) or a version's missing 'v' (inception4 is inception_v4); None where none
    does."""
    if model in cards:
        return model
    names = {_plain(name): name for name in cards}
    unreleased = _plain(_POINT_RELEASE.sub("", _CASING.sub("", _LLAMA_3.sub(
        "llama", model.strip()))))
    # tf_cnn_benchmarks' --model names drop the version's 'v': inception3 is inception_v3
    versioned = re.sub(r"(?<=[a-z])(\d+)$", r"v\1", unreleased)
    return names.get(_plain(model)) or names.get(unreleased) or names.get(versioned)


def _plain(name: str) -> str:
    """A model name without case, spaces, '-', '_', '.' or '/' (ViT-B/16 is vitb16)."""
    return re.sub(r"[\s\-_./]", "", name.strip().lower())


# How a user makes the card of a model the zoo lacks (what a message about one names).
MAKE_A_CARD = "`profiler card --config CONFIG --save` or `--callable`"


def similar_cards(cards, model: str, most: int = 3) -> list[str]:
    """Up to `most` models of `cards` (sized and fused variants aside) whose names resemble
    `model`, nearest first: what to suggest for a name `matching_card` does not resolve
    (GNMT: gnmt_v2; TransformerXL: transformer_xl_base, transformer_xl_large)."""
    plain = {_plain(name): name for name in cards if base_model(name) == name}
    return [plain[name] for name in
            difflib.get_close_matches(_plain(model), list(plain), n=most, cutoff=0.6)]


def fused_normalisation_card(name: str) -> bool:
    """Whether card `name` was traced with its normalisations' activations fused
    (`card_name`)."""
    return FUSED_NORMALISATION_SUFFIX in name


def head_positions_of(name: str) -> int | None:
    """The gathered positions a sequence card `name`'s masked-LM head was traced on
    (`card_name`), None for a head over every position."""
    found = re.search(rf"\{HEAD_POSITIONS_SUFFIX}(\d+)$", name)
    return int(found.group(1)) if found else None


def base_model(name: str) -> str:
    """The model a card describes, without its input size, fusion or gathered head
    (bert_large@384 -> bert_large, resnet50+fused_norm -> resnet50, bert_large@512+head80 ->
    bert_large)."""
    return _VARIANT_SUFFIXES.sub("", name).split(SIZE_SEPARATOR, 1)[0]


def write_cards(cards: list[dict], path: Path) -> None:
    """Write `cards` to `path` atomically: a crash never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        for card in cards:
            writer.writerow({c: "" if card.get(c) is None else card[c] for c in COLUMNS})
    os.replace(partial, path)


def save_own_card(card: dict) -> Path:
    """Add `card` to the user's own model_cards.csv (replacing one of the same name), where
    `load_cards` and so `advisor recommend --model NAME` find it."""
    check_card(card, "the card")
    path = data.user_dir() / FILE
    mine = _read(path) if path.is_file() else {}
    mine[card["model"]] = card
    write_cards(list(mine.values()), path)
    return path


def read_card_file(path: Path) -> dict[str, Any]:
    """One card from a JSON file, checked; CardError with a one-line message otherwise."""
    fix = "make one with `profiler card ... --out FILE`"
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CardError(f"card file {unreadable(path, exc)}; {fix}") from None
    try:
        card = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CardError(f"card file {path} is not JSON ({exc.msg} at line {exc.lineno}); "
                        f"{fix}") from None
    if not isinstance(card, dict):
        raise CardError(f"card file {path} holds a JSON {type(card).__name__}, not one card "
                        f"object; {fix}")
    return check_card(card, f"card file {path}")


def check_card(card: dict[str, Any], where: str) -> dict[str, Any]:
    """`card` with numbers as numbers, or CardError naming the first problem in `where`."""
    missing = [c for c in REQUIRED if card.get(c) in (None, "")]
    if missing:
        raise CardError(f"{where} lacks {', '.join(missing)}; a card needs "
                        f"{', '.join(REQUIRED)} (`profiler card` writes them all)")
    if card["task"] not in TASKS:
        raise CardError(f"{where}: task {card['task']!r} is not one of {', '.join(TASKS)}")
    out = dict(card)
    for column in INT_COLUMNS & set(card):
        value = card[column]
        if value in (None, ""):
            out[column] = None
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise CardError(f"{where}: {column} must be a number, got {value!r}") from None
        if not math.isfinite(number) or number < 0 or (number == 0 and column in REQUIRED):
            raise CardError(f"{where}: {column} must be a positive number, got {value!r}")
        out[column] = int(number)
    return out


def load_cards(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """Model name -> card, numbers as int, empty cells as None (csv module only, no torch).
    Without a path: the shipped cards with the user's own over them."""
    if path is not None:
        return _read(path)
    cards = _read(data.shipped(FILE))
    mine = data.user_dir() / FILE
    if mine.is_file():
        cards.update(_read(mine))
    return cards


def _read(path: Path) -> dict[str, dict[str, Any]]:
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    missing = set(COLUMNS) - set(OPERATOR_COLUMNS) - set(rows[0] if rows else ())
    if missing:
        raise ValueError(f"{path} lacks columns {sorted(missing)}")
    return {row["model"]: {k: _cell(k, row.get(k, "")) for k in {*COLUMNS, *row}}
            for row in rows}


def _cell(column: str, value: str) -> Any:
    if value == "":
        return None
    return int(value) if column in INT_COLUMNS else value
