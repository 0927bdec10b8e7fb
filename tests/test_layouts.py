"""Micro-batch, accumulation and memory remedies on the shipped catalog for models of tens of
billions of parameters, and what each layout does to the physics' terms."""

from __future__ import annotations

import numpy as np
import pytest

from advisor import physics
from advisor.candidates import Filters, enumerate_candidates
from advisor.memory import CHECKPOINT_COMPUTE_FACTOR
from advisor.reasons import Reason
from advisor.sharding import (
    ACCUMULATE_SHARE,
    autocast_rows,
    communication_scale,
    compute_scale,
    optimizer_scale,
    plain_layout,
    steps_optimizer,
)
from advisor.workload import build_workload
from cloud.catalog import load_catalog

pytestmark = pytest.mark.filterwarnings("ignore::cloud.catalog.StaleCatalogWarning")


def llm_card(name: str, params: float, layers: int, hidden: int, seq: int = 2048) -> dict:
    """A Llama-shaped decoder card: 6 N FLOPs per token, and per layer s h (34 + 5 a s / h)
    bytes of 16-bit activations (Korthikanti et al. 2022) without the attention scores
    (memory-efficient attention), stored as fp32 bytes as the zoo's cards are."""
    return {
        "model": name, "family": "llama", "task": "text", "dataset": "web",
        "samples_per_epoch": "1000000", "epochs": "1", "image_size": "", "seq_len": str(seq),
        "batch_per_gpu": "1", "global_batch": "512", "params": str(params),
        "gradient_bytes": str(4 * params), "flops_per_sample": str(6 * params * seq),
        "activation_bytes_per_sample": str(2 * 34 * seq * hidden * layers),
        "tensors": str(9 * layers + 2), "source": "test",
    }


CARDS = {"llm_8b": llm_card("llm_8b", 8.0e9, 32, 4096),
         "llm_70b": llm_card("llm_70b", 70.6e9, 80, 8192)}


@pytest.fixture(scope="module")
def offerings():
    return load_catalog().as_arrays()


@pytest.mark.parametrize("model", ["llm_8b", "llm_70b"])
def test_tens_of_billions_of_parameters_fit_only_sharded_and_within_memory(offerings, model):
    work = build_workload(CARDS, model, precision="bf16")
    cands = enumerate_candidates(offerings, work, Filters(gpus=["H100", "A100-80GB"]))
    assert len(cands)
    assert (cands["need_mib"] <= cands["gpu_memory_mib"]).all()
    assert set(cands["remedy"]) <= {"fsdp", "fsdp+checkpointing"}  # replicas never fit
    workers = cands["nodes"] * cands["gpus_per_node"]
    share = cands["micro_batch"] * cands["accumulation"]
    assert (share * workers == cands["global_batch"]).all()
    # The nearest layout: within half an accumulation step's samples of 512 / workers each.
    assert (np.abs(share - 512 / workers) <= cands["accumulation"] / 2).all()
    memory = {cut.gpu for cut in cands.dropped if cut.reason is Reason.MEMORY}
    assert memory  # the clusters too small to hold the states are cut, and said so
    if model == "llm_70b":  # 70B needs several nodes of 80 GB GPUs even sharded
        assert workers.min() >= 16


def test_accumulation_divides_ddp_traffic_and_fsdp_moves_the_parameters_twice():
    features = {"precision": np.array(["fp32", "bf16", "fp32", "fp32"]),
                "params": np.full(4, 1e9), "gradient_bytes": np.full(4, 4e9),
                "accumulation": np.array([4, 1, 1, 2]), "sharded": np.array([0, 1, 1, 1]),
                "checkpointing": np.array([0, 1, 0, 0])}
    np.testing.assert_allclose(communication_scale(features, 4), [0.25, 0.75, 1.5, 1.25])
    np.testing.assert_allclose(compute_scale(features, 4),
                               [1, CHECKPOINT_COMPUTE_FACTOR, 1, 1])
    # the optimizer updates once per optimizer step, each FSDP worker its own shard (8 here)
    features.update(nodes=np.full(4, 2.0), gpus_per_node=np.full(4, 4.0))
    np.testing.assert_allclose(optimizer_scale(features, 4), [0.25, 1 / 8, 1 / 8, 1 / 16])


