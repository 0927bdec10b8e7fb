"""A handful of predictions beside published figures, through the recommend path's feature
builder and the shipped artifact: per-GPU samples/s (PyTorch's default NCHW; `ch-last`: the
same job kept channels-last, as NVIDIA's recipes run their 16-bit convolutions), the fraction
of the GPU's sustained peak that implies (`of peak`: model FLOPs over the peak its arithmetic
runs under at the clock the GPU holds under its power limit), and NVIDIA's figure where
datasets/published_throughput.csv holds that exact configuration (those rows are in the
artifact's training data: `measured`; the PyTorch figures where a configuration has them, as
the measured answer is, in the recipe's own memory format).

Then LLM pre-training plans, made by `advisor.recommend` itself (micro-batch, accumulation,
FSDP and checkpointing as it chooses them; the fastest instance of the shape), beside the
model FLOPs utilisation (MFU: model FLOPs per second over the GPUs' datasheet dense peak,
PaLM's definition) that large training runs reported. These figures are evaluation only: no
row of them is in datasets/ and nothing was fitted or tuned to them. Most are of other models
or clusters, a sanity range rather than an error; torchtitan's are of the same models, GPUs,
GPU count, micro-batch and sharding (FSDP), and differ only where the plan chooses
gradient accumulation or activation checkpointing otherwise (its `remedy` column).

Last, plans for models of one's own, carded as a user cards them (`profiler card --config
config.json --seq-len N --save`, into a temporary data directory): an MPT-7B-shaped and a
T5-base-shaped Hugging Face config, written here.

    .venv/bin/python benchmarks/reference_points.py
"""

from __future__ import annotations

import csv
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from advisor import physics
from advisor.artifact import load_artifact
from advisor.features import configuration_features, model_features
from advisor.importers.published import times_forward_backward_only
from gpuadvisor.cards import card_name

# (model, GPU, precision, GPUs in one node, per-GPU batch, sequence length or None)
POINTS = [
    ("resnet50", "T4", "amp", 1, 256, None),
    ("resnet50", "V100", "amp", 1, 256, None),
    ("resnet50", "V100", "fp32", 1, 128, None),
    ("resnet50", "V100", "amp", 1, 128, None),
    ("resnet50", "A100-80GB", "amp", 1, 256, None),
    ("resnet50", "A100-80GB", "tf32", 1, 256, None),
    ("resnet50", "A100-80GB", "fp32", 1, 256, None),
    ("resnet50", "H100-80GB", "amp", 1, 256, None),
    ("resnet50", "L4", "amp", 8, 256, None),
    ("resnet50", "A100-80GB", "amp", 8, 256, None),
    ("efficientnet_b0", "T4", "amp", 1, 128, None),
    ("efficientnet_b0", "V100", "amp", 1, 128, None),
    ("efficientnet_b0", "A100-80GB", "amp", 1, 256, None),
    ("bert_large", "V100", "amp", 1, 64, 128),
    ("bert_large", "A100-80GB", "amp", 1, 64, 128),
    ("bert_large", "A100-80GB", "amp", 1, 32, 384),
    ("bert_large", "H100-80GB", "bf16", 1, 64, 128),
    # GPUs no training data of ours was measured on (datasheet figures only):
    ("resnet50", "A10", "amp", 1, 256, None),
    ("resnet50", "RTX3090", "amp", 1, 256, None),
    ("resnet50", "RTX3090", "fp32", 1, 128, None),
    ("resnet50", "RTX4090", "amp", 1, 256, None),
    ("resnet50", "RTXA6000", "amp", 1, 256, None),
    ("bert_large", "A40", "amp", 1, 32, 128),
    ("resnet50", "A100PCIe-80GB", "amp", 1, 256, None),  # the PCIe card beside the SXM row
    ("bert_large", "H100PCIe", "bf16", 1, 64, 128),
    # Models no published row of ours measured (cards only), beside ResNet-50 on the same GPU:
    ("resnet18_cifar", "V100", "fp32", 1, 128, None),
    ("resnet18_cifar", "V100", "amp", 1, 128, None),
    ("densenet121", "V100", "fp32", 1, 64, None),
    ("densenet121", "V100", "amp", 1, 64, None),
    ("densenet121", "A100-80GB", "amp", 1, 64, None),
    ("inception_v3", "V100", "fp32", 1, 32, None),
    ("inception_v4", "V100", "fp32", 1, 32, None),
]
# Third parties' measurements of the same configuration, never in datasets/ nor fitted: (low,
# high) per GPU where the source gives two layouts, and where each comes from.
INDEPENDENT = {
    # torchvision ResNet-50 training, batch 128, Tesla V100-SXM2: 342.37 ms an iteration in
    # FP32 NCHW; AMP 152.20 ms in NCHW, 110.93 ms in NHWC (channels-last).
    ("resnet50", "V100", "fp32", 1, 128, None): ((128 / 0.34237,) * 2, "torchvision"),
    ("resnet50", "V100", "amp", 1, 128, None): ((128 / 0.15220, 128 / 0.11093), "torchvision"),
}
INDEPENDENT_SOURCES = {
    "torchvision": "sandeepkumar-skb/pytorch_experiments torchvision_exp/README.md@0e13d7fc",
}
LINK = {"L4": "PCIe", "T4": "PCIe", "A100PCIe-80GB": "PCIe", "H100PCIe": "PCIe"}  # others: NVSwitch


