"""The model zoo: names, default training workloads, and models built offline from
transformers configs, or from torch.nn where transformers has no such model (TORCH_BUILT; no
weights are downloaded; every model starts from random init).

Image models are ImageNet classifiers (1000-way; tf_cnn_benchmarks' 1001) but SSD300 (COCO
detection, its loss on synthetic matched boxes); text models carry their pretraining head
(masked LM for BERT, causal LM for GPT-2, Transformer-XL's adaptive softmax, GNMT's
and Transformer-big's translation losses) and train on synthetic token ids; NCF, a
recommendation model, trains on random user-item pairs labelled 0/1 and has no input size.
torch and transformers are imported inside the functions, so listing the zoo costs nothing.
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass
from typing import Any

from gpuadvisor.cards import INPUT_SIZE, matching_card
from gpuadvisor.errors import GpuAdvisorError

IMAGENET_TRAIN = 1_281_167  # ILSVRC-2012 training images
CIFAR10_TRAIN = 50_000
# BERT: 1M steps x 256 sequences = 40 passes over Wikipedia + BookCorpus (Devlin et al. 2019).
BERT_SAMPLES_PER_EPOCH = 256 * 1_000_000 // 40
# OpenWebText as tokenised by nanoGPT: 9,035,582,198 GPT-2 tokens in 1024-token sequences.
OPENWEBTEXT_SAMPLES_PER_EPOCH = 9_035_582_198 // 1024
# Chinchilla-optimal data (Hoffmann et al. 2022): about 20 training tokens per parameter, the
# default amount of a decoder LLM's workload (give --tokens for another).
CHINCHILLA_TOKENS_PER_PARAM = 20
# COCO 2017 train images with at least one annotation (118,287 less 1,021 without): the
# detection recipes skip the empty ones.
COCO_TRAIN_ANNOTATED = 117_266
# WikiText-103's training split (Merity et al. 2017), in words.
WT103_TRAIN_TOKENS = 103_227_021
# NCF on MovieLens-20M as DeepLearningExamples trains it: 19,861,770 training positives (the
# 20,000,263 ratings less each of the 138,493 users' latest, held out), each paired with 4
# sampled negatives an epoch; DLE's samples/s counts all five (profiler/zoo_recommendation.py).
ML20M_TRAIN_POSITIVES = 19_861_770
NCF_NEGATIVE_SAMPLES = 4
MLM_PROBABILITY = 0.15  # share of tokens BERT predicts
NUM_CLASSES = 1000


class UnknownModelError(GpuAdvisorError, KeyError):
    """A model name not in the zoo; the message lists the closest names."""

    def __str__(self) -> str:
        return str(self.args[0])


class FixedInputError(GpuAdvisorError, ValueError):
    """A zoo model asked for in a shape it cannot take: an input size its layers or its
    published workload fix, or a gathered masked-LM head it has none of."""


@dataclass(frozen=True)
class ZooEntry:
    name: str
    family: str  # resnet | cifar_resnet | resnext | densenet | ssd | alexnet | vgg |
    # inception | inception_v4 | vit | bert | bart | gpt2 | llama | transformer_xl | gnmt |
    # transformer | convnext | swin | regnet | mobilenet_v2 | efficientnet | ncf |
    # waveglow | mask_rcnn | tacotron2
    task: str  # image | text | recommendation (no input size: image_size and seq_len None)
    dataset: str
    samples_per_epoch: int
    epochs: int
    image_size: int | None
    seq_len: int | None
    batch_per_gpu: int  # per GPU
    reference: str  # where the workload comes from
    config: dict[str, Any]  # transformers config arguments (TORCH_BUILT: the module's)


def _image(name, family, epochs, batch, reference, config, image_size=224) -> ZooEntry:
    return ZooEntry(name, family, "image", "imagenet-1k", IMAGENET_TRAIN, epochs, image_size,
                    None, batch, reference, {"num_labels": NUM_CLASSES, **config})


def _resnet(name, layer_type, depths, batch) -> ZooEntry:
    hidden = [64, 128, 256, 512] if layer_type == "basic" else [256, 512, 1024, 2048]
    return _image(name, "resnet", 90, batch, "torchvision / NVIDIA DeepLearningExamples "
                  "ResNet recipe: 90 epochs", {"layer_type": layer_type, "depths": depths,
                                                "hidden_sizes": hidden})


def _cifar_resnet(name, layer_type, depths) -> ZooEntry:
    """A ResNet on CIFAR-10 as kuangliu/pytorch-cifar trains it (profiler/zoo_convnets.py):
    200 epochs (its cosine schedule), batch 128."""
    return ZooEntry(name, "cifar_resnet", "image", "cifar-10", CIFAR10_TRAIN, 200, 32, None, 128,
                    "kuangliu/pytorch-cifar ResNet on CIFAR-10 (3x3 stem, no max pool): 200 "
                    "epochs, batch 128", {"layer_type": layer_type, "depths": depths,
                                          "num_labels": 10})


def _densenet(name, block_layers, growth, stem_channels, batch) -> ZooEntry:
    """DenseNet as torchvision builds it (profiler/zoo_densenet.py) on Huang et al.'s ImageNet
    recipe: 90 epochs, batch 256 (64 a GPU on 4: its concatenations are memory-hungry)."""
    return _image(name, "densenet", 90, batch, "torchvision DenseNet; Huang et al. (CVPR "
                  "2017) ImageNet recipe: 90 epochs, batch 256",
                  {"block_layers": block_layers, "growth": growth,
                   "stem_channels": stem_channels})


def _resnext(name, squeeze_excitation, batch, depths=(3, 4, 23, 3), groups=32,
             width_per_group=4) -> ZooEntry:
    """A ResNeXt, plain or with squeeze-and-excitation, as NVIDIA's DeepLearningExamples
    ConvNets define it (profiler/zoo_convnets.py; ResNeXt101-32x4d and SE-ResNeXt101-32x4d
    are theirs) and train it."""
    return _image(name, "resnext", 90, batch, "NVIDIA DeepLearningExamples PyTorch ConvNets "
                  "ResNeXt101-32x4d / SE-ResNeXt101-32x4d recipe: 90 epochs",
                  {"depths": list(depths), "groups": groups,
                   "width_per_group": width_per_group,
                   "squeeze_excitation": squeeze_excitation})


def _vit(name, hidden, layers, heads, batch, patch_size=16) -> ZooEntry:
    return _image(name, "vit", 300, batch, "DeiT recipe (Touvron et al. 2021): 300 epochs",
                  {"hidden_size": hidden, "num_hidden_layers": layers,
                   "num_attention_heads": heads, "intermediate_size": 4 * hidden,
                   "patch_size": patch_size})


def _convnext(name, depths, hidden_sizes, batch) -> ZooEntry:
    return _image(name, "convnext", 300, batch, "ConvNeXt (Liu et al. 2022): 300 epochs, "
                  "batch 4096 on 32 GPUs", {"depths": depths, "hidden_sizes": hidden_sizes})


def _swin(name, embed_dim, depths, heads, batch) -> ZooEntry:
    """Swin Transformer (Liu et al. 2021): windowed self-attention (7x7 windows, shifted every
    other block) over patch-merging stages."""
    return _image(name, "swin", 300, batch, "Swin Transformer (Liu et al. 2021): 300 epochs, "
                  "batch 1024 (128 a GPU on 8)", {"embed_dim": embed_dim, "depths": depths,
                                                   "num_heads": heads, "window_size": 7})


def _regnet(name, depths, hidden_sizes, group_width, batch) -> ZooEntry:
    """RegNetX (layer_type x) or RegNetY (y: squeeze-and-excitation), Radosavovic et al. 2020:
    grouped 3x3 convolutions of a fixed group width through the network."""
    return _image(name, "regnet", 100, batch, "RegNet (Radosavovic et al. 2020): 100 epochs, "
                  "batch 1024 (128 a GPU on 8)", {"depths": depths, "hidden_sizes": hidden_sizes,
                                                  "groups_width": group_width,
                                                  "layer_type": name[6]})


def _efficientnet(name, width, depth, dropout, image_size, batch) -> ZooEntry:
    """EfficientNet-B1..B7 (Tan & Le 2019): B0's network scaled in width and depth, its head
    1280 channels times the width, at the paper's input size."""
    return _image(name, "efficientnet", 350, batch, "EfficientNet (Tan & Le 2019): 350 "
                  f"epochs, batch 4096; width {width}, depth {depth}, {image_size} px",
                  {"width_coefficient": width, "depth_coefficient": depth,
                   "hidden_dim": round(1280 * width), "dropout_rate": dropout,
                   "image_size": image_size}, image_size=image_size)