def plain_h100_plans() -> tuple[dict, dict, int]:
    """(features, the same as plain DDP, how many) of the 8B model's H100 plans."""
    work = build_workload(CARDS, "llm_8b", precision="bf16")
    cands = enumerate_candidates(load_catalog().as_arrays(), work, Filters(gpus=["H100"]))
    features, n = cands.features(work), len(cands)
    flat = dict(features, accumulation=np.ones(n), checkpointing=np.zeros(n), sharded=np.zeros(n))
    return features, flat, n


def test_the_optimizers_bytes_are_charged_once_per_optimizer_step_on_its_shard():
    """...and under accumulation each micro-step but an optimizer step's first reads the
    accumulated gradients and its own and writes their sum: (a-1)/a of three passes."""
    features, flat, n = plain_h100_plans()
    memory = physics.TERMS.index("memory")
    bandwidth = features["gpu_mem_bw_gbps"] * 1e9
    # AdamW, the 8B model's recipe: the weight and gradient read, the weight written (12
    # bytes), its two moments read and written (16)
    assert (features["optimizer_update_bytes"] == 28).all()
    update = 28 * features["params"] / bandwidth
    accumulate = 3 * features["gradient_bytes"] / bandwidth
    workers = features["nodes"] * features["gpus_per_node"]
    # DDP's copies into its buckets and back, once per all-reduce (FSDP: per byte it moves)
    buckets = np.where(workers > 1, 4 * features["gradient_bytes"] / bandwidth, 0.0)
    for layout, share, adds in (({"sharded": np.ones(n)}, 1 / workers, 0.0),
                                ({"accumulation": np.full(n, 4.0)}, 0.25, 0.75),
                                ({"checkpointing": np.ones(n)}, 1.0, 0.0)):  # no new update
        changed = dict(flat, **layout)
        rest = physics.design_matrix(flat)[:, memory] - update - buckets  # the step's other
        if "checkpointing" in layout:
            rest = rest * CHECKPOINT_COMPUTE_FACTOR
        np.testing.assert_allclose(
            physics.design_matrix(changed)[:, memory],
            rest + update * share + accumulate * adds + buckets * communication_scale(changed, n))


def test_data_parallel_workers_copy_their_gradients_into_buckets_and_back():
    """Four passes over the gradients an all-reduce (PyTorch DDP's default
    gradient_as_bucket_view=False), none for one worker or under parameter servers."""
    features, flat, n = plain_h100_plans()
    memory = physics.TERMS.index("memory")
    one = dict(flat, nodes=np.ones(n), gpus_per_node=np.ones(n))
    two = dict(one, gpus_per_node=np.full(n, 2.0))
    copies = physics.BUCKET_COPY_PASSES * features["gradient_bytes"] / (
        features["gpu_mem_bw_gbps"] * 1e9)
    gained = physics.design_matrix(two)[:, memory] - physics.design_matrix(one)[:, memory]
    np.testing.assert_allclose(gained, copies)
    servers = dict(two, sync=np.full(n, "ps"), ps_count=np.ones(n))
    np.testing.assert_allclose(physics.design_matrix(servers)[:, memory],
                               physics.design_matrix(one)[:, memory])


def test_fp16s_loss_scale_unscales_the_gradients_before_each_optimizer_step():
    """GradScaler reads and writes every gradient once an optimizer step (two passes); bf16
    has no loss scale, and a benchmark of forward and backward alone steps no optimizer."""
    features, flat, n = plain_h100_plans()
    memory = physics.TERMS.index("memory")
    unscale = physics.LOSS_SCALE_PASSES * features["gradient_bytes"] / (
        features["gpu_mem_bw_gbps"] * 1e9)
    bf16 = physics.design_matrix(flat)[:, memory]
    fp16 = dict(flat, precision=np.full(n, "amp"))
    np.testing.assert_allclose(physics.design_matrix(fp16)[:, memory] - bf16, unscale)
    accumulating = {"accumulation": np.full(n, 4.0)}
    np.testing.assert_allclose(
        physics.design_matrix(dict(fp16, **accumulating))[:, memory]
        - physics.design_matrix(dict(flat, **accumulating))[:, memory], unscale / 4)
    timed = {"forward_backward_only": np.ones(n)}
    np.testing.assert_allclose(physics.design_matrix(dict(fp16, **timed))[:, memory],
                               physics.design_matrix(dict(flat, **timed))[:, memory])


