"""The shipped published_throughput.csv: faithful to the reference, zoo names, import."""

import csv
import re

import numpy as np
import pytest

from advisor.importers import ImportDataError
from advisor.importers.published import (
    FILE,
    import_published,
    load_published,
    matched_card,
    times_forward_backward_only,
    trial_row,
)
from cloud.gpus import gpu_spec
from gpuadvisor import data
from gpuadvisor.cards import load_cards
from gpuadvisor.store import Store

SHIPPED = data.shipped(FILE)


def _shipped():
    with open(SHIPPED, newline="") as handle:
        return list(csv.DictReader(handle))


def test_every_published_figure_is_carried_with_its_citation(reference):
    with open(reference / "published" / "throughput.csv", newline="") as handle:
        published = list(csv.DictReader(handle))
    assert len(published) == 30
    for row in published:
        (carried,) = [r for r in _shipped() if (r["model_as_published"], r["gpu_as_published"],
                                                r["num_gpus"], r["precision"]) ==
                      (row["model"], row["gpu"], row["num_gpus"], row["precision"])]
        assert float(carried["throughput"]) == float(row["throughput"])
        assert carried["unit"] == row["unit"]
    for row in _shipped():
        dle = row["source"].startswith("published: NVIDIA/DeepLearningExamples ")
        # MLPerf Training logs: v1.0-v4.0, NVIDIA's and partners' submissions (v1.0, v1.1,
        # v2.0 and v3.0 Dell; v2.0 and v3.1 Krai; v2.1, v3.0 and v3.1 Supermicro; v2.0 and v3.0
        # H3C; v2.1 Fujitsu and Inspur; v2.1 and v3.1 xFusion; v3.0 IEI; v3.1 CTuning; v4.0
        # Dell, Lenovo, Fujitsu).
        mlperf = re.match(r"published: mlcommons/training_results_v\d+\.\d+ "
                          r"(NVIDIA|Dell|H3C|Lenovo|Fujitsu|CTuning|Krai|Supermicro|xFusion|IEI|"
                          r"Inspur)/results/",
                          row["source"])
        tf_benchmarks = row["source"].startswith(  # TensorFlow's 2017 benchmarks page
            "published: tensorflow/tensorflow tensorflow/docs_src/performance/benchmarks.md@")
        # timm's train benchmark files on an RTX 3090 (AMP, NCHW and NHWC; PyTorch 1.12)
        timm = re.match(r"published: huggingface/pytorch-image-models results/"
                        r"benchmark-train-amp-(nchw|nhwc)-pt112-cu113-rtx3090\.csv@", row["source"])
        # Justin Johnson's cnn-benchmarks (Lua Torch, FP32, batch 16): forward and backward
        # of a minibatch, as its README's tables give the milliseconds
        cnn_benchmarks = row["source"] == "published: jcjohnson/cnn-benchmarks README.md@2ee75e2b"
        # aisensiy/pytorch-gpu-benchmark: its script's timed loop and each run's per-step file
        gpu_benchmark = re.fullmatch(
            r"published: aisensiy/pytorch-gpu-benchmark benchmark_models\.py@74765ce1 \(the "
            r"timed loop\) and experiment_results/\w+/[\w-]+/data/[\w-]+_float_model_train_"
            r"benchmark\.csv@[0-9a-f]{8} \(the figures\)", row["source"])
        assert (dle and "README.md@" in row["source"] or mlperf and ".txt@" in row["source"]
                or tf_benchmarks or timm and row["memory_format"] == timm[1]
                or cnn_benchmarks and row["framework"] == "Torch"
                or gpu_benchmark and row["optimizer"] == "none")


def _by_table(rows: list[dict]) -> dict[tuple, tuple]:
    """(batch per GPU, sequence length, throughput) of rows by (table's model, system, GPUs,
    precision)."""
    return {(r["model_as_published"], r["gpu_as_published"], r["num_gpus"], r["precision"]):
            (r["batch_per_gpu"], r["seq_len"], r["throughput"]) for r in rows}


# The twenty-sixth session's MLPerf ResNet-50 rows (2026-12-05): PCIe servers, the
# first A40, L4 and L40 figures; (GPU, log) -> (GPUs, batch a GPU, images/s, interconnect).
SESSION_26 = {
    ("A30", "Dell/results/DSS8440x8xA30-NVBRIDGE/resnet/result_0.txt@a6ae3e16"):
        ("8", "128", 10097, "PCIe"),
    ("A30", "Fujitsu/results/rx_A30x2_mxnet_NGC_22.04/resnet/result_0.txt@9b4d2df6"):
        ("2", "204", 3135, "NVLink"),
    ("A30", "xFusion/results/G5500V6x8xA30_mxnet_22.04/resnet/result_1.txt@9b4d2df6"):
        ("8", "150", 11300, "PCIe"),
    ("A30", "H3C/results/R5300G6x8A30-PCIE-24GB/resnet/result_1.txt@9f08e30c"):
        ("8", "204", 12867, "PCIe"),
    ("A30", "H3C/results/R5350G6x8A30-PCIE-24GB/resnet/result_1.txt@9f08e30c"):
        ("8", "204", 13112, "PCIe"),
    ("A30", "H3C/results/R5350G6x10A30-PCIE-24GB/resnet/result_1.txt@9f08e30c"):
        ("10", "204", 16333, "PCIe"),
    ("H100PCIe",
     "Supermicro/results/AS-4125GS-TNRT_8_H100-PCIe-80GB/resnet/result_0.txt@9f08e30c"):
        ("8", "400", 35699, "PCIe"),
    ("A100PCIe-80GB", "H3C/results/R5300G5x4A100-PCIE-80GB/resnet/result_1.txt@a6ae3e16"):
        ("4", "408", 12487, "PCIe"),
    ("A100PCIe-80GB", "Dell/results/DSS8440x10A100-PCIE-80GB/resnet/result_0.txt@f6f04435"):
        ("10", "408", 27647, "PCIe"),
    ("A100PCIe-80GB", "Dell/results/R750xax4A100-PCIE-80GB/resnet/result_0.txt@f6f04435"):
        ("4", "408", 11986, "PCIe"),
    ("A100PCIe-40GB",
     "Dell/results/DSS8440x8A100-PCIE-40GB-NVBridge/resnet/result_0.txt@f6f04435"):
        ("8", "408", 20284, "PCIe"),
    ("A100PCIe-40GB", "Dell/results/DSS8440x8A100-PCIE-40GB/resnet/result_0.txt@8200377f"):
        ("8", "408", 20764, "PCIe"),
    ("L4", "xFusion/results/2288H_V7x6xL4/resnet/result_1.txt@f33f9444"):
        ("6", "110", 4414, "PCIe"),
    ("A40", "IEI/results/nf5468m6_mxnet/resnet/result_1.txt@9f08e30c"):
        ("8", "408", 11304, "PCIe"),
    ("A40", "Inspur/results/nf5468m6j_mxnet/resnet/result_1.txt@9b4d2df6"):
        ("24", "136", 30594, "PCIe"),
    ("L40", "xFusion/results/G5500V7x8L40/resnet/result_1.txt@f33f9444"):
        ("8", "300", 16070, "PCIe"),
    ("L40", "xFusion/results/G5500V7x10L40/resnet/result_1.txt@f33f9444"):
        ("10", "300", 20003, "PCIe"),
    ("L40", "xFusion/results/G5500V7x8xL40/resnet/result_1.txt@f33f9444"):
        ("8", "300", 15986, "PCIe"),
    ("L40", "xFusion/results/G5500V7x10xL40/resnet/result_1.txt@f33f9444"):
        ("10", "300", 19897, "PCIe"),
}


