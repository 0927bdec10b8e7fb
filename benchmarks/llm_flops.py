"""FLOPs per token of the zoo's decoder LLMs, as the shipped cards count them (traced on the
meta device), against the closed forms people quote:

- 6N: Kaplan et al. 2020's training FLOPs per token, attention left out;
- PaLM (Chowdhery et al. 2022, appendix B): 6N + 12 L H Q T, attention's QK^T and PV at
  sequence length T, backward twice the forward;
- Megatron (Narayanan et al. 2021, without recomputation): 72 L h^2 (1 + T / 6h + V / 12Lh)
  per token for a GPT with a 4h MLP and full multi-head attention; shown for reference, since
  Llama's SwiGLU MLP and grouped-query attention have other shapes.

The card counts what a GPU executes: every matmul (the untied input embedding is a lookup and
the norms' scales multiply nothing), attention as PyTorch's memory-efficient kernel runs it
(backward recomputes QK^T: 2.5x the forward, not 2x). Reads the shipped cards only; no torch.

    .venv/bin/python benchmarks/llm_flops.py
"""

from __future__ import annotations

from gpuadvisor.cards import load_cards

VOCAB = 128256
# hidden, layers, query heads, head dim, tied embeddings: the published configs
SHAPES = {"llama_1b": (2048, 16, 32, 64, True), "llama_8b": (4096, 32, 32, 128, False),
          "llama_70b": (8192, 80, 64, 128, False)}


def main() -> None:
    cards = load_cards()
    print(f"{'model':<10} {'seq':>5} {'params':>14} {'card GF/tok':>12} {'6N':>8} "
          f"{'PaLM':>8} {'card/PaLM':>9} {'Megatron':>9}")
    for name, (hidden, layers, heads, head_dim, _) in SHAPES.items():
        card = cards[name]
        n, t = card["params"], card["seq_len"]
        traced = card["flops_per_sample"] / t
        palm = 6 * n + 12 * layers * heads * head_dim * t
        megatron = 72 * layers * hidden**2 * (1 + t / (6 * hidden) + VOCAB / (12 * layers * hidden))
        print(f"{name:<10} {t:>5} {n:>14,} {traced / 1e9:>12.2f} {6 * n / 1e9:>8.2f} "
              f"{palm / 1e9:>8.2f} {traced / palm:>9.3f} {megatron / 1e9:>9.2f}")


if __name__ == "__main__":
    main()