def _mobilenet_v2(name, multiplier, batch) -> ZooEntry:
    return _image(name, "mobilenet_v2", 300, batch, "torchvision MobileNetV2 recipe: 300 "
                  f"epochs, batch 32 per GPU on 8 GPUs; width multiplier {multiplier}",
                  {"depth_multiplier": multiplier, "tf_padding": False})


def _bert(name, hidden, layers, heads, batch) -> ZooEntry:
    return ZooEntry(name, "bert", "text", "wikipedia+bookcorpus", BERT_SAMPLES_PER_EPOCH, 40,
                    None, 128, batch, "BERT pretraining (Devlin et al. 2019): 1M steps x 256 "
                    "sequences = 40 epochs; phase-1 sequence length 128",
                    {"hidden_size": hidden, "num_hidden_layers": layers,
                     "num_attention_heads": heads, "intermediate_size": 4 * hidden})


def _bart(name, hidden, layers, heads, batch) -> ZooEntry:
    """BART (Lewis et al. 2020) as NVIDIA's DeepLearningExamples pre-train it
    (PyTorch/LanguageModeling/BART, README.md@305744e6): phase 1 reconstructs sequences of 128
    tokens from their corruptions, 95,040 steps of 64,000 sequences (scripts/run_pretraining.sh
    defaults: 200 a GPU); the decoder predicts every position, over BART's 50,265 tokens."""
    return ZooEntry(name, "bart", "text", "wikipedia+common-crawl+openwebtext",
                    95_040 * 64_000, 1, None, 128, batch,
                    "NVIDIA DeepLearningExamples BART pre-training phase 1: 95,040 steps x "
                    "64,000 sequences of 128 tokens",
                    {"d_model": hidden, "encoder_layers": layers, "decoder_layers": layers,
                     "encoder_attention_heads": heads, "decoder_attention_heads": heads,
                     "encoder_ffn_dim": 4 * hidden, "decoder_ffn_dim": 4 * hidden,
                     "vocab_size": 50_265, "max_position_embeddings": 1024,
                     "use_cache": False})  # training keeps no decoder cache


