"""Predict from a fitted performance-model artifact with numpy and json alone.

`advisor fit` writes the artifact (a versioned JSON document); `advisor recommend` reads it
here, so nothing on this path imports pandas, scikit-learn or torch. Predictions are
vectorised over arrays of candidates and each comes with an interval and a provenance:
`measured` (that configuration is in the training data), `interpolated` (model and GPU, or
provider, seen), `extrapolated` (neither: physics, priors and published figures carry it).
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import numpy as np

from advisor import anchoring, physics
from advisor.errors import AdvisorError
from advisor.physics import unique_keys
from advisor.sharding import plain_layout
from gpuadvisor import data
from gpuadvisor.textfile import unreadable
from gpuadvisor.vocab import PREDICTION_INTERVAL_LEVEL

log = logging.getLogger(__name__)

# 2: overhead priors by provider with sources, lifetime figure fits; 3: interval growth with
# distance (`doubling`) bounded by the physics `ceiling`; 4: convolution terms, software-stack
# effects, arithmetic units seen; 5: a `grouped_conv` term, the `gpu_peak` range axis; 6: TF32
# terms of their own (`compute_tf32`, `conv_tf32`); 7: cards without the operator split on
# terms of their own (`unsplit_fp32`, `unsplit_tensor`, `unsplit_tf32`)
SCHEMA_VERSION = 7
TARGETS = ("throughput", "startup_s", "checkpoint_s", "recovery_s")
PROVENANCE = ("measured", "interpolated", "extrapolated")  # from best to worst evidence
PREEMPTIBLE_CAP_S = 24 * 3600.0  # GCP stops a legacy preemptible VM after 24 h
# Axes whose trained range bounds an interval's calibration (`range_axis`).
RANGE_AXES = ("workers", "model_size", "gpu_peak")
UNIT_SEPARATOR = "|"  # between a stack and an arithmetic unit in `unit_effects`' keys


class ArtifactError(AdvisorError):
    """An artifact that cannot be read or used; the message names the fix."""


@dataclass(frozen=True)
class Prediction:
    value: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    provenance: np.ndarray
    level: float = PREDICTION_INTERVAL_LEVEL  # two-sided coverage [lo, hi] is calibrated for


@dataclass(frozen=True)
class NodeLifetime:
    """Weibull life of a node: P(alive at t) = exp(-(t/scale_s)**shape), cut at cap_s."""

    kind: str  # weibull | on-demand
    shape: float
    scale_s: float
    source: str
    cap_s: float = math.inf  # hard limit (24 h for GCP preemptible VMs)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if math.isinf(self.scale_s):
            return np.full(n, math.inf)
        return np.minimum(self.scale_s * rng.weibull(self.shape, n), self.cap_s)

    def survival(self, seconds) -> np.ndarray:
        t = np.asarray(seconds, dtype=float)
        alive = np.exp(-((t / self.scale_s) ** self.shape))
        return np.where(t >= self.cap_s, 0.0, alive)


def load_artifact(path: str | Path | None = None) -> Artifact:
    chosen = str(Path(path) if path else data.find("model_artifact.json"))
    artifact = _load(chosen)
    log.info("using %s (fitted %s)", chosen, artifact.doc.get("fitted_at"))
    return artifact


@cache
def _load(path: str) -> Artifact:
    try:
        with open(path) as handle:
            doc = json.load(handle)
    except FileNotFoundError:
        raise ArtifactError(f"no fitted model at {path}; run `advisor fit` to make one") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"fitted model {unreadable(path, exc)}") from None
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"{path} is not valid JSON ({exc}); refit with `advisor fit`") from None
    version = doc.get("schema_version") if isinstance(doc, dict) else None
    if version != SCHEMA_VERSION:
        raise ArtifactError(
            f"{path} has schema version {version!r}, this program reads {SCHEMA_VERSION}; "
            "refit with `advisor fit`")
    if problem := _malformed(doc):
        raise ArtifactError(f"{path} {problem}; refit with `advisor fit`")
    return Artifact(doc)


# The sections prediction reads, with the keys each must hold.
SECTIONS = {"throughput": ("coefficients",), "startup_s": ("vm_s", "first_step_s"),
            "checkpoint_s": ("targets",), "recovery_s": (), "lifetime": ()}


# The shapes of what throughput prediction reads (a hand-edited or truncated artifact is
# refused on load, naming the key, not with a traceback mid-prediction): NUMBER, TEXT, PAIR,
# a list or mapping of one shape, or a dict of named keys (those in OPTIONAL may be absent).
NUMBER, TEXT, PAIR = "a number", "text", "a [low, high] pair"
NUMBERS = ("a list", NUMBER)
THROUGHPUT_SHAPE = {
    # Every physics term: a fit writes them all, and one missing would be priced at its prior
    # without a word.
    "coefficients": {term: NUMBER for term in physics.TERMS},
    "correction": {"coef": NUMBERS, "high": NUMBERS, "low": NUMBERS, "mean": NUMBERS,
                   "scale": NUMBERS, "inputs": ("a list", TEXT), "intercept": NUMBER},
    "calibration": {"extrapolated": PAIR, "interpolated": PAIR, "measured": PAIR,
                    "ceiling": PAIR, "novel": ("a mapping", PAIR), "range": ("a mapping", PAIR),
                    "doubling": ("a mapping", (NUMBER, None))},
    "seen": {"configs": ("a mapping", NUMBERS), "model_gpu": ("a mapping", NUMBERS),
             "units": ("a list", TEXT), "stacks": ("a list", TEXT),
             "evidence": ("a mapping", NUMBERS)},
    "software_effects": ("a mapping", NUMBER), "framework_effects": ("a mapping", NUMBER),
    "unit_effects": ("a mapping", NUMBER), "software_spread": ("a mapping", NUMBER),
    "code_effects": ("a mapping", NUMBER), "code_unit_effects": ("a mapping", NUMBER),
    "release_effects": ("a mapping", NUMBER), "host_effects": ("a mapping", NUMBER),
    "anchors": {"length_scale": NUMBER, "noise_share": NUMBER,
                "cells": ("a mapping", {"x": ("a list", NUMBERS), "weights": NUMBERS})},
}
# What a fit on no data, or on data without software stacks, leaves out; prediction does
# without them. A calibration's `novel` spreads need its `ceiling`, its `range` its `doubling`.
OPTIONAL = {"software_effects", "framework_effects", "unit_effects", "software_spread",
            "code_effects", "code_unit_effects", "release_effects", "host_effects", "anchors",
            "interpolated", "measured", "ceiling", "novel", "range", "doubling", "units",
            "stacks", "evidence"}
NEEDS = {"novel": "ceiling", "range": "doubling"}


def _malformed(doc: dict) -> str | None:
    """What makes a document of the right schema version unusable: a section or key missing,
    a value of the wrong type where throughput prediction reads it, or a number that is NaN
    or infinite (a fit never writes one)."""
    for section, keys in SECTIONS.items():
        part = doc.get(section)
        if not isinstance(part, dict):
            return f"lacks the {section} section"
        if missing := [key for key in keys if key not in part]:
            return f"lacks {section}.{missing[0]}"
    if problem := _wrong_shape(doc["throughput"], THROUGHPUT_SHAPE, "throughput"):
        return problem
    if problem := _uneven_anchors(doc["throughput"].get("anchors")):
        return problem
    calibration = doc["throughput"]["calibration"]
    if missing := [needed for key, needed in NEEDS.items()
                   if key in calibration and needed not in calibration]:
        return f"lacks throughput.calibration.{missing[0]}"
    if where := _non_finite(doc, ""):
        return f"holds a NaN or infinite number at {where}"
    return None


def _uneven_anchors(anchors: dict | None) -> str | None:
    """An anchoring cell whose points are not (log batch, log workers) pairs, one weight each."""
    for key, cell in (anchors or {}).get("cells", {}).items():
        if len(cell["x"]) != len(cell["weights"]) or any(len(p) != 2 for p in cell["x"]):
            return (f"holds {len(cell['x'])} points for {len(cell['weights'])} weights, or a "
                    f"point without its two coordinates, at throughput.anchors.cells.{key}")
    return None


def _wrong_shape(value, shape, where: str) -> str | None:
    """What in `value` does not have `shape` (THROUGHPUT_SHAPE's vocabulary), or None."""
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return f"holds something other than a mapping at {where}"
        for key, inner in shape.items():
            if key not in value:
                if key in OPTIONAL:
                    continue
                return f"lacks {where}.{key}"
            if problem := _wrong_shape(value[key], inner, f"{where}.{key}"):
                return problem
        return None
    if isinstance(shape, tuple) and shape[0] in ("a list", "a mapping"):
        kind, inner = shape
        container = list if kind == "a list" else dict
        if not isinstance(value, container):
            return f"holds something other than {kind} at {where}"
        items = value.items() if container is dict else enumerate(value)
        return next((problem for key, item in items
                     if (problem := _wrong_shape(item, inner, f"{where}.{key}"))), None)
    allowed = shape if isinstance(shape, tuple) else (shape,)
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if (None in allowed and value is None) or (NUMBER in allowed and number) or (
            TEXT in allowed and isinstance(value, str)) or (
            PAIR in allowed and isinstance(value, list) and len(value) == 2
            and not _wrong_shape(value, NUMBERS, where)):
        return None
    return f"holds something other than {' or '.join(str(a) for a in allowed)} at {where}"


def _non_finite(value, where: str) -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return where
    items = (value.items() if isinstance(value, dict)
             else enumerate(value) if isinstance(value, list) else ())
    return next((found for key, item in items
                 if (found := _non_finite(item, f"{where}.{key}".lstrip(".")))), None)


class Artifact:
    def __init__(self, doc: dict):
        self.doc = doc

    def predict(self, target: str, features: dict) -> Prediction:
        if target not in TARGETS:
            raise ArtifactError(f"unknown target {target!r}; targets are {', '.join(TARGETS)}")
        if not isinstance(features, physics.Encoded):  # callers may share one across targets
            features = physics.Encoded(features)
        prediction = getattr(self, f"_predict_{target}")(features)
        return replace(prediction, level=self.doc.get("interval_level", PREDICTION_INTERVAL_LEVEL))

    # -- throughput ---------------------------------------------------------------------

    def step_time(self, features: dict) -> np.ndarray:
        """Model seconds per step of one worker: physics times the learned correction and the
        anchor to measurements of the same model on the same GPU (advisor/anchoring.py), for
        the reference software stack (PyTorch), or for the stack named in an optional
        `software` feature where the fit has seen it (`software_effects`; `advisor evaluate`
        names the stack that measured a held-out row, `recommend` names none)."""
        spec = self.doc["throughput"]
        seconds = physics.step_time(features, spec["coefficients"], _host_scale(spec, features))
        log_factor = _correction(spec["correction"], features) - anchoring.anchor(
            spec.get("anchors"), features)
        if "software" in features and spec.get("software_effects"):
            names, codes = physics.codes(features, "software")
            effect = [_stack_prior(spec, name)[0] for name in names]
            log_factor = log_factor - np.array(effect, dtype=float)[codes]
            log_factor = log_factor - _unit_effect(spec, features, names, codes)
        return seconds * np.exp(log_factor)

    def _predict_throughput(self, features: dict) -> Prediction:
        spec = self.doc["throughput"]
        value = physics.cluster_throughput(features, self.step_time(features))
        measured = spec["seen"]["configs"]
        keys, inverse = unique_keys(*(physics.codes(features, physics.identity(features, c))
                                      for c in CONFIG_COLUMNS),
                                    physics.nchw_transposes(features))
        is_measured = np.array([k in measured for k in keys], dtype=bool)[inverse]
        workers = range_axis(features, "workers")
        is_measured &= plain_layout(features, len(value))  # a measurement is of plain DDP
        pairs = (physics.codes(features, "model"),
                 physics.codes(features, physics.identity(features, "gpu")))
        lo_w = _lookup({k: v[0] for k, v in spec["seen"]["model_gpu"].items()}, pairs, np.inf)
        hi_w = _lookup({k: v[1] for k, v in spec["seen"]["model_gpu"].items()}, pairs, -np.inf)
        interpolated = (workers >= lo_w) & (workers <= hi_w) & ~is_measured
        provenance = np.where(is_measured, "measured",
                              np.where(interpolated, "interpolated", "extrapolated"))
        lo, hi = _interval(spec["calibration"], value, provenance)
        lo, hi = _widen_where_novel(spec, features, provenance, value, lo, hi)
        lo, hi = _widen_for_unseen_stacks(spec, features, value, lo, hi)
        # Nothing runs faster than its GPUs' peak: a physical bound on any interval.
        bound = physics.peak_throughput(features)
        value, hi = np.minimum(value, bound), np.minimum(hi, bound)
        lo = np.minimum(lo, value)
        if is_measured.any():  # a measured configuration answers with its measurements
            rows = np.array([measured.get(k, [np.nan] * 3) for k in keys], dtype=float)[inverse]
            rows = rows[is_measured]
            value, lo, hi = value.copy(), lo.copy(), hi.copy()
            value[is_measured] = rows[:, 0]
            # A measurement repeated elsewhere varies by more than its own confidence
            # interval (a published figure has none): never narrower than the calibration.
            spread_lo, spread_hi = _interval(spec["calibration"], rows[:, 0],
                                             np.full(len(rows), "measured"))
            lo[is_measured] = np.minimum(rows[:, 1], spread_lo)
            hi[is_measured] = np.maximum(rows[:, 2], spread_hi)
        return Prediction(value, lo, hi, provenance)

    def measured_by(self, features: dict) -> list[str | None]:
        """Whose figures each row's `measured` answer is, in words (the fit's `seen.stacks`
        and `seen.evidence`: fitting.measured_evidence); None where the row is not answered
        `measured` or the artifact does not say."""
        seen = self.doc["throughput"]["seen"]
        stacks, evidence = seen.get("stacks", []), seen.get("evidence", {})
        provenance = self.predict("throughput", features).provenance
        return ["; ".join(stacks[int(i)] for i in evidence[key] if 0 <= i < len(stacks))
                if answer == "measured" and key in evidence else None
                for key, answer in zip(config_keys(features).tolist(), provenance)]

    # -- overheads ----------------------------------------------------------------------

    def _predict_startup_s(self, features: dict) -> Prediction:
        spec = self.doc["startup_s"]
        vm = _grouped(spec["vm_s"], features)
        first = _grouped(spec["first_step_s"], features)
        worse = np.maximum(_rank(vm.provenance), _rank(first.provenance))
        return Prediction(vm.value + first.value, vm.lo + first.lo, vm.hi + first.hi,
                          np.array(PROVENANCE)[worse])

    def overhead_sources(self, provider: str, gpu: str, spot: bool) -> dict:
        """Seconds and source of each overhead of one market (what `--explain` prints)."""
        parts = {"vm_s": self.doc["startup_s"]["vm_s"],
                 "first_step_s": self.doc["startup_s"]["first_step_s"],
                 "recovery_s": self.doc["recovery_s"]}
        out = {}
        for name, spec in parts.items():
            seconds, source = grouped_source(spec, provider, gpu, spot)
            out[name] = {"seconds": round(float(seconds), 1), "source": source}
        target = "local" if provider.lower() == "local" else "bucket"
        fit = self.doc["checkpoint_s"]["targets"][target]
        out["checkpoint_s"] = {"source": (
            f"fitted: {fit['n']} saves to a {target} ({', '.join(fit['models'])})" if fit["n"]
            else f"prior: stated {fit['fixed_s']:g} s + {1e-6 / fit['s_per_byte']:g} MB/s to a "
                 f"{target} (no save to one measured)")}
        return out

    def _predict_recovery_s(self, features: dict) -> Prediction:
        return _grouped(self.doc["recovery_s"], features)

    def _predict_checkpoint_s(self, features: dict) -> Prediction:
        spec = self.doc["checkpoint_s"]
        n = len(features["model"])
        nbytes = np.asarray(features["params"], float) * spec["bytes_per_param"]
        local = physics.is_in(features, "provider", ["local"])
        value, provenance = np.empty(n), np.full(n, "extrapolated", dtype=object)
        for where, name in ((local, "local"), (~local, "bucket")):
            fit = spec["targets"][name]
            value[where] = fit["fixed_s"] + fit["s_per_byte"] * nbytes[where]
            low, high = fit["bytes_range"]
            provenance[where & (nbytes >= low) & (nbytes <= high)] = "interpolated"
            seen = physics.is_in(features, "model", [m.lower() for m in fit["models"]])
            provenance[where & seen] = "measured"
        provenance = provenance.astype(str)
        lo, hi = _interval(spec["calibration"], value, provenance)
        return Prediction(value, lo, hi, provenance)

    # -- revocations --------------------------------------------------------------------

    def lifetime(self, provider: str, gpu: str, region: str, spot: bool,
                 interruption_bucket: str | None = None,
                 preemptible: bool = False) -> NodeLifetime:
        """The node-life model of a market: the provider's own measured lives, else the AWS
        Spot Instance Advisor's bucket of the market (`cloud.catalog.spot_market`, which the
        caller looks up: this reads no file), else the published curve of the region, else
        the stated prior. `preemptible`: a legacy GCP preemptible VM, stopped after 24 h,
        rather than a Spot VM (no cap)."""
        if not spot:
            return NodeLifetime("on-demand", 1.0, math.inf, "on-demand nodes are not revoked")
        spec = self.doc["lifetime"]
        provider, gpu, region = provider.lower(), _gpu_key(gpu), region.lower()
        fitted = {(r["provider"], r["gpu"], r["region"]): r for r in spec["fitted"]}
        for key in ((provider, gpu, region), (provider, gpu, "*"), (provider, "*", "*")):
            if key in fitted:
                row = fitted[key]
                return NodeLifetime("weibull", row["shape"], row["scale_s"],
                                f"fitted: {row['events']} revocations in {row['n']} lives "
                                f"({'/'.join(key)})")
        if provider == "aws" and interruption_bucket in spec["aws_buckets"]:
            return NodeLifetime("weibull", 1.0, spec["aws_buckets"][interruption_bucket],
                            "prior: AWS Spot Instance Advisor interruption frequency "
                            f"{interruption_bucket}")
        for row in spec.get("figure", []):  # published curves of the market's own region
            if (row["provider"], row["region"]) == (provider, region):
                if preemptible:
                    return NodeLifetime("weibull", row["shape"], row["scale_s"],
                                        "published: " + row["source"], row["cap_s"])
                return NodeLifetime("weibull", row["shape"], row["scale_s"],
                                    f"published: {row['source']}; Spot VMs have no 24 h cap "
                                    "(assumption: otherwise reclaimed like preemptible VMs)")
        for row in spec["prior"]:  # most specific first
            if row["provider"] == provider and row["gpu"] in ("*", gpu) and \
                    row["region"] in ("*", region):
                cap = math.inf if row["cap_s"] is None else row["cap_s"]
                if preemptible and provider == "gcp":
                    cap = min(cap, PREEMPTIBLE_CAP_S)
                return NodeLifetime("weibull", row["shape"], row["scale_s"],
                                    "prior: " + row["source"], cap)
        raise ArtifactError(f"no lifetime model for {provider} spot nodes; refit with a prior")


# What makes two rows the same configuration; the work per sample tells apart the input sizes
# a model was measured at (BERT-Large at 128 and at 384 tokens are different measurements),
# and, after them, whether cuDNN transposes its convolutions (physics.nchw_transposes: a
# ResNet-50 in AMP kept channels-last is not the NCHW one; a BERT in either format is one).
CONFIG_COLUMNS = ("model", "gpu", "precision", "sync", "nodes", "gpus_per_node",
                  "batch_per_gpu", "ps_count", "flops_per_sample")


def config_keys(features: dict) -> np.ndarray:
    """One string per row naming a training configuration exactly."""
    keys, inverse = unique_keys(*(features[physics.identity(features, c)]
                                  for c in CONFIG_COLUMNS),
                                physics.nchw_transposes(features))
    return np.array(keys, dtype=str)[inverse]


def _lookup(table: dict, columns, default=np.nan) -> np.ndarray:
    """table['a|b'] for every row of the columns, `default` where absent."""
    keys, inverse = unique_keys(*columns)
    return np.array([table.get(k, default) for k in keys], dtype=float)[inverse]


def _gpu_key(gpu: str) -> str:
    return str(gpu).lower()


def _correction(spec: dict, features: dict) -> np.ndarray:
    if not spec["inputs"]:
        return np.zeros(len(features["model"])) + spec["intercept"]
    inputs = physics.correction_inputs(features)
    z = np.column_stack([inputs[name] for name in spec["inputs"]])
    z = np.clip(z, spec["low"], spec["high"])  # corrections never extrapolate; physics does
    return ((z - spec["mean"]) / spec["scale"]) @ np.asarray(spec["coef"]) + spec["intercept"]


def _interval(calibration: dict, value: np.ndarray, provenance: np.ndarray):
    """Split-conformal quantiles of log(measured / predicted), per provenance."""
    lo, hi = np.empty_like(value), np.empty_like(value)
    for name in PROVENANCE:
        q_lo, q_hi = calibration.get(name, calibration["extrapolated"])
        where = provenance == name
        lo[where], hi[where] = value[where] * math.exp(q_lo), value[where] * math.exp(q_hi)
    return lo, hi


def range_axis(features: dict, axis: str) -> np.ndarray:
    """A configuration's value on a RANGE_AXES axis: workers in the cluster, the model's
    FLOPs per sample (its size at the input size trained), or the sustained peak TFLOPS its
    arithmetic runs under (a GPU far slower or faster than any trained on, K80 against
    P100s, is an extrapolation in size like a larger cluster)."""
    if axis == "workers":
        return np.asarray(features["nodes"], float) * np.asarray(features["gpus_per_node"], float)
    if axis == "gpu_peak":
        return physics.effective_peak_tflops(features)
    return np.asarray(features["flops_per_sample"], float)


# MLPerf Training's closed-division submissions (code cited from mlcommons' training_results
# repositories) are a family of stacks of their own, beside their framework's: their rules let
# each submitter optimise the implementation (NVIDIA's, which partners reuse, fuses kernels,
# runs NHWC with DALI and CUDA graphs), so what they share says nothing of another MXNet
# code's speed. Grouped with MXNet, 13 submissions among its 14 stacks had made every new
# MXNet stack 1.58x faster than PyTorch's reference.
MLPERF_CODE = "mlcommons/training_results"
MLPERF_FAMILY = " (mlperf)"
# A stack that records versions but no framework: the package whose version it records.
VERSIONED_FRAMEWORKS = (("torch", "pytorch"), ("tensorflow", "tensorflow"), ("mxnet", "mxnet"),
                        ("jax", "jax"))


def recorded_software(stack: str) -> dict | None:
    """What a `software_label` records after its source (container, framework, versions,
    code base), or None where that is no JSON object."""
    try:
        software = json.loads(stack.partition(" ")[2])
    except ValueError:
        return None
    return software if isinstance(software, dict) else None


def framework(stack: str) -> str:
    """The framework of a `software_label` (lower case): the recorded `framework`, else torch
    or tensorflow where their versions are recorded, else 'unknown'; an MLPerf Training
    submission's is its framework's MLPerf family (`mxnet (mlperf)`, MLPERF_FAMILY)."""
    software = recorded_software(stack)
    if software is None:
        return "unknown"
    name = str(software["framework"]).lower() if software.get("framework") else next(
        (name for key, name in VERSIONED_FRAMEWORKS if key in software), "unknown")
    mlperf = str(software.get("code", "")).startswith(MLPERF_CODE)
    return f"{name}{MLPERF_FAMILY}" if mlperf and not name.endswith(MLPERF_FAMILY) else name


def code_label(stack: str) -> str | None:
    """The code base of a `software_label`: its source with the code base it records and its
    `framework`, in the label's own form (so `framework` reads the same from both); None where
    it names no code base (the profiler's and CM-DARE's stacks)."""
    software = recorded_software(stack)
    if software is None or not software.get("code"):
        return None
    kept = {"code": software["code"], "framework": framework(stack)}
    return f"{stack.partition(' ')[0]} {json.dumps(kept, sort_keys=True)}"


# NVIDIA's NGC containers are named by year and month, however a source spells them
# (`pytorch-21.03 container`, `nvcr.io/nvidia/pytorch:22.09-py3`, `NGC PyTorch 23.04`): two
# digits from 17 (the first NGC year) and a month, not part of a longer version number.
CONTAINER_RELEASE = re.compile(r"(?<![\d.])(1[7-9]|[2-9]\d)\.(0[1-9]|1[0-2])(?![\d.])")


def release_label(stack: str) -> str | None:
    """The library generation of a `software_label`: its framework and the year of the NGC
    container it ran in (`pytorch 2021` for `pytorch-21.03 container`); None where it records
    no dated container."""
    software = recorded_software(stack)
    if software is None:
        return None
    match = CONTAINER_RELEASE.search(str(software.get("container", "")))
    return f"{framework(stack)} 20{match[1]}" if match else None


def host_label(stack: str) -> str:
    """The hosts a `software_label`'s figures ran on, as `host_effects` keys them: its code
    base's machines (`code_label`), else its own stack's."""
    return code_label(stack) or stack


def _host_scale(spec: dict, features: dict) -> np.ndarray | None:
    """How much slower than the reference each row's host runs a step's Python: its code
    base's hosts' (its stack's where it cites none) where the fit saw them (`host_effects`),
    else 1, the reference host a `recommend` query is priced on; None where rows name no stack
    or the fit has none."""
    table = _lower_keys(spec.get("host_effects", {}))
    if "software" not in features or not table:
        return None
    names, codes = physics.codes(features, "software")
    return np.exp(np.array([table.get(host_label(name), 0.0) for name in names],
                           dtype=float)[codes])


def _lower_keys(table: dict) -> dict:
    return {name.lower(): value for name, value in table.items()}


def _stack_prior(spec: dict, stack: str) -> tuple[float, float]:
    """(log effect on throughput, log spread of its own effect still unknown) of a software
    stack (lower-cased `software_label`): its fitted effect where the fit saw it; else, for a
    new container of a code base the fit saw, that code base's (`code_effects`, its
    framework's included); else its framework's; else the reference's (0); plus what its
    container's release year adds where the fit saw that year (`release_effects`). The spread of an
    unseen stack is that of the fitted stacks around their frameworks, or around the
    reference (`software_spread`). A stack is a random effect: one the fit never saw (another
    lab's container) is a draw from that spread. A row that names no stack has no spread."""
    stacks = _lower_keys(spec.get("software_effects", {}))
    if stack in stacks:
        return stacks[stack], 0.0
    effect = _lower_keys(spec.get("code_effects", {})).get(code_label(stack) or "")
    if effect is None:
        effect = spec.get("framework_effects", {}).get(framework(stack))
    release = _lower_keys(spec.get("release_effects", {})).get(release_label(stack) or "")
    if release is not None:
        effect = (effect or 0.0) + release
    spread = 0.0 if stack in ("", "0") else spec.get("software_spread", {}).get(
        "any" if effect is None else "within_framework", 0.0)
    return (0.0 if effect is None else effect), spread


def unit_keys(stacks, units) -> np.ndarray:
    """`unit_effects`' keys: each stack (`software_label`) with the arithmetic unit it ran on."""
    return np.char.add(np.char.add(np.asarray(stacks, dtype=str), UNIT_SEPARATOR),
                       np.asarray(units, dtype=str))


def _unit_effect(spec: dict, features: dict, stacks: np.ndarray, codes: np.ndarray
                 ) -> np.ndarray:
    """Log effect on throughput of each row's stack (`stacks[codes]`, lower-cased) on the
    row's arithmetic unit, beyond the stack's own (`unit_effects`); where the fit never saw
    the stack on that unit, its code base's there (`code_unit_effects`), else 0. Keys are
    built once per distinct stack and unit, not per row."""
    table = _lower_keys(spec.get("unit_effects", {}))
    if not table:
        return np.zeros(len(codes))
    by_code = _lower_keys(spec.get("code_unit_effects", {}))
    units, unit_codes = np.unique(physics.arithmetic_unit(features).astype(str),
                                  return_inverse=True)
    pairs, inverse = np.unique(codes * len(units) + unit_codes.reshape(-1), return_inverse=True)
    pair_stacks, pair_units = stacks[pairs // len(units)], units[pairs % len(units)]
    keys = unit_keys(pair_stacks, pair_units)
    code_keys = unit_keys([code_label(s) or "" for s in pair_stacks], pair_units)
    return np.array([table.get(key, by_code.get(code, 0.0)) for key, code in
                     zip(keys, code_keys)], dtype=float)[inverse.reshape(-1)]


def _widen_for_unseen_stacks(spec: dict, features: dict, value, lo, hi):
    """Intervals of rows measured by a stack the fit never saw (`advisor evaluate` on another
    source), widened in quadrature by its own effect's spread (`_stack_prior`)."""
    if "software" not in features or not spec.get("software_spread"):
        return lo, hi
    names, codes = physics.codes(features, "software")
    q = np.array([_stack_prior(spec, name)[1] for name in names], dtype=float)[codes]
    with np.errstate(divide="ignore", invalid="ignore"):
        below = np.sqrt(np.log(value / lo) ** 2 + q ** 2)
        above = np.sqrt(np.log(hi / value) ** 2 + q ** 2)
    return (np.where(q > 0, value * np.exp(-below), lo),
            np.where(q > 0, value * np.exp(above), hi))


def _widen_where_novel(spec: dict, features: dict, provenance: np.ndarray, value, lo, hi):
    """Extrapolated intervals on axes the training data never covered (a model, a GPU, an
    arithmetic unit, a cluster or model size outside the trained range): the held-out spread
    of each such axis, combined in quadrature, never narrower than the plain extrapolated
    spread. A range axis's spread grows as sqrt(1 + d / doubling) with its log distance d
    beyond the trained range (calibrate's measured growth), up to the `ceiling` (the physics
    priors' own error: what is left when the fitted terms know nothing of a configuration)
    or its own calibrated spread, whichever is wider: however far out, an interval is
    bounded."""
    calibration, seen = spec["calibration"], spec["seen"]["model_gpu"]
    novel = calibration.get("novel")
    extrapolated = provenance == "extrapolated"
    if not novel or not seen or not extrapolated.any():
        return lo, hi
    pairs = [key.split("|", 1) for key in seen]
    unseen = {"model": ~physics.is_in(features, "model", sorted({m for m, _ in pairs})),
              "gpu": ~physics.is_in(features, physics.identity(features, "gpu"),
                                    sorted({g for _, g in pairs}))}
    if "units" in spec["seen"]:  # the arithmetic unit (tensor cores in 16 bits, TF32, FP32)
        unseen["unit"] = ~np.isin(physics.arithmetic_unit(features), spec["seen"]["units"])
    growth = {"model": 1.0, "gpu": 1.0, "unit": 1.0}
    for axis, (low, high) in calibration.get("range", {}).items():
        values = range_axis(features, axis)
        distance = np.log(np.maximum(values / high, low / values))
        unseen[axis] = distance > 0
        doubling = calibration["doubling"].get(axis)
        growth[axis] = 1.0 if doubling is None else np.sqrt(1 + np.maximum(distance, 0) / doubling)
    below, above = np.zeros(len(value)), np.zeros(len(value))
    for axis, (q_lo, q_hi) in novel.items():
        new = unseen.get(axis, False) & extrapolated
        spreads = []
        for q, ceiling in ((-q_lo, -calibration["ceiling"][0]), (q_hi, calibration["ceiling"][1])):
            q = max(q, 0.0)
            spreads.append(np.minimum(q * growth.get(axis, 1.0), max(q, ceiling)))
        below += np.where(new, spreads[0] ** 2, 0.0)
        above += np.where(new, spreads[1] ** 2, 0.0)
    base_lo, base_hi = calibration["extrapolated"]
    lo, hi = lo.copy(), hi.copy()
    lo[extrapolated] = (value * np.exp(-np.sqrt(np.maximum(below, base_lo ** 2))))[extrapolated]
    hi[extrapolated] = (value * np.exp(np.sqrt(np.maximum(above, base_hi ** 2))))[extrapolated]
    return lo, hi


def _rank(provenance: np.ndarray) -> np.ndarray:
    return np.select([provenance == p for p in PROVENANCE], [0, 1, 2], 2)


def _grouped(spec: dict, features: dict) -> Prediction:
    """Median of the most specific group of the row's own provider that was measured:
    (provider, gpu, spot), (provider, spot), provider; else the provider's cited prior. Never
    another provider's figures: local processes do not stand in for a cloud."""
    provider, gpu = physics.codes(features, "provider"), physics.codes(features, "gpu")
    spot = physics.factorize(np.asarray(features["spot"], bool).astype(int))
    n = len(spot[1])
    value = np.full(n, np.nan)
    rank = np.full(n, 2)
    levels = (((provider, gpu, spot), 0), ((provider, spot), 1), ((provider,), 1))
    for columns, level in levels:
        todo = np.flatnonzero(np.isnan(value))
        if not todo.size:
            break
        found = _lookup(spec["groups"], [(names, codes[todo]) for names, codes in columns])
        hit = ~np.isnan(found)
        value[todo[hit]], rank[todo[hit]] = found[hit], level
    todo = np.flatnonzero(np.isnan(value))
    if todo.size:
        keys, inverse = unique_keys(*((names, codes[todo]) for names, codes in (provider, spot)))
        value[todo] = np.array([prior_for(spec, *key.split("|"))["s"] for key in keys])[inverse]
    provenance = np.array(PROVENANCE)[rank]
    lo, hi = _interval(spec["calibration"], value, provenance)
    return Prediction(value, lo, hi, provenance)


def prior_for(spec: dict, provider: str, spot: str) -> dict:
    """The cited prior of a provider's market (spot '1' or '0'): its own, else its any-market
    row, else the row every provider shares ('*|*', an assumption that says so)."""
    for key in (f"{provider}|{spot}", f"{provider}|*", f"*|{spot}", "*|*"):
        if key in spec["prior"]:
            return spec["prior"][key]
    raise ArtifactError(f"no start-up or recovery evidence for provider {provider!r}: measure "
                        f"it with `profiler sweep` on {provider} and refit with `advisor fit`")


def grouped_source(spec: dict, provider: str, gpu: str, spot: bool) -> tuple[float, str]:
    """(seconds, where they come from) of one market, as `_grouped` chooses them."""
    provider, gpu, flag = provider.lower(), _gpu_key(gpu), str(int(spot))
    for key in (f"{provider}|{gpu}|{flag}", f"{provider}|{flag}", provider):
        if key in spec["groups"]:
            count = spec.get("counts", {}).get(key)
            return spec["groups"][key], (f"measured: median of {count} profiler runs "
                                         f"({key.replace('|', '/')})")
    prior = prior_for(spec, provider, flag)
    return prior["s"], "prior: " + prior["source"]
