"""The physical step-time model against hand-computed cases."""

import numpy as np
import pytest

from advisor import physics
from advisor.features import gpu_features, model_features, to_arrays


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


# A card of activations alone: no update, no gradients to reduce or unscale.
NO_PARAMETERS = {"params": 0.0, "gradient_bytes": 0.0}


def terms(**overrides) -> dict[str, float]:
    return dict(zip(physics.TERMS, physics.design_matrix(config(**overrides))[0]))


def test_compute_and_memory_terms_of_one_fp32_gpu():
    t = terms()  # a card without the operator split: its FLOPs at the unit's peak, on terms
    # of their own (a whole model's efficiency must not move a split card's GEMMs)
    assert t["unsplit_fp32"] == pytest.approx(1e9 * 100 / 15.7e12)  # V100 FP32 peak
    assert t["compute_fp32"] == t["compute_tensor"] == t["unsplit_tensor"] == 0
    # saved activations written and read once, and the optimizer's 20 bytes per parameter
    # (a row that names no optimizer: SGD with momentum)
    assert t["memory"] == pytest.approx((2 * 1e6 * 100 + 20 * 1e6) / 900e9)  # 900 GB/s
    assert t["fixed"] == 1
    assert t["allreduce_inter"] == t["allreduce_intra"] == t["ps_link"] == t["ps_server"] == 0


def test_the_update_moves_the_optimizers_state():
    """Weight read and written, gradient read (12 bytes a parameter), and the state read and
    written: SGD with momentum 4 bytes of it, Adam 8; LAMB's norms and its two stages six
    passes more (apex's FusedLAMB); NVIDIA BERT's BertAdam, a Python loop that writes each
    intermediate out, 24 more."""
    names = ("sgd", "adam", "adamw", "rmsprop", "lamb", "bertadam")
    assert [physics.update_bytes(name) for name in names] \
        == [20.0, 28.0, 28.0, 28.0, 52.0, 124.0]

    def memory(update):
        return terms(optimizer_update_bytes=update)["memory"] * 900e9 - 2 * 1e6 * 100
    assert memory(52.0) == pytest.approx(52e6)
    assert memory(float("nan")) == pytest.approx(20e6)


def test_precision_picks_the_roofline():
    amp = terms(precision="amp")
    assert amp["unsplit_fp32"] == 0
    assert amp["unsplit_tensor"] == pytest.approx(1e9 * 100 / 125e12)
    # 16-bit activations, the update, and the loss scale's two passes over the gradients
    assert amp["memory"] == pytest.approx((0.5 * 2e6 * 100 + 20e6 + 2 * 1e8) / 900e9)
    assert terms(precision="bf16")["memory"] == pytest.approx((0.5 * 2e6 * 100 + 20e6) / 900e9)
    # TF32 exists from Ampere on, at half the dense 16-bit tensor rate; a V100 runs it as FP32.
    assert terms(precision="tf32")["unsplit_fp32"] == pytest.approx(1e9 * 100 / 15.7e12)
    a100 = terms(precision="tf32", gpu="A100-80GB")
    # the A100-80GB sustains its boost clock under training load (base 1275 x 2^(1/3) > 1410);
    # TF32 has an efficiency of its own (cuDNN's and cuBLAS's TF32 kernels are not the FP16 ones)
    assert a100["unsplit_tf32"] == pytest.approx(1e9 * 100 / 156e12)
    assert a100["unsplit_tensor"] == 0
    # K80 has no tensor cores: amp stays on the FP32 units (875 MHz boost, 560 base), of which
    # single issue feeds two thirds.
    clock = 560 / 875 * 2 ** (1 / 3)
    assert terms(precision="amp", gpu="K80")["unsplit_fp32"] == pytest.approx(
        1e11 / (4.37e12 * clock * 2 / 3))


def split_card(**work) -> dict:
    """A card's operator split: `work` maps class -> (FLOPs, bytes) per sample."""
    from gpuadvisor.cards import OPERATOR_CLASSES

    out = {"step_bytes": 0.0}
    for kind in OPERATOR_CLASSES:
        flops, nbytes = work.get(kind, (0.0, 0.0))
        out |= {f"{kind}_flops_per_sample": flops, f"{kind}_bytes_per_sample": nbytes}
    return out


