"""The model cards file, `model_cards.csv`: its columns, reader and writer, with the csv
module only so that the advisor never imports torch. The cards are computed with torch by
`profiler/cards.py`. A user's own cards (`model_cards.csv` in the user data dir) add to the
shipped ones, and replace a shipped card of the same model."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from gpuadvisor import data

FILE = "model_cards.csv"

WORKLOAD_COLUMNS = ["model", "family", "task", "dataset", "samples_per_epoch", "epochs",
                    "image_size", "seq_len", "batch_per_gpu"]
MEASURED_COLUMNS = ["params", "tensors", "gradient_bytes", "forward_flops_per_sample",
                    "flops_per_sample", "activation_bytes_per_sample"]
# The operator split (profiler/operators.py): FLOPs and bytes per sample of each operator
# class, and the traffic of a step that does not grow with the batch. Optional: a card
# without them (a user's own, an older file) is priced from its totals.
OPERATOR_CLASSES = ("matmul", "conv", "grouped_conv", "attention", "norm", "other")
OPERATOR_COLUMNS = [f"{kind}_{what}_per_sample" for kind in OPERATOR_CLASSES
                    for what in ("flops", "bytes")] + ["step_bytes"]
VERSION_COLUMNS = ["torch_version", "as_of", "source"]  # how a card was made, not what it says
COLUMNS = WORKLOAD_COLUMNS + MEASURED_COLUMNS + OPERATOR_COLUMNS + VERSION_COLUMNS
INT_COLUMNS = {"samples_per_epoch", "epochs", "image_size", "seq_len", "batch_per_gpu", "params",
               "tensors", "gradient_bytes", "forward_flops_per_sample", "flops_per_sample",
               "activation_bytes_per_sample", *OPERATOR_COLUMNS}


def write_cards(cards: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        for card in cards:
            writer.writerow({c: "" if card.get(c) is None else card[c] for c in COLUMNS})


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