def test_hand_checked_counts():
    # 30 rows carried from the reference (2026-11-21) + 170 transcribed on 2026-11-23 + 268 on
    # 2026-11-24 (TensorFlow ResNet-50; PyTorch and PaddlePaddle BERT pre-training, multi-node;
    # eight models the zoo has no card for; two MLPerf Training v1.0 ResNet-50 runs) + 36 ResNet-50
    # rows on 2026-11-25 (MXNet and PaddlePaddle READMEs; MLPerf v2.1-v4.0 runs on H100, H200,
    # L40S) + 95 ResNet-50/152 rows from TensorFlow's benchmarks page (K80, P100; 1-64 GPUs)
    # + 4 MLPerf ResNet-50 rows on 2026-11-25 (v2.0 NVIDIA and v3.0 H3C on 2x A30; v4.0 Lenovo
    # and Fujitsu on 8x L40S) + 1 MLPerf v3.1 CTuning ResNet-50 row on 2026-11-25 (2x A10G,
    # AWS g5.12xlarge) + 112 InceptionV3, VGG16 and AlexNet rows from TensorFlow's benchmarks
    # page on 2026-11-27 + 18 NCF rows (DLE's PyTorch NCF README, 21.04) on 2026-11-27
    # + 16 Transformer-big rows (DLE's README, 22.06: DGX-1, DGX-2, 4 GPUs DGX A100) on 2026-11-27
    # + 80 rows of DLE's TensorFlow READMEs on 2026-11-27 (ResNeXt101 and SE-ResNeXt101 20.06-tf1
    # with XLA, Transformer-XL base, NCF 20.07-tf1, TF2 EfficientNet-B0/B4; A100, V100)
    # + 32 Mask R-CNN rows (20.06, 21.12), 12 WaveGlow and 12 Tacotron 2 rows on 2026-11-28
    # + 16 BART-large pre-training rows (DLE's README, 22.08; 1-320 A100s, TF32 and BF16)
    # + 72 rows of DLE's TensorFlow 2 BERT README (21.02, XLA: pre-training on 1-32 DGX-2H and
    # DGX A100 nodes, SQuAD fine-tuning on DGX-1 and DGX A100) on 2026-11-28
    # + 40 rows of timm's RTX 3090 train benchmark (20 zoo models, NCHW and NHWC) on 2026-12-05
    # + 13 MLPerf ResNet-50 rows on 2026-12-05 (PCIe servers without NVLink bridges: A100 PCIe
    # 40 and 80 GB, H100 PCIe; a workstation's 2x RTX A5000) + 76 BERT-Base-shaped rows on
    # 2026-12-05 (ELECTRA-base SQuAD fine-tuning, DLE's TensorFlow 2 README, 20.06; BioBERT
    # pre-training on 1-64 DGX nodes and NER fine-tuning, DLE's TensorFlow BioBERT README, 19.08)
    # + 104 BERT-Large rows of DLE's TensorFlow 1 BERT README (20.06, and 19.08 multi-node on
    # DGX-2H: pre-training on DGX-1, DGX-2, DGX A100 40GB and 4-32 nodes, SQuAD fine-tuning)
    # + 4 GNMT v2 rows of DLE's TensorFlow GNMT README on 2026-12-05 (19.07, 1 and 8 V100s)
    # + 89 more rows of timm's RTX 3090 train benchmark (57 models the zoo gained, each whose
    # timm parameter count its card matches; ViT-H/14 has no NHWC line, and the 24 RegNets'
    # NHWC lines are left out: pytorch/pytorch#70954) and 19 MLPerf ResNet-50 rows (PCIe
    # servers: A30, A40, L4, L40, A100 PCIe, H100 PCIe) on 2026-12-05.
    # + 18 rows of DLE's Tacotron 2 README as it stood for the 19.06 and 19.12 containers
    # (Tacotron 2 and WaveGlow on 1-8 V100s) on 2026-12-07, and 202 rows of earlier and later
    # versions of five more READMEs, each a container of its own (Transformer and GNMT 20.06;
    # NCF 19.05 and 20.06, TensorFlow's NCF 19.03; Transformer-XL 19.09 and 19.11; SSD 19.08,
    # 20.06 and 21.05) on 2026-12-07; and 62 of the ConvNets READMEs' versions (ResNet-50's
    # V100 tables of 20.06, SE-ResNeXt101's 20.06 tables, ResNeXt101's 21.03 tables, the
    # EfficientNets' per-model 20.12 cells; SE-ResNeXt101's 16 GB AMP cells left out: their
    # batch, 128, is past what a 16 GB V100 holds, and later versions give 112) on 2026-12-07.
    # + 124 rows of three more READMEs' other containers on 2026-12-07: PyTorch BERT-Large's
    # 20.06 tables (76: pre-training and SQuAD on DGX A100 40GB, DGX-2, DGX-1 16 and 32 GB),
    # MXNet ResNet-50's 18.12 and 19.07 tables (24) and the TensorFlow ConvNets' 20.03 tables
    # without XLA (24: ResNet-50, ResNeXt101 and SE-ResNeXt101 on DGX-1 and DGX-2). Then 158:
    # TensorFlow 1 BERT-Large's 19.06 and 19.08 tables (130: pre-training and SQuAD on one
    # DGX-1 16 or 32 GB or DGX-2; the 19.08 DGX-1 multi-node table, whose batch column its own
    # out-of-memory note contradicts, left out), ELECTRA-base's 20.07 SQuAD tables (14),
    # PaddlePaddle BERT-Large's 22.08 tables (10: pre-training in TF32 and AMP, SQuAD in AMP)
    # and its ResNet-50 README of 23.09 or later (4).
    # + 48 rows of Justin Johnson's cnn-benchmarks on 2026-12-07 (Lua Torch, FP32, batch 16:
    # ResNet-18/34/50/101/152 and VGG-16 on a GTX 1080 Ti with cuDNN 5.1.10, a GTX 1080 and a
    # Pascal TITAN X with cuDNN 5.1.05 and 5.0.05, and a Maxwell GTX TITAN X with those and
    # 4.0.07), the first Torch, GeForce Pascal and Maxwell training figures.
    # + 90 rows of aisensiy/pytorch-gpu-benchmark on 2026-12-07 (PyTorch, FP32, batch 12,
    # forward and backward: nine torchvision models on ten runs, T4, TITAN V, RTX 2080,
    # GTX 1080 Ti, V100 SXM2 16 and 32 GB, V100 PCIe 32 GB, on five clouds' notebooks).
    rows = _shipped()
    assert len(rows) == 2021
    per_model = {}
    for r in rows:
        per_model[r["model"]] = per_model.get(r["model"], 0) + 1
    timm_only = ["resnet26", "resnet200", "resnext50_32x4d", "resnext101_32x8d",
                 "resnext101_64x4d", "se_resnext50_32x4d", "se_resnext101_32x8d", "vit_ti16",
                 "vit_s16", "vit_s32", "vit_b32", "vit_b8", "vit_l32", "vit_l14",
                 "mobilenet_v2_050", "mobilenet_v2_075", "mobilenet_v2_140", "convnext_small",
                 "convnext_base", "convnext_large", "convnext_xlarge", "efficientnet_b1",
                 "efficientnet_b2", "efficientnet_b3", "efficientnet_b5", "efficientnet_b6",
                 "efficientnet_b7", "densenet264", "swin_tiny", "swin_small", "swin_base",
                 "swin_large"]
    regnets = [f"regnet{kind}_{size}" for kind in "xy" for size in (
        "002", "004", "006", "008", "016", "032", "040", "064", "080", "120", "160", "320")]
    assert per_model == {**dict.fromkeys(timm_only, 2), **dict.fromkeys(regnets, 1), "vit_h14": 1,
                         "resnet50": 229, "resnet152": 47, "bert_large": 544, "transformer_big": 40,
                         "efficientnet_b0": 34, "efficientnet_b4": 34,
                         "efficientnet_widese_b0": 24, "efficientnet_widese_b4": 24,
                         "resnext101_32x4d": 50, "se_resnext101_32x4d": 48,
                         "transformer_xl_base": 102, "transformer_xl_large": 72, "gnmt_v2": 38,
                         "ssd300": 65, "nnunet_2d": 24, "nnunet_3d": 22, "dlrm": 2,
                         "mask_rcnn": 59, "inception_v3": 60, "vgg16": 52, "alexnet": 22,
                         "ncf": 74, "waveglow": 18, "tacotron2": 24, "bart_large": 16,
                         "resnet18": 20, "resnet34": 20, "resnet101": 10, "inception_v4": 2,
                         "densenet121": 12, "densenet161": 12, "densenet169": 12,
                         "densenet201": 12, "mobilenet_v2": 12, "convnext_tiny": 2,
                         "vit_b16": 2, "vit_l16": 2, "bert_base": 90}
    timm = {(r["model"], r["memory_format"]): (r["batch_per_gpu"], r["image_size"], r["throughput"])
            for r in rows if r["gpu"] == "RTX3090"}
    assert len(timm) == 129 and {r["precision"] for r in rows if r["gpu"] == "RTX3090"} == {"amp"}
    assert timm["resnet50", "nchw"] == ("512", "224", "826.06")
    assert timm["resnet50", "nhwc"] == ("512", "224", "1218.01")
    assert timm["efficientnet_b4", "nhwc"] == ("96", "320", "354.99")
    assert timm["vit_l16", "nchw"] == ("64", "224", "117.08")
    assert timm["vit_h14", "nchw"] == ("16", "224", "39.94")
    assert timm["efficientnet_b3", "nhwc"] == ("128", "288", "572.18")
    assert timm["convnext_xlarge", "nhwc"] == ("64", "224", "116.37")
    assert timm["regnety_040", "nchw"] == ("384", "224", "640.15")
    assert not any(model.startswith("regnet") and layout == "nhwc" for model, layout in timm)
    xfusion_v31 = sorted((r["gpu"], r["num_gpus"], r["batch_per_gpu"], r["throughput"])
                         for r in rows if r["source"].startswith(
                             "published: mlcommons/training_results_v3.1 xFusion/results/"))
    assert xfusion_v31 == [("L4", "6", "110", "4414"), ("L40", "10", "300", "19897"),
                           ("L40", "10", "300", "20003"), ("L40", "8", "300", "15986"),
                           ("L40", "8", "300", "16070")]
    base = _by_table([r for r in rows if r["model"] == "bert_base"
                      and not r["source"].endswith("ELECTRA/README.md@96e17009")])
    tf1 = _by_table([r for r in rows if r["source"].endswith(
        "TensorFlow/LanguageModeling/BERT/README.md@002bcd8c")])
    assert len(base) == 76 and len(tf1) == 104
    pinned = {  # (table's model, system, GPUs, precision): (batch, sequence, throughput)
        ("electra-base-squad-finetune", "DGX A100 (8x A100 40GB)", "8", "amp"):
            ("32", "384", "1960"),
        ("electra-base-squad-finetune", "DGX-1 (8x V100 16GB)", "1", "fp32"): ("8", "384", "35"),
        ("biobert-base-pretraining-phase2", "64 x DGX-2H (16x V100 32GB)", "1024", "fp32"):
            ("16", "512", "25245.96"),
        ("biobert-base-pretraining-phase1", "1 x DGX-1 (8x V100 16GB)", "8", "amp"):
            ("64", "128", "2762.06"),
        ("biobert-base-ner-bc5cdr-chem", "DGX-2 (16x V100 32G)", "16", "amp"):
            ("64", "128", "4268.81"),
        ("bert-large-pretraining-phase1", "DGX-1 (8x V100 32GB)", "8", "amp"):
            ("64", "128", "1443.05"),
        ("bert-large-pretraining-phase2", "32 x DGX A100 (8x A100 40GB)", "256", "tf32"):
            ("8", "512", "9463.8"),
        ("bert-large-squad-finetune", "DGX-2 (16x V100 32GB)", "16", "fp32"):
            ("10", "384", "156.29"),
    }
    assert {key: (base | tf1)[key] for key in pinned} == pinned
    assert {r["gpu"] for r in rows if r["model"] == "bert_base"} == {"A100-40GB", "V100"}
    bart = {(r["num_gpus"], r["seq_len"], r["precision"]): (r["batch_per_gpu"], r["throughput"])
            for r in rows if r["model"] == "bart_large"}
    cnn = {(r["model"], r["gpu"], r["software"].split(", ")[1]): r["throughput"]
           for r in rows if r["framework"] == "Torch"}
    assert len(cnn) == 48 and {r["batch_per_gpu"] for r in rows if r["framework"] == "Torch"} \
        == {"16"}
    assert cnn["resnet50", "GTX1080Ti", "cuDNN 5.1.10"] == "158.09"  # 16 / 101.21 ms
    assert cnn["vgg16", "GTX1080", "cuDNN 5.0.05"] == "68.54"  # 16 / 233.43 ms
    assert cnn["resnet50", "TitanXPascal", "cuDNN 5.1.05"] == "154.47"  # 16 / 103.58 ms
    assert cnn["vgg16", "GTXTitanX", "cuDNN 4.0.07"] == "47.24"  # 16 / 338.69 ms
    assert bart[("1", "128", "bf16")] == ("200", "326.53")
    assert bart[("320", "512", "tf32")] == ("16", "11636.36")
    assert {r["unit"] for r in rows if r["model"] == "bart_large"} == {"seq/s"}
    bert = [r for r in rows if r["model"] == "bert_large"]
    assert sum(r["model_as_published"] == "bert-large-pretraining-phase1" for r in bert) == 190
    assert sum(r["model_as_published"] == "bert-large-pretraining-phase2" for r in bert) == 192
    assert sum(r["model_as_published"] == "bert-large-squad-finetune" for r in bert) == 162
    (row,) = [r for r in bert if r["framework"] == "TensorFlow" and r["nodes"] == "32"
              and r["gpu"] == "A100-80GB" and r["precision"] == "amp" and r["seq_len"] == "128"]
    assert (row["num_gpus"], row["batch_per_gpu"], row["throughput"]) == ("256", "312",
                                                                         "110280.73")
    (row,) = [r for r in rows if r["model"] == "bert_large" and r["gpu_as_published"] ==
              "DGX-2 (16x V100 32G)" and r["num_gpus"] == "16" and r["precision"] == "amp"
              and r["seq_len"] == "128" and r["source"].endswith("@23a6382c")]
    assert float(row["throughput"]) == 2775.04 and row["batch_per_gpu"] == "64"
    (row,) = [r for r in rows if r["framework"] == "PaddlePaddle" and r["nodes"] == "32"
              and r["precision"] == "amp" and r["seq_len"] == "512"]
    assert (row["num_gpus"], row["batch_per_gpu"], float(row["throughput"])) == \
        ("256", "32", 60206)
    (row,) = [r for r in rows if r["framework"] == "TensorFlow" and r["num_gpus"] == "16"
              and r["precision"] == "fp32" and r["gpu"] == "V100" and r["model"] == "resnet50"
              and r["source"].endswith("@1d4211fe")]
    assert (row["gpu"], row["batch_per_gpu"], float(row["throughput"])) == ("V100", "128", 6500)
    added = [r for r in rows if r["as_of"] == "2026-11-25" and "tensorflow/" not in r["source"]]
    assert len(added) == 41 and {r["model"] for r in added} == {"resnet50"}
    assert sorted(r["gpu"] for r in added if "mlcommons" in r["source"]) == [
        "A10G", "A30", "A30", "H100-80GB", "H100-80GB", "H100-80GB", "H100-80GB", "H200", "L40S",
        "L40S", "L40S"]
    (row,) = [r for r in added if r["gpu"] == "H200"]
    assert (row["num_gpus"], row["batch_per_gpu"], float(row["throughput"])) == ("8", "400", 63601)
    a30 = {r["source"].split()[2].split("/")[0]: (r["num_gpus"], r["batch_per_gpu"],
                                                   float(r["throughput"]))
           for r in added if r["gpu"] == "A30"}
    assert a30 == {"NVIDIA": ("2", "204", 3202), "H3C": ("2", "204", 3285)}
    (row,) = [r for r in added if r["gpu"] == "A10G"]
    assert (row["num_gpus"], row["batch_per_gpu"], row["precision"], float(row["throughput"])) == \
        ("2", "204", "amp", 1875)
    assert "CTuning/results/a10x2-mxnet_22.08/resnet/result_0.txt@f33f9444" in row["source"]
    l40s = {r["source"].split()[2].split("/")[0]: (r["num_gpus"], r["batch_per_gpu"],
                                                    float(r["throughput"]))
            for r in added if r["gpu"] == "L40S"}
    assert l40s == {"Dell": ("4", "400", 8739), "Lenovo": ("8", "300", 14810),
                    "Fujitsu": ("8", "300", 14868)}
    pcie = {(r["gpu"], r["source"].split()[2]): (r["num_gpus"], r["batch_per_gpu"],
                                                  float(r["throughput"]), r["interconnect"])
            for r in rows if r["as_of"] == "2026-12-05" and "mlcommons" in r["source"]}
    assert pcie == SESSION_26 | {
        ("H100PCIe", "Dell/results/R760xax4H100-PCIE-80GB/resnet/result_0.txt@9f08e30c"):
            ("4", "816", 18912, "PCIe"),
        ("H100PCIe", "Supermicro/results/SYS-681E-TR/resnet/result_1.txt@f33f9444"):
            ("8", "400", 35186, "PCIe"),
        ("A100PCIe-80GB", "Dell/results/R750xax4A100-PCIE-80GB/resnet/result_0.txt@9f08e30c"):
            ("4", "408", 12957, "PCIe"),
        ("A100PCIe-80GB", "Supermicro/results/AS-4124GS-TNR_8_A100-PCIe-80GB-300W/resnet/"
                          "result_0.txt@9b4d2df6"): ("8", "408", 24545, "PCIe"),
        ("A100PCIe-80GB", "Dell/results/DSS8440x8A100-PCIE-80GB/resnet/result_0.txt@f6f04435"):
            ("8", "408", 22455, "PCIe"),
        ("A100PCIe-40GB", "Dell/results/DSS8440x8A100-PCIE-40GB/resnet/result_0.txt@f6f04435"):
            ("8", "408", 19430, "PCIe"),
        ("H100PCIe", "Dell/results/R750xax4H100-PCIE-80GB/resnet/result_0.txt@9f08e30c"):
            ("4", "816", 18092, "PCIe"),
        ("H100PCIe", "Lenovo/results/SR675v3-8xH100_PCIe_80GB_350W/resnet/result_1.txt@f33f9444"):
            ("8", "400", 33240, "PCIe"),
        ("A100PCIe-80GB", "H3C/results/R4900G5x1A100-PCIE-80GB/resnet/result_1.txt@a6ae3e16"):
            ("1", "1000", 2994, "PCIe"),
        ("A100PCIe-80GB", "H3C/results/R5300G5x8A100-PCIE-80GB/resnet/result_1.txt@a6ae3e16"):
            ("8", "408", 24761, "PCIe"),
        ("RTXA5000", "Krai/results/7920T_2xA5000/resnet/result_0.txt@a6ae3e16"):
            ("2", "204", 2645, "NVLink"),
        ("RTXA5000", "Krai/results/7920T_2xA5000_mxnet22.08/resnet/result_0.txt@f33f9444"):
            ("2", "204", 2347, "NVLink"),
        ("RTXA5000", "Krai/results/7920T_2xA5000_mxnet23.08/resnet/result_0.txt@f33f9444"):
            ("2", "236", 2769, "NVLink")}
    (row,) = [r for r in added if r["framework"] == "MXNet" and r["num_gpus"] == "16"
              and r["precision"] == "fp32"]
    assert (row["gpu"], row["batch_per_gpu"], float(row["throughput"])) == ("V100", "128", 6338)
    (row,) = [r for r in rows if r["model"] == "se_resnext101_32x4d" and r["framework"] ==
              "TensorFlow" and r["gpu_as_published"] == "DGX-2 (16x V100 32G)"
              and r["num_gpus"] == "16" and r["precision"] == "amp"
              and r["source"].endswith("@74e943ed")]
    assert (row["batch_per_gpu"], float(row["throughput"])) == ("96", 6580)
    tf_page = [r for r in rows if "tensorflow/docs_src" in r["source"]]
    # ResNet-50 and ResNet-152 (95); InceptionV3, VGG16 and AlexNet (112, 2026-11-27)
    assert len(tf_page) == 207 and {r["gpu"] for r in tf_page} == {"K80", "P100SXM2"}
    (row,) = [r for r in tf_page if r["gpu_as_published"].startswith("Google Compute Engine")
              and r["model"] == "resnet50" and r["num_gpus"] == "1" and r["batch_per_gpu"] == "64"
              and r["notes"].startswith("synthetic")]
    assert float(row["throughput"]) == 51.9