def test_each_operator_class_binds_at_the_gpus_balance_point():
    # A GEMM-heavy class is compute-bound and element-wise work memory-bound on every GPU.
    card = split_card(matmul=(1e9, 1e6), other=(1e6, 1e7))
    for gpu in ("V100", "A100-80GB", "H100-80GB"):
        t = terms(gpu=gpu, precision="amp", **NO_PARAMETERS, **card)
        spec = gpu_features(gpu)
        assert t["compute_tensor"] == pytest.approx(1e9 * 100 / (
            spec["gpu_tensor_tflops"] * 1e12 * spec["gpu_clock_fraction"]))
        assert t["memory"] == pytest.approx(0.5 * 1e7 * 100 / (spec["gpu_mem_bw_gbps"] * 1e9))
    # A depthwise convolution of intensity ~1 FLOP/byte is memory-bound on an A100 ...
    depthwise = split_card(grouped_conv=(1e7, 1e7))
    a100 = terms(gpu="A100-80GB", **NO_PARAMETERS, **depthwise)
    assert a100["grouped_conv"] == pytest.approx(1e9 / 2039e9)  # its traffic, in its own term
    assert a100["conv_fp32"] == a100["memory"] == 0
    # ... and runs on the FP32 cores even under amp, where matrix products use tensor cores,
    # at a quarter of a GEMM's efficiency; no other term prices it.
    denser = terms(gpu="A100-80GB", precision="amp", **NO_PARAMETERS,
                   **split_card(grouped_conv=(1e10, 1e6)))
    spec = gpu_features("A100-80GB")
    assert denser["grouped_conv"] == pytest.approx(1e12 / (
        spec["gpu_fp32_tflops"] * 1e12 * spec["gpu_clock_fraction"] * 0.25))
    assert [denser[t] for t in ("compute_fp32", "compute_tensor", "compute_tf32", "conv_fp32",
                                "conv_tensor", "conv_tf32", "memory")] == [0] * 7


def test_a_profiled_class_is_priced_one_operator_at_a_time():
    """Half a card's convolution FLOPs in operators of intensity 20 FLOPs a byte, half at
    1,000: on a V100's FP32 cores (balance ~12) all of them are compute-bound; under amp
    (balance ~49 in fp32 bytes) the low-intensity half is memory-bound, while the class's
    mean intensity (39) would put all of it there."""
    from gpuadvisor.cards import INTENSITY_EDGES, profile_column

    low, high = (5e8, 2.5e7), (5e8, 5e5)
    card = split_card(conv=(low[0] + high[0], low[1] + high[1]))
    profile = {profile_column("conv", edge, what): value if edge > 20 else 0.0
               for edge in INTENSITY_EDGES for what, value in zip(("flops", "bytes"), low)}
    fp32 = terms(**NO_PARAMETERS, **card, **profile)
    assert fp32["conv_fp32"] == pytest.approx(1e9 * 100 / (15.7e12 * 0.7))
    assert fp32["memory"] == 0
    amp = terms(precision="amp", **NO_PARAMETERS, **card, **profile)
    assert amp["conv_tensor"] == pytest.approx(high[0] * 100 / (125e12 * 0.7))
    # 16-bit traffic of the memory-bound half, and NCHW's transposes of all of it
    transposes = physics.LAYOUT_TRANSPOSE_PASSES * 0.5 * (low[1] + high[1]) * 100 / 900e9
    assert amp["memory"] == pytest.approx(0.5 * low[1] * 100 / 900e9 + transposes)
    whole = terms(precision="amp", **NO_PARAMETERS, **card)  # no profile: the class's mean
    assert whole["conv_tensor"] == 0
    assert whole["memory"] == pytest.approx(0.5 * (low[1] + high[1]) * 100 / 900e9
                                            + transposes)


def test_matrix_products_are_priced_at_the_flops_their_tiles_execute():
    """A card's `<class>_tiled_flops_per_sample` (whole tiles computed) is what its
    compute-bound work costs; its profile holds those FLOPs, so the memory-bound share is of
    them. A card without the column is priced at its counted FLOPs."""
    from gpuadvisor.cards import INTENSITY_EDGES, profile_column

    counted = split_card(matmul=(1e9, 1e5), conv=(1e9, 1e5))
    tiled = counted | {"matmul_tiled_flops_per_sample": 1.5e9, "conv_tiled_flops_per_sample": 2e9}
    plain = terms(precision="amp", **NO_PARAMETERS, **counted)
    rounded = terms(precision="amp", **NO_PARAMETERS, **tiled)
    assert rounded["compute_tensor"] == pytest.approx(1.5 * plain["compute_tensor"])
    assert rounded["conv_tensor"] == pytest.approx(2 * plain["conv_tensor"])
    # a quarter of the executed convolution FLOPs in operators below every edge: memory-bound
    profile = {profile_column("conv", edge, what): value for edge in INTENSITY_EDGES
               for what, value in (("flops", 0.5e9), ("bytes", 0.5e5))}
    shared = terms(precision="amp", **NO_PARAMETERS, **tiled, **profile)
    assert shared["conv_tensor"] == pytest.approx(0.75 * rounded["conv_tensor"])


