"""Mask R-CNN (He et al., ICCV 2017) with a ResNet-50-FPN backbone (Lin et al., CVPR 2017) as
NVIDIA's DeepLearningExamples train it on COCO, whose published training throughput
datasets/published_throughput.csv holds (PyTorch/Segmentation/MaskRCNN/README.md@d29920a8,
PyTorch 19.02 container). DLE's code is a fork of facebookresearch/maskrcnn-benchmark: the
network is pytorch/configs/e2e_mask_rcnn_R_50_FPN_1x.yaml@b1ae8dd4 (the index holds no
version at d29920a8; b1ae8dd4's README is older) over maskrcnn_benchmark/config/defaults.py,
built by maskrcnn_benchmark/modeling/ (backbone/, rpn/, roi_heads/, poolers.py) and
layers/batch_norm.py, read at the commits the index holds: 7a8544e0, b1ae8dd4, 70c51ad7,
9a36fc31 and, for rpn/anchor_generator.py and the sampler, d29920a8; their layers agree.

The recipe (the yaml; scripts/train.sh, "8 V100 x 4 batch_per_gpu"): coco_2014_train plus
coco_2014_valminusminival, COCO 2017 train's 118,287 images, of which COCODataset keeps the
117,266 with annotations; 45,000 iterations of 32 images (4 a GPU on 8), 1,440,000 images or
12.3 epochs (maskrcnn-benchmark's 1x, 90,000 x 16, which the README's text quotes, is the
same 1,440,000); images resized to a short side of 800
and a long side of at most 1333 (INPUT.MIN_SIZE_TRAIN, MAX_SIZE_TRAIN), a batch padded to
multiples of 32 (DATALOADER.SIZE_DIVISIBILITY), landscape and portrait images batched apart.

The network. ResNet-50 as MSRA trained it (RESNETS.STRIDE_IN_1X1: a stage's stride is in its
first 1x1 convolution, so its 3x3 runs at the reduced size: 9.0 GFLOPs fewer than ResNet
v1.5's at 800x1216), with FrozenBatchNorm2d after every convolution: a fixed per-channel scale
and shift kept as buffers, not parameters. The stem and res2 are frozen (FREEZE_CONV_BODY_AT
2): their 222,400 weights get no gradient and backward stops at res3. An FPN (256 channels,
1x1 laterals, 3x3 outputs) gives P2 to P5, and P6 by subsampling P5. The RPN (a 3x3
convolution shared by the levels; 3 anchors a cell, one size a level from 32 to 512, ratios
1:2, 1:1, 2:1) learns from 256 anchors an image, at most half positive (IoU >= 0.7 or an
object's best; negative below 0.3; anchors crossing the border ignored): BCE and smooth-L1
(beta 1/9). Proposals: each level's 2,000 best boxes, NMS at 0.7, the best over the levels,
and the objects' own boxes. 512 of them an image, at most a quarter positive (IoU >= 0.5),
go through RoIAlign (7x7, 2x2 samples a bin, on P2 to P5 by size: FPN's eq. 1), two
1,024-wide layers, 81 class scores and 81 x 4 box offsets: cross-entropy and smooth-L1 (beta
1) over the 512. The positive ones go through RoIAlign at 14x14, four 3x3 convolutions, a 2x2
deconvolution and a 1x1 to 81 28x28 mask logits: BCE on their class's mask against their
object's mask cropped to the RoI. The loss is the five terms' sum. 44,347,573 parameters,
44,125,173 of them trained.

Fixed counts instead of data-dependent ones, so that the whole step runs on the meta device:

- No NMS: the proposals are the 1,000 best by objectness of each level's 2,000 best. NMS
  only thins a list that carries no gradient (a fused kernel, small next to the
  convolutions); what the heads cost depends on how many RoIs they see, fixed anyway.
  1,000 an image is maskrcnn-benchmark's: FPN_POST_NMS_TOP_N_TRAIN, 2,000, counts a GPU's
  whole batch and was set for 2 images a GPU; DLE's yaml keeps 2,000 at 4 (500 an image, so
  its heads see about 507 RoIs rather than 512), a later one (yaml@4b9c90dd) sets 4,000.
  Here an image's work does not depend on the batch.
- Sampling takes the top of random keys (topk), positives first: 128 positive and 256
  negative slots an image for the RPN, masked to the sampler's counts; exactly 512 RoIs, at
  most 128 of them positive (1,007 candidates leave enough negatives to fill the rest).
- The mask head sees MASK_ROIS = 128 RoIs an image, the cap the positive fraction sets
  (512 x 0.25); slots past the image's positives weigh 0 in the loss. The reference sees the
  image's positives, up to 128: fewer where an image has few objects, so this is the mask
  head's most. At 1.06 GFLOPs an RoI forward it is 27% of the forward pass.
- RoIAlign is bilinear sampling (F.grid_sample at 2x2 points a bin) then a 2x2 mean: it
  writes the samples before averaging them, and the backward pass sends them back, about
  1 GB a step (5% of the step's bytes) that DLE's fused kernel does not move.
- An RoI's FPN level follows its size in the reference; here the RoIs, sorted by area, go a
  quarter each to P2 (the smallest) through P5. An RoI costs the same on any level, and every
  level's map is read, and its gradient written, whatever its share.
- Every image fills the padded canvas (the reference clips and drops anchors at each image's
  own size).

Synthetic targets (`synthetic_batch`): 7 objects an image (COCO 2017 train's 860,001
annotations in its 117,266 annotated images are 7.3 an image, a few of them crowd regions DLE
drops), of random classes at random places, of COCO's sizes (41% small, 34% medium, 24% large
by COCO's areas on an image 480 high, scaled to the input; 1:3 to 3:1), each with an elliptic
28x28 mask in its box (DLE rasterises the polygons; here a positive RoI's target is its
object's mask resampled into the RoI). The images are 800x1216, a typical padded batch:
COCO's images are at most 640 on a side, its commonest landscape shapes, 640x480 (4:3) and
640x427 (3:2), resize to 800x1067 and 800x1199 (padded to 1088 and 1216), and DLE pads a
batch of 4 (landscape and portrait apart) to its widest: 1216 as soon as one is 3:2 or wider,
up to 1344 (mmdetection counts FLOPs at 1280x800). The card's image_size is the short side,
800; the work grows with the padded area.

Built from torch.nn (torchvision is not a dependency), random init; the forward pass takes
`pixel_values`, `gt_boxes`, `gt_labels` and `gt_masks` and returns `.loss`, `.logits` (the
sampled RoIs' class scores, batch x 512 x 81) and `.losses` (the five terms).
"""

