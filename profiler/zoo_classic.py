"""Classic ImageNet classifiers as TensorFlow's tf_cnn_benchmarks builds them (tensorflow/
benchmarks, scripts/tf_cnn_benchmarks at commit 9165a70, the code of TensorFlow's 2017
Benchmarks page, whose training throughput datasets/published_throughput.csv holds): AlexNet,
VGG16 and InceptionV3, and InceptionV4 from the same code's inception_model.py (its `inception4`
model; no published row of it is in the data). Their shapes follow that code, not
torchvision's, where the two differ:

- every classifier is 1001-way (tf_cnn_benchmarks' `nclass = 1001`: ImageNet's 1,000 classes
  and Inception's background class, which the labels never use);
- AlexNet is the single-tower layout of 64, 192, 384, 384 and 256 filters (torchvision's
  fourth convolution has 256) on 227-px images (224 + 3), whose 11x11 stride-4 convolution
  without padding gives a 55x55 map, with no local response normalisation;
- convolutions without batch norm (AlexNet, VGG16) carry a bias; InceptionV3's have none and
  batch-normalise as tf.contrib's batch_norm does by default: a learnt shift but no scale
  (`scale=False`), epsilon 1e-3, running statistics decaying 0.999;
- InceptionV3 has no auxiliary head (the benchmark never builds one) and no dropout before
  its classifier, and its last block max-pools where the one before average-pools;
  InceptionV4 keeps 0.8 of its pooled features through dropout before its classifier;
- AlexNet's and VGG16's fully connected layers keep their dropout, though at 9165a70 it did
  nothing (tf.layers.dropout got the keep probability as its rate and `training` left False):
  a few thousand element-wise operations an image either way.

TF's 'SAME' padding is k // 2 a side here (every such layer has stride 1), and its average
pools leave the padding out of the mean; 'VALID' is no padding. Built from torch.nn; the forward
pass takes `pixel_values` and `labels` and returns `.loss` and `.logits` like a transformers
image classifier, so that the zoo traces and trains them as it does the others.
"""

from __future__ import annotations

import torch
from torch import nn

from profiler.zoo_convnets import classifier_output

NUM_LABELS = 1001  # tf_cnn_benchmarks' classifier width: 1,000 classes and a background one
DROPOUT = 0.5  # AlexNet's and VGG's fully connected layers (tf_cnn_benchmarks' keep_prob 0.5)
VGG16_DEPTHS = (2, 2, 3, 3, 3)  # 3x3 convolutions per stage; model D of Simonyan & Zisserman
VGG_WIDTHS = (64, 128, 256, 512, 512)


def _fully_connected(inputs: int, num_labels: int) -> nn.Sequential:
    """AlexNet's and VGG's head: two 4,096-wide ReLU layers, each followed by dropout."""
    return nn.Sequential(nn.Linear(inputs, 4096), nn.ReLU(), nn.Dropout(DROPOUT),
                         nn.Linear(4096, 4096), nn.ReLU(), nn.Dropout(DROPOUT),
                         nn.Linear(4096, num_labels))


class _FlattenedMapClassifier(nn.Module):
    """A convolution stack whose last map, flattened, feeds fully connected layers of a fixed
    width: tf_cnn_benchmarks reshapes it to that width, so only its image size fits."""

    FIXED_INPUT_SIZE = True  # the zoo asks for no other image size
    image_size: int
    map_size: int

    def forward(self, pixel_values: torch.Tensor, labels: torch.Tensor | None = None):
        maps = self.features(pixel_values)
        if maps.shape[-2:] != (self.map_size, self.map_size):
            raise ValueError(f"{type(self).__name__} takes {self.image_size}x{self.image_size} "
                             f"images (a {self.map_size}x{self.map_size} last map), got "
                             f"{tuple(pixel_values.shape[2:])}")
        return classifier_output(self.classifier(maps.flatten(1)), labels)


class AlexNet(_FlattenedMapClassifier):
    image_size, map_size = 227, 6

    def __init__(self, num_labels: int = NUM_LABELS):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 11, 4), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(),
            nn.Conv2d(384, 384, 3, padding=1), nn.ReLU(),
            nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2))
        self.classifier = _fully_connected(256 * 6 * 6, num_labels)