def test_multi_node_rows_are_imported_across_nodes(tmp_path):
    with Store(tmp_path / "m.db") as store:
        import_published(store)
        trials = store.rows("trials")
    multi = [t for t in trials if t["nodes"] > 1]
    # 2-32 DGX A100 nodes of 8 GPUs: PyTorch and PaddlePaddle BERT pre-training, 20 each;
    # 2-8 DGX-2H nodes of 16 V100s: Transformer-XL large, 6 (20.06) and 6 (19.11).
    # and MLPerf's 8-node ResNet-50 run.
    # and TensorFlow's 2-8 p2.8xlarge instances of 8 K80s at 10 Gb/s, 9 (ResNet) + 6
    # (InceptionV3); BART pre-training on 20 and 40 DGX A100 nodes, 8; TensorFlow 2 BERT on
    # 2-32 DGX A100 nodes, 12, and on 4-32 DGX-2H nodes, 12; BioBERT pre-training on 4-32
    # DGX-1 nodes of 8 V100s at 400 Gb/s, 12, and on 4-64 DGX-2H nodes, 16; TensorFlow 1 BERT on
    # 4-32 DGX-2H nodes, 12, and on 4-32 DGX A100 40GB nodes, 12.
    dgx_a100 = [t for t in multi if t["gpu_type"] == "A100-80GB"]
    assert len(dgx_a100) == 61 and len(multi) == 152
    assert {t["gpus_per_node"] for t in dgx_a100} == {8}
    assert {t["nodes"] for t in dgx_a100} == {2, 4, 8, 16, 20, 32, 40}
    (mlperf,) = [t for t in dgx_a100 if t["model"] == "resnet50"]
    assert (mlperf["nodes"], mlperf["batch_per_gpu"], mlperf["throughput"]) == (8, 204, 198704)
    assert all(t["extra"]["network_gbps"] == 1600 for t in dgx_a100)
    assert {(t["gpu_type"], t["gpus_per_node"], t["extra"]["network_gbps"]) for t in multi
            if t not in dgx_a100} == {("V100", 16, 800), ("V100", 8, 400), ("K80", 8, 10),
                                       ("A100-40GB", 8, 1600)}
    bad = tmp_path / "figures.csv"
    rows = SHIPPED.read_text().splitlines()
    (line,) = [r for r in rows if "32 x DGX A100" in r and "PaddlePaddle" in r
               and ",amp,32," in r]
    bad.write_text("\n".join([rows[0], line.replace(",32,1600", ",3,1600")]))
    with pytest.raises(ImportDataError, match="not a whole number of GPUs on each of 3 nodes"):
        load_published(bad)


