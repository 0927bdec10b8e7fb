import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from torch.nn import functional as F  # noqa: E402

from profiler import zoo  # noqa: E402
from profiler.zoo_transformer import (  # noqa: E402
    EOS,
    PAD,
    PADDED_SRC_LEN,
    PADDED_TGT_LEN,
    TOKS_PER_PAIR,
    WMT14_TRAIN_PAIRS,
    WMT14_VOCAB,
    TransformerBig,
    batch_pairs,
    parameter_count,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TINY = {"vocab_size": 40, "d_model": 16, "ffn_dim": 32, "layers": 2, "heads": 4,
        "src_len": 6, "tgt_len": 5}


def count(model):
    return sum(p.numel() for p in model.parameters())


def analytic_params(vocab=WMT14_VOCAB, d=1024, f=4096, layers=6):
    """Written out from DLE's fairseq/models/transformer.py and multihead_attention.py: one
    embedding shared by encoder, decoder and output; bias-free Q/K/V/output projections; FFN
    with biases; LayerNorms before each sublayer and one after each stack (pre-norm)."""
    attention, ffn, norm = 4 * d * d, 2 * d * f + f + d, 2 * d
    encoder = layers * (attention + ffn + 2 * norm) + norm
    decoder = layers * (2 * attention + ffn + 3 * norm) + norm
    return vocab * d + encoder + decoder


def test_published_shape_has_dle_s_parameter_count():
    with torch.device("meta"):
        model = zoo.build_model("transformer_big")
    # 210,808,832: also the "num. model params" of NVIDIA's MLPerf v0.5 log of this code
    assert count(model) == analytic_params() == parameter_count() == 210_808_832
    m2m = model.model
    shared = m2m.model.shared.weight
    assert m2m.lm_head.weight is shared and m2m.model.encoder.embed_tokens.weight is shared
    assert m2m.lm_head.bias is None and shared.shape == (33_712, 1024)
    attention = [m for n, m in m2m.named_modules() if n.endswith(("self_attn", "encoder_attn"))]
    assert len(attention) == 18 and all(
        p.bias is None for m in attention for p in (m.q_proj, m.k_proj, m.v_proj, m.out_proj))
    config = m2m.config
    assert (config.encoder_layers, config.decoder_layers, config.d_model,
            config.encoder_ffn_dim, config.encoder_attention_heads) == (6, 6, 1024, 4096, 16)
    assert (config.dropout, config.attention_dropout, config.activation_dropout) == (0.1,) * 3
    assert config.scale_embedding and config.encoder_layerdrop == config.decoder_layerdrop == 0
    assert config._attn_implementation == "sdpa"


def test_zoo_entry_is_dle_s_recipe_and_its_seq_len_a_rate():
    entry = zoo.resolve("Transformer-Big")
    assert entry.name in zoo.names() and entry.family == "transformer"
    assert (entry.task, entry.dataset, entry.samples_per_epoch, entry.epochs) == (
        "text", "wmt14-en-de", WMT14_TRAIN_PAIRS, 30)
    assert entry.seq_len == TOKS_PER_PAIR == 31 and entry.image_size is None
    assert entry.batch_per_gpu == batch_pairs(10240) == 290 and batch_pairs(5120) == 145
    assert (entry.config["src_len"], entry.config["tgt_len"]) == (PADDED_SRC_LEN, PADDED_TGT_LEN)
    with pytest.raises(zoo.FixedInputError, match="takes only its own input size"):
        zoo.build_model("transformer_big", seq_len=64)


def test_synthetic_pairs_end_in_eos_and_hold_no_special_symbol():
    batch = zoo.synthetic_batch("transformer_big", 3, "cpu", generator=torch.Generator())
    src, tgt = batch["input_ids"], batch["labels"]
    assert src.shape == (3, PADDED_SRC_LEN) and tgt.shape == (3, PADDED_TGT_LEN)
    assert (src[:, -1] == EOS).all() and (tgt[:, -1] == EOS).all()
    assert src[:, :-1].min() >= 4 and tgt.max() < WMT14_VOCAB


def test_tiny_model_trains_on_cpu_and_its_loss_is_dle_s_label_smoothing():
    torch.manual_seed(0)
    model = TransformerBig(**TINY)
    batch = TransformerBig.synthetic_batch(4, TINY, generator=torch.Generator().manual_seed(1))
    loss = model(**batch).loss
    loss.backward()
    assert torch.isfinite(loss) and loss.ndim == 0
    assert all(p.grad is not None for p in model.parameters())
    # DLE's criterion: (1 - s) NLL + (s / V) sum(-log p), summed over non-pad tokens
    logits = torch.randn(2, 3, 40)
    target = torch.tensor([[5, 6, EOS], [7, EOS, PAD]])
    lprobs = F.log_softmax(logits, dim=-1).reshape(-1, 40)
    keep = target.reshape(-1) != PAD
    nll = -lprobs.gather(1, target.reshape(-1, 1))[keep].sum()
    smooth = -lprobs.sum(dim=-1)[keep].sum()
    expected = (0.9 * nll + 0.1 / 40 * smooth) / keep.sum()
    assert model.loss(logits, target).item() == pytest.approx(expected.item(), rel=1e-5)
    # the decoder is causal: a target token changes no earlier position's prediction
    model.eval()
    with torch.no_grad():
        first = model.model.lm_head(model._layers(model.model.model.decoder, batch["labels"],
                                                  encoder_hidden_states=torch.zeros(4, 6, 16)))
        changed = batch["labels"].clone()
        changed[:, -1] = 7
        second = model.model.lm_head(model._layers(model.model.model.decoder, changed,
                                                   encoder_hidden_states=torch.zeros(4, 6, 16)))
    assert torch.allclose(first[:, :-1], second[:, :-1], atol=1e-5)
    assert not torch.allclose(first[:, -1], second[:, -1])


def analytic_forward_flops(s=PADDED_SRC_LEN, t=PADDED_TGT_LEN, d=1024, f=4096,
                           v=WMT14_VOCAB, layers=6):
    """Forward FLOPs of a pair (2 a multiply-add): parameters in matmuls x the tokens they
    run on, and attention (QK^T and AV: 4 FLOPs a query-key pair and channel)."""
    matmul = layers * (s * (4 * d * d + 2 * d * f)  # encoder
                       + t * (6 * d * d + 2 * d * f) + s * 2 * d * d)  # decoder; cross K, V
    matmul += t * d * v  # output projection (the shared embedding)
    attention = layers * 4 * d * (s * s + t * t + t * s)
    return 2 * matmul, attention


def test_card_flops_match_the_analytic_count():
    from profiler.cards import compute_card

    card = compute_card("transformer_big")
    matmul, attention = analytic_forward_flops()
    assert card["params"] == 210_808_832 and card["seq_len"] == 31
    # training: 6 x params-in-matmuls x tokens (backward twice the forward) + attention
    assert card["flops_per_sample"] == pytest.approx(3 * (matmul + attention), rel=0.10)
    assert card["matmul_flops_per_sample"] == pytest.approx(3 * matmul, rel=0.01)
    assert card["attention_flops_per_sample"] > 0  # through scaled_dot_product_attention
