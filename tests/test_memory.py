"""The memory estimate (advisor/memory.py) against published per-GPU batch sizes
(datasets/published_batches.csv), and each remedy's effect."""

import csv
import json
from dataclasses import replace

import numpy as np
import pytest

from advisor import memory
from advisor.memory import NONE, REMEDIES, ModelMemory, largest_micro_batch, need_mib
from cloud.gpus import gpu_spec
from gpuadvisor import data
from gpuadvisor.cards import load_cards

REMEDY = {r.name: r for r in REMEDIES}


def published():
    with open(data.find("published_batches.csv"), newline="") as handle:
        return list(csv.DictReader(handle))


def model_memory(card, precision, optimizer, scale=1.0):
    return ModelMemory.from_card(card, precision, optimizer, scale)


def input_scale(row, card):
    if row["seq_len"]:
        return float(row["seq_len"]) / float(card["seq_len"])
    if not row["image_size"]:  # a model without an input size (NCF: user-item pairs)
        return 1.0
    return (float(row["image_size"]) / float(card["image_size"])) ** 2


@pytest.mark.parametrize("row", published(), ids=lambda r: "-".join(
    (r["model"], r["gpu"], r["precision"], r["seq_len"] or r["image_size"])))
def test_published_batches_fit_and_the_tuned_ones_sit_near_the_estimated_maximum(row):
    card = load_cards()[row["model"]]
    model = model_memory(card, row["precision"], row["optimizer"], input_scale(row, card))
    largest = int(largest_micro_batch(model, NONE, gpu_spec(row["gpu"]).memory_mib))
    batch = int(row["batch_per_gpu"])
    assert largest >= batch, f"the published batch {batch} does not fit (largest {largest})"
    if row["at_limit"] == "true":  # tuned to fill the GPU: the estimate may not allow much more
        assert largest <= 1.5 * batch


def test_the_issue_case_resnet50_fp32_256_does_not_fit_a_24gb_card():
    card = load_cards()["resnet50"]
    model = model_memory(card, "fp32", "sgd")
    assert need_mib(model, NONE, 256) > gpu_spec("L4").memory_mib
    assert largest_micro_batch(model, NONE, gpu_spec("L4").memory_mib) < 256


def test_half_precision_and_adam_cost_what_they_should():
    base = ModelMemory(1e9, 4e9, 0.0, "fp32", "sgd")
    adam = ModelMemory(1e9, 4e9, 0.0, "fp32", "adamw")
    amp = ModelMemory(1e9, 4e9, 0.0, "amp", "adamw")
    fixed = memory.CUDA_CONTEXT_MIB + memory.WORKSPACE_MIB
    # weights 4 + gradients 4 + DDP buckets 4 + momentum 4 bytes per parameter
    assert float(need_mib(base, NONE, 0)) == pytest.approx(
        fixed + memory.ALLOCATOR_MARGIN * 16e9 / memory.MIB)
    assert float(need_mib(adam, NONE, 0) - need_mib(base, NONE, 0)) == pytest.approx(
        memory.ALLOCATOR_MARGIN * 4e9 / memory.MIB)
    assert float(need_mib(amp, NONE, 0) - need_mib(adam, NONE, 0)) == pytest.approx(
        memory.ALLOCATOR_MARGIN * 2e9 / memory.MIB)  # autocast's 16-bit weight copies


def test_tensors_a_step_saves_once_are_counted_once_not_per_sample():
    """WaveGlow's weight-normalised weights are computed from their parameters each step and
    saved for backward whatever the batch: the card keeps them apart from the per-sample
    activations, and the estimate counts them once (under autocast at autocast's width)."""
    plain = ModelMemory(1e6, 4e6, 1e8, "fp32", "sgd")
    stepped = replace(plain, step_activation_bytes=5e8)
    for batch in (1, 10):
        assert float(need_mib(stepped, NONE, batch) - need_mib(plain, NONE, batch)) == \
            pytest.approx(memory.ALLOCATOR_MARGIN * 5e8 / memory.MIB)
    amp = replace(stepped, precision="amp")
    assert memory.step_saved_mib(amp, NONE) == pytest.approx(2.5e8 / memory.MIB)  # half
    traced = replace(amp, autocast_step_activation_bytes=3e8)
    assert memory.step_saved_mib(traced, NONE) == pytest.approx(3e8 / memory.MIB)
    room = 16_000.0
    assert largest_micro_batch(stepped, NONE, room) < largest_micro_batch(plain, NONE, room)


def test_the_cards_per_sample_activations_leave_out_what_a_step_saves_once():
    from gpuadvisor.cards import STEP_ACTIVATION_COLUMNS

    cards = load_cards()
    for name in ("waveglow", "transformer_xl_base"):
        assert all(cards[name][column] > 0 for column in STEP_ACTIVATION_COLUMNS.values())
    assert cards["waveglow"]["step_activation_bytes"] > cards["waveglow"][
        "activation_bytes_per_sample"]
    assert cards["bert_large"]["step_activation_bytes"] < 1e6  # nothing batch-independent


