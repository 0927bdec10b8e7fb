import pytest

torch = pytest.importorskip("torch")

from profiler import zoo, zoo_maskrcnn  # noqa: E402
from profiler.zoo_maskrcnn import MaskRCNN  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# Parameters, counted from DLE's modules (FrozenBatchNorm2d's scales and shifts are buffers).
# ResNet-50's convolutions: torchvision's resnet50, 25,557,032, less its fc (2,049,000) and its
# batch norms' 53,120 scales and shifts (2 x 26,560 channels): 23,454,912.
# FPN: 1x1 laterals from 256, 512, 1,024 and 2,048 channels to 256 with biases (984,064) and
# four 3x3 256 -> 256 outputs (4 x 590,080): 3,344,384.
# RPN: a 3x3 256 -> 256 (590,080), 3 objectness logits (771) and 12 offsets (3,084): 593,935.
# Box head: fc6 12,544 -> 1,024 (12,846,080), fc7 (1,049,600), 81 scores (83,025) and 324
# offsets (332,100): 14,310,805.
# Mask head: four 3x3 256 -> 256 (2,360,320), the 2x2 deconvolution (262,400), 81 logits
# (20,817): 2,643,537.
PARAMS = 23_454_912 + 3_344_384 + 593_935 + 14_310_805 + 2_643_537  # 44,347,573
# torchvision's maskrcnn_resnet50_fpn is the same network at 91 classes: 44,401,393 with 10
# more scores (10,250), 40 more offsets (41,000) and 10 more mask logits (2,570).
TORCHVISION_PARAMS = 44_401_393
# FREEZE_CONV_BODY_AT 2: the stem's 7x7 convolution (3 x 64 x 49 = 9,408) and res2's: a first
# block of 64x64, 64x64x3x3, 64x256 and a 64x256 shortcut (73,728), two of 256x64, 64x64x3x3
# and 64x256 (2 x 69,632): 212,992.
FROZEN = 9_408 + 212_992
TRAINABLE = PARAMS - FROZEN  # 44,125,173

# Published: Mask R-CNN R-50-FPN, 260 G multiply-adds ("FLOPs") at 1280x800, mmdetection's
# get_flops count that detection-backbone papers tabulate (e.g. LocalVMamba, Huang et al.
# 2024, its Mask R-CNN 1x table: ResNet-50, 44M, 260G). mmdetection counts the forward_dummy
# pass: the box head on 1,000 RoIs, the mask head on 100. Against it this network has the
# stride in res3-5's first 1x1 convolution (mmdetection's ResNet puts it in the 3x3): each
# stage's first 1x1 runs on a quarter of the positions, 3 x 2,097,152,000 x 3/4 fewer; mmcv
# also counts about 0.9 G of batch-norm, ReLU, pooling, upsampling and bias elements, which
# torch's counter leaves out; and DLE's 81 classes of offsets and masks against
# mmdetection's 80 add 1,000 x 1,024 x 4 + 100 x 784 x 256 (0.02 G).
MMDET_MACS = 260e9 - 3 * 2_097_152_000 * 3 / 4 - 0.9e9 + 1_000 * 1_024 * 4 + 100 * 784 * 256
# 0.5%: 260 G is rounded (0.2%), and the 0.9 G is an estimate.
MMDET_TOLERANCE = 0.005

# The card's forward pass at 800x1216: backbone, FPN and RPN 355.88 G, the box head's layers
# on 512 RoIs (2 x 512 x 14,309,376 = 14.65 G), the mask head on 128 (2 x 128 x 530.0 M =
# 135.70 G).
FORWARD_FLOPS = 506.23e9
# Stem and res2 (frozen: no backward) at 800x1216: the 7x7 on 400x608 positions, res2's
# blocks on 200x304.
FROZEN_FORWARD_FLOPS = 2 * (9_408 * 400 * 608 + 212_992 * 200 * 304)  # 30.48 G
# Backward gradients that nothing needs: of res2's output into res3's first 1x1 (256 -> 128)
# and shortcut (256 -> 512), on 100x152 positions, and into the FPN's lateral on it.
UNNEEDED_INPUT_GRADIENTS = 2 * (256 * (128 + 512) * 100 * 152 + 256 * 256 * 200 * 304)