def _gpt2(name, hidden, layers, heads, batch) -> ZooEntry:
    return ZooEntry(name, "gpt2", "text", "openwebtext", OPENWEBTEXT_SAMPLES_PER_EPOCH, 33,
                    None, 1024, batch, "nanoGPT GPT-2 on OpenWebText: 600k iterations x 480 "
                    "sequences of 1024 tokens, about 33 epochs",
                    {"n_embd": hidden, "n_layer": layers, "n_head": heads})


def _llama(name, params, batch, reference, config) -> ZooEntry:
    """A Llama-architecture decoder at its published shape (RoPE, SwiGLU MLP, grouped-query
    attention, vocabulary 128,256), trained at Llama 3's 8,192-token sequences on a
    Chinchilla-optimal token count (`params` is the published parameter count)."""
    seq = 8192
    return ZooEntry(name, "llama", "text", "tokens", CHINCHILLA_TOKENS_PER_PARAM * params // seq,
                    1, None, seq, batch, f"{reference}; sequences of 8,192 tokens (Llama 3 "
                    "pre-training, Dubey et al. 2024) on 20 tokens a parameter (Hoffmann et al. "
                    "2022)", {"vocab_size": 128256, "rope_theta": 500000.0,
                              "max_position_embeddings": 131072, "num_key_value_heads": 8,
                              "hidden_act": "silu", "rms_norm_eps": 1e-5, **config})


def _transformer_xl(name, batch, steps, sequences_per_step, config) -> ZooEntry:
    """Transformer-XL on WikiText-103 as NVIDIA's DeepLearningExamples train it
    (wt103_base.yaml, wt103_large.yaml): `steps` of `sequences_per_step` segments of
    `tgt_len` tokens, each attending to as many remembered ones (profiler/zoo_transformer_xl.py)."""
    seq = config["tgt_len"]
    samples = WT103_TRAIN_TOKENS // seq
    return ZooEntry(name, "transformer_xl", "text", "wikitext-103", samples,
                    round(steps * sequences_per_step / samples), None, seq, batch,
                    f"NVIDIA DeepLearningExamples Transformer-XL WikiText-103 recipe: {steps:,} "
                    f"steps x {sequences_per_step} segments of {seq} tokens",
                    {"vocab_size": 267_735, "mem_len": seq, **config})


EFFICIENTNET_B0 = {"width_coefficient": 1.0, "depth_coefficient": 1.0, "hidden_dim": 1280,
                   "dropout_rate": 0.2}
EFFICIENTNET_B4 = {"width_coefficient": 1.4, "depth_coefficient": 1.8, "hidden_dim": 1792,
                   "dropout_rate": 0.4, "image_size": 380}
# NVIDIA's EfficientNet-WideSE (DeepLearningExamples ConvNets `widese_mbconv`): each block's
# squeeze-and-excitation is a quarter of its expanded width, not of its input's. transformers
# sizes it from the input (`squeeze_expansion_ratio` x input channels), so 0.25 x the blocks'
# expansion of 6 gives the same width in every block but the first stage's (expansion 1),
# whose tiny gate is then 6x wider than NVIDIA's (a few thousand parameters).
WIDESE_RATIO = 0.25 * 6
WIDESE = ("NVIDIA DeepLearningExamples EfficientNet-WideSE recipe (the EfficientNet schedule: "
          "350 epochs); squeeze-and-excitation a quarter of each block's expanded width")

