"""CM-DARE training speeds -> `trials` rows, and model features -> `models` rows.

What lands where (every row: source 'import:cmdare', provider 'gcp', sync 'ps',
gpus_per_node 1, precision 'fp32', image_size 32, status 'finished', sweep 'cmdare'):

- `trials.nodes` = workers, `trials.ps_count` = parameter servers (1 unless the run's name or
  folder says `ps<P>`), `trials.gpu_type` = the catalog's GPU name, `trials.model` = the
  canonical CM-DARE name (res15, res32, shakesmall, shakebig, custom1, ...; see cmdare_names).
- `trials.batch_per_gpu` = 128: every CM-DARE run used Tensor2Tensor's `resnet_cifar_*` /
  `shakeshake_*` hyper-parameter sets, whose `batch_size` is 128 per worker.
- `trials.throughput` (samples/s of the cluster) = median global steps/s x 128. CM-DARE trains
  asynchronously: every worker's update increments TensorFlow's global step, so
  `global_step/sec` already counts the steps of all workers (3 K80 workers run at ~29 global
  steps/s where one runs at ~9.5). Multiplying by the worker count again would be wrong.
- `trials.throughput_lo/hi` stay empty: they hold a confidence interval of the mean
  (gpuadvisor.vocab), and CM-DARE's logs give a spread of the samples instead, kept in
  `extra.throughput_p2_5` / `extra.throughput_p97_5` (2.5th / 97.5th percentiles of the
  steady samples x 128).
- `trials.step_time_*` = seconds per step of one worker = workers / global steps/s.
- `trials.warmup_steps` = global step at which the steady state begins; `steps_measured` =
  global steps after it (None for speed_data, which has no step counts).
- `trials.extra`: dataset ('speed_data' | 'speed_data_base' | 'speed_and_cluster_size'),
  path, global_steps_per_s (median), samples, warmup_samples, import_fingerprint.

The same (model, GPU, workers) may appear in several of those datasets: they are separate
runs, kept as separate trials; `extra.dataset` tells them apart.

`models` rows: params and flops_per_sample from speed_data/0latency_data.csv (`Model FLOPs`
matches forward + backward FLOPs per sample: ResNet-15's ~0.1 GMAC x 2 x 3 = 0.63 GFLOPs,
Shake-Shake 26 2x96d's 3.8 GMAC x 2 x 3 = 22.9 GFLOPs), params alone from the checkpoint
tables for models without speed data; gradient_bytes = 4 x params (fp32); activation_bytes
unknown (None); tensor sizes in `extra`, and `extra.tensors` = the checkpoint tables'
`Number of Tensors` (cmdare_overheads.checkpoint_tensors).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from advisor.importers.cmdare_names import canonical_gpu, canonical_model, parse_run_name
from gpuadvisor.store import now_iso

BATCH_PER_WORKER = 128  # Tensor2Tensor resnet_cifar_* and shakeshake_* hparams
STEADY_FRACTION = 0.9  # warm-up ends at the first sample within 10% of the late median
SOFTWARE = {"tensorflow": "1.10", "tensor2tensor": "CM-DARE fork"}


def steady_state(values: np.ndarray) -> int:
    """Index of the first steady sample: the first within STEADY_FRACTION of the median of
    the run's second half (workers join one by one, so early samples are low), at most the
    midpoint."""
    late_median = float(np.median(values[len(values) // 2 :]))
    above = np.flatnonzero(values >= STEADY_FRACTION * late_median)
    return int(min(above[0], len(values) // 2)) if above.size else len(values) // 2


def speed_trial(rates: np.ndarray, *, workers: int, steps: np.ndarray | None = None,
                skip_warmup: bool = True) -> dict[str, Any]:
    """Per-run figures from a series of global steps/s."""
    start = steady_state(rates) if skip_warmup else 0
    steady = rates[start:]
    step_times = workers / steady
    median_rate = float(np.median(steady))
    row = {
        "throughput": median_rate * BATCH_PER_WORKER,
        "step_time_mean": float(np.mean(step_times)),
        "step_time_median": workers / median_rate,
        "step_time_p95": float(np.percentile(step_times, 95)),
        "warmup_steps": int(steps[start]) if steps is not None else None,
        "steps_measured": int(steps[-1] - steps[start]) if steps is not None else None,
    }
    extra = {"global_steps_per_s": median_rate, "samples": len(steady), "warmup_samples": start,
             "throughput_p2_5": float(np.percentile(steady, 2.5)) * BATCH_PER_WORKER,
             "throughput_p97_5": float(np.percentile(steady, 97.5)) * BATCH_PER_WORKER}
    return row | {"extra": extra}


def _trial(model: str, gpu: str, workers: int, ps_count: int, figures: dict[str, Any],
           key: str, recorded_at: str | None, dataset: str) -> dict[str, Any]:
    extra = {"dataset": dataset, "path": key, **figures.pop("extra")}
    return {
        "trial_key": f"cmdare:{key}",
        "sweep": "cmdare",
        "status": "finished",
        "source": "import:cmdare",
        "provider": "gcp",
        "gpu_type": gpu,
        "gpus_per_node": 1,
        "nodes": workers,
        "sync": "ps",
        "ps_count": ps_count,
        "model": model,
        "batch_per_gpu": BATCH_PER_WORKER,
        "precision": "fp32",
        "image_size": 32,
        **figures,
        "software": SOFTWARE,
        "extra": extra,
        "recorded_at": recorded_at or now_iso(),
    }


def _iso(unix_s: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(unix_s, timezone.utc).isoformat(timespec="seconds")


def read_series(path: Path):
    """A TensorBoard export (Wall time, Step, Value): the rows with a step and a positive
    value (summary rows at the end have empty leading fields; step 0 has value 0)."""
    import pandas as pd

    frame = pd.read_csv(path)
    missing = {"Wall time", "Step", "Value"} - set(frame.columns)
    if missing:
        raise ValueError(f"{path} lacks columns {sorted(missing)} (a TensorBoard CSV export)")
    frame = frame.dropna(subset=["Wall time", "Step", "Value"])
    return frame[frame["Value"] > 0].sort_values("Step")


def cluster_trials(root: Path, files: list[Path]) -> list[dict[str, Any]]:
    """speed_and_cluster_size/<gpu>[ps<P>]/<run>/*.csv and speed_data_base/<run>/*.csv."""
    trials = []
    for path in files:
        run_dir = path.parent
        dataset = run_dir.relative_to(root).parts[0]
        parent = run_dir.parent.name if dataset == "speed_and_cluster_size" else None
        name = parse_run_name(run_dir.name, parent)
        workers = name.workers or 1
        series = read_series(path)
        if len(series) < 3:
            raise ValueError(f"{path} has {len(series)} usable rows; a run needs at least 3")
        figures = speed_trial(series["Value"].to_numpy(float), workers=workers,
                              steps=series["Step"].to_numpy(int))
        key = path.relative_to(root).as_posix()
        trials.append(_trial(name.model, name.gpu, workers, name.ps_count or 1, figures, key,
                             _iso(float(series["Wall time"].iloc[0])), dataset))
    return trials


def latency_data(path: Path):
    import pandas as pd

    frame = pd.read_csv(path)
    needed = {"GPU (temp)", "Model (temp)", "Speed (steps/sec)", "Model FLOPs",
              "Number of Parameters"}
    if needed - set(frame.columns):
        raise ValueError(f"{path} lacks columns {sorted(needed - set(frame.columns))}")
    return frame


def single_worker_trials(root: Path, path: Path, frame) -> list[dict[str, Any]]:
    """speed_data/*.csv: rows of one-worker, one-PS step speed per (model, GPU); no time
    order, so no warm-up to skip."""
    trials = []
    for (gpu, model), group in frame.groupby(["GPU (temp)", "Model (temp)"], sort=True):
        figures = speed_trial(group["Speed (steps/sec)"].to_numpy(float), workers=1,
                              skip_warmup=False)
        if "Latency (ms)" in group:
            figures["extra"]["added_latency_ms"] = float(group["Latency (ms)"].iloc[0])
        key = f"{path.relative_to(root).as_posix()}#{model}/{gpu}"
        trials.append(_trial(canonical_model(model), canonical_gpu(gpu), 1, 1, figures, key,
                             None, "speed_data"))
    return trials


def model_features(frame) -> dict[str, dict[str, Any]]:
    """Canonical model -> params, flops_per_sample, tensor sizes, from the speed table."""
    out = {}
    for model, group in frame.groupby("Model (temp)", sort=True):
        first = group.iloc[0]
        extra = {"names": [str(model)]}
        for column, key in (("Average Tensor Size (MB)", "avg_tensor_mib"),
                            ("Max Tensor Size (MB)", "max_tensor_mib")):
            if column in group and not np.isnan(first[column]):
                extra[key] = float(first[column])
        out[canonical_model(str(model))] = {
            "params": int(first["Number of Parameters"]),
            "flops_per_sample": float(first["Model FLOPs"]),
            "extra": extra,
        }
    return out