def test_autocast_traffic_comes_from_the_card_where_it_has_it():
    """Element-wise work whose tensors autocast keeps in fp32 (a transformer's residual
    stream) moves what the card's autocast column says under amp; a card without it moves
    half its fp32 bytes; FP32 and TF32 rows move the fp32 bytes."""
    from gpuadvisor.cards import AUTOCAST_BYTES_COLUMNS

    card = split_card(matmul=(1e9, 1e6), other=(1e6, 1e7))
    traced = {AUTOCAST_BYTES_COLUMNS["other"]: 0.9e7, AUTOCAST_BYTES_COLUMNS["matmul"]: 0.5e6}
    amp = terms(precision="amp", **NO_PARAMETERS, **card, **traced)
    assert amp["memory"] == pytest.approx(0.9e7 * 100 / 900e9)
    assert terms(precision="amp", **NO_PARAMETERS, **card)["memory"] == pytest.approx(
        0.5 * 1e7 * 100 / 900e9)
    for precision, gpu in (("fp32", "V100"), ("tf32", "A100-80GB")):
        t = terms(precision=precision, gpu=gpu, **NO_PARAMETERS, **card, **traced)
        assert t["memory"] == pytest.approx(1e7 * 100 / (gpu_features(gpu)["gpu_mem_bw_gbps"]
                                                           * 1e9))


def test_memory_bound_shares_interpolate_in_log_intensity_between_edges():
    from gpuadvisor.cards import INTENSITY_EDGES, profile_column

    features = {"matmul_flops_per_sample": np.array([8.0]),
                "matmul_bytes_per_sample": np.array([8.0])}
    for edge in INTENSITY_EDGES:  # the share below each edge: 1/8 at 8, 2/8 at 16, ...
        share = min(np.log2(edge) - 2, 8.0)
        features |= {profile_column("matmul", edge, what): np.array([share])
                     for what in ("flops", "bytes")}
    whole = np.array([True])
    for balance, expected in ((2.0, 0.0), (4.0, 0.0), (8.0, 1 / 8), (np.sqrt(8 * 16), 1.5 / 8),
                              (100.0, (np.log2(100) - 2) / 8), (512.0, 7 / 8), (4096.0, 7 / 8)):
        flops, nbytes = physics.memory_bound_shares(features, "matmul", np.array([balance]),
                                                    whole)
        assert flops[0] == pytest.approx(expected) and nbytes[0] == pytest.approx(expected)
    # a card without the profile: all or nothing, as the class's mean intensity says
    unprofiled = {key: value for key, value in features.items() if "under" not in key}
    assert physics.memory_bound_shares(unprofiled, "matmul", np.array([100.0]), whole)[0] == 1


def test_fp32_runs_convolutions_in_tf32_on_ampere_as_pytorch_does():
    card = split_card(conv=(1e9, 0.0), matmul=(1e9, 0.0))
    a100 = terms(gpu="A100-80GB", precision="fp32", **NO_PARAMETERS, **card)
    assert a100["conv_tf32"] == pytest.approx(1e11 / (156e12 * 0.7))  # conv, TF32
    assert a100["conv_tensor"] == 0
    assert a100["compute_fp32"] == pytest.approx(1e11 / 19.5e12)  # matmul stays FP32
    v100 = terms(gpu="V100", precision="fp32", **NO_PARAMETERS, **card)
    assert v100["conv_tf32"] == v100["compute_tf32"] == 0  # no TF32 before Ampere
    tf32 = terms(gpu="A100-80GB", precision="tf32", **NO_PARAMETERS, **card)
    assert tf32["compute_fp32"] == tf32["conv_fp32"] == 0  # `tf32` moves the matmuls too


def test_power_limited_gpus_sustain_less_of_their_peak():
    fraction = {gpu: gpu_features(gpu)["gpu_clock_fraction"]
                for gpu in ("T4", "L4", "A100-80GB", "H100-80GB", "V100")}
    assert fraction["T4"] == pytest.approx(585 / 1590 * 2 ** (1 / 3))  # 70 W
    assert fraction["L4"] == pytest.approx(795 / 2040 * 2 ** (1 / 3))  # 72 W
    assert fraction["A100-80GB"] == fraction["H100-80GB"] == fraction["V100"] == 1.0
    assert physics.sustained_clock_fraction(None, 1500) == 1.0  # unknown: no derating


