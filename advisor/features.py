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

from advisor.errors import AdvisorError
from advisor.memory import optimizer_for, recipe_optimizer
from advisor.physics import (
    SILICON_KEY,
    XLA_KEY,
    dense_codes,
    factorize,
    fp32_issue_fraction,
    intra_node_gb_s,
    sustained_clock_fraction,
    update_bytes,
)
from advisor.sharding import LAYOUT_KEYS
from gpuadvisor.cards import MAKE_A_CARD, OPERATOR_COLUMNS, matching_card, similar_cards
from gpuadvisor.gpus import form_of
from gpuadvisor.vocab import is_published

STRING_KEYS = ("model", "gpu", "sync", "precision", "provider")
NUMBER_KEYS = ("params", "flops_per_sample", "gradient_bytes", "activation_bytes",
               "gpu_fp32_tflops", "gpu_tensor_tflops", "gpu_mem_bw_gbps", "gpu_memory_gb",
               "gpu_tf32", "gpu_bf16", "gpu_clock_fraction", "gpu_fp32_issue_fraction", "nodes",
               "gpus_per_node", "network_gbps", "ps_count", "batch_per_gpu")
# Optional: NaN (or absent) where unknown, and the physics term that uses it then adds nothing.
# `tensors` = the model's parameter tensors (weights, biases, norm scales: a checkpoint's
# tensor count, from the model card or CM-DARE's checkpoint table), which sets the per-layer
# work of a step whatever the layers' sizes. The operator split (FLOPs and bytes per sample by
# operator class, gpuadvisor.cards.OPERATOR_COLUMNS) prices each class at its own roofline; a
# card without it is priced from its totals. `intra_node_gb_s` = the all-reduce bandwidth per
# GPU inside a node, from the node's interconnect and the GPU's links (physics.intra_node_gb_s).
# `optimizer_update_bytes` = the bytes an optimizer step moves a parameter (physics.
# update_bytes: the weight, its gradient and the optimizer's state), of the configuration's
# `optimizer` where it names one, else of its card's recipe's.
OPTIONAL_KEYS = ("tensors", *OPERATOR_COLUMNS, "intra_node_gb_s", "optimizer_update_bytes")
PER_SAMPLE_KEYS = ("flops_per_sample", "activation_bytes",
                   *(c for c in OPERATOR_COLUMNS if c.endswith("_per_sample")))
FEATURE_KEYS = STRING_KEYS + NUMBER_KEYS + ("spot",)
MODEL_KEYS = ("params", "flops_per_sample", "gradient_bytes", "activation_bytes")
GPU_KEYS = ("gpu_fp32_tflops", "gpu_tensor_tflops", "gpu_mem_bw_gbps", "gpu_memory_gb",
            "gpu_tf32", "gpu_bf16", "gpu_clock_fraction", "gpu_fp32_issue_fraction")
# What names a training configuration; `configuration_features` turns these into features.
CONFIG_KEYS = ("model", "gpu", "provider", "sync", "ps_count", "precision", "nodes",
               "gpus_per_node", "batch_per_gpu", "spot", "network_gbps")
# Optional configuration columns: the input size trained at, and the node's GPU link
# (`interconnect`: PCIe, NVLink or NVSwitch, as the catalog says; where absent, an SXM GPU's
# own NVLink, else PCIe: `gpu_link_gb_s`).
INPUT_SIZE_KEYS = ("image_size", "seq_len")
# Optional: the card a configuration was measured at when not its model's default one
# (bert_large@384 for SQuAD fine-tuning); the model's name stays the model's.
CARD_KEY = "card"
LINK_KEYS = ("interconnect",)
# Optional: what one tiny operator costs the host a configuration was measured on
# (`extra.host_op_us`, which the profiler's workers record), scaling its host's dispatch of a
# step's kernels (physics.host_speed); a configuration without it has a typical host.
HOST_KEY = "host_op_us"
# Optional: 1 where the job keeps its tensors channels-last (NHWC), 0 or absent where it runs
# PyTorch's default NCHW, whose 16-bit convolutions cuDNN transposes (physics.
# LAYOUT_TRANSPOSE_PASSES). A trial says so in `extra.channels_last` (a published row in its
# `memory_format` column); without it a published figure is taken as channels-last (tuned
# recipes run 16-bit convolutions so: DLE's ConvNets benchmark AMP with `--memory-format nhwc`,
# MXNet's and MLPerf's are NHWC) and a run of the profiler's, whose zoo models are NCHW, as NCHW.
LAYOUT_KEY = "channels_last"
# Optional: the optimizer a configuration trains with (advisor.memory.OPTIMIZER_STATE_BYTES
# names them): a workload's, or a trial's `extra.optimizer` (the profiler's workers record
# theirs, a published row its `optimizer` column); where absent, the card's recipe's
# (advisor.memory.recipe_optimizer).
OPTIMIZER_KEY = "optimizer"