def test_every_image_row_has_its_batch_and_image_size():
    # The ConvNets READMEs do not state them; configs.yml (the launch.py config that their
    # training scripts and benchmark commands use) does, per arch, platform and precision.
    # nnU-Net (192x160 slices, 128^3 volumes) has no single square size: its notes name the
    # data. Mask R-CNN's COCO images of varying size are given by their short side (800).
    images = [r for r in _shipped() if r["unit"] == "img/s"
              and r["model"] not in ("nnunet_2d", "nnunet_3d")]
    assert images and all(r["batch_per_gpu"] and r["image_size"] for r in images)
    assert all(r["batch_per_gpu"] for r in _shipped() if r["in_zoo"] == "1")
    from_config = [r for r in images if "configs.yml@" in r["source"]]
    assert len(from_config) == 132
    assert all("configs.yml models." in r["notes"] for r in from_config)

    def one(model, gpu, n, precision, software="pytorch-21.03 container"):
        (row,) = [r for r in images if (r["model"], r["gpu_as_published"], r["num_gpus"],
                                        r["precision"], r["software"]) ==
                  (model, gpu, n, precision, software)]
        return int(row["batch_per_gpu"]), int(row["image_size"]), float(row["throughput"])

    assert one("efficientnet_b0", "DGX A100 (8x A100 80GB)", "8", "amp") == (256, 224, 16652)
    assert one("efficientnet_b0", "DGX-1 (8x V100 16GB)", "1", "fp32") == (64, 224, 655)
    assert one("efficientnet_b0", "DGX-1 (8x V100 32GB)", "8", "amp") == (256, 224, 8615)
    assert one("efficientnet_b4", "DGX A100 (8x A100 80GB)", "8", "tf32") == (64, 380, 1223)
    assert one("efficientnet_widese_b4", "DGX-1 (8x V100 16GB)", "8", "fp32") == (16, 380, 612)
    assert one("se_resnext101_32x4d", "DGX-1 16GB (8x V100 16GB)", "8", "amp") == (112, 224, 2971)
    assert one("resnet50", "DGX-1 16G (8x V100 16GB)", "8", "fp32",
               "pytorch-20.12 container") == (112, 224, 2851)


def test_no_two_rows_share_a_trial_key():
    from advisor.importers.published import trial_key

    keys = [trial_key(r) for r in _shipped()]
    assert len(set(keys)) == len(keys)


def test_names_match_the_zoo_and_the_catalog():
    from profiler.zoo import resolve

    for row in _shipped():
        assert gpu_spec(row["gpu"]).gpu == row["gpu"]
        if row["in_zoo"] == "1":
            assert resolve(row["model"]).name == row["model"]
    assert {r["model"] for r in _shipped() if r["in_zoo"] == "0"} == {
        "nnunet_2d", "nnunet_3d", "dlrm"}
    # Transformer-XL's tok/s become segments/s: one sequence is one segment of tgt_len tokens
    for r in _shipped():
        if r["model"].startswith("transformer_xl"):
            assert r["seq_len"] == {"transformer_xl_base": "192",
                                    "transformer_xl_large": "384"}[r["model"]]
        if r["model"] == "gnmt_v2":  # tokens a sentence pair adds to DLE's tok/s, per code
            assert r["seq_len"] == {"PyTorch": "49", "TensorFlow": "48"}[r["framework"]]
            assert "tokens a sentence pair" in r["notes"]
        if r["model"] == "transformer_big":  # target tokens a pair adds to DLE's tok/s
            assert r["seq_len"] == "31" and "tokens a sentence pair" in r["notes"]
            assert int(r["batch_per_gpu"]) == round(int(r["tokens_per_gpu_batch"]) / 35.25)
    assert {r["precision"] for r in _shipped()} == {"fp32", "tf32", "amp", "bf16"}
    for r in _shipped():
        assert r["precision"] != "tf32" or r["gpu"].startswith("A100")
        assert r["precision"] != "fp32" or not gpu_spec(r["gpu"]).tf32  # V100, P100, K80
    bert = [r for r in _shipped() if r["model"] == "bert_large"]
    for r in bert:
        if r["model_as_published"] == "bert-large-squad-finetune":
            assert r["seq_len"] == "384" and "fine-tuning" in r["notes"]
        else:
            phase = {"128": "phase 1", "512": "phase 2"}[r["seq_len"]]
            assert r["model_as_published"].endswith(phase.replace(" ", "")) and phase in r["notes"]


def test_import_marks_rows_published_and_is_idempotent(tmp_path):
    with Store(tmp_path / "m.db") as store:
        first = import_published(store)
        assert first.rows == {"trials": len(_shipped())}
        again = import_published(store)
        assert again.already_imported
        trials = store.rows("trials")
        assert len(trials) == len(_shipped())
        assert {t["source"] for t in trials} == {"published"}
        (a100,) = [t for t in trials if t["model"] == "resnet50" and t["gpu_type"] == "A100-80GB"
                   and t["gpus_per_node"] == 8 and t["precision"] == "amp"
                   and t["batch_per_gpu"] == 256
                   and t["software"]["container"] == "pytorch-21.03 container"]
        assert a100["throughput"] == 16621 and a100["batch_per_gpu"] == 256
        assert a100["nodes"] == 1 and a100["extra"]["unit"] == "img/s"
        assert len({t["trial_key"] for t in trials}) == len(trials)
        big = [t for t in trials if t["model"] == "transformer_big"]
        assert len(big) == 40 and all(t["extra"]["unit"] == "tok/s" and t["seq_len"] == 31
                                      for t in big)
        (a100,) = [t for t in big if t["gpu_type"] == "A100-40GB" and t["gpus_per_node"] == 8
                   and t["precision"] == "amp"  # sentence pairs a second: tok/s over 31
                   and t["software"]["container"] == "pytorch-22.06 container"]
        assert a100["batch_per_gpu"] == 290 and a100["extra"]["tokens_per_gpu_batch"] == 10240
        assert a100["throughput"] == pytest.approx(551599 / 31)
        assert a100["extra"]["throughput_as_published"] == 551599


