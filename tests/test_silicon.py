"""A GPU that differs from another in memory capacity alone counts the other's measurements
(cloud.gpus.silicon): AWS's p3dn V100-32GB is the V100 of p3 and of NVIDIA's DGX-1 tables."""

import numpy as np
import pytest

from advisor.artifact import load_artifact
from advisor.features import configuration_features, model_features
from cloud.gpus import PERFORMANCE_FIELDS, gpu_specs, silicon


def test_a_gpu_differing_in_capacity_alone_is_its_twin_and_no_other_is():
    assert silicon("V100-32GB") == "V100" and silicon("V100") == "V100"
    # A100 80GB differs in bandwidth and clocks too, H200 in bandwidth: each its own.
    assert silicon("A100-80GB") == "A100-80GB" and silicon("H200") == "H200"
    specs = gpu_specs()
    for name, spec in specs.items():
        twin = specs[silicon(name)]
        assert all(getattr(twin, f) == getattr(spec, f) for f in PERFORMANCE_FIELDS)
        assert list(specs).index(twin.gpu) <= list(specs).index(name)


def _predict(gpus, **config):
    n = len(gpus)
    columns = {"model": ["resnet50"] * n, "gpu": gpus, "provider": ["aws"] * n,
               "precision": [config.get("precision", "amp")] * n, "sync": ["allreduce"] * n,
               "nodes": [1] * n, "gpus_per_node": [config.get("gpus_per_node", 8)] * n,
               "batch_per_gpu": [config.get("batch", 256)] * n, "network_gbps": [25] * n,
               "spot": [False] * n, "channels_last": [1] * n}
    return load_artifact().predict("throughput", configuration_features(columns,
                                                                        model_features()))


@pytest.mark.parametrize("config", [{}, {"precision": "fp32", "batch": 96, "gpus_per_node": 1},
                                    {"batch": 200, "gpus_per_node": 4}])
def test_the_32gb_v100_is_predicted_as_the_measured_v100(config):
    predicted = _predict(["V100", "V100-32GB"], **config)
    assert predicted.value[0] == pytest.approx(predicted.value[1])
    assert predicted.provenance[0] == predicted.provenance[1]
    assert np.allclose(predicted.lo[0], predicted.lo[1])
    assert np.allclose(predicted.hi[0], predicted.hi[1])
