"""Regenerate datasets/model_cards.csv from the model zoo (torch on the meta device, ~2 s a
model). Run after changing a zoo entry: .venv/bin/python scripts/build_cards.py"""

from __future__ import annotations

import sys
from pathlib import Path

from rich.progress import track

from gpuadvisor.cards import FILE, write_cards
from profiler import zoo
from profiler.cards import compute_card

SHIPPED = Path(__file__).resolve().parent.parent / "datasets" / FILE  # the repository's copy


def main() -> None:
    computed = [compute_card(name) for name in track(zoo.names(), "model cards")]
    write_cards(computed, SHIPPED)
    print(f"wrote {len(computed)} cards to {SHIPPED}", file=sys.stderr)


if __name__ == "__main__":
    main()