from __future__ import annotations

import math
from itertools import accumulate
from types import SimpleNamespace

import torch
from torch import nn
from torch.nn import functional as F

from profiler.zoo_convnets import EXPANSION, STAGE_WIDTHS, residual_stages

IMAGE_HEIGHT, IMAGE_WIDTH = 800, 1216  # a typical padded batch (see the module docstring)
SIZE_DIVISIBILITY = 32  # DATALOADER.SIZE_DIVISIBILITY
COCO_HEIGHT = 480  # the short side of COCO's commonest image shape, 640x480
DEPTHS = (3, 4, 6, 3)  # ResNet-50's res2 to res5
STEM_WIDTH = 64  # the stem's 7x7 convolution's channels (RESNETS.STEM_OUT_CHANNELS)
FPN_CHANNELS = 256  # MODEL.BACKBONE.OUT_CHANNELS
NUM_LABELS = 81  # 80 COCO classes and background (ROI_BOX_HEAD.NUM_CLASSES)
# RPN: one anchor size a level P2 to P6, at the levels' strides, three aspect ratios.
ANCHOR_SIZES = (32, 64, 128, 256, 512)
ANCHOR_STRIDES = (4, 8, 16, 32, 64)
ASPECT_RATIOS = (0.5, 1.0, 2.0)
RPN_FG_IOU, RPN_BG_IOU = 0.7, 0.3  # an anchor's IoU to be positive, below it negative
RPN_BATCH, RPN_POSITIVE_FRACTION = 256, 0.5  # anchors an image the RPN loss samples
RPN_BETA = 1 / 9  # the RPN's smooth-L1 beta
PRE_NMS_TOP_N = 2000  # RPN.PRE_NMS_TOP_N_TRAIN, a level
POST_NMS_TOP_N = 1000  # proposals an image (see the module docstring)
BBOX_XFORM_CLIP = math.log(1000 / 16)  # the largest log-scale change a decoded box takes
ROI_BATCH, ROI_POSITIVE_FRACTION = 512, 0.25  # ROI_HEADS.BATCH_SIZE_PER_IMAGE, its positives
ROI_FG_IOU = 0.5  # an RoI's IoU to be positive (below it, background)
MASK_ROIS = int(ROI_BATCH * ROI_POSITIVE_FRACTION)  # 128: see the module docstring
BOX_WEIGHTS = (10.0, 10.0, 5.0, 5.0)  # ROI_HEADS.BBOX_REG_WEIGHTS
POOLER_SCALES = (1 / 4, 1 / 8, 1 / 16, 1 / 32)  # P2 to P5
SAMPLING_RATIO = 2  # RoIAlign's sample points a bin, each way
BOX_POOL, MASK_POOL, MASK_RESOLUTION = 7, 14, 28  # RoIAlign's bins a side; the masks' side
MLP_HEAD_DIM = 1024  # the box head's two layers (ROI_BOX_HEAD.MLP_HEAD_DIM)
MASK_CONVS = 4  # the mask head's 3x3 convolutions (ROI_MASK_HEAD.CONV_LAYERS)
OBJECTS_PER_IMAGE = 7  # see the module docstring
# COCO's object sizes (square roots of areas, in pixels of an image 480 high): small, medium
# and large, with their shares of the objects.
OBJECT_SIDES = ((8, 32), (32, 96), (96, 480))
OBJECT_SHARES = (0.41, 0.34, 0.24)  # profiler/zoo_detection.py's COCO figures
MAX_ASPECT = 3.0  # objects from 1:3 to 3:1