def test_bad_published_file(tmp_path):
    bad = tmp_path / "figures.csv"
    bad.write_text("model,gpu\nresnet50,A100\n")
    with pytest.raises(ImportDataError, match="lacks columns num_gpus, precision, batch_per_gpu"
                                              ", throughput, unit; a table needs model, gpu"):
        load_published(bad)
    rows = SHIPPED.read_text().splitlines()
    bad.write_text("\n".join([rows[0], rows[1].replace(",A100-80GB,A100-80GB,", ",Z9,Z9,")]))
    with pytest.raises(ImportDataError, match="line 2: unknown GPU 'Z9'; known: .*; a GPU of "
                                              "your own needs its datasheet row in .*gpus.csv"):
        load_published(bad)


def test_a_gpu_of_ones_own_is_read_from_the_users_gpus_csv(tmp_path, monkeypatch):
    from cloud.gpus import gpu_specs

    monkeypatch.setenv("GPUADVISOR_HOME", str(tmp_path))
    shipped_gpus = data.shipped("gpus.csv").read_text().splitlines()
    a100 = next(line for line in shipped_gpus if line.startswith("A100-80GB,"))
    (tmp_path / "gpus.csv").write_text("\n".join([*shipped_gpus, "Z9" + a100[9:]]) + "\n")
    figures = tmp_path / "figures.csv"
    rows = SHIPPED.read_text().splitlines()
    figures.write_text("\n".join([rows[0], rows[1].replace(",A100-80GB,A100-80GB,", ",Z9,Z9,")]))
    gpu_specs.cache_clear()
    try:
        [trial] = load_published(figures)
    finally:
        gpu_specs.cache_clear()
    assert trial["gpu_type"] == "Z9"


def test_each_row_is_matched_to_the_card_at_its_own_input_size():
    """SQuAD fine-tuning at 384 tokens and pre-training phase 2 at 512 are priced with the
    cards at those lengths, not with the 128-token card scaled by the token count."""
    from advisor.features import model_features, trial_features

    trials = load_published()
    whole_head = ("pytorch-19.07", "pytorch-20.06")  # the code that ran the head everywhere
    bert = {t["seq_len"]: t for t in trials if t["model"] == "bert_large"
            and t["software"]["container"].startswith(whole_head)}
    assert {s: t["extra"]["card"] for s, t in bert.items()} == {
        128: "bert_large", 384: "bert_large@384", 512: "bert_large@512"}
    # LDDL-binned phase 2 pads each batch to its longest sequence: its rows are the workload
    # at their mean padded length, with the published maximum kept.
    binned = [t for t in trials if "sequence binning" in t["software"]["container"]]
    assert binned and {t["seq_len"] for t in binned} == {288}
    assert {t["extra"]["max_seq_len"] for t in binned} == {512}
    assert "max_seq_len" not in bert[512]["extra"]
    assert all(t["extra"]["card"] is None for t in trials if not t["extra"]["in_zoo"])
    models = model_features()
    features, kept, _ = trial_features([bert[384], bert[128]], models)
    assert features["model"].tolist() == ["bert_large", "bert_large"]  # one model, two cards
    assert features["flops_per_sample"].tolist() == [
        models["bert_large@384"]["flops_per_sample"], models["bert_large"]["flops_per_sample"]]


def test_pre_training_code_that_gathers_the_masked_positions_is_priced_with_a_gathered_head():
    # TensorFlow's BERT code pads each sequence's predictions to max_predictions_per_seq (20 at
    # 128 tokens, 80 at 512) and gathers them; NVIDIA's PyTorch code from 21.11 and its
    # PaddlePaddle code gather the masked positions (15% of the tokens); earlier PyTorch code
    # and SQuAD fine-tuning run their heads on every position.
    cards = {t["extra"]["card"] for t in load_published() if t["model"] == "bert_large"
             and t["software"]["container"].startswith(("tensorflow-20.06", "pytorch-21.11"))}
    assert cards == {"bert_large+head20", "bert_large@512+head80", "bert_large+head19",
                     "bert_large@288+head43", "bert_large@384"}
    shipped = load_cards()
    row = {**_shipped()[0], "model": "bert_large", "seq_len": "512", "head_positions": "80"}
    assert matched_card(row, shipped) == "bert_large@512+head80"
    # a card nobody traced leaves the row on its size's card
    assert matched_card({**row, "head_positions": "7"}, shipped) == "bert_large@512"
    assert matched_card({**row, "head_positions": ""}, shipped) == "bert_large@512"
    with pytest.raises(ValueError, match="head_positions is 'many', expected a whole number"):
        matched_card({**row, "head_positions": "many"}, shipped)


def test_binned_bert_phase_2_rows_are_a_stack_of_their_own():
    # The 21.11 PyTorch and 22.12 PaddlePaddle BERT READMEs ran phase 2 on LDDL-binned
    # sequences (their changelogs), the 19.07 one and TensorFlow 2's 21.02 (fixed-length
    # TFRecords, as BERT's create_pretraining_data.py writes them) on padded ones: a stack apart,
    # so the padded seq-512 card's efficiencies are not fitted to rows that did less work per
    # sequence.
    phase_2 = [r for r in _shipped() if r["model"] == "bert_large" and float(r["seq_len"]) == 512]
    binned = {r["software"] for r in phase_2 if "LDDL sequence binning" in r["software"]}
    suffix = " container with LDDL sequence binning (phase 2, bin size 64)"
    assert binned == {"pytorch-21.11" + suffix, "paddlepaddle-22.12" + suffix}
    assert {r["software"] for r in phase_2} - binned == {
        "pytorch-19.07 container", "pytorch-20.06 container", "paddlepaddle-22.08 container",
        "tensorflow-21.02-tf2 container with XLA", "tensorflow-19.06 container, Horovod, XLA",
        "tensorflow-19.08 container, Horovod, XLA", "tensorflow-20.06 container, Horovod, XLA",
        "tensorflow-19.08 container, Horovod, XLA (run.sub)"}
    assert len(phase_2) == 192 and sum(r["software"] in binned for r in phase_2) == 34


@pytest.mark.parametrize("column, value, message", [
    ("mean_seq_len", "600", "mean_seq_len 600 needs a seq_len of at least 600"),
    ("mean_seq_len", "abc", "mean_seq_len is 'abc', expected a whole number"),
    ("batch_per_gpu", "2.5x", "batch_per_gpu is '2.5x', expected a whole number"),
    ("throughput", "fast", "throughput is 'fast', expected a positive number"),
    ("unit", "it/s", "unit is 'it/s', expected one of img/s, images/s, samples/s, seq/s"),
    ("memory_format", "NDHWC", "memory_format is 'ndhwc', expected nhwc (channels-last), nchw"),
    ("interconnect", "InfiniBand", "interconnect is 'InfiniBand', expected PCIe (no GPU-to-GPU"),
    ("sharded", "fsdp", "sharded is 'fsdp', expected 1 or 0 (yes or no)"),
    ("precision", "int8", "precision 'int8' is not known; use one of fp32, tf32, amp, bf16 or"),
])
def test_a_bad_cell_is_named_by_its_column(tmp_path, column, value, message):
    rows = list(csv.DictReader(SHIPPED.open(newline="")))
    row = next(r for r in rows if "sequence binning" in r["software"]) | {column: value}
    figures = tmp_path / "figures.csv"
    with figures.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(row))
        writer.writeheader()
        writer.writerow(row)
    with pytest.raises(ImportDataError, match=f"line 2: {re.escape(message)}"):
        load_published(figures)


def test_a_recipes_memory_format_reaches_the_features():
    """Mask R-CNN's README added native NHWC in May 2022 (21.12): its 19.02 and 20.06 figures
    ran NCHW, as ResNet-50's 20.06 ones, the ConvNets' later TF32 and FP32 ones and Tacotron 2
    and WaveGlow's 1-D convolutions do; a row without the column is a tuned recipe's
    channels-last."""
    from advisor.features import LAYOUT_KEY, model_features, trial_features

    rows = _shipped()
    mask = [r for r in rows if r["model"] == "mask_rcnn" and r["precision"] == "amp"]
    formats = {r["software"]: r["memory_format"] for r in mask}
    assert formats == {"pytorch-19.02 container": "nchw", "pytorch-20.06 container": "nchw",
                       "pytorch-21.12 container": "nhwc"}
    assert {r["memory_format"] for r in rows if r["model"] in ("tacotron2", "waveglow")} == {
        "nchw"}
    # ResNet-50's 20.06 README was still "working on adding NHWC" for mixed precision
    resnet_2006 = [r for r in rows if r["model"] == "resnet50"
                   and r["software"] == "pytorch-20.06 container"]
    assert len(resnet_2006) == 12 and {r["memory_format"] for r in resnet_2006} == {"nchw"}
    # the ConvNets' configs.yml sets nhwc for AMP alone; main.py defaults to nchw
    later = [r for r in rows if "PyTorch/Classification/ConvNets" in r["source"]
             and r["software"] in ("pytorch-20.12 container", "pytorch-21.03 container")]
    assert {(r["precision"], r["memory_format"]) for r in later} == {
        ("amp", ""), ("tf32", "nchw"), ("fp32", "nchw")}
    resnet = next(r for r in rows if r["model"] == "resnet50" and r["precision"] == "amp")
    assert resnet["memory_format"] == ""
    trials = [trial_row(row) for row in (mask[0], resnet, {**resnet, "memory_format": "NCHW"})]
    assert [t["extra"].get(LAYOUT_KEY) for t in trials] == [False, None, False]
    features, _, _ = trial_features(trials, model_features())
    assert features[LAYOUT_KEY].tolist() == [0.0, 1.0, 0.0]


