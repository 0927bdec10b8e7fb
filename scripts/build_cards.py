"""Regenerate datasets/model_cards.csv from the model zoo (torch on the meta device, ~2 s a
model with the operator split): every zoo model at its default input size, plus each zoo
model at every other input size datasets/published_throughput.csv has figures for
(bert_large@384: SQuAD fine-tuning; bert_large@288: binned phase-2 sequences at their mean
padded length), so that the fit prices a published row with the FLOPs it measured, and at the
sizes benchmarks commonly run it at (COMMON_SIZES), so that another source's rows are too,
and traced with each batch norm's ReLU and residual add fused (`model+fused_norm`) at the
sizes of the rows whose code fuses them (`fused_normalisation_sizes`), and with a BERT's
masked-LM head on the positions the rows whose code gathers them give (`model+head20`:
`gathered_head_sizes`). Run after changing a
zoo entry or adding published rows:
.venv/bin/python scripts/build_cards.py"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from rich.progress import Progress

from advisor.importers.published import fuses_normalisation, head_positions, workload_seq_len
from gpuadvisor.cards import FILE, size_variant, write_cards
from profiler import zoo
from profiler.cards import compute_cards

DATASETS = Path(__file__).resolve().parent.parent / "datasets"  # the repository's copies
SHIPPED = DATASETS / FILE


# (zoo model, image_size, seq_len) that benchmarks run beside the default: BERT-Base
# fine-tuned on SQuAD v1.1 at 384 tokens (Devlin et al. 2019, run_squad's max_seq_length),
# the benchmark of BERT-Base that training-throughput tables carry.
COMMON_SIZES = [("bert_base", None, 384)]


def published_sizes(path: Path = DATASETS / "published_throughput.csv") -> set[tuple]:
    """(zoo model, image_size, seq_len) of every published input size off a model's default
    that no zoo variant already is (a ResNet at 32 px is `resnet18_cifar`, not resnet18@32)."""
    return {size for size in map(_card_size, _zoo_rows(path)) if size and (size[1] or size[2])}


def fused_normalisation_sizes(path: Path = DATASETS / "published_throughput.csv") -> set[tuple]:
    """(zoo model, image_size, seq_len, batch_per_gpu, True): compute_card's arguments of the
    card, with its normalisations' activations fused, of each input size published rows of
    code that fuses them measured (`fuses_normalisation`: NVIDIA's MXNet and PaddlePaddle
    ResNet-50s in 16 bits)."""
    return {(*size, None, True) for size in
            (_card_size(row) for row in _zoo_rows(path) if fuses_normalisation(row)) if size}


def gathered_head_sizes(path: Path = DATASETS / "published_throughput.csv") -> set[tuple]:
    """(zoo model, image_size, seq_len, batch_per_gpu, False, positions): compute_card's
    arguments of the card, with its masked-LM head on `positions` gathered positions a
    sequence, of each input size published rows of code that gathers them measured (their
    `head_positions` column)."""
    return {(*size, None, False, positions) for row in _zoo_rows(path)
            if (positions := head_positions(row)) and (size := _card_size(row))}


def _zoo_rows(path: Path) -> list[dict[str, str]]:
    """The published rows of zoo models."""
    with open(path, newline="") as handle:
        return [row for row in csv.DictReader(handle) if row["model"] in zoo.ZOO]


def _card_size(row: dict[str, str]) -> tuple | None:
    """(zoo model, image_size, seq_len) of the card a published row measured, each size None
    at the model's default; None where a zoo variant of the model is that size, or the model
    takes only its own (GNMT's tokens a pair: a rate)."""
    entry = zoo.ZOO[row["model"]]
    image_size, seq_len = int(row["image_size"] or 0), workload_seq_len(row) or 0
    size = image_size or seq_len
    if size and size_variant(entry.name, size) in zoo.ZOO:
        return None
    try:
        zoo.check_fixed_input(entry, image_size or None, seq_len or None)
    except zoo.FixedInputError:
        return None
    return (entry.name, image_size if image_size not in (0, entry.image_size) else None,
            seq_len if seq_len not in (0, entry.seq_len) else None)


def main() -> None:
    wanted = [(name, None, None) for name in zoo.names()] + sorted(
        published_sizes() | set(COMMON_SIZES), key=lambda s: (s[0], s[1] or 0, s[2] or 0))
    wanted += sorted(fused_normalisation_sizes(), key=lambda s: (s[0], s[1] or 0))
    wanted += sorted(gathered_head_sizes(), key=lambda s: (s[0], s[2] or 0, s[5]))
    with Progress() as bar:
        task = bar.add_task("model cards", total=len(wanted))
        computed = compute_cards(wanted, progress=lambda _: bar.advance(task))
    write_cards(computed, SHIPPED)
    print(f"wrote {len(computed)} cards to {SHIPPED}", file=sys.stderr)


if __name__ == "__main__":
    main()