def published() -> dict[tuple, float]:
    """Median published figure per (model, GPU, precision, GPUs, batch, seq_len), per GPU: of
    the PyTorch rows where a configuration has any (what a `measured` answer returns), in the
    recipe's own memory format where it has those (NVIDIA's channels-last 16-bit recipes, not
    the NCHW runs beside them: the `ch-last` column's job), else of every framework's; never a
    benchmark's of forward and backward alone, which answers no training query."""
    out: dict[tuple, list[tuple[int, float]]] = {}
    with open(ROOT / "datasets" / "published_throughput.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            if not row["batch_per_gpu"] or times_forward_backward_only(row):
                continue
            key = (row["model"], row["gpu"], row["precision"], int(row["num_gpus"]),
                   int(row["batch_per_gpu"]), int(row["seq_len"]) if row["seq_len"] else None)
            pytorch = row["framework"] == "PyTorch"
            rank = 0 if pytorch and row["memory_format"] != "nchw" else 1 if pytorch else 2
            out.setdefault(key, []).append((rank, float(row["throughput"]) / int(row["num_gpus"])))
    medians = {}
    for key, rows in out.items():
        best = min(rank for rank, _ in rows)
        medians[key] = float(np.median([value for rank, value in rows if rank == best]))
    return medians


# (model, GPU, GPUs, the published figure it sits beside, that figure's MFU)
LLM_POINTS = [
    ("llama_8b", "H100-80GB", 8, "Llama 3 405B, 8K-16K H100, seq 8192: 380-430 TFLOP/s a GPU "
     "(Dubey et al. 2024, arXiv:2407.21783, Table 4)", "38-43%"),
    ("llama_70b", "H100-80GB", 64, "the same", "38-43%"),
    ("llama_8b", "H100-80GB", 8, "Llama 3.1 8B: 1.46M H100 GPU-hours for 15T tokens, seq "
     "8192 (HF model card; whole campaign, so a floor)",
     f"{6 * 8.03e9 * 15e12 / (1.46e6 * 3600) / 989e12:.0%}"),
    ("llama_8b", "A100-80GB", 8, "Llama 2 7B: 184,320 A100-80GB GPU-hours for 2T tokens, "
     "seq 4096 (Touvron et al. 2023, arXiv:2307.09288, Table 2; whole campaign)",
     f"{6 * 6.74e9 * 2e12 / (184_320 * 3600) / 312e12:.0%}"),
    ("llama_70b", "A100-80GB", 64, "Llama 2 70B: 1,720,320 A100-80GB GPU-hours for 2T tokens, "
     "seq 4096 (ibid.)", f"{6 * 68.98e9 * 2e12 / (1_720_320 * 3600) / 312e12:.0%}"),
    ("llama_70b", "A100-80GB", 64, "Megatron-LM GPT-3 175B / 1T, 1024 / 3072 A100-80GB, seq "
     "2048: 140 / 163 TFLOP/s a GPU, recomputation counted (Narayanan et al. 2021, "
     "arXiv:2104.04473, Table 1)", "45% / 52%"),
    ("llama_70b", "A100-80GB", 64, "Megatron-Turing NLG 530B on A100s (Chowdhery et al. 2022, "
     "PaLM, arXiv:2204.02311, Table 3)", "29.7%"),
    # The like-for-like figures: PyTorch FSDP2, 64 A100-80GB, local batch 1, seq 8192, MFU on
    # 6N plus attention FLOPs without recomputation, as the MFU column here counts them.
    ("llama_8b", "A100-80GB", 64, "torchtitan, Llama 3 8B, FSDP2 on 64 A100-80GB, local batch "
     "1, seq 8192, selective activation checkpointing: 2,904-2,973 tokens/s a GPU "
     "(pytorch/torchtitan docs/performance.md@04133643)", "57-58%"),
    ("llama_70b", "A100-80GB", 64, "torchtitan, Llama 3 70B, the same with full activation "
     "checkpointing: 331 tokens/s a GPU (ibid.)", "51.7%"),
]
TOKENS = "20B"  # enough work that every plan is a long run; the throughput does not depend on it

# Configs of one's own: (card name, config.json, seq_len, GPU, GPUs, the figure beside it or
# None, that figure in tokens/s a GPU). MPT-7B's shape (mosaicml/mpt-7b's config: d_model
# 4,096, 32 layers and heads, ALiBi, vocabulary 50,432) beside MosaicML's campaign, 1T tokens
# in 9.5 days on 440 A100-40GB ("Introducing MPT-7B", 2023: a floor, restarts and evaluation
# included); T5-base's (as Hugging Face's t5-base: 222,903,552 parameters) at 512 tokens
# each way, with no published figure beside it.
OWN_CONFIGS = [
    ("mpt_7b_shaped", {"model_type": "mpt", "architectures": ["MptForCausalLM"],
                       "d_model": 4096, "n_heads": 32, "n_layers": 32, "expansion_ratio": 4,
                       "max_seq_len": 2048, "vocab_size": 50432, "no_bias": True},
     2048, "A100-40GB", 8, "MPT-7B: 1T tokens in 9.5 days on 440 A100-40GB (MosaicML, "
     "\"Introducing MPT-7B\", 2023; campaign-wide, so a floor)", 1e12 / (9.5 * 86400 * 440)),
    ("t5_base_shaped", {"model_type": "t5", "architectures": ["T5ForConditionalGeneration"],
                        "d_model": 768, "d_kv": 64, "d_ff": 3072, "num_layers": 12,
                        "num_heads": 12, "vocab_size": 32128, "feed_forward_proj": "relu"},
     512, "A100-80GB", 1, None, None),
]


def llm_plan(model: str, gpu: str, gpus: int) -> dict:
    """The fastest of the plans `advisor.recommend` makes for `model` on `gpus` GPUs of one
    type, in bf16, and its MFU against the datasheet peak."""
    from advisor.api import recommend
    from advisor.features import gpu_features
    from gpuadvisor.cards import load_cards

    nodes = max(1, gpus // 8)
    plans = [p for p in recommend(model, tokens=TOKENS, deadline="3650d", precision="bf16",
                                  gpus=[gpu], max_nodes=nodes, top=1000,
                                  market="on-demand").plans
             if p["nodes"] * p["gpus_per_node"] == gpus]
    if not plans:
        raise SystemExit(f"no {gpus}x{gpu} plan for {model}: is the catalog missing it?")
    plan = max(plans, key=lambda p: p["throughput"])
    flops = float(load_cards()[model]["flops_per_sample"])
    peak = gpu_features(gpu)["gpu_tensor_tflops"] * 1e12 * gpus
    return {**plan, "mfu": plan["throughput"] * flops / peak,
            "mfu_lo": plan["throughput_lo"] * flops / peak,
            "mfu_hi": plan["throughput_hi"] * flops / peak}


def llm_table() -> None:
    print("\nLLM pre-training, bf16 (predicted by `advisor recommend`, published MFU beside):")
    print(f"{'plan':<34} {'tokens/s/GPU':>12} {'MFU':>5} {'90% interval':>12}  "
          f"{'published':>9}  figure")
    for model, gpu, gpus, figure, published_mfu in LLM_POINTS:
        plan = llm_plan(model, gpu, gpus)
        seq = plan["seq_len"] if plan.get("seq_len") else 8192
        per_gpu = plan["throughput"] * seq / gpus
        name = f"{model} {gpus}x{gpu} mb{plan['micro_batch']} {plan['remedy']}"
        print(f"{name:<34} {per_gpu:12,.0f} {plan['mfu']:5.0%} "
              f"{plan['mfu_lo']:5.0%}-{plan['mfu_hi']:<5.0%}  {published_mfu:>9}  {figure}")


def own_config_table() -> None:
    """OWN_CONFIGS carded into a temporary data directory and planned as LLM_POINTS are."""
    import json
    import os
    import tempfile
    from unittest import mock

    from advisor.features import gpu_features
    from gpuadvisor.cards import load_cards, save_own_card
    from profiler.own_cards import Workload, config_card

    print("\nModels of one's own (`profiler card --config`), bf16, planned by `advisor recommend`"
          " (MFU by the card's FLOPs, and by 6N):")
    print(f"{'plan':<40} {'samples/s/GPU':>13} {'90% interval':>13} {'tokens/s/GPU':>12} "
          f"{'MFU':>5} {'6N':>4}  published")
    with tempfile.TemporaryDirectory() as home, \
            mock.patch.dict(os.environ, {"GPUADVISOR_HOME": home}):
        for name, config, seq, gpu, gpus, figure, tokens in OWN_CONFIGS:
            folder = Path(home) / name
            folder.mkdir()
            (folder / "config.json").write_text(json.dumps(config))
            save_own_card(config_card(folder / "config.json", name, Workload(seq_len=seq)))
            plan = llm_plan(name, gpu, gpus)
            per_gpu = plan["throughput"] / gpus
            six_n = per_gpu * seq * 6 * float(load_cards()[name]["params"]) / (
                gpu_features(gpu)["gpu_tensor_tflops"] * 1e12)
            label = f"{name} {gpus}x{gpu} mb{plan['micro_batch']} {plan['remedy']}"
            beside = "-" if figure is None else f"{tokens:,.0f} tokens/s a GPU, {figure}"
            lo, hi = plan["throughput_lo"] / gpus, plan["throughput_hi"] / gpus
            print(f"{label:<40} {per_gpu:13,.1f} {lo:6,.1f}-{hi:<6,.1f} "
                  f"{per_gpu * seq:12,.0f} {plan['mfu']:5.0%} {six_n:4.0%}  {beside}")


def main() -> None:
    warnings.simplefilter("ignore")
    n = len(POINTS)
    model, gpu, precision, per_node, batch, seq = (list(c) for c in zip(*POINTS))
    configs = {"model": model, "gpu": gpu, "provider": ["aws"] * n, "sync": ["allreduce"] * n,
               "ps_count": [0] * n, "precision": precision, "nodes": [1] * n,
               "gpus_per_node": per_node, "batch_per_gpu": batch, "spot": [False] * n,
               "network_gbps": [100.0] * n, "seq_len": seq,
               "interconnect": [LINK.get(g, "NVSwitch") for g in gpu]}
    cards = model_features()
    # A row measured at another input size is priced with the card traced at that size
    # (bert_large@384), as the published importer matches it.
    configs["card"] = [card_name(m, q) if card_name(m, q) in cards else None
                       for m, q in zip(model, seq)]
    features = configuration_features(configs, cards)
    artifact = load_artifact()
    prediction = artifact.predict("throughput", features)
    # The same jobs kept channels-last (NVIDIA's recipes are; PyTorch's default is NCHW).
    nhwc = artifact.predict("throughput", configuration_features(
        {**configs, "channels_last": [1.0] * n}, cards)).value
    peak = physics.effective_peak_tflops(features) * 1e12
    reference = published()
    print(f"{'configuration':<44} {'predicted/GPU':>13} {'90% interval':>17} "
          f"{'of peak':>8} {'ch-last':>8} {'NVIDIA':>8} {'others':>12}")
    for i, point in enumerate(POINTS):
        per_gpu = prediction.value[i] / per_node[i]
        lo, hi = prediction.lo[i] / per_node[i], prediction.hi[i] / per_node[i]
        mfu = per_gpu * features["flops_per_sample"][i] / peak[i]
        name = f"{model[i]} {gpu[i]} x{per_node[i]} {precision[i]} b{batch[i]}" + (
            f" s{seq[i]}" if seq[i] else "")
        known = reference.get(point)
        (low, high), _ = INDEPENDENT.get(point, ((None, None), None))
        other = "-" if low is None else f"{low:,.0f}" if low == high else f"{low:,.0f}-{high:,.0f}"
        last = nhwc[i] / per_node[i]
        last = f"{last:,.0f}" if abs(last / per_gpu - 1) > 1e-9 else "same"
        print(f"{name:<44} {per_gpu:13,.0f} {lo:8,.0f}-{hi:<8,.0f} {mfu:8.0%} {last:>8} "
              f"{f'{known:,.0f}' if known else '-':>8} {other:>12}  {prediction.provenance[i]}")
    for key, source in INDEPENDENT_SOURCES.items():
        print(f"  others ({key}): {source}")
    llm_table()
    own_config_table()


if __name__ == "__main__":
    main()
