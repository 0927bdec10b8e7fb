"""SSD300 v1.1 (Liu et al., ECCV 2016, with a ResNet-50 backbone) as NVIDIA's
DeepLearningExamples PyTorch/Detection/SSD trains it on COCO 2017, whose published training
throughput datasets/published_throughput.csv holds. The backbone is a ResNet-50 v1.5 cut
after conv4_x (layer3), whose first block keeps stride 1, so that a 300x300 image gives a
38x38x1024 map; five extra blocks (1x1 then 3x3 convolutions, batch norm after each) shrink
it to 19, 10, 5, 3 and 1; on each of the six maps a 3x3 convolution predicts, for 4 or 6
default boxes per cell, 4 box offsets and 81 class scores (80 COCO classes + background):
8,732 default boxes in all.

The training loss is DLE's: Smooth-L1 on the offsets of the positive default boxes plus
cross-entropy on the positives and on the hard negatives, the 3 negatives per positive the
network scores worst, per image, divided by its number of positives and averaged over the
batch. DLE's ranking of the negatives (two full sorts of the 8,732 losses) already has static
shapes; here the positives are masked out with `masked_fill` instead of boolean indexing, so
the whole step runs on the meta device.

Synthetic targets. DLE's input pipeline (DALI's BoxEncoder, IoU > 0.5, each object also taking
its best default box) matches each image's objects to default boxes before the model sees it.
DLE publishes no count of positives. A simulation of that matching on COCO's mix (7.3 objects
an image: 860,001 in the 117,266 annotated images; 41% small, 34% medium, 24% large;
log-uniform areas within each class, aspect ratios 1:3 to 3:1) gives about 25 positives an
image, and 28 with the objects enlarged 1.4x, about what DLE's random crops (0.3 to 1 of each
side) do on average. So an image here has POSITIVES_PER_IMAGE = 25 positives (0.3% of its
boxes): evenly spaced over the 8,732 boxes, shifted by the image's label, all of class
`labels mod 80 + 1`, each matched to an object that coincides with its default box (offsets
0). The count changes only the value of the loss, not the cost of the step: every box's loss
is computed and sorted whatever the count.

Built from torch.nn (torchvision is not a dependency); the forward pass takes `pixel_values`
and `labels` and returns `.loss` and `.logits` (the class scores, batch x 81 x 8,732) like the
zoo's image classifiers, plus `.box_offsets` (batch x 4 x 8,732).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch
from torch import nn
from torch.nn import functional as F

from profiler.zoo_convnets import bottleneck_trunk

IMAGE_SIZE = 300  # SSD300's input is fixed: the default boxes are laid out for it
# DLE's dboxes300_coco: the six maps' sizes and strides in pixels, the default boxes' scales
# in pixels (the ssd.pytorch ones; a map's boxes span scales[k] to scales[k + 1]) and their
# aspect ratios besides 1 (each ratio r gives a box r wide and one r tall).
FEATURE_SIZES = (38, 19, 10, 5, 3, 1)
STEPS = (8, 16, 32, 64, 100, 300)
SCALES = (21, 45, 99, 153, 207, 261, 315)
ASPECT_RATIOS = ((2,), (2, 3), (2, 3), (2, 3), (2,), (2,))
BOXES_PER_CELL = tuple(2 + 2 * len(r) for r in ASPECT_RATIOS)  # (4, 6, 6, 6, 4, 4)
# The six maps' channels (the first is ResNet-50's conv4_x) and the extra blocks' 1x1 widths.
FEATURE_CHANNELS = (1024, 512, 512, 256, 256, 256)
EXTRA_WIDTHS = (256, 256, 128, 128, 128)
BACKBONE_DEPTHS = (3, 4, 6)  # ResNet-50's conv2_x to conv4_x
# Box offsets are regressed in units of 0.1 (centre) and 0.2 (log size) of the default box.
SCALE_XY, SCALE_WH = 0.1, 0.2
NEGATIVES_PER_POSITIVE = 3
POSITIVES_PER_IMAGE = 25  # see the module docstring


def default_boxes() -> torch.Tensor:
    """SSD300's 8,732 default boxes, 4 x 8,732 (centre x, centre y, width, height as
    fractions of the image), in the order the heads emit their predictions: map by map, box
    shape by box shape, cell by cell."""
    columns = []
    for k, (size, step, ratios) in enumerate(zip(FEATURE_SIZES, STEPS, ASPECT_RATIOS)):
        small, large = SCALES[k] / IMAGE_SIZE, SCALES[k + 1] / IMAGE_SIZE
        shapes = [(small, small), (math.sqrt(small * large),) * 2]
        for ratio in ratios:
            shapes += [(small * math.sqrt(ratio), small / math.sqrt(ratio)),
                       (small / math.sqrt(ratio), small * math.sqrt(ratio))]
        centres = (torch.arange(size, dtype=torch.float32) + 0.5) * step / IMAGE_SIZE
        cy, cx = (c.flatten() for c in torch.meshgrid(centres, centres, indexing="ij"))
        for w, h in shapes:
            columns.append(torch.stack([cx, cy, torch.full_like(cx, w), torch.full_like(cy, h)]))
    return torch.cat(columns, 1).clamp(0, 1)


class BatchNorm2d(nn.BatchNorm2d):
    """nn.BatchNorm2d that also normalises a single value per channel in training: the last
    extra block's 1x1 map at batch 1, the batch the zoo traces a sample at, which
    F.batch_norm refuses (DLE trains at 32 or more a GPU). The operators are the same; one
    value has no variance, so it leaves the running statistics as they are."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or x.numel() > x.shape[1]:
            return super().forward(x)
        return torch.batch_norm(x, self.weight, self.bias, None, None, True, 0.0, self.eps,
                                torch.backends.cudnn.enabled)