# Per-node network bandwidth when neither the trial nor the catalog says (Gbit/s): GCP gives
# 2 Gbps per vCPU up to 16 on N1 machines, EC2 GPU instances start at 10-25; a local run
# talks over loopback.
DEFAULT_NETWORK_GBPS = {"gcp": 16.0, "aws": 25.0, "local": 40.0}


class FeatureError(AdvisorError, ValueError):
    """A configuration whose features cannot be built; the message names the fix."""


def card_features(card: Mapping[str, Any]) -> dict[str, float | None]:
    """A model card's (or the store's `models` row's) transferable features."""
    extra = card.get("extra") if isinstance(card.get("extra"), dict) else {}
    return {
        "params": _num(card.get("params")),
        "flops_per_sample": _num(card.get("flops_per_sample")),
        "gradient_bytes": _num(card.get("gradient_bytes")),
        "activation_bytes": _num(card.get("activation_bytes_per_sample",
                                          card.get("activation_bytes"))),
        "tensors": _num(card.get("tensors", extra.get("tensors"))),
        **{key: _num(card.get(key, extra.get(key))) for key in OPERATOR_COLUMNS},
        "image_size": _num(card.get("image_size")),
        "seq_len": _num(card.get("seq_len")),
        "optimizer_update_bytes": _recipe_update_bytes(card),
    }


def _recipe_update_bytes(card: Mapping[str, Any]) -> float | None:
    """The bytes a step of a card's recipe's optimizer moves a parameter; None for a card of
    no task (the store's `models` rows), which the physics prices as SGD with momentum."""
    if not card.get("task"):
        return None
    return update_bytes(recipe_optimizer(card))


def model_features(store_models: Iterable[Mapping[str, Any]] = ()) -> dict[str, dict]:
    """Model name -> card features: zoo cards first, then the store's `models` rows."""
    try:
        from gpuadvisor.cards import load_cards
        cards = load_cards()
    except (ImportError, FileNotFoundError):
        cards = {}
    except ValueError as exc:
        raise FeatureError(f"model cards unreadable ({exc}); rebuild them with "
                           "`profiler card`") from None
    out = {name: card_features(card) for name, card in cards.items()}
    for row in store_models:  # later rows win: the store is append-only
        if row["model"] not in cards:
            out[row["model"]] = card_features(row)
    return out


def gpu_features(gpu: str) -> dict[str, float]:
    from cloud.gpus import gpu_spec

    return spec_features(gpu_spec(gpu))


def spec_features(spec) -> dict[str, float]:
    """The GPU features of a datasheet row (cloud.gpus.GpuSpec)."""
    return {
        "gpu_fp32_tflops": spec.fp32_tflops,
        "gpu_tensor_tflops": spec.tensor_tflops or 0.0,
        "gpu_mem_bw_gbps": spec.mem_bw_gbps,
        "gpu_memory_gb": spec.memory_gb,
        "gpu_tf32": float(bool(spec.tf32)),
        "gpu_bf16": float(bool(spec.bf16)),
        "gpu_clock_fraction": sustained_clock_fraction(spec.base_clock_mhz,
                                                       spec.boost_clock_mhz),
        "gpu_fp32_issue_fraction": fp32_issue_fraction(spec.architecture),
    }


def gpu_link_gb_s(gpu: str, interconnect: str | None) -> float:
    """All-reduce bandwidth per GPU and direction inside a node of `gpu`s linked by
    `interconnect` (None: NVLink where the GPU is a board that carries it, an SXM part; a PCIe
    card's NVLink is a bridge a server may not fit, as MLPerf's PCIe A100 and H100 servers did
    not, so it is on PCIe unless the node says NVLink)."""
    from cloud.gpus import gpu_spec

    spec = gpu_spec(gpu)
    if not interconnect:
        interconnect = "NVLink" if spec.nvlink_gb_s and form_of(spec) != "pcie" else "PCIe"
    return intra_node_gb_s(interconnect, spec.pcie_gen, spec.nvlink_gb_s)


