import math

import pytest

torch = pytest.importorskip("torch")

from profiler import zoo  # noqa: E402
from profiler.zoo_transformer_xl import (  # noqa: E402
    WT103_CUTOFFS,
    WT103_VOCAB,
    TransformerXL,
    _shift,
    harmonic,
    zipf_shares,
    zipf_token_ids,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TINY = {"n_layer": 2, "d_model": 16, "n_head": 2, "d_head": 8, "d_inner": 32, "tgt_len": 6,
        "mem_len": 6, "dropout": 0.0, "dropatt": 0.0, "vocab_size": 40, "cutoffs": (10, 20, 30)}


def count(model):
    return sum(p.numel() for p in model.parameters())


def test_base_has_deeplearningexamples_shape_and_one_tied_word_table():
    with torch.device("meta"):
        model = zoo.build_model("transformer_xl_base")
    d, inner, layers = 512, 2048, 16
    per_layer = 5 * d * d + 2 * d * inner + inner + d + 4 * d  # qkv, r, out; FF; 2 norms
    words = WT103_VOCAB * d
    assert count(model) == words + layers * per_layer + 2 * 8 * 64 + 3 * d + 3 + WT103_VOCAB
    vocab_sized = [p for p in model.parameters() if p.dim() == 2 and p.shape[0] == WT103_VOCAB]
    assert len(vocab_sized) == 1  # the adaptive softmax reads the embedding's table


def test_large_has_narrower_rare_word_tables():
    with torch.device("meta"):
        model = zoo.build_model("transformer_xl_large")
    widths = [table.weight.shape[1] for table in model.embedding.tables]
    assert widths == [1024, 256, 64, 16]  # div_val 4
    assert [t.weight.shape[0] for t in model.embedding.tables] == [19_997, 20_000, 160_000,
                                                                   67_738]


def test_harmonic_numbers_and_zipf_shares():
    assert harmonic(1000) == pytest.approx(sum(1 / k for k in range(1, 1001)), rel=1e-12)
    shares = zipf_shares(WT103_VOCAB, WT103_CUTOFFS)
    assert sum(shares) == pytest.approx(1.0)
    assert shares[0] == pytest.approx(0.80, abs=0.01)  # the 19,997 most frequent words


def test_zipf_token_ids_follow_the_shares():
    ids = zipf_token_ids((200_000,), WT103_VOCAB, torch.Generator().manual_seed(0))
    assert 0 <= ids.min() and ids.max() < WT103_VOCAB
    bounds = [0, *WT103_CUTOFFS, WT103_VOCAB]
    observed = [((ids >= lo) & (ids < hi)).float().mean().item()
                for lo, hi in zip(bounds, bounds[1:])]
    assert observed == pytest.approx(zipf_shares(WT103_VOCAB, WT103_CUTOFFS), abs=0.01)


def test_relative_shift_aligns_distances_with_key_positions():
    queries, memory = 3, 2
    keys = queries + memory
    # raw[i, k]: query i against distance keys-1-k (positions run from the farthest)
    raw = torch.arange(queries * keys, dtype=torch.float).view(1, 1, queries, keys)
    shifted = _shift(raw)
    for i in range(queries):
        for j in range(i + memory + 1):  # the keys query i may see
            distance = (i + memory) - j
            assert shifted[0, 0, i, j] == raw[0, 0, i, keys - 1 - distance]


@pytest.mark.parametrize("div_val", [1, 2])
def test_adaptive_softmax_is_a_distribution_over_the_whole_vocabulary(div_val):
    torch.manual_seed(0)
    model = TransformerXL(**TINY, div_val=div_val).eval()
    hidden = torch.randn(1, 16)
    with torch.no_grad():
        losses = [model.softmax(hidden, torch.tensor([word])) for word in range(40)]
    assert sum(math.exp(-loss.item()) for loss in losses) == pytest.approx(1.0, rel=1e-5)


def test_a_training_step_runs_on_cpu_and_reaches_every_table():
    torch.manual_seed(0)
    model = TransformerXL(**TINY, div_val=2)
    ids = zipf_token_ids((2, 7), 40)
    loss = model(ids[:, :-1], ids[:, 1:]).loss
    loss.backward()
    assert torch.isfinite(loss)
    assert all(table.weight.grad is not None for table in model.embedding.tables)


def test_zoo_batches_predict_the_next_word_and_cards_take_other_lengths():
    batch = zoo.synthetic_batch("transformer_xl_base", 2, "cpu", seq_len=8,
                                generator=torch.Generator().manual_seed(1))
    assert batch["input_ids"].shape == batch["labels"].shape == (2, 8)
    assert torch.equal(batch["input_ids"][:, 1:], batch["labels"][:, :-1])
    with torch.device("meta"):
        model = zoo.build_model("transformer_xl_base", seq_len=64)
    assert model.tgt_len == 64 and model.mem_len == 192
    # profiler/zoo.py cannot import this module (listing the zoo imports no torch)
    assert zoo.ZOO["transformer_xl_base"].config["vocab_size"] == WT103_VOCAB
