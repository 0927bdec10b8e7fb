"""Held-out accuracy of the throughput model: leave one model out, leave one GPU out, train on
small clusters and test on larger ones, leave one source out (CM-DARE's, published, this
project's own runs), leave one software stack out (a code base in a container: a new
benchmark's figures of models and GPUs the fit knows), or random k-fold.

Every held-out prediction goes through the same path as production: fit (with its own
calibration and its hyperparameters chosen by inner cross-validation, on the training part
only: nested cross-validation) -> artifact section -> `Artifact.predict`. A plain
log-linear regression (the kind CM-DARE's paper and its successors fitted) is scored on the
same folds as a baseline.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from advisor import physics
from advisor.artifact import Artifact
from advisor.features import take
from advisor.fitting import SEED, fit_throughput, throughput_data
from gpuadvisor.vocab import PREDICTION_INTERVAL_LEVEL

SPLITS = ("model", "gpu", "nodes", "source", "stack", "random")
# The feature each leave-one-out split holds out one value of at a time.
HELD_OUT_COLUMN = {"model": "model", "gpu": "gpu", "source": "source", "stack": "software"}
TARGETS = ("throughput", "step_time")
# From this many configurations a fold's fit takes seconds (the published figures' ~650: ~6 s
# on one core), so by default the folds are fitted in a process per CPU; below it, in this one.
PARALLEL_FROM_CONFIGURATIONS = 200


class EvaluateError(ValueError):
    """An evaluation the data cannot support; the message names the fix."""


def folds(features: dict, split: str, max_train_workers: int | None = None):
    """(name, train index, test index) for each fold of a split."""
    from sklearn.model_selection import KFold

    n = len(features["model"])
    workers = np.asarray(features["nodes"], float) * np.asarray(features["gpus_per_node"], float)
    if split in HELD_OUT_COLUMN:
        labels = np.asarray(features[physics.identity(features, HELD_OUT_COLUMN[split])])
        labels = labels.astype(str)
        distinct = np.unique(labels)
        if len(distinct) < 2:
            raise EvaluateError(f"the store holds one {split} only ({', '.join(distinct)}); "
                                f"leave-one-{split}-out needs two or more (import more data, "
                                "e.g. `advisor data import published|cmdare|runs`)")
        for label in distinct:
            yield str(label), np.flatnonzero(labels != label), np.flatnonzero(labels == label)
    elif split == "nodes":
        sizes = np.unique(workers)
        if max_train_workers is None:
            max_train_workers = int(sizes[(len(sizes) - 1) // 2])
        train, test = workers <= max_train_workers, workers > max_train_workers
        if not train.any() or not test.any():
            raise EvaluateError(f"no clusters on both sides of {max_train_workers} workers "
                                f"(sizes seen: {sizes.astype(int).tolist()}); set "
                                "max_train_workers between them")
        for size in np.unique(workers[test]):
            yield f"{int(size)} workers", np.flatnonzero(train), \
                np.flatnonzero(workers == size)
    elif split == "random":
        if n < 5:
            raise EvaluateError(f"{n} configurations are too few for 5-fold cross-validation")
        for i, (train, test) in enumerate(KFold(5, shuffle=True, random_state=SEED).split(
                np.arange(n))):
            yield f"fold {i + 1}", train, test
    else:
        raise EvaluateError(f"unknown split {split!r}; splits are {', '.join(SPLITS)}")


def loglinear_baseline(train: dict, y_train: np.ndarray, test: dict) -> np.ndarray:
    """log throughput ~ log FLOPs, params, GPU peak, workers, batch (ordinary least squares)."""
    from sklearn.linear_model import LinearRegression

    def design(f: dict) -> np.ndarray:
        workers = np.asarray(f["nodes"], float) * np.asarray(f["gpus_per_node"], float)
        cols = [f["flops_per_sample"], f["params"], f["gpu_fp32_tflops"], workers,
                f["batch_per_gpu"]]
        return np.log(np.column_stack([np.asarray(c, float) for c in cols]))

    model = LinearRegression().fit(design(train), np.log(y_train))
    return np.exp(model.predict(design(test)))


def evaluate(store: str | Path, split: str, target: str = "throughput",
             include_published: bool = True, max_train_workers: int | None = None,
             exclude_software: tuple[str, ...] = (), jobs: int | None = None,
             progress: Callable[[int, int], None] | None = None) -> dict:
    """Held-out errors of one split, as a JSON-ready dict. The folds are fitted in `jobs`
    processes at once (default: joblib's count of the CPUs this process may use, its affinity
    and container quota counted, from PARALLEL_FROM_CONFIGURATIONS configurations); each
    fold's fit is the same whatever the number. `progress(done, total)` is called as each
    fold's results come in."""
    from joblib import Parallel, cpu_count, delayed

    from gpuadvisor.store import Store

    if target not in TARGETS:
        raise EvaluateError(f"unknown target {target!r}; targets are {', '.join(TARGETS)}")
    with Store(store, readonly=True) as db:
        features, throughput, _, skipped = throughput_data(db, include_published,
                                                           exclude_software)
    if len(throughput) == 0:
        raise EvaluateError(f"{store} holds no GPU throughput measurements with model "
                            "features; import some (`advisor data import cmdare|runs|published`)")
    splits = list(folds(features, split, max_train_workers))
    if jobs is None:  # a worker process starts in about 2 s: worth it for fits of seconds
        jobs = cpu_count() if len(throughput) >= PARALLEL_FROM_CONFIGURATIONS else 1
    jobs = min(jobs, len(splits))
    results = []
    for result in Parallel(n_jobs=jobs, return_as="generator")(
            delayed(held_out)(features, throughput, target, *fold) for fold in splits):
        results.append(result)
        if progress:
            progress(len(results), len(splits))
    rows = [row for fold_rows, _ in results for row in fold_rows]
    groups = [name for name, _, _ in splits]
    priors = {name: fold_priors for name, (_, fold_priors) in zip(groups, results)}
    return summarise(rows, groups, split, target, skipped, priors)


