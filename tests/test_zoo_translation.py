import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from profiler import zoo  # noqa: E402
from profiler.operators import operator_counter  # noqa: E402
from profiler.zoo_translation import (  # noqa: E402
    BOS,
    EOS,
    GNMT,
    LSTM,
    MEAN_SRC_LEN,
    MEAN_TGT_LEN,
    PADDED_SRC_LEN,
    PADDED_TGT_LEN,
    TOKS_PER_PAIR,
    WMT16_TRAIN_PAIRS,
    WMT16_VOCAB,
    tokens_per_pair,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TINY = {"vocab_size": 50, "hidden_size": 8, "src_len": 5, "tgt_len": 6, "dropout": 0.0}


def count(model):
    return sum(p.numel() for p in model.parameters())


def lstm_params(inputs, hidden):
    return 4 * hidden * (inputs + hidden) + 2 * 4 * hidden  # two weights, two biases


def gnmt_params(vocab, h=1024, layers=4):
    encoder = 2 * lstm_params(h, h) + lstm_params(2 * h, h) + (layers - 2) * lstm_params(h, h)
    decoder = lstm_params(h, h) + (layers - 1) * lstm_params(2 * h, h)
    attention = 2 * h * h + h + 1 + h  # W_q, W_k, v, its scale, its bias
    return vocab * h + encoder + decoder + attention + h * vocab + vocab  # shared embedding


def matmul_flops(batch, src_len, tgt_len, h=1024, vocab=WMT16_VOCAB, layers=4):
    """Forward FLOPs of GNMT's matrix products (2 a multiply-add) for `batch` pairs: the
    decoder runs tgt_len - 1 steps. The attention scores' product with v is a matrix-vector
    product, which torch's FLOP counter does not count (0.02% of the work)."""
    s, t = src_len, tgt_len - 1

    def lstm(steps, inputs):  # input GEMM over all steps + recurrent GEMM every step
        return 2 * steps * 4 * h * (inputs + h)

    encoder = 2 * lstm(s, h) + lstm(s, 2 * h) + (layers - 2) * lstm(s, h)
    decoder = lstm(t, h) + (layers - 1) * lstm(t, 2 * h)
    attention = 2 * (s + t) * h * h + 2 * t * s * h  # W_q, W_k, scores x keys (bmm)
    return batch * (encoder + decoder + attention + 2 * t * h * vocab)


def test_published_shape_has_the_parameter_count_dle_logs():
    with torch.device("meta"):
        model = GNMT()
    # "Number of parameters: 160671297" in DLE's / NVIDIA's MLPerf GNMT training logs
    assert count(model) == gnmt_params(WMT16_VOCAB) == 160_671_297
    assert len(list(model.parameters())) == 44  # nn.LSTM's 4 tensors a direction, as DLE's
    with torch.device("meta"):
        assert count(GNMT(vocab_size=32_317)) == 160_671_297 - 3 * (2 * 1024 + 1)  # --math fp32


def test_the_tracer_counts_every_recurrent_matmul_at_the_published_size():
    with torch.device("meta"):  # no dropout: on meta it first imports torch._dynamo (1.5 s)
        model = GNMT(dropout=0.0)
    batch = {k: v.to("meta") for k, v in GNMT.sentence_pairs(2, 4, 5).items()}
    counter = operator_counter()
    with counter:
        loss = model(**batch).loss
        forward = counter.formula_flops
        loss.backward()
    assert forward == matmul_flops(2, 4, 5)
    # backward: two products a forward one (input and weight gradients) but those with
    # the zero initial states, whose gradients nothing needs
    recurrent_h0 = 2 * 2 * 4 * 1024 * 1024 * (2 + 1 + 2 + 1 + 3)  # 9 layer-directions
    assert counter.formula_flops - forward == 2 * forward - 2 * recurrent_h0


def test_flops_grow_with_both_sentence_lengths():
    with torch.device("meta"):
        model = GNMT(hidden_size=64, vocab_size=1000, dropout=0.0)
    for src_len, tgt_len in [(3, 4), (6, 4), (3, 8)]:
        batch = {k: v.to("meta") for k, v in
                 GNMT.sentence_pairs(1, src_len, tgt_len, 1000).items()}
        counter = operator_counter()
        with counter:
            model(**batch)
        assert counter.formula_flops == matmul_flops(1, src_len, tgt_len, 64, 1000)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_layer_is_nn_lstm_with_its_gates_reordered(bidirectional):
    torch.manual_seed(0)
    h, inputs = 3, 4
    ours = LSTM(inputs, h, bidirectional).double()
    theirs = nn.LSTM(inputs, h, bidirectional=bidirectional).double()
    # nn.LSTM's gates are (input, forget, cell, output); ours (input, forget, output, cell)
    order = torch.cat([torch.arange(2 * h), torch.arange(3 * h, 4 * h),
                       torch.arange(2 * h, 3 * h)])
    with torch.no_grad():
        for name, weight in ours.named_parameters():
            weight.copy_(getattr(theirs, name)[order])
    x = torch.randn(5, 2, inputs, dtype=torch.double, requires_grad=True)
    mine, (reference, _) = ours(x), theirs(x)
    assert isinstance(ours, nn.LSTM)  # on a GPU it runs as nn.LSTM: cuDNN's fused kernels
    assert torch.allclose(mine, reference, atol=1e-12)
    grad = torch.randn_like(mine)
    got = torch.autograd.grad(mine, [x, *ours.parameters()], grad)
    want = torch.autograd.grad(reference, [x, *theirs.parameters()], grad)
    assert torch.allclose(got[0], want[0], atol=1e-12)
    for a, b in zip(got[1:], want[1:]):
        assert torch.allclose(a, b[order], atol=1e-12)


def test_lstm_layer_on_a_gpu_is_nn_lstm_itself(monkeypatch):
    """The GPU path (cuDNN) is nn.LSTM's own forward on the layer's parameters: the same
    function as the written-out path, up to the gates' order."""
    import profiler.zoo_translation as translation

    torch.manual_seed(0)
    layer = LSTM(4, 3, bidirectional=True).double()
    x = torch.randn(5, 2, 4, dtype=torch.double)
    written_out = layer(x)
    monkeypatch.setattr(translation, "fused", lambda x: True)
    fused_output = layer(x)
    assert fused_output.shape == written_out.shape == (5, 2, 6)
    assert torch.equal(fused_output, nn.LSTM.forward(layer, x)[0])
    assert not torch.allclose(fused_output, written_out)  # cuDNN's gate order


def test_loss_is_dle_label_smoothing_summed_per_sentence():
    torch.manual_seed(0)
    model = GNMT(**TINY)
    logits, target = torch.randn(4, 3, 50), torch.randint(4, 50, (4, 3))
    expected = F.cross_entropy(logits.reshape(-1, 50), target.reshape(-1),
                               label_smoothing=0.1, reduction="sum") / 3
    assert torch.allclose(model.loss(logits, target), expected)
    target[0, 0] = 0  # PAD is not part of the loss
    expected = F.cross_entropy(logits.reshape(-1, 50), target.reshape(-1), ignore_index=0,
                               label_smoothing=0.1, reduction="sum") / 3
    assert torch.allclose(model.loss(logits, target), expected)


def test_a_training_step_runs_on_cpu_and_reaches_every_parameter():
    torch.manual_seed(0)
    model = GNMT(**{**TINY, "dropout": 0.2})
    batch = GNMT.sentence_pairs(2, 5, 6, 50, generator=torch.Generator().manual_seed(1))
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss = model(**batch).loss
    loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    optimizer.step()
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert model(**batch).loss.item() < loss.item()  # the same batch, one Adam step later


def test_synthetic_pairs_are_whole_sentences_and_count_as_dle_counts():
    batch = GNMT.sentence_pairs(3, 7, 9, generator=torch.Generator().manual_seed(0))
    source, target = batch["input_ids"], batch["labels"]
    assert source.shape == (3, 7) and target.shape == (3, 9)
    assert source.dtype == target.dtype == torch.long and source.device.type == "cpu"
    for ids in (source, target):
        assert (ids[:, 0] == BOS).all() and (ids[:, -1] == EOS).all()
        assert ids[:, 1:-1].min() > EOS and ids.max() < WMT16_VOCAB
    assert tokens_per_pair(7, 9) == 15  # source tokens + target tokens but BOS
    with pytest.raises(ValueError, match="labels"):
        GNMT(**TINY)(source[:, :5] % 50)


def test_the_zoo_entry_holds_the_figures_this_module_derives():
    # profiler/zoo.py cannot import this module (listing the zoo imports no torch), so its
    # gnmt_v2 entry repeats them: one sentence pair a sample, 49 tokens of DLE's tok/s a pair
    # (below the ~51 a mean pair holds, as DLE averages per-iteration rates), traced padded
    entry = zoo.ZOO["gnmt_v2"]
    assert entry.samples_per_epoch == WMT16_TRAIN_PAIRS
    assert entry.seq_len == TOKS_PER_PAIR < tokens_per_pair(MEAN_SRC_LEN, MEAN_TGT_LEN) == 51
    assert entry.config["vocab_size"] == WMT16_VOCAB
    assert (entry.config["src_len"], entry.config["tgt_len"]) == (PADDED_SRC_LEN,
                                                                  PADDED_TGT_LEN)


def test_on_the_meta_device_each_step_runs_one_fused_gate_kernel_each_way():
    """A card counts the LSTM as cuDNN runs it: one input GEMM, a recurrent GEMM a step (and a
    step less backward, then one GEMM each for the weights' and the input's gradients), and
    each step's gates as one fused kernel forward and one backward, not a dozen operators."""
    from torch.utils._python_dispatch import TorchDispatchMode

    names = []

    class Names(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            names.append(func._overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    with torch.device("meta"):
        layer = LSTM(4, 3)
    x = torch.empty(5, 2, 4, device="meta", requires_grad=True)
    with Names():
        layer(x).sum().backward()
    assert names.count("_thnn_fused_lstm_cell") == 5
    assert names.count("_thnn_fused_lstm_cell_backward_impl") == 5
    assert not {"sigmoid", "tanh", "addcmul"} & set(names)
    assert names.count("mm") == 1 + 5 + 4 + 3
