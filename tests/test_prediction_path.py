"""One prediction path: `recommend` predicts exactly what `Artifact.predict` predicts on the
features `fit` and `evaluate` build from a stored trial of the same configuration, and a
configuration in the training data answers `measured` with its measured value."""

from __future__ import annotations

import numpy as np
import pytest

from advisor.api import node_lifetimes
from advisor.artifact import load_artifact
from advisor.candidates import Filters, enumerate_candidates
from advisor.features import model_features, trial_features
from advisor.optimizer import Constraints, rank_plans
from advisor.workload import build_workload
from cloud.catalog import load_catalog
from gpuadvisor.cards import load_cards

pytestmark = pytest.mark.filterwarnings("ignore::cloud.catalog.StaleCatalogWarning")


def trial_of(plans, row: int, workload) -> dict:
    """The store trial that would record candidate `row` (as the profiler writes it)."""
    return {
        "model": workload.model, "gpu_type": str(plans["gpu_type"][row]),
        "provider": str(plans["provider"][row]), "instance_type": str(plans["instance_type"][row]),
        "nodes": int(plans["nodes"][row]), "gpus_per_node": int(plans["gpus_per_node"][row]),
        "batch_per_gpu": int(plans["micro_batch"][row]), "precision": workload.precision,
        "sync": "allreduce", "spot": bool(plans["spot"][row]),
        "extra": {"channels_last": workload.channels_last},
        "accumulation": int(plans["accumulation"][row]),
        "checkpointing": bool(plans["checkpointing"][row]),
        "sharded": bool(plans["sharded"][row]),
    }


def ranked(channels_last: bool):
    workload = build_workload(load_cards(), "resnet50", precision="amp",
                              channels_last=channels_last)
    candidates = enumerate_candidates(load_catalog().as_arrays(), workload,
                                      Filters(gpus=["A100-80GB", "T4"], max_nodes=3))
    artifact = load_artifact()
    plans = rank_plans(workload, candidates, candidates.features(workload), artifact,
                       node_lifetimes(artifact, candidates.spot_markets()),
                       Constraints(deadline_s=30 * 86400))
    return workload, plans, artifact


@pytest.fixture(scope="module")
def recommended():
    """ResNet-50 in AMP kept channels-last, as NVIDIA's recipe that measured it ran."""
    return ranked(channels_last=True)


def test_recommend_predicts_what_artifact_predicts_on_trial_features(recommended):
    workload, plans, artifact = recommended
    rows = range(len(plans.candidates))
    features, kept, skipped = trial_features([trial_of(plans, r, workload) for r in rows],
                                             model_features())
    assert not skipped and len(kept) == len(plans.candidates)
    assert np.isfinite(features["tensors"]).all()  # the per-tensor terms are not zeroed
    direct = artifact.predict("throughput", features)
    np.testing.assert_allclose(plans["throughput"], direct.value, rtol=1e-12)
    np.testing.assert_allclose(plans["throughput_lo"], direct.lo, rtol=1e-12)
    np.testing.assert_allclose(plans["throughput_hi"], direct.hi, rtol=1e-12)
    assert plans["provenance"].tolist() == direct.provenance.tolist()


def test_configuration_in_training_data_is_measured_with_its_value(recommended):
    workload, plans, artifact = recommended
    # NVIDIA's ResNet-50 AMP figure on one node of 8xA100-80GB (datasets/published_throughput.csv)
    shipped = artifact.doc["throughput"]["seen"]["configs"]
    [key] = [k for k in shipped if k.startswith("resnet50|a100-80gb|amp|allreduce|1|8|256|0|")]
    measured_value = shipped[key][0]
    eight = np.flatnonzero((plans["gpus_per_node"] == 8) & (plans["nodes"] == 1)
                           & (plans["gpu_type"] == "A100-80GB"))
    assert len(eight)
    assert set(plans["provenance"][eight]) == {"measured"}
    np.testing.assert_allclose(plans["throughput"][eight], measured_value)
    assert (plans["throughput_lo"][eight] < measured_value).all()
    assert (plans["throughput_hi"][eight] > measured_value).all()
    # It says whose measurement it is: NVIDIA's PyTorch figures (20.12 and 21.03), not
    # MXNet's or PaddlePaddle's of the same configuration, which only widen its range.
    rows = plans.candidates.features(workload)
    by = artifact.measured_by({k: np.asarray(v)[eight[:1]] for k, v in rows.items()})
    assert by == ["NVIDIA/DeepLearningExamples PyTorch/Classification/ConvNets in the "
                  "pytorch-20.12 container; NVIDIA/DeepLearningExamples "
                  "PyTorch/Classification/ConvNets in the pytorch-21.03 container"]
    # Two nodes of the same instance were never measured.
    two = np.flatnonzero((plans["gpus_per_node"] == 8) & (plans["nodes"] == 2)
                         & (plans["gpu_type"] == "A100-80GB"))
    assert "measured" not in set(plans["provenance"][two])
    # Nor was the job in PyTorch's default NCHW, whose convolutions cuDNN transposes: the
    # physics prices it, below NVIDIA's channels-last figure.
    _, nchw, _ = ranked(channels_last=False)
    eight = np.flatnonzero((nchw["gpus_per_node"] == 8) & (nchw["nodes"] == 1)
                           & (nchw["gpu_type"] == "A100-80GB"))
    assert "measured" not in set(nchw["provenance"][eight])
    assert (nchw["throughput"][eight] < measured_value).all()