def held_out(features: dict, throughput: np.ndarray, target: str, name: str,
             train: np.ndarray, test: np.ndarray) -> tuple[list[dict], dict]:
    """One fold: fit on `train`, predict `test`; its rows and the priors its fit chose."""
    spec = fit_throughput(take(features, train), throughput[train], measured={})
    predicted = Artifact({"throughput": spec}).predict("throughput", take(features, test))
    baseline = loglinear_baseline(take(features, train), throughput[train],
                                  take(features, test))
    measured = throughput[test]
    if target == "step_time":  # per-step seconds are the reciprocal at fixed batch
        measured, baseline = 1 / measured, 1 / baseline
        predicted_value, lo, hi = 1 / predicted.value, 1 / predicted.hi, 1 / predicted.lo
    else:
        predicted_value, lo, hi = predicted.value, predicted.lo, predicted.hi
    rows = [{
        "group": name, "model": str(features["model"][index]),
        "gpu": str(features["gpu"][index]),
        "workers": int(features["nodes"][index] * features["gpus_per_node"][index]),
        "nodes": int(features["nodes"][index]),
        "precision": str(features["precision"][index]),
        "batch_per_gpu": float(features["batch_per_gpu"][index]),
        "software": str(features["software"][index]),
        "measured": float(measured[i]), "predicted": float(predicted_value[i]),
        "lo": float(lo[i]), "hi": float(hi[i]), "baseline": float(baseline[i]),
        "provenance": str(predicted.provenance[i]),
    } for i, index in enumerate(test)]
    return rows, spec["priors"]["values"]


def coverage(rows: list[dict]) -> float:
    """Share of measurements inside their predicted interval."""
    return float(np.mean([r["lo"] <= r["measured"] <= r["hi"] for r in rows]))


def summarise(rows: list[dict], groups: list[str], split: str, target: str,
              skipped: dict, priors: dict[str, dict]) -> dict:
    def ape(key: str, subset: list[dict]) -> float:
        return float(np.mean([abs(r[key] / r["measured"] - 1) for r in subset]) * 100)

    def bias(subset: list[dict]) -> float:
        """Median predicted / measured of the target: for throughput above 1 is optimistic,
        for step time pessimistic (MAPE says how far off, not which way; a held-out GPU's rows
        mostly err one way together)."""
        return float(np.median([r["predicted"] / r["measured"] for r in subset]))

    per_group = []
    for name in groups:
        subset = [r for r in rows if r["group"] == name]
        per_group.append({
            "group": name, "n": len(subset), "mape": ape("predicted", subset),
            "median_ratio": bias(subset), "baseline_mape": ape("baseline", subset),
            "coverage": coverage(subset),
            "priors": priors[name],  # chosen on this fold's training part
        })
    return {
        "split": split, "target": target, "n": len(rows),
        "mape": ape("predicted", rows),
        "median_ape": float(np.median([abs(r["predicted"] / r["measured"] - 1)
                                       for r in rows]) * 100),
        "median_ratio": bias(rows),
        "baseline_loglinear_mape": ape("baseline", rows),
        "interval_coverage": coverage(rows),
        "interval_level": PREDICTION_INTERVAL_LEVEL,
        "coverage_by_provenance": {
            p: {"n": len(subset), "coverage": coverage(subset),
                "median_width": float(np.median([r["hi"] / r["lo"] for r in subset]))}
            for p in sorted({r["provenance"] for r in rows})
            for subset in [[r for r in rows if r["provenance"] == p]]},
        "mape_by_workers": {str(w): ape("predicted", [r for r in rows if r["workers"] == w])
                            for w in sorted({r["workers"] for r in rows})},
        "groups": per_group, "predictions": rows, "skipped": skipped,
    }