def test_a_tensors_update_kernels_run_once_per_optimizer_step_its_accumulation_each_micro_step():
    features, flat, n = plain_h100_plans()
    launch = physics.TERMS.index("tensor_launch")
    per_step = physics.design_matrix(flat)[:, launch]
    np.testing.assert_allclose(per_step, features["tensors"])
    for layout, share in (({"accumulation": np.full(n, 8.0)},
                           ACCUMULATE_SHARE + (1 - ACCUMULATE_SHARE) / 8),
                          ({"checkpointing": np.ones(n)}, 1.0),  # recomputing runs no update
                          ({"sharded": np.ones(n)}, 1.0)):  # a shard is a kernel a tensor too
        np.testing.assert_allclose(physics.design_matrix(dict(flat, **layout))[:, launch],
                                   per_step * share)


def test_a_forward_and_backward_benchmark_runs_no_update_and_adds_each_gradient():
    """A benchmark that times forward and backward alone (cnn-benchmarks) runs micro-steps
    that never reach an optimizer step: none of the update's bytes, each tensor's add into
    its .grad (ACCUMULATE_SHARE of its kernels) and the add's three passes over the
    gradients; and its figure answers no training query as `measured`."""
    features, flat, n = plain_h100_plans()
    flat = dict(flat, nodes=np.ones(n), gpus_per_node=np.ones(n))
    timed = dict(flat, forward_backward_only=np.ones(n))
    launch, memory = physics.TERMS.index("tensor_launch"), physics.TERMS.index("memory")
    np.testing.assert_allclose(physics.design_matrix(timed)[:, launch],
                               features["tensors"] * ACCUMULATE_SHARE)
    bandwidth = features["gpu_mem_bw_gbps"] * 1e9
    update = 28 * features["params"] / bandwidth
    accumulate = 3 * features["gradient_bytes"] / bandwidth
    np.testing.assert_allclose(physics.design_matrix(timed)[:, memory],
                               physics.design_matrix(flat)[:, memory] - update + accumulate)
    assert plain_layout(flat, n).all() and not plain_layout(timed, n).any()
    assert steps_optimizer(flat, n).all() and not steps_optimizer(timed, n).any()


def test_a_plain_layout_leaves_the_physics_unchanged_and_checkpointing_costs_a_third():
    work = build_workload(CARDS, "llm_8b", precision="bf16")
    cands = enumerate_candidates(load_catalog().as_arrays(), work, Filters(gpus=["H100"]))
    features = cands.features(work)
    plain = {k: v for k, v in features.items() if k not in ("accumulation", "checkpointing",
                                                             "sharded")}
    flat = dict(plain, accumulation=np.ones(len(cands)), checkpointing=np.zeros(len(cands)),
                sharded=np.zeros(len(cands)))
    np.testing.assert_array_equal(physics.design_matrix(plain), physics.design_matrix(flat))
    recompute = dict(flat, checkpointing=np.ones(len(cands)))
    compute = physics.TERMS.index("unsplit_tensor")  # the test card carries no operator split
    ratio = physics.design_matrix(recompute)[:, compute] / physics.design_matrix(flat)[:, compute]
    np.testing.assert_allclose(ratio, CHECKPOINT_COMPUTE_FACTOR)