def test_a_benchmarks_own_optimizer_reaches_the_features():
    """timm's benchmark steps SGD whatever the model's recipe (`--opt` defaults to sgd): its
    rows say so, and a ViT's are priced with SGD's state where the recipe's AdamW keeps twice
    it; a row without the column gets the recipe's, an unknown name is refused."""
    from advisor.features import model_features, trial_features

    rows = _shipped()
    timm = [r for r in rows if "pytorch-image-models" in r["source"]]
    assert len(timm) == 129 and {r["optimizer"] for r in timm} == {"sgd"}
    assert {r["optimizer"] for r in rows if r not in timm} == {"", "lamb", "bertadam", "none"}
    vit = next(r for r in timm if r["model"] == "vit_b16")
    trials = [trial_row(vit), trial_row({**vit, "optimizer": ""})]
    assert [t["extra"].get("optimizer") for t in trials] == ["sgd", None]
    features, _, _ = trial_features(trials, model_features())
    assert features["optimizer_update_bytes"].tolist() == [20.0, 28.0]
    with pytest.raises(ValueError, match="optimizer is 'adagrad', expected one of sgd"):
        trial_row({**vit, "optimizer": "Adagrad"})


def test_a_forward_and_backward_benchmark_says_it_stepped_no_optimizer():
    """cnn-benchmarks and pytorch-gpu-benchmark time forward and backward alone (`optimizer`
    none): their trials say so, their features price no update, and none of their figures
    answers a training query."""
    from advisor.features import model_features, trial_features
    from advisor.fitting import throughput_data

    rows = _shipped()
    timed = [r for r in rows if r["optimizer"] == "none"]
    assert {r["source"].split("@")[0] for r in timed} == {
        "published: jcjohnson/cnn-benchmarks README.md",
        "published: aisensiy/pytorch-gpu-benchmark benchmark_models.py"}
    trial = trial_row(timed[0])
    assert trial["extra"] == {**trial["extra"], "forward_backward_only": True}
    assert "optimizer" not in trial["extra"]
    # one rule for the importer and the reference points' script, in any case and spacing
    assert trial_row({**timed[0], "optimizer": " None "})["extra"] == trial["extra"]
    assert times_forward_backward_only({"optimizer": " None "})
    assert not times_forward_backward_only({"optimizer": "sgd"})
    assert not times_forward_backward_only({})
    features, _, _ = trial_features([trial, trial_row({**timed[0], "optimizer": ""})],
                                    model_features())
    assert features["forward_backward_only"].tolist() == [1.0, 0.0]
    with Store(":memory:") as store:
        store.add_trial(trial)
        figure = 0.9 * float(timed[0]["throughput"])  # a training step takes longer
        store.add_trial(trial_row({**timed[0], "optimizer": "", "software": "a training run",
                                   "throughput": str(figure)}))
        features, _, measured, _ = throughput_data(store)
    # one configuration measured by two stacks: the training one alone answers it
    assert len(features["model"]) == 2 and len(measured) == 1
    assert list(measured.values())[0][0] == pytest.approx(figure)


def test_each_pytorch_gpu_benchmark_row_is_its_runs_mean_step():
    """12 images over the mean of a run's 50 timed steps (ms), hand-checked against the
    files; one stack a notebook image (its CUDA and cuDNN), whatever the GPU."""
    rows = [r for r in _shipped() if "aisensiy/pytorch-gpu-benchmark" in r["source"]]
    assert len(rows) == 90 and {r["batch_per_gpu"] for r in rows} == {"12"}
    assert {r["gpu"] for r in rows} == {"T4", "TitanV", "RTX2080", "GTX1080Ti", "V100",
                                        "V100-32GB", "V100PCIe-32GB"}
    figure = {(r["gpu"], r["model"], r["software"].split("), ")[-1]): r["throughput"]
              for r in rows}
    assert figure["T4", "resnet50", "OpenBayes notebook"] == "105.89"  # 113.3224 ms
    assert figure["RTX2080", "vgg16", "OpenBayes notebook"] == "111.32"  # 107.801 ms
    assert figure["V100PCIe-32GB", "densenet121", "Huawei Cloud ModelArts notebook"] == "158.12"
    assert len({r["software"] for r in rows}) == 5


def test_nvidias_pre_training_rows_step_lamb():
    """NVIDIA's BERT, BioBERT and BART pre-training and its Transformer-XL language models
    step LAMB (their scripts and configs, cited in datasets/README.md); their SQuAD and NER
    fine-tuning rows the recipe's Adam. A LAMB row's update makes six passes more than Adam's
    (52 bytes a parameter against 28)."""
    from advisor.features import model_features, trial_features

    rows = _shipped()
    lamb = [r for r in rows if r["optimizer"] == "lamb"]
    assert {r["model"] for r in lamb} == {"bert_large", "bert_base", "bart_large",
                                          "transformer_xl_base", "transformer_xl_large"}
    assert all("pre-training" in r["notes"] or "Transformer-XL" in r["source"] for r in lamb)
    tuning = [r for r in rows if "fine-tuning" in r["notes"] and "BERT" in r["source"]]
    assert len(tuning) > 80 and {r["optimizer"] for r in tuning} == {"", "bertadam"}
    pre = next(r for r in lamb if r["model"] == "bert_large")
    features, _, _ = trial_features([trial_row(pre), trial_row({**pre, "optimizer": ""})],
                                    model_features())
    assert features["optimizer_update_bytes"].tolist() == [52.0, 28.0]


def test_nvidias_pytorch_squad_rows_without_amp_step_bertadam():
    """NVIDIA's PyTorch run_squad.py steps apex's FusedAdam under AMP and its own BertAdam
    otherwise, a Python loop over the parameters (31 fp32 passes a parameter, 124 bytes), in
    2019, in 2020 and still in the 21.11 release: those FP32 and TF32 rows say so, the AMP rows keep
    the recipe's fused Adam."""
    from advisor.features import model_features, trial_features

    rows = _shipped()
    bertadam = [r for r in rows if r["optimizer"] == "bertadam"]
    assert len(bertadam) == 27
    squad = "container, run_squad.py (SQuAD fine-tuning script)"
    assert {(r["software"], r["precision"]) for r in bertadam} == {
        (f"pytorch-19.07 {squad}", "fp32"), (f"pytorch-20.06 {squad}", "fp32"),
        (f"pytorch-20.06 {squad}", "tf32"), (f"pytorch-21.11 {squad}", "fp32"),
        (f"pytorch-21.11 {squad}", "tf32")}
    amp = [r for r in rows if r["software"] == bertadam[0]["software"]
           and r["precision"] == "amp"]
    assert amp and {r["optimizer"] for r in amp} == {""}
    features, _, _ = trial_features([trial_row(bertadam[0]), trial_row(amp[0])],
                                    model_features())
    assert features["optimizer_update_bytes"].tolist() == [124.0, 28.0]


def test_the_tacotron2_readmes_containers_are_three_stacks_of_one_code_base():
    """NVIDIA's Tacotron 2 README measured its two models again as its containers moved
    (19.06, 19.12, 20.06): each container's rows are a stack of their own and all share the
    code base, so a container held out still gets what the others share. The 19.12 README
    repeats 19.06's WaveGlow table under its own container; it is taken once, as 19.06's."""
    from advisor.artifact import code_label
    from advisor.fitting import software_label

    rows = [r for r in _shipped() if "SpeechSynthesis/Tacotron2" in r["source"]]
    stacks = {software_label(trial_row(r)) for r in rows}
    assert {r["software"] for r in rows} == {
        "pytorch-19.06 container", "pytorch-19.12 container", "pytorch-20.06 container"}
    assert len(stacks) == 3 and len({code_label(s) for s in stacks}) == 1
    by_container = {}
    for r in rows:
        by_container.setdefault((r["software"], r["model"]), []).append(r)
    assert {key: len(group) for key, group in by_container.items()} == {
        ("pytorch-19.06 container", "tacotron2"): 6, ("pytorch-19.06 container", "waveglow"): 6,
        ("pytorch-19.12 container", "tacotron2"): 6, ("pytorch-20.06 container", "tacotron2"): 12,
        ("pytorch-20.06 container", "waveglow"): 12}
    older = {(r["precision"], r["batch_per_gpu"], r["num_gpus"]): r["throughput"]
             for r in by_container["pytorch-19.06 container", "tacotron2"]}
    assert older["amp", "128", "1"] == "20992" and older["fp32", "64", "8"] == "88719"
    assert {r["source"].rsplit("@", 1)[1] for r in by_container[
        "pytorch-19.12 container", "tacotron2"]} == {"5e3b487b"}