def test_checkpointing_lets_a_larger_micro_batch_fit():
    card = load_cards()["gpt2"]
    model = model_memory(card, "fp32", "adamw")
    usable = gpu_spec("T4").memory_mib
    plain = int(largest_micro_batch(model, NONE, usable))
    kept = int(largest_micro_batch(model, REMEDY["checkpointing"], usable))
    assert kept >= 2 * max(plain, 1)
    # the loss's logits lie outside the checkpointed blocks: without them it would gain more
    blocks_only = replace(model, logits_bytes=0.0)
    assert int(largest_micro_batch(blocks_only, REMEDY["checkpointing"], usable)) >= 3 * max(
        int(largest_micro_batch(blocks_only, NONE, usable)), 1) > kept


def test_a_language_models_loss_holds_fp32_logits_and_their_gradients():
    """GPT-2's 1,024 tokens x 50,257 scores a sample: 206 MB in fp32. At the loss, beside the
    saved set, live the gradients of the log-softmax's output and input, fp32 under autocast
    too (autocast runs the loss in fp32), and the logits the model returns (16-bit under
    autocast)."""
    card = load_cards()["gpt2"]
    logits = 1024 * 50257 * 4
    assert float(card["logits_bytes_per_sample"]) == logits
    fp32, bf16 = (model_memory(card, p, "adamw") for p in ("fp32", "bf16"))
    assert memory.sample_mib(fp32, NONE) == pytest.approx(
        (fp32.activation_bytes + 3 * logits) / memory.MIB)
    assert memory.sample_mib(bf16, NONE) == pytest.approx(
        (float(card["autocast_activation_bytes_per_sample"]) + 2.5 * logits) / memory.MIB)
    # a card without the autocast figure: halved, the log-softmax's fp32 output with it
    halved = replace(bf16, autocast_activation_bytes=None)
    assert memory.sample_mib(halved, NONE) == pytest.approx(
        (bf16.activation_bytes / 2 + 3 * logits) / memory.MIB)
    # an image classifier's 1,000 scores leave the backward's usual peak in charge
    resnet = model_memory(load_cards()["resnet50"], "fp32", "sgd")
    assert memory.sample_mib(resnet, NONE) == pytest.approx(
        resnet.activation_bytes * (1 + memory.ACTIVATION_GRADIENT_PEAK) / memory.MIB)


def test_sharding_divides_the_model_states_over_the_workers():
    model = ModelMemory(70e9, 280e9, 1e8, "bf16", "adamw", tensors=723)
    usable = np.full(3, gpu_spec("H100").memory_mib)
    workers = np.array([1, 8, 64])
    assert (largest_micro_batch(model, NONE, usable, workers) == 0).all()
    sharded = largest_micro_batch(model, REMEDY["fsdp"], usable, workers)
    assert sharded[0] == 0 and sharded[1] == 0 and sharded[2] >= 1
    eight_b = ModelMemory(8e9, 32e9, 1e8, "bf16", "adamw", tensors=291)
    assert int(largest_micro_batch(eight_b, NONE, usable[0])) == 0
    assert int(largest_micro_batch(eight_b, REMEDY["fsdp"], usable[0], 8)) >= 1


def test_an_unknown_optimizer_names_the_known_ones():
    with pytest.raises(ValueError, match="adamw"):
        memory.optimizer_for("text", "adafactor")


def test_a_cards_recipe_names_its_optimizer():
    """The card's own, else its family's published recipe's (EfficientNet's RMSprop; DeiT's
    ViT, Swin's and ConvNeXt's AdamW), else its task's."""
    cards = load_cards()
    recipes = {name: memory.recipe_optimizer(cards[name]) for name in (
        "resnet50", "efficientnet_b0", "vit_b16", "swin_tiny", "convnext_tiny", "bert_large",
        "ncf")}
    assert recipes == {"resnet50": "sgd", "efficientnet_b0": "rmsprop", "vit_b16": "adamw",
                       "swin_tiny": "adamw", "convnext_tiny": "adamw", "bert_large": "adamw",
                       "ncf": "adam"}
    assert memory.recipe_optimizer({**cards["vit_b16"], "optimizer": "SGD"}) == "sgd"
    # `recommend --optimizer`'s help says the defaults from the same tables
    words = memory.recipe_defaults()
    assert "image models sgd" in words and "text models adamw" in words
    assert "efficientnet rmsprop" in words and "convnext adamw" in words


# The most the estimate may ask for beyond what a run used: an over-estimate costs batch, not
# a crash.
OVER_ASK = 1.3


