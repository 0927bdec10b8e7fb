"""The project's one vocabulary: precision, batch, market and interval semantics, each defined
once and used by the sweep spec, the worker, the store, the features, the workload and both
CLIs. GPU names are in gpuadvisor/gpus.py, durations in gpuadvisor/durations.py.

- **precision** (`PRECISIONS`): the arithmetic a trial trains with and a prediction is for.
- **batch**: `batch_per_gpu` is the per-GPU micro-batch (samples one worker process takes per
  step, before any gradient accumulation), in the spec, the worker, the store, the features
  and the workload alike; a cluster's global batch is `batch_per_gpu` x workers.
- **market** (`MARKETS`): `on-demand` or `spot`; the store and the features keep it as the
  boolean `spot`, what people read (tables, JSON) says the market's name.
- **intervals**: the store's `throughput_lo/hi` are the worker's `THROUGHPUT_CI_LEVEL`
  confidence interval of the trial's mean throughput (batch means over the measured steps);
  a source without one leaves them empty (published rows), and an importer that has a spread
  of the samples rather than a confidence interval keeps it in `extra` under a name saying
  so (CM-DARE: `throughput_p2_5`, `throughput_p97_5`). A prediction's [lo, hi] is the
  artifact's calibrated `PREDICTION_INTERVAL_LEVEL` prediction interval: `advisor fit`
  calibrates at that level, the artifact records it (`interval_level`), every `Prediction`
  carries it (`level`), and the optimizer reads the level from the prediction.
- **published sources** (`is_published`): a trial's `source` is `published` for the shipped
  figures (NVIDIA's, MLPerf's) and `published:NAME` for another benchmark's figures imported
  under that name; both are published figures, kept apart from this project's own runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from gpuadvisor.errors import GpuAdvisorError

PRECISIONS = ("fp32", "tf32", "amp", "bf16")
Precision = Literal["fp32", "tf32", "amp", "bf16"]
PRECISION_MEANING = {
    "fp32": "FP32 storage, PyTorch's default math: FP32 matmuls, and convolutions in TF32 "
            "on Ampere and later (torch.backends.cudnn.allow_tf32 is True by default)",
    "tf32": "FP32 storage with TF32 matmuls and convolutions on Ampere and later (tensor "
            "cores); plain FP32 math on older GPUs and on CPU",
    "amp": "automatic mixed precision: FP16 autocast with a gradient scaler, FP32 weights",
    "bf16": "BF16 autocast, FP32 weights; no gradient scaler",
}
HALF_PRECISIONS = ("amp", "bf16")  # 16-bit activations and tensor-core math
LOSS_SCALED_PRECISIONS = ("amp",)  # FP16 needs a gradient scaler; BF16 has FP32's range
# How other benchmarks' tables name these (a training table's "fp16" is mixed precision: fp32
# master weights, 16-bit math); `precision_named` reads them, the CLIs and specs take PRECISIONS.
PRECISION_ALIASES = {"fp16": "amp", "float16": "amp", "half": "amp", "mixed": "amp",
                     "mixed precision": "amp", "mixed-precision": "amp", "apex": "amp",
                     "bfloat16": "bf16", "float32": "fp32", "single": "fp32",
                     "tensorfloat32": "tf32", "tensorfloat-32": "tf32"}

MARKETS = ("on-demand", "spot")  # market(False), market(True)
# Or et al. (2020)'s two rules for a cluster of a different size: keep the global batch (the
# per-GPU share shrinks, the optimization is unchanged), or keep the per-GPU batch (the global
# batch grows with the GPUs, and so may the epochs needed to converge).
BATCH_POLICIES = ("fixed-global", "fixed-per-gpu")

THROUGHPUT_CI_LEVEL = 0.95  # the store's throughput_lo/hi: this confidence interval of the mean
PREDICTION_INTERVAL_LEVEL = 0.9  # a prediction's [lo, hi]: this calibrated prediction interval


class VocabError(GpuAdvisorError, ValueError):
    """A value outside the vocabulary; the message lists what is accepted."""


def one_of(what: str, value: str, accepted: Iterable[str]) -> str:
    """`value` if it is in `accepted`, else VocabError listing what is."""
    accepted = tuple(accepted)
    if value not in accepted:
        raise VocabError(f"{what} {value!r} is not known; use one of {', '.join(accepted)}")
    return value


def check_precision(value: str) -> str:
    alias = PRECISION_ALIASES.get(str(value).strip().lower())
    if alias and value not in PRECISIONS:
        raise VocabError(f"precision {value!r} is not known; use one of {', '.join(PRECISIONS)} "
                         f"({value} in a training table is {alias})")
    return one_of("precision", value, PRECISIONS)


def precision_named(text: str) -> str:
    """The precision a table's `text` names, any case, an alias too (PRECISION_ALIASES);
    VocabError listing what is accepted otherwise."""
    key = str(text).strip().lower()
    if key in PRECISIONS:
        return key
    if key in PRECISION_ALIASES:
        return PRECISION_ALIASES[key]
    raise VocabError(f"precision {text!r} is not known; use one of {', '.join(PRECISIONS)} "
                     f"or {', '.join(PRECISION_ALIASES)}")


def market(spot: bool) -> str:
    """The market's name for the store's `spot` flag."""
    return "spot" if spot else "on-demand"


PUBLISHED_SOURCE = "published"


def is_published(source: str) -> bool:
    """Whether a trial's `source` is a published figure (`published`, `published:NAME`)."""
    return source == PUBLISHED_SOURCE or source.startswith(f"{PUBLISHED_SOURCE}:")