def test_kepler_fp32_peak_is_what_its_schedulers_can_issue():
    # 4 warp schedulers of 32 lanes a cycle feed 128 of a Kepler SMX's 192 FP32 cores; from
    # Maxwell on every core is fed, and an unknown architecture is not derated.
    assert gpu_features("K80")["gpu_fp32_issue_fraction"] == pytest.approx(128 / 192)
    for gpu in ("P100", "V100", "T4", "A100-80GB", "H100-80GB"):
        assert gpu_features(gpu)["gpu_fp32_issue_fraction"] == 1.0
    assert physics.fp32_issue_fraction(None) == physics.fp32_issue_fraction("Rubin") == 1.0
    k80 = terms(gpu="K80", **NO_PARAMETERS, **split_card(matmul=(1e9, 0.0)))
    spec = gpu_features("K80")
    assert k80["compute_fp32"] == pytest.approx(1e11 / (
        4.37e12 * spec["gpu_clock_fraction"] * 128 / 192))


def test_ring_allreduce_between_and_inside_nodes():
    t = terms(nodes=2, gpus_per_node=4, intra_node_gb_s=150.0)
    assert t["allreduce_inter"] == pytest.approx(2 * (2 - 1) / 2 * 1e8 / (10e9 / 8))
    assert t["allreduce_intra"] == pytest.approx(2 * (4 - 1) / 4 * 1e8 / 150e9)


@pytest.mark.parametrize("gpu, link, gb_s", [
    ("L4", "PCIe", 31.5),  # PCIe 4 x16, one direction
    ("T4", "PCIe", 15.75),  # PCIe 3
    ("H100-80GB", "PCIe", 63.0),  # PCIe 5
    ("A100-40GB", "NVSwitch", 300.0),  # NVLink 3: 600 GB/s both directions
    ("H100-80GB", "NVSwitch", 450.0),  # NVLink 4: 900
    ("V100", "NVLink", 150.0),  # NVLink 2: 300
    ("L4", "NVSwitch", 31.5),  # a GPU without NVLink talks over PCIe whatever the label
])
def test_intra_node_bandwidth_comes_from_the_interconnect(gpu, link, gb_s):
    from advisor.features import gpu_link_gb_s

    assert gpu_link_gb_s(gpu, link) == pytest.approx(gb_s)


@pytest.mark.parametrize("gpu, gb_s", [
    ("V100", 150.0),  # an SXM2 board: NVLink
    ("H100-80GB", 450.0),  # SXM5
    ("A100PCIe-80GB", 31.5),  # a PCIe card whose NVLink bridge is optional: PCIe 4
    ("H100PCIe", 63.0),  # PCIe 5
    ("L4", 31.5),
])
def test_a_node_that_names_no_link_uses_nvlink_only_on_sxm_boards(gpu, gb_s):
    from advisor.features import gpu_link_gb_s

    assert gpu_link_gb_s(gpu, None) == pytest.approx(gb_s)
    if gpu.startswith(("A100PCIe", "H100PCIe")):  # a bridged pair says so
        assert gpu_link_gb_s(gpu, "NVLink") == pytest.approx(300.0)


def test_eight_l4s_on_pcie_are_not_an_nvswitch_node():
    from advisor.features import configuration_features

    configs = {"model": ["resnet50"] * 2, "gpu": ["L4", "A100-80GB"], "provider": ["gcp"] * 2,
               "sync": ["allreduce"] * 2, "ps_count": [0, 0], "precision": ["amp"] * 2,
               "nodes": [1, 1], "gpus_per_node": [8, 8], "batch_per_gpu": [256, 256],
               "spot": [False, False], "network_gbps": [100.0, 100.0],
               "interconnect": ["PCIe", "NVSwitch"]}
    features = configuration_features(configs, model_features())
    intra = physics.design_matrix(features)[:, physics.TERMS.index("allreduce_intra")]
    assert intra[0] == pytest.approx(2 * 7 / 8 * features["gradient_bytes"][0] / 31.5e9)
    assert intra[0] > 9 * intra[1]


def test_parameter_servers_share_their_bandwidth():
    t = terms(sync="ps", nodes=4, ps_count=2, gradient_bytes=1e7, network_gbps=8.0)
    assert t["ps_link"] == pytest.approx(2 * 1e7 / 1e9)  # push + pull over 1 GB/s
    assert t["ps_server"] == pytest.approx(2 * 1e7 * 4 / (2 * 1e9))  # 4 workers on 2 servers
    assert t["allreduce_inter"] == 0


