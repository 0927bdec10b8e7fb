"""Anchoring: a prediction near measurements of the same model on the same GPU follows them.

The physics and its correction are fitted across every model and GPU, so on one pair they
err in a pattern of their own, and a measured configuration (answered with its measurement)
could sit beside unmeasured neighbours that disagree with it: this project's H200 runs of
ResNet-50 in bf16 take 10 ms a step whatever the batch and 0.37 ms an image, where the fit
prices 23 ms and 0.22 ms, so at batch 192 it predicted 2,949 images/s between measurements of
1,861 at batch 64 and 2,427 at 256.

A cell is a model at one input size on one GPU (its silicon, cloud.gpus.silicon: a
V100-32GB's runs are a V100's), arithmetic unit and kind of synchronisation, in either memory
layout (the physics prices NCHW's transposes; what it misses of a model on a GPU it misses in
both, as timm's NCHW and channels-last pairs show). Each training row leaves
a residual, log(measured / predicted) with its own software stack's effect, and a cell's
residuals are smoothed over log per-GPU batch and log workers by Gaussian-process regression
(kriging): k(d) = tau^2 exp(-d^2 / 2l^2) between two configurations at distance d, plus a
noise variance (the stacks' and runs' scatter) on each.
The posterior mean (zero far from every measurement: the fitted model) is a configuration's
anchor, a log factor on its throughput: near a measurement nearly its residual, between two
in between. The mean depends on the length scale l and the noise share sigma^2 / tau^2
only; both maximise the residuals' pooled marginal likelihood over a small grid, on the
training rows alone (`choose_kernel`), so no held-out row sets them.
numpy only: it is on the recommend path.
"""

from __future__ import annotations

import math

import numpy as np

from advisor import physics

# The grids the kernel is chosen on: length scales in log units (a factor of 2 to 256 in
# batch or workers) and the noise's share of the signal variance.
LENGTH_SCALES = tuple(math.log(f) for f in (2.0, 4.0, 16.0, 256.0))
NOISE_SHARES = (0.03, 0.1, 0.3, 1.0, 3.0)
# What sets a cell apart: runs of one model on one GPU that the physics prices differently.
CELL_COLUMNS = ("model", "gpu", "sync", "flops_per_sample")


def cells(features: dict) -> tuple[list[str], np.ndarray]:
    """(cell keys, each row's index into them)."""
    return physics.unique_keys(*(physics.codes(features, physics.identity(features, c))
                                 for c in CELL_COLUMNS),
                               physics.arithmetic_unit(features))


def coordinates(features: dict) -> np.ndarray:
    """Each row's place within its cell: log per-GPU batch and log workers."""
    workers = np.asarray(features["nodes"], float) * np.asarray(features["gpus_per_node"], float)
    return np.column_stack([np.log(np.asarray(features["batch_per_gpu"], float)),
                            np.log(workers)])


def _correlation(one: np.ndarray, two: np.ndarray, length_scale: float) -> np.ndarray:
    squared = ((one[:, None, :] - two[None, :, :]) ** 2).sum(axis=-1)
    return np.exp(-squared / (2 * length_scale ** 2))


def _groups(features: dict, residual: np.ndarray):
    """(key, coordinates, residuals) of every cell with a finite residual."""
    keys, inverse = cells(features)
    x = coordinates(features)
    ok = np.isfinite(residual)
    order = np.argsort(inverse, kind="stable")
    order = order[ok[order]]
    bounds = np.flatnonzero(np.diff(inverse[order])) + 1
    for rows in np.split(order, bounds):
        if len(rows):
            yield keys[inverse[rows[0]]], x[rows], residual[rows]


def choose_kernel(features: dict, residual: np.ndarray) -> dict[str, float]:
    """The grid's length scale and noise share of greatest pooled marginal likelihood of the
    residuals, the signal variance profiled out (tau^2 = sum r'C^-1 r / n)."""
    groups = [(x, r) for _, x, r in _groups(features, residual)]
    n = sum(len(r) for _, r in groups)
    best, chosen = -np.inf, {"length_scale": LENGTH_SCALES[0], "noise_share": NOISE_SHARES[-1]}
    if n == 0:
        return chosen
    for length_scale in LENGTH_SCALES:
        correlations = [_correlation(x, x, length_scale) for x, _ in groups]
        for share in NOISE_SHARES:
            quadratic = log_det = 0.0
            for c, (_, r) in zip(correlations, groups):
                factor = np.linalg.cholesky(c + share * np.eye(len(r)))
                z = np.linalg.solve(factor, r)
                quadratic += float(z @ z)
                log_det += 2 * float(np.log(np.diag(factor)).sum())
            likelihood = -0.5 * (n * math.log(max(quadratic / n, 1e-300)) + log_det)
            if likelihood > best:
                best, chosen = likelihood, {"length_scale": length_scale, "noise_share": share}
    return chosen


def fit_anchors(features: dict, residual: np.ndarray, kernel: dict[str, float]) -> dict:
    """The artifact's `anchors`: the kernel and, per cell, its rows' coordinates and the
    weights (C + noise share I)^-1 r its posterior mean takes them with."""
    length_scale, share = kernel["length_scale"], kernel["noise_share"]
    out = {}
    for key, x, r in _groups(features, residual):
        c = _correlation(x, x, length_scale) + share * np.eye(len(r))
        out[key] = {"x": np.round(x, 6).tolist(),
                    "weights": np.linalg.solve(c, r).round(6).tolist()}
    return {**kernel, "cells": out}


def anchor(anchors: dict | None, features: dict) -> np.ndarray:
    """Each row's anchor, a log factor on its predicted throughput: 0 outside every cell the
    fit measured (or without anchors)."""
    n = len(features["model"])
    out = np.zeros(n)
    if not anchors or not anchors["cells"]:
        return out
    keys, inverse = cells(features)
    x = coordinates(features)
    for code, key in enumerate(keys):
        cell = anchors["cells"].get(key)
        if cell is None:
            continue
        rows = np.flatnonzero(inverse == code)
        k = _correlation(x[rows], np.asarray(cell["x"], float), anchors["length_scale"])
        out[rows] = k @ np.asarray(cell["weights"], float)
    return out