def test_a_measurement_of_plain_ddp_does_not_answer_for_another_layout():
    from advisor.artifact import load_artifact
    from advisor.features import configuration_features, model_features

    configs = {"model": np.array(["resnet50"] * 2), "gpu": np.array(["A100-80GB"] * 2),
               "provider": np.array(["aws"] * 2), "sync": np.array(["allreduce"] * 2),
               "ps_count": np.zeros(2), "precision": np.array(["amp"] * 2),
               "nodes": np.ones(2), "gpus_per_node": np.full(2, 8),
               "batch_per_gpu": np.full(2, 256),
               "spot": np.zeros(2, bool), "network_gbps": np.full(2, 400.0),
               "accumulation": np.array([1, 2]),
               "channels_last": np.ones(2)}  # NVIDIA's recipe, which measured it
    features = configuration_features(configs, model_features())
    prediction = load_artifact().predict("throughput", features)
    assert prediction.provenance.tolist() == ["measured", "interpolated"]


def test_fsdp_in_16_bits_computes_in_16_bits_throughout():
    """FSDP's mixed precision gathers 16-bit parameters, so a Llama's residual stream is 16-bit:
    its element-wise traffic is half its fp32 bytes, and no autocast cast runs; under DDP with
    autocast the card's autocast traffic (its fp32 residual stream) and casts stay."""
    from advisor.features import configuration_features, model_features
    from gpuadvisor.cards import OPERATOR_CLASSES

    configs = {"model": ["llama_8b"] * 3, "gpu": ["H100-80GB"] * 3, "provider": ["aws"] * 3,
               "sync": ["allreduce"] * 3, "ps_count": [0] * 3,
               "precision": ["bf16", "bf16", "fp32"], "nodes": [1] * 3, "gpus_per_node": [8] * 3,
               "batch_per_gpu": [1] * 3, "spot": [False] * 3, "network_gbps": [3200.0] * 3,
               "sharded": [0, 1, 1]}
    features = configuration_features({k: np.array(v) for k, v in configs.items()},
                                      model_features())
    half = np.array([True, True, False])
    autocast = autocast_rows(features, 3, half)
    ddp, fsdp, fp32 = (physics.traffic_scale(features, "other", half, autocast))
    assert ddp > 0.9 and fsdp == physics.HALF_BYTES and fp32 == 1.0  # fp32 residual in DDP
    for kind in OPERATOR_CLASSES:
        assert physics.traffic_scale(features, kind, half, autocast)[1] == physics.HALF_BYTES
    casts = features["autocast_kernels_per_step"][0]
    kernels = physics.kernels_per_step(features, 3)
    assert casts > 0 and kernels[0] - kernels[1] == casts and kernels[1] == kernels[2]


def test_fsdp_in_16_bits_saves_16_bit_activations():
    """Under DDP with autocast a transformer saves its fp32 residual stream (the card's autocast
    bytes, 0.6 of fp32 here); FSDP in 16 bits saves half the fp32 bytes."""
    from advisor.memory import NONE, ModelMemory, Remedy, sample_mib

    fp32 = float(CARDS["llm_8b"]["activation_bytes_per_sample"])
    autocast = ModelMemory(8.0e9, 3.2e10, fp32, "bf16", "adamw", 290.0,
                           autocast_activation_bytes=0.6 * fp32)
    unmeasured = ModelMemory(8.0e9, 3.2e10, fp32, "bf16", "adamw", 290.0)
    fsdp = Remedy("fsdp", sharded=True)
    assert sample_mib(autocast, NONE) == pytest.approx(1.12 * 0.6 * fp32 / 2**20)
    assert sample_mib(autocast, fsdp) == pytest.approx(1.12 * 0.5 * fp32 / 2**20)
    assert sample_mib(autocast, fsdp) == sample_mib(unmeasured, fsdp)


def test_an_fsdp_plans_slowdown_is_against_ddp_at_its_own_widths(offerings):
    """`remedy_slowdown` is what sharding adds (its all-gathers) over the same cluster at the
    same activation widths, not the 16-bit widths' saving over autocast."""
    from advisor.api import fastest_layouts
    from advisor.artifact import load_artifact
    from gpuadvisor.cards import load_cards

    work = build_workload(load_cards(), "llama_8b", precision="bf16")  # the split zoo card
    cands = enumerate_candidates(offerings, work, Filters(gpus=["H200"], max_nodes=1))
    kept, _ = fastest_layouts(cands, work, load_artifact())
    fsdp = kept["remedy"] == "fsdp"
    assert fsdp.any() and (kept["remedy_slowdown"][fsdp] > 0).all()