class FrozenBatchNorm2d(nn.Module):
    """maskrcnn-benchmark's: batch norm with fixed statistics and affine, kept as buffers (no
    parameters) and applied as a per-channel scale and shift."""

    def __init__(self, channels: int):
        super().__init__()
        for name, value in (("weight", 1.0), ("bias", 0.0), ("running_mean", 0.0),
                            ("running_var", 1.0)):
            self.register_buffer(name, torch.full((channels,), value))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = self.weight * self.running_var.rsqrt()
        shift = self.bias - self.running_mean * scale
        return x * scale[:, None, None] + shift[:, None, None]


class Bottleneck(nn.Module):
    """An MSRA ResNet bottleneck: the stride in the first 1x1 convolution, frozen batch norm.
    (profiler/zoo_convnets.py's is ResNet v1.5's, stride in the 3x3, with trained batch norm.)"""

    def __init__(self, inputs: int, width: int, outputs: int, stride: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(inputs, width, 1, stride, bias=False), FrozenBatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, width, 3, 1, 1, bias=False), FrozenBatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, outputs, 1, bias=False), FrozenBatchNorm2d(outputs))
        self.shortcut = nn.Identity() if inputs == outputs else nn.Sequential(
            nn.Conv2d(inputs, outputs, 1, stride, bias=False), FrozenBatchNorm2d(outputs))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.shortcut(x))


def resnet50_stages() -> nn.ModuleList:
    """res2 to res5, each an nn.Sequential of its blocks."""
    def block(inputs: int, base: int, stride: int):
        return Bottleneck(inputs, base, base * EXPANSION, stride), base * EXPANSION

    blocks, _ = residual_stages(STEM_WIDTH, DEPTHS, block)
    ends = list(accumulate(DEPTHS))
    return nn.ModuleList(nn.Sequential(*blocks[start:end])
                         for start, end in zip([0, *ends[:-1]], ends))


def cell_anchors(stride: int, size: int) -> list[tuple[float, ...]]:
    """maskrcnn-benchmark's generate_anchors for one size: a box (x1, y1, x2, y2) a ratio
    about the first cell's centre, its sides rounded as Detectron's are."""
    centre = (stride - 1) / 2
    anchors = []
    for ratio in ASPECT_RATIOS:
        width = round(math.sqrt(stride * stride / ratio))
        half_w = (width * size / stride - 1) / 2
        half_h = (round(width * ratio) * size / stride - 1) / 2
        anchors.append((centre - half_w, centre - half_h, centre + half_w, centre + half_h))
    return anchors


