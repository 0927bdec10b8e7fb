"""Anchoring (advisor/anchoring.py): a prediction near measurements of the same model on the
same GPU follows them, and fades back to the fitted model away from them."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

from advisor import anchoring, physics
from advisor.artifact import Artifact, load_artifact
from advisor.features import configuration_features, model_features
from advisor.fitting import software_label
from gpuadvisor import data


@pytest.fixture(scope="module")
def cards():
    return model_features()


def features(cards, batches, gpu="H200", precision="tf32", model="resnet50"):
    n = len(batches)
    return configuration_features({
        "model": [model] * n, "gpu": [gpu] * n, "provider": ["aws"] * n,
        "sync": ["allreduce"] * n, "ps_count": [0] * n, "precision": [precision] * n,
        "nodes": [1] * n, "gpus_per_node": [1] * n, "batch_per_gpu": list(batches),
        "spot": [False] * n, "network_gbps": [100.0] * n, "interconnect": ["NVSwitch"] * n,
    }, cards)


def test_an_anchor_follows_its_cells_measurements_and_fades_away_from_them(cards):
    kernel = {"length_scale": math.log(4), "noise_share": 0.01}
    anchors = anchoring.fit_anchors(features(cards, (64, 256)), np.array([0.2, -0.2]), kernel)
    at = anchoring.anchor(anchors, features(cards, (64, 128, 256, 1 << 20)))
    assert at[0] == pytest.approx(0.2, abs=0.02)
    assert at[2] == pytest.approx(-0.2, abs=0.02)
    assert -0.2 < at[1] < 0.2
    assert abs(at[3]) < 1e-6  # far from every measurement: the fitted model
    # Another GPU, another arithmetic unit, another model: cells of their own, not measured.
    for other in (features(cards, (64,), gpu="A100-80GB"),
                  features(cards, (64,), precision="bf16"),
                  features(cards, (64,), model="resnet101")):
        assert anchoring.anchor(anchors, other) == pytest.approx([0.0])
    assert anchoring.anchor(None, other) == pytest.approx([0.0])


def residuals_by_cell(cards, level, noise, seed=0):
    """Rows of ResNet-50 on six GPUs at five batches: a level per GPU plus noise."""
    rng = np.random.default_rng(seed)
    gpus = ("V100", "A100-80GB", "H100-80GB", "H200", "L4", "A10G")
    batches = (32, 64, 128, 256, 512)
    rows = [features(cards, batches, gpu=gpu) for gpu in gpus]
    merged = {key: np.concatenate([np.asarray(r[key]) for r in rows]) for key in rows[0]}
    offsets = np.repeat(rng.normal(0, level, len(gpus)), len(batches))
    return merged, offsets + rng.normal(0, noise, len(offsets))


def test_the_kernel_is_the_one_the_residuals_make_most_likely(cards):
    # A level of its own on each GPU, hardly any scatter: residuals correlate across a cell.
    smooth = anchoring.choose_kernel(*residuals_by_cell(cards, level=0.3, noise=0.01))
    assert smooth == {"length_scale": max(anchoring.LENGTH_SCALES),
                      "noise_share": min(anchoring.NOISE_SHARES)}
    # Scatter alone: neighbours say nothing of each other.
    rough = anchoring.choose_kernel(*residuals_by_cell(cards, level=0.0, noise=0.3))
    assert rough["noise_share"] == max(anchoring.NOISE_SHARES)


def test_beside_this_projects_h200_measurements_the_shipped_model_follows_them(cards):
    # ResNet-50 on an H200, measured by the profiler at batch 64 and 256 in TF32 and bf16
    # (datasets/measurements/h200.json): one sample either side of each, priced for the stack
    # that measured them (a cell's residuals are taken with each row's own stack's effects),
    # the anchored prediction lies nearer the cell's measurements there than the same
    # artifact's without its anchors. A cell is an arithmetic unit: at batch 64 the TF32 one
    # also holds the fp32 run (PyTorch's default runs its convolutions in TF32), 1,883/s beside
    # TF32's 1,642, and the 16-bit one the amp run beside bf16's, so the anchor follows their
    # geometric mean there.
    artifact = load_artifact()
    bare = Artifact(copy.deepcopy(artifact.doc))
    del bare.doc["throughput"]["anchors"]
    trials = [t for t in json.loads(data.shipped("measurements").joinpath("h200.json")
                                    .read_text()) if t["model"] == "resnet50"]

    unit = {precision: physics.arithmetic_unit(features(cards, (64,), precision=precision))[0]
            for precision in {t["precision"] for t in trials}}
    for precision in ("tf32", "bf16"):
        measured = artifact.predict("throughput", features(cards, (64, 256), precision=precision))
        assert list(measured.provenance) == ["measured", "measured"]
        (stack,) = {software_label(t) for t in trials if t["precision"] == precision}
        beside = {**features(cards, (63, 65, 255, 257), precision=precision),
                  "software": np.full(4, stack)}
        cell = [t for t in trials if unit[t["precision"]] == unit[precision]]
        nearest = np.repeat([math.exp(np.mean([math.log(t["throughput"]) for t in cell
                                               if t["batch_per_gpu"] == batch]))
                             for batch in (64, 256)], 2)
        anchored = artifact.predict("throughput", beside).value
        unanchored = bare.predict("throughput", beside).value
        assert np.all(np.abs(np.log(anchored / nearest)) < np.abs(np.log(unanchored / nearest)))