ZOO: dict[str, ZooEntry] = {
    e.name: e
    for e in [
        _resnet("resnet18", "basic", [2, 2, 2, 2], 256),
        _resnet("resnet34", "basic", [3, 4, 6, 3], 256),
        _resnet("resnet50", "bottleneck", [3, 4, 6, 3], 256),
        _resnet("resnet101", "bottleneck", [3, 4, 23, 3], 128),
        _resnet("resnet152", "bottleneck", [3, 8, 36, 3], 128),
        # At 32 px a ResNet is CIFAR's (gpuadvisor/cards.py matches a 32-px row to these).
        _cifar_resnet("resnet18_cifar", "basic", [2, 2, 2, 2]),
        _cifar_resnet("resnet50_cifar", "bottleneck", [3, 4, 6, 3]),
        _resnext("resnext101_32x4d", False, 128),
        _resnext("se_resnext101_32x4d", True, 128),
        # Further depths and widths of the same blocks (timm's resnet26, resnet200,
        # resnext50_32x4d, resnext101_32x8d/64x4d, seresnext50_32x4d, seresnext101_32x8d).
        _resnet("resnet26", "bottleneck", [2, 2, 2, 2], 256),
        _resnet("resnet200", "bottleneck", [3, 24, 36, 3], 64),
        _resnext("resnext50_32x4d", False, 256, depths=(3, 4, 6, 3)),
        _resnext("resnext101_32x8d", False, 64, width_per_group=8),
        _resnext("resnext101_64x4d", False, 64, groups=64),
        _resnext("se_resnext50_32x4d", True, 256, depths=(3, 4, 6, 3)),
        _resnext("se_resnext101_32x8d", True, 64, width_per_group=8),
        # As TensorFlow's tf_cnn_benchmarks@9165a70 builds them (its 2017 Benchmarks page's
        # figures): 1001-way classifiers, batches per GPU its defaults.
        _image("alexnet", "alexnet", 90, 512, "tf_cnn_benchmarks AlexNet (227 px, 1001 "
               "classes); 90 epochs (Krizhevsky et al. 2012, torchvision's recipe)",
               {"num_labels": 1001}, image_size=227),
        _image("vgg16", "vgg", 74, 64, "tf_cnn_benchmarks VGG16 (1001 classes); 74 epochs "
               "(Simonyan & Zisserman 2015: 370K iterations x 256)", {"num_labels": 1001}),
        _image("inception_v3", "inception", 100, 32, "tf_cnn_benchmarks InceptionV3 (no "
               "auxiliary head, 1001 classes); 100 epochs (Szegedy et al. 2016)",
               {"num_labels": 1001}, image_size=299),
        _image("inception_v4", "inception_v4", 100, 32, "tf_cnn_benchmarks InceptionV4 (1001 "
               "classes, batch 32 its default); InceptionV3's 100 epochs",
               {"num_labels": 1001}, image_size=299),
        _vit("vit_b16", 768, 12, 12, 128),
        _vit("vit_l16", 1024, 24, 16, 64),
        _vit("vit_ti16", 192, 12, 3, 256),
        _vit("vit_s16", 384, 12, 6, 256),
        _vit("vit_s32", 384, 12, 6, 256, patch_size=32),
        _vit("vit_b32", 768, 12, 12, 256, patch_size=32),
        _vit("vit_b8", 768, 12, 12, 32, patch_size=8),
        _vit("vit_l32", 1024, 24, 16, 128, patch_size=32),
        _vit("vit_l14", 1024, 24, 16, 32, patch_size=14),
        _vit("vit_h14", 1280, 32, 16, 16, patch_size=14),
        _bert("bert_base", 768, 12, 12, 32),
        _bert("bert_large", 1024, 24, 16, 16),
        _bart("bart_large", 1024, 12, 16, 200),
        _gpt2("gpt2", 768, 12, 12, 12),
        _gpt2("gpt2_medium", 1024, 24, 16, 8),
        # Shapes from the config.json of meta-llama/Llama-3.2-1B, Llama-3.1-8B, Llama-3.1-70B.
        _llama("llama_1b", 1_235_814_400, 4, "Llama 3.2 1B shape", {
            "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
            "num_attention_heads": 32, "head_dim": 64, "tie_word_embeddings": True}),
        _llama("llama_8b", 8_030_261_248, 1, "Llama 3.1 8B shape", {
            "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
            "num_attention_heads": 32, "head_dim": 128, "tie_word_embeddings": False}),
        _llama("llama_70b", 70_553_706_496, 1, "Llama 3.1 70B shape", {
            "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
            "num_attention_heads": 64, "head_dim": 128, "tie_word_embeddings": False}),
        _transformer_xl("transformer_xl_base", 32, 40_000, 256, {
            "n_layer": 16, "d_model": 512, "n_head": 8, "d_head": 64, "d_inner": 2048,
            "tgt_len": 192, "dropout": 0.1, "dropatt": 0.0}),
        _transformer_xl("transformer_xl_large", 16, 100_000, 128, {
            "n_layer": 18, "d_model": 1024, "n_head": 16, "d_head": 64, "d_inner": 4096,
            "tgt_len": 384, "dropout": 0.2, "dropatt": 0.2, "div_val": 4}),
        ZooEntry("ssd300", "ssd", "image", "coco-2017", COCO_TRAIN_ANNOTATED, 65, 300, None, 128,
                 "NVIDIA DeepLearningExamples PyTorch/Detection/SSD recipe: 65 epochs (main.py "
                 "default; learning-rate steps at 43 and 54), batch 128 per GPU on 8 A100s "
                 "(examples/SSD300_A100_FP{16,32}_8GPU.sh)", {"num_labels": 81}),
        # Tacotron 2 as DeepLearningExamples PyTorch/SpeechSynthesis/Tacotron2 (20.06) trains it:
        # seq_len is the mel frames an utterance adds to its mels/s (567, unpadded), a rate; the
        # utterances are traced padded as a batch of 128 pads them, to 164 symbols and 860 frames
        # (profiler/zoo_tacotron2.py).
        ZooEntry("tacotron2", "tacotron2", "text", "ljspeech", 12_500, 1501, None, 567, 128,
                 "NVIDIA DeepLearningExamples Tacotron 2 LJSpeech recipe "
                 "(platform/DGXA100_tacotron2_{AMP,TF32}_8NGPU_train.sh@f0c8bc57): 1501 epochs of "
                 "LJSpeech 1.1's 12,500 training clips, batch 128 a GPU on 8 A100s, teacher "
                 "forcing", {"n_symbols": 148, "n_mel_channels": 80, "encoder_embedding_dim": 512,
                             "attention_rnn_dim": 1024, "decoder_rnn_dim": 1024,
                             "prenet_dim": 256, "postnet_embedding_dim": 512,
                             "p_attention_dropout": 0.1, "p_decoder_dropout": 0.1,
                             "text_len": 164, "mel_frames": 860}),
        # Mask R-CNN R-50-FPN as NVIDIA DeepLearningExamples PyTorch/Segmentation/MaskRCNN
        # trains it (profiler/zoo_maskrcnn.py): image_size is the short side; the card pads a
        # batch to 800x1216.
        ZooEntry("mask_rcnn", "mask_rcnn", "image", "coco-2017", COCO_TRAIN_ANNOTATED, 12, 800,
                 None, 4, "NVIDIA DeepLearningExamples PyTorch/Segmentation/MaskRCNN recipe "
                 "(configs/e2e_mask_rcnn_R_50_FPN_1x.yaml@b1ae8dd4, README.md@d29920a8): 45,000 "
                 "iterations x 32 images (4 a GPU on 8, scripts/train.sh) = 12.3 epochs of "
                 "coco_2014_train + valminusminival (COCO 2017 train); short side 800, long side "
                 "at most 1333, padded to 32", {"num_labels": 81}),
        # GNMT v2 as DeepLearningExamples PyTorch/Translation/GNMT (19.05) trains it: seq_len is
        # the tokens a sentence pair adds to its tok/s as it averages them (source + target - 1,
        # about 51, averaged per iteration: 49), a rate; the pairs are traced padded to 32 + 32.
        ZooEntry("gnmt_v2", "gnmt", "text", "wmt16-en-de", 3_498_161, 6, None, 49, 128,
                 "NVIDIA DeepLearningExamples GNMT v2 recipe: 6 epochs (train.py default) of "
                 "WMT16 en-de's 3,498,161 pairs of at most 50 tokens, 128 a GPU",
                 {"vocab_size": 32320, "hidden_size": 1024, "num_layers": 4, "dropout": 0.2,
                  "smoothing": 0.1, "src_len": 32, "tgt_len": 32}),
        # Transformer-big as DeepLearningExamples PyTorch/Translation/Transformer (22.06) trains
        # it: seq_len is the tokens a sentence pair adds to its tok/s (target tokens, EOS
        # counted: about 31), a rate; the pairs are traced at 30 + 31 tokens, and --max-tokens
        # 10240 holds 290 of them (profiler/zoo_transformer.py).
        ZooEntry("transformer_big", "transformer", "text", "wmt14-en-de", 4_575_616, 30, None,
                 31, 290, "NVIDIA DeepLearningExamples Transformer-big WMT14 en-de recipe "
                 "(scripts/run_DGXA100_{AMP,TF32}.sh@d666f145): 30 epochs of 4,575,616 pairs, "
                 "--max-tokens 10240 a GPU (about 290 pairs) on 8 GPUs, label smoothing 0.1",
                 {"vocab_size": 33_712, "d_model": 1024, "ffn_dim": 4096, "layers": 6,
                  "heads": 16, "dropout": 0.1, "attention_dropout": 0.1, "relu_dropout": 0.1,
                  "smoothing": 0.1, "src_len": 30, "tgt_len": 31}),
        ZooEntry("ncf", "ncf", "recommendation", "movielens-20m",
                 ML20M_TRAIN_POSITIVES * (1 + NCF_NEGATIVE_SAMPLES), 30, None, None, 131_072,
                 "NVIDIA DeepLearningExamples PyTorch/Recommendation/NCF recipe (ncf.py@05ee9863 "
                 "defaults): 30 epochs of ML-20M's 19,861,770 training positives with 4 sampled "
                 "negatives each, Adam, global batch 2^20: 131,072 a GPU on 8 GPUs",
                 {"num_users": 138_493, "num_items": 26_744, "factors": 64,
                  "mlp_layers": [256, 256, 128, 64], "dropout": 0.5,
                  "negative_samples": NCF_NEGATIVE_SAMPLES}),
        _convnext("convnext_tiny", [3, 3, 9, 3], [96, 192, 384, 768], 128),
        _mobilenet_v2("mobilenet_v2", 1.0, 32),
        _mobilenet_v2("mobilenet_v2_050", 0.5, 32),
        _mobilenet_v2("mobilenet_v2_075", 0.75, 32),
        _mobilenet_v2("mobilenet_v2_140", 1.4, 32),
        _convnext("convnext_small", [3, 3, 27, 3], [96, 192, 384, 768], 128),
        _convnext("convnext_base", [3, 3, 27, 3], [128, 256, 512, 1024], 64),
        _convnext("convnext_large", [3, 3, 27, 3], [192, 384, 768, 1536], 32),
        _convnext("convnext_xlarge", [3, 3, 27, 3], [256, 512, 1024, 2048], 32),
        # RegNetX and RegNetY at the widths of the paper's 200MF-32GF models (timm's names)
        _regnet("regnetx_002", [1, 1, 4, 7], [24, 56, 152, 368], 8, 128),
        _regnet("regnetx_004", [1, 2, 7, 12], [32, 64, 160, 384], 16, 128),
        _regnet("regnetx_006", [1, 3, 5, 7], [48, 96, 240, 528], 24, 128),
        _regnet("regnetx_008", [1, 3, 7, 5], [64, 128, 288, 672], 16, 128),
        _regnet("regnetx_016", [2, 4, 10, 2], [72, 168, 408, 912], 24, 128),
        _regnet("regnetx_032", [2, 6, 15, 2], [96, 192, 432, 1008], 48, 128),
        _regnet("regnetx_040", [2, 5, 14, 2], [80, 240, 560, 1360], 40, 128),
        _regnet("regnetx_064", [2, 4, 10, 1], [168, 392, 784, 1624], 56, 128),
        _regnet("regnetx_080", [2, 5, 15, 1], [80, 240, 720, 1920], 120, 128),
        _regnet("regnetx_120", [2, 5, 11, 1], [224, 448, 896, 2240], 112, 128),
        _regnet("regnetx_160", [2, 6, 13, 1], [256, 512, 896, 2048], 128, 128),
        _regnet("regnetx_320", [2, 7, 13, 1], [336, 672, 1344, 2520], 168, 128),
        _regnet("regnety_002", [1, 1, 4, 7], [24, 56, 152, 368], 8, 128),
        _regnet("regnety_004", [1, 3, 6, 6], [48, 104, 208, 440], 8, 128),
        _regnet("regnety_006", [1, 3, 7, 4], [48, 112, 256, 608], 16, 128),
        _regnet("regnety_008", [1, 3, 8, 2], [64, 128, 320, 768], 16, 128),
        _regnet("regnety_016", [2, 6, 17, 2], [48, 120, 336, 888], 24, 128),
        _regnet("regnety_032", [2, 5, 13, 1], [72, 216, 576, 1512], 24, 128),
        _regnet("regnety_040", [2, 6, 12, 2], [128, 192, 512, 1088], 64, 128),
        _regnet("regnety_064", [2, 7, 14, 2], [144, 288, 576, 1296], 72, 128),
        _regnet("regnety_080", [2, 4, 10, 1], [168, 448, 896, 2016], 56, 128),
        _regnet("regnety_120", [2, 5, 11, 1], [224, 448, 896, 2240], 112, 128),
        _regnet("regnety_160", [2, 4, 11, 1], [224, 448, 1232, 3024], 112, 128),
        _regnet("regnety_320", [2, 5, 12, 1], [232, 696, 1392, 3712], 232, 128),
        _swin("swin_tiny", 96, [2, 2, 6, 2], [3, 6, 12, 24], 128),
        _swin("swin_small", 96, [2, 2, 18, 2], [3, 6, 12, 24], 128),
        _swin("swin_base", 128, [2, 2, 18, 2], [4, 8, 16, 32], 128),
        _swin("swin_large", 192, [2, 2, 18, 2], [6, 12, 24, 48], 64),
        _efficientnet("efficientnet_b1", 1.0, 1.1, 0.2, 240, 128),
        _efficientnet("efficientnet_b2", 1.1, 1.2, 0.3, 260, 128),
        _efficientnet("efficientnet_b3", 1.2, 1.4, 0.3, 300, 64),
        _efficientnet("efficientnet_b5", 1.6, 2.2, 0.4, 456, 32),
        _efficientnet("efficientnet_b6", 1.8, 2.6, 0.5, 528, 16),
        _efficientnet("efficientnet_b7", 2.0, 3.1, 0.5, 600, 8),
        _image("efficientnet_b0", "efficientnet", 350, 128, "EfficientNet (Tan & Le 2019): "
               "350 epochs, batch 4096", EFFICIENTNET_B0),
        _image("efficientnet_b4", "efficientnet", 350, 64, "EfficientNet (Tan & Le 2019): "
               "350 epochs, batch 4096; B4 scaling (width 1.4, depth 1.8, 380 px) as in "
               "google/efficientnet-b4's config", EFFICIENTNET_B4, image_size=380),
        # WaveGlow as DLE's PyTorch/SpeechSynthesis/Tacotron2 trains it (profiler/zoo_waveglow.py):
        # a sample is one 8,000-sample audio segment; DLE's samples/s count audio samples.
        ZooEntry("waveglow", "waveglow", "text", "ljspeech", 12_500, 1001, None, 8000, 10,
                 "NVIDIA DeepLearningExamples PyTorch/SpeechSynthesis/Tacotron2 WaveGlow recipe "
                 "(README.md@696cedf9, platform/DGX*_waveglow_AMP_*NGPU_train.sh): 1,001 epochs "
                 "of one 8,000-sample segment of each of LJSpeech's 12,500 training clips, batch "
                 "10 a GPU in mixed precision (4 in FP32/TF32), Adam 1e-4",
                 {"n_mel_channels": 80, "n_flows": 12, "n_group": 8, "n_early_every": 4,
                  "n_early_size": 2, "wn_layers": 8, "wn_channels": 512, "wn_kernel_size": 3,
                  "segment_length": 8000, "hop_length": 256, "sigma": 1.0}),
        _densenet("densenet121", [6, 12, 24, 16], 32, 64, 64),
        _densenet("densenet161", [6, 12, 36, 24], 48, 96, 64),
        _densenet("densenet169", [6, 12, 32, 32], 32, 64, 64),
        _densenet("densenet201", [6, 12, 48, 32], 32, 64, 64),
        _densenet("densenet264", [6, 12, 64, 48], 48, 96, 32),
        _image("efficientnet_widese_b0", "efficientnet", 350, 128, WIDESE,
               {**EFFICIENTNET_B0, "squeeze_expansion_ratio": WIDESE_RATIO}),
        _image("efficientnet_widese_b4", "efficientnet", 350, 64, WIDESE,
               {**EFFICIENTNET_B4, "squeeze_expansion_ratio": WIDESE_RATIO}, image_size=380),
    ]
}

