"""What whole tiles add to each zoo card's work: per tiled class (matrix products, dense
convolutions, fused attention), the FLOPs its kernels execute over those it counts
(`<class>_tiled_flops_per_sample` over `<class>_flops_per_sample`, profiler/operators.py,
GEMM_TILE), and the whole step's executed FLOPs over its counted ones. Reads the shipped
cards only; no torch.

    .venv/bin/python benchmarks/tile_padding.py
"""

from __future__ import annotations

from gpuadvisor.cards import TILED_CLASSES, load_cards, tiled_column


def ratio(executed: float, counted: float) -> str:
    return f"{executed / counted:.3f}" if counted else "-"


def main() -> None:
    cards = load_cards()
    print(f"{'card':<24}" + "".join(f"{kind:>11}" for kind in TILED_CLASSES) + f"{'step':>8}")
    for name, card in sorted(cards.items()):
        if card.get(tiled_column("matmul")) is None:  # a card without the operator split
            continue
        counted = {kind: card.get(f"{kind}_flops_per_sample") or 0 for kind in TILED_CLASSES}
        executed = {kind: card[tiled_column(kind)] or 0 for kind in TILED_CLASSES}
        added = sum(executed.values()) - sum(counted.values())
        step = card["flops_per_sample"]
        print(f"{name:<24}" + "".join(f"{ratio(executed[kind], counted[kind]):>11}"
                                      for kind in TILED_CLASSES)
              + f"{ratio(step + added, step):>8}")


if __name__ == "__main__":
    main()
