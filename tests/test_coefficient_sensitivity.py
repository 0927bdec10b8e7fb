"""benchmarks/coefficient_sensitivity.py: how it groups published rows into sources, and its
refusal of a coefficient the physics has no term for."""

from __future__ import annotations

import json
import sys

import pytest
from script_modules import load_script

SENSITIVITY = load_script("benchmarks/coefficient_sensitivity.py")


def label(**software) -> str:
    return f"published {json.dumps(software, sort_keys=True)}"


def test_each_mlperf_submission_counts_as_one_source_and_a_code_base_as_its_own():
    first = label(code="mlcommons/training_results_v3.1 xFusion/results/G5500V7x8L40",
                  container="MXNet 23.09")
    second = label(code="mlcommons/training_results_v4.0 Dell/results/R760xax4L40S",
                   container="MXNet 23.04")
    nvidia = label(code="NVIDIA/DeepLearningExamples PyTorch/Recommendation/NCF",
                   container="pytorch-21.04 container", framework="PyTorch")
    assert SENSITIVITY.source_of(first) == SENSITIVITY.source_of(second) == SENSITIVITY.MLPERF_CODE
    assert SENSITIVITY.source_of(nvidia) == "NVIDIA/DeepLearningExamples PyTorch/Recommendation/NCF"
    assert SENSITIVITY.source_of(label(container="TF 1.x")) == "TF 1.x"
    assert SENSITIVITY.source_of("published {}") == "uncited"


def test_an_unknown_coefficient_is_refused_before_any_fit(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["coefficient_sensitivity.py", "--coefficients", "fixd"])
    monkeypatch.setattr(SENSITIVITY, "published_rows", lambda: pytest.fail("fitted anyway"))
    with pytest.raises(SystemExit) as exit_info:
        SENSITIVITY.main()
    assert "unknown coefficient fixd" in str(exit_info.value)
    assert "kernel_floor" in str(exit_info.value)


def test_a_coefficient_the_data_pin_ignores_its_prior_and_one_they_never_exercise_follows_it():
    from advisor import physics
    from advisor.features import gpu_features, to_arrays

    # Whole models on one GPU each, from launch-bound to compute-bound batches: the data set
    # the step's fixed cost; no row has a second node, so nothing but its prior sets the
    # all-reduce between nodes.
    truth = {**physics.PRIOR, "unsplit_fp32": 4.0, "fixed": 0.02}
    rows = [dict(model=name, params=params, flops_per_sample=flops, gradient_bytes=4 * params,
                 activation_bytes=activation, gpu=gpu, nodes=1, gpus_per_node=1,
                 network_gbps=25.0, sync="allreduce", ps_count=1, batch_per_gpu=batch,
                 precision="fp32", provider="aws", spot=False, **gpu_features(gpu))
            for name, params, flops, activation in (("small", 1e6, 0.5e9, 5e6),
                                                    ("big", 60e6, 20e9, 120e6))
            for gpu in ("K80", "P100", "V100") for batch in (1, 4, 32, 128)]
    features = to_arrays(rows)
    throughput = physics.cluster_throughput(features, physics.step_time(features, truth))
    result = SENSITIVITY.prior_elasticities(features, throughput, {},
                                            ["fixed", "allreduce_inter"])
    low, high, elasticity = result["fixed"]
    assert low < 0.02 < high * 1.05  # each pulled towards its own prior, 1 ms and 25 ms
    assert 0 < elasticity < 0.2
    assert result["allreduce_inter"][2] == pytest.approx(1.0, abs=0.01)