def test_step_time_is_a_smooth_maximum_of_worker_and_server_time():
    features = config(sync="ps", nodes=64, ps_count=1, gradient_bytes=1e8, network_gbps=8.0)
    coefficients = dict.fromkeys(physics.TERMS, 0.0) | {"ps_server": 1.0, "unsplit_fp32": 1.0}
    step = physics.step_time(features, coefficients)[0]
    server = 2 * 1e8 * 64 / 1e9  # 12.8 s, far above the 6.4 ms of compute
    assert step == pytest.approx(server, rel=1e-6)
    throughput = physics.cluster_throughput(features, np.array([step]))[0]
    assert throughput == pytest.approx(64 * 100 / server, rel=1e-6)


def test_prior_coefficients_give_a_published_order_of_magnitude():
    # ResNet-50's card, 8 x V100 under amp: NVIDIA publishes 8322 img/s.
    from advisor.features import configuration_features

    configs = {"model": ["resnet50"], "gpu": ["V100"], "provider": ["aws"],
               "sync": ["allreduce"], "ps_count": [0], "precision": ["amp"], "nodes": [1],
               "gpus_per_node": [8], "batch_per_gpu": [256], "spot": [False],
               "network_gbps": [25.0], "interconnect": ["NVLink"]}
    features = configuration_features(configs, model_features())
    throughput = physics.cluster_throughput(features, physics.step_time(features))[0]
    assert 8322 / 2 < throughput < 8322 * 2


def test_tensor_terms_count_layers_and_vanish_when_unknown():
    known = terms(tensors=200.0, batch_per_gpu=128)
    assert known["tensor_launch"] == 200.0
    # Per-layer traffic scales with the batch over memory bandwidth (V100: 900 GB/s).
    assert known["tensor_memory"] == pytest.approx(200.0 * 128 / 900e9)
    unknown = terms()  # a card without a tensor count: the terms add nothing
    assert unknown["tensor_launch"] == unknown["tensor_memory"] == 0.0
    # A card with the operator split already carries its layers' traffic in its classes'
    # bytes: only the launches remain per tensor.
    split = terms(tensors=200.0, batch_per_gpu=128, **split_card(other=(1e6, 1e7)))
    assert split["tensor_launch"] == 200.0
    assert split["tensor_memory"] == 0.0


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


def test_peak_throughput_is_the_datasheet_peak_of_the_fastest_unit():
    def mfu_one(**overrides) -> float:  # FLOPs per second at the bound, over the peak
        features = config(**overrides)
        return float(physics.peak_throughput(features)[0] * 1e9 / 8)  # 8 GPUs, 1e9 FLOPs

    assert mfu_one(gpus_per_node=8, precision="amp", gpu="V100") == pytest.approx(125e12)
    assert mfu_one(gpus_per_node=8, precision="fp32", gpu="V100") == pytest.approx(15.7e12)
    # fp32 on a GPU with TF32 may run (PyTorch's cuDNN default) on tensor cores at half rate
    a100 = gpu_features("A100-40GB")
    assert mfu_one(gpus_per_node=8, precision="fp32", gpu="A100-40GB") == pytest.approx(
        max(a100["gpu_fp32_tflops"], a100["gpu_tensor_tflops"] / 2) * 1e12)
    # On FP32 cores a 3x3 stride-1 convolution needs Winograd's share of its multiplies (VGG16
    # reaches 1.35x a P100's FP32 peak in direct-convolution FLOPs): the bound counts them so
    all_winograd = {"winograd_flops_per_sample": 1e9}
    assert mfu_one(gpus_per_node=8, precision="fp32", gpu="V100", **all_winograd) == \
        pytest.approx(15.7e12 * 36 / 16)
    # tensor cores run implicit GEMMs: the 16-bit bound stays the datasheet's
    assert mfu_one(gpus_per_node=8, precision="amp", gpu="V100", **all_winograd) == \
        pytest.approx(125e12)
    # activation checkpointing runs the forward twice: the same GPUs finish fewer samples
    recomputing = {**config(), "checkpointing": np.array([1.0])}
    assert physics.peak_throughput(recomputing)[0] == pytest.approx(
        physics.peak_throughput(config())[0] / 4 * 3)


