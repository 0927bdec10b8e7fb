"""Transformer-big (Vaswani et al. 2017) as NVIDIA's DeepLearningExamples train it on WMT14
English-German (PyTorch/Translation/Transformer, fairseq-based; the 22.06 release whose
throughput datasets/published_throughput.csv holds), read from its source at
NVIDIA/DeepLearningExamples@d666f145:

- `--arch transformer_wmt_en_de_big_t2t` (fairseq/models/transformer.py): 6 encoder and 6
  decoder layers, d_model 1024, FFN 4096 (ReLU), 16 heads, sinusoidal positions, embeddings
  scaled by sqrt(1024); the tensor2tensor variant, so *pre-norm* (encoder_normalize_before and
  decoder_normalize_before True) with a final LayerNorm on the encoder's and the decoder's
  output; dropout 0.1 (the scripts' --dropout), attention dropout 0.1, ReLU dropout 0.1.
- `--share-all-embeddings`: one 33,712 x 1024 matrix embeds the source and the target and is
  the output projection (F.linear without a bias). 33,712 = the README's 33,708 BPE subwords
  + fairseq's 4 special symbols (dictionary.py; run_preprocessing.sh --nwordssrc 33712, a
  multiple of 8), the `dictionary: 33712 types` of NVIDIA's MLPerf v0.5 log of the same code.
- fairseq/modules/multihead_attention.py: MultiheadAttention(bias=False), so the Q, K, V and
  output projections have no biases; fc1 and fc2 have theirs.
- `--criterion label_smoothed_cross_entropy --label-smoothing 0.1` (fairseq/criterions.py) on
  log_softmax in fp32, summed over the non-pad target tokens; ddp_trainer.py divides the
  gradients by the batch's target tokens, so the zoo's loss is that sum over the tokens.
210,808,832 parameters, the `num. model params` of NVIDIA's MLPerf v0.5 log of this code
(mlcommons/training_results_v0.5 v0.5.0/nvidia/submission/results/dgx1_ngc18.11_pytorch/
transformer/result_0.txt@1a97a99).

transformers has this architecture: M2M100 is fairseq's transformer with normalize_before
(pre-norm, final encoder and decoder LayerNorms, no embedding LayerNorm), fairseq's
sinusoidal positions (padding_idx 1, offset 2), scaled and tied embeddings, ReLU FFN with
biases, and fairseq's token ids (pad 1, EOS 2, the decoder starting from EOS). FSMT and
Marian are fairseq's and Marian's *post-norm* transformers, MBart adds a LayerNorm on the
embeddings and learned positions. So the zoo builds M2M100ForConditionalGeneration from an
M2M100Config (random init, nothing downloaded), drops its attention projections' biases, which
DLE's attention has not, and wraps it as a torch-built family for its sentence-pair batches
and DLE's label-smoothed loss. Attention runs through scaled_dot_product_attention.

A training pair, as fairseq's collater makes it (fairseq/data/data_utils.py): the source and
the target are BPE subwords followed by EOS (no BOS); the decoder reads EOS + target[:-1] and
predicts the target, so a pair adds its target length, EOS counted, to DLE's tokens/s
(`ntokens`, the target tokens summed over the GPUs over the epoch's wall time). Every sentence
of a synthetic batch has the batch's full length, so there is no padding to mask.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import nn
from torch.nn import functional as F

PAD, EOS, SPECIAL = 1, 2, 4  # fairseq's Dictionary: <Lua heritage>, <pad>, </s>, <unk>
WMT14_VOCAB = 33_712  # 33,708 BPE subwords + 4 special symbols
D_MODEL, FFN, LAYERS, HEADS = 1024, 4096, 6, 16
DROPOUT = 0.1
SMOOTHING = 0.1
# DLE's WMT14 en-de (prepare-wmt14en2de.sh --scaling18: Europarl v7, Common Crawl, News
# Commentary v12, 1-256 words, joint BPE of 33,708 merges): 4,575,616 sentence pairs (NVIDIA's
# MLPerf v0.5 Transformer log, the same preprocessing: "| /data train 4575616 examples").
WMT14_TRAIN_PAIRS = 4_575_616
# Mean target length, EOS counted: 31.1 tokens (the same log's epoch means, 36,151 target
# tokens in 1,162 sentences an update on 8 GPUs at --max-tokens 5120). DLE's tok/s counts
# target tokens, so a pair adds about 31 to it: the zoo's seq_len, a rate.
TOKS_PER_PAIR = 31
# Mean source length, EOS counted: about 30 (an estimate: 31.1 x 0.966, the English/German
# ratio of BPE tokens in fairseq's WMT16 en-de 32k training set, 132,886,171 / 137,628,246
# tokens). fairseq sorts the pairs by source length, then target length, before cutting
# batches, so a batch's sentences share their lengths and pad little: the card traces a pair
# at 30 source and 31 target tokens.
PADDED_SRC_LEN, PADDED_TGT_LEN = 30, 31
# --max-tokens bounds a GPU's batch by its sentences x its longest side (make_batches.cpp,
# max(source, target) a pair, sentences a multiple of 8): in the MLPerf log 1,162 / 8 = 145.25
# pairs at 5,120, 35.25 budget tokens a pair; the zoo scales it to the other budgets.
BUDGET_TOKENS_PER_PAIR = 5120 * 8 / 1162


def batch_pairs(max_tokens: int) -> int:
    """Sentence pairs in one GPU's batch at DLE's --max-tokens (5120 -> 145, 10240 -> 290)."""
    return round(max_tokens / BUDGET_TOKENS_PER_PAIR)


def m2m100_config(vocab_size: int, d_model: int, ffn_dim: int, layers: int, heads: int,
                  dropout: float, attention_dropout: float, relu_dropout: float):
    """The M2M100Config of DLE's transformer_wmt_en_de_big_t2t at these sizes."""
    from transformers import M2M100Config

    return M2M100Config(
        vocab_size=vocab_size, d_model=d_model, encoder_layers=layers, decoder_layers=layers,
        encoder_attention_heads=heads, decoder_attention_heads=heads,
        encoder_ffn_dim=ffn_dim, decoder_ffn_dim=ffn_dim, activation_function="relu",
        dropout=dropout, attention_dropout=attention_dropout, activation_dropout=relu_dropout,
        encoder_layerdrop=0.0, decoder_layerdrop=0.0, scale_embedding=True,
        max_position_embeddings=1024, pad_token_id=PAD, eos_token_id=EOS, bos_token_id=0,
        decoder_start_token_id=EOS, tie_word_embeddings=True, use_cache=False,
        attn_implementation="sdpa")


