"""Weibull survival model of spot-node lifetimes, fitted with right-censoring, plus the prior.

Fitted per (provider, GPU, region), then pooled over regions and over GPUs, from the store's
`lifetimes` table (spot rows only). Where no group has enough revocations the artifact falls
back to published evidence: GCP's curves are fitted per region on the lifetimes digitised from
CM-DARE's figure (`lifetimes_cmdare_figure.csv`), the rest comes from `lifetime_prior.csv`
(both documented in datasets/README.md). scipy is imported lazily: this runs inside
`advisor fit`, never on the recommend path.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from advisor.artifact import PREEMPTIBLE_CAP_S
from gpuadvisor import data

MIN_EVENTS = 3  # fewer revocations than this say too little about the shape
# A region whose revocations all come in the first hour (us-east1 in CM-DARE's figure) drives
# the shape to 0; the bound keeps the fit finite. Weibull(0.05) already puts nearly all its
# hazard in the first minutes.
MIN_SHAPE = 0.05
FIGURE_SOURCE = ("CM-DARE (ICDCS 2020) K80 lifetime figure, digitised; Weibull fitted with "
                 "the 24 h cap as censoring")


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


def fit_weibull_binned(curves: list[tuple[np.ndarray, np.ndarray]],
                       cap_s: float = PREEMPTIBLE_CAP_S) -> tuple[float, float]:
    """Maximum-likelihood (shape, scale_s) from empirical CDFs read at a few hours: each rise
    between two read-off hours is the share of lives that ended in that interval, and what is
    left at the last point lived to the cap, where the provider stopped it (censored, not a
    revocation). Curves weigh equally."""
    from scipy.optimize import minimize

    pieces = []  # (interval start s, end s, share), end = inf for lives cut by the cap
    for hours, cdf in curves:
        edges = np.r_[0.0, np.asarray(hours, float) * 3600.0]
        shares = np.diff(np.r_[0.0, np.asarray(cdf, float)])
        pieces += [(a, b, w) for a, b, w in zip(edges[:-1], edges[1:], shares) if w > 0]
        pieces.append((cap_s, math.inf, 1.0 - float(cdf[-1])))
    start, end, share = (np.array(column) for column in zip(*pieces))
    ends = np.isfinite(end)

    def negative_log_likelihood(params: np.ndarray) -> float:
        shape, scale = math.exp(params[0]), math.exp(params[1]) * 3600.0
        alive_start = np.exp(-((start / scale) ** shape))
        alive_end = np.zeros_like(start)
        alive_end[ends] = np.exp(-((end[ends] / scale) ** shape))
        return -float(share @ np.log(np.maximum(alive_start - alive_end, 1e-300)))

    bounds = [(math.log(MIN_SHAPE), math.log(20.0)), (math.log(1e-3), math.log(1e12))]
    result = minimize(negative_log_likelihood, x0=np.array([0.0, math.log(24.0)]),
                      method="L-BFGS-B", bounds=bounds)
    return float(math.exp(result.x[0])), float(math.exp(result.x[1]) * 3600.0)


def fit_figure(path: Path | None = None) -> list[dict]:
    """Weibull per (provider, region) of the digitised lifetime figure, then pooled over its
    regions (region '*'); each keeps the cap of the VMs it was read from."""
    curves: dict[tuple[str, str], tuple[list, list]] = {}
    with open(path or data.find("lifetimes_cmdare_figure.csv"), newline="") as handle:
        for row in csv.DictReader(handle):
            hours, cdf = curves.setdefault((row["provider"], row["region"].lower()), ([], []))
            hours.append(float(row["hour"]))
            cdf.append(float(row["cdf"]))
    rows = []
    providers = sorted({provider for provider, _ in curves})
    groups = [((p, r), [curves[(p, r)]]) for p, r in sorted(curves)]
    groups += [((p, "*"), [c for (q, _), c in sorted(curves.items()) if q == p])
               for p in providers]
    for (provider, region), chosen in groups:
        shape, scale = fit_weibull_binned(chosen)
        rows.append({"provider": provider, "gpu": "*", "region": region,
                     "shape": round(shape, 6), "scale_s": round(scale, 3),
                     "cap_s": PREEMPTIBLE_CAP_S, "curves": len(chosen),
                     "source": f"{FIGURE_SOURCE} ({provider}/{region})"})
    return rows


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


def load_prior(path: Path | None = None, curves: list[dict] | None = None
               ) -> tuple[list[dict], dict[str, float]]:
    """(prior rows most specific first, AWS interruption bucket -> Weibull scale_s). A row
    whose `curve_of` names a fitted figure curve ('gcp/*', from `fit_figure`, the default)
    takes that curve's shape and scale, with its own cap (none when empty)."""
    by_name = {f"{c['provider']}/{c['region']}": c for c in (curves or fit_figure())}
    rows, buckets = [], {}
    with open(path or data.find("lifetime_prior.csv"), newline="") as handle:
        for row in csv.DictReader(handle):
            if row["interruption_bucket"]:
                buckets[row["interruption_bucket"]] = float(row["scale_s"])
                continue
            name = row.get("curve_of") or ""  # a copy from before the column: none
            curve = by_name.get(name) if name else None
            if name and curve is None:
                raise ValueError(f"lifetime prior row for {row['provider']} names curve "
                                 f"{name!r}, which the lifetime figure lacks")
            rows.append({
                "provider": row["provider"], "gpu": row["gpu"].lower(),
                "region": row["region"].lower(),
                "shape": curve["shape"] if curve else float(row["shape"]),
                "scale_s": curve["scale_s"] if curve else float(row["scale_s"]),
                "cap_s": float(row["cap_s"]) if row["cap_s"] else None,  # None: no cap
                "source": row["source"],
            })
    rows.sort(key=lambda r: (r["gpu"] == "*") + (r["region"] == "*"))
    return rows, buckets
