"""Convolution nets the zoo needs that transformers has no class for: ResNeXt and SE-ResNeXt
(Xie et al., CVPR 2017; Hu et al., CVPR 2018) as NVIDIA's DeepLearningExamples ConvNets train
them, whose published figures datasets/published_throughput.csv holds. The ResNet v1.5
layout (the stride in the 3x3 convolution), 3x3 convolutions in `groups` groups of
`width_per_group` channels doubling each stage, and, with squeeze-and-excitation, a gate on
each block's output before the residual sum (channels / 16 wide).

Built from torch.nn the way torchvision builds its ResNeXts (torchvision is not a dependency);
the forward pass takes `pixel_values` and `labels` and returns `.loss` and `.logits` like a
transformers image classifier, so that the zoo traces and trains them as it does the others.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import nn

EXPANSION = 4  # a bottleneck's output is 4x the width of a ResNet's 3x3 convolution
SE_REDUCTION = 16  # squeeze-and-excitation: the gate's hidden width is channels / 16
STAGE_WIDTHS = (64, 128, 256, 512)  # a ResNet's bottleneck widths; outputs are 4x these


class SqueezeExcitation(nn.Module):
    """Global average pool, two 1x1 layers, a sigmoid gate per channel."""

    def __init__(self, channels: int):
        super().__init__()
        self.squeeze = nn.Conv2d(channels, channels // SE_REDUCTION, 1)
        self.expand = nn.Conv2d(channels // SE_REDUCTION, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = self.expand(torch.relu(self.squeeze(x.mean((2, 3), keepdim=True))))
        return x * torch.sigmoid(gate)


class Bottleneck(nn.Module):
    def __init__(self, inputs: int, width: int, outputs: int, stride: int, groups: int,
                 squeeze_excitation: bool):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(inputs, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, width, 3, stride, 1, groups=groups, bias=False),
            nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, outputs, 1, bias=False), nn.BatchNorm2d(outputs),
            *([SqueezeExcitation(outputs)] if squeeze_excitation else []))
        self.shortcut = nn.Identity() if stride == 1 and inputs == outputs else nn.Sequential(
            nn.Conv2d(inputs, outputs, 1, stride, bias=False), nn.BatchNorm2d(outputs))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.shortcut(x))


def classifier_output(logits: torch.Tensor, labels: torch.Tensor | None) -> SimpleNamespace:
    """An image classifier's result as a transformers one gives it: `.logits`, and `.loss`
    (cross-entropy) where `labels` are given."""
    loss = None if labels is None else nn.functional.cross_entropy(logits, labels)
    return SimpleNamespace(loss=loss, logits=logits)


def residual_stages(inputs: int, depths, block,
                    strided_stages: tuple[int, ...] = (1, 2, 3)) -> tuple[list, int]:
    """A ResNet's stages of `depths` blocks at STAGE_WIDTHS, the first block of each of
    `strided_stages` halving the map: `block(inputs, stage width, stride)` gives a block and
    its output channels. The blocks, and the last one's output channels."""
    layers = []
    for stage, (depth, base) in enumerate(zip(depths, STAGE_WIDTHS)):
        for index in range(depth):
            layer, inputs = block(inputs, base, 2 if stage in strided_stages and index == 0
                                  else 1)
            layers.append(layer)
    return layers, inputs


def bottleneck_trunk(depths, groups: int = 1, width_per_group: int = 64,
                     squeeze_excitation: bool = False,
                     strided_stages: tuple[int, ...] = (1, 2, 3)) -> tuple[nn.Sequential, int]:
    """A ResNet v1.5 stem (7x7 convolution, max pool) and bottleneck stages of `depths`
    blocks, the first block of each of `strided_stages` halving the map; the trunk and its
    output channels. groups=1, width_per_group=64 is a ResNet's."""
    def bottleneck(inputs: int, base: int, stride: int):
        width = groups * width_per_group * base // 64
        return (Bottleneck(inputs, width, base * EXPANSION, stride, groups, squeeze_excitation),
                base * EXPANSION)

    stages, outputs = residual_stages(64, depths, bottleneck, strided_stages)
    return nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                         nn.MaxPool2d(3, 2, 1), *stages), outputs


class ResNeXt(nn.Module):
    def __init__(self, depths: list[int], groups: int, width_per_group: int,
                 squeeze_excitation: bool = False, num_labels: int = 1000):
        super().__init__()
        self.features, inputs = bottleneck_trunk(depths, groups, width_per_group,
                                                 squeeze_excitation)
        self.classifier = nn.Linear(inputs, num_labels)

    def forward(self, pixel_values: torch.Tensor, labels: torch.Tensor | None = None):
        return classifier_output(self.classifier(self.features(pixel_values).mean((2, 3))),
                                 labels)


class BasicBlock(nn.Module):
    """A ResNet-18/34 block: two 3x3 convolutions, the first carrying the stride."""

    def __init__(self, inputs: int, outputs: int, stride: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False), nn.BatchNorm2d(outputs),
            nn.ReLU(), nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False),
            nn.BatchNorm2d(outputs))
        self.shortcut = nn.Identity() if stride == 1 and inputs == outputs else nn.Sequential(
            nn.Conv2d(inputs, outputs, 1, stride, bias=False), nn.BatchNorm2d(outputs))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.shortcut(x))


class CifarResNet(nn.Module):
    """A ResNet on 32-px images as CIFAR training code writes it (kuangliu/pytorch-cifar, the
    ResNet-18 of most CIFAR-10 experiments): ImageNet's four stages of basic or bottleneck
    blocks behind a 3x3 stride-1 stem with no max pool, so the first stage runs at 32x32.
    An ImageNet stem (7x7 stride 2, max pool) would shrink the image to 8x8 before the first
    block and cut the work 13x: not the network anyone trains at this size."""

    FIXED_INPUT_SIZE = True  # the stem and the 4x4 last map are CIFAR's

    def __init__(self, layer_type: str, depths: list[int], num_labels: int = 10):
        super().__init__()
        def block(inputs: int, base: int, stride: int):
            if layer_type == "basic":
                return BasicBlock(inputs, base, stride), base
            return Bottleneck(inputs, base, base * EXPANSION, stride, 1, False), base * EXPANSION

        stages, outputs = residual_stages(64, depths, block)
        self.features = nn.Sequential(nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64),
                                      nn.ReLU(), *stages)
        self.classifier = nn.Linear(outputs, num_labels)

    def forward(self, pixel_values: torch.Tensor, labels: torch.Tensor | None = None):
        return classifier_output(self.classifier(self.features(pixel_values).mean((2, 3))),
                                 labels)