def test_small_micro_batches_are_launch_bound_not_priced_at_large_batch_efficiency():
    cards = model_features()
    rows = [candidate(gpu="A100-80GB", precision="amp", batch_per_gpu=b, **{
        k: cards["resnet50"][k] for k in ("params", "flops_per_sample", "gradient_bytes",
                                           "activation_bytes", "tensors")})
        for b in (1, 2, 256)]
    features = to_arrays(rows)
    per_sample = physics.step_time(features) / features["batch_per_gpu"]
    # Each micro-step pays its kernel launches (per tensor) and fixed cost whatever its batch:
    # micro-batches of 1-2 run at a small fraction of the large batch's rate ...
    assert np.all(per_sample[:2] > 4 * per_sample[2])
    # ... and accumulating them into a large optimizer step does not buy that rate back.
    accumulated = {**features, "accumulation": np.array([128.0, 128.0, 1.0])}
    per_sample_acc = physics.step_time(accumulated) / features["batch_per_gpu"]
    assert np.all(per_sample_acc[:2] > 4 * per_sample_acc[2])


def test_a_step_of_many_small_kernels_waits_on_the_host_whatever_the_gpu():
    """Launches are asynchronous: ResNet-50's 411 kernels a step hide behind its GPU work at
    batch 256, while Tacotron 2's decoder, ~75,000 kernels a step, is set by the host's
    dispatch, which a faster GPU does not shorten."""
    cards = model_features()

    def step(model, gpu, batch):
        card = {k: v for k, v in cards[model].items() if v is not None and k not in (
            "image_size", "seq_len")}
        features = to_arrays([candidate(gpu=gpu, precision="amp", batch_per_gpu=batch,
                                        **card)])
        return physics.step_time(features)[0], physics.host_seconds(features)[0]

    assert cards["tacotron2"]["kernels_per_step"] > 100 * cards["resnet50"]["kernels_per_step"]
    resnet, resnet_host = step("resnet50", "A100-80GB", 256)
    assert resnet_host < 0.1 * resnet
    v100, host = step("tacotron2", "V100", 32)
    b200, _ = step("tacotron2", "B200", 32)
    assert host == pytest.approx(physics.PRIOR["host_dispatch"] * (
        cards["tacotron2"]["kernels_per_step"] + cards["tacotron2"]["autocast_kernels_per_step"]))
    assert b200 >= host > 0.5 * v100  # the B200 waits on the same host


def test_autocast_casts_add_to_the_hosts_kernels_in_16_bits_only():
    """In amp and bf16 the host also dispatches autocast's casts (the card's
    `autocast_kernels_per_step`); in fp32 and tf32 it dispatches the card's kernels alone."""
    card = {k: v for k, v in model_features()["bert_large"].items()
            if v is not None and k not in ("image_size", "seq_len")}
    precisions = ("fp32", "tf32", "amp", "bf16")
    features = to_arrays([candidate(gpu="A100-80GB", precision=p, batch_per_gpu=8, **card)
                          for p in precisions])
    kernels = physics.kernels_per_step(features, len(precisions))
    casts = card["autocast_kernels_per_step"]
    assert casts > 0
    assert kernels.tolist() == [card["kernels_per_step"]] * 2 + [
        card["kernels_per_step"] + casts] * 2
    host = physics.host_seconds(features)
    assert host[2] == pytest.approx(host[0] * kernels[2] / kernels[0])


def test_each_kernel_holds_the_gpu_for_its_floor_however_fast_the_host():
    """Every kernel a step runs, autocast's casts included, costs the GPU its floor on the
    worker's side: Tacotron 2's ~75,000 a step keep a B200 busy for ~0.2 s even when the
    host's dispatch costs nothing, and twice the kernels cost twice that."""
    card = {k: v for k, v in model_features()["tacotron2"].items()
            if v is not None and k not in ("image_size", "seq_len")}
    features = to_arrays([candidate(gpu="B200", precision=p, batch_per_gpu=32, **card)
                          for p in ("tf32", "amp")])
    floor = physics.design_matrix(features)[:, physics.TERMS.index("kernel_floor")]
    assert floor.tolist() == physics.kernels_per_step(features, 2).tolist()
    assert floor[1] == card["kernels_per_step"] + card["autocast_kernels_per_step"]
    assert physics.TERMS.index("kernel_floor") < physics.WORKER_TERMS
    no_host = {"host_dispatch": 0.0}
    step = physics.step_time(features, no_host)
    assert step[0] >= physics.PRIOR["kernel_floor"] * card["kernels_per_step"] > 0.2
    doubled = {**card, "kernels_per_step": 2 * card["kernels_per_step"]}
    twice = to_arrays([candidate(gpu="B200", precision="tf32", batch_per_gpu=32, **doubled)])
    parts = physics.step_parts(twice)
    assert parts["per_step"][0] - physics.step_parts(features)["per_step"][0] == pytest.approx(
        physics.PRIOR["kernel_floor"] * card["kernels_per_step"])