def test_a_trial_recorded_under_the_drivers_device_name_is_the_same_configuration(recommended):
    workload, plans, artifact = recommended
    eight = np.flatnonzero((plans["gpus_per_node"] == 8) & (plans["nodes"] == 1)
                           & (plans["gpu_type"] == "A100-80GB"))
    trial = trial_of(plans, int(eight[0]), workload)
    named = {**trial, "gpu_type": "NVIDIA A100-SXM4-80GB"}  # torch.cuda.get_device_name()
    (canonical, _, _), (driver, _, skipped) = (trial_features([t], model_features())
                                               for t in (trial, named))
    assert not skipped and driver["gpu"].tolist() == ["A100-80GB"]
    a, b = artifact.predict("throughput", canonical), artifact.predict("throughput", driver)
    assert b.provenance.tolist() == ["measured"]
    np.testing.assert_allclose(b.value, a.value, rtol=1e-12)


def test_a_trial_carries_what_its_host_takes_to_dispatch_an_operator(recommended):
    """`extra.host_op_us`, which the profiler's workers record, reaches the features of the
    trial's configuration; a configuration without it (every candidate) has the reference
    host, so its prediction is the candidate's."""
    from advisor import physics

    workload, plans, artifact = recommended
    trial = trial_of(plans, 0, workload)
    slow = {**trial, "extra": {**trial["extra"], "host_op_us": 50 * physics.REFERENCE_HOST_OP_US}}
    features, kept, _ = trial_features([trial, slow], model_features())
    assert len(kept) == 2 and np.isnan(features["host_op_us"][0])
    assert features["host_op_us"][1] == 50 * physics.REFERENCE_HOST_OP_US
    host = physics.host_seconds(features)
    assert host[1] == pytest.approx(50 * host[0])
    value = artifact.predict("throughput", features).value
    assert value[0] == pytest.approx(plans["throughput"][0], rel=1e-12) and value[1] < value[0]


def test_a_trial_carries_its_optimizer(recommended):
    """The update reads and writes the optimizer's state: a trial that records
    `extra.optimizer` (the profiler's workers do) is priced with its state, one that does not
    with its card's recipe's (a ResNet's SGD, as every candidate of this workload); an unknown
    name is refused with the accepted ones."""
    workload, plans, artifact = recommended
    trial = trial_of(plans, 0, workload)
    adam = {**trial, "extra": {**trial["extra"], "optimizer": "Adam"}}
    features, kept, _ = trial_features([trial, adam], model_features())
    assert len(kept) == 2 and features["optimizer_update_bytes"].tolist() == [20.0, 28.0]
    value = artifact.predict("throughput", features).value
    assert value[0] == pytest.approx(plans["throughput"][0], rel=1e-12) and value[1] < value[0]
    bert = {**trial, "model": "bert_large"}  # a text model's recipe: AdamW
    assert trial_features([bert], model_features())[0]["optimizer_update_bytes"].tolist() == [28.0]
    _, kept, skipped = trial_features(
        [{**trial, "extra": {"optimizer": "adagrad"}}], model_features())
    assert not kept and list(skipped) == ["unknown optimizer 'adagrad'; one of sgd, adamw, "
                                          "adam, lamb, rmsprop, bertadam"]


def test_a_trial_carries_its_memory_format(recommended):
    """A published figure is taken as channels-last (tuned recipes), the profiler's own runs
    as NCHW (its zoo's models are), and a trial that records `extra.channels_last` as it
    says; a channels-last job is predicted faster in 16 bits (no transposes)."""
    workload, plans, artifact = recommended
    trial = {**trial_of(plans, 0, workload), "extra": {}}  # the profiler's, without the extra
    rows = [trial, {**trial, "source": "published"},
            {**trial, "source": "published", "extra": {"channels_last": False}},
            {**trial, "extra": {"channels_last": True}}]
    features, kept, _ = trial_features(rows, model_features())
    assert features["channels_last"].tolist() == [0.0, 1.0, 0.0, 1.0]
    value = artifact.predict("throughput", features).value
    if plans["provenance"][0] != "measured":
        assert value[1] > value[0] and value[3] == pytest.approx(value[1])
