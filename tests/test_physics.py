"""The physical step-time model against hand-computed cases."""

import numpy as np
import pytest

from advisor import physics
from advisor.features import gpu_features, to_arrays


def candidate(**overrides) -> dict:
    """One configuration's features, GPU specs filled in from the GPU name."""
    row = dict(model="m", params=1e6, flops_per_sample=1e9, gradient_bytes=1e8,
               activation_bytes=1e6, gpu="V100", nodes=1, gpus_per_node=1, network_gbps=10.0,
               sync="allreduce", ps_count=1, batch_per_gpu=100, precision="fp32",
               provider="gcp", spot=False)
    row.update(overrides)
    return row | gpu_features(row["gpu"])


def config(**overrides):
    return to_arrays([candidate(**overrides)])


def terms(**overrides) -> dict[str, float]:
    return dict(zip(physics.TERMS, physics.design_matrix(config(**overrides))[0]))


def test_compute_and_memory_terms_of_one_fp32_gpu():
    t = terms()
    assert t["compute_fp32"] == pytest.approx(1e9 * 100 / 15.7e12)  # V100 FP32 peak
    assert t["compute_tensor"] == 0
    assert t["memory"] == pytest.approx(1e6 * 100 / 900e9)  # V100 900 GB/s
    assert t["fixed"] == 1
    assert t["allreduce_inter"] == t["allreduce_intra"] == t["ps_link"] == t["ps_server"] == 0


def test_precision_picks_the_roofline():
    amp = terms(precision="amp")
    assert amp["compute_fp32"] == 0
    assert amp["compute_tensor"] == pytest.approx(1e9 * 100 / 125e12)
    assert amp["memory"] == pytest.approx(0.5e6 * 100 / 900e9)  # 16-bit activations
    # TF32 exists from Ampere on, at half the dense 16-bit tensor rate; a V100 runs it as FP32.
    assert terms(precision="tf32")["compute_fp32"] == pytest.approx(1e9 * 100 / 15.7e12)
    a100 = terms(precision="tf32", gpu="A100-40GB")
    assert a100["compute_tensor"] == pytest.approx(1e9 * 100 / 156e12)
    # K80 has no tensor cores: amp stays on the FP32 units.
    assert terms(precision="amp", gpu="K80")["compute_fp32"] == pytest.approx(1e11 / 4.37e12)


def test_ring_allreduce_between_and_inside_nodes():
    t = terms(nodes=2, gpus_per_node=4)
    assert t["allreduce_inter"] == pytest.approx(2 * (2 - 1) / 2 * 1e8 / (10e9 / 8))
    assert t["allreduce_intra"] == pytest.approx(2 * (4 - 1) / 4 * 1e8 / 100e9)


def test_parameter_servers_share_their_bandwidth():
    t = terms(sync="ps", nodes=4, ps_count=2, gradient_bytes=1e7, network_gbps=8.0)
    assert t["ps_link"] == pytest.approx(2 * 1e7 / 1e9)  # push + pull over 1 GB/s
    assert t["ps_server"] == pytest.approx(2 * 1e7 * 4 / (2 * 1e9))  # 4 workers on 2 servers
    assert t["allreduce_inter"] == 0


def test_step_time_is_a_smooth_maximum_of_worker_and_server_time():
    features = config(sync="ps", nodes=64, ps_count=1, gradient_bytes=1e8, network_gbps=8.0)
    coefficients = dict.fromkeys(physics.TERMS, 0.0) | {"ps_server": 1.0, "compute_fp32": 1.0}
    step = physics.step_time(features, coefficients)[0]
    server = 2 * 1e8 * 64 / 1e9  # 12.8 s, far above the 6.4 ms of compute
    assert step == pytest.approx(server, rel=1e-6)
    throughput = physics.cluster_throughput(features, np.array([step]))[0]
    assert throughput == pytest.approx(64 * 100 / server, rel=1e-6)


def test_prior_coefficients_give_a_published_order_of_magnitude():
    # ResNet-50 (card figures), 8 x V100 under amp: NVIDIA publishes 8322 img/s.
    features = config(gpu="V100", precision="amp", gpus_per_node=8, batch_per_gpu=256,
                      flops_per_sample=12.3e9, activation_bytes=100e6, gradient_bytes=102e6,
                      params=25.6e6)
    throughput = physics.cluster_throughput(features, physics.step_time(features))[0]
    assert 8322 / 2 < throughput < 8322 * 2


def test_tensor_terms_count_layers_and_vanish_when_unknown():
    known = terms(tensors=200.0, batch_per_gpu=128)
    assert known["tensor_launch"] == 200.0
    # Per-layer traffic scales with the batch over memory bandwidth (V100: 900 GB/s).
    assert known["tensor_memory"] == pytest.approx(200.0 * 128 / 900e9)
    unknown = terms()  # zoo cards carry no tensor count: the terms add nothing
    assert unknown["tensor_launch"] == unknown["tensor_memory"] == 0.0


def test_parameter_servers_saturate_on_per_tensor_requests():
    t = terms(sync="ps", nodes=8, ps_count=2, tensors=50.0)
    assert t["ps_server_tensor"] == pytest.approx(50 * 8 / 2)  # tensors x workers / servers
    assert terms(sync="allreduce", nodes=8, tensors=50.0)["ps_server_tensor"] == 0
    # Tiny gradients: past a few workers the servers' requests bound the cluster at
    # ps / (a * tensors) steps/s, whatever the worker count.
    coef = {"ps_server_tensor": 1e-4, "ps_server": 0.0}
    big = [config(sync="ps", nodes=n, ps_count=1, tensors=50.0, gradient_bytes=1.0)
           for n in (16, 64)]
    steps = [physics.cluster_throughput(f, physics.step_time(f, coef))[0] / 100 for f in big]
    assert steps[1] == pytest.approx(1 / (1e-4 * 50), rel=0.01)
    assert steps[0] < steps[1] < 1 / (1e-4 * 50)
