"""Transferable features of a training configuration, from store rows, model cards and GPU specs.

The output is the feature dict of docs/interfaces.md ("Performance-model artifact"): equal-length
numpy arrays, so that fitting, evaluation and `Artifact.predict` see exactly the same inputs.
csv + numpy only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

import numpy as np

STRING_KEYS = ("model", "gpu", "sync", "precision", "provider")
NUMBER_KEYS = ("params", "flops_per_sample", "gradient_bytes", "activation_bytes",
               "gpu_fp32_tflops", "gpu_tensor_tflops", "gpu_mem_bw_gbps", "gpu_memory_gb",
               "nodes", "gpus_per_node", "network_gbps", "ps_count", "batch_per_gpu")
# Optional: NaN (or absent) where unknown, and the physics term that uses it then adds nothing.
# `tensors` = the model's parameter tensors (weights, biases, norm scales: a checkpoint's
# tensor count, from the model card or CM-DARE's checkpoint table), which sets the per-layer
# work of a step whatever the layers' sizes.
OPTIONAL_KEYS = ("tensors",)
FEATURE_KEYS = STRING_KEYS + NUMBER_KEYS + ("spot",)
MODEL_KEYS = ("params", "flops_per_sample", "gradient_bytes", "activation_bytes")

# Per-node network bandwidth when neither the trial nor the catalog says (Gbit/s): GCP gives
# 2 Gbps per vCPU up to 16 on N1 machines, EC2 GPU instances start at 10-25; a local run
# talks over loopback.
DEFAULT_NETWORK_GBPS = {"gcp": 16.0, "aws": 25.0, "local": 40.0}


class FeatureError(ValueError):
    """A configuration whose features cannot be built; the message names the fix."""


def model_features(store_models: Iterable[Mapping[str, Any]] = ()) -> dict[str, dict]:
    """Model name -> card features: zoo cards first, then the store's `models` rows."""
    out: dict[str, dict] = {}
    try:
        from gpuadvisor.cards import load_cards
        cards = load_cards()
    except (ImportError, FileNotFoundError):
        cards = {}
    except ValueError as exc:
        raise FeatureError(f"model cards unreadable ({exc}); rebuild them with "
                           "`profiler card`") from None
    for name, card in cards.items():
        out[name] = {
            "params": _num(card.get("params")),
            "flops_per_sample": _num(card.get("flops_per_sample")),
            "gradient_bytes": _num(card.get("gradient_bytes")),
            "activation_bytes": _num(card.get("activation_bytes_per_sample")),
            "tensors": _num(card.get("tensors")),
            "image_size": _num(card.get("image_size")),
            "seq_len": _num(card.get("seq_len")),
        }
    for row in store_models:  # later rows win: the store is append-only
        if row["model"] in cards:
            continue
        extra = row.get("extra") if isinstance(row.get("extra"), dict) else {}
        out[row["model"]] = {key: _num(row.get(key)) for key in MODEL_KEYS}
        out[row["model"]]["tensors"] = _num(extra.get("tensors"))
    return out


def gpu_features(gpu: str) -> dict[str, float]:
    from cloud.gpus import gpu_spec

    spec = gpu_spec(gpu)
    return {
        "gpu_fp32_tflops": spec.fp32_tflops,
        "gpu_tensor_tflops": spec.tensor_tflops or 0.0,
        "gpu_mem_bw_gbps": spec.mem_bw_gbps,
        "gpu_memory_gb": spec.memory_gb,
    }


def trial_features(
    trials: Iterable[Mapping[str, Any]], models: Mapping[str, Mapping[str, float]]
) -> tuple[dict[str, np.ndarray], list[Mapping[str, Any]], dict[str, int]]:
    """Features of the trials that can have them; returns (features, kept rows, skip reasons)."""
    rows, kept, skipped = [], [], {}
    for trial in trials:
        try:
            rows.append(_trial_row(trial, models))
            kept.append(trial)
        except FeatureError as exc:
            reason = str(exc)
            skipped[reason] = skipped.get(reason, 0) + 1
    return to_arrays(rows), kept, skipped