SMALL = {"pre_nms_top_n": 300, "post_nms_top_n": 120, "rois_per_image": 64,
         "mask_rois_per_image": 8}  # a CPU step in a second


@pytest.fixture(scope="module")
def meta_model():
    with torch.device("meta"):
        return MaskRCNN()


def meta_batch(batch: int, **kwargs) -> dict:
    return {key: value.to("meta")
            for key, value in MaskRCNN.synthetic_batch(batch, {}, **kwargs).items()}


def test_parameters_are_dle_s_and_the_stem_and_res2_are_frozen(meta_model):
    assert sum(p.numel() for p in meta_model.parameters()) == PARAMS == 44_347_573
    assert PARAMS + 10_250 + 41_000 + 2_570 == TORCHVISION_PARAMS
    trainable = sum(p.numel() for p in meta_model.parameters() if p.requires_grad)
    assert trainable == TRAINABLE == 44_125_173
    frozen = [*meta_model.stem.parameters(), *meta_model.stages[0].parameters()]
    assert sum(p.numel() for p in frozen) == FROZEN and not any(p.requires_grad for p in frozen)
    norms = [m for m in meta_model.modules() if isinstance(m, zoo_maskrcnn.FrozenBatchNorm2d)]
    assert len(norms) == 53 and not any(list(n.parameters()) for n in norms)


def test_forward_flops_match_mmdetection_s_published_count():
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        model = MaskRCNN(rois_per_image=1_000, mask_rois_per_image=100)
    batch = dict(meta_batch(1), pixel_values=torch.randn(1, 3, 800, 1280, device="meta"))
    with FlopCounterMode(display=False) as counter:
        model(**batch)
    assert counter.get_total_flops() == pytest.approx(2 * MMDET_MACS, rel=MMDET_TOLERANCE)


def test_a_training_step_runs_and_traces_on_meta(meta_model):
    from profiler.cards import measure_module

    batch = meta_batch(1)
    figures = measure_module(meta_model, lambda: meta_model(**batch).loss)
    assert figures["params"] == PARAMS
    assert figures["gradient_bytes"] == 4 * TRAINABLE
    forward = figures["forward_flops_per_sample"]
    assert forward == pytest.approx(FORWARD_FLOPS, rel=1e-4)
    # backward: twice the trained layers' forward, less the gradients nothing needs
    backward = 2 * (forward - FROZEN_FORWARD_FLOPS) - UNNEEDED_INPUT_GRADIENTS
    assert figures["flops_per_sample"] == pytest.approx(forward + backward, rel=1e-4)


def test_synthetic_batch_is_a_padded_coco_batch_with_seven_objects_an_image():
    batch = MaskRCNN.synthetic_batch(3, {"num_labels": 81}, None,
                                     torch.Generator().manual_seed(0))
    assert {key: tuple(value.shape) for key, value in batch.items()} == {
        "pixel_values": (3, 3, 800, 1216), "gt_boxes": (3, 7, 4), "gt_labels": (3, 7),
        "gt_masks": (3, 7, 28, 28)}
    boxes = batch["gt_boxes"]
    assert (boxes[..., :2] >= 0).all() and (boxes[..., 2] < 1216).all()
    assert (boxes[..., 3] < 800).all() and (boxes[..., 2:] > boxes[..., :2]).all()
    assert 1 <= batch["gt_labels"].min() and batch["gt_labels"].max() <= 80
    assert set(batch["gt_masks"].unique().tolist()) == {0.0, 1.0}
    again = MaskRCNN.synthetic_batch(3, {}, None, torch.Generator().manual_seed(0))
    assert torch.equal(again["gt_boxes"], boxes)
    # another short side keeps the aspect, the long side padded to a multiple of 32
    assert MaskRCNN.synthetic_batch(1, {}, 128)["pixel_values"].shape == (1, 3, 128, 224)


