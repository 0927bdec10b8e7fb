"""Regenerate datasets/model_cards.csv from the model zoo (torch on the meta device, ~1 s a
model). Run after changing a zoo entry: .venv/bin/python scripts/build_cards.py"""

from __future__ import annotations

import sys

from rich.progress import track

from gpuadvisor.cards import CARDS_CSV, write_cards
from profiler import zoo
from profiler.cards import compute_card


def main() -> None:
    computed = [compute_card(name) for name in track(zoo.names(), "model cards")]
    write_cards(computed)
    print(f"wrote {len(computed)} cards to {CARDS_CSV}", file=sys.stderr)


if __name__ == "__main__":
    main()
