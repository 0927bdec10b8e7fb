"""GNMT v2 (Wu et al. 2016, with the attention of tensorflow/nmt's `gnmt_v2`) as NVIDIA's
DeepLearningExamples train it on WMT16 English-German (PyTorch/Translation/GNMT, the 19.05
release whose throughput datasets/published_throughput.csv holds): a shared 1024-wide
embedding of a 32k BPE vocabulary; an encoder of 4 LSTM layers, the first bidirectional,
residual sums from the third; a decoder whose first LSTM layer feeds a normalized Bahdanau
attention over the encoder's outputs, whose context joins the input of the 3 LSTM layers
above it (residual sums from the third), and a classifier over the vocabulary; dropout 0.2
on every LSTM layer's input; label-smoothed (0.1) cross-entropy summed over a sentence's
tokens and averaged over sentences, as DLE's trainer does. 160,671,297 parameters at the
vocabulary of 32,320 (`--math fp16`, DLE's default, pads the 32,317 words to a multiple of
8), the figure DLE's and NVIDIA's MLPerf v0.5/v0.6 training logs print.

transformers has no GNMT, so the zoo builds it from torch.nn. On a GPU its LSTM layers are
nn.LSTM (cuDNN), as DLE's are; for a card they are written out as cuDNN runs them: one GEMM
projects every time step's input at once, then one GEMM per step multiplies the previous
hidden state, then the gates. nn.LSTM would not do there: on the CPU it runs
as one `mkldnn_rnn_layer` kernel that FlopCounterMode counts as 0 FLOPs, and on the meta
device it decomposes into per-step cells that repeat the input projection's GEMM (and reread
its weights) at every step. Gates run in the order (input, forget, output, cell) so that one
sigmoid covers three of them; the order of random weights is immaterial.

A training pair in the zoo: `input_ids` (batch, src_len) is the source sentence and `labels`
(batch, tgt_len) the target, each with BOS and EOS (DLE's tokenizer adds both to both sides,
its train-max-length of 50 counts them). As in DLE's trainer, the decoder reads the target
without its last token and predicts it without its first (teacher forcing), so a pair adds
src_len + tgt_len - 1 tokens to DLE's tok/s. Every sentence of a synthetic batch has the
batch's full length, so there is no padding to mask; DLE's encoder runs its first layer on
packed sequences (pack_padded_sequence, data-dependent) and every other layer on the batch's
padded length, which the default lengths stand for (PADDED_SRC_LEN below): tracing the first
layer at the padded length too overstates a step's FLOPs by about 3%.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch
from torch import nn
from torch.nn import functional as F

PAD, UNK, BOS, EOS = 0, 1, 2, 3  # DLE's seq2seq/data/config.py
# vocab.bpe.32000 (32,313 subwords) + 4 special tokens = 32,317, padded to a multiple of 8
# under DLE's default --math fp16 (32,317 under --math fp32: 6,147 parameters fewer).
WMT16_VOCAB = 32_320
HIDDEN = 1024
LAYERS = 4
DROPOUT = 0.2
SMOOTHING = 0.1
INIT = 0.1  # uniform(-0.1, 0.1) for LSTMs, embedding, attention and classifier weights
# WMT16 en-de as DLE prepares it (scripts/wmt16_en_de.sh; train.py --train-max-length 50):
# 4,068,191 sentence pairs, 3,498,161 of at most 50 tokens on both sides, BOS and EOS counted
# (NVIDIA's MLPerf v0.5 GNMT log, the same preprocessing; 3,975,116 at most 75, its v0.6 log).
WMT16_TRAIN_PAIRS = 3_498_161
# Mean lengths of those pairs with BOS and EOS: English 25.9, German 26.5 tokens, 51.4 counted
# a pair (a gamma law of lengths fitted to the two filter counts above, German 3% longer);
# the MLPerf v0.5 log's iterations (time x tok/s) give 50.4 +- 1.5.
MEAN_SRC_LEN, MEAN_TGT_LEN = 26, 26
# DLE's default batching ('bucketing': 5 buckets 10 tokens wide by a pair's longer side, each
# batch of 128 from one bucket) pads a batch to its longest source and longest target: 32
# tokens each on average (the same law, batches simulated). Every layer but the encoder's
# first (packed sequences) runs on the padded length: the lengths a card should trace.
PADDED_SRC_LEN, PADDED_TGT_LEN = 32, 32
# DLE's tok/s for one sentence a second: a pair holds about 51 counted tokens, but DLE averages
# each iteration's rate with equal weight (seq2seq/utils.py AverageMeter), and short batches
# run at lower rates, so its tok/s falls a few percent below tokens / time: in NVIDIA's MLPerf
# v0.5 GNMT log, epoch-mean rate x epoch-mean iteration time / 128 sentences = 48.7; the
# times to train in DLE's README (6 epochs) cap it at 50.0 to 50.9 (its six DGX-1 rows, were
# evaluation and start-up to take no time).
TOKS_PER_PAIR = 49


class _Recurrence(torch.autograd.Function):
    """One direction of an LSTM layer, forward and backward written out as cuDNN runs them
    (NVIDIA's "Optimizing Recurrent Neural Networks in cuDNN 5"): one GEMM projects all
    steps' inputs, then a recurrent GEMM and the gates per step; backward, a recurrent GEMM
    per step, then one GEMM each for the weights' gradients and the input's gradient over all
    steps. (Left
    to autograd, a per-step cell writes a full recurrent-weight gradient at every step and
    sums them: a weight's worth of traffic a step that cuDNN does not move.) Gates are
    stored in the order input, forget, output (sigmoid), cell (tanh)."""

    @staticmethod
    def forward(ctx, x, weight_ih, weight_hh, bias_ih, bias_hh, reverse):
        steps, batch, inputs = x.shape
        h = weight_hh.shape[1]
        projected = torch.addmm(bias_ih + bias_hh, x.reshape(steps * batch, inputs),
                                weight_ih.t()).view(steps, batch, 4 * h)
        activations, cells, outputs, state = _buffers(x, h)
        cell = state
        for step in _order(steps, reverse):
            gates = torch.addmm(projected[step], state, weight_hh.t())
            act = activations[step]
            torch.sigmoid(gates[:, :3 * h], out=act[:, :3 * h])
            torch.tanh(gates[:, 3 * h:], out=act[:, 3 * h:])
            cell = torch.addcmul(act[:, h:2 * h] * cell, act[:, :h], act[:, 3 * h:],
                                 out=cells[step])
            state = torch.mul(act[:, 2 * h:3 * h], cell.tanh(), out=outputs[step])
        return _keep(ctx, reverse, x, weight_ih, weight_hh, activations, cells, outputs)

    @staticmethod
    def backward(ctx, grad_outputs):
        x, weight_ih, weight_hh, activations, cells, outputs, grad_gates = _restore(ctx)
        steps, batch, _ = x.shape
        h = weight_hh.shape[1]
        grad_state = grad_cell = None
        order = list(_order(steps, ctx.reverse))
        for index in range(steps - 1, -1, -1):  # back through the steps as they ran
            step, first = order[index], index == 0  # the first step began from zeros
            act = activations[step]
            input_gate, forget_gate, output_gate, candidate = act.split(h, dim=1)
            tanh_cell = cells[step].tanh()
            grad_h = grad_outputs[step] if grad_state is None else \
                grad_outputs[step] + grad_state
            grad_c = grad_h * output_gate * (1 - tanh_cell * tanh_cell)
            if grad_cell is not None:
                grad_c = grad_c + grad_cell
            grad_forget = torch.zeros_like(grad_c) if first else grad_c * cells[order[index - 1]]
            sigmoids = act[:, :3 * h]
            grad = grad_gates[step]
            torch.mul(torch.cat([grad_c * candidate, grad_forget, grad_h * tanh_cell], dim=1),
                      sigmoids * (1 - sigmoids), out=grad[:, :3 * h])
            torch.mul(grad_c * input_gate, 1 - candidate * candidate, out=grad[:, 3 * h:])
            if not first:
                grad_cell = grad_c * forget_gate
                grad_state = torch.mm(grad, weight_hh)
        return _layer_gradients(ctx, x, weight_ih, grad_gates, outputs)


class _FusedRecurrence(torch.autograd.Function):
    """`_Recurrence` on the meta device, where a card is counted: the same GEMMs, and each
    step's gates in one fused element-wise kernel forward and one backward
    (aten::_thnn_fused_lstm_cell and its backward, what nn.LSTMCell runs on CUDA) writing into
    the layer's buffers, as cuDNN's per-step gate kernel does, where `_Recurrence` runs a
    dozen element-wise operators a step, each reading and writing its tensors. Gates in
    PyTorch's order (input, forget, cell, output); CPUs have no such kernel."""

    @staticmethod
    def forward(ctx, x, weight_ih, weight_hh, bias_ih, bias_hh, reverse):
        steps, batch, inputs = x.shape
        h = weight_hh.shape[1]
        projected = torch.mm(x.reshape(steps * batch, inputs), weight_ih.t()).view(
            steps, batch, 4 * h)  # the biases join in the gate kernel, as in cuDNN's
        workspace, cells, outputs, state = _buffers(x, h)
        cell = state
        for step in _order(steps, reverse):
            torch.ops.aten._thnn_fused_lstm_cell.out(
                projected[step], torch.mm(state, weight_hh.t()), cell, bias_ih, bias_hh,
                out0=outputs[step], out1=cells[step], out2=workspace[step])
            state, cell = outputs[step], cells[step]
        return _keep(ctx, reverse, x, weight_ih, weight_hh, workspace, cells, outputs)

    @staticmethod
    def backward(ctx, grad_outputs):
        x, weight_ih, weight_hh, workspace, cells, outputs, grad_gates = _restore(ctx)
        steps, batch, _ = x.shape
        h = weight_hh.shape[1]
        step_bias = x.new_empty(4 * h)  # the kernel's own bias sum, each step: not kept
        grad_cell, grad_state = x.new_zeros(batch, h), None
        order = list(_order(steps, ctx.reverse))
        for index in range(steps - 1, -1, -1):  # back through the steps as they ran
            step = order[index]
            grad_h = grad_outputs[step] if grad_state is None else \
                grad_outputs[step] + grad_state
            previous = cells[order[index - 1]] if index else x.new_zeros(batch, h)
            grad_previous = x.new_empty(batch, h)
            torch.ops.aten._thnn_fused_lstm_cell_backward_impl.out(
                grad_h, grad_cell, previous, cells[step], workspace[step], True,
                out0=grad_gates[step], out1=grad_previous, out2=step_bias)
            grad_cell = grad_previous
            if index:
                grad_state = torch.mm(grad_gates[step], weight_hh)
        return _layer_gradients(ctx, x, weight_ih, grad_gates, outputs)


def _buffers(x, h: int):
    """A recurrence's buffers over x's (steps, batch) for hidden size h: its gates (cuDNN's
    reserve space, 4h wide), cells and outputs, and the zero state its first step starts from."""
    steps, batch, _ = x.shape
    return (x.new_empty(steps, batch, 4 * h), x.new_empty(steps, batch, h),
            x.new_empty(steps, batch, h), x.new_zeros(batch, h))


def _keep(ctx, reverse: bool, x, weight_ih, weight_hh, gates, cells, outputs):
    """Save what a recurrence's backward reads; returns the layer's outputs."""
    ctx.reverse = reverse
    ctx.save_for_backward(x, weight_ih, weight_hh, gates, cells, outputs)
    return outputs


def _restore(ctx):
    """What `_keep` saved, and a buffer for the gradients of the gates' pre-activations."""
    x, weight_ih, weight_hh, gates, cells, outputs = ctx.saved_tensors
    steps, batch, _ = x.shape
    grad_gates = x.new_empty(steps, batch, 4 * weight_hh.shape[1])
    return x, weight_ih, weight_hh, gates, cells, outputs, grad_gates


def _layer_gradients(ctx, x, weight_ih, grad_gates, outputs):
    """The gradients a recurrence returns once its steps' gate gradients are known: one GEMM
    each for the recurrent and the input weights and the input over all steps, as cuDNN's
    weight-gradient pass does."""
    steps, batch, inputs = x.shape
    h = outputs.shape[-1]
    # each step's recurrent product met the state of the step before it (zeros: skipped)
    later, earlier = (grad_gates[:-1], outputs[1:]) if ctx.reverse else \
        (grad_gates[1:], outputs[:-1])
    grad_hh = torch.mm(later.reshape(-1, 4 * h).t(), earlier.reshape(-1, h))
    flat = grad_gates.view(steps * batch, 4 * h)
    grad_ih = torch.mm(flat.t(), x.reshape(steps * batch, inputs))
    grad_bias = flat.sum(0)
    grad_x = torch.mm(flat, weight_ih).view(steps, batch, inputs) \
        if ctx.needs_input_grad[0] else None
    return grad_x, grad_ih, grad_hh, grad_bias, grad_bias.clone(), None


def _order(steps: int, reverse: bool) -> range:
    return range(steps - 1, -1, -1) if reverse else range(steps)


class LSTM(nn.LSTM):
    """One LSTM layer (optionally bidirectional) over time-major input (steps, batch, inputs),
    state starting at zeros. On a GPU it is nn.LSTM, cuDNN's fused kernels, as DLE's code runs
    it (written out, a step's GEMM and gates would be a dozen kernel launches, which bound an
    eager step on a fast GPU); elsewhere it runs written out as cuDNN runs it, with the same
    parameters and the same work: on the meta device a card is counted on, with the fused
    gate kernels (`_FusedRecurrence`); on the CPU element-wise (`_Recurrence`), its gates in
    the order (input, forget, output, cell), which random weights make immaterial."""

    def __init__(self, inputs: int, hidden: int, bidirectional: bool = False):
        super().__init__(inputs, hidden, bidirectional=bidirectional)
        self.suffixes = ["_l0", "_l0_reverse"] if bidirectional else ["_l0"]
        for weight in self.parameters():
            nn.init.uniform_(weight, -INIT, INIT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if fused(x):
            return super().forward(x)[0]
        recurrence = _FusedRecurrence if x.is_meta else _Recurrence
        directions = [recurrence.apply(x, *(getattr(self, name + suffix) for name in
                                             ("weight_ih", "weight_hh", "bias_ih", "bias_hh")),
                                       suffix.endswith("reverse"))
                      for suffix in self.suffixes]
        return directions[0] if len(directions) == 1 else torch.cat(directions, dim=-1)


def fused(x: torch.Tensor) -> bool:
    """Whether an LSTM layer runs as cuDNN's fused nn.LSTM (on a GPU)."""
    return x.is_cuda


class BahdanauAttention(nn.Module):
    """Normalized Bahdanau attention (DLE's seq2seq/models/attention.py, normalize=True): the
    score of query i and key j is  g * v / |v| . tanh(W_q q_i + W_k k_j + b), softmax over the
    keys, and the context is the scores' average of the raw keys."""

    def __init__(self, hidden: int):
        super().__init__()
        self.linear_q = nn.Linear(hidden, hidden, bias=False)
        self.linear_k = nn.Linear(hidden, hidden, bias=False)
        self.linear_att = nn.Parameter(torch.empty(hidden))
        self.normalize_scalar = nn.Parameter(torch.full((1,), 1 / math.sqrt(hidden)))
        self.normalize_bias = nn.Parameter(torch.zeros(hidden))
        for weight in (self.linear_q.weight, self.linear_k.weight, self.linear_att):
            nn.init.uniform_(weight, -INIT, INIT)

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        query, keys = query.transpose(0, 1), keys.transpose(0, 1)  # batch first, for bmm
        q, k = self.linear_q(query), self.linear_k(keys)
        batch, queries, width = q.shape
        summed = q.unsqueeze(2).expand(batch, queries, k.shape[1], width) + \
            k.unsqueeze(1).expand(batch, queries, k.shape[1], width)
        direction = self.linear_att / self.linear_att.norm() * self.normalize_scalar
        scores = torch.tanh(summed + self.normalize_bias).matmul(direction)
        return torch.bmm(F.softmax(scores, dim=-1), keys).transpose(0, 1)


def _embedding(vocab_size: int, hidden: int) -> nn.Embedding:
    """Word vectors uniform in (-0.1, 0.1), PAD's zero. (Handing nn.Embedding its weight skips
    its normal_ initialisation, which on the meta device first imports torch's Python
    references: seconds.)"""
    weight = nn.init.uniform_(torch.empty(vocab_size, hidden), -INIT, INIT)
    with torch.no_grad():
        weight[PAD] = 0
    return nn.Embedding(vocab_size, hidden, padding_idx=PAD, _weight=weight)


class GNMT(nn.Module):
    """GNMT v2 with DLE's defaults. `src_len` and `tgt_len` (BOS and EOS included; by default
    the padded lengths of DLE's batches) are recorded for whoever makes the model's batches
    (`synthetic_batch`); the forward pass takes sentences of any length."""

    FIXED_INPUT_SIZE = True  # its seq_len is a rate: its sentences are its dataset's

    def __init__(self, vocab_size: int = WMT16_VOCAB, hidden_size: int = HIDDEN,
                 num_layers: int = LAYERS, dropout: float = DROPOUT,
                 smoothing: float = SMOOTHING, src_len: int = PADDED_SRC_LEN,
                 tgt_len: int = PADDED_TGT_LEN, share_embedding: bool = True):
        super().__init__()
        if num_layers < 2:
            raise ValueError("GNMT needs at least 2 layers (a bidirectional one and one above)")
        self.vocab_size, self.src_len, self.tgt_len = vocab_size, src_len, tgt_len
        self.smoothing = smoothing
        h = hidden_size
        self.embedder = _embedding(vocab_size, h)
        self.decoder_embedder = self.embedder if share_embedding else _embedding(vocab_size, h)
        self.encoder = nn.ModuleList([LSTM(h, h, bidirectional=True), LSTM(2 * h, h),
                                      *(LSTM(h, h) for _ in range(num_layers - 2))])
        self.decoder_attention_rnn = LSTM(h, h)
        self.attention = BahdanauAttention(h)
        self.decoder = nn.ModuleList(LSTM(2 * h, h) for _ in range(num_layers - 1))
        self.classifier = nn.Linear(h, vocab_size)
        for weight in self.classifier.parameters():
            nn.init.uniform_(weight, -INIT, INIT)
        self.dropout = nn.Dropout(dropout)

    def encode(self, source: torch.Tensor) -> torch.Tensor:
        """Time-major source token ids (steps, batch) to the encoder's outputs."""
        x = self.encoder[1](self.dropout(self.encoder[0](self.dropout(self.embedder(source)))))
        for layer in self.encoder[2:]:
            x = x + layer(self.dropout(x))
        return x

    def decode(self, inputs: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """Time-major decoder input ids (steps, batch) and encoder outputs to logits."""
        x = self.decoder_attention_rnn(self.dropout(self.decoder_embedder(inputs)))
        attended = self.attention(x, context)
        x = self.decoder[0](self.dropout(torch.cat([x, attended], dim=-1)))
        for layer in self.decoder[1:]:
            x = x + layer(self.dropout(torch.cat([x, attended], dim=-1)))
        return self.classifier(x)

    def loss(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """DLE's LabelSmoothing summed over tokens (PAD excluded), divided by the batch size
        as its trainer does: (1 - s) NLL + s mean(-log p) a token."""
        log_probs = F.log_softmax(logits.reshape(-1, logits.shape[-1]), dim=-1,
                                  dtype=torch.float32)
        target = target.reshape(-1)
        nll = -log_probs.gather(1, target[:, None])[:, 0]
        smooth = -log_probs.mean(dim=-1)
        per_token = (1 - self.smoothing) * nll + self.smoothing * smooth
        return (per_token * (target != PAD)).sum() / logits.shape[1]

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None):
        """`input_ids` (batch, src_len): source sentences; `labels` (batch, tgt_len): target
        sentences, BOS first. The loss is that of predicting labels[:, 1:] from
        labels[:, :-1] and the source."""
        if labels is None:
            raise ValueError("GNMT trains on sentence pairs: pass the target as `labels`")
        target = labels.t()  # time-major, as DLE runs (batch_first=False)
        logits = self.decode(target[:-1], self.encode(input_ids.t()))
        return SimpleNamespace(loss=self.loss(logits, target[1:]), logits=None)

    @staticmethod
    def synthetic_batch(batch: int, config: dict, size: int | None = None,
                        generator: torch.Generator | None = None) -> dict:
        """The zoo's protocol for torch-built models: sentence pairs at the config's padded
        lengths (`size`, the tokens a pair adds to tok/s, is a rate, not a shape)."""
        return GNMT.sentence_pairs(batch, config.get("src_len", PADDED_SRC_LEN),
                                   config.get("tgt_len", PADDED_TGT_LEN),
                                   config.get("vocab_size", WMT16_VOCAB), generator)

    @staticmethod
    def sentence_pairs(batch: int, src_len: int = PADDED_SRC_LEN,
                        tgt_len: int = PADDED_TGT_LEN, vocab_size: int = WMT16_VOCAB,
                        generator: torch.Generator | None = None) -> dict:
        """Random sentence pairs on the CPU: BOS, random subwords (no special tokens), EOS,
        every sentence at the full length."""
        def sentences(length: int) -> torch.Tensor:
            ids = torch.randint(EOS + 1, vocab_size, (batch, length), generator=generator)
            ids[:, 0], ids[:, -1] = BOS, EOS
            return ids

        return {"input_ids": sentences(src_len), "labels": sentences(tgt_len)}


def tokens_per_pair(src_len: int, tgt_len: int) -> int:
    """What one sentence pair adds to DLE's tok/s: its source tokens and its target tokens
    but the first (seq2seq/train/trainer.py counts src_length and tgt_length - 1)."""
    return src_len + tgt_len - 1