def to_arrays(rows: list[Mapping[str, Any]]) -> dict[str, np.ndarray]:
    """Rows of feature values -> the dict of equal-length arrays `Artifact.predict` takes."""
    out: dict[str, np.ndarray] = {}
    for key in STRING_KEYS:
        out[key] = np.array([str(r[key]) for r in rows], dtype=str)
    for key in NUMBER_KEYS:
        out[key] = np.array([r[key] for r in rows], dtype=float)
    for key in OPTIONAL_KEYS:
        out[key] = np.array([_num(r.get(key)) or np.nan for r in rows], dtype=float)
    out["spot"] = np.array([bool(r["spot"]) for r in rows], dtype=bool)
    return out


def take(features: Mapping[str, np.ndarray], index) -> dict[str, np.ndarray]:
    """The rows `index` (mask or integer array) of a feature dict."""
    return {key: np.asarray(value)[index] for key, value in features.items()}


def _trial_row(trial: Mapping[str, Any], models: Mapping[str, Mapping[str, float]]) -> dict:
    if not trial.get("gpu_type"):
        raise FeatureError("CPU-only trial (no gpu_type)")
    card = models.get(trial.get("model"))
    if card is None or not card.get("flops_per_sample"):
        raise FeatureError(f"no model card for {trial.get('model')!r}")
    try:
        gpu = gpu_features(trial["gpu_type"])
    except KeyError:
        raise FeatureError(f"unknown GPU {trial['gpu_type']!r}") from None
    scale = _input_scale(trial, card)
    row = {key: card.get(key) or 0.0 for key in MODEL_KEYS}
    row["tensors"] = card.get("tensors")
    row["flops_per_sample"] *= scale
    row["activation_bytes"] *= scale
    extra = trial.get("extra") if isinstance(trial.get("extra"), dict) else {}
    provider = trial.get("provider") or "local"
    row.update(gpu)
    row.update(
        model=trial["model"],
        gpu=trial["gpu_type"],
        provider=provider,
        sync=trial.get("sync") or "allreduce",
        precision=trial.get("precision") or "fp32",
        nodes=trial.get("nodes") or 1,
        gpus_per_node=trial.get("gpus_per_node") or 1,
        ps_count=trial.get("ps_count") or 1,
        batch_per_gpu=trial.get("batch_per_gpu") or 0,
        spot=bool(trial.get("spot")),
        network_gbps=_num(extra.get("network_gbps")) or network_gbps(provider, trial),
    )
    if row["batch_per_gpu"] <= 0:
        raise FeatureError("trial without batch_per_gpu")
    return row


def network_gbps(provider: str, trial: Mapping[str, Any]) -> float:
    """Per-node bandwidth of the trial's instance type from the catalog, else a default."""
    known = _catalog_bandwidth().get((provider, trial.get("instance_type")))
    return known or DEFAULT_NETWORK_GBPS.get(provider, 10.0)


@cache
def _catalog_bandwidth() -> dict[tuple[str, str], float]:
    import warnings

    try:
        from cloud.catalog import load_catalog
        with warnings.catch_warnings():  # only bandwidths are read here, never prices
            warnings.simplefilter("ignore")
            offerings = load_catalog().offerings
    except (ImportError, FileNotFoundError):
        return {}
    return {(o.provider, o.instance_type): float(o.network_gbps) for o in offerings}


def _input_scale(trial: Mapping[str, Any], card: Mapping[str, Any]) -> float:
    """Work per sample grows with pixels (image models) or tokens (text models)."""
    if trial.get("image_size") and card.get("image_size"):
        return (trial["image_size"] / card["image_size"]) ** 2
    if trial.get("seq_len") and card.get("seq_len"):
        return trial["seq_len"] / card["seq_len"]
    return 1.0


def _num(value: Any) -> float | None:
    if value in (None, ""):
        return None
    return float(value)