# NVIDIA's Tacotron 2 README of the 19.06 container trained at 128 (AMP) and 64 (FP32) on a
# 16 GB V100; its January 2020 version cut them to 104 and 48 ("Updated batch sizes"), the
# recipe the card's estimate fits. The estimate puts the 2019 batches past 16 GB (18.9 GB at
# 128): what let the 2019 code hold them the README does not say and the card does not trace
# (its modules are read at 2020 commits), so those rows check nothing here.
OLDER_CODE = ("SpeechSynthesis/Tacotron2/README.md@02b49ace",)


def shipped_measurements():
    """Zoo-model rows of datasets/published_throughput.csv that state their per-GPU batch
    (those of OLDER_CODE aside)."""
    cards = load_cards()
    with open(data.find("published_throughput.csv"), newline="") as handle:
        return [r for r in csv.DictReader(handle) if r["model"] in cards and r["batch_per_gpu"]
                and not any(code in r["source"] for code in OLDER_CODE)]


@pytest.mark.parametrize("row", shipped_measurements(), ids=lambda r: "-".join(
    (r["model"], r["gpu"], r["precision"], r["batch_per_gpu"], r["seq_len"] or r["image_size"])))
def test_every_shipped_measurement_ran_at_a_batch_the_estimate_fits(row):
    """A recipe's batch fits the estimate. timm's batches are the largest its benchmark's
    out-of-memory retry found, at the edge of the card's memory, where the estimate's allowed
    over-ask (OVER_ASK, as on the H200) can put them past it: up to 1.15x here (ResNet-50 at
    512 on the RTX 3090's 24 GB)."""
    card = load_cards()[row["model"]]
    # timm's benchmark steps SGD; a forward-and-backward benchmark (`none`) holds no state,
    # so its recipe's is a stricter check
    optimizer = row["optimizer"] if row["optimizer"] not in ("", "none") \
        else memory.recipe_optimizer(card)
    model = model_memory(card, row["precision"], optimizer, input_scale(row, card))
    # The file names 32 GB V100s (DGX-1 32G, DGX-2) `V100` as its throughput fit groups them;
    # memory is what they differ in.
    gpu = "V100-32GB" if "32G" in row["gpu_as_published"] else row["gpu"]
    need = float(need_mib(model, NONE, int(row["batch_per_gpu"])))
    at_the_edge = "huggingface/pytorch-image-models" in row["source"]
    assert need <= gpu_spec(gpu).memory_mib * (OVER_ASK if at_the_edge else 1.0)


def h200_trials():
    path = data.shipped("measurements") / "h200.json"
    return [t for t in json.loads(path.read_text())
            if t["status"] == "finished" and t["precision"] in ("amp", "bf16")]


# The residual ConvNets, whose saved activations the estimate's constants were first set on:
# at most 15% short of the measured peak, at every batch and precision.
RESIDUAL_CONVNETS = ("resnet", "resnext", "se_resnext")


@pytest.mark.parametrize("trial", h200_trials(), ids=lambda t: "-".join(
    (t["model"], t["precision"], str(t["batch_per_gpu"]))))
def test_the_estimated_tensors_against_the_peaks_measured_on_an_h200(trial):
    """torch.cuda.max_memory_allocated of the worker's trials (datasets/measurements/h200.json,
    SGD with momentum, autocast) against the estimate without context and workspaces. fp32 and
    tf32 trials are left out: their peaks include cuDNN's transient autotuning workspaces.

    The estimate asks for at most 1.3x what a trial used (Transformer-XL large 1.23x: an
    over-estimate costs batch, not a crash). Two rules derived before these trials were held
    against them lifted the language models: the loss's fp32 logits and their gradients
    (memory.LOSS_GRADIENT_COPIES; GPT-2 0.53x -> 0.81x) and autocast's own dtypes for the saved
    set, the residual stream and normalisation in fp32 (profiler/autocast_memory.py; GPT-2
    -> 0.95x, ViT-B/16 0.91x -> 1.01x), so a model whose logits are its largest tensors is held
    within 15%. It falls short on Transformer-XL base (0.42x) and NCF (0.32x) (README, "On an
    NVIDIA GPU"); the lower bound guards that they get no worse."""
    card = load_cards()[trial["model"]]
    estimate = memory.allocated_mib(model_memory(card, trial["precision"], "sgd"), NONE,
                                    trial["batch_per_gpu"])
    ratio = estimate / (trial["peak_allocated_bytes"] / 2**20)
    assert 0.25 < ratio < OVER_ASK
    if trial["model"].startswith(RESIDUAL_CONVNETS):
        assert ratio > 0.85
    if float(card["logits_bytes_per_sample"]) > 1e8:  # GPT-2's 206 MB a sample
        assert ratio > 0.85