def configuration_features(
    configs: Mapping[str, Any], models: Mapping[str, Mapping[str, Any]]
) -> dict[str, np.ndarray]:
    """THE feature builder: fit, evaluate, recommend and explain all come through here, so what
    is evaluated is what is recommended.

    `configs` holds equal-length columns of CONFIG_KEYS (`image_size`, `seq_len` optional: the
    input size trained at, which scales the card's per-sample work); `models` maps a model
    name to its `card_features`. Raises FeatureError naming the first row that cannot be built.
    """
    n = len(configs["model"])
    model = _card_models(np.asarray(configs["model"]).astype(str), models)
    gpu = np.asarray(configs["gpu"]).astype(str)
    out: dict[str, np.ndarray] = {"model": model, "gpu": gpu}
    for key in ("provider", "precision", "sync"):
        out[key] = np.asarray(configs[key]).astype(str)
    for key in ("nodes", "gpus_per_node", "batch_per_gpu", "network_gbps"):
        out[key] = np.asarray(configs[key], dtype=float)
    out["spot"] = np.asarray(configs["spot"], dtype=bool)
    for key in LAYOUT_KEYS:  # the data-parallel layout (advisor.sharding), where one is given
        if key in configs:
            out[key] = np.asarray(configs[key], dtype=float)
    # One convention for every source: all-reduce has no parameter servers, PS at least one.
    ps = np.nan_to_num(np.asarray(configs.get("ps_count", np.zeros(n)), dtype=float))
    out["ps_count"] = np.where(out["sync"] == "ps", np.maximum(ps, 1.0), 0.0)
    for key in (HOST_KEY, LAYOUT_KEY, XLA_KEY):  # XLA_KEY: 1 where XLA compiled the step
        if key in configs:
            out[key] = np.array([_or(_num(v), np.nan) for v in configs[key]], dtype=float)

    names, model_index = np.unique(_card_names(configs, model), return_inverse=True)
    cards = []
    for name in names:
        card = models.get(name)
        if card is None or not card.get("flops_per_sample"):
            near = similar_cards(models, str(name))
            hint = f"did you mean {' or '.join(near)}? otherwise " if near else ""
            raise FeatureError(f"no model card for {str(name)!r} ({hint}make one with "
                               f"{MAKE_A_CARD})")
        cards.append(card)
    for key in MODEL_KEYS + OPTIONAL_KEYS:
        missing = np.nan if key in OPTIONAL_KEYS else 0.0
        per_model = np.array([_or(_num(card.get(key)), missing) for card in cards], dtype=float)
        out[key] = per_model[model_index]
    given = _optimizer_update_bytes(configs.get(OPTIMIZER_KEY), n)
    out["optimizer_update_bytes"] = np.where(np.isfinite(given), given,
                                             out["optimizer_update_bytes"])
    scale = _input_scale(configs, cards, model_index, n)
    for key in PER_SAMPLE_KEYS:
        out[key] = out[key] * scale

    from cloud.gpus import gpu_spec, silicon

    gpu_names, gpu_index = np.unique(gpu, return_inverse=True)
    try:
        rows = [gpu_spec(name) for name in gpu_names]
    except KeyError as exc:
        raise FeatureError(exc.args[0]) from None
    specs = [spec_features(row) for row in rows]
    # One name per GPU (a driver's 'NVIDIA H100 80GB HBM3' is H100-80GB), so that a GPU's
    # rows group together whatever name their source gave it.
    gpu_names = np.array([row.gpu for row in rows], dtype=str)
    out["gpu"] = gpu_names[gpu_index.reshape(-1)]
    out[SILICON_KEY] = np.array([silicon(row.gpu) for row in rows], dtype=str)[
        gpu_index.reshape(-1)]
    for key in GPU_KEYS:
        out[key] = np.array([spec[key] for spec in specs], dtype=float)[gpu_index]
    bf16 = (out["precision"] == "bf16") & (out["gpu_bf16"] == 0)
    if bf16.any():
        raise FeatureError(no_bf16_message(str(gpu[bf16][0])))
    link_names, link_index = factorize(_strings(configs.get("interconnect", np.full(n, ""))))
    pairs, pair_index = dense_codes(gpu_index.reshape(-1) * len(link_names) + link_index)
    bandwidth = [gpu_link_gb_s(str(gpu_names[p // len(link_names)]),
                               str(link_names[p % len(link_names)]) or None) for p in pairs]
    out["intra_node_gb_s"] = np.array(bandwidth, dtype=float)[pair_index]
    return out


def _optimizer_update_bytes(names, n: int) -> np.ndarray:
    """The bytes each configuration's optimizer moves a parameter a step, NaN where it names
    none; FeatureError naming the accepted ones for an unknown name."""
    if names is None:
        return np.full(n, np.nan)
    names, index = factorize(_strings(names))
    try:
        known = [update_bytes(optimizer_for("", str(name))) if name else np.nan
                 for name in names]
    except ValueError as error:
        raise FeatureError(str(error)) from None
    return np.array(known, dtype=float)[index]


def no_bf16_message(gpu: str) -> str:
    return (f"GPU {gpu} has no bf16 arithmetic (it arrived with Ampere); use --precision amp "
            "(FP16 with a gradient scaler) or a GPU with bf16 (A100, H100, L4, A10G, L40S)")


def _strings(values) -> np.ndarray:
    """Names as a str array, missing values (None, NaN) as ''."""
    values = np.asarray(values)
    if values.dtype.kind == "U":
        return values
    return np.array(["" if v is None or v != v else str(v) for v in values], dtype=str)


def trial_features(
    trials: Iterable[Mapping[str, Any]], models: Mapping[str, Mapping[str, float]]
) -> tuple[dict[str, np.ndarray], list[Mapping[str, Any]], dict[str, int]]:
    """Features of the trials that can have them; returns (features, kept rows, skip reasons)."""
    rows, kept, skipped = [], [], {}
    for trial in trials:
        try:
            row = _trial_config(trial)
            configuration_features(_columns([row]), models)  # validates this trial alone
            rows.append(row)
            kept.append(trial)
        except FeatureError as exc:
            reason = str(exc)
            skipped[reason] = skipped.get(reason, 0) + 1
    if not rows:
        return to_arrays([]), kept, skipped
    return configuration_features(_columns(rows), models), kept, skipped


def to_arrays(rows: list[Mapping[str, Any]]) -> dict[str, np.ndarray]:
    """Rows of feature values -> the dict of equal-length arrays `Artifact.predict` takes."""
    out: dict[str, np.ndarray] = {}
    for key in STRING_KEYS:
        out[key] = np.array([str(r[key]) for r in rows], dtype=str)
    for key in NUMBER_KEYS:
        out[key] = np.array([r[key] for r in rows], dtype=float)
    for key in OPTIONAL_KEYS:
        out[key] = np.array([_or(_num(r.get(key)), np.nan) for r in rows], dtype=float)
    out["spot"] = np.array([bool(r["spot"]) for r in rows], dtype=bool)
    return out


def take(features: Mapping[str, np.ndarray], index) -> dict[str, np.ndarray]:
    """The rows `index` (mask or integer array) of a feature dict."""
    return {key: np.asarray(value)[index] for key, value in features.items()}


def _card_models(model: np.ndarray, models: Mapping[str, Any]) -> np.ndarray:
    """Each row's model by its card's name (a source's 'ResNet-50' is resnet50), so that a
    model's rows group together whatever name their source gave it."""
    if len(model) and (model == model[0]).all():  # the recommend path: one model
        return np.full(len(model), matching_card(models, str(model[0])) or model[0])
    names, index = np.unique(model, return_inverse=True)
    return np.array([matching_card(models, str(name)) or name for name in names],
                    dtype=str)[index.reshape(-1)]


def _card_names(configs: Mapping[str, Any], model: np.ndarray) -> np.ndarray:
    """The card of each configuration: its `card` where given, else its model's."""
    given = configs.get(CARD_KEY)
    if given is None:
        return model
    return np.array([str(card) if card else name for card, name in zip(given, model)])


def _columns(rows: list[Mapping[str, Any]]) -> dict[str, np.ndarray]:
    return {key: np.array([r.get(key) for r in rows], dtype=object)
            for key in CONFIG_KEYS + INPUT_SIZE_KEYS + LINK_KEYS
            + (CARD_KEY, HOST_KEY, LAYOUT_KEY, OPTIMIZER_KEY, XLA_KEY) + LAYOUT_KEYS}


def _trial_config(trial: Mapping[str, Any]) -> dict:
    """A store trial as a configuration (CONFIG_KEYS); FeatureError when it cannot be one."""
    if not trial.get("gpu_type"):
        raise FeatureError("CPU-only trial (no gpu_type)")
    if not (trial.get("batch_per_gpu") or 0) > 0:
        raise FeatureError("trial without batch_per_gpu")
    extra = trial.get("extra") if isinstance(trial.get("extra"), dict) else {}
    provider = trial.get("provider") or "local"
    return {
        "model": trial.get("model"), "gpu": trial["gpu_type"], "provider": provider,
        "sync": trial.get("sync") or "allreduce", "ps_count": trial.get("ps_count") or 0,
        "precision": trial.get("precision") or "fp32",
        "nodes": trial.get("nodes") or 1, "gpus_per_node": trial.get("gpus_per_node") or 1,
        "batch_per_gpu": trial["batch_per_gpu"], "spot": bool(trial.get("spot")),
        "network_gbps": _num(extra.get("network_gbps")) or network_gbps(provider, trial),
        "image_size": trial.get("image_size"), "seq_len": trial.get("seq_len"),
        CARD_KEY: extra.get(CARD_KEY), HOST_KEY: _num(extra.get(HOST_KEY)),
        OPTIMIZER_KEY: extra.get(OPTIMIZER_KEY), XLA_KEY: float(bool(extra.get(XLA_KEY))),
        LAYOUT_KEY: float(bool(extra[LAYOUT_KEY] if LAYOUT_KEY in extra
                               else is_published(str(trial.get("source") or "")))),
        "interconnect": extra.get("interconnect") or _catalog_links().get(
            (provider, trial.get("instance_type"))),
        # The layout it trained with (plain DDP unless the trial says otherwise).
        "accumulation": trial.get("accumulation", extra.get("accumulation")) or 1,
        "checkpointing": bool(trial.get("checkpointing", extra.get("checkpointing"))),
        "sharded": bool(trial.get("sharded", extra.get("sharded"))),
        "forward_backward_only": bool(extra.get("forward_backward_only")),
    }


def network_gbps(provider: str, trial: Mapping[str, Any]) -> float:
    """Per-node bandwidth of the trial's instance type from the catalog, else a default."""
    known = _catalog_bandwidth().get((provider, trial.get("instance_type")))
    return known or DEFAULT_NETWORK_GBPS.get(provider, 10.0)


@cache
def _catalog_offerings() -> tuple:
    import warnings

    try:
        from cloud.catalog import load_catalog
        with warnings.catch_warnings():  # only links are read here, never prices
            warnings.simplefilter("ignore")
            return tuple(load_catalog().offerings)
    except (ImportError, FileNotFoundError):
        return ()


@cache
def _catalog_bandwidth() -> dict[tuple[str, str], float]:
    return {(o.provider, o.instance_type): float(o.network_gbps) for o in _catalog_offerings()}


@cache
def _catalog_links() -> dict[tuple[str, str], str]:
    return {(o.provider, o.instance_type): o.interconnect for o in _catalog_offerings()}


def _input_scale(configs: Mapping[str, Any], cards: list[Mapping[str, Any]],
                 model_index: np.ndarray, n: int) -> np.ndarray:
    """Work per sample grows with pixels (image models) or tokens (text models) relative to
    the input size the card was computed at."""
    scale = np.ones(n)
    for key, power in (("image_size", 2.0), ("seq_len", 1.0)):
        if key not in configs:
            continue
        trained = np.array([_num(v) or np.nan for v in configs[key]], dtype=float)
        card = np.array([_num(c.get(key)) or np.nan for c in cards], dtype=float)[model_index]
        use = np.isfinite(trained) & np.isfinite(card) & (scale == 1.0)
        scale[use] = (trained[use] / card[use]) ** power
    return scale


def _or(value: float | None, missing: float) -> float:
    """`value`, or `missing` where it is None (a zero is a value)."""
    return missing if value is None else value


def _num(value: Any) -> float | None:
    if value in (None, ""):
        return None
    return float(value)