# family -> (config class, model class) in transformers
_CLASSES = {
    "resnet": ("ResNetConfig", "ResNetForImageClassification"),
    "vit": ("ViTConfig", "ViTForImageClassification"),
    "convnext": ("ConvNextConfig", "ConvNextForImageClassification"),
    "swin": ("SwinConfig", "SwinForImageClassification"),
    "regnet": ("RegNetConfig", "RegNetForImageClassification"),
    "mobilenet_v2": ("MobileNetV2Config", "MobileNetV2ForImageClassification"),
    "efficientnet": ("EfficientNetConfig", "EfficientNetForImageClassification"),
    "bert": ("BertConfig", "BertForMaskedLM"),
    "bart": ("BartConfig", "BartForConditionalGeneration"),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel"),
    "llama": ("LlamaConfig", "LlamaForCausalLM"),
}


# Families transformers has no class for, built from torch.nn: family -> (module, class). A
# class with a static `synthetic_batch(batch, config, size, generator)` makes its own inputs;
# a text model whose sequence length is a shape names its argument in `SEQ_LEN_ARGUMENT`, and
# a model that takes only its own input size says `FIXED_INPUT_SIZE = True`.
TORCH_BUILT = {"resnext": ("profiler.zoo_convnets", "ResNeXt"),
               "cifar_resnet": ("profiler.zoo_convnets", "CifarResNet"),
               "densenet": ("profiler.zoo_densenet", "DenseNet"),
               "ssd": ("profiler.zoo_detection", "SSD300"),
               "alexnet": ("profiler.zoo_classic", "AlexNet"),
               "vgg": ("profiler.zoo_classic", "VGG16"),
               "inception": ("profiler.zoo_classic", "InceptionV3"),
               "inception_v4": ("profiler.zoo_classic", "InceptionV4"),
               "gnmt": ("profiler.zoo_translation", "GNMT"),
               # transformers' M2M100 (DLE's pre-norm fairseq Transformer), wrapped for its
               # sentence-pair batches and label-smoothed loss
               "transformer": ("profiler.zoo_transformer", "TransformerBig"),
               "ncf": ("profiler.zoo_recommendation", "NCF"),
               "transformer_xl": ("profiler.zoo_transformer_xl", "TransformerXL"),
               "waveglow": ("profiler.zoo_waveglow", "WaveGlow"),
               "mask_rcnn": ("profiler.zoo_maskrcnn", "MaskRCNN"),
               "tacotron2": ("profiler.zoo_tacotron2", "Tacotron2")}