def test_a_slower_host_dispatches_the_same_kernels_slower():
    """A trial's recorded `host_op_us` scales its host's side: twice the reference host's
    cost, twice the dispatch; none recorded, the reference host."""
    card = {k: v for k, v in model_features()["resnet50"].items()
            if v is not None and k not in ("image_size", "seq_len")}
    rows = [candidate(batch_per_gpu=8, **card)] * 3
    features = {**to_arrays(rows), "host_op_us": np.array(
        [np.nan, physics.REFERENCE_HOST_OP_US, 2 * physics.REFERENCE_HOST_OP_US])}
    host = physics.host_seconds(features)
    assert host[0] == host[1] == pytest.approx(host[2] / 2)
    assert host[0] == pytest.approx(physics.host_seconds(to_arrays(rows[:1]))[0])


def test_nchw_16_bit_convolutions_pay_cudnns_transposes():
    """In 16 bits on tensor cores, cuDNN transposes an NCHW convolution's tensors to NHWC and
    back: one more read and write of its traffic; channels-last jobs, FP32 and TF32
    convolutions and matrix products pay none."""
    card = split_card(conv=(1e9, 1e6), matmul=(1e9, 1e6))

    def memory(precision, channels_last=None, work=card):
        features = config(gpu="A100-80GB", precision=precision, **NO_PARAMETERS, **work)
        if channels_last is not None:
            features["channels_last"] = np.array([channels_last])
        return dict(zip(physics.TERMS, physics.design_matrix(features)[0]))["memory"]

    half_conv = card["conv_bytes_per_sample"] * 0.5 * 100 / 2039e9  # HALF_BYTES, b 100
    assert memory("amp") == pytest.approx(memory("amp", channels_last=1.0)
                                          + physics.LAYOUT_TRANSPOSE_PASSES * half_conv)
    assert memory("bf16", channels_last=0.0) == pytest.approx(memory("amp"))
    assert memory("tf32") == memory("tf32", channels_last=1.0)
    assert memory("fp32") == memory("fp32", channels_last=1.0)
    plain = split_card(matmul=(1e9, 1e6))
    assert memory("amp", work=plain) == memory("amp", channels_last=1.0, work=plain)


def test_nchw_against_channels_last_as_timm_measured_them():
    """timm's train benchmark ran 20 zoo models on an RTX 3090 in AMP in NCHW and in NHWC
    (datasets/published_throughput.csv): at the shipped coefficients the physics prices each
    NHWC/NCHW speed-up within 15% of the measured one (1.15x for DenseNet-161 to 1.47x for
    ResNet-50, none for the ViTs). A transpose priced at one pass, not its read and write, put
    ResNet-50's at 1.18x. Of the 31 pairs of the models the zoo gained for the same files in
    the twenty-sixth session, all but two are within 15% too: the ResNeXt101-32x8d and its
    SE variant gain 1.11-1.13x where 1.28-1.33x is priced, channels-last grouped convolutions'
    slow library path (pytorch/pytorch#70954), which the RegNets' left-out NHWC rows show at
    its worst."""
    from advisor.artifact import load_artifact
    from advisor.features import trial_features
    from advisor.importers.published import load_published

    first = {"resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext101_32x4d",
             "se_resnext101_32x4d", "vgg16", "inception_v3", "inception_v4", "efficientnet_b0",
             "efficientnet_b4", "densenet121", "densenet161", "densenet169", "densenet201",
             "mobilenet_v2", "convnext_tiny", "vit_b16", "vit_l16"}
    timm = [t for t in load_published() if t["gpu_type"] == "RTX3090" and t["model"] in first]
    features, kept, _ = trial_features(timm, model_features())
    assert len(kept) == 40
    coefficients = load_artifact().doc["throughput"]["coefficients"]
    priced = physics.cluster_throughput(features, physics.step_time(features, coefficients))
    speed = {}
    for trial, layout, value in zip(kept, features["channels_last"], priced):
        speed.setdefault(trial["model"], {})[layout] = (trial["throughput"], value)
    for model, pair in speed.items():
        measured = pair[1.0][0] / pair[0.0][0]
        assert pair[1.0][1] / pair[0.0][1] == pytest.approx(measured, rel=0.15), model


