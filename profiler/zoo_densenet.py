"""DenseNet (Huang et al., CVPR 2017) as torchvision builds it, which transformers has no
class for: a 7x7 stride-2 stem and max pool, four dense blocks whose every layer
(batch norm, ReLU, 1x1 convolution to 4 x growth channels, batch norm, ReLU, 3x3 convolution
to `growth` channels) reads the concatenation of all earlier outputs of its block, and
transitions (batch norm, ReLU, 1x1 convolution halving the channels, 2x2 average pool)
between blocks. The concatenations make it a memory-traffic-heavy net for its FLOPs: each
layer's normalisation and ReLU run over every channel before it, which the operator split
of its card shows.

The forward pass takes `pixel_values` and `labels` and returns `.loss` and `.logits` like a
transformers image classifier, so that the zoo traces and trains it as it does the others.
"""

from __future__ import annotations

import torch
from torch import nn

from profiler.zoo_convnets import classifier_output

BOTTLENECK_WIDTH = 4  # a dense layer's 1x1 convolution widens to 4 x growth channels
COMPRESSION = 0.5  # a transition halves the channels


class DenseLayer(nn.Module):
    def __init__(self, inputs: int, growth: int):
        super().__init__()
        width = BOTTLENECK_WIDTH * growth
        self.body = nn.Sequential(
            nn.BatchNorm2d(inputs), nn.ReLU(), nn.Conv2d(inputs, width, 1, bias=False),
            nn.BatchNorm2d(width), nn.ReLU(), nn.Conv2d(width, growth, 3, 1, 1, bias=False))

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        return self.body(torch.cat(features, 1))


class DenseBlock(nn.Module):
    def __init__(self, inputs: int, layers: int, growth: int):
        super().__init__()
        self.layers = nn.ModuleList(DenseLayer(inputs + i * growth, growth)
                                    for i in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for layer in self.layers:
            features.append(layer(features))
        return torch.cat(features, 1)


def transition(inputs: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.BatchNorm2d(inputs), nn.ReLU(),
                         nn.Conv2d(inputs, outputs, 1, bias=False), nn.AvgPool2d(2, 2))


class DenseNet(nn.Module):
    def __init__(self, block_layers: list[int], growth: int, stem_channels: int,
                 num_labels: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(3, stem_channels, 7, 2, 3, bias=False),
                                   nn.BatchNorm2d(stem_channels), nn.ReLU(),
                                   nn.MaxPool2d(3, 2, 1)]
        channels = stem_channels
        for index, count in enumerate(block_layers):
            layers.append(DenseBlock(channels, count, growth))
            channels += count * growth
            if index < len(block_layers) - 1:
                layers.append(transition(channels, int(channels * COMPRESSION)))
                channels = int(channels * COMPRESSION)
        layers += [nn.BatchNorm2d(channels), nn.ReLU()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(channels, num_labels)

    def forward(self, pixel_values: torch.Tensor, labels: torch.Tensor | None = None):
        return classifier_output(self.classifier(self.features(pixel_values).mean((2, 3))),
                                 labels)