def _torch_built_class(entry: ZooEntry):
    """The torch.nn class of a TORCH_BUILT family (None for a transformers one)."""
    if entry.family not in TORCH_BUILT:
        return None
    module, cls = TORCH_BUILT[entry.family]
    return getattr(importlib.import_module(module), cls)


def check_fixed_input(entry: ZooEntry, image_size: int | None, seq_len: int | None) -> None:
    """FixedInputError where `entry` takes only its own input size and another is asked for
    (SSD300's default boxes, AlexNet's and VGG16's flattened last map, GNMT's sentence
    lengths, which are its dataset's), or any input size where it has none (NCF's)."""
    if not getattr(_torch_built_class(entry), "FIXED_INPUT_SIZE", False):
        return
    if entry.task not in INPUT_SIZE:  # a recommendation model: user-item pairs
        asked = "--image-size" if image_size else "--seq-len" if seq_len else None
        if asked:
            raise FixedInputError(f"{entry.name} is a {entry.task} model and takes no input "
                                  f"size: leave out {asked}", asked.lstrip("-").replace("-", "_"))
        return
    asked, own, flag = (image_size, entry.image_size, "--image-size") if entry.task == "image" \
        else (seq_len, entry.seq_len, "--seq-len")
    if asked and asked != own:
        raise FixedInputError(f"{entry.name} takes only its own input size ({own}), not "
                              f"{asked}: leave out {flag}", flag.lstrip("-").replace("-", "_"))


