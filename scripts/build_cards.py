"""Regenerate datasets/model_cards.csv from the model zoo (torch on the meta device, ~1 s a
model). Run after changing a zoo entry: .venv/bin/python scripts/build_cards.py"""

from __future__ import annotations

import sys

from rich.progress import track

from profiler import cards, zoo


def main() -> None:
    computed = [cards.compute_card(name) for name in track(zoo.names(), "model cards")]
    cards.write_cards(computed)
    print(f"wrote {len(computed)} cards to {cards.CARDS_CSV}", file=sys.stderr)


if __name__ == "__main__":
    main()