def box_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """IoU of boxes a (..., N, 4) and b (..., M, 4), (..., N, M), with maskrcnn-benchmark's
    inclusive pixel sides (a side is x2 - x1 + 1)."""
    area_a = (a[..., 2] - a[..., 0] + 1) * (a[..., 3] - a[..., 1] + 1)
    area_b = (b[..., 2] - b[..., 0] + 1) * (b[..., 3] - b[..., 1] + 1)
    low = torch.max(a[..., :, None, :2], b[..., None, :, :2])
    high = torch.min(a[..., :, None, 2:], b[..., None, :, 2:])
    overlap = (high - low + 1).clamp(min=0).prod(-1)
    return overlap / (area_a[..., :, None] + area_b[..., None, :] - overlap)


def _centres(boxes: torch.Tensor):
    widths = boxes[..., 2] - boxes[..., 0] + 1
    heights = boxes[..., 3] - boxes[..., 1] + 1
    return boxes[..., 0] + widths / 2, boxes[..., 1] + heights / 2, widths, heights


def encode(matched: torch.Tensor, boxes: torch.Tensor, weights) -> torch.Tensor:
    """BoxCoder.encode: the offsets (x, y, log w, log h, scaled by `weights`) that take
    `boxes` to `matched`."""
    cx, cy, w, h = _centres(boxes)
    mx, my, mw, mh = _centres(matched)
    wx, wy, ww, wh = weights
    return torch.stack([wx * (mx - cx) / w, wy * (my - cy) / h, ww * torch.log(mw / w),
                        wh * torch.log(mh / h)], -1)