def names() -> list[str]:
    return list(ZOO)


def resolve(name: str) -> ZooEntry:
    """The zoo entry for `name`, tolerant of spelling as the cards are (ResNet-50 is
    resnet50: gpuadvisor.cards.matching_card)."""
    found = matching_card(ZOO, name)
    if found:
        return ZOO[found]
    key = name.strip().lower().replace("-", "_")
    close = difflib.get_close_matches(key, ZOO, n=3, cutoff=0.4)
    hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(ZOO)}"
    raise UnknownModelError(f"unknown model {name!r}; {hint} (`profiler card --list` lists all)")


def _sizes(entry: ZooEntry, image_size: int | None, seq_len: int | None):
    return (image_size or entry.image_size, seq_len or entry.seq_len)


def _transformers():
    try:
        import transformers
    except ImportError:
        raise ImportError(
            "the model zoo needs torch and transformers: pip install 'gpu-advisor[profiler]'"
        ) from None
    return transformers


def build_config(name: str, image_size: int | None = None, seq_len: int | None = None):
    """The transformers config of a zoo model at the given input size."""
    entry = resolve(name)
    image_size, seq_len = _sizes(entry, image_size, seq_len)
    transformers = _transformers()
    config_cls = getattr(transformers, _CLASSES[entry.family][0])
    extra: dict[str, Any] = {}
    if entry.task == "image":
        extra["image_size"] = image_size
    elif entry.family == "gpt2":
        extra["n_positions"] = max(1024, seq_len)
    elif entry.family in ("llama", "bart"):  # RoPE's published reach, BART's learned table
        extra["max_position_embeddings"] = max(entry.config["max_position_embeddings"], seq_len)
    else:
        extra["max_position_embeddings"] = max(512, seq_len)
    return config_cls(**{**entry.config, **extra})


