"""Fit the performance models on a measurement store; build the artifact document.

Throughput: the physical step-time model of advisor/physics.py with its few coefficients
fitted by non-negative least squares on relative error, pulled towards physical priors, then
a ridge log-linear correction on transferable features, then split-conformal intervals from
held-out folds. Overheads (start-up, recovery) are medians of the most specific group of the
same provider, over cited priors per provider (advisor/overheads.py); checkpoint time is a
fixed cost plus bytes over bandwidth. pandas, scikit-learn and scipy are imported inside the
functions: this module is never on the recommend path. Deterministic.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

from advisor import anchoring, physics
from advisor.artifact import (
    RANGE_AXES,
    SCHEMA_VERSION,
    Artifact,
    code_label,
    config_keys,
    framework,
    host_label,
    range_axis,
    recorded_software,
    release_label,
    unit_keys,
)
from advisor.errors import AdvisorError
from advisor.features import model_features, take, trial_features
from advisor.importers.published import is_suspect
from advisor.sharding import steps_optimizer
from gpuadvisor import data
from gpuadvisor.vocab import PREDICTION_INTERVAL_LEVEL, is_published

# Fixed a priori, never tuned on evaluation folds: a prior row weighs as much as one
# measured configuration.
PRIOR_STRENGTH = 1.0
# Input pipelines, as a published row's software names them, that pad a batch only to its
# longest sequence (datasets/README.md: the LDDL-binned BERT phase-2 rows). Their rows are
# priced at their mean padded length (`mean_seq_len`), an estimate, so their stacks never set
# the reference a plain, padded job is priced at.
WORK_SKIPPING_PIPELINES = ("sequence binning",)
# A published row's citation: `published: owner/repo path/to/file@commit; ...`.
CITED_FILE = re.compile(r"published:\s*(\S+/\S+)\s+(\S+?)@")
# The reference stacks' offsets (fit_throughput_core) average to zero over their rows on each
# arithmetic unit: this weight makes that a near-hard constraint.
MEAN_OFFSET_WEIGHT = 100.0
# No operator runs faster than its unit's datasheet peak or the DRAM bandwidth: the GEMM,
# unsplit-card and memory coefficients (inverse efficiencies of a large matrix product, a whole
# model, a streaming kernel) are at least 1, the convolution ones at least the convolutions'
# stated relative efficiency (a convolution at the peak by its direct FLOP count; a grouped one
# at the peak, or at the DRAM bandwidth where its traffic binds). The other terms are only
# non-negative.
LOWER_LOG_BOUND = np.array([
    0.0 if term in ("compute_fp32", "compute_tensor", "compute_tf32", "unsplit_fp32",
                    "unsplit_tensor", "unsplit_tf32", "memory")
    else math.log(physics.RELATIVE_EFFICIENCY["conv"])
    if term in ("conv_fp32", "conv_tensor", "conv_tf32")
    else math.log(physics.RELATIVE_EFFICIENCY["grouped_conv"]) if term == "grouped_conv"
    else -np.inf for term in physics.TERMS])
# A coefficient this close to its bound (in log) sits on it.
AT_BOUND_LOG_TOLERANCE = 1e-3


def bound_meaning(term: str) -> str:
    """What a bounded term's bound is, in a user's words."""
    if term == "memory":
        return "the datasheet DRAM bandwidth"
    if term.startswith(("conv_", "grouped_conv")):
        return "its stated share of the datasheet peak"
    return "the datasheet peak"


def terms_at_bound(coefficients: dict[str, float]) -> list[str]:
    """The terms whose fitted coefficient sits on its physical bound (LOWER_LOG_BOUND): the
    fit wanted that unit faster than its datasheet allows, so it is paying there for an error
    elsewhere (another term's over-counted work, a card's missing traffic)."""
    return [term for term, low in zip(physics.TERMS, LOWER_LOG_BOUND)
            if np.isfinite(low) and term in coefficients
            and math.log(coefficients[term]) - low < AT_BOUND_LOG_TOLERANCE]


# The correction's ridge penalty is chosen inside each fit by leave-one-model-out on that
# fit's own training data (nested in any evaluation), from this grid; few models: the largest.
RIDGE_ALPHAS = (0.1, 1.0, 10.0, 100.0, 1000.0)
# Priors of the per-tensor terms are chosen the same way when the training data exercise
# them: the PS value (100 us) was first read off CM-DARE rows that sit in the evaluation
# folds, and held-out error moves with both, so no figure may rest on them. Log grids, one
# term after the other (the PS term first: it binds hardest).
TUNED_PRIORS = {"ps_server_tensor": (1e-5, 3e-5, 1e-4, 3e-4, 1e-3),
                "tensor_memory": (1e5, 1e6, 1e7)}
# Axes on which a configuration can lie outside the training data, each with its own held-out
# interval spread (calibrate): a model or a GPU never seen, a cluster size or a model size
# beyond the trained range (RANGE_AXES).
NOVEL_AXES = ("model", "gpu", "unit", *RANGE_AXES)
# Cuts a range axis is held out at (calibrate): its growth with distance is measured, not
# assumed.
RANGE_CUTS = 4
# At most this many inner folds when calibration holds out whole models or GPUs: one fit per
# fold, nested in every outer fold of an evaluation, so one fold per group made the cost
# grow with the square of the models (92 models: about 130 fits per outer fold).
INNER_GROUP_FOLDS = 10
CORRECTION_INPUTS = ("log_flops", "log_batch", "log_peak", "log_workers", "log_intensity")
MISCOVERAGE = 1 - PREDICTION_INTERVAL_LEVEL
SEED = 0
# Fallback interval half-widths (log scale) when too few held-out residuals exist.
DEFAULT_SPREAD = {"measured": math.log(1.2), "interpolated": math.log(1.5),
                  "extrapolated": math.log(2.0)}
CHECKPOINT_PRIOR = {"local": (0.05, 1 / 1e9), "bucket": (1.0, 1 / 100e6)}  # (fixed s, s/byte)
BYTES_PER_PARAM_PRIOR = 12.0  # fp32 weights plus two Adam moments


class FitError(AdvisorError, ValueError):
    """Data that cannot be fitted; the message names the fix."""


# -- throughput ---------------------------------------------------------------------------

def source_family(source: str) -> str:
    """Where a trial's figure comes from, as `--split source` holds it out: `published`
    (NVIDIA's and MLPerf's figures) or `published:NAME` (another benchmark's, imported with
    `--source NAME`), an import (`import:cmdare` -> `cmdare`), or `profiler` (this project's
    own runs: local, gcp, aws)."""
    if is_published(source):
        return source
    if source.startswith("import:"):
        return source.removeprefix("import:")
    return "profiler"


def throughput_data(store, include_published: bool = True, exclude_software=()):
    """(features, throughput, measured [value, lo, hi] per configuration, skip reasons), one
    row per distinct configuration and software stack (repeats reduced to their median), the
    stack named in features["software"] (`software_label`) and its source family in
    features["source"] (`source_family`; `--split source` holds it out). `measured` is keyed
    by configuration alone (`measured_configs`). Trials whose recorded software (container,
    framework, versions) contains any of `exclude_software` are left out, so that superseded
    releases can be set aside; so are figures their own source contradicts
    (`extra.suspect`: a published 1-GPU figure far below its own 8-GPU one), and
    this project's runs of an implementation their card no longer describes (`extra.suspect`
    says which: the H200 GNMT trial that ran the zoo's written-out LSTM)."""
    import pandas as pd

    sql = "SELECT * FROM trials WHERE status = 'finished' AND throughput > 0"
    trials = store.query(sql)
    if not include_published:
        trials = [t for t in trials if not is_published(t["source"])]
    suspect = [is_suspect(t) for t in trials]
    stale = sum(drop and not is_published(t["source"]) for t, drop in zip(trials, suspect))
    trials = [t for t, drop in zip(trials, suspect) if not drop]
    superseded = [any(text in json.dumps(t["software"]) for text in exclude_software)
                  for t in trials]
    trials = [t for t, drop in zip(trials, superseded) if not drop]
    features, kept, skipped = trial_features(trials, model_features(store.rows("models")))
    if any(superseded):
        skipped[f"software matches exclude_software {' '.join(exclude_software)}"] = \
            sum(superseded)
    if sum(suspect) > stale:
        skipped["figure its source contradicts (notes: SUSPECT)"] = sum(suspect) - stale
    if stale:
        skipped["ran an implementation its card no longer describes (extra.suspect)"] = stale
    if not kept:
        return features, np.array([]), {}, skipped
    stacks = np.array([software_label(t) for t in kept], dtype=str)
    keys = config_keys(features)
    frame = pd.DataFrame({
        "key": keys, "stack": stacks,
        "throughput": [t["throughput"] for t in kept],
        "lo": [t["throughput_lo"] or t["throughput"] for t in kept],
        "hi": [t["throughput_hi"] or t["throughput"] for t in kept],
    })
    frame["row"] = np.arange(len(frame))
    measured = measured_configs(frame[steps_optimizer(features, len(frame))])
    per_stack = frame.groupby(["key", "stack"], sort=True).agg(
        throughput=("throughput", "median"), row=("row", "min"))
    features = {**features, "software": stacks,
                "source": np.array([source_family(t["source"]) for t in kept], dtype=str)}
    return take(features, per_stack["row"].to_numpy()), per_stack["throughput"].to_numpy(), \
        measured, skipped