def decode(deltas: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
    """BoxCoder.decode at the RPN's unit weights: `boxes` moved by `deltas`."""
    cx, cy, w, h = _centres(boxes)
    dx, dy, dw, dh = deltas.unbind(-1)
    x, y = cx + dx * w, cy + dy * h
    w = w * dw.clamp(max=BBOX_XFORM_CLIP).exp()
    h = h * dh.clamp(max=BBOX_XFORM_CLIP).exp()
    return torch.stack([x - w / 2, y - h / 2, x + w / 2 - 1, y + h / 2 - 1], -1)


def gather_rows(values: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """values (B, N, *rest) at index (B, K): (B, K, *rest)."""
    return values[torch.arange(len(index), device=index.device)[:, None], index]


def roi_align(feature: torch.Tensor, boxes: torch.Tensor, resolution: int) -> torch.Tensor:
    """maskrcnn-benchmark's ROIAlign of `boxes` (B, R, 4, in the map's pixels) on `feature`
    (B, C, H, W): each bin the mean of SAMPLING_RATIO x SAMPLING_RATIO bilinear samples,
    (B, R, C, resolution, resolution)."""
    batch, rois = boxes.shape[:2]
    points = resolution * SAMPLING_RATIO
    steps = (torch.arange(points, device=boxes.device) + 0.5) / points
    x1, y1, x2, y2 = boxes.unbind(-1)
    xs = x1[..., None] + steps * (x2 - x1).clamp(min=1)[..., None]  # (B, R, points)
    ys = y1[..., None] + steps * (y2 - y1).clamp(min=1)[..., None]
    height, width = feature.shape[-2:]
    # grid_sample's -1 and 1 are the centres of the first and last pixels (align_corners)
    grid = torch.stack(torch.broadcast_tensors((2 * xs / (width - 1) - 1)[..., None, :],
                                               (2 * ys / (height - 1) - 1)[..., None]), -1)
    samples = F.grid_sample(feature, grid.reshape(batch, rois * points, points, 2),
                            padding_mode="border", align_corners=True)
    bins = F.avg_pool2d(samples, SAMPLING_RATIO)  # (B, C, R * resolution, resolution)
    return bins.unflatten(2, (rois, resolution)).transpose(1, 2)


def pool(maps: list[torch.Tensor], rois: torch.Tensor, resolution: int) -> torch.Tensor:
    """RoIAlign of `rois` (B, R, 4, smallest first) on P2 to P5, a quarter of them each
    (see the module docstring): (B * R, C, resolution, resolution)."""
    parts = rois.tensor_split(len(POOLER_SCALES), 1)
    return torch.cat([roi_align(level, part * scale, resolution)
                      for level, scale, part in zip(maps, POOLER_SCALES, parts)], 1).flatten(0, 1)


def by_size(boxes: torch.Tensor, *others: torch.Tensor) -> list[torch.Tensor]:
    """`boxes` (B, R, 4) and `others` (B, R, ...) reordered by the boxes' areas, smallest
    first."""
    order = ((boxes[..., 2] - boxes[..., 0]) * (boxes[..., 3] - boxes[..., 1])).argsort(1)
    return [gather_rows(values, order) for values in (boxes, *others)]


class MaskRCNN(nn.Module):
    """Mask R-CNN R-50-FPN with DLE's recipe; the counts are per image (module docstring)."""

    FIXED_INPUT_SIZE = True  # the card is computed at one padded size, 800x1216

    def __init__(self, num_labels: int = NUM_LABELS, pre_nms_top_n: int = PRE_NMS_TOP_N,
                 post_nms_top_n: int = POST_NMS_TOP_N, rois_per_image: int = ROI_BATCH,
                 positive_fraction: float = ROI_POSITIVE_FRACTION,
                 mask_rois_per_image: int = MASK_ROIS):
        super().__init__()
        self.num_labels = num_labels
        self.pre_nms_top_n, self.post_nms_top_n = pre_nms_top_n, post_nms_top_n
        self.rois_per_image, self.mask_rois_per_image = rois_per_image, mask_rois_per_image
        self.positive_rois = int(rois_per_image * positive_fraction)
        self.stem = nn.Sequential(nn.Conv2d(3, STEM_WIDTH, 7, 2, 3, bias=False),
                                  FrozenBatchNorm2d(STEM_WIDTH), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.stages = resnet50_stages()
        for param in [*self.stem.parameters(), *self.stages[0].parameters()]:
            param.requires_grad_(False)  # FREEZE_CONV_BODY_AT 2: the stem and res2
        widths = [base * EXPANSION for base in STAGE_WIDTHS]
        self.fpn_lateral = nn.ModuleList(nn.Conv2d(w, FPN_CHANNELS, 1) for w in widths)
        self.fpn_output = nn.ModuleList(nn.Conv2d(FPN_CHANNELS, FPN_CHANNELS, 3, padding=1)
                                        for _ in widths)
        anchors = len(ASPECT_RATIOS)
        self.rpn_conv = nn.Conv2d(FPN_CHANNELS, FPN_CHANNELS, 3, padding=1)
        self.rpn_logits = nn.Conv2d(FPN_CHANNELS, anchors, 1)
        self.rpn_deltas = nn.Conv2d(FPN_CHANNELS, anchors * 4, 1)
        self.fc6 = nn.Linear(FPN_CHANNELS * BOX_POOL ** 2, MLP_HEAD_DIM)
        self.fc7 = nn.Linear(MLP_HEAD_DIM, MLP_HEAD_DIM)
        self.cls_score = nn.Linear(MLP_HEAD_DIM, num_labels)
        self.bbox_pred = nn.Linear(MLP_HEAD_DIM, num_labels * 4)  # class-specific offsets
        self.mask_head = nn.Sequential(
            *[layer for _ in range(MASK_CONVS) for layer in
              (nn.Conv2d(FPN_CHANNELS, FPN_CHANNELS, 3, padding=1), nn.ReLU())],
            nn.ConvTranspose2d(FPN_CHANNELS, FPN_CHANNELS, 2, 2), nn.ReLU(),
            nn.Conv2d(FPN_CHANNELS, num_labels, 1))

    def features(self, pixel_values: torch.Tensor) -> list[torch.Tensor]:
        """P2 to P6 (FPN_CHANNELS each, strides 4 to 64)."""
        x = self.stem(pixel_values)
        body = []
        for stage in self.stages:
            x = stage(x)
            body.append(x)
        inner = self.fpn_lateral[-1](body[-1])
        maps = [self.fpn_output[-1](inner)]
        for feature, lateral, output in zip(body[-2::-1], self.fpn_lateral[-2::-1],
                                            self.fpn_output[-2::-1]):
            inner = lateral(feature) + F.interpolate(inner, scale_factor=2, mode="nearest")
            maps.insert(0, output(inner))
        return maps + [F.max_pool2d(maps[-1], 1, 2)]  # P6: LastLevelMaxPool

    def rpn(self, maps: list[torch.Tensor]):
        """Objectness logits (B, anchors) and offsets (B, anchors, 4) over all levels, in the
        anchors' order (level, cell, ratio); the anchors (anchors, 4); anchors a level."""
        logits, deltas, anchors = [], [], []
        for level, stride, size in zip(maps, ANCHOR_STRIDES, ANCHOR_SIZES):
            batch, _, height, width = level.shape
            hidden = F.relu(self.rpn_conv(level))
            logits.append(self.rpn_logits(hidden).permute(0, 2, 3, 1).reshape(batch, -1))
            deltas.append(self.rpn_deltas(hidden).view(batch, -1, 4, height, width)
                          .permute(0, 3, 4, 1, 2).reshape(batch, -1, 4))
            ys, xs = torch.meshgrid(torch.arange(height, device=level.device) * stride,
                                    torch.arange(width, device=level.device) * stride,
                                    indexing="ij")
            shifts = torch.stack([xs, ys, xs, ys], -1).reshape(-1, 1, 4)
            cells = torch.tensor(cell_anchors(stride, size), device=level.device)
            anchors.append((shifts + cells).reshape(-1, 4))
        return (torch.cat(logits, 1), torch.cat(deltas, 1), torch.cat(anchors),
                [len(a) for a in anchors])

    def rpn_loss(self, logits, deltas, anchors, gt_boxes, image_size):
        """Objectness BCE and offsets' smooth-L1 on RPN_BATCH sampled anchors an image."""
        height, width = image_size
        with torch.no_grad():
            iou = box_iou(gt_boxes, anchors)  # (B, objects, anchors)
            best, matched = iou.max(1)
            # each object's best anchors are positive whatever their IoU
            positive = (best >= RPN_FG_IOU) | (iou == iou.max(2, keepdim=True).values).any(1)
            inside = ((anchors[:, :2] >= 0).all(1) & (anchors[:, 2] < width)
                      & (anchors[:, 3] < height))
            negative = (best < RPN_BG_IOU) & ~positive & inside
            positive &= inside
            keys = torch.rand(best.shape, device=best.device)
            positives = int(RPN_BATCH * RPN_POSITIVE_FRACTION)
            pos_slots = keys.masked_fill(~positive, -1).topk(positives, 1).indices
            pos_valid = positive.gather(1, pos_slots)
            neg_slots = keys.masked_fill(~negative, -1).topk(RPN_BATCH, 1).indices
            room = RPN_BATCH - pos_valid.sum(1, keepdim=True)
            neg_valid = negative.gather(1, neg_slots) & (
                torch.arange(RPN_BATCH, device=room.device) < room)
            targets = encode(gather_rows(gt_boxes, matched.gather(1, pos_slots)),
                             anchors[pos_slots], (1.0, 1.0, 1.0, 1.0))
        weight = torch.cat([pos_valid, neg_valid], 1).float()
        labels = torch.cat([pos_valid, torch.zeros_like(neg_valid)], 1).float()
        sampled = weight.sum()
        scores = logits.gather(1, torch.cat([pos_slots, neg_slots], 1))
        objectness = (F.binary_cross_entropy_with_logits(scores, labels, reduction="none")
                      * weight).sum() / sampled
        offsets = F.smooth_l1_loss(gather_rows(deltas, pos_slots), targets, reduction="none",
                                   beta=RPN_BETA).sum(-1)
        return objectness, (offsets * pos_valid).sum() / sampled

    @torch.no_grad()
    def proposals(self, logits, deltas, anchors, per_level, image_size) -> torch.Tensor:
        """The post_nms_top_n best boxes an image (B, post_nms_top_n, 4) of each level's
        pre_nms_top_n best, decoded and clipped to the image (no NMS: module docstring)."""
        height, width = image_size
        scores, boxes = [], []
        for level_logits, level_deltas, level_anchors in zip(
                logits.split(per_level, 1), deltas.split(per_level, 1), anchors.split(per_level)):
            # the logits rank as their sigmoids do
            best, index = level_logits.topk(min(self.pre_nms_top_n, len(level_anchors)), 1)
            decoded = decode(gather_rows(level_deltas, index), level_anchors[index])
            limit = decoded.new_tensor([width - 1, height - 1, width - 1, height - 1])
            boxes.append(torch.min(decoded.clamp(min=0), limit))
            scores.append(best)
        keep = torch.cat(scores, 1).topk(self.post_nms_top_n, 1).indices
        return gather_rows(torch.cat(boxes, 1), keep)

    @torch.no_grad()
    def sample_rois(self, proposals, gt_boxes, gt_labels):
        """rois_per_image RoIs an image from the proposals and the objects' boxes, the
        positives (at most positive_rois) first: their boxes (B, R, 4), classes (0:
        background) and matched objects (B, R)."""
        candidates = torch.cat([proposals, gt_boxes], 1)
        best, matched = box_iou(candidates, gt_boxes).max(2)
        labels = gt_labels.gather(1, matched).masked_fill(best < ROI_FG_IOU, 0)
        positive = labels > 0
        keys = torch.rand(labels.shape, device=labels.device)
        chosen = keys.masked_fill(~positive, -1).topk(self.positive_rois, 1).indices
        chosen = torch.zeros_like(positive).scatter(1, chosen, True) & positive
        priority = torch.where(chosen, keys + 2, keys.masked_fill(positive, -1))
        index = priority.topk(self.rois_per_image, 1).indices  # sorted: positives first
        return gather_rows(candidates, index), labels.gather(1, index), matched.gather(1, index)

    def box_loss(self, maps, rois, labels, matched, gt_boxes):
        """Cross-entropy over the RoIs, smooth-L1 on the positives' offsets for their class,
        over the RoIs' count; and the class scores (B * R, num_labels)."""
        rois, labels, matched = by_size(rois, labels, matched)
        with torch.no_grad():
            targets = encode(gather_rows(gt_boxes, matched), rois, BOX_WEIGHTS).flatten(0, 1)
        x = F.relu(self.fc7(F.relu(self.fc6(pool(maps, rois, BOX_POOL).flatten(1)))))
        scores, deltas = self.cls_score(x), self.bbox_pred(x).view(len(x), -1, 4)
        labels = labels.flatten()
        classification = F.cross_entropy(scores, labels)
        offsets = deltas.gather(1, labels[:, None, None].expand(-1, 1, 4)).squeeze(1)
        regression = F.smooth_l1_loss(offsets, targets, reduction="none", beta=1.0).sum(1)
        return classification, (regression * (labels > 0)).sum() / len(labels), scores

    def mask_loss(self, maps, rois, labels, matched, gt_boxes, gt_masks):
        """BCE of the positive RoIs' masks for their class against their objects' masks
        resampled into the RoIs, averaged over the positives' pixels."""
        rois, labels, matched = by_size(rois, labels, matched)
        with torch.no_grad():
            boxes = gather_rows(gt_boxes, matched)
            steps = (torch.arange(MASK_RESOLUTION, device=rois.device) + 0.5) / MASK_RESOLUTION
            # the RoI's pixel centres in its object's box, -1 to 1 across the object's mask
            grid = [2 * (rois[..., i, None] + steps * (rois[..., i + 2] - rois[..., i])[..., None]
                         - boxes[..., i, None]) / (boxes[..., i + 2] - boxes[..., i])[..., None]
                    - 1 for i in (0, 1)]
            grid = torch.stack(torch.broadcast_tensors(grid[0][..., None, :],
                                                       grid[1][..., None]), -1)
            targets = F.grid_sample(gather_rows(gt_masks, matched).flatten(0, 1)[:, None],
                                    grid.flatten(0, 1), align_corners=False) >= 0.5
        logits = self.mask_head(pool(maps, rois, MASK_POOL))
        labels = labels.flatten()
        index = labels[:, None, None, None].expand(-1, 1, MASK_RESOLUTION, MASK_RESOLUTION)
        loss = F.binary_cross_entropy_with_logits(logits.gather(1, index), targets.float(),
                                                  reduction="none").mean((1, 2, 3))
        positive = (labels > 0).float()
        return (loss * positive).sum() / positive.sum().clamp(min=1)

    def forward(self, pixel_values: torch.Tensor, gt_boxes: torch.Tensor,
                gt_labels: torch.Tensor, gt_masks: torch.Tensor):
        """`gt_boxes` (B, objects, 4: x1, y1, x2, y2 in pixels), `gt_labels` (B, objects: 1
        to num_labels - 1), `gt_masks` (B, objects, 28, 28: each in its box)."""
        image_size = pixel_values.shape[-2:]
        maps = self.features(pixel_values)
        logits, deltas, anchors, per_level = self.rpn(maps)
        objectness, rpn_offsets = self.rpn_loss(logits, deltas, anchors, gt_boxes, image_size)
        proposals = self.proposals(logits, deltas, anchors, per_level, image_size)
        rois, labels, matched = self.sample_rois(proposals, gt_boxes, gt_labels)
        classification, box_offsets, scores = self.box_loss(maps[:4], rois, labels, matched,
                                                            gt_boxes)
        masks = self.mask_rois_per_image
        mask = self.mask_loss(maps[:4], rois[:, :masks], labels[:, :masks],
                              matched[:, :masks], gt_boxes, gt_masks)
        losses = {"loss_objectness": objectness, "loss_rpn_box_reg": rpn_offsets,
                  "loss_classifier": classification, "loss_box_reg": box_offsets,
                  "loss_mask": mask}
        return SimpleNamespace(loss=sum(losses.values()), losses=losses,
                               logits=scores.view(len(pixel_values), -1, self.num_labels))

    @staticmethod
    def synthetic_batch(batch: int, config: dict, size: int | None = None,
                        generator: torch.Generator | None = None) -> dict:
        """The zoo's protocol for torch-built models: `batch` images of `size` (the short side,
        a multiple of 32; default 800) by the long side in the 1216:800 ratio, padded to a
        multiple of 32, each with OBJECTS_PER_IMAGE objects (see the module docstring)."""
        height = size or IMAGE_HEIGHT
        step = SIZE_DIVISIBILITY
        width = step * math.ceil(height * IMAGE_WIDTH / IMAGE_HEIGHT / step)
        shape = (batch, OBJECTS_PER_IMAGE)
        # a size class for each object, then a side log-uniform within it, at this scale
        kind = torch.multinomial(torch.tensor(OBJECT_SHARES), batch * OBJECTS_PER_IMAGE,
                                 replacement=True, generator=generator).view(shape)
        low, high = (torch.tensor(sides, dtype=torch.float)[kind].log()
                     for sides in zip(*OBJECT_SIDES))
        side = (low + (high - low) * torch.rand(shape, generator=generator)).exp()
        side = side * height / COCO_HEIGHT
        ratio = MAX_ASPECT ** (2 * torch.rand(shape, generator=generator) - 1)
        w = (side * ratio.sqrt()).clamp(1, width - 1)
        h = (side / ratio.sqrt()).clamp(1, height - 1)
        x1 = torch.rand(shape, generator=generator) * (width - 1 - w)
        y1 = torch.rand(shape, generator=generator) * (height - 1 - h)
        axis = (torch.arange(MASK_RESOLUTION) + 0.5) / MASK_RESOLUTION * 2 - 1
        ellipse = (axis[:, None] ** 2 + axis ** 2 <= 1).float()
        return {"pixel_values": torch.randn(batch, 3, height, width, generator=generator),
                "gt_boxes": torch.stack([x1, y1, x1 + w, y1 + h], -1),
                "gt_labels": torch.randint(1, config.get("num_labels", NUM_LABELS), shape,
                                           generator=generator),
                "gt_masks": ellipse.expand(*shape, -1, -1).contiguous()}