def build_model(name: str, image_size: int | None = None, seq_len: int | None = None):
    """A freshly initialised torch model, in training mode, on the current default device
    (build under `torch.device("meta")` to get shapes without memory)."""
    entry = resolve(name)
    check_fixed_input(entry, image_size, seq_len)
    if entry.family in TORCH_BUILT:  # their image sizes come from the pixels they get
        cls = _torch_built_class(entry)
        length = getattr(cls, "SEQ_LEN_ARGUMENT", None)  # a text model's shape, if it has one
        model = cls(**{**entry.config, **({length: seq_len} if length and seq_len else {})})
    else:
        config = build_config(name, image_size, seq_len)
        model = getattr(_transformers(), _CLASSES[entry.family][1])(config)
    if entry.family == "gpt2":  # its class name does not tell transformers which loss it has
        model.loss_type = "ForCausalLM"
    model.train()
    return model


def synthetic_batch(name: str, batch_per_gpu: int, device, image_size: int | None = None,
                    seq_len: int | None = None, generator=None) -> dict:
    """A random batch of the model's input shape: images + labels, or token ids + labels (a
    torch-built model with inputs of its own makes them: Transformer-XL's Zipf-drawn words,
    GNMT's sentence pairs)."""
    import torch

    entry = resolve(name)
    image_size, seq_len = _sizes(entry, image_size, seq_len)
    own = getattr(_torch_built_class(entry), "synthetic_batch", None)
    if own:  # a model whose inputs are not square RGB images or random token ids
        size = image_size if entry.task == "image" else seq_len
        size = None if size == (entry.image_size or entry.seq_len) else size  # its own shape
        return {key: value.to(device) for key, value in
                own(batch_per_gpu, entry.config, size, generator).items()}
    if entry.task == "image":
        pixels = torch.randn(batch_per_gpu, 3, image_size, image_size, generator=generator)
        classes = entry.config.get("num_labels", NUM_CLASSES)  # CIFAR's 10
        labels = torch.randint(0, classes, (batch_per_gpu,), generator=generator)
        return {"pixel_values": pixels.to(device), "labels": labels.to(device)}
    vocab = build_config(name).vocab_size
    ids = torch.randint(0, vocab, (batch_per_gpu, seq_len), generator=generator)
    if entry.family == "bert":  # predict a random 15% of positions, ignore the rest
        masked = torch.rand(batch_per_gpu, seq_len, generator=generator) < MLM_PROBABILITY
        labels = torch.where(masked, ids, torch.full_like(ids, -100))
    else:  # causal LM (or BART's reconstruction): the model shifts the labels itself
        labels = ids.clone()
    return {"input_ids": ids.to(device), "labels": labels.to(device)}


def loss(name: str, model, batch: dict):
    """The training loss of `model` on `batch` (cross-entropy of its task head)."""
    resolve(name)
    return model(**batch).loss


def gathered_head_loss(model, batch: dict, head_positions: int):
    """BERT's masked-LM loss as pre-training code that gathers the masked positions runs it:
    the encoder over every token, then the prediction head (transform and vocabulary
    projection) over `head_positions` positions a sequence only (Google's and NVIDIA's
    TensorFlow `gather_indexes`, PaddlePaddle's `index_select`, NVIDIA's PyTorch code since
    its 21.11 release), where transformers' BertForMaskedLM projects every position."""
    import torch

    hidden = model.bert(input_ids=batch["input_ids"]).last_hidden_state
    sequences, width = hidden.shape[0], hidden.shape[-1]
    positions = torch.zeros(sequences, head_positions, 1, dtype=torch.long,
                            device=hidden.device).expand(-1, -1, width)
    scores = model.cls(torch.gather(hidden, 1, positions))
    labels = batch["input_ids"][:, :head_positions]
    return torch.nn.functional.cross_entropy(scores.reshape(-1, scores.shape[-1]),
                                             labels.reshape(-1))


def meta_step(name: str, image_size: int | None = None, seq_len: int | None = None,
              head_positions: int | None = None):
    """Zoo model `name` built on the meta device, and `step(batch)`, which runs its forward
    pass on a synthetic batch of that many samples and returns the loss: what a card is traced
    on. `head_positions`: a BERT's masked-LM head run on that many gathered positions a
    sequence (`gathered_head_loss`); FixedInputError for another family."""
    import torch

    if head_positions and resolve(name).family != "bert":
        raise FixedInputError(f"{resolve(name).name} has no masked-LM head to gather "
                              "positions for: leave out head_positions", "head_positions")
    with torch.device("meta"):
        model = build_model(name, image_size=image_size, seq_len=seq_len)

    def step(batch: int):
        inputs = synthetic_batch(name, batch, "meta", image_size=image_size, seq_len=seq_len)
        if head_positions:
            return gathered_head_loss(model, inputs, head_positions)
        return loss(name, model, inputs)

    return model, step