def measured_configs(frame) -> dict:
    """{configuration key: [throughput, lo, hi]}: the median of the figures `answering` picks
    (the reference stacks', what `recommend` prices, where a configuration has any), the range
    spanning every stack's figures. A PyTorch user's ResNet-50 in FP32 on a V100 answers with
    NVIDIA's PyTorch figures, not a median that MXNet's and TensorFlow's containers move."""
    names = frame["stack"].unique()
    reference = dict(zip(names, reference_stacks(names)))
    keys = frame["key"].to_numpy(dtype=str)
    chosen = answering(keys, frame["stack"].map(reference).to_numpy(dtype=bool))
    value = frame[chosen].groupby("key", sort=True)["throughput"].median()
    spans = frame.groupby("key", sort=True).agg(lo=("lo", "min"), hi=("hi", "max"))
    return {key: [float(value[key]), float(r.lo), float(r.hi)] for key, r in spans.iterrows()}


def answering(keys: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Which rows a measured configuration answers with: its reference stacks' rows where it
    has any, else all of its rows."""
    return reference | ~np.isin(keys, np.unique(keys[reference]))


def measured_evidence(features: dict) -> tuple[list[str], dict[str, list[int]]]:
    """(the stacks in words, {configuration key: the indices of the stacks whose figures its
    measured answer is}): `answering`'s choice, as `measured_configs` makes it, so that a
    `measured` answer can say whose measurement it is."""
    if "software" not in features or not len(features["software"]):
        return [], {}
    training = steps_optimizer(features, len(features["software"]))
    keys = config_keys(features)[training]
    stacks = np.asarray(features["software"], dtype=str)[training]
    names, index = np.unique([stack_words(stack) for stack in stacks], return_inverse=True)
    chosen = answering(keys, reference_stacks(stacks))
    evidence: dict[str, set[int]] = {}
    for key, stack in zip(keys[chosen].tolist(), index[chosen].tolist()):
        evidence.setdefault(key, set()).add(stack)
    return names.tolist(), {key: sorted(found) for key, found in evidence.items()}


def stack_words(stack: str) -> str:
    """A software stack (`software_label`) as a reader names it: a published figure's code
    base and container, else whose runs they are and their framework's version."""
    fields = recorded_software(stack)
    if fields is None:
        return stack
    if fields.get("code") or fields.get("container"):
        return " in the ".join(str(fields[k]) for k in ("code", "container") if fields.get(k))
    version = next((f"{k} {fields[k]}" for k in ("torch", "framework") if fields.get(k)), "")
    return f"{stack.partition(' ')[0]} runs" + (f" ({version})" if version else "")


def software_label(trial: dict) -> str:
    """The software stack a figure was measured with: its source, recorded versions
    (container, framework) and, for a published figure, the code base it cites
    (`code_base`), so that two releases of one benchmark are two stacks, and so are two code
    bases in one container. NVIDIA's TensorFlow ConvNets (XLA-fused) and its TensorFlow
    Transformer-XL share the 20.06 container and nothing else: one effect for both was fitted
    faster than the second and slower than the first, and the physics took up the rest (in
    the shipped fit the tensor-core convolution coefficient fell from 1.13 to 0.82 when they
    joined). The profiler's runs and CM-DARE's share one training loop across models."""
    software, code = trial["software"], code_base(trial)
    if code and isinstance(software, dict):
        software = {**software, "code": code}
    return f"{trial['source']} {json.dumps(software, sort_keys=True)}"


def code_base(trial: dict) -> str | None:
    """The code base a published figure's citation names: the cited repository and the first
    three folders of the cited file (DeepLearningExamples' framework/task/model folder, whose
    models share one training script, as ConvNets' ResNet-50, ResNeXt and EfficientNets do;
    an MLPerf submitter's system folder; TensorFlow's benchmarks page). None without a
    citation of the form `published: owner/repo path@commit`."""
    citation = str((trial.get("extra") or {}).get("citation") or "")
    match = CITED_FILE.match(citation.strip())
    if not match:
        return None
    folders = match[2].split("/")[:-1][:3]
    return f"{match[1]} {'/'.join(folders)}".strip()


def software_spread(features: dict, throughput: np.ndarray) -> tuple[list[float] | None, int]:
    """(conformal quantiles of log(one stack's figure / the median of the other stacks'
    figures of the same configuration), how many such figures), from `throughput_data`: how
    far a measurement taken with one software stack (container, channels-last, DALI or
    synthetic input) is from the same configuration measured with another. This random
    effect of the stack is what the `measured` interval must hold; None with fewer than 10
    figures."""
    # The work per sample tells input sizes apart (BERT at 128 or 384 tokens): the same
    # configuration is the same workload too.
    work = np.char.mod("%.4g", np.asarray(features["flops_per_sample"], float))
    keys = np.char.add(config_keys(features), work)
    deviations = []
    for key in np.unique(keys):
        values = np.log(throughput[keys == key])
        if len(values) < 2:
            continue
        for i, value in enumerate(values):
            deviations.append(value - np.median(np.delete(values, i)))
    if len(deviations) < 10:
        return None, len(deviations)
    return conformal(np.array(deviations)), len(deviations)


def fit_throughput_core(features: dict, throughput: np.ndarray,
                        priors: dict | None = None) -> dict:
    """Physical coefficients, each software stack's effect and the log-linear correction (no
    intervals); `priors` replace some of `physics.PRIOR`.

    A stack (a code base in a container, framework, input pipeline, fused kernels such as
    BERT's unpadded attention) makes the same configuration 20-35% faster or slower, which no
    feature carries. Each framework and each stack in `features["software"]` (nested: a stack
    is a code base in a framework at a version) gets a log offset on its step time, pulled
    towards 0 like a coefficient towards its prior, so the physics fits a reference stack
    instead of bending its efficiencies to one stack's fast kernels (beyond the datasheet
    peak). A stack that cites a code base (`code_label`: NVIDIA's PyTorch ConvNets, in
    whichever container) shares a level with that code base's other containers, on every
    unit and on each: a new container of known code is priced with what its containers share
    (`code_effects`, `code_unit_effects`), where it used to get its framework's effect alone.
    Containers of one framework released in one year share their libraries (cuDNN, cuBLAS,
    NCCL, the framework's own kernels), whatever code runs in them: a level of its own
    (`release_effects`, crossed with the code bases), so a new code base in a known year's
    container gets that year's effect. In the shipped fit NVIDIA's PyTorch containers of
    2021-22 run 8% faster than the reference and those of 2019 7% slower; BERT's 2021 rows,
    held out, were 25% under before their year was known.
    A stack also gets an offset on each arithmetic unit it ran on (`unit_effects`,
    nested in its own): its mixed-precision recipe (which operators a graph rewrite or
    autocast leaves in FP32, its loss scaling, fused FP16 optimizers) and whether it switches
    TF32 on are its own, so TensorFlow's Transformer-XL can be slow in AMP and on time in TF32
    without moving the 16-bit GEMM efficiency that every other stack shares. The reference
    is the row-weighted mean of the PyTorch stacks (`reference_stacks`) on each unit: what is
    predicted is a PyTorch DDP job, as the profiler runs it, not MLPerf's hand-fused MXNet.
    `recommend` predicts for a stack not seen (offset 0), and the stacks' spread reaches its
    interval through the held-out residuals (`out_of_fold`).
    A code base's benchmarks also ran on machines of their own, whose hosts run a step's
    Python (its fixed cost and each kernel's dispatch, physics.HOST_TERMS) at their own speed:
    a log factor on those terms per code base (a stack's own where it cites none), pulled
    towards 0, the reference stacks' row-weighted mean held at 0 (`host_effects`). Added, not
    multiplied: the host's work adds to a synchronised step or hides behind the GPU's, so an
    offset on the step cannot stand for it. In the shipped fit pytorch-gpu-benchmark's cloud
    notebooks (1-2.5 GHz vCPUs) come out 2.4x slower than the reference host, NVIDIA's NCF
    0.8x; without the factor those 90 rows set the shared fixed cost and the GPU's floor per
    kernel (benchmarks/coefficient_sensitivity.py)."""
    from scipy import sparse
    from scipy.optimize import least_squares

    log_seconds = np.log(step_seconds(features, throughput))
    X = physics.design_matrix(features)
    log_prior = np.log(physics.theta(priors))
    labels = np.asarray(features.get("software", np.zeros(len(X)))).astype(str).reshape(-1)
    stack_names, stack = np.unique(labels, return_inverse=True)
    stack = stack.reshape(-1)
    framework_names, framework_of_stack = np.unique([framework(n) for n in stack_names],
                                                    return_inverse=True)
    framework_of_stack = framework_of_stack.reshape(-1)
    unit = physics.arithmetic_unit(features).astype(str)
    cell_names, cell = np.unique(unit_keys(labels, unit), return_inverse=True)
    cell = cell.reshape(-1)
    # A code base's containers share its implementation: a level between the framework and
    # the stack, on every unit and on each (stacks without a cited code base have none).
    code_of_stack = np.array([code_label(name) or "" for name in stack_names], dtype=str)
    code_of_row = code_of_stack[stack]
    code_names = np.unique(code_of_row[code_of_row != ""])
    code_unit = unit_keys(code_of_row, unit)
    code_cell_names = np.unique(code_unit[code_of_row != ""])
    # So do the stacks of one framework whose containers came out in one year, whatever their
    # code: their cuDNN, cuBLAS and framework release (`release_label`).
    release_of_stack = np.array([release_label(name) or "" for name in stack_names], dtype=str)
    release_of_row = release_of_stack[stack]
    release_names = np.unique(release_of_row[release_of_row != ""])
    # The reference stacks' rows on each unit, each row a share of its unit's: the physics
    # describes the reference on every unit, not only on average over them.
    reference_row = reference_stacks(stack_names)[stack]
    share = np.array([reference_row & (unit == u) for u in np.unique(unit[reference_row])],
                     dtype=float).reshape(-1, len(unit))
    share = share / np.maximum(share.sum(axis=1, keepdims=True), 1)
    stacks = len(stack_names) if len(stack_names) > 1 else 0
    # Each code base's hosts (a stack's own where it cites none): a log factor on the host's
    # terms, pulled towards 0, whose mean over the reference stacks' rows is held at 0 as
    # their offsets' is: the physics' host is theirs.
    host_of_row = np.array([host_label(name) for name in stack_names], dtype=str)[stack]
    host_names = np.unique(host_of_row) if stacks else np.array([], dtype=str)
    hosts = sparse.csr_matrix(_indicators(host_of_row, host_names))
    host_share = (reference_row / max(reference_row.sum(), 1)) @ hosts if stacks \
        else np.zeros(0)
    frameworks = len(framework_names) if stacks else 0
    cells = len(cell_names) if stacks else 0
    codes, code_cells = (len(code_names), len(code_cell_names)) if stacks else (0, 0)
    terms = len(physics.TERMS)
    weight = math.sqrt(PRIOR_STRENGTH)

    # Each row's offset is the sum of six nested effects, each an indicator column: its
    # stack's own, its stack's framework's, its stack's on the row's arithmetic unit, its
    # stack's code base's on every unit and on the row's, and its container's release year's.
    if stacks:
        levels = np.hstack([np.eye(stacks)[stack], np.eye(frameworks)[framework_of_stack[stack]],
                            np.eye(cells)[cell], _indicators(code_of_row, code_names),
                            _indicators(code_unit, code_cell_names),
                            _indicators(release_of_row, release_names)])
    else:
        levels = np.zeros((len(stack), 0))

    # The parameters: the coefficients' logs, the offsets' effects, the hosts' log factors.
    effects = levels.shape[1]

    def design(params: np.ndarray) -> np.ndarray:
        return physics.with_host_scale(X, np.exp(hosts @ params[terms + effects:]))

    # Log error of each configuration, plus one row per coefficient pulling it towards its
    # prior (a term the data never exercises keeps it), one per effect and host factor
    # pulling it to 0, one per unit holding the reference stacks' row-weighted mean offset
    # there at 0 and one holding their mean host factor at 0.
    def residuals(params: np.ndarray) -> np.ndarray:
        log_theta, offset = params[:terms], levels @ params[terms:terms + effects]
        predicted = np.log(physics.combine(design(params), np.exp(log_theta))) + offset
        return np.concatenate([predicted - log_seconds, weight * (log_theta - log_prior),
                               weight * params[terms:],
                               MEAN_OFFSET_WEIGHT * (share @ offset) if stacks else [],
                               [MEAN_OFFSET_WEIGHT * host_share @ params[terms + effects:]]
                               if stacks else []])

    # The residuals' Jacobian, in closed form (finite differences would cost one evaluation
    # per parameter and effect): the physics rows' gradient, the effects' indicators, the
    # prior rows' constant weights and the mean row's shares. With effects it is sparse (all
    # but the physics' few columns are indicators) and LSMR solves each step twice as fast as
    # a dense SVD, to the same optimum within 1e-4; without, the SVD of its few columns is
    # quicker.
    mean_rows = np.vstack([
        np.hstack([np.zeros((len(share), terms)), share @ levels,
                   np.zeros((len(share), len(host_names)))]),
        np.concatenate([np.zeros(terms + effects), host_share])[None, :]]
    ) * MEAN_OFFSET_WEIGHT if stacks else np.zeros((0, terms))
    fixed_rows = np.vstack([weight * np.eye(terms + effects + len(host_names)), mean_rows])
    if stacks:
        fixed_rows, indicators = sparse.csr_matrix(fixed_rows), sparse.csr_matrix(levels)

    def jacobian(params: np.ndarray):
        physics_rows = physics.log_combine_gradient(design(params), np.exp(params[:terms]))
        if not stacks:
            return np.vstack([physics_rows, fixed_rows])
        host_rows = hosts.multiply(physics_rows[:, physics.HOST_TERMS].sum(axis=1,
                                                                           keepdims=True))
        return sparse.vstack([sparse.hstack([sparse.csr_matrix(physics_rows), indicators,
                                             host_rows]), fixed_rows], format="csr")

    start = np.concatenate([log_prior, np.zeros(effects + len(host_names))])
    low = np.concatenate([LOWER_LOG_BOUND, np.full(effects + len(host_names), -np.inf)])
    start = np.maximum(start, low + 1e-9)
    params = least_squares(residuals, start, jac=jacobian, bounds=(low, np.inf),
                           method="trf", x_scale=1.0,
                           tr_solver="lsmr" if stacks else "exact").x
    coefficients = {t: float(v) for t, v in zip(physics.TERMS, np.exp(params[:terms]))}
    own, shared, on_unit, by_code, by_code_unit, by_release = np.split(
        params[terms:terms + effects], np.cumsum([stacks, frameworks, cells, codes, code_cells]))
    host = params[terms + effects:]
    code_effect = dict(zip(code_names, by_code))
    code_unit_effect = dict(zip(code_cell_names, by_code_unit))
    release_effect = dict(zip(release_names, by_release))
    offsets = own + shared[framework_of_stack] + np.array(
        [code_effect.get(code, 0.0) for code in code_of_stack]) + np.array(
        [release_effect.get(release, 0.0) for release in release_of_stack]
    ) if stacks else np.zeros(len(stack_names))
    stack_of_cell = np.zeros(len(cell_names), dtype=int)
    stack_of_cell[cell] = stack
    cell_code = dict(zip(cell_names[cell], code_unit))
    on_unit = on_unit + np.array([code_unit_effect.get(cell_code[name], 0.0)
                                  for name in cell_names]) if stacks else on_unit
    residual = log_seconds - levels @ params[terms:terms + effects] - np.log(
        physics.combine(design(params), physics.theta(coefficients)))
    return {"coefficients": coefficients, "correction": fit_correction(features, residual),
            # Effects on throughput (the negated step-time offsets), per stack (its framework's
            # included) and per framework, for a stack of a known framework never seen: only
            # where two or more of its stacks were seen (one cannot tell a framework's effect
            # from its one stack's).
            "software_effects": {str(name): float(-o) for name, o in zip(stack_names, offsets)
                                 if stacks},
            # How much slower than the reference host each code base's hosts run a step's
            # Python, as a log factor on the host's terms (an unseen one's is 0).
            "host_effects": {str(name): float(v) for name, v in zip(host_names, host)},
            "framework_effects": {str(name): float(-o) for i, (name, o) in
                                  enumerate(zip(framework_names, shared))
                                  if np.sum(framework_of_stack == i) >= 2},
            # A stack's effect on one arithmetic unit, beyond its effect on every unit (its
            # mixed-precision recipe, TF32 switched on or not; its code base's there included):
            # keyed `stack|unit`.
            "unit_effects": {str(name): float(-o) for name, o in zip(cell_names, on_unit)},
            # What a new container of a code base the fit saw gets: its framework's effect and
            # its code base's, on every unit and on each (`code_label`).
            "code_effects": {str(name): float(-o - shared[list(framework_names).index(
                framework(name))]) for name, o in code_effect.items()},
            "code_unit_effects": {str(name): float(-o) for name, o in code_unit_effect.items()},
            # What a container of a framework's year adds, beyond its code base's or framework's.
            "release_effects": {str(name): float(-o) for name, o in release_effect.items()},
            # An unseen stack's effect on a unit is its own plus its own there: the spread
            # of the fitted stacks' effects on each unit they ran on.
            "software_spread": software_effect_spread(
                offsets[stack_of_cell] + on_unit, shared, framework_of_stack[stack_of_cell],
                np.bincount(framework_of_stack, minlength=len(shared)))
            if stacks else {}}


def _indicators(labels: np.ndarray, names: np.ndarray) -> np.ndarray:
    """One 0/1 column per name (`names` sorted, as np.unique gives them), 1 on the rows whose
    label it is (rows labelled with none of them, the empty label, have all zeros)."""
    out = np.zeros((len(labels), len(names)))
    if len(names):
        at = np.minimum(np.searchsorted(names, labels), len(names) - 1)
        found = names[at] == labels
        out[np.flatnonzero(found), at[found]] = 1.0
    return out


def software_effect_spread(offsets: np.ndarray, shared: np.ndarray, framework_of_stack:
                           np.ndarray, stacks_of_framework: np.ndarray | None = None
                           ) -> dict[str, float]:
    """How far an unseen stack's effect may lie (log throughput, symmetric conformal bounds
    over the fitted effects `offsets`: of stacks, or of stacks on a unit): from its
    framework's effect (`within_framework`, the effects of frameworks with two or more stacks,
    `stacks_of_framework` counting them where `offsets` are not one per stack) or from the
    reference (`any`); empty with fewer than two. A stack is a random effect: its spread
    belongs in an unseen one's interval."""
    if len(offsets) < 2:
        return {}
    counts = (np.bincount(framework_of_stack, minlength=len(shared))
              if stacks_of_framework is None else stacks_of_framework)
    several = counts[framework_of_stack] >= 2
    within = offsets[several] - shared[framework_of_stack][several]
    spread = {"any": group_spread(offsets, int(counts.sum()))}
    if several.sum() >= 2:
        spread["within_framework"] = group_spread(within, int(counts[counts >= 2].sum()))
    else:
        spread["within_framework"] = spread["any"]
    return spread


def group_spread(effects: np.ndarray, groups: int | None = None) -> float:
    """The half-width, in log, that holds an unseen group's effect (a software stack's) at the
    interval level, from the effects of the `groups` seen (one effect each unless given: a
    stack's effects on several units are one stack's evidence). Split conformal needs at least
    `fewest_for_level()` groups: below that its bound is the largest effect seen, which two or
    three stacks (one lab's, the profiler's) put far too close to 0. There the stated
    extrapolation spread is the floor: no evidence, no narrowing."""
    bound = conformal_symmetric(effects)[1]
    if (len(effects) if groups is None else groups) < fewest_for_level():
        return max(bound, DEFAULT_SPREAD["extrapolated"])
    return bound


def fewest_for_level(miscoverage: float = MISCOVERAGE) -> int:
    """The fewest exchangeable scores whose split-conformal quantile is finite at the level:
    the smallest n with ceil((n + 1)(1 - miscoverage)) <= n (9 at 90%)."""
    n = 1
    while math.ceil((n + 1) * (1 - miscoverage) - 1e-9) > n:
        n += 1
    return n


def reference_stacks(names: np.ndarray) -> np.ndarray:
    """Which software stacks (`software_label`s) the physics describes: the PyTorch ones (a
    published PyTorch container, this project's own torch runs) that ran the card's whole
    workload; every stack where none is."""
    torch = np.array([framework(name) == "pytorch" and not skips_card_work(name)
                      for name in names], dtype=bool)
    return torch if torch.any() else np.ones(len(torch), dtype=bool)


def skips_card_work(stack: str) -> bool:
    """A stack whose input pipeline pads a batch only to its longest sequence (LDDL's sequence
    binning): its rows' work per sample is an estimate (their mean padded length), and its
    fitted effect holds what that estimate misses, so it must not set the reference a plain,
    padded job is priced at."""
    return any(marker in stack.lower() for marker in WORK_SKIPPING_PIPELINES)


def fit_correction(features: dict, residual: np.ndarray) -> dict:
    """Ridge regression of log(measured/physics) on standardised transferable inputs."""
    from sklearn.linear_model import Ridge

    inputs = physics.correction_inputs(features) if len(residual) > 2 else {}
    names = [n for n in CORRECTION_INPUTS if n in inputs and np.ptp(inputs[n]) > 1e-9]
    if not names:
        return {"inputs": [], "mean": [], "scale": [], "low": [], "high": [], "coef": [],
                "intercept": float(np.mean(residual)) if len(residual) else 0.0}
    z = np.column_stack([inputs[n] for n in names])
    mean, scale = z.mean(axis=0), z.std(axis=0)
    z_scaled = (z - mean) / scale
    model = Ridge(alpha=ridge_alpha(z_scaled, residual, features["model"])).fit(z_scaled, residual)
    return {"inputs": names, "mean": mean.tolist(), "scale": scale.tolist(),
            "low": z.min(axis=0).tolist(), "high": z.max(axis=0).tolist(),
            "coef": model.coef_.tolist(), "intercept": float(model.intercept_)}


def ridge_alpha(z: np.ndarray, residual: np.ndarray, models) -> float:
    """The penalty with the least leave-one-model-out absolute log error on this data
    (closed-form ridge with an unpenalised intercept, as sklearn's Ridge). Every fold's sums
    are the whole data's less its held-out model's, so all folds and penalties are solved at
    once, in one batched solve, rather than a pass over the rows per model."""
    groups, group = np.unique(np.asarray(models), return_inverse=True)
    if len(groups) < 3:
        return RIDGE_ALPHAS[-1]
    group = group.reshape(-1)
    k = z.shape[1]
    # Per held-out model: its rows' count and sums of z, r, z z' and z r.
    count = np.bincount(group, minlength=len(groups)).astype(float)
    sum_z = np.zeros((len(groups), k))
    np.add.at(sum_z, group, z)
    sum_r = np.bincount(group, weights=residual, minlength=len(groups))
    sum_zz = np.zeros((len(groups), k, k))
    np.add.at(sum_zz, group, z[:, :, None] * z[:, None, :])
    sum_zr = np.zeros((len(groups), k))
    np.add.at(sum_zr, group, z * residual[:, None])
    # The training part of each fold: everything but that model.
    n = len(residual) - count
    z_mean = (z.sum(axis=0) - sum_z) / n[:, None]
    r_mean = (residual.sum() - sum_r) / n
    gram = (z.T @ z - sum_zz) - n[:, None, None] * z_mean[:, :, None] * z_mean[:, None, :]
    target = (z.T @ residual - sum_zr) - n[:, None] * z_mean * r_mean[:, None]
    alphas = np.asarray(RIDGE_ALPHAS)[None, :, None, None] * np.eye(k)
    coef = np.linalg.solve(gram[:, None] + alphas, target[:, None, :, None])[..., 0]
    # Each row predicted by its own model's fold, at every penalty.
    predicted = np.einsum("nk,nak->na", z - z_mean[group], coef[group]) + r_mean[group, None]
    errors = np.abs(predicted - residual[:, None]).sum(axis=0)
    return float(RIDGE_ALPHAS[int(np.argmin(errors))])


def tuned_priors(features: dict, throughput: np.ndarray) -> tuple[dict, dict]:
    """(prior per TUNED_PRIORS term, how each was chosen): the grid value with the least
    leave-one-model-out absolute log error on this data when rows of 3 or more models exercise
    the term; otherwise the stated physics prior."""
    from sklearn.model_selection import LeaveOneGroupOut

    priors = {term: physics.PRIOR[term] for term in TUNED_PRIORS}
    how = dict.fromkeys(TUNED_PRIORS, "physics prior (term not exercised)")
    if not len(throughput):
        return priors, how
    models = np.asarray(features["model"])
    design = physics.design_matrix(features)
    for term, grid in TUNED_PRIORS.items():
        if len(np.unique(models[design[:, physics.TERMS.index(term)] > 0])) < 3:
            continue
        errors = [np.abs(out_of_fold(features, throughput, LeaveOneGroupOut(), groups=models,
                                     priors={**priors, term: value})).mean() for value in grid]
        priors[term], how[term] = grid[int(np.argmin(errors))], "inner leave-one-model-out"
    return priors, how


def fit_throughput(features: dict, throughput: np.ndarray, measured: dict,
                   stacks: tuple[list[float] | None, int] = (None, 0)) -> dict:
    """The artifact's `throughput` section: core fit, seen configurations, calibration.
    Hyperparameters are chosen on `features` alone, so a held-out fold never informs them.
    `stacks`: software_spread of the same data, the `measured` spread where it has one."""
    priors, chosen_by = tuned_priors(features, throughput)
    spec = fit_throughput_core(features, throughput, priors) if len(throughput) else {
        "coefficients": dict(physics.PRIOR), "correction": fit_correction(features, np.array([]))}
    residual = in_sample_residual(spec, features, throughput)
    kernel = anchoring.choose_kernel(features, residual)
    spec["anchors"] = anchoring.fit_anchors(features, residual, kernel)
    spec["priors"] = {"values": priors, "chosen_by": chosen_by}
    words, evidence = measured_evidence(features)
    spec["seen"] = {"configs": measured, "model_gpu": seen_ranges(features),
                    "units": sorted(set(physics.arithmetic_unit(features).tolist())),
                    "stacks": words, "evidence": evidence}
    spec["calibration"] = calibrate(features, throughput, priors, stacks, kernel)
    return spec


def bare_spec(core: dict) -> dict:
    """A throughput section that predicts from a core fit alone: nothing measured, no
    intervals."""
    return {**core, "seen": {"configs": {}, "model_gpu": {}},
            "calibration": {"extrapolated": [0.0, 0.0]}}


def in_sample_residual(core: dict, features: dict, throughput: np.ndarray) -> np.ndarray:
    """log(measured / predicted) of the rows a core fit was fitted on, each with its own
    software stack's effect: what anchoring (advisor/anchoring.py) smooths."""
    if not len(throughput):
        return np.zeros(0)
    return np.log(throughput / predict_throughput(bare_spec(core), features))


def predict_throughput(spec: dict, features: dict) -> np.ndarray:
    return Artifact({"throughput": spec}).predict("throughput", features).value


def step_seconds(features: dict, throughput: np.ndarray) -> np.ndarray:
    workers = np.asarray(features["nodes"], float) * np.asarray(features["gpus_per_node"], float)
    return workers * np.asarray(features["batch_per_gpu"], float) / np.asarray(throughput, float)


def seen_ranges(features: dict) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    workers = np.asarray(features["nodes"], float) * np.asarray(features["gpus_per_node"], float)
    gpus = features[physics.identity(features, "gpu")]
    for model, gpu, w in zip(features["model"], gpus, workers):
        key = f"{model}|{gpu}".lower()
        low, high = out.get(key, [w, w])
        out[key] = [float(min(low, w)), float(max(high, w))]
    return dict(sorted(out.items()))


def out_of_fold(features: dict, throughput: np.ndarray, splitter, groups=None,
                priors: dict | None = None, kernel: dict | None = None) -> np.ndarray:
    """log(measured / predicted) for every row, each predicted by a fit that never saw it,
    anchored to the training rows of its cell under `kernel` where one is given, as the
    artifact's predictions are."""
    residual = np.full(len(throughput), np.nan)
    for train, test in splitter.split(throughput, groups=groups):
        trained = take(features, train)
        spec = bare_spec(fit_throughput_core(trained, throughput[train], priors))
        if kernel is not None:
            spec["anchors"] = anchoring.fit_anchors(
                trained, in_sample_residual(spec, trained, throughput[train]), kernel)
        # For a stack not seen (the user's): the stacks' spread belongs in the residuals.
        unseen_stack = {k: v for k, v in take(features, test).items() if k != "software"}
        predicted = predict_throughput(spec, unseen_stack)
        residual[test] = np.log(throughput[test] / predicted)
    return residual


def calibrate(features: dict, throughput: np.ndarray, priors: dict | None = None,
              stacks: tuple[list[float] | None, int] = (None, 0),
              kernel: dict | None = None) -> dict:
    """Split-conformal log-residual quantiles from fits that never saw the rows they predict
    (under the hyperparameters chosen on the same data): random folds for interpolation,
    whole models held out for extrapolation, `measured` the disagreement between software
    stacks that measured one configuration (`stacks`, software_spread; else the stated
    spread, `measured_from` says which), and under `novel` one spread per axis the
    training data may not cover, held out in turn (`novel_spreads`). A range axis's spread
    grows with the log distance d beyond `range` as sqrt(1 + d / `doubling`[axis])
    (`range_growth`), up to `ceiling`, the spread of the physics priors alone
    (`physics_ceiling`); `Artifact.predict` combines the axes on which a configuration is
    new. The random folds' predictions are anchored under `kernel` to their training rows,
    as the artifact's interpolations are (advisor/anchoring.py); the axes' are not: the
    configuration far out on an axis that an interval widens for is mostly in a cell no row
    measured, and a spread measured with anchors would narrow its interval."""
    from sklearn.model_selection import KFold

    out: dict[str, Any] = {name: [-s, s] for name, s in DEFAULT_SPREAD.items()}
    novel: dict[str, list[float]] = {}
    doubling: dict[str, float | None] = {}
    n = len(throughput)
    spread, figures = stacks
    out["measured_from"] = f"stated (+-{DEFAULT_SPREAD['measured']:.2f} in log)"
    if spread is not None:
        out["measured"] = [min(spread[0], 0.0), max(spread[1], 0.0)]
        out["measured_from"] = (f"software stacks: {figures} figures against other stacks' "
                                "figures of the same configuration")
    if n >= 10:
        folds = KFold(n_splits=5, shuffle=True, random_state=SEED)
        out["interpolated"] = conformal(out_of_fold(features, throughput, folds, priors=priors,
                                                    kernel=kernel))
        novel, doubling = novel_spreads(features, throughput, priors)
        out["extrapolated"] = novel.get("model", out["extrapolated"])
    # Less evidence never gets a narrower interval.
    for weaker, stronger in (("interpolated", "measured"), ("extrapolated", "interpolated")):
        out[weaker] = [min(out[weaker][0], out[stronger][0]), max(out[weaker][1], out[stronger][1])]
    # A new axis adds at least an interpolation's error; one without held-out evidence (one
    # GPU in the training data, say) the stated extrapolation spread or the fitted one,
    # whichever is wider: no evidence, no narrowing.
    stated = DEFAULT_SPREAD["extrapolated"]
    unknown = [min(out["extrapolated"][0], -stated), max(out["extrapolated"][1], stated)]
    low, high = out["interpolated"]
    out["novel"] = {axis: [min(q[0], low), max(q[1], high)]
                    for axis in NOVEL_AXES for q in [novel.get(axis, unknown)]}
    # Without held-out evidence of growth, a stated one: the variance doubles per doubling.
    out["doubling"] = {axis: doubling.get(axis, math.log(2)) for axis in RANGE_AXES}
    out["range"] = {axis: [float(v.min()), float(v.max())] for axis in RANGE_AXES
                    for v in [range_axis(features, axis)] if n}
    out["ceiling"] = physics_ceiling(features, throughput, priors, unknown)
    return out


def physics_ceiling(features: dict, throughput: np.ndarray, priors: dict | None,
                    unknown: list[float]) -> list[float]:
    """Conformal quantiles of log(measured / physics at its priors) over the training rows.
    Far outside the training data the fitted terms say nothing new (the correction is
    clipped to its trained range), so an interval there is bounded by the error of the
    physics structure itself, which no row was fitted to. Fewer than 10 rows: `unknown`."""
    if len(throughput) < 10:
        return unknown
    prior = physics.cluster_throughput(features, physics.step_time(features, priors))
    return conformal(np.log(throughput / prior))


def range_growth(residual: np.ndarray, distance: np.ndarray) -> float | None:
    """The log distance at which the held-out error variance has doubled, under the stated
    form E[r^2] = s0^2 (1 + d / doubling) (errors that accumulate like a random walk in
    log size): least squares of r^2 on d. None where the error does not grow with d."""
    ok = np.isfinite(residual)
    if ok.sum() < 3 or np.ptp(distance[ok]) <= 0:
        return None
    slope, intercept = np.polyfit(distance[ok], residual[ok] ** 2, 1)
    if slope <= 0:
        return None
    return float(max(intercept, 1e-6) / slope)


def novel_spreads(features: dict, throughput: np.ndarray,
                  priors: dict | None) -> tuple[dict[str, list[float]], dict[str, float | None]]:
    """({axis: conformal quantiles of rows predicted without that axis value}, {range axis:
    its `range_growth`}). Models need 3 or more (the stated requirement of the extrapolated
    spread before), GPUs, arithmetic units and range values 2. A range axis trains on its
    values up to a cut and predicts the rest, for up to RANGE_CUTS cuts from the median value
    up, so that its held-out errors span several distances; its quantiles are of the
    residuals scaled back to distance 0 by the growth form (normalised conformal scores).
    Models and GPUs are held out one at a time up to INNER_GROUP_FOLDS of them, beyond that in
    INNER_GROUP_FOLDS folds of several (each fold's fit sees fewer: if anything wider)."""
    from sklearn.model_selection import GroupKFold, PredefinedSplit

    spreads: dict[str, list[float]] = {}
    growth: dict[str, float | None] = {}
    for axis, least in (("model", 3), ("gpu", 2), ("unit", 2)):
        labels = np.asarray(physics.arithmetic_unit(features) if axis == "unit"
                            else features[physics.identity(features, axis)])
        distinct = len(np.unique(labels))
        if distinct >= least:
            # One group a fold up to INNER_GROUP_FOLDS groups, then groups dealt into that
            # many folds of about equal rows.
            folds = GroupKFold(n_splits=min(distinct, INNER_GROUP_FOLDS))
            spreads[axis] = conformal_symmetric(out_of_fold(
                features, throughput, folds, groups=labels, priors=priors))
    for axis in RANGE_AXES:
        values = range_axis(features, axis)
        sizes = np.unique(values)
        if len(sizes) < 2:
            continue
        cuts = np.unique(sizes[np.linspace((len(sizes) - 1) // 2, len(sizes) - 2,
                                           RANGE_CUTS).round().astype(int)])
        residual, distance = [], []
        for cut in cuts:
            larger = values > cut
            r = out_of_fold(features, throughput, PredefinedSplit(np.where(larger, 0, -1)),
                            priors=priors)
            residual.append(r[larger])
            distance.append(np.log(values[larger] / cut))
        residual, distance = np.concatenate(residual), np.concatenate(distance)
        growth[axis] = range_growth(residual, distance)
        scale = 1.0 if growth[axis] is None else np.sqrt(1 + distance / growth[axis])
        spreads[axis] = conformal_symmetric(residual / scale)
    return spreads, growth


def conformal_symmetric(residual: np.ndarray, miscoverage: float = MISCOVERAGE) -> list[float]:
    """Split-conformal bounds from absolute residuals, the same on both sides. Held out by
    group (a model, a GPU, the rows past a cut), a group's rows err together in one direction,
    so the few groups a fit has bound how far an unseen one lands, not which way: two tails
    estimated apart from five GPUs would claim the sign of the next GPU's error."""
    r = np.abs(residual[np.isfinite(residual)])
    if len(r) == 0:
        return [0.0, 0.0]
    q = float(np.quantile(r, conformal_level(len(r), miscoverage)))
    return [-q, q]


def conformal(residual: np.ndarray, miscoverage: float = MISCOVERAGE) -> list[float]:
    """Two-sided split-conformal quantiles with the finite-sample correction."""
    r = np.sort(residual[np.isfinite(residual)])
    level = conformal_level(len(r), miscoverage / 2)
    return [float(np.quantile(r, 1 - level)), float(np.quantile(r, level))]


def conformal_level(n: int, tail: float) -> float:
    """The quantile of n held-out scores that covers a new one with probability 1 - tail:
    ceil((n + 1)(1 - tail)) / n, capped at 1 (the split-conformal finite-sample correction)."""
    return min(1.0, math.ceil((n + 1) * (1 - tail)) / n)


# -- overheads ----------------------------------------------------------------------------

def fit_grouped(rows: list[tuple[str, str, bool, float]], prior: dict[str, dict]) -> dict:
    """Medians (and counts) per (provider, gpu, spot), (provider, spot) and provider, never
    pooled across providers; `prior` ('provider|spot' -> cited figure, advisor.overheads)
    answers for a provider nobody measured."""
    levels = (lambda p, g, s: f"{p}|{g}|{int(s)}", lambda p, g, s: f"{p}|{int(s)}",
              lambda p, g, s: p)
    rows = [(str(p or "").lower(), str(g or "").lower(), bool(s), float(v))
            for p, g, s, v in rows if v is not None and v > 0]
    groups: dict[str, float] = {}
    counts: dict[str, int] = {}
    residuals: dict[str, list[float]] = {}
    for level, label in zip(levels, ("measured", "interpolated", "interpolated")):
        buckets: dict[str, list[float]] = {}
        for p, g, s, v in rows:
            buckets.setdefault(level(p, g, s), []).append(v)
        for key, values in buckets.items():
            groups[key], counts[key] = float(np.median(values)), len(values)
            residuals.setdefault(label, []).extend(np.log(np.array(values) / groups[key]))
    calibration = {name: [-s, s] for name, s in DEFAULT_SPREAD.items()}
    for label, r in residuals.items():
        if len(r) >= 10:
            calibration[label] = conformal(np.array(r))
    return {"groups": dict(sorted(groups.items())), "counts": dict(sorted(counts.items())),
            "prior": prior, "calibration": calibration}


def fit_checkpoint(rows: list[dict]) -> dict:
    """save_s = fixed + bytes / bandwidth, per storage target, by NNLS on relative error."""
    from scipy.optimize import nnls

    ratios = [r["bytes"] / r["params"] for r in rows if r.get("bytes") and r.get("params")]
    spec: dict[str, Any] = {
        "bytes_per_param": float(np.median(ratios)) if ratios else BYTES_PER_PARAM_PRIOR,
        "targets": {}}
    residuals = []
    for target, (fixed, per_byte) in CHECKPOINT_PRIOR.items():
        mine = [r for r in rows if (r.get("target") or "local") == target
                and r.get("bytes") and r.get("save_s")]
        nbytes = np.array([r["bytes"] for r in mine], float)
        save = np.array([r["save_s"] for r in mine], float)
        if len(np.unique(nbytes)) >= 2:
            A = np.column_stack([np.ones_like(nbytes), nbytes]) / save[:, None]
            (fixed, per_byte), _ = nnls(A, np.ones_like(save))
        elif len(mine):  # one size: keep the prior bandwidth, fit the fixed cost
            fixed = max(0.0, float(np.median(save - per_byte * nbytes)))
        residuals.extend(np.log(save / (fixed + per_byte * nbytes)))
        spec["targets"][target] = {
            "fixed_s": float(fixed), "s_per_byte": float(per_byte), "n": len(mine),
            "bytes_range": [float(nbytes.min()), float(nbytes.max())] if len(mine) else [0.0, 0.0],
            "models": sorted({str(r["model"]) for r in mine if r.get("model")})}
    spread = DEFAULT_SPREAD["interpolated"]
    calibration = {name: [-s, s] for name, s in DEFAULT_SPREAD.items()}
    if len(residuals) >= 10:
        q = conformal(np.array(residuals))
        calibration = {name: [min(q[0], -spread), max(q[1], spread)] for name in DEFAULT_SPREAD}
        calibration["extrapolated"] = [min(q[0], -DEFAULT_SPREAD["extrapolated"]),
                                       max(q[1], DEFAULT_SPREAD["extrapolated"])]
    spec["calibration"] = calibration
    return spec


# -- the whole artifact -------------------------------------------------------------------

def overhead_rows(store) -> dict[str, list]:
    """(provider, gpu, spot, seconds) rows of each overhead the artifact predicts."""
    vm, first = [], []
    for r in store.rows("startups"):
        parts = [r[k] for k in ("provisioning_s", "staging_s", "booting_s") if r[k] is not None]
        if parts:
            vm.append((r["provider"], r["gpu_type"], r["spot"], sum(parts)))
        first.append((r["provider"], r["gpu_type"], r["spot"], r["first_step_s"]))
    for t in store.query("SELECT provider, gpu_type, spot, time_to_first_step FROM trials "
                         "WHERE provider = 'local' AND status = 'finished'"):
        first.append((t["provider"], t["gpu_type"], t["spot"], t["time_to_first_step"]))
    recovery = [(r["provider"], r["gpu_type"], r["spot"], r["first_step_after_s"])
                for r in store.query(
                    "SELECT t.provider, t.gpu_type, t.spot, r.first_step_after_s "
                    "FROM revocations r JOIN trials t ON r.trial_id = t.id")]
    return {"vm_s": vm, "first_step_s": first, "recovery_s": recovery}


def fit_store(path: str | Path, include_published: bool = True,
              exclude_software: tuple[str, ...] = ()) -> tuple[dict, dict]:
    """(artifact document, summary of what was used) from a measurement store."""
    from advisor.overheads import overhead_priors
    from advisor.survival import fit_figure, fit_lifetimes, load_prior
    from gpuadvisor.store import Store, now_iso

    with Store(path, readonly=True) as store:
        features, throughput, measured, skipped = throughput_data(store, include_published,
                                                                  exclude_software)
        stacks = software_spread(features, throughput)
        overheads = overhead_rows(store)
        checkpoints = [r for r in store.rows("checkpoints")
                       if include_published or not is_published(r["source"])]
        lifetimes = store.rows("lifetimes")
    try:
        figure = fit_figure()
        prior_rows, buckets = load_prior(curves=figure)
        priors = overhead_priors()
    except (KeyError, ValueError) as exc:  # a user's own copy read before the shipped one
        raise FitError(f"cannot read the lifetime or overhead evidence ({exc!r}); fix or "
                       f"remove your copy of that file in {data.user_dir()}") from None
    grouped = {name: fit_grouped(rows, priors[name]) for name, rows in overheads.items()}
    training = {
        "throughput": sorted(measured.items()),
        # The features fitted, not only the measurements: inputs read from elsewhere (a
        # trial's network bandwidth from the catalog, a model card) change the hash too.
        "throughput_features": {k: np.asarray(v).tolist() for k, v in sorted(features.items())},
        "overheads": {k: sorted(map(str, v)) for k, v in overheads.items()},
        "checkpoints": sorted(str([r[k] for k in ("model", "bytes", "target", "save_s")])
                              for r in checkpoints),
        "lifetimes": sorted(str([r[k] for k in ("provider", "gpu_type", "region", "spot",
                                                "lifetime_s", "revoked")]) for r in lifetimes),
    }
    doc = {
        "schema_version": SCHEMA_VERSION,
        "fitted_at": now_iso(),
        "library_versions": _versions(),
        "training_data": {
            "sha256": hashlib.sha256(json.dumps(training, sort_keys=True).encode()).hexdigest(),
            "include_published": include_published,
            "exclude_software": sorted(exclude_software),
            "throughput_configs": len(throughput),
            "models": sorted(set(features["model"].tolist())) if len(throughput) else [],
            "gpus": sorted(set(features["gpu"].tolist())) if len(throughput) else [],
            "startups": len(overheads["vm_s"]), "checkpoints": len(checkpoints),
            "revocations": len(overheads["recovery_s"]), "lifetimes": len(lifetimes),
        },
        "features": list(physics.TERMS),
        "interval_level": PREDICTION_INTERVAL_LEVEL,
        "throughput": fit_throughput(features, throughput, measured, stacks),
        "startup_s": {"vm_s": grouped["vm_s"], "first_step_s": grouped["first_step_s"]},
        "checkpoint_s": fit_checkpoint(checkpoints),
        "recovery_s": grouped["recovery_s"],
        "lifetime": {"fitted": fit_lifetimes(lifetimes), "figure": figure,
                     "prior": prior_rows, "aws_buckets": buckets},
    }
    return _rounded(doc), {"skipped": skipped}


def write_artifact(doc: dict, path: str | Path) -> None:
    Path(path).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def _versions() -> dict[str, str]:
    out = {}
    for name in ("gpu-advisor", "numpy", "pandas", "scikit-learn", "scipy"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out


def _rounded(value: Any) -> Any:
    """Floats to 8 significant digits: the artifact stays readable and reproducible across
    platforms' last-bit differences."""
    if isinstance(value, float):
        return float(f"{value:.8g}") if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value
