"""Transformer-XL (Dai et al., ACL 2019) as NVIDIA's DeepLearningExamples train it on
WikiText-103, whose published throughput datasets/published_throughput.csv holds: a stack of
post-norm layers whose attention reads the previous segment's hidden states (the memory, no
gradient) besides the current segment, with relative position scores (the AC + shifted BD
terms, position biases shared by all layers), and a word-level vocabulary of 267,735 behind
an adaptive input embedding and an adaptive softmax tied to it (Baevski & Auli 2019; Grave
et al. 2017), cut at 19,997 / 39,997 / 199,997 words.

transformers dropped its Transformer-XL, so the zoo builds it from torch.nn. The forward pass
takes `input_ids` and `labels` (batch-first, as the zoo's text models do) and returns `.loss`.

DeepLearningExamples' adaptive softmax sends each tail cluster only the tokens whose target
falls in it, a data-dependent shape the meta-device tracer cannot follow. Here each tail
reads a fixed number of tokens, its expected share under Zipf's law (word frequency
proportional to 1 / rank, the law a frequency-ranked word vocabulary follows), picked the
way capacity-routed mixture-of-experts layers pick theirs (top-k of the membership): the
same work as the data-dependent version on an average batch, in static shapes. A target
that overflows its cluster's capacity is left out of the loss, as an over-capacity token is
in a mixture-of-experts layer; synthetic batches (`zipf_token_ids`) follow the same law.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch
from torch import nn
from torch.nn import functional as F

WT103_VOCAB = 267_735
WT103_CUTOFFS = (19_997, 39_997, 199_997)
EULER_GAMMA = 0.5772156649015329


def harmonic(n: int) -> float:
    """The n-th harmonic number (sum of 1/k, k = 1..n), to 1e-10 for n >= 10."""
    return math.log(n) + EULER_GAMMA + 1 / (2 * n) - 1 / (12 * n * n)


def zipf_shares(vocab: int, cutoffs: tuple[int, ...]) -> list[float]:
    """The share of running words in each cluster [0, c1), [c1, c2), ... of a vocabulary
    ranked by frequency, under Zipf's law."""
    bounds = [0, *cutoffs, vocab]
    total = harmonic(vocab)
    return [(harmonic(hi) - (harmonic(lo) if lo else 0.0)) / total
            for lo, hi in zip(bounds, bounds[1:])]


def zipf_token_ids(shape: tuple[int, ...], vocab: int, generator=None) -> torch.Tensor:
    """Token ids drawn under Zipf's law (id = frequency rank), by inverting its CDF."""
    u = torch.rand(shape, generator=generator)
    rank = torch.exp(u * harmonic(vocab) - EULER_GAMMA)
    return rank.long().clamp(1, vocab) - 1