class VGG16(_FlattenedMapClassifier):
    image_size, map_size = 224, 7

    def __init__(self, num_labels: int = NUM_LABELS):
        super().__init__()
        layers: list[nn.Module] = []
        inputs = 3
        for width, depth in zip(VGG_WIDTHS, VGG16_DEPTHS):
            for _ in range(depth):
                layers += [nn.Conv2d(inputs, width, 3, padding=1), nn.ReLU()]
                inputs = width
            layers.append(nn.MaxPool2d(2))
        self.features = nn.Sequential(*layers)
        self.classifier = _fully_connected(512 * 7 * 7, num_labels)


class ShiftBatchNorm2d(nn.BatchNorm2d):
    """tf.contrib's default batch norm: normalise, then add a learnt shift (beta), no learnt
    scale. TF's fused kernel gets a constant scale of 1; so does this one, as a buffer, which
    keeps it off the parameters and, with a scale given, on cuDNN's batch norm on a GPU."""

    def __init__(self, channels: int):
        super().__init__(channels, eps=1e-3, momentum=1e-3, affine=False)
        del self.weight, self.bias
        self.register_buffer("weight", torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))


def _conv(inputs: int, outputs: int, height: int, width: int | None = None, stride: int = 1,
          padding: int | tuple[int, int] | None = None) -> nn.Sequential:
    """InceptionV3's convolution: batch norm instead of a bias, then ReLU. Stride 1 pads
    'SAME', stride 2 is 'VALID'."""
    width = width or height
    if padding is None:
        padding = (height // 2, width // 2) if stride == 1 else 0
    return nn.Sequential(nn.Conv2d(inputs, outputs, (height, width), stride, padding, bias=False),
                         ShiftBatchNorm2d(outputs), nn.ReLU())


# InceptionV3's blocks as tf_cnn_benchmarks lists them: columns run side by side on the block's
# input and are concatenated. A column is a chain of convolutions, (filters, height[, width
# [, stride]]), after an optional pool; a list at its end forks it into parallel convolutions.
POOLS = {"avg": lambda: nn.AvgPool2d(3, 1, 1, count_include_pad=False),
         "max": lambda: nn.MaxPool2d(3, 1, 1), "max/2": lambda: nn.MaxPool2d(3, 2)}


def _block_a(pool_filters: int) -> list:  # 35x35
    return [[(64, 1)], [(48, 1), (64, 5)], [(64, 1), (96, 3), (96, 3)],
            ["avg", (pool_filters, 1)]]


def _block_c(filters: int) -> list:  # 17x17, 7x7 convolutions factored into 1x7 and 7x1
    return [[(192, 1)], [(filters, 1), (filters, 1, 7), (192, 7, 1)],
            [(filters, 1), (filters, 7, 1), (filters, 1, 7), (filters, 7, 1), (192, 1, 7)],
            ["avg", (192, 1)]]


def _block_e(pool: str) -> list:  # 8x8, 3x3 convolutions forked into 1x3 and 3x1
    return [[(320, 1)], [(384, 1), [(384, 1, 3), (384, 3, 1)]],
            [(448, 1), (384, 3), [(384, 1, 3), (384, 3, 1)]], [pool, (192, 1)]]


REDUCTION_B = [[(384, 3, 3, 2)], [(64, 1), (96, 3), (96, 3, 3, 2)], ["max/2"]]  # 35 -> 17
REDUCTION_D = [[(192, 1), (320, 3, 3, 2)],  # 17 -> 8
               [(192, 1), (192, 1, 7), (192, 7, 1), (192, 3, 3, 2)], ["max/2"]]
INCEPTION_V3_BLOCKS = [_block_a(32), _block_a(64), _block_a(64), REDUCTION_B, _block_c(128),
                       _block_c(160), _block_c(160), _block_c(192), REDUCTION_D,
                       _block_e("avg"), _block_e("max")]


class Column(nn.Module):
    def __init__(self, inputs: int, layers: list):
        super().__init__()
        chain: list[nn.Module] = []
        forks: list[nn.Module] = []
        for layer in layers:
            if isinstance(layer, str):
                chain.append(POOLS[layer]())
            elif isinstance(layer, list):
                forks = [_conv(inputs, *conv) for conv in layer]
            else:
                chain.append(_conv(inputs, *layer))
                inputs = layer[0]
        self.chain = nn.Sequential(*chain)
        self.forks = nn.ModuleList(forks)
        self.outputs = sum(conv[0] for conv in layers[-1]) if forks else inputs

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.chain(x)
        return torch.cat([fork(x) for fork in self.forks], 1) if self.forks else x


class InceptionBlock(nn.Module):
    def __init__(self, inputs: int, columns: list):
        super().__init__()
        self.columns = nn.ModuleList(Column(inputs, layers) for layers in columns)
        self.outputs = sum(column.outputs for column in self.columns)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([column(x) for column in self.columns], 1)


def inception_blocks(inputs: int, blocks: list) -> tuple[nn.Sequential, int]:
    """InceptionBlocks of `blocks`' columns one after the other, and their output channels."""
    chain = []
    for columns in blocks:
        chain.append(InceptionBlock(inputs, columns))
        inputs = chain[-1].outputs
    return nn.Sequential(*chain), inputs


class InceptionV3(nn.Module):
    def __init__(self, num_labels: int = NUM_LABELS):
        super().__init__()
        self.stem = nn.Sequential(  # 299 -> 149 -> 147 -> 147 -> 73 -> 73 -> 71 -> 35
            _conv(3, 32, 3, stride=2), _conv(32, 32, 3, padding=0), _conv(32, 64, 3),
            nn.MaxPool2d(3, 2), _conv(64, 80, 1), _conv(80, 192, 3, padding=0),
            nn.MaxPool2d(3, 2))
        self.blocks, inputs = inception_blocks(192, INCEPTION_V3_BLOCKS)
        self.classifier = nn.Linear(inputs, num_labels)

    def forward(self, pixel_values: torch.Tensor, labels: torch.Tensor | None = None):
        """The last 8x8 map's 8x8 average pool (a 299-px image's), as a global mean."""
        features = self.blocks(self.stem(pixel_values)).mean((2, 3))
        return classifier_output(self.classifier(features), labels)


# InceptionV4 (Szegedy et al., AAAI 2017) as tf_cnn_benchmarks' Inceptionv4Model builds it:
# the same convolutions (batch norm, shift only) and columns. (filters, height, width,
# stride, padding): stride-1 'VALID' convolutions give padding 0.
INCEPTION_V4_STEM = [
    [["max/2"], [(96, 3, 3, 2)]],  # 147 -> 73: 64 + 96 channels
    [[(64, 1), (96, 3, 3, 1, 0)], [(64, 1), (64, 7, 1), (64, 1, 7), (96, 3, 3, 1, 0)]],  # 71
    [[(192, 3, 3, 2)], ["max/2"]],  # 71 -> 35: 384 channels
]
INCEPTION_V4_A = [["avg", (96, 1)], [(96, 1)], [(64, 1), (96, 3)], [(64, 1), (96, 3), (96, 3)]]
INCEPTION_V4_REDUCTION_A = [["max/2"], [(384, 3, 3, 2)], [(192, 1), (224, 3), (256, 3, 3, 2)]]
INCEPTION_V4_B = [["avg", (128, 1)], [(384, 1)], [(192, 1), (224, 1, 7), (256, 7, 1)],
                  [(192, 1), (192, 1, 7), (224, 7, 1), (224, 1, 7), (256, 7, 1)]]
INCEPTION_V4_REDUCTION_B = [["max/2"], [(192, 1), (192, 3, 3, 2)],
                            [(256, 1), (256, 1, 7), (320, 7, 1), (320, 3, 3, 2)]]  # 17 -> 8
INCEPTION_V4_C = [["avg", (256, 1)], [(256, 1)], [(384, 1), [(256, 1, 3), (256, 3, 1)]],
                  [(384, 1), (448, 1, 3), (512, 3, 1), [(256, 3, 1), (256, 1, 3)]]]
INCEPTION_V4_BLOCKS = [*INCEPTION_V4_STEM, *[INCEPTION_V4_A] * 4, INCEPTION_V4_REDUCTION_A,
                       *[INCEPTION_V4_B] * 7, INCEPTION_V4_REDUCTION_B, *[INCEPTION_V4_C] * 3]
INCEPTION_V4_KEEP = 0.8  # the benchmark's dropout before the classifier (keep probability)


class InceptionV4(nn.Module):
    def __init__(self, num_labels: int = NUM_LABELS):
        super().__init__()
        self.stem = nn.Sequential(  # 299 -> 149 -> 147 -> 147
            _conv(3, 32, 3, stride=2), _conv(32, 32, 3, padding=0), _conv(32, 64, 3))
        self.blocks, inputs = inception_blocks(64, INCEPTION_V4_BLOCKS)
        self.dropout = nn.Dropout(1 - INCEPTION_V4_KEEP)
        self.classifier = nn.Linear(inputs, num_labels)

    def forward(self, pixel_values: torch.Tensor, labels: torch.Tensor | None = None):
        features = self.blocks(self.stem(pixel_values)).mean((2, 3))  # spatial mean
        return classifier_output(self.classifier(self.dropout(features)), labels)