def test_older_readmes_of_fusing_and_compiling_code_are_priced_as_their_code_ran():
    """MXNet's ResNet-50 runner fused each batch norm's ReLU and residual add in float16 in
    its 18.12 and 19.07 versions as in 20.12, and not in float32: each container is a stack
    of the one code base, its AMP rows priced with the fused card. The TensorFlow ConvNets'
    20.03 tables give figures without XLA beside the "XLA Enabled" one: only those, run
    eagerly, are taken. TensorFlow 1 BERT's 19.06 and 19.08 tables ran XLA, as its 20.06 ones
    did (the scripts' `use_xla` defaults to true), each container a stack of one code base."""
    from advisor.artifact import code_label
    from advisor.fitting import software_label

    rows, shipped = _shipped(), load_cards()
    mxnet = [r for r in rows if "MxNet/Classification/RN50v1.5" in r["source"]]
    assert {r["software"] for r in mxnet} == {
        "mxnet-18.12 container", "mxnet-19.07 container", "mxnet-20.12 container"}
    stacks = {software_label(trial_row(r)) for r in mxnet}
    assert len(stacks) == 3 and len({code_label(s) for s in stacks}) == 1
    cards = {(r["software"], r["precision"], matched_card(r, shipped)) for r in mxnet
             if r["software"] != "mxnet-20.12 container"}
    assert cards == {(f"mxnet-{tag} container", precision, card) for tag in ("18.12", "19.07")
                     for precision, card in (("amp", "resnet50+fused_norm"),
                                             ("fp32", "resnet50"))}
    older = {(r["gpu_as_published"], r["num_gpus"], r["precision"]): r["throughput"]
             for r in mxnet if r["software"] == "mxnet-18.12 container"}
    assert older["DGX-1 (V100 16G)", "8", "amp"] == "10263.2"
    eager = [r for r in rows if r["software"] == "tensorflow-20.03-tf1 container"]
    assert len(eager) == 24 and {r["xla"] for r in eager} == {""}
    assert {r["model"] for r in eager} == {"resnet50", "resnext101_32x4d",
                                           "se_resnext101_32x4d"}
    assert all("XLA off" in r["notes"] for r in eager)
    tf1 = [r for r in rows if "TensorFlow/LanguageModeling/BERT/README.md" in r["source"]]
    assert {r["software"].split(",")[0] for r in tf1} == {
        f"tensorflow-{tag} container" for tag in ("19.06", "19.08", "20.06")}
    assert {r["xla"] for r in tf1} == {"1"}
    assert len({code_label(software_label(trial_row(r))) for r in tf1}) == 1


def test_another_benchmarks_table_needs_only_its_configurations_and_figures(tmp_path):
    """A table with the required columns alone imports: its names as published are the names
    it gives, its input sizes the cards', the table itself its software stack and citation."""
    import datetime

    table = tmp_path / "their-bench.csv"
    table.write_text("model,gpu,num_gpus,precision,batch_per_gpu,throughput,unit,notes\n"
                     "ResNet-50,3090,1,fp16,256,1100,images/sec,\n"
                     "bert-large-uncased,A100 80GB PCIe,8,FP32,32,400,seq/s,SQuAD\n"
                     "CycleGAN,V100,1,mixed,1,5,img/s,\n")
    resnet, bert, gan = load_published(table)
    # a training table's fp16 is mixed precision
    assert [t["precision"] for t in (resnet, bert, gan)] == ["amp", "fp32", "amp"]
    assert [t["gpu_type"] for t in (resnet, bert)] == ["RTX3090", "A100PCIe-80GB"]
    assert [t["extra"]["card"] for t in (resnet, bert, gan)] == ["resnet50", "bert_large", None]
    assert [t["extra"]["in_zoo"] for t in (resnet, bert, gan)] == [True, True, False]
    assert resnet["extra"]["model_as_published"] == "ResNet-50"
    assert bert["extra"]["gpu_as_published"] == "A100 80GB PCIe"
    assert bert["extra"]["notes"] == "SQuAD"
    assert resnet["software"] == {"container": "their-bench", "framework": ""}
    assert resnet["extra"]["citation"] == "published: their-bench.csv"
    assert resnet["recorded_at"] == datetime.date.today().isoformat()
    assert resnet["image_size"] is None and bert["seq_len"] is None


def test_an_llm_tables_layout_reaches_the_features(tmp_path):
    """An LLM table's FSDP runs with activation checkpointing say so in the optional layout
    columns; the same configuration without them is plain DDP, and another trial."""
    from advisor.features import model_features, trial_features

    table = tmp_path / "llm.csv"
    table.write_text("model,gpu,num_gpus,precision,batch_per_gpu,seq_len,throughput,unit,"
                     "sharded,checkpointing,accumulation\n"
                     "llama_8b,H100,8,bf16,1,8192,7000,tokens/s,yes,1,4\n"
                     "llama_8b,H100,8,bf16,1,8192,7000,tokens/s,,,\n")
    fsdp, plain = load_published(table)
    assert {k: fsdp["extra"][k] for k in ("sharded", "checkpointing", "accumulation")} == {
        "sharded": True, "checkpointing": True, "accumulation": 4}
    assert not {"sharded", "checkpointing", "accumulation"} & set(plain["extra"])
    assert fsdp["trial_key"] != plain["trial_key"]
    features, _, _ = trial_features([fsdp, plain], model_features())
    assert features["sharded"].tolist() == [1.0, 0.0]
    assert features["checkpointing"].tolist() == [1.0, 0.0]
    assert features["accumulation"].tolist() == [4.0, 1.0]


def test_nvidias_bert_pretraining_rows_carry_their_accumulation():
    """NVIDIA's BERT-Large pre-training tables give each row's accumulation steps (TensorFlow 1
    and 2) or its accumulated batch a GPU (PyTorch 21.11, PaddlePaddle 22.12): the shipped
    rows say them, and the all-reduce is priced once per optimizer step. PyTorch 19.07's
    tables and TensorFlow 1's of 19.06 say neither."""
    from advisor.features import model_features, trial_features
    from advisor.sharding import communication_scale

    rows = _shipped()
    pre = [r for r in rows if r["model_as_published"].startswith("bert-large-pretraining")
           and "@23a6382c" not in r["source"] and "@4c385522" not in r["source"]]
    assert len(pre) == 302 and all(int(r["accumulation"]) >= 1 for r in pre)
    assert not any(r["accumulation"] for r in rows if r not in pre)
    (paddle,) = [r for r in pre if r["gpu_as_published"] == "32 x DGX A100 (8x A100 80GB)"
                 and r["framework"] == "PaddlePaddle" and r["precision"] == "amp"
                 and r["seq_len"] == "128"]
    assert (paddle["batch_per_gpu"], paddle["accumulation"]) == ("256", "1")  # 8192 / 32 / 256
    (row,) = [r for r in pre if r["gpu_as_published"] == "32 x DGX-2H (16x V100 32GB)"
              and r["precision"] == "fp32" and r["seq_len"] == "128" and "19.08" in r["software"]]
    assert row["accumulation"] == "4"
    trial = trial_row(row)
    assert trial["extra"]["accumulation"] == 4
    features, _, _ = trial_features([trial], model_features())
    assert communication_scale(features, 1).tolist() == [0.25]


def test_a_servers_pcie_link_reaches_the_features():
    """A100 and H100 PCIe cards have NVLink bridges on the datasheet, but MLPerf's PCIe servers
    ran without them: their rows say PCIe, and the all-reduce inside the node is priced on the
    GPUs' PCIe links, as is a row without the column (a PCIe card's bridge is optional); a
    row that says NVLink gets the bridge's."""
    from advisor.features import model_features, trial_features
    from advisor.physics import PCIE_X16_GB_S
    from cloud.gpus import gpu_spec

    rows = _shipped()
    pcie = [r for r in rows if r["gpu"] in ("A100PCIe-40GB", "A100PCIe-80GB", "H100PCIe")]
    assert pcie and {r["interconnect"] for r in pcie} == {"PCIe"}
    bridged = {**pcie[0], "interconnect": ""}
    trials = [trial_row(row) for row in (pcie[0], bridged, {**bridged, "interconnect": "nvlink"})]
    assert [t["extra"].get("interconnect") for t in trials] == ["PCIe", None, "NVLink"]
    features, _, _ = trial_features(trials, model_features())
    spec = gpu_spec(pcie[0]["gpu"])
    assert features["intra_node_gb_s"].tolist() == [PCIE_X16_GB_S[spec.pcie_gen],
                                                     PCIE_X16_GB_S[spec.pcie_gen],
                                                     spec.nvlink_gb_s / 2]


def test_a_sources_own_names_for_model_and_gpu_land_on_the_card_and_datasheet(tmp_path):
    """Another benchmark's table says ResNet-50, BERT-Large and the driver's GPU name."""
    from advisor.features import model_features, trial_features

    rows = [r for r in _shipped() if r["gpu"] == "V100" and r["model"] in ("resnet50",
                                                                          "bert_large")]
    resnet = next(r for r in rows if r["model"] == "resnet50")
    squad = next(r for r in rows if r["model"] == "bert_large" and r["seq_len"] == "384")
    renamed = [{**r, "model": name, "gpu": "Tesla V100-SXM2-16GB"}
               for r, name in ((resnet, "ResNet-50"), (squad, "BERT-Large"))]
    path = tmp_path / "theirs.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(resnet))
        writer.writeheader()
        writer.writerows(renamed)
    theirs = load_published(path)
    assert [t["gpu_type"] for t in theirs] == ["V100", "V100"]
    assert [t["extra"]["card"] for t in theirs] == ["resnet50", "bert_large@384"]
    models = model_features()
    features, _, skipped = trial_features(theirs, models)
    ours, _, _ = trial_features([trial_row(resnet), trial_row(squad)], models)
    assert not skipped and features["model"].tolist() == ["resnet50", "bert_large"]
    assert features["flops_per_sample"].tolist() == ours["flops_per_sample"].tolist()