class AdaptiveEmbedding(nn.Module):
    """Word vectors of the model's width for the frequent words and, with `div_val` > 1,
    `div_val` times narrower for each rarer cluster, each projected to the model's width.
    With narrower clusters every table's lookup runs on every token and a mask keeps its own
    (static shapes); their projections are a few percent of a layer's work."""

    def __init__(self, vocab: int, d_model: int, cutoffs: tuple[int, ...], div_val: int):
        super().__init__()
        self.bounds = [0, *cutoffs, vocab]
        self.div_val = div_val
        spans = list(zip(self.bounds, self.bounds[1:]))
        if div_val == 1:
            self.tables = nn.ModuleList([nn.Embedding(vocab, d_model)])
            self.projections = nn.ParameterList()
        else:
            widths = [d_model // div_val ** i for i in range(len(spans))]
            self.tables = nn.ModuleList(nn.Embedding(hi - lo, width)
                                        for (lo, hi), width in zip(spans, widths))
            self.projections = nn.ParameterList(nn.Parameter(torch.randn(d_model, width) * 0.01)
                                                for width in widths)
        for table in self.tables:  # DeepLearningExamples' init: N(0, 0.01) word vectors
            nn.init.normal_(table.weight, std=0.01)
        self.scale = d_model ** 0.5

    def weight(self, cluster: int) -> torch.Tensor:
        """The output-side word vectors of one cluster (tied to the input's)."""
        if self.div_val == 1:
            return self.tables[0].weight[self.bounds[cluster]:self.bounds[cluster + 1]]
        return self.tables[cluster].weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if self.div_val == 1:
            return self.tables[0](ids) * self.scale
        total = 0
        for cluster, (lo, hi) in enumerate(zip(self.bounds, self.bounds[1:])):
            inside = (ids >= lo) & (ids < hi)
            vectors = F.linear(self.tables[cluster]((ids - lo).clamp(0, hi - lo - 1)),
                               self.projections[cluster])
            total = total + vectors * inside.unsqueeze(-1)
        return total * self.scale


class RelativeAttention(nn.Module):
    """Multi-head attention over memory + segment with Transformer-XL's relative scores."""

    def __init__(self, d_model: int, heads: int, d_head: int, dropout: float,
                 attention_dropout: float):
        super().__init__()
        self.heads, self.d_head = heads, d_head
        self.qkv = nn.Linear(d_model, 3 * heads * d_head, bias=False)
        self.position = nn.Linear(d_model, heads * d_head, bias=False)
        self.out = nn.Linear(heads * d_head, d_model, bias=False)
        self.norm = nn.LayerNorm(d_model)
        self.dropout, self.attention_dropout = nn.Dropout(dropout), nn.Dropout(attention_dropout)

    def forward(self, hidden, memory, positions, content_bias, position_bias, mask):
        segment, batch = hidden.shape[:2]
        both = torch.cat([memory, hidden])  # [memory + segment, batch, d_model]
        q, k, v = self.qkv(both).view(len(both), batch, 3, self.heads, self.d_head).unbind(2)
        q = q[-segment:]
        r = self.position(positions).view(len(both), self.heads, self.d_head)
        content = torch.einsum("ibnd,jbnd->bnij", q + content_bias, k)
        relative = _shift(torch.einsum("ibnd,jnd->bnij", q + position_bias, r))
        scores = ((content + relative) / self.d_head ** 0.5).masked_fill(mask, -1e4)
        weights = self.attention_dropout(torch.softmax(scores, dim=-1))
        attended = torch.einsum("bnij,jbnd->ibnd", weights, v).reshape(segment, batch, -1)
        return self.norm(hidden + self.dropout(self.out(attended)))


def _shift(scores: torch.Tensor) -> torch.Tensor:
    """Transformer-XL's relative shift: row i's scores against distances become scores
    against key positions (a zero column, a reshape, a slice)."""
    b, n, rows, cols = scores.shape
    padded = F.pad(scores, (1, 0)).view(b, n, cols + 1, rows)
    return padded[:, :, 1:].reshape(b, n, rows, cols)


class Layer(nn.Module):
    def __init__(self, d_model: int, heads: int, d_head: int, d_inner: int, dropout: float,
                 attention_dropout: float):
        super().__init__()
        self.attention = RelativeAttention(d_model, heads, d_head, dropout, attention_dropout)
        self.feed_forward = nn.Sequential(
            nn.Linear(d_model, d_inner), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(d_inner, d_model), nn.Dropout(dropout))
        self.norm = nn.LayerNorm(d_model)

    def forward(self, hidden, memory, positions, content_bias, position_bias, mask):
        hidden = self.attention(hidden, memory, positions, content_bias, position_bias, mask)
        return self.norm(hidden + self.feed_forward(hidden))


class TransformerXL(nn.Module):
    """The WikiText-103 language model; `tgt_len` tokens a segment attend to `mem_len`
    remembered ones (the memory holds zeros here: the same work as a trained one)."""

    SEQ_LEN_ARGUMENT = "tgt_len"  # the zoo's sequence length is a segment's

    def __init__(self, n_layer: int, d_model: int, n_head: int, d_head: int, d_inner: int,
                 tgt_len: int, mem_len: int, dropout: float, dropatt: float, div_val: int = 1,
                 vocab_size: int = WT103_VOCAB, cutoffs: tuple[int, ...] = WT103_CUTOFFS):
        super().__init__()
        self.tgt_len, self.mem_len, self.d_model = tgt_len, mem_len, d_model
        self.embedding = AdaptiveEmbedding(vocab_size, d_model, cutoffs, div_val)
        self.dropout = nn.Dropout(dropout)
        self.content_bias = nn.Parameter(torch.zeros(n_head, d_head))
        self.position_bias = nn.Parameter(torch.zeros(n_head, d_head))
        self.layers = nn.ModuleList(Layer(d_model, n_head, d_head, d_inner, dropout, dropatt)
                                    for _ in range(n_layer))
        self.softmax = AdaptiveSoftmax(self.embedding, d_model)

    @staticmethod
    def synthetic_batch(batch: int, config: dict, size: int | None = None,
                        generator=None) -> dict:
        """Segments of Zipf-drawn words (`size` or the config's `tgt_len` of them) and their
        next words, on the CPU (the zoo's protocol for torch-built models)."""
        length = size or config["tgt_len"]
        words = zipf_token_ids((batch, length + 1), config.get("vocab_size", WT103_VOCAB),
                               generator)
        return {"input_ids": words[:, :-1], "labels": words[:, 1:]}

    def _positions(self, length: int, device) -> torch.Tensor:
        """Sinusoidal embeddings of the distances length-1 .. 0."""
        distance = torch.arange(length - 1, -1, -1.0, device=device)
        inverse = 1 / 10000 ** (torch.arange(0, self.d_model, 2.0, device=device) / self.d_model)
        angles = torch.outer(distance, inverse)
        return torch.cat([angles.sin(), angles.cos()], dim=-1)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None):
        ids = input_ids.t()  # [segment, batch], the layout Transformer-XL runs in
        segment, batch = ids.shape
        length = segment + self.mem_len
        hidden = self.dropout(self.embedding(ids))
        positions = self.dropout(self._positions(length, ids.device))
        mask = torch.ones(segment, length, dtype=torch.bool, device=ids.device).triu(
            1 + self.mem_len)
        for layer in self.layers:
            memory = hidden.new_zeros(self.mem_len, batch, self.d_model)
            hidden = layer(hidden, memory, positions, self.content_bias, self.position_bias,
                           mask)
        hidden = self.dropout(hidden)
        loss = None if labels is None else self.softmax(hidden.reshape(-1, self.d_model),
                                                        labels.t().reshape(-1))
        return SimpleNamespace(loss=loss, logits=None)