class TransformerBig(nn.Module):
    """DLE's Transformer-big for WMT14 en-de. `src_len` and `tgt_len` (EOS included; by
    default the lengths DLE's sorted batches pad to) are recorded for whoever makes the model's
    batches (`synthetic_batch`); the forward pass takes sentences of any length."""

    FIXED_INPUT_SIZE = True  # its seq_len is a rate: its sentences are its dataset's

    def __init__(self, vocab_size: int = WMT14_VOCAB, d_model: int = D_MODEL,
                 ffn_dim: int = FFN, layers: int = LAYERS, heads: int = HEADS,
                 dropout: float = DROPOUT, attention_dropout: float = DROPOUT,
                 relu_dropout: float = DROPOUT, smoothing: float = SMOOTHING,
                 src_len: int = PADDED_SRC_LEN, tgt_len: int = PADDED_TGT_LEN):
        super().__init__()
        from transformers import M2M100ForConditionalGeneration

        self.vocab_size, self.src_len, self.tgt_len = vocab_size, src_len, tgt_len
        self.smoothing = smoothing
        self.model = M2M100ForConditionalGeneration(m2m100_config(
            vocab_size, d_model, ffn_dim, layers, heads, dropout, attention_dropout,
            relu_dropout))
        for name, module in self.model.named_modules():  # DLE's attention has no biases
            if name.endswith(("self_attn", "encoder_attn")):
                for projection in (module.q_proj, module.k_proj, module.v_proj, module.out_proj):
                    projection.bias = None

    def loss(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """DLE's label-smoothed cross-entropy, (1 - s) NLL + s mean(-log p) a token, summed over
        the non-pad target tokens and divided by their count (as its gradients are)."""
        log_probs = F.log_softmax(logits.reshape(-1, logits.shape[-1]), dim=-1,
                                  dtype=torch.float32)
        target = target.reshape(-1)
        nll = -log_probs.gather(1, target[:, None])[:, 0]
        per_token = (1 - self.smoothing) * nll - self.smoothing * log_probs.mean(dim=-1)
        counted = target != PAD
        return (per_token * counted).sum() / counted.sum()

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None):
        """`input_ids` (batch, src_len): source sentences; `labels` (batch, tgt_len): target
        sentences, EOS last. The decoder reads EOS + labels[:, :-1] and predicts labels."""
        if labels is None:
            raise ValueError("the Transformer trains on sentence pairs: pass the target as "
                             "`labels`")
        decoder_input_ids = torch.cat([torch.full_like(labels[:, :1], EOS), labels[:, :-1]], 1)
        encoder, decoder = self.model.model.encoder, self.model.model.decoder
        memory = encoder.layer_norm(self._layers(encoder, input_ids))
        x = decoder.layer_norm(self._layers(decoder, decoder_input_ids,
                                            encoder_hidden_states=memory))
        return SimpleNamespace(loss=self.loss(self.model.lm_head(x), labels), logits=None)

    def _layers(self, stack, ids: torch.Tensor, **kwargs) -> torch.Tensor:
        """An M2M100 encoder's or decoder's embeddings and layers, without the stack's mask
        builder: it reads a mask's values (an error on the meta device) to find that a batch
        without padding needs no mask, so it passes none, and SDPA runs the decoder's
        self-attention causal, as here."""
        x = stack.embed_tokens(ids)  # scaled by sqrt(d_model)
        x = F.dropout(x + stack.embed_positions(ids, x), stack.dropout, self.training)
        for layer in stack.layers:
            x = layer(x, attention_mask=None, **kwargs)
        return x

    @staticmethod
    def synthetic_batch(batch: int, config: dict, size: int | None = None,
                        generator: torch.Generator | None = None) -> dict:
        """The zoo's protocol for torch-built models: sentence pairs at the config's padded
        lengths (`size`, the tokens a pair adds to tok/s, is a rate, not a shape). Random
        subwords (no special symbols) then EOS, every sentence at the full length."""
        vocab = config.get("vocab_size", WMT14_VOCAB)

        def sentences(length: int) -> torch.Tensor:
            ids = torch.randint(SPECIAL, vocab, (batch, length), generator=generator)
            ids[:, -1] = EOS
            return ids

        return {"input_ids": sentences(config.get("src_len", PADDED_SRC_LEN)),
                "labels": sentences(config.get("tgt_len", PADDED_TGT_LEN))}


def parameter_count(vocab_size: int = WMT14_VOCAB, d_model: int = D_MODEL, ffn_dim: int = FFN,
                    layers: int = LAYERS) -> int:
    """DLE's parameter count: the shared embedding; per encoder layer a bias-free attention,
    the FFN with biases, 2 LayerNorms; per decoder layer two attentions, the FFN, 3 LayerNorms;
    the encoder's and the decoder's final LayerNorm."""
    attention, norm = 4 * d_model * d_model, 2 * d_model
    ffn = 2 * d_model * ffn_dim + ffn_dim + d_model
    encoder = layers * (attention + ffn + 2 * norm) + norm
    decoder = layers * (2 * attention + ffn + 3 * norm) + norm
    return vocab_size * d_model + encoder + decoder
