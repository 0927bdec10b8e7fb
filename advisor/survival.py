"""Weibull survival model of spot-node lifetimes, fitted with right-censoring, plus the prior.

Fitted per (provider, GPU, region), then pooled over regions and over GPUs, from the store's
`lifetimes` table (spot rows only). Where no group has enough revocations the artifact falls
back to the shipped `lifetime_prior.csv` (documented in datasets/README.md). scipy is imported
lazily: this runs inside `advisor fit`, never on the recommend path.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from gpuadvisor import data

MIN_EVENTS = 3  # fewer revocations than this say too little about the shape


def fit_weibull(lifetime_s: np.ndarray, revoked: np.ndarray) -> tuple[float, float]:
    """Maximum-likelihood (shape, scale_s) with censored lives (revoked == 0)."""
    from scipy.optimize import minimize

    t = np.asarray(lifetime_s, float)
    event = np.asarray(revoked, bool)
    t_ref = float(np.median(t))  # fit in units of the median life: well-conditioned
    u = t / t_ref

    def negative_log_likelihood(params: np.ndarray) -> float:
        shape, scale = np.exp(params)
        z = u / scale
        log_density = np.log(shape / scale) + (shape - 1) * np.log(z) - z ** shape
        return -(log_density[event].sum() - (z[~event] ** shape).sum())

    result = minimize(negative_log_likelihood, x0=np.zeros(2), method="Nelder-Mead",
                      options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 4000})
    shape, scale = np.exp(result.x)
    return float(shape), float(scale * t_ref)


def fit_lifetimes(rows: Iterable[Mapping[str, Any]]) -> list[dict]:
    """Fitted groups, most specific first: (provider, gpu, region), (provider, gpu, *),
    (provider, *, *); only groups with at least MIN_EVENTS revocations."""
    spot = [r for r in rows if r.get("spot") and r.get("lifetime_s") and r["lifetime_s"] > 0]
    groups: dict[tuple[str, str, str], list] = {}
    for row in spot:
        provider = str(row.get("provider") or "").lower()
        gpu = str(row.get("gpu_type") or "*").lower()
        region = str(row.get("region") or "*").lower()
        for key in ((provider, gpu, region), (provider, gpu, "*"), (provider, "*", "*")):
            groups.setdefault(key, []).append(row)
    fitted = []
    for key in sorted(groups, key=lambda k: (k.count("*"), k)):
        lives = groups[key]
        revoked = np.array([bool(r.get("revoked")) for r in lives])
        if revoked.sum() < MIN_EVENTS:
            continue
        shape, scale = fit_weibull(np.array([r["lifetime_s"] for r in lives]), revoked)
        fitted.append({"provider": key[0], "gpu": key[1], "region": key[2],
                       "shape": round(shape, 6), "scale_s": round(scale, 3),
                       "n": len(lives), "events": int(revoked.sum())})
    return fitted


def load_prior(path: Path | None = None) -> tuple[list[dict], dict[str, float]]:
    """(prior rows most specific first, AWS interruption bucket -> Weibull scale_s)."""
    rows, buckets = [], {}
    with open(path or data.find("lifetime_prior.csv"), newline="") as handle:
        for row in csv.DictReader(handle):
            if row["interruption_bucket"]:
                buckets[row["interruption_bucket"]] = float(row["scale_s"])
                continue
            rows.append({
                "provider": row["provider"], "gpu": row["gpu"].lower(),
                "region": row["region"].lower(), "shape": float(row["shape"]),
                "scale_s": float(row["scale_s"]),
                "cap_s": float(row["cap_s"]) if row["cap_s"] else None,  # None: no cap
                "source": row["source"],
            })
    rows.sort(key=lambda r: (r["gpu"] == "*") + (r["region"] == "*"))
    return rows, buckets