def _extra_block(inputs: int, width: int, outputs: int, stride: int, padding: int):
    return nn.Sequential(
        nn.Conv2d(inputs, width, 1, bias=False), BatchNorm2d(width), nn.ReLU(),
        nn.Conv2d(width, outputs, 3, stride, padding, bias=False), BatchNorm2d(outputs),
        nn.ReLU())


class SSD300(nn.Module):
    FIXED_INPUT_SIZE = True  # the zoo asks for no other image size

    def __init__(self, num_labels: int = 81, positives_per_image: int = POSITIVES_PER_IMAGE):
        super().__init__()
        self.num_labels = num_labels
        self.positives_per_image = positives_per_image
        # conv4_x keeps conv3_x's stride: 38x38 at 300 px
        self.backbone, _ = bottleneck_trunk(BACKBONE_DEPTHS, strided_stages=(1,))
        # 38 -> 19 -> 10 -> 5 with stride 2, then 5 -> 3 -> 1 with unpadded 3x3 convolutions
        self.extras = nn.ModuleList(
            _extra_block(i, w, o, 2 if k < 3 else 1, 1 if k < 3 else 0)
            for k, (i, w, o) in enumerate(zip(FEATURE_CHANNELS, EXTRA_WIDTHS,
                                              FEATURE_CHANNELS[1:])))
        self.box_heads = nn.ModuleList(nn.Conv2d(c, n * 4, 3, padding=1)
                                       for c, n in zip(FEATURE_CHANNELS, BOXES_PER_CELL))
        self.class_heads = nn.ModuleList(nn.Conv2d(c, n * num_labels, 3, padding=1)
                                         for c, n in zip(FEATURE_CHANNELS, BOXES_PER_CELL))
        for module in [*self.extras, *self.box_heads, *self.class_heads]:  # DLE's init
            for param in module.parameters():
                if param.dim() > 1:
                    nn.init.xavier_uniform_(param)
        # the loss's constant, not a parameter (DLE keeps it in its Loss module)
        self.register_buffer("default_boxes", default_boxes(), persistent=False)

    def features(self, pixel_values: torch.Tensor) -> list[torch.Tensor]:
        """The six maps the heads read: 38, 19, 10, 5, 3 and 1 cells wide at 300 px."""
        maps = [self.backbone(pixel_values)]
        for block in self.extras:
            maps.append(block(maps[-1]))
        return maps

    def synthetic_targets(self, labels: torch.Tensor):
        """Each image's matched default boxes (see the module docstring): a positive mask,
        batch x 8,732, the class of every box (0, background, where not positive) and the
        matched boxes, batch x 4 x 8,732 (the default boxes themselves)."""
        boxes = self.default_boxes.shape[1]
        spacing = boxes // self.positives_per_image
        first = torch.arange(self.positives_per_image, device=labels.device) * spacing
        index = first + (labels % spacing)[:, None]
        positive = torch.zeros(len(labels), boxes, dtype=torch.bool, device=labels.device)
        positive = positive.scatter(1, index, True)
        classes = (labels % (self.num_labels - 1) + 1)[:, None]
        target = torch.where(positive, classes, torch.zeros_like(classes))
        return positive, target, self.default_boxes.expand(len(labels), -1, -1)

    def loss(self, box_offsets, logits, positive, target, matched) -> torch.Tensor:
        """DLE's SSD loss: Smooth-L1 on the positives' encoded offsets, cross-entropy on the
        positives and the 3x as many hardest negatives, per image over its positives."""
        defaults = self.default_boxes
        encoded = torch.cat([(matched[:, :2] - defaults[:2]) / defaults[2:] / SCALE_XY,
                             (matched[:, 2:] / defaults[2:]).log() / SCALE_WH], 1)
        positives = positive.sum(1)
        localisation = F.smooth_l1_loss(box_offsets, encoded, reduction="none").sum(1)
        localisation = (localisation * positive).sum(1)
        confidence = F.cross_entropy(logits, target, reduction="none")
        # rank the negatives by their loss: the rank of each box in a descending sort. No
        # gradient flows through a rank, so the sort runs detached and saves nothing for the
        # backward pass (DLE's saves its indices, which die with the unused sorted values)
        ranked = confidence.detach().masked_fill(positive, 0)
        rank = ranked.sort(1, descending=True)[1].sort(1)[1]
        negatives = (NEGATIVES_PER_POSITIVE * positives).clamp(max=positive.shape[1])
        mined = positive | (rank < negatives[:, None])
        total = localisation + (confidence * mined).sum(1)
        return (total * (positives > 0) / positives.clamp(min=1)).mean()

    def forward(self, pixel_values: torch.Tensor, labels: torch.Tensor | None = None):
        maps = self.features(pixel_values)
        batch = len(pixel_values)
        box_offsets = torch.cat([head(m).reshape(batch, 4, -1)
                                 for head, m in zip(self.box_heads, maps)], 2)
        logits = torch.cat([head(m).reshape(batch, self.num_labels, -1)
                            for head, m in zip(self.class_heads, maps)], 2)
        if logits.shape[2] != self.default_boxes.shape[1]:
            raise ValueError(f"SSD300 takes {IMAGE_SIZE}x{IMAGE_SIZE} images, got "
                             f"{tuple(pixel_values.shape[2:])}")
        loss = None
        if labels is not None:
            loss = self.loss(box_offsets, logits, *self.synthetic_targets(labels))
        return SimpleNamespace(loss=loss, logits=logits, box_offsets=box_offsets)
