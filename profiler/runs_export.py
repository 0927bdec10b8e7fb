"""Reading trials out of a measurement store in the forms `profiler runs` prints: the exchange
form of docs/interfaces.md (trials with their child rows nested), flat rows for CSV and
parquet, and short human-readable rows for the table."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from gpuadvisor.store import TRIAL_COLUMNS, Store

CHILD_TABLES = ("revocations", "startups", "checkpoints")
FLAT_COLUMNS = ["id", *TRIAL_COLUMNS, "revocation_count"]


def open_existing(path: Path) -> Store:
    """Open a store for reading: never creates one where there was none, never writes."""
    return Store(path, readonly=True)


def exchange_trials(store: Store, sweep: str | None = None, model: str | None = None,
                    trial_id: int | None = None) -> list[dict[str, Any]]:
    """Trials matching the filters, each with its revocations, startups and checkpoints."""
    where = {k: v for k, v in (("sweep", sweep), ("model", model), ("id", trial_id))
             if v is not None}
    trials = store.rows("trials", where)
    ids = [t["id"] for t in trials]
    marks = ", ".join("?" for _ in ids)
    for table in CHILD_TABLES:
        by_trial: dict[int, list] = defaultdict(list)
        if ids:
            sql = f"SELECT * FROM {table} WHERE trial_id IN ({marks}) ORDER BY id"
            for row in store.query(sql, ids):
                by_trial[row["trial_id"]].append(row)
        for trial in trials:
            trial[table] = by_trial[trial["id"]]
    return trials


def flat_rows(trials: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per trial: the trial columns, JSON columns as JSON text, and a revocation count."""
    rows = []
    for trial in trials:
        row = {c: trial.get(c) for c in FLAT_COLUMNS[:-1]}
        for column in ("software", "extra"):
            if isinstance(row[column], (dict, list)):
                row[column] = json.dumps(row[column], sort_keys=True)
        row["revocation_count"] = len(trial.get("revocations", []))
        rows.append(row)
    return rows


def write_parquet(trials: list[dict[str, Any]], path: Path) -> None:
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("parquet output needs pandas and pyarrow: "
                          "pip install 'gpu-advisor[fit]'") from None
    frame = pd.DataFrame(flat_rows(trials), columns=FLAT_COLUMNS)
    frame.to_parquet(path, index=False)


def _num(value: Any, digits: int = 1, scale: float = 1.0) -> str:
    return "-" if value is None else f"{value * scale:,.{digits}f}"


def _pair(a: Any, b: Any, digits: int, scale: float = 1.0) -> str:
    if a is None and b is None:
        return "-"
    return f"{_num(a, digits, scale)}/{_num(b, digits, scale)}"


def summary_row(trial: dict[str, Any]) -> dict[str, str]:
    """The table's cells for one trial: units in the headers, pairs folded into one cell."""
    gpu = f"x{trial['gpu_type']}" if trial.get("gpu_type") else " cpu"
    cluster = f"{trial.get('nodes') or '?'}x{trial.get('gpus_per_node') or 1}{gpu}"
    interval = "-"
    if trial.get("throughput_lo") is not None and trial.get("throughput_hi") is not None:
        interval = f"{_num(trial['throughput_lo'])}-{_num(trial['throughput_hi'])}"
    return {
        "id": str(trial["id"]), "sweep": trial.get("sweep") or "-",
        "model": trial.get("model") or "-", "cluster": cluster,
        "precision": trial.get("precision") or "-",
        "batch": _num(trial.get("batch_per_gpu"), 0),
        "throughput": _num(trial.get("throughput")), "interval": interval,
        "step": _pair(trial.get("step_time_median"), trial.get("step_time_p95"), 0, 1000),
        "first_step": _num(trial.get("time_to_first_step"), 1),
        "checkpoint": _pair(trial.get("checkpoint_save_s"), trial.get("checkpoint_restore_s"), 2),
        "revocations": str(len(trial.get("revocations", []))),
        "status": trial.get("status") or "-",
    }


SUMMARY_HEADERS = {
    "id": "id", "sweep": "sweep", "model": "model", "cluster": "nodes x GPUs",
    "precision": "prec", "batch": "batch/GPU", "throughput": "samples/s",
    "interval": "95% CI", "step": "step ms p50/p95", "first_step": "1st step s",
    "checkpoint": "ckpt s save/load", "revocations": "revoked", "status": "status",
}