def test_rois_are_sampled_positives_first_at_a_fixed_count():
    model = MaskRCNN(**SMALL)
    gt_boxes = torch.tensor([[[10.0, 10, 50, 60], [100, 20, 180, 90]]])
    gt_labels = torch.tensor([[5, 17]])
    # proposals far from both objects: the objects' own boxes are the only positives
    proposals = torch.tensor([300.0, 300, 340, 330]).expand(1, SMALL["post_nms_top_n"], 4)
    rois, labels, matched = model.sample_rois(proposals, gt_boxes, gt_labels)
    assert rois.shape == (1, SMALL["rois_per_image"], 4)
    assert sorted(labels[0, :2].tolist()) == [5, 17] and (labels[0, 2:] == 0).all()
    assert torch.equal(rois[0, :2][labels[0, :2].argsort()], gt_boxes[0])
    assert torch.equal(matched[0, :2][labels[0, :2].argsort()], torch.tensor([0, 1]))


def test_roi_align_takes_each_bin_at_its_centre_on_a_linear_map():
    # bilinear samples of a linear map, averaged, are its value at the samples' mean
    ys, xs = torch.meshgrid(torch.arange(20.0), torch.arange(30.0), indexing="ij")
    feature = (xs + 100 * ys)[None, None]
    pooled = zoo_maskrcnn.roi_align(feature, torch.tensor([[[4.0, 2, 18, 16]]]), 7)
    centres = 4 + (torch.arange(7) + 0.5) * 2, 2 + (torch.arange(7) + 0.5) * 2
    expected = centres[0] + 100 * centres[1][:, None]
    assert pooled.shape == (1, 1, 1, 7, 7)
    assert torch.allclose(pooled[0, 0, 0], expected, atol=1e-3)


def test_one_training_step_runs_on_cpu_and_leaves_the_frozen_layers_alone():
    torch.manual_seed(0)
    model = MaskRCNN(**SMALL)
    batch = MaskRCNN.synthetic_batch(2, {}, 128, torch.Generator().manual_seed(0))
    out = model(**batch)
    out.loss.backward()
    assert set(out.losses) == {"loss_objectness", "loss_rpn_box_reg", "loss_classifier",
                               "loss_box_reg", "loss_mask"}
    assert all(torch.isfinite(loss) for loss in out.losses.values())
    assert out.loss.ndim == 0 and out.logits.shape == (2, SMALL["rois_per_image"], 81)
    frozen = [*model.stem.parameters(), *model.stages[0].parameters()]
    assert all(p.grad is None for p in frozen)
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
    assert model.mask_head[0].weight.grad.abs().sum() > 0


def test_the_operator_split_has_convolution_and_matrix_product_work(meta_model):
    from profiler.operators import split_of

    split = split_of(meta_model, lambda batch: meta_model(**meta_batch(batch)).loss)
    assert split["conv_flops_per_sample"] > 0 and split["winograd_flops_per_sample"] > 0
    # the box head's layers, forward and backward (their input gradients included)
    assert split["matmul_flops_per_sample"] == pytest.approx(3 * 2 * 512 * 14_309_376, rel=1e-3)


def test_the_zoo_entry_builds_and_cards_the_recipe():
    from profiler.cards import compute_card

    entry = zoo.resolve("mask_rcnn")
    assert (entry.task, entry.image_size, entry.seq_len) == ("image", 800, None)
    assert (entry.samples_per_epoch, entry.batch_per_gpu) == (117_266, 4)
    assert round(45_000 * 32 / entry.samples_per_epoch) == entry.epochs == 12
    with pytest.raises(zoo.FixedInputError, match="800"):
        zoo.build_model("mask_rcnn", image_size=1024)
    card = compute_card("mask_rcnn")
    assert (card["params"], card["gradient_bytes"]) == (PARAMS, 4 * TRAINABLE)
    assert card["forward_flops_per_sample"] == pytest.approx(FORWARD_FLOPS, rel=1e-4)
