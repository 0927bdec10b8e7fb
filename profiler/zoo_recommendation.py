"""NCF (Neural Collaborative Filtering; He et al. 2017, NeuMF) as NVIDIA's DeepLearningExamples
train it on MovieLens-20M (PyTorch/Recommendation/NCF: neumf.py@a02e4fe0, ncf.py and README.md
@05ee9863, the 21.04 release whose throughput datasets/published_throughput.csv holds).

NeuMF with DLE's defaults (ncf.py: `--factors 64 --layers 256 256 128 64 --dropout 0.5
--negative_samples 4`): a matrix-factorisation branch, the product of a user's and an item's
64-wide embeddings, and an MLP branch, their 128-wide embeddings concatenated and run through
ReLU layers 256 -> 256 -> 128 -> 64, each followed by dropout 0.5; the two branches'
outputs, concatenated, feed one logit. ML-20M as DLE prepares it has 138,493 users and 26,744
items (data/ml-20m/feature_spec_template.yaml): 31,832,577 parameters, nearly all of them
embeddings. The embeddings are dense (nn.Embedding without `sparse`), so every step writes
and all-reduces a gradient of every row, which is what the card's gradient_bytes counts.

A sample is one user-item interaction with a 0/1 label: each epoch DLE pairs every training
positive with 4 random items labelled 0, and counts all of them in its samples/s
(`length_after_augmentation`, positives x 5). The loss is BCEWithLogits averaged over the
batch, as ncf.py computes it. Built from torch.nn (transformers has no NeuMF); random init,
since initialisation does not change the work.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import nn
from torch.nn import functional as F

ML20M_USERS = 138_493
ML20M_ITEMS = 26_744
# ML-20M's 20,000,263 ratings less each user's latest, which DLE holds out as the test set.
ML20M_TRAIN_POSITIVES = 20_000_263 - ML20M_USERS
FACTORS = 64  # the matrix-factorisation branch's embedding width (--factors)
MLP_LAYERS = (256, 256, 128, 64)  # --layers: the first is the two MLP embeddings side by side
DROPOUT = 0.5
NEGATIVE_SAMPLES = 4  # random items labelled 0 per positive each epoch (--negative_samples)


class NCF(nn.Module):
    """NeuMF with DLE's defaults. `negative_samples` is recorded for whoever makes the
    model's batches (`synthetic_batch`: the share of positive labels); the forward pass
    does not depend on it."""

    FIXED_INPUT_SIZE = True  # a sample is a (user, item) pair: no image size, no sequence

    def __init__(self, num_users: int = ML20M_USERS, num_items: int = ML20M_ITEMS,
                 factors: int = FACTORS, mlp_layers=MLP_LAYERS, dropout: float = DROPOUT,
                 negative_samples: int = NEGATIVE_SAMPLES):
        super().__init__()
        if mlp_layers[0] % 2:
            raise ValueError("NCF's first MLP layer is two embeddings side by side: give an "
                             f"even width, not {mlp_layers[0]}")
        self.num_users, self.num_items = num_users, num_items
        self.negative_samples, self.dropout = negative_samples, dropout
        self.mf_user_embed = nn.Embedding(num_users, factors)
        self.mf_item_embed = nn.Embedding(num_items, factors)
        self.mlp_user_embed = nn.Embedding(num_users, mlp_layers[0] // 2)
        self.mlp_item_embed = nn.Embedding(num_items, mlp_layers[0] // 2)
        self.mlp = nn.ModuleList(nn.Linear(a, b) for a, b in zip(mlp_layers, mlp_layers[1:]))
        self.final = nn.Linear(mlp_layers[-1] + factors, 1)

    def forward(self, user_ids: torch.Tensor, item_ids: torch.Tensor,
                labels: torch.Tensor | None = None):
        """`user_ids`, `item_ids` (batch,): the interactions; `labels` (batch,): 1 for a
        positive, 0 for a sampled negative. Returns `.loss` (mean BCE) and `.logits`."""
        mf = self.mf_user_embed(user_ids) * self.mf_item_embed(item_ids)
        x = torch.cat([self.mlp_user_embed(user_ids), self.mlp_item_embed(item_ids)], dim=1)
        for layer in self.mlp:
            x = F.dropout(F.relu(layer(x)), self.dropout, self.training)
        logits = self.final(torch.cat([mf, x], dim=1)).view(-1)
        loss = None if labels is None else F.binary_cross_entropy_with_logits(logits, labels)
        return SimpleNamespace(loss=loss, logits=logits)

    @staticmethod
    def synthetic_batch(batch: int, config: dict, size: int | None = None,
                        generator: torch.Generator | None = None) -> dict:
        """The zoo's protocol for torch-built models: random users and items, labelled 1 with
        DLE's share of positives (1 in 1 + negative_samples). `size` is unused: NCF has no
        input size (the zoo refuses one before it gets here)."""
        users = torch.randint(0, config.get("num_users", ML20M_USERS), (batch,),
                              generator=generator)
        items = torch.randint(0, config.get("num_items", ML20M_ITEMS), (batch,),
                              generator=generator)
        positive = 1 / (1 + config.get("negative_samples", NEGATIVE_SAMPLES))
        labels = (torch.rand(batch, generator=generator) < positive).float()
        return {"user_ids": users, "item_ids": items, "labels": labels}