class AdaptiveSoftmax(nn.Module):
    """The adaptive softmax over the embedding's own tables (tied word vectors; with
    `div_val` > 1, tied projections but the head's): a head over the frequent words and one
    entry per tail cluster, then each tail over its expected share of the tokens (see the
    module's docstring)."""

    def __init__(self, embedding: AdaptiveEmbedding, d_model: int):
        super().__init__()
        self.embedding = embedding
        self.bounds = embedding.bounds
        tails = len(self.bounds) - 2
        self.cluster_weight = nn.Parameter(torch.zeros(tails, d_model))
        self.cluster_bias = nn.Parameter(torch.zeros(tails))
        self.bias = nn.Parameter(torch.zeros(self.bounds[-1]))
        self.head_projection = None if embedding.div_val == 1 else nn.Parameter(
            torch.randn(d_model, d_model) * 0.01)
        self.shares = zipf_shares(self.bounds[-1], tuple(self.bounds[1:-1]))

    def _project(self, hidden: torch.Tensor, cluster: int) -> torch.Tensor:
        if self.embedding.div_val == 1:
            return hidden
        projection = self.head_projection if cluster == 0 else \
            self.embedding.projections[cluster]
        return F.linear(hidden, projection.t())

    def _logits(self, hidden: torch.Tensor, cluster: int) -> torch.Tensor:
        lo, hi = self.bounds[cluster], self.bounds[cluster + 1]
        return F.linear(hidden, self.embedding.weight(cluster), self.bias[lo:hi])

    def forward(self, hidden: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        head_words = self.bounds[1]
        projected = self._project(hidden, 0)
        head = torch.cat([self._logits(projected, 0),
                          F.linear(projected, self.cluster_weight, self.cluster_bias)],
                         dim=-1).log_softmax(-1)
        in_head = target < head_words
        total = -(head.gather(1, target.clamp(max=head_words - 1)[:, None])[:, 0]
                  * in_head).sum()
        for cluster in range(1, len(self.bounds) - 1):
            lo, hi = self.bounds[cluster], self.bounds[cluster + 1]
            inside = (target >= lo) & (target < hi)
            capacity = max(1, math.ceil(self.shares[cluster] * len(target)))
            picked = inside.float().topk(capacity).indices
            tail = self._logits(self._project(hidden[picked], cluster), cluster).log_softmax(-1)
            word = (target[picked] - lo).clamp(0, hi - lo - 1)
            log_prob = head[picked, head_words + cluster - 1] + \
                tail.gather(1, word[:, None])[:, 0]
            total = total - (log_prob * inside[picked]).sum()
        return total / len(target)