def test_a_tokens_per_second_figure_is_priced_as_sequences_of_its_workload():
    rows = _shipped()
    squad = next(r for r in rows if r["model"] == "bert_large" and r["seq_len"] == "384")
    binned = next(r for r in rows if r["mean_seq_len"])  # sequences padded to 288 on average
    for row, tokens in ((squad, 384), (binned, 288)):
        value = float(row["throughput"])
        trial = trial_row({**row, "unit": "tok/s", "throughput": str(value * tokens)})
        assert trial["throughput"] == pytest.approx(value)
        assert trial["extra"]["throughput_as_published"] == pytest.approx(value * tokens)
    with pytest.raises(ValueError, match="tok/s figure of bert_large needs its seq_len"):
        trial_row({**squad, "unit": "tok/s", "seq_len": ""})
    # a model without a card (token batches, no sequence length) keeps its figure as published
    transformer = next(r for r in rows if r["model"] == "transformer_big")
    cardless = {**transformer, "model": "a_model_without_a_card", "seq_len": ""}
    assert trial_row(cardless)["throughput"] == float(transformer["throughput"])
    # transformer_big's tok/s counts target tokens: 31 a sentence pair (its seq_len, a rate)
    assert trial_row(transformer)["throughput"] == pytest.approx(
        float(transformer["throughput"]) / 31)


@pytest.mark.parametrize("unit", ["img/s/gpu", "images/sec per GPU", "samples/s/device"])
def test_a_figure_for_one_gpu_is_the_runs_over_its_gpus(unit):
    eight = next(r for r in _shipped() if r["model"] == "resnet50" and r["num_gpus"] == "8"
                 and r["unit"] == "img/s")
    per_gpu = float(eight["throughput"]) / 8
    trial = trial_row({**eight, "unit": unit, "throughput": str(per_gpu)})
    assert trial["throughput"] == pytest.approx(float(eight["throughput"]))
    assert trial["extra"]["throughput_as_published"] == pytest.approx(per_gpu)
    # tokens a second of one GPU: the run's sequences a second
    squad = next(r for r in _shipped() if r["model"] == "bert_large" and r["seq_len"] == "384"
                 and r["num_gpus"] == "8")
    tokens = float(squad["throughput"]) * 384 / 8
    assert trial_row({**squad, "unit": "tok/s/gpu", "throughput": str(tokens)})[
        "throughput"] == pytest.approx(float(squad["throughput"]))
    with pytest.raises(ValueError, match="followed by /gpu for one GPU of it"):
        trial_row({**eight, "unit": "img/s/node"})


def test_another_benchmarks_figures_are_a_source_of_their_own(tmp_path):
    """`--source NAME`: the same rows under published:NAME, kept beside the shipped ones and
    held out on their own by `advisor evaluate --split source`."""
    from advisor.evaluation import evaluate
    from advisor.fitting import source_family

    rows = [r for r in _shipped() if r["model"] == "resnet50" and r["gpu"] == "V100"][:4]
    theirs = tmp_path / "theirs.csv"
    with open(theirs, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with Store(tmp_path / "m.db") as db:
        import_published(db)
        result = import_published(db, theirs, "Their-Lab")
        assert result.source == "published:their-lab" and result.rows == {"trials": 4}
        assert import_published(db, theirs, "Their-Lab").already_imported
        stored = db.query("SELECT source, trial_key FROM trials WHERE source != 'published'")
    assert len(stored) == 4 and {t["source"] for t in stored} == {"published:their-lab"}
    assert all(t["trial_key"].startswith("published:their-lab/") for t in stored)
    assert source_family("published:their-lab") == "published:their-lab"
    held_out = {g["group"]: g["n"] for g in evaluate(tmp_path / "m.db", "source")["groups"]}
    assert held_out["published:their-lab"] >= 1 and held_out["published"] > 100
    with Store(tmp_path / "m.db") as db, pytest.raises(ImportDataError,
                                                      match="source name 'a b' must be"):
        import_published(db, theirs, "a b")


def test_a_table_naming_a_model_no_card_matches_is_warned_with_the_nearest_names(tmp_path):
    """A name the cards do not resolve (GNMT for gnmt_v2) is kept but never fitted: the
    import says so, with the cards it may mean, and the shipped file's known ones are quiet."""
    row = next(r for r in _shipped() if r["model"] == "gnmt_v2")
    theirs = tmp_path / "theirs.csv"
    with open(theirs, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(row))
        writer.writeheader()
        writer.writerows([{**row, "model": name} for name in ("GNMT", "GNMT", "gnmt_v2",
                                                               "Zzyzx")])
    with Store(tmp_path / "m.db") as db:
        assert import_published(db).warnings == []
        result = import_published(db, theirs, "theirs")
    assert result.rows == {"trials": 4} and len(result.warnings) == 2
    gnmt, unknown = result.warnings
    assert gnmt.startswith("2 row(s) name 'GNMT', which no model card matches: kept, but not "
                           "fitted or evaluated (if it is gnmt_v2, name it so in the table;")
    assert unknown.startswith("1 row(s) name 'Zzyzx'") and "(make its card with" in unknown


def test_a_figure_its_source_contradicts_is_kept_but_never_fitted(tmp_path):
    from advisor.fitting import throughput_data

    trials = load_published()
    suspect = [t for t in trials if t["extra"]["suspect"]]
    # (12 by 2026-11-27; + TensorFlow 2 BERT's SQuAD table on DGX A100, 4, whose text names a
    # DGX-2 of V100s and whose columns say FP32 under a TF32 heading)
    assert len(suspect) == 16 and all("SUSPECT" in t["extra"]["notes"] for t in suspect)
    with Store(tmp_path / "m.db") as db:
        import_published(db)
        features, throughput, _, skipped = throughput_data(db)
    assert skipped["figure its source contradicts (notes: SUSPECT)"] == 16
    # EfficientNet-B4 on one 32 GB V100: 36 and 89 img/s, against 80 and 196 a GPU on eight
    b4 = (features["model"] == "efficientnet_b4") & (features["gpu"] == "V100")
    assert not np.isin(throughput[b4], [36.0, 89.0]).any() and b4.sum() >= 6


def test_xla_rows_reach_the_features_and_are_priced_fused():
    """NVIDIA's TensorFlow BERT recipes compile their step with XLA (their scripts, cited in
    each row's software): BERT-Large's and BioBERT's rows at every precision, ELECTRA's with
    AMP only (`run_squad.sh`: `--amp --xla`). Such a row is priced with its card's fused
    element-wise figures: at 512 tokens XLA writes the scores out that the fused attention
    kernel keeps on chip, so its memory term grows, with fewer kernels than eager's."""
    from advisor import physics
    from advisor.features import XLA_KEY, model_features, trial_features

    rows = _shipped()
    xla = [r for r in rows if r["xla"] == "1"]
    assert {r["model"] for r in xla} == {"bert_large", "bert_base"}
    assert all("XLA" in r["software"] and r["framework"] == "TensorFlow" for r in xla)
    electra = [r for r in rows if "ELECTRA" in r["source"]]
    assert {r["precision"] for r in electra if r["xla"] == "1"} == {"amp"}
    assert {r["xla"] for r in electra if r["precision"] != "amp"} == {""}
    phase2 = next(r for r in xla if r["seq_len"] == "512" and r["precision"] == "fp32")
    trials = [trial_row(phase2), trial_row({**phase2, "xla": ""})]
    assert [t["extra"].get(XLA_KEY) for t in trials] == [True, None]
    features, _, _ = trial_features(trials, model_features())
    assert features[XLA_KEY].tolist() == [1.0, 0.0]
    memory = physics.roofline_terms(features)["memory"]
    assert memory[0] > 1.2 * memory[1]
    kernels = physics.kernels_per_step(features, 2)
    assert kernels[0] < kernels[1]
    with pytest.raises(ValueError, match="xla is 'maybe', expected 1 or 0"):
        trial_row({**phase2, "xla": "maybe"})


def test_a_measured_configuration_answers_with_the_stacks_recommend_prices(tmp_path):
    """`recommend` prices a PyTorch job (the reference stacks), so a configuration PyTorch
    measured answers with PyTorch's figures, while its range spans every stack's: ResNet-50
    FP32 on one V100 at batch 128 is NVIDIA's PyTorch 20.06 figures (360 and 373 on its 16
    and 32 GB boards), not a median that MXNet's and TensorFlow's 377-432 pull up."""
    from advisor.artifact import config_keys
    from advisor.fitting import reference_stacks, throughput_data
    from advisor.sharding import steps_optimizer

    with Store(tmp_path / "m.db") as db:
        import_published(db)
        features, throughput, measured, _ = throughput_data(db)
    keys, stacks = config_keys(features), features["software"]
    reference = reference_stacks(stacks)
    cell = next(k for k in measured if k.startswith("resnet50|v100|fp32|allreduce|1|1|128|"))
    value, lo, hi = measured[cell]
    assert value == pytest.approx((359.76 + 373.21) / 2) and (lo, hi) == (359.76, 432.0)
    assert len(set(stacks[keys == cell])) == 5
    # Everywhere: a cell with a reference stack answers within that stack's figures, one
    # without answers within all of its figures; a benchmark of forward and backward alone
    # answers none.
    training = steps_optimizer(features, len(keys))
    assert set(measured) == set(keys[training])
    for key in np.unique(keys[training]):
        rows = (keys == key) & training
        own = throughput[rows & reference] if (rows & reference).any() else throughput[rows]
        assert own.min() <= measured[key][0] <= own.max(), key