def test_winograd_spares_fp32_multiplies_not_tensor_core_ones():
    card = split_card(conv=(1e9, 0.0)) | {"winograd_flops_per_sample": 0.6e9}
    plain = split_card(conv=(1e9, 0.0))
    v100 = terms(gpu="V100", precision="fp32", **NO_PARAMETERS, **card)
    direct = terms(gpu="V100", precision="fp32", **NO_PARAMETERS, **plain)
    # F(2x2,3x3): 16 multiplies where a direct convolution makes 36
    assert v100["conv_fp32"] == pytest.approx(direct["conv_fp32"] * (0.4 + 0.6 * 16 / 36))
    amp = terms(gpu="V100", precision="amp", **NO_PARAMETERS, **card)
    assert amp["conv_tensor"] == pytest.approx(
        terms(gpu="V100", precision="amp", **NO_PARAMETERS, **plain)["conv_tensor"])


def test_5x5_convolutions_are_priced_at_minimal_filtering_multiplies_on_fp32_cores():
    card = split_card(conv=(1e9, 0.0)) | {"winograd_flops_per_sample": 0.2e9,
                                          "conv5x5_flops_per_sample": 0.5e9}
    plain = split_card(conv=(1e9, 0.0))
    direct = terms(gpu="P100", precision="fp32", **NO_PARAMETERS, **plain)["conv_fp32"]
    # F(2x2,3x3): 16 multiplies for 36; F(2x2,5x5): 36 for 100; the rest at full count
    assert terms(gpu="P100", precision="fp32", **NO_PARAMETERS, **card)["conv_fp32"] == \
        pytest.approx(direct * (0.3 + 0.2 * 16 / 36 + 0.5 * 36 / 100))
    # an older card without the 5x5 column keeps pricing them at the direct count
    older = terms(gpu="P100", precision="fp32", **NO_PARAMETERS,
                  **split_card(conv=(1e9, 0.0)) | {"winograd_flops_per_sample": 0.2e9})
    assert older["conv_fp32"] == pytest.approx(direct * (0.8 + 0.2 * 16 / 36))


def test_log_gradient_of_the_smooth_maximum_matches_finite_differences():
    """The fit's closed-form Jacobian (fitting.fit_throughput_core) against central
    differences, on rows where the workers' side, the servers' or both bind."""
    features = to_arrays([candidate(sync="ps", nodes=16, ps_count=1, tensors=60.0,
                                    precision="amp", batch_per_gpu=b)
                          for b in (1, 64, 4096)])
    design = physics.design_matrix(features)
    theta = np.array([physics.PRIOR[t] for t in physics.TERMS]) * 3
    analytic = physics.log_combine_gradient(design, theta)
    for index in range(len(theta)):
        step = np.zeros(len(theta))
        step[index] = 1e-6
        numeric = (np.log(physics.combine(design, theta * np.exp(step)))
                   - np.log(physics.combine(design, theta * np.exp(-step)))) / 2e-6
        assert analytic[:, index] == pytest.approx(numeric, abs=1e-6)


def test_a_step_in_parts_adds_up_to_the_workers_step():
    """`--explain`'s parts of a step cover every term of a worker's side once, and on an
    all-reduce cluster (no servers) they add up to the step the model predicts."""
    parts = [term for terms in physics.STEP_PARTS.values() for term in terms]
    assert sorted(parts) == sorted(physics.TERMS[:physics.WORKER_TERMS])
    features = to_arrays([candidate(nodes=n, gpus_per_node=8, batch_per_gpu=b)
                          for n, b in ((1, 256), (4, 4))])
    seconds = physics.step_parts(features)
    assert np.allclose(sum(seconds.values()), physics.step_time(features))
    # A tiny per-GPU batch on four nodes is spent on what does not grow with the batch.
    fixed = seconds["communication"] + seconds["per_step"]
    assert fixed[1] / physics.step_time(features)[1] > 0.5 > fixed[0] / physics.step_time(
        features)[0]


def test_a_hosts_speed_scales_the_steps_python_and_nothing_else():
    """with_host_scale multiplies a row's fixed cost and kernel dispatch (HOST_TERMS), each
    row by its own factor, and leaves every other term and the matrix it was given alone."""
    design = np.arange(1.0, 1.0 + 2 * len(physics.TERMS)).reshape(2, len(physics.TERMS))
    scaled = physics.with_host_scale(design, np.array([3.0, 0.5]))
    host = [physics.TERMS.index("fixed"), physics.TERMS.index("host_dispatch")]
    assert sorted(physics.HOST_TERMS) == sorted(host)
    others = [i for i in range(len(physics.TERMS)) if i not in host]
    assert np.array_equal(scaled[:, host], design[:, host] * np.array([[3.0], [0.5]]))
    assert np.array_equal(scaled[:, others], design[:, others])
    assert design[0, host[0]] == 1.0 + host[0]
    assert physics.with_host_scale(design, None) is design
